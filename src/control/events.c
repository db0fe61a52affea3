/*
 * ingest.c - the daemon's events: its own (sandbox.create, kill, auth
 * failures...) appended to the audit store, and the fan-out of every new
 * audit record to the GET /v1/events subscribers (SSE).
 *
 * The audit store is the one source of the stream: a record reaches
 * subscribers only once it is stored, with its audit sequence number as
 * the SSE id, so `since` replays and live events never disagree.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "daemon-internal.h"
#include "telemetry.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

struct pdk_sse {
	struct pdk_sse *next;
	struct pdk_stream s;
	char *sandbox, *session, *kind;
};

/* ---- streams ---- */

static void stream_closed(struct evhttp_connection *evcon, void *arg)
{
	struct pdk_stream *s = arg;

	(void)evcon;
	s->dead = true;
	/*
	 * On a clean EOF libevent has detached the request (it is ours to free);
	 * on a write error it frees the request with the connection itself.
	 */
	if (s->req != NULL && evhttp_request_get_connection(s->req) == NULL)
		evhttp_request_free(s->req);
	s->req = NULL;
	if (s->on_close != NULL)
		s->on_close(s->on_close_arg);
}

void pdk__stream_start(struct pdk_stream *s, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	s->req = req;
	s->dead = false;
	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_send_reply_start(req, 200, "OK");
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, s);
}

void pdk__stream_send(struct pdk_stream *s, const char *id, const char *event, json_t *data)
{
	_cleanup_json_ json_t *d = data;
	_cleanup_free_ char *text = NULL;
	struct evbuffer *buf;

	if (s->dead || s->req == NULL)
		return;
	text = json_dumps(d, JSON_COMPACT);
	buf = evbuffer_new();
	if (buf == NULL || text == NULL)
		pdk_oom();
	if (id != NULL)
		evbuffer_add_printf(buf, "id: %s\n", id);
	evbuffer_add_printf(buf, "event: %s\ndata: %s\n\n", event, text);
	evhttp_send_reply_chunk(s->req, buf);
	evbuffer_free(buf);
}

void pdk__stream_end(struct pdk_stream *s)
{
	struct evhttp_connection *c;

	if (s->dead || s->req == NULL)
		return;
	c = evhttp_request_get_connection(s->req);
	if (c != NULL)
		evhttp_connection_set_closecb(c, NULL, NULL);
	evhttp_send_reply_end(s->req);
	s->req = NULL;
	s->dead = true;
}

/* ---- the daemon's own events ---- */

void pdk__daemon_event(struct pdk_daemon *d, const char *sandbox, json_t *labels, const char *kind,
		       json_t *attrs)
{
	_cleanup_json_ json_t *e = json_object();
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *session = json_object_get(labels, "session");
	json_t *workflow = json_object_get(labels, "workflow");
	char ts[40];

	if (attrs == NULL)
		attrs = json_object();
	if (json_object_size(labels) > 0)
		json_object_set(attrs, "labels", labels);
	pdk_events_format_ts(pdk_now_real_ns(), ts, sizeof(ts));
	pdk_json_set(e, "ts", json_string(ts));
	pdk_json_set(e, "seq", json_integer((json_int_t)d->event_seq++));
	pdk_json_set(e, "sandbox", json_string(sandbox));
	pdk_json_set(e, "session", json_is_string(session) ? json_incref(session) : json_null());
	pdk_json_set(e, "workflow", json_is_string(workflow) ? json_incref(workflow) : json_null());
	pdk_json_set(e, "actor", json_string("paddock-serve"));
	pdk_json_set(e, "kind", json_string(kind));
	pdk_json_set(e, "attrs", attrs);
	if (pdk_audit_append(d->audit, &e, 1, false, &err) < 0) {
		/* Fail loudly: the audit trail is the record of what the daemon did. */
		fprintf(stderr, "paddock serve: audit: %s\n", err->msg);
		return;
	}
	pdk__daemon_fanout(d);
}

/* ---- subscribers ---- */

static bool sse_match(const struct pdk_sse *s, const struct pdk_audit_row *row)
{
	if (s->sandbox != NULL && strcmp(s->sandbox, row->sandbox) != 0)
		return false;
	if (s->kind != NULL && strcmp(s->kind, row->kind) != 0)
		return false;
	if (s->session != NULL && (row->session == NULL || strcmp(s->session, row->session) != 0))
		return false;
	return true;
}

