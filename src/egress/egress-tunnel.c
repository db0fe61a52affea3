/*
 * egress-tunnel.c - CONNECT tunnels: once the upstream connection is up,
 * the proxy answers 200 and moves bytes both ways until both ends closed,
 * within the byte budget.
 *
 * A tunnel moves bytes with read() and write() through one user-space
 * buffer per direction, and nothing else: no bufferevent (libevent 2.1's
 * evbuffer_read() reads at most 4 KiB per call, and on a paravirtualized
 * machine every system call is dear). The two sockets are taken out of
 * their bufferevents and each is watched by one edge-triggered event, for
 * reading and writing both, registered once for the tunnel's life: moving
 * bytes costs no epoll_ctl() and no timer update. An edge-triggered event
 * fires again only on a change, so each direction remembers whether its
 * source may hold bytes (until a read comes back short) and whether its
 * destination may take bytes (until a write comes back short).
 *
 * Per wakeup a direction reads into its buffer and writes what it read at
 * once, again and again until a read comes back short, the destination is
 * full or PUMP_ROUNDS passes are made (then the event is made active again,
 * so one busy tunnel does not starve the others). A buffer starts at
 * TDIR_BUF_MIN, which a TLS handshake fits in, and grows to COPY_BUF when a
 * read fills it: a bulk transfer then moves COPY_BUF per read. A slow reader
 * stops its writer (back-pressure) with at most COPY_BUF held. Bytes that
 * must go out first (the 200 answer, bytes the client sent right behind its
 * CONNECT, anything a bufferevent still held) are queued in the buffer
 * before anything is read.
 *
 * Why not splice(): on loopback on this project's 2-CPU machine,
 * copying through a 1 MiB buffer moved more bytes per second than splicing
 * through a 1 MiB pipe (docs/internals/egress.md has the figures), and a
 * pipe per direction costs three system calls per tunnel before its first
 * byte.
 *
 * An end of stream is passed on as shutdown(SHUT_WR), so half-closed
 * protocols keep working. The byte budget is exact: a direction reads at
 * most what is left of limits.egress_bytes, and when nothing is left, the
 * next byte offered (seen with MSG_PEEK) cuts the tunnel once what was
 * already accepted has been delivered. One periodic timer per tunnel ends
 * it when no byte moved either way for PDK__EGRESS_IDLE_TIMEOUT_S.
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define COPY_BUF     (1024 * 1024) /* a tunnel's bytes per direction, at most */
#define EARLY_MAX    (256 * 1024)  /* bytes a client may send behind its CONNECT, at most */
#define TDIR_BUF_MIN (16 * 1024)   /* a direction's first buffer */
#define PUMP_ROUNDS  8             /* reads per direction per wakeup, at most */
#define IDLE_CHECK_S 10            /* how often a tunnel looks at its last byte's time */

struct tdir {
	struct pdk__egress_conn *c;
	int from, to;    /* borrowed from struct pdk__egress_tunnel */
	char *buf;       /* bytes read from `from` not yet written to `to`; owned */
	size_t cap;      /* buf's size */
	size_t off, len; /* pending: buf[off..len) */
	bool readable;   /* `from` may hold bytes or its end (until a short read) */
	bool writable;   /* `to` may take bytes (until a short write) */
	bool eof;        /* `from` ended */
	bool shut;       /* the end was passed on: shutdown(to, SHUT_WR) */
	bool closing;    /* `from`'s peer ended or reset (EV_CLOSED): read until it says so */
	bool up;         /* towards the upstream server */
};

struct pdk__egress_tunnel {
	int fd[2];           /* [0] the client, [1] the upstream server; owned */
	struct event *ev[2]; /* fd[i], read and write, edge-triggered */
	struct event *idle;  /* periodic: the idle check */
	struct tdir dir[2];  /* [0] client -> upstream, [1] upstream -> client */
	uint64_t last_ns;    /* last byte moved either way */
	bool cut;            /* the byte budget is spent: deliver what was accepted, then end */
};

void pdk__egress_tunnel_free(struct pdk__egress_tunnel *t)
{
	if (t->idle != NULL)
		event_free(t->idle);
	for (int i = 0; i < 2; i++) {
		if (t->ev[i] != NULL)
			event_free(t->ev[i]);
		free(t->dir[i].buf);
		if (t->fd[i] >= 0)
			(void)close(t->fd[i]);
	}
	free(t);
}

static void tunnel_end(struct pdk__egress_conn *c, const char *reason)
{
	(void)pdk__egress_emit_connect(c, true, 200, reason); /* it ends either way */
	pdk__egress_conn_free(c);
}

static bool tdir_drained(const struct tdir *d)
{
	return d->off == d->len;
}

static bool tunnel_done(const struct pdk__egress_tunnel *t)
{
	for (int i = 0; i < 2; i++) {
		if (!tdir_drained(&t->dir[i]) || !(t->dir[i].eof || t->cut))
			return false;
	}
	return true;
}

