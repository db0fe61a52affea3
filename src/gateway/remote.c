/*
 * remote.c - the Streamable HTTP transport of a remote MCP server (a `url:`
 * server; docs/internals/gateway.md, "Remote upstreams").
 *
 * upstream.c speaks JSON-RPC with every server the same way; this file
 * only carries its messages. Each message goes out as one POST (a
 * connection of its own, closed after: an answer may be a long SSE stream,
 * and another call must not wait behind it), with Accept: application/json,
 * text/event-stream. The answer is one JSON body or an SSE stream whose
 * events are messages (progress before the answer); 202 answers a
 * notification. The session id the server gives with initialize's answer
 * goes with every later request, and so does MCP-Protocol-Version once
 * initialize is answered. Once initialized, a GET stream carries what the
 * server says on its own (list_changed); a server without one answers 405.
 *
 * Everything the server sends is untrusted: a response is parsed by
 * libhttp-parser, a message is capped at PDK_GW_UP_MESSAGE_MAX, the start
 * of an error body named in an error is cleaned and has the configured
 * header values taken out. Names are resolved with evdns (the C library's
 * resolver is not in the static binary); https is verified against the
 * system's store or the server's ca_file.
 *
 * The object is counted: the owner's reference, and one per exchange,
 * because the DELETE that ends the session is still on its way when the
 * owner has freed it.
 */
#include "common.h"
#include "gateway-internal.h"
#include "egress.h"
#include "mcp.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <http_parser.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <string.h>
#include <strings.h>

#define NAME_MAX_LEN       64         /* header names we look at are shorter */
#define VALUE_MAX_LEN      1024       /* Content-Type, Mcp-Session-Id */
#define SESSION_MAX_LEN    256        /* a session id longer than this is refused */
#define ERROR_BODY_KEEP    512        /* bytes of an error body kept to name it */
#define DRAIN_MAX          (4u << 20) /* bytes of an error body read before it is closed */
#define EXCERPT_MAX        160        /* bytes of a body named in an error */
#define SCRUB_MIN          8          /* a header's word shorter than this is not taken out */
#define DELETE_WAIT_S      2          /* the DELETE of a session, at most */
#define STREAM_RETRY_S     2          /* the GET stream, opened again after it ended */
#define STREAM_RETRY_MAX_S 30

enum xfer_kind {
	X_POST,   /* one message */
	X_GET,    /* the server's own stream */
	X_DELETE, /* the end of the session */
};

/* One HTTP exchange on a connection of its own. */
struct xfer {
	struct pdk__gw_remote *r;
	struct xfer *prev, *next;
	enum xfer_kind kind;
	json_int_t id; /* the request the POST carries (0: a notification or an answer) */
	bool init;     /* it carries initialize */
	struct bufferevent *bev;
	http_parser p;
	bool in_value, name_long, ended, dead;
	unsigned busy; /* its callbacks running: a free waits for the last */
	enum { H_OTHER, H_CTYPE, H_SESSION } field;
	struct pdk_buf name, ctype, session;
	bool sse;            /* a 2xx text/event-stream body */
	struct pdk_buf body; /* a 2xx JSON body, or the start of an error body */
	size_t drained;
	struct pdk_sse *events; /* SSE: the body's parser (base/sse.h) */
	struct event *timer;    /* the DELETE's limit */
	char *sid;              /* the session it was sent in (NULL: none) */
};

struct pdk__gw_remote {
	unsigned refs;
	struct event_base *base;
	struct evdns_base *dns;
	struct ssl_ctx_st *tls; /* https only */
	const struct pdk_gw_server *s;
	char *id; /* the server's id (s is the owner's: gone with it) */
	char *url;
	char *host, *authority, *target;
	bool is_ip;
	int port;
	char **headers; /* "Name: value" resolved (secret values in them) */
	char *session;  /* Mcp-Session-Id */
	char *version;  /* MCP-Protocol-Version, once initialized */
	struct pdk__gw_remote_cbs cbs;
	void *ctx;
	const struct pdk_log *log;
	struct xfer *xfers;
	struct xfer *stream; /* the GET stream, or NULL */
	struct event *retry; /* the GET stream's next try */
	unsigned retry_s;
	bool stopped; /* nothing more goes to the owner */
	bool freed;   /* the owner let it go: it only ends its session */
};