static void sse_row(struct pdk_sse *s, const struct pdk_audit_row *row)
{
	json_t *j = json_loadb(row->line, row->line_len, 0, NULL);
	char id[24];

	if (j == NULL)
		return;
	(void)snprintf(id, sizeof(id), "%llu", (unsigned long long)row->seq);
	pdk__stream_send(&s->s, id, row->kind, j);
}

struct fan {
	struct pdk_daemon *d;
	struct pdk_sse *only; /* a replay: this subscriber, up to d->fanout_seq */
};

static int fan_row(void *data, const struct pdk_audit_row *row)
{
	struct fan *f = data;

	if (f->only != NULL) {
		if (row->seq > f->d->fanout_seq)
			return 1;
		if (sse_match(f->only, row))
			sse_row(f->only, row);
		return 0;
	}
	for (struct pdk_sse *s = f->d->subscribers; s != NULL; s = s->next)
		if (!s->s.dead && sse_match(s, row))
			sse_row(s, row);
	f->d->fanout_seq = row->seq;
	return 0;
}

static void sse_free(struct pdk_sse *s)
{
	pdk__stream_end(&s->s);
	free(s->sandbox);
	free(s->session);
	free(s->kind);
	free(s);
}

static void reap_dead(struct pdk_daemon *d)
{
	for (struct pdk_sse **p = &d->subscribers; *p != NULL;) {
		struct pdk_sse *s = *p;

		if (s->s.dead) {
			*p = s->next;
			sse_free(s);
		} else {
			p = &s->next;
		}
	}
}

void pdk__daemon_fanout(struct pdk_daemon *d)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_audit_filter f = {.after_seq = d->fanout_seq};
	struct fan fan = {.d = d};

	reap_dead(d);
	/*
	 * Nobody listens: nothing to read (this runs after every append, two
	 * or three times per exec). d->fanout_seq is brought to the head when
	 * the first subscriber comes (pdk__sse_subscribe).
	 */
	if (d->subscribers == NULL)
		return;
	if (pdk_audit_query(d->audit, &f, fan_row, &fan, &err) < 0 && !d->quiet)
		fprintf(stderr, "paddock serve: events: %s\n", err->msg);
}

/* d->fanout_seq = the audit store's head (no subscriber: nothing is sent). */
static void fanout_head(struct pdk_daemon *d)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_audit_filter f = {.after_seq = 0, .last = 1};
	struct fan fan = {.d = d};

	if (pdk_audit_query(d->audit, &f, fan_row, &fan, &err) < 0 && !d->quiet)
		fprintf(stderr, "paddock serve: events: %s\n", err->msg);
}

void pdk__sse_subscribe(struct pdk_daemon *d, struct evhttp_request *req, const char *sandbox,
			const char *session, const char *kind, uint64_t since)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_sse *s = pdk_xcalloc(1, sizeof(*s));
	struct pdk_audit_filter f = {.sandbox = sandbox, .kind = kind, .after_seq = since};
	struct fan fan = {.d = d, .only = s};

	s->sandbox = sandbox ? pdk_xstrdup(sandbox) : NULL;
	s->session = session ? pdk_xstrdup(session) : NULL;
	s->kind = kind ? pdk_xstrdup(kind) : NULL;
	/* d->fanout_seq is the head: the replay stops there. */
	reap_dead(d);
	if (d->subscribers == NULL)
		fanout_head(d);
	else
		pdk__daemon_fanout(d);
	pdk__stream_start(&s->s, req);
	if (since != UINT64_MAX && pdk_audit_query(d->audit, &f, fan_row, &fan, &err) < 0 &&
	    !d->quiet)
		fprintf(stderr, "paddock serve: events replay: %s\n", err->msg);
	s->next = d->subscribers;
	d->subscribers = s;
}

void pdk__sse_close_all(struct pdk_daemon *d)
{
	while (d->subscribers != NULL) {
		struct pdk_sse *s = d->subscribers;

		d->subscribers = s->next;
		sse_free(s);
	}
}

/* Keep idle streams alive through proxies, and find clients that went away. */
void pdk__sse_keepalive(struct pdk_daemon *d);
void pdk__sse_keepalive(struct pdk_daemon *d)
{
	for (struct pdk_sse *s = d->subscribers; s != NULL; s = s->next) {
		struct evbuffer *buf;

		if (s->s.dead || s->s.req == NULL)
			continue;
		buf = evbuffer_new();
		if (buf == NULL)
			pdk_oom();
		evbuffer_add_printf(buf, ": keepalive\n\n");
		evhttp_send_reply_chunk(s->s.req, buf);
		evbuffer_free(buf);
	}
	reap_dead(d);
}
