/*
 * egress-ca.c - the per-sandbox ephemeral CA of HTTPS credential injection
 * (egress-tls.h). OpenSSL 3 does the cryptography; this file only chooses
 * what the certificates say.
 *
 * SECURITY: the CA's private key exists only in this process's memory. It
 * is generated here, never serialized, and freed (OpenSSL clears key
 * material on free) with the CA. The sandbox gets the certificate only.
 * The leaves share one key per CA: a leaf's key protects nothing the CA's
 * does not, and one key saves a key generation per host.
 */
#include "common.h"
#include "base.h"
#include "egress-tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOST_BUNDLE_MAX (16u << 20) /* bytes of the host's CA bundle that are copied */
#define BACKDATE_S      3600        /* certificates start an hour ago (clock skew) */

struct leaf {
	char *host;
	X509 *cert;
	SSL_CTX *ctx;
	time_t minted;
};

struct pdk_egress_ca {
	EVP_PKEY *key; /* SECURITY: memory only */
	X509 *cert;
	EVP_PKEY *leaf_key; /* shared by the leaves */
	struct leaf leaves[PDK_EGRESS_LEAF_CACHE];
	size_t n_leaves;
};

/* The first OpenSSL error as an error with `what`. */
static int ossl_fail(struct pdk_error **err, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "unknown error";

	if (e != 0)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return pdk_error_setx(err, EPROTO, "%s: %s", what, buf);
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int rc;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (ext == NULL)
		return -1;
	rc = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return rc == 1 ? 0 : -1;
}

static int set_serial(X509 *x)
{
	BIGNUM *bn = BN_new();
	int rc = -1;

	/* 127 random bits: positive, unique enough never to collide within a CA. */
	if (bn != NULL && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL)
		rc = 0;
	BN_free(bn);
	return rc;
}

/* A certificate with the common fields set: version 3, serial, validity, subject, key. */
static X509 *cert_new(const char *cn, EVP_PKEY *key, long validity)
{
	X509 *x = X509_new();
	X509_NAME *name;

	if (x == NULL || X509_set_version(x, 2) != 1 || set_serial(x) < 0 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -BACKDATE_S) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(x), validity) == NULL ||
	    X509_set_pubkey(x, key) != 1)
		goto fail;
	name = X509_get_subject_name(x);
	if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"paddock",
				       -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
				       0) != 1)
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

static X509 *make_ca_cert(EVP_PKEY *key, const char *label)
{
	_cleanup_free_ char *cn = pdk_xasprintf("paddock sandbox CA %.36s", label);
	X509 *x = cert_new(cn, key, PDK_EGRESS_CA_VALIDITY_S);

	if (x == NULL)
		return NULL;
	/* SECURITY: pathlen 0, so the CA can sign leaves only, never another CA. */
	if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1 ||
	    add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    add_ext(x, x, NID_subject_key_identifier, "hash") < 0 ||
	    X509_sign(x, key, EVP_sha256()) <= 0) {
		X509_free(x);
		return NULL;
	}
	return x;
}

struct pdk_egress_ca *pdk_egress_ca_new(const char *label, struct pdk_error **err)
{
	struct pdk_egress_ca *ca = pdk_xcalloc(1, sizeof(*ca));

	/*
	 * As the audit store does (audit.c): the system's openssl.cnf is not read
	 * (start-up time; the TLS settings that matter are set in code), and no
	 * legacy tables are loaded. OpenSSL's initialization runs once per
	 * process, so whichever module comes first decides; these are the same.
	 */
	(void)OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
					  OPENSSL_INIT_NO_ADD_ALL_DIGESTS |
					  OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS,
				  NULL);
	pdk_egress_tls_add_digests();
	ca->key = EVP_EC_gen("P-256");
	ca->leaf_key = ca->key != NULL ? EVP_EC_gen("P-256") : NULL;
	if (ca->leaf_key != NULL)
		ca->cert = make_ca_cert(ca->key, label ? label : "");
	if (ca->cert == NULL) {
		(void)ossl_fail(err, "cannot create the sandbox's CA");
		pdk_egress_ca_free(ca);
		return NULL;
	}
	return ca;
}

static void leaf_release(struct leaf *l)
{
	free(l->host);
	X509_free(l->cert);
	SSL_CTX_free(l->ctx);
	memset(l, 0, sizeof(*l));
}

void pdk_egress_ca_free(struct pdk_egress_ca *ca)
{
	if (ca == NULL)
		return;
	for (size_t i = 0; i < ca->n_leaves; i++)
		leaf_release(&ca->leaves[i]);
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leaf_key);
	X509_free(ca->cert);
	free(ca);
}

struct x509_st *pdk_egress_ca_cert(const struct pdk_egress_ca *ca)
{
	return ca->cert;
}

size_t pdk_egress_ca_cached(const struct pdk_egress_ca *ca)
{
	return ca->n_leaves;
}

