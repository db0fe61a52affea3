/*
 * init.c - pid 1 inside a sandbox (the `paddock-init` binary).
 *
 * Started by the supervisor's child with execveat() of a file descriptor
 * opened before the sandbox was built, so this image carries none of the
 * supervisor's memory. It marks itself non-dumpable, starts the command in
 * a new session, forwards signals to the command's process group, reaps
 * every process that is re-parented to it, and reports the command's exec
 * and exit to the supervisor. When the command ends, init ends, and the
 * kernel kills whatever is left in the pid namespace.
 *
 * It is linked statically and uses nothing but libc, so it needs nothing
 * from the sandbox's filesystem. Of base/ it takes only the libc-only
 * files: common.h and fdpass.[ch] (built into it, see the top meson.build).
 */
#include "common.h"
#include "fdpass.h"
#include "init.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t forward_pgid;

static const int forwarded_signals[] = {SIGHUP,  SIGINT,   SIGQUIT, SIGTERM, SIGUSR1,
					SIGUSR2, SIGWINCH, SIGCONT, SIGTSTP, SIGALRM};

static void on_signal(int sig)
{
	int saved = errno;

	if (forward_pgid > 0)
		(void)kill(-forward_pgid, sig); /* the group may be gone already */
	errno = saved;
}

static uint64_t now_real_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts); /* cannot fail for CLOCK_REALTIME */
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void send_msg(int ctl, struct pdk_init_msg *m)
{
	m->ts_ns = now_real_ns();
	/* A supervisor that went away cannot be told anything; we end anyway. */
	(void)TEMP_FAILURE_RETRY(send(ctl, m, sizeof(*m), MSG_NOSIGNAL));
}

static void install_handlers(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(forwarded_signals); i++)
		(void)sigaction(forwarded_signals[i], &sa, NULL); /* valid signals: cannot fail */
}

/*
 * The command is started with vfork(): the child borrows init's memory until
 * it execs, so no page is copied (page faults are the dearest part of start-up
 * on virtual machines). The parent is suspended until the child has exec'd or
 * exited, so a failure can be reported through `fail`, a plain variable.
 */
struct exec_failure {
	int err;
	int stage;
};

/*
 * The file execvp() would run for `name`, found before the vfork: execvp
 * tries execve() on each PATH entry in turn, and with exec tracing every
 * attempt is a recorded exec. Only an executable regular file is taken;
 * with none, NULL, and execvp() itself then makes the attempts and reports
 * the error it would report.
 */
static const char *resolve_command(const char *name, const char *path)
{
	static char buf[4096];
	struct stat st;

	if (strchr(name, '/') != NULL || path == NULL)
		return NULL;
	while (*path != '\0') {
		size_t dlen = strcspn(path, ":");
		const char *dir = dlen ? path : ".";
		size_t n = dlen ? dlen : 1;

		if (n + 1 + strlen(name) < sizeof(buf)) {
			memcpy(buf, dir, n);
			buf[n] = '/';
			memcpy(buf + n + 1, name, strlen(name) + 1);
			if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
				return buf;
		}
		path += dlen;
		if (*path == ':')
			path++;
	}
	return NULL;
}

/* In the vfork child: become the command. Never returns. */
PDK_NORETURN static void exec_command(char **argv, const char *file, const sigset_t *oldmask,
				      volatile struct exec_failure *fail)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(forwarded_signals); i++)
		(void)sigaction(forwarded_signals[i], &dfl, NULL);
	(void)sigprocmask(SIG_SETMASK, oldmask, NULL);
	fail->stage = PDK_INIT_STAGE_SETSID;
	if (setsid() >= 0) {
		fail->stage = PDK_INIT_STAGE_EXEC;
		if (file != NULL)
			execv(file, argv);
		/* ENOEXEC: execvp() also runs a script without #! with /bin/sh. */
		if (file == NULL || errno == ENOEXEC)
			execvp(argv[0], argv);
	}
	fail->err = errno;
	_exit(127);
}

/*
 * What the vfork() of an exec came to: a failed fork, or the child's failed
 * step (the child, which has _exited already, is reaped), goes into `m`.
 * True when the command runs.
 */
