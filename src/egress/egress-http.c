/*
 * egress-http.c - HTTP/1.1 request heads and message boundaries for the
 * egress proxy, on Debian's libhttp-parser. Nothing here parses HTTP by
 * hand: the library finds the method, target, fields and body framing;
 * this file only checks what the proxy accepts and rebuilds the head it
 * sends upstream.
 *
 * The head is parsed from the start of the buffered bytes each time more
 * arrive (it is at most PDK__EGRESS_HEAD_MAX bytes, so that costs little
 * and keeps every span pointing into one contiguous buffer). The parser
 * is paused in on_headers_complete: http_parser then returns the count up
 * to, not including, the head's final LF, which is fed on its own so the
 * parser's state moves to the body (or to the message's end).
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static struct pdk__egress_head *head_of(http_parser *p)
{
	return p->data;
}

static void extend(struct pdk__egress_span *s, const char *base, const char *at, size_t len)
{
	size_t off = (size_t)(at - base);

	if (s->len == 0)
		s->off = off;
	s->len = off + len - s->off;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	extend(&head_of(p)->url, head_of(p)->base, at, len);
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
	struct pdk__egress_head *h = head_of(p);

	if (h->in_value || h->n_headers == 0) {
		if (h->n_headers == PDK__EGRESS_HEADERS_MAX) {
			h->too_many = true;
			return 1;
		}
		h->n_headers++;
		h->in_value = false;
	}
	extend(&h->names[h->n_headers - 1], h->base, at, len);
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	struct pdk__egress_head *h = head_of(p);

	h->in_value = true;
	if (h->n_headers > 0)
		extend(&h->values[h->n_headers - 1], h->base, at, len);
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	head_of(p)->headers_done = true;
	http_parser_pause(p, 1);
	return 0;
}

static int on_message_complete(http_parser *p)
{
	head_of(p)->msg_done = true;
	http_parser_pause(p, 1);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct pdk__egress_head *h = head_of(p);

	/* Stop at the piece that completed a needle: the caller refuses the request. */
	if (h->scan != NULL && pdk__egress_scan_feed(h->scan, at, len))
		http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings req_settings = {
	.on_url = on_url,
	.on_body = on_body,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_headers_complete,
	.on_message_complete = on_message_complete,
};

static int fail(struct pdk__egress_head *h, int status, const char *reason)
{
	h->status = status;
	h->reason = reason;
	return -1;
}

static bool method_ok(enum http_method m)
{
	static const enum http_method ok[] = {HTTP_GET,    HTTP_HEAD,    HTTP_POST,  HTTP_PUT,
					      HTTP_DELETE, HTTP_OPTIONS, HTTP_PATCH, HTTP_CONNECT};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(ok); i++) {
		if (ok[i] == m)
			return true;
	}
	return false;
}

/* h->host, h->host_is_ip, h->ip from the URL's host field. */
static int set_host(struct pdk__egress_head *h, const char *s, size_t len)
{
	char buf[INET6_ADDRSTRLEN];
	struct sockaddr_in *v4 = (struct sockaddr_in *)&h->ip;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&h->ip;
	const char *why = NULL;

	if (len < sizeof(buf)) {
		memcpy(buf, s, len);
		buf[len] = '\0';
		if (inet_pton(AF_INET, buf, &v4->sin_addr) == 1) {
			v4->sin_family = AF_INET;
			h->host_is_ip = true;
		} else if (inet_pton(AF_INET6, buf, &v6->sin6_addr) == 1) {
			v6->sin6_family = AF_INET6;
			h->host_is_ip = true;
		}
		if (h->host_is_ip) {
			h->host = pdk_xstrdup(buf);
			return 0;
		}
	}
	if (pdk_net_host_normalize(s, len, &h->host, &why) < 0)
		return fail(h, 400, why);
	return 0;
}

