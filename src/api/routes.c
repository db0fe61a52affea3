/*
 * routes.c - the REST API's requests (docs/daemon.md, docs/api.yaml): the
 * path and the query, authentication, dispatch, and the routes that are
 * not about one sandbox. Each route translates: parse, call the control
 * layer, render.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"

#include <string.h>
#include <sys/queue.h>

/* JSON bodies are small: anything larger than this is refused before parsing. */
#define JSON_BODY_MAX (1u << 20)

struct pdk_api *pdk_api_new(const struct pdk_api_opts *o)
{
	struct pdk_api *a = pdk_xcalloc(1, sizeof(*a));

	a->ctl = o->ctl;
	a->base = o->base;
	a->max_body = o->max_body;
	a->uid = o->uid;
	a->unix_guards = o->unix_guards;
	return a;
}

void pdk_api_tick(struct pdk_api *a)
{
	/* Keep idle streams alive through proxies, and find clients that went away. */
	if (++a->ticks % 15 == 0)
		pdk__sse_keepalive(a);
}

void pdk_api_close(struct pdk_api *a)
{
	pdk__sse_close_all(a);
}

void pdk_api_free(struct pdk_api *a)
{
	if (a == NULL)
		return;
	pdk__sse_close_all(a);
	free(a);
}

/* ---- request plumbing ---- */

int pdk__route_body(struct pdk_route *r, size_t max)
{
	if (pdk_http_body(r->req, max, &r->body, &r->body_len) < 0) {
		pdk_http_error(r->req, 413, "too_large", "", "the body is larger than %zu bytes",
			       max);
		return -1;
	}
	return 0;
}

/* A JSON body, whatever its Content-Type says (curl -d sends a form type): it is parsed strictly.
 */
int pdk__route_json_body(struct pdk_route *r)
{
	return pdk__route_body(r, JSON_BODY_MAX);
}

bool pdk__route_valid(struct pdk_route *r, int rc, const struct pdk_req_error *e)
{
	if (rc < 0)
		pdk__api_bad_request(r->req, e);
	return rc >= 0;
}

const char *pdk__route_query(struct pdk_route *r, const char *key)
{
	return evhttp_find_header(&r->query, key);
}

/* ---- routes without a sandbox ---- */

static void route_health(struct pdk_route *r)
{
	pdk_http_json(r->req, 200,
		      json_pack("{s:s, s:s, s:I}", "status", "ok", "version", PDK_VERSION,
				"sandboxes", (json_int_t)pdk_ctl_sandbox_count(r->a->ctl)));
}

static void route_openapi(struct pdk_route *r)
{
	pdk_http_bytes(r->req, "application/yaml", pdk_openapi_yaml, strlen(pdk_openapi_yaml));
}

static void created(void *ctx, const struct pdk_ctl_created *c, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, c->again ? 200 : 201, pdk__api_created_json(c));
}

static void create_of(const struct pdk_req_create *cr, const char *hkey, struct pdk_ctl_create *out)
{
	*out = (struct pdk_ctl_create){
		.profile = cr->profile,
		.image = cr->image,
		.overrides = cr->overrides,
		.workspace = cr->workspace,
		.env = cr->env,
		.labels = cr->labels,
		.ttl_s = cr->ttl_s,
		.idle_timeout_s = cr->idle_timeout_s,
		.idempotency_key = cr->idempotency_key ? cr->idempotency_key : hkey,
		.token_ops = cr->token_ops,
		.token_ttl_s = cr->token_ttl_s,
	};
}

static void route_create(struct pdk_route *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_req_create cr;
	struct pdk_req_error e = {0};
	struct pdk_ctl_create c;
	const char *hkey =
		evhttp_find_header(evhttp_request_get_input_headers(r->req), "Idempotency-Key");

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_create(r->body, r->body_len, &cr, &e), &e))
		return;
	if (hkey != NULL && (strlen(hkey) == 0 || strlen(hkey) > 200)) {
		pdk_req_create_release(&cr);
		pdk_http_error(r->req, 400, "bad_request", "Idempotency-Key",
			       "the Idempotency-Key header must be 1 to 200 characters");
		return;
	}
	create_of(&cr, hkey, &c);
	if (pdk_ctl_create(r->a->ctl, &c, created, r->req, &err) < 0)
		pdk_api_error(r->req, err);
	pdk_req_create_release(&cr);
}

