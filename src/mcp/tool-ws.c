/*
 * tool-ws.c - the workspace review tools (diff, snapshot, rollback, and the
 * commit a human approves) and the egress tools (the allowlist, recent
 * refusals, and the request a human approves). Nothing here applies a
 * change to the host before a human approves it: a proposed commit waits in
 * the approval queue (control.h, "approvals") for the decision, and so
 * does a request to widen the sandbox's network allowlist (docs/mcp.md).
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

/* ---- workspace_propose_commit: the approval queue, then the commit ---- */

/* The most changes listed in an approval request's detail (the rest are counted). */
#define PROPOSE_LIST_MAX 1000

/* An isError result of `text` and `structured` (taken). */
static void refused(struct pdk_mcp_call *call, const char *text, json_t *structured)
{
	json_t *r = pdk__mcp_result(text, structured);

	pdk_json_set(r, "isError", json_true());
	pdk__mcp_call_finish(call, r);
}

/* "5m", "90s": how long a request waits, as the user set it. Caller frees. */
static char *timeout_text(uint64_t s)
{
	if (s % 3600 == 0)
		return pdk_xasprintf("%lluh", (unsigned long long)(s / 3600));
	if (s % 60 == 0)
		return pdk_xasprintf("%llum", (unsigned long long)(s / 60));
	return pdk_xasprintf("%llus", (unsigned long long)s);
}

/* The approver, kept for the commit's answer. */
struct approved {
	struct pdk_mcp_call *call;
	char *approver;
};

static void committed(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct approved *a = ctx;
	struct pdk_mcp_call *call = a->call;
	_cleanup_free_ char *approver = a->approver, *text = NULL, *line = NULL;

	free(a);
	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	line = pdk_json_dump_line(doc);
	text = pdk_xasprintf("approved by %s; committed: %s", approver, line);
	pdk__mcp_call_finish(
		call, pdk__mcp_result(text, json_pack("{s:s, s:s, s:O}", "status", "committed",
						      "approver", approver, "commit", doc)));
}

static void commit_now(struct pdk_mcp_call *call, const struct pdk_ctl_approval *a)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct approved *ctx = pdk_xcalloc(1, sizeof(*ctx));
	struct pdk_ctl_sb *sb = NULL;

	ctx->call = call;
	ctx->approver = pdk_xstrdup(a->approver ? a->approver : "?");
	/* The sandbox is found again: it may have ended while the human decided. */
	if (pdk_ctl_find(call->conn->m->ctl, call->sandbox, PDK_CTL_FIND_LIVE, &sb, &err) < 0 ||
	    pdk_ctl_commit(sb, 0, committed, ctx, &err) < 0) {
		free(ctx->approver);
		free(ctx);
		pdk__mcp_call_fail(call, err);
	}
}

/*
 * The queue decided a request of `call`: true when it was approved (the
 * caller goes on); otherwise the call is answered with the refusal ("not
 * VERB: ...") and false.
 */
static bool approved(struct pdk_mcp_call *call, const struct pdk_ctl_approval *a, const char *verb)
{
	_cleanup_free_ char *text = NULL, *wait = NULL;
	const char *who = a->approver ? a->approver : "?";

	call->approval = NULL;
	/* The queue decided (perhaps through the client's own answer): its question is moot. */
	pdk_mcp_call_elicit_end(call);
	if (strcmp(a->state, "approved") == 0)
		return true;
	if (strcmp(a->state, "denied") == 0) {
		text = pdk_xasprintf("denied by %s: %s", who, a->note ? a->note : "(no note)");
		refused(call, text,
			json_pack("{s:s, s:s, s:s, s:s?}", "status", "denied", "approval_id", a->id,
				  "approver", who, "note", a->note));
		return false;
	}
	wait = timeout_text(call->conn->m->approval_timeout_s ?: PDK_CTL_APPROVAL_TIMEOUT_S);
	text = strcmp(a->state, "timed_out") == 0
		       ? pdk_xasprintf("not %s: nobody approved within %s (approval request "
				       "%s timed out; a human approves with 'paddock approve %s' "
				       "while it waits)",
				       verb, wait, a->id, a->id)
		       : pdk_xasprintf("not %s: approval request %s was %s", verb, a->id, a->state);
	refused(call, text, json_pack("{s:s, s:s}", "status", a->state, "approval_id", a->id));
	return false;
}

static void propose_decided(void *ctx, const struct pdk_ctl_approval *a)
{
	if (approved(ctx, a, "applied"))
		commit_now(ctx, a);
}

