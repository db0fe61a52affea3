/*
 * cgroup-internal.h - what cgroup.c (the front), cgroup-v1.c and
 * cgroup-v2.c share. Not part of the module's contract; unit tests include
 * it to reach the parsers.
 *
 * The front validates the name, picks the backend, resolves the parent the
 * caller asked for, and owns the generic parts: the list of directories a
 * sandbox cgroup lives in, attach (cgroup.procs of each), the kill loop and
 * removal. A backend supplies only what differs between v1 and v2: how the
 * directories are created and limited, how accounting is read, and how
 * tasks are frozen or killed at once.
 */
#ifndef PDK_CGROUP_INTERNAL_H
#define PDK_CGROUP_INTERNAL_H

#include "common.h"
#include "base.h"
#include "cgroup.h"

#include <stdio.h>

#define PDK__CGROUP_DEFAULT_ROOT "/sys/fs/cgroup"
#define PDK__CGROUP_SELF_FILE    "/proc/self/cgroup"
#define PDK__CGROUP_MOUNTINFO    "/proc/self/mountinfo"
#define PDK__CGROUP_PREFIX       "paddock-"
#define PDK__CGROUP_CPU_PERIOD   100000 /* microseconds, for cfs_period_us and cpu.max */

/* v1 hierarchies the backend uses; also the bits of pdk__cgroup_dir.v1_ctrls. */
enum pdk__cgroup_v1_ctrl {
	PDK__V1_MEMORY = 0,
	PDK__V1_PIDS,
	PDK__V1_CPU,
	PDK__V1_CPUACCT,
	PDK__V1_FREEZER,
	PDK__V1_COUNT,
};

/* One directory the sandbox cgroup owns (v2: exactly one; v1: one per mount). */
struct pdk__cgroup_dir {
	char *path;        /* absolute, owned */
	unsigned v1_ctrls; /* v1: 1 << enum pdk__cgroup_v1_ctrl served by this dir; v2: 0 */
};

struct pdk__cgroup_ops;

/* A backend's writer of one limit into the sandbox cgroup's directory `dir`. */
typedef int (*pdk__cgroup_apply_fn)(const char *dir, const struct pdk_cgroup_limits *lim,
				    struct pdk_error **err);

/*
 * A controller of a backend's table, in the order the backend sets them up:
 * `limit` is the PDK_CGROUP_* limit it enforces (0: accounting or freezing
 * only, always best effort), `always` says it is used even when its limit is
 * not set (for accounting or the freezer), `apply` writes the limit (NULL:
 * it has none).
 */
struct pdk__cgroup_ctrl {
	const char *name;
	unsigned limit;
	bool always;
	pdk__cgroup_apply_fn apply;
};

/*
 * Poll `done(dir)` every 2 ms until it is true, for at most 100 ms (freezing
 * waits for tasks in uninterruptible sleep; it is not worth waiting longer).
 */
void pdk__cgroup_poll(const char *dir, bool (*done)(const char *dir));

/*
 * Write `state` into the freezer file dir/file; after a freeze (`frozen`),
 * wait (pdk__cgroup_poll()) until `done` reports every task frozen.
 */
int pdk__cgroup_freeze_file(const char *dir, const char *file, const char *state, bool frozen,
			    bool (*done)(const char *dir), struct pdk_error **err);

struct pdk_cgroup {
	const struct pdk__cgroup_ops *ops; /* NULL when no hierarchy is in use */
	enum pdk_cgroup_version version;
	char *leaf; /* "paddock-<name>", owned */
	size_t n_dirs;
	struct pdk__cgroup_dir dirs[PDK__V1_COUNT]; /* in creation order; removed in reverse */
	int oom_fd; /* the OOM kill counter's file, kept open from its first read; -1: not open */
};

