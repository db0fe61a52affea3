/*
 * control-internal.h - what the control layer's files share: the control
 * object, the per-sandbox object, the calls to a supervisor and the
 * functions one file offers the others. Not a contract: control.h is.
 */
#ifndef PDK_CONTROL_INTERNAL_H
#define PDK_CONTROL_INTERNAL_H

#include "common.h"
#include "audit.h"
#include "base.h"
#include "control.h"

#include <event2/buffer.h>
#include <event2/event.h>

struct pdk_ctl {
	struct event_base *base;
	struct pdk_log log;
	char *const *envp; /* handed to supervisors (the front end's) */
	struct pdk_store *store;
	struct pdk_audit *audit;
	unsigned char key[PDK_TOKEN_KEY_LEN];
	char *state_dir, *run_dir;
	int exe_fd;                   /* /proc/self/exe, opened first: the supervisor binary */
	int lock_fd;                  /* STATE/daemon.lock, flock'd for the object's life */
	uint64_t retention_ns;        /* ended sandboxes are kept that long (0: not kept) */
	bool started;                 /* pdk_ctl_start() ran: pool passes may start sandboxes */
	bool stopping;                /* shutdown: no timer work, no pool refill */
	unsigned ticks;               /* pdk_ctl_tick() passes so far */
	struct pdk_ctl_sb *sandboxes; /* every sandbox known */
	struct pdk_ctl_sub *subscribers;
	uint64_t event_seq;             /* the control plane's own event sequence */
	uint64_t fanout_seq;            /* the last audit seq handed to subscribers */
	bool fanning, fan_again;        /* a fan-out runs; another was asked meanwhile */
	struct event *refill;           /* the held-back pool pass after a claim (pools.c) */
	struct pdk_ctl_handle *handles; /* the handles front doors gave their clients (handles.c) */
	char *own_dir;                  /* lock, store and key: state_dir or a private directory */
	char *actor;                    /* its events' actor */
	bool end_with_us;               /* the supervisors get SIGTERM when we end (opts) */
	struct event *fold_ev;          /* the fold of the run spools after a tick (ingest.c) */
	unsigned fold_held;             /* ticks the fold waited for running execs */
	char *fold_err;                 /* the last fold's error, logged once (NULL: none) */
	json_t *held;                   /* events held for the next append (events.c), or NULL */
	struct event *held_ev;          /* stores the held events if no append takes them first */
	struct event *turn_ev;          /* stores the queued events at the turn's end (events.c) */
	bool turn_pending;              /* c->held has a pdk_ctl_event() record */
	struct pdk_audit_journal *journal; /* pdk_ctl_event_spooled()'s spool, or NULL (events.c) */
	struct event *journal_ev;          /* its fold, PDK_CTL_SPOOL_FOLD_MS after a record */
	/* The approval queue, opened at the first request this object asks (approvals.c). */
	struct pdk_db *approvals;
	struct pdk_ctl_approval_wait *approval_waiters; /* its requests being waited for */
	struct event *approval_ev; /* the pass over them, while there are any */
	struct pdk__audit_state
		*audit_state; /* verifications of the chain (auditstate.c), or NULL */
	/* Command starts admitted a few at a time (exec.c). */
	unsigned exec_starts;  /* how many at once (0: no bound) */
	unsigned starting;     /* commands holding a start slot */
	unsigned waiting;      /* commands waiting for one, over every sandbox */
	uint64_t start_seq;    /* the last start's turn (pdk_ctl_sb.start_seq) */
	struct event *slot_ev; /* the next slot's expiry, or a pass over the waiting */
};

/* auditstate.c: stop and join a verification still running, answer its waiters ENOTCONN. */
void pdk__audit_state_free(struct pdk_ctl *c);

/* approvals.c: withdraw the requests still waited for, close the queue (the object's end). */
void pdk__approvals_free(struct pdk_ctl *c);

