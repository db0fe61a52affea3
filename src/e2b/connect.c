/*
 * connect.c - the Connect protocol (connectrpc.com/docs/protocol) as E2B's
 * envd speaks it: HTTP/1.1, the JSON codec. A unary call is a POST of
 * application/json answered by one JSON object, or by an error object
 * {"code","message"} with the code's HTTP status. A server-streaming call
 * is a POST of application/connect+json whose body is one enveloped
 * message (a flags byte, a 4-byte big-endian length, the message), answered
 * 200 with enveloped messages and, last, the end-stream frame (flag 0x02)
 * that carries the error, if any. Request bodies may come chunked (the
 * request guard and evhttp join them); Connect-Timeout-Ms bounds a call.
 */
#include "common.h"
#include "e2b-internal.h"

#include <string.h>

/* ---- framing ---- */

int pdk_e2b_connect_unary_msg(const char *data, size_t len, json_t **msg, struct pdk_error **err)
{
	json_error_t je;
	json_t *v;

	*msg = NULL;
	if (len == 0) {
		*msg = json_object();
		return 0;
	}
	v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	if (v == NULL || !json_is_object(v)) {
		json_decref(v);
		return pdk_error_set_field(err, EINVAL, "body",
					   "the message is not a JSON object (%s)",
					   v == NULL ? je.text : "another JSON value");
	}
	*msg = v;
	return 0;
}

int pdk_e2b_connect_unframe(const char *data, size_t len, size_t max, json_t **msg,
			    struct pdk_error **err)
{
	const unsigned char *p = (const unsigned char *)data;
	uint64_t n;

	*msg = NULL;
	if (len < 5)
		return pdk_error_set_field(err, EINVAL, "body",
					   "the body is not a Connect envelope: %zu bytes, fewer "
					   "than its 5-byte header",
					   len);
	/* SECURITY: a compressed message is refused, never inflated (no codec is offered). */
	if (p[0] != 0)
		return pdk_error_set_field(err, EINVAL, "body",
					   "the envelope's flags are 0x%02x: only 0 (an "
					   "uncompressed message) is served",
					   p[0]);
	n = (uint64_t)p[1] << 24 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 8 | p[4];
	if (n > max)
		return pdk_error_set_field(err, E2BIG, "body",
					   "the message is %llu bytes, more than %zu",
					   (unsigned long long)n, max);
	if (n != len - 5)
		return pdk_error_set_field(err, EINVAL, "body",
					   "the envelope says %llu bytes but %zu follow it: a "
					   "server-streaming call sends exactly one message",
					   (unsigned long long)n, len - 5);
	return pdk_e2b_connect_unary_msg(data + 5, (size_t)n, msg, err);
}

char *pdk_e2b_connect_frame(unsigned flags, const json_t *msg, size_t *len)
{
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
	size_t n;
	char *out;

	if (text == NULL)
		pdk_oom();
	n = strlen(text);
	out = pdk_xmalloc(n + 5);
	out[0] = (char)(flags & 0xff);
	out[1] = (char)((n >> 24) & 0xff);
	out[2] = (char)((n >> 16) & 0xff);
	out[3] = (char)((n >> 8) & 0xff);
	out[4] = (char)(n & 0xff);
	memcpy(out + 5, text, n);
	*len = n + 5;
	return out;
}

int pdk_e2b_connect_timeout(const char *value, uint64_t *ms, struct pdk_error **err)
{
	size_t n = strlen(value);
	uint64_t v = 0;

	/* The protocol allows at most 10 digits: a deadline is never a number that overflows. */
	if (n == 0 || n > 10 || strspn(value, "0123456789") != n)
		return pdk_error_set_field(err, EINVAL, "Connect-Timeout-Ms",
					   "Connect-Timeout-Ms must be 1 to 10 digits");
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (uint64_t)(value[i] - '0');
	if (v == 0)
		return pdk_error_set_field(err, EINVAL, "Connect-Timeout-Ms",
					   "Connect-Timeout-Ms must be more than 0");
	*ms = v;
	return 0;
}

