/*
 * mcp.h - the MCP server (docs/mcp.md, docs/internals/mcp.md): a front door
 * of the control layer that speaks the Model Context Protocol.
 *
 * It translates: JSON-RPC messages in (jsonrpc.h), control calls
 * (control.h) with typed requests, results and errors out, each control
 * error mapped once (pdk_mcp_tool_error()). It decides nothing about
 * sandboxes: handles, output caps and TTLs are control/'s.
 *
 * A server object (struct pdk_mcp) holds the tools and what every
 * connection shares; a connection (struct pdk_mcp_conn) is one client: a
 * stdio peer, or one Streamable HTTP session. A transport hands each
 * message it framed to pdk_mcp_conn_message() and writes what the server
 * gives its send callback, one JSON-RPC message at a time.
 *
 * Stands on control/ and http/. Every call runs on the loop's thread.
 */
#ifndef PDK_MCP_H
#define PDK_MCP_H

#include "common.h"
#include "base.h"
#include "control.h"
#include "jschema.h"
#include "jsonrpc.h"

struct event_base;
struct pdk_mcp;
struct pdk_mcp_conn;
struct pdk_mcp_call;
struct pdk_mcp_provider;

/* The protocol revisions spoken (docs/mcp.md, "Eras"): the legacy ones, newest first. */
#define PDK_MCP_VERSION_LATEST "2025-11-25"
#define PDK_MCP_VERSION_PREV   "2025-06-18"
/* The modern, stateless one: a request's _meta names it, no initialize. */
#define PDK_MCP_VERSION_MODERN "2026-07-28"

struct pdk_mcp_opts {
	struct pdk_ctl *ctl;       /* borrowed; outlives the server */
	struct event_base *base;   /* the loop (borrowed) */
	const struct pdk_log *log; /* borrowed; NULL: dropped */
	size_t max_message;        /* the largest message (0: PDK_RPC_MESSAGE_MAX) */
	const char *profile;       /* the profile of sandboxes made without one (NULL: "default") */
	uint64_t ttl_s;            /* the TTL of sandboxes made without one (0: 1 hour) */
	const char *workspace;     /* a host directory every sandbox overlays (NULL: private) */
	/* How long a request for a human's approval waits (0: PDK_CTL_APPROVAL_TIMEOUT_S). */
	uint64_t approval_timeout_s;
	/* Never ask a client for an approval by elicitation (pdk_mcp_call_elicit_approval()). */
	bool no_elicit_approvals;
	/* Also serve the MCP conformance suite's fixtures (fixtures.h): for its tests only. */
	bool conformance_fixtures;
	/*
	 * Tools of someone else (the gateway): listed after paddock's own (or
	 * instead of them, see below) and called through it. NULL: none.
	 * Borrowed; outlives the server.
	 */
	const struct pdk_mcp_provider *provider;
	/* What initialize and server/discover tell the client (NULL: paddock mcp's text). */
	const char *instructions;
};

/* A new server (caller frees with pdk_mcp_free() after every connection's end). Never NULL. */
struct pdk_mcp *pdk_mcp_new(const struct pdk_mcp_opts *o);
void pdk_mcp_free(struct pdk_mcp *m);

/*
 * Hand one message to the client (`msg` borrowed for the call). `related`
 * is the id of the client's request it answers or belongs to (a progress
 * notification's call), NULL for none: a transport with a channel per
 * request (HTTP) sends it there. The transport frames it; a transport that
 * cannot write any more drops it. `msg` NULL: request `related` was
 * cancelled and gets no answer; its channel, if it has one, may end.
 */
typedef void (*pdk_mcp_send_cb)(void *ctx, const json_t *related, const json_t *msg);

/*
 * A new connection of a client known as `identity` (copied: the handles it
 * is given are bound to it) over `transport` ("stdio", "http"), whose
 * messages go to `send`. The caller ends it with pdk_mcp_conn_close().
 */
struct pdk_mcp_conn *pdk_mcp_conn_new(struct pdk_mcp *m, const char *identity,
				      const char *transport, pdk_mcp_send_cb send, void *ctx);

/*
 * One message from the client (`len` bytes, not NUL-terminated). Every
 * answer, now or later, goes to the send callback; a message that is no
 * JSON-RPC gets the JSON-RPC error the specification names, and the
 * connection keeps serving.
 */
void pdk_mcp_conn_message(struct pdk_mcp_conn *c, const char *data, size_t len);

/*
 * The client is gone: nothing more is sent, every command it started is
 * killed, and the sandbox the connection made for calls without a handle is
 * destroyed. The connection is freed once its last call has ended.
 */
void pdk_mcp_conn_close(struct pdk_mcp_conn *c);

