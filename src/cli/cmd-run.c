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

#include <dirent.h>
#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

struct pdk_run_opts {
	const char *profile;
	const char *workspace;
	const char *ws_mode;
	const char *cwd;
	const char *events;
	const char *otlp;
	const char *timeout;
	const char *memory;
	const char *pids;
	const char *cpus;
	char **env;
	char **ro;
	char **rw;
	char **allow; /* --allow entries */
	const char *disk;
	const char *change_set;
	bool stats;
	bool discard;
	bool no_exec_trace;
	bool no_audit;
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
	{"disk", required_argument, NULL, OPT_DISK},
	{"change-set", required_argument, NULL, OPT_CHANGE_SET},
	{"no-exec-trace", no_argument, NULL, OPT_NO_EXEC_TRACE},
	{"no-audit", no_argument, NULL, OPT_NO_AUDIT},
	{"audit-queue-full", required_argument, NULL, OPT_AUDIT_FULL},
	{"allow", required_argument, NULL, OPT_ALLOW},
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
	      "  -w, --workspace DIR      host directory seen at its own path\n"
	      "                           (default: the current directory)\n"
	      "      --workspace-mode M   overlay: changes are kept as a change set, DIR\n"
	      "                           is untouched (see 'paddock ws'); rw: changes\n"
	      "                           are real; ro; tmpfs: empty; none\n"
	      "                           (default: the profile's; 'default' has overlay)\n"
	      "      --discard            overlay: drop the changes when CMD ends\n"
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
	      "      --audit-queue-full P when events come faster than the store takes\n"
	      "                           them: block (wait, the default) or stop (stop\n"
	      "                           the sandbox); never dropped\n"
	      "      --otlp URL           export events to an OpenTelemetry collector\n"
	      "                           (OTLP/HTTP JSON; default: OTEL_EXPORTER_OTLP_ENDPOINT)\n"
	      "      --allow HOST[:PORT]  let HTTP(S) to HOST out through the egress proxy\n"
	      "                           (repeatable; *.DOMAIN, IP literals; default\n"
	      "                           ports 80 and 443); implies network mode\n"
	      "                           allowlist. See docs/egress.md\n"
	      "      --stats              print wall time, CPU time and peak memory at the end\n"
	      "  -h, --help               show this help\n"
	      "\n"
	      "exit status: CMD's own, 128+N if it died of signal N; or 122 bad option or\n"
	      "profile, 123 memory limit, 124 time limit, 125 sandbox setup failed,\n"
	      "126 CMD not executable, 127 CMD not found.\n",
	      out);
}

static void opts_release(struct pdk_run_opts *o)
{
	pdk_strv_free(o->env);
	pdk_strv_free(o->ro);
	pdk_strv_free(o->rw);
	pdk_strv_free(o->allow);
}

/* Returns 0, 1 for --help, or -1 after printing an error. */
static int parse_opts(int argc, char **argv, struct pdk_run_opts *o)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:w:e:C:t:m:h", long_opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->profile = optarg;
			break;
		case 'w':
			o->workspace = optarg;
			break;
		case OPT_WS_MODE:
			o->ws_mode = optarg;
			break;
		case 'e':
			pdk_strv_push(&o->env, optarg);
			break;
		case 'C':
			o->cwd = optarg;
			break;
		case 't':
			o->timeout = optarg;
			break;
		case 'm':
			o->memory = optarg;
			break;
		case OPT_PIDS:
			o->pids = optarg;
			break;
		case OPT_CPUS:
			o->cpus = optarg;
			break;
		case OPT_RO:
			pdk_strv_push(&o->ro, optarg);
			break;
		case OPT_RW:
			pdk_strv_push(&o->rw, optarg);
			break;
		case OPT_EVENTS:
			o->events = optarg;
			break;
		case OPT_OTLP:
			o->otlp = optarg;
			break;
		case OPT_STATS:
			o->stats = true;
			break;
		case OPT_DISCARD:
			o->discard = true;
			break;
		case OPT_DISK:
			o->disk = optarg;
			break;
		case OPT_CHANGE_SET:
			o->change_set = optarg;
			break;
		case OPT_NO_EXEC_TRACE:
			o->no_exec_trace = true;
			break;
		case OPT_NO_AUDIT:
			o->no_audit = true;
			break;
		case OPT_AUDIT_FULL:
			o->audit_full = optarg;
			break;
		case OPT_ALLOW:
			pdk_strv_push(&o->allow, optarg);
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			fputs("Try 'paddock run --help'.\n", stderr);
			return -1;
		}
	}
	if (optind >= argc) {
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
	struct pdk_policy *policy;
	struct pdk_events *events;
	struct pdk_ws *ws; /* overlay mode: the change set */
	char *workspace;
	char **env;
	int sigfd;
	sigset_t oldmask;
};