/* What the human sees: the change list (at most PROPOSE_LIST_MAX entries) and its count. */
static json_t *propose_detail(const struct pdk_mcp_call *call, const json_t *changes)
{
	json_t *list = json_array(), *c;
	size_t i;

	json_array_foreach(changes, i, c)
	{
		if (i == PROPOSE_LIST_MAX)
			break;
		json_array_append_new(list,
				      json_pack("{s:O?, s:O?}", "kind", json_object_get(c, "kind"),
						"path", json_object_get(c, "path")));
	}
	return json_pack("{s:s, s:s?, s:o, s:I}", "sandbox", call->sandbox, "workspace",
			 call->conn->m->workspace, "changes", list, "total",
			 (json_int_t)json_array_size(changes));
}

/*
 * A 2026-07-28 retry of a request asked in band (MRTR): the decision, the
 * client's answer or an operator's first, goes to `decided` as in the 2025
 * era, for this very request (`detail` as round 1 showed it). `tool` and
 * `what` name the call and what may have changed since, for the refusals.
 */
static void approval_retry(struct pdk_mcp_call *call, const json_t *detail,
			   pdk_ctl_approval_cb decided, const char *tool, const char *what)
{
	_cleanup_free_ char *text = NULL;
	char id[37] = "";
	int rc = pdk_mcp_call_approval_retry(call, detail, decided, call, id);

	if (rc == 0)
		return;
	if (rc == -EINVAL) {
		pdk__mcp_call_finish(call, NULL); /* answered invalid params */
		return;
	}
	text = rc == -ESTALE ? pdk_xasprintf("not applied: %s no longer those approval request "
					     "%s showed: call %s again to be asked anew",
					     what, id, tool)
			     : pdk_xasprintf("not applied: approval request %s was used by an "
					     "earlier retry or is no longer known: call %s again "
					     "to be asked anew",
					     id, tool);
	refused(call, text,
		json_pack("{s:s, s:s}", "status", rc == -ESTALE ? "changed" : "used", "approval_id",
			  id));
}

/* Ask the queue (and the client, in band, when it can be asked): the first decision wins. */
static void approval_ask(struct pdk_mcp_call *call, const struct pdk_ctl_approval_req *r,
			 pdk_ctl_approval_cb decided)
{
	_cleanup_error_ struct pdk_error *e = NULL;
	json_t *input = NULL;
	char id[37];

	if (pdk_mcp_call_can_input(call)) {
		/* MRTR: round 1 ends here; the queue's own waiter records what is decided. */
		if (pdk_mcp_call_approval_input(call, r, id, &input, &e) < 0)
			pdk__mcp_call_fail(call, e);
		else
			pdk__mcp_call_finish(call, input);
		return;
	}
	if (pdk_ctl_approval_ask(call->conn->m->ctl, r, decided, call, id, &call->approval, &e) <
	    0) {
		pdk__mcp_call_fail(call, e);
		return;
	}
	(void)pdk_mcp_call_elicit_approval(
		call, &(struct pdk_mcp_approval_elicit){.id = id,
							.summary = r->summary,
							.reason = r->reason,
							.detail = r->detail,
							.timeout_s = r->timeout_s});
	/* Progress while the human decides: a client may extend its own timeout on it. */
	pdk__mcp_call_ticker(call);
}

static void propose_diffed(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	_cleanup_error_ struct pdk_error *e = NULL;
	_cleanup_json_ json_t *detail = NULL;
	_cleanup_free_ char *summary = NULL;
	const json_t *changes = json_object_get(doc, "changes");
	size_t n = json_array_size(changes);

	if (err != NULL || call->cancelled) {
		(void)pdk_error_setx(&e, ECANCELED, "the call was cancelled");
		pdk__mcp_call_fail(call, err != NULL ? err : e);
		return;
	}
	if (n == 0) {
		pdk__mcp_call_finish(call,
				     pdk__mcp_result("no changes: nothing to commit",
						     json_pack("{s:s}", "status", "no_changes")));
		return;
	}
	summary = pdk_xasprintf("commit %zu change(s) of sandbox %s to %s", n, call->sandbox,
				call->conn->m->workspace ?: "its workspace's host directory");
	detail = propose_detail(call, changes);
	if (pdk_mcp_call_is_retry(call)) {
		approval_retry(call, detail, propose_decided, "workspace_propose_commit",
			       "the sandbox's changes are");
		return;
	}
	approval_ask(call,
		     &(struct pdk_ctl_approval_req){
			     .kind = "commit",
			     .principal = call->conn->identity,
			     .sandbox = call->sandbox,
			     .summary = summary,
			     .reason = "workspace_propose_commit: applying a change set to the "
				       "host needs a human's approval",
			     .detail = detail,
			     .timeout_s = call->conn->m->approval_timeout_s},
		     propose_decided);
}

/*
 * SECURITY: nothing reaches the host until a human approves this very change
 * set's request (paddock approve, the daemon's API): the call waits for the
 * decision; denied, timed out or withdrawn, nothing is applied.
 */
