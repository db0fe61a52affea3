/*
 * daemon-internal.h - what the daemon's files share: the per-sandbox
 * object, the control-socket calls and the HTTP reply helpers.
 */
#ifndef PDK_DAEMON_INTERNAL_H
#define PDK_DAEMON_INTERNAL_H

#include "common.h"
#include "control.h"
#include "daemon.h"
#include "request.h"

#include <event2/event.h>
#include <event2/http.h>

/* A control call's answer: `reply` NULL when the connection was lost (borrowed; fds owned). */
typedef void (*pdk_sb_reply_cb)(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx);

struct pdk_sb_call {
	struct pdk_sb_call *next;
	uint64_t req;
	pdk_sb_reply_cb cb;
	void *ctx;
};

/* An HTTP request waiting for the sandbox to be built (create, and creates with its key). */
struct pdk_sb_waiter {
	struct pdk_sb_waiter *next;
	struct evhttp_request *req;
	int code; /* 201 for the first, 200 for the same idempotency key */
};

struct pdk_exec;

struct pdk_sb {
	struct pdk_sb *next;
	struct pdk_daemon *d;
	struct pdk_store_sandbox row; /* what the store holds (kept in step) */
	json_t *labels;               /* row.labels parsed */
	json_t *limits;               /* the spec's overrides.limits, or an empty object */
	json_t *status;               /* the supervisor's last status answer, or NULL */
	pid_t init_pid;
	int ctl_fd, ready_fd, pidfd;
	struct event *ctl_ev, *ready_ev;
	char ready_buf[4096];
	size_t ready_len;
	uint64_t next_req;
	struct pdk_sb_call *calls;
	struct pdk_sb_waiter *waiters;
	struct pdk_exec *execs;
	uint64_t last_active_ns; /* CLOCK_MONOTONIC of the last API use */
	char *end_reason;        /* why it is being destroyed */
	unsigned token_ops;      /* the create token's operations (0: all) */
	uint64_t token_ttl_s;    /* its lifetime (0: PDK_REQ_TOKEN_TTL_MAX) */
	bool destroying;
	struct evhttp_request *destroy_req; /* a DELETE waiting for the answer */
	bool first_exec_pending; /* claimed from a pool, its first exec not answered yet */
	bool warming;            /* a pool member's warm-up exec runs: not claimable yet */
	json_t *warm_exec;       /* that exec's id, once started */
	struct event *ingest_ev; /* a spool ingest held back while an exec runs (sandboxes.c) */
	bool dirty;              /* row changed in memory, saved by the next ingest pass */
};

/* ---- sandboxes.c ---- */
struct pdk_sb *pdk__sb_find(struct pdk_daemon *d, const char *id);
/* Start a new sandbox for a validated create request; replies to `req` when ready. */
void pdk__sb_create(struct pdk_daemon *d, struct evhttp_request *req, struct pdk_req_create *cr,
		    const char *header_key);
/* Send `op` (stolen) with fds (borrowed); `cb` gets the answer. -errno when it cannot be sent. */
PDK_MUST_CHECK int pdk__sb_call(struct pdk_sb *sb, json_t *op, const int *fds, size_t nfds,
				pdk_sb_reply_cb cb, void *ctx);
/* Destroy: ask the supervisor, then forget the sandbox. `req` (may be NULL) gets the answer. */
void pdk__sb_destroy(struct pdk_sb *sb, const char *reason, struct evhttp_request *req);
/* The API's Sandbox object (token: NULL or a fresh token to include). */
json_t *pdk__sb_json(struct pdk_sb *sb, const char *token);
/* Re-adopt every stored sandbox at start. */
void pdk__sb_adopt_all(struct pdk_daemon *d);
/*
 * Warm pools. pdk__pools_tick: the timer's pass (skipped while a refill is
 * held back after a claim). pdk__pools_now: a pass at once (PUT /v1/pools).
 * pdk__sb_first_exec_done: a claimed sandbox's first exec answered; the held
 * refill starts when no claimed sandbox waits for its first exec any more.
 */
