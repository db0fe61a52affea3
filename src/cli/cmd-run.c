/*
 * cmd-run.c - `paddock run [OPTIONS] -- CMD [ARGS...]`: one command, one
 * fresh sandbox. This process is the sandbox's supervisor.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "cli.h"
#include "engine.h"
#include "policy.h"
#include "session.h"
#include "telemetry.h"
#include "workspace.h"

#include <getopt.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <sys/signalfd.h>

/*
 * The audit store (SQLite, OpenSSL) is reached by weak references: the
 * front binary, `paddock`, is linked without it (docs/internals/binaries.md)
 * and has paddock-full fold the spools (fold_if_many()).
 */
#pragma weak pdk_audit_open
#pragma weak pdk_audit_fold
#pragma weak pdk_audit_free

struct pdk_run_opts {
	const char *profile;
	const char *workspace;
	const char *ws_mode;
	const char *cwd;
	const char *events;
	const char *otlp;
	const char *limits[PDK_OVERRIDE_LIMITS]; /* the limit flags' text, by limit */
	char **env;
	char **ro;
	char **rw;
	char **allow; /* --allow entries */
	const char *change_set;
	const char *image; /* --image: the root's image ("host": the host's) */
	bool stats;
	bool discard;
	bool no_exec_trace;
	bool no_audit;
	bool allow_home;
	bool quiet;
	const char *audit_full;
	char **argv; /* borrowed from main's argv */
};

enum {
	OPT_PIDS = 256,
	OPT_CPUS,
	OPT_RO,
	OPT_RW,
	OPT_EVENTS,
	OPT_STATS,
	OPT_WS_MODE,
	OPT_DISCARD,
	OPT_DISK,
	OPT_CHANGE_SET,
	OPT_NO_EXEC_TRACE,
	OPT_NO_AUDIT,
	OPT_AUDIT_FULL,
	OPT_OTLP,
	OPT_ALLOW,
	OPT_ALLOW_HOME,
	OPT_IMAGE,
};

