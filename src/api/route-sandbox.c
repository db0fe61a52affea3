/*
 * route-sandbox.c - the routes of one sandbox, /v1/sandboxes/{id}[/...]:
 * its view, its end, tokens, and the operations its supervisor answers.
 * Commands are route-exec.c, files and archives route-files.c.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"
#include "telemetry.h"

#include <string.h>

#define STDIN_BODY_MAX (1u << 20) /* one stdin write */

/* ---- the sandbox itself ---- */

void pdk__route_get(struct pdk_route *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_view v;

	if (pdk_ctl_get(r->a->ctl, id, &v, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	pdk_http_json(r->req, 200, pdk_ctl_view_json(&v));
	pdk_ctl_view_release(&v);
}

static void destroyed(void *ctx, const char *id, const char *state, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, 200, json_pack("{s:s, s:s}", "id", id, "state", state));
}

void pdk__route_delete(struct pdk_route *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_ctl_destroy(r->a->ctl, id, "deleted", r->auth.name, destroyed, r->req, &err) < 0)
		pdk_api_error(r->req, err);
}

static void route_token(struct pdk_route *r, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *token = NULL;
	struct pdk_req_token t;
	struct pdk_req_error e = {0};
	uint64_t exp;

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_token(r->body, r->body_len, &t, &e), &e))
		return;
	if (pdk_ctl_token_mint(sb, t.ops, t.ttl_s, &token, &exp, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	pdk_http_json(r->req, 201,
		      json_pack("{s:s, s:o, s:o}", "token", token, "expires_at",
				pdk_events_ts_json(exp * 1000000000ULL), "ops",
				pdk_token_ops_json(t.ops)));
}

/* ---- operations the supervisor answers ---- */

static void doc_answer(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	if (err != NULL && doc != NULL)
		pdk__api_error_details(req, err, doc);
	else if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, 200, json_incref(doc));
}

static void view_answer(void *ctx, const struct pdk_ctl_view *v, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, 200, pdk_ctl_view_json(v));
}

/* snapshot {"name"}, rollback {"snapshot"}: each with "restart". */
static int route_ws(struct pdk_route *r, struct pdk_ctl_sb *sb, const char *what,
		    struct pdk_error **err)
{
	const char *key = what[0] == 's' ? "name" : what[0] == 'r' ? "snapshot" : NULL;
	_cleanup_free_ char *name = NULL;
	struct pdk_req_error e = {0};
	bool restart = false;

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r,
			      pdk_req_parse_ws(r->body, r->body_len, key, what[0] == 'r',
					       key ? &name : NULL, &restart, &e),
			      &e))
		return 0;
	if (what[0] == 's')
		return pdk_ctl_snapshot(sb, name, restart, doc_answer, r->req, err);
	return pdk_ctl_rollback(sb, name, restart, doc_answer, r->req, err);
}

/* commit {"restart", "force", "dry_run"}: 409 with the conflicts when the host changed. */
static int route_commit(struct pdk_route *r, struct pdk_ctl_sb *sb, struct pdk_error **err)
{
	struct pdk_req_commit c;
	struct pdk_req_error e = {0};

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_commit(r->body, r->body_len, &c, &e), &e))
		return 0;
	return pdk_ctl_commit(sb,
			      (c.restart ? PDK_CTL_COMMIT_RESTART : 0) |
				      (c.force ? PDK_CTL_COMMIT_FORCE : 0) |
				      (c.dry_run ? PDK_CTL_COMMIT_DRY_RUN : 0),
			      doc_answer, r->req, err);
}

/* ?path=: absolute in the sandbox, or relative to its workspace (caller frees). */
static char *path_param(struct pdk_route *r, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	char *p = pdk_ctl_sb_path(sb, pdk__route_query(r, "path"), &err);

	if (p == NULL)
		pdk_api_error(r->req, err);
	return p;
}

/* GET .../diff[?patch=1]: the changes, and with patch=1 their unified diff. */
static int route_diff(struct pdk_route *r, struct pdk_ctl_sb *sb, struct pdk_error **err)
{
	const char *patch = pdk__route_query(r, "patch");

	if (patch != NULL && strcmp(patch, "0") != 0 && strcmp(patch, "1") != 0) {
		pdk_http_error(r->req, 400, "bad_request", "patch", "'patch' must be 0 or 1");
		return 0;
	}
	if (patch != NULL && strcmp(patch, "1") == 0)
		return pdk_ctl_diff_patch(sb, doc_answer, r->req, err);
	return pdk_ctl_diff(sb, doc_answer, r->req, err);
}

