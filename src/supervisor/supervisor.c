/*
 * supervisor.c - `paddock supervise`: one sandbox in service mode, driven
 * over its control socket (docs/internals/daemon.md). This file is the
 * setup, the readiness report and the teardown; the spec is read by
 * supervisor-spec.c, the loop is supervisor-loop.c, the operations are
 * supervisor-exec.c, supervisor-ws.c and supervisor-files.c.
 *
 * Setup is a list of steps, each named in the error it may return (the
 * daemon shows it): spec, signals, rundir, then the session's own (policy,
 * workspace, events: session.h), events (the spool), sandbox, socket.
 */
#include "common.h"
#include "base.h"
#include "session.h"
#include "supervisor-internal.h"
#include "supervisor.h"
#include "svc-proto.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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

void pdk__sv_reply_errorx(struct pdk_supervisor *s, json_int_t req, const char *code,
			  const char *field, const char *msg)
{
	struct pdk_error e = {.status = EINVAL, .msg = (char *)msg};

	pdk__sv_reply_error(s, req, code, field, &e);
}

struct pdk_sandbox *pdk__sv_sandbox(const struct pdk_supervisor *s)
{
	return s->session != NULL ? pdk_session_sandbox(s->session) : NULL;
}

const struct pdk_policy *pdk__sv_policy(const struct pdk_supervisor *s)
{
	return pdk_session_policy(s->session);
}

/* The network: its mode and the allowlist's entries, as the egress proxy matches them. */
static json_t *network_facts(const struct pdk_policy *p)
{
	return json_pack("{s:s, s:o}", "mode", pdk_policy_net_mode_name(p->network.mode), "allow",
			 pdk_json_strv(p->network.allow));
}

static json_t *facts_of(const struct pdk_supervisor *s)
{
	const struct pdk_policy *p = pdk__sv_policy(s);
	const char *view = pdk_session_workspace_view(s->session);
	json_t *ws = view != NULL ? json_object() : json_null();

	/* Paths that are not UTF-8 come as "path_hex" / "host_path_hex" (JSON holds no others). */
	if (view == NULL)
		return json_pack("{s:o, s:o}", "workspace", ws, "network", network_facts(p));
	pdk_ws_json_set_path(ws, "path", view);
	if (pdk_session_private_workspace(s->session) || pdk_session_workspace(s->session) == NULL)
		pdk_json_set(ws, "host_path", json_null());
	else
		pdk_ws_json_set_path(ws, "host_path", pdk_session_workspace(s->session));
	pdk_json_set(ws, "mode", json_string(pdk_policy_ws_mode_name(p->workspace.mode)));
	return json_pack("{s:o, s:o}", "workspace", ws, "network", network_facts(p));
}

/* The image of the root: {"name", "digest"}, or null on the host's root. */
static json_t *image_fact(const struct pdk_supervisor *s)
{
	const struct pdk_image *img = pdk_session_image(s->session);

	if (img == NULL)
		return json_null();
	return json_pack("{s:s, s:s}", "name", pdk__sv_policy(s)->image, "digest",
			 pdk_image_digest(img));
}

json_t *pdk__sv_facts(const struct pdk_supervisor *s)
{
	json_t *facts = facts_of(s);

	pdk_json_set(facts, "image", image_fact(s));
	return facts;
}

/* ---- the network, widened ---- */

void pdk__sv_op_egress_allow(struct pdk_supervisor *s, json_int_t req, json_t *msg)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *entry = NULL;
	const char *host = json_string_value(json_object_get(msg, "host"));
	int rc;

	if (host == NULL)
		return pdk__sv_reply_errorx(s, req, "bad_request", "host", "no 'host'");
	rc = pdk_session_net_allow(s->session, host, &entry, &err);
	/* No allowlist, or no sandbox running (a failed init restart): nothing to widen. */
	if (rc < 0)
		return pdk__sv_reply_error(s, req,
					   err->status == ENOTSUP || err->status == ESRCH
						   ? "conflict"
						   : pdk_svc_code_of(err->status),
					   err->field, err);
	pdk_log(s->log, PDK_LOG_INFO, "sandbox %s: network.allow '%s' %s", s->id, entry,
		rc == 0 ? "added" : "was listed already");
	pdk__sv_send(s,
		     json_pack("{s:I, s:s, s:b, s:o}", "req", req, "allow", entry, "added", rc == 0,
			       "facts", pdk__sv_facts(s)),
		     NULL, 0);
}

/* ---- setup ---- */

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

