#include "common.h"
#include "token.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

static const unsigned char key[PDK_TOKEN_KEY_LEN] = "0123456789abcdef0123456789abcdef";
static const unsigned char other[PDK_TOKEN_KEY_LEN] = "X123456789abcdef0123456789abcdef";

Test(token, mint_then_verify)
{
	struct pdk_token_claims c;
	struct pdk_error *err = NULL;
	char *t = NULL;

	cr_assert_eq(
		pdk_token_mint(key, "sb-1", PDK_TOKEN_OP_EXEC | PDK_TOKEN_OP_READ, 2000, &t, &err),
		0);
	cr_assert(strncmp(t, "pdk_sb_", 7) == 0);
	cr_assert_eq(pdk_token_verify(key, t, 1999, &c, &err), 0, "%s", err ? err->msg : "");
	cr_assert_str_eq(c.sb, "sb-1");
	cr_assert_eq(c.ops, PDK_TOKEN_OP_EXEC | PDK_TOKEN_OP_READ);
	cr_assert_eq(c.exp, 2000);
	free(t);
}

Test(token, expired_is_refused)
{
	struct pdk_token_claims c;
	struct pdk_error *err = NULL;
	char *t = NULL;

	cr_assert_eq(pdk_token_mint(key, "sb-1", PDK_TOKEN_OP_EXEC, 2000, &t, &err), 0);
	cr_assert_eq(pdk_token_verify(key, t, 2000, &c, &err), -EACCES);
	cr_assert(strstr(err->msg, "expired") != NULL);
	pdk_error_free(&err);
	free(t);
}

Test(token, other_key_and_tampering_are_refused)
{
	struct pdk_token_claims c;
	struct pdk_error *err = NULL;
	char *t = NULL, *forged = NULL;
	_cleanup_free_ char *payload = NULL;
	char *dot;

	cr_assert_eq(pdk_token_mint(key, "sb-1", PDK_TOKEN_OP_READ, 2000, &t, &err), 0);
	cr_assert_eq(pdk_token_verify(other, t, 1, &c, &err), -EACCES);
	pdk_error_free(&err);
	/* Swap in a payload naming another sandbox and all ops, keeping the old MAC. */
	payload = pdk_token_b64url_encode(
		(const unsigned char
			 *)"{\"exp\":2000,\"ops\":[\"exec\",\"files\"],\"sb\":\"sb-2\"}",
		strlen("{\"exp\":2000,\"ops\":[\"exec\",\"files\"],\"sb\":\"sb-2\"}"));
	dot = strchr(t, '.');
	forged = pdk_xasprintf("pdk_sb_%s%s", payload, dot);
	cr_assert_eq(pdk_token_verify(key, forged, 1, &c, &err), -EACCES);
	cr_assert(strstr(err->msg, "signature") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	/* One flipped character of the MAC. */
	t[strlen(t) - 2] = t[strlen(t) - 2] == 'A' ? 'B' : 'A';
	cr_assert_eq(pdk_token_verify(key, t, 1, &c, &err), -EACCES);
	pdk_error_free(&err);
	free(forged);
	free(t);
}

Test(token, garbage_is_refused)
{
	static const char *const bad[] = {
		"",           "pdk_sb_",     "pdk_sb_.",       "pdk_sb_abc",
		"pdk_sb_a.b", "pdk_adm_xyz", "pdk_sb_!!!.???", "Bearer"};
	struct pdk_token_claims c;
	struct pdk_error *err = NULL;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(bad); i++) {
		cr_assert_eq(pdk_token_verify(key, bad[i], 1, &c, &err), -EACCES, "%s", bad[i]);
		pdk_error_free(&err);
	}
}

Test(token, b64url_round_trip)
{
	for (size_t n = 0; n < 40; n++) {
		unsigned char in[40], *out = NULL;
		size_t m = 0;
		char *e;

		for (size_t i = 0; i < n; i++)
			in[i] = (unsigned char)(i * 37 + n);
		e = pdk_token_b64url_encode(in, n);
		cr_assert_null(strchr(e, '='));
		cr_assert_eq(pdk_token_b64url_decode(e, strlen(e), &out, &m), 0);
		cr_assert_eq(m, n);
		cr_assert(memcmp(in, out, n) == 0);
		free(out);
		free(e);
	}
}

Test(token, admin_token_hash)
{
	struct pdk_error *err = NULL;
	char hash[65], again[65];
	char *t = NULL, *u = NULL;

	cr_assert_eq(pdk_token_admin_new(&t, hash, &err), 0);
	cr_assert_eq(pdk_token_admin_new(&u, again, &err), 0);
	cr_assert(strncmp(t, "pdk_adm_", 8) == 0);
	cr_assert_str_neq(t, u);
	cr_assert_eq(strlen(hash), 64);
	pdk_token_sha256_hex(t, again);
	cr_assert_str_eq(hash, again);
	pdk_token_sha256_hex("abc", again);
	cr_assert_str_eq(again, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	free(t);
	free(u);
}

Test(token, key_file_created_private_and_reloaded)
{
	char dir[] = "/tmp/pdk-token-XXXXXX";
	unsigned char k1[PDK_TOKEN_KEY_LEN], k2[PDK_TOKEN_KEY_LEN];
	struct pdk_error *err = NULL;
	_cleanup_free_ char *path = NULL;
	struct stat st;

	cr_assert_not_null(mkdtemp(dir));
	path = pdk_xasprintf("%s/daemon.key", dir);
	cr_assert_eq(pdk_token_key_load(dir, k1, &err), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(st.st_size, 32);
	cr_assert_eq(pdk_token_key_load(dir, k2, &err), 0);
	cr_assert(memcmp(k1, k2, sizeof(k1)) == 0);
	cr_assert_eq(chmod(path, 0644), 0);
	cr_assert_eq(pdk_token_key_load(dir, k2, &err), -EPERM);
	pdk_error_free(&err);
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
}

/* An E2B API key is e2b_ and 40 lowercase hex digits, fresh each time; its hash is what is kept. */
Test(token, e2b_key_shape)
{
	struct pdk_error *err = NULL;
	char *a = NULL, *b = NULL, ha[65], hb[65], h[65];

	cr_assert_eq(pdk_token_e2b_key_new(&a, ha, &err), 0);
	cr_assert_eq(pdk_token_e2b_key_new(&b, hb, &err), 0);
	cr_assert(pdk_token_e2b_key_shape_ok(a) && pdk_token_e2b_key_shape_ok(b));
	cr_assert_eq(strlen(a), 44);
	cr_assert_str_neq(a, b);
	pdk_token_sha256_hex(a, h);
	cr_assert_str_eq(h, ha);
	cr_assert(!pdk_token_e2b_key_shape_ok("e2b_"));
	cr_assert(!pdk_token_e2b_key_shape_ok("e2b_0123456789abcdef0123456789abcdef0123456"));
	cr_assert(!pdk_token_e2b_key_shape_ok("e2b_0123456789ABCDEF0123456789abcdef01234567"));
	cr_assert(!pdk_token_e2b_key_shape_ok("pdk_0123456789abcdef0123456789abcdef01234567"));
	cr_assert(!pdk_token_e2b_key_shape_ok("e2b_0123456789abcdef0123456789abcdef012345678"));
	cr_assert(pdk_token_e2b_key_shape_ok("e2b_0123456789abcdef0123456789abcdef01234567"));
	free(a);
	free(b);
}
