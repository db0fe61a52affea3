/*
 * supervisor-internal.h - the state the supervisor's files share:
 * supervisor.c (setup and teardown), supervisor-spec.c (reading the
 * daemon's spec), supervisor-loop.c (the poll loop, budgets, status,
 * pause), supervisor-exec.c (execs: start, exits, signals, ptys),
 * supervisor-ws.c (diff, snapshot, rollback, commit and the init restart
 * around them) and supervisor-files.c (the confined file operations and the
 * carry of /tmp across a restart).
 */
#ifndef PDK_SUPERVISOR_INTERNAL_H
#define PDK_SUPERVISOR_INTERNAL_H

#include "common.h"
#include "base.h"
#include "session.h"

#include <jansson.h>

#define PDK_SV_NSEC_PER_MS 1000000ULL

/* One exec, from its request until its exit was reported. */
struct pdk_sv_exec {
	uint64_t id;
	json_int_t req;    /* the request to answer once it started (0: answered) */
	pid_t pid;         /* inside the sandbox */
	uint64_t start_ns; /* CLOCK_MONOTONIC */
	uint64_t deadline; /* CLOCK_MONOTONIC ns; 0 = none */
	uint64_t oom_base; /* the sandbox cgroup's OOM kill count when it started */
	uint64_t deny_seq; /* the sandbox's count of network refusals when it started */
	bool timed_out;
	bool killed;    /* a signal request ended it */
	bool warm;      /* a pool member's warm-up (the daemon's): not a command of the budget */
	int pty_master; /* pty: sent with the reply, then closed here; else -1 */
	char **argv;    /* for the process.exec event without exec tracing */
	char *cwd;      /* its working directory, for the error when it is missing */
};

/*
 * The daemon's spec as the supervisor takes it (supervisor-spec.c): the
 * session's options, and the budgets the supervisor keeps itself. Strings
 * are borrowed from the spec's JSON; the lists are owned.
 */
struct pdk_sv_spec {
	struct pdk_session_opts session; /* profile, overrides, env, labels (the rest: setup) */
	char **env;                      /* "K=V" of the spec's env object */
	char **allow;                    /* overrides.network.allow */
	const char *run_dir;             /* NULL: the settings' runtime directory */
	const char *state_dir;           /* NULL: the settings' */
	uint64_t cpu_time_ms;            /* limits.cpu_time; 0: none */
	uint64_t commands;               /* limits.commands; 0: none */
};

struct pdk_supervisor {
	char id[37];
	const struct pdk_settings *settings; /* the front end's (borrowed) */
	const struct pdk_log *log;           /* the front end's (borrowed) */
	char *run_dir;                       /* RUNDIR/sb/<id> */
	char *spool;                         /* RUNDIR/sb/<id>/events.jsonl */
	char *state_dir;
	json_t *spec_json;
	struct pdk_sv_spec spec;
	struct pdk_session *session;
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
	const char *blame;            /* the request field a failed setup judged, or NULL */
	json_int_t destroy_requested; /* the destroy request's req; -1: SIGTERM */
	struct pdk_sv_exec *execs;
	size_t n_execs;
	/* Snapshots by name: index i is change-set snapshot number i + 1. */
	char **snap_names;
	uint64_t cpu_base_ns; /* CPU time of the inits before the last restart */
	/* {"ev":"events"} nudges: the spool's size when last told, and when. */
	int spool_fd; /* O_PATH of events.jsonl, for fstat() */
	off_t spool_told;
	uint64_t nudge_ns;
};

/* ---- supervisor-spec.c ---- */

/* Read the spec (at most 1 MiB, a JSON object) from `fd`. 0, or negative + *err ("spec: ..."). */
PDK_MUST_CHECK int pdk__sv_spec_load(int fd, json_t **out, struct pdk_error **err);

/*
 * Take `spec` (borrowed: *out points into it) apart into *out (zeroed
 * first; release with pdk__sv_spec_release(), on failure too). Limits are
 * numbers in their unit (bytes, milliseconds, counts, CPUs: the API turned
 * text into numbers); anything else is a protocol error naming the field,
 * "policy: ..." like every refused limit. Other malformed members are
 * "spec: ..."; a bad mode is "policy: ...". 0, or negative + *err.
 */
PDK_MUST_CHECK int pdk__sv_spec_parse(json_t *spec, struct pdk_sv_spec *out,
				      struct pdk_error **err);
void pdk__sv_spec_release(struct pdk_sv_spec *spec);

/* The id names a directory: UUID-like text only. */
bool pdk__sv_valid_id(const char *id);

