/*
 * control.h - the control layer: every decision of `paddock serve` about
 * its sandboxes, without any transport (docs/internals/daemon.md).
 *
 * One control object (struct pdk_ctl) owns a state directory: its lock, the
 * store (store.h), the token key (token.h), the audit store, and every
 * sandbox it started or re-adopted, each run by its own supervisor. It
 * creates sandboxes (or claims them from warm pools), runs commands in them
 * (answered at the end, or streamed as they write), moves files and
 * archives, pauses, snapshots and destroys them, keeps their budgets, mints
 * and checks tokens, and records what happens in the audit store, from
 * which subscribers get every event.
 *
 * Front doors (the REST API in api/, and whatever speaks another protocol)
 * translate: typed requests in, typed results out through completion
 * callbacks, errors as struct pdk_error. No HTTP type appears here.
 *
 * Threads: every call is made on the thread that runs the event loop given
 * to pdk_ctl_new(), and every callback runs there. The one other thread is
 * internal: a verification of the audit chain (pdk_ctl_audit_state()) runs
 * on a worker with its own read-only connection and touches nothing else.
 *
 * Callbacks: a function that takes a callback and returns an error never
 * calls the callback. One that returns 0 calls it exactly once, possibly
 * before it returns (a repeated create, a claim from a pool), so a caller
 * must not touch its context after the call when the callback frees it.
 * Results handed to a callback are borrowed for the call.
 *
 * Errors: `status` is an errno value, `field` (when set) names the part of
 * the request to blame. A front door maps the status to its protocol's
 * error, always the same way:
 *   ENOENT    no such sandbox, command, snapshot or path
 *   EINVAL    a bad argument (also a command that could not be executed:
 *             ENOEXEC, field "argv[0]")
 *   EALREADY  the sandbox or command is not in a state that allows it
 *             (ended, being destroyed, lost, paused, stdin closed, no
 *             terminal)
 *   EEXIST    an idempotency key already names another sandbox
 *   EBUSY     the sandbox is busy (a pause that did not complete, too many
 *             commands)
 *   EDQUOT    a budget or a bound is spent (commands, output, disk, queued
 *             stdin)
 *   E2BIG     more than the caller's or the sandbox's cap
 *   EACCES    a token that does not verify
 *   ENOTCONN  the supervisor is gone, or the control object is shutting down
 *   EIO, ...  anything else failed
 */
#ifndef PDK_CONTROL_H
#define PDK_CONTROL_H

#include "common.h"
#include "base.h"
#include "store.h"
#include "token.h"

#include <sys/types.h>

struct event_base;
struct pdk_ctl;
struct pdk_ctl_sb;   /* one sandbox (opaque) */
struct pdk_ctl_exec; /* one running command (opaque) */
struct pdk_ctl_sub;  /* one event subscriber (opaque) */

/* The largest warm pool. */
#define PDK_CTL_POOL_MAX 64

/* ---- the control object (ctl.c) ---- */

struct pdk_ctl_opts {
	struct event_base *base; /* the loop (borrowed; outlives the control object) */
	const char *state_dir;   /* the state directory (base/paths.h) */
	const char *run_dir;     /* the runtime directory (base/paths.h) */
	uint64_t retention_s;    /* how long ended sandboxes stay visible (0: not kept) */
	char *const *envp;       /* the supervisors' environment (borrowed; NULL: empty) */
	/* The paddock binary run as `paddock supervise` (NULL: this process's, /proc/self/exe). */
	const char *supervisor_exe;
	const struct pdk_log *log; /* what is not an answer to anyone (borrowed; NULL: dropped) */
	/*
	 * Where the lock, the store and the token key live (NULL: state_dir). A
	 * control object of its own beside a daemon's (`paddock mcp` over stdio)
	 * takes a private directory here and shares the state directory's audit
	 * store and change sets, which take several writers.
	 */
	const char *own_dir;
	const char *actor; /* the events' actor (NULL: "paddock-serve") */
	/*
	 * The supervisors end their sandboxes when this process ends, however it
	 * ends (SIGTERM from the kernel as their parent dies: PR_SET_PDEATHSIG).
	 * For a control object that nothing re-adopts after it (`paddock mcp`,
	 * `paddock gateway`); a daemon's supervisors outlive it for re-adoption.
	 */
	bool end_with_us;
	/*
	 * How many commands may be starting at once over every sandbox: a
	 * command holds its slot until it exits or for 20 ms, whichever is
	 * first; the others wait, each sandbox's in order, the sandboxes taking
	 * turns. 0: twice the CPUs online. UINT_MAX: no bound.
	 */
	unsigned exec_starts;
};

/*
 * Take the state directory: open /proc/self/exe (the supervisors' binary),
 * make the state and runtime directories (RUNDIR and RUNDIR/sb 0700), lock
 * STATE/daemon.lock (-EBUSY naming the pid of the control object that holds
 * it), open the store, the token key and the audit store. *out is the
 * caller's (pdk_ctl_free()). Nothing runs until pdk_ctl_start().
 */
PDK_MUST_CHECK int pdk_ctl_new(const struct pdk_ctl_opts *opts, struct pdk_ctl **out,
			       struct pdk_error **err);

/*
 * Start serving: bring the event fan-out to the audit store's head and
 * re-adopt every stored sandbox (a supervisor that does not answer is gone:
 * what it left is cleaned and the sandbox marked lost). Pool passes run from
 * here on.
 */
void pdk_ctl_start(struct pdk_ctl *c);

/*
 * The once-a-second pass: ended sandboxes past the retention purged (every
 * 10th pass), TTLs and idle timeouts, each supervisor's status, spool
 * ingest, the warm pools, and records other writers appended handed to the
 * subscribers. Nothing once pdk_ctl_shutdown() ran.
 */
void pdk_ctl_tick(struct pdk_ctl *c);

/*
 * The start of the end: no more timer work or pool refills. With `destroy`,
 * every sandbox (pool members too) is destroyed. Either way the loop is run
 * until every sandbox being destroyed is gone (a kill is answered before its
 * supervisor may have been told) or `wait_s` seconds passed. The others'
 * supervisors keep running and the next control object re-adopts their
 * sandboxes; it also finishes a destroy left under way (RUNDIR/sb/ID/ending).
 */
void pdk_ctl_shutdown(struct pdk_ctl *c, bool destroy, uint64_t wait_s);

/*
 * Forget every sandbox (their supervisors keep running; every waiting
 * callback gets ENOTCONN "the daemon is shutting down"), end the
 * subscriptions, checkpoint and close the audit store, the store and the
 * lock. NULL-safe. Call it before the loop is freed.
 */
void pdk_ctl_free(struct pdk_ctl *c);

/* The state directory the object took (borrowed for its life). */
const char *pdk_ctl_state_dir(const struct pdk_ctl *c);

/* The number of sandboxes known (live, starting, lost). */
size_t pdk_ctl_sandbox_count(struct pdk_ctl *c);

/*
 * A profile, snapshot, pool or token name: [A-Za-z0-9_.-]{1,64}, not
 * starting with '.'.
 */
bool pdk_ctl_name_ok(const char *s);

/*
 * Whether `ref` names an image in the state directory's image store (a
 * name, a digest or a unique digest prefix: pdk_image_lookup()). False when
 * there is none, or the store cannot be read: the caller then treats `ref`
 * as something else (a profile), whose own lookup reports what is missing.
 */
