/*
 * gw-upstream-drive.c - the gateway's upstream (src/gateway/upstream.c) on
 * its own, for the gateway-upstream suite: one stdio MCP server started in
 * a sandbox of a control object of this process, its tools listed, calls
 * made, then everything stopped.
 *
 *   gw-upstream-drive [OPTIONS] PROFILE SERVER-ID COMMAND...
 *     --paddock PATH         the paddock binary the supervisors run (required)
 *     --state DIR            the state directory (required)
 *     --run DIR              the runtime directory (required); the control
 *                            object's own directory is made under it
 *     --timeout-ms N         the server's timeout_ms (one call's limit)
 *     --start-timeout-ms N   the server's start_timeout_ms
 *     --cwd DIR              the server's working directory in its sandbox
 *     --progress TOKEN       the caller's progress token of each later call
 *     --call TOOL JSON       a tools/call, once the one before it answered
 *     --cancel TOOL JSON MS  a tools/call cancelled MS ms after it went
 *     --wait-tools N         after the calls, wait until the tools were
 *                            listed N times (a list_changed lists again)
 *
 * On stdout, one JSON line each: {"tools": [...]} at each listing,
 * {"call": TOOL, "result": {...}} or {"call": TOOL, "error": {"status":
 * "ETIMEDOUT", "message": "..."}}, {"progress": PARAMS},
 * {"cancelled": TOOL}, and {"sandbox": ID} once it runs. Exit 0, or 1 with
 * the upstream's failure message on stderr ("gw-upstream-drive: MESSAGE").
 * The supervisors get this process's environment (PADDOCK_INIT,
 * PADDOCK_CGROUP_PARENT...).
 */
#include "common.h"
#include "base.h"
#include "control.h"
#include "gateway-internal.h"

#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define STOP_WAIT_S 15
#define CALLS_MAX   32

struct drive_call {
	const char *tool;
	json_t *args;
	const json_t *token;
	uint64_t cancel_ms; /* 0: not cancelled */
};

struct drive {
	struct event_base *base;
	struct pdk_ctl *ctl;
	struct pdk_gw_up *up;
	struct pdk_gw_server server;
	struct drive_call calls[CALLS_MAX];
	size_t n_calls, next;
	unsigned lists, wait_tools;
	bool started, failed;
	struct pdk_gw_up_call *pending; /* the call to cancel */
	struct event *step, *cancel, *tick, *sig_chld;
	struct pdk_log log;
};

static void usage(void)
{
	fprintf(stderr, "usage: gw-upstream-drive --paddock PATH --state DIR --run DIR "
			"[--timeout-ms N] [--start-timeout-ms N] [--cwd DIR] [--progress TOKEN] "
			"[--call TOOL JSON]... [--cancel TOOL JSON MS] [--wait-tools N] "
			"PROFILE SERVER-ID COMMAND...\n");
	exit(2);
}

static void print_line(json_t *o)
{
	char *s = pdk_json_dump_line(o);

	fputs(s, stdout);
	fflush(stdout);
	free(s);
	json_decref(o);
}

static void finish(struct drive *d)
{
	event_base_loopbreak(d->base);
}

static void next_soon(struct drive *d)
{
	event_active(d->step, 0, 0);
}

/* ---- the upstream's callbacks ---- */

static void on_tools(void *ctx, struct pdk_gw_up *u, const json_t *tools)
{
	struct drive *d = ctx;

	if (!d->started) {
		d->started = true;
		print_line(json_pack("{s:s}", "sandbox", pdk__gw_up_sandbox(u)));
	}
	print_line(json_pack("{s:O}", "tools", (json_t *)tools));
	d->lists++;
	if (d->lists == 1 || d->next >= d->n_calls)
		next_soon(d);
}

static void on_failed(void *ctx, struct pdk_gw_up *u, const struct pdk_error *err)
{
	struct drive *d = ctx;

	(void)u;
	fprintf(stderr, "gw-upstream-drive: %s\n", err->msg);
	d->failed = true;
	finish(d);
}

