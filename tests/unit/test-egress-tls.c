/*
 * test-egress-tls.c - HTTPS credential injection's pure parts: the
 * per-sandbox CA and its leaves (what they say, what verifies against
 * what), the trust bundle, TLS handshakes in memory between the proxy's
 * two sides, the failure text, the environment, and the origin-form
 * request heads of an intercepted tunnel.
 */
#include "common.h"
#include "egress-internal.h"
#include "egress-tls.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the CA ---- */

static struct pdk_egress_ca *new_ca(void)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_egress_ca *ca = pdk_egress_ca_new("sandbox-1", &err);

	cr_assert_not_null(ca, "%s", err ? err->msg : "");
	return ca;
}

/* Seconds from now to an ASN1_TIME (negative: in the past). */
static long secs_from_now(const ASN1_TIME *t)
{
	int days = 0, secs = 0;

	cr_assert_eq(ASN1_TIME_diff(&days, &secs, NULL, t), 1);
	return (long)days * 86400 + secs;
}

/* Verify `leaf` against `ca` alone, for TLS server use by `host`. X509_V_OK or the error. */
static int verify_leaf(X509 *ca, X509 *leaf, const char *host)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	int rc;

	cr_assert(store && ctx && X509_STORE_add_cert(store, ca) == 1);
	cr_assert_eq(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
	X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
	if (host != NULL)
		cr_assert_eq(X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host, 0),
			     1);
	rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	return rc;
}

Test(egress_tls, ca_is_a_p256_ca_that_signs_leaves_only)
{
	struct pdk_egress_ca *ca = new_ca();
	X509 *x = pdk_egress_ca_cert(ca);
	EVP_PKEY *pub = X509_get0_pubkey(x);
	char curve[64] = "";
	char cn[256] = "";

	cr_assert_eq(X509_check_ca(x), 1, "the certificate is a CA");
	cr_assert_eq(X509_get_pathlen(x), 0, "pathlen 0: it cannot sign another CA");
	cr_assert_eq(X509_verify(x, pub), 1, "self-signed");
	cr_assert_eq(EVP_PKEY_get_base_id(pub), EVP_PKEY_EC);
	cr_assert_eq(EVP_PKEY_get_utf8_string_param(pub, "group", curve, sizeof(curve), NULL), 1);
	cr_assert_str_eq(curve, "prime256v1");
	cr_assert(X509_get_key_usage(x) & KU_KEY_CERT_SIGN);
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
	cr_assert_str_eq(cn, "paddock sandbox CA sandbox-1");
	cr_assert(secs_from_now(X509_get0_notBefore(x)) <= -3500, "backdated an hour");
	cr_assert(secs_from_now(X509_get0_notAfter(x)) <= PDK_EGRESS_CA_VALIDITY_S);
	pdk_egress_ca_free(ca);
}

Test(egress_tls, two_cas_have_different_keys)
{
	struct pdk_egress_ca *a = new_ca();
	struct pdk_egress_ca *b = new_ca();

	cr_assert_neq(EVP_PKEY_eq(X509_get0_pubkey(pdk_egress_ca_cert(a)),
				  X509_get0_pubkey(pdk_egress_ca_cert(b))),
		      1, "each sandbox has a key of its own");
	pdk_egress_ca_free(a);
	pdk_egress_ca_free(b);
}