/* The run's request, as runspec.h takes it. */
static void to_runspec(const struct pdk_run_opts *o, struct pdk_runspec *rs)
{
	*rs = (struct pdk_runspec){
		.profile = o->profile,
		.wall = {o->timeout, "--timeout"},
		.memory = {o->memory, "--memory"},
		.pids = {o->pids, "--pids"},
		.cpus = {o->cpus, "--cpus"},
		.disk = {o->disk, "--disk"},
		.ws_mode = {o->ws_mode, "--workspace-mode"},
		.workspace = o->workspace,
		.env = o->env,
		.env_name = "--env",
		.allow = o->allow,
		.allow_name = "--allow",
		.change_set = o->change_set,
		.discard = o->discard,
		.no_exec_trace = o->no_exec_trace,
	};
}

static int prepare(struct run_ctx *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report rep = {0};
	struct pdk_runspec rs;

	to_runspec(&c->o, &rs);
	rs.host_env = c->settings.envp;
	c->policy = pdk_policy_load(c->o.profile ? c->o.profile : "default",
				    c->settings.paths.profile_dir, &rep, &err);
	if (c->policy == NULL) {
		if (rep.n > 0)
			pdk_policy_report_print(&rep, stderr);
		else
			pdk_cli_error("%s", err->msg);
		pdk_policy_report_release(&rep);
		return -1;
	}
	pdk_policy_report_release(&rep);
	if (pdk_runspec_apply(&rs, c->policy, &err) < 0 ||
	    pdk_runspec_workspace(&rs, c->policy, &c->workspace, &err) < 0 ||
	    pdk_runspec_env(&rs, c->policy, &c->env, &err) < 0) {
		pdk_cli_error("run: %s", err->msg);
		return -1;
	}
	return 0;
}

