/*
 * route-exec.c - POST /v1/sandboxes/{id}/exec: a command answered at its
 * end (one JSON object with the capped output), or streamed as SSE (start,
 * stdout and stderr chunks, exit) while it runs.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"

#include <string.h>

/* One command's request, from the route until the command's end. */
struct exec_call {
	struct pdk_api *a;
	struct evhttp_request *req;
	struct pdk_ctl_exec *x;
	struct pdk_http_stream stream;
	bool watch; /* stdin stays open: a client that only listens must still be noticed */
};

static void sync_done(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err)
{
	struct exec_call *e = ctx;
	json_t *o;

	if (err != NULL) {
		pdk_api_error(e->req, err);
	} else {
		o = pdk__api_exit_json(&r->exit);
		pdk_json_set(o, "stdout", pdk__api_output_json(&r->out));
		pdk_json_set(o, "stderr", pdk__api_output_json(&r->err));
		pdk_http_json(e->req, 200, o);
	}
	free(e);
}

/* The SSE client went away: its command loses stdin; a pty session its terminal (SIGHUP). */
static void stream_gone(void *arg)
{
	struct exec_call *e = arg;

	pdk_ctl_exec_close(e->x);
}

static void stream_started(void *ctx, uint64_t exec_id, int pid, bool pty)
{
	struct exec_call *e = ctx;

	pdk_http_stream_start(&e->stream, e->req);
	e->stream.on_close = stream_gone;
	e->stream.on_close_arg = e;
	if (e->watch)
		pdk_http_stream_watch(&e->stream, e->a->base);
	pdk_http_stream_send(&e->stream, NULL, "start",
			     json_pack("{s:I, s:o, s:b}", "exec_id", (json_int_t)exec_id, "pid",
				       pid > 0 ? json_integer(pid) : json_null(), "pty", pty));
}

static void stream_output(void *ctx, int stream, const char *data, size_t len)
{
	struct exec_call *e = ctx;

	pdk_http_stream_send(&e->stream, NULL, stream == 1 ? "stdout" : "stderr",
			     pdk__api_chunk_json(data, len));
}

static void stream_done(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err)
{
	struct exec_call *e = ctx;
	json_t *o;

	if (err != NULL) {
		/* It never started: no stream was opened, the answer is the error. */
		pdk_api_error(e->req, err);
		free(e);
		return;
	}
	o = pdk__api_exit_json(&r->exit);
	pdk_json_set(o, "stdout_bytes", json_integer((json_int_t)r->out.total));
	pdk_json_set(o, "stderr_bytes", json_integer((json_int_t)r->err.total));
	pdk_http_stream_send(&e->stream, NULL, "exit", o);
	pdk_http_stream_end(&e->stream);
	free(e);
}

static const struct pdk_ctl_exec_cbs sync_cbs = {.done = sync_done};
static const struct pdk_ctl_exec_cbs stream_cbs = {
	.started = stream_started, .output = stream_output, .done = stream_done};

static void exec_req_of(const struct pdk_req_exec *er, struct pdk_ctl_exec_req *out)
{
	*out = (struct pdk_ctl_exec_req){.argv = er->argv,
					 .env = er->env,
					 .cwd = er->cwd,
					 .stdin_data = er->stdin_data,
					 .stdin_len = er->stdin_len,
					 .timeout_ms = er->timeout_ms,
					 .output_cap = er->output_cap,
					 .pty = er->pty,
					 .stdin_open = er->stdin_open,
					 .cols = er->cols,
					 .rows = er->rows};
}

static bool wants_stream(struct pdk_route *r, const struct pdk_req_exec *er)
{
	const char *accept = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Accept");

	return er->stream || (accept != NULL && strstr(accept, "text/event-stream") != NULL);
}

static void start(struct pdk_route *r, struct pdk_ctl_sb *sb, const struct pdk_req_exec *er,
		  bool stream)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct exec_call *e = pdk_xcalloc(1, sizeof(*e));
	struct pdk_ctl_exec_req x;

	e->a = r->a;
	e->req = r->req;
	e->stream.dead = true; /* until the command starts */
	e->watch = er->stdin_open || er->pty;
	exec_req_of(er, &x);
	if (pdk_ctl_exec(sb, &x, stream, stream ? &stream_cbs : &sync_cbs, e, &e->x, &err) < 0) {
		pdk_api_error(r->req, err);
		free(e);
	}
}

void pdk__route_exec(struct pdk_route *r, struct pdk_ctl_sb *sb)
{
	struct pdk_req_exec er;
	struct pdk_req_error e = {0};
	bool stream;

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_exec(r->body, r->body_len, &er, &e), &e))
		return;
	stream = wants_stream(r, &er);
	if ((er.pty || er.stdin_open) && !stream)
		pdk_http_error(r->req, 400, "bad_request", er.pty ? "pty" : "stdin_open",
			       "'%s' needs a streamed answer: give \"stream\": true or "
			       "Accept: text/event-stream",
			       er.pty ? "pty" : "stdin_open");
	else
		start(r, sb, &er, stream);
	pdk_req_exec_release(&er);
}