/* The budget is spent and a source offers another byte: stop reading both ways. */
static void tunnel_cut(struct pdk__egress_conn *c)
{
	pdk__egress_bytes_spent(c->e);
	c->tun->cut = true;
}

/* Write what is pending while `to` takes it. 0, or -1 (the tunnel must end). */
static int tdir_write(struct tdir *d)
{
	while (d->off < d->len && d->writable) {
		ssize_t n = write(d->to, d->buf + d->off, d->len - d->off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			d->writable = false;
			break;
		}
		if (n <= 0)
			return -1; /* EPIPE, ECONNRESET: the reader is gone */
		d->off += (size_t)n;
		d->c->tun->last_ns = pdk_now_mono_ns(); /* a reader that takes bytes is not idle */
		/* A short write means the socket's buffer is full: the next edge says when not. */
		d->writable = d->off == d->len;
	}
	if (d->off == d->len)
		d->off = d->len = 0;
	if (d->eof && d->len == 0 && !d->shut) {
		d->shut = true;
		if (shutdown(d->to, SHUT_WR) < 0 && errno != ENOTCONN)
			return -1;
	}
	return 0;
}

/*
 * The budget is spent: does `from` offer another byte? Cut the tunnel if it
 * does; its end of stream may still pass. 0, or -1 (the tunnel must end).
 */
static int tdir_peek(struct tdir *d)
{
	char peek;
	ssize_t n = recv(d->from, &peek, 1, MSG_PEEK | MSG_DONTWAIT);

	/* SECURITY: nothing more may pass. */
	if (n > 0)
		tunnel_cut(d->c);
	else if (n == 0)
		d->eof = true;
	else if (errno == EAGAIN || errno == EINTR)
		d->readable = errno == EINTR;
	else
		return -1;
	return 0;
}

/* One read into the buffer, at most `left` bytes. 0, or -1 (the tunnel must end). */
static int tdir_read(struct tdir *d, size_t left)
{
	size_t room;
	ssize_t n;

	if (d->buf == NULL) {
		d->cap = TDIR_BUF_MIN;
		d->buf = pdk_xmalloc(d->cap);
	}
	room = d->cap - d->len < left ? d->cap - d->len : left;
	n = read(d->from, d->buf + d->len, room);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? (d->readable = errno == EINTR, 0) : -1;
	if (n == 0) {
		d->eof = true;
		d->readable = false;
		return 0;
	}
	d->len += (size_t)n;
	d->c->tun->last_ns = pdk_now_mono_ns();
	(void)pdk__egress_account(d->c, (size_t)n, d->up); /* within the budget: n <= left */
	/*
	 * A short read emptied the socket: the next edge says when more comes.
	 * Not so for an end of stream or a reset that arrived before the read
	 * (its edge is spent): once EV_CLOSED was seen, read until read() says it.
	 */
	d->readable = (size_t)n == room || d->closing;
	if (d->len == d->cap && d->cap < COPY_BUF) {
		d->cap = COPY_BUF; /* a bulk transfer: move more per system call */
		d->buf = pdk_xrealloc(d->buf, d->cap);
	}
	return 0;
}

/*
 * Move bytes one way until `from` is empty, `to` is full or PUMP_ROUNDS
 * reads were made. 0, or -1 (the tunnel must end); *more: work is left.
 */
static int tdir_pump(struct tdir *d, bool *more)
{
	struct pdk__egress_tunnel *t = d->c->tun;
	int rounds = 0;

	*more = false;
	if (tdir_write(d) < 0)
		return -1;
	while (d->readable && !d->eof && !t->cut && (d->buf == NULL || d->len < d->cap)) {
		size_t left = pdk__egress_budget_left(d->c->e);

		if (rounds++ == PUMP_ROUNDS) {
			*more = true;
			break;
		}
		if ((left == 0 ? tdir_peek(d) : tdir_read(d, left)) < 0 || tdir_write(d) < 0)
			return -1;
	}
	return 0;
}

/* Pump both ways; end the tunnel on failure, or when both ways are done. */
static void tunnel_pump(struct pdk__egress_conn *c)
{
	struct pdk__egress_tunnel *t = c->tun;
	bool more[2];

	for (int i = 0; i < 2; i++) {
		if (tdir_pump(&t->dir[i], &more[i]) < 0) {
			tunnel_end(c, "a side of the tunnel failed");
			return;
		}
	}
	if (tunnel_done(t)) {
		tunnel_end(c, t->cut ? "the egress byte budget was spent: the tunnel was closed"
				     : NULL);
		return;
	}
	for (int i = 0; i < 2; i++) {
		if (more[i])
			event_active(t->ev[i], EV_READ,
				     0); /* the rest after the other connections */
	}
}

