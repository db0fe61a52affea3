/*
 * token.c - sandbox tokens (HMAC-SHA256) and admin tokens (token.h).
 */
#include "common.h"
#include "base.h"
#include "token.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

static const char *const op_names[] = {"read", "exec", "files", "control"};

unsigned pdk_token_op_from_name(const char *name)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(op_names); i++)
		if (strcmp(name, op_names[i]) == 0)
			return 1u << i;
	return 0;
}

json_t *pdk_token_ops_json(unsigned ops)
{
	json_t *a = json_array();

	for (size_t i = 0; i < PDK_ARRAY_SIZE(op_names); i++)
		if (ops & (1u << i))
			json_array_append_new(a, json_string(op_names[i]));
	return a;
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *pdk_token_b64url_encode(const unsigned char *p, size_t n)
{
	char *out = pdk_xmalloc(n / 3 * 4 + 5);
	size_t o = 0, i = 0;

	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
		out[o++] = b64url[v >> 6 & 63];
		out[o++] = b64url[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);

		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
		if (i + 1 < n)
			out[o++] = b64url[v >> 6 & 63];
	}
	out[o] = '\0';
	return out;
}

static int b64val(char c)
{
	const char *p = c ? strchr(b64url, c) : NULL;

	return p == NULL ? -1 : (int)(p - b64url);
}

int pdk_token_b64url_decode(const char *s, size_t len, unsigned char **out, size_t *out_len)
{
	_cleanup_free_ unsigned char *buf = NULL;
	uint32_t acc = 0;
	size_t o = 0;
	int bits = 0;

	if (len % 4 == 1)
		return -EINVAL;
	buf = pdk_xmalloc(len / 4 * 3 + 3);
	for (size_t i = 0; i < len; i++) {
		int v = b64val(s[i]);

		if (v < 0)
			return -EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* Leftover bits must be zero: one encoding per byte string. */
	if (acc != 0)
		return -EINVAL;
	*out = steal_ptr(&buf);
	*out_len = o;
	return 0;
}

int pdk_token_key_load(const char *state_dir, unsigned char key[PDK_TOKEN_KEY_LEN],
		       struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", state_dir, PDK_TOKEN_KEY_FILE);
	_cleanup_close_ int fd = -1;
	struct stat st;
	ssize_t n;

	if (pdk_mkdir_p(state_dir, err) < 0)
		return -EIO;
	fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
	if (fd < 0 && errno == ENOENT) {
		if (getrandom(key, PDK_TOKEN_KEY_LEN, 0) != PDK_TOKEN_KEY_LEN)
			return pdk_error_set(err, errno, "getrandom");
		fd = TEMP_FAILURE_RETRY(
			open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
		if (fd < 0)
			return pdk_error_set(err, errno, "cannot create '%s'", path);
		if (pdk_write_all(fd, key, PDK_TOKEN_KEY_LEN) < 0 || fsync(fd) < 0)
			return pdk_error_set(err, errno, "cannot write '%s'", path);
		return 0;
	}
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open '%s'", path);
	if (fstat(fd, &st) < 0)
		return pdk_error_set(err, errno, "stat '%s'", path);
	/* SECURITY: a key others can read or that is not exactly 32 bytes is refused. */
	if ((st.st_mode & 077) != 0 || st.st_size != PDK_TOKEN_KEY_LEN)
		return pdk_error_setx(err, EPERM, "'%s' must be 32 bytes and mode 0600", path);
	n = pdk_read_all(fd, key, PDK_TOKEN_KEY_LEN);
	if (n != PDK_TOKEN_KEY_LEN)
		return pdk_error_set(err, n < 0 ? (int)-n : EIO, "cannot read '%s'", path);
	return 0;
}

static void mac(const unsigned char key[PDK_TOKEN_KEY_LEN], const char *p, size_t n,
		unsigned char out[32])
{
	unsigned int len = 32;

	if (HMAC(EVP_sha256(), key, PDK_TOKEN_KEY_LEN, (const unsigned char *)p, n, out, &len) ==
	    NULL)
		pdk_oom(); /* HMAC-SHA256 fails only when it cannot allocate */
}

int pdk_token_mint(const unsigned char key[PDK_TOKEN_KEY_LEN], const char *sb, unsigned ops,
		   uint64_t exp, char **out, struct pdk_error **err)
{
	_cleanup_json_ json_t *payload = NULL;
	_cleanup_free_ char *text = NULL, *p64 = NULL, *m64 = NULL;
	unsigned char m[32];

	if (sb == NULL || strlen(sb) > PDK_TOKEN_ID_MAX || sb[0] == '\0')
		return pdk_error_setx(err, EINVAL, "bad sandbox id for a token");
	payload = json_pack("{s:I, s:o, s:s}", "exp", (json_int_t)exp, "ops",
			    pdk_token_ops_json(ops), "sb", sb);
	if (payload == NULL)
		pdk_oom();
	text = json_dumps(payload, JSON_COMPACT | JSON_SORT_KEYS);
	if (text == NULL)
		pdk_oom();
	p64 = pdk_token_b64url_encode((const unsigned char *)text, strlen(text));
	mac(key, p64, strlen(p64), m);
	m64 = pdk_token_b64url_encode(m, sizeof(m));
	*out = pdk_xasprintf(PDK_TOKEN_SB_PREFIX "%s.%s", p64, m64);
	return 0;
}

static int parse_claims(const unsigned char *p, size_t n, struct pdk_token_claims *c,
			struct pdk_error **err)
{
	_cleanup_json_ json_t *j = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, NULL);
	json_t *sb, *ops, *exp, *v;
	size_t i;

	if (j == NULL || !json_is_object(j) || json_object_size(j) != 3)
		return pdk_error_setx(err, EACCES, "token payload is not a token");
	sb = json_object_get(j, "sb");
	ops = json_object_get(j, "ops");
	exp = json_object_get(j, "exp");
	if (!json_is_string(sb) || json_string_length(sb) == 0 ||
	    json_string_length(sb) > PDK_TOKEN_ID_MAX || !json_is_array(ops) ||
	    !json_is_integer(exp) || json_integer_value(exp) < 0)
		return pdk_error_setx(err, EACCES, "token payload is not a token");
	memset(c, 0, sizeof(*c));
	memcpy(c->sb, json_string_value(sb), json_string_length(sb));
	c->exp = (uint64_t)json_integer_value(exp);
	json_array_foreach(ops, i, v)
	{
		unsigned bit = json_is_string(v) ? pdk_token_op_from_name(json_string_value(v)) : 0;

		if (bit == 0)
			return pdk_error_setx(err, EACCES, "token names an unknown operation");
		c->ops |= bit;
	}
	return 0;
}

int pdk_token_verify(const unsigned char key[PDK_TOKEN_KEY_LEN], const char *token, uint64_t now_s,
		     struct pdk_token_claims *claims, struct pdk_error **err)
{
	_cleanup_free_ unsigned char *payload = NULL, *sig = NULL;
	size_t plen = strlen(PDK_TOKEN_SB_PREFIX), tlen = strnlen(token, PDK_TOKEN_MAX_LEN + 1);
	size_t n, siglen;
	const char *body, *dot;
	unsigned char m[32];

	if (tlen > PDK_TOKEN_MAX_LEN || strncmp(token, PDK_TOKEN_SB_PREFIX, plen) != 0)
		return pdk_error_setx(err, EACCES, "not a sandbox token");
	body = token + plen;
	dot = strchr(body, '.');
	if (dot == NULL || pdk_token_b64url_decode(dot + 1, strlen(dot + 1), &sig, &siglen) < 0 ||
	    siglen != sizeof(m))
		return pdk_error_setx(err, EACCES, "malformed sandbox token");
	mac(key, body, (size_t)(dot - body), m);
	/* SECURITY: constant-time comparison; nothing of the payload is read before this. */
	if (CRYPTO_memcmp(m, sig, sizeof(m)) != 0)
		return pdk_error_setx(err, EACCES, "sandbox token signature does not match");
	if (pdk_token_b64url_decode(body, (size_t)(dot - body), &payload, &n) < 0)
		return pdk_error_setx(err, EACCES, "malformed sandbox token");
	if (parse_claims(payload, n, claims, err) < 0)
		return -EACCES;
	if (claims->exp <= now_s)
		return pdk_error_setx(err, EACCES, "sandbox token expired");
	return 0;
}

void pdk_token_sha256_hex(const char *token, char hash_hex[65])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char h[32];
	unsigned int len = 32;

	if (EVP_Digest(token, strlen(token), h, &len, EVP_sha256(), NULL) != 1)
		pdk_oom(); /* SHA-256 fails only when it cannot allocate */
	for (size_t i = 0; i < 32; i++) {
		hash_hex[2 * i] = digits[h[i] >> 4];
		hash_hex[2 * i + 1] = digits[h[i] & 15];
	}
	hash_hex[64] = '\0';
}

