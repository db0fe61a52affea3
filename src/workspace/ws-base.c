/*
 * ws-base.c - what changed on the host since a change set's base: the
 * conflicts a commit must not overwrite.
 *
 * A change set's changes are relative to the workspace as it was when its
 * first sandbox started (the base). The base is an instant on the kernel's
 * file clock: the change time (ctime) of the empty file STATE/ws/ID/base,
 * made when the change set is and made again when a commit or a rollback to
 * 0 starts it afresh from the directory. Every write, rename into place,
 * chmod, chown or link count change of a host entry sets its ctime to the
 * same clock, and nobody can set a ctime back (utimensat sets mtime and
 * atime only), so an entry whose ctime is not before the base's was changed
 * after it. The check costs one statx per change of the diff and no work
 * while the sandbox runs: nothing is hashed or walked up front.
 *
 * Per change, the host entry at its path (looked up beneath the root with
 * RESOLVE_NO_SYMLINKS, never followed) must still be what the change was
 * made against:
 *   added                        nothing there (else: it appeared);
 *   modified, mode, replaced,    an entry of the old type (else: deleted or
 *   deleted                      replaced on the host) whose ctime is
 *                                before the base (else: changed), except a
 *                                directory that stays (mode): its own
 *                                permission bits only, since adding a file
 *                                inside also sets a directory's ctime.
 * A deleted or replaced directory is a conflict when anything in it was
 * added or removed on the host, as commit moves the whole tree away.
 *
 * A diff is taken against the directory as it is at the time, so an entry
 * the host lost or gained after the run changes kind (a modified file the
 * host deleted reads as added). The end of each run therefore records, in
 * STATE/ws/ID/base.json, whether the host had each changed path then (one
 * entry per path of the diff, the first record kept: no system call, no
 * hashing); commit compares the kinds with it.
 */
#include "common.h"
#include "base.h"
#include "workspace.h"
#include "workspace-internal.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BASE_FILE   PDK__WS_BASE_FILE
#define RECORD_FILE "base.json"
#define RECORD_MAX  (256u << 20)

static const char *type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return "file";
	case S_IFDIR:
		return "directory";
	case S_IFLNK:
		return "symlink";
	default:
		return "special file";
	}
}

/* Is `path` inside directory `dir` (both relative to the root)? */
static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static bool before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void add_conflict(struct pdk_ws_commit_report *r, const char *path, char *reason)
{
	r->conflicts = pdk_xrealloc(r->conflicts, (r->n_conflicts + 1) * sizeof(*r->conflicts));
	r->conflicts[r->n_conflicts].path = pdk_xstrdup(path);
	r->conflicts[r->n_conflicts].reason = reason;
	r->n_conflicts++;
}

/*
 * lstat of `path` beneath `root` without following any symlink: 0, or
 * -errno (-ENOENT also when a parent is missing, not a directory, or a symlink).
 */
