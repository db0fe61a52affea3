/*
 * egress-tls.c - the upstream side of HTTPS interception (egress-tls.h):
 * the proxy's own TLS client, which verifies the real server's certificate
 * against the host's trust store and checks its name, as a browser would.
 * The connection handling itself is in egress.c (the intercepting states).
 */
#include "common.h"
#include "base.h"
#include "egress-tls.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

/*
 * Certificate verification looks a signature's digest up by its NID in
 * OpenSSL's legacy name table (to weigh its security level); without the
 * entry every chain fails as "CA signature digest algorithm too weak". The
 * audit store initializes OpenSSL without that table (audit.c, for its
 * start-up time), and OpenSSL's initialization runs once per process, so
 * the digests that certificates are signed with are added here.
 */
void pdk_egress_tls_add_digests(void)
{
	const EVP_MD *md[] = {EVP_sha1(), EVP_sha224(), EVP_sha256(), EVP_sha384(), EVP_sha512()};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(md); i++)
		(void)EVP_add_digest(
			md[i]); /* fails only without memory: verification then fails */
}

struct ssl_ctx_st *pdk_egress_tls_client_ctx(const char *file, struct pdk_error **err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	int ok;

	pdk_egress_tls_add_digests();
	if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		SSL_CTX_free(ctx);
		ERR_clear_error();
		(void)pdk_error_setx(err, ENOMEM, "cannot create the TLS client context");
		return NULL;
	}
	/* SECURITY: the real server must prove who it is; no way to turn this off. */
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (file != NULL && *file != '\0')
		ok = SSL_CTX_load_verify_file(ctx, file);
	else
		ok = SSL_CTX_set_default_verify_paths(ctx);
	if (ok != 1) {
		SSL_CTX_free(ctx);
		ERR_clear_error();
		(void)pdk_error_setx(err, EINVAL, "cannot load the trust store%s%s%s",
				     file ? " '" : "", file ? file : "", file ? "'" : "");
		return NULL;
	}
	return ctx;
}

struct ssl_st *pdk_egress_tls_client_ssl(struct ssl_ctx_st *ctx, const char *host, bool is_ip)
{
	static const unsigned char h1[] = "\x08http/1.1";
	SSL *ssl = SSL_new(ctx);

	if (ssl == NULL)
		pdk_oom();
	/* SECURITY: the certificate must name the host that the allowlist checked. */
	if (is_ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) != 1)
			goto fail;
	} else {
		SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (SSL_set1_host(ssl, host) != 1 || SSL_set_tlsext_host_name(ssl, host) != 1)
			goto fail;
	}
	if (SSL_set_alpn_protos(ssl, h1, sizeof(h1) - 1) != 0)
		goto fail;
	return ssl;
fail:
	SSL_free(ssl);
	ERR_clear_error();
	return NULL;
}

char *pdk_egress_tls_failure(struct ssl_st *ssl, unsigned long ssl_err)
{
	long v = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
	char buf[256] = "the connection ended during the handshake";

	if (v != X509_V_OK)
		return pdk_xasprintf("certificate verify failed: %s",
				     X509_verify_cert_error_string(v));
	if (ssl_err != 0)
		ERR_error_string_n(ssl_err, buf, sizeof(buf));
	return pdk_xasprintf("TLS handshake failed: %s", buf);
}

void pdk_egress_tls_ctx_free(struct ssl_ctx_st *ctx)
{
	SSL_CTX_free(ctx);
}
