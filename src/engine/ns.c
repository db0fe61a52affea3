#include "common.h"
#include "base.h"
#include "ns.h"

#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

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
			      struct pdk_child_error *ce)
{
	char uid_map[64], gid_map[64];
	const struct {
		const char *file, *data;
	} steps[] = {
		{"/proc/self/setgroups", "deny"},
		{"/proc/self/uid_map", uid_map},
		{"/proc/self/gid_map", gid_map},
	};

	(void)snprintf(uid_map, sizeof(uid_map), "%u %u 1\n", inner_uid, outer_uid);
	(void)snprintf(gid_map, sizeof(gid_map), "%u %u 1\n", inner_gid, outer_gid);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(steps); i++) {
		int rc = write_proc_self(steps[i].file, steps[i].data);

		if (rc < 0)
			return pdk_child_error_set(ce, -rc, "cannot write '%s'", steps[i].file);
	}
	return 0;
}

int pdk_ns_loopback_up_child(struct pdk_child_error *ce)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = 0;

	if (fd < 0)
		return pdk_child_error_set(ce, errno, "cannot bring up loopback");
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		rc = pdk_child_error_set(ce, errno, "cannot bring up loopback");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (rc == 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		rc = pdk_child_error_set(ce, errno, "cannot bring up loopback");
	(void)close(fd);
	return rc;
}