char *pdk_egress_ca_pem(const struct pdk_egress_ca *ca)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data = NULL;
	char *out;
	long n;

	if (b == NULL || PEM_write_bio_X509(b, ca->cert) != 1)
		pdk_oom(); /* a memory BIO fails only when memory does */
	n = BIO_get_mem_data(b, &data);
	out = pdk_xmalloc((size_t)n + 1);
	memcpy(out, data, (size_t)n);
	out[n] = '\0';
	BIO_free(b);
	return out;
}

int pdk_egress_ca_write_bundle(const struct pdk_egress_ca *ca, const char *path,
			       const char *host_bundle, struct pdk_error **err)
{
	const char *src = host_bundle ? host_bundle : PDK_EGRESS_TLS_BUNDLE;
	_cleanup_free_ char *pem = pdk_egress_ca_pem(ca);
	_cleanup_free_ char *host = NULL;
	_cleanup_error_ struct pdk_error *rerr = NULL;
	_cleanup_close_ int fd = -1;
	size_t len;
	int rc;

	/* A host without a bundle still gets the sandbox's CA alone. */
	if (pdk_read_file_at(AT_FDCWD, src, HOST_BUNDLE_MAX, &host, &rerr) < 0 &&
	    rerr->status != ENOENT)
		return pdk_error_setx(err, rerr->status, "%s", rerr->msg);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot create '%s'", path);
	len = host ? strlen(host) : 0;
	rc = pdk_write_all(fd, host ? host : "", len);
	if (rc == 0 && len > 0 && host[len - 1] != '\n')
		rc = pdk_write_all(fd, "\n", 1);
	if (rc == 0)
		rc = pdk_write_all(fd, pem, strlen(pem));
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot write '%s'", path);
	return 0;
}

static X509 *mint_leaf(struct pdk_egress_ca *ca, const char *host)
{
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	/* The host is a normalized name or an address: no ',' can reach the SAN's syntax. */
	_cleanup_free_ char *san = pdk_xasprintf("%s:%s", is_ip ? "IP" : "DNS", host);
	X509 *x = cert_new(host, ca->leaf_key, PDK_EGRESS_LEAF_VALIDITY_S);

	if (x == NULL)
		return NULL;
	if (X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1 ||
	    add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
	    add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
	    add_ext(x, ca->cert, NID_subject_alt_name, san) < 0 ||
	    add_ext(x, ca->cert, NID_subject_key_identifier, "hash") < 0 ||
	    add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") < 0 ||
	    X509_sign(x, ca->key, EVP_sha256()) <= 0) {
		X509_free(x);
		return NULL;
	}
	return x;
}

/* ALPN: the proxy parses HTTP/1.1 only, so that is all it agrees to speak. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h1[] = "\x08http/1.1";
	unsigned char *sel = NULL;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&sel, outlen, h1, sizeof(h1) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK; /* no ALPN: the client speaks HTTP/1.1 */
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *server_ctx(struct pdk_egress_ca *ca, X509 *leaf)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_use_certificate(ctx, leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	/* No session resumption: every sandbox connection is a full handshake, and no state. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	return ctx;
}

static struct leaf *find_leaf(struct pdk_egress_ca *ca, const char *host)
{
	time_t now = time(NULL);

	for (size_t i = 0; i < ca->n_leaves; i++) {
		struct leaf *l = &ca->leaves[i];

		if (strcmp(l->host, host) != 0)
			continue;
		if (now - l->minted < PDK_EGRESS_LEAF_VALIDITY_S / 2)
			return l;
		/* Half its life is gone: mint it again. */
		leaf_release(l);
		ca->leaves[i] = ca->leaves[--ca->n_leaves];
		return NULL;
	}
	return NULL;
}

static struct leaf *get_leaf(struct pdk_egress_ca *ca, const char *host, struct pdk_error **err)
{
	struct leaf *l = find_leaf(ca, host);
	X509 *x;
	SSL_CTX *ctx;

	if (l != NULL)
		return l;
	x = mint_leaf(ca, host);
	ctx = x != NULL ? server_ctx(ca, x) : NULL;
	if (ctx == NULL) {
		X509_free(x);
		(void)ossl_fail(err, "cannot mint a certificate");
		return NULL;
	}
	if (ca->n_leaves == PDK_EGRESS_LEAF_CACHE) {
		/* The oldest goes; connections that use its context hold their own reference. */
		leaf_release(&ca->leaves[0]);
		memmove(&ca->leaves[0], &ca->leaves[1], (ca->n_leaves - 1) * sizeof(ca->leaves[0]));
		ca->n_leaves--;
	}
	l = &ca->leaves[ca->n_leaves++];
	l->host = pdk_xstrdup(host);
	l->cert = x;
	l->ctx = ctx;
	l->minted = time(NULL);
	return l;
}

struct x509_st *pdk_egress_ca_leaf(struct pdk_egress_ca *ca, const char *host,
				   struct pdk_error **err)
{
	struct leaf *l = get_leaf(ca, host, err);

	return l != NULL ? l->cert : NULL;
}

struct ssl_ctx_st *pdk_egress_ca_server_ctx(struct pdk_egress_ca *ca, const char *host,
					    struct pdk_error **err)
{
	struct leaf *l = get_leaf(ca, host, err);

	return l != NULL ? l->ctx : NULL;
}
