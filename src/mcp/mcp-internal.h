/*
 * mcp-internal.h - what the MCP server's files share: the server, a
 * connection, a tool call in flight, the tool table and the argument
 * validator.
 */
#ifndef PDK_MCP_INTERNAL_H
#define PDK_MCP_INTERNAL_H

#include "common.h"
#include "mcp.h"

#include <event2/event.h>

struct pdk_mcp_call;
struct pdk__mcp_held;

struct pdk_mcp {
	struct pdk_ctl *ctl;
	struct event_base *base;
	struct pdk_log log;
	size_t max_message;
	char *profile;
	uint64_t ttl_s;
	char *workspace; /* the host directory sandboxes overlay, or NULL: a private one */
	uint64_t approval_timeout_s; /* how long an approval request waits (tool-ws.c) */
	bool elicit_approvals;       /* approvals are asked in band too (elicit.c) */
	json_t *tools;               /* the tools/list "tools" array, built once */
	bool fixtures;               /* the conformance fixtures are served too (fixtures.h) */
	unsigned char key[32];       /* the MRTR requestState key (mrtr.c), random per server */
	const struct pdk_mcp_provider *provider; /* someone else's tools, or NULL */
	bool own_tools;                          /* paddock's own tools are served */
	char *instructions;                      /* initialize's and server/discover's */
	struct pdk_mcp_conn *conns;              /* open connections (list_changed goes to them) */
	uint64_t asks;                           /* requests sent to clients so far (their ids) */
	struct pdk__mcp_held *held;              /* approvals asked by input_required (elicit.c) */
};

enum pdk_mcp_tool_flags {
	PDK_MCP_TOOL_SANDBOX = 1 << 0,     /* runs in a sandbox: sandbox_id, or the connection's */
	PDK_MCP_TOOL_READ_ONLY = 1 << 1,   /* readOnlyHint */
	PDK_MCP_TOOL_DESTRUCTIVE = 1 << 2, /* destructiveHint */
	PDK_MCP_TOOL_IDEMPOTENT = 1 << 3,  /* idempotentHint */
	PDK_MCP_TOOL_OPEN_WORLD = 1 << 4,  /* openWorldHint: reaches beyond the sandbox */
};

/* A tool's work: `sb` is its sandbox (NULL for a tool without PDK_MCP_TOOL_SANDBOX). */
typedef void (*pdk_mcp_tool_fn)(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);

struct pdk_mcp_tool {
	const char *name, *title, *description;
	unsigned flags;
	json_t *(*input)(void);  /* its inputSchema (new reference) */
	json_t *(*output)(void); /* its outputSchema, or NULL: the result has no fixed shape */
	pdk_mcp_tool_fn run;
};

struct pdk_mcp_conn {
	struct pdk_mcp *m;
	struct pdk_mcp_conn *next_conn; /* in m->conns while open */
	char *identity, *transport;
	char *principal; /* who the transport authenticated (the identity unless told) */
	pdk_mcp_send_cb send;
	void *send_ctx;
	bool closed;      /* the client is gone: nothing more is sent */
	bool initialized; /* initialize was answered */
	char *version;    /* the revision agreed at initialize */
	json_t *client;   /* clientInfo, or NULL */
	json_t *caps;     /* the client's capabilities, or NULL */
	char *own_sb;     /* the sandbox of calls without a handle (control id), or NULL */
	bool own_creating;
	struct pdk_mcp_call *waiting; /* calls waiting for own_sb */
	struct pdk_mcp_call *calls;   /* calls in flight */
	struct pdk_mcp_ask *asks;     /* requests sent to the client, waiting for its answer */
	unsigned refs;                /* the transport's, and one per control callback to come */
};

