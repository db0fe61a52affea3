/*
 * jsonrpc.h - JSON-RPC 2.0 messages as the Model Context Protocol uses them
 * (docs/mcp.md, "Messages"): one object per message, never a batch (the
 * 2025-06-18 revision removed them, and no later one brought them back).
 *
 * The parser is what untrusted bytes meet first, so it is small, total and
 * fuzzed (tests/fuzz/fuzz-jsonrpc.c): every input is either a message whose
 * invariants hold (below) or a refusal with a JSON-RPC error code, a
 * message, and the request id when one could be read.
 */
#ifndef PDK_MCP_JSONRPC_H
#define PDK_MCP_JSONRPC_H

#include "common.h"
#include "base.h"

/* The JSON-RPC 2.0 error codes, and the ones MCP adds. */
#define PDK_RPC_PARSE_ERROR      (-32700)
#define PDK_RPC_INVALID_REQUEST  (-32600)
#define PDK_RPC_METHOD_NOT_FOUND (-32601)
#define PDK_RPC_INVALID_PARAMS   (-32602)
#define PDK_RPC_INTERNAL_ERROR   (-32603)
/* MCP: a resource that does not exist (2025-06-18 server/resources). */
#define PDK_RPC_RESOURCE_NOT_FOUND (-32002)

/* The largest message a transport hands the parser unless told otherwise. */
#define PDK_RPC_MESSAGE_MAX ((size_t)4 << 20)

enum pdk_rpc_kind {
	PDK_RPC_REQUEST,      /* method and id */
	PDK_RPC_NOTIFICATION, /* method, no id */
	PDK_RPC_RESPONSE,     /* id and result */
	PDK_RPC_ERROR,        /* id (maybe null) and error */
};

/*
 * One message. `doc` is owned (pdk_rpc_msg_release()); every other member
 * points into it. Invariants of a parsed message: "jsonrpc" is "2.0"; a
 * request's id is a string or an integer (MCP forbids null); `method` is a
 * non-empty string for requests and notifications; `params` is NULL or an
 * object (MCP's params are always named); a response has exactly one of
 * `result` (an object) and `error` (an object with an integer code and a
 * string message); no member other than these is present.
 */
struct pdk_rpc_msg {
	enum pdk_rpc_kind kind;
	json_t *doc;
	json_t *id;         /* requests, responses; NULL for a notification */
	const char *method; /* requests and notifications */
	json_t *params;     /* requests and notifications: an object, or NULL */
	json_t *result;     /* responses */
	json_t *error;      /* error responses */
};

/* Why a message was refused: the error code, a message, and the id if one was read. */
struct pdk_rpc_refusal {
	int code;
	char msg[200];
	json_t *id; /* a new reference, or NULL (the answer's id is then null) */
};

/*
 * Parse one message of `len` bytes (not NUL-terminated). At most `max`
 * bytes are accepted (0: PDK_RPC_MESSAGE_MAX). Returns 0 and fills *out,
 * or -1 and fills *why: PDK_RPC_PARSE_ERROR for bytes that are not JSON
 * (or are too large, or hold a duplicated key), PDK_RPC_INVALID_REQUEST for
 * JSON that is not a message (a batch among them). Never both.
 */
PDK_MUST_CHECK int pdk_rpc_parse(const char *data, size_t len, size_t max, struct pdk_rpc_msg *out,
				 struct pdk_rpc_refusal *why);

void pdk_rpc_msg_release(struct pdk_rpc_msg *m);
void pdk_rpc_refusal_release(struct pdk_rpc_refusal *why);

/* {"jsonrpc":"2.0","id":ID,"result":RESULT}: `result` taken, `id` borrowed. */
json_t *pdk_rpc_result(const json_t *id, json_t *result);

/*
 * {"jsonrpc":"2.0","id":ID,"error":{"code","message"[,"data"]}}: `id`
 * borrowed (NULL: null), `data` taken (NULL: none).
 */
json_t *pdk_rpc_error(const json_t *id, int code, const char *message, json_t *data);

/* {"jsonrpc":"2.0","method":METHOD[,"params":PARAMS]}: `params` taken (NULL: none). */
json_t *pdk_rpc_notification(const char *method, json_t *params);

/* {"jsonrpc":"2.0","id":ID,"method":METHOD[,"params":PARAMS]}: `id` borrowed, `params` taken. */
json_t *pdk_rpc_request(const json_t *id, const char *method, json_t *params);

#endif
