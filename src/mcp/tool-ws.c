/*
 * tool-ws.c - the workspace review tools (diff, snapshot, rollback, and the
 * commit a human approves) and the egress tools (the allowlist, recent
 * refusals, and the request a human approves). Nothing here applies a
 * change to the host or widens the network: until an approval mechanism
 * exists, those answer with the command a human runs (docs/mcp.md).
 */
#include "common.h"
#include "mcp-internal.h"

#include <string.h>

#define DENIALS_MAX 50

static void diffed(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	const json_t *changes = json_object_get(doc, "changes");
	const char *patch = json_string_value(json_object_get(doc, "patch"));
	struct pdk_buf text = PDK_BUF_INIT(32 << 20);
	json_t *c;
	size_t i;

	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	json_array_foreach(changes, i, c)
	{
		const char *kind = json_string_value(json_object_get(c, "kind"));
		_cleanup_free_ char *line =
			pdk_xasprintf("%c %s\n", kind ? (char)(kind[0] - 32) : '?',
				      json_string_value(json_object_get(c, "path")));

		if (pdk_buf_addstr(&text, line) < 0)
			break;
	}
	/* The cap holds the largest patch (16 MiB) and its list: nothing is cut in practice. */
	if ((json_array_size(changes) == 0 && pdk_buf_addstr(&text, "no changes\n") < 0) ||
	    (patch != NULL && pdk_buf_addstr(&text, patch) < 0))
		pdk_log(&call->conn->m->log, PDK_LOG_WARN, "a diff's text was cut at 32 MiB");
	pdk__mcp_call_finish(call, pdk__mcp_result(pdk_buf_str(&text), json_incref(doc)));
	pdk_buf_release(&text);
}

void pdk__tool_ws_diff(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int rc = pdk__mcp_arg_bool(call, "patch", false)
			 ? pdk_ctl_diff_patch(sb, diffed, call, &err)
			 : pdk_ctl_diff(sb, diffed, call, &err);

	if (rc < 0)
		pdk__mcp_call_fail(call, err);
}

void pdk__tool_ws_snapshot(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *name = pdk__mcp_arg_str(call, "name");

	if (name != NULL && !pdk_ctl_name_ok(name)) {
		pdk__mcp_call_bad(call, "name", "a snapshot name is 1-64 of [A-Za-z0-9_.-]");
		return;
	}
	if (pdk_ctl_snapshot(sb, name, false, pdk__mcp_call_doc, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

void pdk__tool_ws_rollback(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *name = pdk__mcp_arg_str(call, "snapshot");

	if (!pdk_ctl_name_ok(name)) {
		pdk__mcp_call_bad(call, "snapshot", "a snapshot name is 1-64 of [A-Za-z0-9_.-]");
		return;
	}
	if (pdk_ctl_rollback(sb, name, false, pdk__mcp_call_doc, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

/*
 * A request only a human may grant: refused, with what the human runs. An
 * isError result, so a model does not take it as done.
 */
static void needs_human(struct pdk_mcp_call *call, const char *what, const char *command,
			json_t *structured)
{
	_cleanup_free_ char *text = pdk_xasprintf(
		"refused: %s needs a human's approval, and this server has no approval "
		"mechanism yet. Ask the user to review and run: %s",
		what, command);
	json_t *r = pdk__mcp_result(text, structured);

	pdk_json_set(r, "isError", json_true());
	pdk__mcp_call_finish(call, r);
}

void pdk__tool_ws_propose_commit(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *cmd = pdk_xasprintf("paddock ws commit %s", call->sandbox);

	(void)sb;
	needs_human(call, "applying the change set to the host directory", cmd,
		    json_pack("{s:s, s:s, s:s}", "status", "refused", "reason", "approval_required",
			      "command", cmd));
}

void pdk__tool_egress_request_allow(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	const char *host = pdk__mcp_arg_str(call, "host");
	_cleanup_free_ char *cmd = pdk_xasprintf(
		"add '%s' to network.allow of the sandbox's profile (paddock profile show)", host);

	(void)sb;
	needs_human(call, "widening the network allowlist", cmd,
		    json_pack("{s:s, s:s, s:s, s:s}", "status", "refused", "reason",
			      "approval_required", "host", host, "command", cmd));
}

void pdk__tool_egress_rules(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *text = NULL, *allow = NULL;
	json_t *net, *list;
	struct pdk_ctl_view v;

	(void)sb;
	if (pdk_ctl_get(call->conn->m->ctl, call->sandbox, &v, &err) < 0) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	net = json_object_get(v.facts, "network");
	list = json_object_get(net, "allow");
	allow = pdk_json_dump_line(list ? list : json_array());
	text = pdk_xasprintf("network mode %s; allowed: %s",
			     json_string_value(json_object_get(net, "mode")) ?: "unknown", allow);
	pdk__mcp_call_finish(
		call,
		pdk__mcp_result(text, json_pack("{s:s?, s:O?}", "mode",
						json_string_value(json_object_get(net, "mode")),
						"allow", list)));
	pdk_ctl_view_release(&v);
}

/* Every refused connection of the sandbox in the audit store: the last DENIALS_MAX kept. */
static void denial(void *ctx, uint64_t seq, const char *kind, json_t *event)
{
	json_t *out = ctx;
	json_t *a = json_object_get(event, "attrs");
	const char *decision = json_string_value(json_object_get(a, "decision"));

	(void)seq;
	(void)kind;
	if (decision == NULL || strcmp(decision, "deny") != 0)
		return;
	if (json_array_size(out) == DENIALS_MAX)
		(void)json_array_remove(out, 0);
	(void)json_array_append_new(
		out, json_pack("{s:O?, s:O?, s:O?, s:O?}", "ts", json_object_get(event, "ts"),
			       "host", json_object_get(a, "host"), "port",
			       json_object_get(a, "port"), "reason", json_object_get(a, "reason")));
}

void pdk__tool_egress_denials(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	struct pdk_ctl_sub_filter f = {.sandbox = call->sandbox, .kind = "net.connect", .since = 0};
	_cleanup_free_ char *text = NULL;
	json_t *out = json_array();
	struct pdk_ctl_sub *s;

	(void)sb;
	/* The replay runs before the subscription returns: then it is ended at once. */
	s = pdk_ctl_subscribe(call->conn->m->ctl, &f, denial, out);
	pdk_ctl_unsubscribe(s);
	text = pdk_xasprintf("%zu refused connection(s)%s", json_array_size(out),
			     json_array_size(out) ? ": see structuredContent" : "");
	pdk__mcp_call_finish(call, pdk__mcp_result(text, json_pack("{s:o}", "denied", out)));
}
