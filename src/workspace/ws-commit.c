/*
 * ws-commit.c - apply a change set to the workspace directory: where content
 * written by untrusted code meets the host.
 *
 * Three passes over the diff:
 *   1. check: refuse what must never land (device nodes, FIFOs, sockets,
 *      symlinks leading out of the directory as it will be after the
 *      commit (ws-links.c), malformed paths); if anything is refused,
 *      nothing is applied;
 *   2. apply, journaling each step: new entries are created with O_EXCL
 *      (never over anything that appeared meanwhile); modified ones are
 *      written under a hidden name next to their target and swapped in with
 *      RENAME_EXCHANGE, which keeps the old content for undo; old entries
 *      (whole trees in one rename) go to a trash directory in the root;
 *   3. on success drop the old contents and the trash; on failure undo the
 *      journal in reverse.
 * Every parent directory is opened beneath the workspace root with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) and
 * every step is an *at() call on it, so no symlink, in the change set or
 * planted on the host side meanwhile, is ever followed.
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

enum step_kind {
	STEP_CREATED,  /* `name` did not exist; remove it (dir: rmdir) */
	STEP_SWAPPED,  /* `name` and `stage` were exchanged; exchange back, drop `stage` */
	STEP_TRASHED,  /* `name` was moved to the trash as `stage` */
	STEP_CHMODDED, /* `name` had `old_mode` */
};

struct step {
	enum step_kind kind;
	bool is_dir;
	mode_t old_mode;
	char *dir;   /* parent, relative to the root ("" for the root) */
	char *name;  /* last component */
	char *stage; /* stage name in `dir`, or the name in the trash */
};

struct commit {
	int root;
	bool as_root; /* geteuid() == 0: new entries get their directory's owner */
	const char *root_path;
	unsigned flags;
	struct step *steps;
	size_t n, cap;
	char *trash; /* name of the trash directory in the root, once made */
	int trash_fd;
	unsigned long seq; /* for unique stage names */
	char *cached_dir;  /* the parent directory fd cache */
	int cached_fd;
	struct pdk_ws_commit_report *rep;
	struct pdk_error **err;
	const struct pdk_ws_diff *diff;
	struct pdk__ws_view *view; /* the directory after the commit, for the links' check */
};

static long openat2_beneath(int dirfd, const char *path, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)flags | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

static void drop_cache(struct commit *c)
{
	if (c->cached_fd >= 0)
		(void)close(c->cached_fd);
	free(c->cached_dir);
	c->cached_dir = NULL;
	c->cached_fd = -1;
}

/* The fd of directory `dir` (relative to the root, "" = root), borrowed; -errno. */
static int open_dir(struct commit *c, const char *dir)
{
	long fd;

	if (c->cached_dir != NULL && strcmp(c->cached_dir, dir) == 0)
		return c->cached_fd;
	drop_cache(c);
	fd = openat2_beneath(c->root, dir[0] ? dir : ".", O_PATH | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	c->cached_fd = (int)fd;
	c->cached_dir = pdk_xstrdup(dir);
	return c->cached_fd;
}

/* Forget the cached fd of `dir` and of anything below it (it moved or went away). */
static void forget_dir(struct commit *c, const char *path)
{
	size_t n = strlen(path);

	if (c->cached_dir != NULL && strncmp(c->cached_dir, path, n) == 0 &&
	    (c->cached_dir[n] == '\0' || c->cached_dir[n] == '/'))
		drop_cache(c);
}

static void split(const char *path, char **dir, char **name)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL) {
		*dir = pdk_xstrdup("");
		*name = pdk_xstrdup(path);
	} else {
		size_t n = (size_t)(slash - path);

		*dir = pdk_xmalloc(n + 1);
		memcpy(*dir, path, n);
		(*dir)[n] = '\0';
		*name = pdk_xstrdup(slash + 1);
	}
}