static const struct option long_opts[] = {
	{"profile", required_argument, NULL, 'p'},
	{"workspace", required_argument, NULL, 'w'},
	{"workspace-mode", required_argument, NULL, OPT_WS_MODE},
	{"env", required_argument, NULL, 'e'},
	{"cwd", required_argument, NULL, 'C'},
	{"timeout", required_argument, NULL, 't'},
	{"memory", required_argument, NULL, 'm'},
	{"pids", required_argument, NULL, OPT_PIDS},
	{"cpus", required_argument, NULL, OPT_CPUS},
	{"ro", required_argument, NULL, OPT_RO},
	{"rw", required_argument, NULL, OPT_RW},
	{"events", required_argument, NULL, OPT_EVENTS},
	{"otlp", required_argument, NULL, OPT_OTLP},
	{"stats", no_argument, NULL, OPT_STATS},
	{"discard", no_argument, NULL, OPT_DISCARD},
	{"allow-home", no_argument, NULL, OPT_ALLOW_HOME},
	{"disk", required_argument, NULL, OPT_DISK},
	{"change-set", required_argument, NULL, OPT_CHANGE_SET},
	{"no-exec-trace", no_argument, NULL, OPT_NO_EXEC_TRACE},
	{"no-audit", no_argument, NULL, OPT_NO_AUDIT},
	{"audit-queue-full", required_argument, NULL, OPT_AUDIT_FULL},
	{"allow", required_argument, NULL, OPT_ALLOW},
	{"image", required_argument, NULL, OPT_IMAGE},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
	fputs("usage: paddock run [OPTIONS] -- CMD [ARGS...]\n"
	      "\n"
	      "Run CMD in a fresh sandbox: new user, mount, pid, net, ipc, uts and cgroup\n"
	      "namespaces; a read-only view of the system; no network; no capabilities;\n"
	      "seccomp and Landlock; cgroup and rlimit limits. stdin, stdout and stderr are\n"
	      "handed to CMD as they are.\n"
	      "\n"
	      "options:\n"
	      "  -p, --profile NAME|FILE  profile: default, strict, a name under\n"
	      "                           ~/.config/paddock/profiles, or a YAML file\n"
	      "      --image IMAGE        the root filesystem: an image of 'paddock image ls'\n"
	      "                           (its layers read-only under a writable layer of\n"
	      "                           the sandbox's own; its env, working directory\n"
	      "                           and entrypoint apply; without CMD its own\n"
	      "                           command runs); 'host' for the host's root\n"
	      "                           (default: the profile's image:, else the host's)\n"
	      "  -w, --workspace DIR      host directory seen at its own path\n"
	      "                           (default: the current directory)\n"
	      "      --workspace-mode M   overlay: changes are kept as a change set, DIR\n"
	      "                           is untouched (see 'paddock ws'); rw: changes\n"
	      "                           are real; ro; tmpfs: empty; none\n"
	      "                           (default: the profile's; 'default' has overlay)\n"
	      "      --discard            overlay: drop the changes when CMD ends\n"
	      "      --allow-home         let the workspace be your home directory (refused\n"
	      "                           without it: every dotfile would be in the sandbox)\n"
	      "      --disk SIZE          limit on what the workspace may add: 100M, 2G\n"
	      "      --change-set ID      overlay on top of change set ID (its workspace,\n"
	      "                           its changes so far, its disk limit) and add to\n"
	      "                           it; --discard then drops the whole set\n"
	      "  -e, --env K=V            set K in the sandbox (K alone: copy from here)\n"
	      "  -C, --cwd DIR            working directory inside (default: the workspace)\n"
	      "  -t, --timeout DURATION   wall-clock limit: 500ms, 30s, 10m, 2h\n"
	      "  -m, --memory SIZE        memory limit: 512M, 2G (never best-effort)\n"
	      "      --pids N             limit on processes and threads\n"
	      "      --cpus N             CPU bandwidth, e.g. 0.5 or 2\n"
	      "      --ro PATH            also bind host PATH read-only (repeatable)\n"
	      "      --rw PATH            also bind host PATH read-write (repeatable)\n"
	      "      --events FILE        also append JSON-lines events to FILE\n"
	      "      --no-exec-trace      do not record every exec in the sandbox (by default\n"
	      "                           each one is a process.exec event)\n"
	      "      --no-audit           do not record this run in the audit store\n"
	      "                           (see 'paddock audit'; recorded by default)\n"
	      "      --audit-queue-full P block or stop; accepted for scripts that give it:\n"
	      "                           a run writes each event before it goes on, so\n"
	      "                           nothing queues and nothing is dropped\n"
	      "      --otlp URL           export events to an OpenTelemetry collector\n"
	      "                           (OTLP/HTTP JSON; default: OTEL_EXPORTER_OTLP_ENDPOINT)\n"
	      "      --allow HOST[:PORT]  let HTTP(S) to HOST out through the egress proxy\n"
	      "                           (repeatable; *.DOMAIN, IP literals; default\n"
	      "                           ports 80 and 443); implies network mode\n"
	      "                           allowlist. See docs/egress.md\n"
	      "      --stats              print wall time, CPU time and peak memory at the end\n"
	      "  -q, --quiet              print only errors and warnings: no notice of a\n"
	      "                           best-effort limit left out (no delegated cgroup,\n"
	      "                           docs/rootless.md), no change-set summary\n"
	      "  -h, --help               show this help\n"
	      "\n"
	      "exit status: CMD's own, 128+N if it died of signal N; or 122 bad option or\n"
	      "profile, 123 memory limit, 124 time limit, 125 sandbox setup failed,\n"
	      "126 CMD not executable, 127 CMD not found.\n",
	      out);
}

