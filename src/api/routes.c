/*
 * http.c - the REST API: authentication, routing, replies
 * (docs/daemon.md, docs/api.yaml).
 *
 * Handlers never format error JSON by hand: pdk__http_error() is the one
 * place an error object is built, and pdk__http_status_error() the one
 * place an errno-style status becomes an HTTP status.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "daemon-internal.h"
#include "guard.h"
#include "supervisor.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/queue.h>
#include <sys/stat.h>

/* JSON bodies are small: anything larger than this is refused before parsing. */
#define JSON_BODY_MAX  (1u << 20)
#define STDIN_BODY_MAX (1u << 20) /* one stdin write */

extern const char pdk_openapi_yaml[];

/* ---- replies ---- */

void pdk__http_json(struct evhttp_request *req, int code, json_t *body)
{
	_cleanup_json_ json_t *b = body;
	_cleanup_free_ char *text = pdk_json_dump_line(b);
	struct evbuffer *buf = evbuffer_new();

	if (buf == NULL || text == NULL)
		pdk_oom();
	evbuffer_add(buf, text, strlen(text));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evhttp_send_reply(req, code, NULL, buf);
	evbuffer_free(buf);
}

void pdk__http_error(struct evhttp_request *req, int code, const char *ecode, const char *field,
		     const char *fmt, ...)
{
	json_t *e = json_object();
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pdk_json_set(e, "code", json_string(ecode));
	pdk_json_set(e, "message", json_string(msg));
	if (field != NULL && field[0] != '\0')
		pdk_json_set(e, "field", json_string(field));
	pdk__http_json(req, code, json_pack("{s:o}", "error", e));
}

void pdk__http_status_error(struct evhttp_request *req, int status, const char *msg)
{
	static const struct {
		int status, code;
		const char *name;
	} map[] = {
		{ENOENT, 404, "not_found"},   {EEXIST, 409, "conflict"},
		{EINVAL, 400, "bad_request"}, {E2BIG, 413, "too_large"},
		{EACCES, 403, "forbidden"},   {EPERM, 403, "forbidden"},
		{EBUSY, 409, "busy"},         {ENOTCONN, 503, "unavailable"},
		{EDQUOT, 429, "limit"},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(map); i++)
		if (map[i].status == status) {
			pdk__http_error(req, map[i].code, map[i].name, NULL, "%s", msg);
			return;
		}
	pdk__http_error(req, 500, "internal", NULL, "%s", msg);
}

void pdk__http_svc_error(struct evhttp_request *req, json_t *reply)
{
	static const struct {
		const char *code;
		int http;
	} map[] = {
		{"not_found", 404}, {"bad_request", 400}, {"conflict", 409},
		{"busy", 409},      {"limit", 429},       {"exec_failed", 400},
	};
	json_t *e = json_object_get(reply, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *field = json_string_value(json_object_get(e, "field"));

	if (reply == NULL) {
		pdk__http_error(req, 503, "unavailable", NULL, "the sandbox's supervisor is gone");
		return;
	}
	for (size_t i = 0; code != NULL && i < PDK_ARRAY_SIZE(map); i++)
		if (strcmp(code, map[i].code) == 0) {
			pdk__http_error(req, map[i].http,
					map[i].http == 429                 ? "limit"
					: strcmp(code, "exec_failed") == 0 ? "bad_request"
									   : code,
					field, "%s", msg ? msg : code);
			return;
		}
	pdk__http_error(req, 500, "internal", field, "%s", msg ? msg : "supervisor error");
}

/* ---- authentication ---- */

struct auth {
	bool admin;
	struct pdk_token_claims sb; /* when !admin */
};

static bool peer_is_owner(struct pdk_daemon *d, struct evhttp_request *req)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (bev == NULL ||
	    getsockopt(bufferevent_getfd(bev), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return false;
	/* SECURITY: the socket is 0600, and the peer is checked again: the daemon's uid or root. */
	return cred.uid == d->uid || cred.uid == 0;
}

static void auth_failed(struct pdk_daemon *d, struct evhttp_request *req, int code, const char *why)
{
	pdk__daemon_event(
		d, "daemon", NULL, "auth.failure",
		json_pack("{s:s, s:s, s:s}", "reason", why, "method",
			  evhttp_request_get_command(req) == EVHTTP_REQ_GET ? "GET" : "other",
			  "path", evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req)) ?: ""));
	pdk__http_error(req, code, code == 401 ? "unauthorized" : "forbidden", NULL, "%s", why);
}

