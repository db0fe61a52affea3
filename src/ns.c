#include "common.h"
#include "ns.h"
#include "util.h"

#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#if defined(__SANITIZE_ADDRESS__)
#define SPAWN_SHARE_VM 0 /* ASan cannot follow instrumented code onto a foreign stack */
#else
#define SPAWN_SHARE_VM CLONE_VM
#endif

#define SPAWN_STACK_SIZE (256 * 1024)

pid_t pdk_ns_spawn(uint64_t flags, int (*fn)(void *), void *arg, int *pidfd, struct pdk_error **err)
{
	int cflags = (int)flags | SPAWN_SHARE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD;
	void *stack = mmap(NULL, SPAWN_STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
	pid_t pid;
	int e;

	if (stack == MAP_FAILED)
		return pdk_error_set(err, errno, "cannot allocate the sandbox child's stack");
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

static int write_proc_self(const char *file, const char *data)
{
	int fd = TEMP_FAILURE_RETRY(open(file, O_WRONLY | O_CLOEXEC));
	int rc;

	if (fd < 0)
		return -errno;
	rc = pdk_write_all(fd, data, strlen(data));
	(void)close(fd);
	return rc;
}

int pdk_ns_write_idmaps_child(uid_t outer_uid, gid_t outer_gid, uid_t inner_uid, gid_t inner_gid,
			      const char **what)
{
	char line[64];
	int rc;

	*what = "/proc/self/setgroups";
	rc = write_proc_self(*what, "deny");
	if (rc < 0)
		return rc;
	*what = "/proc/self/uid_map";
	(void)snprintf(line, sizeof(line), "%u %u 1\n", inner_uid, outer_uid);
	rc = write_proc_self(*what, line);
	if (rc < 0)
		return rc;
	*what = "/proc/self/gid_map";
	(void)snprintf(line, sizeof(line), "%u %u 1\n", inner_gid, outer_gid);
	return write_proc_self(*what, line);
}

int pdk_ns_loopback_up_child(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = 0;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		rc = -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (rc == 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		rc = -errno;
	(void)close(fd);
	return rc;
}
