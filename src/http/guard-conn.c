/*
 * guard-conn.c - the request guard on a connection (http.h, guard.h): the
 * bufferevent filter evhttp reads through, and the answer to a stand-in.
 *
 * Why a filter and a stand-in request: libevent 2.1.12 (Debian 12) calls
 * neither the generic callback nor any user hook when it refuses a request
 * (evhttp_connection_fail_ calls the request's own callback,
 * evhttp_handle_request, which sends its HTML page). The one hook it gives
 * before a request is parsed is evhttp_set_bevcb: the daemon owns each
 * connection's bufferevent, and a filter bufferevent sees every byte before
 * evhttp does. The guard answers nothing itself: answering through evhttp
 * keeps the answers of pipelined requests in order and lets evhttp close
 * the connection after the answer is written.
 */
#include "common.h"
#include "base.h"
#include "http-internal.h"

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static void add(struct evbuffer *b, const void *data, size_t len)
{
	if (evbuffer_add(b, data, len) < 0)
		pdk_oom();
}

/* ---- input ---- */

static enum bufferevent_filter_result filter_in(struct evbuffer *src, struct evbuffer *dst,
						ev_ssize_t limit, enum bufferevent_flush_mode mode,
						void *ctx)
{
	struct pdk__conn *c = ctx;

	(void)limit;
	(void)mode;
	/* SECURITY: a connection the budget closed passes nothing on. */
	if (c->dropped) {
		if (evbuffer_drain(src, evbuffer_get_length(src)) < 0)
			pdk_oom();
		return BEV_OK;
	}
	(void)pdk__guard_feed_buffer(c->g, src, dst);
	pdk__conns_watch(c);
	return BEV_OK;
}

/*
 * Output. evhttp takes an empty output buffer for "the answer is written"
 * and may then close the socket (Connection: close). With a filter in
 * between, the filter's output empties as soon as the bytes move to the
 * socket's bufferevent, before the kernel has them, and a closing answer
 * would be lost. So the filter's output keeps every byte until the socket's
 * bufferevent has written it: new bytes are copied down (out_added), written
 * bytes are dropped from the filter's output (sock_written), and evhttp's
 * write callback runs when both are empty.
 */
static enum bufferevent_filter_result filter_out(struct evbuffer *src, struct evbuffer *dst,
						 ev_ssize_t limit, enum bufferevent_flush_mode mode,
						 void *ctx)
{
	(void)src;
	(void)dst;
	(void)limit;
	(void)mode;
	(void)ctx;
	return BEV_NEED_MORE; /* move_down copies them */
}

/* What was added to the filter's output since the last copy, copied to the socket's. */
static void move_down(evutil_socket_t fd, short what, void *arg)
{
	struct pdk__conn *g = arg;
	struct evbuffer *buf = bufferevent_get_output(g->bev);
	size_t len;
	struct evbuffer_ptr pos;
	struct evbuffer_iovec v[16];
	int nv;

	(void)fd;
	(void)what;
	g->move_due = false;
	/*
	 * SECURITY: what must be stored before an answer is written is stored
	 * before its first byte reaches the socket's buffer (http.h): here, at
	 * the copy, the one way bytes reach the socket. Not as they are added:
	 * evhttp adds a chunk in three pieces (size, data, CRLF), and a store
	 * sends its records to every event stream, this one too; called
	 * between two pieces, it wrote a whole event inside the chunk, and the
	 * client read a broken chunked body. Here, what the store adds comes
	 * after every whole piece, and is copied with them.
	 */
	if (g->owner->before_write != NULL)
		g->owner->before_write(g->owner->before_write_arg);
	len = evbuffer_get_length(buf);
	if (g->moved > len)
		g->moved = len; /* evhttp dropped its output (a reset): forget it */
	while (g->moved < len) {
		if (evbuffer_ptr_set(buf, &pos, g->moved, EVBUFFER_PTR_SET) < 0)
			pdk_oom();
		nv = evbuffer_peek(buf, (ev_ssize_t)(len - g->moved), &pos, v, PDK_ARRAY_SIZE(v));
		if (nv > (int)PDK_ARRAY_SIZE(v))
			nv = (int)PDK_ARRAY_SIZE(v);
		for (int i = 0; i < nv; i++) {
			size_t n = v[i].iov_len < len - g->moved ? v[i].iov_len : len - g->moved;

			add(bufferevent_get_output(g->sock), v[i].iov_base, n);
			g->moved += n;
		}
	}
}

static void out_added(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct pdk__conn *g = arg;

	(void)buf;
	if (g->dropping || info->n_added == 0)
		return;
	/*
	 * The copy is made once per turn of the loop, not once per addition:
	 * finding where the copied part ends walks the buffer from its start,
	 * and an answer added in many pieces in one turn (a stream's replay of
	 * every stored event) would walk it once per piece.
	 */
	if (!g->move_due) {
		g->move_due = true;
		event_active(g->move, EV_WRITE, 0);
	}
}