/* 0 and *a filled, or -1 after replying 401. */
static int authenticate(struct pdk_daemon *d, struct evhttp_request *req, bool unix_peer,
			struct auth *a)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	_cleanup_error_ struct pdk_error *err = NULL;
	char hash[65];

	memset(a, 0, sizeof(*a));
	if (h == NULL) {
		if (unix_peer && peer_is_owner(d, req)) {
			a->admin = true;
			return 0;
		}
		auth_failed(d, req, 401, "a bearer token is needed");
		return -1;
	}
	if (strncmp(h, "Bearer ", 7) != 0 || strlen(h + 7) > PDK_TOKEN_MAX_LEN) {
		auth_failed(d, req, 401, "the Authorization header must be 'Bearer TOKEN'");
		return -1;
	}
	h += 7;
	if (strncmp(h, PDK_TOKEN_ADM_PREFIX, strlen(PDK_TOKEN_ADM_PREFIX)) == 0) {
		pdk_token_sha256_hex(h, hash);
		if (pdk_store_token_check(d->store, hash, NULL, &err) == 0) {
			a->admin = true;
			return 0;
		}
		auth_failed(d, req, 401, "unknown or revoked admin token");
		return -1;
	}
	if (pdk_token_verify(d->key, h, pdk_now_real_ns() / 1000000000ULL, &a->sb, &err) < 0) {
		auth_failed(d, req, 401, err->msg);
		return -1;
	}
	return 0;
}

/* Admin, or a sandbox token for `id` that carries `op`. Replies 403 otherwise. */
static bool allowed(struct pdk_daemon *d, struct evhttp_request *req, const struct auth *a,
		    const char *id, unsigned op)
{
	if (a->admin)
		return true;
	if (id == NULL) {
		auth_failed(d, req, 403, "this route needs an admin token");
		return false;
	}
	if (strcmp(a->sb.sb, id) != 0) {
		auth_failed(d, req, 403, "the token belongs to another sandbox");
		return false;
	}
	if ((a->sb.ops & op) == 0) {
		_cleanup_json_ json_t *names = pdk_token_ops_json(op);
		_cleanup_free_ char *why =
			pdk_xasprintf("the token does not allow the '%s' operation",
				      json_string_value(json_array_get(names, 0)) ?: "?");

		auth_failed(d, req, 403, why);
		return false;
	}
	return true;
}

/* ---- request plumbing ---- */

struct route_ctx {
	struct pdk_daemon *d;
	struct evhttp_request *req;
	struct auth auth;
	enum evhttp_cmd_type method;
	char *segs[6]; /* path segments after /v1 */
	size_t nsegs;
	struct evkeyvalq query;
	char *body;
	size_t body_len;
};

/* The whole body (NUL-terminated copy), at most `max` bytes; -1 after replying 413. */
static int read_body(struct route_ctx *c, size_t max)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
	size_t n = evbuffer_get_length(in);

	if (n > max) {
		pdk__http_error(c->req, 413, "too_large", "", "the body is larger than %zu bytes",
				max);
		return -1;
	}
	c->body = pdk_xmalloc(n + 1);
	if (evbuffer_remove(in, c->body, n) != (int)n)
		pdk_oom();
	c->body[n] = '\0';
	c->body_len = n;
	return 0;
}

/* A JSON body, whatever its Content-Type says (curl -d sends a form type): it is parsed strictly.
 */
static int json_body(struct route_ctx *c)
{
	return read_body(c, JSON_BODY_MAX);
}

static void bad_request(struct evhttp_request *req, const struct pdk_req_error *e)
{
	pdk__http_error(req, 400, "bad_request", e->field, "%s", e->msg);
}

static const char *query(struct route_ctx *c, const char *key)
{
	return evhttp_find_header(&c->query, key);
}

static struct pdk_sb *find_sb(struct route_ctx *c, const char *id)
{
	struct pdk_sb *sb = pdk__sb_find(c->d, id);

	if (sb == NULL || sb->destroying) {
		_cleanup_json_ json_t *ended = sb == NULL ? pdk__sb_ended(c->d, id) : NULL;

		if (ended != NULL)
			pdk__http_error(c->req, 409, "conflict", NULL,
					"sandbox '%s' has ended (%s)", id,
					json_string_value(json_object_get(ended, "end_reason")));
		else
			pdk__http_error(c->req, 404, "not_found", NULL, "no sandbox '%s'", id);
		return NULL;
	}
	sb->last_active_ns = pdk_now_mono_ns();
	return sb;
}

