/*
 * proc.c - the one place paddock creates processes (with the init's fork()).
 */
#include "common.h"
#include "error.h"
#include "proc.h"

#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SPAWN_SHARE_VM 0 /* ASan cannot follow instrumented code onto a foreign stack */
#else
#define SPAWN_SHARE_VM CLONE_VM
#endif

#define SPAWN_STACK_SIZE (256 * 1024)

/* A stack for a child that shares our memory until its exec (unused without CLONE_VM). */
static void *spawn_stack(struct pdk_error **err)
{
	void *stack = mmap(NULL, SPAWN_STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);

	if (stack == MAP_FAILED) {
		(void)pdk_error_set(err, errno, "cannot allocate the child's stack");
		return NULL;
	}
	return stack;
}

/* pdk_proc_clone() on `stack`, which the caller unmaps once this returns. */
static pid_t clone_on(void *stack, uint64_t flags, int (*fn)(void *), void *arg, int *pidfd,
		      struct pdk_error **err)
{
	int cflags = (int)flags | SPAWN_SHARE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD;
	pid_t pid = clone(fn, (char *)stack + SPAWN_STACK_SIZE, cflags, arg, pidfd);
	int e = errno;

	/* The child has exec'd or exited (CLONE_VFORK): its stack is ours again. */
	if (pid >= 0)
		return pid;
	if (e == EPERM || e == ENOSPC || e == EUSERS)
		return pdk_error_set(
			err, e,
			"cannot create the sandbox's namespaces; unprivileged user namespaces may be disabled: check sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces and, on Ubuntu, kernel.apparmor_restrict_unprivileged_userns");
	return pdk_error_set(err, e, "clone into new namespaces");
}

pid_t pdk_proc_clone(uint64_t flags, int (*fn)(void *), void *arg, int *pidfd,
		     struct pdk_error **err)
{
	void *stack = spawn_stack(err);
	pid_t pid;

	if (stack == NULL)
		return -ENOMEM;
	pid = clone_on(stack, flags, fn, arg, pidfd, err);
	(void)munmap(stack, SPAWN_STACK_SIZE);
	return pid;
}

/*
 * clone3() has no glibc wrapper: with CLONE_VM the child starts on the stack
 * given in `ca`, so it cannot return into the C code that called the system
 * call. On x86-64 it calls fn(arg) from there and ends with SYS_exit; fn and
 * arg ride in r12 and r13, which the system call leaves alone. Returns the
 * child's pid, or -errno. Elsewhere (and under ASan, without CLONE_VM: the
 * child runs on a copy of our stack) the child returns from syscall() as a
 * forked one does.
 */
#if defined(__x86_64__) && SPAWN_SHARE_VM != 0
static long raw_clone3(struct clone_args *ca, int (*fn)(void *), void *arg)
{
	register int (*r12)(void *) __asm__("r12") = fn;
	register void *r13 __asm__("r13") = arg;
	long rc;

	__asm__ volatile("syscall\n\t"
			 "testq %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xorl %%ebp, %%ebp\n\t"
			 "movq %%r13, %%rdi\n\t"
			 "callq *%%r12\n\t"
			 "movl %%eax, %%edi\n\t"
			 "movl %[nr_exit], %%eax\n\t"
			 "syscall\n\t"
			 "ud2\n\t"
			 "1:"
			 : "=a"(rc)
			 : "0"((long)SYS_clone3), "D"(ca), "S"(sizeof(*ca)), "r"(r12),
			   "r"(r13), [nr_exit] "i"(SYS_exit)
			 : "rcx", "r11", "memory", "cc");
	return rc;
}
#else
static long raw_clone3(struct clone_args *ca, int (*fn)(void *), void *arg)
{
	long rc;

	if (ca->flags & CLONE_VM)
		return -ENOSYS; /* no trampoline for this architecture: pdk_proc_clone() */
	rc = syscall(SYS_clone3, ca, sizeof(*ca));
	if (rc == 0)
		_exit(fn(arg));
	return rc < 0 ? -errno : rc;
}
#endif

pid_t pdk_proc_clone_into(uint64_t flags, int cgroup_fd, bool *into, int (*fn)(void *), void *arg,
			  int *pidfd, struct pdk_error **err)
{
	void *stack = spawn_stack(err);
	struct clone_args ca = {
		.flags = flags | SPAWN_SHARE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP,
		.pidfd = (uint64_t)(uintptr_t)pidfd,
		.exit_signal = SIGCHLD,
		.stack = SPAWN_SHARE_VM ? (uint64_t)(uintptr_t)stack : 0,
		.stack_size = SPAWN_SHARE_VM ? SPAWN_STACK_SIZE : 0,
		.cgroup = (uint64_t)cgroup_fd,
	};
	long pid;

	if (stack == NULL)
		return -ENOMEM;
	/* Before the call: the child reads it (our memory, or its copy of it). */
	*into = true;
	pid = raw_clone3(&ca, fn, arg);
	/*
	 * No clone3 (Linux < 5.3), no CLONE_INTO_CGROUP (< 5.7), a directory that is not
	 * a cgroup2 one (a test's fake tree), or any other refusal: no child was made. The
	 * usual clone on the same stack, and the child joins its cgroup itself; its errors
	 * are the ones said.
	 */
	if (pid <= 0) {
		*into = false;
		pid = clone_on(stack, flags, fn, arg, pidfd, err);
	}
	(void)munmap(stack, SPAWN_STACK_SIZE); /* the child has exec'd or exited (CLONE_VFORK) */
	return (pid_t)pid;
}

pid_t pdk_proc_fork(struct pdk_error **err)
{
	pid_t pid = fork();

	if (pid < 0)
		return pdk_error_set(err, errno, "cannot fork");
	return pid;
}
