/*
 * egress.c - the allowlist proxy: a libevent loop in a thread of its own,
 * outside the sandbox, accepting on the listening socket the sandbox's
 * child opened in the sandbox's network namespace.
 *
 * One struct conn per accepted connection, in one of these states:
 *   HEAD      reading a request head (pdk__egress_head_parse)
 *   BODY      holding a request body (up to HOLD_MAX) before it goes up
 *   RESOLVE   asynchronous DNS (evdns) for an allowed name
 *   CONNECT   connecting upstream to the one address that was checked
 *   TUNNEL    CONNECT: bytes both ways until either side ends
 *   FORWARD   plain HTTP: the body goes up, one response comes back
 *   CLOSING   the last bytes (an error answer) drain to the client
 * Only the loop's thread touches a conn; pdk_egress_stop() wakes the loop
 * through a pipe. docs/internals/egress.md explains the choices.
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"
#include "egress-tls.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEAD_TIMEOUT_S  30  /* a client that sends no complete head is dropped */
#define IDLE_TIMEOUT_S  600 /* a tunnel or response with no traffic */
#define MAX_LOCAL_ADDRS 64
#define MAX_CANDIDATES  8   /* checked addresses of one name tried in turn */
#define MAX_CLIENTS     256 /* connections from the sandbox at once; more wait in the backlog */
#define ACCEPT_PAUSE_MS 100 /* after an accept() error (EMFILE): wait, do not spin */
#define COPY_BUF        (1024 * 1024) /* a tunnel's bytes per direction, at most */
#define EARLY_MAX       (256 * 1024)  /* bytes a client may send behind its CONNECT, at most */
#define FORWARD_HIGH    (256 * 1024) /* plain HTTP: bytes queued to one side before reading pauses */
#define HOLD_MAX        (1024 * 1024) /* request body bytes held (and scanned) before going up */
/*
 * Request body bytes held by all connections together (docs/egress.md "The proxy"): without
 * it, MAX_CLIENTS connections could make the supervisor hold MAX_CLIENTS * HOLD_MAX (256 MiB).
 */
#define HOLD_TOTAL (32 * 1024 * 1024)
/* Tests only: a lower HOLD_TOTAL for this proxy (1 byte to HOLD_TOTAL; docs/egress.md). */
#define HOLD_TOTAL_TEST_ENV "PADDOCK_TEST_EGRESS_HOLD_TOTAL" /* struct pdk_egress_config */

enum conn_state { ST_HEAD, ST_BODY, ST_RESOLVE, ST_CONNECT, ST_TUNNEL, ST_FORWARD, ST_CLOSING };

struct conn {
	struct pdk_egress *e;
	struct conn *prev, *next;
	struct bufferevent *client;
	struct bufferevent *up;
	enum conn_state state;
	struct pdk__egress_head head;
	char *up_head; /* plain HTTP: the rebuilt head, until it is sent */
	size_t up_head_len;
	struct pdk__egress_resp resp;
	struct evdns_getaddrinfo_request *dns;
	struct tunnel *tun; /* ST_TUNNEL */
	const struct pdk_net_rule *rule;
	char addr[INET6_ADDRSTRLEN];                  /* the address connected to */
	struct sockaddr_storage cand[MAX_CANDIDATES]; /* addresses that passed the checks */
	size_t n_cand, next_cand;
	uint64_t t_start;
	uint64_t sent, received; /* bytes towards upstream / towards the client */
	bool answered;           /* bytes of a response reached the client */
	bool close_after;        /* no further request on this connection */
	bool counted;            /* holds one of max_connections */
	bool event_done;         /* net.connect emitted for the current request */
	bool intercept;          /* CONNECT to a host with a credential rule: TLS is terminated */
	char *tunnel_host;       /* intercept: the CONNECT's host, for the requests inside */
	uint16_t tunnel_port;
	/* Plain HTTP keep-alive: the upstream connection `up` kept for the next request. */
	char *up_host;                  /* the host it was opened for; NULL: not reusable */
	uint16_t up_port;               /* and the port */
	char up_addr[INET6_ADDRSTRLEN]; /* the address it is connected to */
	bool reused;                    /* the current request went over a kept connection */
	/* The request's body, held before the request goes up (ST_BODY). */
	struct evbuffer *held;
	struct pdk__egress_scan scan; /* placeholders that may not go to this host (head.scan) */
	/* A request on a kept connection: head and whole body, to send once more on a fresh one. */
	char *replay;
	size_t replay_len;
	bool retried; /* the current request was sent again after its kept connection failed */
	/*
	 * Bytes of the proxy-wide hold (e->held) this request's body is charged with: its
	 * declared length (up to HOLD_MAX) from the head on, or what was held of a chunked one.
	 * Returned by unhold() once the body went up, or when the request ends.
	 */
	size_t charged;
};

/* A secret named by network.credentials: its value never enters the sandbox. */
struct secret {
	char *name;
	char *placeholder; /* what the sandbox sees in PADDOCK_SECRET_<NAME> */
	char *value;       /* from PADDOCK_SECRET_<NAME> in this process's environment */
};

struct cred {
	struct pdk_net_rule host;
	char *field;   /* the header's name */
	char *line;    /* the header, with the secret's value in it */
	size_t secret; /* index into secrets */
};

struct pdk_egress {
	struct pdk_egress_config cfg;
	struct secret *secrets;
	size_t n_secrets;
	struct cred *creds;
	size_t n_creds;
	struct event_base *base;
	struct evdns_base *dns;
	struct evconnlistener *listener;
	struct event *resume; /* re-enables the listener after an accept() error */
	size_t n_clients;
	bool listening;
	struct event *wake;
	int wake_fd[2];
	pthread_t thread;
	bool running;
	struct conn *conns;
	struct sockaddr_storage local[MAX_LOCAL_ADDRS];
	size_t n_local;
	uint64_t bytes, requests, open_upstream;
	bool bytes_exceeded; /* limit.exceeded sent for egress_bytes */
	size_t held;         /* request body bytes charged by all connections (conn.charged) */
	size_t hold_cap;     /* at most this many: HOLD_TOTAL, or lower in tests */
	struct ssl_ctx_st *tls_client; /* cfg.ca set: verifies the real servers (egress-tls.c) */
	char *tls_error;               /* why tls_client could not be made, or NULL */
};

struct tunnel;
static void client_read(struct bufferevent *bev, void *arg);
static void connect_next(struct conn *c);
static void client_event(struct bufferevent *bev, short what, void *arg);
static void conn_free(struct conn *c);
static void intercept_up(struct conn *c);
static void start_forward(struct conn *c);
static void retry(struct conn *c);
static void decide(struct conn *c);
static bool body_refused(struct conn *c);

/* ---- events ---- */

static void emit(struct pdk_egress *e, const char *kind, json_t *attrs)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	/* A failing sink already had its say through the hub; the proxy goes on. */
	(void)!pdk_events_emit(e->cfg.events, kind, 0, attrs, &err);
}

static void emit_limit(struct pdk_egress *e, const char *limit, uint64_t value)
{
	json_t *a = json_object();

	pdk_json_set(a, "limit", json_string(limit));
	pdk_json_set(a, "value", json_integer((json_int_t)value));
	emit(e, "limit.exceeded", a);
}

/* One net.connect per request or tunnel: the decision, and for allowed ones the traffic. */
static void emit_connect(struct conn *c, bool allow, int status, const char *reason)
{
	const struct pdk__egress_head *h = &c->head;
	json_t *a;

	if (c->event_done)
		return;
	c->event_done = true;
	a = json_object();
	pdk_json_set(a, "method", json_string(http_method_str((enum http_method)h->p.method)));
	pdk_json_set(a, "host", h->host ? json_string(h->host) : json_null());
	pdk_json_set(a, "port", json_integer(h->port));
	pdk_json_set(a, "address", c->addr[0] ? json_string(c->addr) : json_null());
	pdk_json_set(a, "decision", json_string(allow ? "allow" : "deny"));
	pdk_json_set(a, "rule", c->rule ? json_string(c->rule->text) : json_null());
	if (c->intercept)
		pdk_json_set(a, "intercepted", json_true());
	if (reason != NULL)
		pdk_json_set(a, "reason", json_string(reason));
	if (status)
		pdk_json_set(a, "status", json_integer(status));
	if (allow && !h->connect && c->addr[0])
		pdk_json_set(a, "upstream_reused", json_boolean(c->reused));
	if (c->retried)
		pdk_json_set(a, "retried", json_true());
	pdk_json_set(a, "bytes_sent", json_integer((json_int_t)c->sent));
	pdk_json_set(a, "bytes_received", json_integer((json_int_t)c->received));
	pdk_json_set(a, "duration_ms", json_real((double)(pdk_now_mono_ns() - c->t_start) / 1e6));
	emit(c->e, "net.connect", a);
}

