/*
 * audit-spool.c - the run spool: a `paddock run` appends its events to a
 * file of its own (STATE/audit-spool/ID.jsonl) and the next audit command
 * (or a later run, past PDK_AUDIT_SPOOL_FOLD_AT spools) folds them into the
 * store: chained, hashed and signed there. A run so never opens SQLite nor
 * loads OpenSSL (their set-up, page faults and memory were most of its
 * audit cost).
 *
 * The durability promise (docs/audit.md): each event is written to the
 * spool by one write() before emit() returns, so the record of everything
 * that happened is in the file when the process dies, however it dies; a
 * finished run's records are all there before its exit status is. The run
 * holds an exclusive flock() on its spool while it writes: a folder skips
 * a locked spool (its run is live) and folds one whose lock is free (its
 * run ended, or was killed). Bytes after the last newline of a dead run's
 * spool are a write cut short by SIGKILL: never a complete record, they
 * are dropped and counted. A folded spool may be kept, emptied, as a
 * spare that a later run renames to its own name (no inode allocated per
 * run); a spare never holds a record.
 */
#include "common.h"
#include "audit-internal.h"
#include "base.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * The fold's way into the store (audit.c: SQLite, OpenSSL) is by weak
 * references: the front binary, `paddock`, writes spools and is linked
 * without the store (docs/internals/binaries.md); there these are NULL, and
 * nothing calls the fold, which needs a store opened by pdk_audit_open().
 */
#pragma weak pdk_audit_append_spool
#pragma weak pdk_audit_checkpoint
#pragma weak pdk_audit_spool_forget
#pragma weak pdk_audit_spool_offset

#define SPOOL_EXT  ".jsonl"
#define SPOOL_NEW  ".new"
#define FOLD_CHUNK ((size_t)4 << 20)
#define SOURCE_PFX "spool/"
#define SPARE_PFX  ".spare-"
/* Spares a run tries before it makes a spool: each miss is one rename(). */
#define SPARE_TRIES 4
/* The most records a journal keeps in memory for its fold. */
#define JOURNAL_KEPT_MAX 4096
/*
 * STATE/audit-spool/.waiting: one byte appended for every spool made, its
 * size set to the spools left by every fold: how many spools wait, about,
 * for one stat() (pdk_audit_spool_waiting()). Advisory: a byte lost to a
 * fold that ran meanwhile makes a fold come a run later; a size that says
 * too many is checked against the directory and set right.
 */
#define WAITING ".waiting"

/* ---- the sink ---- */

static int spool_emit(void *data, const json_t *event, struct pdk_error **err)
{
	int fd = *(int *)data;
	/* Keys in the order they were set: the fold stores the canonical line (sorted). */
	_cleanup_free_ char *line = pdk_json_dump_wire(event);
	int rc;

	if (line == NULL)
		return pdk_error_setx(err, ENOMEM, "audit: cannot serialise an event");
	/* One write() per record: a process killed at any point leaves whole lines before it. */
	rc = pdk_write_all(fd, line, strlen(line));
	if (rc < 0)
		return pdk_error_set(err, -rc, "audit: cannot write event '%s' to the spool",
				     json_string_value(json_object_get(event, "kind")));
	return 0;
}

/* The stream's end: the lock goes with the fd, and the spool can be folded. */
static int spool_close(void *data, struct pdk_error **err)
{
	int *fd = data;

	(void)err;
	if (*fd >= 0)
		(void)close(steal_fd(fd));
	return 0;
}

static void spool_free(void *data)
{
	int *fd = data;

	if (*fd >= 0)
		(void)close(*fd);
	free(fd);
}

static const struct pdk_events_sink spool_sink_ops = {
	.name = "audit spool",
	.emit = spool_emit,
	.close = spool_close,
	.free = spool_free,
};

/*
 * STATE/audit-spool (0700), and the state directory, when missing: only
 * after a spool could not be opened for that reason, so that a run does
 * not pay a mkdir() that finds the directory there.
 */
