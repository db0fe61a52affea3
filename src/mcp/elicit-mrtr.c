/*
 * elicit-mrtr.c - approval in band for the 2026-07-28 era (docs/approvals.md,
 * IN BAND; docs/internals/mcp.md, "Approval in band"): that revision has no
 * server-to-client request, so a call that needs a human's approval ends
 * with an input_required result asking elicitation/create, and the client
 * retries it with the answer and the signed requestState (mrtr.c). Between
 * the two rounds no call is held: the queue request's waiter is the
 * server's own (a "held" approval), which records its decision or timeout
 * as any waiter does and keeps it for the retry.
 */
#include "common.h"
#include "mcp-internal.h"

#include <openssl/sha.h>
#include <string.h>

/* How long a decision is kept past the request's timeout: the state's own lifetime. */
#define HELD_TTL_S 600

struct pdk__mcp_held {
	struct pdk__mcp_held *next;
	struct pdk_mcp *m;
	char id[37];
	struct pdk_ctl_approval_wait *wait; /* until decided */
	bool decided;
	char *state, *approver, *note; /* once decided */
	uint64_t forget_s;             /* CLOCK_REALTIME (s): a decided one is forgotten after */
	unsigned char detail[SHA256_DIGEST_LENGTH]; /* what the human was shown: its digest */
	/* A retry waiting for the decision, or NULL. */
	struct pdk_mcp_call *call;
	pdk_ctl_approval_cb cb;
	void *ctx;
};

static uint64_t now_s(void)
{
	return pdk_now_real_ns() / 1000000000ULL;
}

static void held_unlink(struct pdk__mcp_held *h)
{
	for (struct pdk__mcp_held **p = &h->m->held; *p != NULL; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			return;
		}
}

/* The digest of a request's detail (NULL: none), as its JSON line. */
static void detail_digest(const json_t *detail, unsigned char out[SHA256_DIGEST_LENGTH])
{
	_cleanup_free_ char *line = detail != NULL ? pdk_json_dump_line(detail) : pdk_xstrdup("");

	SHA256((const unsigned char *)line, strlen(line), out);
}

static void held_free(struct pdk__mcp_held *h)
{
	free(h->state);
	free(h->approver);
	free(h->note);
	free(h);
}

/* Decided approvals nobody retried, past their state's expiry, are forgotten. */
static void prune(struct pdk_mcp *m)
{
	uint64_t now = now_s();

	for (struct pdk__mcp_held **p = &m->held; *p != NULL;) {
		struct pdk__mcp_held *h = *p;

		if (!h->decided || h->forget_s >= now) {
			p = &h->next;
			continue;
		}
		*p = h->next;
		held_free(h);
	}
}

static struct pdk__mcp_held *held_find(struct pdk_mcp *m, const char *id)
{
	for (struct pdk__mcp_held *h = m->held; h != NULL; h = h->next)
		if (strcmp(h->id, id) == 0)
			return h;
	return NULL;
}

/* The waiting retry is told the decision, and the approval is consumed. */
static void held_deliver(struct pdk__mcp_held *h, const struct pdk_ctl_approval *a)
{
	pdk_ctl_approval_cb cb = h->cb;
	void *ctx = h->ctx;

	held_unlink(h);
	h->call->held = NULL;
	cb(ctx, a);
	held_free(h);
}

/* The queue decided (the waiter recorded it): to the retry that waits, or kept for one. */
static void held_decided(void *ctx, const struct pdk_ctl_approval *a)
{
	struct pdk__mcp_held *h = ctx;

	h->wait = NULL;
	if (h->cb != NULL) {
		held_deliver(h, a);
		return;
	}
	h->decided = true;
	h->state = pdk_xstrdup(a->state);
	h->approver = a->approver ? pdk_xstrdup(a->approver) : NULL;
	h->note = a->note ? pdk_xstrdup(a->note) : NULL;
}

bool pdk_mcp_call_can_input(const struct pdk_mcp_call *call)
{
	const json_t *e = json_object_get(call->caps, "elicitation");

	/* SECURITY: off, the queue's deciders alone decide (docs/approvals.md, SECURITY). */
	if (!call->modern || !call->conn->m->elicit_approvals || call->cancelled ||
	    !json_is_object(e))
		return false;
	/* As in the 2025 era: {} means form mode; a client that lists modes must list form. */
	return json_object_size(e) == 0 || json_object_get(e, "form") != NULL;
}

