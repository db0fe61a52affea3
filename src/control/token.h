/*
 * token.h - the daemon's credentials (docs/daemon.md "Tokens").
 *
 * Sandbox tokens are self-contained and stateless:
 *   "pdk_sb_" + base64url(payload) + "." + base64url(HMAC-SHA256(key, base64url(payload)))
 * where payload is the compact, key-sorted JSON {"exp":UNIX_S,"ops":[..],"sb":"<id>"} and key
 * the 32 random bytes of STATE/daemon.key (0600). The MAC covers the encoded payload
 * exactly as sent, so nothing is parsed before it has been authenticated.
 *
 * Admin tokens are "pdk_adm_" + base64url(32 random bytes); the daemon stores only
 * their SHA-256 (hex), so a leaked state store does not leak a usable token.
 */
#ifndef PDK_TOKEN_H
#define PDK_TOKEN_H

#include "common.h"
#include "base.h"

#define PDK_TOKEN_KEY_FILE   "daemon.key"
#define PDK_TOKEN_KEY_LEN    32
#define PDK_TOKEN_SB_PREFIX  "pdk_sb_"
#define PDK_TOKEN_ADM_PREFIX "pdk_adm_"
/* Longest token accepted at all (anything longer is rejected before any work). */
#define PDK_TOKEN_MAX_LEN 2048
#define PDK_TOKEN_ID_MAX  64
/* The longest a sandbox token lives (seconds): a create's token by default, any token at most. */
#define PDK_TOKEN_TTL_MAX (24 * 3600)

/* What a sandbox token allows (bits). */
enum pdk_token_ops {
	PDK_TOKEN_OP_READ = 1 << 0,    /* GET the sandbox, stat, ls, diff, its events */
	PDK_TOKEN_OP_EXEC = 1 << 1,    /* exec, exec stdin and signal */
	PDK_TOKEN_OP_FILES = 1 << 2,   /* files and archive, read and write */
	PDK_TOKEN_OP_CONTROL = 1 << 3, /* pause, resume, snapshot, rollback, commit, destroy */
};
#define PDK_TOKEN_OPS_ALL \
	(PDK_TOKEN_OP_READ | PDK_TOKEN_OP_EXEC | PDK_TOKEN_OP_FILES | PDK_TOKEN_OP_CONTROL)

struct pdk_token_claims {
	char sb[PDK_TOKEN_ID_MAX + 1];
	unsigned ops;
	uint64_t exp; /* UNIX seconds */
};

/* "read", "exec", "files", "control" -> its bit, or 0 when unknown. */
unsigned pdk_token_op_from_name(const char *name);
/* The names of the bits of `ops`, in a new JSON array. */
struct json_t;
struct json_t *pdk_token_ops_json(unsigned ops);

/*
 * Load STATE/daemon.key, creating it (0600, 32 bytes from getrandom) when missing.
 * A key file of any other size or with group/other access is refused.
 */
PDK_MUST_CHECK int pdk_token_key_load(const char *state_dir, unsigned char key[PDK_TOKEN_KEY_LEN],
				      struct pdk_error **err);

/* A new sandbox token (caller frees *out). */
PDK_MUST_CHECK int pdk_token_mint(const unsigned char key[PDK_TOKEN_KEY_LEN], const char *sb,
				  unsigned ops, uint64_t exp, char **out, struct pdk_error **err);

/*
 * Check a sandbox token: MAC first (constant time), then the payload's shape, then expiry
 * against `now_s`. -EACCES with a reason on any failure; *claims is filled on success.
 */
PDK_MUST_CHECK int pdk_token_verify(const unsigned char key[PDK_TOKEN_KEY_LEN], const char *token,
				    uint64_t now_s, struct pdk_token_claims *claims,
				    struct pdk_error **err);

/* A new admin token (*token, caller frees) and the hex SHA-256 to store (65 bytes). */
PDK_MUST_CHECK int pdk_token_admin_new(char **token, char hash_hex[65], struct pdk_error **err);
/*
 * A new E2B API key, "e2b_" and 40 lowercase hex digits (E2B's own shape,
 * 160 random bits) in *key (caller frees), and the hex SHA-256 to store.
 */
#define PDK_TOKEN_E2B_PREFIX  "e2b_"
#define PDK_TOKEN_E2B_HEX_LEN 40
PDK_MUST_CHECK int pdk_token_e2b_key_new(char **key, char hash_hex[65], struct pdk_error **err);
/* Whether `key` has an E2B API key's shape ("e2b_" and 40 lowercase hex digits). */
bool pdk_token_e2b_key_shape_ok(const char *key);

/* Hex SHA-256 of a token string. */
void pdk_token_sha256_hex(const char *token, char hash_hex[65]);

/* base64url without padding. *out is NUL-terminated, caller frees. */
char *pdk_token_b64url_encode(const unsigned char *p, size_t n);
/* Decode base64url (no padding, no whitespace). Caller frees *out. -EINVAL on bad input. */
PDK_MUST_CHECK int pdk_token_b64url_decode(const char *s, size_t len, unsigned char **out,
					   size_t *out_len);

#endif
