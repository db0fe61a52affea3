/*
 * supervisor-internal.h - state shared by supervisor.c (setup, loop,
 * budgets, execs) and supervisor-files.c (the confined file operations).
 */
#ifndef PDK_SUPERVISOR_INTERNAL_H
#define PDK_SUPERVISOR_INTERNAL_H

#include "common.h"
#include "base.h"
#include "engine.h"
#include "policy.h"
#include "telemetry.h"
#include "workspace.h"

#include <jansson.h>

/* One exec, from its request until its exit was reported. */
struct sv_exec {
	uint64_t id;
	json_int_t req;    /* the request to answer once it started (0: answered) */
	pid_t pid;         /* inside the sandbox */
	uint64_t start_ns; /* CLOCK_MONOTONIC */
	uint64_t deadline; /* CLOCK_MONOTONIC ns; 0 = none */
	bool timed_out;
	bool killed;    /* a signal request ended it */
	bool warm;      /* a pool member's warm-up (the daemon's): not a command of the budget */
	int pty_master; /* pty: sent with the reply, then closed here; else -1 */
	char **argv;    /* for the process.exec event without exec tracing */
};

struct pdk_supervisor {
	char id[37];
	const struct pdk_settings *settings; /* the front end's (borrowed) */
	const struct pdk_log *log;           /* the front end's (borrowed) */
	char *run_dir;                       /* RUNDIR/sb/<id> */
	char *state_dir;
	json_t *spec;
	struct pdk_policy *policy;
	char **env;        /* the sandbox's base environment */
	char *workspace;   /* host path, or NULL */
	char *private_ws;  /* STATE/sandboxes/<id>: made for a spec without a workspace */
	struct pdk_ws *ws; /* overlay: the change set */
	struct pdk_events *events;
	struct pdk_sandbox *sb;
	struct pdk_sandbox_config cfg;
	int root_fd; /* O_PATH of /proc/<init>/root */
	uid_t uid;
	gid_t gid;
	int listen_fd;
	int conn_fd;
	int sig_fd;
	/* Time and budgets. */
	uint64_t created_real_ns;
	uint64_t created_ns;   /* CLOCK_MONOTONIC */
	uint64_t paused_ns;    /* total paused so far, not counting the current pause */
	uint64_t paused_since; /* 0 when running */
	uint64_t wall_limit_ns;
	uint64_t cpu_limit_ns;
	uint64_t commands_limit;
	uint64_t commands;
	const char *ended;            /* the reason, once ended */
	json_int_t destroy_requested; /* the destroy request's req; -1: SIGTERM */
	struct sv_exec *execs;
	size_t n_execs;
	/* Snapshots by name: index i is change-set snapshot number i + 1. */
	char **snap_names;
	uint64_t cpu_base_ns; /* CPU time of the inits before the last restart */
	/* {"ev":"events"} nudges: the spool's size when last told, and when. */
	int spool_fd; /* O_PATH of events.jsonl, for fstat() */
	off_t spool_told;
	uint64_t nudge_ns;
};

/* Reply helpers (supervisor.c). Each sends on the current connection, if any. */
void pdk__sv_send(struct pdk_supervisor *s, json_t *msg, const int *fds, size_t nfds);
void pdk__sv_reply_error(struct pdk_supervisor *s, json_int_t req, const char *code,
			 const char *field, const struct pdk_error *err);

/*
 * openat2() of `path` beneath the sandbox's root (RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS; O_CLOEXEC, and O_NOCTTY unless O_PATH, added).
 * The fd, or -errno.
 */
int pdk__sv_open_in(struct pdk_supervisor *s, const char *path, int flags, mode_t mode);

/*
 * File operations, confined to the sandbox's root (supervisor-files.c):
 * `op` is one of open, stat, list, delete, mkdir. Returns true when it
 * handled the op (and replied).
 */
bool pdk__sv_file_op(struct pdk_supervisor *s, const char *op, json_int_t req, json_t *msg);

/*
 * The sandbox's tmpfs directories (/tmp, HOME's home...) outlive an init
 * restart: carry_out copies their trees (not crossing mount points) into
 * RUNDIR/sb/ID/carry before the old sandbox goes; carry_in copies them into
 * the new sandbox (owned by its user) and removes the stage. 0 or negative
 * + *err; a failed carry_out leaves no stage.
 */
PDK_MUST_CHECK int pdk__sv_carry_out(struct pdk_supervisor *s, struct pdk_error **err);
PDK_MUST_CHECK int pdk__sv_carry_in(struct pdk_supervisor *s, struct pdk_error **err);

#endif
