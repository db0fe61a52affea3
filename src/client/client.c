/*
 * client.c - the blocking HTTP/1.1 client of the daemon's API (client.h).
 *
 * The response is parsed by libhttp-parser: nothing here splits HTTP by
 * hand. Every buffer that holds bytes from the daemon has a cap (the
 * daemon may be reached over TCP, and a proxy in between is not trusted
 * to be well-behaved either): the Content-Type value, a collected body
 * (PDK_CLIENT_BODY_MAX) and an SSE event (PDK_CLIENT_SSE_MAX).
 */
#include "common.h"
#include "base.h"
#include "client.h"

#include <arpa/inet.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

#define CONTENT_TYPE_MAX 1024
#define HEADER_NAME_MAX  64

/* ---- HTTP responses ---- */

struct pdk__client_parser {
	http_parser p;
	bool head_request;
	bool done;
	bool keep_alive;
	bool in_value;
	bool is_ctype;  /* the field being read is Content-Type */
	bool name_long; /* the field name passed HEADER_NAME_MAX: none we look for */
	bool streaming;
	int cb_error;
	struct pdk_buf name;
	struct pdk_buf ctype;
	struct pdk_buf body;
	pdk_client_data_cb on_data;
	pdk_client_sse_cb on_sse;
	void *ud;
	struct pdk_sse *sse;
};

static struct pdk__client_parser *parser_of(http_parser *p)
{
	return p->data;
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
	struct pdk__client_parser *p = parser_of(hp);

	if (p->in_value) {
		pdk_buf_reset(&p->name);
		p->name_long = false;
		p->in_value = false;
	}
	/* A longer name is none we look for: keep only its start. */
	if (pdk_buf_add(&p->name, at, len) < 0)
		p->name_long = true;
	return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
	struct pdk__client_parser *p = parser_of(hp);

	if (!p->in_value) {
		p->in_value = true;
		p->is_ctype = !p->name_long && p->name.len == 12 &&
			      strncasecmp(pdk_buf_str(&p->name), "content-type", 12) == 0;
		if (p->is_ctype)
			pdk_buf_reset(&p->ctype);
	}
	if (p->is_ctype && pdk_buf_add(&p->ctype, at, len) < 0) {
		p->cb_error = -E2BIG;
		return 1;
	}
	return 0;
}

static bool ctype_is(const struct pdk__client_parser *p, const char *type)
{
	size_t n = strlen(type);

	const char *ct = pdk_buf_str(&p->ctype);

	return p->ctype.len >= n && strncasecmp(ct, type, n) == 0 &&
	       (p->ctype.len == n || ct[n] == ';' || ct[n] == ' ');
}

static int on_headers_complete(http_parser *hp)
{
	struct pdk__client_parser *p = parser_of(hp);
	bool ok = hp->status_code >= 200 && hp->status_code < 300;

	p->in_value = false;
	pdk_buf_reset(&p->name);
	p->name_long = false;
	if (hp->status_code < 100 || hp->status_code > 599) {
		p->cb_error = -EBADMSG;
		return -1;
	}
	p->streaming = ok && (p->on_data != NULL || p->on_sse != NULL);
	if (p->streaming && p->on_sse != NULL && p->sse == NULL) {
		if (!ctype_is(p, "text/event-stream")) {
			p->cb_error = -EPROTO;
			return -1;
		}
		p->sse = pdk_sse_new(PDK_CLIENT_SSE_MAX, p->on_sse, p->ud);
	}
	/* 1 = no body: the answer to HEAD has none, whatever its fields say. */
	return p->head_request ? 1 : 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
	struct pdk__client_parser *p = parser_of(hp);
	int r;

	if (!p->streaming)
		r = pdk_buf_add(&p->body, at, len);
	else if (p->sse != NULL)
		r = pdk_sse_feed(p->sse, at, len);
	else
		r = p->on_data(p->ud, at, len) != 0 ? -ECANCELED : 0;
	if (r < 0) {
		p->cb_error = r;
		return 1;
	}
	return 0;
}

