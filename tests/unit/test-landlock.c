/*
 * test-landlock.c - the ruleset restricts a real process.
 *
 * Each Test restricts its own Criterion process. Files live in a fresh
 * directory under /tmp; once restricted, the test can no longer remove it,
 * so a helper process forked before the restriction removes it when the
 * test process exits.
 */
#include "common.h"
#include "landlock.h"
#include "util.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

extern char **environ;

static char base[64];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	(void)remove(path); /* best effort: keep going */
	return 0;
}

/* Fork a helper that removes `dir` once this process (the write end's only holder) exits. */
static void remove_at_exit(const char *dir)
{
	int p[2];
	pid_t pid;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char c;

		(void)close(p[1]);
		while (read(p[0], &c, 1) > 0)
			;
		(void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		_exit(0);
	}
	(void)close(p[0]);
	/* p[1] stays open (close-on-exec) until this process exits. */
}

static void make_base(void)
{
	(void)snprintf(base, sizeof(base), "/tmp/paddock-ll-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	remove_at_exit(base);
}

static void copy_file(const char *from, const char *to)
{
	char chunk[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ssize_t n;

	cr_assert(in >= 0 && out >= 0);
	while ((n = read(in, chunk, sizeof(chunk))) > 0)
		cr_assert_eq(pdk_write_all(out, chunk, n), 0);
	cr_assert_eq(n, 0);
	(void)close(in);
	cr_assert_eq(close(out), 0);
}

static int need_abi(int want)
{
	int abi = pdk_landlock_abi();

	if (abi >= want)
		return abi;
	if (getenv("PDK_MUST_WORK") && strcmp(getenv("PDK_MUST_WORK"), "1") == 0)
		cr_assert_fail("Landlock ABI %d < %d and PDK_MUST_WORK=1", abi, want);
	cr_skip_test("the kernel's Landlock ABI is %d, this test needs %d", abi, want);
	return 0;
}

static struct pdk_landlock *prepare(void)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_landlock *ll = pdk_landlock_prepare(true, &err);

	cr_assert_not_null(ll, "prepare: %s", err ? err->msg : "?");
	return ll;
}

static void restrict_self(struct pdk_landlock *ll)
{
	struct pdk_child_error ce = {0};

#if defined(__SANITIZE_ADDRESS__)
	/* LeakSanitizer reads /proc/self/maps at exit, which the ruleset hides. */
	__lsan_do_leak_check();
#endif
	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	cr_assert_eq(pdk_landlock_apply_child(ll, &ce), 0, "apply: %s", ce.msg);
	pdk_landlock_free(ll);
}

#define assert_errno(call, e)                                                                     \
	do {                                                                                      \
		errno = 0;                                                                        \
		long r__ = (long)(call);                                                          \
		cr_assert(r__ == -1 && errno == (e), "%s: got %ld errno %d (%s), want %d", #call, \
			  r__, errno, strerror(errno), (e));                                      \
	} while (0)

/* Run argv[0] (by path, or by fd when fd >= 0) in a child; its wait status or -errno of exec. */
static int run(const char *path, int fd)
{
	char *const argv[] = {(char *)"true", NULL};
	int p[2], err = 0, st = 0;
	pid_t pid;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (fd >= 0)
			(void)execveat(fd, "", argv, environ, AT_EMPTY_PATH);
		else
			(void)execve(path, argv, environ);
		err = errno;
		(void)!write(p[1], &err, sizeof(err));
		_exit(127);
	}
	(void)close(p[1]);
	if (read(p[0], &err, sizeof(err)) != sizeof(err))
		err = 0;
	(void)close(p[0]);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return err ? -err : st;
}

Test(landlock, abi_is_recorded)
{
	struct pdk_landlock *ll;
	int abi = need_abi(1);

	ll = prepare();
	cr_assert_eq(pdk_landlock_get_abi(ll), abi);
	pdk_landlock_free(ll);
	ll = pdk_landlock_prepare(false, NULL);
	cr_assert_eq(pdk_landlock_get_abi(ll), abi);
	pdk_landlock_free(ll);
	cr_assert_eq(pdk_landlock_get_abi(NULL), 0);
	cr_assert_eq(pdk_landlock_apply_child(NULL, NULL), -EINVAL);
}