/* A sandbox that can take control calls (running or paused). */
static struct pdk_sb *live_sb(struct route_ctx *c, const char *id)
{
	struct pdk_sb *sb = find_sb(c, id);

	if (sb != NULL && sb->ctl_fd < 0) {
		pdk__http_error(c->req, 409, "conflict", NULL, "sandbox '%s' is %s", id,
				sb->row.state);
		return NULL;
	}
	return sb;
}

/* ---- routes without a sandbox ---- */

static void route_health(struct route_ctx *c)
{
	pdk__http_json(c->req, 200,
		       json_pack("{s:s, s:s, s:I}", "status", "ok", "version", PDK_VERSION,
				 "sandboxes", (json_int_t)pdk__sb_count(c->d)));
}

static void route_openapi(struct route_ctx *c)
{
	struct evbuffer *buf = evbuffer_new();

	if (buf == NULL)
		pdk_oom();
	evbuffer_add(buf, pdk_openapi_yaml, strlen(pdk_openapi_yaml));
	evhttp_add_header(evhttp_request_get_output_headers(c->req), "Content-Type",
			  "application/yaml");
	evhttp_send_reply(c->req, 200, "OK", buf);
	evbuffer_free(buf);
}

static void route_create(struct route_ctx *c)
{
	struct pdk_req_create cr;
	struct pdk_req_error e = {0};
	const char *hkey =
		evhttp_find_header(evhttp_request_get_input_headers(c->req), "Idempotency-Key");

	if (json_body(c) < 0)
		return;
	if (pdk_req_parse_create(c->body, c->body_len, &cr, &e) < 0) {
		bad_request(c->req, &e);
		return;
	}
	if (hkey != NULL && (strlen(hkey) == 0 || strlen(hkey) > 200)) {
		pdk_req_create_release(&cr);
		pdk__http_error(c->req, 400, "bad_request", "Idempotency-Key",
				"the Idempotency-Key header must be 1 to 200 characters");
		return;
	}
	pdk__sb_create(c->d, c->req, &cr, hkey);
	pdk_req_create_release(&cr);
}

static bool label_matches(json_t *labels, const char *key, const char *want)
{
	const char *v = json_string_value(json_object_get(labels, key));

	return want == NULL || (v != NULL && strcmp(v, want) == 0);
}

/* The label filters of the list (session, workflow, agent, label=k=v). */
static bool labels_match(struct route_ctx *c, json_t *labels)
{
	const char *label = query(c, "label"), *eq;

	if (!label_matches(labels, "session", query(c, "session")) ||
	    !label_matches(labels, "workflow", query(c, "workflow")) ||
	    !label_matches(labels, "agent", query(c, "agent")))
		return false;
	if (label != NULL && (eq = strchr(label, '=')) != NULL) {
		_cleanup_free_ char *k = strndup(label, (size_t)(eq - label));

		if (k == NULL)
			pdk_oom();
		return label_matches(labels, k, eq + 1);
	}
	return true;
}

static bool list_match(struct route_ctx *c, struct pdk_sb *sb)
{
	const char *state = query(c, "state");

	if (sb->destroying || !labels_match(c, sb->labels))
		return false;
	return state == NULL || strcmp(state, "all") == 0 || strcmp(state, sb->row.state) == 0;
}

struct ended_list {
	struct route_ctx *c;
	json_t *a;
};

static int add_ended(void *data, const struct pdk_store_ended *e)
{
	struct ended_list *l = data;
	json_t *o = json_loads(e->sandbox, 0, NULL);

	if (json_is_object(o) && labels_match(l->c, json_object_get(o, "labels")))
		json_array_append(l->a, o);
	json_decref(o);
	return 0;
}

/* Live sandboxes; ended ones (kept for --retention) only with ?state=ended or ?state=all. */
static void route_list(struct route_ctx *c)
{
	const char *state = query(c, "state");
	_cleanup_error_ struct pdk_error *err = NULL;
	struct ended_list l = {.c = c, .a = json_array()};

	for (struct pdk_sb *sb = c->d->sandboxes; sb != NULL; sb = sb->next)
		if (list_match(c, sb))
			json_array_append_new(l.a, pdk__sb_json(sb, NULL));
	if (state != NULL && (strcmp(state, "ended") == 0 || strcmp(state, "all") == 0) &&
	    pdk_store_ended_each(c->d->store, add_ended, &l, &err) < 0) {
		json_decref(l.a);
		pdk__http_status_error(c->req, err->status, err->msg);
		return;
	}
	pdk__http_json(c->req, 200, json_pack("{s:o}", "sandboxes", l.a));
}