/* Non-empty components, none "." or "..", no leading or doubled '/'. */
static bool valid_path(const char *p)
{
	if (p == NULL || p[0] == '\0' || p[0] == '/')
		return false;
	for (const char *s = p; *s != '\0';) {
		size_t n = strcspn(s, "/");

		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		s += n;
		if (*s == '/' && *++s == '\0')
			return false;
	}
	return true;
}

static void refuse(struct commit *c, const char *path, char *reason)
{
	struct pdk_ws_commit_report *r = c->rep;

	r->refused = pdk_xrealloc(r->refused, (r->n_refused + 1) * sizeof(*r->refused));
	r->refused[r->n_refused].path = pdk_xstrdup(path);
	r->refused[r->n_refused].reason = reason;
	r->n_refused++;
}

/*
 * SECURITY: a symlink is judged by where it leads in the directory as it
 * will be after the commit (ws-links.c), not by its text: through links
 * the directory holds already, links of the same change set, chains and
 * "..". Its text alone calls "via -> hostlink/passwd" inside when the
 * directory has "hostlink -> /etc".
 */
static void check_link(struct commit *c, const struct pdk_ws_change *ch)
{
	char *why;

	if (c->view == NULL)
		c->view = pdk__ws_view_new(c->root, c->root_path, c->diff);
	why = pdk__ws_link_outside(c->view, ch->path, ch->link);
	if (why == NULL)
		return;
	refuse(c, ch->path,
	       pdk_xasprintf("a symlink leading outside the workspace (to '%s', %s; "
			     "--allow-outside-symlinks accepts it)",
			     ch->link, why));
	free(why);
}

static void check(struct commit *c, const struct pdk_ws_change *ch)
{
	mode_t t = ch->mode & S_IFMT;

	if (!valid_path(ch->path)) {
		refuse(c, ch->path, pdk_xstrdup("not a plain relative path"));
		return;
	}
	if (ch->kind == PDK_WS_DELETED)
		return;
	if (t == S_IFCHR || t == S_IFBLK)
		refuse(c, ch->path, pdk_xstrdup("a device node"));
	else if (t == S_IFIFO)
		refuse(c, ch->path, pdk_xstrdup("a FIFO"));
	else if (t == S_IFSOCK)
		refuse(c, ch->path, pdk_xstrdup("a socket"));
	else if (t != S_IFREG && t != S_IFDIR && t != S_IFLNK)
		refuse(c, ch->path, pdk_xstrdup("an unknown type of file"));
	else if (t == S_IFLNK && ch->link == NULL)
		refuse(c, ch->path, pdk_xstrdup("a symlink whose target could not be read"));
	else if (t == S_IFLNK && !(c->flags & PDK_WS_COMMIT_ALLOW_OUTSIDE_LINKS))
		check_link(c, ch);
}

static struct step *journal(struct commit *c, enum step_kind kind, const char *dir,
			    const char *name, char *stage)
{
	struct step *s;

	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		c->steps = pdk_xrealloc(c->steps, c->cap * sizeof(*s));
	}
	s = &c->steps[c->n++];
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->dir = pdk_xstrdup(dir);
	s->name = pdk_xstrdup(name);
	s->stage = stage;
	return s;
}

static int fail(struct commit *c, int e, const char *what, const char *path)
{
	return pdk_error_set(c->err, e, "%s '%s'", what, path);
}

static char *stage_name(struct commit *c)
{
	return pdk_xasprintf(".paddock-stage-%d-%lu", (int)getpid(), c->seq++);
}

/* Permission bits to write: setuid/setgid never. */
static mode_t safe_mode(struct commit *c, mode_t m)
{
	if (m & (S_ISUID | S_ISGID))
		c->rep->stripped++;
	return m & 01777;
}

/* As root, new entries belong to the owner of the directory they land in, or `like`'s. */
static void give_owner(int fd, const struct stat *like)
{
	if (like != NULL)
		(void)!fchown(fd, like->st_uid, like->st_gid);
}