static int route_control(struct pdk_route *r, struct pdk_ctl_sb *sb, const char *what,
			 struct pdk_error **err)
{
	_cleanup_free_ char *path = NULL;

	if (strcmp(what, "pause") == 0)
		return pdk_ctl_pause(sb, r->auth.name, view_answer, r->req, err);
	if (strcmp(what, "resume") == 0)
		return pdk_ctl_resume(sb, r->auth.name, view_answer, r->req, err);
	if (strcmp(what, "snapshot") == 0 || strcmp(what, "rollback") == 0)
		return route_ws(r, sb, what, err);
	if (strcmp(what, "commit") == 0)
		return route_commit(r, sb, err);
	if (strcmp(what, "diff") == 0)
		return route_diff(r, sb, err);
	if (strcmp(what, "snapshots") == 0)
		return pdk_ctl_snapshots(sb, doc_answer, r->req, err);
	if ((path = path_param(r, sb)) == NULL)
		return 0;
	if (strcmp(what, "stat") == 0)
		return pdk_ctl_stat(sb, path, doc_answer, r->req, err);
	if (strcmp(what, "ls") == 0)
		return pdk_ctl_ls(sb, path, doc_answer, r->req, err);
	pdk__route_files(r, sb, what, path);
	return 0;
}

/* ---- a running command: signal, stdin, resize ---- */

static void exec_signal(struct pdk_route *r, struct pdk_ctl_sb *sb, uint64_t eid)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_req_error e = {0};
	int sig;

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_signal(r->body, r->body_len, &sig, &e), &e))
		return;
	if (pdk_ctl_signal(sb, eid, sig, doc_answer, r->req, &err) < 0)
		pdk_api_error(r->req, err);
}

static void ok_or_error(struct pdk_route *r, int rc, const struct pdk_error *err)
{
	if (rc < 0)
		pdk_api_error(r->req, err);
	else
		pdk_http_json(r->req, 200, json_pack("{s:b}", "ok", 1));
}

static void exec_stdin(struct pdk_route *r, struct pdk_ctl_sb *sb, uint64_t eid)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *eof;
	int rc;

	if (pdk__route_body(r, STDIN_BODY_MAX) < 0)
		return;
	eof = pdk__route_query(r, "eof");
	if (eof != NULL && strcmp(eof, "0") != 0 && strcmp(eof, "1") != 0) {
		pdk_http_error(r->req, 400, "bad_request", "eof", "'eof' must be 0 or 1");
		return;
	}
	rc = pdk_ctl_exec_stdin(sb, eid, r->body, r->body_len, eof != NULL && strcmp(eof, "1") == 0,
				&err);
	ok_or_error(r, rc, err);
}

static void exec_resize(struct pdk_route *r, struct pdk_ctl_sb *sb, uint64_t eid)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_req_error e = {0};
	uint64_t cols, rows;

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_resize(r->body, r->body_len, &cols, &rows, &e), &e))
		return;
	ok_or_error(r, pdk_ctl_exec_resize(sb, eid, cols, rows, &err), err);
}

/*
 * POST /v1/sandboxes/{id}/exec/{exec_id}/signal {"signal":"TERM"},
 * .../stdin[?eof=1] (raw bytes), .../resize {"cols":N,"rows":N}.
 */