/* The flags that override a limit, in the order their errors are looked for. */
static const struct {
	enum pdk_override_limit which;
	const char *name;
} limit_flags[] = {
	{PDK_OVERRIDE_WALL, "--timeout"}, {PDK_OVERRIDE_MEMORY, "--memory"},
	{PDK_OVERRIDE_PIDS, "--pids"},    {PDK_OVERRIDE_CPUS, "--cpus"},
	{PDK_OVERRIDE_DISK, "--disk"},
};

#define OPT(field)   offsetof(struct pdk_run_opts, field)
#define LIMIT(which) (OPT(limits) + (which) * sizeof(const char *))

/* Each flag and where it goes in struct pdk_run_opts: text (the last wins), a list, a switch. */
static const struct {
	int opt;
	enum { FLAG_TEXT, FLAG_LIST, FLAG_ON } kind;
	size_t offset;
} flags[] = {
	{'p', FLAG_TEXT, OPT(profile)},
	{'w', FLAG_TEXT, OPT(workspace)},
	{OPT_WS_MODE, FLAG_TEXT, OPT(ws_mode)},
	{'e', FLAG_LIST, OPT(env)},
	{'C', FLAG_TEXT, OPT(cwd)},
	{'t', FLAG_TEXT, LIMIT(PDK_OVERRIDE_WALL)},
	{'m', FLAG_TEXT, LIMIT(PDK_OVERRIDE_MEMORY)},
	{OPT_PIDS, FLAG_TEXT, LIMIT(PDK_OVERRIDE_PIDS)},
	{OPT_CPUS, FLAG_TEXT, LIMIT(PDK_OVERRIDE_CPUS)},
	{OPT_DISK, FLAG_TEXT, LIMIT(PDK_OVERRIDE_DISK)},
	{OPT_RO, FLAG_LIST, OPT(ro)},
	{OPT_RW, FLAG_LIST, OPT(rw)},
	{OPT_EVENTS, FLAG_TEXT, OPT(events)},
	{OPT_OTLP, FLAG_TEXT, OPT(otlp)},
	{OPT_STATS, FLAG_ON, OPT(stats)},
	{OPT_DISCARD, FLAG_ON, OPT(discard)},
	{OPT_CHANGE_SET, FLAG_TEXT, OPT(change_set)},
	{OPT_NO_EXEC_TRACE, FLAG_ON, OPT(no_exec_trace)},
	{OPT_NO_AUDIT, FLAG_ON, OPT(no_audit)},
	{OPT_AUDIT_FULL, FLAG_TEXT, OPT(audit_full)},
	{OPT_ALLOW, FLAG_LIST, OPT(allow)},
	{OPT_ALLOW_HOME, FLAG_ON, OPT(allow_home)},
	{OPT_IMAGE, FLAG_TEXT, OPT(image)},
	{'q', FLAG_ON, OPT(quiet)},
};

static void opts_release(struct pdk_run_opts *o)
{
	pdk_strv_free(o->env);
	pdk_strv_free(o->ro);
	pdk_strv_free(o->rw);
	pdk_strv_free(o->allow);
}

/* Flag `c` with its argument into *o; false for no such flag. */
static bool set_flag(struct pdk_run_opts *o, int c, const char *arg)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(flags); i++) {
		char *field = (char *)o + flags[i].offset;

		if (flags[i].opt != c)
			continue;
		if (flags[i].kind == FLAG_TEXT)
			*(const char **)field = arg;
		else if (flags[i].kind == FLAG_LIST)
			pdk_strv_push((char ***)field, arg);
		else
			*(bool *)field = true;
		return true;
	}
	return false;
}

/* Returns 0, 1 for --help, or -1 after printing an error. */
static int parse_opts(int argc, char **argv, struct pdk_run_opts *o)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:w:e:C:t:m:qh", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (!set_flag(o, c, optarg)) {
			fputs("Try 'paddock run --help'.\n", stderr);
			return -1;
		}
	}
	/* On an image, no command runs the image's own (its entrypoint and cmd). */
	if (optind >= argc && (o->image == NULL || strcmp(o->image, "host") == 0)) {
		pdk_cli_error(
			"run: no command given (usage: paddock run [OPTIONS] -- CMD [ARGS...])");
		return -1;
	}
	o->argv = argv + optind;
	return 0;
}