/* One tools/call from its request to its result. */
struct pdk_mcp_call {
	struct pdk_mcp_call *next;
	struct pdk_mcp_conn *conn;
	const struct pdk_mcp_tool *tool;
	json_t *id;             /* the request's id */
	json_t *args;           /* the validated arguments (an object) */
	json_t *progress;       /* the progress token, or NULL */
	char *sandbox;          /* the control id it runs in, or NULL */
	struct pdk_ctl_exec *x; /* the command it runs, until its end */
	struct event *ticker;   /* progress notifications */
	uint64_t ticks;
	uint64_t start_ns;
	bool cancelled;            /* the client cancelled it: nothing more is sent for it */
	bool answered;             /* a protocol error was its answer: nothing more is sent */
	bool modern;               /* a 2026-07-28 request: its results say resultType */
	bool listen;               /* subscriptions/listen: open until cancelled */
	json_t *caps;              /* modern: the request's clientCapabilities (or NULL) */
	json_t *input_responses;   /* modern, MRTR retry: inputResponses (or NULL) */
	const char *request_state; /* modern, MRTR retry: into `params` (or NULL) */
	json_t *params;            /* the request's params (a reference) */
	/* A human's decision it waits for (tool-ws.c), withdrawn if it is cancelled. */
	struct pdk_ctl_approval_wait *approval;
	bool provided;              /* a provider's call: it answers (pdk_mcp_call_reply()) */
	bool list_changed;          /* a subscription that asked for toolsListChanged */
	void *data;                 /* the provider's */
	struct pdk_mcp_ask *elicit; /* the client asked for an approval (elicit.c), or NULL */
	char *name;                 /* a provider's call: the tool's name */
	json_t *refusal;            /* the JSON-RPC error its end answers instead, or NULL */
	struct pdk__mcp_held *held; /* a retry waiting for its approval's decision, or NULL */
};

/* ---- server.c ---- */
/* Send `msg` (taken), about request `related` (NULL: none), unless the client is gone. */
void pdk__mcp_send(struct pdk_mcp_conn *c, const json_t *related, json_t *msg);
/* Serve one parsed message (borrowed). */
void pdk__mcp_dispatch(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m);
/* The modern revision a message's _meta names, or NULL: a legacy message. */
const char *pdk__mcp_modern_version(const struct pdk_rpc_msg *m);
/* A result as the modern era sends it: resultType "complete" unless set, serverInfo (taken). */
json_t *pdk__mcp_modern_result(json_t *result);
/* The JSON-RPC error codes 2026-07-28 adds (basic/index, "Error Codes"). */
#define PDK_RPC_HEADER_MISMATCH     (-32020)
#define PDK_RPC_MISSING_CAPABILITY  (-32021)
#define PDK_RPC_UNSUPPORTED_VERSION (-32022)
/* The principal of `c` when it is not its identity (a legacy HTTP session's). */
void pdk__mcp_conn_set_principal(struct pdk_mcp_conn *c, const char *principal);
/* Drop a reference; the last one of a closed connection frees it. */
void pdk__mcp_conn_unref(struct pdk_mcp_conn *c);

/* ---- ask.c ---- */
/* A response of the client (`m`, borrowed): to the ask it answers, or logged and ignored. */
void pdk__mcp_answer(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m);
/* The connection ended: every ask still open gets ECONNRESET. */
void pdk__mcp_asks_fail(struct pdk_mcp_conn *c);

/* ---- call.c ---- */
/* Start a validated call: find or make its sandbox, then run the tool. */
void pdk__mcp_call_start(struct pdk_mcp_call *call);
/* The call's result (taken): sent unless it was cancelled; the call is freed. */
void pdk__mcp_call_finish(struct pdk_mcp_call *call, json_t *result);
/* A control error as the call's result. */
void pdk__mcp_call_fail(struct pdk_mcp_call *call, const struct pdk_error *err);
/*
 * A control callback whose answer is one JSON document (ctx: the call): the
 * document as the result's text and structuredContent, or the error.
 */
void pdk__mcp_call_doc(void *ctx, json_t *doc, const struct pdk_error *err);
/* An argument error as the call's result: `field` is named. */
void pdk__mcp_call_bad(struct pdk_mcp_call *call, const char *field, const char *fmt, ...)
	PDK_PRINTF(3, 4);
/* A result of `text` and, when not NULL, `structured` (taken) as structuredContent. */
json_t *pdk__mcp_result(const char *text, json_t *structured);
/* Cancel the call (notifications/cancelled, the connection's end). */
void pdk__mcp_call_cancel(struct pdk_mcp_call *call);
/* Send progress every second while the call runs, when the client gave a token. */
void pdk__mcp_call_ticker(struct pdk_mcp_call *call);
/* The call's string, integer or boolean argument, or the default. */
const char *pdk__mcp_arg_str(const struct pdk_mcp_call *call, const char *key);
uint64_t pdk__mcp_arg_u64(const struct pdk_mcp_call *call, const char *key, uint64_t dflt);
bool pdk__mcp_arg_bool(const struct pdk_mcp_call *call, const char *key, bool dflt);
/* The path argument `key` in the sandbox (caller frees), or NULL after answering the error. */
char *pdk__mcp_arg_path(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb, const char *key);