/* handles.c: forget every handle (the control object's end). */
void pdk__handles_free_all(struct pdk_ctl *c);

/* A control call's answer: `reply` NULL when the connection was lost (borrowed; fds owned). */
typedef void (*pdk_sb_reply_cb)(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds,
				void *ctx);

struct pdk_sb_call {
	struct pdk_sb_call *next;
	uint64_t req;
	pdk_sb_reply_cb cb;
	void *ctx;
};

/* A create waiting for the sandbox to be built (the first, and repeats with its key). */
struct pdk_sb_waiter {
	struct pdk_sb_waiter *next;
	pdk_ctl_created_cb cb;
	void *ctx;
	bool again;
};

/* A destroy waiting for the sandbox's end (the first, and any asked while it ends). */
struct pdk_sb_destroy_wait {
	struct pdk_sb_destroy_wait *next;
	pdk_ctl_destroyed_cb cb;
	void *ctx;
};

struct pdk_ctl_sb {
	struct pdk_ctl_sb *next;
	struct pdk_ctl *c;
	struct pdk_store_sandbox row; /* what the store holds (kept in step) */
	json_t *labels;               /* row.labels parsed */
	json_t *limits;               /* the spec's overrides.limits, or an empty object */
	json_t *status;               /* the supervisor's last status answer, or NULL */
	json_t *facts;                /* its "facts" (workspace, network), or NULL */
	pid_t init_pid;
	int ctl_fd, ready_fd, pidfd;
	/*
	 * A lost sandbox whose supervisor lived on: the text of its
	 * RUNDIR/sb/ID/cgroup, kept for pdk__sb_reap_cgroup_text() once the
	 * supervisor is killed at its destroy (its directory is gone by then).
	 */
	char *lost_cgroup;
	struct event *ctl_ev, *ready_ev;
	char ready_buf[4096];
	size_t ready_len;
	uint64_t next_req;
	struct pdk_sb_call *calls;
	struct pdk_sb_waiter *waiters;
	struct pdk_ctl_exec *execs;
	struct pdk_ctl_exec *waiting; /* of execs: those waiting for a start slot, oldest first */
	uint64_t start_seq;           /* the turn of its last command started (exec.c) */
	uint64_t last_active_ns;      /* CLOCK_MONOTONIC of the last use */
	char *end_reason;             /* why it is being destroyed */
	char *end_operator;           /* who asked for it (an admin's name, sandbox:ID), or NULL */
	unsigned token_ops;           /* the create token's operations (0: all) */
	uint64_t token_ttl_s;         /* its lifetime (0: PDK_TOKEN_TTL_MAX) */
	bool destroying;
	bool spilled; /* a command's output was spilled into /tmp/.paddock/exec (capture.c) */
	struct pdk_sb_destroy_wait *destroy_waiters; /* destroys waiting for the end, in order */
	bool first_exec_pending; /* claimed from a pool, its first exec not answered yet */
	bool warming;            /* a pool member's warm-up exec runs: not claimable yet */
	json_t *warm_exec;       /* that exec's id, once started */
	struct event *ingest_ev; /* a spool ingest held back while an exec runs (ingest.c) */
	/* Destroyed while it starts: the bound on that start (sandboxes.c). */
	struct event *start_grace_ev;
	bool dirty;              /* row changed in memory, saved by the next ingest pass */
	unsigned transfers;      /* archive transfers running (exec.c: TRANSFERS_MAX) */
	struct pdk__port *ports; /* forwarded ports (ports.c) */
	struct pdk__proc *procs; /* detached processes, newest first (procs.c) */
};

/* ---- ctl.c ---- */
/* A message for the front end's log (NULL-safe as pdk_log is). */
#define pdk__ctl_log(c, level, ...) pdk_log(&(c)->log, (level), __VA_ARGS__)
/* evbuffer_add(), an allocation failure being pdk_oom(). */
void pdk__ctl_buf_add(struct evbuffer *buf, const void *data, size_t len);
struct evbuffer *pdk__ctl_buf_new(void);
/*
 * Stop watching a descriptor: free its event and close it, either of which
 * may be unset (NULL, -1); both are unset afterwards.
 */
