/*
 * workspace.h - change sets: a sandbox's file changes as overlay layers.
 *
 * A change set is a directory in paddock's state directory:
 *
 *   STATE/ws/ID/meta.json    id, workspace (host path + dev/ino), sandbox,
 *                            created, layer count, disk limit
 *   STATE/ws/ID/layers/N     frozen layers, N = 1.. (snapshots), oldest first
 *   STATE/ws/ID/upper        the live upper layer
 *   STATE/ws/ID/work         overlayfs work directory
 *
 * The sandbox sees an overlay: lowerdir = layers/N:...:layers/1:WORKSPACE,
 * upperdir = upper. A layer holds what changed on top of the ones below,
 * in overlayfs' own format (whiteouts are 0:0 character devices, opaque
 * directories carry user.overlay.opaque="y"), so a snapshot is a rename of
 * the upper layer: its cost is independent of the size of the workspace.
 *
 * Snapshot numbers: 0 is the workspace itself, N is layers/N, and
 * PDK_WS_CURRENT is the upper layer on top of everything.
 *
 * Nothing here follows a symlink found in a layer or in the workspace;
 * commit (ws-commit.c) is the only code that writes into the workspace.
 *
 * Layer contract: stands on telemetry/ (fs.change events) and base/. The
 * workspace layer's public header is this one; unified diffs of two texts
 * (udiff.h) are included here.
 */
#ifndef PDK_WORKSPACE_H
#define PDK_WORKSPACE_H

#include "common.h"
#include "base.h"
#include "telemetry.h"
#include "udiff.h"

#include <stdio.h>
#include <sys/types.h>

#define PDK_WS_CURRENT  UINT32_MAX
#define PDK_WS_MAX_SNAP 128 /* frozen layers per change set */

enum pdk_ws_kind {
	PDK_WS_ADDED = 0,
	PDK_WS_MODIFIED, /* regular file whose content changed (mode may too) */
	PDK_WS_DELETED,
	PDK_WS_MODE,     /* same content or directory, other permission bits */
	PDK_WS_REPLACED, /* another type of file at the same path (file -> dir ...) */
};

/* One difference between two states of the tree. */
struct pdk_ws_change {
	char *path; /* relative to the workspace root, never "" or with a leading '/' */
	enum pdk_ws_kind kind;
	mode_t mode;        /* new st_mode (type and permissions); 0 when deleted */
	mode_t old_mode;    /* 0 when added */
	uint64_t size;      /* new size (regular files, symlinks) */
	uint64_t old_size;  /* old size */
	char *link;         /* new symlink target, or NULL */
	char *renamed_from; /* ADDED that has the content of a DELETED regular file */
	int src_fd;         /* borrowed: directory fd of the layer holding the new entry, or -1 */
	int base_fd; /* borrowed: directory fd of the layer or workspace holding the old one */
};

struct pdk_ws_diff {
	struct pdk_ws_change
		*v; /* depth first, names sorted: a directory right before its entries */
	size_t n;
	uint64_t bytes_added; /* sum of `size` over added and modified regular files */
};

struct pdk_ws;

/*
 * Create a change set for the host directory `workspace` (absolute, a
 * directory) under `state_dir` (created 0700 if missing). `sandbox_id` may
 * be NULL. `disk_limit` (bytes, 0 = none) is recorded for the mount. A
 * `workspace` that holds the state directory under any name is refused:
 * `mounts` is this process's mount table (pdk_mounts_read()), or NULL to
 * read it here.
 */
PDK_MUST_CHECK int pdk_ws_create(const char *state_dir, const char *workspace,
				 const char *sandbox_id, uint64_t disk_limit,
				 const struct pdk_mounts *mounts, struct pdk_ws **out,
				 struct pdk_error **err);

/* Open change set `id` (the full id, or a unique prefix of at least 4 characters). */
PDK_MUST_CHECK int pdk_ws_open(const char *state_dir, const char *id, struct pdk_ws **out,
			       struct pdk_error **err);

void pdk_ws_free(struct pdk_ws *ws);

/*
 * A set taken from the spare removes what the spare's last run left on a
 * thread of its own, beside the sandbox's start: wait for it. The caller
 * calls it once the sandbox is made (the supervisor then runs alone), before
 * any other use of the set; pdk_ws_free(), pdk_ws_remove(),
 * pdk_ws_recycle() and pdk_ws_settle() wait first themselves (a sandbox
 * that failed to start). Idempotent.
 */
void pdk_ws_tidy_wait(struct pdk_ws *ws);