/* Transports freed by their owners that still end their sessions (pdk__gw_remote_ending()). */
static size_t ending;

static void remote_put(struct pdk__gw_remote *r);
static void exchange_done(struct xfer *x, unsigned status);
static int open_xfer(struct pdk__gw_remote *r, enum xfer_kind kind, const char *body, json_int_t id,
		     bool init, struct pdk_error **err);

/* ---- texts ---- */

/* `text` (taken) with every occurrence of the `n` bytes at `v` replaced by [REDACTED]. */
static char *cut(char *text, const char *v, size_t n)
{
	char *at;

	while (n >= SCRUB_MIN && (at = memmem(text, strlen(text), v, n)) != NULL) {
		char *out = pdk_xasprintf("%.*s[REDACTED]%s", (int)(at - text), text, at + n);

		free(text);
		text = out;
	}
	return text;
}

/*
 * SECURITY: `text` (taken) with the configured header values taken out, whole
 * and word by word (a server may echo what it got, or only the token of
 * "Bearer TOKEN"): it is logged and shown to the client.
 */
static char *scrub(const struct pdk__gw_remote *r, char *text)
{
	for (size_t i = 0; r->headers != NULL && r->headers[i] != NULL; i++) {
		const char *v = strchr(r->headers[i], ':') + 1;

		v += strspn(v, " \t");
		text = cut(text, v, strlen(v));
		for (const char *w = v; *w != '\0'; w += strspn(w, " \t")) {
			size_t n = strcspn(w, " \t");

			text = cut(text, w, n);
			w += n;
		}
	}
	return text;
}

/* The `n` bytes at `p` as one clean line to quote (at most EXCERPT_MAX bytes). Caller frees. */
static char *excerpt(const struct pdk__gw_remote *r, const char *p, size_t n)
{
	size_t len = 0;
	char *s = pdk_utf8_clean(p, n < EXCERPT_MAX ? n : EXCERPT_MAX, true, &len, NULL);

	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			s[i] = ' ';
	if (n > EXCERPT_MAX) {
		char *more = pdk_xasprintf("%s...", s);

		free(s);
		s = more;
	}
	return scrub(r, s);
}

static const char *method_of(enum xfer_kind kind)
{
	return kind == X_POST ? "POST" : kind == X_GET ? "GET" : "DELETE";
}

/* ---- telling the owner ---- */

static void tell_failed(struct pdk__gw_remote *r, int status, const char *fmt, ...)
	PDK_PRINTF(3, 4);

/* The transport broke: the owner is told once, and nothing after. */
static void tell_failed(struct pdk__gw_remote *r, int status, const char *fmt, ...)
{
	struct pdk_error e = {.status = status};
	va_list ap;

	if (r->stopped)
		return;
	va_start(ap, fmt);
	e.msg = scrub(r, pdk_xvasprintf(fmt, ap));
	va_end(ap);
	r->stopped = true;
	r->cbs.failed(r->ctx, &e);
	free(e.msg);
}

static void tell_end(struct pdk__gw_remote *r, json_int_t id, const struct pdk_error *e)
{
	if (!r->stopped && id != 0)
		r->cbs.request_end(r->ctx, id, e);
}

static void tell_message(struct pdk__gw_remote *r, const char *p, size_t n)
{
	if (!r->stopped)
		r->cbs.message(r->ctx, p, n);
}

/* ---- exchanges ---- */

static void xfer_release(struct xfer *x)
{
	struct pdk__gw_remote *r = x->r;

	if (x->bev != NULL)
		bufferevent_free(x->bev);
	if (x->timer != NULL)
		event_free(x->timer);
	pdk_buf_release(&x->name);
	pdk_buf_release(&x->ctype);
	pdk_buf_release(&x->session);
	pdk_buf_release(&x->body);
	pdk_sse_free(x->events);
	free(x->sid);
	free(x);
	remote_put(r);
}