/*
 * Create the new entry of `ch` as `name` in `dfd` (O_EXCL: never over
 * anything). For a new entry that is its final name; for a modified one a
 * stage name, swapped in afterwards.
 */
static int make_entry(struct commit *c, int dfd, const struct pdk_ws_change *ch, const char *name,
		      const struct stat *owner)
{
	_cleanup_close_ int in = -1;
	_cleanup_close_ int out = -1;
	int rc = 0;

	if (S_ISLNK(ch->mode)) {
		if (symlinkat(ch->link, dfd, name) < 0)
			return fail(c, errno, "cannot create symlink", ch->path);
		if (owner != NULL)
			(void)!fchownat(dfd, name, owner->st_uid, owner->st_gid,
					AT_SYMLINK_NOFOLLOW);
		return 0;
	}
	out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return fail(c, errno, "cannot create", ch->path);
	if (ch->size > 0) {
		in = openat(ch->src_fd, ch->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		rc = in < 0 ? -errno : pdk_copy_sparse(in, out, ch->size);
	}
	if (rc == 0 && fchmod(out, safe_mode(c, ch->mode)) < 0)
		rc = -errno;
	if (rc < 0) {
		(void)unlinkat(dfd, name, 0);
		return fail(c, -rc, "cannot write", ch->path);
	}
	give_owner(out, owner);
	return 0;
}

/* Move the existing `dir/name` into the trash (made on first use). */
static int to_trash(struct commit *c, int dfd, const char *dir, const char *name, const char *path)
{
	struct stat st;
	char *dst;

	if (c->trash == NULL) {
		c->trash = pdk_xasprintf(".paddock-trash-%d-%lu", (int)getpid(), c->seq++);
		if (mkdirat(c->root, c->trash, 0700) < 0) {
			free(c->trash);
			c->trash = NULL;
			return fail(c, errno, "cannot create a trash directory in", c->root_path);
		}
		c->trash_fd = (int)openat2_beneath(c->root, c->trash, O_PATH | O_DIRECTORY);
		if (c->trash_fd < 0)
			return fail(c, errno, "cannot open the trash directory in", c->root_path);
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(c, errno, "cannot find", path);
	dst = pdk_xasprintf("%lu", c->seq++);
	if (renameat2(dfd, name, c->trash_fd, dst, RENAME_NOREPLACE) < 0) {
		int e = errno;

		free(dst);
		return fail(c, e, "cannot move aside", path);
	}
	journal(c, STEP_TRASHED, dir, name, dst)->is_dir = S_ISDIR(st.st_mode);
	if (S_ISDIR(st.st_mode))
		forget_dir(c, path);
	return 0;
}

static int add_entry(struct commit *c, int dfd, const struct pdk_ws_change *ch, const char *dir,
		     const char *name)
{
	struct stat parent;
	const struct stat *owner = NULL;
	int rc;

	/* As root, a new entry gets the owner of its directory. */
	if (c->as_root) {
		if (fstat(dfd, &parent) < 0)
			return fail(c, errno, "cannot read the directory of", ch->path);
		owner = &parent;
	}
	if (S_ISDIR(ch->mode)) {
		_cleanup_close_ int fd = -1;

		if (mkdirat(dfd, name, 0700) < 0)
			return fail(c, errno, "cannot create directory", ch->path);
		journal(c, STEP_CREATED, dir, name, NULL)->is_dir = true;
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fchmod(fd, safe_mode(c, ch->mode)) < 0)
			return fail(c, errno, "cannot set the mode of", ch->path);
		give_owner(fd, owner);
		return 0;
	}
	rc = make_entry(c, dfd, ch, name, owner);
	if (rc == 0)
		journal(c, STEP_CREATED, dir, name, NULL);
	return rc;
}

static int modify_entry(struct commit *c, int dfd, const struct pdk_ws_change *ch, const char *dir,
			const char *name)
{
	struct stat old;
	char *stage;
	int rc;

	if (fstatat(dfd, name, &old, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(c, errno, "cannot find", ch->path);
	if ((old.st_mode & S_IFMT) != (ch->old_mode & S_IFMT) || S_ISDIR(old.st_mode))
		return pdk_error_setx(c->err, ESTALE,
				      "'%s' changed in the workspace since the diff (another type "
				      "of file)",
				      ch->path);
	stage = stage_name(c);
	rc = make_entry(c, dfd, ch, stage, c->as_root ? &old : NULL);
	if (rc == 0 && renameat2(dfd, stage, dfd, name, RENAME_EXCHANGE) < 0) {
		rc = fail(c, errno, "cannot put in place", ch->path);
		(void)unlinkat(dfd, stage, 0);
	}
	if (rc < 0) {
		free(stage);
		return rc;
	}
	journal(c, STEP_SWAPPED, dir, name, stage);
	return 0;
}

/* chmod without following: through an O_PATH fd's /proc/self/fd link. */
static int chmod_nofollow(int dfd, const char *name, mode_t mode, mode_t *old)
{
	_cleanup_close_ int fd = (int)openat2_beneath(dfd, name, O_PATH | O_NOFOLLOW);
	char proc[64];
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return 0; /* a symlink has no mode of its own */
	if (old != NULL)
		*old = st.st_mode & 07777;
	(void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return chmod(proc, mode) < 0 ? -errno : 0;
}

static int apply(struct commit *c, const struct pdk_ws_change *ch)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ char *name = NULL;
	int dfd, rc;

	split(ch->path, &dir, &name);
	dfd = open_dir(c, dir);
	if (dfd < 0)
		return pdk_error_set(c->err, -dfd,
				     "cannot open the directory of '%s' in the workspace (it is "
				     "missing, or a symlink: nothing is followed)",
				     ch->path);
	switch (ch->kind) {
	case PDK_WS_ADDED:
		return add_entry(c, dfd, ch, dir, name);
	case PDK_WS_MODIFIED:
		return modify_entry(c, dfd, ch, dir, name);
	case PDK_WS_DELETED:
		return to_trash(c, dfd, dir, name, ch->path);
	case PDK_WS_REPLACED:
		rc = to_trash(c, dfd, dir, name, ch->path);
		return rc < 0 ? rc : add_entry(c, dfd, ch, dir, name);
	case PDK_WS_MODE: {
		mode_t old = 0;

		rc = chmod_nofollow(dfd, name, safe_mode(c, ch->mode), &old);
		if (rc < 0)
			return fail(c, -rc, "cannot change the mode of", ch->path);
		journal(c, STEP_CHMODDED, dir, name, NULL)->old_mode = old;
		return 0;
	}
	default:
		return pdk_error_setx(c->err, EINVAL, "unknown change to '%s'", ch->path);
	}
}

/* Undo every journaled step, newest first. Best effort: report what could not be undone. */
static void undo(struct commit *c)
{
	for (size_t i = c->n; i-- > 0;) {
		struct step *s = &c->steps[i];
		int dfd;
		int rc = 0;

		drop_cache(c); /* directories move back and forth here */
		dfd = open_dir(c, s->dir);
		if (dfd < 0)
			continue;
		switch (s->kind) {
		case STEP_CREATED:
			rc = unlinkat(dfd, s->name, s->is_dir ? AT_REMOVEDIR : 0);
			break;
		case STEP_SWAPPED:
			rc = renameat2(dfd, s->stage, dfd, s->name, RENAME_EXCHANGE);
			if (rc == 0)
				rc = unlinkat(dfd, s->stage, 0);
			break;
		case STEP_TRASHED:
			rc = renameat2(c->trash_fd, s->stage, dfd, s->name, RENAME_NOREPLACE);
			break;
		case STEP_CHMODDED:
			rc = chmod_nofollow(dfd, s->name, s->old_mode, NULL);
			break;
		default:
			break;
		}
		(void)rc; /* a step that cannot be undone leaves its hidden name behind */
	}
}

/* Success: drop the old contents kept for undo, and the trash. */
static void finish(struct commit *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct step *s = &c->steps[i];
		int dfd;

		if (s->kind != STEP_SWAPPED)
			continue;
		dfd = open_dir(c, s->dir);
		if (dfd >= 0)
			(void)unlinkat(dfd, s->stage, 0);
	}
}

static void release(struct commit *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->steps[i].dir);
		free(c->steps[i].name);
		free(c->steps[i].stage);
	}
	free(c->steps);
	if (c->trash_fd >= 0)
		(void)close(c->trash_fd);
	if (c->trash != NULL) {
		/* Old entries after success; empty after an undo. Leftovers stay hidden. */
		(void)!pdk_rm_rf_at(c->root, c->trash);
		free(c->trash);
	}
	drop_cache(c);
}

