/*
 * exectrace.c - answer seccomp exec notifications and record them.
 *
 * The order of one notification matters (seccomp_unotify(2)):
 *   1. RECV: the process is now blocked at the entry of execve/execveat.
 *   2. Pin it: a pidfd (to see its exit) and an fd of /proc/PID (to read
 *      status and cwd later). Both refer to this very process even if it
 *      dies and its pid is reused, which step 4 makes sure of.
 *   3. Copy path and argv out of its memory (process_vm_readv, bounded).
 *   4. ID_VALID: the notification is still pending, so the process was
 *      alive through steps 2 and 3 and the pid they used was its own.
 *   5. SEND with SECCOMP_USER_NOTIF_FLAG_CONTINUE: the kernel runs the
 *      exec as asked. Observe mode: nothing is ever refused here.
 *   6. Only now, with the process running again, read pids and cwd from
 *      /proc and emit the event: a slow event sink must not hold the exec.
 * SECURITY: CONTINUE is only safe because nothing is decided on what was
 * read. The kernel reads path and argv again after our answer, and another
 * thread of the process (or a process sharing its memory) may change them
 * in between: the event records what was asked at step 3, which may differ
 * from what ran. docs/internals/exectrace.md and docs/seccomp.md say so.
 */
#include "common.h"
#include "base.h"
#include "exectrace.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* PIDFD_GET_INFO (Linux 6.15): a reaped process's exit status, kept by its pidfd. */
struct pdk__pidfd_info {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define PDK_PIDFD_GET_INFO  _IOWR(0xFF, 11, struct pdk__pidfd_info)
#define PDK_PIDFD_INFO_PID  (1ULL << 0)
#define PDK_PIDFD_INFO_EXIT (1ULL << 3)

/* NS_GET_PID_IN_PIDNS (Linux 6.10): a pid of ours as a pid namespace numbers it. */
#define PDK_NS_GET_PID_IN_PIDNS _IOR(0xb7, 0x8, int)

/* SECCOMP_IOCTL_NOTIF_SET_FLAGS (Linux 6.6), absent from older headers. */
#define PDK_SECCOMP_IOCTL_NOTIF_SET_FLAGS      SECCOMP_IOW(4, uint64_t)
#define PDK_SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1ULL << 0)

struct tracked {
	pid_t host_pid;
	pid_t pid; /* inside the sandbox */
	int pidfd;
	uint64_t t_exec_ns; /* CLOCK_MONOTONIC of its first traced exec */
};

struct pdk_exectrace {
	int fd;
	pid_t init_pid;
	pid_t skip_exit_pid; /* inside the sandbox; 0: none */
	int pidns_fd;        /* the sandbox's pid namespace; -1: not opened yet, -2: cannot be */
	bool recording;
	pdk_exectrace_emit_cb emit;
	void *data;
	struct seccomp_notif *req; /* sized by SECCOMP_GET_NOTIF_SIZES */
	size_t req_size;
	struct seccomp_notif_resp *resp;
	size_t resp_size;
	struct tracked procs[PDK_EXECTRACE_MAX_TRACKED];
	size_t n_procs;
	uint64_t count;
	long ticks_per_s;
	bool exit_info; /* the kernel keeps a reaped process's exit status for its pidfd */
};

/* ---- reading another process's memory ---- */

/*
 * Copy up to `len` bytes at `addr` of `pid`. The kernel copies an iovec
 * element whole or not at all, so the remote side is one element per page:
 * an unmapped page ends the copy there, and the pages before it are copied
 * by the same call (a string at the end of the stack, an array across a page
 * boundary: one system call, not one per page). Returns the bytes copied (0
 * and *err set when not even the first page could be read).
 */
#define READ_PAGES 16
static size_t read_upto(pid_t pid, uint64_t addr, char *buf, size_t len, int *err)
{
	size_t done = 0;

	while (done < len) {
		struct iovec local, remote[READ_PAGES];
		size_t want = 0;
		int k = 0;
		ssize_t n;

		while (k < READ_PAGES && done + want < len) {
			uint64_t a = addr + done + want;
			size_t chunk = 4096 - (size_t)(a & 4095);

			if (chunk > len - done - want)
				chunk = len - done - want;
			remote[k++] =
				(struct iovec){.iov_base = (void *)(uintptr_t)a, .iov_len = chunk};
			want += chunk;
		}
		local = (struct iovec){.iov_base = buf + done, .iov_len = want};
		n = process_vm_readv(pid, &local, 1, remote, (unsigned long)k, 0);
		if (n <= 0) {
			if (done == 0)
				*err = n < 0 ? errno : EIO;
			break;
		}
		done += (size_t)n;
		if ((size_t)n < want)
			break;
	}
	return done;
}

/*
 * A NUL-terminated string at `addr`, at most `max` bytes long (longer ones
 * are cut and *truncated is set). NULL and *err when it cannot be read.
 */
static char *read_string(pid_t pid, uint64_t addr, size_t max, bool *truncated, int *err)
{
	_cleanup_buf_ struct pdk_buf s = PDK_BUF_INIT(max);
	size_t want = 256 < max ? 256 : max;

	for (;;) {
		size_t n;
		const char *nul;

		if (pdk_buf_reserve(&s, want) < 0)
			pdk_bug("exectrace: a string read past its cap");
		n = read_upto(pid, addr + s.len, s.p + s.len, want, err);
		nul = memchr(s.p + s.len, '\0', n);
		if (nul != NULL) {
			pdk_buf_setlen(&s, (size_t)(nul - s.p));
			return pdk_buf_take(&s, NULL);
		}
		pdk_buf_setlen(&s, s.len + n);
		if (n < want) { /* an unreadable page before the end of the string */
			if (s.len == 0)
				return NULL;
			*err = EFAULT;
			*truncated = true;
			break;
		}
		if (s.len == max) {
			*truncated = true;
			break;
		}
		/* Four times the bytes at each round, up to the cap. */
		want = 3 * s.len < max - s.len ? 3 * s.len : max - s.len;
	}
	return pdk_buf_take(&s, NULL);
}

void pdk__exec_args_release(struct pdk__exec_args *a)
{
	free(a->path);
	pdk_strv_free(a->argv);
	memset(a, 0, sizeof(*a));
}

static void set_errno(struct pdk__exec_args *out, int e)
{
	if (out->read_errno == 0)
		out->read_errno = e ? e : EFAULT;
}

/*
 * The pointer array, then each string, within the caps. A string at the
 * address the path was read from (argv[0], most often) is the path again,
 * when the path was read whole and fits what is left of the budget: the
 * same bytes, read a moment before, not read twice.
 */
static void read_argv(pid_t pid, uint64_t path_addr, uint64_t argv_addr, struct pdk__exec_args *out)
{
	uint64_t ptrs[PDK_EXECTRACE_MAX_ARGS + 1];
	size_t budget = PDK_EXECTRACE_MAX_ARGV_BYTES;
	bool terminated = false;
	int e = 0;
	size_t n = read_upto(pid, argv_addr, (char *)ptrs, sizeof(ptrs), &e) / sizeof(ptrs[0]);

	if (n == 0) {
		set_errno(out, e);
		return;
	}
	out->argv = pdk_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		bool cut = false;
		char *s;

		if (ptrs[i] == 0) {
			terminated = true;
			break;
		}
		if (i == PDK_EXECTRACE_MAX_ARGS || budget == 0) {
			out->argv_truncated = true;
			return;
		}
		e = 0;
		if (ptrs[i] == path_addr && out->path != NULL && !out->path_truncated &&
		    strlen(out->path) < budget)
			s = pdk_xstrdup(out->path);
		else
			s = read_string(pid, ptrs[i], budget, &cut, &e);
		if (e != 0)
			set_errno(out, e);
		if (s == NULL)
			return;
		budget -= strlen(s) + 1 < budget ? strlen(s) + 1 : budget;
		out->argv_truncated |= cut;
		pdk_strv_push_take(&out->argv, s);
		out->argc++;
		if (cut)
			return;
	}
	/* No NULL within what could be read: the array runs into an unmapped page. */
	if (!terminated)
		set_errno(out, EFAULT);
}