/* The list's filters: session, workflow, agent, label=KEY=VALUE, state. */
static void filter_of(struct pdk_route *r, struct pdk_ctl_filter *f, char **label_key)
{
	const char *label = pdk__route_query(r, "label"), *eq;

	*f = (struct pdk_ctl_filter){.session = pdk__route_query(r, "session"),
				     .workflow = pdk__route_query(r, "workflow"),
				     .agent = pdk__route_query(r, "agent"),
				     .state = pdk__route_query(r, "state")};
	*label_key = NULL;
	if (label != NULL && (eq = strchr(label, '=')) != NULL) {
		*label_key = strndup(label, (size_t)(eq - label));
		if (*label_key == NULL)
			pdk_oom();
		f->label_key = *label_key;
		f->label_value = eq + 1;
	}
}

/* Live sandboxes; ended ones (kept for --retention) only with ?state=ended or ?state=all. */
static void route_list(struct pdk_route *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *label_key = NULL;
	struct pdk_ctl_filter f;
	struct pdk_ctl_view *views = NULL;
	size_t n = 0;
	json_t *a;

	filter_of(r, &f, &label_key);
	if (pdk_ctl_list(r->a->ctl, &f, &views, &n, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, pdk_ctl_view_json(&views[i]));
	pdk_ctl_views_free(views, n);
	pdk_http_json(r->req, 200, json_pack("{s:o}", "sandboxes", a));
}

static void route_kill(struct pdk_route *r)
{
	_cleanup_strv_ char **killed = NULL;
	struct pdk_req_kill k;
	struct pdk_req_error e = {0};
	struct pdk_ctl_selector s;

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_kill(r->body, r->body_len, &k, &e), &e))
		return;
	s = (struct pdk_ctl_selector){.session = k.session,
				      .workflow = k.workflow,
				      .agent = k.agent,
				      .labels = k.labels,
				      .ids = k.ids,
				      .all = k.all};
	pdk_ctl_kill(r->a->ctl, &s, k.reason, r->auth.name, &killed);
	pdk_req_kill_release(&k);
	pdk_http_json(
		r->req, 200,
		json_pack("{s:o}", "killed", pdk_json_strv(killed ? killed : (char *[]){NULL})));
}

static void route_pools(struct pdk_route *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_pool *pools = NULL;
	size_t n = 0;
	json_t *a;

	if (pdk_ctl_pools(r->a->ctl, &pools, &n, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
			a, json_pack("{s:s, s:I, s:I, s:I}", "profile", pools[i].profile, "size",
				     (json_int_t)pools[i].size, "ready", (json_int_t)pools[i].ready,
				     "starting", (json_int_t)pools[i].starting));
	pdk_ctl_pools_free(pools, n);
	pdk_http_json(r->req, 200, json_pack("{s:o}", "pools", a));
}

static void route_pool_put(struct pdk_route *r, const char *profile)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_req_error e = {0};
	uint64_t size;

	if (!pdk_ctl_name_ok(profile)) {
		pdk_http_error(r->req, 400, "bad_request", "profile", "bad profile name");
		return;
	}
	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_pool(r->body, r->body_len, &size, &e), &e))
		return;
	if (pdk_ctl_pool_set(r->a->ctl, profile, size, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	pdk_http_json(r->req, 200,
		      json_pack("{s:s, s:I}", "profile", profile, "size", (json_int_t)size));
}

static void audit_answer(void *ctx, const json_t *state, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	/* A client gone meanwhile: evhttp frees the request it can no longer answer. */
	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, 200, json_deep_copy(state));
}

/* GET /v1/audit[?max_age=S]: the audit chain's state, verified off the loop (control.h). */
static void route_audit(struct pdk_route *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *v = pdk__route_query(r, "max_age");
	uint64_t max_age = 5;

	if (v != NULL && pdk_parse_u64(v, 3600, &max_age) < 0) {
		pdk_http_error(r->req, 400, "bad_request", "max_age",
			       "'max_age' must be a number of seconds from 0 to 3600");
		return;
	}
	if (pdk_ctl_audit_state(r->a->ctl, max_age, audit_answer, r->req, &err) < 0)
		pdk_api_error(r->req, err);
}

