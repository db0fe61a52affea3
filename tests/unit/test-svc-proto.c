/*
 * test-svc-proto.c - framing of the daemon <-> supervisor control protocol.
 */
#include "common.h"
#include "json.h"
#include "svc-proto.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void pair(int sv[2])
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

Test(svc_proto, round_trip_with_fds)
{
	struct pdk_error *err = NULL;
	int sv[2], p[2], fds[PDK_SVC_MAX_FDS];
	size_t nfds = PDK_SVC_MAX_FDS;
	json_t *m =
		json_pack("{s:s, s:i, s:[s,s]}", "op", "exec", "req", 7, "argv", "echo", "h\"i\n");
	json_t *got = NULL;
	char buf[8] = {0};

	pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(pdk_svc_send(sv[0], m, p, 2, &err), 0);
	cr_assert_eq(pdk_svc_recv(sv[1], &got, fds, &nfds, &err), 1);
	cr_assert(json_equal(m, got), "the object comes back equal");
	cr_assert_eq(nfds, 2);
	/* The received write end is a new descriptor for the same pipe. */
	cr_assert_neq(fds[1], p[1]);
	cr_assert(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, "received fds are close-on-exec");
	cr_assert_eq(write(fds[1], "abc", 3), 3);
	cr_assert_eq(read(p[0], buf, sizeof(buf)), 3);
	cr_assert_str_eq(buf, "abc");
	json_decref(m);
	json_decref(got);
}

Test(svc_proto, extra_fds_are_closed)
{
	struct pdk_error *err = NULL;
	int sv[2], p[2], fds[1] = {-1};
	int send_fds[3];
	size_t nfds = 1;
	json_t *m = json_pack("{s:s}", "op", "status");
	json_t *got = NULL;
	char c;

	pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	send_fds[0] = send_fds[1] = send_fds[2] = p[1];
	cr_assert_eq(pdk_svc_send(sv[0], m, send_fds, 3, &err), 0);
	cr_assert_eq(pdk_svc_recv(sv[1], &got, fds, &nfds, &err), 1);
	cr_assert_eq(nfds, 1);
	/* Close every write end we know of: if an extra copy leaked, read() would block. */
	(void)close(p[1]);
	(void)close(fds[0]);
	cr_assert_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	cr_assert_eq(read(p[0], &c, 1), 0, "EOF: the two extra copies were closed");
	json_decref(m);
	json_decref(got);
}

Test(svc_proto, eof_is_zero)
{
	struct pdk_error *err = NULL;
	int sv[2], fds[1];
	size_t nfds = 1;
	json_t *got = (json_t *)1;

	pair(sv);
	(void)close(sv[0]);
	cr_assert_eq(pdk_svc_recv(sv[1], &got, fds, &nfds, &err), 0);
	cr_assert_null(got);
	cr_assert_eq(nfds, 0);
}

Test(svc_proto, oversized_send_refused)
{
	struct pdk_error *err = NULL;
	int sv[2];
	_cleanup_free_ char *big = pdk_xmalloc(PDK_SVC_MAX_MSG + 1);
	json_t *m;

	pair(sv);
	memset(big, 'a', PDK_SVC_MAX_MSG);
	big[PDK_SVC_MAX_MSG] = '\0';
	m = json_pack("{s:s}", "data", big);
	cr_assert_eq(pdk_svc_send(sv[0], m, NULL, 0, &err), -E2BIG);
	cr_assert_not_null(err);
	pdk_error_free(&err);
	json_decref(m);
}

Test(svc_proto, truncated_packet_is_an_error)
{
	struct pdk_error *err = NULL;
	int sv[2], fds[1];
	size_t nfds = 1;
	int sndbuf = 1 << 20;
	size_t len = PDK_SVC_MAX_MSG + 100;
	_cleanup_free_ char *raw = pdk_xmalloc(len);
	json_t *got = NULL;

	pair(sv);
	cr_assert_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
	/* A valid JSON object whose tail would be cut off. */
	memset(raw, ' ', len);
	raw[0] = '{';
	raw[len - 1] = '}';
	cr_assert_eq(send(sv[0], raw, len, 0), (ssize_t)len);
	cr_assert_eq(pdk_svc_recv(sv[1], &got, fds, &nfds, &err), -EMSGSIZE);
	cr_assert_null(got);
	pdk_error_free(&err);
}

Test(svc_proto, garbage_and_non_objects_refused)
{
	static const char *const bad[] = {"not json", "[1,2]", "\"s\"", "{\"a\":1,\"a\":2}",
					  "{\"a\":1} trailing"};
	struct pdk_error *err = NULL;
	int sv[2], p[2], fds[1] = {-1};

	pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(bad); i++) {
		size_t nfds = 1;
		json_t *got = NULL;
		struct msghdr mh = {0};
		struct iovec iov = {.iov_base = (void *)bad[i], .iov_len = strlen(bad[i])};
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int))];
		} u;

		memset(&u, 0, sizeof(u));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&u.h), &p[1], sizeof(int));
		cr_assert_eq(sendmsg(sv[0], &mh, 0), (ssize_t)strlen(bad[i]));
		cr_assert_eq(pdk_svc_recv(sv[1], &got, fds, &nfds, &err), -EBADMSG, "%s", bad[i]);
		cr_assert_null(got);
		cr_assert_eq(nfds, 0, "no fd handed out with a bad message");
		pdk_error_free(&err);
	}
	{
		char c;

		/* Every fd that came with a bad message was closed. */
		(void)close(p[1]);
		cr_assert_eq(read(p[0], &c, 1), 0);
	}
}

Test(svc_proto, send_to_closed_peer_is_epipe)
{
	struct pdk_error *err = NULL;
	int sv[2];
	json_t *m = json_pack("{s:s}", "ev", "exit");

	pair(sv);
	(void)close(sv[1]);
	/* MSG_NOSIGNAL: no SIGPIPE kills the test process. */
	cr_assert_eq(pdk_svc_send(sv[0], m, NULL, 0, &err), -EPIPE);
	pdk_error_free(&err);
	json_decref(m);
}
