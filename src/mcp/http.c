/*
 * http.c - the Streamable HTTP transport (docs/mcp.md, "Transports"): one
 * endpoint that serves both eras. A legacy request (2025-11-25, 2025-06-18)
 * belongs to a session that initialize opened (Mcp-Session-Id); a modern one
 * (2026-07-28, its _meta says so) stands alone, its headers checked against
 * its body. Each request's answer is one JSON object, or an event stream
 * when notifications or requests of the server come first (progress, an
 * elicitation: ask.c) or when closing it must cancel the call (2026-07-28
 * tools/call, subscriptions/listen). A client's answer to a request of the
 * server is a POST of its own, in the session it names. A legacy session of
 * a server whose tools can change (a provider's: listChanged) may also hold
 * one GET stream, where the notifications that answer no request go.
 */
#include "common.h"
#include "mcp-internal.h"
#include "http.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#define SESSIONS_MAX   256
#define SESSION_IDLE_S 3600
#define LISTEN_PING_S  15

struct session;

/* One request waiting for its answer. */
struct exchange {
	struct exchange *next;
	struct pdk_mcp_http *h;
	struct session *s;         /* legacy: its session; modern: NULL */
	struct pdk_mcp_conn *conn; /* modern: the request's own connection */
	json_t *id;
	struct evhttp_request *req; /* NULL once answered */
	struct pdk_http_stream stream;
	bool streaming, sse_ok, modern;
};

struct session {
	struct session *next;
	char id[33];
	char *principal;
	struct pdk_mcp_conn *conn;
	struct exchange *pending;
	uint64_t last_ns;
	struct pdk_http_stream listen; /* the GET stream, while `listening` */
	bool listening;
	uint64_t ping_ns; /* when the GET stream was last written */
};

struct pdk_mcp_http {
	struct pdk_mcp *m;
	struct session *sessions;
	struct exchange *modern; /* modern requests in flight */
	bool check_host;
	char **hosts;
};

/* ---- answers ---- */

static bool is_final(const json_t *msg)
{
	return json_object_get(msg, "result") != NULL || json_object_get(msg, "error") != NULL;
}

/* The HTTP status of an answer (2026-07-28 transports: 400 and 404 carry JSON-RPC errors). */
static int status_of(const json_t *msg, bool modern)
{
	json_int_t code =
		json_integer_value(json_object_get(json_object_get(msg, "error"), "code"));

	if (code == 0)
		return 200;
	if (code == PDK_RPC_PARSE_ERROR || code == PDK_RPC_INVALID_REQUEST)
		return 400;
	if (!modern)
		return 200;
	if (code == PDK_RPC_METHOD_NOT_FOUND)
		return 404;
	if (code == PDK_RPC_INVALID_PARAMS || code == PDK_RPC_HEADER_MISMATCH ||
	    code == PDK_RPC_MISSING_CAPABILITY || code == PDK_RPC_UNSUPPORTED_VERSION)
		return 400;
	return 200;
}

static void unlink_exchange(struct exchange *x)
{
	struct exchange **list = x->s ? &x->s->pending : &x->h->modern;

	for (struct exchange **p = list; *p != NULL; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			break;
		}
}

static void exchange_free(struct exchange *x)
{
	struct pdk_mcp_conn *conn = x->conn;

	unlink_exchange(x);
	json_decref(x->id);
	free(x);
	/* A modern request's connection ends with it (after its answer: nothing more to send). */
	if (conn != NULL)
		pdk_mcp_conn_close(conn);
}

/* The client closed the stream: 2026-07-28 cancels the request, 2025 only loses its answer. */
static void stream_gone(void *arg)
{
	struct exchange *x = arg;

	/*
	 * Seen by the watch first, the connection still holds our close callback:
	 * ending the answer drops it (libevent frees the connection and the request
	 * itself); seen by libevent, the stream is already dead and this does nothing.
	 */
	pdk_http_stream_end(&x->stream);
	x->req = NULL;
	exchange_free(x);
}

static void start_stream(struct exchange *x)
{
	pdk_http_header(x->req, "X-Accel-Buffering", "no");
	pdk_http_stream_start(&x->stream, x->req);
	x->stream.on_close = stream_gone;
	x->stream.on_close_arg = x;
	x->streaming = true;
	if (x->modern)
		pdk_http_stream_watch(&x->stream, x->h->m->base);
}