/* ---- dispatch ---- */

static void route_sandbox(struct pdk_route *r)
{
	const char *id = r->segs[1];
	bool get = r->method == EVHTTP_REQ_GET;

	if (r->nsegs >= 3)
		pdk__route_sandbox_sub(r, id);
	else if (get && pdk__api_allowed(r, id, PDK_TOKEN_OP_READ))
		pdk__route_get(r, id);
	else if (r->method == EVHTTP_REQ_DELETE && pdk__api_allowed(r, id, PDK_TOKEN_OP_CONTROL))
		pdk__route_delete(r, id);
	else if (!get && r->method != EVHTTP_REQ_DELETE)
		pdk_http_error(r->req, 405, "bad_request", NULL, "method not allowed");
}

static bool is(struct pdk_route *r, size_t nsegs, const char *s0, enum evhttp_cmd_type method)
{
	return r->nsegs == nsegs && strcmp(r->segs[0], s0) == 0 && r->method == method;
}

static void dispatch(struct pdk_route *r)
{
	if (is(r, 1, "health", EVHTTP_REQ_GET))
		route_health(r);
	else if (is(r, 1, "openapi.yaml", EVHTTP_REQ_GET))
		route_openapi(r);
	else if (is(r, 1, "events", EVHTTP_REQ_GET))
		pdk__route_events(r);
	else if (r->nsegs >= 2 && strcmp(r->segs[0], "sandboxes") == 0)
		route_sandbox(r);
	else if (strcmp(r->segs[0], "approvals") == 0)
		pdk__route_approvals(r);
	else if (!pdk__api_allowed(r, NULL, 0))
		return;
	else if (is(r, 1, "sandboxes", EVHTTP_REQ_POST))
		route_create(r);
	else if (is(r, 1, "sandboxes", EVHTTP_REQ_GET))
		route_list(r);
	else if (is(r, 1, "kill", EVHTTP_REQ_POST))
		route_kill(r);
	else if (is(r, 1, "pools", EVHTTP_REQ_GET))
		route_pools(r);
	else if (is(r, 1, "audit", EVHTTP_REQ_GET))
		route_audit(r);
	else if (is(r, 2, "pools", EVHTTP_REQ_PUT))
		route_pool_put(r, r->segs[1]);
	else
		pdk_http_error(r->req, 404, "not_found", NULL, "no such route");
}

/* Split "/v1/a/b/c" into segments; false when it is not under /v1 or has odd segments. */
static bool split_path(struct pdk_route *r, const char *path)
{
	_cleanup_free_ char *copy = NULL;
	char *p, *save = NULL, *seg;

	if (path == NULL || strncmp(path, "/v1/", 4) != 0 || strlen(path) > 512)
		return false;
	copy = pdk_xstrdup(path + 4);
	for (p = copy; (seg = strtok_r(p, "/", &save)) != NULL; p = NULL) {
		if (r->nsegs == PDK_ARRAY_SIZE(r->segs) || !pdk_ctl_name_ok(seg))
			return false;
		r->segs[r->nsegs++] = pdk_xstrdup(seg);
	}
	return r->nsegs > 0;
}

void pdk_api_handle(struct pdk_api *a, struct evhttp_request *req, bool unix_peer)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	struct pdk_route r = {.a = a, .req = req, .method = evhttp_request_get_command(req)};
	const char *q = evhttp_uri_get_query(uri);

	TAILQ_INIT(&r.query);
	if (!split_path(&r, evhttp_uri_get_path(uri)))
		pdk_http_error(req, 404, "not_found", NULL, "no such route");
	else if (q != NULL && evhttp_parse_query_str(q, &r.query) < 0)
		pdk_http_error(req, 400, "bad_request", "", "malformed query string");
	else if (pdk__api_origin_check(&r) == 0 && pdk__api_authenticate(&r, unix_peer) == 0)
		dispatch(&r);
	for (size_t i = 0; i < r.nsegs; i++)
		free(r.segs[i]);
	evhttp_clear_headers(&r.query);
	free(r.body);
}
