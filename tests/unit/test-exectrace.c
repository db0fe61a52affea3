/*
 * test-exectrace.c - exec tracing: the readers of untrusted bytes (another
 * process's memory, /proc files whose process name the process chooses),
 * the JSON form of arbitrary bytes, and one real notification answered
 * end to end.
 */
#include "common.h"
#include "exectrace.h"
#include "fdpass.h"
#include "seccomp.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t addr(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* ---- /proc parsers ---- */

Test(exectrace, status_takes_the_innermost_nspid)
{
	struct pdk__proc_status st;
	const char *text = "Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
			   "Ngid:\t0\nPid:\t4243\nPPid:\t4200\nTracerPid:\t0\n"
			   "NSpid:\t4243\t17\t2\nNSpgid:\t1\n";

	cr_assert_eq(pdk__exectrace_parse_status(text, &st), 0);
	cr_assert_eq(st.tgid, 4242);
	cr_assert_eq(st.ppid, 4200);
	cr_assert_eq(st.nspid, 2);
}

Test(exectrace, status_with_missing_or_bad_lines_is_refused)
{
	struct pdk__proc_status st;

	cr_assert_eq(pdk__exectrace_parse_status("Tgid:\t1\nPPid:\t0\n", &st), -EINVAL);
	cr_assert_eq(pdk__exectrace_parse_status("Tgid:\t1\nPPid:\t0\nNSpid:\t\n", &st), -EINVAL);
	cr_assert_eq(pdk__exectrace_parse_status("Tgid:\t-1\nPPid:\t0\nNSpid:\t3\n", &st), -EINVAL);
	cr_assert_eq(pdk__exectrace_parse_status("Tgid:\t99999999999\nPPid:\t0\nNSpid:\t3\n", &st),
		     -EINVAL);
	cr_assert_eq(pdk__exectrace_parse_status("", &st), -EINVAL);
	/* A process name cannot forge a line: the kernel escapes its newlines. */
	cr_assert_eq(pdk__exectrace_parse_status("Name:\tx\\nTgid: 7\nTgid:\t3\nPPid:\t1\n"
						 "NSpid:\t3\n",
						 &st),
		     0);
	cr_assert_eq(st.tgid, 3);
}

/* 52 fields; the name holds spaces and parentheses, as a process may choose. */
static char *stat_line(const char *comm, char state, int utime, int stime, int exit_code)
{
	char *s = pdk_xasprintf("123 (%s) %c 1 123 123 0 -1 4194560 100 0 0 0 %d %d 0 0 20 0 1 0 "
				"5000 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 "
				"0 0 0 0 0 0 0 0 0 %d\n",
				comm, state, utime, stime, exit_code);
	return s;
}

Test(exectrace, stat_fields_after_a_hostile_name)
{
	_cleanup_free_ char *line = stat_line("a) R 1 2 (b", 'Z', 7, 5, 0x0900);
	struct pdk__proc_stat st;

	cr_assert_eq(pdk__exectrace_parse_stat(line, &st), 0);
	cr_assert_eq(st.state, 'Z');
	cr_assert_eq(st.utime_ticks, 7);
	cr_assert_eq(st.stime_ticks, 5);
	cr_assert_eq(st.exit_code, 0x0900);
	cr_assert(WIFEXITED(st.exit_code) && WEXITSTATUS(st.exit_code) == 9);
}

Test(exectrace, short_or_broken_stat_is_refused)
{
	_cleanup_free_ char *neg = stat_line("x", 'Z', -1, 5, 0);
	struct pdk__proc_stat st;

	cr_assert_eq(pdk__exectrace_parse_stat("123 (x) Z 1 2 3\n", &st), -EINVAL);
	cr_assert_eq(pdk__exectrace_parse_stat("123 (x", &st), -EINVAL);
	cr_assert_eq(pdk__exectrace_parse_stat("123 (x)", &st), -EINVAL);
	cr_assert_eq(pdk__exectrace_parse_stat(neg, &st), -EINVAL);
}

