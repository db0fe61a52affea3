/*
 * test-control.c - the control layer without any HTTP (src/control/): the
 * budget arithmetic and the Sandbox view's remaining amounts, the record of
 * an ended sandbox, the kill switch's selection, supervisor errors as
 * control errors and the API's one mapping of those to HTTP statuses; and,
 * as root, a real sandbox created through the control object on an event
 * loop, a command run in it to its exit, and its destroy; spooled records
 * and the order of the chain.
 */
#include "common.h"
#include "api.h"
#include "control-internal.h"
#include "control.h"
#include "util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int64_t figure(const struct pdk_ctl_figures *f, const char *name)
{
	int64_t v = -1;

	cr_assert(pdk_ctl_figure_get(f, name, &v), "figure '%s' is there", name);
	return v;
}

static bool has_figure(const struct pdk_ctl_figures *f, const char *name)
{
	int64_t v;

	return pdk_ctl_figure_get(f, name, &v);
}

static void release3(struct pdk_ctl_figures *a, struct pdk_ctl_figures *b,
		     struct pdk_ctl_figures *c)
{
	pdk__figures_release(a);
	pdk__figures_release(b);
	pdk__figures_release(c);
}

/* ---- budgets ---- */

Test(control, budgets_remaining_is_limit_minus_usage_never_negative)
{
	_cleanup_json_ json_t *status = json_pack(
		"{s:{s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I}}", "usage", "wall_ns",
		(json_int_t)4000, "cpu_ns", (json_int_t)900, "memory_current", (json_int_t)1 << 20,
		"egress_bytes", (json_int_t)700, "commands", (json_int_t)99, "limits", "wall_ns",
		(json_int_t)10000, "cpu_ns", (json_int_t)500, "memory", (json_int_t)1 << 24,
		"egress_bytes", (json_int_t)0, "commands", (json_int_t)10);
	_cleanup_json_ json_t *limits = json_pack("{s:I}", "output_bytes", (json_int_t)1000);
	struct pdk_ctl_figures usage = {0}, lim = {0}, rem = {0};

	pdk__budgets(status, limits, 250, 3, &usage, &lim, &rem);
	/* The daemon's own counts win over the supervisor's. */
	cr_assert_eq(figure(&usage, "commands"), 3);
	cr_assert_eq(figure(&usage, "output_bytes"), 250);
	cr_assert_eq(figure(&usage, "wall_ns"), 4000);
	cr_assert_eq(figure(&lim, "output_bytes"), 1000);
	cr_assert_eq(figure(&rem, "wall_ns"), 6000);
	cr_assert_eq(figure(&rem, "output_bytes"), 750);
	cr_assert_eq(figure(&rem, "commands"), 7);
	cr_assert_eq(figure(&rem, "cpu_ns"), 0, "over the limit: 0, not negative");
	/* Unbounded (0) or not counted under the same name (memory): nothing remains. */
	cr_assert_not(has_figure(&rem, "egress_bytes"));
	cr_assert_not(has_figure(&rem, "memory"));
	release3(&usage, &lim, &rem);
}

Test(control, budgets_before_the_first_status_are_the_requests_own)
{
	/* Canonical numbers, and text a sandbox stored before them may still hold. */
	_cleanup_json_ json_t *limits =
		json_pack("{s:I, s:s, s:s, s:s}", "commands", (json_int_t)5, "egress_bytes", "1K",
			  "disk", "2M", "output", "4K");
	struct pdk_ctl_figures usage = {0}, lim = {0}, rem = {0};

	pdk__budgets(NULL, limits, 96, 1, &usage, &lim, &rem);
	cr_assert_eq(figure(&lim, "commands"), 5);
	cr_assert_eq(figure(&lim, "egress_bytes"), 1024);
	cr_assert_eq(figure(&lim, "disk"), 2 << 20);
	cr_assert_eq(figure(&lim, "output_bytes"), 4096, "'output' is the older name");
	cr_assert_eq(figure(&rem, "commands"), 4);
	cr_assert_eq(figure(&rem, "output_bytes"), 4000);
	cr_assert_not(has_figure(&rem, "egress_bytes"), "not counted yet: no usage figure");
	release3(&usage, &lim, &rem);
}

