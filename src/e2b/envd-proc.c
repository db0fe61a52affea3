/*
 * envd-proc.c - envd's process.Process service over Connect (docs/e2b.md,
 * "process.Process"): each method maps onto the control layer's detached
 * processes (control.h, "detached processes"), which outlive the stream
 * that started them. Start and Connect are server streams of
 * ProcessEvent: start {pid}, data {stdout|stderr|pty} (bytes, base64),
 * end {exitCode, exited, status, error}, keepalive. Messages use
 * protobuf's JSON mapping: lowerCamelCase names, a oneof's member as a
 * plain field, bytes as base64, an enum by name or number.
 */
#include "common.h"
#include "e2b-internal.h"

#include <ctype.h>
#include <signal.h>
#include <string.h>

/* The most arguments and environment entries a Start may carry. */
#define ARGS_MAX 4096

/* One Start or Connect stream: the call and its watch on the process. */
struct pstream {
	struct pdk__e2b_call *call;
	struct pdk_ctl_proc_watch *w;
	bool pty;
};

/* ---- messages ---- */

/* Bytes as protobuf's JSON has them: standard base64 with padding (a new string). */
static json_t *bytes_json(const char *data, size_t len)
{
	_cleanup_free_ char *u = pdk_token_b64url_encode((const unsigned char *)data, len);
	size_t n = strlen(u);
	_cleanup_free_ char *s = pdk_xmalloc(n + 3);

	for (size_t i = 0; i < n; i++)
		s[i] = u[i] == '-' ? '+' : u[i] == '_' ? '/' : u[i];
	while (n % 4 != 0)
		s[n++] = '=';
	s[n] = '\0';
	return json_string(s);
}