/*
 * Inside an intercepted TLS connection: the target is in origin form
 * ("/path?query"), and the host is the tunnel's, which the allowlist
 * checked; the request cannot name another.
 */
static int check_origin_target(struct pdk__egress_head *h, const char *data)
{
	struct http_parser_url u;
	const char *url = data + h->url.off;

	if (h->connect)
		return fail(h, 405, "CONNECT inside a tunnel is not forwarded");
	http_parser_url_init(&u);
	if (h->url.len == 0 || url[0] != '/' || http_parser_parse_url(url, h->url.len, 0, &u) != 0)
		return fail(h, 400, "the request target is not a path (origin form)");
	h->path.off = h->url.off;
	h->path.len = h->url.len;
	if (u.field_set & (1 << UF_FRAGMENT))
		h->path.len = u.field_data[UF_FRAGMENT].off - 1;
	h->port = h->origin_port;
	return set_host(h, h->origin_host, strlen(h->origin_host));
}

static int check_target(struct pdk__egress_head *h, const char *data)
{
	struct http_parser_url u;
	const char *url = data + h->url.off;

	if (h->origin_host != NULL)
		return check_origin_target(h, data);
	http_parser_url_init(&u);
	if (h->url.len == 0 || http_parser_parse_url(url, h->url.len, h->connect, &u) != 0)
		return fail(h, 400, "the request target is not a valid URL");
	if (!(u.field_set & (1 << UF_HOST)))
		return fail(h, 400,
			    "the request target has no host: a proxy needs "
			    "'CONNECT host:port' or an absolute URL (http://host/path)");
	if (!h->connect) {
		const struct pdk__egress_span schema = {u.field_data[UF_SCHEMA].off,
							u.field_data[UF_SCHEMA].len};

		if (schema.len != 4 || strncasecmp(url + schema.off, "http", 4) != 0)
			return fail(h, 400,
				    "only http:// URLs are forwarded; use CONNECT for "
				    "https");
		if (u.field_set & (1 << UF_USERINFO))
			return fail(h, 400, "credentials in the URL are not forwarded");
	}
	if (h->connect && !(u.field_set & (1 << UF_PORT)))
		return fail(h, 400, "CONNECT needs host:port");
	h->port = (u.field_set & (1 << UF_PORT)) ? u.port : 80;
	if (h->port == 0)
		return fail(h, 400, "port 0 is not a valid port");
	if (u.field_set & (1 << UF_PATH)) {
		h->path.off = h->url.off + u.field_data[UF_PATH].off;
		h->path.len = u.field_data[UF_PATH].len;
		if (u.field_set & (1 << UF_QUERY))
			h->path.len = u.field_data[UF_QUERY].off + u.field_data[UF_QUERY].len -
				      u.field_data[UF_PATH].off;
	}
	return set_host(h, url + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len);
}

static bool span_is(const char *data, struct pdk__egress_span sp, const char *s)
{
	return sp.len == strlen(s) && strncasecmp(data + sp.off, s, sp.len) == 0;
}

/* Does the client wait for "100 Continue" before it sends the body? */
static bool wants_continue(const struct pdk__egress_head *h, const char *data)
{
	for (size_t i = 0; i < h->n_headers; i++) {
		if (span_is(data, h->names[i], "expect") &&
		    span_is(data, h->values[i], "100-continue"))
			return true;
	}
	return false;
}

