/*
 * route-events.c - GET /v1/events: the audit store's records as SSE (`id:`
 * the audit sequence, `event:` the kind, `data:` the event), a replay from
 * `since` (or the Last-Event-ID header of a reconnecting EventSource; or of
 * the last `tail` records) first; keepalives for idle
 * streams. With follow=0 the answer ends after the replay.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"

#include <stdio.h>
#include <string.h>

struct pdk_api_sse {
	struct pdk_api_sse *next;
	struct pdk_http_stream s;
	struct pdk_ctl_sub *sub;
};

static void record(void *ctx, uint64_t seq, const char *kind, json_t *event)
{
	struct pdk_api_sse *e = ctx;
	char id[24];

	(void)snprintf(id, sizeof(id), "%llu", (unsigned long long)seq);
	pdk_http_stream_send(&e->s, id, kind, json_incref(event));
}

/* The client went away: no more records; the stream is freed at the next reap. */
static void gone(void *arg)
{
	struct pdk_api_sse *e = arg;

	pdk_ctl_unsubscribe(e->sub);
	e->sub = NULL;
}

static void sse_free(struct pdk_api_sse *e)
{
	pdk_ctl_unsubscribe(e->sub);
	pdk_http_stream_end(&e->s);
	free(e);
}

static void reap_dead(struct pdk_api *a)
{
	for (struct pdk_api_sse **p = &a->subscribers; *p != NULL;) {
		struct pdk_api_sse *e = *p;

		if (e->s.dead) {
			*p = e->next;
			sse_free(e);
		} else {
			p = &e->next;
		}
	}
}

/* ?follow=0|1 (default 1) into *follow; false after a 400 answer. */
static bool parse_follow(struct pdk_route *r, bool *follow)
{
	const char *v = pdk__route_query(r, "follow");

	*follow = v == NULL || strcmp(v, "1") == 0;
	if (v == NULL || *follow || strcmp(v, "0") == 0)
		return true;
	pdk_http_error(r->req, 400, "bad_request", "follow", "'follow' must be 0 or 1");
	return false;
}

/* The most records a tail replays (?tail=N). */
#define TAIL_MAX 100000

/* ?tail=N (1..TAIL_MAX) and ?decision=VALUE into *f; false after a 400 answer. */
static bool parse_tail(struct pdk_route *r, struct pdk_ctl_sub_filter *f)
{
	const char *tail = pdk__route_query(r, "tail"), *decision = pdk__route_query(r, "decision");

	if (tail != NULL && (pdk_parse_u64(tail, TAIL_MAX, &f->tail) < 0 || f->tail == 0)) {
		pdk_http_error(r->req, 400, "bad_request", "tail",
			       "'tail' must be a number of records from 1 to %d", TAIL_MAX);
		return false;
	}
	if (decision != NULL && (decision[0] == '\0' || strlen(decision) > 64)) {
		pdk_http_error(r->req, 400, "bad_request", "decision",
			       "'decision' must be a decision such as 'allow' or 'deny' (1 to 64 "
			       "bytes)");
		return false;
	}
	f->decision = decision;
	return true;
}

static size_t backlog(void *ctx)
{
	return pdk_http_stream_backlog(&((struct pdk_api_sse *)ctx)->s);
}

/* follow=0: the replay is over, so is the answer (the stream is freed at the next reap). */
static void replayed(void *ctx)
{
	struct pdk_api_sse *e = ctx;

	pdk_ctl_unsubscribe(e->sub);
	e->sub = NULL;
	pdk_http_stream_end(&e->s);
}

void pdk__route_events(struct pdk_route *r)
{
	const char *since = pdk__route_query(r, "since"), *sandbox = pdk__route_query(r, "sandbox");
	/*
	 * What an EventSource sends when it reconnects: the id of the last event
	 * it got, which is an audit sequence number here. `since` wins.
	 */
	const char *last_id =
		evhttp_find_header(evhttp_request_get_input_headers(r->req), "Last-Event-ID");
	struct pdk_ctl_sub_filter f = {.sandbox = sandbox,
				       .session = pdk__route_query(r, "session"),
				       .kind = pdk__route_query(r, "kind"),
				       .since = UINT64_MAX};
	struct pdk_api_sse *e;
	bool follow;

	if (!r->auth.admin &&
	    (sandbox == NULL || !pdk__api_allowed(r, sandbox, PDK_TOKEN_OP_READ))) {
		if (sandbox == NULL)
			pdk__api_auth_failed(r, 403, "a sandbox token reads only its own events");
		return;
	}
	if (since != NULL && pdk_parse_u64(since, UINT64_MAX - 1, &f.since) < 0) {
		pdk_http_error(r->req, 400, "bad_request", "since",
			       "'since' must be an audit sequence number");
		return;
	}
	if (since == NULL && last_id != NULL &&
	    pdk_parse_u64(last_id, UINT64_MAX - 1, &f.since) < 0) {
		pdk_http_error(
			r->req, 400, "bad_request", "Last-Event-ID",
			"the Last-Event-ID header must be an audit sequence number, the id of "
			"an event of this stream");
		return;
	}
	if (!parse_follow(r, &follow) || !parse_tail(r, &f))
		return;
	reap_dead(r->a);
	e = pdk_xcalloc(1, sizeof(*e));
	pdk_http_stream_start(&e->s, r->req);
	if (!follow && f.since == UINT64_MAX && f.tail == 0) {
		sse_free(e); /* nothing to replay, nothing to follow */
		return;
	}
	e->s.on_close = gone;
	e->s.on_close_arg = e;
	e->next = r->a->subscribers;
	r->a->subscribers = e;
	/*
	 * SECURITY: the replay goes in pages, at the client's pace: a replay of
	 * a million records (a sandbox's token may ask for its own) never holds
	 * the daemon's loop, nor its memory, for more than a page.
	 */
	e->sub = pdk_ctl_subscribe_paced(
		r->a->ctl, &f, record, e,
		&(struct pdk_ctl_sub_pace){.backlog = backlog,
					   .replayed = follow ? NULL : replayed});
}

void pdk__sse_keepalive(struct pdk_api *a)
{
	for (struct pdk_api_sse *e = a->subscribers; e != NULL; e = e->next)
		pdk_http_stream_comment(&e->s, "keepalive");
	reap_dead(a);
}

void pdk__sse_close_all(struct pdk_api *a)
{
	while (a->subscribers != NULL) {
		struct pdk_api_sse *e = a->subscribers;

		a->subscribers = e->next;
		sse_free(e);
	}
}