bool pdk_ctl_image_known(struct pdk_ctl *c, const char *ref);

/* ---- the Sandbox view (view.c) ---- */

/* One named figure: "commands", "wall_ns", "memory_current", "output_bytes"... */
struct pdk_ctl_figure {
	char *name;
	int64_t value;
};

struct pdk_ctl_figures {
	struct pdk_ctl_figure *v;
	size_t n;
};

/* The value of figure `name` in *value; false when there is none. */
bool pdk_ctl_figure_get(const struct pdk_ctl_figures *f, const char *name, int64_t *value);

/*
 * What is known of one sandbox, live or ended. Every member is owned by the
 * view (pdk_ctl_view_release()).
 *
 * Budgets: `usage` is the supervisor's last status report (wall_ns,
 * paused_ns, cpu_ns, memory_current, memory_peak, pids_current, commands,
 * egress_bytes) with the daemon's own output_bytes and commands counts;
 * `limits` the bounds (the supervisor's wall_ns, cpu_ns, memory, pids,
 * commands, egress_bytes, disk, and output_bytes; 0: none; before the
 * supervisor's first report, the create's own overrides.limits); `remaining`
 * has, for each figure that is both counted and bounded, the limit minus
 * the usage, never below 0.
 */
struct pdk_ctl_view {
	char *id;
	char *state; /* starting, running, paused, lost, ended */
	char *profile;
	json_t *labels;          /* an object of strings (a reference of its own) */
	uint64_t created_ns;     /* CLOCK_REALTIME */
	uint64_t expires_ns;     /* the TTL's end; 0: none */
	uint64_t idle_timeout_s; /* 0: none */
	bool claimed;            /* claimed from a warm pool */
	bool pool_member;        /* an unclaimed warm-pool member: the daemon's stock */
	int supervisor_pid;
	struct pdk_ctl_figures usage, limits, remaining;
	json_t *facts; /* {"workspace", "network", "image"} the supervisor reported, or NULL (owned)
			*/
	char *end_reason;  /* ended: why ("deleted", "ttl", "killed", "wall"...); else NULL */
	uint64_t ended_ns; /* ended: when */
};

void pdk_ctl_view_release(struct pdk_ctl_view *v);

/*
 * The Sandbox object of `v` as JSON (new reference): id, state, profile,
 * labels, created_at, expires_at, idle_timeout_s, pool, supervisor_pid,
 * usage, limits, remaining, workspace ({"path": where the sandbox sees it,
 * "host_path": the caller's own directory or null for a private one,
 * "mode"}, or null: none), network ({"mode"}; null before the supervisor
 * reported it), image ({"name", "digest"} of the root's image; null on the
 * host's root or before the report), and for an ended sandbox end_reason
 * and ended_at;
 * times as RFC 3339 text with microseconds, null when unset. It is the
 * record the store keeps of an ended sandbox too, so its form is fixed:
 * fields may be added, none renamed.
 */
json_t *pdk_ctl_view_json(const struct pdk_ctl_view *v);

/*
 * The view of sandbox `id`: a live one (its use counts as activity for the
 * idle timeout), else a kept ended one. -ENOENT when neither.
 */
PDK_MUST_CHECK int pdk_ctl_get(struct pdk_ctl *c, const char *id, struct pdk_ctl_view *out,
			       struct pdk_error **err);

/* What a list selects (every member NULL: everything live). */
struct pdk_ctl_filter {
	const char *session, *workflow, *agent; /* these labels' values */
	const char *label_key, *label_value;    /* one more label */
	const char *state; /* a state; "all"; "ended" or "all" add the kept ended ones */
};

/*
 * The sandboxes `f` selects, live ones first (newest first), then the ended
 * ones (oldest end first). *views is the caller's (pdk_ctl_views_free()).
 * -EINVAL (field "state") for a state filter that names no state.
 */
PDK_MUST_CHECK int pdk_ctl_list(struct pdk_ctl *c, const struct pdk_ctl_filter *f,
				struct pdk_ctl_view **views, size_t *n, struct pdk_error **err);
void pdk_ctl_views_free(struct pdk_ctl_view *views, size_t n);

/* ---- finding a sandbox for an operation (sandboxes.c) ---- */

enum pdk_ctl_find_flags {
	PDK_CTL_FIND_LIVE = 1 << 0, /* only one that can take control calls (running or paused) */
};

/*
 * The sandbox `id` for an operation on it (borrowed: valid until the caller
 * returns to the loop). Its use counts as activity. -ENOENT when unknown,
 * -EALREADY when it has ended or is being destroyed, or (PDK_CTL_FIND_LIVE)
 * when it is starting or lost.
 */
PDK_MUST_CHECK int pdk_ctl_find(struct pdk_ctl *c, const char *id, unsigned flags,
				struct pdk_ctl_sb **out, struct pdk_error **err);

/* ---- create (sandboxes.c) ---- */

struct pdk_ctl_create {
	const char *profile;     /* never NULL */
	const char *image;       /* the root's image ("host": the host's); NULL: the profile's */
	json_t *overrides;       /* validated policy overrides, or NULL (borrowed) */
	json_t *workspace;       /* {"path","mode"} or NULL (borrowed) */
	json_t *env;             /* an object of strings, or NULL (borrowed) */
	json_t *labels;          /* an object of strings, never NULL (borrowed) */
	uint64_t ttl_s;          /* 0: none */
	uint64_t idle_timeout_s; /* 0: none */
	const char *idempotency_key; /* NULL: none */
	unsigned token_ops;          /* the create token's operations (0: all) */
	uint64_t token_ttl_s;        /* its lifetime (0: PDK_TOKEN_TTL_MAX) */
};

/* A create's answer: the sandbox and a token for it. */
struct pdk_ctl_created {
	struct pdk_ctl_view view;
	const char *token;         /* a sandbox token (token.h) */
	uint64_t token_expires_ns; /* CLOCK_REALTIME */
	unsigned token_ops;
	bool again; /* the sandbox of an idempotency key seen before, not a new one */
};

typedef void (*pdk_ctl_created_cb)(void *ctx, const struct pdk_ctl_created *created,
				   const struct pdk_error *err);

/*
 * Create a sandbox: the running sandbox an idempotency key named before
 * (again), a ready warm-pool member when the request asks for nothing a
 * pool member lacks (no workspace, overrides, env or scoped token), else a
 * new one whose supervisor is started now; `cb` gets it once it runs, or
 * EIO "sandbox could not be created: ..." (ENOTCONN at shutdown).
 * Returns -EALREADY (field idempotency_key) when the key's sandbox has
 * ended, or the error of a start that failed at once.
 */
PDK_MUST_CHECK int pdk_ctl_create(struct pdk_ctl *c, const struct pdk_ctl_create *r,
				  pdk_ctl_created_cb cb, void *ctx, struct pdk_error **err);

/*
 * Change the TTL of live sandbox `sb`: it now ends `ttl_s` seconds from now
 * (0: never), whatever its TTL was, saved in the store and recorded as
 * sandbox.ttl with the new expires_at. -EINVAL (field "ttl") past
 * PDK_CTL_TTL_MAX.
 */
#define PDK_CTL_TTL_MAX (366ULL * 24 * 3600)
PDK_MUST_CHECK int pdk_ctl_set_ttl(struct pdk_ctl_sb *sb, uint64_t ttl_s, struct pdk_error **err);