static void sock_written(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct pdk__conn *g = arg;
	struct evbuffer *out = bufferevent_get_output(g->bev);
	size_t n = info->n_deleted < g->moved ? info->n_deleted : g->moved;

	(void)buf;
	if (n == 0)
		return;
	g->dropping = true;
	if (evbuffer_drain(out, n) < 0)
		pdk_oom();
	g->dropping = false;
	g->moved -= n;
	if (evbuffer_get_length(out) == 0)
		bufferevent_trigger(g->bev, EV_WRITE, 0);
}

static void filter_free(void *ctx)
{
	struct pdk__conn *g = ctx;

	/* The socket's bufferevent outlives the filter by a moment: its callback goes first. */
	if (g->sock_cb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(g->sock), g->sock_cb);
	event_free(g->move);
	pdk_peer_kept_release(&g->peer_ns);
	pdk__conns_remove(g->owner, g);
	pdk__guard_free(g->g);
	free(g);
}

static struct bufferevent *guard_bev(struct event_base *base, void *arg)
{
	struct pdk_http_guards *gs = arg;
	struct bufferevent *sock = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	struct pdk__conn *g;

	if (sock == NULL)
		pdk_oom();
	g = pdk_xcalloc(1, sizeof(*g));
	g->peer_ns = PDK_PEER_KEPT_INIT;
	g->g = pdk__guard_new(gs->lim.max_body, PDK_HTTP_HEADERS_MAX);
	g->sock = sock;
	g->bev = bufferevent_filter_new(sock, filter_in, filter_out, BEV_OPT_CLOSE_ON_FREE,
					filter_free, g);
	g->move = event_new(base, -1, 0, move_down, g);
	if (g->bev == NULL || g->move == NULL)
		pdk_oom();
	g->sock_cb = evbuffer_add_cb(bufferevent_get_output(sock), sock_written, g);
	if (g->sock_cb == NULL ||
	    evbuffer_add_cb(bufferevent_get_output(g->bev), out_added, g) == NULL)
		pdk_oom();
	pdk__conns_add(gs, g);
	return g->bev;
}

void pdk__guard_bevcb(struct pdk_http_guards *gs, struct evhttp *h)
{
	evhttp_set_bevcb(h, guard_bev, gs);
}

void pdk_http_guards_before_write(struct pdk_http_guards *gs, pdk_http_before_write_cb cb,
				  void *arg)
{
	gs->before_write = cb;
	gs->before_write_arg = arg;
}

int pdk_http_peer_in_our_namespaces(struct pdk_http_guards *gs, struct evhttp_request *req,
				    struct pdk_error **err)
{
	struct evhttp_connection *con = evhttp_request_get_connection(req);
	struct bufferevent *bev = con ? evhttp_connection_get_bufferevent(con) : NULL;
	struct pdk__conn *c = gs != NULL ? pdk__conns_find(gs, bev) : NULL;
	int fd = bev ? bufferevent_getfd(bev) : -1;

	if (fd < 0)
		return pdk_error_setx(err, ENOTCONN, "the request has no connection");
	return c != NULL ? pdk_peer_in_our_namespaces_kept(&c->peer_ns, fd, err)
			 : pdk_peer_in_our_namespaces(fd, err);
}

/* ---- answering a stand-in; the end of every other answer ---- */

/* A refusal's answer is written: the rest of what the client sends is read and dropped. */
static void answered(struct evhttp_request *req, void *arg)
{
	struct pdk_http_guards *gs = arg;
	struct evhttp_connection *con = evhttp_request_get_connection(req);
	struct bufferevent *bev = con ? evhttp_connection_get_bufferevent(con) : NULL;
	const struct pdk__conn *c = pdk__conns_find(gs, bev);
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	int dup_fd;

	if (fd < 0 || c == NULL || (dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return;
	pdk__conns_drain(gs, dup_fd, &c->peer);
}

/* Any other answer is written: the connection may wait for its next request head. */
static void request_done(struct evhttp_request *req, void *arg)
{
	struct evhttp_connection *con = evhttp_request_get_connection(req);
	struct pdk__conn *c =
		pdk__conns_find(arg, con ? evhttp_connection_get_bufferevent(con) : NULL);

	if (c == NULL)
		return;
	c->completed++;
	pdk__conns_watch(c);
}

bool pdk_http_guard_answer(struct pdk_http_guards *gs, struct evhttp_request *req)
{
	struct evhttp_connection *con = evhttp_request_get_connection(req);
	struct pdk__conn *c =
		pdk__conns_find(gs, con ? evhttp_connection_get_bufferevent(con) : NULL);
	const struct pdk_guard *g;

	if (c == NULL)
		return false;
	/* evhttp hands the connection's requests over one by one, in order. */
	g = c->g;
	if (++c->delivered != pdk__guard_refused_seq(g)) {
		evhttp_request_set_on_complete_cb(req, request_done, gs);
		return false;
	}
	pdk_http_header(req, "Connection", "close");
	evhttp_request_set_on_complete_cb(req, answered, gs);
	pdk_http_error(req, pdk__guard_status(g), pdk__guard_code(g),
		       pdk__guard_field(g)[0] ? pdk__guard_field(g) : NULL, "%s",
		       pdk__guard_message(g));
	return true;
}