static bool exec_outcome(pid_t pid, const volatile struct exec_failure *fail,
			 struct pdk_init_msg *m)
{
	if (pid < 0) {
		m->err = errno;
		m->stage = PDK_INIT_STAGE_FORK;
		return false;
	}
	if (fail->err != 0) {
		m->err = fail->err;
		m->stage = (uint32_t)fail->stage;
		(void)waitpid(pid, NULL, 0);
		return false;
	}
	return true;
}

/* Start the command; report its exec to the supervisor. Returns its pid or -1. */
static pid_t start_command(int ctl, char **argv)
{
	struct pdk_init_msg m = {.type = PDK_INIT_MSG_EXEC};
	volatile struct exec_failure fail = {0, PDK_INIT_STAGE_NONE};
	const char *file = resolve_command(argv[0], getenv("PATH"));
	sigset_t all, old;
	pid_t pid;

	/* No handler may run in the child before it has reset them all. */
	sigfillset(&all);
	(void)sigprocmask(SIG_BLOCK, &all, &old);
	pid = vfork();
	if (pid == 0)
		exec_command(argv, file, &old, &fail);
	if (exec_outcome(pid, &fail, &m))
		forward_pgid = pid; /* setsid() made the pid its process group id */
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	m.pid = pid;
	send_msg(ctl, &m);
	return m.err == 0 ? pid : -1;
}

/* Reap until the command has ended; return its wait status. */
static int reap_until(pid_t cmd)
{
	int status = 0;

	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, 0);

		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0) /* ECHILD: nothing left, the command is gone too */
			return status;
		if (p == cmd)
			return st;
	}
}

/* Run mode: one command, given on our own command line; we end with it. */
PDK_NORETURN static void run_one(int ctl, char **argv)
{
	struct pdk_init_msg m = {.type = PDK_INIT_MSG_EXIT};
	struct rusage ru;
	pid_t cmd;

	install_handlers();
	cmd = start_command(ctl, argv);
	if (cmd < 0)
		_exit(127);
	m.status = reap_until(cmd);
	m.pid = cmd;
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
		m.utime_us =
			(uint64_t)ru.ru_utime.tv_sec * 1000000ULL + (uint64_t)ru.ru_utime.tv_usec;
		m.stime_us =
			(uint64_t)ru.ru_stime.tv_sec * 1000000ULL + (uint64_t)ru.ru_stime.tv_usec;
		m.maxrss_kb = (uint64_t)ru.ru_maxrss;
	}
	send_msg(ctl, &m);
	/* Leaving pid 1 makes the kernel SIGKILL everything left in the namespace. */
	_exit(0);
}

/* ---- service mode ---- */

/* A process started on request, until its exit is reported. */
struct spawned {
	uint64_t id;
	pid_t pid;
};

struct server {
	int ctl;
	sigset_t oldmask; /* our mask before SIGCHLD was blocked: the children's */
	struct spawned *procs;
	size_t n, cap;
};

/* A SPAWN request, decoded; the strings point into the packet. */
struct spawn_req {
	const struct pdk_init_req *hdr;
	const char *cwd;
	char **argv;
	char **envp;
	char **sh_argv; /* /bin/sh FILE ARGS...: execvp's answer to ENOEXEC */
	const char *file;
	int fds[3];
	size_t nfds;
};

/* Split `n` NUL-terminated strings from *p (at most `end`) into a new vector. */
static char **split_strings(const char **p, const char *end, uint32_t n)
{
	char **v;

	if (n > PDK_INIT_MAX_REQ / 2)
		return NULL;
	v = calloc((size_t)n + 1, sizeof(*v));
	if (v == NULL)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		const char *nul = memchr(*p, '\0', (size_t)(end - *p));

		if (nul == NULL) {
			free(v);
			return NULL;
		}
		v[i] = (char *)*p;
		*p = nul + 1;
	}
	return v;
}

static const char *env_get(char **envp, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; envp[i] != NULL; i++)
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
			return envp[i] + n + 1;
	return NULL;
}