Test(control, budgets_without_limits_have_nothing_remaining)
{
	_cleanup_json_ json_t *limits = json_object();
	struct pdk_ctl_figures usage = {0}, lim = {0}, rem = {0};

	pdk__budgets(NULL, limits, 0, 0, &usage, &lim, &rem);
	cr_assert_eq(figure(&lim, "output_bytes"), 0);
	cr_assert_eq(rem.n, 0);
	release3(&usage, &lim, &rem);
}

/* ---- the record of an ended sandbox ---- */

Test(control, an_ended_record_reads_back_as_it_was_written)
{
	struct pdk_ctl_view v = {0}, back;
	_cleanup_json_ json_t *first = NULL, *second = NULL;
	_cleanup_free_ char *text = NULL;

	v.id = pdk_xstrdup("0190f4c2-7a3b-7c4d-8e5f-0123456789ab");
	v.state = pdk_xstrdup("ended");
	v.profile = pdk_xstrdup("default");
	v.labels = json_pack("{s:s}", "session", "s1");
	v.created_ns = 1764064800123456000ULL;
	v.idle_timeout_s = 600;
	v.claimed = true;
	v.supervisor_pid = 4242;
	pdk__figures_add(&v.usage, "commands", 2);
	pdk__figures_add(&v.limits, "commands", 10);
	pdk__figures_add(&v.remaining, "commands", 8);
	v.end_reason = pdk_xstrdup("ttl");
	v.ended_ns = 1764068400000001000ULL;
	first = pdk_ctl_view_json(&v);
	text = json_dumps(first, JSON_COMPACT);
	cr_assert_eq(pdk__view_from_record(text, &back), 0);
	cr_assert_eq(back.created_ns, v.created_ns);
	cr_assert_eq(back.ended_ns, v.ended_ns);
	cr_assert_eq(back.expires_ns, 0);
	cr_assert_str_eq(back.end_reason, "ttl");
	second = pdk_ctl_view_json(&back);
	cr_assert(json_equal(first, second), "the same record twice");
	cr_assert_str_eq(json_string_value(json_object_get(first, "created_at")),
			 "2025-11-25T10:00:00.123456Z");
	cr_assert(json_is_null(json_object_get(first, "expires_at")));
	pdk_ctl_view_release(&back);
	pdk_ctl_view_release(&v);
	cr_assert_lt(pdk__view_from_record("[]", &back), 0);
}

/* ---- the kill switch ---- */

Test(control, kill_selects_by_id_or_by_every_given_label)
{
	_cleanup_json_ json_t *labels = json_pack("{s:s, s:s, s:s, s:s}", "session", "s1",
						  "workflow", "w1", "agent", "a1", "team", "red");
	_cleanup_json_ json_t *team = json_pack("{s:s}", "team", "red");
	_cleanup_json_ json_t *blue = json_pack("{s:s}", "team", "blue");
	char *ids[] = {(char *)"other", (char *)"sb1", NULL};
	const char *id = "sb1";

	cr_assert_not(pdk_ctl_selector_match(&(struct pdk_ctl_selector){0}, id, labels),
		      "an empty selector selects nothing");
	cr_assert(pdk_ctl_selector_match(&(struct pdk_ctl_selector){.ids = ids}, id, labels));
	cr_assert_not(
		pdk_ctl_selector_match(&(struct pdk_ctl_selector){.ids = ids}, "sb2", labels));
	cr_assert(pdk_ctl_selector_match(&(struct pdk_ctl_selector){.session = "s1"}, id, labels));
	cr_assert_not(
		pdk_ctl_selector_match(&(struct pdk_ctl_selector){.session = "s2"}, id, labels));
	cr_assert(pdk_ctl_selector_match(
		&(struct pdk_ctl_selector){.session = "s1", .workflow = "w1", .agent = "a1"}, id,
		labels));
	cr_assert_not(pdk_ctl_selector_match(
		&(struct pdk_ctl_selector){.session = "s1", .agent = "a2"}, id, labels));
	cr_assert(pdk_ctl_selector_match(&(struct pdk_ctl_selector){.labels = team}, id, labels));
	cr_assert_not(
		pdk_ctl_selector_match(&(struct pdk_ctl_selector){.labels = blue}, id, labels));
	cr_assert_not(pdk_ctl_selector_match(&(struct pdk_ctl_selector){.workflow = "w1"}, id,
					     json_object_get(labels, "none")),
		      "a sandbox without labels matches no label");
}