/* Calls of the connection still in flight. */
size_t pdk_mcp_conn_calls(const struct pdk_mcp_conn *c);

/* ---- tools of a provider (the gateway's upstreams) ---- */

/*
 * A provider answers tools/list and tools/call for tools the server does
 * not have itself. The server neither validates its calls' arguments (its
 * schema checker knows paddock's own tools only: the provider validates)
 * nor records them in the audit store (the provider does). Every callback
 * runs on the loop's thread.
 */
struct pdk_mcp_provider {
	void *ctx;
	/* Also serve paddock's own tools (run_command, ...) besides the provider's. */
	bool own_tools;
	/* The tools connection `c` may see (new reference: an array of tool definitions). */
	json_t *(*list)(void *ctx, struct pdk_mcp_conn *c);
	/*
	 * Call tool `name` with `args` (an object; both borrowed for the call).
	 * false: no such tool (the client gets the server's unknown-tool error
	 * and `call` is gone); true: the provider owns `call` until it answers
	 * it with pdk_mcp_call_reply(), now or later, exactly once.
	 */
	bool (*call)(void *ctx, struct pdk_mcp_call *call, const char *name, const json_t *args);
	/*
	 * The client cancelled `call` (notifications/cancelled) or its
	 * connection ended: nothing more is sent for it. The provider stops its
	 * work and still answers it with pdk_mcp_call_reply() (the result is
	 * dropped), now or later. May be NULL: the call just runs to its end.
	 */
	void (*cancel)(void *ctx, struct pdk_mcp_call *call);
	/* Connection `c` ended (after every call of it was cancelled). May be NULL. */
	void (*conn_end)(void *ctx, struct pdk_mcp_conn *c);
};

/*
 * Answer a provider's call with `result` (taken: a CallToolResult object,
 * isError or not) and free the call: sent unless the call was cancelled.
 */
void pdk_mcp_call_reply(struct pdk_mcp_call *call, json_t *result);

/*
 * A notifications/progress for `call`: `params` (borrowed) with the
 * client's progressToken put in. Dropped when the client gave no token or
 * cancelled the call.
 */
void pdk_mcp_call_progress(struct pdk_mcp_call *call, const json_t *params);

/* The client's progress token of `call`, or NULL (borrowed). */
const json_t *pdk_mcp_call_progress_token(const struct pdk_mcp_call *call);
/* The client's JSON-RPC id of `call` (borrowed). */
const json_t *pdk_mcp_call_id(const struct pdk_mcp_call *call);
/* Whether the client cancelled `call` (or its connection ended). */
bool pdk_mcp_call_cancelled(const struct pdk_mcp_call *call);
/* The connection `call` came on (borrowed). */
struct pdk_mcp_conn *pdk_mcp_call_conn(const struct pdk_mcp_call *call);
/* The provider's own pointer for `call` (NULL until set). */
void pdk_mcp_call_set_data(struct pdk_mcp_call *call, void *data);
void *pdk_mcp_call_data(const struct pdk_mcp_call *call);

/* ---- requests of the server to the client (ask.c) ---- */

/*
 * A request the server sends its client (a 2025-era server-to-client
 * request: elicitation/create), about one call in flight: over stdio it is
 * a line on the output, over Streamable HTTP an event on the stream of the
 * POST that carries the call (the call then answers in SSE). Its id is the
 * server's own ("paddock-N"), never one of the client's; the client's
 * answer (a response with that id) is routed to the callback. An answer to
 * an id the server does not wait for is ignored and logged.
 */
struct pdk_mcp_ask;

/*
 * The end of an ask, called exactly once on the loop: `result` (borrowed)
 * the client's result object and `err` NULL, or `result` NULL and `err`:
 * EPROTO the client answered a JSON-RPC error (its code and message in the
 * text), ETIMEDOUT nobody answered in time (the client is told
 * notifications/cancelled), ECONNRESET the connection ended, ECANCELED the
 * asker cancelled it (pdk_mcp_ask_cancel(), from within that call). The
 * ask is freed after it returns.
 */
typedef void (*pdk_mcp_answer_cb)(void *ctx, const json_t *result, const struct pdk_error *err);

/*
 * Whether the client of `call` can be asked elicitation/create in form
 * mode: it declared `elicitation` (with `form`, or empty) at initialize,
 * the call is of the 2025 era (the 2026-07-28 one has no server-to-client
 * requests: it is asked by input_required, pdk_mcp_call_can_input()), and it is neither cancelled
 * nor its connection closed.
 */
bool pdk_mcp_call_can_elicit(const struct pdk_mcp_call *call);

/*
 * Send request `method` with `params` (taken) to the client of `call`,
 * about that call; `cb` gets its answer, an error, or the end after
 * `timeout_ms` (0: none). *out (may be NULL) is the ask, valid until `cb`
 * returns. -ENOTSUP (nothing sent, `cb` never called) when the call's
 * connection cannot carry a request of the server (a 2026-07-28 call, a
 * closed connection, a cancelled call).
 */