/* Decode; 0 or an errno for a malformed request. */
static int decode_spawn(const char *buf, size_t len, struct spawn_req *r)
{
	const char *p = buf + sizeof(*r->hdr);
	const char *end = buf + len;
	const char *nul;
	size_t argc;

	r->hdr = (const struct pdk_init_req *)buf;
	if (r->hdr->len != len - sizeof(*r->hdr) || r->hdr->argc == 0)
		return EPROTO;
	if (r->nfds != ((r->hdr->flags & PDK_INIT_SPAWN_PTY) ? 1u : 3u))
		return EBADF;
	nul = memchr(p, '\0', (size_t)(end - p));
	if (nul == NULL)
		return EPROTO;
	r->cwd = p;
	p = nul + 1;
	r->argv = split_strings(&p, end, r->hdr->argc);
	r->envp = r->argv ? split_strings(&p, end, r->hdr->envc) : NULL;
	if (r->envp == NULL)
		return EPROTO;
	r->file = strchr(r->argv[0], '/') ? r->argv[0]
					  : resolve_command(r->argv[0], env_get(r->envp, "PATH"));
	argc = r->hdr->argc;
	r->sh_argv = calloc(argc + 2, sizeof(char *));
	if (r->sh_argv == NULL)
		return ENOMEM;
	r->sh_argv[0] = (char *)"/bin/sh";
	r->sh_argv[1] = (char *)r->file;
	for (size_t i = 1; i < argc; i++)
		r->sh_argv[i + 1] = r->argv[i];
	return 0;
}

/* Make `fd` our descriptor `target`, kept across exec. */
static int install_fd(int fd, int target)
{
	if (fd == target)
		return fcntl(fd, F_SETFD, 0);
	return dup2(fd, target) < 0 ? -1 : 0;
}

/* In the vfork child: become the requested process. Never returns. */
PDK_NORETURN static void exec_spawn(const struct spawn_req *r, const sigset_t *mask,
				    volatile struct exec_failure *fail)
{
	bool pty = r->hdr->flags & PDK_INIT_SPAWN_PTY;

	(void)sigprocmask(SIG_SETMASK, mask, NULL);
	fail->stage = PDK_INIT_STAGE_SETSID;
	if (setsid() < 0)
		goto fail;
	/* SECURITY: the terminal is the sandbox's own pty, never one of the host's. */
	if (pty && ioctl(r->fds[0], TIOCSCTTY, 0) < 0)
		goto fail;
	for (int i = 0; i < 3; i++)
		if (install_fd(r->fds[pty ? 0 : i], i) < 0)
			goto fail;
	/* A missing working directory is told apart from a missing command. */
	fail->stage = PDK_INIT_STAGE_CWD;
	if (chdir(r->cwd) < 0)
		goto fail;
	fail->stage = PDK_INIT_STAGE_EXEC;
	if (r->file == NULL) {
		errno = ENOENT;
		goto fail;
	}
	execve(r->file, r->argv, r->envp);
	if (errno == ENOEXEC)
		execve("/bin/sh", r->sh_argv, r->envp);
fail:
	fail->err = errno;
	_exit(127);
}

static void track(struct server *s, uint64_t id, pid_t pid)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct spawned *p = realloc(s->procs, cap * sizeof(*p));

		if (p == NULL) /* its exit is then reported as an orphan's: not at all */
			return;
		s->procs = p;
		s->cap = cap;
	}
	s->procs[s->n++] = (struct spawned){id, pid};
}

static struct spawned *find_id(struct server *s, uint64_t id)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->procs[i].id == id)
			return &s->procs[i];
	return NULL;
}

static void spawn(struct server *s, const char *buf, size_t len, const int *fds, size_t nfds)
{
	struct spawn_req r = {.nfds = nfds};
	struct pdk_init_msg m = {.type = PDK_INIT_MSG_EXEC};
	volatile struct exec_failure fail = {0, PDK_INIT_STAGE_NONE};
	int bad;
	pid_t pid = -1;

	memcpy(r.fds, fds, nfds * sizeof(int));
	m.id = ((const struct pdk_init_req *)buf)->id;
	bad = decode_spawn(buf, len, &r);
	if (bad != 0) {
		m.err = bad;
		m.stage = PDK_INIT_STAGE_FORK;
	} else {
		pid = vfork();
		if (pid == 0)
			exec_spawn(&r, &s->oldmask, &fail);
		if (exec_outcome(pid, &fail, &m))
			track(s, m.id, pid);
	}
	m.pid = m.err == 0 ? pid : 0;
	send_msg(s->ctl, &m);
	free(r.argv);
	free(r.envp);
	free(r.sh_argv);
}

