/*
 * test-peer.c - whether a unix socket's peer lives in our user and pid
 * namespaces (base/peer.h): our own are read once and kept, the peer's on
 * every call.
 */
#include "common.h"
#include "error.h"
#include "peer.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
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
	before = pdk_test_open_fds();
	for (int i = 0; i < 100; i++)
		cr_assert_eq(ask(sv[0]), 1, "call %d", i);
	cr_assert_eq(pdk_test_open_fds(), before, "no descriptor is left open by a call");
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

/* ---- the kept check of one connection (pdk_peer_in_our_namespaces_kept) ---- */

static int ask_kept(struct pdk_peer_kept *k, int fd)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int rc = pdk_peer_in_our_namespaces_kept(k, fd, &err);

	if (rc < 0 && err != NULL && err->status == ENOPROTOOPT)
		cr_skip_test("this kernel has no SO_PEERPIDFD (Linux 6.5)");
	cr_assert_geq(rc, 0, "%s", err ? err->msg : "");
	return rc;
}

Test(peer, kept_our_own_process_one_descriptor_for_every_call)
{
	struct pdk_peer_kept k = PDK_PEER_KEPT_INIT;
	int sv[2], before;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	before = pdk_test_open_fds();
	cr_assert_eq(ask_kept(&k, sv[0]), 1, "first call");
	cr_assert_eq(pdk_test_open_fds(), before + 1, "the peer's pidfd is kept");
	for (int i = 0; i < 100; i++)
		cr_assert_eq(ask_kept(&k, sv[0]), 1, "call %d", i);
	cr_assert_eq(pdk_test_open_fds(), before + 1, "no descriptor is left open by a later call");
	pdk_peer_kept_release(&k);
	cr_assert_eq(pdk_test_open_fds(), before, "released with the connection");
	cr_assert_eq(k.pidfd, -1);
	close(sv[0]);
	close(sv[1]);
}

/* A listening abstract socket named after us and `tag`; *len gets its address length. */
static int listen_abstract(const char *tag, struct sockaddr_un *sa, socklen_t *len)
{
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*sa = (struct sockaddr_un){.sun_family = AF_UNIX};
	(void)snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "pdk-test-peer-%s-%d", tag,
		       (int)getpid());
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa->sun_path + 1));
	cr_assert_geq(lfd, 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)sa, *len), 0);
	cr_assert_eq(listen(lfd, 1), 0);
	return lfd;
}

/*
 * SECURITY: a peer that connected from our namespaces and then moved into a
 * user namespace of its own (unshare) is no longer us: the kept check reads
 * the user namespace again at every call, as the unkept one does.
 */
Test(peer, kept_a_peer_that_moves_to_another_user_namespace_is_no_longer_us)
{
	struct pdk_peer_kept k = PDK_PEER_KEPT_INIT;
	struct sockaddr_un sa;
	socklen_t len;
	int lfd = listen_abstract("moves", &sa, &len), cfd, to_child[2], to_parent[2], status;
	char c = 0;
	pid_t pid;

	cr_assert_eq(pipe(to_child), 0);
	cr_assert_eq(pipe(to_parent), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		close(to_child[1]);
		close(to_parent[0]);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0)
			_exit(1);
		/* Moved when the parent says so, after its first question. */
		if (read(to_child[0], &c, 1) != 1)
			_exit(1);
		c = unshare(CLONE_NEWUSER) == 0 ? 'm' : 's';
		if (write(to_parent[1], &c, 1) != 1)
			_exit(1);
		_exit(read(to_child[0], &c, 1) < 0 ? 1 : 0); /* alive until the parent is done */
	}
	close(to_child[0]);
	close(to_parent[1]);
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	cr_assert_geq(cfd, 0, "the child connects");
	cr_assert_eq(ask_kept(&k, cfd), 1, "connected from our namespaces: us");
	cr_assert_eq(write(to_child[1], "g", 1), 1);
	cr_assert_eq(read(to_parent[0], &c, 1), 1);
	if (c == 's') {
		close(to_child[1]);
		(void)waitpid(pid, &status, 0);
		cr_skip_test("no user namespace can be made here");
	}
	cr_assert_eq(ask_kept(&k, cfd), 0,
		     "the same connection, its peer now in its own user "
		     "namespace: not us any more");
	cr_assert_eq(ask_kept(&k, cfd), 0, "and again");
	close(to_child[1]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	pdk_peer_kept_release(&k);
	close(cfd);
	close(lfd);
}

/*
 * A peer in another pid namespace but our user namespace (made as root): not
 * us, from the first call on, and on every call after it.
 */
Test(peer, kept_a_peer_in_another_pid_namespace_is_not_us)
{
	struct pdk_peer_kept k = PDK_PEER_KEPT_INIT;
	struct sockaddr_un sa;
	socklen_t len;
	int lfd, cfd, go[2], status;
	pid_t pid;

	if (geteuid() != 0)
		cr_skip_test("a pid namespace without a user namespace needs root");
	lfd = listen_abstract("pidns", &sa, &len);
	cr_assert_eq(pipe(go), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		pid_t inner;
		char c;

		close(go[1]);
		if (unshare(CLONE_NEWPID) < 0)
			_exit(77);
		inner = fork(); /* pid 1 of the new namespace */
		if (inner == 0) {
			int fd = socket(AF_UNIX, SOCK_STREAM, 0);

			if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0)
				_exit(1);
			_exit(read(go[0], &c, 1) < 0 ? 1 : 0);
		}
		_exit(inner > 0 && waitpid(inner, &status, 0) == inner && WIFEXITED(status)
			      ? WEXITSTATUS(status)
			      : 1);
	}
	close(go[0]);
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0) {
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			cr_skip_test("no pid namespace can be made here");
		cr_assert_fail("the child could not connect");
	}
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ask_kept(&k, cfd), 0, "call %d: a peer in another pid namespace", i);
	cr_assert_eq(ask(cfd), 0, "the unkept check agrees");
	close(go[1]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	pdk_peer_kept_release(&k);
	close(cfd);
	close(lfd);
}
