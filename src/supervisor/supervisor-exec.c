/*
 * supervisor-exec.c - the execs of a service-mode sandbox: a request
 * becomes a process through the init (pdk_sandbox_exec), its start or
 * failure answers the request, its exit is an unsolicited "exit" message;
 * timeouts, signals and interactive ptys. The events say what ran unless
 * the exec tracer records it already.
 */
#include "common.h"
#include "base.h"
#include "init.h"
#include "supervisor-internal.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define MAX_EXECS 1024

static struct pdk_sv_exec *find_exec(struct pdk_supervisor *s, uint64_t id)
{
	for (size_t i = 0; i < s->n_execs; i++)
		if (s->execs[i].id == id)
			return &s->execs[i];
	return NULL;
}

void pdk__sv_drop_exec(struct pdk_supervisor *s, struct pdk_sv_exec *e)
{
	if (e->pty_master >= 0)
		(void)close(e->pty_master);
	pdk_strv_free(e->argv);
	free(e->cwd);
	*e = s->execs[--s->n_execs];
}

void pdk__sv_check_exec_timeouts(struct pdk_supervisor *s)
{
	uint64_t now = pdk_now_mono_ns();

	for (size_t i = 0; i < s->n_execs; i++) {
		struct pdk_sv_exec *e = &s->execs[i];
		_cleanup_error_ struct pdk_error *err = NULL;

		if (e->deadline == 0 || e->timed_out || now < e->deadline)
			continue;
		e->timed_out = true;
		if (pdk_sandbox_signal_exec(pdk__sv_sandbox(s), e->id, SIGKILL, &err) < 0)
			pdk_log(s->log, PDK_LOG_WARN, "%s", err->msg);
	}
}

uint64_t pdk__sv_exec_timeout_ms(const struct pdk_supervisor *s, uint64_t now)
{
	uint64_t ms = UINT64_MAX;

	for (size_t i = 0; i < s->n_execs; i++) {
		uint64_t d = s->execs[i].deadline;
		uint64_t left;

		if (d == 0 || s->execs[i].timed_out)
			continue;
		left = d <= now ? 0 : (d - now + PDK_SV_NSEC_PER_MS - 1) / PDK_SV_NSEC_PER_MS;
		if (left < ms)
			ms = left;
	}
	return ms;
}