Test(egress_tls, leaf_names_its_host_only_and_verifies_against_its_ca_only)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_egress_ca *ca = new_ca();
	struct pdk_egress_ca *other = new_ca();
	X509 *leaf = pdk_egress_ca_leaf(ca, "api.example.com", &err);

	cr_assert_not_null(leaf, "%s", err ? err->msg : "");
	cr_assert_eq(X509_check_host(leaf, "api.example.com", 0, 0, NULL), 1);
	cr_assert_eq(X509_check_host(leaf, "evil.example.com", 0, 0, NULL), 0);
	cr_assert_eq(X509_check_host(leaf, "example.com", 0, 0, NULL), 0);
	cr_assert_eq(X509_check_ca(leaf), 0, "a leaf is not a CA");
	cr_assert(secs_from_now(X509_get0_notAfter(leaf)) <= PDK_EGRESS_LEAF_VALIDITY_S,
		  "short validity");
	cr_assert(secs_from_now(X509_get0_notAfter(leaf)) > PDK_EGRESS_LEAF_VALIDITY_S - 3600);
	cr_assert_eq(verify_leaf(pdk_egress_ca_cert(ca), leaf, "api.example.com"), X509_V_OK);
	cr_assert_eq(verify_leaf(pdk_egress_ca_cert(ca), leaf, "evil.example.com"),
		     X509_V_ERR_HOSTNAME_MISMATCH);
	cr_assert_eq(verify_leaf(pdk_egress_ca_cert(other), leaf, NULL),
		     X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
		     "another sandbox's CA does not vouch for it");
	pdk_egress_ca_free(ca);
	pdk_egress_ca_free(other);
}

Test(egress_tls, leaf_for_an_ip_address)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_egress_ca *ca = new_ca();
	X509 *leaf = pdk_egress_ca_leaf(ca, "192.0.2.7", &err);

	cr_assert_not_null(leaf);
	cr_assert_eq(X509_check_ip_asc(leaf, "192.0.2.7", 0), 1);
	cr_assert_eq(X509_check_ip_asc(leaf, "192.0.2.8", 0), 0);
	cr_assert_eq(
		X509_check_host(leaf, "192.0.2.7", 0, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, NULL), 0,
		"an IP SAN, not a DNS one");
	leaf = pdk_egress_ca_leaf(ca, "2001:db8::1", &err);
	cr_assert_not_null(leaf);
	cr_assert_eq(X509_check_ip_asc(leaf, "2001:db8::1", 0), 1);
	pdk_egress_ca_free(ca);
}

Test(egress_tls, leaves_are_cached_per_host_and_bounded)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_egress_ca *ca = new_ca();
	X509 *a = pdk_egress_ca_leaf(ca, "a.test", &err);
	X509 *b = pdk_egress_ca_leaf(ca, "b.test", &err);

	cr_assert(a != NULL && b != NULL && a != b);
	cr_assert_eq(pdk_egress_ca_leaf(ca, "a.test", &err), a,
		     "the second use is the cached leaf");
	cr_assert_eq(pdk_egress_ca_cached(ca), 2);
	cr_assert_not_null(pdk_egress_ca_server_ctx(ca, "a.test", &err));
	cr_assert_eq(pdk_egress_ca_cached(ca), 2, "a context comes with its leaf");
	for (int i = 0; i < PDK_EGRESS_LEAF_CACHE + 10; i++) {
		char host[32];

		(void)snprintf(host, sizeof(host), "h%d.test", i);
		cr_assert_not_null(pdk_egress_ca_leaf(ca, host, &err));
	}
	cr_assert_eq(pdk_egress_ca_cached(ca), PDK_EGRESS_LEAF_CACHE, "the cache is bounded");
	pdk_egress_ca_free(ca);
}

/* ---- the trust bundle ---- */

static char *tmpdir(void)
{
	char *d = pdk_xstrdup("/tmp/pdk-egress-tls-XXXXXX");

	cr_assert_not_null(mkdtemp(d));
	return d;
}

static char *slurp(const char *path)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	char *s = NULL;

	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 1 << 24, &s, &err), 0, "%s",
		     err ? err->msg : "");
	return s;
}

