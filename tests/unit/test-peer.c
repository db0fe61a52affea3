/*
 * test-peer.c - whether a unix socket's peer lives in our user and pid
 * namespaces (base/peer.h): our own are read once and kept, the peer's on
 * every call.
 */
#include "common.h"
#include "error.h"
#include "peer.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	cr_assert_not_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static int ask(int fd)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int rc = pdk_peer_in_our_namespaces(fd, &err);

	if (rc < 0 && err != NULL && err->status == ENOPROTOOPT)
		cr_skip_test("this kernel has no SO_PEERPIDFD (Linux 6.5)");
	cr_assert_geq(rc, 0, "%s", err ? err->msg : "");
	return rc;
}

Test(peer, our_own_process_is_in_our_namespaces_every_time)
{
	int sv[2], before;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(ask(sv[0]), 1, "first call");
	before = open_fds();
	for (int i = 0; i < 100; i++)
		cr_assert_eq(ask(sv[0]), 1, "call %d", i);
	cr_assert_eq(open_fds(), before, "no descriptor is left open by a call");
	close(sv[0]);
	close(sv[1]);
}

/* A child in a user namespace of its own connects after ours were kept: it is not us. */
Test(peer, a_peer_in_another_user_namespace_is_not_us_after_ours_are_kept)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int sv[2], lfd, cfd, go[2], status;
	socklen_t len;
	pid_t pid;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(ask(sv[0]), 1, "our namespaces are read and kept");
	(void)snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "pdk-test-peer-%d", (int)getpid());
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1));
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(lfd, 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, len), 0);
	cr_assert_eq(listen(lfd, 1), 0);
	cr_assert_eq(pipe(go), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd;
		char c;

		close(go[1]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(77);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0)
			_exit(1);
		/* Alive until the parent has asked (EOF when it closes its end). */
		_exit(read(go[0], &c, 1) < 0 ? 1 : 0);
	}
	close(go[0]);
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0) {
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			cr_skip_test("no user namespace can be made here");
		cr_assert_fail("the child could not connect");
	}
	cr_assert_eq(ask(cfd), 0, "a peer in its own user namespace is not in ours");
	cr_assert_eq(ask(sv[0]), 1, "and we still are");
	close(go[1]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	close(cfd);
	close(lfd);
	close(sv[0]);
	close(sv[1]);
}
