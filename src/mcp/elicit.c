/*
 * elicit.c - approval in band (docs/approvals.md, IN BAND): a call waiting
 * in the approval queue also asks its client, by elicitation/create, when
 * the client declared it can be asked. The answer is one more decider of
 * the queue request (pdk_ctl_approval_decide_ctl(), as `paddock approve` and
 * the API are), so the asker hears of the decision from the queue alone,
 * and of two deciders the first wins: the queue's transaction settles it.
 */
#include "common.h"
#include "mcp-internal.h"

#include <stdio.h>
#include <string.h>

/* The most bytes of the arguments the question shows. */
#define MESSAGE_ARGS_MAX 2048

/* What an answer decides: the call it belongs to and its queue request. */
struct elicit {
	struct pdk_mcp_call *call;
	char id[37];
};

/* "accept" with {"approve": true}: the only answer that grants. */
static bool grants(const json_t *result)
{
	const char *action = json_string_value(json_object_get(result, "action"));

	return action != NULL && strcmp(action, "accept") == 0 &&
	       json_is_true(json_object_get(json_object_get(result, "content"), "approve"));
}

/* The answer as the record's note says it. */
static const char *verdict(const char *action, bool yes)
{
	if (yes)
		return "approved";
	if (action != NULL && strcmp(action, "decline") == 0)
		return "declined";
	if (action != NULL && strcmp(action, "cancel") == 0)
		return "cancelled";
	return "refused (approve was not true)";
}

/* The queue request is decided by the client's answer, unless someone decided it first. */
static void decide(const struct elicit *e, const json_t *result)
{
	pdk__mcp_approval_answer(e->call, e->id, result);
}

void pdk__mcp_approval_answer(const struct pdk_mcp_call *call, const char *id, const json_t *result)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_mcp_conn *c = call->conn;
	const char *client = pdk_mcp_conn_client(c);
	const char *action = json_string_value(json_object_get(result, "action"));
	bool yes = grants(result);
	_cleanup_free_ char *approver = pdk_xasprintf("elicitation:%s", c->principal);
	_cleanup_free_ char *note = pdk_xasprintf(
		"%s in band by MCP client %s", verdict(action, yes), client ? client : "(unnamed)");

	/* SECURITY: anything but an explicit approve denies; the queue's row is the one truth. */
	if (pdk_ctl_approval_decide_ctl(c->m->ctl, id, yes, approver, note, NULL, &err) == 0)
		return;
	pdk_log(&c->m->log, PDK_LOG_NOTICE,
		"the elicitation answer of %s to approval %s changes nothing: %s", c->principal, id,
		err->msg);
}

static void answered(void *ctx, const json_t *result, const struct pdk_error *err)
{
	struct elicit *e = ctx;

	e->call->elicit = NULL;
	/* No answer, or an error: the queue still waits for its other deciders, or its timeout. */
	if (err == NULL)
		decide(e, result);
	else if (err->status != ECANCELED)
		pdk_log(&e->call->conn->m->log, PDK_LOG_INFO,
			"approval %s: the client was asked in band and gave no answer: %s", e->id,
			err->msg);
	free(e);
}

/* The text of the question: what, by whom, why, the redacted arguments, the queue's id. */
static char *message_of(const struct pdk_mcp_call *call, const struct pdk_mcp_approval_elicit *r)
{
	_cleanup_free_ char *args = r->detail ? pdk_json_dump_line(r->detail) : NULL;

	if (args != NULL)
		args[strcspn(args, "\n")] = '\0';
	/* A dialog, not a review tool: a long detail is cut (the queue keeps it whole). */
	if (args != NULL && strlen(args) > MESSAGE_ARGS_MAX)
		(void)snprintf(args + MESSAGE_ARGS_MAX - 4, 4, "...");
	/* A summary may end in a newline of its own (a JSON line): one is enough. */
	return pdk_xasprintf("%s asks to run: %.*s\nWhy it needs your approval: %s\n%s%s%s"
			     "Approval request %s (also in 'paddock approvals').",
			     call->conn->principal, (int)strcspn(r->summary, "\n"), r->summary,
			     r->reason ? r->reason : "(no reason)",
			     args ? "Details (secrets redacted): " : "", args ? args : "",
			     args ? "\n" : "", r->id);
}

json_t *pdk__mcp_approval_question(const struct pdk_mcp_call *call,
				   const struct pdk_mcp_approval_elicit *r)
{
	_cleanup_free_ char *msg = message_of(call, r);
	json_t *p = json_pack("{s:s, s:{s:s, s:{s:{s:s, s:s, s:s}}, s:[s]}}", "message", msg,
			      "requestedSchema", "type", "object", "properties", "approve", "type",
			      "boolean", "title", "Approve", "description",
			      "true lets this call run; false denies it", "required", "approve");

	if (p == NULL)
		pdk_oom();
	return p;
}

bool pdk_mcp_call_elicit_approval(struct pdk_mcp_call *call,
				  const struct pdk_mcp_approval_elicit *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	uint64_t timeout_s = r->timeout_s ? r->timeout_s : PDK_CTL_APPROVAL_TIMEOUT_S;
	struct elicit *e;

	/* SECURITY: off, the queue's deciders alone decide (docs/approvals.md, SECURITY). */
	if (!call->conn->m->elicit_approvals || call->elicit != NULL ||
	    !pdk_mcp_call_can_elicit(call))
		return false;
	e = pdk_xcalloc(1, sizeof(*e));
	e->call = call;
	(void)snprintf(e->id, sizeof(e->id), "%s", r->id);
	/* The question stays open as long as the queue request does. */
	if (pdk_mcp_call_ask(call, "elicitation/create", pdk__mcp_approval_question(call, r),
			     timeout_s * 1000, answered, e, &call->elicit, &err) < 0) {
		free(e);
		return false;
	}
	return true;
}

void pdk_mcp_call_elicit_end(struct pdk_mcp_call *call)
{
	if (call == NULL)
		return;
	pdk_mcp_ask_cancel(call->elicit);
	pdk__mcp_held_detach(call);
}
