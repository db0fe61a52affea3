/*
 * cgroup.h - one cgroup per sandbox: limits, accounting, kill, removal.
 *
 * Two backends sit behind one ops struct (cgroup-internal.h): cgroup v1
 * (one hierarchy per controller: memory, pids, cpu, cpuacct, freezer) and
 * cgroup v2 (the unified hierarchy). The backend is chosen from what is
 * mounted at the cgroupfs root (normally /sys/fs/cgroup), unless forced.
 *
 * Where the sandbox's cgroup goes ("the parent"):
 *   - opts->parent if set (an absolute path inside each hierarchy, e.g.
 *     "/paddock" or a delegated "/user.slice/.../app.scope"; a front end
 *     takes it from $PADDOCK_CGROUP_PARENT, base/settings.h); else
 *   - the caller's own cgroup (from /proc/self/cgroup), per hierarchy.
 * The sandbox cgroup is PARENT/paddock-<name>.
 */
#ifndef PDK_CGROUP_H
#define PDK_CGROUP_H

#include "common.h"
#include "base.h"
#include "child.h"

#include <sys/types.h>

enum pdk_cgroup_version {
	PDK_CGROUP_AUTO = 0,
	PDK_CGROUP_V1 = 1,
	PDK_CGROUP_V2 = 2,
};

/* Controllers, as a bit set. */
enum pdk_cgroup_ctrl_flags {
	PDK_CGROUP_MEMORY = 1 << 0,
	PDK_CGROUP_PIDS = 1 << 1,
	PDK_CGROUP_CPU = 1 << 2,
};

struct pdk_cgroup_opts {
	const char
		*root; /* cgroupfs mount root; NULL = "/sys/fs/cgroup" (tests pass a fake tree) */
	const char *parent;           /* see above; NULL = own cgroup */
	const char *parent_from;      /* where parent came from, for messages (NULL: "option") */
	const char *self_cgroup_file; /* NULL = "/proc/self/cgroup" (tests pass a fixture) */
	enum pdk_cgroup_version version;
	/*
	 * This process's /proc/self/mountinfo as the caller read it moments ago
	 * (borrowed; NULL: read here). A host with thousands of mounts formats
	 * them at every read: a few milliseconds each (docs/internals/performance.md).
	 */
	const char *mountinfo;
};

struct pdk_cgroup_limits {
	uint64_t memory;    /* bytes, 0 = no limit; swap is disabled when set */
	uint64_t pids;      /* 0 = no limit */
	uint32_t cpu_milli; /* 0 = no limit; 1000 = one CPU (period 100ms) */
};

struct pdk_cgroup_stats {
	uint64_t memory_peak;    /* bytes; 0 if unknown */
	uint64_t cpu_usage_ns;   /* total CPU time of every task ever in the cgroup */
	uint64_t oom_kills;      /* tasks killed by the OOM killer under this cgroup's limit */
	uint64_t pids_denied;    /* forks refused by pids.max (v1: pids.events max; v2: pids.events
				    max) */
	uint64_t memory_current; /* bytes now (v1 memory.usage_in_bytes, v2 memory.current) */
	uint64_t pids_current;   /* tasks now (pids.current) */
};

struct pdk_cgroup;

/*
 * Create the sandbox cgroup named "paddock-<name>" and apply `limits`.
 * Only the controllers a limit needs are required, plus the accounting
 * ones that are available (cpuacct/memory for stats; absent ones are
 * skipped silently). `required` (enum pdk_cgroup_ctrl_flags) lists the
 * controllers whose limit must be applied: when one cannot be (not
 * mounted, not delegated, EACCES...), the call fails with an error that says
 * what is missing and how to fix it, unless its bit is absent from
 * `required`, in which case the limit is skipped and its bit is set in
 * *downgraded (may be NULL).
 * Returns NULL and sets *err on failure; nothing is left behind.
 */
struct pdk_cgroup *pdk_cgroup_new(const char *name, const struct pdk_cgroup_opts *opts,
				  const struct pdk_cgroup_limits *limits, unsigned required,
				  unsigned *downgraded, struct pdk_error **err);

/* Which backend is in use. */
enum pdk_cgroup_version pdk_cgroup_version(const struct pdk_cgroup *cg);

/* Path of the sandbox cgroup in the given hierarchy (v2: the only one). Borrowed. */
const char *pdk_cgroup_path(const struct pdk_cgroup *cg);