/* The labels of a sandbox the connection makes (new reference). */
json_t *pdk__mcp_labels(const struct pdk_mcp_conn *c);
/* The workspace of a sandbox the server makes: {"path","mode"} or NULL (new reference). */
json_t *pdk__mcp_workspace(const struct pdk_mcp *m);

/* ---- audit.c ---- */
/* Record the call's tool.call event: `result` its result (NULL: a protocol error). */
void pdk__mcp_audit(const struct pdk_mcp_call *call, const json_t *result);

/* ---- elicit.c ---- */
/*
 * The client's answer `result` (an elicitation/create result, borrowed; NULL:
 * none) decides queue request `id` unless it is decided already: accept
 * with approve true approves it as "elicitation:PRINCIPAL", anything else
 * denies it (pdk_ctl_approval_decide_ctl()).
 */
void pdk__mcp_approval_answer(const struct pdk_mcp_call *call, const char *id,
			      const json_t *result);
/* elicitation/create's params asking for approval `r` (new reference). */
json_t *pdk__mcp_approval_question(const struct pdk_mcp_call *call,
				   const struct pdk_mcp_approval_elicit *r);

/* ---- elicit-mrtr.c ---- */
/* A retry that waits for its approval's decision no longer does: its callback is not called. */
void pdk__mcp_held_detach(struct pdk_mcp_call *call);
/*
 * The server ends: the approvals asked by input_required are forgotten
 * (their waiters are the control object's, which withdraws them on its
 * end; the loop runs no more).
 */
void pdk__mcp_held_free(struct pdk_mcp *m);

/* ---- mrtr.c ---- */
/*
 * A requestState for `call` (caller frees): its principal, tool, arguments'
 * digest and an expiry, signed with the server's key (HMAC-SHA256).
 */
char *pdk__mrtr_state(const struct pdk_mcp_call *call);
/*
 * The same for an approval asked in band: the state names queue request
 * `approval` too, and expires STATE_TTL_S after `wait_s` (the request's
 * timeout), so a client may retry once it is decided.
 */
char *pdk__mrtr_state_approval(const struct pdk_mcp_call *call, const char *approval,
			       uint64_t wait_s);
/* Whether `state` is one pdk__mrtr_state() made for this very call, not expired. */
bool pdk__mrtr_verify(const struct pdk_mcp_call *call, const char *state);
/*
 * Whether `state` is one pdk__mrtr_state_approval() made for this very call,
 * not expired; `approval` gets the queue request's id it names.
 */
bool pdk__mrtr_verify_approval(const struct pdk_mcp_call *call, const char *state,
			       char approval[37]);
/* The key, from the kernel's CSPRNG. */
void pdk__mrtr_key(unsigned char key[32]);

/* ---- schema.c ---- */
json_t *pdk__schema_object(json_t *properties, const char *const *required);
json_t *pdk__schema_str(const char *description);
json_t *pdk__schema_enum(const char *description, const char *const *values);
json_t *pdk__schema_int(const char *description, int64_t min, int64_t max);
json_t *pdk__schema_bool(const char *description);
json_t *pdk__schema_strv(const char *description);
json_t *pdk__schema_strmap(const char *description);
/* The sandbox_id property every sandbox tool takes. */
json_t *pdk__schema_handle(void);
/*
 * Check `args` against `schema` (the subset the tools use: object, string,
 * integer, boolean, arrays of strings, objects of strings, enums, required,
 * additionalProperties false). 0, or -1 with *field and msg (`len` bytes)
 * saying what is wrong.
 */
int pdk__schema_check(const json_t *schema, const json_t *args, const char **field, char *msg,
		      size_t len);

/* ---- tools.c ---- */
const struct pdk_mcp_tool *pdk__mcp_tool_find(const char *name);
/* The tools/list array (new reference). */
json_t *pdk__mcp_tools_json(void);

/* ---- tool-*.c: each tool's work ---- */
void pdk__tool_run_command(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_run_code(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
json_t *pdk__tool_run_output(void);
void pdk__tool_file_read(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_file_write(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_file_list(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_file_stat(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_file_delete(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_file_move(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_file_mkdir(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_sandbox_create(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_sandbox_list(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_sandbox_destroy(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_ws_diff(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_ws_snapshot(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_ws_rollback(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_ws_propose_commit(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
/*
 * The call's approval request is withdrawn (it was cancelled): the call ends
 * on the loop's next turn, as its canceller may still hold it.
 */
void pdk__tool_ws_withdraw(struct pdk_mcp_call *call);
void pdk__tool_egress_rules(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_egress_denials(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);
void pdk__tool_egress_request_allow(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb);

#endif