static int setup_dirs(struct pdk_supervisor *s, struct pdk_error **err)
{
	const char *rd = s->spec.run_dir;
	const char *sd = s->spec.state_dir;
	const char *base = rd ? rd : s->settings->paths.runtime_dir;
	_cleanup_free_ char *pidfile = NULL, *pid = NULL;

	s->state_dir = pdk_xstrdup(sd ? sd : s->settings->paths.state_dir);
	s->run_dir = pdk_xasprintf("%s/sb/%s", base, s->id);
	s->spool = pdk_xasprintf("%s/events.jsonl", s->run_dir);
	if (pdk_mkdir_p(s->run_dir, err) < 0)
		return pdk_error_wrap(err, "rundir");
	pidfile = pdk_xasprintf("%s/supervisor.pid", s->run_dir);
	pid = pdk_xasprintf("%d\n", (int)getpid());
	if (pdk_write_file_at(AT_FDCWD, pidfile, pid, true, err) < 0)
		return pdk_error_wrap(err, "rundir");
	return 0;
}

/*
 * The part of the create request a failed session step judged, or NULL when
 * the step is a mechanism's (its failure is the daemon's, not the caller's).
 */
static const char *blamed_field(enum pdk_session_step step)
{
	switch (step) {
	case PDK_SESSION_PROFILE:
		return "profile";
	case PDK_SESSION_OVERRIDES:
		return "overrides";
	case PDK_SESSION_ENV:
		return "env";
	case PDK_SESSION_WORKSPACE:
		return "workspace";
	case PDK_SESSION_IMAGE:
		return "image";
	case PDK_SESSION_EVENTS:
	case PDK_SESSION_CHANGE_SET:
	case PDK_SESSION_SANDBOX:
	default:
		return NULL;
	}
}

/*
 * The session: the policy with the spec's overrides, the workspace (a
 * private one when the spec names none), the environment, the event spool
 * and the change set, as `paddock run` makes them.
 */
static int setup_session(struct pdk_supervisor *s, struct pdk_error **err)
{
	struct pdk_session_opts o = s->spec.session;
	struct pdk_session_failure why;
	const struct pdk_policy *p;

	o.id = s->id;
	o.settings = s->settings;
	o.state_dir = s->state_dir;
	o.runtime_dir = s->run_dir;
	/* SECURITY: RUNDIR holds the daemon's socket and every supervisor's: never in a view. */
	o.daemon_run_dir = s->spec.run_dir ? s->spec.run_dir : s->settings->paths.runtime_dir;
	o.private_workspace = true;
	o.log = s->log;
	o.actor = "paddock-supervise";
	/* SECURITY: one sink, a file: no audit store, no OTLP, no key in this process. */
	o.audit = false;
	o.otlp = NULL;
	o.events_file = s->spool;
	s->session = pdk_session_open(&o, &why, err);
	pdk_policy_report_release(&why.report);
	if (s->session == NULL) {
		s->blame = blamed_field(why.step);
		return pdk_error_wrap(err, "%s", pdk_session_step_name(why.step));
	}
	p = pdk__sv_policy(s);
	s->wall_limit_ns = p->limits.wall_ms * PDK_SV_NSEC_PER_MS;
	s->cpu_limit_ns = s->spec.cpu_time_ms * PDK_SV_NSEC_PER_MS;
	s->commands_limit = s->spec.commands;
	return 0;
}

/* The spool's size tells the loop when to nudge the daemon. */
static int setup_spool(struct pdk_supervisor *s, struct pdk_error **err)
{
	s->spool_fd = TEMP_FAILURE_RETRY(open(s->spool, O_PATH | O_CLOEXEC));
	if (s->spool_fd < 0)
		return pdk_error_set(err, errno, "events: cannot open '%s'", s->spool);
	return 0;
}

