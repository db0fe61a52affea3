#include "common.h"
#include "ns.h"
#include "util.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

pid_t pdk_ns_clone(uint64_t flags, int *pidfd, struct pdk_error **err)
{
	struct clone_args args;
	long pid;

	memset(&args, 0, sizeof(args));
	args.flags = flags | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	args.exit_signal = SIGCHLD;
	pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		int e = errno;

		if (e == EPERM || e == ENOSPC || e == EUSERS)
			return pdk_error_set(
				err, e,
				"cannot create the sandbox's namespaces (clone3); unprivileged user namespaces may be disabled: check sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces and, on Ubuntu, kernel.apparmor_restrict_unprivileged_userns");
		return pdk_error_set(err, e, "clone3 into new namespaces");
	}
	return (pid_t)pid;
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
