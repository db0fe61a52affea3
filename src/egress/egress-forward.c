/*
 * egress-forward.c - plain HTTP: the rebuilt head and the held body go up,
 * the rest of the body follows as it comes (scanned for placeholders), and
 * one response comes back, parsed only to find its end. Then the client's
 * next request, over the same upstream connection when both sides keep it
 * (docs/internals/egress.md "Upstream keep-alive"); a kept connection that
 * the server closed as it was reused is tried once more on a fresh one.
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

/* An idle kept upstream connection that speaks or ends is not used again. */
static void idle_up_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	pdk__egress_close_up(arg);
}

static void idle_up_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	pdk__egress_close_up(arg);
}

/*
 * After a whole response: may the upstream connection carry the client's
 * next request? Both sides must allow it, the request must have gone up
 * whole, and the server must have sent nothing beyond its response.
 */
static bool keep_up(const struct pdk__egress_conn *c)
{
	return c->up != NULL && c->head.upstream_keep_alive && c->head.msg_done &&
	       c->resp.keep_alive && !c->close_after &&
	       evbuffer_get_length(bufferevent_get_input(c->up)) == 0 &&
	       evbuffer_get_length(bufferevent_get_output(c->up)) == 0;
}

static void next_request(struct pdk__egress_conn *c)
{
	struct timeval head = {PDK__EGRESS_HEAD_TIMEOUT_S, 0};

	if (keep_up(c)) {
		free(c->up_host);
		c->up_host = pdk_xstrdup(c->head.host);
		c->up_port = c->head.port;
		memcpy(c->up_addr, c->addr, sizeof(c->up_addr));
		bufferevent_setcb(c->up, idle_up_read, NULL, idle_up_event, c);
		bufferevent_set_timeouts(c->up, &head, NULL);
		bufferevent_enable(c->up, EV_READ);
	} else {
		pdk__egress_close_up(c);
	}
	pdk__egress_head_release(&c->head);
	free(steal_ptr(&c->replay));
	pdk__egress_buf_drain(c->held, evbuffer_get_length(c->held));
	pdk__egress_unhold(c);
	c->state = PDK__EGRESS_ST_HEAD;
	c->rule = NULL;
	c->addr[0] = '\0';
	c->sent = c->received = 0;
	c->answered = c->event_done = c->reused = c->retried = false;
	bufferevent_setcb(c->client, pdk__egress_client_read, NULL, pdk__egress_client_event, c);
	bufferevent_set_timeouts(c->client, &head, NULL);
	bufferevent_enable(c->client, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0)
		pdk__egress_client_read(c->client, c);
}

static void response_done(struct pdk__egress_conn *c)
{
	/* SECURITY: a request that could not be recorded is the connection's last. */
	bool recorded = pdk__egress_emit_connect(c, true, (int)c->resp.p.status_code, NULL);

	/* Inside an intercepted tunnel too: the next request reuses both TLS connections. */
	if (!recorded || c->close_after || !c->resp.keep_alive || !c->head.keep_alive) {
		pdk__egress_finish(c);
		return;
	}
	next_request(c);
}

/* A malformed or cut-off upstream answer: 502 if nothing reached the client yet. */
static void upstream_failed(struct pdk__egress_conn *c, const char *reason)
{
	if (!c->answered) {
		pdk__egress_answer(c, true, 502, reason);
		return;
	}
	(void)pdk__egress_emit_connect(c, true, (int)c->resp.p.status_code, reason);
	pdk__egress_finish(c); /* it ends either way */
}

static void forward_read(struct bufferevent *bev, void *arg)
{
	struct pdk__egress_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	/* One contiguous chunk at a time: no copy of a large response. */
	while (evbuffer_get_length(in) > 0 && !c->resp.done) {
		size_t len = evbuffer_get_contiguous_space(in);
		ssize_t n = pdk__egress_resp_feed(&c->resp, pdk__egress_buf_pullup(in, len), len);

		if (n < 0) {
			upstream_failed(c, "the upstream server sent a malformed response");
			return;
		}
		if (!pdk__egress_account(c, (size_t)n, false)) {
			upstream_failed(c, "the egress byte budget was spent");
			return;
		}
		c->answered = c->answered || n > 0;
		pdk__egress_buf_move(bufferevent_get_output(c->client), in, (size_t)n);
		if ((size_t)n < len)
			break; /* the response ended inside this chunk */
	}
	if (!c->resp.done &&
	    evbuffer_get_length(bufferevent_get_output(c->client)) >= PDK__EGRESS_FORWARD_HIGH)
		bufferevent_disable(bev, EV_READ);
	if (c->resp.done)
		response_done(c);
}

