/*
 * daemon-internal.h - the front loop that `paddock mcp` (mcp-run.c) and
 * `paddock gateway` (gateway-run.c) share (front.c): an event loop with a
 * control object of its own in a private directory under the runtime
 * directory, SIGTERM/SIGINT to stop, SIGCHLD reaping, a tick once a second,
 * and the MCP server served either on stdio or on a Streamable HTTP
 * listener at /mcp with its guards.
 *
 * A run file embeds a struct pdk_front, sets its hooks, and calls, in this
 * order: pdk__front_open() (loop, directory, control object), its own set-up
 * (its struct pdk_mcp), pdk__front_start() (signals, the tick, the control
 * object's start), then pdk__front_listen() or pdk__front_stdio(), then
 * pdk__front_run(), and pdk__front_stop() in every case, even after a
 * failed open.
 */
#ifndef PDK_DAEMON_INTERNAL_H
#define PDK_DAEMON_INTERNAL_H

#include "common.h"
#include "base.h"
#include "control.h"
#include "http.h"
#include "mcp.h"

#include <event2/event.h>
#include <event2/http.h>

struct pdk_front {
	struct event_base *base;
	struct pdk_ctl *ctl;
	char *own_dir; /* RUNDIR/KIND/ID-PID, removed at the stop */
	const struct pdk_log *log;
	struct pdk_mcp_stdio *stdio;   /* the stdio transport, or NULL */
	struct pdk_mcp_http *mcp_http; /* the Streamable HTTP transport, or NULL */
	/* Hooks, set by the run file before pdk__front_start(); each gets `arg`. */
	void *arg;
	void (*tick)(void *arg);    /* each tick, after the control object's; NULL: none */
	void (*release)(void *arg); /* at the stop, after the clients, before the control
				     * object's shutdown; NULL: none */
	/*
	 * The principal of an HTTP request to /mcp, or NULL after answering it
	 * (401). NULL hook: every client is "loopback".
	 */
	const char *(*principal)(void *arg, struct evhttp_request *req);
	/* Private to front.c. */
	struct event *sig_term, *sig_int, *sig_chld, *tick_ev;
	struct evhttp *http;
	struct pdk_http_guards *guards;
	struct pdk_http_limits lim;
};

/* What pdk__front_open() needs (every member borrowed). */
struct pdk_front_opts {
	const char *kind;  /* the private directory's parent under run_dir: "mcp", "gateway" */
	const char *actor; /* the control object's actor in the audit records */
	const char *state_dir;
	const char *run_dir;
	char *const *envp;
	const struct pdk_log *log;
};

/* The loop, the private directory's name and the control object. 0, or negative + *err. */
PDK_MUST_CHECK int pdk__front_open(struct pdk_front *f, const struct pdk_front_opts *o,
				   struct pdk_error **err);

/* SIGPIPE ignored, the signal and tick events added, the control object started. */
void pdk__front_start(struct pdk_front *f);

/* What pdk__front_listen() serves (every member borrowed). */
struct pdk_front_listen {
	const char *listen;  /* "HOST:PORT" */
	struct pdk_mcp *mcp; /* the server the endpoint serves */
	size_t max_message;  /* the largest body (0: PDK_RPC_MESSAGE_MAX) */
	/*
	 * SECURITY: non-NULL: the clients bring no credentials, so the address
	 * must be loopback (else -EINVAL, "--listen ADDR: " followed by this
	 * reason) and Host and Origin are checked against DNS rebinding. NULL:
	 * every client brings credentials (the principal hook checks them) and
	 * any address is served.
	 */
	const char *loopback_only;
	const char *what; /* the log line's name of the endpoint: "MCP", "the MCP gateway" */
};

/* The Streamable HTTP endpoint at http://LISTEN/mcp. 0, or negative + *err. */
PDK_MUST_CHECK int pdk__front_listen(struct pdk_front *f, const struct pdk_front_listen *l,
				     struct pdk_error **err);

/* The stdio transport of `m` for `identity`: the loop ends when the client closes stdin. */
void pdk__front_stdio(struct pdk_front *f, struct pdk_mcp *m, const char *identity);

/* Dispatch until a stop signal or the stdio client's end. 0, or -EIO + *err. */
PDK_MUST_CHECK int pdk__front_run(struct pdk_front *f, struct pdk_error **err);

/*
 * The clients freed, the release hook called, every sandbox destroyed and
 * waited for, the loop freed, the private directory removed. Safe on a
 * front that did not open or start.
 */
void pdk__front_stop(struct pdk_front *f);

#endif
