/*
 * supervisor.c - `paddock supervise`: one sandbox in service mode, driven
 * over its control socket (docs/internals/daemon.md).
 *
 * Setup is a list of steps, each named in the error it may return (the
 * daemon shows it): spec, policy, workspace, events, sandbox, socket. Then
 * one poll loop serves the control connection, the sandbox's descriptors
 * and the budgets until the sandbox is destroyed or ends by itself.
 */
#include "common.h"
#include "base.h"
#include "session.h"
#include "supervisor-internal.h"
#include "supervisor.h"
#include "svc-proto.h"

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define SPEC_MAX        (1 << 20)
#define BUDGET_CHECK_MS 100
#define MAX_EXECS       1024
#define NSEC_PER_MS     1000000ULL
#define NUDGE_MS        10 /* at most one {"ev":"events"} per this long */

/* ---- replies ---- */

void pdk__sv_send(struct pdk_supervisor *s, json_t *msg, const int *fds, size_t nfds)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (s->conn_fd >= 0 && pdk_svc_send(s->conn_fd, msg, fds, nfds, &err) < 0) {
		/* The daemon went away or is not reading: it asks for status when back. */
		pdk_log(s->log, PDK_LOG_WARN, "%s", err->msg);
	}
	json_decref(msg);
}

void pdk__sv_reply_error(struct pdk_supervisor *s, json_int_t req, const char *code,
			 const char *field, const struct pdk_error *err)
{
	json_t *e = json_pack("{s:s, s:s}", "code", code, "message", err != NULL ? err->msg : code);

	if (field != NULL)
		pdk_json_set(e, "field", json_string(field));
	pdk__sv_send(s, json_pack("{s:I, s:o}", "req", req, "error", e), NULL, 0);
}

static void reply_errorx(struct pdk_supervisor *s, json_int_t req, const char *code,
			 const char *field, const char *msg)
{
	struct pdk_error e = {.status = EINVAL, .msg = (char *)msg};

	pdk__sv_reply_error(s, req, code, field, &e);
}

/* ---- the spec ---- */

static int read_spec(int fd, json_t **out, struct pdk_error **err)
{
	_cleanup_free_ char *buf = pdk_xmalloc(SPEC_MAX + 1);
	json_error_t jerr;
	size_t len = 0;

	for (;;) {
		ssize_t n = TEMP_FAILURE_RETRY(read(fd, buf + len, SPEC_MAX + 1 - len));

		if (n < 0)
			return pdk_error_set(err, errno, "spec: cannot read the spec fd");
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > SPEC_MAX)
			return pdk_error_setx(err, E2BIG, "spec: larger than %d bytes", SPEC_MAX);
	}
	*out = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (*out == NULL || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return pdk_error_setx(err, EINVAL, "spec: not a JSON object (%s, line %d)",
				      jerr.text, jerr.line);
	}
	return 0;
}

/* A limit as the policy file writes it: "512M", 256, 1.5. Borrowed or in *buf. */
static const char *value_text(json_t *v, char **buf)
{
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_integer(v))
		return *buf = pdk_xasprintf("%lld", (long long)json_integer_value(v));
	if (json_is_real(v))
		return *buf = pdk_xasprintf("%g", json_real_value(v));
	return NULL;
}

/* Texts owned for the runspec's sake. */
struct spec_texts {
	char *num[8];
	char **env;
	char **allow;
};

static void spec_texts_release(struct spec_texts *t)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(t->num); i++)
		free(t->num[i]);
	pdk_strv_free(t->env);
	pdk_strv_free(t->allow);
}

static const char *spec_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

static int spec_to_runspec(json_t *spec, struct pdk_runspec *rs, struct spec_texts *t,
			   struct pdk_error **err)
{
	json_t *lim = json_object_get(json_object_get(spec, "overrides"), "limits");
	json_t *net = json_object_get(json_object_get(spec, "overrides"), "network");
	json_t *ws = json_object_get(spec, "workspace");
	json_t *env = json_object_get(spec, "env");
	json_t *v;
	const char *k;
	size_t i;

	*rs = (struct pdk_runspec){
		.profile = spec_str(spec, "profile"),
		.wall = {value_text(json_object_get(lim, "wall"), &t->num[0]), "limits.wall"},
		.memory = {value_text(json_object_get(lim, "memory"), &t->num[1]), "limits.memory"},
		.pids = {value_text(json_object_get(lim, "pids"), &t->num[2]), "limits.pids"},
		.cpus = {value_text(json_object_get(lim, "cpu"), &t->num[3]), "limits.cpu"},
		.egress_bytes = {value_text(json_object_get(lim, "egress_bytes"), &t->num[4]),
				 "limits.egress_bytes"},
		.disk = {value_text(json_object_get(lim, "disk"), &t->num[5]), "limits.disk"},
		.ws_mode = {spec_str(ws, "mode"), "workspace.mode"},
		.workspace = spec_str(ws, "path"),
		.env_name = "env",
		.allow_name = "overrides.network.allow",
	};
	if (spec_str(spec, "policy_file") != NULL)
		rs->profile = spec_str(spec, "policy_file");
	json_object_foreach(env, k, v)
	{
		if (!json_is_string(v))
			return pdk_error_setx(err, EINVAL, "spec: env '%s' is not a string", k);
		pdk_strv_push_take(&t->env, pdk_xasprintf("%s=%s", k, json_string_value(v)));
	}
	json_array_foreach(json_object_get(net, "allow"), i, v)
	{
		if (!json_is_string(v))
			return pdk_error_setx(err, EINVAL,
					      "spec: network.allow[%zu] is not a string", i);
		pdk_strv_push(&t->allow, json_string_value(v));
	}
	rs->env = t->env;
	rs->allow = t->allow;
	rs->no_exec_trace =
		json_is_false(json_object_get(json_object_get(spec, "audit"), "exec_trace"));
	if (rs->workspace != NULL && rs->workspace[0] != '/')
		return pdk_error_setx(err, EINVAL, "spec: workspace.path must be absolute");
	return 0;
}

/* A budget the supervisor keeps itself: cpu_time (duration), commands (count). */
static int spec_budgets(struct pdk_supervisor *s, struct pdk_error **err)
{
	json_t *lim = json_object_get(json_object_get(s->spec, "overrides"), "limits");
	_cleanup_free_ char *b1 = NULL, *b2 = NULL;
	const char *cpu = value_text(json_object_get(lim, "cpu_time"), &b1);
	const char *cmds = value_text(json_object_get(lim, "commands"), &b2);
	uint64_t ms;

	if (cpu != NULL && (pdk_parse_duration(cpu, &ms) < 0 || ms == 0))
		return pdk_error_setx(err, EINVAL,
				      "policy: invalid limits.cpu_time '%s': expected a duration",
				      cpu);
	if (cpu != NULL)
		s->cpu_limit_ns = ms * NSEC_PER_MS;
	if (cmds != NULL &&
	    (pdk_parse_u64(cmds, UINT32_MAX, &s->commands_limit) < 0 || s->commands_limit == 0))
		return pdk_error_setx(err, EINVAL,
				      "policy: invalid limits.commands '%s': expected a count",
				      cmds);
	s->wall_limit_ns = s->policy->limits.wall_ms * NSEC_PER_MS;
	return 0;
}