static int on_message_complete(http_parser *hp)
{
	struct pdk__client_parser *p = parser_of(hp);

	/* An interim 1xx answer (100 Continue) is followed by the real one. */
	if (hp->status_code >= 100 && hp->status_code < 200 && hp->status_code != 101) {
		pdk_buf_reset(&p->ctype);
		pdk_buf_reset(&p->body);
		return 0;
	}
	p->done = true;
	p->keep_alive = http_should_keep_alive(hp) != 0;
	http_parser_pause(hp, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

struct pdk__client_parser *pdk__client_parser_new(bool head_request)
{
	struct pdk__client_parser *p = pdk_xcalloc(1, sizeof(*p));

	http_parser_init(&p->p, HTTP_RESPONSE);
	p->p.data = p;
	p->head_request = head_request;
	pdk_buf_init(&p->name, HEADER_NAME_MAX);
	pdk_buf_init(&p->ctype, CONTENT_TYPE_MAX);
	pdk_buf_init(&p->body, PDK_CLIENT_BODY_MAX);
	return p;
}

void pdk__client_parser_set_sink(struct pdk__client_parser *p, pdk_client_data_cb on_data,
				 pdk_client_sse_cb on_sse, void *ud)
{
	p->on_data = on_data;
	p->on_sse = on_sse;
	p->ud = ud;
}

void pdk__client_parser_free(struct pdk__client_parser *p)
{
	if (p == NULL)
		return;
	pdk_buf_release(&p->name);
	pdk_buf_release(&p->ctype);
	pdk_buf_release(&p->body);
	pdk_sse_free(p->sse);
	free(p);
}

static int parse_error(struct pdk__client_parser *p, struct pdk_error **err)
{
	enum http_errno e = HTTP_PARSER_ERRNO(&p->p);

	switch (p->cb_error) {
	case -ECANCELED:
		return pdk_error_setx(err, ECANCELED, "the response was not read to its end");
	case -E2BIG:
		return pdk_error_setx(err, E2BIG, "the daemon's response is too large");
	case -EPROTO:
		return pdk_error_setx(err, EPROTO,
				      "the daemon did not answer with an event stream");
	case -EBADMSG:
		return pdk_error_setx(err, EPROTO, "malformed response from the daemon: status %u",
				      p->p.status_code);
	default:
		break;
	}
	return pdk_error_setx(err, EPROTO, "malformed response from the daemon: %s",
			      http_errno_description(e));
}

int pdk__client_parser_feed(struct pdk__client_parser *p, const char *data, size_t len,
			    struct pdk_error **err)
{
	size_t n;
	enum http_errno e;

	if (p->done)
		return 1;
	n = http_parser_execute(&p->p, &settings, data, len);
	e = HTTP_PARSER_ERRNO(&p->p);
	if (len == 0 && !p->done && p->cb_error == 0)
		return pdk_error_setx(
			err, EPROTO,
			"the daemon closed the connection before the response was complete");
	if (e != HPE_OK && e != HPE_PAUSED)
		return parse_error(p, err);
	if (p->p.status_code == 101)
		return pdk_error_setx(err, EPROTO, "the daemon switched protocols (status 101)");
	if (p->done) {
		if (n + 1 < len || (n + 1 == len && data[n] != '\n'))
			p->keep_alive = false; /* bytes after the answer: never reuse */
		return 1;
	}
	return 0;
}

void pdk__client_parser_take(struct pdk__client_parser *p, struct pdk_client_resp *r,
			     bool *keep_alive)
{
	memset(r, 0, sizeof(*r));
	r->status = p->p.status_code;
	if (p->ctype.len > 0)
		r->content_type = pdk_xstrdup(pdk_buf_str(&p->ctype));
	if (!p->streaming)
		r->body = pdk_buf_take(&p->body, &r->body_len);
	if (keep_alive != NULL)
		*keep_alive = p->keep_alive;
}

void pdk_client_resp_release(struct pdk_client_resp *r)
{
	free(r->content_type);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* ---- errors ---- */

static const struct {
	const char *code;
	int status;
} codes[] = {
	{"bad_request", EINVAL}, {"unauthorized", EACCES}, {"forbidden", EPERM},
	{"not_found", ENOENT},   {"conflict", EEXIST},     {"too_large", E2BIG},
	{"limit", EDQUOT},       {"unavailable", EAGAIN},  {"internal", EIO},
	{"busy", EBUSY},
};

int pdk_client_status_of_code(const char *code)
{
	for (size_t i = 0; code != NULL && i < PDK_ARRAY_SIZE(codes); i++) {
		if (strcmp(code, codes[i].code) == 0)
			return codes[i].status;
	}
	return EIO;
}

int pdk_client_error_from(const struct pdk_client_resp *r, struct pdk_error **err)
{
	_cleanup_json_ json_t *j = NULL;
	json_t *e;
	const char *code, *msg, *field;
	int n;

	if (r->body != NULL && r->body_len > 0)
		j = json_loadb(r->body, r->body_len, JSON_ALLOW_NUL, NULL);
	e = json_object_get(j, "error");
	code = json_string_value(json_object_get(e, "code"));
	msg = json_string_value(json_object_get(e, "message"));
	field = json_string_value(json_object_get(e, "field"));
	if (code == NULL || msg == NULL) {
		n = r->body_len > 200 ? 200 : (int)r->body_len;
		return pdk_error_setx(err, r->status >= 500 ? EIO : EPROTO,
				      "HTTP %d from the daemon%s%.*s", r->status, n ? ": " : "", n,
				      r->body ? r->body : "");
	}
	/* The field stays on the error too, for a caller that tells fields apart. */
	if (field != NULL && field[0] != '\0')
		return pdk_error_set_field(err, pdk_client_status_of_code(code), field,
					   "%s: %s (field %s)", code, msg, field);
	return pdk_error_setx(err, pdk_client_status_of_code(code), "%s: %s", code, msg);
}

/* ---- the client ---- */

struct pdk_client {
	char *socket_path; /* NULL over TCP */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char *host; /* the Host field */
	char *prefix;
	char *token;
	char *endpoint;
	int fd; /* the kept connection, or -1 */
};

char *pdk_client_default_socket(const char *runtime_dir)
{
	return pdk_xasprintf("%s/paddock.sock", runtime_dir);
}

static bool has_ctl(const char *s)
{
	for (; s != NULL && *s; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	}
	return false;
}

/* http://HOST:PORT[/PREFIX] with HOST an IP literal or localhost (no resolver in paddock). */
static int parse_url(struct pdk_client *c, const char *url, struct pdk_error **err)
{
	const char *h, *end, *colon, *slash;
	_cleanup_free_ char *host = NULL;
	uint64_t port = 80;

	if (strncmp(url, "http://", 7) != 0)
		return pdk_error_setx(err, EINVAL, "url '%s': only http://HOST:PORT is supported",
				      url);
	h = url + 7;
	slash = strchr(h, '/');
	end = slash ? slash : h + strlen(h);
	if (h[0] == '[') {
		const char *rb = memchr(h, ']', (size_t)(end - h));

		if (rb == NULL)
			return pdk_error_setx(err, EINVAL, "url '%s': unclosed '['", url);
		host = strndup(h + 1, (size_t)(rb - h - 1));
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		host = strndup(h, (size_t)((colon ? colon : end) - h));
	}
	if (host == NULL)
		pdk_oom();
	if (colon != NULL) {
		_cleanup_free_ char *p = strndup(colon + 1, (size_t)(end - colon - 1));

		if (p == NULL)
			pdk_oom();
		if (pdk_parse_u64(p, 65535, &port) < 0 || port == 0)
			return pdk_error_setx(err, EINVAL, "url '%s': bad port", url);
	}
	if (strcmp(host, "localhost") == 0) {
		free(host);
		host = pdk_xstrdup("127.0.0.1");
	}
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&c->addr)->sin_addr) == 1) {
		struct sockaddr_in *a = (struct sockaddr_in *)&c->addr;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		c->addrlen = sizeof(*a);
	} else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&c->addr)->sin6_addr) == 1) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&c->addr;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		c->addrlen = sizeof(*a);
	} else {
		return pdk_error_setx(err, EINVAL,
				      "url '%s': the host must be an IP address or localhost", url);
	}
	c->host = strndup(h, (size_t)(end - h));
	if (c->host == NULL)
		pdk_oom();
	/* The prefix without its trailing slashes: "/v1/..." paths are appended. */
	c->prefix = pdk_xstrdup(slash ? slash : "");
	for (size_t n = strlen(c->prefix); n > 0 && c->prefix[n - 1] == '/'; n--)
		c->prefix[n - 1] = '\0';
	return 0;
}