static bool kill_match(struct pdk_sb *sb, const struct pdk_req_kill *k)
{
	const char *key;
	json_t *v;

	if (sb->destroying)
		return false;
	for (size_t i = 0; k->ids != NULL && k->ids[i] != NULL; i++)
		if (strcmp(k->ids[i], sb->row.id) == 0)
			return true;
	if (k->session == NULL && k->workflow == NULL && k->agent == NULL && k->labels == NULL)
		return false;
	if (!label_matches(sb->labels, "session", k->session) ||
	    !label_matches(sb->labels, "workflow", k->workflow) ||
	    !label_matches(sb->labels, "agent", k->agent))
		return false;
	json_object_foreach(
		k->labels, key,
		v) if (!label_matches(sb->labels, key, json_string_value(v))) return false;
	return true;
}

static void route_kill(struct route_ctx *c)
{
	struct pdk_req_kill k;
	struct pdk_req_error e = {0};
	json_t *killed = json_array();
	struct pdk_sb *next;

	if (json_body(c) < 0 || (pdk_req_parse_kill(c->body, c->body_len, &k, &e) < 0 &&
				 (bad_request(c->req, &e), true))) {
		json_decref(killed);
		return;
	}
	for (struct pdk_sb *sb = c->d->sandboxes; sb != NULL; sb = next) {
		next = sb->next;
		if (!kill_match(sb, &k))
			continue;
		json_array_append_new(killed, json_string(sb->row.id));
		pdk__daemon_event(c->d, sb->row.id, sb->labels, "kill",
				  json_pack("{s:s}", "reason", k.reason ? k.reason : "kill"));
		pdk__sb_destroy(sb, "killed", NULL);
	}
	pdk__daemon_event(c->d, "daemon", NULL, "kill",
			  json_pack("{s:s?, s:s?, s:s?, s:O?, s:O, s:s}", "session", k.session,
				    "workflow", k.workflow, "agent", k.agent, "labels", k.labels,
				    "killed", killed, "reason", k.reason ? k.reason : "kill"));
	pdk_req_kill_release(&k);
	pdk__http_json(c->req, 200, json_pack("{s:o}", "killed", killed));
}

static int pool_json(void *data, const char *profile, uint64_t size)
{
	struct pdk_daemon *d = ((void **)data)[0];
	json_t *a = ((void **)data)[1];
	json_int_t ready = 0, starting = 0;

	for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = sb->next) {
		if (!sb->row.pool || sb->destroying || strcmp(sb->row.profile, profile) != 0)
			continue;
		if (strcmp(sb->row.state, "starting") == 0 || sb->warming)
			starting++;
		else if (strcmp(sb->row.state, "running") == 0)
			ready++;
	}
	json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I}", "profile", profile, "size",
					   (json_int_t)size, "ready", ready, "starting", starting));
	return 0;
}

static void route_pools(struct route_ctx *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *a = json_array();
	void *data[2] = {c->d, a};

	if (pdk_store_pool_each(c->d->store, pool_json, data, &err) < 0) {
		json_decref(a);
		pdk__http_status_error(c->req, err->status, err->msg);
		return;
	}
	pdk__http_json(c->req, 200, json_pack("{s:o}", "pools", a));
}

static void route_pool_put(struct route_ctx *c, const char *profile)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_req_error e = {0};
	uint64_t size;

	if (!pdk_req_name_ok(profile)) {
		pdk__http_error(c->req, 400, "bad_request", "profile", "bad profile name");
		return;
	}
	if (json_body(c) < 0)
		return;
	if (pdk_req_parse_pool(c->body, c->body_len, &size, &e) < 0) {
		bad_request(c->req, &e);
		return;
	}
	if (pdk_store_pool_set(c->d->store, profile, size, &err) < 0) {
		pdk__http_status_error(c->req, err->status, err->msg);
		return;
	}
	pdk__http_json(c->req, 200,
		       json_pack("{s:s, s:I}", "profile", profile, "size", (json_int_t)size));
	pdk__pools_now(c->d); /* a new or larger pool starts filling now, not at the next tick */
}

