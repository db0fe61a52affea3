/*
 * runspec.c - a sandbox's policy, workspace and environment from its
 * caller's request (runspec.h). Shared by `paddock run` and
 * `paddock supervise`.
 */
#include "common.h"
#include "base.h"
#include "egress.h"
#include "runspec.h"
#include "telemetry.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int bad_value(const struct pdk_runspec_opt *o, const char *want, struct pdk_error **err)
{
	return pdk_error_setx(err, EINVAL, "invalid %s '%s': expected %s", o->name, o->value, want);
}

/* "1.5" CPUs -> 1500 thousandths. */
static int parse_cpus(const char *s, uint32_t *milli)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v > 0) || v > 1024)
		return -EINVAL;
	*milli = (uint32_t)(v * 1000.0 + 0.5);
	return *milli ? 0 : -EINVAL;
}

/* Overridden limits replace the profile's; an explicit limit is never best-effort. */
static int apply_limits(const struct pdk_runspec *rs, struct pdk_policy *p, struct pdk_error **err)
{
	struct pdk_policy_limits *l = &p->limits;

	if (rs->wall.value &&
	    (pdk_parse_duration(rs->wall.value, &l->wall_ms) < 0 || l->wall_ms == 0))
		return bad_value(&rs->wall, "a duration such as 500ms, 30s, 10m", err);
	if (rs->memory.value &&
	    (pdk_parse_size(rs->memory.value, &l->memory) < 0 || l->memory < 1 << 20))
		return bad_value(&rs->memory, "a size of at least 1M, such as 512M or 2G", err);
	if (rs->memory.value)
		p->best_effort &= ~(unsigned)PDK_BE_MEMORY;
	if (rs->pids.value &&
	    (pdk_parse_u64(rs->pids.value, 4194304, &l->pids) < 0 || l->pids == 0))
		return bad_value(&rs->pids, "a whole number from 1 to 4194304", err);
	if (rs->pids.value)
		p->best_effort &= ~(unsigned)PDK_BE_PIDS;
	if (rs->cpus.value && parse_cpus(rs->cpus.value, &l->cpu_milli) < 0)
		return bad_value(&rs->cpus, "a number of CPUs above 0, such as 0.5 or 2", err);
	if (rs->cpus.value)
		p->best_effort &= ~(unsigned)PDK_BE_CPU;
	if (rs->disk.value && (pdk_parse_size(rs->disk.value, &l->disk) < 0 || l->disk < 1 << 20))
		return bad_value(&rs->disk, "a size of at least 1M, such as 100M or 2G", err);
	if (rs->egress_bytes.value && pdk_parse_size(rs->egress_bytes.value, &l->egress_bytes) < 0)
		return bad_value(&rs->egress_bytes, "a size such as 100M", err);
	return 0;
}

static bool strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		if (strcmp(v[i], s) == 0)
			return true;
	}
	return false;
}

/*
 * More allow entries add to the profile's network.allow and turn network
 * mode none into allowlist; with mode host they would mean nothing, so
 * they are refused.
 */
static int apply_allow(const struct pdk_runspec *rs, struct pdk_policy *p, struct pdk_error **err)
{
	for (size_t i = 0; rs->allow != NULL && rs->allow[i] != NULL; i++) {
		struct pdk_net_rule r;
		_cleanup_free_ char *why = NULL;

		if (pdk_net_rule_parse(rs->allow[i], &r, &why) < 0)
			return pdk_error_setx(err, EINVAL, "invalid %s '%s': %s", rs->allow_name,
					      rs->allow[i], why);
		if (!strv_contains(p->network.allow, r.text))
			pdk_strv_push(&p->network.allow, r.text);
		pdk_net_rule_release(&r);
	}
	if (rs->allow == NULL || rs->allow[0] == NULL)
		return 0;
	if (p->network.mode == PDK_NET_HOST)
		return pdk_error_setx(err, EINVAL,
				      "%s needs network mode none or allowlist (the profile "
				      "has host)",
				      rs->allow_name);
	p->network.mode = PDK_NET_ALLOWLIST;
	return 0;
}

static int apply_ws_mode(const struct pdk_runspec *rs, struct pdk_policy *p, struct pdk_error **err)
{
	static const enum pdk_ws_mode modes[] = {PDK_WS_OVERLAY, PDK_WS_RW, PDK_WS_RO, PDK_WS_TMPFS,
						 PDK_WS_NONE};
	struct pdk_runspec_opt cs = {rs->change_set, "--change-set"};

	if (rs->change_set != NULL) {
		if (rs->workspace != NULL ||
		    (rs->ws_mode.value && strcmp(rs->ws_mode.value, "overlay") != 0))
			return bad_value(&cs,
					 "no -w and no other --workspace-mode (the change set "
					 "names its workspace)",
					 err);
		p->workspace.mode = PDK_WS_OVERLAY;
		return 0;
	}
	if (rs->ws_mode.value) {
		size_t i;

		for (i = 0; i < PDK_ARRAY_SIZE(modes); i++)
			if (strcmp(rs->ws_mode.value, pdk_policy_ws_mode_name(modes[i])) == 0)
				break;
		if (i == PDK_ARRAY_SIZE(modes))
			return bad_value(&rs->ws_mode, "overlay, rw, ro, tmpfs or none", err);
		p->workspace.mode = modes[i];
	}
	if (rs->discard && p->workspace.mode != PDK_WS_OVERLAY)
		return pdk_error_setx(err, EINVAL,
				      "--discard needs the overlay workspace mode (it is '%s')",
				      pdk_policy_ws_mode_name(p->workspace.mode));
	return 0;
}