/* ---- destroy and kill (sandboxes.c, view.c) ---- */

/* The end of a destroy: the sandbox's final state ("ended", or "lost" when its supervisor died). */
typedef void (*pdk_ctl_destroyed_cb)(void *ctx, const char *id, const char *state,
				     const struct pdk_error *err);

/*
 * Destroy sandbox `id` for `reason`; `cb` gets the outcome once the
 * supervisor is gone. `operator` (NULL: none) names who asked, as the
 * records name a caller (an admin token's name, "unix:UID", "sandbox:ID"):
 * the sandbox.destroy record carries it as attrs.operator. An ended
 * sandbox answers "ended" at once. A sandbox being destroyed already (a
 * kill, another destroy) is not asked again: `cb` gets the end of that
 * destroy, whose reason and operator stand. -ENOENT when unknown.
 */
PDK_MUST_CHECK int pdk_ctl_destroy(struct pdk_ctl *c, const char *id, const char *reason,
				   const char *operator, pdk_ctl_destroyed_cb cb, void *ctx,
				   struct pdk_error **err);

/* What a kill selects: every sandbox, sandboxes by id, or by every given label. */
struct pdk_ctl_selector {
	const char *session, *workflow, *agent; /* these labels' values, or NULL */
	json_t *labels;                         /* more labels (an object of strings) or NULL */
	char *const *ids;                       /* these ids, or NULL */
	bool all; /* every live sandbox (then nothing else is given): "stop everything" */
};

/*
 * Whether a sandbox with `id` and `labels` is selected: `all`, or its id
 * is one of `ids`, or at least one label is given and every given one
 * matches.
 */
bool pdk_ctl_selector_match(const struct pdk_ctl_selector *s, const char *id, const json_t *labels);

/*
 * Destroy every live sandbox `s` selects (reason "killed"), recording a
 * `kill` event for each and one for the call with `reason`, each with
 * attrs.operator when `operator` (who asked, as pdk_ctl_destroy() names
 * them) is given. Unclaimed warm-pool members are the daemon's stock, no
 * one's work: `all` leaves them (a pool's size 0 ends them).
 * *killed gets their ids (caller frees with pdk_strv_free()).
 */
void pdk_ctl_kill(struct pdk_ctl *c, const struct pdk_ctl_selector *s, const char *reason,
		  const char *operator, char *** killed);

/* ---- budgets (budget.c) ---- */

/*
 * 0 when the sandbox's output and commands budgets allow another request;
 * else a limit.exceeded event (its `request` is `request`) and -EDQUOT,
 * the field naming the budget ("output_bytes", "commands").
 */
PDK_MUST_CHECK int pdk_ctl_budget_check(struct pdk_ctl_sb *sb, const char *request,
					struct pdk_error **err);

/* ---- commands (exec.c) ---- */

struct pdk_ctl_exec_req {
	char *const *argv;      /* never NULL, argv[0] set (borrowed) */
	char *const *env;       /* "K=V" added to the sandbox's environment, or NULL */
	const char *cwd;        /* NULL: the workspace, or / */
	const char *stdin_data; /* the command's stdin (copied), or NULL */
	size_t stdin_len;
	uint64_t timeout_ms; /* 0: none */
	uint64_t output_cap; /* a captured stream keeps its first and last output_cap/2 bytes */
	bool pty;            /* a terminal (streaming only) */
	bool stdin_open;     /* stdin stays open for pdk_ctl_exec_stdin() (streaming only) */
	uint64_t cols, rows; /* the terminal's size */
	const char *tag;     /* recorded with the request (a detached process's: procs.c) */
};

/* How a command ended. */
struct pdk_ctl_exit {
	uint64_t exec_id;
	bool has_exit_code, has_signal; /* false when no exit report came (the sandbox went away) */
	int exit_code;                  /* -1 unless it exited */
	int signal;                     /* 0 unless a signal ended it */
	char end[16];                   /* "exited", "signaled", "timeout", "killed" */
	uint64_t duration_ms;
	/*
	 * The destinations refused while it ran (borrowed, valid for the call):
	 * an array of {dest, why, allow, count}, NULL when no exit report came;
	 * denied_more counts refusals of destinations not listed.
	 */
	const json_t *denied;
	uint64_t denied_more;
};

/*
 * One output stream of a command. Captured (answered at the end): the first
 * head_len and the last tail_len bytes it wrote; when it wrote more
 * (dropped > 0), all of it is in `file` inside the sandbox, unless keeping
 * it failed (file NULL). Streamed: only `total`.
 */
struct pdk_ctl_output {
	const char *head, *tail;
	size_t head_len, tail_len;
	uint64_t total;
	uint64_t dropped;       /* bytes between head and tail */
	uint64_t dropped_lines; /* lines of which at least one byte was dropped */
	bool line_cut;          /* a line longer than what was kept of it was cut mid-line */
	const char *file;
};

struct pdk_ctl_exec_result {
	struct pdk_ctl_exit exit;
	struct pdk_ctl_output out, err;
};

/* What a command's caller is told. Every pointer is borrowed for the call. */
struct pdk_ctl_exec_cbs {
	/* Streaming: the command started (pid 0: not reported). */
	void (*started)(void *ctx, uint64_t exec_id, int pid, bool pty);
	/* Streaming: `len` bytes the command wrote (stream 1: its output or the pty; 2: errors). */
	void (*output)(void *ctx, int stream, const char *data, size_t len);
	/*
	 * Last, once: the result, or `err` when the command never started (a
	 * supervisor's refusal, the sandbox gone first). The exec handle is gone
	 * after it.
	 */
	void (*done)(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err);
};

/*
 * Run a command in the sandbox. Captured (stream false): `done` gets the
 * exit and the capture of each stream. Streamed: `started`, then `output`
 * as the command writes, then `done` (totals only). The request is recorded
 * (exec.request) and charged to the commands budget once started, the
 * output bytes at the end. *out (may be NULL) gets the handle, valid until
 * `done`. Errors: the budget (pdk_ctl_budget_check()), -EINVAL for a pty or
 * stdin_open without streaming or an output_cap under 64, -ENOTCONN / -EIO
 * when the supervisor cannot be asked.
 */
PDK_MUST_CHECK int pdk_ctl_exec(struct pdk_ctl_sb *sb, const struct pdk_ctl_exec_req *r,
				bool stream, const struct pdk_ctl_exec_cbs *cbs, void *ctx,
				struct pdk_ctl_exec **out, struct pdk_error **err);

/*
 * The caller gave up the command (a client's cancellation): its process
 * group is sent SIGKILL, now or as soon as the supervisor says it started.
 * `done` still comes, with the kill as the end.
 */
void pdk_ctl_exec_cancel(struct pdk_ctl_exec *x);

/*
 * The streaming caller's client is gone: the command loses its stdin, and a
 * pty session its terminal (the command gets SIGHUP); no more output is
 * delivered. `done` still comes.
 */
void pdk_ctl_exec_close(struct pdk_ctl_exec *x);

/*
 * Queue `len` bytes (copied) for the running command `exec_id`'s stdin or
 * terminal; `eof`: then close its stdin (a terminal gets ^D). -ENOENT (field
 * exec_id) when no such command runs, -EALREADY when its stdin is not open
 * (field stdin_open) or closed (field stdin), -EDQUOT (field stdin) past 4
 * MiB not read yet.
 */