void pdk__ctl_unwatch(struct event **ev, int *fd);

/* ---- sandboxes.c ---- */
struct pdk_ctl_sb *pdk__sb_new(struct pdk_ctl *c);
struct pdk_ctl_sb *pdk__sb_find(struct pdk_ctl *c, const char *id);
void pdk__sb_unlink(struct pdk_ctl_sb *sb);
void pdk__sb_free(struct pdk_ctl_sb *sb);
void pdk__sb_free_all(struct pdk_ctl *c);
char *pdk__sb_dir(const struct pdk_ctl_sb *sb);
void pdk__sb_save(struct pdk_ctl_sb *sb);
void pdk__sb_set_state(struct pdk_ctl_sb *sb, const char *state);
/* The expiry of a TTL of `ttl_s` seconds from now (0: none). */
void pdk__sb_set_ttl(struct pdk_ctl_sb *sb, uint64_t ttl_s);
/* A new sandbox object, stored and its supervisor started; NULL + *err on failure. */
struct pdk_ctl_sb *pdk__sb_start(struct pdk_ctl *c, const struct pdk_ctl_create *r, bool pool,
				 struct pdk_error **err);
/*
 * Who asks for the end of `sb` (NULL or "": nobody named), recorded with
 * its sandbox.destroy as attrs.operator; the first who asked is kept.
 */
void pdk__sb_set_operator(struct pdk_ctl_sb *sb, const char *operator);
/*
 * Destroy: ask the supervisor, then forget the sandbox. One still starting is
 * let finish its start first (at most START_GRACE_MS, then killed): its
 * ready message then calls pdk__sb_destroy_started().
 */
void pdk__sb_destroy(struct pdk_ctl_sb *sb, const char *reason);
void pdk__sb_destroy_started(struct pdk_ctl_sb *sb);
/*
 * RUNDIR/sb/ID/ending: written when a destroy starts, gone with the
 * directory once the sandbox is forgotten. pdk__sb_ending() is what it says
 * ({"reason", "operator"}, new reference), or NULL when there is none.
 */
#define PDK_CTL_ENDING "ending"
json_t *pdk__sb_ending(struct pdk_ctl_sb *sb);
/* Every destroy waiting on `sb` answered: the sandbox is in `state` (ended, lost). */
void pdk__sb_answer_destroy(struct pdk_ctl_sb *sb, const char *state);
/* Forget the sandbox: spool ingested, run dir removed, row moved to the ended ones. */
void pdk__sb_forget(struct pdk_ctl_sb *sb, const char *final_state);
/*
 * A lost sandbox's cgroup, described by `text` (RUNDIR/sb/ID/cgroup, which
 * its supervisor wrote): every process in it killed, the directories
 * removed, a sandbox.reap event saying so (adopt.c). The _file form reads
 * the file (pdk__sb_cgroup_text(): its text, NULL when there is none, a
 * read error said as a sandbox.reap event); a missing one is a sandbox that
 * had no cgroup left to reap.
 */
void pdk__sb_reap_cgroup_text(struct pdk_ctl_sb *sb, const char *text);
void pdk__sb_reap_cgroup_file(struct pdk_ctl_sb *sb);
char *pdk__sb_cgroup_text(struct pdk_ctl_sb *sb);
/* Every create waiting on `sb`: its view and token, or the error. */
void pdk__sb_answer_waiters(struct pdk_ctl_sb *sb, const struct pdk_error *e);
void pdk__sb_add_waiter(struct pdk_ctl_sb *sb, pdk_ctl_created_cb cb, void *ctx, bool again);

