/*
 * guard.c - the request guard's framer (guard.h): libhttp-parser reads the
 * client's bytes and writes what evhttp may see. The connection side (the
 * bufferevent filter, the answer) is guard-conn.c.
 */
#include "common.h"
#include "base.h"
#include "guard.h"

#include <http_parser.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NO_UPGRADES                                                                           \
	"protocol upgrades (Upgrade: h2c, websocket) are not served: send HTTP/1.1 requests " \
	"without an Upgrade header"

enum phase { PHASE_IDLE, PHASE_HEAD, PHASE_BODY_LENGTH, PHASE_BODY_CHUNKED };

struct pdk_guard {
	http_parser parser;
	uint64_t max_body;
	size_t max_headers;
	enum phase phase;
	struct evbuffer *out;  /* during a feed: where evhttp's bytes go (borrowed) */
	struct evbuffer *src;  /* during pdk__guard_feed_buffer: the client's bytes (borrowed) */
	const char *piece;     /* ... the piece of src being parsed */
	size_t removed;        /* ... and how much of it has left src already */
	struct evbuffer *url;  /* the request target as received */
	struct evbuffer *hdrs; /* "Name: value\r\n"... as parsed */
	struct evbuffer *ws;   /* the SP/HTAB run at the current value's end, held back */
	size_t head_len;       /* bytes of the current request line and headers */
	uint64_t body_len;     /* body bytes of the current request passed on */
	/* The header being read. */
	char name[32], value[64];
	size_t name_len, value_len;
	bool name_long, value_long, in_value, any_header;
	/* What the current request's headers said. */
	unsigned n_te, n_expect, n_upgrade;
	bool te_chunked, expect_continue;
	/* Requests begun by the parser (1, 2, ...); heads passed on; the refused one's number. */
	uint64_t begun, heads, refused_seq;
	/* The refusal. */
	enum pdk_guard_verdict verdict;
	int status;
	const char *code;
	char field[32];
	char msg[200];
};

static void add(struct evbuffer *b, const void *data, size_t len)
{
	if (evbuffer_add(b, data, len) < 0)
		pdk_oom();
}

static void add_str(struct evbuffer *b, const char *s)
{
	add(b, s, strlen(s));
}

/* ---- refusals ---- */

static int refuse(struct pdk_guard *g, enum pdk_guard_verdict v, const char *field, const char *fmt,
		  ...) PDK_PRINTF(4, 5);

static int refuse(struct pdk_guard *g, enum pdk_guard_verdict v, const char *field, const char *fmt,
		  ...)
{
	static const struct {
		int status;
		const char *code;
	} map[] = {
		[PDK_GUARD_TOO_LARGE] = {413, "too_large"},
		[PDK_GUARD_HEAD_TOO_LARGE] = {431, "too_large"},
		[PDK_GUARD_BAD_REQUEST] = {400, "bad_request"},
		[PDK_GUARD_METHOD] = {405, "bad_request"},
		[PDK_GUARD_EXPECT] = {417, "bad_request"},
	};
	va_list ap;

	if (g->verdict != PDK_GUARD_PASS)
		return -1;
	g->verdict = v;
	/* The refused request is the one begun, or (a malformed start) the next one. */
	g->refused_seq = g->phase == PHASE_IDLE ? g->begun + 1 : g->begun;
	g->status = map[v].status;
	g->code = map[v].code;
	(void)snprintf(g->field, sizeof(g->field), "%s", field);
	va_start(ap, fmt);
	(void)vsnprintf(g->msg, sizeof(g->msg), fmt, ap);
	va_end(ap);
	return -1; /* stops the parser */
}

/*
 * The stand-in evhttp receives instead of the refused request: a request of
 * its own when nothing of the refused one was passed on, else the end of the
 * chunked body evhttp is reading. pdk_http_guard_answer() knows it by its place
 * among the connection's requests (refused_seq), not by its content: nothing
 * a client sends can pass for a stand-in. A Content-Length body is never
 * refused half-way: its length was checked before any of it was passed on.
 */