static void route_events(struct route_ctx *c)
{
	const char *since = query(c, "since"), *sandbox = query(c, "sandbox");
	uint64_t after = UINT64_MAX;

	if (!c->auth.admin &&
	    (sandbox == NULL || !allowed(c->d, c->req, &c->auth, sandbox, PDK_TOKEN_OP_READ))) {
		if (sandbox == NULL)
			auth_failed(c->d, c->req, 403, "a sandbox token reads only its own events");
		return;
	}
	if (since != NULL && pdk_parse_u64(since, UINT64_MAX - 1, &after) < 0) {
		pdk__http_error(c->req, 400, "bad_request", "since",
				"'since' must be an audit sequence number");
		return;
	}
	pdk__sse_subscribe(c->d, c->req, sandbox, query(c, "session"), query(c, "kind"), after);
}

/* ---- routes of one sandbox ---- */

static void route_get(struct route_ctx *c, const char *id)
{
	struct pdk_sb *sb = pdk__sb_find(c->d, id);
	json_t *ended;

	if (sb != NULL && !sb->destroying) {
		sb->last_active_ns = pdk_now_mono_ns();
		pdk__http_json(c->req, 200, pdk__sb_json(sb, NULL));
	} else if (sb == NULL && (ended = pdk__sb_ended(c->d, id)) != NULL) {
		pdk__http_json(c->req, 200, ended); /* state "ended", end_reason, ended_at */
	} else {
		pdk__http_error(c->req, 404, "not_found", NULL, "no sandbox '%s'", id);
	}
}

static void route_delete(struct route_ctx *c, const char *id)
{
	struct pdk_sb *sb = pdk__sb_find(c->d, id);
	_cleanup_json_ json_t *ended = NULL;

	if (sb == NULL && (ended = pdk__sb_ended(c->d, id)) != NULL) {
		/* Already ended: the same answer as the DELETE that ended it. */
		pdk__http_json(c->req, 200, json_pack("{s:s, s:s}", "id", id, "state", "ended"));
		return;
	}
	if (sb == NULL) {
		pdk__http_error(c->req, 404, "not_found", NULL, "no sandbox '%s'", id);
		return;
	}
	pdk__sb_destroy(sb, "deleted", c->req);
}

static void route_exec(struct route_ctx *c, struct pdk_sb *sb)
{
	struct pdk_req_exec er;
	struct pdk_req_error e = {0};
	const char *accept = evhttp_find_header(evhttp_request_get_input_headers(c->req), "Accept");
	const char *what = NULL;

	if (json_body(c) < 0)
		return;
	if (pdk_req_parse_exec(c->body, c->body_len, &er, &e) < 0) {
		bad_request(c->req, &e);
		return;
	}
	if (!pdk__sb_budget_ok(sb, &what)) {
		pdk__daemon_event(c->d, sb->row.id, sb->labels, "limit.exceeded",
				  json_pack("{s:s, s:s}", "limit", what, "request", "exec"));
		pdk_req_exec_release(&er);
		pdk__http_error(c->req, 429, "limit", what, "the sandbox's %s budget is spent",
				what);
		return;
	}
	pdk__exec_start(sb, c->req, &er,
			er.stream || (accept != NULL && strstr(accept, "text/event-stream")));
	pdk_req_exec_release(&er);
}

static void route_token(struct route_ctx *c, struct pdk_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *token = NULL;
	struct pdk_req_token t;
	struct pdk_req_error e = {0};
	uint64_t exp;
	char ts[40];

	if (json_body(c) < 0)
		return;
	if (pdk_req_parse_token(c->body, c->body_len, &t, &e) < 0) {
		bad_request(c->req, &e);
		return;
	}
	exp = pdk_now_real_ns() / 1000000000ULL + t.ttl_s;
	if (pdk_token_mint(c->d->key, sb->row.id, t.ops, exp, &token, &err) < 0) {
		pdk__http_status_error(c->req, err->status, err->msg);
		return;
	}
	pdk_events_format_ts(exp * 1000000000ULL, ts, sizeof(ts));
	pdk__daemon_event(
		c->d, sb->row.id, sb->labels, "token.create",
		json_pack("{s:o, s:s}", "ops", pdk_token_ops_json(t.ops), "expires_at", ts));
	pdk__http_json(c->req, 201,
		       json_pack("{s:s, s:s, s:o}", "token", token, "expires_at", ts, "ops",
				 pdk_token_ops_json(t.ops)));
}

/* ---- forwarded control operations ---- */

struct fwd {
	struct evhttp_request *req;
	char *kind; /* what the answer becomes */
};