Test(egress_tls, bundle_is_the_host_bundle_then_the_ca)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *d = tmpdir();
	_cleanup_free_ char *host = pdk_xasprintf("%s/host.crt", d);
	_cleanup_free_ char *out = pdk_xasprintf("%s/bundle.crt", d);
	_cleanup_free_ char *pem = NULL;
	_cleanup_free_ char *got = NULL;
	struct pdk_egress_ca *ca = new_ca();
	struct stat st;

	cr_assert_eq(pdk_write_file_at(AT_FDCWD, host, "HOST BUNDLE (no newline)", true, &err), 0);
	cr_assert_eq(pdk_egress_ca_write_bundle(ca, out, host, &err), 0, "%s", err ? err->msg : "");
	pem = pdk_egress_ca_pem(ca);
	got = slurp(out);
	cr_assert_eq(strncmp(got, "HOST BUNDLE (no newline)\n", 25), 0);
	cr_assert_str_eq(got + 25, pem);
	cr_assert_eq(stat(out, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0644);
	cr_assert_not_null(strstr(pem, "-----BEGIN CERTIFICATE-----"));
	cr_assert_null(strstr(got, "PRIVATE KEY"), "no key in the bundle");
	/* An existing file is not overwritten (O_EXCL): no symlink games in the scratch dir. */
	cr_assert_lt(pdk_egress_ca_write_bundle(ca, out, host, &err), 0);
	cr_assert_eq(err->status, EEXIST);
	(void)unlink(out);
	(void)unlink(host);
	pdk_error_free(&err);
	/* No host bundle: the CA alone. */
	cr_assert_eq(pdk_egress_ca_write_bundle(ca, out, host, &err), 0);
	free(got);
	got = slurp(out);
	cr_assert_str_eq(got, pem);
	(void)unlink(out);
	(void)rmdir(d);
	pdk_egress_ca_free(ca);
}

/* ---- handshakes in memory: the sandbox's client against the proxy's server side ---- */

struct pair {
	SSL *cli, *srv;
};

/* Drive both ends until both finish or one fails. 1 when both finished. */
static int handshake(struct pair *p)
{
	for (int i = 0; i < 20; i++) {
		int c = SSL_do_handshake(p->cli);
		int s = SSL_do_handshake(p->srv);
		int ce = SSL_get_error(p->cli, c), se = SSL_get_error(p->srv, s);

		if (c == 1 && s == 1)
			return 1;
		if ((c != 1 && ce != SSL_ERROR_WANT_READ && ce != SSL_ERROR_WANT_WRITE) ||
		    (s != 1 && se != SSL_ERROR_WANT_READ && se != SSL_ERROR_WANT_WRITE))
			return 0;
	}
	return 0;
}

static void pair_init(struct pair *p, SSL *cli, SSL_CTX *sctx)
{
	BIO *a = NULL, *b = NULL;

	cr_assert_not_null(cli);
	p->cli = cli;
	p->srv = SSL_new(sctx);
	cr_assert_eq(BIO_new_bio_pair(&a, 0, &b, 0), 1);
	SSL_set_bio(p->cli, a, a);
	SSL_set_bio(p->srv, b, b);
	SSL_set_connect_state(p->cli);
	SSL_set_accept_state(p->srv);
}

static void pair_release(struct pair *p)
{
	SSL_free(p->cli);
	SSL_free(p->srv);
}

/* The proxy's client context, trusting only `ca` (what PADDOCK_EGRESS_CA_FILE names). */
static SSL_CTX *client_ctx_trusting(struct pdk_egress_ca *ca, char **dir)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *file = NULL;
	_cleanup_free_ char *pem = pdk_egress_ca_pem(ca);
	SSL_CTX *ctx;

	*dir = tmpdir();
	file = pdk_xasprintf("%s/ca.pem", *dir);
	cr_assert_eq(pdk_write_file_at(AT_FDCWD, file, pem, true, &err), 0);
	ctx = pdk_egress_tls_client_ctx(file, &err);
	cr_assert_not_null(ctx, "%s", err ? err->msg : "");
	(void)unlink(file);
	(void)rmdir(*dir);
	return ctx;
}