static void signal_one(struct server *s, const struct pdk_init_req *q)
{
	struct spawned *p = find_id(s, q->id);

	if (p != NULL && q->sig > 0 && q->sig < 65)
		(void)kill(-p->pid, q->sig); /* its group may be gone already */
}

/* Read one request; false when the supervisor is gone. */
static bool read_request(struct server *s)
{
	static char buf[PDK_INIT_MAX_REQ];
	int fds[3] = {-1, -1, -1};
	size_t nfds = PDK_ARRAY_SIZE(fds);
	ssize_t n = pdk_fdpass_recv(s->ctl, buf, sizeof(buf), fds, &nfds, MSG_DONTWAIT);

	/* A request cut short is dropped (its fds closed), as one too short to be a request. */
	if (n < 0)
		return n == -EAGAIN || n == -EMSGSIZE;
	if (n == 0 && nfds == 0)
		return false;
	if ((size_t)n >= sizeof(struct pdk_init_req)) {
		const struct pdk_init_req *q = (const struct pdk_init_req *)buf;

		if (q->type == PDK_INIT_REQ_SPAWN)
			spawn(s, buf, (size_t)n, fds, nfds);
		else if (q->type == PDK_INIT_REQ_SIGNAL)
			signal_one(s, q);
	}
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
	return true;
}

/* Reap every child that ended; report those we spawned. Orphans are reaped silently. */
static void reap_all(struct server *s)
{
	for (;;) {
		struct pdk_init_msg m = {.type = PDK_INIT_MSG_EXIT};
		struct rusage ru;
		int st;
		pid_t p = wait4(-1, &st, WNOHANG, &ru);

		if (p < 0 && errno == EINTR)
			continue;
		if (p <= 0)
			return;
		for (size_t i = 0; i < s->n; i++) {
			if (s->procs[i].pid != p)
				continue;
			m.id = s->procs[i].id;
			m.pid = p;
			m.status = st;
			m.utime_us = (uint64_t)ru.ru_utime.tv_sec * 1000000ULL +
				     (uint64_t)ru.ru_utime.tv_usec;
			m.stime_us = (uint64_t)ru.ru_stime.tv_sec * 1000000ULL +
				     (uint64_t)ru.ru_stime.tv_usec;
			m.maxrss_kb = (uint64_t)ru.ru_maxrss;
			send_msg(s->ctl, &m);
			s->procs[i] = s->procs[--s->n];
			break;
		}
	}
}

/*
 * Our own stdio becomes /dev/null: what the supervisor had there (a log
 * file) is not the sandbox's business, and fds received later must not
 * land on 0-2 (install_fd() relies on it).
 */
static void null_stdio(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		_exit(125);
	for (int i = 0; i < 3; i++)
		if (fd != i && dup2(fd, i) < 0)
			_exit(125);
	if (fd > 2)
		(void)close(fd);
}

PDK_NORETURN static void serve(int ctl)
{
	struct server s = {.ctl = ctl};
	struct pollfd pfd[2];
	sigset_t chld;

	null_stdio();
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	(void)sigprocmask(SIG_BLOCK, &chld, &s.oldmask); /* SIGCHLD: valid, cannot fail */
	pfd[0] = (struct pollfd){.fd = ctl, .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK),
				 .events = POLLIN};
	if (pfd[1].fd < 0)
		_exit(125);
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(125);
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;

			while (read(pfd[1].fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				;
			reap_all(&s);
		}
		/* The supervisor is gone: leaving pid 1 ends the sandbox. */
		if (pfd[0].revents && !read_request(&s))
			_exit(0);
	}
}

int main(int argc, char **argv)
{
	char *end = NULL;
	long ctl;

	/* SECURITY: nothing in the sandbox may ptrace or read the memory of pid 1. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return 125;
	if (argc < 3)
		return 125;
	ctl = strtol(argv[1], &end, 10);
	if (end == argv[1] || *end != '\0' || ctl < 3 || ctl > 1024)
		return 125;
	(void)fcntl((int)ctl, F_SETFD, FD_CLOEXEC); /* the command must not inherit it */
	if (argc == 3 && strcmp(argv[2], "--service") == 0)
		serve((int)ctl);
	if (argc < 4 || strcmp(argv[2], "--") != 0)
		return 125;
	run_one((int)ctl, argv + 3);
}