static bool empty_dir(const char *path)
{
	_cleanup_closedir_ DIR *d = opendir(path);
	struct dirent *de;

	while (d != NULL && (de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			return false;
	return true;
}

/* A change set for the overlay, in the state directory (or the one --change-set names). */
static int make_change_set(struct run_ctx *c, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *state = c->settings.paths.state_dir;

	if (c->policy->workspace.mode != PDK_WS_OVERLAY)
		return 0;
	if (c->o.change_set != NULL) {
		if (pdk_ws_open(state, c->o.change_set, &c->ws, &err) < 0 ||
		    pdk_ws_lock(c->ws, &err) < 0) {
			pdk_cli_error("workspace: %s", err->msg);
			return -1;
		}
		free(c->workspace);
		c->workspace = pdk_xstrdup(pdk_ws_workspace(c->ws));
		/*
		 * A disk-limited set's upper layer starts as an empty tmpfs: what
		 * it holds so far becomes a snapshot first.
		 */
		if (pdk_ws_disk_limit(c->ws) > 0 && !empty_dir(pdk_ws_upper_path(c->ws)) &&
		    pdk_ws_snapshot(c->ws, &err) < 0) {
			pdk_cli_error("workspace: %s", err->msg);
			return -1;
		}
		return 0;
	}
	if (c->workspace == NULL)
		return 0;
	if (pdk_ws_create(state, c->workspace, id, c->policy->limits.disk, &c->ws, &err) < 0) {
		pdk_cli_error("workspace: %s", err->msg);
		return -1;
	}
	return 0;
}

/*
 * After the command: keep the changes as a change set and say where, drop
 * them (--discard, with an fs.change event each), or, when there are none,
 * remove the empty set.
 */
static int finish_change_set(struct run_ctx *c, int upper_fd)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_close_ int ufd = upper_fd;
	struct pdk_ws_diff d = {0};
	size_t count[PDK_WS_REPLACED + 1] = {0};
	const char *id = pdk_ws_id(c->ws);

	if (ufd >= 0 && pdk_ws_import_upper(c->ws, ufd, &err) < 0)
		goto fail;
	if (pdk_ws_diff(c->ws, 0, PDK_WS_CURRENT, &d, &err) < 0)
		goto fail;
	for (size_t i = 0; i < d.n; i++)
		count[d.v[i].kind]++;
	if (d.n > 0 && c->o.discard)
		(void)!pdk_ws_emit_changes(c->events, &d, "discarded", id, &err);
	/* An empty new set goes; one named by --change-set stays unless --discard. */
	if ((d.n == 0 && c->o.change_set == NULL) || c->o.discard) {
		pdk_error_free(&err);
		if (pdk_ws_remove(c->ws, &err) < 0)
			goto fail;
		if (d.n > 0)
			fprintf(stderr, "paddock: workspace: %zu change(s) discarded\n", d.n);
	} else if (d.n > 0) {
		fprintf(stderr,
			"paddock: workspace: %zu added, %zu modified, %zu deleted%s -> change set "
			"%.13s\n"
			"paddock: review with 'paddock ws diff %.13s'; apply with 'paddock ws commit "
			"%.13s'; drop with 'paddock ws discard %.13s'\n",
			count[PDK_WS_ADDED], count[PDK_WS_MODIFIED] + count[PDK_WS_REPLACED],
			count[PDK_WS_DELETED], count[PDK_WS_MODE] ? ", mode changes" : "", id, id,
			id, id);
	}
	pdk_ws_diff_release(&d);
	return 0;
fail:
	pdk_ws_diff_release(&d);
	pdk_cli_error("workspace: %s (the changes stay in '%s')", err->msg, pdk_ws_dir(c->ws));
	return -1;
}

static int run_sandbox(struct run_ctx *c, char id_out[37])
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_sandbox_config cfg = {
		.id = id_out,
		.policy = c->policy,
		.argv = c->o.argv,
		.envp = c->env,
		.cwd = c->o.cwd,
		.workspace = c->workspace,
		.ws_mode = c->policy->workspace.mode,
		.ws = c->ws,
		.extra_ro = c->o.ro,
		.extra_rw = c->o.rw,
		.events = c->events,
		.runtime_dir = c->settings.paths.runtime_dir,
		.settings = &c->settings,
		.log = &pdk_cli_log,
	};
	struct pdk_sandbox_result res;
	struct pdk_sandbox *sb = NULL;
	int upper_fd;
	int rc;

	if (pdk_sandbox_create(&cfg, &sb, &err) < 0) {
		pdk_cli_error("%s", err->msg);
		pdk_error_free(&err);
		/* Nothing ran: the change set is empty. */
		if (c->ws != NULL && pdk_ws_remove(c->ws, &err) < 0)
			pdk_cli_warn("cleanup: %s", err->msg);
		return PDK_EXIT_SETUP;
	}
	rc = pdk_sandbox_wait(sb, c->sigfd, &res, &err);
	if (rc < 0) {
		pdk_cli_error("%s", err->msg);
		pdk_error_free(&err);
	}
	upper_fd = pdk_sandbox_take_upper_fd(sb);
	if (pdk_sandbox_destroy(sb, &err) < 0)
		pdk_cli_warn("cleanup: %s", err->msg);
	/* Every process of the sandbox is gone: the layer is stable now. */
	if (c->ws != NULL && finish_change_set(c, upper_fd) < 0 && rc == 0)
		rc = -1;
	else if (c->ws == NULL && upper_fd >= 0)
		(void)close(upper_fd);
	if (rc < 0)
		return PDK_EXIT_SETUP;
	report_end(&c->o, c->policy, &res);
	return exit_code(&res);
}