/* After headers_complete: feed the head's final LF so the state moves past the head. */
static int finish_head(struct pdk__egress_head *h, const char *data, size_t n, size_t len)
{
	if (n >= len || (data[n] != '\n'))
		return fail(h, 400, "malformed request head");
	h->connect = h->p.method == HTTP_CONNECT;
	h->keep_alive = http_should_keep_alive(&h->p) != 0;
	if (!method_ok((enum http_method)h->p.method))
		return fail(h, 405, "this method is not forwarded");
	if (check_target(h, data) < 0)
		return -1;
	h->expect_continue = wants_continue(h, data);
	if (h->connect || h->p.upgrade) {
		h->msg_done = true; /* no body: a tunnel, or an upgrade the proxy refuses */
		return (int)n + 1;
	}
	http_parser_pause(&h->p, 0);
	h->base = data;
	(void)http_parser_execute(&h->p, &req_settings, data + n, 1);
	if (HTTP_PARSER_ERRNO(&h->p) != HPE_OK && HTTP_PARSER_ERRNO(&h->p) != HPE_PAUSED)
		return fail(h, 400, "malformed request head");
	/*
	 * The final LF moved the parser into the body (content_length is still the
	 * declared length) or past the message (no body). A request without
	 * Content-Length and not chunked has no body (RFC 9112 6.3).
	 */
	if (h->msg_done)
		h->body_len = 0;
	else if ((h->p.flags & F_CHUNKED) || h->p.content_length == ULLONG_MAX)
		h->body_len = UINT64_MAX;
	else
		h->body_len = h->p.content_length;
	return (int)n + 1;
}

static int head_parse(struct pdk__egress_head *h, const char *data, size_t len,
		      const char *origin_host, uint16_t origin_port)
{
	size_t scan = len < PDK__EGRESS_HEAD_MAX ? len : PDK__EGRESS_HEAD_MAX;
	size_t n;

	pdk__egress_head_release(h);
	h->origin_host = origin_host;
	h->origin_port = origin_port;
	http_parser_init(&h->p, HTTP_REQUEST);
	h->p.data = h;
	h->base = data;
	n = http_parser_execute(&h->p, &req_settings, data, scan);
	if (h->too_many)
		return fail(h, 431, "too many header fields");
	if (h->headers_done && HTTP_PARSER_ERRNO(&h->p) == HPE_PAUSED)
		return finish_head(h, data, n, len);
	if (HTTP_PARSER_ERRNO(&h->p) == HPE_INVALID_METHOD)
		return fail(h, 405, "unknown method");
	if (HTTP_PARSER_ERRNO(&h->p) == HPE_HEADER_OVERFLOW)
		return fail(h, 431, "the request head is too large");
	if (HTTP_PARSER_ERRNO(&h->p) != HPE_OK)
		return fail(h, 400, "malformed request head");
	if (scan == PDK__EGRESS_HEAD_MAX)
		return fail(h, 431, "the request head is too large");
	return 0;
}

int pdk__egress_head_parse(struct pdk__egress_head *h, const char *data, size_t len)
{
	return head_parse(h, data, len, NULL, 0);
}

int pdk__egress_head_parse_origin(struct pdk__egress_head *h, const char *data, size_t len,
				  const char *host, uint16_t port)
{
	return head_parse(h, data, len, host, port);
}

ssize_t pdk__egress_body_feed(struct pdk__egress_head *h, const char *data, size_t len)
{
	size_t n;

	if (h->msg_done || len == 0 || (h->scan != NULL && h->scan->found >= 0))
		return 0;
	http_parser_pause(&h->p, 0);
	h->base = data;
	n = http_parser_execute(&h->p, &req_settings, data, len);
	if (HTTP_PARSER_ERRNO(&h->p) != HPE_OK && HTTP_PARSER_ERRNO(&h->p) != HPE_PAUSED)
		return -1;
	return (ssize_t)n;
}

/* ---- placeholders in bodies ---- */

int pdk__egress_scan_init(struct pdk__egress_scan *s, const char *const *needles, size_t n)
{
	memset(s, 0, sizeof(*s));
	s->found = -1;
	if (n > PDK__EGRESS_SCAN_NEEDLES)
		return -1;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(needles[i]);

		if (len == 0 || len > PDK__EGRESS_SCAN_MAX)
			return -1;
		s->needles[i] = needles[i];
		s->lens[i] = len;
		if (len > s->maxlen)
			s->maxlen = len;
	}
	s->n = n;
	return 0;
}