PDK_MUST_CHECK int pdk_mcp_call_ask(struct pdk_mcp_call *call, const char *method, json_t *params,
				    uint64_t timeout_ms, pdk_mcp_answer_cb cb, void *ctx,
				    struct pdk_mcp_ask **out, struct pdk_error **err);

/*
 * The asker no longer needs the answer: the client is told
 * notifications/cancelled, and `cb` is called with ECANCELED before this
 * returns. NULL-safe.
 */
void pdk_mcp_ask_cancel(struct pdk_mcp_ask *a);

/* A request for a human's approval, as the client of the call is asked it (elicit.c). */
struct pdk_mcp_approval_elicit {
	const char *id;       /* the approval queue's request id (control.h) */
	const char *summary;  /* what would happen ("fx__write_file {...}") */
	const char *reason;   /* why it needs approval (a rule's reason) */
	const json_t *detail; /* the redacted arguments, or NULL (borrowed) */
	uint64_t timeout_s;   /* the queue request's timeout (0: PDK_CTL_APPROVAL_TIMEOUT_S) */
};

/*
 * Approval in band (docs/approvals.md, IN BAND): unless the server's
 * no_elicit_approvals is set, when the client of `call` can elicit
 * (pdk_mcp_call_can_elicit()), ask it elicitation/create about
 * queue request r->id (what is asked, by whom, why, the redacted
 * arguments; requestedSchema {approve: boolean}) beside the queue. Its
 * answer decides the queue request through pdk_ctl_approval_decide_ctl(), so
 * the asker learns the decision from the queue as from any other decider,
 * and the first decision wins: `accept` with approve true approves it as
 * "elicitation:PRINCIPAL", anything else the client answers (decline,
 * cancel, approve false) denies it; an error or no answer decides nothing.
 * An answer after the queue decided changes nothing (it is logged). The
 * asker ends the elicitation with pdk_mcp_call_elicit_end() once the queue
 * told it the decision; a call's cancellation and its end end it too.
 * Returns whether the client was asked.
 */
bool pdk_mcp_call_elicit_approval(struct pdk_mcp_call *call,
				  const struct pdk_mcp_approval_elicit *r);

/*
 * The call's approval elicitation, if one is open, is cancelled (its answer
 * moot), and a retry waiting for its approval (pdk_mcp_call_approval_retry())
 * is no longer called back. NULL-safe.
 */
void pdk_mcp_call_elicit_end(struct pdk_mcp_call *call);

/* ---- approval in band for the 2026-07-28 era: MRTR (elicit-mrtr.c) ---- */

/*
 * Whether the client of `call` is asked for an approval in band by an
 * input_required result (2026-07-28 basic/patterns/mrtr): a 2026-07-28
 * call whose clientCapabilities declare `elicitation` (with `form`, or
 * empty), in-band approvals not off (no_elicit_approvals), the call not
 * cancelled.
 */
bool pdk_mcp_call_can_input(const struct pdk_mcp_call *call);

/* Whether `call` is a 2026-07-28 retry: it carries a requestState. */
bool pdk_mcp_call_is_retry(const struct pdk_mcp_call *call);

/*
 * Round 1: queue request `r` (pdk_ctl_approval_ask(): `id` gets its id,
 * approval.requested is recorded) with a waiter of the server's own, not of
 * the call: the call ends at once with *result (new reference), an
 * input_required result whose inputRequests.approve is elicitation/create
 * (the same question as pdk_mcp_call_elicit_approval()'s) and whose
 * requestState, signed, names the principal, the tool, the arguments'
 * digest and `id`. The request stays pending for the queue's deciders and
 * the client's retry; its waiter records approval.granted, .denied or
 * .timeout as for any asker, and keeps the decision for the retry until the
 * state expires (10 minutes past the request's timeout). Errors as
 * pdk_ctl_approval_ask() (then nothing is queued).
 */
PDK_MUST_CHECK int pdk_mcp_call_approval_input(struct pdk_mcp_call *call,
					       const struct pdk_ctl_approval_req *r, char id[37],
					       json_t **result, struct pdk_error **err);