PDK_MUST_CHECK int pdk_ctl_exec_stdin(struct pdk_ctl_sb *sb, uint64_t exec_id, const char *data,
				      size_t len, bool eof, struct pdk_error **err);

/*
 * Set the terminal size of pty session `exec_id`. -ENOENT (field exec_id),
 * -EALREADY (field pty) when it has no terminal or it is closed.
 */
PDK_MUST_CHECK int pdk_ctl_exec_resize(struct pdk_ctl_sb *sb, uint64_t exec_id, uint64_t cols,
				       uint64_t rows, struct pdk_error **err);

/* ---- detached processes (procs.c) ---- */

/*
 * A detached process is a streamed command (pdk_ctl_exec()) that belongs to
 * the sandbox, not to the request that started it: it runs until it ends
 * or the sandbox does, whoever watches it. Callers attach and detach as
 * they come and go (by pid or by the tag it was started with); each new
 * watcher first gets the output kept since the start (at most
 * PDK_CTL_PROC_KEEP bytes, the oldest dropped first), then what comes.
 * Its stdin, terminal and signals are those of the command: the front door
 * finds its exec id (pdk_ctl_proc_find()) and calls pdk_ctl_exec_stdin(),
 * pdk_ctl_exec_resize() or pdk_ctl_signal(). The last PDK_CTL_PROCS_ENDED
 * that ended stay for a re-attach that comes after the end (it gets their
 * output and exit at once); every one is gone with the sandbox.
 */
#define PDK_CTL_PROCS_MAX    32         /* detached processes running in a sandbox at once */
#define PDK_CTL_PROCS_ENDED  8          /* ended ones kept for a late re-attach */
#define PDK_CTL_PROC_KEEP    (1u << 20) /* output bytes kept for a re-attach */
#define PDK_CTL_PROC_TAG_MAX 256

struct pdk_ctl_proc_watch; /* one caller attached to a detached process (opaque) */

/* What a detached process is (borrowed: valid until the caller returns to the loop). */
struct pdk_ctl_proc_info {
	uint64_t exec_id; /* 0 until it started */
	int pid;          /* its pid in the sandbox (0 until it started) */
	const char *tag;  /* NULL: none */
	char *const *argv;
	char *const *env; /* "K=V" given at the start (never NULL) */
	const char *cwd;  /* NULL: the default */
	bool pty, stdin_open, running;
	uint64_t dropped; /* output bytes no longer kept for a re-attach */
};

/* What a watcher is told. Every pointer is borrowed for the call. */
struct pdk_ctl_proc_cbs {
	/* The process runs (on an attach to one that started: at once). */
	void (*started)(void *ctx, const struct pdk_ctl_proc_info *p);
	/* Bytes it wrote (stream 1: its output or the terminal; 2: errors). */
	void (*output)(void *ctx, int stream, const char *data, size_t len);
	/*
	 * Last, once: how it ended, or `err` (exit NULL) when it never
	 * started. The watch is gone after it.
	 */
	void (*done)(void *ctx, const struct pdk_ctl_exit *exit, const struct pdk_error *err);
};

/*
 * Start command `r` as a detached process tagged r->tag (NULL: none) and,
 * when `cbs` is set, attach the caller (*out, may be NULL, gets the watch).
 * `r` is a streamed exec's (pty, stdin_open, cols, rows; output_cap is
 * not used). Recorded as exec.request with the tag. Errors: those of
 * pdk_ctl_exec(), -EINVAL (field tag) for a tag longer than
 * PDK_CTL_PROC_TAG_MAX, -EEXIST (field tag) when a running process has
 * the tag, -EBUSY when PDK_CTL_PROCS_MAX run.
 */
PDK_MUST_CHECK int pdk_ctl_proc_start(struct pdk_ctl_sb *sb, const struct pdk_ctl_exec_req *r,
				      const struct pdk_ctl_proc_cbs *cbs, void *ctx,
				      struct pdk_ctl_proc_watch **out, struct pdk_error **err);

/*
 * Attach to the detached process with `pid` (when `tag` is NULL) or
 * `tag`, a running one before an ended one: `started` and the kept output
 * come before this returns, then what the process writes and its end
 * (for an ended one, at once too). *out (may be NULL) gets the watch.
 * Recorded as exec.attach. -ENOENT (field pid or tag) when there is none.
 */
PDK_MUST_CHECK int pdk_ctl_proc_attach(struct pdk_ctl_sb *sb, int pid, const char *tag,
				       const struct pdk_ctl_proc_cbs *cbs, void *ctx,
				       struct pdk_ctl_proc_watch **out, struct pdk_error **err);

/* The watcher is gone: no more callbacks; the process runs on. Not after `done`. */
void pdk_ctl_proc_detach(struct pdk_ctl_proc_watch *w);

/*
 * The running detached process with `pid` (tag NULL) or `tag`, in *out.
 * -ENOENT (field pid or tag) when none runs, -EALREADY when it has not
 * started yet.
 */
PDK_MUST_CHECK int pdk_ctl_proc_find(struct pdk_ctl_sb *sb, int pid, const char *tag,
				     struct pdk_ctl_proc_info *out, struct pdk_error **err);

/* The running detached processes (at most `room` into out[]), oldest first; how many. */
size_t pdk_ctl_procs(struct pdk_ctl_sb *sb, struct pdk_ctl_proc_info *out, size_t room);

/* ---- operations answered by the supervisor (ops.c) ---- */

/*
 * The supervisor's answer as it is (borrowed; without its "req"): stat
 * {"type","size","mode","mtime_ns"}, list {"entries",["truncated"]}, diff
 * {"changes"}, snapshot {"snapshot"}, rollback, commit {"committed"},
 * signal {"ok"} (docs/internals/daemon.md, "Control protocol").
 */
typedef void (*pdk_ctl_doc_cb)(void *ctx, json_t *doc, const struct pdk_error *err);
/*
 * With an error, `doc` is NULL or the supervisor's error object (borrowed)
 * when it carries details beyond its message (a commit's "conflicts").
 */
/* The sandbox after a pause or resume. */
typedef void (*pdk_ctl_view_cb)(void *ctx, const struct pdk_ctl_view *v,
				const struct pdk_error *err);

/*
 * Each is recorded (sandbox.control with the op's name) and sent to the
 * sandbox's supervisor. -ENOTCONN / -EIO when it cannot be asked; its
 * refusals come to the callback (pdk_ctl_svc_error()). Pause and resume
 * record `operator` (who asked, as pdk_ctl_destroy() names them; NULL:
 * none) as attrs.operator.
 */
PDK_MUST_CHECK int pdk_ctl_pause(struct pdk_ctl_sb *sb, const char *operator, pdk_ctl_view_cb cb,
				 void *ctx, struct pdk_error **err);
PDK_MUST_CHECK int pdk_ctl_resume(struct pdk_ctl_sb *sb, const char *operator, pdk_ctl_view_cb cb,
				  void *ctx, struct pdk_error **err);
/* `name` NULL: a new one ("snap-" and 8 hex digits). `restart`: move the layer around a restart. */
PDK_MUST_CHECK int pdk_ctl_snapshot(struct pdk_ctl_sb *sb, const char *name, bool restart,
				    pdk_ctl_doc_cb cb, void *ctx, struct pdk_error **err);