static const char *nonempty(const char *v)
{
	return v != NULL && v[0] != '\0' ? v : NULL;
}

void pdk_client_opts_from_env(struct pdk_client_opts *o, char *const *envp)
{
	if (nonempty(o->url) == NULL && nonempty(o->socket) == NULL)
		o->url = nonempty(pdk_env_get(envp, "PADDOCK_URL"));
	if (nonempty(o->socket) == NULL)
		o->socket = nonempty(pdk_env_get(envp, "PADDOCK_SOCKET"));
	if (nonempty(o->token) == NULL)
		o->token = nonempty(pdk_env_get(envp, "PADDOCK_TOKEN"));
}

struct pdk_client *pdk_client_new(const struct pdk_client_opts *o, struct pdk_error **err)
{
	static const struct pdk_client_opts none = {0};
	struct pdk_client *c = pdk_xcalloc(1, sizeof(*c));
	const char *url, *sock, *token;

	if (o == NULL)
		o = &none;
	c->fd = -1;
	url = nonempty(o->url);
	sock = nonempty(o->socket);
	token = nonempty(o->token);
	if (url == NULL && sock == NULL && o->runtime_dir == NULL) {
		pdk_client_free(c);
		pdk_error_setx(err, EINVAL, "no daemon address: neither a URL nor a socket");
		return NULL;
	}
	if (token != NULL && has_ctl(token)) {
		pdk_client_free(c);
		pdk_error_setx(err, EINVAL, "the token holds control characters");
		return NULL;
	}
	c->token = token ? pdk_xstrdup(token) : NULL;
	if (url != NULL) {
		if (parse_url(c, url, err) < 0) {
			pdk_client_free(c);
			return NULL;
		}
		c->endpoint = pdk_xstrdup(url);
		return c;
	}
	c->socket_path = sock ? pdk_xstrdup(sock) : pdk_client_default_socket(o->runtime_dir);
	c->host = pdk_xstrdup("localhost");
	c->prefix = pdk_xstrdup("");
	c->endpoint = pdk_xasprintf("unix:%s", c->socket_path);
	return c;
}

