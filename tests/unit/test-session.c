/*
 * test-session.c - the session's open steps and their failures (each names
 * its step), what finish does with a change set, and the supervisor's
 * reading of the daemon's spec: typed numbers in, a string where a number
 * belongs refused naming the field.
 */
#include "common.h"
#include "policy.h"
#include "session.h"
#include "supervisor-internal.h"
#include "util.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the spec ---- */

static json_t *spec_of(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);

	cr_assert_not_null(j, "%s: %s", text, je.text);
	return j;
}

/* Parse and expect failure; returns the message (caller frees). */
static char *spec_fails(const char *text)
{
	json_t *j = spec_of(text);
	struct pdk_sv_spec sp;
	struct pdk_error *err = NULL;
	char *msg;

	cr_assert_lt(pdk__sv_spec_parse(j, &sp, &err), 0, "accepted: %s", text);
	cr_assert_not_null(err);
	msg = steal_ptr(&err->msg);
	pdk_error_free(&err);
	pdk__sv_spec_release(&sp);
	json_decref(j);
	return msg;
}

Test(session, spec_numbers_become_typed_overrides)
{
	json_t *j =
		spec_of("{\"profile\":\"strict\",\"overrides\":{\"limits\":{\"memory\":536870912,"
			"\"pids\":64,\"cpu\":0.5,\"wall\":600000,\"egress_bytes\":1048576,"
			"\"disk\":2097152,\"cpu_time\":300,\"commands\":2,\"output\":100},"
			"\"network\":{\"mode\":\"allowlist\",\"allow\":[\"example.com:443\"]}},"
			"\"workspace\":{\"path\":\"/srv/x\",\"mode\":\"rw\"},"
			"\"env\":{\"A\":\"b\"},\"labels\":{\"session\":\"s1\"},"
			"\"audit\":{\"exec_trace\":false},\"run_dir\":\"/run/x\"}");
	struct pdk_sv_spec sp;
	struct pdk_error *err = NULL;
	const struct pdk_overrides *ov = &sp.session.overrides;

	cr_assert_eq(pdk__sv_spec_parse(j, &sp, &err), 0, "%s", err ? err->msg : "");
	cr_assert_str_eq(sp.session.profile, "strict");
	cr_assert_eq(ov->limits[PDK_OVERRIDE_MEMORY].value, 512ULL << 20);
	cr_assert_str_eq(ov->limits[PDK_OVERRIDE_MEMORY].name, "limits.memory");
	cr_assert_eq(ov->limits[PDK_OVERRIDE_PIDS].value, 64);
	cr_assert_eq(ov->limits[PDK_OVERRIDE_CPUS].value, 500, "a real number of CPUs, in 1/1000");
	cr_assert_eq(ov->limits[PDK_OVERRIDE_WALL].value, 600000, "milliseconds");
	cr_assert_eq(ov->limits[PDK_OVERRIDE_EGRESS_BYTES].value, 1048576);
	cr_assert_eq(ov->limits[PDK_OVERRIDE_DISK].value, 2097152);
	cr_assert_eq(sp.cpu_time_ms, 300);
	cr_assert_eq(sp.commands, 2);
	cr_assert(ov->net_mode.set && ov->net_mode.value == PDK_NET_ALLOWLIST);
	cr_assert_str_eq(ov->allow[0], "example.com:443");
	cr_assert(ov->ws_mode.set && ov->ws_mode.value == PDK_WS_RW);
	cr_assert_str_eq(ov->workspace, "/srv/x");
	cr_assert(ov->no_exec_trace);
	cr_assert_str_eq(sp.session.env[0], "A=b");
	cr_assert_str_eq(sp.session.label_session, "s1");
	cr_assert_str_eq(sp.run_dir, "/run/x");
	cr_assert_null(sp.state_dir);
	pdk__sv_spec_release(&sp);
	json_decref(j);
}

