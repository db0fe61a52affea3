/*
 * session-internal.h - the session's state, shared by session.c (the steps),
 * session-env.c (the sandbox's environment and the secrets no event may
 * show) and session-view.c (the directories no sandbox may see).
 */
#ifndef PDK_SESSION_INTERNAL_H
#define PDK_SESSION_INTERNAL_H

#include "common.h"
#include "session.h"

/*
 * The sandbox's environment (caller frees with pdk_strv_free): a base
 * PATH/HOME/LANG/TERM, the image's env (`image_env`, may be NULL), the
 * egress proxy's variables in allowlist mode, the profile's env, then
 * o->env (later entries win; "K" alone copies K of
 * o->settings->envp, or nothing when unset there). 0 or -EINVAL + *err for a
 * bad name, quoted as o->env_name.
 */
PDK_MUST_CHECK int pdk__session_env(const struct pdk_session_opts *o, const struct pdk_policy *p,
				    char *const *image_env, char ***out, struct pdk_error **err);

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

/*
 * An image's `user` ("NAME", "UID", "NAME:GROUP", "UID:GID") as the ids
 * the sandbox's user has inside: numbers as given ("UID" alone: GID =
 * UID), names from the image's etc/passwd and etc/group, read from
 * `layers` (host paths, topmost first) inside each layer. 0, or -EINVAL
 * + *err (field "image") for a name the image does not have.
 */
PDK_MUST_CHECK int pdk__session_image_user(char *const *layers, const char *user, uid_t *uid,
					   gid_t *gid, struct pdk_error **err);

/* The directories no sandbox of a session may see, and what each is (for messages). */
struct pdk__session_private {
	char **dirs;    /* canonical (pdk_paths_canonical()), and their other places (mounts) */
	char **whats;   /* "the runtime directory", one for each of dirs */
	char **origins; /* for each of dirs, the directory's own path (dirs[i] when it is that) */
	char **kernel;  /* mount points of the host kernel's interfaces (procfs, sysfs, ...) */
};

/*
 * The state and runtime directories of the session (`state_dir`,
 * `runtime_dir`), those of o->settings, and o->daemon_run_dir, into *out
 * (released with pdk__session_private_release()), each with every other
 * place a mount shows it in `mounts` (this process's mount table,
 * pdk_mounts_read(): without it no view may be made), and the kernel's
 * file systems mounted there.
 */
void pdk__session_private_dirs(const struct pdk_session_opts *o, const char *state_dir,
			       const char *runtime_dir, const struct pdk_mounts *mounts,
			       struct pdk__session_private *out);

void pdk__session_private_release(struct pdk__session_private *priv);

/*
 * SECURITY: refuse a view that would show a private directory from inside: the
 * workspace `workspace` (NULL: none to check) or a bind of `p` (filesystem.read_only,
 * read_write), `extra_ro` or `extra_rw` (--ro, --rw) at or under one of priv->dirs
 * (-EACCES + *err naming the path, the directory and what it holds). A private
 * directory that lies under one of them but does not exist yet is made
 * (pdk_paths_private_dir()), so that the engine can hide it (mount.h).
 */
PDK_MUST_CHECK int pdk__session_check_view(const struct pdk__session_private *priv,
					   const char *workspace, const struct pdk_policy *p,
					   char *const *extra_ro, char *const *extra_rw,
					   struct pdk_error **err);

#endif
