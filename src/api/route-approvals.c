/*
 * route-approvals.c - the approval queue of the daemon's state directory
 * (control.h, "approvals"; docs/approvals.md): GET /v1/approvals
 * (?all=true), GET /v1/approvals/{id}, POST /v1/approvals/{id}/approve
 * and /deny with an optional {"note"}. Admins only; the approver recorded
 * is the authenticated admin (r->auth.name).
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"

#include <string.h>

static void route_list(struct pdk_route *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *all = pdk__route_query(r, "all");
	json_t *out = NULL;

	if (all != NULL && strcmp(all, "true") != 0 && strcmp(all, "false") != 0) {
		pdk_http_error(r->req, 400, "bad_request", "all", "'all' must be true or false");
		return;
	}
	if (pdk_ctl_approvals_list(pdk_ctl_state_dir(r->a->ctl), all && strcmp(all, "true") == 0,
				   &out, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	pdk_http_json(r->req, 200, json_pack("{s:o}", "approvals", out));
}

static void route_get(struct pdk_route *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *out = NULL;

	if (pdk_ctl_approval_get(pdk_ctl_state_dir(r->a->ctl), id, &out, &err) < 0)
		pdk_api_error(r->req, err);
	else
		pdk_http_json(r->req, 200, out);
}

static void route_decide(struct pdk_route *r, const char *id, bool approve)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *note = NULL;
	struct pdk_req_error e = {0};
	json_t *out = NULL;
	/* SECURITY: the approver is who authenticated, never a name the body claims. */
	const char *who = r->auth.name[0] != '\0' ? r->auth.name : "admin";

	if (pdk__route_json_body(r) < 0 ||
	    !pdk__route_valid(r, pdk_req_parse_approval(r->body, r->body_len, &note, &e), &e))
		return;
	/* The daemon may ask too (its /mcp): decided on its own queue connection. */
	if (pdk_ctl_approval_decide_ctl(r->a->ctl, id, approve, who, note, &out, &err) < 0)
		pdk_api_error(r->req, err);
	else
		pdk_http_json(r->req, 200, out);
}

void pdk__route_approvals(struct pdk_route *r)
{
	bool get = r->method == EVHTTP_REQ_GET, post = r->method == EVHTTP_REQ_POST;

	/* SECURITY: only an admin decides: a sandbox token is refused 403 (and recorded). */
	if (!pdk__api_allowed(r, NULL, 0))
		return;
	if (r->nsegs == 1 && get)
		route_list(r);
	else if (r->nsegs == 2 && get)
		route_get(r, r->segs[1]);
	else if (r->nsegs == 3 && post && strcmp(r->segs[2], "approve") == 0)
		route_decide(r, r->segs[1], true);
	else if (r->nsegs == 3 && post && strcmp(r->segs[2], "deny") == 0)
		route_decide(r, r->segs[1], false);
	else if (r->nsegs == 3 && get)
		pdk_http_error(r->req, 405, "bad_request", NULL, "method not allowed");
	else
		pdk_http_error(r->req, 404, "not_found", NULL, "no such route");
}
