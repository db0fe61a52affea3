/*
 * plane.c - E2B's control plane (docs/e2b.md, "Control plane"): the
 * routes the SDKs call on E2B_API_URL, who asks (X-API-KEY), E2B's error
 * shape {"code": HTTP status, "message"}, and the dispatch.
 */
#include "common.h"
#include "e2b-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* JSON bodies of the control plane are small. */
#define JSON_BODY_MAX (1u << 20)

void pdk__e2b_plane_fail(struct evhttp_request *req, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pdk_http_json(req, code, json_pack("{s:i, s:s}", "code", code, "message", msg));
}

void pdk__e2b_plane_error(struct evhttp_request *req, const struct pdk_error *err)
{
	static const struct {
		int status, http;
	} map[] = {
		{ENOENT, 404},   {EINVAL, 400}, {ENOEXEC, 400},  {EEXIST, 409},
		{EALREADY, 409}, {EBUSY, 409},  {EDQUOT, 429},   {E2BIG, 413},
		{EACCES, 403},   {EPERM, 403},  {ENOTCONN, 503}, {EKEYREJECTED, 401},
	};
	int http = 500;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(map); i++)
		if (map[i].status == err->status)
			http = map[i].http;
	if (err->field != NULL && strstr(err->msg, err->field) == NULL)
		pdk__e2b_plane_fail(req, http, "%s: %s", err->field, err->msg);
	else
		pdk__e2b_plane_fail(req, http, "%s", err->msg);
}

/* ---- request plumbing ---- */

int pdk__e2b_json_body(struct pdk__e2b_req *r, json_t **out)
{
	json_error_t je;
	json_t *v;

	*out = NULL;
	if (pdk_http_body(r->req, JSON_BODY_MAX, &r->body, &r->body_len) < 0) {
		pdk__e2b_plane_fail(r->req, 413, "the body is larger than %u bytes", JSON_BODY_MAX);
		return -1;
	}
	v = r->body_len ? json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je)
			: json_object();
	if (v == NULL || !json_is_object(v)) {
		json_decref(v);
		pdk__e2b_plane_fail(r->req, 400, "the body is not a JSON object: %s",
				    v == NULL ? je.text : "another JSON value");
		return -1;
	}
	*out = v;
	return 0;
}

const char *pdk__e2b_query(struct pdk__e2b_req *r, const char *key)
{
	return evhttp_find_header(&r->query, key);
}

void pdk__e2b_record(struct pdk__e2b_req *r, const char *route, const char *sandbox)
{
	pdk_ctl_event_held(
		r->e->ctl, sandbox ? sandbox : "daemon", NULL, "e2b.request",
		json_pack("{s:s, s:s, s:s?}", "route", route, "key", r->key, "sandbox", sandbox));
}

int pdk__e2b_owned(struct pdk__e2b_req *r, const char *id, struct pdk_ctl_view *v)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *owner;

	if (pdk_ctl_get(r->e->ctl, id, v, &err) < 0) {
		pdk__e2b_plane_fail(r->req, 404, "sandbox '%s' not found", id);
		return -1;
	}
	owner = json_string_value(json_object_get(v->labels, PDK__E2B_LABEL_KEY));
	/* SECURITY: another key's sandbox, or the native API's, is not there for this key. */
	if (owner == NULL || strcmp(owner, r->key) != 0 || pdk__e2b_state(v->state) == NULL) {
		pdk_ctl_view_release(v);
		pdk__e2b_plane_fail(r->req, 404, "sandbox '%s' not found", id);
		return -1;
	}
	return 0;
}

/* ---- who asks ---- */

/*
 * SECURITY: every control-plane route but /health needs X-API-KEY, a key
 * `paddock serve e2b-key create` issued (checked by shape first, then by
 * its SHA-256). A refusal is recorded as auth.failure.
 */
static int authenticate(struct pdk__e2b_req *r)
{
	const char *key = evhttp_find_header(evhttp_request_get_input_headers(r->req), "X-API-KEY");
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *why;

	if (key == NULL)
		why = "X-API-KEY is needed: an E2B API key from 'paddock serve e2b-key create'";
	else if (pdk_ctl_e2b_key_check(r->e->ctl, key, &r->key, &err) == 0)
		return 0;
	else
		why = err->msg;
	pdk_ctl_event_held(r->e->ctl, "daemon", NULL, "auth.failure",
			   json_pack("{s:s, s:s}", "reason", why, "front", "e2b"));
	pdk__e2b_plane_fail(r->req, 401, "%s", why);
	return -1;
}