static int apply_network_mode(struct pdk_supervisor *s, struct pdk_error **err)
{
	json_t *net = json_object_get(json_object_get(s->spec, "overrides"), "network");
	const char *mode = spec_str(net, "mode");
	static const enum pdk_net_mode modes[] = {PDK_NET_NONE, PDK_NET_ALLOWLIST, PDK_NET_HOST};

	if (mode == NULL)
		return 0;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(modes); i++) {
		if (strcmp(mode, pdk_policy_net_mode_name(modes[i])) == 0) {
			s->policy->network.mode = modes[i];
			return 0;
		}
	}
	return pdk_error_setx(err, EINVAL,
			      "policy: invalid overrides.network.mode '%s': expected none, "
			      "allowlist or host",
			      mode);
}

static int setup_policy(struct pdk_supervisor *s, struct pdk_error **err)
{
	struct spec_texts t = {0};
	struct pdk_policy_report rep = {0};
	struct pdk_runspec rs;
	int rc = spec_to_runspec(s->spec, &rs, &t, err);

	rs.host_env = s->settings->envp;
	if (rc == 0) {
		s->policy = pdk_policy_load(rs.profile ? rs.profile : "default",
					    s->settings->paths.profile_dir, &rep, err);
		if (s->policy == NULL)
			rc = pdk_error_wrap(err, "policy");
	}
	if (rc == 0)
		rc = apply_network_mode(s, err);
	if (rc == 0 && pdk_runspec_apply(&rs, s->policy, err) < 0)
		rc = pdk_error_wrap(err, "policy");
	if (rc == 0)
		rc = spec_budgets(s, err);
	/* A spec without a workspace gets a private one, in overlay mode unless told otherwise. */
	if (rc == 0 && rs.workspace == NULL && s->policy->workspace.mode != PDK_WS_NONE) {
		_cleanup_error_ struct pdk_error *e = NULL;

		s->private_ws = pdk_xasprintf("%s/sandboxes/%s", s->state_dir, s->id);
		s->workspace = pdk_xasprintf("%s/workspace", s->private_ws);
		if (rs.ws_mode.value == NULL)
			s->policy->workspace.mode = PDK_WS_OVERLAY;
		if (pdk_mkdir_p(s->workspace, err) < 0)
			rc = pdk_error_wrap(err, "workspace");
	} else if (rc == 0 && pdk_runspec_workspace(&rs, s->policy, &s->workspace, err) < 0) {
		rc = pdk_error_wrap(err, "workspace");
	}
	if (rc == 0 && pdk_runspec_env(&rs, s->policy, &s->env, err) < 0)
		rc = pdk_error_wrap(err, "policy");
	pdk_policy_report_release(&rep);
	spec_texts_release(&t);
	return rc;
}

static int setup_workspace(struct pdk_supervisor *s, struct pdk_error **err)
{
	if (s->policy->workspace.mode != PDK_WS_OVERLAY || s->workspace == NULL)
		return 0;
	if (pdk_ws_create(s->state_dir, s->workspace, s->id, 0, &s->ws, err) < 0)
		return pdk_error_wrap(err, "workspace");
	return 0;
}

static int setup_events(struct pdk_supervisor *s, struct pdk_error **err)
{
	json_t *labels = json_object_get(s->spec, "labels");
	_cleanup_free_ char *path = pdk_xasprintf("%s/events.jsonl", s->run_dir);

	/* SECURITY: one sink, a file: no audit store, no OTLP, no key in this process. */
	s->events = pdk_events_new(s->id, "paddock-supervise");
	pdk_events_set_labels(s->events, spec_str(labels, "session"), spec_str(labels, "workflow"));
	pdk_runspec_add_secrets(s->events, s->env, s->policy, s->settings->envp);
	if (pdk_events_add_file(s->events, path, err) < 0)
		return pdk_error_wrap(err, "events");
	s->spool_fd = TEMP_FAILURE_RETRY(open(path, O_PATH | O_CLOEXEC));
	if (s->spool_fd < 0)
		return pdk_error_set(err, errno, "events: cannot open '%s'", path);
	return 0;
}

static int setup_sandbox(struct pdk_supervisor *s, struct pdk_error **err)
{
	_cleanup_free_ char *cg_text = NULL, *cg_file = NULL;

	pdk_runspec_credential_env(&s->env, s->policy, s->id);
	s->cfg = (struct pdk_sandbox_config){
		.id = s->id,
		.policy = s->policy,
		.envp = s->env,
		.service = true,
		.settings = s->settings,
		.runtime_dir = s->run_dir,
		.workspace = s->workspace,
		.ws_mode = s->policy->workspace.mode,
		.ws = s->ws,
		.events = s->events,
		.log = s->log,
	};
	if (pdk_sandbox_create(&s->cfg, &s->sb, err) < 0)
		return pdk_error_wrap(err, "sandbox");
	/*
	 * RUNDIR/sb/ID/cgroup: where the sandbox's cgroup is, for the daemon to kill and
	 * remove should this process die without cleaning up (docs/internals/daemon.md).
	 */
	cg_text = pdk_sandbox_cgroup_describe(s->sb);
	cg_file = pdk_xasprintf("%s/cgroup", s->run_dir);
	if (pdk_write_file_at(AT_FDCWD, cg_file, cg_text, true, err) < 0)
		return pdk_error_wrap(err, "sandbox");
	pdk_sandbox_owner(s->sb, &s->uid, &s->gid);
	s->root_fd = pdk_sandbox_root_fd(s->sb, err);
	if (s->root_fd < 0)
		return pdk_error_wrap(err, "sandbox");
	return 0;
}

static int setup_socket(struct pdk_supervisor *s, struct pdk_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_free_ char *path = pdk_xasprintf("%s/ctl.sock", s->run_dir);
	mode_t old;
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return pdk_error_setx(err, ENAMETOOLONG, "socket: '%s' is too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->listen_fd < 0)
		return pdk_error_set(err, errno, "socket: cannot create");
	(void)unlink(path); /* a stale one from a crashed supervisor of the same id */
	old = umask(0077);  /* 0600: only our user (and root) may connect */
	rc = bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(s->listen_fd, 4) < 0)
		return pdk_error_set(err, errno, "socket: cannot listen on '%s'", path);
	return 0;
}