/* ---- JSON for arbitrary bytes ---- */

static void expect_bytes(const char *in, const char *want, bool want_lossy)
{
	bool lossy = true;
	json_t *j = pdk__exectrace_json_bytes(in, strlen(in), &lossy);

	cr_assert_not_null(j, "'%s' gave no JSON string", in);
	cr_assert_str_eq(json_string_value(j), want);
	cr_assert_eq(lossy, want_lossy, "lossy flag for '%s'", in);
	json_decref(j);
}

Test(exectrace, utf8_is_kept_and_the_rest_replaced)
{
	expect_bytes("plain\nline\ttab", "plain\nline\ttab", false);
	expect_bytes("caf\xc3\xa9 \xf0\x9f\x90\x8d", "caf\xc3\xa9 \xf0\x9f\x90\x8d", false);
	expect_bytes("\xff\xfeok", "\xef\xbf\xbd\xef\xbf\xbdok", true);
	expect_bytes("\x80", "\xef\xbf\xbd", true);                 /* lone continuation */
	expect_bytes("\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd", true); /* overlong NUL */
	expect_bytes("\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", true); /* overlong / */
	expect_bytes("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", true); /* surrogate */
	expect_bytes("\xf4\x90\x80\x80x", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx",
		     true);                                               /* > U+10FFFF */
	expect_bytes("end\xe2\x82", "end\xef\xbf\xbd\xef\xbf\xbd", true); /* cut sequence */
}

Test(exectrace, argv_hex_only_when_an_element_is_not_utf8)
{
	char *good[] = {"ls", "-l", NULL};
	char *bad[] = {"echo", "\xff", NULL};
	json_t *a = json_object();
	json_t *b = json_object();
	_cleanup_free_ char *sa = NULL, *sb = NULL;

	pdk__exectrace_set_argv(a, good);
	pdk__exectrace_set_argv(b, bad);
	pdk__exectrace_set_bytes(b, "cwd", "/w\xfe");
	sa = pdk_json_dump_line(a);
	sb = pdk_json_dump_line(b);
	cr_assert_str_eq(sa, "{\"argv\":[\"ls\",\"-l\"]}\n");
	cr_assert_str_eq(sb, "{\"argv\":[\"echo\",\"\\uFFFD\"],\"argv_hex\":[null,\"ff\"],"
			     "\"cwd\":\"/w\\uFFFD\",\"cwd_hex\":\"2f77fe\"}\n");
	json_decref(a);
	json_decref(b);
}

/* ---- reading a process's memory (our own: the same calls as for another) ---- */

Test(exectrace, path_and_argv_are_read)
{
	char *argv[] = {"prog", "a\nb", "", "\xff", NULL};
	struct pdk__exec_args a;

	pdk__exectrace_read_args(getpid(), addr("/usr/bin/prog"), addr(argv), &a);
	cr_assert_eq(a.read_errno, 0);
	cr_assert_str_eq(a.path, "/usr/bin/prog");
	cr_assert_eq(a.argc, 4);
	cr_assert_str_eq(a.argv[1], "a\nb");
	cr_assert_str_eq(a.argv[2], "");
	cr_assert_str_eq(a.argv[3], "\xff");
	cr_assert_null(a.argv[4]);
	cr_assert(!a.argv_truncated && !a.path_truncated);
	pdk__exec_args_release(&a);

	/* Linux accepts a NULL argv: an empty one, not an error. */
	pdk__exectrace_read_args(getpid(), addr("/p"), 0, &a);
	cr_assert_eq(a.read_errno, 0);
	cr_assert_eq(a.argc, 0);
	cr_assert_null(a.argv[0]);
	pdk__exec_args_release(&a);
}