Test(landlock, filesystem_view)
{
	struct pdk_landlock *ll;
	char buf[4];
	int fd;

	need_abi(1);
	make_base();
	cr_assert_eq(mkdir(pdk_test_path(base, "rw"), 0700), 0);
	ll = prepare();
	pdk_landlock_add_path(ll, "/usr", PDK_LANDLOCK_RO);
	pdk_landlock_add_path(ll, pdk_test_path(base, "rw"), PDK_LANDLOCK_RW);
	pdk_landlock_add_path(ll, "/nonexistent-paddock-test", PDK_LANDLOCK_RO); /* skipped */
	restrict_self(ll);

	fd = open("/usr/bin/true", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(read(fd, buf, 4), 4);
	cr_assert_eq(memcmp(buf, "\177ELF", 4), 0);
	(void)close(fd);
	cr_assert_eq(run("/usr/bin/true", -1), 0, "executing under /usr");
	assert_errno(open("/etc/hostname", O_RDONLY | O_CLOEXEC), EACCES);
	assert_errno(open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), EACCES);

	fd = open(pdk_test_path(base, "rw/f"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "create in the rw dir: %s", strerror(errno));
	cr_assert_eq(pdk_write_all(fd, "data", 4), 0);
	(void)close(fd);
	cr_assert_eq(mkdir(pdk_test_path(base, "rw/d"), 0700), 0);
	cr_assert_eq(rename(pdk_test_path(base, "rw/f"), pdk_test_path(base, "rw/d/g")), 0);
	cr_assert_eq(unlink(pdk_test_path(base, "rw/d/g")), 0);

	/* Opening for write without O_TRUNC would change nothing even if it were allowed. */
	assert_errno(open("/usr/bin/true", O_WRONLY | O_CLOEXEC), EACCES);
	assert_errno(mkdir(pdk_test_path(base, "outside-dir"), 0700), EACCES);
	assert_errno(open(pdk_test_path(base, "outside"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600),
		     EACCES);
}

Test(landlock, file_and_device_rules)
{
	struct pdk_landlock *ll;
	int fd;

	need_abi(1);
	ll = prepare();
	/* Rules on non-directories get only the file rights (else EINVAL). */
	pdk_landlock_add_path(ll, "/etc/hostname", PDK_LANDLOCK_RW);
	pdk_landlock_add_path(ll, "/dev/null", PDK_LANDLOCK_DEV);
	restrict_self(ll);

	fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s", strerror(errno));
	(void)close(fd);
	assert_errno(open("/etc/hosts", O_RDONLY | O_CLOEXEC), EACCES);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s", strerror(errno));
	cr_assert_eq(pdk_write_all(fd, "x", 1), 0);
	(void)close(fd);
	assert_errno(open("/dev/zero", O_RDONLY | O_CLOEXEC), EACCES);
}

Test(landlock, error_names_the_path)
{
	struct pdk_landlock *ll;
	struct pdk_child_error ce = {0};

	need_abi(1);
	ll = prepare();
	/* An nsfs file cannot carry a rule: landlock_add_rule says EBADFD. */
	pdk_landlock_add_path(ll, "/proc/self/ns/uts", PDK_LANDLOCK_RO);
	cr_assert_eq(pdk_landlock_apply_child(ll, &ce), -EBADFD);
	cr_assert_eq(ce.err, EBADFD);
	cr_assert_str_eq(ce.msg,
			 "landlock_add_rule '/proc/self/ns/uts': File descriptor in bad state");
	pdk_landlock_free(ll);
}

static int tcp_listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(s, 0);
	*addr = (struct sockaddr_in){.sin_family = AF_INET,
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert_eq(bind(s, (struct sockaddr *)addr, sizeof(*addr)), 0);
	cr_assert_eq(listen(s, 8), 0);
	cr_assert_eq(getsockname(s, (struct sockaddr *)addr, &len), 0);
	return s;
}

static int tcp_connect(const struct sockaddr_in *addr)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	cr_assert_geq(c, 0);
	rc = connect(c, (const struct sockaddr *)addr, sizeof(*addr));
	(void)close(c);
	return rc;
}

Test(landlock, tcp_bind_and_connect_denied)
{
	struct sockaddr_in addr, any = {.sin_family = AF_INET};
	int l, s;

	need_abi(4);
	l = tcp_listener(&addr);
	cr_assert_eq(tcp_connect(&addr), 0, "connect before restricting: %s", strerror(errno));
	restrict_self(prepare());
	assert_errno(tcp_connect(&addr), EACCES);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s, 0);
	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_errno(bind(s, (struct sockaddr *)&any, sizeof(any)), EACCES);
	(void)close(l);
}