/* Is `path` inside a directory that an earlier change already moved away whole? */
static bool under(const char *path, const char *dir)
{
	size_t n = dir != NULL ? strlen(dir) : 0;

	return n > 0 && strncmp(path, dir, n) == 0 && path[n] == '/';
}

int pdk_ws_commit_at(int root_fd, const char *root_path, const struct pdk_ws_diff *diff,
		     unsigned flags, struct pdk_ws_commit_report *report, struct pdk_error **err)
{
	struct commit c = {
		.root = root_fd,
		.as_root = geteuid() == 0,
		.root_path = root_path,
		.flags = flags,
		.trash_fd = -1,
		.cached_fd = -1,
		.rep = report,
		.err = err,
		.diff = diff,
	};
	const char *gone = NULL; /* the last directory moved away whole */
	int rc = 0;

	memset(report, 0, sizeof(*report));
	for (size_t i = 0; i < diff->n; i++)
		check(&c, &diff->v[i]);
	pdk__ws_view_free(steal_ptr(&c.view));
	if (report->n_refused > 0) {
		report->stripped = 0;
		return pdk_error_setx(err, EPERM, "%zu entr%s refused", report->n_refused,
				      report->n_refused == 1 ? "y" : "ies");
	}
	if (flags & PDK_WS_COMMIT_DRY_RUN) {
		for (size_t i = 0; i < diff->n; i++)
			if (diff->v[i].mode & (S_ISUID | S_ISGID))
				report->stripped++;
		return 0;
	}
	for (size_t i = 0; i < diff->n && rc == 0; i++) {
		const struct pdk_ws_change *ch = &diff->v[i];

		/* Entries of a tree that went to the trash whole went with it. */
		if (ch->kind == PDK_WS_DELETED && under(ch->path, gone)) {
			report->applied++;
			continue;
		}
		rc = apply(&c, ch);
		if (rc == 0 && (ch->kind == PDK_WS_DELETED || ch->kind == PDK_WS_REPLACED) &&
		    S_ISDIR(ch->old_mode))
			gone = ch->path;
		if (rc == 0)
			report->applied++;
	}
	if (rc < 0) {
		undo(&c);
		report->applied = 0;
	} else {
		finish(&c);
		(void)syncfs(root_fd);
	}
	release(&c);
	return rc;
}

void pdk_ws_commit_report_release(struct pdk_ws_commit_report *r)
{
	for (size_t i = 0; i < r->n_refused; i++) {
		free(r->refused[i].path);
		free(r->refused[i].reason);
	}
	free(r->refused);
	for (size_t i = 0; i < r->n_conflicts; i++) {
		free(r->conflicts[i].path);
		free(r->conflicts[i].reason);
	}
	free(r->conflicts);
	memset(r, 0, sizeof(*r));
}