PDK_MUST_CHECK int pdk_ctl_rollback(struct pdk_ctl_sb *sb, const char *snapshot, bool restart,
				    pdk_ctl_doc_cb cb, void *ctx, struct pdk_error **err);
/*
 * Commit the sandbox's change set to its workspace. PDK_CTL_COMMIT_FORCE
 * overwrites what changed on the host since the sandbox started;
 * PDK_CTL_COMMIT_DRY_RUN checks only (no restart). Paths changed on the
 * host are refused as a conflict (EALREADY) whose document lists them:
 * {"code","message","conflicts":[{"path","reason"}]}; refused entries
 * (EPERM) likewise under "refused".
 */
enum pdk_ctl_commit_flags {
	PDK_CTL_COMMIT_RESTART = 1 << 0,
	PDK_CTL_COMMIT_FORCE = 1 << 1,
	PDK_CTL_COMMIT_DRY_RUN = 1 << 2,
};
PDK_MUST_CHECK int pdk_ctl_commit(struct pdk_ctl_sb *sb, unsigned flags, pdk_ctl_doc_cb cb,
				  void *ctx, struct pdk_error **err);
PDK_MUST_CHECK int pdk_ctl_diff(struct pdk_ctl_sb *sb, pdk_ctl_doc_cb cb, void *ctx,
				struct pdk_error **err);
/*
 * The diff with its unified diff: {"changes", "patch", "patch_bytes",
 * "patch_truncated"}. "patch" is UTF-8 text (content that is not is shown
 * as binary); it stops after the change that passed 16 MiB
 * ("patch_truncated": true).
 */
PDK_MUST_CHECK int pdk_ctl_diff_patch(struct pdk_ctl_sb *sb, pdk_ctl_doc_cb cb, void *ctx,
				      struct pdk_error **err);
/* The snapshots kept, oldest first: {"snapshots": [{"name", "number"}]}. */
PDK_MUST_CHECK int pdk_ctl_snapshots(struct pdk_ctl_sb *sb, pdk_ctl_doc_cb cb, void *ctx,
				     struct pdk_error **err);
PDK_MUST_CHECK int pdk_ctl_stat(struct pdk_ctl_sb *sb, const char *path, pdk_ctl_doc_cb cb,
				void *ctx, struct pdk_error **err);
PDK_MUST_CHECK int pdk_ctl_ls(struct pdk_ctl_sb *sb, const char *path, pdk_ctl_doc_cb cb, void *ctx,
			      struct pdk_error **err);
/* Signal `sig` to command `exec_id`'s process group. */
PDK_MUST_CHECK int pdk_ctl_signal(struct pdk_ctl_sb *sb, uint64_t exec_id, int sig,
				  pdk_ctl_doc_cb cb, void *ctx, struct pdk_error **err);

/* ---- the network allowlist, widened while the sandbox runs (netallow.c) ---- */

/*
 * Judge `host` as a request to widen sandbox `sb`'s allowlist: it must be
 * one `network.allow` entry in a profile's grammar (docs/policy.md:
 * "host[:port]", "*.suffix[:port]", an IP literal), and the sandbox's
 * network.mode allowlist. *canonical gets the entry as it would be listed
 * (caller frees), *port (may be NULL) its port (0: the default ports, 80
 * and 443). -EINVAL (field "host") for an entry the grammar refuses,
 * -ENOTSUP (field "network.mode") for a sandbox of mode none or host, the
 * message saying why there is nothing to widen.
 */
PDK_MUST_CHECK int pdk_ctl_egress_allow_check(const struct pdk_ctl_sb *sb, const char *host,
					      char **canonical, unsigned *port,
					      struct pdk_error **err);

/* Who widens, and on whose word (borrowed for the call). */
struct pdk_ctl_egress_allow_req {
	const char *host;        /* the network.allow entry */
	const char *actor;       /* who decided: an approver, an admin token's name, "unix:UID" */
	const char *approval_id; /* the approval it carries out, or NULL (an admin's request) */
};

/*
 * Widen the running sandbox's egress allowlist by the entry r->host, live:
 * its supervisor adds it to the proxy's rules (the next connection to it
 * is allowed, without a restart) and to the sandbox's policy (an init
 * restart keeps it; its facts, network.allow, list it). The callback gets
 * {"allow": the entry as listed, "added": false when it was listed
 * already, "network": {"mode", "allow"}}. An added entry is recorded as
 * net.allow.added {allow, actor, approval_id}. Errors before the call as
 * pdk_ctl_egress_allow_check(), -ENOTCONN / -EIO when the supervisor
 * cannot be asked; its refusals come to the callback. SECURITY: the
 * caller is an admin or carries out a human's approval; nothing in the
 * sandbox reaches this.
 */
PDK_MUST_CHECK int pdk_ctl_egress_allow(struct pdk_ctl_sb *sb,
					const struct pdk_ctl_egress_allow_req *r, pdk_ctl_doc_cb cb,
					void *ctx, struct pdk_error **err);

/*
 * A supervisor's error answer (`reply` NULL: the connection was lost) as a
 * control error in *err: its code as a status (not_found ENOENT,
 * bad_request EINVAL, exec_failed ENOEXEC, conflict EALREADY, busy EBUSY,
 * limit EDQUOT, any other EIO), its message and field. Returns -status.
 */
int pdk_ctl_svc_error(const json_t *reply, struct pdk_error **err);

/*
 * A path of a file route in the sandbox: an absolute one as it is, a
 * relative one joined to where the sandbox sees its workspace (caller
 * frees). EINVAL (field "path") when it is relative and the sandbox has no
 * workspace, is empty, or is longer than 4096 bytes.
 */
char *pdk_ctl_sb_path(const struct pdk_ctl_sb *sb, const char *path, struct pdk_error **err);

/* ---- files and archives (files.c) ---- */

/*
 * A file's descriptor, open for reading (taken by the callback: it closes
 * it), and its size. Every path is absolute in the sandbox; the supervisor
 * opens it inside the sandbox's root.
 */
typedef void (*pdk_ctl_read_cb)(void *ctx, int fd, uint64_t size, const struct pdk_error *err);
/* A write's or delete's end: the path and the bytes written. */
typedef void (*pdk_ctl_file_cb)(void *ctx, const char *path, uint64_t bytes,
				const struct pdk_error *err);
/*
 * An archive's bytes as they come (borrowed; data != NULL, len > 0, err
 * NULL), or its end (data NULL; err NULL when whole). Each transfer ends
 * exactly once.
 */
typedef void (*pdk_ctl_archive_cb)(void *ctx, const char *data, size_t len,
				   const struct pdk_error *err);

/*
 * Read regular file `path` of at most `max` bytes (less when the output
 * budget is spent: then nothing but an empty file), charged to the output
 * budget. The callback's errors: -EINVAL (field path) when it is not a
 * regular file, -E2BIG (field path) when it is larger.
 */
PDK_MUST_CHECK int pdk_ctl_file_read(struct pdk_ctl_sb *sb, const char *path, uint64_t max,
				     pdk_ctl_read_cb cb, void *ctx, struct pdk_error **err);
/*
 * Write `len` bytes of `data` (taken: freed whatever the outcome) to `path`,
 * created with `mode` and missing parents. The callback's errors: -EDQUOT
 * (field path) when the sandbox's disk is full, -EIO otherwise.
 */
