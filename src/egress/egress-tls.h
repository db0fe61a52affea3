/*
 * egress-tls.h - HTTPS credential injection: the per-sandbox ephemeral CA
 * (egress-ca.c) and the TLS pieces of the intercepting proxy
 * (egress-tls.c). docs/egress.md is the user's manual, docs/internals/
 * egress.md ("The TLS path") the design.
 *
 * A sandbox whose policy has a network.credentials rule gets a CA of its
 * own when it is created: an EC P-256 key that lives only in the
 * supervisor's memory (never on disk, never in the sandbox), and a
 * self-signed certificate that is added to the sandbox's trust paths. A
 * CONNECT to a host with a credential rule is then terminated by the proxy
 * with a leaf certificate this CA mints for the host; the proxy opens its
 * own TLS connection upstream, verified against the host's trust store.
 */
#ifndef PDK_EGRESS_TLS_H
#define PDK_EGRESS_TLS_H

#include "common.h"
#include "base.h"

/* OpenSSL's types, without its headers (SSL_CTX, SSL, X509). */
struct ssl_ctx_st;
struct ssl_st;
struct x509_st;

/* Where the sandbox finds the bundle (host bundle + the sandbox's CA), read-only. */
#define PDK_EGRESS_TLS_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* Leaf certificates: valid this long, minted again when half of it has passed. */
#define PDK_EGRESS_LEAF_VALIDITY_S (24 * 3600)
/* The CA: valid this long (a sandbox that lives longer needs a new one). */
#define PDK_EGRESS_CA_VALIDITY_S (90 * 24 * 3600)
/* Hosts whose leaf is kept; the oldest goes first beyond this. */
#define PDK_EGRESS_LEAF_CACHE 64

struct pdk_egress_ca;

/*
 * A new CA: key pair and self-signed certificate (CN names `label`, e.g.
 * the sandbox id). NULL + *err when OpenSSL fails.
 */
struct pdk_egress_ca *pdk_egress_ca_new(const char *label, struct pdk_error **err);

/* Wipe and free. NULL-safe. */
void pdk_egress_ca_free(struct pdk_egress_ca *ca);

/* The CA certificate in PEM. New string (caller frees). */
char *pdk_egress_ca_pem(const struct pdk_egress_ca *ca);

/* The CA certificate (borrowed): for tests. */
struct x509_st *pdk_egress_ca_cert(const struct pdk_egress_ca *ca);

/*
 * Write the sandbox's trust bundle to `path` (created, mode 0644, must not
 * exist): the host's bundle (`host_bundle`; NULL = the system's, missing
 * is fine) followed by the CA certificate. 0 or negative + *err.
 */
PDK_MUST_CHECK int pdk_egress_ca_write_bundle(const struct pdk_egress_ca *ca, const char *path,
					      const char *host_bundle, struct pdk_error **err);

/*
 * The leaf certificate for `host` (a normalized name, or an IP address's
 * text), from the cache or minted now: SAN = the host, validity
 * PDK_EGRESS_LEAF_VALIDITY_S from an hour ago. Borrowed (valid until the
 * next call or the CA is freed). NULL + *err when OpenSSL fails.
 */
struct x509_st *pdk_egress_ca_leaf(struct pdk_egress_ca *ca, const char *host,
				   struct pdk_error **err);

/*
 * A server context presenting the leaf for `host`: TLS 1.2 or newer, ALPN
 * "http/1.1" only. Borrowed from the cache like the leaf.
 */
struct ssl_ctx_st *pdk_egress_ca_server_ctx(struct pdk_egress_ca *ca, const char *host,
					    struct pdk_error **err);

/* Leaves cached now: for tests. */
size_t pdk_egress_ca_cached(const struct pdk_egress_ca *ca);

/*
 * The upstream side's context: peer verification against the PEM file
 * `ca_file` when it is not NULL (replacing the system's store; the front
 * end takes it from PADDOCK_EGRESS_CA_FILE), else the system's default
 * trust store; TLS 1.2 or newer. New; NULL + *err when the store cannot be
 * loaded (the proxy then does not start: fail closed).
 */
struct ssl_ctx_st *pdk_egress_tls_client_ctx(const char *ca_file, struct pdk_error **err);

/*
 * A client connection for `host`: SNI (names only), hostname or IP check
 * of the certificate, ALPN "http/1.1". New.
 */
struct ssl_st *pdk_egress_tls_client_ssl(struct ssl_ctx_st *ctx, const char *host, bool is_ip);

/*
 * Why a handshake with the upstream server failed: the certificate
 * verification error when there is one ("certificate verify failed:
 * unable to get local issuer certificate"), else the TLS error. New string.
 */
char *pdk_egress_tls_failure(struct ssl_st *ssl, unsigned long ssl_err);

void pdk_egress_tls_ctx_free(struct ssl_ctx_st *ctx);

/*
 * Add the digests that certificates are signed with to OpenSSL's legacy
 * name table, which certificate checks (verification, and the security
 * level of a certificate given to an SSL_CTX) consult. Idempotent.
 */
void pdk_egress_tls_add_digests(void);

/*
 * Does network.credentials (pairs host, header template; NULL-terminated)
 * name any credential? Then allowlist mode intercepts HTTPS, and the
 * sandbox gets a CA. This and pdk_egress_tls_env_set() are in egress-env.c,
 * without OpenSSL: the front binary needs them (docs/internals/binaries.md).
 */
bool pdk_egress_tls_wanted(char *const *credentials);

/*
 * When pdk_egress_tls_wanted(credentials): point SSL_CERT_FILE,
 * NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE at
 * PDK_EGRESS_TLS_BUNDLE in *env, replacing values already there (call it
 * after -e and the profile's env).
 */
void pdk_egress_tls_env_set(char ***env, char *const *credentials);

#endif
