/*
 * tokens.c - credentials: who a bearer token is (an admin token's hash in
 * the store, or a sandbox token signed with the control object's key), and
 * new sandbox tokens.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"
#include "telemetry.h"

#include <stdio.h>
#include <string.h>

int pdk_ctl_authenticate(struct pdk_ctl *c, const char *token, struct pdk_ctl_auth *out,
			 struct pdk_error **err)
{
	_cleanup_free_ char *name = NULL;
	char hash[65];

	memset(out, 0, sizeof(*out));
	if (strlen(token) > PDK_TOKEN_MAX_LEN)
		return pdk_error_setx(err, EACCES, "the token is too long");
	if (strncmp(token, PDK_TOKEN_ADM_PREFIX, strlen(PDK_TOKEN_ADM_PREFIX)) == 0) {
		pdk_token_sha256_hex(token, hash);
		if (pdk_store_token_check(c->store, hash, &name, NULL) < 0)
			return pdk_error_setx(err, EACCES, "unknown or revoked admin token");
		out->admin = true;
		(void)snprintf(out->name, sizeof(out->name), "%s", name != NULL ? name : "admin");
		return 0;
	}
	if (pdk_token_verify(c->key, token, pdk_now_real_ns() / 1000000000ULL, &out->sb, err) < 0)
		return -EACCES;
	/* The records name a sandbox token's holder by its sandbox (control.h). */
	(void)snprintf(out->name, sizeof(out->name), "sandbox:%s", out->sb.sb);
	return 0;
}

int pdk_ctl_e2b_key_check(struct pdk_ctl *c, const char *key, char **name, struct pdk_error **err)
{
	char hash[65];

	*name = NULL;
	/* SECURITY: the shape is checked before any work: a wrong-shaped key costs no lookup. */
	if (!pdk_token_e2b_key_shape_ok(key))
		return pdk_error_setx(err, EACCES,
				      "an E2B API key is 'e2b_' and 40 lowercase hex digits");
	pdk_token_sha256_hex(key, hash);
	if (pdk_store_e2b_key_check(c->store, hash, name, NULL) < 0)
		return pdk_error_setx(err, EACCES, "unknown or removed E2B API key");
	return 0;
}

int pdk_ctl_token_mint(struct pdk_ctl_sb *sb, unsigned ops, uint64_t ttl_s, char **token,
		       uint64_t *exp_s, struct pdk_error **err)
{
	uint64_t exp = pdk_now_real_ns() / 1000000000ULL + ttl_s;
	char ts[40];

	if (pdk_token_mint(sb->c->key, sb->row.id, ops, exp, token, err) < 0)
		return -EIO;
	pdk_events_format_ts(exp * 1000000000ULL, ts, sizeof(ts));
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "token.create",
		      json_pack("{s:o, s:s}", "ops", pdk_token_ops_json(ops), "expires_at", ts));
	*exp_s = exp;
	return 0;
}