/* ---- errors ---- */

static int http_of(int status, const char **code)
{
	return pdk_api_http_status(status, code);
}

Test(control, each_status_has_its_http_status)
{
	static const struct {
		int status, http;
		const char *code;
	} want[] = {
		{ENOENT, 404, "not_found"},     {EINVAL, 400, "bad_request"},
		{ENOEXEC, 400, "bad_request"},  {EALREADY, 409, "conflict"},
		{EEXIST, 409, "conflict"},      {EBUSY, 409, "busy"},
		{EDQUOT, 429, "limit"},         {E2BIG, 413, "too_large"},
		{EACCES, 403, "forbidden"},     {EPERM, 403, "forbidden"},
		{ENOTCONN, 503, "unavailable"}, {EIO, 500, "internal"},
		{ENOMEM, 500, "internal"},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(want); i++) {
		const char *code = NULL;

		cr_assert_eq(http_of(want[i].status, &code), want[i].http, "%s",
			     strerror(want[i].status));
		cr_assert_str_eq(code, want[i].code);
	}
}

Test(control, each_supervisor_code_has_its_http_status)
{
	static const struct {
		const char *code;
		int http;
		const char *http_code;
	} want[] = {
		{"not_found", 404, "not_found"}, {"bad_request", 400, "bad_request"},
		{"conflict", 409, "conflict"},   {"busy", 409, "busy"},
		{"limit", 429, "limit"},         {"exec_failed", 400, "bad_request"},
		{"internal", 500, "internal"},   {"something_new", 500, "internal"},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(want); i++) {
		_cleanup_error_ struct pdk_error *err = NULL;
		_cleanup_json_ json_t *reply = json_pack(
			"{s:I, s:{s:s, s:s, s:s}}", "req", (json_int_t)7, "error", "code",
			want[i].code, "message", "what the supervisor said", "field", "argv[0]");
		const char *code = NULL;

		cr_assert_lt(pdk_ctl_svc_error(reply, &err), 0);
		cr_assert_eq(http_of(err->status, &code), want[i].http, "%s", want[i].code);
		cr_assert_str_eq(code, want[i].http_code);
		cr_assert_str_eq(err->msg, "what the supervisor said");
		cr_assert_str_eq(err->field, "argv[0]");
	}
}

Test(control, a_lost_supervisor_is_unavailable)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *bare = json_pack("{s:{}}", "error");
	const char *code = NULL;

	cr_assert_eq(pdk_ctl_svc_error(NULL, &err), -ENOTCONN);
	cr_assert_eq(http_of(err->status, &code), 503);
	cr_assert_null(err->field);
	pdk_error_free(&err);
	cr_assert_eq(pdk_ctl_svc_error(bare, &err), -EIO);
	cr_assert_str_eq(err->msg, "supervisor error");
}

Test(control, names)
{
	cr_assert(pdk_ctl_name_ok("default"));
	cr_assert(pdk_ctl_name_ok("a-b_c.1"));
	cr_assert_not(pdk_ctl_name_ok(""));
	cr_assert_not(pdk_ctl_name_ok(".hidden"));
	cr_assert_not(pdk_ctl_name_ok("a/b"));
	cr_assert_not(
		pdk_ctl_name_ok("0123456789012345678901234567890123456789012345678901234567890"
				"1234"));
}

/* ---- a real sandbox, as root ---- */

struct run {
	struct event_base *base;
	char *id;
	bool created, done, destroyed;
	int exit_code;
	char *out;
	char *err_msg;
	char state[16];
};

static void stop_loop(struct run *r)
{
	(void)event_base_loopbreak(r->base);
}

static void on_created(void *ctx, const struct pdk_ctl_created *c, const struct pdk_error *err)
{
	struct run *r = ctx;

	r->created = true;
	if (err != NULL)
		r->err_msg = pdk_xstrdup(err->msg);
	else
		r->id = pdk_xstrdup(c->view.id);
	stop_loop(r);
}

static void on_done(void *ctx, const struct pdk_ctl_exec_result *res, const struct pdk_error *err)
{
	struct run *r = ctx;

	r->done = true;
	if (err != NULL) {
		r->err_msg = pdk_xstrdup(err->msg);
	} else {
		r->exit_code = res->exit.exit_code;
		r->out = strndup(res->out.head, res->out.head_len);
	}
	stop_loop(r);
}