static int spool_dir_make(const char *state_dir, const char *dir, struct pdk_error **err)
{
	int rc = mkdir(dir, 0700) < 0 ? errno : 0;

	if (rc == ENOENT) {
		if (pdk_mkdir_p(state_dir, err) < 0)
			return -EIO;
		rc = mkdir(dir, 0700) < 0 ? errno : 0;
	}
	if (rc != 0 && rc != EEXIST)
		return pdk_error_set(err, rc, "cannot create the audit spool directory '%s'", dir);
	return 0;
}

/*
 * Lock a spool just opened under our name: 1 when it is ours, 0 when it was
 * removed meanwhile. A folder may open it in between, take the lock first,
 * find it empty and remove it (it removes or recycles a spool only while it
 * holds its lock, and recycles only a spool that held records): our flock()
 * then waits for that folder and gets a removed file, st_nlink 0, and the
 * caller makes one again. A record is never written to a removed spool.
 * A spare holds no byte (a folder empties a folded spool before it names
 * it a spare); should one hold some, they were folded: they are dropped.
 */
static int spool_lock(int fd, const char *path, struct pdk_error **err)
{
	struct stat st;

	/* SECURITY: the lock is what tells a folder that this run lives. */
	if (TEMP_FAILURE_RETRY(flock(fd, LOCK_EX)) < 0 || fstat(fd, &st) < 0)
		return pdk_error_set(err, errno, "cannot lock the audit spool '%s'", path);
	if (st.st_nlink == 0)
		return 0;
	if (st.st_size > 0 && ftruncate(fd, 0) < 0)
		return pdk_error_set(err, errno, "cannot empty the audit spool '%s'", path);
	return 1;
}

/*
 * A spare spool renamed to our name: a folded spool that a folder emptied
 * and kept as SPARE_PFX + N, N < PDK_AUDIT_SPOOL_SPARES, so that a run
 * reuses its inode instead of allocating one (file creation was most of
 * what the spool cost a run, docs/internals/performance.md). `next`, the
 * spare WAITING points at (-1: none), is tried first, then a few picked by
 * the id's random end; each miss is one rename() that finds nothing. The opened fd, -1 when no
 * spare was taken (or it was removed again before we opened it).
 */
static int spare_take(const char *dir, const char *id, const char *path, long next)
{
	size_t n = strlen(id);
	unsigned long r = strtoul(id + (n > 8 ? n - 8 : 0), NULL, 16);

	for (int i = next >= 0 ? -1 : 0; i < SPARE_TRIES; i++) {
		char spare[PATH_MAX];
		unsigned long k = (unsigned long)next;
		int len;

		if (i >= 0) {
			k = r % PDK_AUDIT_SPOOL_SPARES;
			r /= PDK_AUDIT_SPOOL_SPARES;
		}
		len = snprintf(spare, sizeof(spare), "%s/" SPARE_PFX "%lu", dir, k);
		if (len < 0 || (size_t)len >= sizeof(spare))
			return -1;
		if (rename(spare, path) == 0)
			return TEMP_FAILURE_RETRY(
				open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW));
		if (errno != ENOENT)
			return -1;
	}
	return -1;
}

static int spool_open(const char *dir, const char *id, const char *path, long next,
		      bool *spare_tried)
{
	int fd = -1;

	if (!*spare_tried) {
		*spare_tried = true;
		fd = spare_take(dir, id, path, next);
	}
	if (fd >= 0)
		return fd;
	return TEMP_FAILURE_RETRY(
		open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
}

/* How many spools the directory at `dirfd` holds. */
static uint64_t count_in(int dirfd);

/*
 * STATE/audit-spool/WAITING opened to append to, and the spare it points at
 * in *next: a fold names its spares from 0 up and sets WAITING to the
 * spools it left, each spool made since added one, so its size is the next
 * spare not taken yet. -1 (and *next -1) when it is missing.
 */
static int waiting_open(const char *dir, long *next)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/" WAITING, dir);
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;

	*next = fd >= 0 && fstat(fd, &st) == 0 && st.st_size < PDK_AUDIT_SPOOL_SPARES
			? (long)st.st_size
			: -1;
	return fd;
}

/*
 * One more spool waits: a byte appended to WAITING (best effort: it is
 * advisory). Missing (`fd` -1: a state directory of an older paddock, or
 * removed): made, saying what the directory holds, this spool included.
 */