const char *pdk_e2b_connect_code(int status, int *http_status)
{
	static const struct {
		int status, http;
		const char *code;
	} map[] = {
		{ENOENT, 404, "not_found"},
		{EINVAL, 400, "invalid_argument"},
		{ENOEXEC, 400, "invalid_argument"},
		{EEXIST, 409, "already_exists"},
		{EALREADY, 400, "failed_precondition"},
		{EBUSY, 409, "aborted"},
		{EDQUOT, 429, "resource_exhausted"},
		{E2BIG, 429, "resource_exhausted"},
		{EACCES, 403, "permission_denied"},
		{EPERM, 403, "permission_denied"},
		{ENOTCONN, 503, "unavailable"},
		{ETIMEDOUT, 504, "deadline_exceeded"},
		{ECANCELED, 499, "canceled"},
		{ENOSYS, 501, "unimplemented"},
		{EKEYREJECTED, 401, "unauthenticated"},
	};

	if (status < 0)
		status = -status;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(map); i++)
		if (map[i].status == status) {
			*http_status = map[i].http;
			return map[i].code;
		}
	*http_status = 500;
	return "internal";
}

/* ---- answers ---- */

static json_t *error_json(const struct pdk_error *err, int *http)
{
	const char *code = pdk_e2b_connect_code(err->status, http);

	return json_pack("{s:s, s:s}", "code", code, "message", err->msg ? err->msg : code);
}

/* A unary call's error: the code's HTTP status and the error object. */
static void unary_error(struct evhttp_request *req, const struct pdk_error *err)
{
	int http;
	json_t *body = error_json(err, &http);

	pdk_http_json(req, http, body);
}

void pdk__e2b_connect_refuse(struct evhttp_request *req, const struct pdk_error *err)
{
	unary_error(req, err);
}

static void stream_frame(struct pdk_http_stream *s, unsigned flags, const json_t *msg)
{
	size_t len;
	_cleanup_free_ char *frame = pdk_e2b_connect_frame(flags, msg, &len);

	pdk_http_stream_bytes(s, frame, len, NULL, NULL);
}

/* The end-stream frame: {} or {"error": {...}}. */
static void stream_end(struct pdk_http_stream *s, const struct pdk_error *err)
{
	_cleanup_json_ json_t *end = json_object();
	int http;

	if (err != NULL)
		pdk_json_set(end, "error", error_json(err, &http));
	stream_frame(s, PDK_E2B_CONNECT_FLAG_END, end);
	pdk_http_stream_end(s);
}

/* An error before a call exists: unary as such, a stream as 200 and its end-stream frame. */
static void early_error(struct evhttp_request *req, bool streaming, const struct pdk_error *err)
{
	struct pdk_http_stream s = {0};

	if (!streaming) {
		unary_error(req, err);
		return;
	}
	pdk_http_stream_start_raw(&s, req, "application/connect+json");
	stream_end(&s, err);
}

/* ---- the call's life ---- */

static void call_free(struct pdk__e2b_call *c)
{
	LIST_REMOVE(c, link);
	if (c->deadline != NULL)
		event_free(c->deadline);
	json_decref(c->msg);
	json_decref(c->keepalive);
	pdk__e2b_envd_release(&c->who);
	free(c);
}

/* Freed once finished by its handler and answered (or its client gone), not while cancelling. */
static void maybe_free(struct pdk__e2b_call *c)
{
	if (c->finished && c->req == NULL && !c->busy)
		call_free(c);
}

bool pdk__e2b_live(const struct pdk__e2b_call *c)
{
	return c->req != NULL && !c->stream.dead;
}

/* The call's client is gone, or its deadline or the daemon's end came: the handler stops. */
static void cancel(struct pdk__e2b_call *c, const struct pdk_error *err)
{
	if (c->req != NULL && err != NULL) {
		if (c->method->streaming)
			stream_end(&c->stream, err);
		else
			unary_error(c->req, err);
	}
	c->req = NULL;
	if (!c->cancelled) {
		c->cancelled = true;
		c->busy = true;
		if (c->on_cancel != NULL && !c->finished)
			c->on_cancel(c);
		c->busy = false;
	}
	maybe_free(c);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	(void)fd;
	(void)what;
	(void)pdk_error_setx(&err, ETIMEDOUT, "the call's Connect-Timeout-Ms passed");
	cancel(arg, err);
}

static void on_stream_closed(void *arg)
{
	struct pdk__e2b_call *c = arg;

	/*
	 * The client's EOF can be seen by the stream's watch before libevent
	 * sees it: the connection's close callback, which points into the call,
	 * is then still set. Ending the stream unsets it (and lets libevent free
	 * the request), so the call may be freed below; when libevent's close
	 * callback is what called, the stream is dead and this does nothing.
	 */
	pdk_http_stream_end(&c->stream);
	c->req = NULL;
	cancel(c, NULL);
}

