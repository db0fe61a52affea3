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
	id = pdk_xstrdup(found);
	pdk_ctl_handle_drop(c->m->ctl, handle, c->identity);
	if (pdk_ctl_destroy(c->m->ctl, id, "deleted", destroyed, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}