/*
 * The retry of round 1 (pdk_mcp_call_is_retry()): 0 when its requestState
 * verifies for this principal, tool and arguments and names an approval
 * this server holds (`id` gets it): the client's answer
 * (inputResponses.approve) decides it when it is still pending, as
 * pdk_mcp_call_elicit_approval()'s answer does (an operator's decision
 * made first stands), and `cb` is called once with the decision, perhaps
 * before this returns (then the caller touches neither `call` nor `ctx`
 * after). The decision is consumed: a granted approval runs one call.
 * -EINVAL: the state does not verify (forged, another call's, expired):
 * the caller ends the call, whose end answers JSON-RPC invalid params
 * instead of its result. -ENOENT: the approval was consumed by an
 * earlier retry, is waited for by another one, or was forgotten; -ESTALE:
 * `detail` (what the request would show now, borrowed; NULL: none) is not
 * what round 1's request showed (a change set that changed since): the
 * caller refuses the call (`id` names the approval), which stays as it
 * is. The call's end (pdk_mcp_call_elicit_end()) detaches `cb`.
 */
PDK_MUST_CHECK int pdk_mcp_call_approval_retry(struct pdk_mcp_call *call, const json_t *detail,
					       pdk_ctl_approval_cb cb, void *ctx, char id[37]);

/*
 * Who the connection's client is: the principal its transport
 * authenticated ("loopback", a token's name, the stdio identity).
 */
const char *pdk_mcp_conn_principal(const struct pdk_mcp_conn *c);
/* The connection's session: its identity (a legacy HTTP session's own, or the principal). */
const char *pdk_mcp_conn_session(const struct pdk_mcp_conn *c);
/* The client's clientInfo.name, or NULL (borrowed). */
const char *pdk_mcp_conn_client(const struct pdk_mcp_conn *c);

/*
 * The provider's tools changed: notifications/tools/list_changed to every
 * connection that can take it (legacy era: those that initialized; the
 * 2026-07-28 era: each subscriptions/listen stream that asked for
 * toolsListChanged).
 */
void pdk_mcp_tools_changed(struct pdk_mcp *m);

/*
 * Arguments as an audit record keeps them (new reference): secret-looking
 * env names' values, the secrets `r` holds (NULL: none) and token shapes
 * redacted, strings past 1 KiB cut (audit.c; the gateway's records too).
 */
struct pdk_redact;
json_t *pdk_mcp_audit_args(const struct pdk_redact *r, const json_t *args);

/* ---- the stdio transport (stdio.c) ---- */

struct pdk_mcp_stdio;

/*
 * Serve one client on `in_fd` and `out_fd` (borrowed; made non-blocking):
 * newline-delimited messages (2025-06-18 basic/transports, "stdio"), each
 * at most the server's max_message bytes (a longer one gets a parse error
 * and is skipped to its newline). `on_eof` runs once when the client closes
 * its end (end of input, or its output pipe gone).
 */
struct pdk_mcp_stdio *pdk_mcp_stdio_new(struct pdk_mcp *m, int in_fd, int out_fd,
					const char *identity, void (*on_eof)(void *arg), void *arg);

/* The connection it serves (borrowed). */
struct pdk_mcp_conn *pdk_mcp_stdio_conn(struct pdk_mcp_stdio *s);

/*
 * Close the connection (pdk_mcp_conn_close()), write what is still queued
 * for the client (blocking, until it is written or the client is gone) and
 * free the transport. NULL-safe.
 */
void pdk_mcp_stdio_free(struct pdk_mcp_stdio *s);

/* ---- the Streamable HTTP transport (http.c) ---- */

struct pdk_mcp_http;
struct evhttp_request;

struct pdk_mcp_http_opts {
	/*
	 * An endpoint whose clients bring no credentials (`paddock mcp --listen`,
	 * loopback only): the Host header must name a loopback host or one of
	 * `hosts`. Origin, when sent, is checked against the same names always.
	 */
	bool check_host;
	char *const *hosts; /* more allowed host names (copied; NULL: none) */
};

/* The endpoint (caller frees with pdk_mcp_http_free(), before the server). Never NULL. */
struct pdk_mcp_http *pdk_mcp_http_new(struct pdk_mcp *m, const struct pdk_mcp_http_opts *o);

/*
 * Answer one request to the MCP endpoint, now or later. `principal` is who
 * the front end authenticated (copied; "loopback" for a listener without
 * credentials): a 2026-07-28 request's handles are bound to it, a legacy
 * session's to the session. POST carries one message; DELETE ends a legacy
 * session; anything else is 405.
 */
void pdk_mcp_http_handle(struct pdk_mcp_http *h, struct evhttp_request *req, const char *principal);

/* Once a second or so: legacy sessions idle for an hour end. NULL-safe. */
void pdk_mcp_http_tick(struct pdk_mcp_http *h);

/* End every session and request in flight (their commands are killed). NULL-safe. */
void pdk_mcp_http_free(struct pdk_mcp_http *h);

/*
 * The one mapping from a control error to a tool's result: an `isError`
 * result whose text names the field and says what to do (new reference).
 */
json_t *pdk_mcp_tool_error(const struct pdk_error *err);

#endif