static void print_result(const struct drive_call *c, const json_t *result,
			 const struct pdk_error *err)
{
	if (err != NULL)
		print_line(
			json_pack("{s:s, s:{s:s, s:s}}", "call", c->tool, "error", "status",
				  strerrorname_np(err->status) ? strerrorname_np(err->status) : "?",
				  "message", err->msg));
	else
		print_line(json_pack("{s:s, s:O}", "call", c->tool, "result", (json_t *)result));
}

static void on_progress(void *ctx, const json_t *params)
{
	(void)ctx;
	print_line(json_pack("{s:O}", "progress", (json_t *)params));
}

/* ---- the steps ---- */

/* The answer to the call in flight (one at a time). */
static void call_done(void *ctx, const json_t *result, const struct pdk_error *err)
{
	struct drive *d = ctx;

	print_result(&d->calls[d->next - 1], result, err);
	if (d->pending != NULL && err == NULL)
		event_del(d->cancel);
	d->pending = NULL;
	if (err == NULL || err->status != ENOTCONN)
		next_soon(d);
}

static void on_cancel(evutil_socket_t fd, short what, void *arg)
{
	struct drive *d = arg;

	(void)fd;
	(void)what;
	if (d->pending == NULL)
		return;
	pdk__gw_up_cancel(d->pending);
	d->pending = NULL;
	print_line(json_pack("{s:s}", "cancelled", d->calls[d->next - 1].tool));
	next_soon(d);
}

static void on_step(evutil_socket_t fd, short what, void *arg)
{
	struct drive *d = arg;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct drive_call *c;

	(void)fd;
	(void)what;
	if (d->failed)
		return;
	if (d->next >= d->n_calls) {
		if (d->lists >= d->wait_tools)
			finish(d);
		return;
	}
	c = &d->calls[d->next++];
	if (pdk__gw_up_call(d->up, c->tool, c->args, c->token, call_done, on_progress, d,
			    &d->pending, &err) < 0) {
		d->pending = NULL;
		call_done(d, NULL, err);
		return;
	}
	if (c->cancel_ms > 0) {
		struct timeval tv = {.tv_sec = (time_t)(c->cancel_ms / 1000),
				     .tv_usec = (suseconds_t)(c->cancel_ms % 1000) * 1000};

		(void)evtimer_add(d->cancel, &tv);
	} else {
		d->pending = NULL;
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pdk_ctl_tick(((struct drive *)arg)->ctl);
}

static void on_child(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	(void)arg;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void log_line(void *data, enum pdk_log_level level, const char *msg)
{
	(void)data;
	fprintf(stderr, "gw-upstream-drive: log %d: %s\n", (int)level, msg);
}

/* ---- arguments ---- */

struct drive_opts {
	const char *paddock, *state, *run;
	json_t *token;
	char **rest;
};

static json_t *parse_json(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, 0, &e);

	if (!json_is_object(v)) {
		fprintf(stderr, "gw-upstream-drive: not a JSON object: %s\n", text);
		exit(2);
	}
	return v;
}

static void add_call(struct drive *d, struct drive_opts *o, const char *tool, const char *args,
		     uint64_t cancel_ms)
{
	if (d->n_calls >= CALLS_MAX)
		usage();
	d->calls[d->n_calls++] = (struct drive_call){
		.tool = tool, .args = parse_json(args), .token = o->token, .cancel_ms = cancel_ms};
}

static uint64_t num(const char *s)
{
	char *end = NULL;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s || *end != '\0')
		usage();
	return v;
}

