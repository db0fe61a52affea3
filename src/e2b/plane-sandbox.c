/*
 * plane-sandbox.c - the control plane's routes of one sandbox: GET and
 * DELETE /sandboxes/{id}, its timeout, pause, resume and connect. Each
 * sandbox is its creating key's: another key is answered 404.
 */
#include "common.h"
#include "e2b-internal.h"

#include <string.h>

void pdk__e2b_route_get(struct pdk__e2b_req *r, const char *id)
{
	struct pdk_ctl_view v;

	if (pdk__e2b_owned(r, id, &v) < 0)
		return;
	pdk_http_json(r->req, 200, pdk__e2b_detail_json(&v));
	pdk_ctl_view_release(&v);
}

static void destroyed(void *ctx, const char *id, const char *state, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	(void)id;
	(void)state;
	if (err != NULL)
		pdk__e2b_plane_error(req, err);
	else
		evhttp_send_reply(req, 204, "No Content", NULL);
}

void pdk__e2b_route_kill(struct pdk__e2b_req *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_view v;

	if (pdk__e2b_owned(r, id, &v) < 0)
		return;
	pdk_ctl_view_release(&v);
	pdk__e2b_record(r, "DELETE /sandboxes/{id}", id);
	if (pdk_ctl_destroy(r->e->ctl, id, "deleted", NULL, destroyed, r->req, &err) < 0)
		pdk__e2b_plane_error(r->req, err);
}

/* The live sandbox `id` of the caller's key, or NULL after answering. */
static struct pdk_ctl_sb *live_owned(struct pdk__e2b_req *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_view v;
	struct pdk_ctl_sb *sb = NULL;

	if (pdk__e2b_owned(r, id, &v) < 0)
		return NULL;
	pdk_ctl_view_release(&v);
	if (pdk_ctl_find(r->e->ctl, id, PDK_CTL_FIND_LIVE, &sb, &err) < 0) {
		pdk__e2b_plane_error(r->req, err);
		return NULL;
	}
	return sb;
}

/* A body's "timeout": seconds from now, 0 to a day. */
static int timeout_field(struct pdk__e2b_req *r, json_t *body, bool required, int64_t *out)
{
	json_t *t = json_object_get(body, "timeout");

	*out = -1;
	if (t == NULL && !required)
		return 0;
	if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > 24 * 3600) {
		pdk__e2b_plane_fail(r->req, 400, "timeout must be 0 to 86400 seconds");
		return -1;
	}
	*out = json_integer_value(t);
	return 0;
}

/* E2B's timeout 0 ends the sandbox at once (a TTL of 1 s: the next tick); paddock's 0 is none. */
static int set_timeout(struct pdk__e2b_req *r, struct pdk_ctl_sb *sb, int64_t t)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_ctl_set_ttl(sb, t > 0 ? (uint64_t)t : 1, &err) < 0) {
		pdk__e2b_plane_error(r->req, err);
		return -1;
	}
	return 0;
}

void pdk__e2b_route_timeout(struct pdk__e2b_req *r, const char *id)
{
	_cleanup_json_ json_t *body = NULL;
	struct pdk_ctl_sb *sb;
	int64_t t;

	if (pdk__e2b_json_body(r, &body) < 0 || timeout_field(r, body, true, &t) < 0 ||
	    (sb = live_owned(r, id)) == NULL)
		return;
	pdk__e2b_record(r, "POST /sandboxes/{id}/timeout", id);
	if (set_timeout(r, sb, t) == 0)
		evhttp_send_reply(r->req, 204, "No Content", NULL);
}

static void paused(void *ctx, const struct pdk_ctl_view *v, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	(void)v;
	if (err != NULL)
		pdk__e2b_plane_error(req, err);
	else
		evhttp_send_reply(req, 204, "No Content", NULL);
}

