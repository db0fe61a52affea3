/*
 * test-caps.c - capabilities, securebits and no_new_privs (suite "caps"),
 * and resource limits (suite "limits").
 *
 * The caps tests run as root, which is what makes them meaningful: root
 * with no capabilities must be an ordinary user. Each Test is its own
 * process, so dropping everything does not affect the next one.
 */
#include "common.h"
#include "caps.h"
#include "limits.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void need_root(void)
{
	const char *must = getenv("PDK_MUST_WORK");

	if (geteuid() == 0)
		return;
	if (must != NULL && strcmp(must, "1") == 0)
		cr_assert_fail("this test needs root and PDK_MUST_WORK=1");
	cr_skip_test("this test needs root");
}

/* The value of a "Name:\tvalue" line of /proc/self/status, copied into out. */
static void status_field(const char *name, char *out, size_t len)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	size_t nlen = strlen(name);
	const char *p;

	cr_assert_eq(pdk_read_file_at(AT_FDCWD, "/proc/self/status", 1 << 16, &text, &err), 0);
	for (p = text; p != NULL; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, name, nlen) == 0 && p[nlen] == ':') {
			p += nlen + 1;
			p += strspn(p, " \t");
			(void)snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
			return;
		}
	}
	cr_assert_fail("no '%s' in /proc/self/status", name);
}

static void drop_all(void)
{
	struct pdk_child_error ce = {0};
	int rc = pdk_caps_drop_all_child(&ce);

	cr_assert_eq(rc, 0, "drop failed: %s (%s)", ce.msg, strerror(-rc));
}