static int setup_dirs(struct pdk_supervisor *s, struct pdk_error **err)
{
	const char *rd = spec_str(s->spec, "run_dir");
	const char *sd = spec_str(s->spec, "state_dir");
	const char *base = rd ? rd : s->settings->paths.runtime_dir;
	_cleanup_free_ char *pidfile = NULL, *pid = NULL;

	s->state_dir = pdk_xstrdup(sd ? sd : s->settings->paths.state_dir);
	s->run_dir = pdk_xasprintf("%s/sb/%s", base, s->id);
	if (pdk_mkdir_p(s->run_dir, err) < 0)
		return pdk_error_wrap(err, "rundir");
	pidfile = pdk_xasprintf("%s/supervisor.pid", s->run_dir);
	pid = pdk_xasprintf("%d\n", (int)getpid());
	if (pdk_write_file_at(AT_FDCWD, pidfile, pid, true, err) < 0)
		return pdk_error_wrap(err, "rundir");
	return 0;
}

/* The id names a directory: UUID-like text only. */
static bool valid_id(const char *id)
{
	size_t n = strlen(id);

	return n == 36 && strspn(id, "0123456789abcdef-") == n;
}

/* Signals: SIGTERM/SIGINT end the sandbox; SIGPIPE never kills us. */
static int setup_signals(struct pdk_supervisor *s, struct pdk_error **err)
{
	sigset_t set;

	(void)signal(SIGPIPE, SIG_IGN);
	(void)signal(SIGHUP, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return pdk_error_set(err, errno, "signals");
	s->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s->sig_fd < 0)
		return pdk_error_set(err, errno, "signals");
	return 0;
}

/* ---- readiness ---- */

static void report_ready(struct pdk_supervisor *s, int ready_fd, const struct pdk_error *err)
{
	_cleanup_free_ char *line = NULL;
	json_t *m;

	if (ready_fd < 0)
		return;
	if (err == NULL) {
		m = json_pack("{s:b, s:i, s:i, s:s}", "ok", 1, "pid", (int)getpid(), "init_pid",
			      (int)pdk_sandbox_init_pid(s->sb), "id", s->id);
	} else {
		const char *colon = strchr(err->msg, ':');
		_cleanup_free_ char *step = colon ? strndup(err->msg, (size_t)(colon - err->msg))
						  : pdk_xstrdup("setup");

		m = json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "message", err->msg, "step",
			      step ? step : "setup");
	}
	line = pdk_json_dump_line(m);
	json_decref(m);
	if (line != NULL)
		(void)!pdk_write_all(ready_fd, line, strlen(line)); /* no reader: nothing to do */
	(void)close(ready_fd);
}

/* ---- time and budgets ---- */

static uint64_t wall_ns(const struct pdk_supervisor *s)
{
	uint64_t now = s->paused_since ? s->paused_since : pdk_now_mono_ns();

	return now - s->created_ns - s->paused_ns;
}

static void end_with(struct pdk_supervisor *s, const char *reason, const char *limit, json_t *value)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (s->ended != NULL)
		return;
	s->ended = reason;
	if (limit != NULL) {
		json_t *a = json_pack("{s:s, s:o}", "limit", limit, "value", value);

		(void)!pdk_events_emit(s->events, "limit.exceeded", 0, a, &err);
	} else {
		json_decref(value);
	}
	pdk__sv_send(s, json_pack("{s:s, s:s}", "ev", "ended", "reason", reason), NULL, 0);
}

static void check_budgets(struct pdk_supervisor *s)
{
	struct pdk_sandbox_usage u;

	if (s->paused_since != 0)
		return;
	if (s->wall_limit_ns && wall_ns(s) >= s->wall_limit_ns) {
		end_with(s, "wall", "wall", json_integer((json_int_t)s->policy->limits.wall_ms));
		return;
	}
	if (s->cpu_limit_ns == 0)
		return;
	pdk_sandbox_usage(s->sb, &u);
	if (s->cpu_base_ns + u.cpu_ns >= s->cpu_limit_ns)
		end_with(s, "cpu_time", "cpu_time",
			 json_integer((json_int_t)(s->cpu_limit_ns / NSEC_PER_MS)));
}

/*
 * Tell the connected daemon that the spool grew, at most once per
 * NUDGE_MS; returns the ms until a nudge held back may go (-1: none).
 */
static int nudge(struct pdk_supervisor *s)
{
	uint64_t now = pdk_now_mono_ns();
	struct stat st;

	if (s->conn_fd < 0 || s->spool_fd < 0 || fstat(s->spool_fd, &st) < 0 ||
	    st.st_size == s->spool_told)
		return -1;
	if (now - s->nudge_ns < NUDGE_MS * NSEC_PER_MS)
		return (int)((s->nudge_ns + NUDGE_MS * NSEC_PER_MS - now) / NSEC_PER_MS) + 1;
	s->spool_told = st.st_size;
	s->nudge_ns = now;
	pdk__sv_send(s, json_pack("{s:s}", "ev", "events"), NULL, 0);
	return -1;
}