/* The end of exchange `x`: unlinked now, freed once no callback of it runs. */
static void xfer_close(struct xfer *x)
{
	struct pdk__gw_remote *r = x->r;

	if (x->dead)
		return;
	x->dead = true;
	if (x->prev != NULL)
		x->prev->next = x->next;
	else
		r->xfers = x->next;
	if (x->next != NULL)
		x->next->prev = x->prev;
	if (r->stream == x)
		r->stream = NULL;
	if (x->bev != NULL)
		bufferevent_disable(x->bev, EV_READ | EV_WRITE);
	if (x->busy == 0)
		xfer_release(x);
}

/* ---- SSE ---- */

/* One event is complete: its data is a message (of an event named "message" or unnamed). */
static int sse_event(void *ud, const char *event, const char *id, const char *data, size_t len)
{
	struct xfer *x = ud;

	(void)id;
	/* An exchange closed, or an owner gone, by what a message led to: read no further. */
	if (x->dead || x->r->stopped)
		return 1;
	if (len > 0 && strcmp(event, "message") == 0)
		tell_message(x->r, data, len);
	return x->dead || x->r->stopped;
}

/* ---- the response ---- */

static struct xfer *xfer_of(http_parser *p)
{
	return p->data;
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
	struct xfer *x = xfer_of(hp);

	if (x->in_value) {
		pdk_buf_reset(&x->name);
		x->name_long = false;
		x->in_value = false;
	}
	if (pdk_buf_add(&x->name, at, len) < 0)
		x->name_long = true;
	return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
	struct xfer *x = xfer_of(hp);
	struct pdk_buf *to;

	if (!x->in_value) {
		const char *n = pdk_buf_str(&x->name);

		x->in_value = true;
		x->field = H_OTHER;
		if (!x->name_long && strcasecmp(n, "content-type") == 0)
			x->field = H_CTYPE;
		else if (!x->name_long && strcasecmp(n, "mcp-session-id") == 0)
			x->field = H_SESSION;
		if (x->field != H_OTHER)
			pdk_buf_reset(x->field == H_CTYPE ? &x->ctype : &x->session);
	}
	if (x->field == H_OTHER)
		return 0;
	to = x->field == H_CTYPE ? &x->ctype : &x->session;
	return pdk_buf_add(to, at, len) < 0 ? 1 : 0;
}

static bool ctype_is(const struct xfer *x, const char *type)
{
	size_t n = strlen(type);
	const char *ct = pdk_buf_str(&x->ctype);

	return x->ctype.len >= n && strncasecmp(ct, type, n) == 0 &&
	       (x->ctype.len == n || ct[n] == ';' || ct[n] == ' ');
}

/* A session id is visible ASCII (0x21 to 0x7E), as the transport requires. */
static bool session_ok(const struct pdk_buf *b)
{
	if (b->len == 0 || b->len > SESSION_MAX_LEN)
		return false;
	for (size_t i = 0; i < b->len; i++)
		if (pdk_buf_str(b)[i] < 0x21 || pdk_buf_str(b)[i] > 0x7e)
			return false;
	return true;
}

static int on_headers_complete(http_parser *hp)
{
	struct xfer *x = xfer_of(hp);
	struct pdk__gw_remote *r = x->r;
	bool ok = hp->status_code >= 200 && hp->status_code < 300;

	if (hp->status_code < 200)
		return 0; /* an interim answer: the real one follows */
	x->sse = ok && ctype_is(x, "text/event-stream");
	if (ok && x->init && x->session.len > 0 && r->session == NULL) {
		if (!session_ok(&x->session)) {
			tell_failed(r, EPROTO,
				    "server %s: answered initialize with an Mcp-Session-Id that is "
				    "not 1 to %u visible ASCII characters",
				    r->id, SESSION_MAX_LEN);
			return 1;
		}
		r->session = pdk_xstrdup(pdk_buf_str(&x->session));
	}
	if (x->kind == X_GET && ok && !x->sse) {
		tell_failed(r, EPROTO,
			    "server %s: answered its GET stream with '%s', not "
			    "text/event-stream",
			    r->id, pdk_buf_str(&x->ctype));
		return 1;
	}
	if (x->kind == X_GET && ok)
		r->retry_s = 0;
	return 0;
}