void pdk__exectrace_read_args(pid_t pid, uint64_t path_addr, uint64_t argv_addr,
			      struct pdk__exec_args *out)
{
	int e = 0;

	memset(out, 0, sizeof(*out));
	out->path = read_string(pid, path_addr, PDK_EXECTRACE_MAX_PATH, &out->path_truncated, &e);
	out->read_errno = e;
	/* argv == NULL is allowed by Linux (an empty argv); it is not an error. */
	if (argv_addr == 0)
		out->argv = pdk_xcalloc(1, sizeof(char *));
	else
		read_argv(pid, path_addr, argv_addr, out);
}

/* ---- /proc parsers (their input is partly chosen by the process: its name) ---- */

static bool parse_pid_field(const char *p, pid_t *out)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(p, &end, 10);
	if (errno != 0 || end == p || v < 0 || v > INT_MAX)
		return false;
	*out = (pid_t)v;
	return true;
}

int pdk__exectrace_parse_status(const char *text, struct pdk__proc_status *st)
{
	const char *line = text;

	st->tgid = st->ppid = st->nspid = -1;
	while (line != NULL && *line != '\0') {
		const char *nl = strchr(line, '\n');

		if (strncmp(line, "Tgid:", 5) == 0 && !parse_pid_field(line + 5, &st->tgid))
			return -EINVAL;
		if (strncmp(line, "PPid:", 5) == 0 && !parse_pid_field(line + 5, &st->ppid))
			return -EINVAL;
		if (strncmp(line, "NSpid:", 6) == 0) {
			/* The last number is the innermost namespace's. */
			const char *p = line + 6;
			const char *end = nl != NULL ? nl : p + strlen(p);
			const char *last = NULL;

			while (p < end) {
				while (p < end && (*p == ' ' || *p == '\t'))
					p++;
				if (p < end)
					last = p;
				while (p < end && *p != ' ' && *p != '\t')
					p++;
			}
			if (last == NULL || !parse_pid_field(last, &st->nspid))
				return -EINVAL;
		}
		line = nl != NULL ? nl + 1 : NULL;
	}
	return st->tgid >= 0 && st->ppid >= 0 && st->nspid >= 0 ? 0 : -EINVAL;
}