static int lookup(int root, const char *path, struct stat *st)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *dir = pdk_xstrdup(path);
	_cleanup_close_ int fd = -1;
	long r;

	if (slash != NULL)
		dir[slash - path] = '\0';
	r = syscall(SYS_openat2, root, slash ? dir : ".", &how, sizeof(how));
	/*
	 * A parent that is a symlink (ELOOP: the change set replaces it, or the
	 * host did, which its own entry shows) holds no entry at `path`.
	 */
	if (r < 0)
		return errno == ENOTDIR || errno == ELOOP ? -ENOENT : -errno;
	fd = (int)r;
	if (fstatat(fd, slash ? slash + 1 : path, st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOTDIR ? -ENOENT : -errno;
	return 0;
}

/* Why the host entry `st` conflicts with change `ch`, or NULL (caller frees). */
static char *judge(const struct pdk_ws_change *ch, const struct stat *st,
		   const struct timespec *base)
{
	bool dir = S_ISDIR(ch->old_mode);

	if (ch->kind == PDK_WS_ADDED)
		return pdk_xasprintf("a %s appeared on the host since the run began",
				     type_name(st->st_mode));
	if ((st->st_mode & S_IFMT) != (ch->old_mode & S_IFMT))
		return pdk_xasprintf(
			"replaced on the host since the run began (was a %s, now a %s)",
			type_name(ch->old_mode), type_name(st->st_mode));
	if (dir && ch->kind == PDK_WS_MODE) {
		if ((st->st_mode & 07777) == (ch->old_mode & 07777))
			return NULL;
		return pdk_xasprintf("permissions changed on the host since the run began "
				     "(%04o, now %04o)",
				     (unsigned)(ch->old_mode & 07777),
				     (unsigned)(st->st_mode & 07777));
	}
	/*
	 * Strictly after: an entry changed in the clock tick the base was taken
	 * in was changed before the sandbox could read it (its setup takes
	 * longer than a tick), so the sandbox saw that content.
	 */
	if (!before(base, &st->st_ctim))
		return NULL;
	if (dir)
		return pdk_xstrdup("entries added or removed on the host since the run began "
				   "(the change set deletes the whole directory)");
	return pdk_xstrdup("modified on the host since the run began (its content, permissions "
			   "or links changed)");
}

/* The hex of `path`'s bytes: a JSON key whatever the name holds. */
static char *hex_key(const char *path)
{
	size_t n = strlen(path);
	char *k = pdk_xmalloc(2 * n + 1);

	for (size_t i = 0; i < n; i++) {
		static const char digits[] = "0123456789abcdef";

		k[2 * i] = digits[(unsigned char)path[i] >> 4];
		k[2 * i + 1] = digits[(unsigned char)path[i] & 15];
	}
	k[2 * n] = '\0';
	return k;
}

/* What the record says the host had at `path` at the end of a run: 1, 0, or -1 unknown. */
static int recorded(const json_t *rec, const char *path)
{
	_cleanup_free_ char *k = rec != NULL ? hex_key(path) : NULL;
	json_t *v = k != NULL ? json_object_get(rec, k) : NULL;

	return json_is_integer(v) ? (json_integer_value(v) != 0) : -1;
}

/* A conflict the record shows: the host lost or gained `ch`'s path after a run; else NULL. */
static char *judge_record(const struct pdk_ws_change *ch, const json_t *rec)
{
	int had = recorded(rec, ch->path);

	if (had == 1 && ch->kind == PDK_WS_ADDED)
		return pdk_xstrdup("deleted on the host since the run (the change set would "
				   "create it again)");
	if (had == 0 && ch->kind != PDK_WS_ADDED)
		return pdk_xstrdup("appeared on the host since the run (the change set adds it)");
	return NULL;
}

int pdk_ws_conflicts_at(int root_fd, const struct pdk_ws_diff *diff, const struct timespec *base,
			const json_t *record, struct pdk_ws_commit_report *report,
			struct pdk_error **err)
{
	const char *gone = NULL; /* the last directory listed as a conflict */

	for (size_t i = 0; i < diff->n; i++) {
		const struct pdk_ws_change *ch = &diff->v[i];
		struct stat st;
		char *why;
		int rc;

		/* Below a directory reported missing, every entry is missing too: one line says it.
		 */
		if (gone != NULL && under(ch->path, gone))
			continue;
		if ((why = judge_record(ch, record)) != NULL) {
			add_conflict(report, ch->path, why);
			continue;
		}
		rc = lookup(root_fd, ch->path, &st);
		if (rc == -ENOENT && ch->kind != PDK_WS_ADDED) {
			add_conflict(
				report, ch->path,
				pdk_xasprintf("deleted on the host since the run began (it was a "
					      "%s)",
					      type_name(ch->old_mode)));
			gone = S_ISDIR(ch->old_mode) ? ch->path : gone;
			continue;
		}
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return pdk_error_set(err, -rc, "cannot look up '%s' in the workspace",
					     ch->path);
		why = judge(ch, &st, base);
		if (why == NULL)
			continue;
		add_conflict(report, ch->path, why);
		/* A directory in conflict is one: its entries are not listed again. */
		gone = S_ISDIR(ch->old_mode) ? ch->path : gone;
	}
	return 0;
}

/* ---- the base instant ---- */

int pdk__ws_base_reset(const char *set_dir, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", set_dir, BASE_FILE);
	_cleanup_free_ char *rec = pdk_xasprintf("%s/%s", set_dir, RECORD_FILE);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	/* futimens sets the ctime to now, on the clock host entries' ctimes come from. */
	if (fd < 0 || futimens(fd, NULL) < 0)
		return pdk_error_set(err, errno, "cannot record the base of '%s'", set_dir);
	if (unlink(rec) < 0 && errno != ENOENT)
		return pdk_error_set(err, errno, "cannot remove '%s'", rec);
	return 0;
}

int pdk__ws_record_read(const char *set_dir, json_t **out, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", set_dir, RECORD_FILE);
	_cleanup_free_ char *text = NULL;
	_cleanup_error_ struct pdk_error *e = NULL;
	json_error_t je;

	*out = NULL;
	if (pdk_read_file_at(AT_FDCWD, path, RECORD_MAX, &text, &e) < 0)
		return e->status == ENOENT ? 0 : pdk_error_setx(err, e->status, "%s", e->msg);
	*out = json_loads(text, 0, &je);
	if (!json_is_object(*out)) {
		json_decref(steal_ptr(out));
		return pdk_error_setx(err, EINVAL, "'%s' is not a record of the base: %s", path,
				      je.text);
	}
	return 0;
}

int pdk__ws_record(const char *set_dir, const struct pdk_ws_diff *diff, struct pdk_error **err)
{
	_cleanup_free_ char *tmp = pdk_xasprintf("%s/%s.tmp", set_dir, RECORD_FILE);
	_cleanup_free_ char *dst = pdk_xasprintf("%s/%s", set_dir, RECORD_FILE);
	_cleanup_json_ json_t *rec = NULL;
	_cleanup_free_ char *text = NULL;

	if (pdk__ws_record_read(set_dir, &rec, err) < 0)
		return -1;
	if (rec == NULL)
		rec = json_object();
	for (size_t i = 0; i < diff->n; i++) {
		_cleanup_free_ char *k = hex_key(diff->v[i].path);

		/* The first record is the closest to the base: later runs do not replace it. */
		if (json_object_get(rec, k) == NULL)
			pdk_json_set(rec, k, json_integer(diff->v[i].kind != PDK_WS_ADDED));
	}
	text = json_dumps(rec, JSON_COMPACT);
	if (text == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot encode '%s'", dst);
	return pdk_replace_file(tmp, dst, text, err);
}

int pdk__ws_base_get(const char *set_dir, uint64_t created_ns, struct timespec *base,
		     struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", set_dir, BASE_FILE);
	struct stat st;

	if (lstat(path, &st) == 0) {
		*base = st.st_ctim;
		return 0;
	}
	if (errno != ENOENT)
		return pdk_error_set(err, errno, "cannot read the base of '%s'", set_dir);
	/*
	 * A change set made before the base file existed: its creation time,
	 * a second early, since the kernel's file clock may lag the real one by
	 * a tick; an edit in that second counts as a conflict (the safe side).
	 */
	created_ns = created_ns > 1000000000ULL ? created_ns - 1000000000ULL : 0;
	base->tv_sec = (time_t)(created_ns / 1000000000ULL);
	base->tv_nsec = (long)(created_ns % 1000000000ULL);
	return 0;
}