/* ---- ports.c ---- */
/*
 * Close every forwarded port of `sb`: listeners gone, connections cut. With
 * a `reason`, each close is recorded (sandbox.port.close by "daemon").
 */
void pdk__sb_ports_close(struct pdk_ctl_sb *sb, const char *reason);

/* ---- procs.c ---- */
/* Forget every detached process of `sb` (their commands ended with the sandbox's execs). */
void pdk__sb_procs_free(struct pdk_ctl_sb *sb);

/* ---- launch.c: starting a supervisor ---- */
/*
 * Start the sandbox's supervisor with `spec` (its JSON text): the daemon's
 * own binary as `paddock supervise`, in a session of its own, reporting on
 * a ready pipe the loop watches (pdk__sb_ready). Distinct from
 * pdk_proc_clone() (a process in namespaces) and pdk_sandbox_exec() (a
 * process started by a sandbox's init).
 */
PDK_MUST_CHECK int pdk__ctl_start_supervisor(struct pdk_ctl_sb *sb, const char *spec,
					     struct pdk_error **err);
/* The spec JSON of a create (new reference). */
json_t *pdk__ctl_spec(struct pdk_ctl *c, const char *id, const struct pdk_ctl_create *r);

/* ---- calls.c: the control socket ---- */
PDK_MUST_CHECK int pdk__sb_connect(struct pdk_ctl_sb *sb);
/* Send `op` (taken) with fds (borrowed); `cb` gets the answer. -errno when it cannot be sent. */
PDK_MUST_CHECK int pdk__sb_call(struct pdk_ctl_sb *sb, json_t *op, const int *fds, size_t nfds,
				pdk_sb_reply_cb cb, void *ctx);
/* The answer is an error (or the connection was lost). */
bool pdk__svc_failed(const json_t *reply);
/* Every call still waiting gets its callback with no answer. */
void pdk__sb_fail_calls(struct pdk_ctl_sb *sb);
void pdk__sb_disconnect(struct pdk_ctl_sb *sb);
/* A status answer: the view's figures and the state the supervisor reports. */
void pdk__sb_status_answer(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx);
/* Ask for the status now (its answer refreshes the view). */
void pdk__sb_ask_status(struct pdk_ctl_sb *sb);
/* Close every descriptor of an answer nobody takes. */
void pdk__close_fds(int *fds, size_t nfds);

/* ---- pools.c ---- */
/* The timer's pass (skipped while a refill is held back after a claim). */
void pdk__pools_tick(struct pdk_ctl *c);
/* A pass at once. */
void pdk__pools_now(struct pdk_ctl *c);
/* A ready pool member for `r`, when it asks for nothing a pool member lacks, or NULL. */
struct pdk_ctl_sb *pdk__pool_member(struct pdk_ctl *c, const struct pdk_ctl_create *r);
/* A member was claimed: the refill is held back until its first exec answered. */
void pdk__pools_claimed(struct pdk_ctl *c);
/* Whether the refill is held back: a claimed sandbox still waits for its first exec. */
bool pdk__pools_holding(const struct pdk_ctl *c);
/* A claimed sandbox's first exec answered; the held refill starts when no other waits. */
void pdk__sb_first_exec_done(struct pdk_ctl_sb *sb);
/* A pool member's warm-up exec (a new member, once it runs). */
void pdk__warm_start(struct pdk_ctl_sb *sb);
/* An exit report: true when it was the warm-up's (and is handled). */
bool pdk__warm_exited(struct pdk_ctl_sb *sb, json_t *ev);

/* ---- adopt.c ---- */
void pdk__sb_adopt_all(struct pdk_ctl *c);

