/*
 * fdpass.c - one message with descriptors in SCM_RIGHTS (fdpass.h).
 *
 * libc only: this file is also compiled into the static paddock-init.
 */
#include "common.h"
#include "fdpass.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

union fdpass_cmsg {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int) * PDK_FDPASS_MAX)];
};

ssize_t pdk_fdpass_send(int sock, const void *data, size_t len, const int *fds, size_t nfds)
{
	union fdpass_cmsg u;
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (nfds > PDK_FDPASS_MAX)
		return -EINVAL;
	if (nfds > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(&u.h), fds, sizeof(int) * nfds);
	}
	/* MSG_NOSIGNAL: a peer that went away is EPIPE; SIGPIPE would end the sender. */
	n = TEMP_FAILURE_RETRY(sendmsg(sock, &mh, MSG_NOSIGNAL));
	return n < 0 ? -errno : n;
}

/*
 * Take the descriptors of every SCM_RIGHTS header, in order: up to `room`
 * stored, the rest closed. Returns how many were stored.
 */
static size_t take_fds(struct msghdr *mh, int *fds, size_t room)
{
	size_t kept = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (kept < room)
				fds[kept++] = fd;
			else
				(void)close(fd); /* not wanted: nothing to report */
		}
	}
	return kept;
}

ssize_t pdk_fdpass_recv(int sock, void *data, size_t cap, int *fds, size_t *nfds, int flags)
{
	union fdpass_cmsg u;
	struct iovec iov = {.iov_base = data, .iov_len = cap};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	size_t room = *nfds < PDK_FDPASS_MAX ? *nfds : PDK_FDPASS_MAX;
	size_t got;
	ssize_t n;

	*nfds = 0;
	n = TEMP_FAILURE_RETRY(recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC));
	if (n < 0)
		return -errno;
	got = take_fds(&mh, fds, room);
	/*
	 * SECURITY: a message cut short is never handed on: its end may be
	 * another request, and its missing descriptors would shift the rest.
	 */
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		while (got > 0) {
			(void)close(fds[--got]);
			fds[got] = -1;
		}
		return -EMSGSIZE;
	}
	*nfds = got;
	return n;
}
