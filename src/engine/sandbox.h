/*
 * sandbox.h - create a sandbox, run one command in it, wait, destroy.
 *
 * This is the one place that knows the order of setup (DESIGN.md):
 *   parent: cgroup, init fd, mount plan + Landlock rules, seccomp filter,
 *           socketpairs, clone (CLONE_VM|CLONE_VFORK) into new namespaces;
 *   child:  join the cgroup, id maps, cgroup namespace, hostname, lo up,
 *           mounts + pivot_root,
 *           cwd, rlimits, Landlock, drop caps, no_new_privs, seccomp,
 *           execveat(init).
 * Any failed step aborts creation (fail closed).
 */
#ifndef PDK_SANDBOX_H
#define PDK_SANDBOX_H

#include "common.h"
#include "base.h"
#include "cgroup.h"
#include "child.h"
#include "policy.h"
#include "telemetry.h"
#include "workspace.h"

#include <poll.h>
#include <sys/types.h>

struct pdk_sandbox_config {
	const char *id;                  /* NULL: a new UUIDv7 */
	const struct pdk_policy *policy; /* borrowed; limits already include overrides */
	char *const *argv;               /* the command; NULL in service mode */
	char *const *envp;               /* its whole environment (service mode: the init's) */
	/*
	 * Service mode: no command; the init waits for pdk_sandbox_exec()
	 * requests and the caller runs the loop (pdk_sandbox_pollfds(),
	 * pdk_sandbox_dispatch(), pdk_sandbox_next_proc()).
	 */
	bool service;
	const char *cwd;       /* inside; NULL = the workspace, else "/" */
	const char *workspace; /* absolute host path; NULL = none */
	const char *ws_view;   /* where the sandbox sees it (absolute); NULL = at its host path */
	enum pdk_ws_mode ws_mode;
	struct pdk_ws *ws; /* PDK_WS_OVERLAY: the change set that receives the changes (borrowed) */
	char *const *extra_ro; /* more read-only binds (may be NULL) */
	char *const *extra_rw; /* more read-write binds (may be NULL) */
	const char *init_path; /* NULL: the settings', else paddock-init next to us */
	/*
	 * What the front end read from its environment (base/settings.h;
	 * borrowed; may be NULL): the init, the cgroup parent, the egress
	 * proxy's resolver files, trust store and credential secrets.
	 */
	const struct pdk_settings *settings;
	const char *runtime_dir;   /* the runtime directory (base/paths.h): scratch files */
	char *const *private_dirs; /* hidden wherever the view holds them (mount.h); may be NULL */
	struct pdk_events *events; /* borrowed; may be NULL */
	const struct pdk_cgroup_opts *cgroup_opts; /* may be NULL */
	/* This process's mount table as the caller read it (borrowed, may be NULL: see cgroup.h).
	 */
	const char *mountinfo;
	const struct pdk_log *log; /* downgrades and other notices (borrowed); may be NULL */
	/*
	 * The root: an image's layers (host paths, topmost first, borrowed;
	 * mount.h), stacked under a writable layer of the sandbox's own of at
	 * most `image_root_size` bytes (0: the tmpfs default); NULL: the host's
	 * root, as the policy shows it. `image` and `image_digest` (borrowed,
	 * may be NULL) are what sandbox.create records of it.
	 */
	char *const *image_layers;
	uint64_t image_root_size;
	/*
	 * An image being built: a host directory holding the writable layer's
	 * `upper` and `work`, kept by the caller (mount.h); NULL: a tmpfs.
	 */
	const char *image_rw_dir;
	/*
	 * The ids of the sandbox's user inside (an image's `user`), mapped to
	 * the caller's: only when user_set; else the caller's own, 1:1.
	 */
	bool user_set;
	uid_t uid;
	gid_t gid;
	const char *image;
	const char *image_digest;
};