static void forwarded(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct fwd *f = ctx;
	json_t *out;

	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
	if (reply == NULL || json_object_get(reply, "error") != NULL) {
		pdk__http_svc_error(f->req, reply);
	} else if (strcmp(f->kind, "sandbox") == 0) {
		const char *state = json_string_value(json_object_get(reply, "state"));

		if (state != NULL) {
			free(sb->row.state);
			sb->row.state = pdk_xstrdup(state);
			pdk__sb_save(sb);
		}
		pdk__http_json(f->req, 200, pdk__sb_json(sb, NULL));
	} else {
		out = json_deep_copy(reply);
		(void)json_object_del(out, "req");
		pdk__http_json(f->req, 200, out);
	}
	free(f->kind);
	free(f);
}

static void forward(struct route_ctx *c, struct pdk_sb *sb, json_t *op, const char *kind)
{
	struct fwd *f = pdk_xcalloc(1, sizeof(*f));
	const char *name = json_string_value(json_object_get(op, "op"));
	int rc;

	f->req = c->req;
	f->kind = pdk_xstrdup(kind);
	pdk__daemon_event(c->d, sb->row.id, sb->labels, "sandbox.control",
			  json_pack("{s:s}", "op", name ? name : "?"));
	rc = pdk__sb_call(sb, op, NULL, 0, forwarded, f);
	if (rc < 0) {
		free(f->kind);
		free(f);
		pdk__http_status_error(c->req, -rc == ENOTCONN ? ENOTCONN : EIO,
				       "cannot reach the sandbox's supervisor");
	}
}

static const char *path_param(struct route_ctx *c)
{
	const char *p = query(c, "path");

	if (p == NULL || p[0] != '/' || strlen(p) > 4096) {
		pdk__http_error(c->req, 400, "bad_request", "path",
				"'path' must be an absolute path in the sandbox");
		return NULL;
	}
	return p;
}

static void route_control(struct route_ctx *c, struct pdk_sb *sb, const char *what)
{
	struct pdk_req_error e = {0};
	char *name = NULL;

	if (strcmp(what, "pause") == 0 || strcmp(what, "resume") == 0) {
		forward(c, sb, json_pack("{s:s}", "op", what), "sandbox");
	} else if (strcmp(what, "snapshot") == 0 || strcmp(what, "rollback") == 0 ||
		   strcmp(what, "commit") == 0) {
		const char *key = what[0] == 's' ? "name" : what[0] == 'r' ? "snapshot" : NULL;
		bool restart = false;
		json_t *op;

		if (json_body(c) < 0)
			return;
		if (pdk_req_parse_ws(c->body, c->body_len, key, what[0] == 'r', key ? &name : NULL,
				     &restart, &e) < 0) {
			bad_request(c->req, &e);
			return;
		}
		if (key != NULL && name == NULL) {
			char id[37];

			pdk_make_id(id);
			name = pdk_xasprintf("snap-%.8s", id + 28);
		}
		op = json_pack("{s:s, s:b}", "op", what, "restart", restart);
		if (key != NULL)
			pdk_json_set(op, key, json_string(name));
		forward(c, sb, op, "raw");
		free(name);
	} else {
		forward(c, sb, json_pack("{s:s}", "op", what), "raw");
	}
}

/* ---- dispatch ---- */

struct sb_route {
	const char *name;
	enum evhttp_cmd_type method;
	unsigned op; /* what a sandbox token needs */
	bool live;   /* needs a control connection */
};

static const struct sb_route sb_routes[] = {
	{"exec", EVHTTP_REQ_POST, PDK_TOKEN_OP_EXEC, true},
	{"tokens", EVHTTP_REQ_POST, 0, false},
	{"pause", EVHTTP_REQ_POST, PDK_TOKEN_OP_CONTROL, true},
	{"resume", EVHTTP_REQ_POST, PDK_TOKEN_OP_CONTROL, true},
	{"snapshot", EVHTTP_REQ_POST, PDK_TOKEN_OP_CONTROL, true},
	{"rollback", EVHTTP_REQ_POST, PDK_TOKEN_OP_CONTROL, true},
	{"commit", EVHTTP_REQ_POST, PDK_TOKEN_OP_CONTROL, true},
	{"diff", EVHTTP_REQ_GET, PDK_TOKEN_OP_READ, true},
	{"stat", EVHTTP_REQ_GET, PDK_TOKEN_OP_READ, true},
	{"ls", EVHTTP_REQ_GET, PDK_TOKEN_OP_READ, true},
	{"files", EVHTTP_REQ_GET, PDK_TOKEN_OP_FILES, true},
	{"files", EVHTTP_REQ_PUT, PDK_TOKEN_OP_FILES, true},
	{"files", EVHTTP_REQ_DELETE, PDK_TOKEN_OP_FILES, true},
	{"archive", EVHTTP_REQ_GET, PDK_TOKEN_OP_FILES, true},
	{"archive", EVHTTP_REQ_PUT, PDK_TOKEN_OP_FILES, true},
};