static void on_destroyed(void *ctx, const char *id, const char *state, const struct pdk_error *err)
{
	struct run *r = ctx;

	(void)id;
	r->destroyed = true;
	(void)snprintf(r->state, sizeof(r->state), "%s", err ? "error" : state);
	stop_loop(r);
}

/* Run the loop until *flag, at most 60 s. */
static void run_until(struct run *r, const bool *flag)
{
	uint64_t deadline = pdk_now_mono_ns() + 60ULL * 1000000000ULL;

	while (!*flag && pdk_now_mono_ns() < deadline)
		(void)event_base_loop(r->base, EVLOOP_ONCE);
	cr_assert(*flag, "the loop got its answer in time");
}

Test(control, a_sandbox_runs_a_command_without_http, .timeout = 100)
{
	char dir[] = "/tmp/pdk-test-control-XXXXXX";
	_cleanup_free_ char *state = NULL, *rundir = NULL;
	_cleanup_json_ json_t *labels = json_pack("{s:s}", "session", "unit");
	_cleanup_error_ struct pdk_error *err = NULL;
	char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	char *const argv[] = {(char *)"sh", (char *)"-c", (char *)"echo hello; exit 3", NULL};
	struct run r = {0};
	struct pdk_ctl *c = NULL;
	struct pdk_ctl_sb *sb = NULL;
	static const struct pdk_ctl_exec_cbs cbs = {.done = on_done};

	if (geteuid() != 0)
		cr_skip_test("a sandbox of its own needs root here (rootless needs a delegated "
			     "cgroup); the serve suites cover the unprivileged daemon");
	if (access(PDK_TEST_PADDOCK, X_OK) != 0)
		cr_skip_test("no paddock binary at %s", PDK_TEST_PADDOCK);
	cr_assert_not_null(mkdtemp(dir));
	state = pdk_xasprintf("%s/state", dir);
	rundir = pdk_xasprintf("%s/run", dir);
	r.base = event_base_new();
	cr_assert_eq(pdk_ctl_new(&(struct pdk_ctl_opts){.base = r.base,
							.state_dir = state,
							.run_dir = rundir,
							.retention_s = 60,
							.envp = envp,
							.supervisor_exe = PDK_TEST_PADDOCK},
				 &c, &err),
		     0, "%s", err ? err->msg : "");
	pdk_ctl_start(c);

	cr_assert_eq(
		pdk_ctl_create(c, &(struct pdk_ctl_create){.profile = "default", .labels = labels},
			       on_created, &r, &err),
		0, "%s", err ? err->msg : "");
	run_until(&r, &r.created);
	cr_assert_null(r.err_msg, "%s", r.err_msg);

	cr_assert_eq(pdk_ctl_find(c, r.id, PDK_CTL_FIND_LIVE, &sb, &err), 0);
	cr_assert_eq(pdk_ctl_exec(sb, &(struct pdk_ctl_exec_req){.argv = argv, .output_cap = 16384},
				  false, &cbs, &r, NULL, &err),
		     0, "%s", err ? err->msg : "");
	run_until(&r, &r.done);
	cr_assert_null(r.err_msg, "%s", r.err_msg);
	cr_assert_eq(r.exit_code, 3);
	cr_assert_str_eq(r.out, "hello\n");

	cr_assert_eq(pdk_ctl_destroy(c, r.id, "deleted", NULL, on_destroyed, &r, &err), 0);
	run_until(&r, &r.destroyed);
	cr_assert_str_eq(r.state, "ended");
	cr_assert_eq(pdk_ctl_sandbox_count(c), 0);

	pdk_ctl_free(c);
	event_base_free(r.base);
	free(r.id);
	free(r.out);
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
}

/* ---- detached processes ---- */

struct watcher {
	struct run *r;
	int pid;
	bool started, done;
	int exit_code;
	char out[256];
	size_t out_len;
};

static void w_started(void *ctx, const struct pdk_ctl_proc_info *p)
{
	struct watcher *w = ctx;

	w->started = true;
	w->pid = p->pid;
	stop_loop(w->r);
}