Test(exectrace, argv_is_capped_in_count_and_bytes)
{
	char *many[PDK_EXECTRACE_MAX_ARGS + 50];
	char *big[4];
	_cleanup_free_ char *huge = pdk_xmalloc(PDK_EXECTRACE_MAX_ARGV_BYTES + 100);
	_cleanup_free_ char *longpath = pdk_xmalloc(PDK_EXECTRACE_MAX_PATH + 100);
	struct pdk__exec_args a;

	for (size_t i = 0; i + 1 < PDK_ARRAY_SIZE(many); i++)
		many[i] = "x";
	many[PDK_ARRAY_SIZE(many) - 1] = NULL;
	pdk__exectrace_read_args(getpid(), addr("/p"), addr(many), &a);
	cr_assert_eq(a.argc, PDK_EXECTRACE_MAX_ARGS);
	cr_assert(a.argv_truncated);
	pdk__exec_args_release(&a);

	memset(huge, 'h', PDK_EXECTRACE_MAX_ARGV_BYTES + 99);
	huge[PDK_EXECTRACE_MAX_ARGV_BYTES + 99] = '\0';
	big[0] = "first";
	big[1] = huge;
	big[2] = "never";
	big[3] = NULL;
	memset(longpath, 'p', PDK_EXECTRACE_MAX_PATH + 99);
	longpath[PDK_EXECTRACE_MAX_PATH + 99] = '\0';
	pdk__exectrace_read_args(getpid(), addr(longpath), addr(big), &a);
	cr_assert(a.path_truncated);
	cr_assert_eq(strlen(a.path), PDK_EXECTRACE_MAX_PATH);
	cr_assert(a.argv_truncated);
	cr_assert_eq(a.argc, 2);
	cr_assert_eq(strlen(a.argv[0]) + 1 + strlen(a.argv[1]), PDK_EXECTRACE_MAX_ARGV_BYTES);
	pdk__exec_args_release(&a);
}

/*
 * Strings and the pointer array across a page boundary are read whole, and
 * argv[0] at the path's address is the path: the copy is one
 * process_vm_readv with an element per page (the integration suite counts
 * the calls of a real run).
 */
Test(exectrace, reads_across_pages_are_whole)
{
	long page = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 4 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	char *str, **argv;
	struct pdk__exec_args a;

	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(munmap(m + 3 * page, (size_t)page), 0);
	/* A 99-byte string from 50 bytes before the first page's end into the second. */
	str = m + page - 50;
	memset(str, 's', 99);
	str[99] = '\0';
	/* The array: its first two pointers in the second page, its NULL in the third. */
	argv = (char **)(void *)(m + 2 * page - 2 * sizeof(char *));
	argv[0] = str;
	argv[1] = "second";
	argv[2] = NULL;
	pdk__exectrace_read_args(getpid(), addr(str), addr(argv), &a);
	cr_assert_eq(a.read_errno, 0);
	cr_assert_eq(strlen(a.path), 99);
	cr_assert(!a.path_truncated && !a.argv_truncated);
	cr_assert_eq(a.argc, 2);
	cr_assert_str_eq(a.argv[0], a.path);
	cr_assert_str_eq(a.argv[1], "second");
	pdk__exec_args_release(&a);

	/* A string that ends at the last mapped byte: whole, no error from the page after it. */
	str = m + 3 * page - 4;
	memcpy(str, "end", 4);
	pdk__exectrace_read_args(getpid(), addr(str), 0, &a);
	cr_assert_eq(a.read_errno, 0);
	cr_assert_str_eq(a.path, "end");
	cr_assert(!a.path_truncated);
	pdk__exec_args_release(&a);
	cr_assert_eq(munmap(m, 3 * (size_t)page), 0);
}

