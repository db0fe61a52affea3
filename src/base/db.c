/*
 * db.c - an SQLite store file (db.h).
 */
#include "common.h"
#include "db.h"
#include "util.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { TXN_BEGIN, TXN_BEGIN_IMMEDIATE, TXN_COMMIT, TXN_ROLLBACK };

static const char *const txn_sql[] = {
	[TXN_BEGIN] = "BEGIN",
	[TXN_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
	[TXN_COMMIT] = "COMMIT",
	[TXN_ROLLBACK] = "ROLLBACK",
};

_Static_assert(PDK_ARRAY_SIZE(txn_sql) == PDK_ARRAY_SIZE(((struct pdk_db *)0)->txn),
	       "one kept statement per transaction verb");

int pdk_db_error(struct pdk_db *db, struct pdk_error **err, const char *what)
{
	return pdk_error_setx(err, EIO, "%s '%s': %s: %s", db->spec->name, db->path, what,
			      sqlite3_errmsg(db->conn));
}

int pdk_db_prepare(struct pdk_db *db, const char *sql, sqlite3_stmt **st, struct pdk_error **err)
{
	if (sqlite3_prepare_v2(db->conn, sql, -1, st, NULL) != SQLITE_OK)
		return pdk_db_error(db, err, sql);
	return 0;
}

int pdk_db_exec(struct pdk_db *db, const char *sql, struct pdk_error **err)
{
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;
	int rc;

	if (pdk_db_prepare(db, sql, &st, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE)
		return pdk_db_error(db, err, sql);
	return 0;
}

/* Prepare `sql` into the kept slot *slot unless it is there already. */
static int keep(struct pdk_db *db, const char *sql, sqlite3_stmt **slot, struct pdk_error **err)
{
	if (*slot == NULL && sqlite3_prepare_v3(db->conn, sql, -1, SQLITE_PREPARE_PERSISTENT, slot,
						NULL) != SQLITE_OK)
		return pdk_db_error(db, err, sql);
	return 0;
}

int pdk_db_kept(struct pdk_db *db, size_t id, sqlite3_stmt **st, struct pdk_error **err)
{
	if (id >= db->spec->n_stmts)
		pdk_bug("pdk_db_kept: no such statement");
	if (keep(db, db->spec->stmts[id], &db->kept[id], err) < 0)
		return -EIO;
	*st = db->kept[id];
	return 0;
}

int pdk_db_step_done(struct pdk_db *db, sqlite3_stmt *st, struct pdk_error **err)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_DONE)
		return 0;
	if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
		return pdk_error_setx(err, EEXIST, "%s: %s", db->spec->name,
				      sqlite3_errmsg(db->conn));
	return pdk_db_error(db, err, sqlite3_sql(st));
}

int pdk_db_walk_start(struct pdk_db *db, size_t id, struct pdk_db_walk *w, struct pdk_error **err)
{
	w->fresh =
		id < db->spec->n_stmts && db->kept[id] != NULL && sqlite3_stmt_busy(db->kept[id]);
	if (w->fresh)
		return pdk_db_prepare(db, db->spec->stmts[id], &w->st, err);
	return pdk_db_kept(db, id, &w->st, err);
}

void pdk__db_finalize(sqlite3_stmt **st)
{
	(void)sqlite3_finalize(*st); /* NULL-safe; its status repeats the last step's */
}

/*
 * A kept statement is done with: reset (ends its read, if it was stepping)
 * and its bindings dropped (no copy of a caller's text stays in the cache).
 * The statuses repeat the last step's.
 */
void pdk__db_kept_done(sqlite3_stmt **st)
{
	if (*st == NULL)
		return;
	(void)sqlite3_reset(*st);
	(void)sqlite3_clear_bindings(*st);
}

void pdk__db_walk_done(struct pdk_db_walk *w)
{
	if (w->fresh)
		pdk__db_finalize(&w->st);
	else
		pdk__db_kept_done(&w->st);
}

/* Run the kept transaction statement `t` and reset it. */
static int txn(struct pdk_db *db, int t, struct pdk_error **err)
{
	int rc;

	if (keep(db, txn_sql[t], &db->txn[t], err) < 0)
		return -EIO;
	rc = pdk_db_step_done(db, db->txn[t], err);
	(void)sqlite3_reset(db->txn[t]); /* the step's status is the one that counts */
	return rc;
}

int pdk_db_begin(struct pdk_db *db, enum pdk_db_txn kind, struct pdk_error **err)
{
	return txn(db, kind == PDK_DB_WRITE ? TXN_BEGIN_IMMEDIATE : TXN_BEGIN, err);
}

int pdk_db_commit(struct pdk_db *db, struct pdk_error **err)
{
	return txn(db, TXN_COMMIT, err);
}

int pdk_db_rollback(struct pdk_db *db, int rc)
{
	_cleanup_error_ struct pdk_error *rerr = NULL;

	(void)!txn(db, TXN_ROLLBACK, &rerr); /* the first error is the one to report */
	return rc;
}

/*
 * SECURITY: the store is created 0600 before SQLite opens it (its -wal and
 * -shm follow). O_EXCL: an existing store is never opened here, because
 * POSIX locks belong to the process, and closing any descriptor of the file
 * would drop the locks another connection of this process holds on it (its
 * WAL could then be deleted under it by another process's last close).
 */