void pdk_client_free(struct pdk_client *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		(void)close(c->fd);
	free(c->socket_path);
	free(c->host);
	free(c->prefix);
	free(c->token);
	free(c->endpoint);
	free(c);
}

const char *pdk_client_endpoint(const struct pdk_client *c)
{
	return c->endpoint;
}

static int client_connect(struct pdk_client *c, struct pdk_error **err)
{
	_cleanup_close_ int fd = -1;
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	const struct sockaddr *sa = (const struct sockaddr *)&c->addr;
	socklen_t len = c->addrlen;

	if (c->socket_path != NULL) {
		if (strlen(c->socket_path) >= sizeof(un.sun_path))
			return pdk_error_setx(err, ENAMETOOLONG, "socket path '%s' is too long",
					      c->socket_path);
		memcpy(un.sun_path, c->socket_path, strlen(c->socket_path) + 1);
		sa = (const struct sockaddr *)&un;
		len = sizeof(un);
	}
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return pdk_error_set(err, errno, "socket");
	if (TEMP_FAILURE_RETRY(connect(fd, sa, len)) < 0)
		return pdk_error_set(err, errno, "cannot connect to the daemon at '%s'",
				     c->endpoint);
	if (c->socket_path == NULL) {
		int one = 1;

		/* Small requests: send each at once (no Nagle delay before the answer). */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	c->fd = steal_fd(&fd);
	return 0;
}

static void client_disconnect(struct pdk_client *c)
{
	if (c->fd >= 0)
		(void)close(c->fd);
	c->fd = -1;
}

static int check_req(const struct pdk_client_req *q, struct pdk_error **err)
{
	if (q->path == NULL || q->path[0] != '/' || strchr(q->path, ' ') != NULL ||
	    has_ctl(q->path))
		return pdk_error_setx(err, EINVAL, "bad request path '%s'", q->path ? q->path : "");
	if (has_ctl(q->method) || has_ctl(q->content_type) || has_ctl(q->accept) ||
	    has_ctl(q->idempotency_key))
		return pdk_error_setx(err, EINVAL, "a request field holds control characters");
	return 0;
}

/* The request head. Caller frees. */
static char *build_head(const struct pdk_client *c, const struct pdk_client_req *q, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (f == NULL)
		pdk_oom();
	fprintf(f, "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: paddock/%s\r\n", q->method,
		c->prefix, q->path, c->host, PDK_VERSION);
	if (c->token != NULL)
		fprintf(f, "Authorization: Bearer %s\r\n", c->token);
	if (q->accept != NULL)
		fprintf(f, "Accept: %s\r\n", q->accept);
	if (q->idempotency_key != NULL)
		fprintf(f, "Idempotency-Key: %s\r\n", q->idempotency_key);
	if (q->content_type != NULL)
		fprintf(f, "Content-Type: %s\r\n", q->content_type);
	if (q->body != NULL || strcmp(q->method, "GET") != 0)
		fprintf(f, "Content-Length: %zu\r\n", q->body_len);
	fputs("\r\n", f);
	if (fclose(f) != 0)
		pdk_oom();
	return buf;
}

static int send_all(int fd, const char *head, size_t hlen, const void *body, size_t blen)
{
	struct iovec iov[2] = {{(void *)head, hlen}, {(void *)body, body ? blen : 0}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};

	while (iov[0].iov_len + iov[1].iov_len > 0) {
		ssize_t n = TEMP_FAILURE_RETRY(sendmsg(fd, &m, MSG_NOSIGNAL));

		if (n < 0)
			return -errno;
		for (int i = 0; i < 2 && n > 0; i++) {
			size_t k = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;

			iov[i].iov_base = (char *)iov[i].iov_base + k;
			iov[i].iov_len -= k;
			n -= (ssize_t)k;
		}
		if (iov[0].iov_len == 0) {
			m.msg_iov = &iov[1];
			m.msg_iovlen = 1;
		}
	}
	return 0;
}

/*
 * Read the answer into `p`. Returns 1 when complete, or negative + *err;
 * -EPIPE without *err when the connection closed before the first byte
 * (a kept connection the daemon had closed: the caller may retry).
 */
static int read_response(struct pdk_client *c, struct pdk__client_parser *p, int idle_ms,
			 struct pdk_error **err)
{
	_cleanup_free_ char *buf = pdk_xmalloc(65536);
	bool any = false;

	for (;;) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		ssize_t n;
		int r;

		if (idle_ms > 0) {
			r = (int)TEMP_FAILURE_RETRY(poll(&pfd, 1, idle_ms));
			if (r < 0)
				return pdk_error_set(err, errno, "poll");
			if (r == 0)
				return pdk_error_setx(err, ETIMEDOUT,
						      "the daemon sent nothing for %d ms", idle_ms);
		}
		n = TEMP_FAILURE_RETRY(read(c->fd, buf, 65536));

		if (n < 0 && errno == ECONNRESET && !any)
			return -EPIPE;
		if (n < 0)
			return pdk_error_set(err, errno, "read from the daemon");
		if (n == 0 && !any)
			return -EPIPE;
		any = true;
		r = pdk__client_parser_feed(p, buf, (size_t)n, err);
		if (r != 0)
			return r;
	}
}