Test(landlock, tcp_connect_to_one_port_only)
{
	struct sockaddr_in allowed, other, any = {.sin_family = AF_INET};
	struct pdk_landlock *ll;
	int l1, l2, s;

	need_abi(4);
	l1 = tcp_listener(&allowed);
	l2 = tcp_listener(&other);
	ll = prepare();
	pdk_landlock_allow_tcp_connect_port(ll, ntohs(allowed.sin_port));
	restrict_self(ll);
	cr_assert_eq(tcp_connect(&allowed), 0, "the allowed port: %s", strerror(errno));
	assert_errno(tcp_connect(&other), EACCES);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s, 0);
	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	any.sin_port = allowed.sin_port;
	assert_errno(bind(s, (struct sockaddr *)&any, sizeof(any)), EACCES);
	(void)close(s);
	(void)close(l1);
	(void)close(l2);
}

static socklen_t abstract_addr(struct sockaddr_un *a)
{
	int n;

	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "paddock-ll-%d", (int)getpid());
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

static int unix_connect(const struct sockaddr_un *a, socklen_t len)
{
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	cr_assert_geq(c, 0);
	rc = connect(c, (const struct sockaddr *)a, len);
	(void)close(c);
	return rc;
}

Test(landlock, abstract_unix_socket_scoped)
{
	struct sockaddr_un a;
	socklen_t len = abstract_addr(&a);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	need_abi(6);
	cr_assert_geq(l, 0);
	cr_assert_eq(bind(l, (struct sockaddr *)&a, len), 0);
	cr_assert_eq(listen(l, 8), 0);
	cr_assert_eq(unix_connect(&a, len), 0, "connect before restricting: %s", strerror(errno));
	restrict_self(prepare());
	assert_errno(unix_connect(&a, len), EPERM);
	(void)close(l);
}

Test(landlock, signals_scoped)
{
	pid_t child;
	int st = 0;

	need_abi(6);
	cr_assert_eq(kill(getppid(), 0), 0);
	restrict_self(prepare());
	assert_errno(kill(getppid(), 0), EPERM);
	/* Inside the domain, signals still work. */
	cr_assert_eq(kill(getpid(), 0), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	cr_assert_eq(kill(child, SIGKILL), 0);
	cr_assert_eq(waitpid(child, &st, 0), child);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

Test(landlock, exec_fd_rule)
{
	struct pdk_landlock *ll;
	int fd;

	need_abi(1);
	make_base();
	copy_file("/usr/bin/true", pdk_test_path(base, "init"));
	copy_file("/usr/bin/true", pdk_test_path(base, "other"));
	fd = open(pdk_test_path(base, "init"), O_PATH | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	ll = prepare();
	pdk_landlock_add_path(ll, "/usr", PDK_LANDLOCK_RO); /* the dynamic loader and libc */
	pdk_landlock_add_exec_fd(ll, fd);
	restrict_self(ll);

	cr_assert_eq(run(NULL, fd), 0, "execveat of the allowed fd");
	cr_assert_eq(run(pdk_test_path(base, "other"), -1), -EACCES, "a binary next to it");
	/* The rule is on the file itself, so its own path works too. */
	cr_assert_eq(run(pdk_test_path(base, "init"), -1), 0, "the same file by path");
}