int pdk_runspec_apply(const struct pdk_runspec *rs, struct pdk_policy *p, struct pdk_error **err)
{
	if (rs->no_exec_trace)
		p->audit.exec_trace = false;
	if (apply_limits(rs, p, err) < 0 || apply_allow(rs, p, err) < 0 ||
	    apply_ws_mode(rs, p, err) < 0)
		return -EINVAL;
	return 0;
}

int pdk_runspec_workspace(const struct pdk_runspec *rs, const struct pdk_policy *p, char **out,
			  struct pdk_error **err)
{
	const char *ws = rs->workspace       ? rs->workspace
			 : p->workspace.path ? p->workspace.path
					     : ".";
	char real[PATH_MAX];
	struct stat st;

	*out = NULL;
	if (rs->change_set != NULL || p->workspace.mode == PDK_WS_NONE)
		return 0;
	if (realpath(ws, real) == NULL || stat(real, &st) < 0)
		return pdk_error_setx(err, errno, "workspace '%s': %s", ws, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return pdk_error_setx(err, ENOTDIR, "workspace '%s' is not a directory", ws);
	if (strcmp(real, "/") == 0)
		return pdk_error_setx(err, EINVAL, "the workspace cannot be '/'");
	*out = pdk_xstrdup(real);
	return 0;
}

/* The name part of "K=V" or "K": [A-Za-z_][A-Za-z0-9_]*, as the profile's env keys. */
static bool valid_env_name(const char *kv)
{
	size_t n = strcspn(kv, "=");

	if (n == 0 || (kv[0] >= '0' && kv[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = kv[i];

		if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

/* Later entries win: the caller's over the profile's env over the base. */
static void env_set(char ***env, const char *kv)
{
	size_t klen = strcspn(kv, "=");

	for (size_t i = 0; *env != NULL && (*env)[i] != NULL; i++) {
		if (strncmp((*env)[i], kv, klen) == 0 && (*env)[i][klen] == '=') {
			free((*env)[i]);
			(*env)[i] = pdk_xstrdup(kv);
			return;
		}
	}
	pdk_strv_push(env, kv);
}

int pdk_runspec_env(const struct pdk_runspec *rs, const struct pdk_policy *p, char ***out,
		    struct pdk_error **err)
{
	const char *term = pdk_env_get(rs->host_env, "TERM");
	_cleanup_strv_ char **env = NULL;

	pdk_strv_push(&env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	pdk_strv_push(&env, "HOME=/tmp");
	pdk_strv_push(&env, "LANG=C.UTF-8");
	if (term != NULL)
		pdk_strv_push_take(&env, pdk_xasprintf("TERM=%s", term));
	if (p->network.mode == PDK_NET_ALLOWLIST)
		pdk_egress_env_add(
			&env); /* before the profile's env and ours, which may override */
	for (size_t i = 0; p->env != NULL && p->env[i] != NULL; i++)
		env_set(&env, p->env[i]);
	for (size_t i = 0; rs->env != NULL && rs->env[i] != NULL; i++) {
		const char *kv = rs->env[i];
		_cleanup_free_ char *copied = NULL;

		if (!valid_env_name(kv))
			return pdk_error_setx(
				err, EINVAL,
				"invalid %s '%s': expected K=V or K, K made of letters, digits and _",
				rs->env_name, kv);
		if (strchr(kv, '=') == NULL) {
			const char *v = pdk_env_get(rs->host_env, kv);

			if (v == NULL)
				continue; /* like docker -e K: unset here, unset there */
			kv = copied = pdk_xasprintf("%s=%s", rs->env[i], v);
		}
		env_set(&env, kv);
	}
	*out = steal_ptr(&env);
	return 0;
}

/* The values of secret-looking variables of the sandbox's environment. */
static void add_env_secrets(struct pdk_events *ev, char *const *env)
{
	for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
		const char *eq = strchr(env[i], '=');
		_cleanup_free_ char *name = NULL;

		if (eq == NULL || !pdk_redact_name_is_secret(env[i], (size_t)(eq - env[i])))
			continue;
		name = strndup(env[i], (size_t)(eq - env[i]));
		if (name == NULL)
			pdk_oom();
		(void)pdk_events_add_secret(ev, name, eq + 1);
	}
}

/*
 * The values of the secrets that network.credentials names (read by the
 * egress proxy from PADDOCK_SECRET_<NAME>): never in an event, whatever
 * reports them.
 */
static void add_credential_secrets(struct pdk_events *ev, const struct pdk_policy *p,
				   char *const *host_env)
{
	char *const *cred = p->network.credentials;

	for (size_t i = 0; cred != NULL && cred[i] != NULL && cred[i + 1] != NULL; i += 2) {
		_cleanup_free_ char *field = NULL, *name = NULL, *why = NULL, *var = NULL;
		const char *value;

		if (pdk_net_cred_parse(cred[i + 1], &field, &name, &why) < 0)
			continue; /* the proxy refuses to start on it */
		var = pdk_xasprintf(PDK_EGRESS_SECRET_PREFIX "%s", name);
		for (char *c = var; *c != '\0'; c++)
			*c = (char)toupper((unsigned char)*c);
		value = pdk_env_get(host_env, var);
		if (value != NULL && *value != '\0')
			(void)pdk_events_add_secret(ev, name, value);
	}
}

void pdk_runspec_credential_env(char ***env, const struct pdk_policy *p, const char *id)
{
	if (p->network.mode != PDK_NET_ALLOWLIST)
		return;
	pdk_egress_secret_env_set(env, p->network.credentials, id);
	pdk_egress_tls_env_set(env, p->network.credentials);
}

void pdk_runspec_add_secrets(struct pdk_events *ev, char *const *env, const struct pdk_policy *p,
			     char *const *host_env)
{
	if (ev == NULL)
		return;
	add_env_secrets(ev, env);
	add_credential_secrets(ev, p, host_env);
}