int pdk_token_e2b_key_new(char **key, char hash_hex[65], struct pdk_error **err)
{
	unsigned char r[PDK_TOKEN_E2B_HEX_LEN / 2];
	char hex[PDK_TOKEN_E2B_HEX_LEN + 1];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return pdk_error_set(err, errno, "getrandom");
	for (size_t i = 0; i < sizeof(r); i++) {
		hex[2 * i] = "0123456789abcdef"[r[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[r[i] & 15];
	}
	hex[PDK_TOKEN_E2B_HEX_LEN] = '\0';
	OPENSSL_cleanse(r, sizeof(r));
	*key = pdk_xasprintf(PDK_TOKEN_E2B_PREFIX "%s", hex);
	OPENSSL_cleanse(hex, sizeof(hex));
	pdk_token_sha256_hex(*key, hash_hex);
	return 0;
}

bool pdk_token_e2b_key_shape_ok(const char *key)
{
	size_t n = strlen(PDK_TOKEN_E2B_PREFIX);

	return strncmp(key, PDK_TOKEN_E2B_PREFIX, n) == 0 &&
	       strlen(key + n) == PDK_TOKEN_E2B_HEX_LEN &&
	       strspn(key + n, "0123456789abcdef") == PDK_TOKEN_E2B_HEX_LEN;
}

int pdk_token_admin_new(char **token, char hash_hex[65], struct pdk_error **err)
{
	_cleanup_free_ char *r64 = NULL;
	unsigned char r[32];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return pdk_error_set(err, errno, "getrandom");
	r64 = pdk_token_b64url_encode(r, sizeof(r));
	OPENSSL_cleanse(r, sizeof(r));
	*token = pdk_xasprintf(PDK_TOKEN_ADM_PREFIX "%s", r64);
	pdk_token_sha256_hex(*token, hash_hex);
	return 0;
}
