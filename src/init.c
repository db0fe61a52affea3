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
 * from the sandbox's filesystem.
 */
#include "common.h"
#include "init-proto.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TEMP_FAILURE_RETRY /* glibc has it; musl does not */
#define TEMP_FAILURE_RETRY(expr)                          \
	({                                                \
		long init__r;                             \
		do                                        \
			init__r = (long)(expr);           \
		while (init__r == -1L && errno == EINTR); \
		init__r;                                  \
	})
#endif

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
static const char *resolve_command(const char *name)
{
	static char buf[4096];
	const char *path = getenv("PATH");
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

/* Start the command; report its exec to the supervisor. Returns its pid or -1. */
static pid_t start_command(int ctl, char **argv)
{
	struct pdk_init_msg m = {.type = PDK_INIT_MSG_EXEC};
	volatile struct exec_failure fail = {0, PDK_INIT_STAGE_NONE};
	const char *file = resolve_command(argv[0]);
	sigset_t all, old;
	pid_t pid;

	/* No handler may run in the child before it has reset them all. */
	sigfillset(&all);
	(void)sigprocmask(SIG_BLOCK, &all, &old);
	pid = vfork();
	if (pid == 0)
		exec_command(argv, file, &old, &fail);
	if (pid < 0) {
		m.err = errno;
		m.stage = PDK_INIT_STAGE_FORK;
	} else if (fail.err != 0) {
		m.err = fail.err;
		m.stage = (uint32_t)fail.stage;
		(void)waitpid(pid, NULL, 0); /* it has _exited already */
	} else {
		forward_pgid = pid; /* setsid() made the pid its process group id */
	}
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

int main(int argc, char **argv)
{
	struct pdk_init_msg m = {.type = PDK_INIT_MSG_EXIT};
	struct rusage ru;
	char *end = NULL;
	long ctl;
	pid_t cmd;

	/* SECURITY: nothing in the sandbox may ptrace or read the memory of pid 1. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return 125;
	if (argc < 4 || strcmp(argv[2], "--") != 0)
		return 125;
	ctl = strtol(argv[1], &end, 10);
	if (end == argv[1] || *end != '\0' || ctl < 3 || ctl > 1024)
		return 125;
	(void)fcntl((int)ctl, F_SETFD, FD_CLOEXEC); /* the command must not inherit it */
	install_handlers();

	cmd = start_command((int)ctl, argv + 3);
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
	send_msg((int)ctl, &m);
	/* Leaving pid 1 makes the kernel SIGKILL everything left in the namespace. */
	_exit(0);
}
