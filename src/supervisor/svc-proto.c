/*
 * svc-proto.c - framing of the daemon <-> supervisor control protocol:
 * one JSON object per SOCK_SEQPACKET packet, descriptors in SCM_RIGHTS.
 */
#include "common.h"
#include "base.h"
#include "svc-proto.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

union svc_cmsg {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int) * PDK_SVC_MAX_FDS)];
};

int pdk_svc_send(int sock, const json_t *msg, const int *fds, size_t nfds, struct pdk_error **err)
{
	_cleanup_free_ char *text = NULL;
	union svc_cmsg u;
	struct iovec iov;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	size_t len;
	ssize_t n;

	if (!json_is_object(msg))
		return pdk_error_setx(err, EINVAL, "control message: not a JSON object");
	if (nfds > PDK_SVC_MAX_FDS)
		return pdk_error_setx(err, EINVAL, "control message: %zu fds (at most %d)", nfds,
				      PDK_SVC_MAX_FDS);
	text = json_dumps(msg, JSON_COMPACT);
	if (text == NULL)
		pdk_oom();
	len = strlen(text);
	if (len > PDK_SVC_MAX_MSG)
		return pdk_error_setx(err, E2BIG, "control message: %zu bytes (at most %d)", len,
				      PDK_SVC_MAX_MSG);
	iov = (struct iovec){.iov_base = text, .iov_len = len};
	if (nfds > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(&u.h), fds, sizeof(int) * nfds);
	}
	n = TEMP_FAILURE_RETRY(sendmsg(sock, &mh, MSG_NOSIGNAL));
	if (n < 0)
		return pdk_error_set(err, errno, "cannot send a control message");
	if ((size_t)n != len)
		return pdk_error_setx(err, EPROTO, "control message: short send");
	return 0;
}

/* Take the descriptors of every SCM_RIGHTS header: up to `room` kept, the rest closed. */
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
				(void)close(fd);
		}
	}
	return kept;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		(void)close(fds[i]);
		fds[i] = -1;
	}
}

int pdk_svc_recv(int sock, json_t **msg, int *fds, size_t *nfds, struct pdk_error **err)
{
	_cleanup_free_ char *buf = pdk_xmalloc(PDK_SVC_MAX_MSG + 1);
	union svc_cmsg u;
	struct iovec iov = {.iov_base = buf, .iov_len = PDK_SVC_MAX_MSG + 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	size_t room = nfds != NULL ? *nfds : 0;
	size_t got;
	json_error_t jerr;
	ssize_t n;

	*msg = NULL;
	if (nfds != NULL)
		*nfds = 0;
	if (room > PDK_SVC_MAX_FDS)
		room = PDK_SVC_MAX_FDS;
	n = TEMP_FAILURE_RETRY(recvmsg(sock, &mh, MSG_CMSG_CLOEXEC));
	if (n < 0)
		return pdk_error_set(err, errno, "cannot receive a control message");
	got = take_fds(&mh, fds, room);
	if (n == 0 && got == 0)
		return 0;
	/* SECURITY: a packet cut short is never parsed: its end may be another request. */
	if ((size_t)n > PDK_SVC_MAX_MSG || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		close_all(fds, got);
		return pdk_error_setx(err, EMSGSIZE, "control message: truncated (limit %d bytes)",
				      PDK_SVC_MAX_MSG);
	}
	*msg = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
	if (*msg == NULL || !json_is_object(*msg)) {
		json_decref(*msg);
		*msg = NULL;
		close_all(fds, got);
		return pdk_error_setx(err, EBADMSG, "control message: not a JSON object");
	}
	if (nfds != NULL)
		*nfds = got;
	return 1;
}