/* A cancelled request: its stream ends without an answer, or it gets an empty one. */
static void drop(struct exchange *x)
{
	if (x->req != NULL && !x->streaming && x->sse_ok)
		start_stream(x);
	if (x->streaming)
		pdk_http_stream_end(&x->stream);
	else if (x->req != NULL)
		evhttp_send_reply(x->req, 204, "No Content", NULL);
	x->req = NULL;
	exchange_free(x);
}

static void deliver(struct exchange *x, const json_t *msg)
{
	if (msg == NULL) {
		drop(x);
		return;
	}
	if (x->req == NULL)
		return;
	if (!is_final(msg) && !x->streaming) {
		if (!x->sse_ok)
			return; /* a client that takes no stream gets the answer alone */
		start_stream(x);
	}
	if (x->streaming) {
		pdk_http_stream_send(&x->stream, NULL, "message", json_deep_copy(msg));
		if (!is_final(msg))
			return;
		pdk_http_stream_end(&x->stream);
	} else {
		pdk_http_json(x->req, status_of(msg, x->modern), json_deep_copy(msg));
	}
	x->req = NULL;
	exchange_free(x);
}

static void send_session(void *ctx, const json_t *related, const json_t *msg)
{
	struct session *s = ctx;

	for (struct exchange *x = s->pending; related != NULL && x != NULL; x = x->next)
		if (json_equal(x->id, (json_t *)related)) {
			deliver(x, msg);
			return;
		}
	/*
	 * A notification of no request (list_changed) goes to the GET stream when
	 * the client holds one; without it the client sees the change at its next
	 * tools/list. Nothing about an answered request goes anywhere.
	 */
	if (related != NULL || msg == NULL || !s->listening || json_object_get(msg, "id") != NULL)
		return;
	pdk_http_stream_send(&s->listen, NULL, "message", json_deep_copy(msg));
	s->ping_ns = pdk_now_mono_ns();
}

static void send_modern(void *ctx, const json_t *related, const json_t *msg)
{
	struct exchange *x = ctx;

	if (related != NULL && json_equal(x->id, (json_t *)related))
		deliver(x, msg);
}

/* A JSON-RPC error as the whole answer, with the HTTP status the transport gives it. */
static void refuse(struct evhttp_request *req, int status, const json_t *id, int code,
		   const char *fmt, ...) PDK_PRINTF(5, 6);
static void refuse(struct evhttp_request *req, int status, const json_t *id, int code,
		   const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pdk_http_json(req, status, pdk_rpc_error(id, code, msg, NULL));
}

/* ---- sessions (the legacy era) ---- */

static void session_free(struct pdk_mcp_http *h, struct session *s)
{
	for (struct session **p = &h->sessions; *p != NULL; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	if (s->listening)
		pdk_http_stream_end(&s->listen);
	while (s->pending != NULL) {
		struct exchange *x = s->pending;

		if (x->streaming)
			pdk_http_stream_end(&x->stream);
		else if (x->req != NULL)
			refuse(x->req, 404, x->id, PDK_RPC_INVALID_REQUEST, "the session ended");
		s->pending = x->next;
		json_decref(x->id);
		free(x);
	}
	pdk_mcp_conn_close(s->conn);
	free(s->principal);
	free(s);
}

static struct session *session_new(struct pdk_mcp_http *h, const char *principal)
{
	struct session *s = pdk_xcalloc(1, sizeof(*s));
	_cleanup_free_ char *identity = NULL;
	unsigned char r[16];

	/* SECURITY: a session id is a capability: 128 bits from the kernel's CSPRNG. */
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		pdk_bug("getrandom failed for a session id");
	for (size_t i = 0; i < sizeof(r); i++)
		(void)snprintf(s->id + 2 * i, 3, "%02x", r[i]);
	s->principal = pdk_xstrdup(principal);
	s->last_ns = pdk_now_mono_ns();
	/* The session is the client: its handles are its own, whoever else holds the token. */
	identity = pdk_xasprintf("%s/session:%s", principal, s->id);
	s->conn = pdk_mcp_conn_new(h->m, identity, "http", send_session, s);
	pdk__mcp_conn_set_principal(s->conn, principal);
	s->next = h->sessions;
	h->sessions = s;
	return s;
}

static struct session *session_find(struct pdk_mcp_http *h, const char *id, const char *principal)
{
	for (struct session *s = h->sessions; id != NULL && s != NULL; s = s->next)
		if (strcmp(s->id, id) == 0 && strcmp(s->principal, principal) == 0) {
			s->last_ns = pdk_now_mono_ns();
			return s;
		}
	return NULL;
}

static size_t session_count(const struct pdk_mcp_http *h)
{
	size_t n = 0;

	for (const struct session *s = h->sessions; s != NULL; s = s->next)
		n++;
	return n;
}

void pdk_mcp_http_tick(struct pdk_mcp_http *h)
{
	uint64_t now = pdk_now_mono_ns();
	struct session *next;

	if (h == NULL)
		return;
	for (struct session *s = h->sessions; s != NULL; s = next) {
		next = s->next;
		/* A client that listens on its GET stream is still there: its session stays. */
		if (s->pending == NULL && !s->listening &&
		    now - s->last_ns > SESSION_IDLE_S * 1000000000ULL) {
			session_free(h, s);
			continue;
		}
		/* An idle GET stream gets a comment now and then, so proxies keep it open. */
		if (s->listening && now - s->ping_ns > LISTEN_PING_S * 1000000000ULL) {
			pdk_http_stream_comment(&s->listen, "keepalive");
			s->ping_ns = now;
		}
	}
}

/* ---- checks before the body ---- */

static const char *header(struct evhttp_request *req, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(req), name);
}

