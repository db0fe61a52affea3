/*
 * daemon.h - `paddock serve`: the control plane's process-wide state and the
 * entry point (docs/daemon.md, docs/internals/daemon.md).
 *
 * One thread, one libevent loop. The daemon never blocks its loop on one
 * sandbox: supervisors are started with fork+setsid+exec and answer on
 * their ready pipe and control socket, both watched by the loop.
 */
#ifndef PDK_DAEMON_H
#define PDK_DAEMON_H

#include "common.h"
#include "base.h"
#include "control.h"
#include "request.h"

#include <sys/types.h>

struct event_base;
struct event;
struct evhttp;
struct evhttp_request;
struct pdk_store;
struct pdk_audit;
struct pdk_sb;
struct pdk_sse;

/* What `paddock serve` was asked for (cmd-serve.c fills it). */
struct pdk_daemon_opts {
	const char *socket_path; /* NULL: RUNDIR/paddock.sock */
	const char *listen;      /* "HOST:PORT" or NULL */
	const char *state_dir;   /* the state directory (base/paths.h) */
	const char *run_dir;     /* the runtime directory (base/paths.h) */
	char **pools;            /* "PROFILE=N" strings, may be NULL */
	uint64_t max_body;       /* 0: 64 MiB */
	uint64_t retention_s;    /* how long ended sandboxes stay visible */
	bool kill_on_exit;
	bool quiet;
};

struct pdk_daemon {
	struct event_base *base;
	struct evhttp *http_unix, *http_tcp;
	struct event *sig_term, *sig_int, *sig_chld, *tick;
	struct event *refill; /* the held-back pool pass after a claim (sandboxes.c) */
	struct pdk_store *store;
	struct pdk_audit *audit;
	unsigned char key[PDK_TOKEN_KEY_LEN];
	char *state_dir, *run_dir, *socket_path;
	int exe_fd;  /* /proc/self/exe, opened first: the supervisor binary */
	int lock_fd; /* STATE/daemon.lock, flock'd for the daemon's life */
	uint64_t max_body;
	uint64_t retention_ns; /* ended sandboxes are kept that long (0: not kept) */
	bool kill_on_exit;
	bool quiet;
	bool stopping; /* shutdown: no timer work, no pool refill */
	uid_t uid;
	struct pdk_sb *sandboxes; /* every sandbox this daemon knows */
	struct pdk_sse *subscribers;
	uint64_t event_seq;  /* the daemon stream's own sequence */
	uint64_t fanout_seq; /* the last audit seq handed to subscribers */
	int exit_status;
};

/* Run the daemon until SIGTERM/SIGINT. 0, or negative + *err when it could not start. */
PDK_MUST_CHECK int pdk_daemon_serve(const struct pdk_daemon_opts *opts, struct pdk_error **err);

/* ---- shared between the daemon's files (pdk__ = internal) ---- */

/* Emit one of the daemon's own events into the audit store (and so to subscribers). */
void pdk__daemon_event(struct pdk_daemon *d, const char *sandbox, json_t *labels, const char *kind,
		       json_t *attrs);
/* Hand audit records after d->fanout_seq to the SSE subscribers. */
void pdk__daemon_fanout(struct pdk_daemon *d);
/* Route one HTTP request (http.c). */
void pdk__http_handle(struct pdk_daemon *d, struct evhttp_request *req, bool unix_peer);
/* Finish every open event stream (shutdown). */
void pdk__sse_close_all(struct pdk_daemon *d);

#endif
