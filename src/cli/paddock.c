/*
 * paddock.c - main(): dispatch to one verb.
 *
 * The main of both binaries (docs/internals/binaries.md). Built with
 * PDK_CLI_FRONT it is `paddock`, the front: it runs `run`, `version` and
 * `help` itself and hands every other verb to paddock-full
 * (pdk_cli_exec_full()), so that it is linked without the verbs' code and
 * what only they need (SQLite, OpenSSL, libevent, the HTTP stack), which a
 * static-pie binary would relocate at every start. Built without it, it is
 * paddock-full, every verb.
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "telemetry.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <string.h>

#ifdef PDK_CLI_FRONT
#define FULL(fn) NULL /* paddock-full runs it */
#else
#define FULL(fn) fn
#include "audit.h"
#include "egress.h"
#include "image.h"

/*
 * What the library reaches by weak references only, so that the front
 * binary is linked without it (engine/sandbox.c, session/session.c,
 * cli/cmd-run.c): named here, so that paddock-full links it.
 */
__attribute__((used)) static void (*const linked_in[])(void) = {
	(void (*)(void))pdk_egress_start,     (void (*)(void))pdk_egress_ca_new,
	(void (*)(void))pdk_image_store_open, (void (*)(void))pdk_image_config,
	(void (*)(void))pdk_audit_open,
};
#endif

static int cmd_help(int argc, char **argv);

/* main()'s argv, for pdk_cli_exec_full(). */
static char **main_argv;

static const struct pdk_command commands[] = {
	{"run", pdk_cmd_run, "run one command in a fresh sandbox"},
	{"ws", FULL(pdk_cmd_ws), "review, commit or discard workspace change sets"},
	{"profile", FULL(pdk_cmd_profile), "show or check sandbox profiles"},
	{"audit", FULL(pdk_cmd_audit), "list, show, follow, verify or export the audit trail"},
	{"serve", FULL(pdk_cmd_serve),
	 "run the control-plane daemon (REST API, long-lived sandboxes)"},
	{"ps", FULL(pdk_cmd_ps), "list the daemon's sandboxes"},
	{"create", FULL(pdk_cmd_create),
	 "create a long-lived sandbox (or claim one from a warm pool)"},
	{"exec", FULL(pdk_cmd_exec), "run a command in a running sandbox"},
	{"attach", FULL(pdk_cmd_attach), "an interactive shell in a running sandbox (recorded)"},
	{"cp", FULL(pdk_cmd_cp), "copy files or directories into or out of a sandbox"},
	{"pause", FULL(pdk_cmd_sandbox), "freeze a sandbox"},
	{"resume", FULL(pdk_cmd_sandbox), "thaw a paused sandbox"},
	{"snapshot", FULL(pdk_cmd_sandbox), "record a sandbox's workspace under a name"},
	{"rollback", FULL(pdk_cmd_sandbox), "put a sandbox's workspace back to a snapshot"},
	{"diff", FULL(pdk_cmd_sandbox), "list what a sandbox changed in its workspace"},
	{"commit", FULL(pdk_cmd_commit),
	 "apply a sandbox's workspace changes to the host directory"},
	{"port", FULL(pdk_cmd_port),
	 "forward a sandbox's port to the host's loopback (or list, --close)"},
	{"kill", FULL(pdk_cmd_sandbox),
	 "destroy sandboxes: by id, session, workflow, agent or label"},
	{"mcp", FULL(pdk_cmd_mcp), "serve the Model Context Protocol: tools that run in sandboxes"},
	{"gateway", FULL(pdk_cmd_gateway),
	 "one MCP endpoint before MCP servers that each run in a sandbox"},
	{"events", FULL(pdk_cmd_events), "print the daemon's audit events (--follow: live)"},
	{"approvals", FULL(pdk_cmd_approvals), "list the requests waiting for a human's approval"},
	{"approve", FULL(pdk_cmd_approvals),
	 "approve a pending request (paddock approvals lists them)"},
	{"deny", FULL(pdk_cmd_approvals), "deny a pending request"},
	{"image", FULL(pdk_cmd_image), "import, list, inspect or remove sandbox images"},
	{"version", pdk_cmd_version, "print the version"},
	{"supervise", FULL(pdk_cmd_supervise), NULL}, /* started by the daemon: not listed */
	{"help", cmd_help, "show this help"},
};