static void exec_session_route(struct pdk_route *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *what = r->nsegs == 5 ? r->segs[4] : "";
	struct pdk_ctl_sb *sb;
	uint64_t eid;

	if (r->nsegs != 5 || r->method != EVHTTP_REQ_POST ||
	    (strcmp(what, "signal") != 0 && strcmp(what, "stdin") != 0 &&
	     strcmp(what, "resize") != 0)) {
		pdk_http_error(r->req, 404, "not_found", NULL, "no such route");
		return;
	}
	if (!pdk__api_allowed(r, id, PDK_TOKEN_OP_EXEC))
		return;
	if (pdk_ctl_find(r->a->ctl, id, PDK_CTL_FIND_LIVE, &sb, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	if (pdk_parse_u64(r->segs[3], INT32_MAX, &eid) < 0) {
		pdk_http_error(r->req, 404, "not_found", "exec_id",
			       "no command '%s' in this sandbox: 'exec_id' is a number",
			       r->segs[3]);
		return;
	}
	if (strcmp(what, "stdin") == 0)
		exec_stdin(r, sb, eid);
	else if (strcmp(what, "resize") == 0)
		exec_resize(r, sb, eid);
	else
		exec_signal(r, sb, eid);
}

/* ---- the network allowlist, widened by an admin ---- */

static void egress_allowed(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, 200, json_incref(doc));
}

/*
 * POST /v1/sandboxes/{id}/egress/allow {"host": ENTRY}. SECURITY: admins
 * only (a sandbox token cannot widen its own sandbox's network); the
 * actor recorded is who authenticated.
 */
static void route_egress(struct pdk_route *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *host = NULL;
	struct pdk_req_error e = {0};
	struct pdk_ctl_sb *sb;

	if (r->nsegs != 4 || strcmp(r->segs[3], "allow") != 0) {
		pdk_http_error(r->req, 404, "not_found", NULL, "no such route");
		return;
	}
	if (r->method != EVHTTP_REQ_POST) {
		pdk_http_error(r->req, 405, "bad_request", NULL, "method not allowed");
		return;
	}
	if (!pdk__api_allowed(r, NULL, 0) || pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_egress_allow(r->body, r->body_len, &host, &e), &e))
		return;
	if (pdk_ctl_find(r->a->ctl, id, PDK_CTL_FIND_LIVE, &sb, &err) < 0 ||
	    pdk_ctl_egress_allow(sb,
				 &(struct pdk_ctl_egress_allow_req){
					 .host = host,
					 .actor = r->auth.name[0] != '\0' ? r->auth.name : "admin"},
				 egress_allowed, r->req, &err) < 0)
		pdk_api_error(r->req, err);
}

/* ---- dispatch ---- */

struct sb_route {
	const char *name;
	enum evhttp_cmd_type method;
	unsigned op; /* what a sandbox token needs (0: admins only) */
	bool live;   /* needs a sandbox that takes control calls */
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
	{"snapshots", EVHTTP_REQ_GET, PDK_TOKEN_OP_READ, true},
	{"stat", EVHTTP_REQ_GET, PDK_TOKEN_OP_READ, true},
	{"ls", EVHTTP_REQ_GET, PDK_TOKEN_OP_READ, true},
	{"files", EVHTTP_REQ_GET, PDK_TOKEN_OP_FILES, true},
	{"files", EVHTTP_REQ_PUT, PDK_TOKEN_OP_FILES, true},
	{"files", EVHTTP_REQ_DELETE, PDK_TOKEN_OP_FILES, true},
	{"archive", EVHTTP_REQ_GET, PDK_TOKEN_OP_FILES, true},
	{"archive", EVHTTP_REQ_PUT, PDK_TOKEN_OP_FILES, true},
};

static const struct sb_route *sb_route(const char *what, enum evhttp_cmd_type method)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(sb_routes); i++)
		if (strcmp(sb_routes[i].name, what) == 0 && sb_routes[i].method == method)
			return &sb_routes[i];
	return NULL;
}

void pdk__route_sandbox_sub(struct pdk_route *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *what = r->segs[2];
	const struct sb_route *route = sb_route(what, r->method);
	struct pdk_ctl_sb *sb;
	int rc = 0;

	if (r->nsegs >= 4 && strcmp(what, "exec") == 0) {
		exec_session_route(r, id);
		return;
	}
	if (strcmp(what, "ports") == 0) {
		pdk__route_ports(r, id);
		return;
	}
	if (strcmp(what, "egress") == 0) {
		route_egress(r, id);
		return;
	}
	if (route == NULL || r->nsegs != 3) {
		pdk_http_error(r->req, 404, "not_found", NULL, "no such route");
		return;
	}
	/* Minting tokens is for admins only, never for a token holder. */
	if (!pdk__api_allowed(r, route->op ? id : NULL, route->op))
		return;
	if (pdk_ctl_find(r->a->ctl, id, route->live ? PDK_CTL_FIND_LIVE : 0, &sb, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	if (strcmp(what, "exec") == 0)
		pdk__route_exec(r, sb);
	else if (strcmp(what, "tokens") == 0)
		route_token(r, sb);
	else
		rc = route_control(r, sb, what, &err);
	if (rc < 0)
		pdk_api_error(r->req, err);
}