/* ---- answers and closing ---- */

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 405:
		return "Method Not Allowed";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	default:
		return "Error";
	}
}

static void close_up(struct conn *c)
{
	if (c->up != NULL)
		bufferevent_free(c->up);
	c->up = NULL;
	free(steal_ptr(&c->up_host));
	if (c->counted)
		c->e->open_upstream--;
	c->counted = false;
}

static void drained(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_free(arg);
}

static void drain_failed(struct bufferevent *bev, short what, void *arg)
{
	(void)what;
	drained(bev, arg);
}

/* Stop reading, let what is queued for the client drain, then free. */
static void finish(struct conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->client);

	c->state = ST_CLOSING;
	close_up(c);
	bufferevent_disable(c->client, EV_READ);
	bufferevent_setwatermark(c->client, EV_WRITE, 0, 0); /* `drained` means empty */
	if (evbuffer_get_length(out) == 0) {
		conn_free(c);
		return;
	}
	bufferevent_setcb(c->client, NULL, drained, drain_failed, c);
	bufferevent_enable(c->client, EV_WRITE);
}

/* Answer an error (the connection then closes) and record it. */
static void answer(struct conn *c, bool allow, int status, const char *reason)
{
	_cleanup_free_ char *body = pdk_xasprintf("paddock egress: %s\n", reason);

	emit_connect(c, allow, status, reason);
	evbuffer_add_printf(bufferevent_get_output(c->client),
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			    "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s",
			    status, status_text(status), strlen(body),
			    status == 503 ? "Retry-After: 1\r\n" : "", body);
	finish(c);
}

/* ---- budgets ---- */

/* Count bytes moved; false (and limit.exceeded once) when the budget is spent. */
static bool account(struct conn *c, size_t n, bool up)
{
	struct pdk_egress *e = c->e;

	/* Only this thread writes it; pdk_egress_bytes() reads it from others. */
	__atomic_store_n(&e->bytes, e->bytes + n, __ATOMIC_RELAXED);
	if (up)
		c->sent += n;
	else
		c->received += n;
	if (e->cfg.max_bytes == 0 || e->bytes <= e->cfg.max_bytes)
		return true;
	if (!e->bytes_exceeded)
		emit_limit(e, "egress_bytes", e->cfg.max_bytes);
	e->bytes_exceeded = true;
	return false;
}

uint64_t pdk_egress_bytes(const struct pdk_egress *e)
{
	return e != NULL ? __atomic_load_n(&e->bytes, __ATOMIC_RELAXED) : 0;
}

/* ---- the proxy-wide bound on held request bodies (HOLD_TOTAL) ---- */

/* Raise c's charge to `to` bytes; the caller checked that the bound has room (hold_room()). */
static void charge(struct conn *c, size_t to)
{
	if (to <= c->charged)
		return;
	c->e->held += to - c->charged;
	c->charged = to;
}

/* Return c's charge: its held body went up, or its request ended. */
static void unhold(struct conn *c)
{
	c->e->held -= c->charged;
	c->charged = 0;
}

/* How many more body bytes c may hold now: within HOLD_MAX, its own charge and the bound. */
static size_t hold_room(const struct conn *c)
{
	size_t held = evbuffer_get_length(c->held);
	size_t own = c->charged > held ? c->charged - held : 0;
	size_t room = own + (c->e->hold_cap - c->e->held);

	return room < HOLD_MAX - held ? room : HOLD_MAX - held;
}

/*
 * SECURITY: the sandbox cannot make the supervisor hold more than hold_cap
 * bytes of request bodies. A request that would take the total over it is
 * refused (503, Retry-After: 1), not made to wait: a waiting request would
 * keep what it already holds, and requests that wait for each other's bytes
 * would never end.
 */
static void hold_refuse(struct conn *c, size_t want)
{
	_cleanup_free_ char *more = want ? pdk_xasprintf("%zu more wanted, ", want) : NULL;
	_cleanup_free_ char *why = pdk_xasprintf(
		"the request bodies the proxy holds would pass their bound (%zu bytes held, %sat "
		"most %zu): try again later",
		c->e->held, more ? more : "", c->e->hold_cap);

	answer(c, false, 503, why);
}

/*
 * At a complete head: charge a body of known length with what it will hold
 * (up to HOLD_MAX) at once, so that a request that cannot be held whole is
 * refused before any of its body is read. A chunked body is charged as it
 * comes (read_body()); one that waits for "100 Continue" is not held. False
 * when the request was refused.
 */
static bool hold_reserve(struct conn *c)
{
	const struct pdk__egress_head *h = &c->head;
	size_t want;

	if (h->msg_done || h->expect_continue || h->body_len == UINT64_MAX)
		return true;
	want = h->body_len < HOLD_MAX ? (size_t)h->body_len : HOLD_MAX;
	if (want > c->e->hold_cap - c->e->held) {
		hold_refuse(c, want);
		return false;
	}
	charge(c, want);
	return true;
}

/* The test-only lower bound (HOLD_TOTAL_TEST_ENV in the config), else HOLD_TOTAL. */
static int setup_hold(struct pdk_egress *e, struct pdk_error **err)
{
	const char *v = e->cfg.hold_total;
	uint64_t n = 0;

	e->hold_cap = HOLD_TOTAL;
	if (v == NULL)
		return 0;
	if (pdk_parse_size(v, &n) < 0 || n == 0 || n > HOLD_TOTAL)
		return pdk_error_setx(err, EINVAL, "%s '%s': a size from 1 byte to %d (tests only)",
				      HOLD_TOTAL_TEST_ENV, v, HOLD_TOTAL);
	e->hold_cap = (size_t)n;
	return 0;
}

/*
 * Before a request goes upstream: the reason a budget refuses it, or NULL.
 * `reuse`: it goes over a kept connection, which opens none.
 */
static const char *budget_refusal(struct pdk_egress *e, bool reuse, const char **limit,
				  uint64_t *value)
{
	if (e->cfg.max_bytes && e->bytes >= e->cfg.max_bytes) {
		*limit = "egress_bytes";
		*value = e->cfg.max_bytes;
		return "the egress byte budget (limits.egress_bytes) is spent";
	}
	if (e->cfg.max_requests && e->requests >= e->cfg.max_requests) {
		*limit = "egress_requests";
		*value = e->cfg.max_requests;
		return "the request budget (limits.egress_requests) is spent";
	}
	if (!reuse && e->cfg.max_connections && e->open_upstream >= e->cfg.max_connections) {
		*limit = "egress_connections";
		*value = e->cfg.max_connections;
		return "too many connections at once (limits.egress_connections)";
	}
	return NULL;
}

/* ---- tunnels ---- */

/*
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
 * it when no byte moved either way for IDLE_TIMEOUT_S.
 */
#define TDIR_BUF_MIN (16 * 1024) /* a direction's first buffer */
#define PUMP_ROUNDS  8           /* reads per direction per wakeup, at most */
#define IDLE_CHECK_S 10          /* how often a tunnel looks at its last byte's time */