/*
 * /proc/PID/stat: "pid (comm) state ppid ...". The name may hold spaces and
 * parentheses, so the fields start after the last ')'.
 */
int pdk__exectrace_parse_stat(const char *text, struct pdk__proc_stat *st)
{
	const char *p = strrchr(text, ')');
	unsigned long long v;
	int field = 2;

	memset(st, 0, sizeof(*st));
	if (p == NULL || p[1] != ' ' || p[2] == '\0')
		return -EINVAL;
	p += 2;
	st->state = *p;
	field = 3;
	while (*p != '\0' && field < 52) {
		char *end = NULL;

		p = strchr(p, ' ');
		if (p == NULL)
			return -EINVAL;
		p++;
		field++;
		if (field != 14 && field != 15 && field != 52)
			continue;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno != 0 || end == p || *p == '-')
			return -EINVAL;
		if (field == 14)
			st->utime_ticks = v;
		else if (field == 15)
			st->stime_ticks = v;
		else if (v <= INT_MAX)
			st->exit_code = (int)v;
		else
			return -EINVAL;
	}
	return field == 52 ? 0 : -EINVAL;
}

/* ---- JSON for untrusted bytes ---- */

json_t *pdk__exectrace_json_bytes(const char *s, size_t n, bool *lossy)
{
	const unsigned char *u = (const unsigned char *)s;
	_cleanup_free_ char *out = NULL;
	size_t len;

	*lossy = false;
	for (size_t i = 0; i < n; i++) {
		if (u[i] >= 0x80 || u[i] == 0) {
			out = pdk_utf8_clean(s, n, true, &len, lossy);
			return json_stringn(out, len);
		}
	}
	return json_stringn(s, n);
}