void pdk__e2b_reply(struct pdk__e2b_call *c, json_t *msg)
{
	if (c->req != NULL)
		pdk_http_json(c->req, 200, msg);
	else
		json_decref(msg);
	c->req = NULL;
	c->finished = true;
	maybe_free(c);
}

void pdk__e2b_send(struct pdk__e2b_call *c, json_t *msg)
{
	_cleanup_json_ json_t *m = msg;

	if (!pdk__e2b_live(c) || c->finished)
		return;
	c->idle_s = 0;
	c->sent = true;
	stream_frame(&c->stream, 0, m);
}

void pdk__e2b_end(struct pdk__e2b_call *c, const struct pdk_error *err)
{
	if (pdk__e2b_live(c))
		stream_end(&c->stream, err);
	c->req = NULL;
	c->finished = true;
	maybe_free(c);
}

void pdk__e2b_fail(struct pdk__e2b_call *c, const struct pdk_error *err)
{
	if (c->method->streaming) {
		pdk__e2b_end(c, err);
		return;
	}
	if (c->req != NULL)
		unary_error(c->req, err);
	c->req = NULL;
	c->finished = true;
	maybe_free(c);
}

void pdk__e2b_connect_tick(struct pdk_e2b *e)
{
	struct pdk__e2b_call *c;

	LIST_FOREACH(c, &e->calls, link)
	{
		/* A keepalive never comes before the handler's start message: the SDKs take the
		 * stream's first message as the start (a watcher slower than the tick was seen). */
		if (!c->method->streaming || c->keepalive == NULL || !c->sent || !pdk__e2b_live(c))
			continue;
		if (++c->idle_s >= c->keepalive_s) {
			c->idle_s = 0;
			stream_frame(&c->stream, 0, c->keepalive);
		}
	}
}

void pdk__e2b_connect_close_all(struct pdk_e2b *e)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk__e2b_call *c, *next;

	(void)pdk_error_setx(&err, ENOTCONN, "the daemon is shutting down");
	/* cancel() may free the call, never another one: the next is taken first. */
	for (c = LIST_FIRST(&e->calls); c != NULL; c = next) {
		next = LIST_NEXT(c, link);
		if (!c->cancelled)
			cancel(c, err);
	}
}

/* ---- the request ---- */

static const struct pdk__e2b_service *const services[] = {
	&pdk__e2b_svc_filesystem,
	&pdk__e2b_svc_process,
};

/* The method "/SERVICE/METHOD" names, or NULL. */
static const struct pdk__e2b_method *find_method(const char *path)
{
	const char *slash = path[0] == '/' ? strchr(path + 1, '/') : NULL;
	size_t n = slash ? (size_t)(slash - path - 1) : 0;

	for (size_t i = 0; slash != NULL && i < PDK_ARRAY_SIZE(services); i++) {
		const struct pdk__e2b_service *s = services[i];

		if (strlen(s->name) != n || strncmp(s->name, path + 1, n) != 0)
			continue;
		for (size_t j = 0; j < s->n; j++)
			if (strcmp(s->methods[j].name, slash + 1) == 0)
				return &s->methods[j];
	}
	return NULL;
}