/* How long the loop may sleep: budgets, exec timeouts, the sandbox's own needs. */
static int loop_timeout_ms(struct pdk_supervisor *s)
{
	uint64_t now = pdk_now_mono_ns();
	uint64_t ms = UINT64_MAX;
	int sb_ms = pdk_sandbox_poll_timeout_ms(s->sb);

	if (s->paused_since == 0 && s->wall_limit_ns) {
		uint64_t w = wall_ns(s);

		ms = w >= s->wall_limit_ns ? 0
					   : (s->wall_limit_ns - w + NSEC_PER_MS - 1) / NSEC_PER_MS;
	}
	if (s->paused_since == 0 && s->cpu_limit_ns && ms > BUDGET_CHECK_MS)
		ms = BUDGET_CHECK_MS;
	for (size_t i = 0; i < s->n_execs; i++) {
		uint64_t d = s->execs[i].deadline;

		if (d != 0 && !s->execs[i].timed_out)
			ms = d <= now ? 0
			     : (d - now + NSEC_PER_MS - 1) / NSEC_PER_MS < ms
				     ? (d - now + NSEC_PER_MS - 1) / NSEC_PER_MS
				     : ms;
	}
	if (sb_ms >= 0 && (uint64_t)sb_ms < ms)
		ms = (uint64_t)sb_ms;
	/* Events from the egress proxy's thread do not wake us: look again soon. */
	if (s->conn_fd >= 0 && s->policy->network.mode == PDK_NET_ALLOWLIST && ms > 100)
		ms = 100;
	return ms == UINT64_MAX ? -1 : ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* ---- execs ---- */

static struct sv_exec *find_exec(struct pdk_supervisor *s, uint64_t id)
{
	for (size_t i = 0; i < s->n_execs; i++)
		if (s->execs[i].id == id)
			return &s->execs[i];
	return NULL;
}

static void drop_exec(struct pdk_supervisor *s, struct sv_exec *e)
{
	if (e->pty_master >= 0)
		(void)close(e->pty_master);
	pdk_strv_free(e->argv);
	*e = s->execs[--s->n_execs];
}

static void check_exec_timeouts(struct pdk_supervisor *s)
{
	uint64_t now = pdk_now_mono_ns();

	for (size_t i = 0; i < s->n_execs; i++) {
		struct sv_exec *e = &s->execs[i];
		_cleanup_error_ struct pdk_error *err = NULL;

		if (e->deadline == 0 || e->timed_out || now < e->deadline)
			continue;
		e->timed_out = true;
		if (pdk_sandbox_signal_exec(s->sb, e->id, SIGKILL, &err) < 0)
			pdk_log(s->log, PDK_LOG_WARN, "%s", err->msg);
	}
}

/* The sandbox's environment plus the request's "K=V" entries (later wins). */
static char **exec_env(struct pdk_supervisor *s, json_t *env)
{
	char **v = pdk_strv_dup(s->env);
	json_t *e;
	size_t i;

	json_array_foreach(env, i, e)
	{
		const char *kv = json_string_value(e);
		size_t klen;
		size_t j;

		if (kv == NULL || strchr(kv, '=') == NULL || kv[0] == '=')
			continue;
		klen = strcspn(kv, "=");
		for (j = 0; v[j] != NULL; j++) {
			if (strncmp(v[j], kv, klen + 1) == 0) {
				free(v[j]);
				v[j] = pdk_xstrdup(kv);
				break;
			}
		}
		if (v[j] == NULL)
			pdk_strv_push(&v, kv);
	}
	return v;
}

/*
 * A pty for an interactive exec: master stays here until the reply, slave
 * goes to the init. It comes from the sandbox's own devpts instance
 * (/dev/pts/ptmx inside), so the process sees its terminal as /dev/pts/N
 * of its own /dev, and no host pty is involved; the slave is opened from
 * the master (TIOCGPTPEER), never by a path.
 */
static int open_pty(struct pdk_supervisor *s, json_t *msg, int *master, int *slave)
{
	struct winsize ws = {.ws_row = 24, .ws_col = 80};
	json_t *c = json_object_get(msg, "cols"), *r = json_object_get(msg, "rows");
	int unlock = 0;

	if (json_is_integer(c) && json_integer_value(c) > 0 && json_integer_value(c) < 10000)
		ws.ws_col = (unsigned short)json_integer_value(c);
	if (json_is_integer(r) && json_integer_value(r) > 0 && json_integer_value(r) < 10000)
		ws.ws_row = (unsigned short)json_integer_value(r);
	*master = pdk__sv_open_in(s, "/dev/pts/ptmx", O_RDWR | O_NOCTTY, 0);
	if (*master < 0)
		return *master;
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 ||
	    (*slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		int e = errno;

		(void)close(*master);
		return -e;
	}
	(void)ioctl(*master, TIOCSWINSZ, &ws); /* a size the terminal keeps or not */
	return 0;
}

static bool valid_argv(json_t *argv)
{
	json_t *a;
	size_t i;

	if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 65536)
		return false;
	json_array_foreach(argv, i, a)
	{
		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a))
			return false;
	}
	return json_string_length(json_array_get(argv, 0)) > 0;
}

static void op_exec(struct pdk_supervisor *s, json_int_t req, json_t *msg, int *fds, size_t nfds)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *argv = json_object_get(msg, "argv");
	json_t *to = json_object_get(msg, "timeout_ms");
	bool pty = json_is_true(json_object_get(msg, "pty"));
	bool warm = json_is_true(json_object_get(msg, "warm"));
	const char *cwd = spec_str(msg, "cwd");
	_cleanup_strv_ char **av = NULL, **env = NULL;
	struct pdk_sandbox_exec_req sp = {.pty_fd = -1};
	int master = -1, slave = -1;
	struct sv_exec *e;
	uint64_t id;
	json_t *a;
	size_t i;
	int rc;

	if (!valid_argv(argv))
		return reply_errorx(s, req, "bad_request", "argv",
				    "'argv' must be a non-empty array of strings");
	if (!pty && nfds != 3)
		return reply_errorx(s, req, "bad_request", "fds",
				    "exec needs 3 fds: stdin, stdout, stderr");
	if (s->paused_since != 0)
		return reply_errorx(s, req, "conflict", NULL, "the sandbox is paused");
	if (s->commands_limit && s->commands >= s->commands_limit)
		return reply_errorx(s, req, "limit", "commands",
				    "the sandbox's commands budget is spent");
	if (s->n_execs >= MAX_EXECS)
		return reply_errorx(s, req, "busy", NULL, "too many running execs");
	json_array_foreach(argv, i, a) pdk_strv_push(&av, json_string_value(a));
	env = exec_env(s, json_object_get(msg, "env"));
	if (pty && (rc = open_pty(s, msg, &master, &slave)) < 0) {
		(void)pdk_error_set(&err, -rc, "cannot allocate a pty");
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	}
	sp = (struct pdk_sandbox_exec_req){.argv = av, .envp = env, .pty_fd = slave};
	sp.cwd = cwd                                                        ? cwd
		 : s->workspace && s->policy->workspace.mode != PDK_WS_NONE ? s->workspace
									    : "/";
	if (!pty)
		memcpy(sp.fds, fds, sizeof(sp.fds));
	rc = pdk_sandbox_exec(s->sb, &sp, &id, &err);
	if (slave >= 0)
		(void)close(slave);
	if (rc < 0) {
		if (master >= 0)
			(void)close(master);
		return pdk__sv_reply_error(s, req, rc == -E2BIG ? "too_large" : "internal", NULL,
					   err);
	}
	if (!warm)
		s->commands++;
	s->execs = pdk_xrealloc(s->execs, (s->n_execs + 1) * sizeof(*s->execs));
	e = &s->execs[s->n_execs++];
	*e = (struct sv_exec){.id = id,
			      .req = req,
			      .start_ns = pdk_now_mono_ns(),
			      .pty_master = master,
			      .warm = warm,
			      .argv = steal_ptr(&av)};
	if (json_is_integer(to) && json_integer_value(to) > 0)
		e->deadline = e->start_ns + (uint64_t)json_integer_value(to) * NSEC_PER_MS;
}

static void emit_proc(struct pdk_supervisor *s, const char *kind, json_t *a, bool always)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	/* With exec tracing the tracer records every exec attempt and exit already. */
	if (!always && pdk_sandbox_traced(s->sb)) {
		json_decref(a);
		return;
	}
	if (pdk_events_emit(s->events, kind, 0, a, &err) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "%s", err->msg);
}

static void on_started(struct pdk_supervisor *s, struct sv_exec *e,
		       const struct pdk_sandbox_proc *p)
{
	json_t *r = json_pack("{s:I, s:I, s:i}", "req", e->req, "exec", (json_int_t)e->id, "pid",
			      p->pid);

	e->pid = p->pid;
	pdk__sv_send(s, r, e->pty_master >= 0 ? &e->pty_master : NULL, e->pty_master >= 0);
	if (e->pty_master >= 0) {
		(void)close(e->pty_master);
		e->pty_master = -1;
	}
	e->req = 0;
	emit_proc(s, "process.exec",
		  json_pack("{s:i, s:o, s:I, s:b}", "pid", p->pid, "argv", pdk_json_strv(e->argv),
			    "exec", (json_int_t)e->id, "warm", e->warm),
		  false);
}