/* Base64, standard or URL-safe, padded or not, into *out (caller frees). -EINVAL when not. */
static int bytes_decode(const char *s, unsigned char **out, size_t *len)
{
	_cleanup_free_ char *u = pdk_xstrdup(s);
	size_t n = strcspn(u, "=");

	u[n] = '\0';
	for (char *p = u; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	if (n == 0) {
		*out = pdk_xmalloc(1);
		*len = 0;
		return 0;
	}
	return pdk_token_b64url_decode(u, n, out, len) < 0 ? -EINVAL : 0;
}

static json_t *event(const char *kind, json_t *value)
{
	json_t *ev = json_pack("{s:{s:o}}", "event", kind, value);

	if (ev == NULL)
		pdk_oom();
	return ev;
}

/*
 * The end event as envd words it (Go's process state): an exit is "exit
 * status N" (exited), a signal "signal: killed" (not exited, exitCode -1).
 * A timeout, the memory limit or the sandbox's end say so in `error`.
 */
static json_t *end_event(const struct pdk_ctl_exit *x)
{
	json_t *end = json_object();
	char status[64];

	if (x != NULL && x->has_exit_code && strcmp(x->end, "exited") == 0) {
		(void)snprintf(status, sizeof(status), "exit status %d", x->exit_code);
		pdk_json_set(end, "exitCode", json_integer(x->exit_code));
		pdk_json_set(end, "exited", json_true());
	} else {
		const char *name = strsignal(x != NULL && x->has_signal ? x->signal : SIGKILL);

		(void)snprintf(status, sizeof(status), "signal: %s", name ? name : "killed");
		status[8] = (char)tolower((unsigned char)status[8]);
		pdk_json_set(end, "exitCode", json_integer(-1));
		pdk_json_set(end, "exited", json_false());
	}
	if (x != NULL && strcmp(x->end, "timeout") == 0)
		pdk_json_set(end, "error",
			     json_string("the command ran past its timeout and was killed"));
	else if (x != NULL && strcmp(x->end, "oom") == 0)
		pdk_json_set(end, "error",
			     json_string("the command was killed: the sandbox's memory limit"));
	else if (x == NULL || !x->has_exit_code)
		pdk_json_set(end, "error", json_string("the command ended with its sandbox"));
	pdk_json_set(end, "status", json_string(status));
	return event("end", end);
}

/* ---- the stream's watch ---- */

static void ps_started(void *ctx, const struct pdk_ctl_proc_info *p)
{
	struct pstream *ps = ctx;

	ps->pty = p->pty;
	pdk__e2b_send(ps->call, event("start", json_pack("{s:i}", "pid", p->pid)));
}

static void ps_output(void *ctx, int stream, const char *data, size_t len)
{
	struct pstream *ps = ctx;
	const char *kind = ps->pty ? "pty" : stream == 1 ? "stdout" : "stderr";
	json_t *d = json_object();

	pdk_json_set(d, kind, bytes_json(data, len));
	pdk__e2b_send(ps->call, event("data", d));
}

static void ps_done(void *ctx, const struct pdk_ctl_exit *exit, const struct pdk_error *err)
{
	struct pstream *ps = ctx;
	struct pdk__e2b_call *call = ps->call;

	free(ps);
	call->svc = NULL;
	if (err != NULL) {
		pdk__e2b_fail(call, err);
		return;
	}
	pdk__e2b_send(call, end_event(exit));
	pdk__e2b_end(call, NULL);
}

static const struct pdk_ctl_proc_cbs ps_cbs = {
	.started = ps_started, .output = ps_output, .done = ps_done};

/* The client went away or the call's deadline passed: the process runs on, unwatched. */
static void ps_cancel(struct pdk__e2b_call *call)
{
	struct pstream *ps = call->svc;

	if (ps == NULL)
		return;
	pdk_ctl_proc_detach(ps->w);
	free(ps);
	call->svc = NULL;
	pdk__e2b_end(call, NULL);
}

static struct pstream *pstream_new(struct pdk__e2b_call *call)
{
	struct pstream *ps = pdk_xcalloc(1, sizeof(*ps));

	ps->call = call;
	call->svc = ps;
	call->on_cancel = ps_cancel;
	call->keepalive = event("keepalive", json_object());
	return ps;
}

/* ---- reading a request ---- */

static int find_sandbox(struct pdk__e2b_call *call, struct pdk_ctl_sb **sb, struct pdk_error **err)
{
	return pdk_ctl_find(call->e->ctl, call->who.sandbox, PDK_CTL_FIND_LIVE, sb, err);
}

/* A ProcessSelector: {"pid": N} or {"tag": "..."}. */
static int selector(const json_t *msg, int *pid, const char **tag, struct pdk_error **err)
{
	const json_t *sel = json_object_get(msg, "process");
	const json_t *p = json_object_get(sel, "pid");
	const json_t *t = json_object_get(sel, "tag");

	*pid = 0;
	*tag = json_string_value(t);
	if (*tag != NULL)
		return 0;
	if (json_is_integer(p) && json_integer_value(p) > 0 && json_integer_value(p) <= INT32_MAX) {
		*pid = (int)json_integer_value(p);
		return 0;
	}
	return pdk_error_set_field(err, EINVAL, "process",
				   "'process' must select a process: {\"pid\": N} or {\"tag\": T}");
}

/* The running process a unary call's selector names. */
static int selected(struct pdk__e2b_call *call, struct pdk_ctl_sb **sb,
		    struct pdk_ctl_proc_info *info, struct pdk_error **err)
{
	const char *tag;
	int pid, rc;

	rc = find_sandbox(call, sb, err);
	if (rc == 0)
		rc = selector(call->msg, &pid, &tag, err);
	if (rc == 0)
		rc = pdk_ctl_proc_find(*sb, pid, tag, info, err);
	return rc;
}

/* ProcessConfig's args and envs: argv (cmd first) and "K=V" entries (caller frees both). */
static int config(const json_t *proc, char ***argv, char ***env, struct pdk_error **err)
{
	const json_t *args = json_object_get(proc, "args"), *envs = json_object_get(proc, "envs");
	const char *cmd = json_string_value(json_object_get(proc, "cmd"));
	const char *k;
	json_t *v;
	size_t i, n = 0;

	if (cmd == NULL || cmd[0] == '\0')
		return pdk_error_set_field(err, EINVAL, "process.cmd",
					   "'process.cmd' must name the command to run");
	if ((args != NULL && !json_is_array(args)) || json_array_size(args) > ARGS_MAX ||
	    (envs != NULL && !json_is_object(envs)) || json_object_size(envs) > ARGS_MAX)
		return pdk_error_set_field(
			err, EINVAL, "process",
			"'process.args' must be a list of strings and "
			"'process.envs' a map of strings, %d entries each at most",
			ARGS_MAX);
	*argv = pdk_xcalloc(json_array_size(args) + 2, sizeof(char *));
	(*argv)[0] = pdk_xstrdup(cmd);
	json_array_foreach(args, i, v)
	{
		if (!json_is_string(v))
			return pdk_error_set_field(err, EINVAL, "process.args",
						   "'process.args' must be strings");
		(*argv)[i + 1] = pdk_xstrdup(json_string_value(v));
	}
	*env = pdk_xcalloc(json_object_size(envs) + 1, sizeof(char *));
	json_object_foreach((json_t *)envs, k, v)
	{
		if (!json_is_string(v) || k[0] == '\0' || strchr(k, '=') != NULL)
			return pdk_error_set_field(err, EINVAL, "process.envs",
						   "'process.envs' must map names to strings");
		(*env)[n++] = pdk_xasprintf("%s=%s", k, json_string_value(v));
	}
	return 0;
}

/* The terminal size of a PTY message: {"size": {"cols", "rows"}}. */
static int pty_size(const json_t *pty, uint64_t *cols, uint64_t *rows, struct pdk_error **err)
{
	const json_t *size = json_object_get(pty, "size");
	json_int_t c = json_integer_value(json_object_get(size, "cols"));
	json_int_t r = json_integer_value(json_object_get(size, "rows"));

	if (c <= 0 || r <= 0 || c > 65535 || r > 65535)
		return pdk_error_set_field(err, EINVAL, "pty.size",
					   "'pty.size' needs cols and rows from 1 to 65535");
	*cols = (uint64_t)c;
	*rows = (uint64_t)r;
	return 0;
}

/*
 * envd runs a command for at most the call's Connect-Timeout-Ms (the SDK's
 * timeoutMs; 0, no header: no limit), whether or not its caller stays.
 */
static uint64_t call_timeout_ms(const struct pdk__e2b_call *call)
{
	const char *h = call->req ? evhttp_find_header(evhttp_request_get_input_headers(call->req),
						       "Connect-Timeout-Ms")
				  : NULL;
	uint64_t ms = 0;

	if (h == NULL || pdk_e2b_connect_timeout(h, &ms, NULL) < 0)
		return 0;
	return ms;
}

/* ---- the methods ---- */

static int start_req(struct pdk__e2b_call *call, struct pdk_ctl_exec_req *r, char ***argv,
		     char ***env, struct pdk_error **err)
{
	const json_t *msg = call->msg, *pty = json_object_get(msg, "pty");
	const json_t *stdin_ = json_object_get(msg, "stdin"), *tag = json_object_get(msg, "tag");
	int rc = config(json_object_get(msg, "process"), argv, env, err);

	if (rc < 0)
		return rc;
	r->argv = *argv;
	r->env = *env;
	r->cwd = json_string_value(json_object_get(json_object_get(msg, "process"), "cwd"));
	if (r->cwd != NULL && r->cwd[0] == '\0')
		r->cwd = NULL;
	r->tag = json_string_value(tag);
	/* StartRequest.stdin is optional and true when absent (envd's compatibility rule). */
	r->stdin_open = stdin_ == NULL || json_is_true(stdin_);
	r->timeout_ms = call_timeout_ms(call);
	if (pty != NULL && !json_is_null(pty)) {
		r->pty = true;
		rc = pty_size(pty, &r->cols, &r->rows, err);
	}
	return rc;
}

static void proc_start(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_strv_ char **argv = NULL, **env = NULL;
	struct pdk_ctl_exec_req r = {0};
	struct pdk_ctl_sb *sb = NULL;
	struct pstream *ps;

	if (find_sandbox(call, &sb, &err) < 0 || start_req(call, &r, &argv, &env, &err) < 0) {
		pdk__e2b_fail(call, err);
		return;
	}
	ps = pstream_new(call);
	ps->pty = r.pty;
	if (pdk_ctl_proc_start(sb, &r, &ps_cbs, ps, &ps->w, &err) < 0) {
		free(ps);
		call->svc = NULL;
		pdk__e2b_fail(call, err);
	}
}

static void proc_connect(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sb *sb = NULL;
	struct pstream *ps;
	const char *tag;
	int pid;

	if (find_sandbox(call, &sb, &err) < 0 || selector(call->msg, &pid, &tag, &err) < 0) {
		pdk__e2b_fail(call, err);
		return;
	}
	ps = pstream_new(call);
	/* The replay may end the call (an ended process): ps is not touched after the attach. */
	if (pdk_ctl_proc_attach(sb, pid, tag, &ps_cbs, ps, &ps->w, &err) < 0) {
		free(ps);
		call->svc = NULL;
		pdk__e2b_fail(call, err);
	}
}

static json_t *info_json(const struct pdk_ctl_proc_info *p)
{
	json_t *args = json_array(), *envs = json_object();
	json_t *cfg, *o;

	for (size_t i = 1; p->argv[i] != NULL; i++)
		json_array_append_new(args, json_string(p->argv[i]));
	for (size_t i = 0; p->env[i] != NULL; i++) {
		const char *eq = strchr(p->env[i], '=');
		_cleanup_free_ char *k = strndup(p->env[i], eq ? (size_t)(eq - p->env[i]) : 0);

		if (eq != NULL && k != NULL)
			pdk_json_set(envs, k, json_string(eq + 1));
	}
	cfg = json_pack("{s:s, s:o, s:o}", "cmd", p->argv[0], "args", args, "envs", envs);
	if (cfg == NULL)
		pdk_oom();
	if (p->cwd != NULL)
		pdk_json_set(cfg, "cwd", json_string(p->cwd));
	o = json_pack("{s:o, s:i}", "config", cfg, "pid", p->pid);
	if (p->tag != NULL)
		pdk_json_set(o, "tag", json_string(p->tag));
	return o;
}

static void proc_list(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_proc_info info[PDK_CTL_PROCS_MAX];
	struct pdk_ctl_sb *sb = NULL;
	json_t *list;
	size_t n;

	if (find_sandbox(call, &sb, &err) < 0) {
		pdk__e2b_fail(call, err);
		return;
	}
	n = pdk_ctl_procs(sb, info, PDK_ARRAY_SIZE(info));
	list = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, info_json(&info[i]));
	pdk__e2b_reply(call, json_pack("{s:o}", "processes", list));
}