/* The media type without its parameters equals `want` (case-insensitive). */
static bool media_is(const char *ct, const char *want)
{
	size_t n = strlen(want);

	return ct != NULL && strncasecmp(ct, want, n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

static int check_headers(struct evhttp_request *req, bool streaming, uint64_t *timeout_ms,
			 struct pdk_error **err)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *ct = evhttp_find_header(h, "Content-Type");
	const char *ver = evhttp_find_header(h, "Connect-Protocol-Version");
	const char *enc =
		evhttp_find_header(h, streaming ? "Connect-Content-Encoding" : "Content-Encoding");
	const char *tmo = evhttp_find_header(h, "Connect-Timeout-Ms");

	if (!media_is(ct, streaming ? "application/connect+json" : "application/json"))
		return pdk_error_set_field(err, EPROTONOSUPPORT, "Content-Type",
					   "Content-Type must be %s: only the JSON codec is served",
					   streaming ? "application/connect+json"
						     : "application/json");
	if (ver != NULL && strcmp(ver, "1") != 0)
		return pdk_error_set_field(err, EINVAL, "Connect-Protocol-Version",
					   "Connect-Protocol-Version must be 1");
	if (enc != NULL && strcasecmp(enc, "identity") != 0)
		return pdk_error_set_field(
			err, ENOSYS, streaming ? "Connect-Content-Encoding" : "Content-Encoding",
			"only the identity content encoding is served");
	*timeout_ms = 0;
	return tmo != NULL ? pdk_e2b_connect_timeout(tmo, timeout_ms, err) : 0;
}

static int read_msg(struct evhttp_request *req, bool streaming, json_t **msg,
		    struct pdk_error **err)
{
	_cleanup_free_ char *body = NULL;
	size_t len = 0;

	if (pdk_http_body(req, PDK_E2B_CONNECT_MSG_MAX + 5, &body, &len) < 0)
		return pdk_error_set_field(err, E2BIG, "body",
					   "the message is larger than %u bytes",
					   PDK_E2B_CONNECT_MSG_MAX);
	if (streaming)
		return pdk_e2b_connect_unframe(body, len, PDK_E2B_CONNECT_MSG_MAX, msg, err);
	return pdk_e2b_connect_unary_msg(body, len, msg, err);
}

/*
 * How often an idle stream gets its keepalive message: the SDKs' own
 * Keepalive-Ping-Interval (seconds, 1 to 3600), else PDK__E2B_KEEPALIVE_S;
 * counted from the handler's last message, and only once it sent its first.
 */
static uint64_t keepalive_of(struct evhttp_request *req)
{
	const char *v = evhttp_find_header(evhttp_request_get_input_headers(req),
					   "Keepalive-Ping-Interval");
	uint64_t s = 0;

	if (v == NULL || pdk_parse_u64(v, 3600, &s) < 0 || s == 0)
		return PDK__E2B_KEEPALIVE_S;
	return s;
}

static struct pdk__e2b_call *call_new(struct pdk_e2b *e, struct evhttp_request *req,
				      const struct pdk__e2b_method *m, struct pdk__e2b_envd *who,
				      json_t *msg, uint64_t timeout_ms)
{
	struct pdk__e2b_call *c = pdk_xcalloc(1, sizeof(*c));

	c->e = e;
	c->req = req;
	c->method = m;
	c->who = *who;
	*who = (struct pdk__e2b_envd){0};
	c->msg = msg;
	c->keepalive_s = keepalive_of(req);
	LIST_INSERT_HEAD(&e->calls, c, link);
	if (timeout_ms > 0) {
		struct timeval tv = {.tv_sec = (time_t)(timeout_ms / 1000),
				     .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000};

		c->deadline = evtimer_new(e->base, on_deadline, c);
		if (c->deadline == NULL || evtimer_add(c->deadline, &tv) < 0)
			pdk_oom();
	}
	if (m->streaming) {
		c->stream.on_close = on_stream_closed;
		c->stream.on_close_arg = c;
		pdk_http_stream_start_raw(&c->stream, req, "application/connect+json");
		pdk_http_stream_watch(&c->stream, e->base);
	}
	return c;
}

void pdk__e2b_connect_serve(struct pdk_e2b *e, struct evhttp_request *req, const char *path,
			    struct pdk__e2b_envd *who)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const struct pdk__e2b_method *m = find_method(path);
	json_t *msg = NULL;
	uint64_t timeout_ms = 0;
	struct pdk__e2b_call *c;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		pdk_http_header(req, "Allow", "POST");
		(void)pdk_error_setx(&err, ENOSYS, "a Connect call is a POST");
		pdk_http_json(req, 405, error_json(err, &(int){0}));
		pdk__e2b_envd_release(who);
		return;
	}
	if (m == NULL)
		(void)pdk_error_setx(&err, ENOSYS, "no such Connect method '%s'", path);
	else if (check_headers(req, m->streaming, &timeout_ms, &err) == 0)
		(void)read_msg(req, m->streaming, &msg, &err);
	if (err != NULL) {
		if (err->status == EPROTONOSUPPORT) {
			pdk_http_header(req, "Accept-Post",
					"application/json, application/connect+json");
			pdk_http_error(req, 415, "unsupported_media_type", err->field, "%s",
				       err->msg);
		} else {
			early_error(req, m != NULL && m->streaming, err);
		}
		pdk__e2b_envd_release(who);
		return;
	}
	c = call_new(e, req, m, who, msg, timeout_ms);
	c->busy = true; /* the handler may finish it before it returns */
	m->fn(c);
	c->busy = false;
	maybe_free(c);
}