/* Block the signals we forward; read them from a signalfd in the supervisor loop. */
static int make_sigfd(sigset_t *old)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(sigs); i++)
		sigaddset(&set, sigs[i]);
	if (sigprocmask(SIG_BLOCK, &set, old) < 0)
		return -1;
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

static int exit_code(const struct pdk_sandbox_result *r)
{
	switch (r->end) {
	case PDK_SANDBOX_EXITED:
		return r->exit_code;
	case PDK_SANDBOX_SIGNALED:
		return 128 + r->signal;
	case PDK_SANDBOX_TIMEOUT:
		return PDK_EXIT_TIMEOUT;
	case PDK_SANDBOX_OOM:
		return PDK_EXIT_OOM;
	case PDK_SANDBOX_EXEC_FAILED:
		return r->exec_errno == ENOENT ? PDK_EXIT_NOTFOUND : PDK_EXIT_NOEXEC;
	case PDK_SANDBOX_LOST:
		return PDK_EXIT_SETUP;
	default:
		return PDK_EXIT_SETUP;
	}
}

static void report_end(const struct pdk_run_opts *o, const struct pdk_policy *p,
		       const struct pdk_sandbox_result *r)
{
	char peak[32];

	if (r->end == PDK_SANDBOX_TIMEOUT)
		pdk_cli_error("time limit of %llu ms reached: the sandbox was killed",
			      (unsigned long long)p->limits.wall_ms);
	else if (r->end == PDK_SANDBOX_OOM)
		pdk_cli_error("memory limit reached: the command was killed by the OOM killer");
	else if (r->end == PDK_SANDBOX_EXEC_FAILED && r->exec_errno == ENOENT)
		pdk_cli_error("cannot execute '%s': command not found", o->argv[0]);
	else if (r->end == PDK_SANDBOX_EXEC_FAILED)
		pdk_cli_error("cannot execute '%s': %s", o->argv[0], strerror(r->exec_errno));
	else if (r->oom_kills > 0)
		pdk_cli_warn("the OOM killer killed %llu process(es) in the sandbox (memory limit)",
			     (unsigned long long)r->oom_kills);
	else if (r->end == PDK_SANDBOX_LOST)
		pdk_cli_error("the sandbox ended without reporting its command's status");
	if (!o->stats)
		return;
	pdk_cli_human_size(r->memory_peak, peak, sizeof(peak));
	fprintf(stderr,
		"paddock: stats: exit %d | wall %.1f ms | cpu %.1f ms | peak memory %s | setup %.2f ms%s\n",
		exit_code(r), (double)r->wall_ns / 1e6, (double)r->cpu_ns / 1e6, peak,
		(double)r->setup_ns / 1e6, r->oom_kills ? " | oom kills" : "");
}

struct run_ctx {
	struct pdk_run_opts o;
	struct pdk_settings settings; /* what our environment says (base/settings.h) */
	struct pdk_overrides overrides;
	struct pdk_otlp_config otlp;
	bool otlp_on; /* an endpoint is configured */
	struct pdk_session *session;
	int sigfd;
	sigset_t oldmask;
};

