/*
 * proc.h - starting a process: the one clone() of paddock's library.
 */
#ifndef PDK_PROC_H
#define PDK_PROC_H

#include "common.h"
#include "error.h"

#include <sched.h>
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
 * fork(): a child with a copy of the caller's memory, for work that must
 * run with other credentials than the caller's and may allocate (the
 * supervisor's file helper). glibc's fork() leaves malloc usable in the
 * child of a threaded process; nothing else of another thread's state may
 * be relied on there. The child ends in _exit(). Returns the pid in the
 * parent, 0 in the child, or negative + *err.
 */
PDK_MUST_CHECK pid_t pdk_proc_fork(struct pdk_error **err);

#endif