/* ---- dispatch ---- */

static bool is(struct pdk__e2b_req *r, enum evhttp_cmd_type m, size_t n, const char *s0)
{
	return r->method == m && r->nsegs == n && strcmp(r->segs[0], s0) == 0;
}

/* /sandboxes/{id}/VERB and /v2/sandboxes/{id}/VERB. */
static bool sub(struct pdk__e2b_req *r, bool v2, const char *verb)
{
	size_t o = v2 ? 1 : 0;

	return r->method == EVHTTP_REQ_POST && r->nsegs == 3 + o &&
	       (!v2 || strcmp(r->segs[0], "v2") == 0) && strcmp(r->segs[o], "sandboxes") == 0 &&
	       strcmp(r->segs[o + 2], verb) == 0;
}

static bool is_v2_sandboxes(struct pdk__e2b_req *r, enum evhttp_cmd_type m)
{
	return r->method == m && r->nsegs == 2 && strcmp(r->segs[0], "v2") == 0 &&
	       strcmp(r->segs[1], "sandboxes") == 0;
}

static void dispatch(struct pdk__e2b_req *r)
{
	if (is(r, EVHTTP_REQ_POST, 1, "sandboxes") || is_v2_sandboxes(r, EVHTTP_REQ_POST))
		pdk__e2b_route_create(r);
	else if (is(r, EVHTTP_REQ_GET, 1, "sandboxes") || is_v2_sandboxes(r, EVHTTP_REQ_GET))
		pdk__e2b_route_list(r);
	else if (is(r, EVHTTP_REQ_GET, 2, "sandboxes"))
		pdk__e2b_route_get(r, r->segs[1]);
	else if (is(r, EVHTTP_REQ_DELETE, 2, "sandboxes"))
		pdk__e2b_route_kill(r, r->segs[1]);
	else if (sub(r, false, "timeout"))
		pdk__e2b_route_timeout(r, r->segs[1]);
	else if (sub(r, false, "pause"))
		pdk__e2b_route_pause(r, r->segs[1]);
	else if (sub(r, false, "resume"))
		pdk__e2b_route_connect(r, r->segs[1], true);
	else if (sub(r, false, "connect"))
		pdk__e2b_route_connect(r, r->segs[1], false);
	else if (sub(r, true, "connect"))
		pdk__e2b_route_connect(r, r->segs[2], false);
	else
		pdk__e2b_plane_fail(r->req, 404,
				    "no such route: not one of E2B's routes paddock serves "
				    "(docs/e2b.md lists them, and why the others are refused)");
}

/* Split the path into segments; false for too many, or one that is no name. */
static bool split_path(struct pdk__e2b_req *r, const char *path)
{
	_cleanup_free_ char *copy = NULL;
	char *p, *save = NULL, *seg;

	if (path == NULL || path[0] != '/' || strlen(path) > 512)
		return false;
	copy = pdk_xstrdup(path + 1);
	for (p = copy; (seg = strtok_r(p, "/", &save)) != NULL; p = NULL) {
		if (r->nsegs == PDK_ARRAY_SIZE(r->segs) || !pdk_ctl_name_ok(seg))
			return false;
		r->segs[r->nsegs++] = pdk_xstrdup(seg);
	}
	return r->nsegs > 0;
}

void pdk__e2b_plane(struct pdk_e2b *e, struct evhttp_request *req)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	struct pdk__e2b_req r = {.e = e, .req = req, .method = evhttp_request_get_command(req)};
	const char *q = evhttp_uri_get_query(uri);

	TAILQ_INIT(&r.query);
	if (!split_path(&r, evhttp_uri_get_path(uri)))
		pdk__e2b_plane_fail(req, 404, "no such route");
	else if (q != NULL && evhttp_parse_query_str(q, &r.query) < 0)
		pdk__e2b_plane_fail(req, 400, "malformed query string");
	else if (r.nsegs == 1 && strcmp(r.segs[0], "health") == 0 && r.method == EVHTTP_REQ_GET)
		pdk_http_json(req, 200, json_pack("{s:s}", "status", "ok"));
	else if (authenticate(&r) == 0)
		dispatch(&r);
	for (size_t i = 0; i < r.nsegs; i++)
		free(r.segs[i]);
	evhttp_clear_headers(&r.query);
	free(r.body);
	free(r.key);
}