/* The flags' text as typed values: the limits, the workspace mode. 0, or -1 after printing. */
static int parse_overrides(struct run_ctx *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const struct pdk_run_opts *o = &c->o;
	struct pdk_overrides *ov = &c->overrides;

	*ov = (struct pdk_overrides){
		.allow = o->allow,
		.allow_name = "--allow",
		.workspace = o->workspace,
		.change_set = o->change_set,
		.image = o->image,
		.discard = o->discard,
		.no_exec_trace = o->no_exec_trace,
	};
	for (size_t i = 0; i < PDK_ARRAY_SIZE(limit_flags) && err == NULL; i++) {
		const char *text = o->limits[limit_flags[i].which];

		if (text != NULL)
			(void)!pdk_overrides_parse_limit(ov, limit_flags[i].which, text,
							 limit_flags[i].name, &err);
	}
	if (err == NULL && o->ws_mode != NULL)
		(void)!pdk_overrides_parse_ws_mode(ov, o->ws_mode, "--workspace-mode", &err);
	if (err == NULL)
		return 0;
	pdk_cli_error("run: %s", err->msg);
	return -1;
}

/*
 * The run's event sinks as options: the audit store (unless --no-audit)
 * and what it does when full, the --events file, an OTLP exporter. A bad
 * --otlp URL is a bad option; a bad OTEL_* variable only costs the export
 * (a warning), never the run. 0, or -1 after printing.
 */
static int parse_event_opts(struct run_ctx *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *full = c->o.audit_full;
	int otlp;

	if (full != NULL && strcmp(full, "stop") != 0 && strcmp(full, "block") != 0) {
		pdk_cli_error("run: invalid --audit-queue-full '%s': expected block or stop", full);
		return -1;
	}
	otlp = pdk_otlp_config_from_env(&c->otlp, c->settings.envp, c->o.otlp, &err);
	if (otlp < 0 && c->o.otlp != NULL) {
		pdk_cli_error("run: %s", err->msg);
		return -1;
	}
	if (otlp < 0)
		pdk_cli_warn("OTLP export disabled: %s", err->msg);
	c->otlp_on = otlp > 0;
	return 0;
}

/* Is `dir` `path` itself or a directory above it, other than / (both canonical)? */
/*
 * Refuse a workspace that is the home directory or holds it (122): `paddock
 * run` from $HOME would put every dotfile in the sandbox, without a word (and,
 * for a user whose state directory is under the home, fail with a message
 * about the state directory). Only for the modes that show the directory: a
 * change set names its own, and tmpfs and none show nothing of it.
 */
static int check_home(const struct run_ctx *c)
{
	const char *mode = c->o.ws_mode;

	if (c->o.allow_home || c->o.change_set != NULL ||
	    (mode != NULL && (strcmp(mode, "tmpfs") == 0 || strcmp(mode, "none") == 0)))
		return 0;
	return pdk_cli_refuse_home("run", c->o.workspace != NULL ? c->o.workspace : ".",
				   c->settings.envp);
}

/* A failed open, said as `paddock run` always said it; the exit status. */
static int open_failed(const struct pdk_session_failure *why, const struct pdk_error *err)
{
	switch (why->step) {
	case PDK_SESSION_PROFILE:
		if (why->report.n > 0)
			pdk_policy_report_print(&why->report, stderr);
		else
			pdk_cli_error("%s", err->msg);
		return PDK_EXIT_POLICY;
	case PDK_SESSION_OVERRIDES:
	case PDK_SESSION_WORKSPACE:
	case PDK_SESSION_ENV:
		pdk_cli_error("run: %s", err->msg);
		return PDK_EXIT_POLICY;
	case PDK_SESSION_IMAGE:
		pdk_cli_error("run: image: %s", err->msg);
		return PDK_EXIT_POLICY;
	case PDK_SESSION_EVENTS:
		pdk_cli_error("%s", err->msg);
		return PDK_EXIT_POLICY;
	case PDK_SESSION_CHANGE_SET:
	case PDK_SESSION_SANDBOX:
	default:
		/* The step's name, unless the message already starts with it. */
		if (pdk_error_has_context(err->msg, pdk_session_step_name(why->step)))
			pdk_cli_error("%s", err->msg);
		else
			pdk_cli_error("%s: %s", pdk_session_step_name(why->step), err->msg);
		return PDK_EXIT_SETUP;
	}
}