Test(session, spec_without_limits_overrides_nothing)
{
	json_t *j = spec_of("{\"id\":\"x\",\"policy_file\":\"/p.yaml\",\"profile\":\"default\"}");
	struct pdk_sv_spec sp;
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk__sv_spec_parse(j, &sp, &err), 0);
	cr_assert_str_eq(sp.session.profile, "/p.yaml", "policy_file wins");
	for (int i = 0; i < PDK_OVERRIDE_LIMITS; i++)
		cr_assert(!sp.session.overrides.limits[i].set, "limit %d", i);
	cr_assert(!sp.session.overrides.net_mode.set && !sp.session.overrides.ws_mode.set);
	cr_assert_eq(sp.cpu_time_ms, 0);
	cr_assert_eq(sp.commands, 0);
	pdk__sv_spec_release(&sp);
	json_decref(j);
}

Test(session, spec_text_where_a_number_belongs_is_refused_naming_the_field)
{
	_cleanup_free_ char *a = spec_fails("{\"overrides\":{\"limits\":{\"memory\":\"512M\"}}}");
	_cleanup_free_ char *b = spec_fails("{\"overrides\":{\"limits\":{\"wall\":\"30s\"}}}");
	_cleanup_free_ char *c = spec_fails("{\"overrides\":{\"limits\":{\"cpu\":\"1\"}}}");
	_cleanup_free_ char *d =
		spec_fails("{\"overrides\":{\"limits\":{\"cpu_time\":\"300ms\"}}}");
	_cleanup_free_ char *e = spec_fails("{\"overrides\":{\"limits\":{\"pids\":-1}}}");
	_cleanup_free_ char *f = spec_fails("{\"overrides\":{\"limits\":{\"commands\":1.5}}}");

	cr_assert_str_eq(a, "policy: invalid limits.memory: expected a number of bytes (the "
			    "spec holds numbers)");
	cr_assert(strstr(b, "policy: invalid limits.wall: expected a number of milliseconds") !=
			  NULL,
		  "%s", b);
	cr_assert(strstr(c, "policy: invalid limits.cpu") != NULL, "%s", c);
	cr_assert(strstr(d, "policy: invalid limits.cpu_time") != NULL, "%s", d);
	cr_assert(strstr(e, "policy: invalid limits.pids") != NULL, "%s", e);
	cr_assert(strstr(f, "policy: invalid limits.commands") != NULL, "%s", f);
}

Test(session, spec_budgets_and_shapes_are_checked)
{
	_cleanup_free_ char *a = spec_fails("{\"overrides\":{\"limits\":{\"cpu_time\":0}}}");
	_cleanup_free_ char *b = spec_fails("{\"overrides\":{\"limits\":{\"commands\":0}}}");
	_cleanup_free_ char *c = spec_fails("{\"overrides\":{\"limits\":{\"cpu\":2000}}}");
	_cleanup_free_ char *d = spec_fails("{\"env\":{\"A\":1}}");
	_cleanup_free_ char *e = spec_fails("{\"overrides\":{\"network\":{\"allow\":[1]}}}");
	_cleanup_free_ char *f = spec_fails("{\"workspace\":{\"path\":\"rel\"}}");
	_cleanup_free_ char *g = spec_fails("{\"overrides\":{\"network\":{\"mode\":\"open\"}}}");
	_cleanup_free_ char *h = spec_fails("{\"workspace\":{\"mode\":\"sideways\"}}");

	cr_assert(strstr(a, "policy: invalid limits.cpu_time (0 ms)") != NULL, "%s", a);
	cr_assert(strstr(b, "policy: invalid limits.commands (0)") != NULL, "%s", b);
	cr_assert(strstr(c, "policy: invalid limits.cpu (2000)") != NULL, "%s", c);
	cr_assert_str_eq(d, "spec: env 'A' is not a string");
	cr_assert_str_eq(e, "spec: network.allow[0] is not a string");
	cr_assert_str_eq(f, "spec: workspace.path must be absolute");
	cr_assert_str_eq(g, "policy: invalid overrides.network.mode 'open': expected none, "
			    "allowlist or host");
	cr_assert(strstr(h, "policy: invalid workspace.mode 'sideways'") != NULL, "%s", h);
}

