/*
 * e2b-internal.h - what the E2B front door's files share: the object, one
 * envd request's context, and the Connect call a service method answers.
 *
 * How a Connect service is added: docs/internals/e2b.md.
 */
#ifndef PDK_E2B_INTERNAL_H
#define PDK_E2B_INTERNAL_H

#include "common.h"
#include "base.h"
#include "control.h"
#include "e2b.h"
#include "http.h"

#include <event2/keyvalq_struct.h>
#include <sys/queue.h>

struct pdk__e2b_call;

struct pdk_e2b {
	struct pdk_ctl *ctl;
	struct event_base *base;
	uint64_t max_body;
	const struct pdk_log *log;
	char *domain; /* E2B's sandbox domain, or NULL */
	bool closing;
	LIST_HEAD(pdk__e2b_calls, pdk__e2b_call) calls; /* every Connect call not yet finished */
	struct pdk__e2b_interp *interps; /* code interpreters starting or running (envd-port.c) */
	struct evdns_base *dns;          /* numeric addresses only (envd-port.c), or NULL */
};

/* Who an envd request is for and from (envd.c). Strings owned by the context. */
struct pdk__e2b_envd {
	char *sandbox; /* E2b-Sandbox-Id, checked against the access token */
	char *user;    /* from Authorization: Basic (NULL: the sandbox's default user) */
};

void pdk__e2b_envd_release(struct pdk__e2b_envd *v);

/* ---- Connect services (connect.c) ---- */

/* A method's handler: it must finish `call` exactly once (pdk__e2b_reply/fail/end). */
typedef void (*pdk__e2b_method_fn)(struct pdk__e2b_call *call);

struct pdk__e2b_method {
	const char *name; /* "Stat" */
	bool streaming;   /* server-streaming (one request message, a stream of answers) */
	pdk__e2b_method_fn fn;
};

struct pdk__e2b_service {
	const char *name; /* "filesystem.Filesystem" */
	const struct pdk__e2b_method *methods;
	size_t n;
};

/*
 * One Connect call, from its request to its end. The connect layer owns it:
 * it is freed once the handler finished it AND its answer is done (sent,
 * refused by the deadline, or its client gone).
 *
 * - `msg` is the request message (borrowed by the handler until the end).
 * - `on_cancel` (set by the handler, may be NULL) runs once when the client
 *   goes away, the deadline passes or the daemon shuts down: the handler
 *   stops its work, and must still finish the call (its answer is dropped).
 * - `keepalive` (set by a streaming handler, taken) is sent when the stream
 *   was idle for PDK__E2B_KEEPALIVE_S seconds (envd's KeepAlive event).
 */
struct pdk__e2b_call {
	struct pdk_e2b *e;
	struct evhttp_request *req; /* NULL once answered (unary) or ended (stream) */
	const struct pdk__e2b_method *method;
	struct pdk__e2b_envd who;
	json_t *msg;
	void *svc; /* the handler's own state */
	void (*on_cancel)(struct pdk__e2b_call *call);
	json_t *keepalive;
	/* The connect layer's own. */
	struct pdk_http_stream stream;
	struct event *deadline;
	uint64_t idle_s;
	uint64_t keepalive_s; /* Keepalive-Ping-Interval, else PDK__E2B_KEEPALIVE_S */
	bool finished, cancelled;
	bool sent; /* the handler sent its first message (the start): keepalives may follow */
	bool busy; /* in its handler or its on_cancel: not freed there */
	LIST_ENTRY(pdk__e2b_call) link;
};

#define PDK__E2B_KEEPALIVE_S 30

/*
 * Serve the Connect request `req` for `who` (taken) on `path`
 * ("/SERVICE/METHOD"): the method is found, the headers and body checked,
 * the handler called. Errors are answered as Connect errors.
 */
void pdk__e2b_connect_serve(struct pdk_e2b *e, struct evhttp_request *req, const char *path,
			    struct pdk__e2b_envd *who);

/* Refuse a Connect request before its call exists: the error object and its code's status. */
void pdk__e2b_connect_refuse(struct evhttp_request *req, const struct pdk_error *err);

/* Finish a unary call with its answer (taken). */
void pdk__e2b_reply(struct pdk__e2b_call *call, json_t *msg);
/* Finish a call with an error: unary, the Connect error; streaming, the end-stream frame. */
void pdk__e2b_fail(struct pdk__e2b_call *call, const struct pdk_error *err);
/* Send one message (taken) on a streaming call; dropped when the client is gone. */
void pdk__e2b_send(struct pdk__e2b_call *call, json_t *msg);
/* Finish a streaming call: the end-stream frame, with `err` (NULL: success). */
void pdk__e2b_end(struct pdk__e2b_call *call, const struct pdk_error *err);
/* Whether the call's client is still there to answer. */
bool pdk__e2b_live(const struct pdk__e2b_call *call);

/* Every Connect call's keepalive pass (tick) and shutdown. */
void pdk__e2b_connect_tick(struct pdk_e2b *e);
void pdk__e2b_connect_close_all(struct pdk_e2b *e);

/* ---- the services (one file each) ---- */
extern const struct pdk__e2b_service pdk__e2b_svc_filesystem; /* envd-fs.c */
extern const struct pdk__e2b_service pdk__e2b_svc_process;    /* envd-proc.c */