void pdk__pools_tick(struct pdk_daemon *d);
void pdk__pools_now(struct pdk_daemon *d);
void pdk__sb_first_exec_done(struct pdk_sb *sb);
/* Once a second: TTL, idle timeout, status refresh, pools. */
void pdk__sb_tick(struct pdk_daemon *d);
/* Read new complete lines of the sandbox's spool into the audit store. */
void pdk__sb_ingest(struct pdk_sb *sb);
/* An exec of `sb` answered: a held-back ingest runs right after the answer is written. */
void pdk__sb_ingest_soon(struct pdk_sb *sb);
/* Charge output bytes / a command to the budget; false (and a limit.exceeded event) when over. */
bool pdk__sb_budget_ok(struct pdk_sb *sb, const char **what);
void pdk__sb_charge(struct pdk_sb *sb, uint64_t output_bytes, uint64_t commands);
/*
 * The same for an exec: the row is saved after the exec's answer is written
 * (with its ingest pass: pdk__sb_ingest_soon), not in the middle of the exec.
 */
void pdk__sb_charge_exec(struct pdk_sb *sb, uint64_t output_bytes, uint64_t commands);
void pdk__sb_save(struct pdk_sb *sb);
void pdk__sb_free_all(struct pdk_daemon *d);
/* The kept API object of an ended sandbox (new reference), or NULL. */
json_t *pdk__sb_ended(struct pdk_daemon *d, const char *id);
/* The number of sandboxes known. */
size_t pdk__sb_count(struct pdk_daemon *d);

/* ---- exec.c ---- */
void pdk__exec_start(struct pdk_sb *sb, struct evhttp_request *req, struct pdk_req_exec *er,
		     bool stream);
/* An unsolicited {"ev":"exit"} from the supervisor. */
void pdk__exec_exited(struct pdk_sb *sb, json_t *ev);
/* The control connection is gone: every exec of the sandbox ends. */
void pdk__exec_abort_all(struct pdk_sb *sb);
/* POST .../exec/{exec_id}/stdin: queue `len` bytes for the command's stdin or pty; `eof`: then
 * close stdin (a pty gets ^D). Answers req. */
void pdk__exec_stdin(struct pdk_sb *sb, struct evhttp_request *req, uint64_t exec_id,
		     const char *data, size_t len, bool eof);
/* POST .../exec/{exec_id}/resize: TIOCSWINSZ on the pty. Answers req. */
void pdk__exec_resize(struct pdk_sb *sb, struct evhttp_request *req, uint64_t exec_id,
		      uint64_t cols, uint64_t rows);

/* ---- http.c ---- */
void pdk__http_json(struct evhttp_request *req, int code, json_t *body /* stolen */);
void pdk__http_error(struct evhttp_request *req, int code, const char *ecode, const char *field,
		     const char *fmt, ...) PDK_PRINTF(5, 6);
/* Map a supervisor error answer to an HTTP error. */
void pdk__http_svc_error(struct evhttp_request *req, json_t *reply);
/* errno-style status -> HTTP status and code. */
void pdk__http_status_error(struct evhttp_request *req, int status, const char *msg);

/* ---- events (ingest.c) ---- */
void pdk__sse_subscribe(struct pdk_daemon *d, struct evhttp_request *req, const char *sandbox,
			const char *session, const char *kind, uint64_t since);

/* ---- long responses (SSE): ingest.c ---- */
struct pdk_stream {
	struct evhttp_request *req; /* NULL once the client went away */
	bool dead;
	/* Called (last thing) when the client goes away; may be NULL. */
	void (*on_close)(void *arg);
	void *on_close_arg;
};
/* Start a text/event-stream answer on `req`; the client's going away sets s->dead. */
void pdk__stream_start(struct pdk_stream *s, struct evhttp_request *req);
/* One SSE event (`id` may be NULL); data stolen. No-op once dead. */
void pdk__stream_send(struct pdk_stream *s, const char *id, const char *event, json_t *data);
/* End the answer (or just forget it when the client is gone). */
void pdk__stream_end(struct pdk_stream *s);
#endif
