/*
 * peer.c - the namespaces of a unix socket's peer (peer.h).
 */
#include "common.h"
#include "error.h"
#include "peer.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Newer than the C library's and the kernel headers' of some build hosts. */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef PIDFD_GET_PID_NAMESPACE
#define PIDFD_GET_PID_NAMESPACE _IO(0xFF, 5)
#endif
#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFD_GET_USER_NAMESPACE _IO(0xFF, 9)
#endif

/* A namespace's identity: the device and inode of its nsfs file. */
struct ns_id {
	dev_t dev;
	ino_t ino;
};

struct ns_pair {
	struct ns_id user, pid;
};

static bool ns_equal(const struct ns_pair *a, const struct ns_pair *b)
{
	return a->user.dev == b->user.dev && a->user.ino == b->user.ino &&
	       a->pid.dev == b->pid.dev && a->pid.ino == b->pid.ino;
}

/* The namespace `ioctl` of `pidfd` names: 0, or -errno (-ENOTTY before Linux 6.11). */
static int ns_of_pidfd(int pidfd, unsigned long request, struct ns_id *out)
{
	_cleanup_close_ int nsfd = ioctl(pidfd, request, 0);
	struct stat st;

	if (nsfd < 0 || fstat(nsfd, &st) < 0)
		return -errno;
	*out = (struct ns_id){st.st_dev, st.st_ino};
	return 0;
}

static int pair_of_pidfd(int pidfd, struct ns_pair *out)
{
	int rc = ns_of_pidfd(pidfd, PIDFD_GET_USER_NAMESPACE, &out->user);

	return rc < 0 ? rc : ns_of_pidfd(pidfd, PIDFD_GET_PID_NAMESPACE, &out->pid);
}

static int ns_of_proc(const char *pid, const char *name, struct ns_id *out)
{
	_cleanup_free_ char *path = pdk_xasprintf("/proc/%s/ns/%s", pid, name);
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	*out = (struct ns_id){st.st_dev, st.st_ino};
	return 0;
}

static int pair_of_proc(const char *pid, struct ns_pair *out)
{
	int rc = ns_of_proc(pid, "user", &out->user);

	return rc < 0 ? rc : ns_of_proc(pid, "pid", &out->pid);
}

/* The pid of `pidfd`'s process in our pid namespace, from its fdinfo: > 0, or -errno. */
static int pid_of_pidfd(int pidfd)
{
	_cleanup_free_ char *path = pdk_xasprintf("/proc/self/fdinfo/%d", pidfd);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	char line[128];
	int pid = 0;

	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Pid:\t%d", &pid) == 1)
			break;
	return pid > 0 ? pid : -ESRCH;
}

/*
 * Before Linux 6.11: /proc/PID/ns of the pidfd's pid, then the pidfd's process asked
 * whether it still lives. SECURITY: a process that is alive after the read had that pid
 * during the read (a pid is reused only once its process is reaped), so the files read
 * were its own and not those of a process that got the pid after it ended.
 */
static int pair_of_pidfd_proc(int pidfd, struct ns_pair *out)
{
	char pid[16];
	int n = pid_of_pidfd(pidfd);
	int rc;

	if (n < 0)
		return n;
	(void)snprintf(pid, sizeof(pid), "%d", n);
	rc = pair_of_proc(pid, out);
	if (rc < 0)
		return rc;
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0 && errno != EPERM)
		return -errno;
	return 0;
}

/*
 * Our own namespaces, read once per process: the daemon asks on every request
 * on its unix socket, and its own user and pid namespaces never change (it
 * calls neither unshare() nor setns(); peer.h says so to every caller). The
 * pid the pair was read for is kept with it, so a forked child reads its own.
 * `proc`: read them from /proc/self/ns (the kernel has no pidfd namespace
 * ioctl), else through a pidfd of our own, as the peer's were read.
 */
static int our_pair(bool proc, struct ns_pair *out)
{
	static struct {
		pid_t pid;
		bool proc;
		struct ns_pair pair;
	} cache;
	_cleanup_close_ int self = -1;
	pid_t pid = getpid();
	int rc;

	if (cache.pid == pid && cache.proc == proc) {
		*out = cache.pair;
		return 0;
	}
	if (proc) {
		rc = pair_of_proc("self", out);
	} else {
		self = (int)syscall(SYS_pidfd_open, pid, 0);
		rc = self < 0 ? -errno : pair_of_pidfd(self, out);
	}
	if (rc < 0)
		return rc;
	cache.pid = pid;
	cache.proc = proc;
	cache.pair = *out;
	return 0;
}

int pdk_peer_in_our_namespaces(int fd, struct pdk_error **err)
{
	_cleanup_close_ int pidfd = -1;
	socklen_t len = sizeof(pidfd);
	struct ns_pair peer, ours;
	int rc;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
		pidfd = -1;
		return pdk_error_set(err, errno, "cannot name the socket's peer (SO_PEERPIDFD)");
	}
	/* SECURITY: the peer's namespaces are read again on every call, never kept. */
	rc = pair_of_pidfd(pidfd, &peer);
	if (rc == -ENOTTY || rc == -EINVAL) {
		rc = pair_of_pidfd_proc(pidfd, &peer);
		if (rc == 0)
			rc = our_pair(true, &ours);
	} else if (rc == 0) {
		rc = our_pair(false, &ours);
	}
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot read the namespaces of the socket's peer");
	return ns_equal(&peer, &ours) ? 1 : 0;
}

int pdk_peer_in_our_namespaces_kept(struct pdk_peer_kept *k, int fd, struct pdk_error **err)
{
	socklen_t len = sizeof(k->pidfd);
	struct ns_pair ours;
	struct ns_id user;
	int rc;

	if (k->pidfd < 0 && getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &k->pidfd, &len) < 0) {
		k->pidfd = -1;
		return pdk_error_set(err, errno, "cannot name the socket's peer (SO_PEERPIDFD)");
	}
	/* SECURITY: the user namespace is read again on every call; only the pid one is kept. */
	rc = ns_of_pidfd(k->pidfd, PIDFD_GET_USER_NAMESPACE, &user);
	if (rc == -ENOTTY || rc == -EINVAL)
		return pdk_peer_in_our_namespaces(fd, err); /* before Linux 6.11: afresh */
	if (rc == 0 && k->pid_same < 0) {
		struct ns_id pid;

		rc = ns_of_pidfd(k->pidfd, PIDFD_GET_PID_NAMESPACE, &pid);
		if (rc == 0 && (rc = our_pair(false, &ours)) == 0)
			k->pid_same = pid.dev == ours.pid.dev && pid.ino == ours.pid.ino;
	}
	if (rc == 0)
		rc = our_pair(false, &ours);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot read the namespaces of the socket's peer");
	return k->pid_same == 1 && user.dev == ours.user.dev && user.ino == ours.user.ino ? 1 : 0;
}

void pdk_peer_kept_release(struct pdk_peer_kept *k)
{
	if (k->pidfd >= 0)
		(void)close(k->pidfd);
	*k = PDK_PEER_KEPT_INIT;
}
