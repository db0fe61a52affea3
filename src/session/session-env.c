/*
 * session-env.c - the sandbox's environment (base, egress proxy, profile,
 * caller) and the secrets no event may show (session-internal.h). The
 * proxy's variables and the event hub's redaction make this the session's
 * business, not the policy's: policy/ knows neither.
 */
#include "common.h"
#include "base.h"
#include "egress.h"
#include "session-internal.h"
#include "telemetry.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

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

/* Later entries win: the caller's over the profile's env over the image's over the base. */
int pdk__session_env(const struct pdk_session_opts *o, const struct pdk_policy *p,
		     char *const *image_env, char ***out, struct pdk_error **err)
{
	char *const *host_env = o->settings ? o->settings->envp : NULL;
	const char *term = pdk_env_get(host_env, "TERM");
	_cleanup_strv_ char **env = NULL;

	pdk_strv_push(&env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	pdk_strv_push(&env, "HOME=/tmp");
	pdk_strv_push(&env, "LANG=C.UTF-8");
	if (term != NULL)
		pdk_strv_push_take(&env, pdk_xasprintf("TERM=%s", term));
	for (size_t i = 0; image_env != NULL && image_env[i] != NULL; i++)
		if (strchr(image_env[i], '=') != NULL && valid_env_name(image_env[i]))
			pdk_env_set_take(&env, pdk_xstrdup(image_env[i]));
	/* Before the profile's env and the caller's, which may override them. */
	if (p->network.mode == PDK_NET_ALLOWLIST)
		pdk_egress_env_add(&env);
	for (size_t i = 0; p->env != NULL && p->env[i] != NULL; i++)
		pdk_env_set_take(&env, pdk_xstrdup(p->env[i]));
	for (size_t i = 0; o->env != NULL && o->env[i] != NULL; i++) {
		const char *kv = o->env[i];
		_cleanup_free_ char *copied = NULL;

		if (!valid_env_name(kv))
			return pdk_error_setx(
				err, EINVAL,
				"invalid %s '%s': expected K=V or K, K made of letters, digits and _",
				o->env_name ? o->env_name : "env", kv);
		if (strchr(kv, '=') == NULL) {
			const char *v = pdk_env_get(host_env, kv);

			if (v == NULL)
				continue; /* like docker -e K: unset here, unset there */
			kv = copied = pdk_xasprintf("%s=%s", o->env[i], v);
		}
		pdk_env_set_take(&env, pdk_xstrdup(kv));
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

void pdk__session_credential_env(char ***env, const struct pdk_policy *p, const char *id)
{
	if (p->network.mode != PDK_NET_ALLOWLIST)
		return;
	pdk_egress_secret_env_set(env, p->network.credentials, id);
	pdk_egress_tls_env_set(env, p->network.credentials);
}

void pdk__session_add_secrets(struct pdk_events *ev, char *const *env, const struct pdk_policy *p,
			      char *const *host_env)
{
	if (ev == NULL)
		return;
	add_env_secrets(ev, env);
	add_credential_secrets(ev, p, host_env);
}