static void waiting_add(const char *dir, int fd)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_close_ int made = -1;

	if (fd >= 0) {
		(void)!write(fd, "+", 1);
		return;
	}
	if ((dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	made = openat(dirfd, WAITING, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (made >= 0)
		(void)!ftruncate(made, (off_t)count_in(dirfd));
}

/* WAITING says `n` (best effort). */
static void waiting_set(int dirfd, uint64_t n)
{
	_cleanup_close_ int fd =
		openat(dirfd, WAITING, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd >= 0)
		(void)!ftruncate(fd, (off_t)n);
}

/*
 * STATE/audit-spool/ID.jsonl taken (a spare, when `spare`) or made, and
 * locked: its fd, or -errno with *err. Readable too: a journal folds its
 * own spool through it.
 */
static int spool_create(const char *state_dir, const char *id, bool spare, struct pdk_error **err)
{
	_cleanup_free_ char *dir = pdk_xasprintf("%s/%s", state_dir, PDK_AUDIT_SPOOL_DIR);
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s" SPOOL_EXT, dir, id);
	bool made_dir = false, spare_tried = !spare;
	long next;
	_cleanup_close_ int waiting = waiting_open(dir, &next);

	for (int tries = 0; tries < 8; tries++) {
		_cleanup_close_ int fd = spool_open(dir, id, path, next, &spare_tried);
		int rc;

		/* No directory (or a state "directory" that is not one): made, or named. */
		if (fd < 0 && (errno == ENOENT || errno == ENOTDIR) && !made_dir) {
			if (spool_dir_make(state_dir, dir, err) < 0)
				return -EIO;
			made_dir = true;
			continue;
		}
		if (fd < 0)
			return pdk_error_set(err, errno, "cannot create the audit spool '%s'",
					     path);
		rc = spool_lock(fd, path, err);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			waiting_add(dir, waiting);
			return steal_fd(&fd);
		}
	}
	return pdk_error_setx(err, EAGAIN,
			      "the audit spool '%s' was removed by a fold as it was made: "
			      "retry the run",
			      path);
}

int pdk_audit_add_spool(struct pdk_events *ev, const char *state_dir, const char *id,
			struct pdk_error **err)
{
	int fd = spool_create(state_dir, id, true, err);
	int *data;

	if (fd < 0)
		return fd;
	data = pdk_xmalloc(sizeof(*data));
	*data = fd;
	pdk_events_add_sink(ev, &spool_sink_ops, data);
	return 0;
}

/* ---- reading a spool ---- */

static void release_events(json_t **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		json_decref(v[i]);
	free(v);
}

/*
 * The events of the complete lines of buf[0..len): *used is the bytes they
 * take. A complete line that is not an event was not written by a spool
 * sink: -EBADMSG (the spool is kept, nothing of it is folded).
 */
static int parse_lines(const char *buf, size_t len, json_t ***out, size_t *n, size_t *used)
{
	json_t **v = NULL;
	const char *p = buf, *nl;

	*n = *used = 0;
	while ((nl = memchr(p, '\n', (size_t)(buf + len - p))) != NULL) {
		json_t *e = pdk_json_loadb(p, (size_t)(nl - p), JSON_REJECT_DUPLICATES, NULL);

		if (!json_is_object(e) || !json_is_string(json_object_get(e, "kind")) ||
		    !json_is_string(json_object_get(e, "sandbox"))) {
			json_decref(e);
			release_events(v, *n);
			*used = (size_t)(p - buf);
			return -EBADMSG;
		}
		v = pdk_xrealloc(v, (*n + 1) * sizeof(*v));
		v[(*n)++] = e;
		p = nl + 1;
	}
	*used = (size_t)(p - buf);
	*out = v;
	return 0;
}

/* Up to `max` bytes of fd from `off` into a new buffer; *got the count. */
static int read_chunk(int fd, uint64_t off, size_t max, char **out, size_t *got)
{
	char *buf = pdk_xmalloc(max);
	ssize_t r = TEMP_FAILURE_RETRY(pread(fd, buf, max, (off_t)off));

	if (r < 0) {
		free(buf);
		return -errno;
	}
	*out = buf;
	*got = (size_t)r;
	return 0;
}

/* ---- folding ---- */

struct spool {
	const char *name; /* ID.jsonl, borrowed */
	char *source;     /* spool/ID: its key in spool_offsets */
	int fd;
	uint64_t size;
	bool running; /* its run holds the lock */
};

/*
 * Fold the complete lines from `*off` in chunks, each one transaction with
 * the new offset. The chunk grows to hold a line longer than it (a record
 * is at most PDK_AUDIT_RECORD_MAX).
 */
static int fold_lines(struct pdk_audit *a, struct spool *sp, uint64_t *off,
		      struct pdk_audit_fold *res, struct pdk_error **err)
{
	size_t chunk = FOLD_CHUNK;

	while (*off < sp->size) {
		_cleanup_free_ char *buf = NULL;
		json_t **ev = NULL;
		size_t got = 0, n, used;
		int rc = read_chunk(sp->fd, *off, chunk, &buf, &got);

		if (rc < 0)
			return pdk_error_set(err, -rc, "cannot read the audit spool '%s'",
					     sp->name);
		rc = parse_lines(buf, got, &ev, &n, &used);
		if (rc < 0)
			return pdk_error_setx(err, EBADMSG,
					      "audit spool '%s': the line at byte %" PRIu64
					      " is not an event (the spool is kept)",
					      sp->name, *off + used);
		if (used == 0 && got == chunk && chunk < PDK_AUDIT_RECORD_MAX + 1) {
			chunk *= 2; /* one line longer than the chunk */
			continue;
		}
		if (used == 0)
			break; /* what is left is a line its dead writer did not finish */
		rc = pdk_audit_append_spool(a, ev, n, sp->source, *off + used, err);
		release_events(ev, n);
		if (rc < 0)
			return rc;
		*off += used;
		res->records += n;
	}
	return 0;
}

/* The spare names the directory holds, and where the next free one is looked for. */
struct spares {
	bool taken[PDK_AUDIT_SPOOL_SPARES];
	unsigned next;
};

/* "." SPARE_PFX N: marks N taken. */
static void spares_note(struct spares *sp, const char *name)
{
	char *end;
	unsigned long n;

	if (strncmp(name, SPARE_PFX, strlen(SPARE_PFX)) != 0)
		return;
	n = strtoul(name + strlen(SPARE_PFX), &end, 10);
	if (*end == '\0' && n < PDK_AUDIT_SPOOL_SPARES)
		sp->taken[n] = true;
}

/*
 * A folded spool, still locked, emptied and kept as a spare for a later
 * run (true), when it held records and a spare name is free; otherwise the
 * caller removes it. An empty spool is never kept: a run that took a spare
 * and has not locked it yet looks just like it, and must find it removed
 * (st_nlink 0), never renamed back under its feet. Emptied before it is
 * renamed: a spare never holds a record.
 */
static bool spool_recycle(int dirfd, struct spool *sp, struct spares *spares)
{
	char name[32];

	if (sp->size == 0 || spares == NULL)
		return false;
	while (spares->next < PDK_AUDIT_SPOOL_SPARES && spares->taken[spares->next])
		spares->next++;
	if (spares->next >= PDK_AUDIT_SPOOL_SPARES || ftruncate(sp->fd, 0) < 0)
		return false;
	(void)snprintf(name, sizeof(name), SPARE_PFX "%u", spares->next);
	spares->taken[spares->next] = true;
	return renameat2(dirfd, sp->name, dirfd, name, RENAME_NOREPLACE) == 0;
}

/*
 * A spool folded up to `off`: what is left past it is a torn line; the file
 * emptied and kept as a spare, or removed, then its offset forgotten.
 */
static int fold_done(struct pdk_audit *a, int dirfd, struct spool *sp, uint64_t off,
		     struct spares *spares, struct pdk_audit_fold *res, struct pdk_error **err)
{
	res->torn_bytes += sp->size > off ? sp->size - off : 0;
	if (!spool_recycle(dirfd, sp, spares) && unlinkat(dirfd, sp->name, 0) < 0 &&
	    errno != ENOENT)
		return pdk_error_set(err, errno, "cannot remove the folded audit spool '%s'",
				     sp->name);
	res->spools++;
	return pdk_audit_spool_forget(a, sp->source, err);
}

/*
 * One spool whose run is over: its records appended after the store's
 * head, then the file emptied and kept as a spare, or removed, while it is
 * still locked (a folder that opened it meanwhile finds it unlinked), then
 * its offset forgotten. A crash between two steps leaves the offset that
 * says how far the file was folded: nothing is appended twice (an emptied
 * spool left with its offset has nothing past it).
 */
static int fold_locked(struct pdk_audit *a, int dirfd, struct spool *sp, struct spares *spares,
		       struct pdk_audit_fold *res, struct pdk_error **err)
{
	uint64_t off;

	if (pdk_audit_spool_offset(a, sp->source, &off, err) < 0 ||
	    fold_lines(a, sp, &off, res, err) < 0)
		return -EIO;
	return fold_done(a, dirfd, sp, off, spares, res, err);
}

/* Open and try to lock one spool: 1 locked (its run is over), 0 skip, < 0 error. */
static int spool_take(int dirfd, struct spool *sp, struct pdk_error **err)
{
	struct stat st;

	/* Writable: a folded spool is emptied to be kept as a spare. */
	sp->fd = TEMP_FAILURE_RETRY(openat(dirfd, sp->name, O_RDWR | O_CLOEXEC | O_NOFOLLOW));
	if (sp->fd < 0)
		return errno == ENOENT ? 0
				       : pdk_error_set(err, errno, "cannot open '%s'", sp->name);
	if (flock(sp->fd, LOCK_EX | LOCK_NB) < 0) {
		sp->running = errno == EWOULDBLOCK;
		return sp->running ? 0 : pdk_error_set(err, errno, "cannot lock '%s'", sp->name);
	}
	if (fstat(sp->fd, &st) < 0)
		return pdk_error_set(err, errno, "cannot stat '%s'", sp->name);
	sp->size = (uint64_t)st.st_size;
	return st.st_nlink > 0; /* 0: another folder removed it after it was opened */
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m && strcmp(s + n - m, suffix) == 0;
}

/*
 * One entry of the spool directory. A ".new" left unlocked is a spool of
 * an older paddock (which made its spool under that name, locked it, then
 * renamed it) whose run died before the rename: it holds nothing.
 */
static int fold_entry(struct pdk_audit *a, int dirfd, const char *name, struct spares *spares,
		      struct pdk_audit_fold *res, struct pdk_error **err)
{
	struct spool sp = {.name = name, .fd = -1};
	bool is_new = has_suffix(name, SPOOL_NEW);
	int rc;

	if (!is_new && !has_suffix(name, SPOOL_EXT))
		return 0;
	rc = spool_take(dirfd, &sp, err);
	if (sp.running && !is_new)
		res->running++;
	if (rc > 0 && is_new)
		rc = unlinkat(dirfd, name, 0) < 0 && errno != ENOENT
			     ? pdk_error_set(err, errno, "cannot remove '%s'", name)
			     : 0;
	else if (rc > 0) {
		sp.source = pdk_xasprintf(SOURCE_PFX "%.*s",
					  (int)(strlen(name) - strlen(SPOOL_EXT)), name);
		rc = fold_locked(a, dirfd, &sp, spares, res, err);
		free(sp.source);
	}
	if (sp.fd >= 0)
		(void)close(sp.fd);
	return rc < 0 ? rc : 0;
}

static int cmp_names(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/*
 * The spool directory's entry names, sorted (runs are folded in the order
 * of their ids), and its spares noted in *spares when not NULL.
 */
static int list_spools(const char *state_dir, int *dfd, char ***names, struct spares *spares,
		       struct pdk_error **err)
{
	_cleanup_free_ char *dir = pdk_xasprintf("%s/%s", state_dir, PDK_AUDIT_SPOOL_DIR);
	DIR *d = opendir(dir);
	struct dirent *de;

	*names = NULL;
	*dfd = -1;
	if (d == NULL)
		return errno == ENOENT ? 0 : pdk_error_set(err, errno, "cannot open '%s'", dir);
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			pdk_strv_push(names, de->d_name);
		else if (spares != NULL)
			spares_note(spares, de->d_name + 1);
	*dfd = TEMP_FAILURE_RETRY(fcntl(dirfd(d), F_DUPFD_CLOEXEC, 0));
	(void)closedir(d);
	if (*dfd < 0)
		return pdk_error_set(err, errno, "cannot open '%s'", dir);
	if (*names != NULL)
		qsort(*names, pdk_strv_len(*names), sizeof(**names), cmp_names);
	return 0;
}

int pdk_audit_fold(struct pdk_audit *a, struct pdk_audit_fold *res, struct pdk_error **err)
{
	return pdk_audit_fold_some(a, UINT64_MAX, res, err);
}

int pdk_audit_fold_some(struct pdk_audit *a, uint64_t max_spools, struct pdk_audit_fold *res,
			struct pdk_error **err)
{
	_cleanup_strv_ char **names = NULL;
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ struct spares *spares = pdk_xcalloc(1, sizeof(*spares));

	*res = (struct pdk_audit_fold){0};
	if (list_spools(a->state_dir, &dirfd, &names, spares, err) < 0)
		return -EIO;
	for (size_t i = 0; names != NULL && names[i] != NULL && res->spools < max_spools; i++)
		if (fold_entry(a, dirfd, names[i], spares, res, err) < 0)
			return pdk_error_wrap(err, "audit: fold the run spools");
	if (dirfd >= 0) {
		uint64_t listed = 0;

		for (size_t i = 0; names != NULL && names[i] != NULL; i++)
			listed += has_suffix(names[i], SPOOL_EXT);
		waiting_set(dirfd, listed > res->spools ? listed - res->spools : 0);
	}
	/*
	 * One signature over the head covers every record folded (the chain
	 * links them); a fold cut before it leaves them to the next fold that
	 * folds something, which signs whatever head it finds unsigned. A fold
	 * that found nothing takes no write lock (tail -f folds at every poll).
	 */
	if ((res->records > 0 || res->spools > 0) && pdk_audit_checkpoint(a, err) < 0)
		return pdk_error_wrap(err, "audit: sign the folded runs");
	return 0;
}

/* ---- what is not folded yet ---- */

static uint64_t count_lines(int fd)
{
	char buf[65536];
	uint64_t n = 0;
	ssize_t r;

	while ((r = TEMP_FAILURE_RETRY(read(fd, buf, sizeof(buf)))) > 0)
		for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + r - p))) != NULL; p++)
			n++;
	return n;
}