/*
 * The run's event stream: the audit store (unless --no-audit), the
 * --events file, an OTLP exporter. A bad --otlp URL is a bad option; a bad
 * OTEL_* variable or an exporter that cannot start only costs the export
 * (a warning), never the run.
 */
static int open_events(struct run_ctx *c, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_audit_sink_config acfg = {.on_full = PDK_AUDIT_BLOCK};
	struct pdk_otlp_config cfg;
	int otlp;

	if (c->o.audit_full != NULL && strcmp(c->o.audit_full, "stop") == 0)
		acfg.on_full = PDK_AUDIT_STOP;
	else if (c->o.audit_full != NULL && strcmp(c->o.audit_full, "block") != 0) {
		pdk_cli_error("run: invalid --audit-queue-full '%s': expected block or stop",
			      c->o.audit_full);
		return PDK_EXIT_POLICY;
	}
	pdk_otlp_config_init(&cfg);
	otlp = pdk_otlp_config_from_env(&cfg, c->settings.envp, c->o.otlp, &err);
	if (otlp < 0 && c->o.otlp != NULL) {
		pdk_cli_error("run: %s", err->msg);
		pdk_otlp_config_release(&cfg);
		return PDK_EXIT_POLICY;
	}
	if (otlp < 0)
		pdk_cli_warn("OTLP export disabled: %s", err->msg);
	pdk_error_free(&err);
	/* No sink, no stream: nothing would read the events (nor the exec trace they carry). */
	if (c->o.no_audit && c->o.events == NULL && otlp <= 0) {
		pdk_otlp_config_release(&cfg);
		return 0;
	}
	c->events = pdk_events_new(id, "paddock-run");
	pdk_runspec_add_secrets(c->events, c->env, c->policy, c->settings.envp);
	if (!c->o.no_audit) {
		acfg.state_dir = c->settings.paths.state_dir;
		pdk_audit_add_sink(c->events, &acfg);
	}
	if (c->o.events != NULL && pdk_events_add_file(c->events, c->o.events, &err) < 0) {
		pdk_cli_error("%s", err->msg);
		pdk_otlp_config_release(&cfg);
		return PDK_EXIT_POLICY;
	}
	if (otlp > 0 && pdk_otlp_add_sink(c->events, &cfg, c->settings.otlp_helper, &err) < 0)
		pdk_cli_warn("OTLP export disabled: %s", err->msg);
	pdk_otlp_config_release(&cfg);
	return 0;
}

int pdk_cmd_run(int argc, char **argv)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct run_ctx c = {.sigfd = -1};
	char id[37];
	int rc = parse_opts(argc, argv, &c.o);

	if (rc != 0) {
		opts_release(&c.o);
		return rc > 0 ? 0 : PDK_EXIT_POLICY;
	}
	pdk_cli_settings(&c.settings);
	rc = prepare(&c) < 0 ? PDK_EXIT_POLICY : 0;
	pdk_make_id(id);
	if (rc == 0)
		rc = open_events(&c, id);
	if (rc == 0 && make_change_set(&c, id) < 0)
		rc = PDK_EXIT_SETUP;
	if (rc == 0)
		pdk_runspec_credential_env(&c.env, c.policy, id);
	if (rc == 0) {
		c.sigfd = make_sigfd(&c.oldmask);
		rc = c.sigfd < 0 ? PDK_EXIT_SETUP : run_sandbox(&c, id);
	}
	pdk_ws_free(c.ws);
	if (c.sigfd >= 0)
		(void)close(c.sigfd);
	pdk_cli_events_finish(c.events);
	pdk_policy_free(c.policy);
	pdk_strv_free(c.env);
	free(c.workspace);
	pdk_settings_release(&c.settings);
	opts_release(&c.o);
	return rc;
}
