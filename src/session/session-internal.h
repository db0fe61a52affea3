/*
 * session-internal.h - the session's state, shared by session.c (the steps)
 * and session-env.c (the sandbox's environment and the secrets no event may
 * show).
 */
#ifndef PDK_SESSION_INTERNAL_H
#define PDK_SESSION_INTERNAL_H

#include "common.h"
#include "session.h"

/*
 * The sandbox's environment (caller frees with pdk_strv_free): a base
 * PATH/HOME/LANG/TERM, the egress proxy's variables in allowlist mode, the
 * profile's env, then o->env (later entries win; "K" alone copies K of
 * o->settings->envp, or nothing when unset there). 0 or -EINVAL + *err for a
 * bad name, quoted as o->env_name.
 */
PDK_MUST_CHECK int pdk__session_env(const struct pdk_session_opts *o, const struct pdk_policy *p,
				    char ***out, struct pdk_error **err);

/*
 * In allowlist mode, what the sandbox sees of network.credentials: a
 * per-sandbox placeholder in place of each secret (which wins over the
 * caller's and the profile's env), and the trust-bundle variables for HTTPS
 * interception (docs/egress.md). Called last, once `id` is known. No-op in
 * other modes.
 */
void pdk__session_credential_env(char ***env, const struct pdk_policy *p, const char *id);

/*
 * Register with `ev` the secrets no sink may see: the values of
 * secret-looking variables of `env`, and of the secrets that
 * network.credentials names (PADDOCK_SECRET_<NAME> of `host_env`, the
 * environment the egress proxy takes them from). NULL ev: no-op.
 */
void pdk__session_add_secrets(struct pdk_events *ev, char *const *env, const struct pdk_policy *p,
			      char *const *host_env);

#endif