Test(egress_tls, client_verifies_the_leaf_and_alpn_is_http1)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *dir = NULL;
	struct pdk_egress_ca *ca = new_ca();
	SSL_CTX *cctx = client_ctx_trusting(ca, &dir);
	SSL_CTX *sctx = pdk_egress_ca_server_ctx(ca, "api.test", &err);
	static const unsigned char both[] = "\x02h2\x08http/1.1";
	const unsigned char *alpn = NULL;
	unsigned int alpn_len = 0;
	struct pair p;

	cr_assert_not_null(sctx);
	pair_init(&p, pdk_egress_tls_client_ssl(cctx, "api.test", false), sctx);
	cr_assert_eq(SSL_set_alpn_protos(p.cli, both, sizeof(both) - 1), 0);
	cr_assert_eq(handshake(&p), 1, "handshake: %s",
		     X509_verify_cert_error_string(SSL_get_verify_result(p.cli)));
	cr_assert_eq(SSL_get_verify_result(p.cli), X509_V_OK);
	SSL_get0_alpn_selected(p.cli, &alpn, &alpn_len);
	cr_assert_eq(alpn_len, 8, "h2 is never chosen: the proxy parses HTTP/1.1");
	cr_assert_eq(memcmp(alpn, "http/1.1", 8), 0);
	cr_assert_geq(SSL_version(p.cli), TLS1_2_VERSION);
	pair_release(&p);
	SSL_CTX_free(cctx);
	pdk_egress_ca_free(ca);
}

/*
 * The proxy's client, trusting `trusted`, asks for api.test and meets a
 * server whose leaf for `leaf_name` `issuer` signed: the handshake fails and
 * the failure (from the queued error, or the verify result alone) reads `want`.
 */
static void expect_refused(struct pdk_egress_ca *trusted, struct pdk_egress_ca *issuer,
			   const char *leaf_name, bool queued_error, const char *want)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ char *why = NULL;
	SSL_CTX *cctx = client_ctx_trusting(trusted, &dir);
	SSL_CTX *sctx = pdk_egress_ca_server_ctx(issuer, leaf_name, &err);
	struct pair p;

	pair_init(&p, pdk_egress_tls_client_ssl(cctx, "api.test", false), sctx);
	cr_assert_eq(handshake(&p), 0, "a certificate that does not verify is refused");
	why = pdk_egress_tls_failure(p.cli, queued_error ? ERR_peek_error() : 0);
	cr_assert_str_eq(why, want);
	ERR_clear_error();
	pair_release(&p);
	SSL_CTX_free(cctx);
}

Test(egress_tls, client_refuses_a_wrong_name_and_says_why)
{
	struct pdk_egress_ca *ca = new_ca();

	expect_refused(ca, ca, "other.test", true, "certificate verify failed: hostname mismatch");
	pdk_egress_ca_free(ca);
}

Test(egress_tls, client_refuses_an_untrusted_issuer)
{
	struct pdk_egress_ca *trusted = new_ca();
	struct pdk_egress_ca *rogue = new_ca();

	expect_refused(trusted, rogue, "api.test", false,
		       "certificate verify failed: unable to get local issuer certificate");
	pdk_egress_ca_free(trusted);
	pdk_egress_ca_free(rogue);
}

Test(egress_tls, client_checks_ip_addresses)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *dir = NULL;
	struct pdk_egress_ca *ca = new_ca();
	SSL_CTX *cctx = client_ctx_trusting(ca, &dir);
	struct pair ok, bad;

	pair_init(&ok, pdk_egress_tls_client_ssl(cctx, "192.0.2.1", true),
		  pdk_egress_ca_server_ctx(ca, "192.0.2.1", &err));
	cr_assert_eq(handshake(&ok), 1);
	pair_init(&bad, pdk_egress_tls_client_ssl(cctx, "192.0.2.2", true),
		  pdk_egress_ca_server_ctx(ca, "192.0.2.1", &err));
	cr_assert_eq(handshake(&bad), 0);
	cr_assert_eq(SSL_get_verify_result(bad.cli), X509_V_ERR_IP_ADDRESS_MISMATCH);
	ERR_clear_error();
	pair_release(&ok);
	pair_release(&bad);
	SSL_CTX_free(cctx);
	pdk_egress_ca_free(ca);
}

Test(egress_tls, missing_trust_store_fails_closed)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	cr_assert_null(pdk_egress_tls_client_ctx("/nonexistent/ca.pem", &err));
	cr_assert_not_null(strstr(err->msg, "cannot load the trust store '/nonexistent/ca.pem'"));
}

/* ---- the environment ---- */