static void w_output(void *ctx, int stream, const char *data, size_t len)
{
	struct watcher *w = ctx;

	(void)stream;
	if (len > sizeof(w->out) - 1 - w->out_len)
		len = sizeof(w->out) - 1 - w->out_len;
	memcpy(w->out + w->out_len, data, len);
	w->out_len += len;
	w->out[w->out_len] = '\0';
	stop_loop(w->r);
}

static void w_done(void *ctx, const struct pdk_ctl_exit *e, const struct pdk_error *err)
{
	struct watcher *w = ctx;

	w->done = true;
	w->exit_code = err == NULL && e != NULL ? e->exit_code : -1;
	stop_loop(w->r);
}

static const struct pdk_ctl_proc_cbs w_cbs = {
	.started = w_started, .output = w_output, .done = w_done};

/* Run the loop until `w` has seen `text`, at most 60 s. */
static void run_until_out(struct watcher *w, const char *text)
{
	uint64_t deadline = pdk_now_mono_ns() + 60ULL * 1000000000ULL;

	while (strstr(w->out, text) == NULL && pdk_now_mono_ns() < deadline)
		(void)event_base_loop(w->r->base, EVLOOP_ONCE);
	cr_assert(strstr(w->out, text) != NULL, "saw '%s' in '%s'", text, w->out);
}

static struct pdk_ctl *control_with_sandbox(struct run *r, char *dir, struct pdk_ctl_sb **sb)
{
	_cleanup_free_ char *state = NULL, *rundir = NULL;
	_cleanup_json_ json_t *labels = json_pack("{s:s}", "session", "unit");
	_cleanup_error_ struct pdk_error *err = NULL;
	static char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	struct pdk_ctl *c = NULL;

	cr_assert_not_null(mkdtemp(dir));
	state = pdk_xasprintf("%s/state", dir);
	rundir = pdk_xasprintf("%s/run", dir);
	r->base = event_base_new();
	cr_assert_eq(pdk_ctl_new(&(struct pdk_ctl_opts){.base = r->base,
							.state_dir = state,
							.run_dir = rundir,
							.retention_s = 60,
							.envp = envp,
							.supervisor_exe = PDK_TEST_PADDOCK},
				 &c, &err),
		     0, "%s", err ? err->msg : "");
	pdk_ctl_start(c);
	cr_assert_eq(
		pdk_ctl_create(c, &(struct pdk_ctl_create){.profile = "default", .labels = labels},
			       on_created, r, &err),
		0, "%s", err ? err->msg : "");
	run_until(r, &r->created);
	cr_assert_null(r->err_msg, "%s", r->err_msg);
	cr_assert_eq(pdk_ctl_find(c, r->id, PDK_CTL_FIND_LIVE, sb, &err), 0);
	return c;
}