/* The host of "HOST[:PORT]" or "[V6]:PORT" in `out` (at most `len`), without its port. */
static void host_only(const char *hp, char *out, size_t len)
{
	const char *end;

	if (hp[0] == '[' && (end = strchr(hp, ']')) != NULL)
		end++;
	else if ((end = strrchr(hp, ':')) == NULL || strchr(hp, ':') != end)
		end = hp + strlen(hp);
	(void)snprintf(out, len, "%.*s", (int)(end - hp), hp);
}

static bool host_allowed(const struct pdk_mcp_http *h, const char *hp)
{
	static const char *const loopback[] = {"localhost", "127.0.0.1", "[::1]"};
	char host[256];

	host_only(hp, host, sizeof(host));
	for (size_t i = 0; i < PDK_ARRAY_SIZE(loopback); i++)
		if (strcasecmp(host, loopback[i]) == 0)
			return true;
	for (size_t i = 0; h->hosts != NULL && h->hosts[i] != NULL; i++)
		if (strcasecmp(host, h->hosts[i]) == 0)
			return true;
	return false;
}

/*
 * SECURITY: DNS rebinding (2025-11-25 and 2026-07-28 transports, "Security"): a
 * page of another origin must not reach the endpoint through a browser. An
 * Origin, when sent, must be one of the allowed hosts; without credentials,
 * the Host must be too.
 */
static bool origin_ok(struct pdk_mcp_http *h, struct evhttp_request *req)
{
	const char *origin = header(req, "Origin");
	const char *host = header(req, "Host");
	const char *sep = origin ? strstr(origin, "://") : NULL;

	if (origin != NULL && (sep == NULL || !host_allowed(h, sep + 3))) {
		refuse(req, 403, NULL, PDK_RPC_INVALID_REQUEST,
		       "Origin '%.100s' is not allowed: the MCP endpoint serves loopback pages only",
		       origin);
		return false;
	}
	if (h->check_host && (host == NULL || !host_allowed(h, host))) {
		refuse(req, 403, NULL, PDK_RPC_INVALID_REQUEST,
		       "Host '%.100s' is not allowed: connect to localhost or 127.0.0.1",
		       host ? host : "");
		return false;
	}
	return true;
}

/* ---- the modern era: headers mirror the body (2026-07-28 transports, "Server Validation") ---- */

/* A header value, decoded when it is the =?base64?...?= sentinel (caller frees); NULL: bad. */
static char *header_value(const char *v)
{
	size_t n = strlen(v);
	char *out;
	int k;

	if (n < 11 || strncmp(v, "=?base64?", 9) != 0 || strcmp(v + n - 2, "?=") != 0)
		return pdk_xstrdup(v);
	n -= 11;
	if (n % 4 != 0)
		return NULL;
	out = pdk_xmalloc(n / 4 * 3 + 1);
	k = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)v + 9, (int)n);
	for (size_t i = n; k > 0 && i > 0 && v[9 + i - 1] == '='; i--)
		k--;
	if (k < 0) {
		free(out);
		return NULL;
	}
	out[k] = '\0';
	return out;
}

static bool mirrors(struct evhttp_request *req, const char *name, const char *body_value)
{
	const char *v = header(req, name);
	_cleanup_free_ char *decoded = v ? header_value(v) : NULL;

	return decoded != NULL && body_value != NULL && strcmp(decoded, body_value) == 0;
}