static void on_failed(struct pdk_supervisor *s, struct sv_exec *e, const struct pdk_sandbox_proc *p)
{
	_cleanup_free_ char *msg =
		pdk_xasprintf("%s: %s", strerrorname_np(p->err) ? strerrorname_np(p->err) : "E?",
			      strerror(p->err));
	json_t *err = json_pack("{s:s, s:s, s:s, s:i}", "code", "exec_failed", "message", msg,
				"field", "argv[0]", "errno", p->err);

	pdk__sv_send(s, json_pack("{s:I, s:o}", "req", e->req, "error", err), NULL, 0);
	emit_proc(s, "process.exec",
		  json_pack("{s:o, s:I, s:s, s:i}", "argv", pdk_json_strv(e->argv), "exec",
			    (json_int_t)e->id, "error", strerror(p->err), "errno", p->err),
		  true);
	drop_exec(s, e);
}

static void on_exited(struct pdk_supervisor *s, struct sv_exec *e, const struct pdk_sandbox_proc *p)
{
	const char *end = e->timed_out             ? "timeout"
			  : e->killed              ? "killed"
			  : WIFSIGNALED(p->status) ? "signaled"
						   : "exited";
	json_t *m = json_pack(
		"{s:s, s:I, s:s, s:i, s:i, s:I, s:I, s:I}", "ev", "exit", "exec", (json_int_t)e->id,
		"end", end, "exit_code", WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1,
		"signal", WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0, "duration_ns",
		(json_int_t)(pdk_now_mono_ns() - e->start_ns), "cpu_ns",
		(json_int_t)(p->cpu_us * 1000), "maxrss_kb", (json_int_t)p->maxrss_kb);

	emit_proc(s, "process.exit",
		  json_pack("{s:i, s:I, s:s, s:i}", "pid", p->pid, "exec", (json_int_t)e->id, "end",
			    end, "status", p->status),
		  false);
	pdk__sv_send(s, m, NULL, 0);
	drop_exec(s, e);
}

static void drain_procs(struct pdk_supervisor *s)
{
	struct pdk_sandbox_proc p;

	while (pdk_sandbox_next_proc(s->sb, &p) == 1) {
		struct sv_exec *e = find_exec(s, p.exec_id);

		if (e == NULL)
			continue;
		if (p.kind == PDK_SANDBOX_PROC_STARTED)
			on_started(s, e, &p);
		else if (p.kind == PDK_SANDBOX_PROC_FAILED)
			on_failed(s, e, &p);
		else
			on_exited(s, e, &p);
	}
}

/* ---- other operations ---- */

static json_t *usage_json(struct pdk_supervisor *s)
{
	struct pdk_sandbox_usage u;

	pdk_sandbox_usage(s->sb, &u);
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "wall_ns",
			 (json_int_t)wall_ns(s), "paused_ns",
			 (json_int_t)(s->paused_ns +
				      (s->paused_since ? pdk_now_mono_ns() - s->paused_since : 0)),
			 "cpu_ns", (json_int_t)(s->cpu_base_ns + u.cpu_ns), "memory_current",
			 (json_int_t)u.memory_current, "memory_peak", (json_int_t)u.memory_peak,
			 "pids_current", (json_int_t)u.pids_current, "commands",
			 (json_int_t)s->commands, "egress_bytes", (json_int_t)u.egress_bytes);
}

static json_t *limits_json(struct pdk_supervisor *s)
{
	const struct pdk_policy_limits *l = &s->policy->limits;

	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "wall_ns",
			 (json_int_t)s->wall_limit_ns, "cpu_ns", (json_int_t)s->cpu_limit_ns,
			 "memory", (json_int_t)l->memory, "pids", (json_int_t)l->pids, "commands",
			 (json_int_t)s->commands_limit, "egress_bytes", (json_int_t)l->egress_bytes,
			 "disk",
			 (json_int_t)(s->policy->workspace.mode == PDK_WS_TMPFS ? l->disk : 0));
}

static void op_status(struct pdk_supervisor *s, json_int_t req)
{
	json_t *execs = json_array();

	for (size_t i = 0; i < s->n_execs; i++)
		json_array_append_new(execs, json_integer((json_int_t)s->execs[i].id));
	pdk__sv_send(s,
		     json_pack("{s:I, s:s, s:s, s:i, s:i, s:I, s:o, s:o, s:o}", "req", req, "state",
			       s->ended          ? "ended"
			       : s->paused_since ? "paused"
						 : "running",
			       "id", s->id, "init_pid", (int)pdk_sandbox_init_pid(s->sb),
			       "supervisor_pid", (int)getpid(), "created_ns",
			       (json_int_t)s->created_real_ns, "usage", usage_json(s), "limits",
			       limits_json(s), "execs", execs),
		     NULL, 0);
}

static void op_signal(struct pdk_supervisor *s, json_int_t req, json_t *msg)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *ex = json_object_get(msg, "exec"), *sig = json_object_get(msg, "sig");
	struct sv_exec *e =
		json_is_integer(ex) ? find_exec(s, (uint64_t)json_integer_value(ex)) : NULL;

	if (e == NULL)
		return reply_errorx(s, req, "not_found", "exec", "no such running exec");
	if (!json_is_integer(sig) || json_integer_value(sig) <= 0 || json_integer_value(sig) > 64)
		return reply_errorx(s, req, "bad_request", "sig", "'sig' must be a signal number");
	if (pdk_sandbox_signal_exec(s->sb, e->id, (int)json_integer_value(sig), &err) < 0)
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	if (json_integer_value(sig) == SIGKILL)
		e->killed = true;
	pdk__sv_send(s, json_pack("{s:I, s:b}", "req", req, "ok", 1), NULL, 0);
}

static void op_pause(struct pdk_supervisor *s, json_int_t req, bool pause)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pause && s->paused_since == 0) {
		if (pdk_sandbox_pause(s->sb, &err) < 0)
			return pdk__sv_reply_error(s, req,
						   err->status == EBUSY     ? "busy"
						   : err->status == ENOTSUP ? "conflict"
									    : "internal",
						   NULL, err);
		s->paused_since = pdk_now_mono_ns();
	} else if (!pause && s->paused_since != 0) {
		if (pdk_sandbox_resume(s->sb, &err) < 0)
			return pdk__sv_reply_error(s, req, "internal", NULL, err);
		s->paused_ns += pdk_now_mono_ns() - s->paused_since;
		s->paused_since = 0;
	}
	pdk__sv_send(s, json_pack("{s:I, s:s}", "req", req, "state", pause ? "paused" : "running"),
		     NULL, 0);
}

