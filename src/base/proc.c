/*
 * proc.c - the one place paddock creates processes (with the init's fork()).
 */
#include "common.h"
#include "error.h"
#include "proc.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SPAWN_SHARE_VM 0 /* ASan cannot follow instrumented code onto a foreign stack */
#else
#define SPAWN_SHARE_VM CLONE_VM
#endif

#define SPAWN_STACK_SIZE (256 * 1024)

pid_t pdk_proc_clone(uint64_t flags, int (*fn)(void *), void *arg, int *pidfd,
		     struct pdk_error **err)
{
	int cflags = (int)flags | SPAWN_SHARE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD;
	void *stack = mmap(NULL, SPAWN_STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
	pid_t pid;
	int e;

	if (stack == MAP_FAILED)
		return pdk_error_set(err, errno, "cannot allocate the child's stack");
	pid = clone(fn, (char *)stack + SPAWN_STACK_SIZE, cflags, arg, pidfd);
	e = errno;
	/* The child has exec'd or exited (CLONE_VFORK): its stack is ours again. */
	(void)munmap(stack, SPAWN_STACK_SIZE);
	if (pid >= 0)
		return pid;
	if (e == EPERM || e == ENOSPC || e == EUSERS)
		return pdk_error_set(
			err, e,
			"cannot create the sandbox's namespaces; unprivileged user namespaces may be disabled: check sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces and, on Ubuntu, kernel.apparmor_restrict_unprivileged_userns");
	return pdk_error_set(err, e, "clone into new namespaces");
}

pid_t pdk_proc_fork(struct pdk_error **err)
{
	pid_t pid = fork();

	if (pid < 0)
		return pdk_error_set(err, errno, "cannot fork");
	return pid;
}