Test(caps, drop_all_clears_every_set)
{
	static const char *const sets[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	char v[64];

	need_root();
	status_field("CapEff", v, sizeof(v));
	cr_assert_str_neq(v, "0000000000000000", "root should start with capabilities");
	drop_all();
	for (size_t i = 0; i < PDK_ARRAY_SIZE(sets); i++) {
		status_field(sets[i], v, sizeof(v));
		cr_assert_str_eq(v, "0000000000000000", "%s is %s", sets[i], v);
	}
	for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		cr_assert_eq(prctl(PR_CAPBSET_READ, cap, 0, 0, 0), 0, "cap %d still bounded", cap);
}

Test(caps, securebits_set_and_locked)
{
	const int want = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
			 SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

	need_root();
	drop_all();
	cr_assert_eq(prctl(PR_GET_SECUREBITS, 0, 0, 0, 0), want);
	cr_assert_eq(prctl(PR_SET_SECUREBITS, 0, 0, 0, 0), -1);
	cr_assert_eq(errno, EPERM);
}

Test(caps, failure_names_the_step)
{
	struct pdk_child_error ce = {0};

	need_root();
	drop_all();
	/* Without CAP_SETPCAP nothing can be dropped from the bounding set, even what is gone. */
	cr_assert_eq(pdk_caps_drop_all_child(&ce), -EPERM);
	cr_assert_eq(ce.err, EPERM);
	cr_assert_str_eq(ce.msg,
			 "cannot drop capabilities (bounding set): Operation not permitted");
}

Test(caps, root_without_caps_is_an_ordinary_user)
{
	char dir[] = "/tmp/paddock-caps-XXXXXX";
	char file[64];
	int fd;

	need_root();
	cr_assert_not_null(mkdtemp(dir));
	(void)snprintf(file, sizeof(file), "%s/secret", dir);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	(void)close(fd);
	cr_assert_eq(chown(file, 1234, 1234), 0);
	/* A private UTS namespace: a sethostname that slipped through changes nothing outside. */
	cr_assert_eq(unshare(CLONE_NEWUTS), 0);
	drop_all();

	errno = 0;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	cr_expect(fd < 0 && errno == EACCES, "open another user's 0600 file: fd %d, %s", fd,
		  strerror(errno));
	errno = 0;
	cr_expect(sethostname("paddock-x", 9) < 0 && errno == EPERM, "sethostname: %s",
		  strerror(errno));
	errno = 0;
	cr_expect(chown(file, 0, 0) < 0 && errno == EPERM, "chown: %s", strerror(errno));
	cr_assert_eq(unlink(file), 0); /* the directory is ours */
	cr_assert_eq(rmdir(dir), 0);
}

Test(caps, exec_as_root_gains_nothing)
{
	char *const argv[] = {(char *)"grep", (char *)"-q", (char *)"^CapPrm:[[:space:]]0*$",
			      (char *)"/proc/self/status", NULL};
	int st = 0;
	pid_t pid;

	need_root();
	drop_all();
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execve("/usr/bin/grep", argv, environ);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uid 0 regained capabilities by exec");
}

Test(caps, no_new_privs)
{
	char v[16];

	cr_assert_eq(pdk_caps_no_new_privs_child(NULL), 0);
	cr_assert_eq(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
	status_field("NoNewPrivs", v, sizeof(v));
	cr_assert_str_eq(v, "1");
}

/* ---- limits ---- */

static void get(int resource, rlim_t *soft, rlim_t *hard)
{
	struct rlimit r;

	cr_assert_eq(getrlimit(resource, &r), 0);
	*soft = r.rlim_cur;
	*hard = r.rlim_max;
}

static void apply(const struct pdk_policy_limits *l)
{
	struct pdk_child_error ce = {0};
	int rc = pdk_limits_apply_child(l, &ce);

	cr_assert_eq(rc, 0, "%s (%s)", ce.msg, strerror(-rc));
}

Test(limits, always_applied)
{
	struct pdk_policy_limits l = {0};
	rlim_t s, h, nofile_s, nofile_h, nofile_s2, nofile_h2;

	get(RLIMIT_NOFILE, &nofile_s, &nofile_h);
	apply(&l);
	get(RLIMIT_CORE, &s, &h);
	cr_assert(s == 0 && h == 0);
	get(RLIMIT_MEMLOCK, &s, &h);
	cr_assert(s <= 64 * 1024 && h <= 64 * 1024);
	get(RLIMIT_MSGQUEUE, &s, &h);
	cr_assert(s == 0 && h == 0);
	get(RLIMIT_CPU, &s, &h);
	cr_assert(s == RLIM_INFINITY && h == RLIM_INFINITY, "no cpu_time: no RLIMIT_CPU");
	get(RLIMIT_NOFILE, &nofile_s2, &nofile_h2);
	cr_assert(nofile_s2 == nofile_s && nofile_h2 == nofile_h, "nofile 0 inherits");
	cr_assert_eq(pdk_limits_apply_child(NULL, NULL), -EINVAL);
}

Test(limits, never_raised)
{
	struct rlimit small = {64, 64};
	struct pdk_policy_limits l = {.nofile = 100000, .cpu_time_ms = 1500};
	rlim_t s, h;

	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &small), 0);
	apply(&l);
	get(RLIMIT_NOFILE, &s, &h);
	cr_assert(s == 64 && h == 64, "nofile %llu/%llu", (unsigned long long)s,
		  (unsigned long long)h);
	get(RLIMIT_CPU, &s, &h);
	cr_assert(s == 2 && h == 3, "cpu %llu/%llu: rounded up, then one second of grace",
		  (unsigned long long)s, (unsigned long long)h);
}

Test(limits, nofile)
{
	struct pdk_policy_limits l = {.nofile = 16};
	int fds[16];
	int n = 0, fd;

	apply(&l);
	while ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
		cr_assert_lt(fd, 16);
		cr_assert_lt(n, 16);
		fds[n++] = fd;
	}
	cr_assert_eq(errno, EMFILE);
	cr_assert_gt(n, 0);
	while (n > 0)
		(void)close(fds[--n]);
}

Test(limits, fsize)
{
	struct pdk_policy_limits l = {.fsize = 4096};
	char path[] = "/tmp/paddock-fsize-XXXXXX";
	static char buf[8192];
	int fd = mkostemp(path, O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(unlink(path), 0);
	cr_assert_neq(signal(SIGXFSZ, SIG_IGN), SIG_ERR);
	apply(&l);
	cr_assert_eq(write(fd, buf, sizeof(buf)), 4096);
	errno = 0;
	cr_assert_eq(write(fd, buf, 1), -1);
	cr_assert_eq(errno, EFBIG);
	(void)close(fd);
}

Test(limits, cpu_time, .signal = SIGXCPU, .timeout = 20)
{
	struct pdk_policy_limits l = {.cpu_time_ms = 1000};
	volatile uint64_t spin = 0;

	apply(&l);
	for (;;)
		spin++;
}