/* The sandbox's environment plus the request's "K=V" entries (later wins). */
static char **exec_env(struct pdk_supervisor *s, json_t *env)
{
	char **v = pdk_strv_dup(pdk_session_env(s->session));
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

/* Whether an exec must be refused now; then it was answered. */
static bool exec_refused(struct pdk_supervisor *s, json_int_t req, json_t *argv, bool pty,
			 size_t nfds)
{
	if (!valid_argv(argv))
		pdk__sv_reply_errorx(s, req, "bad_request", "argv",
				     "'argv' must be a non-empty array of strings");
	else if (!pty && nfds != 3)
		pdk__sv_reply_errorx(s, req, "bad_request", "fds",
				     "exec needs 3 fds: stdin, stdout, stderr");
	else if (s->paused_since != 0)
		pdk__sv_reply_errorx(s, req, "conflict", NULL, "the sandbox is paused");
	else if (s->commands_limit && s->commands >= s->commands_limit)
		pdk__sv_reply_errorx(s, req, "limit", "commands",
				     "the sandbox's commands budget is spent");
	else if (s->n_execs >= MAX_EXECS)
		pdk__sv_reply_errorx(s, req, "busy", NULL, "too many running execs");
	else
		return false;
	return true;
}

/* The request's cwd, else the workspace (where the sandbox sees it), else "/". */
static const char *exec_cwd(struct pdk_supervisor *s, json_t *msg)
{
	const char *cwd = json_string_value(json_object_get(msg, "cwd"));
	const char *ws = pdk_session_workspace_view(s->session);

	if (cwd != NULL)
		return cwd;
	return ws != NULL && pdk__sv_policy(s)->workspace.mode != PDK_WS_NONE ? ws : "/";
}

/* The sandbox cgroup's OOM kill counter (memory.events or memory.oom_control). */
static uint64_t oom_kills(struct pdk_supervisor *s)
{
	return pdk_sandbox_oom_kills(pdk__sv_sandbox(s));
}

/*
 * Whether the memory limit ended exec `e`, the rule `paddock run` applies
 * (engine's fill_result()): the OOM killer acted in the sandbox while the
 * command ran, and the command failed, whether it was the victim itself or
 * a child whose death it passed on (a shell's 137). A timeout or a signal
 * request that ended it is said as such.
 */
static bool ended_by_oom(struct pdk_supervisor *s, const struct pdk_sv_exec *e, int status)
{
	if (e->timed_out || e->killed || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
		return false;
	return oom_kills(s) > e->oom_base;
}

/* The limit.exceeded event `paddock run` records when the memory limit ends its command. */
static void emit_memory_limit(struct pdk_supervisor *s, const struct pdk_sv_exec *e)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *a =
		json_pack("{s:s, s:I, s:I}", "limit", "memory", "value",
			  (json_int_t)pdk__sv_policy(s)->limits.memory, "exec", (json_int_t)e->id);

	if (pdk_events_emit(pdk_session_events(s->session), "limit.exceeded", 0, a, &err) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "%s", err->msg);
}

/* Keep a started exec until its exit is reported; `av` is taken. */
static void add_exec(struct pdk_supervisor *s, json_int_t req, json_t *msg, uint64_t id, int master,
		     char **av)
{
	json_t *to = json_object_get(msg, "timeout_ms");
	bool warm = json_is_true(json_object_get(msg, "warm"));
	struct pdk_sv_exec *e;

	if (!warm)
		s->commands++;
	s->execs = pdk_xrealloc(s->execs, (s->n_execs + 1) * sizeof(*s->execs));
	e = &s->execs[s->n_execs++];
	*e = (struct pdk_sv_exec){.id = id,
				  .req = req,
				  .start_ns = pdk_now_mono_ns(),
				  .pty_master = master,
				  .warm = warm,
				  .argv = av,
				  .cwd = pdk_xstrdup(exec_cwd(s, msg))};
	if (json_is_integer(to) && json_integer_value(to) > 0)
		e->deadline = e->start_ns + (uint64_t)json_integer_value(to) * PDK_SV_NSEC_PER_MS;
	e->oom_base = oom_kills(s);
	e->deny_seq = pdk_net_denials_seq(pdk_sandbox_denials(pdk__sv_sandbox(s)));
}

void pdk__sv_op_exec(struct pdk_supervisor *s, json_int_t req, json_t *msg, int *fds, size_t nfds)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *argv = json_object_get(msg, "argv");
	bool pty = json_is_true(json_object_get(msg, "pty"));
	_cleanup_strv_ char **av = NULL, **env = NULL;
	struct pdk_sandbox_exec_req sp = {.pty_fd = -1};
	int master = -1, slave = -1;
	uint64_t id;
	json_t *a;
	size_t i;
	int rc;

	if (exec_refused(s, req, argv, pty, nfds))
		return;
	json_array_foreach(argv, i, a) pdk_strv_push(&av, json_string_value(a));
	env = exec_env(s, json_object_get(msg, "env"));
	if (pty && (rc = open_pty(s, msg, &master, &slave)) < 0) {
		(void)pdk_error_set(&err, -rc, "cannot allocate a pty");
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	}
	sp = (struct pdk_sandbox_exec_req){
		.argv = av, .envp = env, .cwd = exec_cwd(s, msg), .pty_fd = slave};
	if (!pty)
		memcpy(sp.fds, fds, sizeof(sp.fds));
	rc = pdk_sandbox_exec(pdk__sv_sandbox(s), &sp, &id, &err);
	if (slave >= 0)
		(void)close(slave);
	if (rc < 0) {
		if (master >= 0)
			(void)close(master);
		return pdk__sv_reply_error(s, req, rc == -E2BIG ? "too_large" : "internal", NULL,
					   err);
	}
	add_exec(s, req, msg, id, master, steal_ptr(&av));
}

static void emit_proc(struct pdk_supervisor *s, const char *kind, json_t *a, bool always)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	/* With exec tracing the tracer records every exec attempt and exit already. */
	if (!always && pdk_sandbox_traced(pdk__sv_sandbox(s))) {
		json_decref(a);
		return;
	}
	if (pdk_events_emit(pdk_session_events(s->session), kind, 0, a, &err) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "%s", err->msg);
}