static int request_once(struct pdk_client *c, const struct pdk_client_req *q,
			struct pdk_client_resp *resp, bool *retry, struct pdk_error **err)
{
	_cleanup_free_ char *head = NULL;
	struct pdk__client_parser *p = NULL;
	bool reused = c->fd >= 0, keep = false;
	size_t hlen = 0;
	int r;

	*retry = false;
	if (c->fd < 0 && client_connect(c, err) < 0)
		return -1;
	head = build_head(c, q, &hlen);
	r = send_all(c->fd, head, hlen, q->body, q->body_len);
	if (r < 0) {
		client_disconnect(c);
		*retry = reused && (r == -EPIPE || r == -ECONNRESET);
		return *retry ? r
			      : pdk_error_set(err, -r, "send to the daemon at '%s'", c->endpoint);
	}
	p = pdk__client_parser_new(strcmp(q->method, "HEAD") == 0);
	pdk__client_parser_set_sink(p, q->on_data, q->on_sse, q->ud);
	r = read_response(c, p, q->idle_ms, err);
	if (r == -EPIPE && *err == NULL) {
		*retry = reused;
		if (!reused)
			pdk_error_setx(err, EPIPE, "the daemon at '%s' closed the connection",
				       c->endpoint);
	}
	if (r == 1)
		pdk__client_parser_take(p, resp, &keep);
	pdk__client_parser_free(p);
	if (r != 1 || !keep)
		client_disconnect(c);
	return r == 1 ? 0 : -1;
}