static json_t *hex_string(const char *s)
{
	static const char digits[] = "0123456789abcdef";
	size_t n = strlen(s);
	_cleanup_free_ char *hex = pdk_xmalloc(2 * n + 1);

	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[(unsigned char)s[i] >> 4];
		hex[2 * i + 1] = digits[(unsigned char)s[i] & 15];
	}
	hex[2 * n] = '\0';
	return json_string(hex);
}

void pdk__exectrace_set_bytes(json_t *obj, const char *key, const char *s)
{
	bool lossy = false;

	if (s == NULL) {
		pdk_json_set(obj, key, json_null());
		return;
	}
	pdk_json_set(obj, key, pdk__exectrace_json_bytes(s, strlen(s), &lossy));
	if (lossy) {
		_cleanup_free_ char *k = pdk_xasprintf("%s_hex", key);

		pdk_json_set(obj, k, hex_string(s));
	}
}

void pdk__exectrace_set_argv(json_t *obj, char *const *argv)
{
	json_t *a = json_array();
	json_t *hex = json_array();
	bool any = false;

	for (size_t i = 0; argv != NULL && argv[i] != NULL; i++) {
		bool lossy = false;

		json_array_append_new(a,
				      pdk__exectrace_json_bytes(argv[i], strlen(argv[i]), &lossy));
		json_array_append_new(hex, lossy ? hex_string(argv[i]) : json_null());
		any |= lossy;
	}
	pdk_json_set(obj, "argv", argv != NULL ? a : json_null());
	if (argv == NULL)
		json_decref(a);
	if (any)
		pdk_json_set(obj, "argv_hex", hex);
	else
		json_decref(hex);
}

/* ---- /proc readers ---- */

/*
 * /proc/PID/NAME into buf, with one read() (pdk_read_once(): the traced
 * process waits for these). Paths, not a /proc/PID dirfd: the caller makes
 * sure the pid is still the process it means (ID_VALID, or a pidfd check).
 */
static int read_proc(pid_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	(void)snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	n = pdk_read_once(path, buf, len);
	return n < 0 ? (int)n : 0;
}

static int read_status(pid_t pid, struct pdk__proc_status *st)
{
	char buf[4096];
	int rc = read_proc(pid, "status", buf, sizeof(buf));

	return rc < 0 ? rc : pdk__exectrace_parse_status(buf, st);
}

/*
 * The sandbox's pid namespace, opened at the first need from its init
 * (alive: it is ours to reap, so its pid is its own).
 */
static int pidns_fd(struct pdk_exectrace *t)
{
	char path[64];

	if (t->pidns_fd == -1 && t->init_pid > 0) {
		(void)snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)t->init_pid);
		t->pidns_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (t->pidns_fd < 0)
			t->pidns_fd = -2;
	}
	return t->pidns_fd;
}

/*
 * Host pid `host` as the sandbox numbers it, asked of the namespace: -1 when
 * the kernel cannot say (before Linux 6.10, or no such process there).
 */
static pid_t ns_pid(struct pdk_exectrace *t, pid_t host)
{
	int fd = pidns_fd(t);
	int r = fd >= 0 ? ioctl(fd, PDK_NS_GET_PID_IN_PIDNS, (unsigned long)host) : -1;

	return r > 0 ? r : -1;
}

/* The pid inside the sandbox of host pid `host` (its parent, usually). */
static pid_t inner_pid(struct pdk_exectrace *t, pid_t host)
{
	struct pdk__proc_status st;
	pid_t ns;

	if (host == t->init_pid)
		return 1;
	for (size_t i = 0; i < t->n_procs; i++)
		if (t->procs[i].host_pid == host)
			return t->procs[i].pid;
	if ((ns = ns_pid(t, host)) > 0)
		return ns;
	if (read_status(host, &st) < 0)
		return -1;
	return st.nspid;
}

/*
 * cwd as the process sees it. Read from outside, /proc/PID/cwd of a process
 * in another mount namespace whose root we cannot reach (pivot_root) is
 * resolved up to that namespace's root: it is already the in-sandbox path.
 */