static void forward_event(struct bufferevent *bev, short what, void *arg)
{
	struct pdk__egress_conn *c = arg;

	if (bev == c->client) {
		/* The client went away: nothing more to do for it (recorded or not). */
		(void)pdk__egress_emit_connect(c, true, (int)c->resp.p.status_code,
					       "the client closed the connection");
		pdk__egress_conn_free(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		upstream_failed(c, "the upstream server did not answer in time");
		return;
	}
	/* A kept connection the server closed as it was reused: once more on a fresh one. */
	if (c->replay != NULL && c->received == 0 && !c->answered) {
		pdk__egress_retry(c);
		return;
	}
	/* EOF (or error): a response delimited by the end of the connection ends here. */
	if (pdk__egress_resp_feed(&c->resp, NULL, 0) >= 0 && c->resp.done) {
		c->close_after = true;
		response_done(c);
		return;
	}
	upstream_failed(c, "the upstream server closed the connection before a whole response");
}

/* Request body bytes from the client go up as they are; anything after the request waits. */
static void forward_body(struct pdk__egress_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->client);

	while (evbuffer_get_length(in) > 0) {
		size_t len = evbuffer_get_contiguous_space(in);
		ssize_t n;

		if (c->head.msg_done) {
			/*
			 * SECURITY: one request in flight. A pipelined one is not read;
			 * the connection closes after this response.
			 */
			c->close_after = true;
			bufferevent_disable(c->client, EV_READ);
			return;
		}
		n = pdk__egress_body_feed(&c->head, pdk__egress_buf_pullup(in, len), len);
		if (pdk__egress_body_refused(c))
			return;
		if (n < 0 || !pdk__egress_account(c, n < 0 ? 0 : (size_t)n, true)) {
			upstream_failed(c, n < 0 ? "the request body is malformed"
						 : "the egress byte budget was spent");
			return;
		}
		pdk__egress_buf_move(bufferevent_get_output(c->up), in, (size_t)n);
		if (evbuffer_get_length(bufferevent_get_output(c->up)) >=
		    PDK__EGRESS_FORWARD_HIGH) {
			bufferevent_disable(c->client, EV_READ);
			return;
		}
		if ((size_t)n < len && !c->head.msg_done)
			return; /* the parser wants more (it never stops early otherwise) */
	}
}

static void forward_client_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	forward_body(arg);
}

/*
 * Back-pressure: a side whose queue reached PDK__EGRESS_FORWARD_HIGH stops the other
 * side's reading (forward_read, forward_body); when it drains to half, this
 * resumes it. A client that reads slowly holds at most that much.
 */
static void forward_drained(struct bufferevent *bev, void *arg)
{
	struct pdk__egress_conn *c = arg;

	/*
	 * The held body went to the kernel (all but PDK__EGRESS_FORWARD_HIGH / 2 at most, the
	 * relay's own bound): its charge is returned, unless a copy is kept for a
	 * retry (keep_replay()), which it then covers until the request ends.
	 */
	if (bev == c->up && c->replay == NULL)
		pdk__egress_unhold(c);
	if (bev == c->client && c->up != NULL)
		bufferevent_enable(c->up, EV_READ);
	else if (bev == c->up && !c->close_after)
		bufferevent_enable(c->client, EV_READ);
}

static bool idempotent(enum http_method m)
{
	/* RFC 9110 9.2.2 (TRACE is not forwarded). */
	return m == HTTP_GET || m == HTTP_HEAD || m == HTTP_OPTIONS || m == HTTP_PUT ||
	       m == HTTP_DELETE;
}

/*
 * Over a kept connection, an idempotent request whose body is all held
 * keeps a copy of what goes up: if the server closed the connection as it
 * was reused, the request is sent once more on a fresh one (pdk__egress_retry()).
 */
static void keep_replay(struct pdk__egress_conn *c)
{
	size_t body = evbuffer_get_length(c->held);

	if (!c->reused || c->retried || !c->head.msg_done ||
	    !idempotent((enum http_method)c->head.p.method))
		return;
	c->replay_len = c->up_head_len + body;
	c->replay = pdk_xmalloc(c->replay_len);
	memcpy(c->replay, c->up_head, c->up_head_len);
	pdk__egress_buf_copyout(c->held, c->replay + c->up_head_len, body);
}

void pdk__egress_forward_start(struct pdk__egress_conn *c)
{
	struct timeval idle = {PDK__EGRESS_IDLE_TIMEOUT_S, 0};
	size_t held = evbuffer_get_length(c->held);

	c->state = PDK__EGRESS_ST_FORWARD;
	pdk__egress_resp_init(&c->resp, c->head.p.method == HTTP_HEAD);
	keep_replay(c);
	/* The budget was checked before connecting. */
	(void)pdk__egress_account(c, c->up_head_len, true);
	pdk__egress_buf_add(bufferevent_get_output(c->up), c->up_head, c->up_head_len);
	free(steal_ptr(&c->up_head));
	if (!pdk__egress_account(c, held, true)) {
		upstream_failed(c, "the egress byte budget was spent");
		return;
	}
	pdk__egress_buf_move(bufferevent_get_output(c->up), c->held, held);
	bufferevent_setcb(c->up, forward_read, forward_drained, forward_event, c);
	bufferevent_setcb(c->client, forward_client_read, forward_drained, forward_event, c);
	bufferevent_setwatermark(c->up, EV_WRITE, PDK__EGRESS_FORWARD_HIGH / 2, 0);
	bufferevent_setwatermark(c->client, EV_WRITE, PDK__EGRESS_FORWARD_HIGH / 2, 0);
	bufferevent_set_timeouts(c->up, &idle, NULL);
	bufferevent_set_timeouts(c->client, NULL, NULL);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
	bufferevent_enable(c->client, EV_READ | EV_WRITE);
	forward_body(c);
}
