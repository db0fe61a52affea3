/*
 * ns.h - namespaces: spawn a child into new ones, id maps, loopback.
 */
#ifndef PDK_NS_H
#define PDK_NS_H

#include "common.h"
#include "error.h"

#include <sched.h>
#include <sys/types.h>

/* The namespaces of every sandbox (the cgroup one is entered later, see sandbox.c). */
#define PDK_NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS)

/*
 * Start `fn(arg)` in a child created with `flags` (namespaces) plus
 * CLONE_VFORK and CLONE_PIDFD, with SIGCHLD as exit signal. The call returns
 * only once the child has exec'd or exited: until then the parent is
 * suspended. Unless built with AddressSanitizer, the child also shares the
 * parent's memory (CLONE_VM, as posix_spawn does): no page tables to copy
 * and no copy-on-write faults, which makes sandbox start-up much cheaper.
 * So `fn` must not allocate, and must end in exec or _exit, never return.
 * Returns the child's pid (and *pidfd) or negative + *err.
 * This is the one place paddock creates processes (with init.c's fork()).
 */
PDK_MUST_CHECK pid_t pdk_ns_spawn(uint64_t flags, int (*fn)(void *), void *arg, int *pidfd,
				  struct pdk_error **err);

/*
 * In the child, right after clone: map `inner_uid`/`inner_gid` in the new
 * user namespace to the caller's `outer_uid`/`outer_gid`, and deny
 * setgroups(). 0 or -errno; *what names the file that failed.
 */
PDK_MUST_CHECK int pdk_ns_write_idmaps_child(uid_t outer_uid, gid_t outer_gid, uid_t inner_uid,
					     gid_t inner_gid, const char **what);

/* In the child: bring `lo` up in the (new) network namespace. 0 or -errno. */
PDK_MUST_CHECK int pdk_ns_loopback_up_child(void);

#endif