/*
 * Take the change set for this process (an exclusive flock on its
 * directory, released by pdk_ws_free): a running sandbox and every
 * operation that changes the set hold it, so two never meet. Fails with
 * EBUSY at once when another process holds it.
 */
PDK_MUST_CHECK int pdk_ws_lock(struct pdk_ws *ws, struct pdk_error **err);

const char *pdk_ws_id(const struct pdk_ws *ws);
const char *pdk_ws_workspace(const struct pdk_ws *ws);
const char *pdk_ws_dir(const struct pdk_ws *ws); /* STATE/ws/ID */
const char *pdk_ws_sandbox(const struct pdk_ws *ws);
uint64_t pdk_ws_created_ns(const struct pdk_ws *ws); /* CLOCK_REALTIME */
unsigned pdk_ws_snapshots(const struct pdk_ws *ws);  /* frozen layers */
uint64_t pdk_ws_disk_limit(const struct pdk_ws *ws);

/*
 * Absolute paths of the lower layers, topmost first, ending with the
 * workspace itself (NULL-terminated; the caller frees with pdk_strv_free).
 */
char **pdk_ws_lower_paths(const struct pdk_ws *ws);
/* Absolute paths of the upper and work directories (borrowed). */
const char *pdk_ws_upper_path(const struct pdk_ws *ws);
const char *pdk_ws_work_path(const struct pdk_ws *ws);

/*
 * Snapshot: freeze the upper layer as layers/N+1 and start an empty one.
 * The overlay must not be mounted with this upper layer (the caller
 * unmounts or quiesces it, then mounts again with the new layer list).
 * Cost: two renames and two mkdirs, whatever the size of the workspace.
 * Returns the new snapshot number (>= 1) or negative + *err.
 */
PDK_MUST_CHECK int pdk_ws_snapshot(struct pdk_ws *ws, struct pdk_error **err);

/*
 * Snapshot of an upper layer that stays mounted: the upper layer is copied
 * as layers/N+1 and goes on as it was, its changes still relative to the
 * layer it was started on (the change set records each layer's parent).
 * Nothing may write to the upper layer meanwhile: the caller freezes the
 * sandbox. Cost: a copy of what the upper layer holds (file data included;
 * hard links inside it become separate files). Returns the new snapshot
 * number (>= 1) or negative + *err; on failure nothing has changed.
 */
PDK_MUST_CHECK int pdk_ws_snapshot_copy(struct pdk_ws *ws, struct pdk_error **err);

/*
 * Roll back to snapshot `snap` (0 = the workspace as it is on the host):
 * drop the upper layer and every layer above `snap`. Same precondition.
 */
PDK_MUST_CHECK int pdk_ws_rollback(struct pdk_ws *ws, unsigned snap, struct pdk_error **err);

/*
 * The changes from state `from` to state `to` (snapshot numbers, `to` may
 * be PDK_WS_CURRENT; from < to). Work is proportional to the entries of
 * the layers between them, plus the old subtrees of deleted directories.
 * The fds in the changes stay valid until pdk_ws_free().
 */
PDK_MUST_CHECK int pdk_ws_diff(struct pdk_ws *ws, unsigned from, unsigned to,
			       struct pdk_ws_diff *out, struct pdk_error **err);
void pdk_ws_diff_release(struct pdk_ws_diff *d);

/* Files larger than this are named in a patch, not diffed. */
#define PDK_WS_PATCH_MAX      (8u << 20)
#define PDK_WS_PATCH_MAX_TEXT "8 MiB"

enum pdk_ws_patch_flags {
	/*
	 * The patch stays valid UTF-8 (to be carried in JSON): content that is
	 * not UTF-8 counts as binary, and a path that is not printable UTF-8 is
	 * named (escaped) instead of diffed.
	 */
	PDK_WS_PATCH_UTF8 = 1 << 0,
};

/*
 * Write change `c` (of a pdk_ws_diff(), whose fds are still open) to `out`
 * as a unified diff with 3 lines of context, labels a/PATH and b/PATH
 * (/dev/null for an added or deleted file): regular files only, nothing
 * for directories, symlinks and mode-only changes. Binary content gets a
 * "Binary files ... differ" line; files over PDK_WS_PATCH_MAX or unreadable
 * a "Files ... differ (not shown: ...)" line. Returns 0 when nothing was
 * written, 1 when something was, -errno when writing failed.
 */
int pdk_ws_write_patch(FILE *out, const struct pdk_ws_change *c, unsigned flags);