static void op_diff(struct pdk_supervisor *s, json_int_t req)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ws_diff d = {0};
	json_t *changes;

	if (s->ws == NULL)
		return reply_errorx(s, req, "conflict", NULL,
				    "the workspace is not an overlay: no changes are kept");
	if (pdk_ws_diff(s->ws, 0, PDK_WS_CURRENT, &d, &err) < 0)
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	changes = json_array();
	for (size_t i = 0; i < d.n; i++) {
		json_t *c = json_object();

		pdk_ws_json_set_path(c, "path", d.v[i].path);
		pdk_json_set(c, "kind",
			     json_string(d.v[i].kind == PDK_WS_ADDED     ? "added"
					 : d.v[i].kind == PDK_WS_DELETED ? "deleted"
									 : "modified"));
		json_array_append_new(changes, c);
	}
	pdk_ws_diff_release(&d);
	pdk__sv_send(s, json_pack("{s:I, s:o}", "req", req, "changes", changes), NULL, 0);
}

/*
 * Rollback and commit change the overlay's layers, which the sandbox's
 * mount namespace holds mounted: they need the sandbox's processes gone.
 * The init is restarted around them (same id, budgets and connection; a
 * new init pid, and sandbox.destroy + sandbox.create in the spool), so they
 * are refused while an exec runs. A snapshot copies the upper layer with
 * the sandbox frozen instead (snapshot_live); it moves the layer around a
 * restart when the caller asks ("restart": true, no copy whatever the
 * size) or when the sandbox cannot be frozen.
 */
typedef int (*ws_step_fn)(struct pdk_supervisor *s, json_t *msg, json_t *reply,
			  struct pdk_error **err);

static int restart_around(struct pdk_supervisor *s, ws_step_fn step, json_t *msg, json_t *reply,
			  struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *err2 = NULL;
	struct pdk_sandbox_usage u;
	bool paused = s->paused_since != 0;
	int rc;

	/* Before anything changes: a sandbox whose /tmp cannot be kept is left as it is. */
	if (pdk__sv_carry_out(s, err) < 0)
		return -1;
	pdk_sandbox_usage(s->sb, &u);
	s->cpu_base_ns += u.cpu_ns;
	(void)close(s->root_fd);
	s->root_fd = -1;
	if (paused)
		(void)!pdk_sandbox_resume(s->sb, &err2); /* SIGKILL reaches frozen tasks anyway */
	pdk_error_free(&err2);
	if (pdk_sandbox_destroy(s->sb, &err2) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "restart: %s", err2->msg);
	pdk_error_free(&err2);
	s->sb = NULL;
	rc = step(s, msg, reply, err);
	/* Whatever the step did, the sandbox runs again (or ends: init_lost). */
	if (setup_sandbox(s, &err2) < 0) {
		pdk_log(s->log, PDK_LOG_WARN, "restart: %s", err2->msg);
		if (rc == 0)
			rc = pdk_error_setx(err, err2->status, "%s", err2->msg);
		return rc;
	}
	if (pdk__sv_carry_in(s, &err2) < 0) {
		pdk_log(s->log, PDK_LOG_WARN, "restart: %s", err2->msg);
		pdk_json_set(reply, "tmp_kept", json_false());
		pdk_error_free(&err2);
	}
	if (paused && pdk_sandbox_pause(s->sb, &err2) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "restart: %s", err2->msg);
	return rc;
}

static int step_snapshot(struct pdk_supervisor *s, json_t *msg, json_t *reply,
			 struct pdk_error **err)
{
	const char *name = spec_str(msg, "name");
	/* Mounted (a live snapshot): copied; unmounted (around a restart): moved. */
	int n = s->sb != NULL ? pdk_ws_snapshot_copy(s->ws, err) : pdk_ws_snapshot(s->ws, err);

	if (n < 0)
		return n;
	while (pdk_strv_len(s->snap_names) < (size_t)n - 1)
		pdk_strv_push(&s->snap_names, "");
	if (name != NULL)
		pdk_strv_push(&s->snap_names, name);
	else
		pdk_strv_push_take(&s->snap_names, pdk_xasprintf("%d", n));
	pdk_json_set(reply, "snapshot", json_string(s->snap_names[n - 1]));
	return 0;
}

/* Snapshot number of `name` (0 = the workspace as it was), or -1. */
static int snap_number(struct pdk_supervisor *s, const char *name)
{
	size_t n = pdk_strv_len(s->snap_names);

	if (strcmp(name, "0") == 0)
		return 0;
	for (size_t i = n; i > 0; i--)
		if (strcmp(s->snap_names[i - 1], name) == 0)
			return (int)i;
	return -1;
}

static int step_rollback(struct pdk_supervisor *s, json_t *msg, json_t *reply,
			 struct pdk_error **err)
{
	int n = snap_number(s, spec_str(msg, "snapshot"));

	if (pdk_ws_rollback(s->ws, (unsigned)n, err) < 0)
		return -1;
	while (pdk_strv_len(s->snap_names) > (size_t)n) {
		size_t last = pdk_strv_len(s->snap_names) - 1;

		free(s->snap_names[last]);
		s->snap_names[last] = NULL;
	}
	pdk_json_set(reply, "snapshot", json_string(spec_str(msg, "snapshot")));
	return 0;
}

static int step_commit(struct pdk_supervisor *s, json_t *msg, json_t *reply, struct pdk_error **err)
{
	struct pdk_ws_commit_report rep = {0};
	struct pdk_ws_diff d = {0};
	int rc = pdk_ws_diff(s->ws, 0, PDK_WS_CURRENT, &d, err);

	(void)msg;
	if (rc == 0)
		rc = pdk_ws_commit(s->ws, &d, 0, &rep, err);
	if (rc == 0) {
		_cleanup_error_ struct pdk_error *e = NULL;

		if (pdk_ws_emit_changes(s->events, &d, "committed", pdk_ws_id(s->ws), &e) < 0)
			pdk_log(s->log, PDK_LOG_WARN, "%s", e->msg);
		pdk_json_set(reply, "committed", json_integer((json_int_t)rep.applied));
		/* The workspace has the changes now: start again from it, with no layer. */
		rc = pdk_ws_rollback(s->ws, 0, err);
		pdk_strv_free(s->snap_names);
		s->snap_names = NULL;
	}
	for (size_t i = 0; rc < 0 && i < rep.n_refused; i++)
		pdk_error_wrap(err, "'%s' refused: %s", rep.refused[i].path, rep.refused[i].reason);
	pdk_ws_commit_report_release(&rep);
	pdk_ws_diff_release(&d);
	return rc;
}

/*
 * A snapshot while the sandbox runs: its tasks are frozen while the upper
 * layer is copied (step_snapshot), so the copy is of one moment; the
 * overlay stays mounted, and the processes, /tmp and the exec ids go on as
 * they were. 1 when done (reply filled), 0 when the sandbox cannot be
 * frozen here (the caller restarts the init instead), -1 on failure.
 */
