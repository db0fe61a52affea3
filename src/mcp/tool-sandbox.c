/*
 * tool-sandbox.c - sandbox_create, sandbox_list, sandbox_destroy: sandboxes
 * a client names by a handle (control.h, "handles"), bound to it.
 */
#include "common.h"
#include "mcp-internal.h"
#include "telemetry.h"

#include <string.h>

static json_t *view_json(const char *handle, const struct pdk_ctl_view *v, bool session)
{
	json_t *o = json_pack("{s:o, s:s, s:s, s:O, s:o, s:b}", "sandbox_id",
			      handle ? json_string(handle) : json_null(), "state", v->state,
			      "profile", v->profile, "labels", v->labels, "expires_at",
			      v->expires_ns ? pdk_events_ts_json(v->expires_ns) : json_null(),
			      "session", session);

	if (o == NULL)
		pdk_oom();
	return o;
}

static void created(void *ctx, const struct pdk_ctl_created *c, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	struct pdk_mcp_conn *conn = call->conn;
	_cleanup_free_ char *handle = NULL, *text = NULL;

	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	handle = pdk_ctl_handle_new(conn->m->ctl, c->view.id, conn->identity, c->view.expires_ns);
	call->sandbox =
		pdk_xstrdup(c->view.id); /* its audit record is in the new sandbox's timeline */
	text = pdk_xasprintf("sandbox %s is %s (profile %s): pass it as sandbox_id", handle,
			     c->view.state, c->view.profile);
	pdk__mcp_call_finish(call, pdk__mcp_result(text, view_json(handle, &c->view, false)));
}

void pdk__tool_sandbox_create(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *labels = pdk__mcp_labels(call->conn);
	_cleanup_json_ json_t *ws = pdk__mcp_workspace(call->conn->m);
	const char *profile = pdk__mcp_arg_str(call, "profile");
	struct pdk_ctl_create r = {.profile = profile ? profile : call->conn->m->profile,
				   .labels = labels,
				   .workspace = ws,
				   .ttl_s = pdk__mcp_arg_u64(call, "ttl_s", call->conn->m->ttl_s)};
	const char *k;
	json_t *v;

	(void)sb;
	if (!pdk_ctl_name_ok(r.profile)) {
		pdk__mcp_call_bad(call, "profile", "a profile name is 1-64 of [A-Za-z0-9_.-]");
		return;
	}
	json_object_foreach(json_object_get(call->args, "labels"), k, v)(void)
		json_object_set(labels, k, v);
	if (pdk_ctl_create(call->conn->m->ctl, &r, created, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

/* One listed sandbox: "HANDLE=ID" (handle NULL: the session's own). */
static void list_one(struct pdk_mcp_call *call, const char *handle, const char *id, json_t *out)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_view v;

	if (pdk_ctl_get(call->conn->m->ctl, id, &v, &err) < 0)
		return; /* gone and forgotten */
	(void)json_array_append_new(out, view_json(handle, &v, handle == NULL));
	pdk_ctl_view_release(&v);
}

void pdk__tool_sandbox_list(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	struct pdk_mcp_conn *c = call->conn;
	_cleanup_strv_ char **hs = pdk_ctl_handles(c->m->ctl, c->identity);
	_cleanup_free_ char *text = NULL;
	json_t *out = json_array();

	(void)sb;
	if (c->own_sb != NULL)
		list_one(call, NULL, c->own_sb, out);
	for (size_t i = 0; hs != NULL && hs[i] != NULL; i++) {
		char *eq = strchr(hs[i], '=');

		*eq = '\0';
		list_one(call, hs[i], eq + 1, out);
	}
	text = pdk_xasprintf("%zu sandbox(es)", json_array_size(out));
	pdk__mcp_call_finish(call, pdk__mcp_result(text, json_pack("{s:o}", "sandboxes", out)));
}

static void destroyed(void *ctx, const char *id, const char *state, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;

	(void)id;
	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	pdk__mcp_call_finish(
		call, pdk__mcp_result("destroyed", json_pack("{s:s, s:s}", "sandbox_id",
							     pdk__mcp_arg_str(call, "sandbox_id"),
							     "state", state)));
}

/*
 * In the 2026-07-28 revision, a client that declared elicitation is asked to
 * confirm a destroy first (MRTR: an input_required result and a signed
 * requestState; the retry carries both back). True when the destroy may go
 * on; false when the call was answered (the question, a refusal, an error).
 */
static bool confirmed(struct pdk_mcp_call *call)
{
	const json_t *answer = json_object_get(call->input_responses, "confirm");
	_cleanup_free_ char *state = NULL, *msg = NULL;
	json_t *r;

	if (!call->modern || json_object_get(call->caps, "elicitation") == NULL)
		return true; /* no server-to-client request for a capability not declared */
	if (call->request_state != NULL) {
		if (!pdk__mrtr_verify(call, call->request_state)) {
			/* SECURITY: a state this server did not sign for this call is refused. */
			pdk__mcp_send(call->conn, call->id,
				      pdk_rpc_error(call->id, PDK_RPC_INVALID_PARAMS,
						    "requestState does not verify: it is not one "
						    "this server gave for this call, or it expired",
						    NULL));
			call->answered = true;
			pdk__mcp_call_finish(call, NULL);
			return false;
		}
		if (json_is_object(answer) &&
		    json_is_true(json_object_get(json_object_get(answer, "content"), "confirm")) &&
		    strcmp(json_string_value(json_object_get(answer, "action")) ?: "", "accept") ==
			    0)
			return true;
		pdk__mcp_call_bad(call, "sandbox_id",
				  "the destroy was not confirmed: nothing done");
		return false;
	}
	state = pdk__mrtr_state(call);
	msg = pdk_xasprintf("Destroy sandbox %s and everything in it?",
			    pdk__mcp_arg_str(call, "sandbox_id"));
	r = json_pack("{s:s, s:{s:{s:s, s:{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}}, s:[s]}}}}, s:s}",
		      "resultType", "input_required", "inputRequests", "confirm", "method",
		      "elicitation/create", "params", "mode", "form", "message", msg,
		      "requestedSchema", "type", "object", "properties", "confirm", "type",
		      "boolean", "title", "Destroy", "required", "confirm", "requestState", state);
	if (r == NULL)
		pdk_oom();
	pdk__mcp_call_finish(call, r);
	return false;
}

void pdk__tool_sandbox_destroy(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_mcp_conn *c = call->conn;
	const char *handle = pdk__mcp_arg_str(call, "sandbox_id");
	_cleanup_free_ char *id = NULL;
	const char *found;

	(void)sb;
	if (pdk_ctl_handle_resolve(c->m->ctl, handle, c->identity, &found, &err) < 0) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	if (!confirmed(call))
		return;
	id = pdk_xstrdup(found);
	free(call->sandbox);
	call->sandbox = pdk_xstrdup(found);
	pdk_ctl_handle_drop(c->m->ctl, handle, c->identity);
	if (pdk_ctl_destroy(c->m->ctl, id, "deleted", NULL, destroyed, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}