/* The call's sandbox, live (running or paused); NULL after failing the call. */
struct pdk_ctl_sb *pdk__e2b_call_sb(struct pdk__e2b_call *call);
/*
 * The message's string `field` as a path in the sandbox (a new string: a
 * relative one is joined to the workspace); NULL after failing the call.
 */
char *pdk__e2b_call_path(struct pdk__e2b_call *call, struct pdk_ctl_sb *sb, const char *field);
/* envd's EntryInfo of `path` from a supervisor stat document (type, size, mode, mtime_ns). */
json_t *pdk__e2b_entry_json(const char *path, const json_t *doc);
/* filesystem.Filesystem/WatchDir (envd-watch.c). */
void pdk__e2b_fs_watch(struct pdk__e2b_call *call);

/* ---- envd (envd.c) ---- */

/* A request that carries E2b-Sandbox-Id. */
void pdk__e2b_envd(struct pdk_e2b *e, struct evhttp_request *req);
/* GET and POST /files of `sandbox` (its access token checked) (envd-files.c). */
void pdk__e2b_files(struct pdk_e2b *e, struct evhttp_request *req, const char *sandbox);

/* ---- other ports of a sandbox (envd-port.c) ---- */

/*
 * Relay `req` (authenticated for `sandbox`) to `port` on the sandbox's
 * loopback through its port forwarding; the code interpreter's port starts
 * paddock's interpreter first when it does not run. A 200 answer is
 * streamed as it comes, others are passed on whole; nothing listening is
 * 502.
 */
void pdk__e2b_port(struct pdk_e2b *e, struct evhttp_request *req, const char *sandbox,
		   uint16_t port);
/*
 * Forget the interpreters (after the control object's end, which ended
 * their watches) and the relays' DNS base.
 */
void pdk__e2b_interps_free(struct pdk_e2b *e);

/* ---- the control plane (plane.c, plane-render.c, plane-sandbox.c, plane-list.c) ---- */

/* The labels E2B's front door keeps on a sandbox it created (never a caller's metadata). */
#define PDK__E2B_LABEL_KEY      "e2b.key"      /* the name of the API key that created it */
#define PDK__E2B_LABEL_TEMPLATE "e2b.template" /* the templateID it was created from */
#define PDK__E2B_LABEL_PREFIX   "e2b."

/* One control-plane request while its handler runs (freed when it returns). */
struct pdk__e2b_req {
	struct pdk_e2b *e;
	struct evhttp_request *req;
	enum evhttp_cmd_type method;
	char *key;     /* the API key's name */
	char *segs[5]; /* path segments, "v2" included */
	size_t nsegs;
	struct evkeyvalq query;
	char *body;
	size_t body_len;
};

/* A JSON object body (at most 1 MiB) in *out; -1 after answering 400 or 413. */
int pdk__e2b_json_body(struct pdk__e2b_req *r, json_t **out);
/* A query parameter's value, or NULL. */
const char *pdk__e2b_query(struct pdk__e2b_req *r, const char *key);
/* Record the call in the audit chain: e2b.request with the route, the key and the sandbox. */
void pdk__e2b_record(struct pdk__e2b_req *r, const char *route, const char *sandbox);

/*
 * The view of sandbox `id` when the caller's key created it and it is
 * running or paused; else -1 after answering 404 (another key's sandbox is
 * answered as one that does not exist).
 */
int pdk__e2b_owned(struct pdk__e2b_req *r, const char *id, struct pdk_ctl_view *v);

/* E2B's Sandbox (a create's or connect's answer) of `v` with its envd access token. */
json_t *pdk__e2b_sandbox_json(const struct pdk_ctl_view *v, const char *token, const char *domain);
/* E2B's SandboxDetail / ListedSandbox of `v`. */
json_t *pdk__e2b_detail_json(const struct pdk_ctl_view *v);
/* E2B's state of a paddock state: "running", "paused", or NULL (not E2B-visible). */
const char *pdk__e2b_state(const char *state);

void pdk__e2b_route_create(struct pdk__e2b_req *r);
void pdk__e2b_route_connect(struct pdk__e2b_req *r, const char *id, bool resume_only);
void pdk__e2b_route_get(struct pdk__e2b_req *r, const char *id);
void pdk__e2b_route_kill(struct pdk__e2b_req *r, const char *id);
void pdk__e2b_route_timeout(struct pdk__e2b_req *r, const char *id);
void pdk__e2b_route_pause(struct pdk__e2b_req *r, const char *id);
void pdk__e2b_route_list(struct pdk__e2b_req *r);

/* ---- the control plane's dispatch (plane.c) ---- */

/* A request E2B's control plane serves (not under /v1/, no E2b-Sandbox-Id). */
void pdk__e2b_plane(struct pdk_e2b *e, struct evhttp_request *req);

/*
 * E2B's error body {"code": HTTP status, "message"} for control error `err`
 * (the one mapping: ENOENT 404, EINVAL 400, EEXIST/EALREADY/EBUSY 409,
 * EDQUOT 429, E2BIG 413, EACCES/EPERM 403, ENOTCONN 503, else 500).
 */
void pdk__e2b_plane_error(struct evhttp_request *req, const struct pdk_error *err);
/* E2B's error body with `code` and a message. */
void pdk__e2b_plane_fail(struct evhttp_request *req, int code, const char *fmt, ...)
	PDK_PRINTF(3, 4);

#endif