PDK_MUST_CHECK int pdk_ctl_file_write(struct pdk_ctl_sb *sb, const char *path, unsigned mode,
				      char *data, size_t len, pdk_ctl_file_cb cb, void *ctx,
				      struct pdk_error **err);
/* Delete `path` (a directory only with `recursive`). */
PDK_MUST_CHECK int pdk_ctl_file_delete(struct pdk_ctl_sb *sb, const char *path, bool recursive,
				       pdk_ctl_file_cb cb, void *ctx, struct pdk_error **err);
/*
 * A tar archive of directory `dir`, made by tar run inside the sandbox, of at
 * most `max` bytes (none when the output budget is spent), streamed: `cb`
 * gets it a chunk at a time, and the next chunk only once the caller called
 * pdk_ctl_archive_more() (it has sent the last one on), so the daemon holds
 * one chunk per transfer whatever the archive's size. *out gets the
 * transfer, for pdk_ctl_archive_more() and pdk_ctl_exec_close() (the
 * caller's client is gone: tar loses its stdout; the end still comes),
 * until the end. The end's errors: -E2BIG (field path) when larger,
 * -EINVAL (field path) "tar failed: ..." with tar's complaint; either may
 * come after bytes. Returns -EAGAIN (nothing started) when the sandbox
 * has its most archive transfers (4, both ways) running.
 */
PDK_MUST_CHECK int pdk_ctl_archive_get(struct pdk_ctl_sb *sb, const char *dir, uint64_t max,
				       pdk_ctl_archive_cb cb, void *ctx, struct pdk_ctl_exec **out,
				       struct pdk_error **err);
/* The last chunk of transfer `x` was sent on: the next may come. */
void pdk_ctl_archive_more(struct pdk_ctl_exec *x);
/*
 * Extract the tar archive `data` (`len` bytes, taken) into `dir` with tar
 * run inside the sandbox: a hostile archive meets the sandbox's
 * confinement, never the daemon's. `dir` and its missing parents are made
 * first, as the sandbox's user. Before tar sees it, the archive is checked
 * (pdk__tar_sanitize()): set-user-ID and set-group-ID bits are cleared
 * from every member, and an archive with a device node (-EPERM, field
 * body) or that is no readable tar (-EINVAL, field body) is refused.
 * Returns -EAGAIN (data freed) as pdk_ctl_archive_get() does; the end's
 * other errors as there.
 */
PDK_MUST_CHECK int pdk_ctl_archive_put(struct pdk_ctl_sb *sb, const char *dir, char *data,
				       size_t len, pdk_ctl_archive_cb cb, void *ctx,
				       struct pdk_error **err);

/* ---- ports forwarded into a sandbox (ports.c) ---- */

#define PDK_CTL_PORTS_MAX      16 /* forwarded ports per sandbox */
#define PDK_CTL_PORT_CONNS_MAX 64 /* connections relayed per port at once */

/* A forwarded port: the sandbox's, the host loopback's, the connections relayed now. */
struct pdk_ctl_port {
	uint16_t port;
	uint16_t host_port;
	unsigned connections;
};

/*
 * Forward 127.0.0.1:host_port on the host (0: a port the kernel picks) to
 * the sandbox's own 127.0.0.1:port. Each connection accepted there is
 * joined to one the supervisor's helper makes inside the sandbox's network
 * namespace, as the sandbox's user and under its Landlock rules; a
 * connection nothing answers in the sandbox is closed. A port already
 * forwarded is answered as it is. Recorded as sandbox.port.open with
 * `by` (who asked). Errors: -EINVAL (field port) for port 0, -EDQUOT past
 * PDK_CTL_PORTS_MAX, -EALREADY (field host_port) when host_port is taken.
 */
PDK_MUST_CHECK int pdk_ctl_port_open(struct pdk_ctl_sb *sb, uint16_t port, uint16_t host_port,
				     const char *by, struct pdk_ctl_port *out,
				     struct pdk_error **err);
/*
 * Stop forwarding `port`: the listener is closed and its connections are
 * cut. Recorded as sandbox.port.close with `by`. -ENOENT (field port)
 * when it is not forwarded. Every port closes so when the sandbox ends.
 */
PDK_MUST_CHECK int pdk_ctl_port_close(struct pdk_ctl_sb *sb, uint16_t port, const char *by,
				      struct pdk_error **err);
/* The forwarded ports (at most `room` of them into out[]), newest first; how many. */
size_t pdk_ctl_ports(struct pdk_ctl_sb *sb, struct pdk_ctl_port *out, size_t room);

/* ---- tokens and authentication (tokens.c) ---- */

/* Who a credential is. */
struct pdk_ctl_auth {
	bool admin;
	struct pdk_token_claims sb; /* when not admin: the sandbox token's claims */
	/*
	 * Who the caller is, as the records name them (an approval's approver,
	 * attrs.operator): an admin token's name, "sandbox:ID" for a sandbox
	 * token, or what the front door set ("unix:UID" for the unix socket's
	 * owner); "" when unknown.
	 */
	char name[72];
};

/*
 * Check a bearer credential: an admin token (its hash in the store), else a
 * sandbox token (token.h). -EACCES with the reason when it is neither.
 */
PDK_MUST_CHECK int pdk_ctl_authenticate(struct pdk_ctl *c, const char *token,
					struct pdk_ctl_auth *out, struct pdk_error **err);

/*
 * Check an E2B API key (X-API-KEY): its shape ("e2b_" and 40 lowercase hex
 * digits), then its SHA-256 among the stored keys. *name gets the key's
 * name (caller frees). -EACCES with the reason when it is neither.
 */
PDK_MUST_CHECK int pdk_ctl_e2b_key_check(struct pdk_ctl *c, const char *key, char **name,
					 struct pdk_error **err);

/*
 * A new token for the sandbox allowing `ops` for `ttl_s` seconds (*token,
 * caller frees; *exp_s its expiry in UNIX seconds), recorded as
 * token.create.
 */
PDK_MUST_CHECK int pdk_ctl_token_mint(struct pdk_ctl_sb *sb, unsigned ops, uint64_t ttl_s,
				      char **token, uint64_t *exp_s, struct pdk_error **err);

/* ---- handles (handles.c) ---- */

/*
 * A handle is what a front door gives a client instead of a sandbox id: a
 * random name (PDK_CTL_HANDLE_LEN characters, "sbx_" and hex) bound to the
 * client's identity (`owner`, the front door's choice: a connection, a
 * credential) and to one sandbox, that ends at `expires_ns` (CLOCK_REALTIME)
 * or with the control object. Only its owner can use it: another client's
 * handle resolves as an unknown one, so a client cannot learn that it exists.
 */
#define PDK_CTL_HANDLE_LEN 36

/* A new handle for sandbox `id` (*handle: caller frees). */
char *pdk_ctl_handle_new(struct pdk_ctl *c, const char *id, const char *owner, uint64_t expires_ns);

/*
 * The sandbox id of `owner`'s `handle` (borrowed: valid until the handle is
 * dropped). -ENOENT (field sandbox_id) when unknown, expired or another
 * owner's.
 */
PDK_MUST_CHECK int pdk_ctl_handle_resolve(struct pdk_ctl *c, const char *handle, const char *owner,
					  const char **id, struct pdk_error **err);