/* Text name of a kind ("added", ...). */
const char *pdk_ws_kind_name(enum pdk_ws_kind k);

/*
 * Set obj[key] to `path` when it is UTF-8; else obj[key] = null and
 * obj[key + "_hex"] = its bytes in hex (JSON strings cannot hold other bytes).
 */
void pdk_ws_json_set_path(json_t *obj, const char *key, const char *path);

/* A change as JSON: {"path", "kind", "type", "mode", "size", ...}. */
json_t *pdk_ws_change_json(const struct pdk_ws_change *c);

/*
 * Write `path` for humans: printable UTF-8 as is, anything else (control
 * characters, invalid UTF-8, '\\' and '"') escaped C-style inside quotes.
 */
void pdk_ws_print_path(FILE *out, const char *path);

/*
 * One fs.change event per change: the change's JSON plus "action"
 * ("committed", "discarded") and "change_set". NULL `ev` does nothing.
 */
PDK_MUST_CHECK int pdk_ws_emit_changes(struct pdk_events *ev, const struct pdk_ws_diff *d,
				       const char *action, const char *set_id,
				       struct pdk_error **err);

/* Remove the change set from the state directory. The handle stays to be freed. */
PDK_MUST_CHECK int pdk_ws_remove(struct pdk_ws *ws, struct pdk_error **err);

/*
 * A workspace overlay mounted `volatile` (policy filesystem.workspace.sync:
 * end, the default) never syncs its upper layer: not at an fsync() inside
 * the sandbox, not at a copy-up, not at its unmount. overlayfs marks its
 * work directory for as long as that holds (work/work/incompat/volatile)
 * and refuses to mount the set again while the mark is there.
 *
 * pdk_ws_settle(): the sandbox has ended and the set is kept: its
 * directory's file system synced (syncfs(), when `sync`), then the mark
 * removed. A set that holds nothing skips the sync (pdk_ws_recycle() and
 * pdk_ws_remove() remove the mark themselves). Fails, keeping the mark,
 * when the sync reports an error (EIO: the changes are not all on disk).
 */
PDK_MUST_CHECK int pdk_ws_settle(struct pdk_ws *ws, bool sync, struct pdk_error **err);

enum pdk_ws_unsynced {
	/* No mark: the set's last sandbox ended and the set was settled. */
	PDK_WS_SYNCED = 0,
	/* Marked in this boot: its sandbox was killed; the page cache has every write. */
	PDK_WS_KILLED = 1,
	/* Marked before this boot began: the machine went down while its sandbox ran. */
	PDK_WS_CRASHED = 2,
};

/*
 * Whether the set carries the mark, and since when. PDK_WS_CRASHED: the
 * writes of its last sandbox were never synced and the machine went down
 * since, so its last changes (and copy-ups) may be incomplete on disk: a
 * commit refuses it without PDK_WS_COMMIT_FORCE, a run refuses to go on
 * with it. Told by the boot the set was mounted in, which its meta.json
 * records before the mount (the kernel's boot_id), against this one's:
 * whatever the clock did. A set recorded by an older paddock, without a
 * boot id, is told by the mark's time against the boot's (CLOCK_REALTIME
 * minus CLOCK_BOOTTIME).
 */
enum pdk_ws_unsynced pdk_ws_unsynced(const struct pdk_ws *ws);

/*
 * Before a set is used again (a run goes on with it, a commit applies it):
 * a PDK_WS_CRASHED set fails with EUCLEAN and a message that says what to
 * do, unless `force`. With `clear` (the set is about to be mounted): the
 * mark of a set that passes is removed, so that it can be mounted again,
 * and its meta.json records this boot, when it named another one.
 */
PDK_MUST_CHECK int pdk_ws_check_synced(struct pdk_ws *ws, bool force, bool clear,
				       struct pdk_error **err);

/*
 * pdk_ws_remove() of a set that holds nothing, whose directory is kept
 * (unlocked, out of `paddock ws ls`'s sight) for the next pdk_ws_create()
 * of the same state directory to take: one rename each way instead of
 * three directories made and removed. A set that is not exactly as a new
 * one (a snapshot, a base record, anything in its upper layer or work
 * directory, a disk limit), or when a spare is kept already, is removed.
 */
PDK_MUST_CHECK int pdk_ws_recycle(struct pdk_ws *ws, struct pdk_error **err);

/*
 * Replace the upper layer with a copy of the tree at `src_fd` (a directory:
 * the tmpfs upper of a disk-limited sandbox), whiteouts, opaque markers and
 * holes of sparse files included.
 */