/* ---- supervisor.c ---- */

/* Reply helpers. Each sends on the current connection, if any. */
void pdk__sv_send(struct pdk_supervisor *s, json_t *msg, const int *fds, size_t nfds);
void pdk__sv_reply_error(struct pdk_supervisor *s, json_int_t req, const char *code,
			 const char *field, const struct pdk_error *err);
void pdk__sv_reply_errorx(struct pdk_supervisor *s, json_int_t req, const char *code,
			  const char *field, const char *msg);

/*
 * Start the session's sandbox, then what the supervisor keeps of it:
 * RUNDIR/sb/ID/cgroup, the sandbox user, the root fd. At setup and after
 * every init restart. 0, or negative + *err ("sandbox: ...").
 */
PDK_MUST_CHECK int pdk__sv_start_sandbox(struct pdk_supervisor *s, struct pdk_error **err);

/* The session's sandbox and policy (borrowed). */
struct pdk_sandbox *pdk__sv_sandbox(const struct pdk_supervisor *s);
const struct pdk_policy *pdk__sv_policy(const struct pdk_supervisor *s);

/*
 * What the daemon shows of the sandbox beside its figures (ready line and
 * status answer): {"workspace": {"path", "host_path", "mode"} or null,
 * "network": {"mode"}}. "path" is where the sandbox sees its workspace;
 * "host_path" the caller's own directory, null for a private workspace.
 */
json_t *pdk__sv_facts(const struct pdk_supervisor *s);

/*
 * {"op":"egress_allow","host":ENTRY}: widen the running sandbox's
 * allowlist by one network.allow entry (pdk_session_net_allow()), answered
 * {"allow": the entry as listed, "added": false when it was listed already,
 * "facts"}; "conflict" when network.mode is none or host, "bad_request"
 * (field "host") for an entry the grammar refuses. SECURITY: only the
 * daemon drives the control socket (its peer check), never the sandbox.
 */
void pdk__sv_op_egress_allow(struct pdk_supervisor *s, json_int_t req, json_t *msg);

/* ---- supervisor-loop.c ---- */

/* The sandbox's wall time so far, paused time left out. */
uint64_t pdk__sv_wall_ns(const struct pdk_supervisor *s);

/* Serve until the sandbox ends or is destroyed. 0, or negative + *err when poll broke. */
PDK_MUST_CHECK int pdk__sv_serve(struct pdk_supervisor *s, struct pdk_error **err);

/* ---- supervisor-exec.c ---- */

void pdk__sv_op_exec(struct pdk_supervisor *s, json_int_t req, json_t *msg, int *fds, size_t nfds);
void pdk__sv_op_signal(struct pdk_supervisor *s, json_int_t req, json_t *msg);
/* Report what the init says of the execs: started, failed, exited. */
void pdk__sv_drain_procs(struct pdk_supervisor *s);
/* SIGKILL the execs past their timeout_ms. */
void pdk__sv_check_exec_timeouts(struct pdk_supervisor *s);
/* The nearest exec deadline in ms from `now` (UINT64_MAX: none). */
uint64_t pdk__sv_exec_timeout_ms(const struct pdk_supervisor *s, uint64_t now);
/* Forget exec `e` (its pty master closed). */
void pdk__sv_drop_exec(struct pdk_supervisor *s, struct pdk_sv_exec *e);

/* ---- supervisor-ws.c ---- */

/* {"changes"}; with "patch": true also {"patch"} (or "patch_base64"), see ws_patch. */
void pdk__sv_op_diff(struct pdk_supervisor *s, json_int_t req, json_t *msg);
/* {"snapshots": [{"name", "number"}]}, oldest first. */
void pdk__sv_op_snapshots(struct pdk_supervisor *s, json_int_t req);
/* `op` is "snapshot", "rollback" or "commit". */
void pdk__sv_op_ws(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *op);

/* ---- supervisor-files.c ---- */

/*
 * openat2() of `path` beneath the sandbox's root (RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS; O_CLOEXEC, and O_NOCTTY unless O_PATH, added).
 * The fd, or -errno.
 */
int pdk__sv_open_in(struct pdk_supervisor *s, const char *path, int flags, mode_t mode);

/*
 * File operations, confined to the sandbox's root: `op` is one of open,
 * stat, list, delete, mkdir; and connect {"port":N}, a TCP connection to
 * the sandbox's own 127.0.0.1:N made by a helper in its network namespace
 * (its descriptor comes with the answer). Returns true when it handled the op (and
 * replied).
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
