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