PDK_MUST_CHECK int pdk_ws_import_upper(struct pdk_ws *ws, int src_fd, struct pdk_error **err);

/* Every change set in `state_dir`, oldest first (ids; NULL-terminated). */
PDK_MUST_CHECK int pdk_ws_list(const char *state_dir, char ***ids, struct pdk_error **err);

/* ---- commit (ws-commit.c) ---- */

enum pdk_ws_commit_flags {
	PDK_WS_COMMIT_ALLOW_OUTSIDE_LINKS = 1 << 0, /* accept symlinks leading out of DIR */
	PDK_WS_COMMIT_DRY_RUN = 1 << 1,             /* check only */
	PDK_WS_COMMIT_FORCE = 1 << 2, /* apply over what changed on the host since the base */
};

/* Why an entry was refused (the commit applies nothing when any is). */
struct pdk_ws_refusal {
	char *path;
	char *reason;
};

struct pdk_ws_commit_report {
	size_t applied;  /* changes written */
	size_t stripped; /* setuid/setgid bits removed */
	struct pdk_ws_refusal *refused;
	size_t n_refused;
	/* Entries changed on the host since the change set's base (pdk_ws_conflicts_at()). */
	struct pdk_ws_refusal *conflicts;
	size_t n_conflicts;
};

void pdk_ws_commit_report_release(struct pdk_ws_commit_report *r);

/*
 * Apply `diff` (from pdk_ws_diff(ws, 0, PDK_WS_CURRENT)) to the workspace
 * directory. All or nothing: every entry is checked first (device nodes,
 * FIFOs, sockets and, without the flag, symlinks leading outside are
 * refused and listed in the report; a symlink is judged by where it leads
 * in the directory as it will be after the commit, through the links the
 * directory holds and those of the diff, chains and ".." included); then new content is staged next
 * to its target, swapped in, and on any failure every step taken is undone. Never writes outside
 * the workspace: every path is resolved beneath an fd of the workspace root with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS. setuid/setgid bits are stripped. Returns 0, or negative + *err (and the
 * report lists refusals when that is why).
 *
 * Unless PDK_WS_COMMIT_FORCE, nothing changed on the host since the change
 * set's base is overwritten: the conflicts (pdk_ws_conflicts_at()) are
 * checked first and, when there are any, listed in the report and the
 * commit fails with EEXIST, applying nothing (a dry run too). A commit that
 * is applied makes the directory the change set's new base (--keep).
 */
PDK_MUST_CHECK int pdk_ws_commit(struct pdk_ws *ws, const struct pdk_ws_diff *diff, unsigned flags,
				 struct pdk_ws_commit_report *report, struct pdk_error **err);

/*
 * The conflicts of `diff` with the directory at `root_fd` (an O_DIRECTORY
 * fd of the workspace): every entry the diff would write or remove that was
 * changed on the host at or after `base` (an instant of the file clock, as
 * st_ctim), deleted or replaced there, and every entry it would add where
 * one appeared, appended to report->conflicts with what changed (ws-base.c
 * has the rule). `record` (borrowed, may be NULL) is what the host had at
 * the end of the runs (pdk_ws_record_base()). Nothing is followed or
 * written. Returns 0 (with or without conflicts), or negative + *err when
 * an entry cannot be looked up.
 */
PDK_MUST_CHECK int pdk_ws_conflicts_at(int root_fd, const struct pdk_ws_diff *diff,
				       const struct timespec *base, const json_t *record,
				       struct pdk_ws_commit_report *report, struct pdk_error **err);

/*
 * At the end of a run: record, for each path of `diff` (0 to current) not
 * recorded yet, whether the host directory had it, so that a commit sees an
 * entry the host lost or gained since (STATE/ws/ID/base.json; no system
 * call per path). Cleared when the base is taken again.
 */
PDK_MUST_CHECK int pdk_ws_record_base(struct pdk_ws *ws, const struct pdk_ws_diff *diff,
				      struct pdk_error **err);

/*
 * The same on an explicit workspace root: `root_fd` is an O_DIRECTORY fd
 * of DIR, `root_path` its absolute path (to judge absolute symlink targets).
 */
PDK_MUST_CHECK int pdk_ws_commit_at(int root_fd, const char *root_path,
				    const struct pdk_ws_diff *diff, unsigned flags,
				    struct pdk_ws_commit_report *report, struct pdk_error **err);

#endif
