/*
 * proc.h - starting a process: the one clone() of paddock's library.
 */
#ifndef PDK_PROC_H
#define PDK_PROC_H

#include "common.h"
#include "error.h"

#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>

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
PDK_MUST_CHECK pid_t pdk_proc_clone(uint64_t flags, int (*fn)(void *), void *arg, int *pidfd,
				    struct pdk_error **err);

/*
 * pdk_proc_clone(), the child made in the cgroup2 directory `cgroup_fd` (an
 * O_RDONLY descriptor of it) by clone3()'s CLONE_INTO_CGROUP: it never runs
 * outside that cgroup, and nothing migrates (a migration takes the kernel's
 * cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period
 * when no migration happened just before: about 15 ms, at every start of
 * a `paddock run` not right after another; docs/internals/performance.md).
 * *into is set before the child runs (it may read it: it shares our memory):
 * true when it was made in the cgroup, false when the kernel could not (no
 * clone3 or CLONE_INTO_CGROUP, not a cgroup2 directory, any refusal), in
 * which case the child was made by pdk_proc_clone() and must join the cgroup
 * itself. Returns as pdk_proc_clone() does.
 */
PDK_MUST_CHECK pid_t pdk_proc_clone_into(uint64_t flags, int cgroup_fd, bool *into,
					 int (*fn)(void *), void *arg, int *pidfd,
					 struct pdk_error **err);

/*
 * fork(): a child with a copy of the caller's memory, for work that must
 * run with other credentials than the caller's and may allocate (the
 * supervisor's file helper). glibc's fork() leaves malloc usable in the
 * child of a threaded process; nothing else of another thread's state may
 * be relied on there. The child ends in _exit(). Returns the pid in the
 * parent, 0 in the child, or negative + *err.
 */
PDK_MUST_CHECK pid_t pdk_proc_fork(struct pdk_error **err);

#endif
