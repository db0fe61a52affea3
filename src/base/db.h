/*
 * db.h - an SQLite store file: open, pragmas, schema, kept statements,
 * transactions. The daemon's state store (control/store.c) and the audit
 * store (audit/audit.c) are both built on it.
 *
 * Opening: the directory is made (mode 0700), the file is created 0600
 * before SQLite sees it, symlinks are refused, and the connection is
 * configured the same way for every store (WAL, synchronous=NORMAL,
 * extended result codes) plus what the store's spec asks (busy timeout,
 * WAL housekeeping), then the schema statements run.
 *
 * Kept statements: a store names its SQL in a table indexed by an enum of
 * its own. Each is prepared once (SQLITE_PREPARE_PERSISTENT), at open or at
 * its first use, and kept until pdk_db_close(): a use binds, steps, then
 * resets. Preparing again per call showed in profiles (sqlite3Parser).
 *
 * Errors are -EIO with "NAME 'PATH': WHAT: sqlite's message", where NAME
 * is the spec's ("state store", "audit store"); a UNIQUE or PRIMARY KEY
 * constraint is -EEXIST.
 *
 * This header does not include <sqlite3.h>: a file that steps statements
 * includes it.
 */
#ifndef PDK_DB_H
#define PDK_DB_H

#include "common.h"
#include "error.h"

struct sqlite3;
struct sqlite3_stmt;

/* What a store is: fixed for its life, usually a static const. */
struct pdk_db_spec {
	const char *name;          /* in errors: "state store" */
	int busy_timeout_ms;       /* how long a writer waits for another's transaction */
	const char *const *schema; /* run at every open, in order (CREATE ... IF NOT EXISTS) */
	size_t n_schema;
	const char *const *stmts; /* the kept statements' SQL, by the store's index */
	size_t n_stmts;
	size_t n_prepared_at_open; /* stmts[0 .. n) are prepared at open, the rest at first use */
	/*
	 * 0: SQLite's default (the last connection to close checkpoints and
	 * deletes the WAL). Otherwise a close leaves the WAL, and an open that
	 * finds it larger than this many bytes checkpoints it (PASSIVE).
	 */
	size_t wal_checkpoint_bytes;
	/*
	 * A reader's connection (SQLITE_OPEN_READONLY): the file must exist
	 * (-ENOENT otherwise); nothing is created, configured or written, and
	 * no schema statement runs. For a second connection that only reads
	 * beside the store's writer (a verification on a worker thread).
	 */
	bool read_only;
};

struct pdk_db {
	struct sqlite3 *conn;           /* the connection (owned) */
	char *path;                     /* the database file (owned) */
	const struct pdk_db_spec *spec; /* borrowed for the db's life */
	struct sqlite3_stmt **kept;     /* spec->n_stmts, NULL until prepared */
	struct sqlite3_stmt *txn[4];    /* BEGIN, BEGIN IMMEDIATE, COMMIT, ROLLBACK: kept too */
};

/*
 * Open (creating it if need be) `dir`/`file` as `spec` says (borrowed for
 * the db's life). `db` is caller storage; on failure it is left closed
 * (pdk_db_close() is still safe). 0, or negative + *err: the directory or
 * the file cannot be made (its errno), SQLite cannot open it or a schema
 * statement fails (-EIO), -ENOMEM without a connection.
 */
PDK_MUST_CHECK int pdk_db_open(struct pdk_db *db, const char *dir, const char *file,
			       const struct pdk_db_spec *spec, struct pdk_error **err);

/* Finalize every statement and close the connection. Safe on a zeroed or closed db. */
void pdk_db_close(struct pdk_db *db);

/* Set *err to -EIO "NAME 'PATH': what: sqlite's last message"; returns -EIO. */
int pdk_db_error(struct pdk_db *db, struct pdk_error **err, const char *what);

/* Prepare `sql` for one use (*st: the caller finalizes: _cleanup_db_stmt_). 0 or -EIO. */
PDK_MUST_CHECK int pdk_db_prepare(struct pdk_db *db, const char *sql, struct sqlite3_stmt **st,
				  struct pdk_error **err);

/* Prepare, run to completion (rows are dropped) and finalize `sql`. 0 or -EIO. */
PDK_MUST_CHECK int pdk_db_exec(struct pdk_db *db, const char *sql, struct pdk_error **err);

/*
 * The kept statement `id` (an index into spec->stmts) in *st, borrowed,
 * prepared now if this is its first use. The caller binds and steps it,
 * then resets it: a local declared _cleanup_db_kept_ does. 0 or -EIO.
 */
PDK_MUST_CHECK int pdk_db_kept(struct pdk_db *db, size_t id, struct sqlite3_stmt **st,
			       struct pdk_error **err);

/*
 * Step `st`, a statement that returns no row. 0, -EEXIST for a UNIQUE or
 * PRIMARY KEY constraint, or -EIO. The statement is not reset.
 */
PDK_MUST_CHECK int pdk_db_step_done(struct pdk_db *db, struct sqlite3_stmt *st,
				    struct pdk_error **err);

/*
 * A statement for a walk over rows whose callback may use the store again,
 * even start the same walk: the kept statement `id` when it is idle, else a
 * fresh one, finalized when the walk is done. Declare it
 * `_cleanup_db_walk_ struct pdk_db_walk w = {0};`.
 */
struct pdk_db_walk {
	struct sqlite3_stmt *st;
	bool fresh;
};

PDK_MUST_CHECK int pdk_db_walk_start(struct pdk_db *db, size_t id, struct pdk_db_walk *w,
				     struct pdk_error **err);

/*
 * Transactions, on kept statements. A write transaction is BEGIN
 * IMMEDIATE: the write lock is taken at BEGIN, so it cannot fail half-way
 * on a lock upgrade (SQLITE_BUSY after the first write), and what it read
 * is what it writes after. A read transaction (BEGIN) sees one snapshot.
 */
enum pdk_db_txn {
	PDK_DB_READ = 0,
	PDK_DB_WRITE = 1,
};

/* BEGIN or BEGIN IMMEDIATE. 0 or -EIO. */
PDK_MUST_CHECK int pdk_db_begin(struct pdk_db *db, enum pdk_db_txn kind, struct pdk_error **err);

/* COMMIT. 0 or -EIO (the transaction is still open: roll it back). */
PDK_MUST_CHECK int pdk_db_commit(struct pdk_db *db, struct pdk_error **err);

/*
 * ROLLBACK, after a failure: the error to report is the one that caused
 * it, so this one's own is dropped. Returns `rc`, for
 * `return pdk_db_rollback(db, rc);`.
 */
int pdk_db_rollback(struct pdk_db *db, int rc);

/* Cleanup helpers (NULL-safe): finalize a one-use statement; reset a kept one; end a walk. */
void pdk__db_finalize(struct sqlite3_stmt **st);
void pdk__db_kept_done(struct sqlite3_stmt **st);
void pdk__db_walk_done(struct pdk_db_walk *w);
#define _cleanup_db_stmt_ __attribute__((cleanup(pdk__db_finalize)))
#define _cleanup_db_kept_ __attribute__((cleanup(pdk__db_kept_done)))
#define _cleanup_db_walk_ __attribute__((cleanup(pdk__db_walk_done)))

#endif