static void on_started(struct pdk_supervisor *s, struct pdk_sv_exec *e,
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

/*
 * The error answer for a command that did not start, in the words of
 * `paddock run` ("cannot execute 'X': command not found"):
 * its working directory missing names "cwd"; its command missing is
 * "not_found" (the CLI's 127), one it may not run "forbidden" (126), both
 * naming "argv[0]"; anything else is "exec_failed".
 */
static json_t *failed_error(const struct pdk_sv_exec *e, const struct pdk_sandbox_proc *p)
{
	const char *name = e->argv != NULL && e->argv[0] != NULL ? e->argv[0] : "";
	const char *ename = strerrorname_np(p->err) ? strerrorname_np(p->err) : "E?";
	_cleanup_free_ char *msg = NULL;
	const char *code = "exec_failed", *field = "argv[0]";

	if (p->stage == PDK_INIT_STAGE_CWD) {
		msg = pdk_xasprintf("cwd '%s': %s", e->cwd ? e->cwd : "", strerror(p->err));
		code = p->err == ENOENT ? "not_found" : "bad_request";
		field = "cwd";
	} else if (p->stage == PDK_INIT_STAGE_EXEC && p->err == ENOENT) {
		msg = pdk_xasprintf("cannot execute '%s': command not found", name);
		code = "not_found";
	} else if (p->stage == PDK_INIT_STAGE_EXEC && (p->err == EACCES || p->err == EPERM)) {
		msg = pdk_xasprintf("cannot execute '%s': %s (%s)", name, strerror(p->err), ename);
		code = "forbidden";
	} else {
		msg = pdk_xasprintf("cannot execute '%s': %s (%s)", name, strerror(p->err), ename);
	}
	return json_pack("{s:s, s:s, s:s, s:i}", "code", code, "message", msg, "field", field,
			 "errno", p->err);
}

static void on_failed(struct pdk_supervisor *s, struct pdk_sv_exec *e,
		      const struct pdk_sandbox_proc *p)
{
	json_t *err = failed_error(e, p);

	pdk__sv_send(s, json_pack("{s:I, s:o}", "req", e->req, "error", err), NULL, 0);
	emit_proc(s, "process.exec",
		  json_pack("{s:o, s:I, s:s, s:i}", "argv", pdk_json_strv(e->argv), "exec",
			    (json_int_t)e->id, "error", strerror(p->err), "errno", p->err),
		  true);
	pdk__sv_drop_exec(s, e);
}

/*
 * The destinations refused while `e` ran, with the option that would allow
 * each: {"denied":[{dest, why, allow, count}], "denied_more"} added to `m`,
 * for the exec's caller to print as `paddock run` does (docs/egress.md).
 */
static void add_denials(struct pdk_supervisor *s, const struct pdk_sv_exec *e, json_t *m)
{
	struct pdk_net_denial *v = NULL;
	uint64_t more = 0;
	size_t n = pdk_net_denials_since(pdk_sandbox_denials(pdk__sv_sandbox(s)), e->deny_seq, &v,
					 &more);
	json_t *a = json_array();

	if (a == NULL)
		pdk_oom();
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I}", "dest", v[i].dest,
						       "why", v[i].why, "allow", v[i].allow,
						       "count", (json_int_t)v[i].count)) < 0)
			pdk_oom();
	pdk_json_set(m, "denied", a);
	pdk_json_set(m, "denied_more", json_integer((json_int_t)more));
	pdk_net_denial_list_free(v, n);
}

static void on_exited(struct pdk_supervisor *s, struct pdk_sv_exec *e,
		      const struct pdk_sandbox_proc *p)
{
	bool oom = ended_by_oom(s, e, p->status);
	const char *end = e->timed_out             ? "timeout"
			  : e->killed              ? "killed"
			  : oom                    ? "oom"
			  : WIFSIGNALED(p->status) ? "signaled"
						   : "exited";
	json_t *m;

	if (oom)
		emit_memory_limit(s, e);
	m = json_pack("{s:s, s:I, s:s, s:i, s:i, s:I, s:I, s:I}", "ev", "exit", "exec",
		      (json_int_t)e->id, "end", end, "exit_code",
		      WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1, "signal",
		      WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0, "duration_ns",
		      (json_int_t)(pdk_now_mono_ns() - e->start_ns), "cpu_ns",
		      (json_int_t)(p->cpu_us * 1000), "maxrss_kb", (json_int_t)p->maxrss_kb);
	add_denials(s, e, m);

	emit_proc(s, "process.exit",
		  json_pack("{s:i, s:I, s:s, s:i}", "pid", p->pid, "exec", (json_int_t)e->id, "end",
			    end, "status", p->status),
		  false);
	pdk__sv_send(s, m, NULL, 0);
	pdk__sv_drop_exec(s, e);
}

void pdk__sv_drain_procs(struct pdk_supervisor *s)
{
	struct pdk_sandbox_proc p;

	while (pdk_sandbox_next_proc(pdk__sv_sandbox(s), &p) == 1) {
		struct pdk_sv_exec *e = find_exec(s, p.exec_id);

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

void pdk__sv_op_signal(struct pdk_supervisor *s, json_int_t req, json_t *msg)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *ex = json_object_get(msg, "exec"), *sig = json_object_get(msg, "sig");
	struct pdk_sv_exec *e =
		json_is_integer(ex) ? find_exec(s, (uint64_t)json_integer_value(ex)) : NULL;

	if (e == NULL)
		return pdk__sv_reply_errorx(s, req, "not_found", "exec", "no such running exec");
	if (!json_is_integer(sig) || json_integer_value(sig) <= 0 || json_integer_value(sig) > 64)
		return pdk__sv_reply_errorx(s, req, "bad_request", "sig",
					    "'sig' must be a signal number");
	if (pdk_sandbox_signal_exec(pdk__sv_sandbox(s), e->id, (int)json_integer_value(sig), &err) <
	    0)
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	if (json_integer_value(sig) == SIGKILL)
		e->killed = true;
	pdk__sv_send(s, json_pack("{s:I, s:b}", "req", req, "ok", 1), NULL, 0);
}