Test(exectrace, unreadable_memory_is_an_error_not_a_crash)
{
	long page = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	char *tail;
	char *argv[3] = {"ok", NULL, NULL};
	struct pdk__exec_args a;

	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(munmap(m + page, (size_t)page), 0);
	/* A string running into the unmapped page: what was there, cut, and EFAULT. */
	tail = m + page - 5;
	memcpy(tail, "abcde", 5);
	argv[1] = tail;
	pdk__exectrace_read_args(getpid(), addr(tail), addr(argv), &a);
	cr_assert_str_eq(a.path, "abcde");
	cr_assert(a.path_truncated);
	cr_assert_eq(a.argc, 2);
	cr_assert_str_eq(a.argv[1], "abcde");
	cr_assert_eq(a.read_errno, EFAULT);
	pdk__exec_args_release(&a);

	/* Bad pointers: the path, the array, an element. */
	argv[1] = m + page;
	pdk__exectrace_read_args(getpid(), 8, addr(argv), &a);
	cr_assert_null(a.path);
	cr_assert_eq(a.read_errno, EFAULT);
	cr_assert_eq(a.argc, 1);
	pdk__exec_args_release(&a);
	pdk__exectrace_read_args(getpid(), addr("/p"), addr(m + page), &a);
	cr_assert_null(a.argv);
	cr_assert_eq(a.read_errno, EFAULT);
	pdk__exec_args_release(&a);
	/* An array that runs into the unmapped page without its NULL. */
	for (int i = 0; i < 4; i++)
		((char **)(m + page))[-1 - i] = "y";
	pdk__exectrace_read_args(getpid(), addr("/p"), addr(m + page - 4 * sizeof(char *)), &a);
	cr_assert_eq(a.argc, 4);
	cr_assert_eq(a.read_errno, EFAULT);
	pdk__exec_args_release(&a);
	(void)munmap(m, (size_t)page);
}

/* ---- one notification, end to end ---- */

struct captured {
	json_t *ev[8];
	char kind[8][16];
	size_t n;
};

static void capture(void *data, const char *kind, uint64_t ts, json_t *attrs)
{
	struct captured *c = data;

	cr_assert_gt(ts, 0);
	cr_assert_lt(c->n, PDK_ARRAY_SIZE(c->ev));
	(void)snprintf(c->kind[c->n], sizeof(c->kind[0]), "%s", kind);
	c->ev[c->n++] = attrs;
}

/* The listener's descriptor, from the child that made it. */
static int recv_fd(int sock)
{
	char tag;
	int fd = -1;
	size_t nfds = 1;

	cr_assert_eq(pdk_fdpass_recv(sock, &tag, 1, &fd, &nfds, 0), 1);
	cr_assert_eq(nfds, 1);
	return fd;
}

/* A child under the notify filter that execs `argv` (after its listener reached us). */
static pid_t traced_child(char *const argv[], int *listener)
{
	int sv[2];
	pid_t pid;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char *const envp[] = {NULL};
		int fd;

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(101);
		fd = pdk_seccomp_apply_notify_child(NULL);
		if (fd < 0)
			_exit(102);
		if (pdk_fdpass_send(sv[1], "N", 1, &fd, 1) < 0)
			_exit(100);
		(void)close(fd);
		execve(argv[0], argv, envp);
		_exit(errno == ENOENT ? 42 : 103);
	}
	(void)close(sv[1]);
	*listener = recv_fd(sv[0]);
	(void)close(sv[0]);
	return pid;
}

static void wait_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	cr_assert_eq(poll(&p, 1, 5000), 1, "no notification within 5 s");
}

/*
 * A tracer recording into `c` for a child that execs `argv` (its pid in
 * *pid), once the child's exec waits for an answer.
 */
static struct pdk_exectrace *trace_exec(char *const argv[], struct captured *c, pid_t *pid)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_exectrace *t;
	int listener;

	*pid = traced_child(argv, &listener);
	t = pdk_exectrace_new(listener, capture, c, &err);
	cr_assert_not_null(t, "%s", err ? err->msg : "");
	pdk_exectrace_start_recording(t, -1);
	wait_readable(pdk_exectrace_fd(t));
	return t;
}

/* The tracer and the events it recorded, freed. */
static void trace_free(struct pdk_exectrace *t, struct captured *c)
{
	for (size_t i = 0; i < c->n; i++)
		json_decref(c->ev[i]);
	pdk_exectrace_free(t);
}

