/*
 * session-view.c - the directories no sandbox may see (session-internal.h).
 *
 * The runtime directory holds the daemon's socket and every supervisor's
 * control socket; the state directory holds the token key, the admin token
 * hashes, the audit store and its signing key, and the change sets. A
 * process in a sandbox has the uid of the user who made it, so a view that
 * holds them would hand it what the daemon guards. Two rules keep them out
 * of every view (docs/policy.md, "What a sandbox never sees"):
 *   - a workspace or bind at or under one of them is refused here, with the
 *     path, the directory and what it holds;
 *   - a workspace or bind that holds one of them (a workspace of /tmp or
 *     $HOME) is allowed, and the engine hides the directory inside it
 *     (engine/mount.h, private_dirs).
 */
#include "common.h"
#include "base.h"
#include "policy.h"
#include "session-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char what_runtime[] = "the runtime directory";
static const char what_state[] = "the state directory";
static const char what_daemon[] = "the daemon's runtime directory";

/* Entry `i` out of the lists (the order of the others is kept). */
static void drop_dir(struct pdk__session_private *out, size_t i)
{
	free(out->dirs[i]);
	free(out->whats[i]);
	free(out->origins[i]);
	for (; out->dirs[i] != NULL; i++) {
		out->dirs[i] = out->dirs[i + 1];
		out->whats[i] = out->whats[i + 1];
		out->origins[i] = out->origins[i + 1];
	}
}

/*
 * One directory more, unless one listed holds it; those it holds go. Only the
 * outermost of nested directories is listed: a supervisor's run directory lies in the
 * daemon's, and a mask inside a mask would have nothing to hide.
 */
static void add_one(struct pdk__session_private *out, char *canon, const char *what,
		    const char *origin)
{
	for (size_t i = 0; out->dirs != NULL && out->dirs[i] != NULL; i++)
		if (pdk_paths_within(canon, out->dirs[i])) {
			free(canon);
			return;
		}
	for (size_t i = 0; out->dirs != NULL && out->dirs[i] != NULL;) {
		if (pdk_paths_within(out->dirs[i], canon))
			drop_dir(out, i);
		else
			i++;
	}
	pdk_strv_push_take(&out->dirs, canon);
	pdk_strv_push(&out->whats, what);
	pdk_strv_push(&out->origins, origin);
}

/*
 * `dir` and every other place a mount shows it (pdk_paths_aliases_in(): a bind
 * mount of it or of a directory above it), each listed as `dir` is: a path check
 * by name alone would let a workspace of /mnt/x, a bind of /var/lib, show
 * /var/lib/paddock's keys at /mnt/x/paddock.
 */
static void add_dir(struct pdk__session_private *out, const struct pdk_mounts *mounts,
		    const char *dir, const char *what)
{
	_cleanup_free_ char *canon = NULL;
	_cleanup_strv_ char **all = NULL;

	if (dir == NULL || dir[0] != '/')
		return;
	canon = pdk_paths_canonical(dir);
	all = pdk_mounts_aliases(mounts, canon);
	for (size_t i = 0; all[i] != NULL; i++)
		add_one(out, steal_ptr(&all[i]), what, canon);
}

void pdk__session_private_dirs(const struct pdk_session_opts *o, const char *state_dir,
			       const char *runtime_dir, const struct pdk_mounts *mounts,
			       struct pdk__session_private *out)
{
	const struct pdk_paths *paths = &o->settings->paths;

	*out = (struct pdk__session_private){0};
	add_dir(out, mounts, o->daemon_run_dir, what_daemon);
	add_dir(out, mounts, runtime_dir, what_runtime);
	add_dir(out, mounts, paths->runtime_dir, what_runtime);
	add_dir(out, mounts, state_dir, what_state);
	add_dir(out, mounts, paths->state_dir, what_state);
	out->kernel = pdk_mounts_kernel(mounts);
}

void pdk__session_private_release(struct pdk__session_private *priv)
{
	pdk_strv_free(priv->dirs);
	pdk_strv_free(priv->whats);
	pdk_strv_free(priv->origins);
	pdk_strv_free(priv->kernel);
	*priv = (struct pdk__session_private){0};
}

static const char *holds(const char *what)
{
	if (strcmp(what, what_state) == 0)
		return "the token key, the audit store and its key, the change sets";
	return "the daemon's socket and the supervisors' control sockets";
}

/*
 * `path` (named `name` in the message; `canon`, its pdk_paths_canonical()) at or
 * under a private directory: -EINVAL, the caller's to change (the field "workspace"
 * for the workspace).
 */