/* Forget `owner`'s `handle` (nothing when it is not theirs). */
void pdk_ctl_handle_drop(struct pdk_ctl *c, const char *handle, const char *owner);

/* `owner`'s live handles and their sandboxes: "HANDLE=ID" strings (caller frees, pdk_strv_free()).
 */
char **pdk_ctl_handles(struct pdk_ctl *c, const char *owner);

/* ---- warm pools (pools.c) ---- */

struct pdk_ctl_pool {
	char *profile;
	uint64_t size;     /* the target */
	uint64_t ready;    /* claimable now */
	uint64_t starting; /* being built or warmed up */
};

/* Every pool (*pools: the caller's, pdk_ctl_pools_free()). */
PDK_MUST_CHECK int pdk_ctl_pools(struct pdk_ctl *c, struct pdk_ctl_pool **pools, size_t *n,
				 struct pdk_error **err);
void pdk_ctl_pools_free(struct pdk_ctl_pool *pools, size_t n);

/*
 * Set the target size of `profile`'s pool (0 removes it); once started, a
 * pool pass runs at once. -EINVAL for a bad name or a size over
 * PDK_CTL_POOL_MAX.
 */
PDK_MUST_CHECK int pdk_ctl_pool_set(struct pdk_ctl *c, const char *profile, uint64_t size,
				    struct pdk_error **err);

/* ---- events (events.c) ---- */

/*
 * Record one of the control plane's own events (`kind`, `attrs` taken or
 * NULL) about `sandbox` ("daemon" for none) with its labels (borrowed, may be
 * NULL) in the audit store; subscribers get it from there. The event is
 * built now (its ts and seq are now's) and queued; the queued events are
 * stored together, in one transaction, before a front door writes its next
 * answer (pdk_ctl_events_store()), at the end of the event loop's current
 * turn, or by pdk_ctl_free() if the loop does not turn again. Order in the
 * chain is the order of the calls.
 */
void pdk_ctl_event(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
		   json_t *attrs);

/*
 * pdk_ctl_event() for a front door's record of a request that leads to a
 * native record (sandbox.create, exec.request, sandbox.destroy...): the event
 * is built now (its ts and seq are now's) and stored in the same transaction
 * as, and before, the next record the control plane appends, so a request
 * costs one audit transaction, not two. It is never left out: a subscriber's
 * replay, the control plane's end and PDK_CTL_HELD_MAX_MS store it at the
 * latest. Order in the chain is the order of the calls.
 */
void pdk_ctl_event_held(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
			json_t *attrs);

/* At most this long (ms) between pdk_ctl_event_held() and the event's store. */
#define PDK_CTL_HELD_MAX_MS 50

/*
 * pdk_ctl_event() for a record made on every request of a hot path (the
 * gateway's tool.call): the event is built now (its ts and seq are now's)
 * and, before this returns, written by one write() to the control object's
 * own audit spool (audit.h, a journal: STATE/audit-spool/ACTOR-ID-GEN.jsonl),
 * not through a store transaction. So it is on disk before the answer of
 * its request is written, and survives the process being killed at any
 * point after. Records queued before it (pdk_ctl_event()) are stored
 * first, by a transaction. It is folded into the audit store (chained, then
 * streamed to subscribers) within PDK_CTL_SPOOL_FOLD_MS, before any other
 * record of this control object is stored (order in the chain is the order
 * of the calls), before a subscriber's replay, and at pdk_ctl_free(); a killed
 * process's spool is folded by the next fold of anyone (docs/audit.md).
 * When the spool cannot be written, the event is stored as pdk_ctl_event()
 * stores it, and the failure is logged: it is never dropped.
 */
void pdk_ctl_event_spooled(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
			   json_t *attrs);

/*
 * pdk_ctl_event_spooled() (no labels) whose attrs (taken) the caller has
 * serialised already: `attrs_text`, their compact JSON text (members in
 * any order; pdk_json_splice() may have made it from parts serialised
 * earlier, off the request's path). The spool's line is that text in the
 * envelope: nothing is serialised twice. The caller guarantees the text
 * is `attrs` (audit.h, pdk_audit_journal_append_line()).
 */
void pdk_ctl_event_spooled_text(struct pdk_ctl *c, const char *sandbox, const char *kind,
				json_t *attrs, const char *attrs_text);

/* At most this long (ms) between pdk_ctl_event_spooled() and the fold of its record. */
#define PDK_CTL_SPOOL_FOLD_MS 50

/*
 * Store now, in one transaction, the pdk_ctl_event() records not yet stored
 * (and the pdk_ctl_event_held() ones made before them; held ones alone wait
 * as that function says). A front door calls it before it writes an answer
 * (the daemon's HTTP guards, MCP over stdio), so a record is stored before
 * the answer of its request is written.
 */
void pdk_ctl_events_store(struct pdk_ctl *c);

/* Which records a subscriber gets (NULL members: any). */
struct pdk_ctl_sub_filter {
	const char *sandbox, *session, *kind;
	const char *decision; /* only records whose attrs.decision is this ("deny"), or NULL */
	uint64_t since;       /* replay the records after this audit sequence; UINT64_MAX: none */
	/*
	 * Replay only the last `tail` matching records (after `since` when it
	 * is given, else of the whole store), read from the end of the store
	 * (audit.h: an index of the lines narrows one sandbox or kind); 0: all.
	 */
	uint64_t tail;
};

/*
 * One audit record: its sequence, kind and the event, all read from the
 * record's hashed line (audit.h), never from the store's query columns. The
 * event is borrowed and shared by every subscriber: incref it to keep it,
 * never change it.
 */
typedef void (*pdk_ctl_record_cb)(void *ctx, uint64_t seq, const char *kind, json_t *event);

/*
 * Subscribe to the audit store's records: the replay (`since`) first, before
 * this returns, then every new record as it is stored, each once and in
 * order. `cb` runs inside the store's query: it may call
 * pdk_ctl_unsubscribe(), nothing else of the control object. The handle is
 * the caller's until pdk_ctl_unsubscribe() or pdk_ctl_free().
 */
struct pdk_ctl_sub *pdk_ctl_subscribe(struct pdk_ctl *c, const struct pdk_ctl_sub_filter *f,
				      pdk_ctl_record_cb cb, void *ctx);
/* No more records for `s` (safe from within its own callback). NULL-safe. */
void pdk_ctl_unsubscribe(struct pdk_ctl_sub *s);

/* How a paced replay goes at its subscriber's speed (pdk_ctl_subscribe_paced()). */
struct pdk_ctl_sub_pace {
	/* The bytes the subscriber still holds unsent: a page waits while they are many. */
	size_t (*backlog)(void *ctx);
	/* The replay is over: every record up to the head was given; live ones follow. */
	void (*replayed)(void *ctx);
};

/*
 * pdk_ctl_subscribe() whose replay is handed on in pages on later turns of
 * the loop (a few hundred records each, and none while pace->backlog says
 * the subscriber holds over a MiB unsent), so a replay of a million records
 * holds the loop for no more than a page. Records stored meanwhile are
 * replayed too; the live ones follow once the replay is over
 * (pace->replayed, also called, at once on a later turn, when there is
 * nothing to replay), each once, in order. Without `since` or `tail` it is
 * pdk_ctl_subscribe() (replayed is not called). `pace` is copied.
 */