static char *read_cwd(pid_t pid)
{
	char path[64], buf[PATH_MAX];
	ssize_t n;

	(void)snprintf(path, sizeof(path), "/proc/%d/cwd", (int)pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return pdk_xstrdup(buf);
}

static json_t *pid_or_null(pid_t p)
{
	return p >= 0 ? json_integer(p) : json_null();
}

/* ---- tracking exits ---- */

static struct tracked *find_tracked(struct pdk_exectrace *t, pid_t host)
{
	for (size_t i = 0; i < t->n_procs; i++)
		if (t->procs[i].host_pid == host)
			return &t->procs[i];
	return NULL;
}

static const char *signal_name(int sig)
{
	const char *n = sigabbrev_np(sig);

	return n != NULL ? n : "?";
}

/* Exit status and CPU time of the zombie, or of the reaped process through its pidfd. */
static void fill_exit(const struct pdk_exectrace *t, const struct tracked *p, json_t *a)
{
	char buf[1024];
	struct pdk__proc_stat st;
	struct pdk__pidfd_info info = {.mask = PDK_PIDFD_INFO_EXIT};
	int status = -1;
	int rc = read_proc(p->host_pid, "stat", buf, sizeof(buf));

	/*
	 * Opened and read while the pidfd's process was not yet reaped (the
	 * signal 0 below still reaches it): the pid was still its own.
	 */
	if (rc == 0 && syscall(SYS_pidfd_send_signal, p->pidfd, 0, NULL, 0) == 0) {
		/* Z: zombie; X: its reaper is releasing it right now (exit_code still set). */
		if (pdk__exectrace_parse_stat(buf, &st) == 0 &&
		    (st.state == 'Z' || st.state == 'X')) {
			status = st.exit_code;
			pdk_json_set(a, "cpu_ms",
				     json_real((double)(st.utime_ticks + st.stime_ticks) * 1000.0 /
					       (double)t->ticks_per_s));
			pdk_json_set(a, "status_source", json_string("zombie"));
		}
	}
	/*
	 * Reaped: the pidfd keeps the exit status (Linux 6.15), stored while
	 * the reaper releases the process, so a reap under way may need a
	 * moment more.
	 */
	for (int tries = 0; status < 0 && tries < 3; tries++) {
		info.mask = PDK_PIDFD_INFO_EXIT;
		if (ioctl(p->pidfd, PDK_PIDFD_GET_INFO, &info) == 0 &&
		    (info.mask & PDK_PIDFD_INFO_EXIT)) {
			status = info.exit_code;
			pdk_json_set(a, "status_source", json_string("pidfd"));
		} else if (errno == ESRCH) {
			(void)sched_yield();
		} else {
			break; /* ENOTTY, EINVAL: a kernel without it */
		}
	}
	if (status < 0) {
		pdk_json_set(a, "status_source", json_string("lost"));
		return;
	}
	if (WIFEXITED(status))
		pdk_json_set(a, "exit_code", json_integer(WEXITSTATUS(status)));
	else if (WIFSIGNALED(status))
		pdk_json_set(a, "signal", json_string(signal_name(WTERMSIG(status))));
}

static void emit_exit(struct pdk_exectrace *t, size_t i)
{
	struct tracked *p = &t->procs[i];
	json_t *a = json_object();

	pdk_json_set(a, "trace", json_string("seccomp"));
	pdk_json_set(a, "pid", json_integer(p->pid));
	pdk_json_set(a, "host_pid", json_integer(p->host_pid));
	fill_exit(t, p, a);
	pdk_json_set(a, "wall_ms", json_real((double)(pdk_now_mono_ns() - p->t_exec_ns) / 1e6));
	t->emit(t->data, "process.exit", pdk_now_real_ns(), a);
	(void)close(p->pidfd);
	t->procs[i] = t->procs[--t->n_procs];
}

size_t pdk_exectrace_pollfds(const struct pdk_exectrace *t, struct pollfd *pfd, size_t max)
{
	size_t n = t->n_procs < max ? t->n_procs : max;

	for (size_t i = 0; i < n; i++)
		pfd[i] = (struct pollfd){.fd = t->procs[i].pidfd, .events = POLLIN};
	return n;
}

void pdk_exectrace_on_exits(struct pdk_exectrace *t, const struct pollfd *pfd, size_t n)
{
	/* Backwards: emit_exit() moves the last entry into the freed slot. */
	for (size_t k = n; k-- > 0;) {
		if (pfd[k].revents == 0)
			continue;
		for (size_t i = 0; i < t->n_procs; i++) {
			if (t->procs[i].pidfd == pfd[k].fd) {
				emit_exit(t, i);
				break;
			}
		}
	}
}

void pdk_exectrace_finish(struct pdk_exectrace *t)
{
	if (t == NULL)
		return;
	while (t->n_procs > 0)
		emit_exit(t, t->n_procs - 1);
}

/* ---- one notification ---- */

struct pinned {
	int pidfd;
	pid_t host_pid; /* the thread group's: after exec it is the process's pid */
	bool tracked;   /* already watched from an earlier exec */
	struct pdk__proc_status st;
	char *cwd;
};

static void close_pidfd(struct pinned *p)
{
	if (p->pidfd >= 0)
		(void)close(p->pidfd);
	p->pidfd = -1;
}

static void pinned_release(struct pinned *p)
{
	close_pidfd(p);
	free(p->cwd);
	p->cwd = NULL;
}

/*
 * Step 2 without /proc/PID/status (an open, a read the kernel formats 1.4 KB
 * for, a close, while the exec waits): a pidfd of the thread, which the
 * kernel gives only for a thread-group leader, its parent from
 * PIDFD_GET_INFO (Linux 6.13) and its pid inside from the namespace. False
 * when any of it cannot be had (a thread other than the leader, an older
 * kernel): the caller reads the status file. A pidfd it did get is kept in
 * p->pidfd either way (the leader's: the one pin() watches), not opened twice.
 */
static bool pin_by_pidfd(struct pdk_exectrace *t, pid_t tid, struct pinned *p)
{
	struct pdk__pidfd_info info = {.mask = PDK_PIDFD_INFO_PID};
	pid_t ns;

	p->pidfd = (int)syscall(SYS_pidfd_open, tid, 0);
	if (p->pidfd < 0 || ioctl(p->pidfd, PDK_PIDFD_GET_INFO, &info) < 0 ||
	    !(info.mask & PDK_PIDFD_INFO_PID) || info.tgid != (uint32_t)tid ||
	    (ns = ns_pid(t, tid)) < 0)
		return false;
	p->st = (struct pdk__proc_status){.tgid = tid, .ppid = (pid_t)info.ppid, .nspid = ns};
	return true;
}

/*
 * Step 2: pids, cwd and a pidfd of the notifying thread's process. Read
 * while it waits: a short-lived program may be gone (and reaped) soon after
 * the answer.
 */
static void pin(struct pdk_exectrace *t, pid_t tid, struct pinned *p)
{
	struct tracked *old;

	p->pidfd = -1;
	p->host_pid = tid;
	p->st = (struct pdk__proc_status){-1, -1, -1};
	if (!pin_by_pidfd(t, tid, p)) {
		if (read_status(tid, &p->st) < 0)
			return;
		/*
		 * A thread other than the leader: exec makes it the leader, with
		 * the leader's pids, so those are the ones to record and watch.
		 */
		if (p->st.tgid != tid && read_status(p->st.tgid, &p->st) < 0)
			return;
	}
	p->host_pid = p->st.tgid;
	p->cwd = read_cwd(p->host_pid);
	old = find_tracked(t, p->host_pid);
	/*
	 * A watched process of that pid that can no longer be signalled was
	 * reaped before we saw its exit, and the pid is reused: close it now.
	 */
	if (old != NULL && syscall(SYS_pidfd_send_signal, old->pidfd, 0, NULL, 0) < 0) {
		emit_exit(t, (size_t)(old - t->procs));
		old = NULL;
	}
	p->tracked = old != NULL;
	if (p->tracked || t->n_procs >= PDK_EXECTRACE_MAX_TRACKED)
		close_pidfd(p); /* not watched: no slot, or watched already */
	else if (p->pidfd < 0)
		p->pidfd = (int)syscall(SYS_pidfd_open, p->host_pid, 0);
}

static void set_args(json_t *a, const struct pdk__exec_args *args)
{
	pdk__exectrace_set_bytes(a, "path", args->path);
	if (args->path_truncated)
		pdk_json_set(a, "path_truncated", json_true());
	pdk__exectrace_set_argv(a, args->argv);
	if (args->argv != NULL && !args->argv_truncated)
		pdk_json_set(a, "argc", json_integer((json_int_t)args->argc));
	if (args->argv_truncated)
		pdk_json_set(a, "argv_truncated", json_true());
	if (args->read_errno != 0)
		pdk_json_set(a, "read_error", json_string(strerror(args->read_errno)));
}

/* Step 6: the event, and the pidfd handed to the exit watch. */
static void record(struct pdk_exectrace *t, const struct seccomp_notif *req, uint64_t ts,
		   struct pinned *p, const struct pdk__exec_args *args)
{
	bool at = req->data.nr == __NR_execveat;
	const struct pdk__proc_status *st = &p->st;
	json_t *a = json_object();

	pdk_json_set(a, "trace", json_string("seccomp"));
	pdk_json_set(a, "syscall", json_string(at ? "execveat" : "execve"));
	pdk_json_set(a, "pid", pid_or_null(st->nspid));
	pdk_json_set(a, "host_pid", json_integer(p->host_pid));
	pdk_json_set(a, "ppid", pid_or_null(st->ppid >= 0 ? inner_pid(t, st->ppid) : -1));
	pdk_json_set(a, "host_ppid", pid_or_null(st->ppid));
	if (at) {
		pdk_json_set(a, "dirfd", json_integer((int)req->data.args[0]));
		pdk_json_set(a, "flags", json_integer((json_int_t)req->data.args[4]));
	}
	set_args(a, args);
	pdk__exectrace_set_bytes(a, "cwd", p->cwd);
	if (p->pidfd < 0 && !p->tracked)
		pdk_json_set(a, "exit_tracked", json_false());
	t->count++;
	t->emit(t->data, "process.exec", ts, a);
	if (p->pidfd >= 0 && st->nspid >= 0 && st->nspid != t->skip_exit_pid) {
		t->procs[t->n_procs++] = (struct tracked){
			.host_pid = p->host_pid,
			.pid = st->nspid,
			.pidfd = steal_fd(&p->pidfd),
			.t_exec_ns = pdk_now_mono_ns(),
		};
	}
}

int pdk_exectrace_handle(struct pdk_exectrace *t, struct pdk_error **err)
{
	struct seccomp_notif *req = t->req;
	struct seccomp_notif_resp *resp = t->resp;
	struct pdk__exec_args args = {0};
	struct pinned p = {.pidfd = -1};
	bool at, recording;
	uint64_t ts;

	memset(req, 0, t->req_size); /* the kernel wants it zeroed */
	if (ioctl(t->fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
		/* ENOENT: the process died before we got it. */
		if (errno == EINTR || errno == ENOENT || errno == EAGAIN)
			return 0;
		return pdk_error_set(err, errno, "exec trace: cannot receive a notification");
	}
	ts = pdk_now_real_ns();
	at = req->data.nr == __NR_execveat;
	recording = t->recording;
	if (recording) {
		pin(t, (pid_t)req->pid, &p);
		pdk__exectrace_read_args((pid_t)req->pid, req->data.args[at ? 1 : 0],
					 req->data.args[at ? 2 : 1], &args);
	}
	/* Step 4: still pending, so what steps 2 and 3 reached was this process. */
	if (ioctl(t->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
		goto done;
	memset(resp, 0, t->resp_size);
	resp->id = req->id;
	resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	if (ioctl(t->fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 && errno != ENOENT) {
		int e = errno;

		pdk__exec_args_release(&args);
		pinned_release(&p);
		return pdk_error_set(err, e, "exec trace: cannot answer a notification");
	}
	if (recording)
		record(t, req, ts, &p, &args);
done:
	pdk__exec_args_release(&args);
	pinned_release(&p);
	return 0;
}

/* ---- life cycle ---- */

/*
 * Ask for synchronous wake-ups (Linux 6.6): the notifying process sleeps
 * until we answer, and we sleep until it notifies, so each hand-off can run
 * the woken side on the waker's CPU instead of sending it to the other one.
 * In a VM a wake-up sent to an idle CPU waits for the hypervisor to run that
 * virtual CPU again, and each traced exec makes four such hand-offs: most
 * of the exec trace's share of a start's p95 (docs/internals/performance.md,
 * "The tail"). A kernel without the flag answers EINVAL: only the hint is
 * lost, never a notification.
 */
static void sync_wake_ups(int fd)
{
	/* The kernel takes the flags as the argument's value, not through a pointer. */
	(void)ioctl(fd, PDK_SECCOMP_IOCTL_NOTIF_SET_FLAGS,
		    (unsigned long)PDK_SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
}

/*
 * PIDFD_INFO_EXIT came with Linux 6.15. It cannot be probed on a live
 * process (the ioctl itself is older), so the release is read.
 */
static bool kernel_keeps_exit_info(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor >= 15);
}

struct pdk_exectrace *pdk_exectrace_new(int listener_fd, pdk_exectrace_emit_cb emit, void *data,
					struct pdk_error **err)
{
	struct seccomp_notif_sizes sizes;
	struct pdk_exectrace *t;

	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0) {
		(void)pdk_error_set(err, errno, "exec trace: cannot size seccomp notifications");
		(void)close(listener_fd);
		return NULL;
	}
	sync_wake_ups(listener_fd);
	t = pdk_xcalloc(1, sizeof(*t));
	t->fd = listener_fd;
	t->init_pid = -1;
	t->pidns_fd = -1;
	t->emit = emit;
	t->data = data;
	t->req_size = sizes.seccomp_notif > sizeof(*t->req) ? sizes.seccomp_notif : sizeof(*t->req);
	t->resp_size = sizes.seccomp_notif_resp > sizeof(*t->resp) ? sizes.seccomp_notif_resp
								   : sizeof(*t->resp);
	t->req = pdk_xcalloc(1, t->req_size);
	t->resp = pdk_xcalloc(1, t->resp_size);
	t->exit_info = kernel_keeps_exit_info();
	t->ticks_per_s = sysconf(_SC_CLK_TCK);
	if (t->ticks_per_s <= 0)
		t->ticks_per_s = 100;
	return t;
}

void pdk_exectrace_start_recording(struct pdk_exectrace *t, pid_t init_pid)
{
	t->init_pid = init_pid;
	t->recording = true;
}

void pdk_exectrace_skip_exit(struct pdk_exectrace *t, pid_t pid)
{
	t->skip_exit_pid = pid;
}

int pdk_exectrace_fd(const struct pdk_exectrace *t)
{
	return t->fd;
}

bool pdk_exectrace_lazy_exits(const struct pdk_exectrace *t)
{
	return t->exit_info;
}

size_t pdk_exectrace_watching(const struct pdk_exectrace *t)
{
	return t->n_procs;
}

void pdk_exectrace_sweep_exits(struct pdk_exectrace *t)
{
	struct pollfd pfd[PDK_EXECTRACE_MAX_TRACKED];
	size_t n = pdk_exectrace_pollfds(t, pfd, PDK_ARRAY_SIZE(pfd));

	if (n > 0 && poll(pfd, n, 0) > 0)
		pdk_exectrace_on_exits(t, pfd, n);
}

uint64_t pdk_exectrace_count(const struct pdk_exectrace *t)
{
	return t != NULL ? t->count : 0;
}

void pdk_exectrace_free(struct pdk_exectrace *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->n_procs; i++)
		(void)close(t->procs[i].pidfd);
	if (t->fd >= 0)
		(void)close(t->fd);
	if (t->pidns_fd >= 0)
		(void)close(t->pidns_fd);
	free(t->req);
	free(t->resp);
	free(t);
}