static int refuse_inside(const struct pdk__session_private *priv, const char *name,
			 const char *path, const char *canon, struct pdk_error **err)
{
	for (size_t i = 0; priv->dirs != NULL && priv->dirs[i] != NULL; i++) {
		if (!pdk_paths_within(canon, priv->dirs[i]))
			continue;
		/* SECURITY: refused whoever asks: no view may show a private directory. */
		if (strcmp(priv->dirs[i], priv->origins[i]) != 0)
			return pdk_error_set_field(
				err, EINVAL, strcmp(name, "workspace") == 0 ? "workspace" : NULL,
				"%s '%s' lies inside '%s': %s '%s' mounted there (%s), which "
				"no sandbox may see: choose a path outside it",
				name, path, priv->dirs[i], priv->whats[i], priv->origins[i],
				holds(priv->whats[i]));
		return pdk_error_set_field(
			err, EINVAL, strcmp(name, "workspace") == 0 ? "workspace" : NULL,
			"%s '%s' lies inside %s '%s' (%s), which no sandbox may see: choose a "
			"path outside it",
			name, path, priv->whats[i], priv->dirs[i], holds(priv->whats[i]));
	}
	return 0;
}

/* A private directory under `canon` (canonical) not there yet is made, for the engine to hide. */
static int make_hidden(const struct pdk__session_private *priv, const char *canon,
		       struct pdk_error **err)
{
	struct stat st;

	for (size_t i = 0; priv->dirs != NULL && priv->dirs[i] != NULL; i++) {
		if (!pdk_paths_within(priv->dirs[i], canon) || stat(priv->dirs[i], &st) == 0)
			continue;
		if (pdk_paths_private_dir(priv->dirs[i], err) < 0)
			return -1;
	}
	return 0;
}

/*
 * SECURITY: `path` (named `name`; `canon`, its canonical path) holding a mount of the
 * host kernel's interfaces (a bind is recursive: /sys/fs/cgroup brings its hierarchies,
 * a directory with a procfs mounted under it brings that): -EINVAL naming both. One
 * that is on such a file system is refused by the engine (mount.c, refuse_kernel_fs()).
 */
static int refuse_kernel_mounts(const struct pdk__session_private *priv, const char *name,
				const char *path, const char *canon, struct pdk_error **err)
{
	for (size_t i = 0; priv->kernel != NULL && priv->kernel[i] != NULL; i++)
		if (strcmp(priv->kernel[i], canon) == 0)
			return pdk_error_set_field(
				err, EINVAL, strcmp(name, "workspace") == 0 ? "workspace" : NULL,
				"%s '%s' is a mount of an interface of the host's kernel (procfs, "
				"sysfs, cgroupfs, ...) that reaches past the sandbox's namespaces: "
				"choose another path",
				name, path);
		else if (pdk_paths_within(priv->kernel[i], canon))
			return pdk_error_set_field(
				err, EINVAL, strcmp(name, "workspace") == 0 ? "workspace" : NULL,
				"%s '%s' holds '%s', a mount of an interface of the host's kernel "
				"(procfs, sysfs, cgroupfs, ...) that reaches past the sandbox's "
				"namespaces: choose a path without it",
				name, path, priv->kernel[i]);
	return 0;
}

static int check_one(const struct pdk__session_private *priv, const char *name, const char *path,
		     struct pdk_error **err)
{
	_cleanup_free_ char *canon = pdk_paths_canonical(path);

	if (refuse_inside(priv, name, path, canon, err) < 0 ||
	    refuse_kernel_mounts(priv, name, path, canon, err) < 0)
		return -1;
	return make_hidden(priv, canon, err);
}

static int check_list(const struct pdk__session_private *priv, const char *name, char *const *paths,
		      struct pdk_error **err)
{
	for (size_t i = 0; paths != NULL && paths[i] != NULL; i++)
		if (check_one(priv, name, paths[i], err) < 0)
			return -1;
	return 0;
}

int pdk__session_check_view(const struct pdk__session_private *priv, const char *workspace,
			    const struct pdk_policy *p, char *const *extra_ro,
			    char *const *extra_rw, struct pdk_error **err)
{
	if (workspace != NULL && check_one(priv, "workspace", workspace, err) < 0)
		return -1;
	if (check_list(priv, "filesystem.read_only entry", p->read_only, err) < 0 ||
	    check_list(priv, "filesystem.read_write entry", p->read_write, err) < 0 ||
	    check_list(priv, "--ro", extra_ro, err) < 0 ||
	    check_list(priv, "--rw", extra_rw, err) < 0)
		return -1;
	return 0;
}