static void parse(int argc, char **argv, struct drive *d, struct drive_opts *o)
{
	int i = 1;

	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		const char *a = argv[i];

		if (i + 1 >= argc)
			usage();
		if (strcmp(a, "--paddock") == 0)
			o->paddock = argv[++i];
		else if (strcmp(a, "--state") == 0)
			o->state = argv[++i];
		else if (strcmp(a, "--run") == 0)
			o->run = argv[++i];
		else if (strcmp(a, "--timeout-ms") == 0)
			d->server.timeout_ms = num(argv[++i]);
		else if (strcmp(a, "--start-timeout-ms") == 0)
			d->server.start_timeout_ms = num(argv[++i]);
		else if (strcmp(a, "--cwd") == 0)
			d->server.cwd = argv[++i];
		else if (strcmp(a, "--progress") == 0)
			o->token = json_string(argv[++i]);
		else if (strcmp(a, "--wait-tools") == 0)
			d->wait_tools = (unsigned)num(argv[++i]);
		else if (strcmp(a, "--call") == 0 && i + 2 < argc)
			add_call(d, o, argv[i + 1], argv[i + 2], 0), i += 2;
		else if (strcmp(a, "--cancel") == 0 && i + 3 < argc)
			add_call(d, o, argv[i + 1], argv[i + 2], num(argv[i + 3])), i += 3;
		else
			usage();
	}
	if (o->paddock == NULL || o->state == NULL || o->run == NULL || argc - i < 3)
		usage();
	o->rest = argv + i;
}

/* ---- main ---- */

static struct event *add_event(struct drive *d, int sig, event_callback_fn fn)
{
	struct event *ev = sig >= 0 ? evsignal_new(d->base, sig, fn, d)
				    : event_new(d->base, -1, EV_PERSIST, fn, d);

	if (ev == NULL || event_add(ev, sig >= 0 ? NULL : &(struct timeval){1, 0}) < 0)
		pdk_oom();
	return ev;
}

static int run(struct drive *d, struct drive_opts *o, const char *own_dir)
{
	static const struct pdk_gw_up_cbs cbs = {.tools = on_tools, .failed = on_failed};
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_ctl_new(&(struct pdk_ctl_opts){.base = d->base,
					       .state_dir = o->state,
					       .run_dir = o->run,
					       .own_dir = own_dir,
					       .envp = environ,
					       .supervisor_exe = o->paddock,
					       .log = &d->log,
					       .actor = "gw-upstream-drive"},
			&d->ctl, &err) < 0) {
		fprintf(stderr, "gw-upstream-drive: %s\n", err->msg);
		return 1;
	}
	pdk_ctl_start(d->ctl);
	d->server.id = o->rest[1];
	d->server.command = o->rest + 2;
	if (pdk__gw_up_start(d->ctl, d->base, &d->server, o->rest[0], NULL, &cbs, d, &d->up, &err) <
	    0) {
		fprintf(stderr, "gw-upstream-drive: %s\n", err->msg);
		return 1;
	}
	pdk__gw_up_set_log(d->up, &d->log);
	(void)event_base_dispatch(d->base);
	return d->failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct drive d = {.log = {.fn = log_line}};
	struct drive_opts o = {0};
	_cleanup_free_ char *own_dir = NULL;
	int rc;

	pdk_json_seed();
	parse(argc, argv, &d, &o);
	own_dir = pdk_xasprintf("%s/gw-drive-%d", o.run, (int)getpid());
	(void)signal(SIGPIPE, SIG_IGN);
	d.base = event_base_new();
	if (d.base == NULL)
		return 1;
	d.step = event_new(d.base, -1, 0, on_step, &d);
	d.cancel = evtimer_new(d.base, on_cancel, &d);
	d.tick = add_event(&d, -1, on_tick);
	d.sig_chld = add_event(&d, SIGCHLD, on_child);
	rc = run(&d, &o, own_dir);
	/* The upstream goes first (its command killed, its sandbox destroyed), then the rest. */
	pdk__gw_up_free(d.up);
	if (d.ctl != NULL)
		pdk_ctl_shutdown(d.ctl, true, STOP_WAIT_S);
	pdk_ctl_free(d.ctl);
	event_free(d.step);
	event_free(d.cancel);
	event_free(d.tick);
	event_free(d.sig_chld);
	event_base_free(d.base);
	(void)!pdk_rm_rf_at(AT_FDCWD, own_dir);
	for (size_t i = 0; i < d.n_calls; i++)
		json_decref(d.calls[i].args);
	json_decref(o.token);
	return rc;
}