static ssize_t scan_find(const struct pdk__egress_scan *s, const char *data, size_t len)
{
	for (size_t i = 0; i < s->n; i++) {
		if (memmem(data, len, s->needles[i], s->lens[i]) != NULL)
			return (ssize_t)i;
	}
	return -1;
}

/*
 * A needle is either inside `data`, or it starts in the kept tail and ends
 * in data's first maxlen - 1 bytes: both are searched, then the tail keeps
 * the last maxlen - 1 bytes of tail + data.
 */
bool pdk__egress_scan_feed(struct pdk__egress_scan *s, const char *data, size_t len)
{
	char joint[2 * PDK__EGRESS_SCAN_MAX];
	size_t keep = s->maxlen > 0 ? s->maxlen - 1 : 0;
	size_t head = len < keep ? len : keep;

	if (s->found >= 0 || s->n == 0)
		return s->found >= 0;
	memcpy(joint, s->tail, s->tail_len);
	memcpy(joint + s->tail_len, data, head);
	s->found = scan_find(s, joint, s->tail_len + head);
	if (s->found < 0)
		s->found = scan_find(s, data, len);
	if (len >= keep) {
		memcpy(s->tail, data + len - keep, keep);
		s->tail_len = keep;
	} else {
		size_t total = s->tail_len + len;
		size_t drop = total > keep ? total - keep : 0;

		memmove(joint, joint + drop, total - drop);
		memcpy(s->tail, joint, total - drop);
		s->tail_len = total - drop;
	}
	return s->found >= 0;
}

