/*
 * paths.h - where paddock keeps its files, decided in one place.
 *
 *   state    what outlives a run: change sets, the audit store, the
 *            daemon's store and keys. $PADDOCK_STATE_DIR, else
 *            $XDG_STATE_HOME/paddock, else /var/lib/paddock for root,
 *            else ~/.local/state/paddock.
 *   runtime  what lives as long as its process: the daemon's socket, each
 *            sandbox's control socket, spool and scratch files.
 *            $PADDOCK_RUNTIME_DIR, else $XDG_RUNTIME_DIR/paddock, else
 *            /run/paddock for root, else /tmp/paddock-UID.
 *   profiles the user's profiles: $XDG_CONFIG_HOME/paddock/profiles, else
 *            ~/.config/paddock/profiles (none without either).
 *
 * The library reads no environment variable: a front end copies the ones
 * below into struct pdk_paths_env and resolves them here; everything under
 * it is handed the result.
 */
#ifndef PDK_PATHS_H
#define PDK_PATHS_H

#include "common.h"

#include <sys/types.h>

/* What the front end read (each NULL when unset). */
struct pdk_paths_env {
	const char *state_dir;       /* PADDOCK_STATE_DIR */
	const char *xdg_state_home;  /* XDG_STATE_HOME */
	const char *runtime_dir;     /* PADDOCK_RUNTIME_DIR */
	const char *xdg_runtime_dir; /* XDG_RUNTIME_DIR */
	const char *xdg_config_home; /* XDG_CONFIG_HOME */
	const char *home;            /* HOME */
	uid_t euid;
};

struct pdk_paths {
	char *state_dir;   /* never NULL once resolved */
	char *runtime_dir; /* never NULL once resolved */
	char *profile_dir; /* NULL when neither XDG_CONFIG_HOME nor HOME is an absolute path */
};

/* Fill *out (release with pdk_paths_release()) by the rules above. */
void pdk_paths_resolve(const struct pdk_paths_env *env, struct pdk_paths *out);

void pdk_paths_release(struct pdk_paths *p);

struct pdk_error;

/*
 * Make `path` (and its missing parents, mode 0700) and make sure it is a
 * directory of ours that no one else may write: owned by the effective uid
 * (else -EPERM naming the owner), not a symlink, group and other bits
 * cleared. A runtime directory under /tmp is where another user could
 * have been first. 0 or negative + *err.
 */
PDK_MUST_CHECK int pdk_paths_private_dir(const char *path, struct pdk_error **err);

/*
 * `path` (absolute) as the kernel resolves it: realpath() of it, or, when
 * it does not exist (yet), realpath() of its longest existing parent with
 * the rest appended. A new string. Two names of one directory through
 * symlinks give the same answer; two bind mounts of it do not.
 */
char *pdk_paths_canonical(const char *path);

/* Whether `path` is `dir` or lies under it (both canonical, pdk_paths_canonical()). */
bool pdk_paths_within(const char *path, const char *dir);

/*
 * Every path at which the directory `dir` (canonical) is in sight in the
 * mount namespace whose /proc/self/mountinfo is `mountinfo`: `dir` first,
 * then each place a mount of the same file system shows it (a bind mount
 * of it or of a directory above it, the file system mounted twice, a
 * btrfs subvolume mounted elsewhere) and no mount on top hides it. A NULL-
 * terminated list of new strings (pdk_strv_free()). A `dir` no mount holds
 * (a mountinfo of another namespace) gives itself alone. Lines that do not
 * parse are skipped. Symlinks are pdk_paths_canonical()'s business; hard
 * links to a file inside are no one's (a directory cannot have one).
 */
char **pdk_paths_aliases_in(const char *mountinfo, const char *dir);

/*
 * pdk_paths_aliases_in() for this process's mount namespace (/proc/self/mountinfo,
 * read once per call): 0 and *out, or -errno + *err naming the file.
 */
PDK_MUST_CHECK int pdk_paths_aliases(const char *dir, char ***out, struct pdk_error **err);

/*
 * The mount points in `mountinfo` of the host kernel's own interfaces: procfs,
 * sysfs, cgroupfs (v1 and v2), bpffs, debugfs, tracefs, securityfs, efivarfs,
 * configfs. A NULL-terminated list (NULL when there is none; pdk_strv_free()).
 */
char **pdk_paths_kernel_mounts_in(const char *mountinfo);

/*
 * The name (for messages: "procfs", "cgroupfs (v2)") of the kernel interface whose
 * mount type is `type` (as mountinfo says it), or, with `type` NULL, whose statfs()
 * magic is `magic`; NULL when it is none of them.
 */
const char *pdk_paths_kernel_fs(long magic, const char *type);

/*
 * The same two on a table parsed once (a session asks for several directories):
 * pdk_mounts_parse() never fails (lines that do not parse are skipped);
 * pdk_mounts_aliases() is pdk_paths_aliases_in(), pdk_mounts_kernel() is
 * pdk_paths_kernel_mounts_in().
 */
struct pdk_mounts;
struct pdk_mounts *pdk_mounts_parse(const char *mountinfo);
/* This process's table (/proc/self/mountinfo) parsed: 0 and *out, or -errno + *err. */
PDK_MUST_CHECK int pdk_mounts_read(struct pdk_mounts **out, struct pdk_error **err);
void pdk_mounts_free(struct pdk_mounts *t);
char **pdk_mounts_aliases(const struct pdk_mounts *t, const char *dir);
/* The table's text as it was read or given (NUL-terminated; valid until freed). */
const char *pdk_mounts_text(const struct pdk_mounts *t);
char **pdk_mounts_kernel(const struct pdk_mounts *t);

/*
 * Where paddock's helper binary `name` (paddock-init, paddock-otlp) is when
 * the front end was given no path for it (PADDOCK_INIT, PADDOCK_OTLP). The
 * first of these that is an executable file:
 *   1. DIR/NAME, DIR the running executable's directory (a build tree);
 *   2. DIR/../libexec/paddock/NAME (an installed tree, wherever it was put);
 *   3. PDK_LIBEXECDIR/NAME, compiled in: PREFIX/libexec/paddock of the
 *      build's prefix (`make install PREFIX=...`), for a paddock copied away
 *      from its tree.
 * When none is, the third, so that an error names where it was looked for.
 * A new string, never NULL.
 */
char *pdk_paths_helper(const char *name);

#endif