static int flood(struct xfer *x)
{
	struct pdk__gw_remote *r = x->r;

	/* SECURITY: a message without end would grow without bound: it ends the server. */
	tell_failed(r, E2BIG, "server %s: sent a message longer than %u MiB (it floods its output)",
		    r->id, PDK_GW_UP_MESSAGE_MAX >> 20);
	return 1;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
	struct xfer *x = xfer_of(hp);
	bool ok = hp->status_code >= 200 && hp->status_code < 300;

	if (hp->status_code < 200)
		return 0;
	if (x->sse)
		switch (pdk_sse_feed(x->events, at, len)) {
		case 0:
		case -ECANCELED:
			return 0;
		default:
			return flood(x);
		}
	if (ok)
		return pdk_buf_add(&x->body, at, len) < 0 ? flood(x) : 0;
	/* An error's body: its start names it; the rest is read and dropped, within a bound. */
	if (x->body.len < ERROR_BODY_KEEP &&
	    pdk_buf_add(&x->body, at,
			len < ERROR_BODY_KEEP - x->body.len ? len : ERROR_BODY_KEEP - x->body.len) <
		    0)
		pdk_oom();
	x->drained += len;
	if (x->drained <= DRAIN_MAX)
		return 0;
	x->ended = true;
	exchange_done(x, hp->status_code);
	return 1;
}

/* A POST that was answered with an error status: the request's end, or the session's. */
static void post_refused(struct xfer *x, unsigned status)
{
	struct pdk__gw_remote *r = x->r;
	_cleanup_free_ char *ex = excerpt(r, pdk_buf_str(&x->body), x->body.len);
	struct pdk_error e = {.status = EPROTO};

	/* The transport's rule: 404 to a request in a session is the session's end. */
	if (status == 404 && x->sid != NULL) {
		if (!r->stopped)
			r->cbs.session_lost(r->ctx, x->id,
					    r->session != NULL && strcmp(r->session, x->sid) == 0);
		return;
	}
	e.msg = pdk_xasprintf("server %s: %s %s answered HTTP %u%s%s%s", r->id, method_of(x->kind),
			      r->url, status, ex[0] ? ": '" : "", ex, ex[0] ? "'" : "");
	if (x->id != 0 || x->init)
		tell_end(r, x->id, &e);
	else
		pdk_log(r->log, PDK_LOG_WARN, "gateway: %s", e.msg);
	free(e.msg);
}

static void stream_retry(struct pdk__gw_remote *r);

static void exchange_done(struct xfer *x, unsigned status)
{
	struct pdk__gw_remote *r = x->r;
	bool ok = status >= 200 && status < 300;

	if (x->kind == X_GET && status == 404 && x->sid != NULL && r->session != NULL &&
	    strcmp(x->sid, r->session) == 0) {
		/* The session ended while no request was on its way: a new one now, not at the
		 * next call. */
		if (!r->stopped)
			r->cbs.session_lost(r->ctx, 0, true);
		return;
	}
	if (x->kind == X_GET) {
		/* 405: the server has no stream of its own; list_changed then waits for a call. */
		if (status != 405)
			stream_retry(r);
		return;
	}
	if (x->kind == X_DELETE)
		return;
	if (!ok) {
		post_refused(x, status);
		return;
	}
	/* An SSE event the stream's end cut short is dropped, as the format says. */
	if (!x->sse && x->body.len > 0)
		tell_message(r, pdk_buf_str(&x->body), x->body.len);
	tell_end(r, x->id, NULL);
}

static int on_message_complete(http_parser *hp)
{
	struct xfer *x = xfer_of(hp);

	if (hp->status_code < 200) {
		pdk_buf_reset(&x->ctype);
		return 0;
	}
	x->ended = true;
	exchange_done(x, hp->status_code);
	return 1; /* one answer on this connection: the rest is not read */
}

static const http_parser_settings settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- the connection ---- */