/* SendInput: {"process", "input": {"stdin": B64} or {"pty": B64}}. */
static void proc_send_input(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ unsigned char *data = NULL;
	const json_t *in = json_object_get(call->msg, "input");
	const char *b64 = json_string_value(json_object_get(in, "stdin"));
	struct pdk_ctl_proc_info info;
	struct pdk_ctl_sb *sb = NULL;
	size_t len = 0;
	int rc;

	if (b64 == NULL)
		b64 = json_string_value(json_object_get(in, "pty"));
	rc = selected(call, &sb, &info, &err);
	if (rc == 0 && (b64 == NULL || bytes_decode(b64, &data, &len) < 0))
		rc = pdk_error_set_field(&err, EINVAL, "input",
					 "'input' must hold stdin or pty bytes (base64)");
	if (rc == 0)
		rc = pdk_ctl_exec_stdin(sb, info.exec_id, (const char *)data, len, false, &err);
	if (rc < 0)
		pdk__e2b_fail(call, err);
	else
		pdk__e2b_reply(call, json_object());
}

static void proc_close_stdin(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_proc_info info;
	struct pdk_ctl_sb *sb = NULL;
	int rc = selected(call, &sb, &info, &err);

	if (rc == 0)
		rc = pdk_ctl_exec_stdin(sb, info.exec_id, "", 0, true, &err);
	if (rc < 0)
		pdk__e2b_fail(call, err);
	else
		pdk__e2b_reply(call, json_object());
}