enum pdk_sandbox_end {
	PDK_SANDBOX_EXITED = 0,  /* the command exited; exit_code */
	PDK_SANDBOX_SIGNALED,    /* the command died of `signal` */
	PDK_SANDBOX_TIMEOUT,     /* the wall-clock limit was reached; the tree was killed */
	PDK_SANDBOX_OOM,         /* the command was killed by the OOM killer (memory limit) */
	PDK_SANDBOX_EXEC_FAILED, /* the command could not be started; exec_errno */
	PDK_SANDBOX_LOST,        /* init ended without reporting (killed from outside) */
};

struct pdk_sandbox_result {
	enum pdk_sandbox_end end;
	int exit_code;
	int signal;
	int exec_errno;
	uint64_t setup_ns;    /* create() start to the init running */
	uint64_t wall_ns;     /* command start to end */
	uint64_t cpu_ns;      /* CPU time of everything in the sandbox */
	uint64_t memory_peak; /* bytes (cgroup; else the largest RSS) */
	uint64_t oom_kills;
	uint64_t pids_denied;
	unsigned downgraded; /* enum pdk_best_effort_flags not applied */
};

struct pdk_sandbox;

/*
 * Build the sandbox and start the command in it. On success *out owns a
 * running sandbox (destroy it with pdk_sandbox_destroy()). On failure
 * nothing is left behind and *err says which step failed and why.
 */
PDK_MUST_CHECK int pdk_sandbox_create(const struct pdk_sandbox_config *cfg,
				      struct pdk_sandbox **out, struct pdk_error **err);

/* The sandbox's id (UUIDv7 text). Borrowed. */
const char *pdk_sandbox_id(const struct pdk_sandbox *sb);

/* Host pid of the sandbox's init (0 for a NULL sandbox). */
pid_t pdk_sandbox_init_pid(const struct pdk_sandbox *sb);

/*
 * Supervise until the command ends: enforce the wall-clock limit, forward
 * every signal read from `sigfd` (a signalfd, or -1) to the command, collect
 * accounting. Fills *res. Returns 0, or negative + *err on an internal error.
 *
 * `release_ms` (0: never): once the command has run that long, the calling
 * process gives back the pages of its binary that its start-up touched
 * (pdk_mem_release_startup(), base/mem.h), once; the loop faults back the
 * few it uses. For a caller whose only work until the command ends is this
 * loop (paddock run), so that a long-lived supervisor is small; commands
 * shorter than `release_ms` never pay the faults.
 */
PDK_MUST_CHECK int pdk_sandbox_wait(struct pdk_sandbox *sb, int sigfd, uint32_t release_ms,
				    struct pdk_sandbox_result *res, struct pdk_error **err);

/*
 * The directory fd of a disk-limited workspace's upper layer (a tmpfs that
 * outlives the sandbox), for pdk_ws_import_upper() once the sandbox ended;
 * the caller owns it. -1 when there is none.
 */
int pdk_sandbox_take_upper_fd(struct pdk_sandbox *sb);

/* Send `sig` to the command (through init). 0 or -errno. */
PDK_MUST_CHECK int pdk_sandbox_signal(struct pdk_sandbox *sb, int sig);

/* ---- service mode ---- */

/* One process to start in a service-mode sandbox. */
struct pdk_sandbox_exec_req {
	char *const *argv; /* argv[0] is looked up in envp's PATH by the init */
	char *const *envp; /* the whole environment */
	const char *cwd;   /* inside; NULL = "/" */
	int fds[3];        /* stdin, stdout, stderr (borrowed), when pty_fd < 0 */
	int pty_fd;        /* a pty's slave (borrowed): the controlling terminal; or -1 */
};

/*
 * Ask the init to start a process. Returns 0 and the new exec id in
 * *exec_id (>= 1, never reused); its start (or failure) and its exit come
 * later from pdk_sandbox_next_proc(). Negative + *err when the request
 * cannot be sent (too large: -E2BIG; the init is gone: -EPIPE).
 */
PDK_MUST_CHECK int pdk_sandbox_exec(struct pdk_sandbox *sb, const struct pdk_sandbox_exec_req *req,
				    uint64_t *exec_id, struct pdk_error **err);