/* Move `pid` into the sandbox cgroup (every hierarchy in use). */
PDK_MUST_CHECK int pdk_cgroup_attach(struct pdk_cgroup *cg, pid_t pid, struct pdk_error **err);

/*
 * Open cgroup.procs of every hierarchy in use (O_WRONLY|O_CLOEXEC), so that a
 * child can join the cgroup itself with pdk_cgroup_join_child() before it
 * does anything else: no parent round trip. Fills fds[0..n) and returns n
 * (0 when no hierarchy is in use), or negative + *err. The caller closes them.
 */
PDK_MUST_CHECK int pdk_cgroup_open_procs(struct pdk_cgroup *cg, int *fds, size_t max,
					 struct pdk_error **err);

/*
 * The cgroup2 directory of the sandbox cgroup, opened (O_RDONLY|O_DIRECTORY|
 * O_CLOEXEC) for a child to be made in it (pdk_proc_clone_into()): the fd,
 * or -1 when it is not one cgroup2 directory (v1, no hierarchy) or cannot
 * be opened (the child then joins by cgroup.procs). The caller closes it.
 */
int pdk_cgroup_open_dir(struct pdk_cgroup *cg);

/* In a child: write "0" (= self) to each fd. No allocation. 0, or -errno and *ce (child.h). */
PDK_MUST_CHECK int pdk_cgroup_join_child(const int *fds, size_t n, struct pdk_child_error *ce);

/* Read accounting. Fields that cannot be read are left 0. */
PDK_MUST_CHECK int pdk_cgroup_stats(struct pdk_cgroup *cg, struct pdk_cgroup_stats *st,
				    struct pdk_error **err);

/*
 * The same, once every task of the cgroup is gone (a sandbox's end): the
 * totals only. memory_current and pids_current are left 0, not read (two
 * files fewer on every run's way out).
 */
void pdk_cgroup_end_stats(struct pdk_cgroup *cg, struct pdk_cgroup_stats *st);

/*
 * The OOM kill counter of pdk_cgroup_stats() alone, read from its one file
 * (v1 memory.oom_control, v2 memory.events): 0 when it cannot be read.
 */
uint64_t pdk_cgroup_oom_kills(struct pdk_cgroup *cg);

/*
 * Kill every task in the cgroup (v2: cgroup.kill when present; else/v1:
 * freeze if a freezer is available, SIGKILL every pid in cgroup.procs,
 * thaw; repeat until empty, bounded).
 */
PDK_MUST_CHECK int pdk_cgroup_kill(struct pdk_cgroup *cg, struct pdk_error **err);

/*
 * Freeze (`frozen` true) or thaw every task of the cgroup: v1 writes
 * freezer.state FROZEN/THAWED, v2 cgroup.freeze 1/0. Freezing waits until
 * the kernel reports the cgroup frozen (v1 freezer.state FROZEN, v2
 * "frozen 1" in cgroup.events), polling for at most `wait_ms`; a cgroup
 * still freezing then is thawed again and the call fails with -EBUSY
 * (a task in uninterruptible sleep). -ENOTSUP + *err without a freezer.
 */
PDK_MUST_CHECK int pdk_cgroup_freeze(struct pdk_cgroup *cg, bool frozen, unsigned wait_ms,
				     struct pdk_error **err);

/* Remove the cgroup directories (kills remaining tasks first) and free cg. NULL-safe. */
PDK_MUST_CHECK int pdk_cgroup_destroy(struct pdk_cgroup *cg, struct pdk_error **err);

/*
 * The cgroup's directories as text, one line each, "V CTRLS PATH" (V: 1 or
 * 2; CTRLS: the v1 controllers that directory serves, as bits). New
 * string, "" without a cgroup. pdk_cgroup_adopt() reads it back.
 */
char *pdk_cgroup_describe(const struct pdk_cgroup *cg);

/*
 * The sandbox cgroup "paddock-<name>" that another process made (one that
 * died without removing it), from pdk_cgroup_describe()'s text: for
 * pdk_cgroup_kill() and pdk_cgroup_destroy(). Every directory must be an
 * absolute path under `root` (NULL: /sys/fs/cgroup) without "." or ".."
 * components, whose last component is "paddock-<name>", and all of one
 * version. -EINVAL + *err otherwise; *out is the caller's.
 */
PDK_MUST_CHECK int pdk_cgroup_adopt(const char *text, const char *name, const char *root,
				    struct pdk_cgroup **out, struct pdk_error **err);

/* Free without removing (e.g. in a forked child). NULL-safe. */
void pdk_cgroup_free(struct pdk_cgroup *cg);

#endif