PDK_PRINTF(2, 0)
static void vmsg(const char *kind, const char *fmt, va_list ap)
{
	fputs("paddock: ", stderr);
	fputs(kind, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void pdk_cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

void pdk_cli_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("warning: ", fmt, ap);
	va_end(ap);
}

bool pdk_cli_quiet;

void pdk_cli_note(const char *fmt, ...)
{
	va_list ap;

	if (pdk_cli_quiet)
		return;
	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

/*
 * A notice (a best-effort control left out) says how to hide it: it comes
 * at every run on a machine without the means, and the user may have
 * accepted that (docs/rootless.md).
 */
static void cli_log(void *data, enum pdk_log_level level, const char *msg)
{
	(void)data;
	if (level == PDK_LOG_ERROR)
		pdk_cli_error("%s", msg);
	else if (level == PDK_LOG_WARN)
		pdk_cli_warn("%s", msg);
	else if (level == PDK_LOG_NOTICE && !pdk_cli_quiet)
		fprintf(stderr, "paddock: warning: %s (--quiet hides this)\n", msg);
	else if (!pdk_cli_quiet)
		fprintf(stderr, "paddock: %s\n", msg);
}

const struct pdk_log pdk_cli_log = {.fn = cli_log};

static bool holds(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	return strcmp(dir, "/") != 0 && strncmp(path, dir, n) == 0 &&
	       (path[n] == '\0' || path[n] == '/');
}

/*
 * Whether `w` is `h` or a directory above it under another name (a bind
 * mount of it, or of a directory above it): the same file by identity, as
 * the engine places its masks (docs/policy.md). "/" is left out, as by name.
 */
static bool aliases_above(const char *w, const char *h)
{
	_cleanup_free_ char *p = pdk_xstrdup(h);
	struct stat ws, ps;
	char *slash;

	if (stat(w, &ws) < 0)
		return false;
	while ((slash = strrchr(p, '/')) != NULL && slash != p) {
		if (stat(p, &ps) == 0 && ps.st_dev == ws.st_dev && ps.st_ino == ws.st_ino)
			return true;
		*slash = '\0';
	}
	return false;
}

bool pdk_cli_holds_home(const char *ws, char *const *envp, char **where)
{
	const char *home = pdk_env_get(envp, "HOME");
	char w[PATH_MAX], h[PATH_MAX];

	if (home == NULL || home[0] == '\0' || realpath(ws, w) == NULL ||
	    realpath(home, h) == NULL || strcmp(w, "/") == 0 ||
	    (!holds(w, h) && !aliases_above(w, h)))
		return false;
	*where = pdk_xstrdup(w);
	return true;
}

int pdk_cli_refuse_home(const char *verb, const char *ws, char *const *envp)
{
	_cleanup_free_ char *where = NULL;

	if (!pdk_cli_holds_home(ws, envp, &where))
		return 0;
	pdk_cli_error("%s: the workspace would be '%s', which holds your home directory: the "
		      "sandbox would see every dotfile in it (.npmrc, .gitconfig, .ssh, agent "
		      "configs)",
		      verb, where);
	fprintf(stderr,
		"paddock: cd into a project directory, or choose one with --workspace DIR%s; "
		"--allow-home runs there anyway\n",
		strcmp(verb, "run") == 0 ? " (--workspace-mode tmpfs for none at all)" : "");
	return PDK_EXIT_POLICY;
}

void pdk_cli_settings(struct pdk_settings *out)
{
	pdk_settings_from_env(out, environ, geteuid());
}

void pdk_cli_paths(struct pdk_paths *out)
{
	struct pdk_settings s;

	pdk_cli_settings(&s);
	*out = s.paths;
	s.paths = (struct pdk_paths){0};
	pdk_settings_release(&s);
}

char *pdk_cli_state_dir(void)
{
	struct pdk_paths p;
	char *dir;

	pdk_cli_paths(&p);
	dir = steal_ptr(&p.state_dir);
	pdk_paths_release(&p);
	return dir;
}

void pdk_cli_events_finish(struct pdk_events *ev)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_events_close(ev, &err) < 0)
		pdk_cli_warn("events: %s", err->msg);
	pdk_events_free(ev);
}