static int open_session(struct run_ctx *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_session_failure why;
	const struct pdk_session_opts so = {
		.profile = c->o.profile,
		.overrides = c->overrides,
		.env = c->o.env,
		.env_name = "--env",
		.settings = &c->settings,
		.log = &pdk_cli_log,
		.actor = "paddock-run",
		.audit = !c->o.no_audit,
		.events_file = c->o.events,
		.otlp = c->otlp_on ? &c->otlp : NULL,
		.argv = c->o.argv,
		.cwd = c->o.cwd,
		.extra_ro = c->o.ro,
		.extra_rw = c->o.rw,
	};
	int rc = 0;

	c->session = pdk_session_open(&so, &why, &err);
	/*
	 * The front binary is linked without what the policy needs: nothing
	 * was made, and paddock-full runs the whole command instead.
	 */
	if (c->session == NULL && why.needs_full) {
		rc = pdk_cli_exec_full(err->msg);
		pdk_policy_report_release(&why.report);
		return rc;
	}
	if (c->session == NULL)
		rc = open_failed(&why, err);
	pdk_policy_report_release(&why.report);
	return rc;
}

/*
 * What became of the overlay's changes: kept as a change set (and where),
 * or dropped (--discard). An empty set goes without a word.
 */
static void report_change_set(const struct pdk_session_result *end)
{
	const char *id = end->change_set;

	if (end->ws == PDK_SESSION_WS_DISCARDED)
		pdk_cli_note("workspace: %zu change(s) discarded", end->changes);
	if (end->ws != PDK_SESSION_WS_KEPT || end->changes == 0)
		return;
	pdk_cli_note("workspace: %zu added, %zu modified, %zu deleted%s -> change set %.13s",
		     end->added, end->modified, end->deleted,
		     end->mode_changes ? ", mode changes" : "", id);
	pdk_cli_note("review with 'paddock ws diff %.13s'; apply with 'paddock ws commit %.13s'; "
		     "drop with 'paddock ws discard %.13s'",
		     id, id, id);
}

/*
 * The end of the session: what became of the change set is said here; the
 * sinks' failure (end->events_err) is for the caller to say last.
 */
static int finish(struct run_ctx *c, bool ran, struct pdk_session_result *end)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int rc = pdk_session_finish(c->session, end, &err);

	if (rc < 0 && ran)
		pdk_cli_error("workspace: %s (the changes stay in '%s')", err->msg,
			      pdk_ws_dir(pdk_session_ws(c->session)));
	else if (rc < 0)
		pdk_cli_warn("cleanup: %s", err->msg);
	else if (ran)
		report_change_set(end);
	return rc;
}

static void report_events_end(struct pdk_session_result *end)
{
	if (end->events_err != NULL)
		pdk_cli_warn("events: %s", end->events_err->msg);
	pdk_session_result_release(end);
}

/*
 * After the command has run this long, the supervisor gives back the pages
 * of the binary its set-up touched (engine/sandbox.h, pdk_sandbox_wait()):
 * a long-lived run's supervisor drops from about 3 MiB to under 1 MiB of
 * PSS, and a short command (most tool calls) ends before it and never pays
 * the page faults of the pages its teardown takes back
 * (docs/internals/performance.md, "The idle supervisor's memory").
 */
#define RUN_RELEASE_MS 200

static int run_sandbox(struct run_ctx *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_session_result end;
	struct pdk_sandbox_result res;
	int rc;

	if (pdk_session_start(c->session, &err) < 0) {
		pdk_cli_error("%s", err->msg);
		/* Nothing ran: a change set made for this run goes. */
		(void)!finish(c, false, &end);
		report_events_end(&end);
		return PDK_EXIT_SETUP;
	}
	rc = pdk_sandbox_wait(pdk_session_sandbox(c->session), c->sigfd, RUN_RELEASE_MS, &res,
			      &err);
	if (rc < 0)
		pdk_cli_error("%s", err->msg);
	pdk_cli_net_denials(pdk_sandbox_denials(pdk_session_sandbox(c->session)));
	if (finish(c, true, &end) < 0)
		rc = -1;
	if (rc == 0)
		report_end(&c->o, pdk_session_policy(c->session), &res);
	report_events_end(&end);
	return rc < 0 ? PDK_EXIT_SETUP : exit_code(&res);
}