void pdk__files_route(struct pdk_sb *sb, struct evhttp_request *req, const char *what,
		      enum evhttp_cmd_type method, const char *path, struct evkeyvalq *q,
		      uint64_t max_body);

/*
 * POST /v1/sandboxes/{id}/exec/{exec_id}/signal {"signal":"TERM"},
 * .../stdin[?eof=1] (raw bytes), .../resize {"cols":N,"rows":N}.
 */
static void exec_session_route(struct route_ctx *c, const char *id)
{
	struct pdk_req_error e = {0};
	const char *what = c->nsegs == 5 ? c->segs[4] : "";
	const char *eof;
	struct pdk_sb *sb;
	uint64_t eid, cols, rows;
	int sig;

	if (c->nsegs != 5 || c->method != EVHTTP_REQ_POST ||
	    (strcmp(what, "signal") != 0 && strcmp(what, "stdin") != 0 &&
	     strcmp(what, "resize") != 0)) {
		pdk__http_error(c->req, 404, "not_found", NULL, "no such route");
		return;
	}
	if (!allowed(c->d, c->req, &c->auth, id, PDK_TOKEN_OP_EXEC) ||
	    (sb = live_sb(c, id)) == NULL)
		return;
	if (pdk_parse_u64(c->segs[3], INT32_MAX, &eid) < 0) {
		pdk__http_error(c->req, 404, "not_found", "exec_id",
				"no command '%s' in this sandbox: 'exec_id' is a number",
				c->segs[3]);
		return;
	}
	if (strcmp(what, "stdin") == 0) {
		if (read_body(c, STDIN_BODY_MAX) < 0)
			return;
		eof = query(c, "eof");
		if (eof != NULL && strcmp(eof, "0") != 0 && strcmp(eof, "1") != 0) {
			pdk__http_error(c->req, 400, "bad_request", "eof", "'eof' must be 0 or 1");
			return;
		}
		pdk__exec_stdin(sb, c->req, eid, c->body, c->body_len,
				eof != NULL && strcmp(eof, "1") == 0);
		return;
	}
	if (json_body(c) < 0)
		return;
	if (strcmp(what, "resize") == 0) {
		if (pdk_req_parse_resize(c->body, c->body_len, &cols, &rows, &e) < 0) {
			bad_request(c->req, &e);
			return;
		}
		pdk__exec_resize(sb, c->req, eid, cols, rows);
		return;
	}
	if (pdk_req_parse_signal(c->body, c->body_len, &sig, &e) < 0) {
		bad_request(c->req, &e);
		return;
	}
	forward(c, sb,
		json_pack("{s:s, s:I, s:i}", "op", "signal", "exec", (json_int_t)eid, "sig", sig),
		"raw");
}

static void sandbox_sub_route(struct route_ctx *c, const char *id)
{
	const char *what = c->segs[2];
	const struct sb_route *r = NULL;
	struct pdk_sb *sb;
	const char *path;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(sb_routes); i++)
		if (strcmp(sb_routes[i].name, what) == 0 && sb_routes[i].method == c->method)
			r = &sb_routes[i];
	if (c->nsegs >= 4 && strcmp(what, "exec") == 0) {
		exec_session_route(c, id);
		return;
	}
	if (r == NULL || c->nsegs != 3) {
		pdk__http_error(c->req, 404, "not_found", NULL, "no such route");
		return;
	}
	/* Minting tokens is for admins only, never for a token holder. */
	if (!allowed(c->d, c->req, &c->auth, r->op ? id : NULL, r->op))
		return;
	sb = r->live ? live_sb(c, id) : find_sb(c, id);
	if (sb == NULL)
		return;
	if (strcmp(what, "exec") == 0)
		route_exec(c, sb);
	else if (strcmp(what, "tokens") == 0)
		route_token(c, sb);
	else if (strcmp(what, "stat") == 0 || strcmp(what, "ls") == 0) {
		if ((path = path_param(c)) != NULL)
			forward(c, sb,
				json_pack("{s:s, s:s}", "op", what[0] == 's' ? "stat" : "list",
					  "path", path),
				"raw");
	} else if (strcmp(what, "files") == 0 || strcmp(what, "archive") == 0) {
		if ((path = path_param(c)) != NULL)
			pdk__files_route(sb, c->req, what, c->method, path, &c->query,
					 c->d->max_body);
	} else
		route_control(c, sb, what);
}