Test(control, a_detached_process_outlives_its_caller_and_is_reattached, .timeout = 100)
{
	char dir[] = "/tmp/pdk-test-control-XXXXXX";
	_cleanup_error_ struct pdk_error *err = NULL;
	char *const argv[] = {(char *)"sh", (char *)"-c",
			      (char *)"echo one; read x; echo got $x; exit 4", NULL};
	struct run r = {0};
	struct watcher first = {.r = &r}, again = {.r = &r}, late = {.r = &r};
	struct pdk_ctl_proc_watch *w = NULL;
	struct pdk_ctl_proc_info info, list[4];
	struct pdk_ctl_sb *sb = NULL;
	struct pdk_ctl *c;

	if (geteuid() != 0)
		cr_skip_test("a sandbox of its own needs root here; the e2b-proc suite covers "
			     "the unprivileged daemon");
	if (access(PDK_TEST_PADDOCK, X_OK) != 0)
		cr_skip_test("no paddock binary at %s", PDK_TEST_PADDOCK);
	c = control_with_sandbox(&r, dir, &sb);

	/* Started with a watcher that leaves once it saw the first line. */
	cr_assert_eq(pdk_ctl_proc_start(sb,
					&(struct pdk_ctl_exec_req){
						.argv = argv, .stdin_open = true, .tag = "job"},
					&w_cbs, &first, &w, &err),
		     0, "%s", err ? err->msg : "");
	run_until_out(&first, "one\n");
	cr_assert(first.started && first.pid > 0);
	pdk_ctl_proc_detach(w);
	cr_assert_eq(pdk_ctl_procs(sb, list, 4), 1);
	cr_assert_str_eq(list[0].tag, "job");
	cr_assert_eq(list[0].pid, first.pid);

	/* A second one of the same tag is refused while it runs. */
	cr_assert_eq(pdk_ctl_proc_start(sb, &(struct pdk_ctl_exec_req){.argv = argv, .tag = "job"},
					NULL, NULL, NULL, &err),
		     -EEXIST);
	pdk_error_free(&err);

	/* Re-attached by tag: the output since the start comes first. */
	cr_assert_eq(pdk_ctl_proc_attach(sb, 0, "job", &w_cbs, &again, NULL, &err), 0);
	cr_assert(again.started);
	cr_assert_str_eq(again.out, "one\n");
	cr_assert_eq(pdk_ctl_proc_find(sb, first.pid, NULL, &info, &err), 0);
	cr_assert_eq(pdk_ctl_exec_stdin(sb, info.exec_id, "two\n", 4, false, &err), 0, "%s",
		     err ? err->msg : "");
	run_until(&r, &again.done);
	cr_assert_str_eq(again.out, "one\ngot two\n");
	cr_assert_eq(again.exit_code, 4);
	cr_assert(!first.done, "a detached watcher hears nothing more");
	cr_assert_eq(pdk_ctl_procs(sb, list, 4), 0);

	/* After the end, an attach by pid gets the whole story at once. */
	cr_assert_eq(pdk_ctl_proc_attach(sb, first.pid, NULL, &w_cbs, &late, NULL, &err), 0);
	cr_assert(late.done);
	cr_assert_str_eq(late.out, "one\ngot two\n");
	cr_assert_eq(late.exit_code, 4);
	cr_assert_eq(pdk_ctl_proc_find(sb, first.pid, NULL, &info, &err), -ENOENT);
	cr_assert_str_eq(err->field, "pid");
	pdk_error_free(&err);
	cr_assert_eq(pdk_ctl_proc_attach(sb, 0, "nope", &w_cbs, &late, NULL, &err), -ENOENT);

	cr_assert_eq(pdk_ctl_destroy(c, r.id, "deleted", NULL, on_destroyed, &r, NULL), 0);
	run_until(&r, &r.destroyed);
	cr_assert_str_eq(r.state, "ended");
	pdk_ctl_free(c);
	event_base_free(r.base);
	free(r.id);
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
}

/* ---- spooled records (pdk_ctl_event_spooled) ---- */

/* The journal files of the state directory's spool directory. */
static int journal_files(const char *state)
{
	_cleanup_free_ char *dir = pdk_xasprintf("%s/" PDK_AUDIT_SPOOL_DIR, state);
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d != NULL && (de = readdir(d)) != NULL)
		n += strncmp(de->d_name, "paddock-gateway-", 16) == 0;
	return n;
}

static int kind_row(void *data, const struct pdk_audit_row *row)
{
	char **kinds = data;
	char *more = pdk_xasprintf("%s%s ", *kinds, row->kind);

	free(*kinds);
	*kinds = more;
	return 0;
}

static void loop_for_ms(struct event_base *base, long ms)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = ms * 1000};

	cr_assert_eq(event_base_loopexit(base, &tv), 0);
	cr_assert_eq(event_base_dispatch(base), 0);
}

/* A control object of `actor` on the state directory DIR/state (DIR: a new temporary one). */
static struct pdk_ctl *ctl_in(char *dir, struct event_base *base, const char *actor, char **state)
{
	_cleanup_free_ char *rundir = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl *c = NULL;

	cr_assert_not_null(mkdtemp(dir));
	*state = pdk_xasprintf("%s/state", dir);
	rundir = pdk_xasprintf("%s/run", dir);
	cr_assert_eq(pdk_ctl_new(&(struct pdk_ctl_opts){.base = base,
							.state_dir = *state,
							.run_dir = rundir,
							.actor = actor},
				 &c, &err),
		     0, "%s", err ? err->msg : "");
	return c;
}

/*
 * A spooled record is in the control object's spool when the call returns,
 * folded by its timer (the loop's next PDK_CTL_SPOOL_FOLD_MS), and the
 * chain keeps the order of the calls with the queued records around it:
 * a record queued before a spooled one is stored before it, a spooled one
 * is folded before a record queued after it is stored.
 */