/* fd[i] changed: it may be read (direction i) or written (direction 1 - i). */
static void tunnel_io(evutil_socket_t fd, short what, void *arg)
{
	struct tdir *d = arg;
	struct pdk__egress_tunnel *t = d->c->tun;

	(void)fd;
	if (what & EV_CLOSED)
		d->closing = true;
	if (what & (EV_READ | EV_CLOSED))
		d->readable = true;
	if (what & EV_WRITE)
		t->dir[d == &t->dir[0] ? 1 : 0].writable = true;
	tunnel_pump(d->c);
}

static void tunnel_idle(evutil_socket_t fd, short what, void *arg)
{
	struct pdk__egress_conn *c = arg;
	struct pdk__egress_tunnel *t = c->tun;

	(void)fd;
	(void)what;
	if (pdk_now_mono_ns() - t->last_ns < PDK__EGRESS_IDLE_TIMEOUT_S * 1000000000ULL)
		return;
	tunnel_end(c, tdir_drained(&t->dir[0]) && tdir_drained(&t->dir[1])
			      ? "idle for too long"
			      : "a side of the tunnel took nothing for too long");
}

/* Room for `len` more pending bytes in d's buffer (at least TDIR_BUF_MIN in all). */
static void tdir_reserve(struct tdir *d, size_t len)
{
	if (d->len + len <= d->cap)
		return;
	d->cap = d->len + len > TDIR_BUF_MIN ? d->len + len : TDIR_BUF_MIN;
	d->buf = pdk_xrealloc(d->buf, d->cap);
}

/* Queue bytes to be written before anything read (they are not relayed bytes). */
static void tdir_queue(struct tdir *d, const void *data, size_t len)
{
	if (len == 0)
		return;
	tdir_reserve(d, len);
	memcpy(d->buf + d->len, data, len);
	d->len += len;
}

/* Move what a bufferevent still holds into `d`'s buffer, within the budget; false if cut. */
static bool tdir_take_input(struct pdk__egress_conn *c, struct tdir *d, struct evbuffer *in)
{
	size_t len = evbuffer_get_length(in);
	size_t left = pdk__egress_budget_left(c->e);
	size_t n = len < left ? len : left;

	if (n > 0) {
		tdir_reserve(d, n);
		pdk__egress_buf_remove(in, d->buf + d->len, n);
		d->len += n;
		(void)pdk__egress_account(c, n, d->up); /* within the budget: n <= left */
	}
	return n == len;
}

static int tunnel_events(struct pdk__egress_conn *c, struct pdk__egress_tunnel *t)
{
	struct timeval check = {IDLE_CHECK_S, 0};

	for (int i = 0; i < 2; i++) {
		struct tdir *d = &t->dir[i];

		d->c = c;
		d->up = i == 0;
		d->from = t->fd[i];
		d->to = t->fd[1 - i];
		d->writable = true; /* until a write says otherwise */
		/* Not readable yet: registering the event reports bytes already there. */
		t->ev[i] = event_new(c->e->base, t->fd[i],
				     EV_READ | EV_WRITE | EV_CLOSED | EV_ET | EV_PERSIST, tunnel_io,
				     d);
		if (t->ev[i] == NULL || event_add(t->ev[i], NULL) < 0)
			return -1;
	}
	t->idle = event_new(c->e->base, -1, EV_PERSIST, tunnel_idle, c);
	return t->idle == NULL ? -1 : event_add(t->idle, &check);
}

void pdk__egress_tunnel_start(struct pdk__egress_conn *c)
{
	static const char ok[] = PDK__EGRESS_CONNECT_OK;
	struct pdk__egress_tunnel *t;
	bool whole;

	if (evbuffer_get_length(bufferevent_get_input(c->client)) > EARLY_MAX) {
		pdk__egress_answer(c, true, 400, "too many bytes behind the CONNECT request");
		return;
	}
	t = pdk_xcalloc(1, sizeof(*t));
	t->fd[0] = t->fd[1] = -1;
	c->tun = t;
	c->state = PDK__EGRESS_ST_TUNNEL;
	c->answered = true;
	t->last_ns = pdk_now_mono_ns();
	/* First the answer, then whatever either bufferevent already read (a TLS hello). */
	tdir_queue(&t->dir[1], ok, sizeof(ok) - 1);
	whole = tdir_take_input(c, &t->dir[0], bufferevent_get_input(c->client)) &&
		tdir_take_input(c, &t->dir[1], bufferevent_get_input(c->up));
	t->fd[0] = pdk__egress_take_fd(&c->client);
	t->fd[1] = pdk__egress_take_fd(&c->up); /* c->counted stays: the connection is still open */
	if (t->fd[0] < 0 || t->fd[1] < 0 || tunnel_events(c, t) < 0) {
		tunnel_end(c, "cannot set up the tunnel");
		return;
	}
	if (!whole)
		tunnel_cut(c);
	tunnel_pump(c); /* the answer goes out now, not after the next wakeup */
}