static bool headers_ok(struct evhttp_request *req, const struct pdk_rpc_msg *m, const char *version)
{
	const char *name = json_string_value(json_object_get(m->params, "name"));
	bool named = strcmp(m->method, "tools/call") == 0 || strcmp(m->method, "prompts/get") == 0;
	const char *bad = !mirrors(req, "MCP-Protocol-Version", version) ? "MCP-Protocol-Version"
			  : !mirrors(req, "Mcp-Method", m->method)       ? "Mcp-Method"
			  : named && !mirrors(req, "Mcp-Name", name)     ? "Mcp-Name"
									 : NULL;

	if (bad == NULL)
		return true;
	refuse(req, 400, m->id, PDK_RPC_HEADER_MISMATCH,
	       "Header mismatch: the %s header is missing or does not match the body", bad);
	return false;
}

static void serve_modern(struct pdk_mcp_http *h, struct evhttp_request *req,
			 const struct pdk_rpc_msg *m, const char *principal, const char *version)
{
	struct pdk_mcp_conn *conn;
	struct exchange *x;

	if (!headers_ok(req, m, version))
		return;
	if (m->kind != PDK_RPC_REQUEST) {
		evhttp_send_reply(req, 202, "Accepted", NULL);
		return;
	}
	x = pdk_xcalloc(1, sizeof(*x));
	x->h = h;
	x->req = req;
	x->id = json_deep_copy(m->id);
	x->modern = true;
	x->sse_ok = strstr(header(req, "Accept") ?: "", "text/event-stream") != NULL;
	/* Stateless: the credential is the client, its handles bound to it. */
	x->conn = pdk_mcp_conn_new(h->m, principal, "http", send_modern, x);
	x->next = h->modern;
	h->modern = x;
	conn = x->conn;
	conn->refs++; /* an answer given now frees x and closes conn: conn says so */
	pdk__mcp_dispatch(conn, m);
	/* Still unanswered: a call runs. Its stream's close is its cancellation. */
	if (!conn->closed && !x->streaming && x->sse_ok)
		start_stream(x);
	pdk__mcp_conn_unref(conn);
}

/*
 * A message that claims 2026-07-28 by its MCP-Protocol-Version header but
 * whose params lack _meta's io.modelcontextprotocol/protocolVersion: the
 * revision requires _meta on every request (2026-07-28 basic/index, "_meta"),
 * so its params are invalid (-32602, 400). Taken for a
 * legacy message instead, it would be told to send initialize, which that
 * revision removed. A legacy session's messages never carry this header
 * value (initialize does not negotiate it), and initialize itself stays the
 * legacy era's way in. True when the message was refused.
 */
static bool modern_without_meta(struct evhttp_request *req, const struct pdk_rpc_msg *m)
{
	const char *pv = header(req, "MCP-Protocol-Version");

	if (pv == NULL || strcmp(pv, PDK_MCP_VERSION_MODERN) != 0)
		return false;
	if (m->kind == PDK_RPC_REQUEST && strcmp(m->method, "initialize") == 0)
		return false;
	refuse(req, 400, m->id, PDK_RPC_INVALID_PARAMS,
	       "invalid params: a %s request carries io.modelcontextprotocol/protocolVersion "
	       "(and clientCapabilities) in params._meta",
	       PDK_MCP_VERSION_MODERN);
	return true;
}

/* ---- the legacy era ---- */

/* A request in session `s` names no other protocol version than the session's (or none). */
static bool version_ok(struct evhttp_request *req, const struct session *s, const json_t *id)
{
	const char *pv = header(req, "MCP-Protocol-Version");

	if (pv == NULL || s->conn->version == NULL || strcmp(pv, s->conn->version) == 0)
		return true;
	refuse(req, 400, id, PDK_RPC_INVALID_REQUEST,
	       "MCP-Protocol-Version '%.32s' is not the session's (%s)", pv, s->conn->version);
	return false;
}