/* ---- budget.c ---- */
/* The spec's overrides.limits value `key` as a number (bytes, ms, count; 0: none). */
uint64_t pdk__sb_limit(const struct pdk_ctl_sb *sb, const char *key);
/* False (and *what names the budget) when the output or commands budget is spent. */
bool pdk__sb_budget_ok(const struct pdk_ctl_sb *sb, const char **what);
/* The output budget left, as a cap on downloads (0 when spent, else UINT64_MAX). */
uint64_t pdk__sb_budget_left(const struct pdk_ctl_sb *sb);
/* Charge output bytes and commands to the budget, saved now. */
void pdk__sb_charge(struct pdk_ctl_sb *sb, uint64_t output_bytes, uint64_t commands);
/*
 * The same for an exec: the row is saved after the exec's answer is written
 * (with its ingest pass: pdk__sb_ingest_soon), not in the middle of the exec.
 */
void pdk__sb_charge_exec(struct pdk_ctl_sb *sb, uint64_t output_bytes, uint64_t commands);
/*
 * The budget figures of a view: the supervisor's `status` usage and limits
 * (may be NULL), the create's `limits` (overrides.limits), the daemon's
 * output and commands counts.
 */
void pdk__budgets(const json_t *status, const json_t *limits, uint64_t output_bytes,
		  uint64_t commands, struct pdk_ctl_figures *usage, struct pdk_ctl_figures *lim,
		  struct pdk_ctl_figures *remaining);
void pdk__figures_add(struct pdk_ctl_figures *f, const char *name, int64_t value);
void pdk__figures_release(struct pdk_ctl_figures *f);

/* ---- view.c ---- */
void pdk__sb_view(const struct pdk_ctl_sb *sb, struct pdk_ctl_view *out);
/* The view of a stored record; -EINVAL when it is not one. */
PDK_MUST_CHECK int pdk__view_from_record(const char *text, struct pdk_ctl_view *out);
/* The kept ended sandbox `id` in *out; false when there is none. */
bool pdk__sb_ended(struct pdk_ctl *c, const char *id, struct pdk_ctl_view *out);

/* ---- ingest.c ---- */
/* Read new complete lines of the sandbox's spool into the audit store. */
void pdk__sb_ingest(struct pdk_ctl_sb *sb);
/* The supervisor's nudge: an ingest on the loop's next turn, or after the running exec. */
void pdk__sb_ingest_later(struct pdk_ctl_sb *sb);
/* An exec of `sb` answered: a held-back ingest runs right after the answer is written. */
void pdk__sb_ingest_soon(struct pdk_ctl_sb *sb);
/* The tick: fold the run spools that wait (paddock run's records) into the audit store. */
void pdk__ctl_fold_runs(struct pdk_ctl *c);

/* ---- events.c ---- */
/* Hand audit records after c->fanout_seq to the subscribers. */
void pdk__ctl_fanout(struct pdk_ctl *c);

/*
 * The events not yet stored stored now: the pdk_ctl_event_spooled() ones
 * folded from their spool first, then the queued pdk_ctl_event() records
 * and the pdk_ctl_event_held() ones in one transaction; nothing when none.
 * Whatever appends to the audit store besides events.c (a spool's ingest,
 * the fold of the run spools) calls it first, so the chain keeps the order
 * of the calls.
 */
void pdk__ctl_held_flush(struct pdk_ctl *c);

/* The held events stored and their timers freed: the control plane is going. */
void pdk__ctl_held_free(struct pdk_ctl *c);
/*
 * pdk_ctl_event() of a sandbox's last event (sandbox.destroy,
 * sandbox.create_failed), with a checkpoint signed at it in the same
 * transaction, as `paddock run` signs one when its sandbox ends.
 */
void pdk__ctl_event_final(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
			  json_t *attrs);
void pdk__subs_free_all(struct pdk_ctl *c);