static int snapshot_live(struct pdk_supervisor *s, json_t *msg, json_t *reply,
			 struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *why = NULL;
	bool paused = s->paused_since != 0;
	uint64_t t0 = pdk_now_mono_ns();
	int rc;

	if (!paused && pdk_sandbox_pause(s->sb, &why) < 0) {
		pdk_log(s->log, PDK_LOG_WARN, "snapshot: %s; the init is restarted instead",
			why->msg);
		return 0;
	}
	rc = step_snapshot(s, msg, reply, err);
	if (!paused && pdk_sandbox_resume(s->sb, &why) < 0) {
		/* Still frozen: shown as paused, so that a resume can be tried again. */
		s->paused_since = pdk_now_mono_ns();
		if (rc == 0)
			rc = pdk_error_setx(err, why->status, "%s", why->msg);
	}
	if (rc < 0)
		return -1;
	pdk_json_set(reply, "frozen_ms",
		     json_integer((json_int_t)((pdk_now_mono_ns() - t0) / NSEC_PER_MS)));
	return 1;
}

/*
 * How many tasks besides the init the sandbox holds: the cgroup's count,
 * or, where there is no pids controller (rootless without a delegated
 * cgroup), the init's children (every other task descends from it, and an
 * orphan is given to it), which is at least 1 whenever any other task runs.
 */
static uint64_t tasks_besides_init(struct pdk_supervisor *s)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *text = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_sandbox_usage u;
	pid_t init = pdk_sandbox_init_pid(s->sb);
	uint64_t n = 0;

	pdk_sandbox_usage(s->sb, &u);
	if (u.pids_current > 0)
		return u.pids_current - 1;
	path = pdk_xasprintf("/proc/%d/task/%d/children", (int)init, (int)init);
	if (init <= 0 || pdk_read_file_at(AT_FDCWD, path, 1 << 20, &text, &err) < 0)
		return 0;
	for (const char *p = text + strspn(text, " \n"); *p != '\0'; p += strspn(p, " \n")) {
		n++;
		p += strcspn(p, " \n");
	}
	return n;
}

static void op_ws(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *op)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *reply = json_pack("{s:I}", "req", req);
	ws_step_fn step = strcmp(op, "snapshot") == 0   ? step_snapshot
			  : strcmp(op, "rollback") == 0 ? step_rollback
							: step_commit;

	if (s->ws == NULL) {
		json_decref(reply);
		return reply_errorx(s, req, "conflict", NULL,
				    "the workspace is not an overlay: it has no layers");
	}
	if (step == step_commit && s->private_ws != NULL) {
		json_decref(reply);
		return reply_errorx(s, req, "conflict", NULL,
				    "the sandbox has a private workspace: nothing to commit to");
	}
	if (step == step_rollback &&
	    (spec_str(msg, "snapshot") == NULL || snap_number(s, spec_str(msg, "snapshot")) < 0)) {
		json_decref(reply);
		return reply_errorx(s, req, "not_found", "snapshot", "no such snapshot");
	}
	/* "restart": true asks for the move (no copy) around a restart of the init. */
	if (step == step_snapshot && !json_is_true(json_object_get(msg, "restart"))) {
		int rc = snapshot_live(s, msg, reply, &err);

		if (rc < 0) {
			json_decref(reply);
			return pdk__sv_reply_error(s, req, "internal", NULL, err);
		}
		if (rc > 0)
			return pdk__sv_send(s, reply, NULL, 0);
	}
	if (s->n_execs > 0) {
		json_decref(reply);
		return reply_errorx(s, req, "conflict", NULL,
				    "execs are running: the workspace layers change only when "
				    "none does");
	}
	/*
	 * The layers change only with the overlay unmounted, so the init is
	 * restarted (restart_around), which ends every process of the sandbox.
	 * Processes left running by earlier execs (a server started in the
	 * background) are not ended silently: the caller must say so.
	 */
	if (!json_is_true(json_object_get(msg, "restart"))) {
		uint64_t others = tasks_besides_init(s);

		if (others > 0) {
			_cleanup_free_ char *m = pdk_xasprintf(
				"%llu task(s) besides the init run in the sandbox (left by earlier "
				"execs); %s restarts the sandbox's init and would end them: stop "
				"them, or give \"restart\": true",
				(unsigned long long)others, op);

			json_decref(reply);
			return reply_errorx(s, req, "conflict", "restart", m);
		}
	}
	if (restart_around(s, step, msg, reply, &err) < 0) {
		json_decref(reply);
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	}
	pdk__sv_send(s, reply, NULL, 0);
}

static void handle(struct pdk_supervisor *s, json_t *msg, int *fds, size_t nfds)
{
	json_t *r = json_object_get(msg, "req");
	const char *op = spec_str(msg, "op");
	json_int_t req = json_is_integer(r) ? json_integer_value(r) : 0;

	if (op == NULL)
		reply_errorx(s, req, "bad_request", "op", "no 'op'");
	else if (strcmp(op, "status") == 0)
		op_status(s, req);
	else if (s->ended != NULL && strcmp(op, "destroy") != 0)
		reply_errorx(s, req, "conflict", NULL, "the sandbox has ended");
	else if (strcmp(op, "exec") == 0)
		op_exec(s, req, msg, fds, nfds);
	else if (strcmp(op, "signal") == 0)
		op_signal(s, req, msg);
	else if (strcmp(op, "pause") == 0 || strcmp(op, "resume") == 0)
		op_pause(s, req, op[0] == 'p');
	else if (strcmp(op, "diff") == 0)
		op_diff(s, req);
	else if (strcmp(op, "snapshot") == 0 || strcmp(op, "rollback") == 0 ||
		 strcmp(op, "commit") == 0)
		op_ws(s, req, msg, op);
	else if (strcmp(op, "destroy") == 0)
		s->destroy_requested = req ? req : -1;
	else if (!pdk__sv_file_op(s, op, req, msg))
		reply_errorx(s, req, "bad_request", "op", "unknown op");
}

/* ---- the loop ---- */

enum { P_LISTEN, P_CONN, P_SIG, P_SB };

static void on_conn(struct pdk_supervisor *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int fds[PDK_SVC_MAX_FDS];
	size_t nfds = PDK_SVC_MAX_FDS;
	json_t *msg = NULL;
	int rc = pdk_svc_recv(s->conn_fd, &msg, fds, &nfds, &err);

	if (rc == -EAGAIN)
		return;
	if (rc == -EBADMSG || rc == -EMSGSIZE) {
		/* A malformed request is answered; the connection stays. */
		pdk__sv_reply_error(s, 0, "bad_request", NULL, err);
		return;
	}
	if (rc <= 0) {
		if (rc < 0 && err->status != ECONNRESET)
			pdk_log(s->log, PDK_LOG_WARN, "%s", err->msg);
		/* A closed connection: wait for the next one. */
		(void)close(s->conn_fd);
		s->conn_fd = -1;
		return;
	}
	handle(s, msg, fds, nfds);
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
	json_decref(msg);
}

static void on_accept(struct pdk_supervisor *s)
{
	int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	/* One connection at a time: a new one replaces the old. */
	if (s->conn_fd >= 0)
		(void)close(s->conn_fd);
	s->conn_fd = fd;
}

