/*
 * gateway-internal.h - what the gateway's files share: one upstream MCP
 * server, run in a sandbox of its own or reached over Streamable HTTP, and
 * spoken to as a JSON-RPC client (upstream.c, remote.c), used by the
 * broker (broker.c).
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
 * Start server `s` (borrowed: outlives the upstream). A remote one (s->url)
 * is reached over Streamable HTTP (remote.c) with `headers` (its
 * configured "Name: value" lines, secrets resolved; copied), then
 * initialize, notifications/initialized and tools/list as below;
 * `ctl` and `profile_path` are not used for it. A stdio one: a sandbox
 * created through `ctl` with profile `profile_path` (a file the caller
 * wrote from pdk_gw_profile_yaml()), labelled {"gateway": "1",
 * "gateway_server": ID}, then its command streamed with stdin open, then
 * initialize, notifications/initialized and tools/list. `cbs` report what
 * follows. -EINVAL for a server with neither a command nor a url, or a
 * url that cannot be used (its ca_file cannot be read); the control errors
 * of a create that fails at once.
 */
PDK_MUST_CHECK int pdk__gw_up_start(struct pdk_ctl *ctl, struct event_base *base,
				    const struct pdk_gw_server *s, const char *profile_path,
				    char *const *headers, const struct pdk_gw_up_cbs *cbs,
				    void *ctx, struct pdk_gw_up **out, struct pdk_error **err);

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

/* ---- remote.c: the Streamable HTTP transport of a remote server ---- */

struct pdk__gw_remote;

/* What the transport tells upstream.c. Pointers are borrowed for the call. */
struct pdk__gw_remote_cbs {
	/* One JSON-RPC message the server sent (`n` bytes, at most PDK_GW_UP_MESSAGE_MAX). */
	void (*message)(void *ctx, const char *p, size_t n);
	/*
	 * The exchange that carried request `id` ended: `err` NULL when its
	 * answer was read (every message in it was given to `message`), else
	 * why the server refused it (EPROTO: "server ID: POST TARGET answered
	 * HTTP 500: 'start of the body'").
	 */
	void (*request_end)(void *ctx, json_int_t id, const struct pdk_error *err);
	/*
	 * The POST that carried request `id` (0: a notification or an answer)
	 * was answered 404 in a session: the server does not know it (any
	 * more). `current` when that session is the one the transport still
	 * holds; else a newer one was made since. No request_end follows.
	 */
	void (*session_lost)(void *ctx, json_int_t id, bool current);
	/*
	 * The transport broke: the server cannot be reached (its name does not
	 * resolve, the connection is refused, TLS failed: each named), it sent
	 * what is not HTTP, or a message past PDK_GW_UP_MESSAGE_MAX. Once;
	 * nothing is reported after.
	 */
	void (*failed)(void *ctx, const struct pdk_error *err);
};

/*
 * The transport of `s` (s->url; s borrowed for the call), sending
 * `headers` ("Name: value", copied) with each request. https is verified
 * against s->ca_file, or the system's store. NULL + *err (field "url" or
 * "servers.ID.ca_file") when the url or the trust store cannot be used.
 */
struct pdk__gw_remote *pdk__gw_remote_new(struct event_base *base, const struct pdk_gw_server *s,
					  char *const *headers,
					  const struct pdk__gw_remote_cbs *cbs, void *ctx,
					  struct pdk_error **err);
void pdk__gw_remote_set_log(struct pdk__gw_remote *r, const struct pdk_log *log);
/*
 * POST `msg` (borrowed). A request (a method and an integer id) gets its
 * request_end; the Mcp-Session-Id of initialize's answer goes with every
 * later request. -ENOTCONN once the transport ended.
 */
PDK_MUST_CHECK int pdk__gw_remote_send(struct pdk__gw_remote *r, const json_t *msg,
				       struct pdk_error **err);
/* The session is forgotten (and the GET stream closed): the next initialize makes a new one. */
void pdk__gw_remote_reset(struct pdk__gw_remote *r);
/* initialize was answered with `version`: sent as MCP-Protocol-Version; the GET stream opens. */
void pdk__gw_remote_initialized(struct pdk__gw_remote *r, const char *version);
/* Close the exchange of request `id` (its caller gave up): no request_end comes for it. */
void pdk__gw_remote_abort(struct pdk__gw_remote *r, json_int_t id);
/* End every exchange: nothing more is reported. */
void pdk__gw_remote_stop(struct pdk__gw_remote *r);
/* Stop, DELETE the session (not waited for: at most 2 s), and free. NULL-safe. */
void pdk__gw_remote_free(struct pdk__gw_remote *r);
/*
 * How many freed transports still end their sessions (in this process):
 * the gateway's end runs the loop until none is left, or 2 s passed.
 */
size_t pdk__gw_remote_ending(void);
/*
 * For the fuzz target (tests/fuzz/fuzz-gw-remote.c): `n` bytes at `p` taken
 * as the server's answer to a POST carrying request `id` (`init`: it is
 * initialize) or, with `stream`, to the GET of its own stream, read by the
 * code a connection's reads go through, in two reads (`cut` bytes, then
 * the rest), then the connection's end. What they lead to is reported to
 * the callbacks as it would be.
 */
void pdk__gw_remote_feed(struct pdk__gw_remote *r, bool stream, json_int_t id, bool init,
			 const char *p, size_t n, size_t cut);

#endif