struct tdir {
	struct conn *c;
	int from, to;    /* borrowed from struct tunnel */
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

struct tunnel {
	int fd[2];           /* [0] the client, [1] the upstream server; owned */
	struct event *ev[2]; /* fd[i], read and write, edge-triggered */
	struct event *idle;  /* periodic: the idle check */
	struct tdir dir[2];  /* [0] client -> upstream, [1] upstream -> client */
	uint64_t last_ns;    /* last byte moved either way */
	bool cut;            /* the byte budget is spent: deliver what was accepted, then end */
};

static void tunnel_free(struct tunnel *t)
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

static void tunnel_end(struct conn *c, const char *reason)
{
	emit_connect(c, true, 200, reason);
	conn_free(c);
}

static bool tdir_drained(const struct tdir *d)
{
	return d->off == d->len;
}

static bool tunnel_done(const struct tunnel *t)
{
	for (int i = 0; i < 2; i++) {
		if (!tdir_drained(&t->dir[i]) || !(t->dir[i].eof || t->cut))
			return false;
	}
	return true;
}

/* Bytes the budget still allows (SIZE_MAX: no budget). */
static size_t budget_left(const struct pdk_egress *e)
{
	if (e->cfg.max_bytes == 0)
		return SIZE_MAX;
	if (e->bytes >= e->cfg.max_bytes)
		return 0;
	return e->cfg.max_bytes - e->bytes < SIZE_MAX ? (size_t)(e->cfg.max_bytes - e->bytes)
						      : SIZE_MAX;
}

/* The budget is spent and a source offers another byte: stop reading both ways. */
static void tunnel_cut(struct conn *c)
{
	struct pdk_egress *e = c->e;

	if (!e->bytes_exceeded)
		emit_limit(e, "egress_bytes", e->cfg.max_bytes);
	e->bytes_exceeded = true;
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
	(void)account(d->c, (size_t)n, d->up); /* within the budget: n <= left */
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
	struct tunnel *t = d->c->tun;
	int rounds = 0;

	*more = false;
	if (tdir_write(d) < 0)
		return -1;
	while (d->readable && !d->eof && !t->cut && (d->buf == NULL || d->len < d->cap)) {
		size_t left = budget_left(d->c->e);

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
static void tunnel_pump(struct conn *c)
{
	struct tunnel *t = c->tun;
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
	struct tunnel *t = d->c->tun;

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
	struct conn *c = arg;
	struct tunnel *t = c->tun;

	(void)fd;
	(void)what;
	if (pdk_now_mono_ns() - t->last_ns < IDLE_TIMEOUT_S * 1000000000ULL)
		return;
	tunnel_end(c, tdir_drained(&t->dir[0]) && tdir_drained(&t->dir[1])
			      ? "idle for too long"
			      : "a side of the tunnel took nothing for too long");
}

/* Queue bytes to be written before anything read (they are not relayed bytes). */
static void tdir_queue(struct tdir *d, const void *data, size_t len)
{
	if (len == 0)
		return;
	if (d->len + len > d->cap) {
		d->cap = d->len + len > TDIR_BUF_MIN ? d->len + len : TDIR_BUF_MIN;
		d->buf = pdk_xrealloc(d->buf, d->cap);
	}
	memcpy(d->buf + d->len, data, len);
	d->len += len;
}

/* Move what a bufferevent still holds into `d`'s buffer, within the budget; false if cut. */
static bool tdir_take_input(struct conn *c, struct tdir *d, struct evbuffer *in)
{
	size_t len = evbuffer_get_length(in);
	size_t left = budget_left(c->e);
	size_t n = len < left ? len : left;

	if (n > 0) {
		if (d->len + n > d->cap) {
			d->cap = d->len + n > TDIR_BUF_MIN ? d->len + n : TDIR_BUF_MIN;
			d->buf = pdk_xrealloc(d->buf, d->cap);
		}
		(void)evbuffer_remove(in, d->buf + d->len, n);
		d->len += n;
		(void)account(c, n, d->up);
	}
	return n == len;
}

/*
 * Take a socket from its bufferevent: the bufferevent lets go of it (no
 * dup, no close) and goes.
 */
static int take_fd(struct bufferevent **bev)
{
	int fd = bufferevent_getfd(*bev);

	if (bufferevent_setfd(*bev, -1) < 0)
		fd = -1; /* the bufferevent still owns it and closes it */
	bufferevent_free(*bev);
	*bev = NULL;
	return fd;
}

static int tunnel_events(struct conn *c, struct tunnel *t)
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

static void start_tunnel(struct conn *c)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct tunnel *t;
	bool whole;

	if (evbuffer_get_length(bufferevent_get_input(c->client)) > EARLY_MAX) {
		answer(c, true, 400, "too many bytes behind the CONNECT request");
		return;
	}
	t = pdk_xcalloc(1, sizeof(*t));
	t->fd[0] = t->fd[1] = -1;
	c->tun = t;
	c->state = ST_TUNNEL;
	c->answered = true;
	t->last_ns = pdk_now_mono_ns();
	/* First the answer, then whatever either bufferevent already read (a TLS hello). */
	tdir_queue(&t->dir[1], ok, sizeof(ok) - 1);
	whole = tdir_take_input(c, &t->dir[0], bufferevent_get_input(c->client)) &&
		tdir_take_input(c, &t->dir[1], bufferevent_get_input(c->up));
	t->fd[0] = take_fd(&c->client);
	t->fd[1] = take_fd(&c->up); /* c->counted stays: the connection is still open */
	if (t->fd[0] < 0 || t->fd[1] < 0 || tunnel_events(c, t) < 0) {
		tunnel_end(c, "cannot set up the tunnel");
		return;
	}
	if (!whole)
		tunnel_cut(c);
	tunnel_pump(c); /* the answer goes out now, not after the next wakeup */
}

/* ---- plain HTTP ---- */

/* An idle kept upstream connection that speaks or ends is not used again. */
static void idle_up_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	close_up(arg);
}

static void idle_up_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	close_up(arg);
}

/*
 * After a whole response: may the upstream connection carry the client's
 * next request? Both sides must allow it, the request must have gone up
 * whole, and the server must have sent nothing beyond its response.
 */
static bool keep_up(const struct conn *c)
{
	return c->up != NULL && c->head.upstream_keep_alive && c->head.msg_done &&
	       c->resp.keep_alive && !c->close_after &&
	       evbuffer_get_length(bufferevent_get_input(c->up)) == 0 &&
	       evbuffer_get_length(bufferevent_get_output(c->up)) == 0;
}

static void next_request(struct conn *c)
{
	struct timeval head = {HEAD_TIMEOUT_S, 0};

	if (keep_up(c)) {
		free(c->up_host);
		c->up_host = pdk_xstrdup(c->head.host);
		c->up_port = c->head.port;
		memcpy(c->up_addr, c->addr, sizeof(c->up_addr));
		bufferevent_setcb(c->up, idle_up_read, NULL, idle_up_event, c);
		bufferevent_set_timeouts(c->up, &head, NULL);
		bufferevent_enable(c->up, EV_READ);
	} else {
		close_up(c);
	}
	pdk__egress_head_release(&c->head);
	free(steal_ptr(&c->replay));
	(void)evbuffer_drain(c->held, evbuffer_get_length(c->held));
	unhold(c);
	c->state = ST_HEAD;
	c->rule = NULL;
	c->addr[0] = '\0';
	c->sent = c->received = 0;
	c->answered = c->event_done = c->reused = c->retried = false;
	bufferevent_setcb(c->client, client_read, NULL, client_event, c);
	bufferevent_set_timeouts(c->client, &head, NULL);
	bufferevent_enable(c->client, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0)
		client_read(c->client, c);
}

static void response_done(struct conn *c)
{
	emit_connect(c, true, (int)c->resp.p.status_code, NULL);
	/* Inside an intercepted tunnel too: the next request reuses both TLS connections. */
	if (c->close_after || !c->resp.keep_alive || !c->head.keep_alive) {
		finish(c);
		return;
	}
	next_request(c);
}

/* A malformed or cut-off upstream answer: 502 if nothing reached the client yet. */
static void upstream_failed(struct conn *c, const char *reason)
{
	if (!c->answered) {
		answer(c, true, 502, reason);
		return;
	}
	emit_connect(c, true, (int)c->resp.p.status_code, reason);
	finish(c);
}

static void forward_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	/* One contiguous chunk at a time: no copy of a large response. */
	while (evbuffer_get_length(in) > 0 && !c->resp.done) {
		size_t len = evbuffer_get_contiguous_space(in);
		ssize_t n = pdk__egress_resp_feed(
			&c->resp, (const char *)evbuffer_pullup(in, (ssize_t)len), len);

		if (n < 0) {
			upstream_failed(c, "the upstream server sent a malformed response");
			return;
		}
		if (!account(c, (size_t)n, false)) {
			upstream_failed(c, "the egress byte budget was spent");
			return;
		}
		c->answered = c->answered || n > 0;
		evbuffer_remove_buffer(in, bufferevent_get_output(c->client), (size_t)n);
		if ((size_t)n < len)
			break; /* the response ended inside this chunk */
	}
	if (!c->resp.done && evbuffer_get_length(bufferevent_get_output(c->client)) >= FORWARD_HIGH)
		bufferevent_disable(bev, EV_READ);
	if (c->resp.done)
		response_done(c);
}