void pdk_cli_human_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	size_t u = 0;

	while (v >= 1024 && u + 1 < PDK_ARRAY_SIZE(units)) {
		v /= 1024;
		u++;
	}
	(void)snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

void pdk_cli_print_json(const json_t *j)
{
	_cleanup_free_ char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);

	if (s != NULL)
		printf("%s\n", s);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: paddock COMMAND [OPTIONS] [ARGS...]\n\n"
		     "paddock runs untrusted code in a sandbox built from kernel mechanisms:\n"
		     "namespaces, seccomp, Landlock, cgroups, rlimits, no capabilities.\n\n"
		     "commands:\n");
	for (size_t i = 0; i < PDK_ARRAY_SIZE(commands); i++)
		if (commands[i].summary != NULL)
			fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nRun 'paddock COMMAND --help' for a command's options.\n");
}

char *pdk_cli_full_path(void)
{
	struct pdk_settings st;
	char *p;

	pdk_cli_settings(&st);
	p = st.full_path != NULL ? pdk_xstrdup(st.full_path) : pdk_paths_helper("paddock-full");
	pdk_settings_release(&st);
	return p;
}

/* Whether `path` is this very binary (a PADDOCK_FULL that names the front would loop). */
static bool is_self(const char *path)
{
	struct stat a, b;

	return stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int pdk_cli_exec_full(const char *why)
{
	_cleanup_free_ char *full = pdk_cli_full_path();
	int e;

	if (is_self(full)) {
		pdk_cli_error("%s is this very binary, not paddock-full (PADDOCK_FULL names it?)",
			      full);
		return PDK_EXIT_SETUP;
	}
	(void)fflush(NULL);
	execv(full, main_argv);
	e = errno;
	if (why != NULL)
		pdk_cli_error("%s: %s; paddock-full, which has it, cannot be started: %s: %s",
			      main_argv[1], why, full, strerror(e));
	else
		pdk_cli_error("'%s' is run by paddock-full, which cannot be started: %s: %s",
			      main_argv[1], full, strerror(e));
	fputs("paddock: install paddock-full beside paddock or at that path, or name it with "
	      "PADDOCK_FULL\n",
	      stderr);
	return PDK_EXIT_SETUP;
}

struct fold_arg {
	const char *path;
	char *const *argv;
};

/* In the child (shares our memory until exec, see pdk_proc_clone): no allocation. */
static int fold_child(void *arg)
{
	const struct fold_arg *a = arg;
	sigset_t none;
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	/* The fold's report is not the command's output, which stdout carries. */
	if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
		_exit(127);
	/* run blocks the signals it reads from a signalfd, and ignores SIGPIPE. */
	(void)sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	(void)signal(SIGPIPE, SIG_DFL);
	execve(a->path, a->argv, environ);
	_exit(127);
}

void pdk_cli_fold_by_full(void)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *full = pdk_cli_full_path();
	char *argv[] = {"paddock", "audit", "fold", NULL};
	struct fold_arg a = {.path = full, .argv = argv};
	int pidfd = -1, status = 0;
	pid_t pid = pdk_proc_clone(0, fold_child, &a, &pidfd, &err);

	if (pid < 0)
		return pdk_cli_warn("audit: the run spools stay to be folded: %s", err->msg);
	(void)close(pidfd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		pdk_cli_warn("audit: the run spools stay to be folded: '%s audit fold' ended with "
			     "status %#x (127: it could not be started)",
			     full, (unsigned)status);
}

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	usage(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	main_argv = argv;
	pdk_json_seed();
	if (argc < 2) {
		usage(stderr);
		return PDK_EXIT_POLICY;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return cmd_help(argc - 1, argv + 1);
	if (strcmp(argv[1], "--version") == 0)
		return pdk_cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(commands); i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		if (commands[i].fn == NULL)
			return pdk_cli_exec_full(NULL);
		return commands[i].fn(argc - 1, argv + 1);
	}
	pdk_cli_error("unknown command '%s' (see 'paddock --help')", argv[1]);
	return PDK_EXIT_POLICY;
}