/* What pdk_cgroup_new() was asked for, resolved by the front. */
struct pdk__cgroup_req {
	const char *root;        /* cgroupfs root, no trailing slash; borrowed */
	const char *parent;      /* opts->parent or $PADDOCK_CGROUP_PARENT; NULL = own cgroup */
	const char *parent_from; /* where parent came from, for messages */
	const char *self_file;   /* /proc/self/cgroup or a test fixture; borrowed */
	const struct pdk_cgroup_limits *limits;
	unsigned wanted;     /* PDK_CGROUP_* whose limit is set (non-zero) */
	unsigned required;   /* subset of wanted that must be applied */
	unsigned downgraded; /* out: subset of wanted that was skipped */
	/*
	 * PDK__CGROUP_MOUNTINFO's text, read at the first lookup and shared by
	 * the later ones (the backend's choice and each v1 controller); NULL
	 * when not read yet or too large to keep. Owned (pdk_cgroup_new()).
	 */
	char *mountinfo;
	bool mountinfo_tried;
	/* self_file's text, read at the first lookup (each v1 controller has one); owned. */
	char *self_text;
};

struct pdk__cgroup_ops {
	enum pdk_cgroup_version version;
	/*
	 * Create the sandbox cgroup's directories (registering each with
	 * pdk__cgroup_add_dir() as soon as it exists, so the front can remove
	 * it on failure) and apply req->limits. A limit that cannot be applied
	 * goes through pdk__cgroup_soft_fail().
	 */
	int (*create)(struct pdk_cgroup *cg, struct pdk__cgroup_req *req, struct pdk_error **err);
	/* Fill what can be read; never fails on a missing or odd file. */
	/* live: also what the cgroup holds now (memory, tasks), which a finished one does not. */
	void (*stats)(struct pdk_cgroup *cg, struct pdk_cgroup_stats *st, bool live);
	/* The OOM kill counter alone (one file): 0 when it cannot be read. */
	uint64_t (*oom_kills)(struct pdk_cgroup *cg);
	/*
	 * Kill every task at once (v2 cgroup.kill). NULL, or -ENOTSUP without
	 * setting *err, when the kernel cannot: the front then freezes,
	 * signals every pid in cgroup.procs and thaws.
	 */
	int (*kill_all)(struct pdk_cgroup *cg, struct pdk_error **err);
	/* Freeze (true) or thaw (false) every task. -ENOTSUP (no *err) without a freezer. */
	int (*freeze)(struct pdk_cgroup *cg, bool frozen, struct pdk_error **err);
	/* Whether the kernel reports every task frozen (false when it cannot be read). */
	bool (*is_frozen)(struct pdk_cgroup *cg);
};

extern const struct pdk__cgroup_ops pdk__cgroup_v1_ops;
extern const struct pdk__cgroup_ops pdk__cgroup_v2_ops;

/* --- shared helpers (cgroup.c) --- */

/* "dir/file" (caller owns). */
char *pdk__cgroup_join(const char *dir, const char *file);

/*
 * Record `path` (takes ownership) as a directory of cg. Returns its index.
 * A path already recorded (co-mounted v1 controllers) is not added twice:
 * `path` is freed and the existing index returned. -E2BIG (cannot happen:
 * each v1 controller adds at most one directory).
 */
int pdk__cgroup_add_dir(struct pdk_cgroup *cg, char *path);
/* Index of `path` in cg->dirs, or -1. */
int pdk__cgroup_find_dir(const struct pdk_cgroup *cg, const char *path);

/*
 * A limit could not be applied. When one of `ctrls` (PDK_CGROUP_*) is
 * required, move *local into *err and return its -status; otherwise record
 * the wanted ones of `ctrls` as downgraded, drop *local and return 0.
 */
int pdk__cgroup_soft_fail(struct pdk__cgroup_req *req, unsigned ctrls, struct pdk_error **local,
			  struct pdk_error **err);

/* "memory limit", "memory and pids limits", ... for the set ctrls (static storage). */
const char *pdk__cgroup_limit_names(unsigned ctrls);

/*
 * mkdir a sandbox cgroup directory. On failure the message says what is
 * missing and how to fix it, naming the limits in `ctrls` that need it.
 * -EEXIST when it already exists (never reused: it may be another sandbox's).
 */