/* Why exchange `x` broke, from its bufferevent's `what` (a new string). */
static char *broke_text(struct xfer *x, short what)
{
	struct pdk__gw_remote *r = x->r;
	int dns;

	if (x->bev == NULL) /* bytes fed without a connection (pdk__gw_remote_feed()) */
		return pdk_xasprintf("%s %s: the server closed the connection before it answered",
				     method_of(x->kind), r->url);
	dns = bufferevent_socket_get_dns_error(x->bev);
	unsigned long tls = r->tls != NULL ? bufferevent_get_openssl_error(x->bev) : 0;
	SSL *ssl = r->tls != NULL ? bufferevent_openssl_get_ssl(x->bev) : NULL;

	if (dns != 0)
		return pdk_xasprintf("cannot resolve %s: %s", r->host, evutil_gai_strerror(dns));
	if (ssl != NULL &&
	    (tls != 0 || SSL_get_verify_result(ssl) != X509_V_OK || !SSL_is_init_finished(ssl))) {
		_cleanup_free_ char *why = pdk_egress_tls_failure(ssl, tls);

		ERR_clear_error();
		return pdk_xasprintf("TLS with %s failed: %s", r->authority, why);
	}
	if ((what & BEV_EVENT_ERROR) && EVUTIL_SOCKET_ERROR() != 0)
		return pdk_xasprintf("cannot connect to %s: %s", r->authority,
				     evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	return pdk_xasprintf("%s %s: the server closed the connection before it answered",
			     method_of(x->kind), r->url);
}

/* The connection broke or closed: the answer it carried ends, or the whole transport. */
static void broke(struct xfer *x, short what)
{
	struct pdk__gw_remote *r = x->r;
	_cleanup_free_ char *why = NULL;

	/* A body that ends with the connection (no length given) ends here. */
	if ((what & BEV_EVENT_EOF) && !x->ended)
		(void)http_parser_execute(&x->p, &settings, NULL, 0);
	if (x->ended || x->dead || r->stopped)
		return;
	if (x->kind == X_DELETE)
		return;
	if (x->kind == X_GET && x->p.status_code >= 200) {
		stream_retry(r);
		return;
	}
	why = broke_text(x, what);
	tell_failed(r, ENOTCONN, "server %s: %s", r->id, why);
}

/* `n` bytes of the answer to exchange `x` parsed: true when they are not HTTP/1.1. */
static bool parse(struct xfer *x, const char *p, size_t n)
{
	size_t done = http_parser_execute(&x->p, &settings, p, n);

	return done != n && !x->ended;
}

/* After a read's bytes were parsed (the reader holds `x` and its transport once each). */
static void read_done(struct xfer *x, bool broken)
{
	struct pdk__gw_remote *r = x->r;

	if (broken && x->kind != X_DELETE)
		tell_failed(r, EPROTO, "server %s: sent a response that is not HTTP/1.1 (%s)",
			    r->id, http_errno_description(HTTP_PARSER_ERRNO(&x->p)));
	if (x->ended || r->stopped || broken)
		xfer_close(x);
	x->busy--;
	if (x->dead && x->busy == 0)
		xfer_release(x);
	remote_put(r);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct xfer *x = arg;
	struct pdk__gw_remote *r = x->r;
	struct evbuffer *in = bufferevent_get_input(bev);
	bool broken = false;

	r->refs++;
	x->busy++;
	while (!x->dead && !x->ended && !r->stopped && !broken && evbuffer_get_length(in) > 0) {
		size_t n = evbuffer_get_contiguous_space(in);

		broken = parse(x, (const char *)evbuffer_pullup(in, (ev_ssize_t)n), n);
		evbuffer_drain(in, n);
	}
	read_done(x, broken);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct xfer *x = arg;
	struct pdk__gw_remote *r = x->r;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return;
	r->refs++;
	x->busy++;
	broke(x, what);
	xfer_close(x);
	x->busy--;
	if (x->busy == 0)
		xfer_release(x);
	remote_put(r);
}

/* ---- requests ---- */

/* The request's head: ours first, then the configured headers (which cannot name ours). */
static void write_head(struct pdk__gw_remote *r, struct evbuffer *out, enum xfer_kind kind,
		       size_t body_len)
{
	evbuffer_add_printf(out,
			    "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: paddock-gateway/%s\r\n"
			    "Connection: close\r\n",
			    method_of(kind), r->target, r->authority, PDK_VERSION);
	if (kind == X_POST)
		evbuffer_add_printf(out,
				    "Accept: application/json, text/event-stream\r\n"
				    "Content-Type: application/json\r\nContent-Length: %zu\r\n",
				    body_len);
	else if (kind == X_GET)
		evbuffer_add_printf(out, "Accept: text/event-stream\r\n");
	if (r->session != NULL)
		evbuffer_add_printf(out, "Mcp-Session-Id: %s\r\n", r->session);
	if (r->version != NULL)
		evbuffer_add_printf(out, "MCP-Protocol-Version: %s\r\n", r->version);
	/* SECURITY: only the configured headers: nothing of the downstream client's goes up. */
	for (size_t i = 0; r->headers != NULL && r->headers[i] != NULL; i++)
		evbuffer_add_printf(out, "%s\r\n", r->headers[i]);
	evbuffer_add(out, "\r\n", 2);
}

static struct bufferevent *connection(struct pdk__gw_remote *r, struct pdk_error **err)
{
	struct bufferevent *bev;
	SSL *ssl;

	if (r->tls == NULL)
		return bufferevent_socket_new(r->base, -1, BEV_OPT_CLOSE_ON_FREE);
	ssl = pdk_egress_tls_client_ssl(r->tls, r->host, r->is_ip);
	if (ssl == NULL) {
		(void)pdk_error_setx(err, EINVAL, "server %s: cannot set TLS up for %s", r->id,
				     r->host);
		return NULL;
	}
	bev = bufferevent_openssl_socket_new(r->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		SSL_free(ssl);
	else
		bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

static struct xfer *xfer_new(struct pdk__gw_remote *r, enum xfer_kind kind, json_int_t id,
			     bool init)
{
	struct xfer *x = pdk_xcalloc(1, sizeof(*x));

	r->refs++;
	*x = (struct xfer){.r = r, .kind = kind, .id = id, .init = init, .next = r->xfers};
	pdk_buf_init(&x->name, NAME_MAX_LEN);
	pdk_buf_init(&x->ctype, VALUE_MAX_LEN);
	pdk_buf_init(&x->session, VALUE_MAX_LEN);
	pdk_buf_init(&x->body, PDK_GW_UP_MESSAGE_MAX);
	x->events = pdk_sse_new(PDK_GW_UP_MESSAGE_MAX, sse_event, x);
	http_parser_init(&x->p, HTTP_RESPONSE);
	x->p.data = x;
	if (r->xfers != NULL)
		r->xfers->prev = x;
	r->xfers = x;
	return x;
}

/* Open one exchange: `body` (NULL: none) sent with the head, the answer read as it comes. */
static int open_xfer(struct pdk__gw_remote *r, enum xfer_kind kind, const char *body, json_int_t id,
		     bool init, struct pdk_error **err)
{
	struct xfer *x = xfer_new(r, kind, id, init);
	size_t len = body != NULL ? strlen(body) : 0;

	x->sid = r->session != NULL ? pdk_xstrdup(r->session) : NULL;
	x->bev = connection(r, err);
	if (x->bev == NULL) {
		xfer_close(x);
		return err != NULL && *err != NULL ? -(*err)->status
						   : pdk_error_setx(err, ENOMEM, "no memory");
	}
	bufferevent_setcb(x->bev, on_read, NULL, on_event, x);
	write_head(r, bufferevent_get_output(x->bev), kind, len);
	if (len > 0)
		evbuffer_add(bufferevent_get_output(x->bev), body, len);
	if (bufferevent_enable(x->bev, EV_READ | EV_WRITE) < 0 ||
	    bufferevent_socket_connect_hostname(x->bev, r->dns, AF_UNSPEC, r->host, r->port) < 0) {
		xfer_close(x);
		return pdk_error_setx(err, ECONNREFUSED, "server %s: cannot connect to %s", r->id,
				      r->authority);
	}
	return 0;
}

void pdk__gw_remote_feed(struct pdk__gw_remote *r, bool stream, json_int_t id, bool init,
			 const char *p, size_t n, size_t cut)
{
	struct xfer *x = xfer_new(r, stream ? X_GET : X_POST, id, init);
	bool broken = false;

	x->sid = r->session != NULL ? pdk_xstrdup(r->session) : NULL;
	if (stream)
		r->stream = x;
	r->refs++;
	x->busy++;
	/* The bytes in two reads, as a connection's would come, then its end. */
	if (cut > 0)
		broken = parse(x, p, cut);
	if (!broken && cut < n && !x->dead && !x->ended && !r->stopped)
		broken = parse(x, p + cut, n - cut);
	if (!broken && !x->dead) {
		broke(x, BEV_EVENT_EOF);
		xfer_close(x);
	}
	read_done(x, broken);
}

/* ---- the server's own stream ---- */

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct pdk__gw_remote *r = arg;
	_cleanup_error_ struct pdk_error *err = NULL;

	(void)fd;
	(void)what;
	if (r->stopped || r->stream != NULL)
		return;
	if (open_xfer(r, X_GET, NULL, 0, false, &err) < 0) {
		pdk_log(r->log, PDK_LOG_WARN, "gateway: %s", err->msg);
		stream_retry(r);
		return;
	}
	r->stream = r->xfers;
}

/* The GET stream ended or could not open: it is opened again after a while (2 s, 4 s ... 30 s). */
static void stream_retry(struct pdk__gw_remote *r)
{
	struct timeval tv = {0};

	if (r->stopped)
		return;
	r->retry_s = r->retry_s == 0 ? STREAM_RETRY_S : r->retry_s * 2;
	if (r->retry_s > STREAM_RETRY_MAX_S)
		r->retry_s = STREAM_RETRY_MAX_S;
	tv.tv_sec = r->retry_s;
	if (evtimer_add(r->retry, &tv) < 0)
		pdk_oom();
}

/* ---- the object ---- */

/* Wipe and free the resolved headers: secret values are in them. */
static void headers_free(char **h)
{
	for (size_t i = 0; h != NULL && h[i] != NULL; i++)
		explicit_bzero(h[i], strlen(h[i]));
	pdk_strv_free(h);
}

static void remote_put(struct pdk__gw_remote *r)
{
	if (--r->refs > 0)
		return;
	if (r->freed)
		ending--;
	event_free(r->retry);
	if (r->dns != NULL)
		evdns_base_free(r->dns, 0);
	pdk_egress_tls_ctx_free(r->tls);
	headers_free(r->headers);
	free(r->id);
	free(r->url);
	free(r->host);
	free(r->authority);
	free(r->target);
	free(r->session);
	free(r->version);
	free(r);
}

/* Scheme, host, port and target of the server's url. */
static int parse_url(struct pdk__gw_remote *r, const char *url, struct pdk_error **err)
{
	struct evhttp_uri *u = evhttp_uri_parse(url);
	const char *scheme = u ? evhttp_uri_get_scheme(u) : NULL;
	const char *host = u ? evhttp_uri_get_host(u) : NULL;
	const char *path = u ? evhttp_uri_get_path(u) : NULL;
	const char *query = u ? evhttp_uri_get_query(u) : NULL;
	bool https = scheme != NULL && strcasecmp(scheme, "https") == 0;
	struct in6_addr a6;
	struct in_addr a4;

	if (host == NULL || *host == '\0') {
		if (u != NULL)
			evhttp_uri_free(u);
		return pdk_error_set_field(err, EINVAL, "url", "server %s: '%s' names no host",
					   r->id, url);
	}
	r->host = pdk_xstrdup(host);
	r->port = evhttp_uri_get_port(u) > 0 ? evhttp_uri_get_port(u) : https ? 443 : 80;
	r->is_ip = inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
	r->authority = pdk_xasprintf(strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, r->port);
	r->target = pdk_xasprintf("%s%s%s", path && *path ? path : "/", query ? "?" : "",
				  query ? query : "");
	evhttp_uri_free(u);
	return https ? 1 : 0;
}

static int tls_setup(struct pdk__gw_remote *r, struct pdk_error **err)
{
	r->tls = pdk_egress_tls_client_ctx(r->s->ca_file, err);
	if (r->tls == NULL)
		return pdk_error_wrap(err, "servers.%s.ca_file", r->id);
	return 0;
}

struct pdk__gw_remote *pdk__gw_remote_new(struct event_base *base, const struct pdk_gw_server *s,
					  char *const *headers,
					  const struct pdk__gw_remote_cbs *cbs, void *ctx,
					  struct pdk_error **err)
{
	struct pdk__gw_remote *r = pdk_xcalloc(1, sizeof(*r));
	int https;

	*r = (struct pdk__gw_remote){.refs = 1, .base = base, .s = s, .cbs = *cbs, .ctx = ctx};
	r->id = pdk_xstrdup(s->id);
	r->url = pdk_xstrdup(s->url);
	r->headers = pdk_strv_dup(headers);
	r->retry = evtimer_new(base, on_retry, r);
	if (r->retry == NULL)
		pdk_oom();
	https = parse_url(r, s->url, err);
	if (https < 0 || (https == 1 && tls_setup(r, err) < 0)) {
		remote_put(r);
		return NULL;
	}
	/* SECURITY: names are resolved by evdns, never by the C library's resolver. */
	r->dns = evdns_base_new(base, 0);
	if (r->dns == NULL)
		pdk_oom();
	(void)evdns_base_resolv_conf_parse(r->dns, DNS_OPTIONS_ALL, "/etc/resolv.conf");
	return r;
}

void pdk__gw_remote_set_log(struct pdk__gw_remote *r, const struct pdk_log *log)
{
	r->log = log;
}

int pdk__gw_remote_send(struct pdk__gw_remote *r, const json_t *msg, struct pdk_error **err)
{
	_cleanup_free_ char *body = json_dumps(msg, JSON_COMPACT);
	const json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	bool request = method != NULL && json_is_integer(id);
	int rc;

	if (body == NULL)
		pdk_oom();
	if (r->stopped)
		return pdk_error_setx(err, ENOTCONN, "server %s: its transport ended", r->id);
	rc = open_xfer(r, X_POST, body, request ? json_integer_value(id) : 0,
		       request && strcmp(method, "initialize") == 0, err);
	return rc < 0 ? rc : 0;
}

void pdk__gw_remote_reset(struct pdk__gw_remote *r)
{
	free(steal_ptr(&r->session));
	free(steal_ptr(&r->version));
	if (r->stream != NULL)
		xfer_close(r->stream);
	event_del(r->retry);
	r->retry_s = 0;
}

void pdk__gw_remote_initialized(struct pdk__gw_remote *r, const char *version)
{
	free(r->version);
	r->version = pdk_xstrdup(version);
	if (r->stream == NULL && !evtimer_pending(r->retry, NULL))
		on_retry(-1, 0, r);
}

void pdk__gw_remote_abort(struct pdk__gw_remote *r, json_int_t id)
{
	for (struct xfer *x = r->xfers; x != NULL; x = x->next)
		if (x->kind == X_POST && x->id == id) {
			xfer_close(x);
			return;
		}
}

void pdk__gw_remote_stop(struct pdk__gw_remote *r)
{
	r->stopped = true;
	event_del(r->retry);
	while (r->xfers != NULL)
		xfer_close(r->xfers);
}

static void on_delete_limit(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	xfer_close(arg);
}

/* The session is over: DELETE it (a server without DELETE answers 405: nothing to do). */
static void end_session(struct pdk__gw_remote *r)
{
	struct timeval tv = {.tv_sec = DELETE_WAIT_S};
	struct xfer *x;

	if (r->session == NULL || open_xfer(r, X_DELETE, NULL, 0, false, NULL) < 0)
		return;
	x = r->xfers;
	x->timer = evtimer_new(r->base, on_delete_limit, x);
	if (x->timer == NULL || evtimer_add(x->timer, &tv) < 0)
		pdk_oom();
}

void pdk__gw_remote_free(struct pdk__gw_remote *r)
{
	if (r == NULL)
		return;
	pdk__gw_remote_stop(r);
	r->freed = true;
	ending++;
	end_session(r);
	remote_put(r);
}

size_t pdk__gw_remote_ending(void)
{
	return ending;
}
