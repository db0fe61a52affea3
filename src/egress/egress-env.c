/*
 * egress-env.c - what the sandbox's environment says about the proxy: the
 * proxy variables, the placeholders that stand for credentials, and where
 * the trust bundle of credential injection is. No OpenSSL and no libevent
 * here: the front binary composes every sandbox's environment
 * (docs/internals/binaries.md).
 */
#include "common.h"
#include "base.h"
#include "egress.h"
#include "egress-tls.h"

#include <ctype.h>
#include <string.h>

void pdk_egress_env_add(char ***env)
{
	static const char *const names[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
					    "http_proxy", "https_proxy", "all_proxy"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(names); i++)
		pdk_strv_push_take(
			env, pdk_xasprintf("%s=http://127.0.0.1:%d", names[i], PDK_EGRESS_PORT));
	pdk_strv_push(env, "NO_PROXY=");
	pdk_strv_push(env, "no_proxy=");
}

char *pdk_egress_placeholder(const char *secret, const char *sandbox_id)
{
	return pdk_xasprintf("paddock-secret-%s-%s", secret, sandbox_id);
}

void pdk_egress_secret_env_set(char ***env, char *const *credentials, const char *sandbox_id)
{
	for (size_t i = 0; credentials != NULL && credentials[i] && credentials[i + 1]; i += 2) {
		_cleanup_free_ char *field = NULL;
		_cleanup_free_ char *secret = NULL;
		_cleanup_free_ char *why = NULL;
		_cleanup_free_ char *ph = NULL;
		_cleanup_free_ char *key = NULL;

		if (pdk_net_cred_parse(credentials[i + 1], &field, &secret, &why) < 0)
			continue; /* the policy parser refused it already */
		ph = pdk_egress_placeholder(secret, sandbox_id);
		key = pdk_xasprintf("%s%s", PDK_EGRESS_SECRET_PREFIX, secret);
		for (char *c = key; *c; c++)
			*c = (char)toupper((unsigned char)*c);
		/* SECURITY: the variable holds the placeholder, whatever -e or the profile said. */
		pdk_env_set_take(env, pdk_xasprintf("%s=%s", key, ph));
	}
}

bool pdk_egress_tls_wanted(char *const *credentials)
{
	return credentials != NULL && credentials[0] != NULL && credentials[1] != NULL;
}

static void env_put(char ***env, const char *name, const char *value)
{
	size_t len = strlen(name), i;

	for (i = 0; *env != NULL && (*env)[i] != NULL; i++) {
		if (strncmp((*env)[i], name, len) == 0 && (*env)[i][len] == '=') {
			free((*env)[i]);
			(*env)[i] = pdk_xasprintf("%s=%s", name, value);
			return;
		}
	}
	pdk_strv_push_take(env, pdk_xasprintf("%s=%s", name, value));
}

void pdk_egress_tls_env_set(char ***env, char *const *credentials)
{
	/* OpenSSL (Python's ssl, curl's CLI and libcurl), Node, requests, curl. */
	static const char *const vars[] = {"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
					   "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"};

	if (!pdk_egress_tls_wanted(credentials))
		return;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(vars); i++)
		env_put(env, vars[i], PDK_EGRESS_TLS_BUNDLE);
}