/* PADDOCK_AUDIT_FOLD_AT (docs/audit.md), else PDK_AUDIT_SPOOL_FOLD_AT. */
static int fold_at(const struct run_ctx *c)
{
	const char *v = pdk_env_get(c->settings.envp, "PADDOCK_AUDIT_FOLD_AT");
	uint64_t n;

	if (v == NULL || pdk_parse_u64(v, 1 << 20, &n) < 0 || n == 0)
		return PDK_AUDIT_SPOOL_FOLD_AT;
	return (int)n;
}

/*
 * A run leaves its records in its spool; the audit commands fold them into
 * the store. So that spools do not pile up on a machine where nobody reads
 * the store, a run that finds fold_at() of them waiting (counted once
 * .waiting says so) folds them itself,
 * after its command has ended (one run in that many pays it). A failure
 * costs nothing but the wait: the records stay in their spools.
 */
static void fold_if_many(struct run_ctx *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *state = c->settings.paths.state_dir;
	struct pdk_audit_fold res;
	struct pdk_audit *a = NULL;
	int n;

	if (c->o.no_audit)
		return;
	/*
	 * The spool directory (up to 128 spools and 128 spares) is read only
	 * when .waiting says enough may wait: reading it was 0.08 ms of every
	 * run (docs/internals/performance.md).
	 */
	n = pdk_audit_spool_waiting(state);
	if (n >= 0 && n < fold_at(c))
		return;
	n = pdk_audit_spool_count(state);
	if (n < fold_at(c)) {
		pdk_audit_spool_waiting_set(state, n);
		return;
	}
	if (pdk_audit_open == NULL) {
		pdk_cli_fold_by_full();
		return;
	}
	if (pdk_audit_open(state, &a, &err) < 0 || pdk_audit_fold(a, &res, &err) < 0)
		pdk_cli_warn("audit: the run spools stay to be folded: %s", err->msg);
	pdk_audit_free(a);
}

int pdk_cmd_run(int argc, char **argv)
{
	struct run_ctx c = {.sigfd = -1};
	int rc = parse_opts(argc, argv, &c.o);

	if (rc != 0) {
		opts_release(&c.o);
		return rc > 0 ? 0 : PDK_EXIT_POLICY;
	}
	pdk_cli_quiet = c.o.quiet;
	/*
	 * A reader of --events (a pipe, a FIFO) that goes away is a failed
	 * write to handle (the sandbox is stopped, docs/audit.md), not a signal
	 * that kills us before the sandbox is torn down. The sandbox's child
	 * resets every disposition, so the command still gets SIGPIPE.
	 */
	(void)signal(SIGPIPE, SIG_IGN);
	pdk_cli_settings(&c.settings);
	pdk_otlp_config_init(&c.otlp);
	if (parse_overrides(&c) < 0 || parse_event_opts(&c) < 0)
		rc = PDK_EXIT_POLICY;
	if (rc == 0)
		rc = check_home(&c);
	if (rc == 0)
		rc = open_session(&c);
	if (rc == 0) {
		c.sigfd = make_sigfd(&c.oldmask);
		rc = c.sigfd < 0 ? PDK_EXIT_SETUP : run_sandbox(&c);
	}
	pdk_session_free(c.session);
	if (c.session != NULL)
		fold_if_many(&c);
	if (c.sigfd >= 0)
		(void)close(c.sigfd);
	pdk_otlp_config_release(&c.otlp);
	pdk_settings_release(&c.settings);
	opts_release(&c.o);
	return rc;
}
