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
#include "cgroup.h"
#include "error.h"
#include "events.h"
#include "policy.h"
#include "workspace.h"

#include <sys/types.h>

typedef void (*pdk_warn_cb)(void *data, const char *msg);

struct pdk_sandbox_config {
	const char *id;                  /* NULL: a new UUIDv7 */
	const struct pdk_policy *policy; /* borrowed; limits already include overrides */
	char *const *argv;               /* the command */
	char *const *envp;               /* its whole environment */
	const char *cwd;                 /* inside; NULL = the workspace, else "/" */
	const char *workspace;           /* absolute host path; NULL = none */
	enum pdk_ws_mode ws_mode;
	struct pdk_ws *ws; /* PDK_WS_OVERLAY: the change set that receives the changes (borrowed) */
	char *const *extra_ro;     /* more read-only binds (may be NULL) */
	char *const *extra_rw;     /* more read-write binds (may be NULL) */
	const char *init_path;     /* NULL: $PADDOCK_INIT, else paddock-init next to us */
	struct pdk_events *events; /* borrowed; may be NULL */
	const struct pdk_cgroup_opts *cgroup_opts; /* may be NULL */
	pdk_warn_cb warn;                          /* downgrades and other notices; may be NULL */
	void *warn_data;
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

/* Host pid of the sandbox's init. */
pid_t pdk_sandbox_init_pid(const struct pdk_sandbox *sb);

/*
 * Supervise until the command ends: enforce the wall-clock limit, forward
 * every signal read from `sigfd` (a signalfd, or -1) to the command, collect
 * accounting. Fills *res. Returns 0, or negative + *err on an internal error.
 */
PDK_MUST_CHECK int pdk_sandbox_wait(struct pdk_sandbox *sb, int sigfd,
				    struct pdk_sandbox_result *res, struct pdk_error **err);

/*
 * The directory fd of a disk-limited workspace's upper layer (a tmpfs that
 * outlives the sandbox), for pdk_ws_import_upper() once the sandbox ended;
 * the caller owns it. -1 when there is none.
 */
int pdk_sandbox_take_upper_fd(struct pdk_sandbox *sb);

/* Send `sig` to the command (through init). 0 or -errno. */
PDK_MUST_CHECK int pdk_sandbox_signal(struct pdk_sandbox *sb, int sig);

/*
 * Kill whatever is left, remove the cgroup, emit sandbox.destroy, free.
 * NULL-safe. Returns 0 or negative + *err when cleanup was incomplete.
 */
PDK_MUST_CHECK int pdk_sandbox_destroy(struct pdk_sandbox *sb, struct pdk_error **err);

#endif