int pdk__cgroup_mkdir(const char *path, unsigned ctrls, struct pdk_error **err);

/* Write `data` to dir/file (never created). Error names the full path. */
int pdk__cgroup_write(const char *dir, const char *file, const char *data, struct pdk_error **err);
/* The same with the decimal text of `v`. */
int pdk__cgroup_write_u64(const char *dir, const char *file, uint64_t v, struct pdk_error **err);
/* Read dir/file (at most 64 KiB) into *out (caller owns). */
int pdk__cgroup_read(const char *dir, const char *file, char **out, struct pdk_error **err);
/* Whether dir/file exists. */
bool pdk__cgroup_exists(const char *dir, const char *file);

/*
 * Value of the line "KEY VALUE" in a flat-keyed file (memory.events,
 * pids.events, cpu.stat, memory.oom_control). 0 or -ENOENT / -EINVAL.
 */
int pdk__cgroup_keyed(const char *text, const char *key, uint64_t *out);
/* Whether `word` is one of the whitespace-separated words of `text` (cgroup.controllers). */
bool pdk__cgroup_has_word(const char *text, const char *word);

/* The first unsigned integer of `text` (a single-value file). 0 or -EINVAL. */
int pdk__cgroup_single(const char *text, uint64_t *out);

/*
 * For stats: read dir/file and parse it as a single value, or the value of
 * `key`, into *out. A NULL dir, a missing file or an odd value leaves *out
 * untouched. One open, one read, one close: a stats file is a few lines,
 * generated whole at the first read (a run's end reads four of them).
 */
void pdk__cgroup_stat_single(const char *dir, const char *file, uint64_t *out);
void pdk__cgroup_stat_keyed(const char *dir, const char *file, const char *key, uint64_t *out);
/* The "oom_kill" count of dir/file (the backend's counter file), through cg->oom_fd; 0 unread. */
uint64_t pdk__cgroup_oom_read(struct pdk_cgroup *cg, const char *dir, const char *file);

/*
 * Resolve the parent cgroup for one hierarchy to an absolute path inside
 * it ("/" or "/a/b", no trailing slash, no "." or ".." components).
 * `ctrl` is the v1 controller name, or NULL for the v2 line "0::".
 * `mnt_root` is the hierarchy's mount root from mountinfo ("/" normally):
 * an own-cgroup path below it is made relative to it.
 */
int pdk__cgroup_parent(struct pdk__cgroup_req *req, const char *ctrl, const char *mnt_root,
		       char **out, struct pdk_error **err);

/*
 * Find, in the text of /proc/self/cgroup, the path of the hierarchy whose
 * controller list holds `ctrl` (v1), or of the "0::" line when ctrl is NULL.
 * 0 with *out (caller owns), or -ENOENT.
 */
int pdk__cgroup_self_path(const char *text, const char *ctrl, char **out);

/*
 * Find, in mountinfo, the cgroup v1 mount below `root` whose super options
 * hold `ctrl`, or (ctrl NULL) the cgroup2 mount at `root` itself.
 * 0 with *mnt_dir and *mnt_root (caller owns), or -ENOENT.
 */
int pdk__cgroup_find_mount(FILE *mountinfo, const char *root, const char *ctrl, char **mnt_dir,
			   char **mnt_root);

/*
 * Find the v1 hierarchy for `ctrl` under req->root: from /proc/self/mountinfo
 * (read once per request, req->mountinfo), else by probing root/<ctrl>,
 * root/cpu,cpuacct, root/cpuacct,cpu. 0 or -ENOENT.
 */
int pdk__cgroup_v1_find(struct pdk__cgroup_req *req, const char *ctrl, char **mnt_dir,
			char **mnt_root);

/* Mount root of the cgroup2 mount at req->root ("/" when unknown, e.g. a fake tree). Caller owns.
 */
char *pdk__cgroup_v2_mount_root(struct pdk__cgroup_req *req);

#endif
