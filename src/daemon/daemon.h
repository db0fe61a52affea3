/*
 * daemon.h - `paddock serve` (docs/daemon.md, docs/internals/daemon.md):
 * one thread, one libevent loop, the control object (control.h) and the
 * REST API (api.h) on a unix socket and optionally TCP, signals, the
 * once-a-second tick, shutdown. It decides nothing itself: the control
 * layer does, the API translates.
 *
 * The daemon never blocks its loop on one sandbox: the control layer
 * starts supervisors with pdk_proc_clone()+setsid+execveat, and they answer
 * on their ready pipe and control socket, both watched by the loop.
 */
#ifndef PDK_DAEMON_H
#define PDK_DAEMON_H

#include "common.h"
#include "base.h"

/* What `paddock serve` was asked for (cmd-serve.c fills it; every member borrowed). */
struct pdk_daemon_opts {
	const char *socket_path; /* NULL: RUNDIR/paddock.sock */
	const char *listen;      /* "HOST:PORT" or NULL */
	const char *state_dir;   /* the state directory (base/paths.h) */
	const char *run_dir;     /* the runtime directory (base/paths.h) */
	char **pools;            /* "PROFILE=N" strings, may be NULL */
	uint64_t max_body;       /* 0: 64 MiB */
	const char *e2b_domain;  /* E2B's sandbox domain (--e2b-domain), or NULL */
	/*
	 * The TCP listener's connection budget (docs/daemon.md, "Connections"):
	 * connections at once (0: PDK_DAEMON_MAX_CONNS, lowered to fit the
	 * descriptor limit), from one address (0: PDK_DAEMON_MAX_PER_PEER), and
	 * how long a request head may take (0: PDK_DAEMON_HEAD_TIMEOUT_MS).
	 */
	unsigned max_conns, max_per_peer;
	uint64_t head_timeout_ms;
	uint64_t retention_s; /* how long ended sandboxes stay visible */
	unsigned exec_starts; /* commands starting at once (pdk_ctl_opts.exec_starts) */
	bool kill_on_exit;
	char *const *envp;         /* the environment supervisors are started with */
	const struct pdk_log *log; /* where the daemon's messages go (NULL: nowhere) */
};

#define PDK_DAEMON_MAX_CONNS       1024
#define PDK_DAEMON_MAX_PER_PEER    64
#define PDK_DAEMON_HEAD_TIMEOUT_MS 10000
/* The unix socket's own budget: local admins are served while TCP is full. */
#define PDK_DAEMON_UNIX_CONNS 256

/*
 * Run the daemon until SIGTERM/SIGINT. 0 after a clean shutdown, or
 * negative + *err when it could not start (another daemon holds the state
 * directory, the socket cannot be bound, a bad --pool or --listen, a
 * --max-conns the descriptor limit cannot hold).
 */
PDK_MUST_CHECK int pdk_daemon_serve(const struct pdk_daemon_opts *opts, struct pdk_error **err);

/* What `paddock mcp` was asked for (cmd-mcp.c fills it; every member borrowed). */
struct pdk_daemon_mcp_opts {
	const char *state_dir;       /* the state directory (base/paths.h) */
	const char *run_dir;         /* the runtime directory (base/paths.h) */
	const char *profile;         /* sandboxes made without a profile (NULL: "default") */
	uint64_t ttl_s;              /* their TTL (0: 1 hour) */
	const char *workspace;       /* the host directory they overlay (NULL: a private one) */
	const char *listen;          /* "HOST:PORT" (loopback): Streamable HTTP instead of stdio */
	size_t max_message;          /* the largest message (0: 4 MiB) */
	uint64_t approval_timeout_s; /* how long an approval request waits (0: 5 minutes) */
	bool no_elicit_approvals;    /* approvals in the queue only, never asked in band */
	bool conformance_fixtures;   /* also serve the conformance suite's fixtures (tests only) */
	char *const *envp;           /* the environment supervisors are started with */
	const struct pdk_log *log;   /* where messages go (NULL: nowhere) */
};

/*
 * Serve MCP on stdin and stdout until the client closes stdin (or
 * SIGTERM/SIGINT), with a control object of its own on the state
 * directory (docs/mcp.md, "What runs"); then destroy every sandbox it made
 * and wait for their supervisors. 0, or negative + *err when it could not
 * start.
 */
PDK_MUST_CHECK int pdk_daemon_mcp(const struct pdk_daemon_mcp_opts *opts, struct pdk_error **err);

struct pdk_gw_config;

/* What `paddock gateway` was asked for (cmd-gateway.c fills it; every member borrowed). */
struct pdk_daemon_gateway_opts {
	const struct pdk_gw_config *cfg; /* the config, loaded and checked */
	const char *state_dir;           /* the state directory (base/paths.h) */
	const char *run_dir;             /* the runtime directory (base/paths.h) */
	const char *listen;              /* "HOST:PORT": Streamable HTTP at /mcp instead of stdio */
	const char *principal;           /* the stdio client's principal (NULL: "local") */
	/* Secret values to redact: NAME, VALUE, ... NULL-terminated (PADDOCK_SECRET_NAME). */
	char *const *secrets;
	size_t max_message;        /* the largest message (0: 4 MiB) */
	char *const *envp;         /* the environment supervisors are started with */
	const struct pdk_log *log; /* where messages go (NULL: nowhere) */
};

/*
 * Serve the MCP gateway (docs/gateway.md, "Running") on stdin and stdout
 * until the client closes stdin, or on Streamable HTTP at
 * http://LISTEN/mcp, until SIGTERM/SIGINT; with a control object of its
 * own on the state directory. Every upstream runs in a sandbox of its own;
 * at the end each is destroyed and waited for. 0, or negative + *err when
 * it could not start (-EINVAL: the config asks what cannot be served, a
 * --listen beyond loopback without principals).
 */
PDK_MUST_CHECK int pdk_daemon_gateway(const struct pdk_daemon_gateway_opts *opts,
				      struct pdk_error **err);

#endif