static int create_file(struct pdk_db *db, struct pdk_error **err)
{
	int fd = TEMP_FAILURE_RETRY(
		open(db->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));

	if (fd < 0 && errno == EEXIST)
		return 0; /* a link is refused by SQLITE_OPEN_NOFOLLOW below */
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open %s '%s'", db->spec->name, db->path);
	(void)close(fd);
	return 0;
}

static int open_conn(struct pdk_db *db, struct pdk_error **err)
{
	int mode = db->spec->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;

	if (sqlite3_open_v2(db->path, &db->conn, mode | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
			    NULL) == SQLITE_OK)
		return 0;
	if (db->conn == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot open '%s'", db->path);
	return pdk_db_error(db, err, "open");
}

/*
 * A store whose runs are short-lived connections (the audit store: one per
 * `paddock run`) keeps its WAL at close instead of checkpointing it and
 * fdatasync()ing at the end of every run; an open that finds it larger
 * than the spec's bound checkpoints it then, PASSIVE: it never waits for
 * another reader or writer, and what it cannot copy now a later open will.
 * The bound matters: the first connection after a close re-reads the
 * whole WAL. It is housekeeping: its result does not matter.
 */
static void wal_housekeeping(struct pdk_db *db)
{
	_cleanup_free_ char *wal = NULL;
	struct stat st;

	if (db->spec->wal_checkpoint_bytes == 0)
		return;
	(void)sqlite3_db_config(db->conn, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	wal = pdk_xasprintf("%s-wal", db->path);
	if (stat(wal, &st) == 0 && (size_t)st.st_size > db->spec->wal_checkpoint_bytes)
		(void)sqlite3_wal_checkpoint_v2(db->conn, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
						NULL);
}

/*
 * The store in WAL mode. Switching a new store to WAL needs it alone, and
 * two processes that open a new store at once (two runs folding their
 * spools into a store made a moment ago) can each hold the lock the other
 * waits for: SQLite then answers SQLITE_BUSY at once, without the busy
 * handler, to break the deadlock ("database is locked" after no wait).
 * The switch is tried again, 1 ms apart, for up to the store's busy
 * timeout; on a store in WAL already it is a read, and passes first time.
 */
static int set_wal(struct pdk_db *db, struct pdk_error **err)
{
	static const char sql[] = "PRAGMA journal_mode=WAL";
	uint64_t end = pdk_now_mono_ns() + (uint64_t)db->spec->busy_timeout_ms * 1000000ULL;
	const struct timespec ms = {.tv_nsec = 1000000};
	int rc;

	while ((rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL)) != SQLITE_OK &&
	       (rc & 0xff) == SQLITE_BUSY && pdk_now_mono_ns() < end)
		(void)nanosleep(&ms, NULL);
	if (rc != SQLITE_OK)
		return pdk_db_error(db, err, sql);
	return 0;
}

static int configure(struct pdk_db *db, struct pdk_error **err)
{
	const struct pdk_db_spec *spec = db->spec;

	(void)sqlite3_busy_timeout(db->conn, spec->busy_timeout_ms); /* cannot fail on an open db */
	(void)sqlite3_extended_result_codes(db->conn, 1);
	/* A reader changes nothing: the writer made the file, its WAL mode and its schema. */
	if (spec->read_only)
		return 0;
	if (set_wal(db, err) < 0)
		return -EIO;
	/*
	 * No fsync per commit: in WAL mode NORMAL still survives a crash of
	 * paddock; only an OS crash or power loss can lose the last commits,
	 * and a store then holds fewer rows, never a torn one
	 * (docs/internals/base.md).
	 */
	if (pdk_db_exec(db, "PRAGMA synchronous=NORMAL", err) < 0)
		return -EIO;
	for (size_t i = 0; i < spec->n_schema; i++)
		if (pdk_db_exec(db, spec->schema[i], err) < 0)
			return -EIO;
	wal_housekeeping(db);
	for (size_t i = 0; i < spec->n_prepared_at_open && i < spec->n_stmts; i++)
		if (keep(db, spec->stmts[i], &db->kept[i], err) < 0)
			return -EIO;
	return 0;
}

int pdk_db_open(struct pdk_db *db, const char *dir, const char *file,
		const struct pdk_db_spec *spec, struct pdk_error **err)
{
	int rc;

	*db = (struct pdk_db){.spec = spec};
	db->path = pdk_xasprintf("%s/%s", dir, file);
	db->kept = pdk_xcalloc(spec->n_stmts ? spec->n_stmts : 1, sizeof(*db->kept));
	if (spec->read_only && access(db->path, F_OK) < 0)
		rc = pdk_error_set(err, errno, "cannot open %s '%s'", spec->name, db->path);
	else
		rc = spec->read_only ? 0 : pdk_mkdir_p(dir, err);
	if (rc == 0 && !spec->read_only)
		rc = create_file(db, err);
	if (rc == 0)
		rc = open_conn(db, err);
	if (rc == 0)
		rc = configure(db, err);
	if (rc < 0)
		pdk_db_close(db);
	return rc;
}

void pdk_db_close(struct pdk_db *db)
{
	if (db->kept != NULL)
		for (size_t i = 0; i < db->spec->n_stmts; i++)
			(void)sqlite3_finalize(db->kept[i]); /* NULL-safe */
	for (size_t i = 0; i < PDK_ARRAY_SIZE(db->txn); i++)
		(void)sqlite3_finalize(db->txn[i]);
	(void)sqlite3_close(db->conn); /* NULL-safe; every statement is finalized */
	free(db->kept);
	free(db->path);
	*db = (struct pdk_db){.spec = db->spec};
}