/* Signal the process group of exec `exec_id` (through the init). 0 or negative + *err. */
PDK_MUST_CHECK int pdk_sandbox_signal_exec(struct pdk_sandbox *sb, uint64_t exec_id, int sig,
					   struct pdk_error **err);

enum pdk_sandbox_proc_kind {
	PDK_SANDBOX_PROC_STARTED = 1, /* pid */
	PDK_SANDBOX_PROC_FAILED,      /* err, stage (enum pdk_init_stage) */
	PDK_SANDBOX_PROC_EXITED,      /* status, cpu_us, maxrss_kb */
};

struct pdk_sandbox_proc {
	enum pdk_sandbox_proc_kind kind;
	uint64_t exec_id;
	int pid; /* inside the sandbox */
	int err;
	int stage;
	int status;     /* as from waitpid() */
	uint64_t ts_ns; /* CLOCK_REALTIME */
	uint64_t cpu_us;
	uint64_t maxrss_kb;
};

/* At most this many pollfds are filled by pdk_sandbox_pollfds(). */
#define PDK_SANDBOX_MAX_POLLFDS 261

/*
 * The descriptors the caller's loop polls for the sandbox: the init's
 * pidfd, its control socket, the exec tracer's (when tracing), the egress
 * proxy's (allowlist mode: its events fail closed). Fills
 * pfd[0..n) and returns n. Call again before every poll().
 */
size_t pdk_sandbox_pollfds(struct pdk_sandbox *sb, struct pollfd *pfd, size_t max);

/* The longest the loop may sleep for the sandbox's sake (ms), or -1. */
int pdk_sandbox_poll_timeout_ms(struct pdk_sandbox *sb);

/*
 * After poll(): answer exec-tracing notifications, stop the sandbox when
 * the egress proxy could not record an event, collect the init if it
 * ended. `pfd` and `n` are what pdk_sandbox_pollfds() filled. 0, or
 * negative + *err on an internal error.
 */
PDK_MUST_CHECK int pdk_sandbox_dispatch(struct pdk_sandbox *sb, struct pollfd *pfd, size_t n,
					struct pdk_error **err);

/* The next start/failure/exit reported by the init: 1 (filled *p), 0 when none is pending. */
int pdk_sandbox_next_proc(struct pdk_sandbox *sb, struct pdk_sandbox_proc *p);

/*
 * The exits of the traced processes that the kernel keeps for their pidfds
 * (exec tracing on Linux 6.15 and later: pdk_exectrace_lazy_exits()),
 * recorded (process.exit) for each one that has ended; no wait. Once per
 * turn of the loop, after pdk_sandbox_next_proc() has drained what the
 * init reported: the exit the caller passes on (to the daemon, to its
 * client) is not kept waiting for these records. pdk_sandbox_dispatch()
 * does not do it; pdk_sandbox_poll_timeout_ms() wakes the loop for it.
 * Without tracing, or on older kernels (the pidfds are polled and their
 * exits read in pdk_sandbox_dispatch()), nothing.
 */
void pdk_sandbox_sweep(struct pdk_sandbox *sb);

/* Whether the init is still running (false once it ended, for any reason; NULL: false). */
bool pdk_sandbox_alive(const struct pdk_sandbox *sb);

/*
 * Whether this binary is linked with the egress proxy (network.mode
 * allowlist). The front binary, `paddock`, is not; paddock-full is
 * (docs/internals/binaries.md).
 */
bool pdk_sandbox_has_egress(void);

/* Freeze (pause) or thaw (resume) every process of the sandbox (cgroup freezer). */
PDK_MUST_CHECK int pdk_sandbox_pause(struct pdk_sandbox *sb, struct pdk_error **err);
PDK_MUST_CHECK int pdk_sandbox_resume(struct pdk_sandbox *sb, struct pdk_error **err);

/*
 * Widen the running sandbox's egress allowlist by the rule `r` (its
 * contents taken on success: egress.h, pdk_egress_allow()): the next
 * request the proxy judges may match it. -ENOTSUP when the sandbox has no
 * proxy (network.mode none or host), -ESRCH when it is not running (*r is
 * left to the caller on failure). The sandbox's policy is the caller's to
 * change, so that a restart keeps it.
 */