int pdk_client_request(struct pdk_client *c, const struct pdk_client_req *req,
		       struct pdk_client_resp *resp, struct pdk_error **err)
{
	bool retry = false;
	int r;

	memset(resp, 0, sizeof(*resp));
	r = check_req(req, err);
	if (r < 0)
		return r;
	r = request_once(c, req, resp, &retry, err);
	if (r < 0 && retry)
		r = request_once(c, req, resp, &retry, err);
	if (r < 0 && err != NULL && *err == NULL)
		return pdk_error_setx(err, EPIPE, "the daemon at '%s' closed the connection",
				      c->endpoint);
	return r < 0 ? -((err && *err) ? (*err)->status : EIO) : 0;
}

int pdk_client_json(struct pdk_client *c, const char *method, const char *path, json_t *body,
		    json_t **out, int *status, struct pdk_error **err)
{
	_cleanup_free_ char *text = NULL;
	struct pdk_client_resp resp = {0};
	struct pdk_client_req q = {.method = method, .path = path};
	json_error_t je;
	json_t *j = NULL;
	int r;

	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT);
		if (text == NULL)
			return pdk_error_setx(err, EINVAL, "cannot serialise the request body");
		q.body = text;
		q.body_len = strlen(text);
		q.content_type = "application/json";
	}
	r = pdk_client_request(c, &q, &resp, err);
	if (r < 0)
		return r;
	if (status != NULL)
		*status = resp.status;
	if (resp.status < 200 || resp.status > 299) {
		r = pdk_client_error_from(&resp, err);
		pdk_client_resp_release(&resp);
		return r;
	}
	if (out != NULL && resp.body_len > 0) {
		/* A command's output may hold NUL bytes: "\u0000" is valid JSON. */
		j = json_loadb(resp.body, resp.body_len, JSON_ALLOW_NUL, &je);
		if (j == NULL || !json_is_object(j)) {
			json_decref(j);
			pdk_client_resp_release(&resp);
			return pdk_error_setx(err, EPROTO,
					      "the daemon's answer to %s %s is not a JSON object",
					      method, path);
		}
	}
	pdk_client_resp_release(&resp);
	if (out != NULL)
		*out = j != NULL ? j : json_object();
	return 0;
}

char *pdk_client_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *o = pdk_xmalloc(3 * n + 1), *w = o;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~' ||
		    ch == '/') {
			*w++ = (char)ch;
		} else {
			*w++ = '%';
			*w++ = hex[ch >> 4];
			*w++ = hex[ch & 15];
		}
	}
	*w = '\0';
	return o;
}