void pdk__tool_ws_propose_commit(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_ctl_diff(sb, propose_diffed, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

static void withdrawn_end(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	refused(arg, "cancelled: the approval request was withdrawn",
		json_pack("{s:s}", "status", "withdrawn"));
}

void pdk__tool_ws_withdraw(struct pdk_mcp_call *call)
{
	struct timeval now = {0, 0};

	pdk_ctl_approval_withdraw(call->approval);
	call->approval = NULL;
	if (event_base_once(call->conn->m->base, -1, EV_TIMEOUT, withdrawn_end, call, &now) < 0)
		pdk_oom();
}

/* ---- egress_request_allow: the approval queue, then the live allowlist ---- */

static void egress_widened(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct approved *a = ctx;
	struct pdk_mcp_call *call = a->call;
	_cleanup_free_ char *approver = a->approver, *text = NULL;
	const char *entry = json_string_value(json_object_get(doc, "allow"));

	free(a);
	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	text = pdk_xasprintf("approved by %s; the sandbox may now reach %s (its network.allow "
			     "lists '%s'; no restart)",
			     approver, entry, entry);
	pdk__mcp_call_finish(
		call,
		pdk__mcp_result(text, json_pack("{s:s, s:s, s:s, s:O?}", "status", "allowed",
						"host", entry, "approver", approver, "allow",
						json_object_get(json_object_get(doc, "network"),
								"allow"))));
}

/* SECURITY: widened only now, on this very request's approval, recorded with its approver. */
static void egress_widen(struct pdk_mcp_call *call, const struct pdk_ctl_approval *a)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct approved *ctx = pdk_xcalloc(1, sizeof(*ctx));
	struct pdk_ctl_sb *sb = NULL;

	ctx->call = call;
	ctx->approver = pdk_xstrdup(a->approver ? a->approver : "?");
	/* The sandbox is found again: it may have ended while the human decided. */
	if (pdk_ctl_find(call->conn->m->ctl, call->sandbox, PDK_CTL_FIND_LIVE, &sb, &err) < 0 ||
	    pdk_ctl_egress_allow(
		    sb,
		    &(struct pdk_ctl_egress_allow_req){.host = pdk__mcp_arg_str(call, "host"),
						       .actor = ctx->approver,
						       .approval_id = a->id},
		    egress_widened, ctx, &err) < 0) {
		free(ctx->approver);
		free(ctx);
		pdk__mcp_call_fail(call, err);
	}
}

static void egress_decided(void *ctx, const struct pdk_ctl_approval *a)
{
	if (approved(ctx, a, "allowed"))
		egress_widen(ctx, a);
}

/* A request that cannot be granted at all (no allowlist, a bad entry): no human is asked. */
static void egress_unfit(struct pdk_mcp_call *call, const char *host, const struct pdk_error *err)
{
	_cleanup_free_ char *text = pdk_xasprintf("refused: %s", err->msg);

	refused(call, text,
		json_pack("{s:s, s:s, s:s?, s:s}", "status", "refused", "reason",
			  err->status == ENOTSUP ? "no_allowlist" : "invalid_host", "host", host,
			  "error", err->msg));
}

/*
 * SECURITY: the agent only asks; a human approves this very request (paddock
 * approve, the daemon's API) before control/ widens the sandbox's allowlist
 * by the one entry shown, in the profile's grammar. Denied, timed out or
 * withdrawn, the allowlist is as it was.
 */
void pdk__tool_egress_request_allow(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *entry = NULL, *summary = NULL;
	_cleanup_json_ json_t *detail = NULL;
	const char *host = pdk__mcp_arg_str(call, "host");
	unsigned port = 0;

	if (pdk_ctl_egress_allow_check(sb, host, &entry, &port, &err) < 0) {
		egress_unfit(call, host, err);
		return;
	}
	summary = pdk_xasprintf("allow sandbox %s to reach %s", call->sandbox, entry);
	detail = json_pack("{s:s, s:s, s:s?, s:s?}", "sandbox", call->sandbox, "host", entry,
			   "requested", host, "reason", pdk__mcp_arg_str(call, "reason"));
	if (port != 0)
		pdk_json_set(detail, "port", json_integer(port));
	if (pdk_mcp_call_is_retry(call)) {
		approval_retry(call, detail, egress_decided, "egress_request_allow",
			       "the request is");
		return;
	}
	approval_ask(call,
		     &(struct pdk_ctl_approval_req){
			     .kind = "egress.host",
			     .principal = call->conn->identity,
			     .sandbox = call->sandbox,
			     .summary = summary,
			     .reason = "egress_request_allow: widening a sandbox's network "
				       "allowlist needs a human's approval",
			     .detail = detail,
			     .timeout_s = call->conn->m->approval_timeout_s},
		     egress_decided);
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