static void proc_update(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_proc_info info;
	struct pdk_ctl_sb *sb = NULL;
	uint64_t cols = 0, rows = 0;
	const json_t *pty = json_object_get(call->msg, "pty");
	int rc = selected(call, &sb, &info, &err);

	/* An Update without a pty changes nothing: envd answers it so too. */
	if (rc == 0 && pty != NULL && !json_is_null(pty)) {
		rc = pty_size(pty, &cols, &rows, &err);
		if (rc == 0)
			rc = pdk_ctl_exec_resize(sb, info.exec_id, cols, rows, &err);
	}
	if (rc < 0)
		pdk__e2b_fail(call, err);
	else
		pdk__e2b_reply(call, json_object());
}

/* The Signal enum by name or number: SIGTERM (15) and SIGKILL (9) are its only values. */
static int signal_of(const json_t *v, struct pdk_error **err)
{
	const char *s = json_string_value(v);

	if ((s != NULL && strcmp(s, "SIGNAL_SIGKILL") == 0) ||
	    (json_is_integer(v) && json_integer_value(v) == 9))
		return SIGKILL;
	if ((s != NULL && strcmp(s, "SIGNAL_SIGTERM") == 0) ||
	    (json_is_integer(v) && json_integer_value(v) == 15))
		return SIGTERM;
	return pdk_error_set_field(err, EINVAL, "signal",
				   "'signal' must be SIGNAL_SIGTERM or SIGNAL_SIGKILL");
}

