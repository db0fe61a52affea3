/*
 * test-fdpass.c - one message with descriptors in SCM_RIGHTS (base/fdpass.h).
 */
#include "common.h"
#include "fdpass.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void pair(int sv[2])
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

/* A raw send of `n` copies of `fd`, beyond what pdk_fdpass_send() allows. */
static void send_many(int sock, int fd, size_t n)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 16)];
	} u;
	char byte = 'x';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = CMSG_SPACE(sizeof(int) * n)};

	cr_assert_leq(n, 16);
	memset(&u, 0, sizeof(u));
	u.h.cmsg_level = SOL_SOCKET;
	u.h.cmsg_type = SCM_RIGHTS;
	u.h.cmsg_len = CMSG_LEN(sizeof(int) * n);
	for (size_t i = 0; i < n; i++)
		memcpy(CMSG_DATA(&u.h) + i * sizeof(int), &fd, sizeof(int));
	cr_assert_eq(sendmsg(sock, &mh, 0), 1);
}

/* Every count from none to the most: the data and each descriptor arrive, close-on-exec. */
Test(fdpass, zero_to_max_fds)
{
	for (size_t n = 0; n <= PDK_FDPASS_MAX; n++) {
		int sv[2], p[2], send_fds[PDK_FDPASS_MAX], fds[PDK_FDPASS_MAX];
		size_t nfds = PDK_FDPASS_MAX;
		char buf[16] = {0};

		pair(sv);
		cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
		for (size_t i = 0; i < n; i++)
			send_fds[i] = p[1];
		cr_assert_eq(pdk_fdpass_send(sv[0], "hello", 5, send_fds, n), 5);
		cr_assert_eq(pdk_fdpass_recv(sv[1], buf, sizeof(buf), fds, &nfds, 0), 5);
		cr_assert_str_eq(buf, "hello");
		cr_assert_eq(nfds, n, "%zu fds sent, %zu received", n, nfds);
		for (size_t i = 0; i < nfds; i++) {
			char c = 0;

			cr_assert(fcntl(fds[i], F_GETFD) & FD_CLOEXEC,
				  "received fds are close-on-exec");
			cr_assert_eq(write(fds[i], "z", 1), 1);
			cr_assert_eq(read(p[0], &c, 1), 1);
			cr_assert_eq(c, 'z');
			(void)close(fds[i]);
		}
		(void)close(p[0]);
		(void)close(p[1]);
		(void)close(sv[0]);
		(void)close(sv[1]);
	}
}

Test(fdpass, too_many_to_send)
{
	int sv[2], fds[PDK_FDPASS_MAX + 1];

	pair(sv);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(fds); i++)
		fds[i] = sv[0];
	cr_assert_eq(pdk_fdpass_send(sv[0], "x", 1, fds, PDK_ARRAY_SIZE(fds)), -EINVAL);
}

/* More than the room: the first ones are kept, the rest closed. */
Test(fdpass, fds_beyond_the_room_are_closed)
{
	int sv[2], p[2], send_fds[3], fds[1] = {-1};
	size_t nfds = 1;
	char buf[4], c;
	int before;

	pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	send_fds[0] = send_fds[1] = send_fds[2] = p[1];
	before = pdk_test_open_fds();
	cr_assert_eq(pdk_fdpass_send(sv[0], "x", 1, send_fds, 3), 1);
	cr_assert_eq(pdk_fdpass_recv(sv[1], buf, sizeof(buf), fds, &nfds, 0), 1);
	cr_assert_eq(nfds, 1);
	cr_assert_eq(pdk_test_open_fds(), before + 1, "only the kept one is open");
	(void)close(fds[0]);
	(void)close(p[1]);
	cr_assert_eq(read(p[0], &c, 1), 0, "no copy of the write end is left");
}

/* More descriptors than a message may carry: refused whole, none left open. */
Test(fdpass, too_many_received_is_refused)
{
	int sv[2], p[2], fds[PDK_FDPASS_MAX];
	size_t nfds = PDK_FDPASS_MAX;
	char buf[4], c;
	int before;

	pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	before = pdk_test_open_fds();
	send_many(sv[0], p[1], PDK_FDPASS_MAX + 2);
	cr_assert_eq(pdk_fdpass_recv(sv[1], buf, sizeof(buf), fds, &nfds, 0), -EMSGSIZE);
	cr_assert_eq(nfds, 0);
	cr_assert_eq(pdk_test_open_fds(), before, "every received fd was closed");
	(void)close(p[1]);
	cr_assert_eq(read(p[0], &c, 1), 0);
}

/* A message longer than the buffer is refused, and its descriptors closed. */
Test(fdpass, truncated_message_is_refused)
{
	int sv[2], p[2], fds[2] = {-1, -1};
	size_t nfds = 2;
	char buf[4], c;
	int before;

	pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	before = pdk_test_open_fds();
	cr_assert_eq(pdk_fdpass_send(sv[0], "0123456789", 10, &p[1], 1), 10);
	cr_assert_eq(pdk_fdpass_recv(sv[1], buf, sizeof(buf), fds, &nfds, 0), -EMSGSIZE);
	cr_assert_eq(nfds, 0);
	cr_assert_eq(pdk_test_open_fds(), before);
	(void)close(p[1]);
	cr_assert_eq(read(p[0], &c, 1), 0);
}

/* MSG_NOSIGNAL: a peer gone is EPIPE, and no SIGPIPE ends the test process. */
Test(fdpass, peer_gone_is_epipe)
{
	int sv[2];

	pair(sv);
	(void)close(sv[1]);
	cr_assert_eq(pdk_fdpass_send(sv[0], "x", 1, &sv[0], 1), -EPIPE);
	cr_assert_eq(pdk_fdpass_send(sv[0], "x", 1, NULL, 0), -EPIPE);
}

Test(fdpass, end_of_file_is_zero)
{
	int sv[2], fds[1] = {-1};
	size_t nfds = 1;
	char buf[4];

	pair(sv);
	(void)close(sv[0]);
	cr_assert_eq(pdk_fdpass_recv(sv[1], buf, sizeof(buf), fds, &nfds, 0), 0);
	cr_assert_eq(nfds, 0);
}

Test(fdpass, empty_nonblocking_socket_is_eagain)
{
	int sv[2], fds[1] = {-1};
	size_t nfds = 1;
	char buf[4];

	pair(sv);
	cr_assert_eq(pdk_fdpass_recv(sv[1], buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT), -EAGAIN);
	cr_assert_eq(nfds, 0);
}

/* A receiver without room for descriptors still gets the data; what came is closed. */
Test(fdpass, no_room_closes_every_fd)
{
	int sv[2], p[2];
	size_t nfds = 0;
	char buf[4], c;

	pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(pdk_fdpass_send(sv[0], "ab", 2, &p[1], 1), 2);
	cr_assert_eq(pdk_fdpass_recv(sv[1], buf, sizeof(buf), NULL, &nfds, 0), 2);
	cr_assert_eq(nfds, 0);
	(void)close(p[1]);
	cr_assert_eq(read(p[0], &c, 1), 0);
}
