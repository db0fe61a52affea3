/*
 * mount.h - the sandbox's filesystem view.
 *
 * The parent turns the policy into a flat list of mount operations (a
 * "plan"), with every host path checked (missing optional paths dropped,
 * symlinks replicated as symlinks) and every string precomputed. The child
 * replays the plan after clone:
 *   1. make every inherited mount a slave (nothing propagates to the host);
 *   2. a scratch tmpfs on /tmp becomes the root, the host root moves to
 *      /oldroot (bubblewrap's trick, so host /tmp stays reachable as a source);
 *   3. a fresh tmpfs at /newroot receives the binds, /proc, /dev, tmpfs
 *      dirs and the generated /etc files;
 *   4. pivot_root into /newroot and detach everything else;
 *   5. the root tmpfs is made read-only.
 * The same plan yields the Landlock rules that mirror the view.
 *
 * With an image (spec.root_layers), step 3's root is not an empty tmpfs
 * but an overlay of the image's layers (read-only, shared with every
 * sandbox on the image) under a writable layer of the sandbox's own on a
 * tmpfs, and nothing of the host's /usr, /bin or /etc is bound: the
 * sandbox sees the image, the generated /etc/hosts and /etc/hostname,
 * its workspace and the binds it asked for. The image's own files may be
 * symlinks that lead anywhere: every mount point is reached through the
 * tree without following one (a symlink on the way fails the start; one
 * in place of a generated file is replaced in the writable layer).
 */
#ifndef PDK_MOUNT_H
#define PDK_MOUNT_H

#include "common.h"
#include "base.h"
#include "child.h"
#include "landlock.h"
#include "policy.h"

#include <stdio.h>
#include <sys/types.h>

struct pdk_mount_spec {
	const struct pdk_policy *policy; /* borrowed */
	const char *workspace;           /* absolute host path, or NULL for none */
	const char *ws_view;             /* where the sandbox sees it; NULL: at `workspace` */
	enum pdk_ws_mode ws_mode;
	/* PDK_WS_OVERLAY: the layers (workspace.h), host paths. */
	char *const *ws_lowers; /* topmost first, the workspace last */
	const char *ws_upper;
	const char *ws_work;
	uint64_t ws_disk; /* bytes: upper and work live on a tmpfs of this size (0: on disk) */
	/*
	 * An upper layer on disk is mounted `volatile` (Linux 5.10; an older
	 * kernel mounts it as before): overlayfs syncs nothing, not at an
	 * fsync() inside, not at its unmount, and marks its work directory;
	 * the caller syncs a set that holds changes and removes the mark
	 * (pdk_ws_settle()).
	 */
	bool ws_volatile;
	char *const *extra_ro; /* more host paths bound read-only (may be NULL) */
	char *const *extra_rw; /* more host paths bound read-write (may be NULL) */
	char *const *ro_files; /* pairs: host file, path inside it is bound over read-only */
	/*
	 * Host directories no sandbox may see (the state and runtime directories,
	 * canonical: pdk_paths_canonical()). Each one that lies in a bind or the
	 * workspace is hidden there by an empty read-only tmpfs, mounted through a
	 * path with no symlink; one that is not there to hide fails the plan's
	 * replay. Binds inside them are the caller's to refuse (session/).
	 */
	char *const *private_dirs;
	uid_t uid; /* the user inside (== the caller's uid) */
	gid_t gid;
	const char *user_name; /* for the generated /etc/passwd */
	const char *hostname;
	/*
	 * The sandbox has a network namespace of its own: /etc/resolv.conf
	 * names its name server (dns.h) instead of any host file.
	 */
	bool own_net;
	/*
	 * The root is an image (image/image.h): its layers' host paths, topmost
	 * first; NULL: the host-rootfs view. `root_size` bounds what the sandbox
	 * writes to its root (bytes of the tmpfs under it; 0: the tmpfs default).
	 */
	char *const *root_layers;
	uint64_t root_size;
	/*
	 * An image being built (session/build.h): the writable layer is the host
	 * directory `root_rw_dir`, which holds `upper` and `work` (overlayfs'),
	 * instead of a tmpfs, and the caller keeps it: `upper` becomes the step's
	 * layer. No file of paddock's own (/etc/hostname, /etc/hosts,
	 * /etc/resolv.conf) is written into such a root: it would become part of
	 * the image. NULL: a tmpfs.
	 */
	const char *root_rw_dir;
};

struct pdk_mount_plan;

/*
 * Resolve the policy into a plan; add the matching Landlock rules to `ll`
 * (may be NULL). Fails when a required source (the workspace, an explicit
 * extra bind) is missing, or a path is not absolute.
 */
struct pdk_mount_plan *pdk_mount_plan_new(const struct pdk_mount_spec *spec,
					  struct pdk_landlock *ll, struct pdk_error **err);

/*
 * Replay the plan in the child (new user + mount namespace, before
 * Landlock and seccomp). 0, or -errno with *ce naming the operation, the
 * paths and the errno (child.h). No allocation. *upper_fd receives a
 * directory fd of the tmpfs that holds a disk-limited workspace's upper
 * layer (it outlives the sandbox's mounts), else -1.
 */
PDK_MUST_CHECK int pdk_mount_apply_child(const struct pdk_mount_plan *plan, int *upper_fd,
					 struct pdk_child_error *ce);

/*
 * Internals of a file bind whose destination is a symlink (a trust bundle
 * path that is a link on this system), exposed for the unit tests. Both
 * allocate nothing: they run in the sandbox's child.
 *
 * pdk__mount_file_target_at(): the regular file that `path` (relative to
 * `rootfd`, a leading '/' ignored) names as the sandbox will see it: every
 * symlink is followed inside `rootfd` (openat2 RESOLVE_IN_ROOT: an absolute
 * target or ".." cannot leave the root; magic links are refused). When the
 * last link of the chain dangles, its target is created inside the root: an
 * empty file, mode 0644, missing parent directories 0755. Returns an O_PATH
 * fd (caller closes), or -errno: ELOOP past 8 links, EINVAL when the target
 * is not a regular file, EROFS and the like when it cannot be created.
 *
 * pdk__mount_bind_onto(): bind `src` (a file) onto the file `target_fd` (an
 * O_PATH fd) with the mount attributes `attr` (MOUNT_ATTR_*), through
 * open_tree() and move_mount(). 0, or -1 with errno set.
 */
int pdk__mount_file_target_at(int rootfd, const char *path);
int pdk__mount_bind_onto(const char *src, int target_fd, uint64_t attr);

/* Number of operations (tests, stats). */
size_t pdk_mount_plan_len(const struct pdk_mount_plan *plan);

/* Write the plan, one operation a line, for `paddock run --dry-run`-style debugging. */
void pdk_mount_plan_print(const struct pdk_mount_plan *plan, FILE *out);

void pdk_mount_plan_free(struct pdk_mount_plan *plan);

#endif