static struct session *legacy_session(struct pdk_mcp_http *h, struct evhttp_request *req,
				      const struct pdk_rpc_msg *m, const char *principal)
{
	const char *sid = header(req, "Mcp-Session-Id");
	struct session *s;

	if (m->kind == PDK_RPC_REQUEST && strcmp(m->method, "initialize") == 0) {
		if (session_count(h) >= SESSIONS_MAX) {
			refuse(req, 503, m->id, PDK_RPC_INTERNAL_ERROR,
			       "too many MCP sessions (%d): end one (DELETE) first", SESSIONS_MAX);
			return NULL;
		}
		s = session_new(h, principal);
		pdk_http_header(req, "Mcp-Session-Id", s->id);
		return s;
	}
	if (sid == NULL) {
		refuse(req, 400, m->id, PDK_RPC_INVALID_REQUEST,
		       "Mcp-Session-Id is required: send initialize first");
		return NULL;
	}
	if ((s = session_find(h, sid, principal)) == NULL) {
		refuse(req, 404, m->id, PDK_RPC_INVALID_REQUEST,
		       "no session '%.64s': it ended or never was; initialize again", sid);
		return NULL;
	}
	return version_ok(req, s, m->id) ? s : NULL;
}

static void serve_legacy(struct pdk_mcp_http *h, struct evhttp_request *req,
			 const struct pdk_rpc_msg *m, const char *principal)
{
	struct session *s = legacy_session(h, req, m, principal);
	struct exchange *x;

	if (s == NULL)
		return;
	if (m->kind != PDK_RPC_REQUEST) {
		pdk__mcp_dispatch(s->conn, m);
		evhttp_send_reply(req, 202, "Accepted", NULL);
		return;
	}
	x = pdk_xcalloc(1, sizeof(*x));
	x->h = h;
	x->s = s;
	x->req = req;
	x->id = json_deep_copy(m->id);
	x->sse_ok = strstr(header(req, "Accept") ?: "", "text/event-stream") != NULL;
	x->next = s->pending;
	s->pending = x;
	pdk__mcp_dispatch(s->conn, m);
}

static void delete_session(struct pdk_mcp_http *h, struct evhttp_request *req,
			   const char *principal)
{
	struct session *s = session_find(h, header(req, "Mcp-Session-Id"), principal);

	if (s == NULL) {
		refuse(req, 404, NULL, PDK_RPC_INVALID_REQUEST, "no such session");
		return;
	}
	session_free(h, s);
	evhttp_send_reply(req, 204, "No Content", NULL);
}

/* ---- the GET stream (2025-06-18 transports, "Listening for Messages from the Server") ---- */

/* The client closed its GET stream: the session stays, and may open another. */
static void listen_gone(void *arg)
{
	struct session *s = arg;

	/* As for a request's stream (stream_gone): ending it drops our close callback. */
	pdk_http_stream_end(&s->listen);
	s->listening = false;
}

/* The session a GET names, checked as a POST of that session is; NULL: refused. */
static struct session *listen_session(struct pdk_mcp_http *h, struct evhttp_request *req,
				      const char *principal)
{
	const char *sid = header(req, "Mcp-Session-Id");
	struct session *s;

	if (sid == NULL) {
		refuse(req, 400, NULL, PDK_RPC_INVALID_REQUEST,
		       "Mcp-Session-Id is required: a GET stream belongs to a session "
		       "(send initialize first)");
		return NULL;
	}
	/* SECURITY: only the principal that opened the session may listen to it. */
	if ((s = session_find(h, sid, principal)) == NULL) {
		refuse(req, 404, NULL, PDK_RPC_INVALID_REQUEST,
		       "no session '%.64s': it ended or never was; initialize again", sid);
		return NULL;
	}
	if (!version_ok(req, s, NULL))
		return NULL;
	if (s->listening) {
		refuse(req, 409, NULL, PDK_RPC_INVALID_REQUEST,
		       "session '%.64s' already has its GET stream: one per session", sid);
		return NULL;
	}
	return s;
}

/*
 * GET: the session's stream of notifications that answer no request. A
 * server whose tools never change (no provider: listChanged false) would
 * never write to it, so it offers none and GET stays 405 (the spec's way to
 * say so), as it does for a client that takes no event stream.
 */
static void serve_get(struct pdk_mcp_http *h, struct evhttp_request *req, const char *principal)
{
	const char *accept = header(req, "Accept");
	struct session *s;

	if (h->m->provider == NULL || accept == NULL ||
	    strstr(accept, "text/event-stream") == NULL) {
		pdk_http_header(req, "Allow",
				h->m->provider ? "GET, POST, DELETE" : "POST, DELETE");
		refuse(req, 405, NULL, PDK_RPC_INVALID_REQUEST,
		       h->m->provider == NULL
			       ? "the MCP endpoint takes POST (and DELETE to end a session)"
			       : "a GET of the MCP endpoint opens an event stream: send "
				 "'Accept: text/event-stream' and the session's Mcp-Session-Id");
		return;
	}
	if ((s = listen_session(h, req, principal)) == NULL)
		return;
	pdk_http_header(req, "X-Accel-Buffering", "no");
	pdk_http_stream_start(&s->listen, req);
	s->listen.on_close = listen_gone;
	s->listen.on_close_arg = s;
	/* A client that only listens is noticed going away at once, not at the next write. */
	pdk_http_stream_watch(&s->listen, h->m->base);
	s->listening = true;
	s->ping_ns = pdk_now_mono_ns();
}