static int serve(struct pdk_supervisor *s, struct pdk_error **err)
{
	_cleanup_free_ struct pollfd *pfd =
		pdk_xcalloc(P_SB + PDK_SANDBOX_MAX_POLLFDS, sizeof(*pfd));

	int held = -1; /* ms until a held-back nudge may go */

	while (s->ended == NULL && !s->destroy_requested) {
		size_t n = pdk_sandbox_pollfds(s->sb, pfd + P_SB, PDK_SANDBOX_MAX_POLLFDS);
		int timeout = loop_timeout_ms(s);
		int rc;

		pfd[P_LISTEN] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
		pfd[P_CONN] = (struct pollfd){.fd = s->conn_fd, .events = POLLIN};
		pfd[P_SIG] = (struct pollfd){.fd = s->sig_fd, .events = POLLIN};
		if (held >= 0 && (timeout < 0 || held < timeout))
			timeout = held;
		rc = poll(pfd, P_SB + n, timeout);
		if (rc < 0 && errno != EINTR)
			return pdk_error_set(err, errno, "poll");
		if (rc < 0)
			continue;
		if (pfd[P_SIG].revents) {
			struct signalfd_siginfo si;

			while (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				s->destroy_requested = -1;
		}
		if (n > 0 && pdk_sandbox_dispatch(s->sb, pfd + P_SB, n, err) < 0)
			return -1;
		drain_procs(s);
		check_exec_timeouts(s);
		if (pfd[P_LISTEN].revents)
			on_accept(s);
		else if (pfd[P_CONN].revents)
			on_conn(s);
		if (!pdk_sandbox_alive(s->sb))
			end_with(s, "init_lost", NULL, NULL);
		check_budgets(s);
		held = nudge(s);
	}
	return 0;
}

/* ---- teardown ---- */

/*
 * Whether an overlay over a host directory ended with no change: its change
 * set then goes. One with changes stays for `paddock ws` (diff, commit, discard).
 */
static bool ws_empty(struct pdk_supervisor *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ws_diff d = {0};
	bool empty = pdk_ws_diff(s->ws, 0, PDK_WS_CURRENT, &d, &err) == 0 && d.n == 0;

	pdk_ws_diff_release(&d);
	return empty;
}

static void cleanup(struct pdk_supervisor *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *sock = pdk_xasprintf("%s/ctl.sock", s->run_dir ? s->run_dir : ".");
	_cleanup_free_ char *pid =
		pdk_xasprintf("%s/supervisor.pid", s->run_dir ? s->run_dir : ".");
	_cleanup_free_ char *log = pdk_xasprintf("%s/log", s->run_dir ? s->run_dir : ".");
	_cleanup_free_ char *cg = pdk_xasprintf("%s/cgroup", s->run_dir ? s->run_dir : ".");

	if (s->paused_since != 0 && s->sb != NULL)
		(void)!pdk_sandbox_resume(s->sb, &err); /* SIGKILL reaches frozen tasks anyway */
	pdk_error_free(&err);
	while (s->n_execs > 0)
		drop_exec(s, &s->execs[0]);
	if (s->root_fd >= 0)
		(void)close(s->root_fd);
	if (pdk_sandbox_destroy(s->sb, &err) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "cleanup: %s", err->msg);
	pdk_error_free(&err);
	if (pdk_events_close(s->events, &err) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "cleanup: %s", err->msg);
	pdk_error_free(&err);
	if (s->ws != NULL && (s->private_ws != NULL || ws_empty(s)) &&
	    pdk_ws_remove(s->ws, &err) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "cleanup: %s", err->msg);
	if (s->private_ws != NULL)
		(void)!pdk_rm_rf_at(AT_FDCWD, s->private_ws);
	if (s->listen_fd >= 0)
		(void)close(s->listen_fd);
	if (s->run_dir != NULL) {
		/* The spool stays for the daemon to ingest (it removes it, and the directory). */
		(void)unlink(sock);
		(void)unlink(pid);
		(void)unlink(log);
		(void)unlink(cg);
		(void)rmdir(s->run_dir);
	}
}

static void release(struct pdk_supervisor *s)
{
	if (s->conn_fd >= 0)
		(void)close(s->conn_fd);
	if (s->sig_fd >= 0)
		(void)close(s->sig_fd);
	if (s->spool_fd >= 0)
		(void)close(s->spool_fd);
	pdk_events_free(s->events);
	pdk_ws_free(s->ws);
	pdk_policy_free(s->policy);
	pdk_strv_free(s->env);
	pdk_strv_free(s->snap_names);
	free(s->execs);
	free(s->workspace);
	free(s->private_ws);
	free(s->run_dir);
	free(s->state_dir);
	json_decref(s->spec);
}

static int setup(struct pdk_supervisor *s, int spec_fd, struct pdk_error **err)
{
	int rc = read_spec(spec_fd, &s->spec, err);

	if (rc == 0)
		rc = setup_signals(s, err);
	if (rc == 0)
		rc = setup_dirs(s, err);
	if (rc == 0)
		rc = setup_policy(s, err);
	if (rc == 0)
		rc = setup_workspace(s, err);
	if (rc == 0)
		rc = setup_events(s, err);
	if (rc == 0)
		rc = setup_sandbox(s, err);
	if (rc == 0)
		rc = setup_socket(s, err);
	return rc;
}

int pdk_supervisor_run(const char *id, int spec_fd, int ready_fd,
		       const struct pdk_settings *settings, const struct pdk_log *log,
		       struct pdk_error **err)
{
	struct pdk_supervisor s = {.settings = settings,
				   .log = log,
				   .root_fd = -1,
				   .listen_fd = -1,
				   .conn_fd = -1,
				   .sig_fd = -1,
				   .spool_fd = -1};
	int rc;

	if (!valid_id(id)) {
		(void)close(spec_fd);
		rc = pdk_error_setx(err, EINVAL, "spec: invalid id '%s' (a UUID)", id);
		report_ready(&s, ready_fd, *err);
		return rc;
	}
	memcpy(s.id, id, 37);
	s.created_ns = pdk_now_mono_ns();
	s.created_real_ns = pdk_now_real_ns();
	rc = setup(&s, spec_fd, err);
	(void)close(spec_fd);
	if (rc < 0) {
		report_ready(&s, ready_fd, *err);
		cleanup(&s);
		release(&s);
		return rc;
	}
	/* Setup's garbage (policy parsing, the spec) goes back to the system: idle PSS. */
	(void)malloc_trim(0);
	/* The wall budget counts from readiness: setup time is not the sandbox's. */
	s.created_ns = pdk_now_mono_ns();
	report_ready(&s, ready_fd, NULL);
	rc = serve(&s, err);
	if (s.ended != NULL && s.destroy_requested == 0)
		pdk_log(s.log, PDK_LOG_INFO, "sandbox %s ended: %s", s.id, s.ended);
	cleanup(&s);
	if (s.destroy_requested > 0)
		pdk__sv_send(
			&s,
			json_pack("{s:I, s:b}", "req", (json_int_t)s.destroy_requested, "ok", 1),
			NULL, 0);
	release(&s);
	return rc;
}