Test(egress_tls, env_points_clients_at_the_bundle)
{
	char *creds[] = {"api.test", "Authorization: Bearer ${secret:tok}", NULL};
	char *none[] = {NULL};
	_cleanup_strv_ char **env = NULL;

	pdk_strv_push(&env, "SSL_CERT_FILE=/mine.pem");
	pdk_strv_push(&env, "PATH=/bin");
	pdk_egress_tls_env_set(&env, none);
	cr_assert_eq(pdk_strv_len(env), 2, "no credential, no change");
	pdk_egress_tls_env_set(&env, creds);
	cr_assert_eq(pdk_strv_len(env), 5);
	cr_assert_str_eq(env[0], "SSL_CERT_FILE=" PDK_EGRESS_TLS_BUNDLE);
	cr_assert_str_eq(env[1], "PATH=/bin");
	cr_assert_str_eq(env[2], "NODE_EXTRA_CA_CERTS=" PDK_EGRESS_TLS_BUNDLE);
	cr_assert_str_eq(env[3], "REQUESTS_CA_BUNDLE=" PDK_EGRESS_TLS_BUNDLE);
	cr_assert_str_eq(env[4], "CURL_CA_BUNDLE=" PDK_EGRESS_TLS_BUNDLE);
	cr_assert(pdk_egress_tls_wanted(creds));
	cr_assert(!pdk_egress_tls_wanted(none));
	cr_assert(!pdk_egress_tls_wanted(NULL));
}

/* ---- request heads inside an intercepted tunnel ---- */

Test(egress_tls, origin_form_head_takes_the_tunnels_host)
{
	static const char req[] = "POST /v1/x?q=1#frag HTTP/1.1\r\nHost: evil.test\r\n"
				  "Authorization: PH\r\nContent-Length: 2\r\n\r\nhi";
	static const char *const drop[] = {"authorization"};
	static const char *const extra[] = {"Authorization: Bearer secret"};
	const struct pdk__egress_rewrite rw = {drop, 1, NULL, NULL, 0, extra, 1};
	struct pdk__egress_head h = {0};
	_cleanup_free_ char *up = NULL;
	size_t len = 0;
	int n = pdk__egress_head_parse_origin(&h, req, sizeof(req) - 1, "api.test", 443);

	cr_assert_eq(n, (int)sizeof(req) - 3, "the head ends before the body");
	cr_assert_str_eq(h.host, "api.test", "the tunnel's host, not the Host field");
	cr_assert_eq(h.port, 443);
	cr_assert(!h.connect && !h.msg_done);
	up = pdk__egress_head_upstream(&h, req, &rw, &len);
	cr_assert_not_null(up);
	cr_assert_str_eq(up, "POST /v1/x?q=1 HTTP/1.1\r\nHost: api.test\r\nContent-Length: 2\r\n"
			     "Authorization: Bearer secret\r\nConnection: close\r\n\r\n");
	pdk__egress_head_release(&h);
	n = pdk__egress_head_parse_origin(&h, "GET / HTTP/1.1\r\n\r\n", 18, "10.0.0.1", 8443);
	cr_assert_eq(n, 18);
	cr_assert(h.host_is_ip);
	free(up);
	up = pdk__egress_head_upstream(&h, "GET / HTTP/1.1\r\n\r\n", NULL, &len);
	cr_assert_not_null(strstr(up, "Host: 10.0.0.1:8443\r\n"), "%s", up);
	pdk__egress_head_release(&h);
}

Test(egress_tls, origin_form_refusals)
{
	static const struct {
		const char *req;
		int status;
	} bad[] = {
		{"GET http://other.test/ HTTP/1.1\r\n\r\n", 400},
		{"GET other.test HTTP/1.1\r\n\r\n", 400},
		{"CONNECT other.test:443 HTTP/1.1\r\n\r\n", 405},
		{"BREW / HTTP/1.1\r\n\r\n", 405},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(bad); i++) {
		struct pdk__egress_head h = {0};
		int n = pdk__egress_head_parse_origin(&h, bad[i].req, strlen(bad[i].req),
						      "api.test", 443);

		cr_assert_eq(n, -1, "'%s' accepted", bad[i].req);
		cr_assert_eq(h.status, bad[i].status, "'%s': %d", bad[i].req, h.status);
		pdk__egress_head_release(&h);
	}
}
