/*
 * conns.c - a listener's connection budget (http.h, "the request guard and
 * the connection budget"): caps per peer and in total, the request head's
 * deadline, the listener paused when descriptors run short, and the
 * lingering of refused connections.
 *
 * Why the checks come a turn of the loop after the accept: libevent 2.1
 * hands an accepted socket straight to evhttp (evhttp_bind_listener sets
 * the listener's callback), and the one hook on the way, the bufferevent
 * callback (guard_bev), is called before the socket is known. The total is
 * still bounded at the accept itself: guard_bev counts the connection, and
 * the listener is disabled when the count reaches the ceiling, which
 * libevent's accept loop checks after every connection.
 *
 * How a connection is closed: the budget raises a timeout on the filter
 * bufferevent, as a bufferevent read timeout would, and evhttp frees the
 * connection the way it frees one whose client went silent. Before that, a
 * short JSON answer (503, 408) is written straight to the socket when
 * nothing else is being written on it.
 */
#include "common.h"
#include "base.h"
#include "http-internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* After a refusal: how long, and how many wakes, the rest of the client's bytes are discarded. */
#define LINGER_WAIT_S    1
#define LINGER_WAKES_MAX 32
#define LINGER_READ_MAX  (1u << 20) /* bytes discarded per wake */

static uint64_t now_ms(void)
{
	return pdk_now_mono_ns() / 1000000;
}

/* ---- peers ---- */