int pdk__sv_start_sandbox(struct pdk_supervisor *s, struct pdk_error **err)
{
	_cleanup_free_ char *cg_text = NULL, *cg_file = NULL;
	struct pdk_sandbox *sb;

	if (pdk_session_start(s->session, err) < 0)
		return pdk_error_wrap(err, "sandbox");
	sb = pdk__sv_sandbox(s);
	/*
	 * RUNDIR/sb/ID/cgroup: where the sandbox's cgroup is, for the daemon to kill and
	 * remove should this process die without cleaning up (docs/internals/daemon.md).
	 */
	cg_text = pdk_sandbox_cgroup_describe(sb);
	cg_file = pdk_xasprintf("%s/cgroup", s->run_dir);
	if (pdk_write_file_at(AT_FDCWD, cg_file, cg_text, true, err) < 0)
		return pdk_error_wrap(err, "sandbox");
	pdk_sandbox_owner(sb, &s->uid, &s->gid);
	s->root_fd = pdk_sandbox_root_fd(sb, err);
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

static int setup_spec(struct pdk_supervisor *s, struct pdk_error **err)
{
	return pdk__sv_spec_parse(s->spec_json, &s->spec, err);
}

/* The steps after the spec is read, in their order. */
static int (*const setup_steps[])(struct pdk_supervisor *s, struct pdk_error **err) = {
	setup_spec,  setup_signals,         setup_dirs,   setup_session,
	setup_spool, pdk__sv_start_sandbox, setup_socket,
};

static int setup(struct pdk_supervisor *s, int spec_fd, struct pdk_error **err)
{
	int rc = pdk__sv_spec_load(spec_fd, &s->spec_json, err);

	for (size_t i = 0; rc == 0 && i < PDK_ARRAY_SIZE(setup_steps); i++)
		rc = setup_steps[i](s, err);
	return rc;
}

/* ---- readiness ---- */

/*
 * A failed setup as an svc-proto error answer: the status travels as its
 * code, with the field to blame, when the failure is the caller's (a step
 * that judged the request, or an error that names a field of it); any
 * other failure is the daemon's ("internal"). "step" is the message's
 * first word, for the sandbox.create_failed event.
 */
static json_t *ready_error(const struct pdk_supervisor *s, const struct pdk_error *err)
{
	const char *field = err->field != NULL ? err->field : s->blame;
	const char *colon = strchr(err->msg, ':');
	json_t *e = json_pack("{s:s, s:s, s:s%}", "message", err->msg, "code",
			      field != NULL ? pdk_svc_code_of(err->status) : "internal", "step",
			      colon != NULL ? err->msg : "setup",
			      colon != NULL ? (size_t)(colon - err->msg) : strlen("setup"));

	if (field != NULL)
		pdk_json_set(e, "field", json_string(field));
	return e;
}

static void report_ready(struct pdk_supervisor *s, int ready_fd, const struct pdk_error *err)
{
	_cleanup_free_ char *line = NULL;
	json_t *m;

	if (ready_fd < 0)
		return;
	if (err == NULL) {
		m = json_pack("{s:b, s:i, s:i, s:s, s:o}", "ok", 1, "pid", (int)getpid(),
			      "init_pid", (int)pdk_sandbox_init_pid(pdk__sv_sandbox(s)), "id",
			      s->id, "facts", pdk__sv_facts(s));
	} else {
		m = json_pack("{s:b, s:o}", "ok", 0, "error", ready_error(s, err));
	}
	line = pdk_json_dump_line(m);
	json_decref(m);
	if (line != NULL)
		(void)!pdk_write_all(ready_fd, line, strlen(line)); /* no reader: nothing to do */
	(void)close(ready_fd);
}

/* ---- teardown ---- */

/*
 * The session ends: the sandbox goes (thawed first: SIGKILL reaches frozen
 * tasks anyway, but the cgroup is removed sooner), the change set goes
 * when private or unchanged, the sink is closed. The spool stays for the
 * daemon to ingest (it removes it, and the directory).
 */
static void end_session(struct pdk_supervisor *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_session_result res;

	if (s->paused_since != 0 && pdk__sv_sandbox(s) != NULL)
		(void)!pdk_sandbox_resume(pdk__sv_sandbox(s), &err);
	pdk_error_free(&err);
	while (s->n_execs > 0)
		pdk__sv_drop_exec(s, &s->execs[0]);
	if (s->root_fd >= 0)
		(void)close(s->root_fd);
	s->root_fd = -1;
	if (s->session == NULL)
		return;
	if (pdk_session_finish(s->session, &res, &err) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "cleanup: %s", err->msg);
	if (res.events_err != NULL)
		pdk_log(s->log, PDK_LOG_WARN, "cleanup: %s", res.events_err->msg);
	pdk_session_result_release(&res);
}

static void cleanup(struct pdk_supervisor *s)
{
	static const char *const files[] = {"ctl.sock", "supervisor.pid", "log", "cgroup"};

	end_session(s);
	if (s->listen_fd >= 0)
		(void)close(s->listen_fd);
	s->listen_fd = -1;
	if (s->run_dir == NULL)
		return;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(files); i++) {
		_cleanup_free_ char *path = pdk_xasprintf("%s/%s", s->run_dir, files[i]);

		(void)unlink(path);
	}
	(void)rmdir(s->run_dir); /* not while the spool is there */
}

static void release(struct pdk_supervisor *s)
{
	if (s->conn_fd >= 0)
		(void)close(s->conn_fd);
	if (s->sig_fd >= 0)
		(void)close(s->sig_fd);
	if (s->spool_fd >= 0)
		(void)close(s->spool_fd);
	pdk_session_free(s->session);
	pdk__sv_spec_release(&s->spec);
	pdk_strv_free(s->snap_names);
	free(s->execs);
	free(s->spool);
	free(s->run_dir);
	free(s->state_dir);
	json_decref(s->spec_json);
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

	if (!pdk__sv_valid_id(id)) {
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
		/*
		 * Cleaned up before the daemon hears of it: it kills a supervisor whose
		 * start failed, which must not land while the cgroups are being removed.
		 */
		cleanup(&s);
		report_ready(&s, ready_fd, *err);
		release(&s);
		return rc;
	}
	/* Setup's garbage (policy parsing, the spec) goes back to the system: idle PSS. */
	(void)malloc_trim(0);
	/* The wall budget counts from readiness: setup time is not the sandbox's. */
	s.created_ns = pdk_now_mono_ns();
	report_ready(&s, ready_fd, NULL);
	rc = pdk__sv_serve(&s, err);
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
