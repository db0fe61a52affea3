/*
 * audit-internal.h - shared by audit.c (store), audit-key.c (signing key),
 * audit-verify.c and audit-sink.c. Not part of the audit contract.
 */
#ifndef PDK_AUDIT_INTERNAL_H
#define PDK_AUDIT_INTERNAL_H

#include "common.h"
#include "audit.h"

#include <openssl/evp.h>
#include <sqlite3.h>

#define PDK_AUDIT_SIG_LEN 64 /* Ed25519 */

struct pdk_audit {
	struct pdk_db db; /* the connection, its path, the kept statements */
	char *state_dir;
	uint64_t checkpoint_every;
	EVP_MD *sha256;
	EVP_MD_CTX *md;
	EVP_PKEY *key; /* the private key, loaded at first use */
	char key_id[PDK_AUDIT_HASH_HEX];
	struct pdk_buf buf; /* serialisation buffer, reused */
	json_t *canon;      /* the record object, reused: its values are replaced per event */
	json_t *canon_seq;  /* its "seq" (owned by canon) */
	json_t *canon_prev; /* its "prev_hash" (owned by canon) */
};

/* SHA-256 of n bytes. */
PDK_MUST_CHECK int pdk__audit_sha256(struct pdk_audit *a, const void *p, size_t n,
				     unsigned char out[32], struct pdk_error **err);

/* Lowercase hex of n bytes into out (2n + 1 bytes). */
void pdk__audit_hex(const unsigned char *p, size_t n, char *out);

/*
 * The bytes a checkpoint signs: {"hash":HEX,"key_id":HEX,"seq":N} compact,
 * keys sorted. Caller frees.
 */
char *pdk__audit_checkpoint_msg(uint64_t seq, const char *hash_hex, const char *key_id);

/* Load the private key from the state directory, creating the pair at first use. */
PDK_MUST_CHECK int pdk__audit_load_key(struct pdk_audit *a, struct pdk_error **err);

/* Load the public key file; key_id gets its id. *out is the caller's. */
PDK_MUST_CHECK int pdk__audit_load_pubkey(const char *state_dir, EVP_PKEY **out,
					  char key_id[PDK_AUDIT_HASH_HEX], struct pdk_error **err);

/* Ed25519 signature of msg with the store's key (loaded). */
PDK_MUST_CHECK int pdk__audit_sign(struct pdk_audit *a, const char *msg, size_t n,
				   unsigned char sig[PDK_AUDIT_SIG_LEN], struct pdk_error **err);

/* True when sig is pk's signature of msg. */
bool pdk__audit_sig_ok(EVP_PKEY *pk, const char *msg, size_t n, const unsigned char *sig,
		       size_t sig_len);

#endif