Test(session, ids_are_uuid_text)
{
	cr_assert(pdk__sv_valid_id("0190a0b1-2c3d-7e4f-8a9b-0c1d2e3f4a5b"));
	cr_assert(!pdk__sv_valid_id("../../etc"));
	cr_assert(!pdk__sv_valid_id("0190A0B1-2C3D-7E4F-8A9B-0C1D2E3F4A5B"));
}

/* ---- the session ---- */

struct fixture {
	char dir[64];
	char *state;
	char *run;
	char *ws;
	struct pdk_settings st;
};

static void fixture_init(struct fixture *f)
{
	snprintf(f->dir, sizeof(f->dir), "/tmp/pdk-session-XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
	f->state = pdk_xasprintf("%s/state", f->dir);
	f->ws = pdk_xasprintf("%s/ws", f->dir);
	cr_assert_eq(mkdir(f->ws, 0700), 0);
	f->st = (struct pdk_settings){0};
	/* The runtime directory beside the workspace: no view may hold what is inside it. */
	f->run = pdk_xasprintf("%s/run", f->dir);
	f->st.paths.state_dir = f->state;
	f->st.paths.runtime_dir = f->run;
}

static void fixture_release(struct fixture *f)
{
	(void)!pdk_rm_rf_at(AT_FDCWD, f->dir);
	free(f->state);
	free(f->run);
	free(f->ws);
}

static struct pdk_session_opts opts_in(struct fixture *f)
{
	return (struct pdk_session_opts){
		.profile = "default", .overrides = {.workspace = f->ws}, .settings = &f->st};
}

/* Open and expect failure at `step`; returns the message (caller frees). */
static char *open_fails(const struct pdk_session_opts *o, enum pdk_session_step step)
{
	struct pdk_session_failure why;
	struct pdk_error *err = NULL;
	struct pdk_session *s = pdk_session_open(o, &why, &err);
	char *msg;

	cr_assert_null(s);
	cr_assert_eq(why.step, step, "step %d, not %d: %s", why.step, step, err->msg);
	pdk_policy_report_release(&why.report);
	msg = steal_ptr(&err->msg);
	pdk_error_free(&err);
	return msg;
}

Test(session, a_failed_step_is_named)
{
	struct fixture f;
	char *bad_env[] = {"1BAD=x", NULL};
	struct pdk_session_opts o;
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;

	fixture_init(&f);
	o = opts_in(&f);
	o.profile = "/nonexistent/paddock-profile.yaml";
	a = open_fails(&o, PDK_SESSION_PROFILE);
	o = opts_in(&f);
	o.overrides.limits[PDK_OVERRIDE_MEMORY] = (struct pdk_override){true, 1, "limits.memory"};
	b = open_fails(&o, PDK_SESSION_OVERRIDES);
	cr_assert(strstr(b, "invalid limits.memory (1 bytes)") != NULL, "%s", b);
	o = opts_in(&f);
	o.overrides.workspace = "/nonexistent-paddock-ws";
	c = open_fails(&o, PDK_SESSION_WORKSPACE);
	o = opts_in(&f);
	o.env = bad_env;
	o.env_name = "env";
	d = open_fails(&o, PDK_SESSION_ENV);
	cr_assert(strstr(d, "invalid env '1BAD=x'") != NULL, "%s", d);
	o = opts_in(&f);
	o.events_file = "/nonexistent-paddock-dir/events.jsonl";
	e = open_fails(&o, PDK_SESSION_EVENTS);
	cr_assert_str_eq(pdk_session_step_name(PDK_SESSION_PROFILE), "policy");
	cr_assert_str_eq(pdk_session_step_name(PDK_SESSION_OVERRIDES), "policy");
	cr_assert_str_eq(pdk_session_step_name(PDK_SESSION_ENV), "policy");
	cr_assert_str_eq(pdk_session_step_name(PDK_SESSION_WORKSPACE), "workspace");
	cr_assert_str_eq(pdk_session_step_name(PDK_SESSION_CHANGE_SET), "workspace");
	cr_assert_str_eq(pdk_session_step_name(PDK_SESSION_EVENTS), "events");
	cr_assert_str_eq(pdk_session_step_name(PDK_SESSION_SANDBOX), "sandbox");
	fixture_release(&f);
}

Test(session, a_profile_with_problems_hands_back_its_diagnostics)
{
	struct fixture f;
	struct pdk_session_opts o;
	struct pdk_session_failure why;
	struct pdk_error *err = NULL;
	_cleanup_free_ char *file = NULL;

	fixture_init(&f);
	file = pdk_xasprintf("%s/bad.yaml", f.dir);
	cr_assert_eq(pdk_write_file_at(AT_FDCWD, file, "limits:\n  memory: lots\n", true, &err), 0);
	o = opts_in(&f);
	o.profile = file;
	cr_assert_null(pdk_session_open(&o, &why, &err));
	cr_assert_eq(why.step, PDK_SESSION_PROFILE);
	cr_assert_gt(why.report.n, 0, "the report is the caller's to print");
	cr_assert_str_eq(why.report.diags[0].field, "limits.memory");
	pdk_policy_report_release(&why.report);
	pdk_error_free(&err);
	fixture_release(&f);
}

Test(session, open_resolves_policy_workspace_env_and_an_unrun_set_goes)
{
	struct fixture f;
	char *env[] = {"FOO=bar", NULL};
	struct pdk_session_opts o;
	struct pdk_session_result res;
	struct pdk_error *err = NULL;
	struct pdk_session *s;
	_cleanup_free_ char *set_dir = NULL;
	bool foo = false;

	fixture_init(&f);
	o = opts_in(&f);
	o.env = env;
	o.id = "0190a0b1-2c3d-7e4f-8a9b-0c1d2e3f4a5b";
	o.overrides.ws_mode = (struct pdk_override_ws_mode){true, PDK_WS_OVERLAY, NULL};
	o.overrides.limits[PDK_OVERRIDE_PIDS] = (struct pdk_override){true, 77, NULL};
	s = pdk_session_open(&o, NULL, &err);
	cr_assert_not_null(s, "%s", err ? err->msg : "");
	cr_assert_str_eq(pdk_session_id(s), o.id);
	cr_assert_eq(pdk_session_policy(s)->limits.pids, 77);
	cr_assert_str_eq(pdk_session_workspace(s), f.ws);
	for (char *const *e = pdk_session_env(s); *e != NULL; e++)
		foo |= strcmp(*e, "FOO=bar") == 0;
	cr_assert(foo);
	cr_assert_null(pdk_session_events(s), "no sink: no stream");
	cr_assert_null(pdk_session_sandbox(s));
	cr_assert_not_null(pdk_session_ws(s), "overlay: a change set");
	set_dir = pdk_xstrdup(pdk_ws_dir(pdk_session_ws(s)));
	cr_assert_eq(access(set_dir, F_OK), 0);
	cr_assert_eq(pdk_session_finish(s, &res, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(res.ws, PDK_SESSION_WS_REMOVED, "no sandbox ran: the new set goes");
	cr_assert_null(res.events_err);
	cr_assert_neq(access(set_dir, F_OK), 0);
	pdk_session_result_release(&res);
	pdk_session_free(s);
	fixture_release(&f);
}

Test(session, a_private_workspace_is_made_and_removed)
{
	struct fixture f;
	struct pdk_session_opts o;
	struct pdk_session_result res;
	struct pdk_error *err = NULL;
	struct pdk_session *s;
	_cleanup_free_ char *events = NULL, *priv = NULL;

	fixture_init(&f);
	o = opts_in(&f);
	o.overrides.workspace = NULL;
	o.private_workspace = true;
	o.id = "0190a0b1-2c3d-7e4f-8a9b-0c1d2e3f4a5b";
	events = pdk_xasprintf("%s/events.jsonl", f.dir);
	o.events_file = events;
	s = pdk_session_open(&o, NULL, &err);
	cr_assert_not_null(s, "%s", err ? err->msg : "");
	priv = pdk_xasprintf("%s/sandboxes/%s", f.state, o.id);
	cr_assert(strncmp(pdk_session_workspace(s), priv, strlen(priv)) == 0, "%s",
		  pdk_session_workspace(s));
	cr_assert(pdk_session_private_workspace(s));
	cr_assert_eq(pdk_session_policy(s)->workspace.mode, PDK_WS_OVERLAY);
	cr_assert_not_null(pdk_session_events(s));
	cr_assert_eq(pdk_session_finish(s, &res, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(res.ws, PDK_SESSION_WS_REMOVED);
	cr_assert_neq(access(priv, F_OK), 0, "the private workspace is gone");
	cr_assert_eq(access(events, F_OK), 0, "the events file stays");
	pdk_session_result_release(&res);
	pdk_session_free(s);
	fixture_release(&f);
}

Test(session, a_failed_open_leaves_no_change_set)
{
	struct fixture f;
	struct pdk_session_opts o;
	_cleanup_free_ char *m = NULL, *sets = NULL;
	_cleanup_free_ char *priv = NULL;

	fixture_init(&f);
	o = opts_in(&f);
	o.overrides.workspace = NULL;
	o.private_workspace = true;
	o.id = "0190a0b1-2c3d-7e4f-8a9b-0c1d2e3f4a5b";
	o.events_file = "/nonexistent-paddock-dir/events.jsonl";
	m = open_fails(&o, PDK_SESSION_EVENTS);
	priv = pdk_xasprintf("%s/sandboxes/%s", f.state, o.id);
	cr_assert_neq(access(priv, F_OK), 0, "the private workspace went with the failure");
	sets = pdk_xasprintf("%s/ws", f.state);
	cr_assert(access(sets, F_OK) != 0 || rmdir(sets) == 0, "no change set is left");
	fixture_release(&f);
}

/* The state and runtime directories: a workspace or bind inside one is refused, named. */
Test(session, a_view_inside_the_state_or_runtime_directory_is_refused)
{
	struct fixture f;
	struct pdk_session_opts o;
	_cleanup_free_ char *inside = NULL, *link = NULL, *msg = NULL, *want = NULL;
	char *ro[] = {NULL, NULL};

	fixture_init(&f);
	inside = pdk_xasprintf("%s/sb", f.run);
	cr_assert_eq(pdk_mkdir_p(inside, NULL), 0);
	o = opts_in(&f);
	o.overrides.workspace = inside;
	o.overrides.ws_mode = (struct pdk_override_ws_mode){true, PDK_WS_RO, NULL};
	msg = open_fails(&o, PDK_SESSION_WORKSPACE);
	want = pdk_xasprintf("workspace '%s' lies inside the runtime directory '%s'", inside,
			     f.run);
	cr_assert(strstr(msg, want) != NULL, "%s", msg);
	free(msg);
	free(want);
	/* Another name through a symlink is the same directory. */
	link = pdk_xasprintf("%s/link", f.dir);
	cr_assert_eq(symlink(f.state, link), 0);
	ro[0] = link;
	o = opts_in(&f);
	o.extra_ro = ro;
	msg = open_fails(&o, PDK_SESSION_WORKSPACE);
	want = pdk_xasprintf("--ro '%s' lies inside the state directory '%s'", link, f.state);
	cr_assert(strstr(msg, want) != NULL, "%s", msg);
	fixture_release(&f);
}

/* A workspace that holds the runtime directory is allowed; a missing one is made to be hidden. */
Test(session, a_workspace_holding_the_runtime_directory_is_allowed)
{
	struct fixture f;
	struct pdk_session_opts o;
	struct pdk_error *err = NULL;
	struct pdk_session *s;
	struct stat st;

	fixture_init(&f);
	o = opts_in(&f);
	o.overrides.workspace = f.dir;
	o.overrides.ws_mode = (struct pdk_override_ws_mode){true, PDK_WS_RO, NULL};
	s = pdk_session_open(&o, NULL, &err);
	cr_assert_not_null(s, "%s", err ? err->msg : "");
	cr_assert_eq(stat(f.run, &st), 0, "made, so that the engine can hide it");
	cr_assert_eq(st.st_mode & 0777, 0700);
	pdk_session_free(s);
	fixture_release(&f);
}