struct pdk_ctl_sub *pdk_ctl_subscribe_paced(struct pdk_ctl *c, const struct pdk_ctl_sub_filter *f,
					    pdk_ctl_record_cb cb, void *ctx,
					    const struct pdk_ctl_sub_pace *pace);

/* ---- the audit chain's state (auditstate.c) ---- */

/*
 * The audit chain's state (borrowed for the call; never changed), the
 * AuditState object of docs/api.yaml: {"state": "ok" or the break's name
 * (pdk_audit_break_name: "altered", "missing", "reordered", "truncated",
 * "bad signature", "column"), "head_seq", "head_hash" (null: empty),
 * "verified_seq" (every record up to it checked: the head when ok, else
 * broken_seq - 1), "signed_seq", "signed_at" (the ts of record signed_seq;
 * null: none), "broken_seq", "detail" (null when ok), "records",
 * "checkpoints", "key_id" (null: no public key), "unfolded_records" (in
 * run spools, not checked yet), "verified_at" (when the verification
 * began: it saw the store as it was then)}. Or `err` when the
 * verification could not be made (I/O: EIO; the end: ENOTCONN).
 */
typedef void (*pdk_ctl_audit_cb)(void *ctx, const json_t *state, const struct pdk_error *err);

/*
 * The state of the whole chain as the newest full verification found it
 * (pdk_audit_verify_chain(): every hash, link, checkpoint signature and
 * query column), given to `cb`: at once when that verification began at
 * most `max_age_s` seconds ago, else once a verification ends. That runs
 * on a worker thread with its own read-only connection to the store, never
 * on the loop; at most one runs at a time, and a request made while one
 * runs waits for it (whatever its max_age_s). A client that goes away
 * meanwhile is still called back (the front door answers no one then).
 * -ENOTCONN at the end of the control object; -EIO when no thread can be
 * started. A verification still running at pdk_ctl_free() is stopped and
 * joined; its waiters get ENOTCONN.
 */
PDK_MUST_CHECK int pdk_ctl_audit_state(struct pdk_ctl *c, uint64_t max_age_s, pdk_ctl_audit_cb cb,
				       void *ctx, struct pdk_error **err);

/* ---- approvals (approvals.c) ---- */

/*
 * One queue for every action a human must allow (docs/approvals.md): a
 * changed or new tool definition, a gateway call whose policy says
 * require_approval, a commit to the host, a new egress host. The queue is
 * STATE/approvals.db, shared by every paddock process of the state
 * directory: a `paddock gateway` or `paddock mcp` asks, and the daemon's
 * API, the CLI (on the state directory itself) and the dashboard decide.
 * The process that asked records approval.requested, then
 * approval.granted / approval.denied (with the approver) or
 * approval.timeout in its audit store, and calls back its waiter.
 *
 * States: "pending", then "approved", "denied", "timed_out" (nobody decided
 * before the timeout) or "withdrawn" (the asker gave up: its client went
 * away, or it ended).
 */
#define PDK_CTL_APPROVAL_TIMEOUT_S    300  /* the default wait */
#define PDK_CTL_APPROVALS_PENDING_MAX 1000 /* pending requests in one state directory */

struct pdk_ctl_approval_req {
	const char *kind;      /* "tool.call", "tool.pin", "commit", "egress.host" */
	const char *principal; /* who asked (the agent's identity) */
	const char *sandbox;   /* the sandbox concerned, or NULL */
	const char *summary;   /* one line: what would happen ("fs__write_file /etc/x") */
	const char *reason;    /* why it needs approval ("rule writes-need-approval") */
	json_t *detail;        /* redacted arguments, a pin's diff... (borrowed; NULL: none) */
	uint64_t timeout_s;    /* how long it stays pending (0: PDK_CTL_APPROVAL_TIMEOUT_S) */
};

/* A decided request, as its waiter is told (borrowed for the call). */
struct pdk_ctl_approval {
	const char *id;
	const char *state;    /* "approved", "denied", "timed_out", "withdrawn" */
	const char *approver; /* who decided (NULL: nobody) */
	const char *note;     /* what they said (NULL: nothing) */
};

typedef void (*pdk_ctl_approval_cb)(void *ctx, const struct pdk_ctl_approval *a);

struct pdk_ctl_approval_wait; /* one waiter (opaque) */

/*
 * Queue request `r` and wait for its decision: `id` (37 bytes) gets its
 * id, approval.requested is recorded, and `cb` is called once, on the
 * loop, when it is decided (by any process) or times out. *out (may be
 * NULL) is the waiter, valid until `cb`. -EDQUOT past
 * PDK_CTL_APPROVALS_PENDING_MAX pending, -EINVAL (field) for a missing
 * kind, principal or summary, -E2BIG (field "detail") for a detail over
 * 1 MiB of JSON, -EIO when the queue cannot be written. A summary or
 * reason over 1024 bytes is cut there. A pending request whose asker ended
 * (its pid and start time, judged only from the asker's pid namespace) is
 * answered "withdrawn" by the next list, get, decide or ask of any process;
 * one past its timeout, "timed_out".
 */
PDK_MUST_CHECK int pdk_ctl_approval_ask(struct pdk_ctl *c, const struct pdk_ctl_approval_req *r,
					pdk_ctl_approval_cb cb, void *ctx, char id[37],
					struct pdk_ctl_approval_wait **out, struct pdk_error **err);

/* The asker gave up: the request is withdrawn, and `cb` is not called. NULL-safe. */
void pdk_ctl_approval_withdraw(struct pdk_ctl_approval_wait *w);

/*
 * The requests of the state directory (new reference): an array of
 * Approval objects (id, kind, state, principal, sandbox, summary, reason,
 * detail, created_at, timeout_at, decided_at, approver, note, asker_pid),
 * pending ones only unless `all`, oldest first. A pending one whose asker
 * is gone is answered "withdrawn" first.
 */
PDK_MUST_CHECK int pdk_ctl_approvals_list(const char *state_dir, bool all, json_t **out,
					  struct pdk_error **err);

/* The Approval object `id` (new reference); -ENOENT when unknown. */
PDK_MUST_CHECK int pdk_ctl_approval_get(const char *state_dir, const char *id, json_t **out,
					struct pdk_error **err);

/*
 * Decide pending request `id`: approved or denied by `approver` (a token's
 * principal, "uid:NAME" for the CLI) with `note` (NULL: none). *out (may
 * be NULL) gets the Approval object after. -ENOENT when unknown, -EALREADY
 * when it is no longer pending (field "state", the message naming it).
 * Works on the state directory without a control object, so the CLI needs
 * no daemon; the asker records the decision in its audit store.
 */
PDK_MUST_CHECK int pdk_ctl_approval_decide(const char *state_dir, const char *id, bool approve,
					   const char *approver, const char *note, json_t **out,
					   struct pdk_error **err);

/*
 * pdk_ctl_approval_decide() on the state directory of `c`, through the
 * queue connection `c` asks on (opened at the first use): what a process
 * that may ask itself (a daemon, paddock mcp, the gateway) decides with, as
 * a second SQLite connection of one process to the queue would share, and
 * on its close could drop, that process's POSIX locks on it. Same results.
 */
PDK_MUST_CHECK int pdk_ctl_approval_decide_ctl(struct pdk_ctl *c, const char *id, bool approve,
					       const char *approver, const char *note, json_t **out,
					       struct pdk_error **err);

#endif
