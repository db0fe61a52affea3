/*
 * landlock.h - a Landlock ruleset that mirrors the sandbox's filesystem view.
 *
 * prepare() (parent) probes the ABI and records which paths (as seen
 * inside the sandbox, after pivot_root) get which access. apply_child()
 * runs in the child after pivot_root: it creates the ruleset, opens each
 * path with O_PATH, adds the rules, and restricts the thread. TCP bind
 * and connect are denied (ABI >= 4) unless pdk_landlock_allow_tcp() leaves
 * them to the network namespace; abstract unix sockets and signals are
 * scoped to the sandbox (ABI >= 6).
 */
#ifndef PDK_LANDLOCK_H
#define PDK_LANDLOCK_H

#include "common.h"
#include "base.h"
#include "child.h"

enum pdk_landlock_access {
	PDK_LANDLOCK_RO = 1,  /* read files and dirs, execute */
	PDK_LANDLOCK_RW = 2,  /* everything on files and dirs below */
	PDK_LANDLOCK_DEV = 3, /* a device node: read, write, ioctl */
};

struct pdk_landlock;

/*
 * Returns the kernel's Landlock ABI (>= 1), 0 when Landlock is not
 * available (not built or disabled at boot).
 */
int pdk_landlock_abi(void);

/* Start a ruleset description. NULL + *err when `required` and the ABI is 0. */
struct pdk_landlock *pdk_landlock_prepare(bool required, struct pdk_error **err);

/* Add a path as seen inside the sandbox. Copies path. */
void pdk_landlock_add_path(struct pdk_landlock *ll, const char *path, enum pdk_landlock_access a);

/*
 * Add a rule for an already-open fd (e.g. the init binary, which lives
 * outside the view): execute and read. The fd is borrowed and must stay open
 * until apply_child().
 */
void pdk_landlock_add_exec_fd(struct pdk_landlock *ll, int fd);

/*
 * Apply in the child. Paths that do not exist in the view are skipped.
 * 0, or -errno with *ce naming the call and the path (child.h); -EINVAL
 * without a ruleset. No-op returning 0 when the ruleset is disabled (ABI 0
 * and not required).
 */
PDK_MUST_CHECK int pdk_landlock_apply_child(const struct pdk_landlock *ll,
					    struct pdk_child_error *ce);

/*
 * pdk_landlock_apply_child(), keeping the ruleset: *ruleset gets its fd
 * (the caller owns it; -1 when the ruleset is disabled), which
 * pdk_landlock_restrict_fd_child() enforces on another process, the same
 * rules on the same inodes. 0, or -errno and *ce (then *ruleset is -1).
 */
PDK_MUST_CHECK int pdk_landlock_apply_keep_child(const struct pdk_landlock *ll, int *ruleset,
						 struct pdk_child_error *ce);

/*
 * Enforce the ruleset open on `ruleset` (from pdk_landlock_apply_keep_child())
 * on the calling thread: landlock_restrict_self(). The caller must have
 * set no_new_privs or hold CAP_SYS_ADMIN in its user namespace. No
 * allocation. 0, or -errno and *ce.
 */
PDK_MUST_CHECK int pdk_landlock_restrict_fd_child(int ruleset, struct pdk_child_error *ce);

/*
 * Leave TCP bind and connect alone: for a sandbox in a network namespace
 * of its own (modes none and allowlist: only lo, no route, so the
 * namespace confines TCP and the sandbox may serve on its own loopback),
 * and for network.mode host, where it shares the host's network on
 * purpose. Without this call every TCP bind and connect is denied (ABI >= 4).
 */
void pdk_landlock_allow_tcp(struct pdk_landlock *ll);

/*
 * Allow TCP connect to `port` only; bind stays denied. With ABI < 4
 * Landlock cannot filter TCP. The engine does not use it since the
 * network namespace confines TCP (see pdk_landlock_allow_tcp()); it is
 * kept for a sandbox that would share a namespace with others.
 */
void pdk_landlock_allow_tcp_connect_port(struct pdk_landlock *ll, uint16_t port);

/* ABI recorded at prepare (0 = disabled). */
int pdk_landlock_get_abi(const struct pdk_landlock *ll);

void pdk_landlock_free(struct pdk_landlock *ll);

#endif