Test(exectrace, an_exec_is_answered_recorded_and_its_exit_reported)
{
	char *const argv[] = {"/bin/sh", "-c", "exit 3", NULL};
	struct captured c = {0};
	_cleanup_error_ struct pdk_error *err = NULL;
	char cwd[PATH_MAX];
	struct pollfd pfd[4];
	pid_t pid;
	struct pdk_exectrace *t = trace_exec(argv, &c, &pid);
	int status;
	size_t n;

	cr_assert_eq(pdk_exectrace_handle(t, &err), 0);
	cr_assert_eq(c.n, 1);
	cr_assert_str_eq(c.kind[0], "process.exec");
	cr_assert_eq(json_integer_value(json_object_get(c.ev[0], "host_pid")), pid);
	cr_assert_eq(json_integer_value(json_object_get(c.ev[0], "pid")), pid); /* same pid ns */
	cr_assert_eq(json_integer_value(json_object_get(c.ev[0], "host_ppid")), getpid());
	cr_assert_str_eq(json_string_value(json_object_get(c.ev[0], "path")), "/bin/sh");
	cr_assert_str_eq(json_string_value(json_object_get(c.ev[0], "syscall")), "execve");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(c.ev[0], "argv"), 2)),
			 "exit 3");
	cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
	cr_assert_str_eq(json_string_value(json_object_get(c.ev[0], "cwd")), cwd);
	cr_assert_eq(pdk_exectrace_count(t), 1);

	/* The exec went ahead (CONTINUE): the shell runs and exits 3; we have not reaped it. */
	n = pdk_exectrace_pollfds(t, pfd, PDK_ARRAY_SIZE(pfd));
	cr_assert_eq(n, 1);
	cr_assert_eq(poll(pfd, n, 5000), 1);
	pdk_exectrace_on_exits(t, pfd, n);
	cr_assert_eq(c.n, 2);
	cr_assert_str_eq(c.kind[1], "process.exit");
	cr_assert_eq(json_integer_value(json_object_get(c.ev[1], "exit_code")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(c.ev[1], "status_source")), "zombie");
	cr_assert_not_null(json_object_get(c.ev[1], "cpu_ms"));
	cr_assert_eq(pdk_exectrace_pollfds(t, pfd, PDK_ARRAY_SIZE(pfd)), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	trace_free(t, &c);
}

/* A failed exec is recorded as asked, and the process goes on (observe mode). */
Test(exectrace, a_failed_exec_is_recorded_and_fails_as_usual)
{
	char *const argv[] = {"/nonexistent/paddock-test", "arg", NULL};
	struct captured c = {0};
	_cleanup_error_ struct pdk_error *err = NULL;
	pid_t pid;
	struct pdk_exectrace *t = trace_exec(argv, &c, &pid);
	int status;

	cr_assert_eq(pdk_exectrace_handle(t, &err), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 42, "the exec must fail with ENOENT");
	cr_assert_eq(c.n, 1);
	cr_assert_str_eq(json_string_value(json_object_get(c.ev[0], "path")),
			 "/nonexistent/paddock-test");
	/* Reaped by us before the tracer looked: the pidfd still knows the status. */
	pdk_exectrace_finish(t);
	cr_assert_eq(c.n, 2);
	cr_assert_eq(json_integer_value(json_object_get(c.ev[1], "exit_code")), 42);
	cr_assert_str_eq(json_string_value(json_object_get(c.ev[1], "status_source")), "pidfd");
	trace_free(t, &c);
}

/* A process killed while it waits: no event, no error, nothing left pending. */
Test(exectrace, a_process_that_died_waiting_is_not_recorded)
{
	char *const argv[] = {"/bin/true", NULL};
	struct captured c = {0};
	_cleanup_error_ struct pdk_error *err = NULL;
	pid_t pid;
	struct pdk_exectrace *t = trace_exec(argv, &c, &pid);
	int status;

	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status));
	cr_assert_eq(pdk_exectrace_handle(t, &err), 0);
	cr_assert_eq(c.n, 0);
	cr_assert_eq(pdk_exectrace_count(t), 0);
	trace_free(t, &c);
}