/* ---- capture.c: one output stream of a command, answered at its end ---- */
struct pdk_capture {
	const char *name; /* "stdout" | "stderr" */
	char *head, *tail;
	size_t head_max, head_len, tail_max, tail_pos, tail_len;
	uint64_t total;
	uint64_t lines;   /* newlines seen in the whole output */
	char tail_before; /* the byte just before the tail's oldest, once the ring has wrapped */
	int fd;           /* our end of the command's pipe (or the pty), -1 once closed */
	struct event *ev;
	bool eof;
	/* The full output inside the sandbox, opened through the supervisor when the cap is passed.
	 */
	char *file;
	int file_fd;
	bool file_requested, file_failed;
	struct evbuffer *pending; /* held while the file is being opened */
	/* Called once the file's open is answered (its bytes are then in it), if set. */
	void (*spill_ready)(void *arg);
	void *spill_ready_arg;
	struct evbuffer *early; /* read before the start answer */
	char *tail_linear;      /* the tail in order, for a result */
};

/* Keep the first cap/2 and the last cap - cap/2 bytes. */
void pdk__capture_init(struct pdk_capture *c, const char *name, uint64_t cap);
void pdk__capture_release(struct pdk_capture *c);
/* `n` bytes of command `exec_id` of `sb`: kept, and past the cap, spilled into the file. */
void pdk__capture_add(struct pdk_ctl_sb *sb, const json_t *exec_id, struct pdk_capture *c,
		      const char *p, size_t n);
/* Whether `c`'s spill file is still being opened (its bytes are not all in it yet). */
bool pdk__capture_spill_pending(const struct pdk_capture *c);
/* Forget `c` in its pending spill-file open (the command ends; the file still gets its bytes). */
void pdk__capture_detach(struct pdk_ctl_sb *sb, struct pdk_capture *c);
/*
 * The result of the capture (borrowing from it: valid until it is released).
 * Past the cap, the head ends at its last newline and the tail starts after
 * its first, so that only whole lines are dropped; a head or tail holding no
 * line end is kept as it is (out->line_cut).
 */
void pdk__capture_output(struct pdk_capture *c, struct pdk_ctl_output *out);

/* ---- exec.c ---- */
/* An unsolicited {"ev":"exit"} from the supervisor. */
void pdk__exec_exited(struct pdk_ctl_sb *sb, json_t *ev);
/* The control connection is gone: every exec of the sandbox ends. */
void pdk__exec_abort_all(struct pdk_ctl_sb *sb);
/*
 * tar inside the sandbox for the archive operations: `create` makes an
 * archive of `dir` (at most `max` bytes), handed to `cb` a chunk at a time
 * (pdk_ctl_archive_get()), else extracts `body` (taken) into it. *out (may
 * be NULL) gets the transfer. -EAGAIN (body freed) when the sandbox has
 * its most transfers running already (pdk__transfer_check()).
 */
PDK_MUST_CHECK int pdk__exec_tar(struct pdk_ctl_sb *sb, const char *dir, bool create, char *body,
				 size_t body_len, uint64_t max, pdk_ctl_archive_cb cb, void *ctx,
				 struct pdk_ctl_exec **out, struct pdk_error **err);
/* 0 when `sb` may start another archive transfer, else -EAGAIN + *err (a retry later may). */
PDK_MUST_CHECK int pdk__transfer_check(struct pdk_ctl_sb *sb, struct pdk_error **err);

/* ---- tarcheck.c ---- */
/*
 * Make the tar archive `buf` (`len` bytes, changed in place) safe to unpack
 * for a sandbox: the set-user-ID and set-group-ID bits of every member's
 * mode cleared (its checksum recomputed). 0, or negative + *err (field
 * "body"): -EPERM for a device node, -EINVAL for bytes the walk cannot read
 * as ustar, GNU or pax (compressed ones too).
 */
PDK_MUST_CHECK int pdk__tar_sanitize(char *buf, size_t len, struct pdk_error **err);

/* ---- ops.c ---- */
/* Record the op (sandbox.control) and send it; the answer goes to `cb` as a document. */
PDK_MUST_CHECK int pdk__ctl_forward(struct pdk_ctl_sb *sb, json_t *op, pdk_ctl_doc_cb cb, void *ctx,
				    struct pdk_error **err);

#endif