/* Fields the proxy consumes or that describe only the client's connection. */
static bool hop_by_hop(const char *name, size_t len, const char *conn, size_t conn_len)
{
	static const char *const drop[] = {"connection",
					   "keep-alive",
					   "proxy-connection",
					   "proxy-authorization",
					   "proxy-authenticate",
					   "te",
					   "trailer",
					   "upgrade",
					   "host"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(drop); i++) {
		if (strlen(drop[i]) == len && strncasecmp(drop[i], name, len) == 0)
			return true;
	}
	/* Fields named in Connection are hop-by-hop too (RFC 9110 7.6.1). */
	for (size_t i = 0; i < conn_len;) {
		size_t j = i, e;

		while (j < conn_len && conn[j] != ',')
			j++;
		while (i < j && (conn[i] == ' ' || conn[i] == '\t'))
			i++;
		e = j;
		while (e > i && (conn[e - 1] == ' ' || conn[e - 1] == '\t'))
			e--;
		if (e - i == len && strncasecmp(conn + i, name, len) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

static bool clean_bytes(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\r' || c == '\n' || c == '\0')
			return false;
	}
	return true;
}

static void head_append(FILE *f, const char *s, size_t len)
{
	if (len > 0)
		(void)fwrite(s, 1, len, f); /* a memstream: fclose() reports failure */
}

/* Append s[0..len) with every rw->from[i] replaced by rw->to[i]. */
static void append_swapped(FILE *f, const char *s, size_t len, const struct pdk__egress_rewrite *rw)
{
	while (len > 0) {
		size_t best = len, which = 0;

		for (size_t i = 0; rw != NULL && i < rw->n_swap; i++) {
			const char *at = memmem(s, len, rw->from[i], strlen(rw->from[i]));

			if (at != NULL && (size_t)(at - s) < best) {
				best = (size_t)(at - s);
				which = i;
			}
		}
		head_append(f, s, best);
		if (best == len)
			return;
		fputs(rw->to[which], f);
		best += strlen(rw->from[which]);
		s += best;
		len -= best;
	}
}

static bool dropped(const char *name, size_t len, const struct pdk__egress_rewrite *rw)
{
	for (size_t i = 0; rw != NULL && i < rw->n_drop; i++) {
		if (strlen(rw->drop[i]) == len && strncasecmp(rw->drop[i], name, len) == 0)
			return true;
	}
	return false;
}

char *pdk__egress_head_upstream(struct pdk__egress_head *h, const char *data,
				const struct pdk__egress_rewrite *rw, size_t *len)
{
	const char *conn = NULL;
	size_t conn_len = 0;
	char *buf = NULL;
	FILE *f;
	bool v6 = h->host_is_ip && h->ip.ss_family == AF_INET6;

	for (size_t i = 0; i < h->n_headers; i++) {
		if (!clean_bytes(data + h->names[i].off, h->names[i].len) ||
		    !clean_bytes(data + h->values[i].off, h->values[i].len)) {
			fail(h, 400, "a header field holds a line break");
			return NULL;
		}
		if (h->names[i].len == 10 &&
		    strncasecmp(data + h->names[i].off, "connection", 10) == 0) {
			conn = data + h->values[i].off;
			conn_len = h->values[i].len;
		}
	}
	f = open_memstream(&buf, len);
	if (f == NULL)
		pdk_oom();
	fputs(http_method_str((enum http_method)h->p.method), f);
	fputc(' ', f);
	if (h->path.len > 0)
		append_swapped(f, data + h->path.off, h->path.len, rw);
	else
		fputc('/', f);
	fprintf(f, " HTTP/1.1\r\nHost: %s%s%s", v6 ? "[" : "", h->host, v6 ? "]" : "");
	if (h->port != (h->origin_host != NULL ? 443 : 80))
		fprintf(f, ":%u", h->port);
	fputs("\r\n", f);
	for (size_t i = 0; i < h->n_headers; i++) {
		if (hop_by_hop(data + h->names[i].off, h->names[i].len, conn, conn_len) ||
		    dropped(data + h->names[i].off, h->names[i].len, rw))
			continue;
		head_append(f, data + h->names[i].off, h->names[i].len);
		fputs(": ", f);
		append_swapped(f, data + h->values[i].off, h->values[i].len, rw);
		fputs("\r\n", f);
	}
	for (size_t i = 0; rw != NULL && i < rw->n_extra; i++)
		fprintf(f, "%s\r\n", rw->extra[i]);
	fputs(h->upstream_keep_alive ? "\r\n" : "Connection: close\r\n\r\n", f);
	if (fclose(f) != 0)
		pdk_oom();
	return buf;
}

void pdk__egress_head_release(struct pdk__egress_head *h)
{
	free(h->host);
	memset(h, 0, sizeof(*h));
}

/* ---- responses ---- */

static int resp_headers_complete(http_parser *p)
{
	struct pdk__egress_resp *r = p->data;

	/* 1 = no body: the answer to HEAD has none, whatever its fields say. */
	return r->head_request ? 1 : 0;
}

static int resp_message_complete(http_parser *p)
{
	struct pdk__egress_resp *r = p->data;

	/* An interim 1xx answer (100 Continue) is followed by the real one. */
	if (p->status_code >= 100 && p->status_code < 200 && p->status_code != 101)
		return 0;
	r->done = true;
	r->keep_alive = http_should_keep_alive(p) != 0;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings resp_settings = {
	.on_headers_complete = resp_headers_complete,
	.on_message_complete = resp_message_complete,
};

void pdk__egress_resp_init(struct pdk__egress_resp *r, bool head_request)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->p, HTTP_RESPONSE);
	r->p.data = r;
	r->head_request = head_request;
}

ssize_t pdk__egress_resp_feed(struct pdk__egress_resp *r, const char *data, size_t len)
{
	size_t n;

	if (r->done)
		return 0;
	n = http_parser_execute(&r->p, &resp_settings, data, len);
	if (HTTP_PARSER_ERRNO(&r->p) != HPE_OK && HTTP_PARSER_ERRNO(&r->p) != HPE_PAUSED)
		return -1;
	if (r->p.status_code == 101)
		return -1; /* a protocol switch is not relayed over plain HTTP */
	return (ssize_t)n;
}