static void peer_of_fd(int fd, struct pdk__peer *p)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(p, 0, sizeof(*p));
	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return; /* AF_UNSPEC: a peer of its own */
	p->family = ss.ss_family;
	if (ss.ss_family == AF_INET)
		memcpy(p->addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
	else if (ss.ss_family == AF_INET6)
		memcpy(p->addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
}

static bool same_peer(const struct pdk__peer *a, const struct pdk__peer *b)
{
	return a->family != AF_UNSPEC && a->family == b->family &&
	       memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

static void peer_name(const struct pdk__peer *p, char *buf, size_t size)
{
	if ((p->family != AF_INET && p->family != AF_INET6) ||
	    inet_ntop(p->family, p->addr, buf, (socklen_t)size) == NULL)
		(void)snprintf(buf, size, "%s", p->family == AF_UNIX ? "the unix socket" : "?");
}

/* Live connections and lingering refusals from `p`. */
static unsigned peer_count(const struct pdk_http_guards *gs, const struct pdk__peer *p)
{
	unsigned n = 0;

	for (const struct pdk__conn *c = gs->conns; c != NULL; c = c->next)
		n += c->admitted && !c->dropped && same_peer(&c->peer, p);
	for (const struct pdk__drain *d = gs->drains; d != NULL; d = d->next)
		n += same_peer(&d->peer, p);
	return n;
}

/* ---- the listener ---- */

static unsigned ceiling(const struct pdk_http_guards *gs)
{
	return gs->lim.max_conns == 0 ? UINT32_MAX : gs->lim.max_conns + PDK_HTTP_CONN_SLACK;
}

static void drain_close(struct pdk__drain *d);

/*
 * Accept while no pause is on and the descriptors are under the ceiling. A
 * lingering refusal is closed early to make room: it only protects an
 * answer already sent.
 */
static void update_listener(struct pdk_http_guards *gs)
{
	bool want;

	while (gs->n_conns + gs->n_drains >= ceiling(gs) && gs->drains != NULL) {
		struct pdk__drain *oldest = gs->drains;

		while (oldest->next != NULL)
			oldest = oldest->next;
		drain_close(oldest);
	}
	want = !gs->paused && gs->n_conns + gs->n_drains < ceiling(gs);
	if (gs->listener == NULL || want == gs->accepting)
		return;
	gs->accepting = want;
	if (want)
		(void)evconnlistener_enable(gs->listener);
	else
		(void)evconnlistener_disable(gs->listener);
}

/*
 * The guards of every listener, to find a listener's from its error
 * callback: libevent passes that callback the listener's argument, which
 * evhttp_bind_listener made the evhttp, not the guards. A mutable
 * file-scope variable, against the rule, because libevent leaves no other
 * way; it changes only on the loop's thread (install and stop).
 */
static struct pdk_http_guards *all_guards;

static void accept_failed(struct evconnlistener *l, void *arg)
{
	struct pdk_http_guards *gs = all_guards;
	int e = EVUTIL_SOCKET_ERROR();

	(void)arg;
	while (gs != NULL && gs->listener != l)
		gs = gs->next_guards;
	/*
	 * SECURITY: libevent retries a failed accept at once, and forever, when
	 * no descriptor is left (the connection stays in the kernel's queue):
	 * the listener pauses instead, and the connection waits its turn there.
	 */
	if (gs == NULL) {
		(void)evconnlistener_disable(l);
		return;
	}
	gs->paused = true;
	update_listener(gs);
	(void)event_add(gs->resume, &(struct timeval){0, PDK_HTTP_ACCEPT_PAUSE_MS * 1000});
	gs->tally.pauses++;
	gs->tally.pause_errno = e;
}

static void accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_http_guards *gs = arg;

	(void)fd;
	(void)what;
	gs->paused = false;
	update_listener(gs);
}

/* ---- closing a connection ---- */

/* Write a short JSON error straight to the socket, when nothing else is being written. */
static void answer_raw(struct pdk__conn *c, int status, const char *reason, const char *code,
		       const char *msg)
{
	_cleanup_json_ json_t *body =
		json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
	_cleanup_free_ char *text = body ? pdk_json_dump_line(body) : NULL;
	_cleanup_free_ char *all = NULL;
	int fd = bufferevent_getfd(c->sock);
	char sink[16 * 1024];

	if (text == NULL)
		pdk_oom();
	if (fd < 0 || c->moved > 0 || evbuffer_get_length(bufferevent_get_output(c->sock)) > 0 ||
	    evbuffer_get_length(bufferevent_get_output(c->bev)) > 0 || c->completed < c->delivered)
		return;
	all = pdk_xasprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
			    status, reason, strlen(text), text);
	/*
	 * What the client sent and nobody read is dropped first: a socket closed
	 * with unread input sends a reset, which can destroy the answer.
	 */
	for (size_t got = 0; got < sizeof(sink) * 4;) {
		ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	/* One small write into an idle socket's buffer: a short write only clips the answer. */
	(void)send(fd, all, strlen(all), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/*
 * Close `c`: answered with `status` (0: not answered), counted out of the
 * budget at once; evhttp frees it (and its socket) as after a timeout.
 */
static void drop(struct pdk__conn *c, int status, const char *msg)
{
	struct pdk_http_guards *gs = c->owner;
	bufferevent_event_cb evcb = NULL;

	if (c->dropped)
		return;
	c->dropped = true;
	c->wait_since_ms = 0;
	if (c->admitted)
		gs->n_live--;
	if (status == 503)
		answer_raw(c, status, "Service Unavailable", "unavailable", msg);
	else if (status == 408)
		answer_raw(c, status, "Request Timeout", "timeout", msg);
	/* A bufferevent evhttp has freed already has no callbacks left: nothing to do. */
	bufferevent_getcb(c->bev, NULL, NULL, &evcb, NULL);
	if (evcb != NULL)
		bufferevent_trigger_event(c->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, 0);
}

/* A flag's name in a message: " (--flag)" or nothing. */
static const char *flag(const char *name, char *buf, size_t size)
{
	if (name == NULL)
		return "";
	(void)snprintf(buf, size, "; %s raises it", name);
	return buf;
}

/* ---- what the log says: a summary every TALLY_EVERY_MS at most ---- */

#define TALLY_EVERY_MS 5000

/* One refusal more of a kind, and the address it came from. */
static void gs_note(struct pdk_http_guards *gs, unsigned *count, const struct pdk__peer *p)
{
	(*count)++;
	gs->tally.last = *p;
}

/*
 * SECURITY: what a flood makes the daemon say is a few lines per interval,
 * whatever its size: counts, not a line per connection.
 */
static void tally_report(struct pdk_http_guards *gs, uint64_t now)
{
	struct pdk__tally *t = &gs->tally;
	char who[INET6_ADDRSTRLEN + 16];

	if (now - t->since_ms < TALLY_EVERY_MS ||
	    t->per_peer + t->full + t->room + t->timeout + t->pauses == 0)
		return;
	peer_name(&t->last, who, sizeof(who));
	if (t->per_peer + t->full + t->room + t->timeout > 0)
		pdk_log(gs->lim.log, PDK_LOG_WARN,
			"%s: in %llu s: %u connections refused (too many from one address, at most "
			"%u), %u refused and %u closed to make room (at most %u at once), %u closed "
			"without a complete request head in %llu ms; the last from %s",
			gs->lim.name, (unsigned long long)(now - t->since_ms) / 1000, t->per_peer,
			gs->lim.max_per_peer, t->full, t->room, gs->lim.max_conns, t->timeout,
			(unsigned long long)gs->lim.head_timeout_ms, who);
	if (t->pauses > 0)
		pdk_log(gs->lim.log, PDK_LOG_WARN,
			"%s: in %llu s: accept paused %u times for %d ms (no descriptor left: %s)",
			gs->lim.name, (unsigned long long)(now - t->since_ms) / 1000, t->pauses,
			PDK_HTTP_ACCEPT_PAUSE_MS, strerror(t->pause_errno));
	*t = (struct pdk__tally){.since_ms = now};
}

/* ---- admission ---- */

/*
 * The connection to close to make room: the oldest one other than `not`
 * that has not sent a complete request head yet, from an address with more
 * than one connection. A client alone on its address is never closed for
 * another's: a flood from a few addresses cannot push out a new client.
 */
static struct pdk__conn *oldest_idle(struct pdk_http_guards *gs, const struct pdk__conn * not )
{
	struct pdk__conn *c = gs->conns;

	while (c != NULL && c->next != NULL)
		c = c->next;
	for (; c != NULL; c = c->prev)
		if (c != not &&c->admitted && !c->dropped && c->wait_since_ms != 0 &&
		    pdk__guard_heads(c->g) == 0 && peer_count(gs, &c->peer) > 1)
			return c;
	return NULL;
}

static void refuse_peer(struct pdk__conn *c)
{
	const struct pdk_http_limits *lim = &c->owner->lim;
	char who[INET6_ADDRSTRLEN + 16], fb[64];
	_cleanup_free_ char *msg = NULL;

	peer_name(&c->peer, who, sizeof(who));
	msg = pdk_xasprintf("too many connections from %s: at most %u at once%s", who,
			    lim->max_per_peer, flag(lim->max_per_peer_flag, fb, sizeof(fb)));
	gs_note(c->owner, &c->owner->tally.per_peer, &c->peer);
	drop(c, 503, msg);
}

/* At the total cap: room is made by closing the oldest connection that sent nothing whole. */
static void make_room(struct pdk__conn *c)
{
	struct pdk_http_guards *gs = c->owner;
	const struct pdk_http_limits *lim = &gs->lim;
	struct pdk__conn *victim = oldest_idle(gs, c);
	char fb[64];
	_cleanup_free_ char *msg = NULL;

	if (victim != NULL) {
		gs_note(gs, &gs->tally.room, &victim->peer);
		drop(victim, 408,
		     "no complete request head arrived, and the daemon is at its connection limit");
		return;
	}
	msg = pdk_xasprintf("too many connections: at most %u at once%s", lim->max_conns,
			    flag(lim->max_conns_flag, fb, sizeof(fb)));
	gs_note(gs, &gs->tally.full, &c->peer);
	drop(c, 503, msg);
}

/*
 * TCP_NODELAY on an accepted TCP socket: every answer leaves as soon as it is
 * written. With Nagle's algorithm, a streamed answer's second write (a
 * Connect stream's start event after its head, an SSE event after another)
 * waits in the kernel for the client's ACK of the first, and a client with
 * nothing to send delays that ACK by up to 40 ms on Linux: measured as
 * commands.run's start event arriving ~40 ms after the head the daemon had
 * followed within 3 ms (docs/internals/performance.md, "The E2B front
 * door"). Every write here is a whole answer or a whole frame, so there is
 * nothing for Nagle to merge. Best effort: a socket that refuses is only
 * slower.
 */
static void no_delay(int fd, const struct pdk__peer *p)
{
	int one = 1;

	if (p->family == AF_INET || p->family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void admit_one(struct pdk__conn *c)
{
	struct pdk_http_guards *gs = c->owner;
	int fd = bufferevent_getfd(c->sock);

	c->admitted = true;
	gs->n_live++;
	peer_of_fd(fd, &c->peer);
	no_delay(fd, &c->peer);
	if (gs->lim.max_per_peer > 0 && peer_count(gs, &c->peer) > gs->lim.max_per_peer)
		refuse_peer(c);
	else if (gs->lim.max_conns > 0 && gs->n_live > gs->lim.max_conns)
		make_room(c);
	/* The wait for its first request head starts now (nothing when it was closed). */
	pdk__conns_watch(c);
}

/* Oldest first, so that a burst is judged in the order it came. */
static void admit(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_http_guards *gs = arg;
	struct pdk__conn *c = gs->conns;

	(void)fd;
	(void)what;
	while (c != NULL && c->next != NULL)
		c = c->next;
	/* A connection closed here stays linked until its filter is freed: the walk is safe. */
	for (; c != NULL; c = c->prev)
		if (!c->admitted && !c->dropped)
			admit_one(c);
}

/* ---- the head deadline ---- */

void pdk__conns_watch(struct pdk__conn *c)
{
	bool waiting = pdk__guard_in_head(c->g) ||
		       (pdk__guard_between(c->g) && c->completed >= pdk__guard_heads(c->g));

	if (!c->admitted || c->dropped || !waiting)
		c->wait_since_ms = 0;
	else if (c->wait_since_ms == 0)
		c->wait_since_ms = now_ms();
}

static void sweep(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_http_guards *gs = arg;
	const struct pdk_http_limits *lim = &gs->lim;
	uint64_t now = now_ms();
	_cleanup_free_ char *msg = NULL;

	(void)fd;
	(void)what;
	tally_report(gs, now);
	for (struct pdk__conn *c = gs->conns; c != NULL; c = c->next) {
		if (c->wait_since_ms == 0 || lim->head_timeout_ms == 0 ||
		    now - c->wait_since_ms < lim->head_timeout_ms)
			continue;
		if (msg == NULL)
			msg = pdk_xasprintf("no complete request head within %llu ms%s%s%s",
					    (unsigned long long)lim->head_timeout_ms,
					    lim->head_timeout_flag ? " (" : "",
					    lim->head_timeout_flag ? lim->head_timeout_flag : "",
					    lim->head_timeout_flag ? ")" : "");
		gs_note(gs, &gs->tally.timeout, &c->peer);
		drop(c, 408, msg);
	}
}

/* ---- the connections ---- */

void pdk__conns_add(struct pdk_http_guards *gs, struct pdk__conn *c)
{
	c->owner = gs;
	c->next = gs->conns;
	if (gs->conns != NULL)
		gs->conns->prev = c;
	gs->conns = c;
	gs->n_conns++;
	if (gs->admit != NULL)
		event_active(gs->admit, EV_TIMEOUT, 1);
	/* SECURITY: libevent's accept loop stops as soon as the listener is disabled. */
	update_listener(gs);
}

void pdk__conns_remove(struct pdk_http_guards *gs, struct pdk__conn *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		gs->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	gs->n_conns--;
	if (c->admitted && !c->dropped)
		gs->n_live--;
	update_listener(gs);
}

struct pdk__conn *pdk__conns_find(struct pdk_http_guards *gs, struct bufferevent *bev)
{
	struct pdk__conn *c = gs->conns;

	while (c != NULL && c->bev != bev)
		c = c->next;
	return bev == NULL ? NULL : c;
}

/* ---- lingering refusals ---- */

static void drain_close(struct pdk__drain *d)
{
	struct pdk_http_guards *gs = d->owner;

	if (d->prev != NULL)
		d->prev->next = d->next;
	else
		gs->drains = d->next;
	if (d->next != NULL)
		d->next->prev = d->prev;
	gs->n_drains--;
	event_free(d->ev);
	(void)close(d->fd);
	free(d);
}

/*
 * After a refusal's answer, the client may still be sending the refused
 * body. Closing a socket with unread input makes the kernel send a reset,
 * which can destroy the answer before the client reads it; so the write side
 * is shut down (the client sees the end of the answer) and what still comes
 * is read and dropped, for at most LINGER_WAKES_MAX waits of LINGER_WAIT_S,
 * into one static buffer: nothing is kept.
 */
static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
	static char sink[64 * 1024];
	struct pdk__drain *d = arg;
	size_t got = 0;
	ssize_t r = 1;

	while ((what & EV_READ) && got < LINGER_READ_MAX &&
	       (r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
		got += (size_t)r;
	if ((what & EV_TIMEOUT) || r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) ||
	    ++d->wakes >= LINGER_WAKES_MAX ||
	    event_add(d->ev, &(struct timeval){LINGER_WAIT_S, 0}) < 0) {
		struct pdk_http_guards *gs = d->owner;

		drain_close(d);
		update_listener(gs);
	}
}

void pdk__conns_drain(struct pdk_http_guards *gs, int fd, const struct pdk__peer *peer)
{
	struct pdk__drain *d;

	(void)shutdown(fd, SHUT_WR);
	if (gs->listener == NULL && gs->admit == NULL) {
		(void)close(fd); /* stopped */
		return;
	}
	d = pdk_xcalloc(1, sizeof(*d));
	d->owner = gs;
	d->fd = fd;
	d->peer = *peer;
	d->ev = event_new(gs->base, fd, EV_READ, drain_cb, d);
	if (d->ev == NULL)
		pdk_oom();
	d->next = gs->drains;
	if (gs->drains != NULL)
		gs->drains->prev = d;
	gs->drains = d;
	gs->n_drains++;
	if (event_add(d->ev, &(struct timeval){LINGER_WAIT_S, 0}) < 0)
		drain_close(d);
	update_listener(gs);
}

/* ---- the guards ---- */

struct pdk_http_guards *pdk_http_guards_new(struct event_base *base,
					    const struct pdk_http_limits *lim)
{
	struct pdk_http_guards *gs = pdk_xcalloc(1, sizeof(*gs));

	gs->lim = *lim;
	gs->tally.since_ms = now_ms();
	if (gs->lim.name == NULL)
		gs->lim.name = "http";
	gs->base = base;
	gs->admit = event_new(base, -1, 0, admit, gs);
	gs->resume = evtimer_new(base, accept_resume, gs);
	gs->sweep = event_new(base, -1, EV_PERSIST, sweep, gs);
	if (gs->admit == NULL || gs->resume == NULL || gs->sweep == NULL)
		pdk_oom();
	if (event_add(gs->sweep, &(struct timeval){1, 0}) < 0)
		pdk_oom();
	return gs;
}

void pdk_http_guard_install(struct pdk_http_guards *gs, struct evhttp *h, struct evconnlistener *l)
{
	gs->listener = l;
	gs->accepting = true;
	gs->next_guards = all_guards;
	all_guards = gs;
	evconnlistener_set_error_cb(l, accept_failed);
	pdk__guard_bevcb(gs, h);
	update_listener(gs);
}

void pdk_http_guards_stop(struct pdk_http_guards *gs)
{
	struct event **evs[3];

	if (gs == NULL) /* before any member's address is taken: a daemon without TCP has none */
		return;
	/* The hook's owner (the daemon's control object) is freed after this. */
	gs->before_write = NULL;
	evs[0] = &gs->admit;
	evs[1] = &gs->resume;
	evs[2] = &gs->sweep;
	for (struct pdk_http_guards **p = &all_guards; *p != NULL; p = &(*p)->next_guards)
		if (*p == gs) {
			*p = gs->next_guards;
			break;
		}
	gs->listener = NULL;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(evs); i++) {
		if (*evs[i] != NULL)
			event_free(*evs[i]);
		*evs[i] = NULL;
	}
	while (gs->drains != NULL)
		drain_close(gs->drains);
}

void pdk_http_guards_free(struct pdk_http_guards *gs)
{
	/* Every connection's filter was finalised (with its evhttp, or with the loop) before this.
	 */
	free(gs);
}