static void signalled(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct pdk__e2b_call *call = ctx;

	(void)doc;
	if (err != NULL)
		pdk__e2b_fail(call, err);
	else
		pdk__e2b_reply(call, json_object());
}

static void proc_send_signal(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_proc_info info;
	struct pdk_ctl_sb *sb = NULL;
	/* The request is checked before the process is looked for. */
	int sig = signal_of(json_object_get(call->msg, "signal"), &err), rc = sig;

	if (rc >= 0)
		rc = selected(call, &sb, &info, &err);
	if (rc >= 0)
		rc = pdk_ctl_signal(sb, info.exec_id, sig, signalled, call, &err);
	if (rc < 0)
		pdk__e2b_fail(call, err);
}

/*
 * StreamInput is a client stream, which HTTP/1.1 cannot carry beside the
 * answer: envd's own SDKs send input with SendInput instead.
 */
static void proc_stream_input(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	(void)pdk_error_setx(&err, ENOSYS,
			     "StreamInput is a client stream, which Connect over HTTP/1.1 does not "
			     "carry: send input with SendInput");
	pdk__e2b_fail(call, err);
}

static const struct pdk__e2b_method methods[] = {
	{"Start", true, proc_start},
	{"Connect", true, proc_connect},
	{"List", false, proc_list},
	{"SendInput", false, proc_send_input},
	{"CloseStdin", false, proc_close_stdin},
	{"SendSignal", false, proc_send_signal},
	{"Update", false, proc_update},
	{"StreamInput", false, proc_stream_input},
};

const struct pdk__e2b_service pdk__e2b_svc_process = {
	.name = "process.Process",
	.methods = methods,
	.n = PDK_ARRAY_SIZE(methods),
};