bool pdk_mcp_call_is_retry(const struct pdk_mcp_call *call)
{
	return call->modern && call->request_state != NULL;
}

/* The input_required result: one input request, `approve`, and the signed state. */
static json_t *input_required(const struct pdk_mcp_call *call, const struct pdk_ctl_approval_req *r,
			      const char *id, uint64_t timeout_s)
{
	json_t *q = pdk__mcp_approval_question(
		call, &(struct pdk_mcp_approval_elicit){.id = id,
							.summary = r->summary,
							.reason = r->reason,
							.detail = r->detail,
							.timeout_s = timeout_s});
	_cleanup_free_ char *state = pdk__mrtr_state_approval(call, id, timeout_s);
	json_t *res;

	pdk_json_set(q, "mode", json_string("form"));
	res = json_pack("{s:s, s:{s:{s:s, s:o}}, s:s}", "resultType", "input_required",
			"inputRequests", "approve", "method", "elicitation/create", "params", q,
			"requestState", state);
	if (res == NULL)
		pdk_oom();
	return res;
}

int pdk_mcp_call_approval_input(struct pdk_mcp_call *call, const struct pdk_ctl_approval_req *r,
				char id[37], json_t **result, struct pdk_error **err)
{
	struct pdk_mcp *m = call->conn->m;
	uint64_t timeout_s = r->timeout_s ? r->timeout_s : PDK_CTL_APPROVAL_TIMEOUT_S;
	struct pdk__mcp_held *h = pdk_xcalloc(1, sizeof(*h));
	int rc;

	prune(m);
	h->m = m;
	rc = pdk_ctl_approval_ask(m->ctl, r, held_decided, h, h->id, &h->wait, err);
	if (rc < 0) {
		free(h);
		return rc;
	}
	h->forget_s = now_s() + timeout_s + HELD_TTL_S;
	detail_digest(r->detail, h->detail);
	h->next = m->held;
	m->held = h;
	memcpy(id, h->id, 37);
	*result = input_required(call, r, h->id, timeout_s);
	return 0;
}

/* SECURITY: a state this server did not sign for this very call is a protocol error. */
static int refuse_state(struct pdk_mcp_call *call)
{
	call->refusal =
		pdk_rpc_error(call->id, PDK_RPC_INVALID_PARAMS,
			      "requestState does not verify: it is not one this server gave "
			      "for this call (principal, tool, arguments), or it expired",
			      NULL);
	call->answered = true;
	return -EINVAL;
}

int pdk_mcp_call_approval_retry(struct pdk_mcp_call *call, const json_t *detail,
				pdk_ctl_approval_cb cb, void *ctx, char id[37])
{
	unsigned char digest[SHA256_DIGEST_LENGTH];
	struct pdk__mcp_held *h;

	if (!pdk__mrtr_verify_approval(call, call->request_state, id))
		return refuse_state(call);
	prune(call->conn->m);
	h = held_find(call->conn->m, id);
	/* SECURITY: one decision runs one call: a second retry of the same state is refused. */
	if (h == NULL || h->cb != NULL)
		return -ENOENT;
	/* SECURITY: a decision is about what the human was shown: a changed change set is not it.
	 */
	detail_digest(detail, digest);
	if (memcmp(digest, h->detail, sizeof(digest)) != 0)
		return -ESTALE;
	h->call = call;
	h->cb = cb;
	h->ctx = ctx;
	call->held = h;
	if (h->decided) {
		held_deliver(h, &(struct pdk_ctl_approval){.id = h->id,
							   .state = h->state,
							   .approver = h->approver,
							   .note = h->note});
		return 0;
	}
	/* Still pending: the client's answer decides it, unless an operator is quicker. */
	pdk__mcp_approval_answer(call, id, json_object_get(call->input_responses, "approve"));
	return 0;
}

void pdk__mcp_held_detach(struct pdk_mcp_call *call)
{
	struct pdk__mcp_held *h = call->held;

	if (h == NULL)
		return;
	/* Decided later, the decision is kept for another retry until the state expires. */
	h->call = NULL;
	h->cb = NULL;
	h->ctx = NULL;
	call->held = NULL;
}

void pdk__mcp_held_free(struct pdk_mcp *m)
{
	while (m->held != NULL) {
		struct pdk__mcp_held *h = m->held;

		m->held = h->next;
		held_free(h);
	}
}