PDK_MUST_CHECK int pdk_sandbox_egress_allow(struct pdk_sandbox *sb, struct pdk_net_rule *r,
					    struct pdk_error **err);

struct pdk_sandbox_usage {
	uint64_t cpu_ns; /* every task ever in the sandbox's cgroup */
	uint64_t memory_current;
	uint64_t memory_peak;
	uint64_t pids_current;
	uint64_t oom_kills;
	uint64_t pids_denied;
	uint64_t egress_bytes; /* through the egress proxy, both ways (allowlist mode) */
};

/* The sandbox cgroup's directories (pdk_cgroup_describe()); new string, "" without one. */
char *pdk_sandbox_cgroup_describe(const struct pdk_sandbox *sb);

/* Resource use now (cgroup; fields that cannot be read are 0). */
void pdk_sandbox_usage(struct pdk_sandbox *sb, struct pdk_sandbox_usage *u);

/*
 * pdk_sandbox_usage()'s oom_kills alone, one file read instead of six: what
 * the supervisor reads around every exec to tell an OOM kill.
 */
uint64_t pdk_sandbox_oom_kills(struct pdk_sandbox *sb);

/*
 * An O_PATH directory fd of the sandbox's root as its processes see it
 * (/proc/<init>/root), for openat2() with RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS. Caller owns it. Negative + *err.
 */
PDK_MUST_CHECK int pdk_sandbox_root_fd(struct pdk_sandbox *sb, struct pdk_error **err);

/*
 * In a process forked from the caller (never the caller itself: it cannot
 * be undone), take on the confinement of the sandbox's processes, for file
 * operations done on its behalf (the supervisor's file API): its user
 * namespace (so no capability reaches past it), its root as ours, its user
 * and groups (the ones the caller has: the sandbox inherited them), the
 * very Landlock ruleset its init enforces, no capabilities, no_new_privs
 * and its seccomp filter. Service mode only. The pid namespace stays the
 * caller's: /proc inside the root is still the sandbox's, and Landlock
 * keeps the helper from ptracing into the sandbox. 0, or -errno and *ce.
 */
PDK_MUST_CHECK int pdk_sandbox_enter_child(const struct pdk_sandbox *sb,
					   struct pdk_child_error *ce);
/*
 * pdk_sandbox_enter_child(), and into the sandbox's network namespace too
 * (between its user namespace and the dropping of capabilities; nothing
 * to enter in network.mode host, which shares ours): a socket this child
 * connects to 127.0.0.1 reaches the sandbox's loopback, under the
 * sandbox's Landlock network rules. 0, or -errno and *ce.
 */
PDK_MUST_CHECK int pdk_sandbox_enter_net_child(const struct pdk_sandbox *sb,
					       struct pdk_child_error *ce);

/*
 * The destinations refused to the sandbox (by its egress proxy, or by its
 * name server: a name looked up), each with the --allow value that would
 * allow it, for a front end's summary (policy/netdeny.h). The log is the
 * sandbox's: NULL before create. pdk_net_denials_seq() at an exec's start
 * and pdk_net_denials_since() at its end give what was refused meanwhile.
 */
struct pdk_net_denials *pdk_sandbox_denials(struct pdk_sandbox *sb);

/* The host uid and gid of the sandbox's user (what files made for it are owned by). */
void pdk_sandbox_owner(const struct pdk_sandbox *sb, uid_t *uid, gid_t *gid);

/* The events the sandbox emits to (borrowed; may be NULL). */
struct pdk_events *pdk_sandbox_events(const struct pdk_sandbox *sb);

/* Whether exec tracing records this sandbox's execs (process.exec/exit events). */
bool pdk_sandbox_traced(const struct pdk_sandbox *sb);

/*
 * Kill whatever is left, remove the cgroup, emit sandbox.destroy, free.
 * NULL-safe. Returns 0 or negative + *err when cleanup was incomplete.
 */
PDK_MUST_CHECK int pdk_sandbox_destroy(struct pdk_sandbox *sb, struct pdk_error **err);

#endif
