/*
 * gateway-internal.h - what the gateway's files share: one upstream MCP
 * server run in a sandbox of its own and spoken to as a JSON-RPC client
 * (upstream.c), used by the broker (broker.c).
 */
#ifndef PDK_GATEWAY_INTERNAL_H
#define PDK_GATEWAY_INTERNAL_H

#include "common.h"
#include "gateway.h"

struct event_base;

/* The largest message an upstream may send (a longer one ends it: it floods). */
#define PDK_GW_UP_MESSAGE_MAX (4u << 20)
/* What is kept of an upstream's stderr, for the errors that name why it failed. */
#define PDK_GW_UP_STDERR_KEEP 4096

struct pdk_gw_up;      /* one upstream (opaque) */
struct pdk_gw_up_call; /* one tools/call in flight to it (opaque) */

/* What the owner of an upstream is told. Every pointer is borrowed for the call. */
struct pdk_gw_up_cbs {
	/*
	 * It is initialized and listed its tools (an array of tool definitions,
	 * every page of tools/list); again after each notifications/tools/
	 * list_changed it sends.
	 */
	void (*tools)(void *ctx, struct pdk_gw_up *u, const json_t *tools);
	/*
	 * It could not start, or it ended or broke (crashed, closed its output,
	 * sent a message past PDK_GW_UP_MESSAGE_MAX or that is no JSON-RPC, did
	 * not answer initialize in time). The message names the server id and
	 * why: its exit status, the last lines of its stderr, a host the egress
	 * proxy refused it, a manifest path that does not exist. Every call in
	 * flight has had its result callback (ENOTCONN) before this. The
	 * upstream is not freed: its owner frees it (and may start it again).
	 */
	void (*failed)(void *ctx, struct pdk_gw_up *u, const struct pdk_error *err);
};

/*
 * Start stdio server `s` (borrowed: outlives the upstream): a sandbox
 * created through `ctl` with profile `profile_path` (a file the caller
 * wrote from pdk_gw_profile_yaml()), labelled {"gateway": "1",
 * "gateway_server": ID}, then its command streamed with stdin open, then
 * initialize, notifications/initialized and tools/list. `cbs` report what
 * follows. -EINVAL for a server without a command (a remote one); the
 * control errors of a create that fails at once.
 */
PDK_MUST_CHECK int pdk__gw_up_start(struct pdk_ctl *ctl, struct event_base *base,
				    const struct pdk_gw_server *s, const char *profile_path,
				    const struct pdk_gw_up_cbs *cbs, void *ctx,
				    struct pdk_gw_up **out, struct pdk_error **err);

/*
 * Where what is nobody's answer goes (borrowed; NULL: dropped): the
 * server's log notifications, the requests of it refused, a late answer,
 * a sandbox that could not be destroyed. Call it right after the start.
 */
void pdk__gw_up_set_log(struct pdk_gw_up *u, const struct pdk_log *log);

/* Its server's config (borrowed). */
const struct pdk_gw_server *pdk__gw_up_server(const struct pdk_gw_up *u);
/* Its sandbox's control id, or NULL before it runs. */
const char *pdk__gw_up_sandbox(const struct pdk_gw_up *u);
/* Whether it is initialized and not failed: calls may go to it. */
bool pdk__gw_up_ready(const struct pdk_gw_up *u);

/*
 * The answer to one call: `result` the upstream's tools/call result (an
 * object), or `err`: the upstream's JSON-RPC error (EPROTO, the message
 * its own), no answer within the server's timeout_ms (ETIMEDOUT), the
 * upstream gone (ENOTCONN). Called once, unless the call is cancelled.
 */
typedef void (*pdk_gw_up_result_cb)(void *ctx, const json_t *result, const struct pdk_error *err);
/* A notifications/progress of the call: its params with the caller's progress token put back. */
typedef void (*pdk_gw_up_progress_cb)(void *ctx, const json_t *params);

/*
 * Call `tool` (the upstream's own name) with `args` (an object, borrowed),
 * under a request id of the upstream's own (the downstream id never goes
 * upstream). `progress_token` (may be NULL): the downstream client's,
 * replaced upstream by one of the call's own and put back in each progress
 * notification given to `progress` (may be NULL). *out (may be NULL) is
 * the call, valid until `done`. -ENOTCONN when the upstream is not ready,
 * -EBUSY past 64 calls in flight to it.
 */
PDK_MUST_CHECK int pdk__gw_up_call(struct pdk_gw_up *u, const char *tool, const json_t *args,
				   const json_t *progress_token, pdk_gw_up_result_cb done,
				   pdk_gw_up_progress_cb progress, void *ctx,
				   struct pdk_gw_up_call **out, struct pdk_error **err);

/* The caller gave up: notifications/cancelled goes upstream, and `done` is not called. */
void pdk__gw_up_cancel(struct pdk_gw_up_call *c);

/*
 * Stop it: every call in flight is dropped without its callback, the
 * command is killed and the sandbox destroyed (not waited for: the control
 * object's shutdown waits). NULL-safe.
 */
void pdk__gw_up_free(struct pdk_gw_up *u);

#endif