int pdk_audit_pending(const char *state_dir, pdk_audit_spool_cb cb, void *data,
		      struct pdk_error **err)
{
	_cleanup_strv_ char **names = NULL;
	_cleanup_close_ int dirfd = -1;

	if (list_spools(state_dir, &dirfd, &names, NULL, err) < 0)
		return -EIO;
	for (size_t i = 0; names != NULL && names[i] != NULL; i++) {
		_cleanup_close_ int fd = -1;
		struct pdk_audit_spool s = {.name = names[i]};
		int rc;

		if (!has_suffix(names[i], SPOOL_EXT))
			continue;
		fd = TEMP_FAILURE_RETRY(openat(dirfd, names[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
		if (fd < 0)
			continue; /* folded meanwhile */
		/* A shared lock is refused while the run holds its exclusive one. */
		s.running = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
		s.records = count_lines(fd);
		rc = cb(data, &s);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static uint64_t count_in(int dirfd)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	uint64_t n = 0;

	if (d == NULL && fd >= 0)
		(void)close(fd);
	while (d != NULL && (de = readdir(d)) != NULL)
		n += has_suffix(de->d_name, SPOOL_EXT);
	return n;
}

int pdk_audit_spool_count(const char *state_dir)
{
	_cleanup_free_ char *dir = pdk_xasprintf("%s/%s", state_dir, PDK_AUDIT_SPOOL_DIR);
	_cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t n = dirfd >= 0 ? count_in(dirfd) : 0;

	return n > INT_MAX ? INT_MAX : (int)n;
}

int pdk_audit_spool_waiting(const char *state_dir)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s/" WAITING, state_dir, PDK_AUDIT_SPOOL_DIR);
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return -1;
	return st.st_size > INT_MAX ? INT_MAX : (int)st.st_size;
}

void pdk_audit_spool_waiting_set(const char *state_dir, int n)
{
	_cleanup_free_ char *dir = pdk_xasprintf("%s/%s", state_dir, PDK_AUDIT_SPOOL_DIR);
	_cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dirfd >= 0 && n >= 0)
		waiting_set(dirfd, (uint64_t)n);
}

/* ---- a long-lived writer's spool ---- */

struct pdk_audit_journal {
	char *state_dir, *id;
	uint64_t gen;     /* the generation: its file is ID-GEN.jsonl */
	int fd, dirfd;    /* the generation's file (-1: not made yet), the spool directory */
	char *name;       /* ID-GEN.jsonl while fd is open */
	uint64_t size;    /* bytes written to it: where the next line starts */
	uint64_t pending; /* lines written to it and not folded */
	json_t **events;  /* its lines' events (references), while `kept` */
	size_t cap;
	/*
	 * events[0..pending) are its lines, and no fold of it was tried: a
	 * fold needs not read the file. Once one failed, the next goes by the
	 * file, from the offset saved.
	 */
	bool kept;
};

struct pdk_audit_journal *pdk_audit_journal_new(const char *state_dir, const char *id)
{
	struct pdk_audit_journal *j = pdk_xcalloc(1, sizeof(*j));

	j->state_dir = pdk_xstrdup(state_dir);
	j->id = pdk_xstrdup(id);
	j->fd = j->dirfd = -1;
	return j;
}

/* The generation's file made (or a spare taken) and locked, as a run's spool is. */
static int journal_open(struct pdk_audit_journal *j, struct pdk_error **err)
{
	_cleanup_free_ char *id = pdk_xasprintf("%s-%08" PRIx64, j->id, j->gen);
	/* No spare: a journal's folds remove its files, and each miss would cost a rename(). */
	int fd = spool_create(j->state_dir, id, false, err);

	if (fd < 0)
		return fd;
	if (j->dirfd < 0) {
		_cleanup_free_ char *dir =
			pdk_xasprintf("%s/%s", j->state_dir, PDK_AUDIT_SPOOL_DIR);

		j->dirfd = TEMP_FAILURE_RETRY(open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		if (j->dirfd < 0) {
			(void)close(fd);
			return pdk_error_set(err, errno, "cannot open '%s'", dir);
		}
	}
	j->fd = fd;
	j->name = pdk_xasprintf("%s" SPOOL_EXT, id);
	j->size = j->pending = 0;
	j->kept = true;
	return 0;
}

static void journal_drop_events(struct pdk_audit_journal *j)
{
	for (size_t i = 0; j->kept && i < j->pending; i++)
		json_decref(j->events[i]);
	j->kept = false;
}

/*
 * The event kept for the fold, as long as few enough wait (a fold that
 * keeps failing makes the next one read the file instead of memory).
 */
static void journal_keep(struct pdk_audit_journal *j, const json_t *event)
{
	if (!j->kept)
		return;
	if (j->pending >= JOURNAL_KEPT_MAX) {
		journal_drop_events(j);
		return;
	}
	if (j->pending >= j->cap) {
		j->cap = j->cap ? 2 * j->cap : 64;
		j->events = pdk_xrealloc(j->events, j->cap * sizeof(*j->events));
	}
	j->events[j->pending] = json_incref((json_t *)event);
}

/* The generation is over: its lock released; the next record makes the next one. */
static void journal_next(struct pdk_audit_journal *j)
{
	journal_drop_events(j);
	(void)close(steal_fd(&j->fd));
	free(j->name);
	j->name = NULL;
	j->gen++;
	j->size = j->pending = 0;
}

/*
 * The event's line: compact, ASCII, a newline. Its keys are not sorted (a
 * fold stores the canonical line, keys sorted, whether it has the event
 * from memory or parses the line): a record written on a request's path
 * costs no sort.
 */
static char *journal_line(const json_t *event, size_t *n)
{
	char *s = pdk_json_dump_wire(event);

	*n = s != NULL ? strlen(s) : 0;
	return s;
}

int pdk_audit_journal_append(struct pdk_audit_journal *j, const json_t *event,
			     struct pdk_error **err)
{
	size_t n = 0;
	_cleanup_free_ char *line = journal_line(event, &n);

	if (line == NULL)
		return pdk_error_setx(err, ENOMEM, "audit: cannot serialise an event");
	return pdk_audit_journal_append_line(j, event, line, n, err);
}

int pdk_audit_journal_append_line(struct pdk_audit_journal *j, const json_t *event,
				  const char *line, size_t n, struct pdk_error **err)
{
	int rc;

	if (j->fd < 0 && journal_open(j, err) < 0)
		return -EIO;
	/* One write() per record, as a run's: a process killed at any point leaves whole lines. */
	rc = pdk_write_all(j->fd, line, n);
	if (rc < 0) {
		/*
		 * A line cut short would make the next one unreadable: it is cut
		 * off, or else the file is left to the folds of dead spools
		 * (which drop a torn last line) and the next record starts the
		 * next generation.
		 */
		rc = pdk_error_set(err, -rc, "audit: cannot write event '%s' to the spool '%s'",
				   json_string_value(json_object_get(event, "kind")), j->name);
		if (ftruncate(j->fd, (off_t)j->size) < 0)
			journal_next(j);
		return rc;
	}
	journal_keep(j, event);
	j->size += n;
	j->pending++;
	return 0;
}

uint64_t pdk_audit_journal_pending(const struct pdk_audit_journal *j)
{
	return j->fd >= 0 ? j->pending : 0;
}

/* Whether the generation's file was removed (a fold that failed after it removed the file). */
static bool journal_gone(const struct pdk_audit_journal *j)
{
	struct stat st;

	return fstat(j->fd, &st) == 0 && st.st_nlink == 0;
}

/*
 * The fold of a generation from the events kept in memory, the same steps
 * as from its file (the lines are those events: parsing them again would
 * cost more than the rest of the fold). Its first fold only: its name is
 * new, so no offset was saved for it and every line is to be folded.
 */
static int fold_kept(struct pdk_audit_journal *j, struct pdk_audit *a, struct spool *sp,
		     struct pdk_audit_fold *res, struct pdk_error **err)
{
	if (pdk_audit_append_spool(a, j->events, j->pending, sp->source, j->size, err) < 0)
		return -EIO;
	res->records += j->pending;
	return fold_done(a, j->dirfd, sp, j->size, NULL, res, err);
}

int pdk_audit_journal_fold(struct pdk_audit_journal *j, struct pdk_audit *a, uint64_t *records,
			   struct pdk_error **err)
{
	struct pdk_audit_fold res = {0};
	struct spool sp = {.name = j->name, .fd = j->fd, .size = j->size};
	int rc;

	if (records != NULL)
		*records = 0;
	if (j->fd < 0 || j->pending == 0)
		return 0;
	/*
	 * The same steps as the fold of a dead run's spool, under the lock we
	 * hold: the records (from memory, or the lines from the saved offset)
	 * with the offset they reach, then the file removed, then the offset
	 * forgotten. Killed anywhere in between, the file is a dead spool any
	 * fold takes up from there.
	 */
	sp.source = pdk_xasprintf(SOURCE_PFX "%.*s", (int)(strlen(j->name) - strlen(SPOOL_EXT)),
				  j->name);
	rc = j->kept ? fold_kept(j, a, &sp, &res, err)
		     : fold_locked(a, j->dirfd, &sp, NULL, &res, err);
	journal_drop_events(j);
	free(sp.source);
	if (records != NULL)
		*records = res.records;
	/* SECURITY: a removed file is never written to again: its records would be lost. */
	if (rc == 0 || journal_gone(j))
		journal_next(j);
	return rc < 0 ? pdk_error_wrap(err, "audit: fold the spool") : 0;
}

void pdk_audit_journal_free(struct pdk_audit_journal *j)
{
	if (j == NULL)
		return;
	if (j->fd >= 0)
		(void)close(j->fd);
	if (j->dirfd >= 0)
		(void)close(j->dirfd);
	journal_drop_events(j);
	free(j->events);
	free(j->name);
	free(j->state_dir);
	free(j->id);
	free(j);
}