Test(control, spooled_records_keep_the_order_of_the_calls)
{
	char dir[] = "/tmp/pdk-test-control-XXXXXX";
	_cleanup_free_ char *state = NULL, *kinds = pdk_xstrdup("");
	_cleanup_error_ struct pdk_error *err = NULL;
	struct event_base *base = event_base_new();
	struct pdk_audit *a = NULL;
	struct pdk_ctl *c = ctl_in(dir, base, "paddock-gateway", &state);

	pdk_ctl_event_spooled(c, "daemon", NULL, "k.1", NULL);
	cr_assert_eq(journal_files(state), 1, "written to the spool before the call returns");
	loop_for_ms(base, 200);
	cr_assert_eq(journal_files(state), 0, "folded by its timer");
	pdk_ctl_event(c, "daemon", NULL, "k.2", NULL);
	pdk_ctl_event_spooled(c, "daemon", NULL, "k.3", NULL);
	pdk_ctl_event_spooled(c, "daemon", NULL, "k.4", NULL);
	pdk_ctl_event(c, "daemon", NULL, "k.5", NULL);
	pdk_ctl_events_store(c);
	cr_assert_eq(journal_files(state), 0, "folded before the record queued after it");
	pdk_ctl_event_spooled(c, "daemon", NULL, "k.6", NULL);
	pdk_ctl_free(c); /* folds what is left */
	cr_assert_eq(journal_files(state), 0);
	cr_assert_eq(pdk_audit_open(state, &a, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){.kind = "k."}, kind_row, &kinds,
				     &err),
		     0, "%s", err ? err->msg : "");
	cr_assert_str_eq(kinds, "k.1 k.2 k.3 k.4 k.5 k.6 ");
	pdk_audit_free(a);
	event_base_free(base);
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
}

/* ---- the fan-out to subscribers ---- */

struct seen {
	struct pdk_ctl *c;
	char *kinds;
};

/* Notes each k.* record; at k.1 it records and stores k.3, as a store in an answer's write did. */
static void note_kind(void *ctx, uint64_t seq, const char *kind, json_t *event)
{
	struct seen *s = ctx;
	char *more;

	(void)seq;
	(void)event;
	if (strncmp(kind, "k.", 2) != 0)
		return;
	more = pdk_xasprintf("%s%s ", s->kinds, kind);
	free(s->kinds);
	s->kinds = more;
	if (s->c != NULL && strcmp(kind, "k.1") == 0) {
		pdk_ctl_event(s->c, "daemon", NULL, "k.3", NULL);
		pdk_ctl_events_store(s->c);
	}
}

/*
 * A store from inside a fan-out (a subscriber's callback whose write led to
 * one) hands each record to each subscriber once, in the chain's order: the
 * inner fan-out waits for the outer one. Before, the inner one sent k.2 and
 * k.3 from inside k.1's callback, and the outer one sent k.2 again.
 */
Test(control, a_store_inside_a_fan_out_sends_each_record_once_in_order)
{
	char dir[] = "/tmp/pdk-test-control-XXXXXX";
	_cleanup_free_ char *state = NULL;
	struct event_base *base = event_base_new();
	struct seen seen = {.kinds = pdk_xstrdup("")};
	struct seen other = {.kinds = pdk_xstrdup("")}; /* .c NULL: it only notes */
	struct pdk_ctl *c = ctl_in(dir, base, "paddock-test", &state);

	seen.c = c;
	(void)pdk_ctl_subscribe(c, &(struct pdk_ctl_sub_filter){.since = UINT64_MAX}, note_kind,
				&seen);
	(void)pdk_ctl_subscribe(c, &(struct pdk_ctl_sub_filter){.since = UINT64_MAX}, note_kind,
				&other);
	pdk_ctl_event(c, "daemon", NULL, "k.1", NULL);
	pdk_ctl_event(c, "daemon", NULL, "k.2", NULL);
	pdk_ctl_events_store(c);
	cr_assert_str_eq(seen.kinds, "k.1 k.2 k.3 ");
	cr_assert_str_eq(other.kinds, "k.1 k.2 k.3 ");
	pdk_ctl_free(c);
	free(seen.kinds);
	free(other.kinds);
	event_base_free(base);
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
}
