/*
 * runspec.h - what a sandbox is made of, from what its caller asked for:
 * the profile plus overrides (limits, network allow list, workspace mode),
 * the workspace directory, the environment (with the egress proxy's
 * variables) and the secrets no event may show.
 *
 * `paddock run` fills a struct pdk_runspec from its options and
 * `paddock supervise` from the daemon's spec JSON; both then make the same
 * calls, so the two front ends cannot drift apart. Each value carries the
 * name its caller knows it by ("--memory", "limits.memory"), which error
 * messages quote.
 */
#ifndef PDK_RUNSPEC_H
#define PDK_RUNSPEC_H

#include "common.h"
#include "base.h"
#include "policy.h"
#include "telemetry.h"

/* One override as text, and the name it was given under (for messages). */
struct pdk_runspec_opt {
	const char *value; /* NULL: not overridden */
	const char *name;
};

struct pdk_runspec {
	const char *profile; /* NULL: "default" */
	struct pdk_runspec_opt wall, memory, pids, cpus, disk, egress_bytes;
	struct pdk_runspec_opt ws_mode; /* overlay | rw | ro | tmpfs | none */
	const char *workspace;          /* host directory; NULL: the profile's, else "." */
	char *const *env;               /* K=V, or K (copied from our own environment) */
	const char *env_name;
	char *const *allow; /* more network.allow entries; turn mode none into allowlist */
	const char *allow_name;
	const char *change_set; /* overlay on this existing change set (run only) */
	bool discard;           /* overlay changes are dropped at the end (run only) */
	bool no_exec_trace;
	/* The caller's environment (borrowed): TERM and the values of `K` entries of env. */
	char *const *host_env;
};

/*
 * Apply the overrides of `rs` to `p` (loaded with pdk_policy_load() from
 * rs->profile): no_exec_trace, limits, allow list, workspace mode. 0 or
 * -EINVAL + *err naming the value.
 */
PDK_MUST_CHECK int pdk_runspec_apply(const struct pdk_runspec *rs, struct pdk_policy *p,
				     struct pdk_error **err);

/*
 * The workspace's absolute host path in *out (caller frees; NULL with mode
 * none or a change set, which names its own). Refuses '/', a missing
 * directory, a file. 0 or negative + *err.
 */
PDK_MUST_CHECK int pdk_runspec_workspace(const struct pdk_runspec *rs, const struct pdk_policy *p,
					 char **out, struct pdk_error **err);

/*
 * The sandbox's environment (caller frees with pdk_strv_free): a base
 * PATH/HOME/LANG/TERM, the egress proxy's variables in allowlist mode,
 * the profile's env, then rs->env (later entries win). 0 or -EINVAL + *err
 * for a bad name.
 */
PDK_MUST_CHECK int pdk_runspec_env(const struct pdk_runspec *rs, const struct pdk_policy *p,
				   char ***out, struct pdk_error **err);

/*
 * In allowlist mode, what the sandbox sees of network.credentials: a
 * per-sandbox placeholder in place of each secret (which wins over -e and the
 * profile's env), and the trust-bundle variables for HTTPS interception
 * (docs/egress.md). Call it last, once `id` is known. No-op in other modes.
 */
void pdk_runspec_credential_env(char ***env, const struct pdk_policy *p, const char *id);

/*
 * Register with `ev` the secrets no sink may see: the values of
 * secret-looking variables of `env`, and of the secrets that
 * network.credentials names (PADDOCK_SECRET_<NAME> of `host_env`, the
 * environment the egress proxy takes them from). NULL ev: no-op.
 */
void pdk_runspec_add_secrets(struct pdk_events *ev, char *const *env, const struct pdk_policy *p,
			     char *const *host_env);

#endif