/* ---- the endpoint ---- */

/*
 * A client's answer to a request of the server (ask.c): it belongs to the
 * session it names, and only to one of this principal (2025-11-25
 * transports: the client POSTs it with Mcp-Session-Id). Without one it
 * answers nothing the server asked: accepted and dropped.
 */
static void serve_answer(struct pdk_mcp_http *h, struct evhttp_request *req,
			 const struct pdk_rpc_msg *m, const char *principal)
{
	const char *sid = header(req, "Mcp-Session-Id");
	struct session *s = sid ? session_find(h, sid, principal) : NULL;

	if (sid != NULL && s == NULL) {
		refuse(req, 404, NULL, PDK_RPC_INVALID_REQUEST,
		       "no session '%.64s': it ended or never was", sid);
		return;
	}
	if (s != NULL)
		pdk__mcp_dispatch(s->conn, m);
	evhttp_send_reply(req, 202, "Accepted", NULL);
}

static void serve_post(struct pdk_mcp_http *h, struct evhttp_request *req, const char *principal)
{
	_cleanup_free_ char *body = NULL;
	struct pdk_rpc_refusal why;
	struct pdk_rpc_msg m;
	const char *modern;
	size_t len;

	if (pdk_http_body(req, h->m->max_message, &body, &len) < 0) {
		refuse(req, 413, NULL, PDK_RPC_PARSE_ERROR,
		       "the message is larger than the server's limit (%zu bytes)",
		       h->m->max_message);
		return;
	}
	if (pdk_rpc_parse(body, len, h->m->max_message, &m, &why) < 0) {
		refuse(req, 400, why.id, why.code, "%s", why.msg);
		pdk_rpc_refusal_release(&why);
		return;
	}
	if (m.kind == PDK_RPC_RESPONSE || m.kind == PDK_RPC_ERROR)
		serve_answer(h, req, &m, principal);
	else if ((modern = pdk__mcp_modern_version(&m)) != NULL)
		serve_modern(h, req, &m, principal, modern);
	else if (!modern_without_meta(req, &m))
		serve_legacy(h, req, &m, principal);
	pdk_rpc_msg_release(&m);
}

void pdk_mcp_http_handle(struct pdk_mcp_http *h, struct evhttp_request *req, const char *principal)
{
	enum evhttp_cmd_type method = evhttp_request_get_command(req);

	if (!origin_ok(h, req))
		return;
	if (method == EVHTTP_REQ_POST) {
		serve_post(h, req, principal);
	} else if (method == EVHTTP_REQ_DELETE) {
		delete_session(h, req, principal);
	} else if (method == EVHTTP_REQ_GET) {
		serve_get(h, req, principal);
	} else {
		pdk_http_header(req, "Allow", "POST, DELETE");
		refuse(req, 405, NULL, PDK_RPC_INVALID_REQUEST,
		       "the MCP endpoint takes POST (and DELETE to end a session)");
	}
}

struct pdk_mcp_http *pdk_mcp_http_new(struct pdk_mcp *m, const struct pdk_mcp_http_opts *o)
{
	struct pdk_mcp_http *h = pdk_xcalloc(1, sizeof(*h));

	h->m = m;
	h->check_host = o->check_host;
	h->hosts = o->hosts ? pdk_strv_dup(o->hosts) : NULL;
	return h;
}

void pdk_mcp_http_free(struct pdk_mcp_http *h)
{
	if (h == NULL)
		return;
	while (h->sessions != NULL)
		session_free(h, h->sessions);
	while (h->modern != NULL) {
		struct exchange *x = h->modern;

		if (x->streaming)
			pdk_http_stream_end(&x->stream);
		else if (x->req != NULL)
			refuse(x->req, 503, x->id, PDK_RPC_INTERNAL_ERROR,
			       "the server is stopping");
		x->req = NULL;
		exchange_free(x);
	}
	pdk_strv_free(h->hosts);
	free(h);
}