static void stand_in(struct pdk_guard *g, struct evbuffer *out)
{
	if (g->phase == PHASE_BODY_CHUNKED)
		add_str(out, "0\r\n\r\n");
	else
		add_str(out, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
}

/* ---- the parser's callbacks ---- */

static struct pdk_guard *guard_of(http_parser *p)
{
	return p->data;
}

static int head_grow(struct pdk_guard *g, size_t len)
{
	g->head_len += len;
	if (g->head_len > g->max_headers)
		return refuse(g, PDK_GUARD_HEAD_TOO_LARGE, "headers",
			      "the request line and headers are larger than %zu bytes",
			      g->max_headers);
	return 0;
}

static int on_message_begin(http_parser *p)
{
	struct pdk_guard *g = guard_of(p);

	g->phase = PHASE_HEAD;
	g->head_len = 0;
	g->body_len = 0;
	g->name_len = g->value_len = 0;
	g->name_long = g->value_long = g->in_value = g->any_header = false;
	g->n_te = g->n_expect = g->n_upgrade = 0;
	g->te_chunked = g->expect_continue = false;
	g->begun++;
	if (evbuffer_drain(g->url, evbuffer_get_length(g->url)) < 0 ||
	    evbuffer_drain(g->hdrs, evbuffer_get_length(g->hdrs)) < 0 ||
	    evbuffer_drain(g->ws, evbuffer_get_length(g->ws)) < 0)
		pdk_oom();
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct pdk_guard *g = guard_of(p);

	if (head_grow(g, len) < 0)
		return -1;
	add(g->url, at, len);
	return 0;
}

static bool value_is(const struct pdk_guard *g, const char *want)
{
	size_t a = 0, b = g->value_len;

	if (g->value_long)
		return false;
	while (a < b && (g->value[a] == ' ' || g->value[a] == '\t'))
		a++;
	while (b > a && (g->value[b - 1] == ' ' || g->value[b - 1] == '\t'))
		b--;
	return b - a == strlen(want) && strncasecmp(g->value + a, want, b - a) == 0;
}

static bool name_is(const struct pdk_guard *g, const char *want)
{
	return !g->name_long && g->name_len == strlen(want) &&
	       strncasecmp(g->name, want, g->name_len) == 0;
}

/* One header is complete: note what evhttp will act on, end its line. */
static void header_done(struct pdk_guard *g)
{
	if (!g->any_header)
		return;
	if (!g->in_value)
		add_str(g->hdrs, ":");
	/* The value's trailing whitespace is not part of it (RFC 9110 section 5.5). */
	if (evbuffer_drain(g->ws, evbuffer_get_length(g->ws)) < 0)
		pdk_oom();
	add_str(g->hdrs, "\r\n");
	if (name_is(g, "transfer-encoding")) {
		g->n_te++;
		g->te_chunked = value_is(g, "chunked");
	} else if (name_is(g, "expect") && g->n_expect++ == 0) {
		g->expect_continue = value_is(g, "100-continue");
	} else if (name_is(g, "upgrade")) {
		g->n_upgrade++;
	}
	g->name_len = g->value_len = 0;
	g->name_long = g->value_long = g->in_value = false;
}

/*
 * The start of a header's name or value, kept in a fixed buffer for the
 * checks: a piece that does not fit marks it too long, and its length
 * still counts.
 */
static void keep(char *buf, size_t cap, size_t *len, bool *too_long, const char *at, size_t n)
{
	if (*len + n > cap)
		*too_long = true;
	else
		memcpy(buf + *len, at, n);
	*len += n;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct pdk_guard *g = guard_of(p);

	if (head_grow(g, len + 4) < 0)
		return -1;
	if (g->in_value || !g->any_header) {
		header_done(g);
		g->any_header = true;
	}
	keep(g->name, sizeof(g->name), &g->name_len, &g->name_long, at, len);
	add(g->hdrs, at, len);
	return 0;
}

/*
 * Part of a value for evhttp, its trailing SP/HTAB held back until more of
 * the value comes: what evhttp gets must parse as it parsed here, and a
 * folded line's whitespace ("998" and a fold of a tab alone, which the
 * parser took for a Content-Length of 998) would otherwise end the value
 * ("998\t", which it refuses).
 */
static void add_value(struct pdk_guard *g, const char *at, size_t len)
{
	size_t end = len;

	while (end > 0 && (at[end - 1] == ' ' || at[end - 1] == '\t'))
		end--;
	if (end > 0) {
		if (evbuffer_add_buffer(g->hdrs, g->ws) < 0)
			pdk_oom();
		add(g->hdrs, at, end);
	}
	add(g->ws, at + end, len - end);
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct pdk_guard *g = guard_of(p);
	size_t i, start = 0;

	if (head_grow(g, len) < 0)
		return -1;
	if (!g->in_value) {
		add_str(g->hdrs, ": ");
		g->in_value = true;
	}
	keep(g->value, sizeof(g->value), &g->value_len, &g->value_long, at, len);
	/* A folded line's CR LF (obs-fold) becomes a space: one header line for evhttp. */
	for (i = 0; i <= len; i++)
		if (i == len || at[i] == '\r' || at[i] == '\n') {
			add_value(g, at + start, i - start);
			if (i < len)
				add_value(g, " ", 1);
			start = i + 1;
		}
	return 0;
}

static int check_head(struct pdk_guard *g)
{
	http_parser *p = &g->parser;
	_cleanup_free_ char *url = NULL;
	size_t n = evbuffer_get_length(g->url);
	struct evhttp_uri *u;

	if (p->method != HTTP_GET && p->method != HTTP_POST && p->method != HTTP_PUT &&
	    p->method != HTTP_DELETE)
		return refuse(g, PDK_GUARD_METHOD, "method",
			      "method '%s' is not allowed (GET, POST, PUT, DELETE)",
			      http_method_str((enum http_method)p->method));
	if (p->http_major != 1)
		return refuse(g, PDK_GUARD_BAD_REQUEST, "version", "HTTP/%u.%u is not served",
			      p->http_major, p->http_minor);
	/*
	 * SECURITY: an Upgrade header is refused whether or not Connection names
	 * it (libhttp-parser sets p->upgrade only when both do): evhttp passes
	 * the header on, and a proxy in front of the daemon may act on it.
	 */
	if (p->upgrade || g->n_upgrade > 0)
		return refuse(g, PDK_GUARD_BAD_REQUEST, "Upgrade", "%s", NO_UPGRADES);
	if (g->n_te > 1 || (g->n_te == 1 && !g->te_chunked))
		return refuse(g, PDK_GUARD_BAD_REQUEST, "Transfer-Encoding",
			      "the only transfer coding served is one 'chunked'");
	if (g->n_expect > 0 && !g->expect_continue && p->http_minor >= 1)
		return refuse(g, PDK_GUARD_EXPECT, "Expect",
			      "the only expectation served is '100-continue'");
	url = pdk_xcalloc(1, n + 1);
	if (evbuffer_copyout(g->url, url, n) != (ev_ssize_t)n)
		pdk_oom();
	/* evhttp parses the target this way: what it would refuse is refused here. */
	u = evhttp_uri_parse_with_flags(url, EVHTTP_URI_NONCONFORMANT);
	if (u != NULL)
		evhttp_uri_free(u);
	if (u == NULL)
		return refuse(g, PDK_GUARD_BAD_REQUEST, "url", "malformed request target");
	if ((p->flags & F_CONTENTLENGTH) && p->content_length > g->max_body)
		return refuse(g, PDK_GUARD_TOO_LARGE, "body",
			      "the body (%llu bytes) is larger than %llu bytes (--max-body)",
			      (unsigned long long)p->content_length,
			      (unsigned long long)g->max_body);
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct pdk_guard *g = guard_of(p);

	header_done(g);
	if (check_head(g) < 0)
		return -1;
	if (evbuffer_add_printf(g->out, "%s ", http_method_str((enum http_method)p->method)) < 0 ||
	    evbuffer_add_buffer(g->out, g->url) < 0 ||
	    evbuffer_add_printf(g->out, " HTTP/1.%u\r\n", p->http_minor) < 0 ||
	    evbuffer_add_buffer(g->out, g->hdrs) < 0)
		pdk_oom();
	add_str(g->out, "\r\n");
	g->heads++;
	g->phase = (p->flags & F_CHUNKED) ? PHASE_BODY_CHUNKED : PHASE_BODY_LENGTH;
	return 0;
}

static int on_chunk_header(http_parser *p)
{
	struct pdk_guard *g = guard_of(p);

	/* SECURITY: refused at the chunk's size, before its bytes are read. */
	if (p->content_length > g->max_body - g->body_len)
		return refuse(g, PDK_GUARD_TOO_LARGE, "body",
			      "the chunked body grows past %llu bytes (--max-body)",
			      (unsigned long long)g->max_body);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct pdk_guard *g = guard_of(p);

	/* http_parser may call with no bytes at a buffer's end: "0\r\n" would end the body. */
	if (len == 0)
		return 0;
	g->body_len += len;
	if (g->phase == PHASE_BODY_CHUNKED && evbuffer_add_printf(g->out, "%zx\r\n", len) < 0)
		pdk_oom();
	if (g->src != NULL) {
		/*
		 * Moved, not copied: the bytes before `at` in this piece were the
		 * head or chunk framing (already handled) and are dropped; the
		 * body's chains move to evhttp's side. Their memory stays valid
		 * while the parser reads on: a partly moved chain is copied, and
		 * a whole one (relinked into out, where "\r\n" may realign it)
		 * ends the piece, so the parser reads nothing more of it.
		 */
		size_t off = (size_t)(at - g->piece);

		if (evbuffer_drain(g->src, off - g->removed) < 0 ||
		    evbuffer_remove_buffer(g->src, g->out, len) != (int)len)
			pdk_oom();
		g->removed = off + len;
	} else {
		add(g->out, at, len);
	}
	if (g->phase == PHASE_BODY_CHUNKED)
		add_str(g->out, "\r\n");
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct pdk_guard *g = guard_of(p);

	/* The client's trailers are not passed on. */
	if (g->phase == PHASE_BODY_CHUNKED)
		add_str(g->out, "0\r\n\r\n");
	g->phase = PHASE_IDLE;
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_chunk_header = on_chunk_header,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- the framer ---- */

struct pdk_guard *pdk__guard_new(uint64_t max_body, size_t max_headers)
{
	struct pdk_guard *g = pdk_xcalloc(1, sizeof(*g));

	http_parser_init(&g->parser, HTTP_REQUEST);
	g->parser.data = g;
	g->max_body = max_body;
	g->max_headers = max_headers;
	g->url = evbuffer_new();
	g->hdrs = evbuffer_new();
	g->ws = evbuffer_new();
	if (g->url == NULL || g->hdrs == NULL || g->ws == NULL)
		pdk_oom();
	return g;
}

void pdk__guard_free(struct pdk_guard *g)
{
	if (g == NULL)
		return;
	evbuffer_free(g->url);
	evbuffer_free(g->hdrs);
	evbuffer_free(g->ws);
	free(g);
}

/* Which part of the request a parser error is about (table: -Wswitch-enum). */
static const char *errno_field(enum http_errno e)
{
	static const struct {
		enum http_errno e;
		const char *field;
	} map[] = {
		{HPE_INVALID_METHOD, "method"},
		{HPE_INVALID_URL, "url"},
		{HPE_INVALID_VERSION, "version"},
		{HPE_INVALID_CONTENT_LENGTH, "Content-Length"},
		{HPE_UNEXPECTED_CONTENT_LENGTH, "Content-Length"},
		{HPE_INVALID_TRANSFER_ENCODING, "Transfer-Encoding"},
		{HPE_INVALID_CHUNK_SIZE, "body"},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(map); i++)
		if (map[i].e == e)
			return map[i].field;
	return "headers";
}

enum pdk_guard_verdict pdk__guard_feed(struct pdk_guard *g, const char *data, size_t len,
				       struct evbuffer *out)
{
	enum http_errno e;
	size_t n;

	if (g->verdict != PDK_GUARD_PASS || len == 0)
		return g->verdict;
	g->out = out;
	n = http_parser_execute(&g->parser, &settings, data, len);
	e = HTTP_PARSER_ERRNO(&g->parser);
	g->out = NULL;
	if (g->verdict == PDK_GUARD_PASS && e == HPE_HEADER_OVERFLOW)
		(void)refuse(g, PDK_GUARD_HEAD_TOO_LARGE, "headers",
			     "the request line and headers are too large");
	else if (g->verdict == PDK_GUARD_PASS && e != HPE_OK)
		(void)refuse(g, PDK_GUARD_BAD_REQUEST, errno_field(e), "malformed request: %s",
			     http_errno_description(e));
	else if (g->verdict == PDK_GUARD_PASS && (n != len || g->parser.upgrade))
		(void)refuse(g, PDK_GUARD_BAD_REQUEST, "Upgrade", "%s", NO_UPGRADES);
	if (g->verdict != PDK_GUARD_PASS)
		stand_in(g, out);
	return g->verdict;
}

enum pdk_guard_verdict pdk__guard_feed_buffer(struct pdk_guard *g, struct evbuffer *src,
					      struct evbuffer *out)
{
	struct evbuffer_iovec v;

	/* One piece (the first chain) at a time: on_body may move its start away. */
	while (g->verdict == PDK_GUARD_PASS && evbuffer_peek(src, -1, NULL, &v, 1) > 0 &&
	       v.iov_len > 0) {
		g->src = src;
		g->piece = v.iov_base;
		g->removed = 0;
		(void)pdk__guard_feed(g, v.iov_base, v.iov_len, out);
		g->src = NULL;
		if (evbuffer_drain(src, v.iov_len - g->removed) < 0)
			pdk_oom();
	}
	/* SECURITY: after a refusal the client's bytes are dropped as they come, never kept. */
	if (evbuffer_drain(src, evbuffer_get_length(src)) < 0)
		pdk_oom();
	return g->verdict;
}

int pdk__guard_status(const struct pdk_guard *g)
{
	return g->status;
}

const char *pdk__guard_code(const struct pdk_guard *g)
{
	return g->code;
}

const char *pdk__guard_field(const struct pdk_guard *g)
{
	return g->field;
}

const char *pdk__guard_message(const struct pdk_guard *g)
{
	return g->msg;
}

uint64_t pdk__guard_refused_seq(const struct pdk_guard *g)
{
	return g->verdict == PDK_GUARD_PASS ? 0 : g->refused_seq;
}

uint64_t pdk__guard_heads(const struct pdk_guard *g)
{
	return g->heads;
}

bool pdk__guard_in_head(const struct pdk_guard *g)
{
	return g->verdict == PDK_GUARD_PASS && g->phase == PHASE_HEAD;
}

bool pdk__guard_between(const struct pdk_guard *g)
{
	return g->verdict == PDK_GUARD_PASS && g->phase == PHASE_IDLE;
}