void pdk__e2b_route_pause(struct pdk__e2b_req *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	struct pdk_ctl_view v;
	struct pdk_ctl_sb *sb;
	bool already;

	if (pdk__e2b_json_body(r, &body) < 0 || pdk__e2b_owned(r, id, &v) < 0)
		return;
	already = strcmp(v.state, "paused") == 0;
	pdk_ctl_view_release(&v);
	/* E2B answers a second pause 409, which the SDKs read as "already paused". */
	if (already) {
		pdk__e2b_plane_fail(r->req, 409, "sandbox '%s' is already paused", id);
		return;
	}
	if ((sb = live_owned(r, id)) == NULL)
		return;
	pdk__e2b_record(r, "POST /sandboxes/{id}/pause", id);
	if (pdk_ctl_pause(sb, NULL, paused, r->req, &err) < 0)
		pdk__e2b_plane_error(r->req, err);
}

/* ---- connect and resume ---- */

/* A connect waiting for its resume. */
struct connect_ctx {
	struct pdk_e2b *e;
	struct evhttp_request *req;
	char *id;
	int64_t timeout; /* -1: unchanged */
	int code;        /* 200: it was running; 201: resumed */
};

/* Answer a connect: a new envd access token for the sandbox, and its Sandbox. */
static void connect_answer(struct connect_ctx *x)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *token = NULL;
	struct pdk_ctl_sb *sb = NULL;
	struct pdk_ctl_view v;
	uint64_t exp;

	if (pdk_ctl_find(x->e->ctl, x->id, PDK_CTL_FIND_LIVE, &sb, &err) < 0 ||
	    pdk_ctl_token_mint(sb, PDK_TOKEN_OPS_ALL, PDK_TOKEN_TTL_MAX, &token, &exp, &err) < 0 ||
	    pdk_ctl_get(x->e->ctl, x->id, &v, &err) < 0) {
		pdk__e2b_plane_error(x->req, err);
		return;
	}
	if (x->timeout >= 0 && pdk_ctl_set_ttl(sb, x->timeout ? (uint64_t)x->timeout : 1, &err) < 0)
		pdk__e2b_plane_error(x->req, err);
	else
		pdk_http_json(x->req, x->code, pdk__e2b_sandbox_json(&v, token, x->e->domain));
	pdk_ctl_view_release(&v);
}

static void connect_free(struct connect_ctx *x)
{
	free(x->id);
	free(x);
}

static void resumed(void *ctx, const struct pdk_ctl_view *v, const struct pdk_error *err)
{
	struct connect_ctx *x = ctx;

	(void)v;
	if (err != NULL)
		pdk__e2b_plane_error(x->req, err);
	else
		connect_answer(x);
	connect_free(x);
}

/*
 * POST /v2/sandboxes/{id}/connect (and /sandboxes/{id}/connect): a paused
 * sandbox is resumed (201), a running one answered as it is (200), each
 * with a new envd access token. POST /sandboxes/{id}/resume
 * (`resume_only`) is the older form, which answers 409 for a running one.
 */
void pdk__e2b_route_connect(struct pdk__e2b_req *r, const char *id, bool resume_only)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	struct connect_ctx x = {.e = r->e, .req = r->req, .code = 200};
	struct pdk_ctl_view v;
	struct pdk_ctl_sb *sb;
	bool paused_now;

	if (pdk__e2b_json_body(r, &body) < 0 || timeout_field(r, body, false, &x.timeout) < 0 ||
	    pdk__e2b_owned(r, id, &v) < 0)
		return;
	paused_now = strcmp(v.state, "paused") == 0;
	pdk_ctl_view_release(&v);
	if (resume_only && !paused_now) {
		pdk__e2b_plane_fail(r->req, 409, "sandbox '%s' is not paused", id);
		return;
	}
	if ((sb = live_owned(r, id)) == NULL)
		return;
	pdk__e2b_record(
		r, resume_only ? "POST /sandboxes/{id}/resume" : "POST /v2/sandboxes/{id}/connect",
		id);
	x.id = (char *)id;
	if (!paused_now) {
		connect_answer(&x);
		return;
	}
	x.code = 201;
	{
		struct connect_ctx *h = pdk_xmalloc(sizeof(*h));

		*h = x;
		h->id = pdk_xstrdup(id);
		if (pdk_ctl_resume(sb, NULL, resumed, h, &err) < 0) {
			connect_free(h);
			pdk__e2b_plane_error(r->req, err);
		}
	}
}
