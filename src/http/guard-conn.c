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
#include "guard.h"
#include "http.h"

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* After a refusal: how long, and how many wakes, the rest of the client's bytes are discarded. */
#define LINGER_WAIT_S    1
#define LINGER_WAKES_MAX 32
#define LINGER_READ_MAX  (1u << 20) /* bytes discarded per wake */

/*
 * The live connections of the listeners a set of guards is installed on, so
 * that the request handler finds its own (pdk_http_guard_answer).
 */
struct pdk_http_guards {
	struct guard_conn *conns;
	uint64_t max_body;
};

/* One connection's guard and the state of its two directions. */
struct guard_conn {
	struct pdk_guard *g;
	struct pdk_http_guards *owner;
	struct guard_conn *prev, *next; /* the owner's live connections */
	struct bufferevent *bev, *sock; /* the filter evhttp owns; the socket's (borrowed) */
	struct evbuffer_cb_entry *sock_cb;
	size_t moved;       /* bytes of bev's output already copied to sock's */
	bool dropping;      /* sock_written is draining bev's output */
	uint64_t delivered; /* requests evhttp handed to the daemon */
};

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
	(void)limit;
	(void)mode;
	(void)pdk__guard_feed_buffer(((struct guard_conn *)ctx)->g, src, dst);
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
	return BEV_NEED_MORE; /* out_added has copied them already */
}

static void out_added(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct guard_conn *g = arg;
	size_t len = evbuffer_get_length(buf);
	struct evbuffer_ptr pos;
	struct evbuffer_iovec v[16];
	int nv;

	(void)info;
	if (g->dropping)
		return;
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

static void sock_written(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct guard_conn *g = arg;
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
	struct guard_conn *g = ctx;

	/* The socket's bufferevent outlives the filter by a moment: its callback goes first. */
	if (g->sock_cb != NULL)
		evbuffer_remove_cb_entry(bufferevent_get_output(g->sock), g->sock_cb);
	if (g->prev != NULL)
		g->prev->next = g->next;
	else
		g->owner->conns = g->next;
	if (g->next != NULL)
		g->next->prev = g->prev;
	pdk__guard_free(g->g);
	free(g);
}

static struct bufferevent *guard_bev(struct event_base *base, void *arg)
{
	struct pdk_http_guards *gs = arg;
	struct bufferevent *sock = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	struct guard_conn *g;

	if (sock == NULL)
		pdk_oom();
	g = pdk_xcalloc(1, sizeof(*g));
	g->g = pdk__guard_new(gs->max_body, PDK_HTTP_HEADERS_MAX);
	g->owner = gs;
	g->sock = sock;
	g->bev = bufferevent_filter_new(sock, filter_in, filter_out, BEV_OPT_CLOSE_ON_FREE,
					filter_free, g);
	if (g->bev == NULL)
		pdk_oom();
	g->sock_cb = evbuffer_add_cb(bufferevent_get_output(sock), sock_written, g);
	g->next = gs->conns;
	if (gs->conns != NULL)
		gs->conns->prev = g;
	gs->conns = g;
	if (g->sock_cb == NULL ||
	    evbuffer_add_cb(bufferevent_get_output(g->bev), out_added, g) == NULL)
		pdk_oom();
	return g->bev;
}

struct pdk_http_guards *pdk_http_guards_new(uint64_t max_body)
{
	struct pdk_http_guards *gs = pdk_xcalloc(1, sizeof(*gs));

	gs->max_body = max_body;
	return gs;
}

void pdk_http_guards_free(struct pdk_http_guards *gs)
{
	/* Every connection's filter was finalised (with its evhttp, or with the loop) before this.
	 */
	free(gs);
}

void pdk_http_guard_install(struct pdk_http_guards *gs, struct evhttp *h)
{
	evhttp_set_bevcb(h, guard_bev, gs);
}

/* ---- answering a stand-in ---- */

/*
 * After the answer is written, the client may still be sending the refused
 * body. Closing a socket with unread input makes the kernel send a reset,
 * which can destroy the answer before the client reads it; so the write side
 * is shut down (the client sees the end of the answer) and what still comes
 * is read and dropped, for at most LINGER_WAKES_MAX waits of LINGER_WAIT_S,
 * into one static buffer: nothing is kept.
 */
struct drain {
	struct event_base *base;
	unsigned wakes;
};

static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
	static char sink[64 * 1024];
	struct drain *l = arg;
	size_t got = 0;
	ssize_t r = 1;

	while ((what & EV_READ) && got < LINGER_READ_MAX &&
	       (r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
		got += (size_t)r;
	if ((what & EV_TIMEOUT) || r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) ||
	    ++l->wakes >= LINGER_WAKES_MAX ||
	    event_base_once(l->base, fd, EV_READ, drain_cb, l,
			    &(struct timeval){LINGER_WAIT_S, 0}) < 0) {
		(void)close(fd);
		free(l);
	}
}

static void answered(struct evhttp_request *req, void *arg)
{
	struct evhttp_connection *con = evhttp_request_get_connection(req);
	struct bufferevent *bev = con ? evhttp_connection_get_bufferevent(con) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	struct drain *l;
	int dup_fd;

	(void)arg;
	if (fd < 0 || (dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return;
	(void)shutdown(dup_fd, SHUT_WR);
	l = pdk_xcalloc(1, sizeof(*l));
	l->base = evhttp_connection_get_base(con);
	if (event_base_once(l->base, dup_fd, EV_READ, drain_cb, l,
			    &(struct timeval){LINGER_WAIT_S, 0}) < 0) {
		(void)close(dup_fd);
		free(l);
	}
}

bool pdk_http_guard_answer(struct pdk_http_guards *gs, struct evhttp_request *req)
{
	struct evhttp_connection *con = evhttp_request_get_connection(req);
	struct bufferevent *bev = con ? evhttp_connection_get_bufferevent(con) : NULL;
	struct guard_conn *c = gs->conns;
	const struct pdk_guard *g;

	while (c != NULL && c->bev != bev)
		c = c->next;
	if (c == NULL || bev == NULL)
		return false;
	/* evhttp hands the connection's requests over one by one, in order. */
	g = c->g;
	if (++c->delivered != pdk__guard_refused_seq(g))
		return false;
	pdk_http_header(req, "Connection", "close");
	evhttp_request_set_on_complete_cb(req, answered, NULL);
	pdk_http_error(req, pdk__guard_status(g), pdk__guard_code(g),
		       pdk__guard_field(g)[0] ? pdk__guard_field(g) : NULL, "%s",
		       pdk__guard_message(g));
	return true;
}