static void forward_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (bev == c->client) {
		/* The client went away: nothing more to do for it. */
		emit_connect(c, true, (int)c->resp.p.status_code,
			     "the client closed the connection");
		conn_free(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		upstream_failed(c, "the upstream server did not answer in time");
		return;
	}
	/* A kept connection the server closed as it was reused: once more on a fresh one. */
	if (c->replay != NULL && c->received == 0 && !c->answered) {
		retry(c);
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
static void forward_body(struct conn *c)
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
		n = pdk__egress_body_feed(&c->head, (const char *)evbuffer_pullup(in, (ssize_t)len),
					  len);
		if (body_refused(c))
			return;
		if (n < 0 || !account(c, n < 0 ? 0 : (size_t)n, true)) {
			upstream_failed(c, n < 0 ? "the request body is malformed"
						 : "the egress byte budget was spent");
			return;
		}
		evbuffer_remove_buffer(in, bufferevent_get_output(c->up), (size_t)n);
		if (evbuffer_get_length(bufferevent_get_output(c->up)) >= FORWARD_HIGH) {
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
 * Back-pressure: a side whose queue reached FORWARD_HIGH stops the other
 * side's reading (forward_read, forward_body); when it drains to half, this
 * resumes it. A client that reads slowly holds at most that much.
 */
static void forward_drained(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	/*
	 * The held body went to the kernel (all but FORWARD_HIGH / 2 at most, the
	 * relay's own bound): its charge is returned, unless a copy is kept for a
	 * retry (keep_replay()), which it then covers until the request ends.
	 */
	if (bev == c->up && c->replay == NULL)
		unhold(c);
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
 * was reused, the request is sent once more on a fresh one (retry()).
 */
static void keep_replay(struct conn *c)
{
	size_t body = evbuffer_get_length(c->held);

	if (!c->reused || c->retried || !c->head.msg_done ||
	    !idempotent((enum http_method)c->head.p.method))
		return;
	c->replay_len = c->up_head_len + body;
	c->replay = pdk_xmalloc(c->replay_len);
	memcpy(c->replay, c->up_head, c->up_head_len);
	if (body > 0)
		(void)evbuffer_copyout(c->held, c->replay + c->up_head_len, body);
}

static void start_forward(struct conn *c)
{
	struct timeval idle = {IDLE_TIMEOUT_S, 0};
	size_t held = evbuffer_get_length(c->held);

	c->state = ST_FORWARD;
	pdk__egress_resp_init(&c->resp, c->head.p.method == HTTP_HEAD);
	keep_replay(c);
	(void)account(c, c->up_head_len, true); /* the budget is checked before connecting */
	bufferevent_write(c->up, c->up_head, c->up_head_len);
	free(steal_ptr(&c->up_head));
	if (!account(c, held, true)) {
		upstream_failed(c, "the egress byte budget was spent");
		return;
	}
	(void)evbuffer_add_buffer(bufferevent_get_output(c->up), c->held);
	bufferevent_setcb(c->up, forward_read, forward_drained, forward_event, c);
	bufferevent_setcb(c->client, forward_client_read, forward_drained, forward_event, c);
	bufferevent_setwatermark(c->up, EV_WRITE, FORWARD_HIGH / 2, 0);
	bufferevent_setwatermark(c->client, EV_WRITE, FORWARD_HIGH / 2, 0);
	bufferevent_set_timeouts(c->up, &idle, NULL);
	bufferevent_set_timeouts(c->client, NULL, NULL);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
	bufferevent_enable(c->client, EV_READ | EV_WRITE);
	forward_body(c);
}

/* ---- upstream connection ---- */

/*
 * A relay writes what it just read: Nagle's algorithm would hold a short
 * write (an answer's head) back until the peer's delayed ACK, 40 ms later.
 */
static void no_delay(struct bufferevent *bev)
{
	int one = 1;

	/* Best effort: without it the relay is slower, not less safe. */
	(void)setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void up_connect_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	_cleanup_free_ char *why = NULL;

	if (what & BEV_EVENT_CONNECTED) {
		no_delay(bev);
		if (c->intercept)
			intercept_up(c); /* a CONNECT, or a request in a tunnel whose TLS upstream
					    ended */
		else if (c->head.connect)
			start_tunnel(c);
		else
			start_forward(c);
		return;
	}
	why = pdk_xasprintf("cannot connect to %s port %u: %s", c->addr, c->head.port,
			    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	if (c->next_cand < c->n_cand) {
		/* Another checked address of the same answer (an IPv6 one without a route). */
		bufferevent_free(c->up);
		c->up = NULL;
		connect_next(c);
		return;
	}
	answer(c, true, 502, why);
}

/* Connect to the next candidate address: one that passed judge_addr() (or a listed IP). */
static void connect_next(struct conn *c)
{
	struct sockaddr_storage ss = c->cand[c->next_cand++];
	socklen_t len =
		ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	struct timeval t = {HEAD_TIMEOUT_S, 0};

	((struct sockaddr_in *)&ss)->sin_port = htons(c->head.port); /* same offset in v6 */
	if (inet_ntop(ss.ss_family,
		      ss.ss_family == AF_INET
			      ? (const void *)&((struct sockaddr_in *)&ss)->sin_addr
			      : (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr,
		      c->addr, sizeof(c->addr)) == NULL)
		c->addr[0] = '\0';
	c->state = ST_CONNECT;
	if (!c->counted) {
		c->e->requests++;
		c->e->open_upstream++;
		c->counted = true;
	}
	c->up = bufferevent_socket_new(c->e->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL) {
		answer(c, true, 502, "cannot create a socket");
		return;
	}
	bufferevent_setcb(c->up, NULL, NULL, up_connect_event, c);
	bufferevent_set_timeouts(c->up, &t, &t);
	/* SECURITY: connect to the address that was checked; never resolve again. */
	if (bufferevent_socket_connect(c->up, (struct sockaddr *)&ss, len) < 0)
		answer(c, true, 502, "cannot connect upstream");
}

static bool is_local(const struct pdk_egress *e, const struct sockaddr *sa)
{
	for (size_t i = 0; i < e->n_local; i++) {
		const struct sockaddr_storage *l = &e->local[i];

		if (l->ss_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET &&
		    memcmp(&((const struct sockaddr_in *)l)->sin_addr,
			   &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4) == 0)
			return true;
		if (sa->sa_family == AF_INET6 &&
		    memcmp(&((const struct sockaddr_in6 *)l)->sin6_addr,
			   &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16) == 0)
			return true;
	}
	return false;
}

/*
 * SECURITY: every resolved address is judged. A special-purpose or local
 * address is refused unless the policy lists that very address (SSRF to
 * metadata services and host loopback services; DNS rebinding).
 */
static const char *judge_addr(const struct conn *c, const struct sockaddr *sa)
{
	enum pdk_net_addr_class cls = pdk_net_classify(sa);

	if (pdk_net_match_addr(c->e->cfg.rules, c->e->cfg.n_rules, sa, c->head.port) != NULL)
		return NULL;
	if (cls == PDK_NET_ADDR_PUBLIC && is_local(c->e, sa))
		cls = PDK_NET_ADDR_HOST;
	return cls == PDK_NET_ADDR_PUBLIC ? NULL : pdk_net_addr_class_name(cls);
}

static void addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *a =
		sa->sa_family == AF_INET
			? (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr
			: (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

	if (inet_ntop(sa->sa_family, a, buf, (socklen_t)len) == NULL)
		buf[0] = '\0';
}

static void resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	struct conn *c = arg;
	_cleanup_free_ char *why = NULL;

	if (result == EVUTIL_EAI_CANCEL)
		return; /* the conn is being freed */
	c->dns = NULL;
	if (result != 0) {
		why = pdk_xasprintf("cannot resolve '%s': %s", c->head.host,
				    evutil_gai_strerror(result));
		answer(c, true, 502, why);
		return;
	}
	c->n_cand = c->next_cand = 0;
	for (const struct evutil_addrinfo *ai = res; ai != NULL && c->n_cand < MAX_CANDIDATES;
	     ai = ai->ai_next) {
		const char *bad = judge_addr(c, ai->ai_addr);

		if (bad == NULL && ai->ai_addrlen <= sizeof(c->cand[0])) {
			memset(&c->cand[c->n_cand], 0, sizeof(c->cand[0]));
			memcpy(&c->cand[c->n_cand++], ai->ai_addr, ai->ai_addrlen);
		} else if (bad != NULL && why == NULL) {
			char a[INET6_ADDRSTRLEN];

			addr_text(ai->ai_addr, a, sizeof(a));
			why = pdk_xasprintf("'%s' resolves to %s, a %s address (list the address "
					    "itself to allow it)",
					    c->head.host, a, bad);
		}
	}
	if (c->n_cand > 0)
		connect_next(c);
	else
		answer(c, false, 403, why ? why : "the name has no address");
	evutil_freeaddrinfo(res);
}

/* ---- credentials (plain HTTP) ---- */

static void emit_credential(struct conn *c, const struct secret *s, const char *field, bool inject,
			    const char *reason)
{
	json_t *a = json_object();

	pdk_json_set(a, "host", json_string(c->head.host));
	pdk_json_set(a, "port", json_integer(c->head.port));
	pdk_json_set(a, "secret", json_string(s->name));
	pdk_json_set(a, "header", field ? json_string(field) : json_null());
	pdk_json_set(a, "decision", json_string(inject ? "inject" : "deny"));
	if (reason != NULL)
		pdk_json_set(a, "reason", json_string(reason));
	emit(c->e, "net.credential", a);
}

static bool cred_matches(const struct conn *c, const struct cred *cr)
{
	const struct pdk__egress_head *h = &c->head;

	if (h->host_is_ip)
		return pdk_net_match_addr(&cr->host, 1, (const struct sockaddr *)&h->ip, h->port) !=
		       NULL;
	return pdk_net_match_host(&cr->host, 1, h->host, h->port) != NULL;
}

/* Does the request's target or a field value hold `needle`? */
static bool head_has(const struct pdk__egress_head *h, const char *data, const char *needle)
{
	size_t nl = strlen(needle);

	if (memmem(data + h->url.off, h->url.len, needle, nl) != NULL)
		return true;
	for (size_t i = 0; i < h->n_headers; i++) {
		if (memmem(data + h->values[i].off, h->values[i].len, needle, nl) != NULL)
			return true;
	}
	return false;
}

static bool secret_allowed_here(const struct conn *c, size_t secret)
{
	for (size_t i = 0; i < c->e->n_creds; i++) {
		if (c->e->creds[i].secret == secret && cred_matches(c, &c->e->creds[i]))
			return true;
	}
	return false;
}

struct rewrite {
	struct pdk__egress_rewrite rw;
	const char **drop, **from, **to, **extra;
};

static void rewrite_release(struct rewrite *r)
{
	free(r->drop);
	free(r->from);
	free(r->to);
	free(r->extra);
}

/*
 * SECURITY: a placeholder goes only to a host a credential rule of its
 * secret names, where it becomes the value; anywhere else the request is
 * refused (and recorded), so the sandbox cannot learn which host would take
 * it. A matching rule's header replaces any field of that name the client
 * sent. Returns 0, or -1 after answering 403.
 */
static int apply_credentials(struct conn *c, const char *data, struct rewrite *r)
{
	struct pdk_egress *e = c->e;

	const char *needles[PDK__EGRESS_SCAN_NEEDLES];
	size_t n_needles = 0;

	r->drop = pdk_xcalloc(e->n_creds + 1, sizeof(*r->drop));
	r->extra = pdk_xcalloc(e->n_creds + 1, sizeof(*r->extra));
	r->from = pdk_xcalloc(e->n_secrets + 1, sizeof(*r->from));
	r->to = pdk_xcalloc(e->n_secrets + 1, sizeof(*r->to));
	for (size_t i = 0; i < e->n_secrets; i++) {
		const struct secret *s = &e->secrets[i];
		_cleanup_free_ char *why = NULL;
		bool allowed = secret_allowed_here(c, i);

		/* setup_credentials() keeps the count and lengths within the scanner's. */
		if (!allowed)
			needles[n_needles++] = s->placeholder;
		if (!head_has(&c->head, data, s->placeholder))
			continue;
		if (!allowed) {
			why = pdk_xasprintf("the placeholder of secret '%s' may not be sent to %s "
					    "port %u (no network.credentials rule names it)",
					    s->name, c->head.host, c->head.port);
			emit_credential(c, s, NULL, false, why);
			answer(c, false, 403, why);
			return -1;
		}
		r->from[r->rw.n_swap] = s->placeholder;
		r->to[r->rw.n_swap++] = s->value;
	}
	for (size_t i = 0; i < e->n_creds; i++) {
		if (!cred_matches(c, &e->creds[i]))
			continue;
		r->drop[r->rw.n_drop++] = e->creds[i].field;
		r->extra[r->rw.n_extra++] = e->creds[i].line;
		emit_credential(c, &e->secrets[e->creds[i].secret], e->creds[i].field, true, NULL);
	}
	/* SECURITY: the body is scanned for the placeholders that may not go here. */
	if (n_needles > 0) {
		if (pdk__egress_scan_init(&c->scan, needles, n_needles) < 0) {
			answer(c, false, 403,
			       "the request body cannot be checked for placeholders");
			return -1; /* setup_credentials() keeps this from happening: fail closed */
		}
		c->head.scan = &c->scan;
	}
	r->rw.drop = r->drop;
	r->rw.from = r->from;
	r->rw.to = r->to;
	r->rw.extra = r->extra;
	return 0;
}

/* ---- HTTPS interception (credential injection; the OpenSSL parts are in egress-tls.c) ---- */

/* A CONNECT is intercepted when the sandbox has a CA and a credential rule names its host. */
static bool wants_interception(const struct conn *c)
{
	if (c->e->cfg.ca == NULL)
		return false;
	for (size_t i = 0; i < c->e->n_creds; i++) {
		if (cred_matches(c, &c->e->creds[i]))
			return true;
	}
	return false;
}

/* Orderly TLS end (close_notify) towards the sandbox, best effort, before the socket closes. */
static void tls_close_notify(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (ssl != NULL && SSL_is_init_finished(ssl))
		(void)SSL_shutdown(ssl); /* a socket BIO: the alert goes out now, or not at all */
}

/* The sandbox's TLS client gave up (it does not trust the sandbox's CA: a pinning client). */
static void client_tls_failed(struct conn *c)
{
	SSL *ssl = bufferevent_openssl_get_ssl(c->client);
	_cleanup_free_ char *why = NULL;
	unsigned long e = bufferevent_get_openssl_error(c->client);
	/* NULL when OpenSSL's strings are not loaded (audit.c leaves them out). */
	const char *text = e ? ERR_reason_error_string(e) : NULL;
	char code[64];

	if (ssl == NULL || c->event_done || SSL_is_init_finished(ssl))
		return;
	if (text == NULL && e != 0) {
		ERR_error_string_n(e, code, sizeof(code));
		text = code;
	}
	why = pdk_xasprintf("the client's TLS handshake failed (%s): a client that does not use "
			    "the sandbox's trust bundle, or pins certificates, cannot be given "
			    "credentials",
			    text ? text : "the connection ended");
	emit_connect(c, true, 0, why);
}

/* The real server answered the handshake and passed verification: now the sandbox's side. */
static void intercept_client(struct conn *c)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct timeval head = {HEAD_TIMEOUT_S, 0};
	_cleanup_error_ struct pdk_error *err = NULL;
	SSL_CTX *ctx = pdk_egress_ca_server_ctx(c->e->cfg.ca, c->head.host, &err);
	SSL *ssl;
	int fd;

	if (ctx == NULL) {
		answer(c, true, 502, err->msg);
		return;
	}
	/* The client's TLS hello must come after the 200, or it would be read as plain bytes. */
	if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0) {
		answer(c, true, 400, "bytes behind the CONNECT request before its answer");
		return;
	}
	ssl = SSL_new(ctx);
	if (ssl == NULL)
		pdk_oom();
	fd = take_fd(&c->client);
	/* 39 bytes on a connection that has sent nothing else: the socket buffer takes them. */
	if (fd < 0 || send(fd, ok, sizeof(ok) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(ok) - 1)) {
		SSL_free(ssl);
		if (fd >= 0)
			(void)close(fd);
		emit_connect(c, true, 0, "the client closed the connection");
		conn_free(c);
		return;
	}
	/* On failure libevent has freed ssl and closed fd (BEV_OPT_CLOSE_ON_FREE). */
	c->client = bufferevent_openssl_socket_new(c->e->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
						   BEV_OPT_CLOSE_ON_FREE);
	if (c->client == NULL) {
		conn_free(c);
		return;
	}
	/* The CONNECT's own event; every request inside gets one of its own. */
	emit_connect(c, true, 200, NULL);
	c->tunnel_host = pdk_xstrdup(c->head.host);
	c->tunnel_port = c->head.port;
	c->event_done = false;
	c->sent = c->received = 0;
	c->state = ST_HEAD;
	no_delay(c->client);
	bufferevent_setcb(c->client, client_read, NULL, client_event, c);
	bufferevent_set_timeouts(c->client, &head, NULL);
	bufferevent_enable(c->client, EV_READ | EV_WRITE);
}

static void intercept_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	_cleanup_free_ char *tls = NULL;
	_cleanup_free_ char *why = NULL;

	if (what & BEV_EVENT_CONNECTED) {
		bufferevent_set_timeouts(bev, NULL, NULL);
		if (c->tunnel_host != NULL) {
			start_forward(c); /* a fresh TLS upstream for a request in the tunnel */
			return;
		}
		bufferevent_disable(bev, EV_READ); /* until a request goes up */
		intercept_client(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT)
		tls = pdk_xstrdup("no TLS handshake in time");
	else
		tls = pdk_egress_tls_failure(bufferevent_openssl_get_ssl(bev),
					     bufferevent_get_openssl_error(bev));
	/* SECURITY: an upstream that cannot prove its name never gets the secret. */
	why = pdk_xasprintf("TLS to %s port %u: %s", c->head.host, c->head.port, tls);
	answer(c, false, 502, why);
}

/*
 * The upstream side's context, made at the first interception: loading the
 * trust store parses the host's whole bundle (tens of milliseconds), which
 * neither the sandbox's start nor a sandbox that never intercepts should pay.
 * 0, or -1 with e->tls_error set (then every interception fails).
 */
static int trust_store(struct pdk_egress *e)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (e->tls_client == NULL && e->tls_error == NULL) {
		e->tls_client = pdk_egress_tls_client_ctx(e->cfg.ca_file, &err);
		if (e->tls_client == NULL)
			e->tls_error = pdk_xstrdup(err->msg);
	}
	return e->tls_client != NULL ? 0 : -1;
}

/* The upstream TCP connection is up: start TLS on it, verifying the real server. */
static void intercept_up(struct conn *c)
{
	struct timeval t = {HEAD_TIMEOUT_S, 0};
	SSL *ssl;
	int fd;

	/* SECURITY: fail closed: no interception without a trust store to verify with. */
	if (trust_store(c->e) < 0) {
		answer(c, false, 502, c->e->tls_error);
		return;
	}
	ssl = pdk_egress_tls_client_ssl(c->e->tls_client, c->head.host, c->head.host_is_ip);
	if (ssl == NULL) {
		answer(c, true, 502, "cannot set up TLS towards the upstream server");
		return;
	}
	fd = take_fd(&c->up);
	if (fd < 0) {
		SSL_free(ssl);
		answer(c, true, 502, "cannot set up TLS towards the upstream server");
		return;
	}
	/* On failure libevent has freed ssl and closed fd (BEV_OPT_CLOSE_ON_FREE). */
	c->up = bufferevent_openssl_socket_new(c->e->base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
					       BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL) {
		answer(c, true, 502, "cannot set up TLS towards the upstream server");
		return;
	}
	/* Many servers close without close_notify; the response parser finds the end itself. */
	bufferevent_openssl_set_allow_dirty_shutdown(c->up, 1);
	bufferevent_setcb(c->up, NULL, NULL, intercept_up_event, c);
	bufferevent_set_timeouts(c->up, &t, &t);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
}

/*
 * A request inside an intercepted tunnel, its credentials applied: up it
 * goes, over the tunnel's TLS connection to the server. When the server
 * closed that one while the tunnel was idle, decide() opens another
 * (allowlist, budgets and the address checks as for the CONNECT).
 */
static void intercepted_request(struct conn *c)
{
	struct pdk_egress *e = c->e;
	const char *limit = NULL;
	const char *refusal;
	uint64_t value = 0;

	if (c->up == NULL) {
		decide(c);
		return;
	}
	refusal = budget_refusal(e, true, &limit, &value);
	if (refusal != NULL) {
		emit_limit(e, limit, value);
		answer(c, false, 429, refusal);
		return;
	}
	e->requests++;
	c->reused = c->up_host != NULL; /* it carried a request before */
	if (c->reused)
		memcpy(c->addr, c->up_addr, sizeof(c->addr));
	bufferevent_disable(c->client, EV_READ);
	bufferevent_set_timeouts(c->client, NULL, NULL);
	start_forward(c);
}

/* ---- a request head ---- */

/*
 * Is the kept upstream connection one for this request? The same host (as
 * normalized, or the same IP text) and port, so the same rule and the
 * address that was checked for it; and the server has not closed it in the
 * meantime (a peek sees neither an end nor stray bytes).
 */
static bool can_reuse(const struct conn *c)
{
	char b;

	if (c->up == NULL || c->up_host == NULL || c->head.connect || c->up_port != c->head.port ||
	    strcmp(c->up_host, c->head.host) != 0)
		return false;
	return recv(bufferevent_getfd(c->up), &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
	       (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Resolve the request's host (or take its IP literal) and connect to a checked address. */
static void open_upstream(struct conn *c)
{
	struct pdk__egress_head *h = &c->head;
	struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};

	if (h->host_is_ip) {
		c->cand[0] = h->ip;
		c->n_cand = 1;
		c->next_cand = 0;
		connect_next(c);
		return;
	}
	c->state = ST_RESOLVE;
	/* May call resolved() at once (a hosts-file entry); then it returns NULL. */
	c->dns = evdns_getaddrinfo(c->e->dns, h->host, NULL, &hints, resolved, c);
}

/*
 * The kept connection ended before any byte of the answer: the server
 * closed it as it was reused (RFC 9112 9.3.1 lets a client retry an
 * idempotent request then). Once, on a fresh connection; the name is
 * resolved and judged again.
 */
static void retry(struct conn *c)
{
	c->retried = true;
	c->reused = false;
	c->up_head = steal_ptr(&c->replay);
	c->up_head_len = c->replay_len;
	close_up(c);
	c->e->requests--; /* the same request: connect_next() counts it again */
	c->addr[0] = '\0';
	open_upstream(c);
}

static void decide(struct conn *c)
{
	const struct pdk_egress_config *cfg = &c->e->cfg;
	struct pdk__egress_head *h = &c->head;
	_cleanup_free_ char *why = NULL;
	const char *limit = NULL;
	const char *refusal;
	uint64_t value = 0;
	bool reuse;

	if (h->host_is_ip)
		c->rule = pdk_net_match_addr(cfg->rules, cfg->n_rules, (struct sockaddr *)&h->ip,
					     h->port);
	else
		c->rule = pdk_net_match_host(cfg->rules, cfg->n_rules, h->host, h->port);
	if (c->rule == NULL) {
		why = pdk_xasprintf("no network.allow rule allows %s%s%s port %u",
				    h->ip.ss_family == AF_INET6 ? "[" : "", h->host,
				    h->ip.ss_family == AF_INET6 ? "]" : "", h->port);
		answer(c, false, 403, why);
		return;
	}
	reuse = can_reuse(c);
	if (!reuse)
		close_up(c); /* before the budget check: it frees a connection */
	refusal = budget_refusal(c->e, reuse, &limit, &value);
	if (refusal != NULL) {
		emit_limit(c->e, limit, value);
		answer(c, false, 429, refusal);
		return;
	}
	if (c->tunnel_host == NULL)
		c->intercept = h->connect && wants_interception(c);
	bufferevent_disable(c->client, EV_READ);
	bufferevent_set_timeouts(c->client, NULL, NULL);
	if (reuse) {
		c->e->requests++;
		c->reused = true;
		memcpy(c->addr, c->up_addr, sizeof(c->addr));
		start_forward(c);
		return;
	}
	open_upstream(c);
}

/*
 * SECURITY: a placeholder the body scanner found goes no further: the
 * upstream connection (if the request already went up) is cut before the
 * rest of the body, and the refusal is recorded as for a header. True when
 * the request was refused.
 */
static bool body_refused(struct conn *c)
{
	const struct secret *s = NULL;
	_cleanup_free_ char *why = NULL;

	if (c->head.scan == NULL || c->scan.found < 0)
		return false;
	for (size_t i = 0; i < c->e->n_secrets && s == NULL; i++) {
		if (c->e->secrets[i].placeholder == c->scan.needles[c->scan.found])
			s = &c->e->secrets[i];
	}
	why = pdk_xasprintf("the placeholder of secret '%s' may not be sent to %s port %u (in "
			    "the request body; no network.credentials rule names it)",
			    s ? s->name : "?", c->head.host, c->head.port);
	if (s != NULL)
		emit_credential(c, s, NULL, false, why);
	close_up(c);
	if (!c->answered) {
		answer(c, false, 403, why);
		return true;
	}
	emit_connect(c, false, 403, why);
	finish(c);
	return true;
}

static void go_upstream(struct conn *c)
{
	if (c->intercept)
		intercepted_request(c);
	else
		decide(c);
}

/*
 * ST_BODY: the request's body is held (HOLD_MAX at most) and scanned before
 * anything of the request goes up, so that a refused one sends nothing,
 * and a request on a kept connection can be sent again (retry()). A longer
 * body goes up as it comes once HOLD_MAX is held, scanned on its way; so
 * does one whose client waits for "100 Continue".
 */
static void read_body(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->client);

	while (!c->head.msg_done && !c->head.expect_continue && evbuffer_get_length(in) > 0 &&
	       evbuffer_get_length(c->held) < HOLD_MAX) {
		size_t room = hold_room(c);
		size_t len = evbuffer_get_contiguous_space(in);
		ssize_t n;

		if (room == 0) {
			/* A chunked body (its length unknown), and the bound is reached. */
			hold_refuse(c, 0);
			return;
		}
		len = len < room ? len : room;
		n = pdk__egress_body_feed(&c->head, (const char *)evbuffer_pullup(in, (ssize_t)len),
					  len);
		if (body_refused(c))
			return;
		if (n < 0) {
			answer(c, false, 400, "the request body is malformed");
			return;
		}
		(void)evbuffer_remove_buffer(in, c->held, (size_t)n);
		charge(c, evbuffer_get_length(c->held));
		if ((size_t)n < len && !c->head.msg_done)
			return; /* the parser wants more */
	}
	if (c->head.msg_done || c->head.expect_continue || evbuffer_get_length(c->held) >= HOLD_MAX)
		go_upstream(c);
}

static void client_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	size_t scan = len < PDK__EGRESS_HEAD_MAX ? len : PDK__EGRESS_HEAD_MAX;
	const char *data;
	int n;

	if (c->state == ST_BODY) {
		read_body(c);
		return;
	}
	data = (const char *)evbuffer_pullup(in, (ssize_t)scan);
	n = c->intercept ? pdk__egress_head_parse_origin(&c->head, data, scan, c->tunnel_host,
							 c->tunnel_port)
			 : pdk__egress_head_parse(&c->head, data, scan);
	if (n == 0)
		return;
	if (n < 0) {
		answer(c, false, c->head.status, c->head.reason);
		return;
	}
	c->t_start = pdk_now_mono_ns();
	if (!c->head.connect) {
		struct rewrite r = {0};

		if (apply_credentials(c, data, &r) < 0) {
			rewrite_release(&r);
			return;
		}
		/* The upstream connection may serve this client's next request too. */
		c->head.upstream_keep_alive = c->head.keep_alive;
		c->up_head = pdk__egress_head_upstream(&c->head, data, &r.rw, &c->up_head_len);
		rewrite_release(&r);
		if (c->up_head == NULL) {
			answer(c, false, c->head.status, c->head.reason);
			return;
		}
	}
	evbuffer_drain(in, (size_t)n);
	if (c->head.connect) {
		decide(c);
		return;
	}
	if (!hold_reserve(c))
		return;
	c->state = ST_BODY;
	read_body(c);
}

static void client_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return; /* an intercepted tunnel: the sandbox's TLS handshake is done */
	if ((what & BEV_EVENT_TIMEOUT) && c->state == ST_BODY) {
		answer(c, false, 400, "the request body did not arrive in time");
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
		answer(c, false, 400, "the request head did not arrive in time");
		return;
	}
	if (c->intercept && (what & BEV_EVENT_ERROR))
		client_tls_failed(c);
	conn_free(c); /* EOF, error, or an idle keep-alive connection */
}

/* ---- connections ---- */

static void conn_free(struct conn *c)
{
	struct pdk_egress *e = c->e;

	if (c->dns != NULL)
		evdns_getaddrinfo_cancel(c->dns); /* calls resolved() with EAI_CANCEL */
	if (c->head.host != NULL && c->state != ST_HEAD && c->state != ST_BODY &&
	    c->state != ST_CLOSING)
		emit_connect(c, true, 0, "closed");
	close_up(c);
	if (c->tun != NULL)
		tunnel_free(c->tun);
	if (c->client != NULL && c->intercept)
		tls_close_notify(c->client);
	if (c->client != NULL)
		bufferevent_free(c->client);
	/* SECURITY: the sandbox cannot make the supervisor hold more than MAX_CLIENTS. */
	if (e->n_clients-- == MAX_CLIENTS && !e->listening && e->listener != NULL) {
		evconnlistener_enable(e->listener);
		e->listening = true;
	}
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		e->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	pdk__egress_head_release(&c->head);
	free(c->up_head);
	free(c->replay);
	unhold(c);
	if (c->held != NULL)
		evbuffer_free(c->held);
	free(c->tunnel_host);
	free(c);
}

static void accepted(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		     void *arg)
{
	struct pdk_egress *e = arg;
	struct conn *c = pdk_xcalloc(1, sizeof(*c));
	struct timeval head = {HEAD_TIMEOUT_S, 0};

	(void)l;
	(void)sa;
	(void)len;
	c->e = e;
	c->state = ST_HEAD;
	c->t_start = pdk_now_mono_ns();
	c->client = bufferevent_socket_new(e->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->held = evbuffer_new();
	if (c->client == NULL || c->held == NULL) {
		if (c->client != NULL)
			bufferevent_free(c->client);
		else
			(void)close(fd);
		if (c->held != NULL)
			evbuffer_free(c->held);
		free(c);
		return;
	}
	c->next = e->conns;
	if (e->conns != NULL)
		e->conns->prev = c;
	e->conns = c;
	if (++e->n_clients == MAX_CLIENTS) {
		evconnlistener_disable(e->listener);
		e->listening = false;
	}
	no_delay(c->client);
	bufferevent_setcb(c->client, client_read, NULL, client_event, c);
	bufferevent_set_timeouts(c->client, &head, NULL);
	/*
	 * Reading only: enabling EV_WRITE with nothing to write costs two
	 * epoll_ctl() calls and a wakeup. Whatever writes to the client
	 * enables it (finish(), start_forward()); a tunnel writes itself.
	 */
	bufferevent_enable(c->client, EV_READ);
}

/* An accept() error (EMFILE, ENOBUFS): pause instead of spinning on a readable socket. */
static void accept_failed(struct evconnlistener *l, void *arg)
{
	struct pdk_egress *e = arg;
	struct timeval t = {0, ACCEPT_PAUSE_MS * 1000};

	evconnlistener_disable(l);
	e->listening = false;
	(void)event_add(e->resume, &t);
}

static void accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_egress *e = arg;

	(void)fd;
	(void)what;
	if (e->n_clients < MAX_CLIENTS && !e->listening) {
		evconnlistener_enable(e->listener);
		e->listening = true;
	}
}

/* ---- lifecycle ---- */

static void woken(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_egress *e = arg;

	(void)fd;
	(void)what;
	while (e->conns != NULL)
		conn_free(e->conns);
	event_base_loopbreak(e->base);
}

static void *loop_main(void *arg)
{
	struct pdk_egress *e = arg;

	(void)event_base_dispatch(e->base);
	return NULL;
}

static void quiet_log(int severity, const char *msg)
{
	(void)severity;
	(void)msg; /* libevent's own warnings would go to the sandboxed command's stderr */
}

static int load_local_addrs(struct pdk_egress *e, struct pdk_error **err)
{
	struct ifaddrs *ifa = NULL;

	if (getifaddrs(&ifa) < 0)
		return pdk_error_set(err, errno, "cannot list the host's addresses");
	for (struct ifaddrs *i = ifa; i != NULL && e->n_local < MAX_LOCAL_ADDRS; i = i->ifa_next) {
		if (i->ifa_addr == NULL ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		memcpy(&e->local[e->n_local++], i->ifa_addr,
		       i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
							 : sizeof(struct sockaddr_in6));
	}
	freeifaddrs(ifa);
	return 0;
}

static int setup_dns(struct pdk_egress *e, struct pdk_error **err)
{
	const char *resolv = e->cfg.resolv_conf;
	const char *hosts = e->cfg.hosts;
	int rc;

	e->dns = evdns_base_new(e->base, 0);
	if (e->dns == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot create the DNS resolver");
	rc = evdns_base_resolv_conf_parse(e->dns, DNS_OPTIONS_ALL & ~DNS_OPTION_HOSTSFILE,
					  resolv ? resolv : "/etc/resolv.conf");
	/* 6: no nameserver listed (evdns then asks 127.0.0.1); 1: the default file is missing. */
	if (rc != 0 && rc != 6 && !(rc == 1 && resolv == NULL))
		return pdk_error_setx(err, EINVAL, "cannot read the resolver configuration '%s'",
				      resolv ? resolv : "/etc/resolv.conf");
	if (evdns_base_load_hosts(e->dns, hosts) != 0 && hosts != NULL)
		return pdk_error_setx(err, EINVAL, "cannot read the hosts file '%s'", hosts);
	return 0;
}

static size_t add_secret(struct pdk_egress *e, const char *name, struct pdk_error **err)
{
	_cleanup_free_ char *var = pdk_xasprintf("%s%s", PDK_EGRESS_SECRET_PREFIX, name);
	const char *value;
	struct secret *s;

	for (size_t i = 0; i < e->n_secrets; i++) {
		if (strcmp(e->secrets[i].name, name) == 0)
			return i;
	}
	for (char *p = var; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	value = pdk_env_get(e->cfg.secrets_env, var);
	/* SECURITY: fail closed; a value that could end the header line is refused. */
	if (value == NULL || *value == '\0' || strpbrk(value, "\r\n") != NULL) {
		(void)pdk_error_setx(err, ENOKEY,
				     "secret '%s': set %s in paddock's environment (one line, not "
				     "empty)",
				     name, var);
		return SIZE_MAX;
	}
	e->secrets = pdk_xrealloc(e->secrets, (e->n_secrets + 1) * sizeof(*e->secrets));
	s = &e->secrets[e->n_secrets];
	s->name = pdk_xstrdup(name);
	s->value = pdk_xstrdup(value);
	s->placeholder = pdk_egress_placeholder(name, e->cfg.sandbox_id ? e->cfg.sandbox_id : "");
	e->n_secrets++;
	/* The body scanner (egress-http.c) must be able to look for every placeholder. */
	if (e->n_secrets > PDK__EGRESS_SCAN_NEEDLES ||
	    strlen(s->placeholder) > PDK__EGRESS_SCAN_MAX) {
		(void)pdk_error_setx(err, E2BIG,
				     "secret '%s': at most %d secrets, of placeholders "
				     "of at most %d bytes",
				     name, PDK__EGRESS_SCAN_NEEDLES, PDK__EGRESS_SCAN_MAX);
		return SIZE_MAX;
	}
	return e->n_secrets - 1;
}

/* network.credentials -> creds and secrets; every secret must have its value. */
static int setup_credentials(struct pdk_egress *e, struct pdk_error **err)
{
	char *const *v = e->cfg.credentials;
	size_t n = 0;

	while (v != NULL && v[n] != NULL && v[n + 1] != NULL)
		n += 2;
	e->creds = pdk_xcalloc(n / 2 + 1, sizeof(*e->creds));
	for (size_t i = 0; i < n; i += 2) {
		struct cred *cr = &e->creds[e->n_creds];
		_cleanup_free_ char *secret = NULL;
		_cleanup_free_ char *why = NULL;
		_cleanup_free_ char *ref = NULL;
		const char *at;

		if (pdk_net_rule_parse(v[i], &cr->host, &why) < 0)
			return pdk_error_setx(err, EINVAL, "network.credentials: %s", why);
		e->n_creds++;
		if (pdk_net_cred_parse(v[i + 1], &cr->field, &secret, &why) < 0)
			return pdk_error_setx(err, EINVAL, "network.credentials: %s", why);
		cr->secret = add_secret(e, secret, err);
		if (cr->secret == SIZE_MAX)
			return -1;
		ref = pdk_xasprintf("${secret:%s}", secret);
		at = strstr(v[i + 1], ref);
		cr->line = pdk_xasprintf("%.*s%s%s", (int)(at - v[i + 1]), v[i + 1],
					 e->secrets[cr->secret].value, at + strlen(ref));
	}
	return 0;
}

static void free_credentials(struct pdk_egress *e)
{
	for (size_t i = 0; i < e->n_creds; i++) {
		pdk_net_rule_release(&e->creds[i].host);
		free(e->creds[i].field);
		if (e->creds[i].line != NULL)
			explicit_bzero(e->creds[i].line, strlen(e->creds[i].line));
		free(e->creds[i].line);
	}
	for (size_t i = 0; i < e->n_secrets; i++) {
		explicit_bzero(e->secrets[i].value, strlen(e->secrets[i].value));
		free(e->secrets[i].value);
		free(e->secrets[i].name);
		free(e->secrets[i].placeholder);
	}
	free(e->creds);
	free(e->secrets);
}

/* A trust store named by PADDOCK_EGRESS_CA_FILE must be readable: fail the start, not later. */
static int check_trust_store(const char *file, struct pdk_error **err)
{
	int fd;

	if (file == NULL || *file == '\0')
		return 0;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pdk_error_set(err, errno, "PADDOCK_EGRESS_CA_FILE '%s'", file);
	(void)close(fd);
	return 0;
}

static int start_thread(struct pdk_egress *e, struct pdk_error **err)
{
	sigset_t all, old;
	int rc;

	/* The loop's thread takes no signal: the supervisor's signalfd gets them all. */
	sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&e->thread, NULL, loop_main, e);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return pdk_error_set(err, rc, "cannot start the egress proxy thread");
	e->running = true;
	return 0;
}

static int setup(struct pdk_egress *e, int listen_fd, struct pdk_error **err)
{
	int rc;

	_cleanup_close_ int fd = listen_fd;

	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		return pdk_error_set(err, errno, "egress listening socket");
	e->base = event_base_new();
	if (e->base == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot create the egress event loop");
	e->listener = evconnlistener_new(e->base, accepted, e, LEV_OPT_CLOSE_ON_FREE, -1, fd);
	if (e->listener == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot listen for the sandbox's connections");
	fd = -1; /* the listener owns it now */
	e->listening = true;
	evconnlistener_set_error_cb(e->listener, accept_failed);
	e->resume = evtimer_new(e->base, accept_resume, e);
	if (e->resume == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot create the egress accept timer");
	if (pipe2(e->wake_fd, O_CLOEXEC | O_NONBLOCK) < 0)
		return pdk_error_set(err, errno, "pipe");
	e->wake = event_new(e->base, e->wake_fd[0], EV_READ, woken, e);
	if (e->wake == NULL || event_add(e->wake, NULL) < 0)
		return pdk_error_setx(err, ENOMEM, "cannot create the egress wake-up event");
	rc = load_local_addrs(e, err);
	if (rc == 0)
		rc = setup_hold(e, err);
	if (rc == 0)
		rc = setup_credentials(e, err);
	if (rc == 0)
		rc = setup_dns(e, err);
	if (rc == 0 && e->cfg.ca != NULL)
		rc = check_trust_store(e->cfg.ca_file, err);
	if (rc == 0)
		rc = start_thread(e, err);
	return rc;
}

struct pdk_egress *pdk_egress_start(const struct pdk_egress_config *cfg, int listen_fd,
				    struct pdk_error **err)
{
	struct pdk_egress *e = pdk_xcalloc(1, sizeof(*e));

	event_set_log_callback(quiet_log);
	e->cfg = *cfg;
	e->wake_fd[0] = e->wake_fd[1] = -1;
	if (setup(e, listen_fd, err) < 0) {
		pdk_egress_stop(e);
		(void)pdk_error_wrap(err, "egress proxy");
		return NULL;
	}
	return e;
}

void pdk_egress_stop(struct pdk_egress *e)
{
	if (e == NULL)
		return;
	if (e->running) {
		/* The loop frees every connection (each gets its event) and returns. */
		(void)!write(e->wake_fd[1], "x", 1);
		(void)pthread_join(e->thread, NULL);
	}
	while (e->conns != NULL)
		conn_free(e->conns);
	if (e->wake != NULL)
		event_free(e->wake);
	if (e->resume != NULL)
		event_free(e->resume);
	if (e->listener != NULL)
		evconnlistener_free(e->listener);
	if (e->dns != NULL)
		evdns_base_free(e->dns, 1);
	if (e->base != NULL)
		event_base_free(e->base);
	if (e->wake_fd[0] >= 0)
		(void)close(e->wake_fd[0]);
	if (e->wake_fd[1] >= 0)
		(void)close(e->wake_fd[1]);
	free_credentials(e);
	pdk_egress_tls_ctx_free(e->tls_client);
	free(e->tls_error);
	free(e);
}

/*
 * SECURITY: the proxy resolves with evdns only (the resolver configuration
 * and hosts file named in docs/egress.md). libevent's evutil also holds a
 * path to the C library's blocking resolver, which in a static binary would
 * load NSS modules at run time; the static paddock binary is linked with
 * --wrap for these three (meson.build), so that path fails instead.
 */
struct addrinfo;
struct servent;
struct protoent;
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);
struct servent *__wrap_getservbyname(const char *name, const char *proto);
struct protoent *__wrap_getprotobynumber(int proto);

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	(void)node;
	(void)service;
	(void)hints;
	*res = NULL;
	return -4; /* EAI_FAIL */
}

struct servent *__wrap_getservbyname(const char *name, const char *proto)
{
	(void)name;
	(void)proto;
	return NULL;
}

struct protoent *__wrap_getprotobynumber(int proto)
{
	(void)proto;
	return NULL;
}
