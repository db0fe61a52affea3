/*
 * ask.c - requests the server sends its client (mcp.h, "requests of the
 * server to the client"): the 2025 era's server-to-client requests, such as
 * elicitation/create. Each is about one call in flight, so a transport with
 * a channel per request (Streamable HTTP) sends it on that call's stream;
 * the client's response comes back as a message of its own and is routed
 * here by the server's id.
 */
#include "common.h"
#include "mcp-internal.h"

#include <string.h>

struct pdk_mcp_ask {
	struct pdk_mcp_ask *next;
	struct pdk_mcp_conn *conn; /* a reference, until the ask ends */
	json_t *id;                /* the server's id: "paddock-N" */
	json_t *related;           /* the client's request it is about */
	struct event *timer;       /* its timeout, or NULL */
	pdk_mcp_answer_cb cb;
	void *ctx;
};

static void ask_unlink(struct pdk_mcp_ask *a)
{
	for (struct pdk_mcp_ask **p = &a->conn->asks; *p != NULL; p = &(*p)->next)
		if (*p == a) {
			*p = a->next;
			return;
		}
}

/* The ask ends: unlinked first (its callback may ask again), then called back and freed. */
static void ask_end(struct pdk_mcp_ask *a, const json_t *result, const struct pdk_error *err)
{
	struct pdk_mcp_conn *c = a->conn;

	ask_unlink(a);
	if (a->timer != NULL)
		event_free(a->timer);
	a->cb(a->ctx, result, err);
	json_decref(a->id);
	json_decref(a->related);
	free(a);
	pdk__mcp_conn_unref(c);
}

/* The client is told the server no longer waits (2025-06-18 basic/utilities/cancellation). */
static void tell_cancelled(struct pdk_mcp_ask *a, const char *why)
{
	pdk__mcp_send(
		a->conn, a->related,
		pdk_rpc_notification("notifications/cancelled",
				     json_pack("{s:O, s:s}", "requestId", a->id, "reason", why)));
}

static void timed_out(evutil_socket_t fd, short what, void *arg)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_mcp_ask *a = arg;

	(void)fd;
	(void)what;
	tell_cancelled(a, "the server stopped waiting for the answer");
	(void)pdk_error_setx(&err, ETIMEDOUT, "the client did not answer in time");
	ask_end(a, NULL, err);
}

bool pdk_mcp_call_can_elicit(const struct pdk_mcp_call *call)
{
	const json_t *e = json_object_get(call->conn->caps, "elicitation");

	if (call->modern || call->cancelled || call->conn->closed || !json_is_object(e))
		return false;
	/* 2025-11-25: {} means form mode; a client that lists modes must list form. */
	return json_object_size(e) == 0 || json_object_get(e, "form") != NULL;
}

static void arm(struct pdk_mcp_ask *a, uint64_t timeout_ms)
{
	struct timeval tv = {.tv_sec = (time_t)(timeout_ms / 1000),
			     .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000};

	a->timer = evtimer_new(a->conn->m->base, timed_out, a);
	if (a->timer == NULL || evtimer_add(a->timer, &tv) < 0)
		pdk_oom();
}

int pdk_mcp_call_ask(struct pdk_mcp_call *call, const char *method, json_t *params,
		     uint64_t timeout_ms, pdk_mcp_answer_cb cb, void *ctx, struct pdk_mcp_ask **out,
		     struct pdk_error **err)
{
	struct pdk_mcp_conn *c = call->conn;
	struct pdk_mcp_ask *a;

	if (call->modern || call->cancelled || c->closed) {
		json_decref(params);
		return pdk_error_setx(err, ENOTSUP,
				      "the client of this call cannot be sent a request now");
	}
	a = pdk_xcalloc(1, sizeof(*a));
	a->conn = c;
	c->refs++;
	/* SECURITY: a prefix no client's id has from us: an answer is matched to our ids only. */
	a->id = json_sprintf("paddock-%llu", (unsigned long long)++c->m->asks);
	a->related = json_incref(call->id);
	a->cb = cb;
	a->ctx = ctx;
	if (a->id == NULL)
		pdk_oom();
	if (timeout_ms > 0)
		arm(a, timeout_ms);
	a->next = c->asks;
	c->asks = a;
	if (out != NULL)
		*out = a;
	pdk__mcp_send(c, a->related, pdk_rpc_request(a->id, method, params));
	return 0;
}

void pdk_mcp_ask_cancel(struct pdk_mcp_ask *a)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (a == NULL)
		return;
	tell_cancelled(a, "the answer is no longer needed");
	(void)pdk_error_setx(&err, ECANCELED, "the request was cancelled");
	ask_end(a, NULL, err);
}

static void answered_error(struct pdk_mcp_ask *a, const json_t *error)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	(void)pdk_error_setx(&err, EPROTO, "the client answered error %lld: %s",
			     (long long)json_integer_value(json_object_get(error, "code")),
			     json_string_value(json_object_get(error, "message")) ?: "");
	ask_end(a, NULL, err);
}

void pdk__mcp_answer(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	_cleanup_free_ char *id = NULL;

	for (struct pdk_mcp_ask *a = c->asks; m->id != NULL && a != NULL; a = a->next) {
		if (!json_equal(a->id, m->id))
			continue;
		if (m->kind == PDK_RPC_ERROR)
			answered_error(a, m->error);
		else
			ask_end(a, m->result, NULL);
		return;
	}
	/* Late (the server stopped waiting), or never asked: it changes nothing. */
	/* SECURITY: the id is the client's: shown as JSON (escaped), and a scalar needs ENCODE_ANY.
	 */
	id = json_dumps(m->id, JSON_ENCODE_ANY | JSON_COMPACT);
	pdk_log(&c->m->log, PDK_LOG_NOTICE,
		"an answer of client %s to request id %s is ignored: the server does not wait for it",
		c->principal, id ? id : "null");
}

void pdk__mcp_asks_fail(struct pdk_mcp_conn *c)
{
	while (c->asks != NULL) {
		_cleanup_error_ struct pdk_error *err = NULL;

		(void)pdk_error_setx(&err, ECONNRESET, "the client's connection ended");
		ask_end(c->asks, NULL, err);
	}
}