static void dispatch(struct route_ctx *c)
{
	const char *s0 = c->nsegs > 0 ? c->segs[0] : "";
	bool get = c->method == EVHTTP_REQ_GET;

	if (c->nsegs == 1 && strcmp(s0, "health") == 0 && get)
		route_health(c);
	else if (c->nsegs == 1 && strcmp(s0, "openapi.yaml") == 0 && get)
		route_openapi(c);
	else if (strcmp(s0, "events") == 0 && c->nsegs == 1 && get)
		route_events(c);
	else if (c->nsegs >= 2 && strcmp(s0, "sandboxes") == 0) {
		if (c->nsegs >= 3)
			sandbox_sub_route(c, c->segs[1]);
		else if (get && allowed(c->d, c->req, &c->auth, c->segs[1], PDK_TOKEN_OP_READ))
			route_get(c, c->segs[1]);
		else if (c->method == EVHTTP_REQ_DELETE &&
			 allowed(c->d, c->req, &c->auth, c->segs[1], PDK_TOKEN_OP_CONTROL))
			route_delete(c, c->segs[1]);
		else if (!get && c->method != EVHTTP_REQ_DELETE)
			pdk__http_error(c->req, 405, "bad_request", NULL, "method not allowed");
	} else if (!allowed(c->d, c->req, &c->auth, NULL, 0)) {
		return;
	} else if (c->nsegs == 1 && strcmp(s0, "sandboxes") == 0 && c->method == EVHTTP_REQ_POST)
		route_create(c);
	else if (c->nsegs == 1 && strcmp(s0, "sandboxes") == 0 && get)
		route_list(c);
	else if (c->nsegs == 1 && strcmp(s0, "kill") == 0 && c->method == EVHTTP_REQ_POST)
		route_kill(c);
	else if (c->nsegs == 1 && strcmp(s0, "pools") == 0 && get)
		route_pools(c);
	else if (c->nsegs == 2 && strcmp(s0, "pools") == 0 && c->method == EVHTTP_REQ_PUT)
		route_pool_put(c, c->segs[1]);
	else
		pdk__http_error(c->req, 404, "not_found", NULL, "no such route");
}

/* Split "/v1/a/b/c" into segments; false when it is not under /v1 or has odd segments. */
static bool split_path(struct route_ctx *c, const char *path)
{
	_cleanup_free_ char *copy = NULL;
	char *p, *save = NULL, *seg;

	if (path == NULL || strncmp(path, "/v1/", 4) != 0 || strlen(path) > 512)
		return false;
	copy = pdk_xstrdup(path + 4);
	for (p = copy; (seg = strtok_r(p, "/", &save)) != NULL; p = NULL) {
		if (c->nsegs == PDK_ARRAY_SIZE(c->segs) || !pdk_req_name_ok(seg))
			return false;
		c->segs[c->nsegs++] = pdk_xstrdup(seg);
	}
	return c->nsegs > 0;
}

void pdk__http_handle(struct pdk_daemon *d, struct evhttp_request *req, bool unix_peer)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	struct route_ctx c = {.d = d, .req = req, .method = evhttp_request_get_command(req)};
	const char *q = evhttp_uri_get_query(uri);

	if (pdk__guard_answer(req))
		return; /* a request the guard refused: answered before authentication */
	TAILQ_INIT(&c.query);
	if (!split_path(&c, evhttp_uri_get_path(uri))) {
		pdk__http_error(req, 404, "not_found", NULL, "no such route");
	} else if (q != NULL && evhttp_parse_query_str(q, &c.query) < 0) {
		pdk__http_error(req, 400, "bad_request", "", "malformed query string");
	} else if (authenticate(d, req, unix_peer, &c.auth) == 0) {
		dispatch(&c);
	}
	for (size_t i = 0; i < c.nsegs; i++)
		free(c.segs[i]);
	evhttp_clear_headers(&c.query);
	free(c.body);
}
