/*
 * store.c - the daemon's SQLite state (store.h).
 */
#include "common.h"
#include "base.h"
#include "store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <string.h>

#define BUSY_TIMEOUT_MS 10000

/*
 * Every statement the store runs more than once (every exec saves its row,
 * every sandbox's end is a transaction) is prepared once, on first use, with
 * SQLITE_PREPARE_PERSISTENT, and kept until pdk_store_free(): each use binds,
 * steps, then resets and clears its bindings (stmt_done()). Re-preparing on
 * every call was a visible share of an exec's cost (sqlite3Parser in
 * profiles). Only the set-up at open (pragmas, schema) and a nested walk's
 * second statement (walk_start()) are prepared for one use and finalized.
 */
enum store_stmt {
	ST_SB_INSERT,
	ST_SB_GET,
	ST_SB_BY_KEY,
	ST_SB_EACH,
	ST_SB_UPDATE,
	ST_SB_DELETE,
	ST_TOKEN_ADD,
	ST_TOKEN_CHECK,
	ST_TOKEN_EACH,
	ST_TOKEN_REVOKE,
	ST_POOL_DELETE,
	ST_POOL_SET,
	ST_POOL_EACH,
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_ENDED_INSERT,
	ST_ENDED_GET,
	ST_ENDED_BY_KEY,
	ST_ENDED_EACH,
	ST_ENDED_PURGE,
	ST_N
};

struct pdk_store {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *st[ST_N];
};

static const char *const schema[] = {
	"CREATE TABLE IF NOT EXISTS sandboxes ("
	" id TEXT PRIMARY KEY NOT NULL, state TEXT NOT NULL, profile TEXT NOT NULL,"
	" labels TEXT NOT NULL, spec TEXT NOT NULL, idempotency_key TEXT UNIQUE,"
	" supervisor_pid INTEGER NOT NULL DEFAULT 0, created_ns INTEGER NOT NULL,"
	" expires_ns INTEGER NOT NULL DEFAULT 0, idle_timeout_s INTEGER NOT NULL DEFAULT 0,"
	" spool_offset INTEGER NOT NULL DEFAULT 0, output_bytes INTEGER NOT NULL DEFAULT 0,"
	" commands INTEGER NOT NULL DEFAULT 0, pool INTEGER NOT NULL DEFAULT 0,"
	" claimed INTEGER NOT NULL DEFAULT 0)",
	"CREATE TABLE IF NOT EXISTS tokens ("
	" name TEXT PRIMARY KEY NOT NULL, sha256 TEXT UNIQUE NOT NULL, created_ns INTEGER NOT NULL)",
	"CREATE TABLE IF NOT EXISTS pools (profile TEXT PRIMARY KEY NOT NULL, size INTEGER NOT NULL)",
	"CREATE TABLE IF NOT EXISTS ended ("
	" id TEXT PRIMARY KEY NOT NULL, idempotency_key TEXT, ended_ns INTEGER NOT NULL,"
	" reason TEXT NOT NULL, sandbox TEXT NOT NULL)",
	"CREATE INDEX IF NOT EXISTS ended_key ON ended (idempotency_key)",
	"CREATE INDEX IF NOT EXISTS ended_time ON ended (ended_ns)",
};

#define SB_COLUMNS                                                                       \
	"id, state, profile, labels, spec, idempotency_key, supervisor_pid, created_ns," \
	" expires_ns, idle_timeout_s, spool_offset, output_bytes, commands, pool, claimed"

#define ENDED_COLUMNS "id, idempotency_key, ended_ns, reason, sandbox"

static const char *const stmt_sql[ST_N] = {
	[ST_SB_INSERT] = "INSERT INTO sandboxes (" SB_COLUMNS ") VALUES"
			 " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[ST_SB_GET] = "SELECT " SB_COLUMNS " FROM sandboxes WHERE id = ?",
	[ST_SB_BY_KEY] = "SELECT " SB_COLUMNS " FROM sandboxes WHERE idempotency_key = ?",
	[ST_SB_EACH] = "SELECT " SB_COLUMNS " FROM sandboxes ORDER BY created_ns, id",
	[ST_SB_UPDATE] = "UPDATE sandboxes SET state = ?, supervisor_pid = ?, spool_offset = ?,"
			 " output_bytes = ?, commands = ?, pool = ?, claimed = ?, expires_ns = ?,"
			 " labels = ?, idempotency_key = ?, idle_timeout_s = ? WHERE id = ?",
	[ST_SB_DELETE] = "DELETE FROM sandboxes WHERE id = ?",
	[ST_TOKEN_ADD] = "INSERT INTO tokens (name, sha256, created_ns) VALUES (?, ?, ?)",
	[ST_TOKEN_CHECK] = "SELECT name FROM tokens WHERE sha256 = ?",
	[ST_TOKEN_EACH] = "SELECT name, created_ns FROM tokens ORDER BY created_ns, name",
	[ST_TOKEN_REVOKE] = "DELETE FROM tokens WHERE name = ?",
	[ST_POOL_DELETE] = "DELETE FROM pools WHERE profile = ?",
	[ST_POOL_SET] = "INSERT INTO pools (profile, size) VALUES (?, ?)"
			" ON CONFLICT(profile) DO UPDATE SET size = excluded.size",
	[ST_POOL_EACH] = "SELECT profile, size FROM pools ORDER BY profile",
	/* IMMEDIATE: the write lock is taken at BEGIN, so the transaction cannot fail half-way
	 * on a lock upgrade (SQLITE_BUSY after the first write). */
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_ENDED_INSERT] =
		"INSERT OR REPLACE INTO ended (" ENDED_COLUMNS ") VALUES (?, ?, ?, ?, ?)",
	[ST_ENDED_GET] = "SELECT " ENDED_COLUMNS " FROM ended WHERE id = ?",
	[ST_ENDED_BY_KEY] = "SELECT " ENDED_COLUMNS " FROM ended WHERE idempotency_key = ?"
			    " ORDER BY ended_ns DESC LIMIT 1",
	[ST_ENDED_EACH] = "SELECT " ENDED_COLUMNS " FROM ended ORDER BY ended_ns, id",
	[ST_ENDED_PURGE] = "DELETE FROM ended WHERE ended_ns < ?",
};

static inline void cleanup_stmt(sqlite3_stmt **st)
{
	(void)sqlite3_finalize(*st); /* NULL-safe; its status repeats the last step's */
}
#define _cleanup_stmt_ __attribute__((cleanup(cleanup_stmt)))

/*
 * A kept statement is done with: reset (ends its read, if it was stepping)
 * and its bindings dropped (no copy of a caller's text stays in the cache).
 * NULL-safe; the statuses repeat the last step's.
 */
static inline void stmt_done(sqlite3_stmt **st)
{
	if (*st == NULL)
		return;
	(void)sqlite3_reset(*st);
	(void)sqlite3_clear_bindings(*st);
}
#define _cleanup_kept_ __attribute__((cleanup(stmt_done)))

static int db_error(struct pdk_store *s, struct pdk_error **err, const char *what)
{
	return pdk_error_setx(err, EIO, "state store '%s': %s: %s", s->path, what,
			      sqlite3_errmsg(s->db));
}

static int prepare(struct pdk_store *s, const char *sql, sqlite3_stmt **st, struct pdk_error **err)
{
	if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
		return db_error(s, err, sql);
	return 0;
}

/*
 * A statement for the row walkers, whose callbacks may call the store again,
 * even the same walk (a pool pass that destroys a member may start another):
 * the kept one when it is idle, else a fresh one, finalized after.
 */
struct walk {
	sqlite3_stmt *st;
	bool fresh;
};

static inline void walk_done(struct walk *w)
{
	if (w->fresh)
		(void)sqlite3_finalize(w->st);
	else
		stmt_done(&w->st);
}
#define _cleanup_walk_ __attribute__((cleanup(walk_done)))

static int kept(struct pdk_store *s, enum store_stmt id, sqlite3_stmt **st, struct pdk_error **err);

static int walk_start(struct pdk_store *s, enum store_stmt id, struct walk *w,
		      struct pdk_error **err)
{
	if (s->st[id] != NULL && sqlite3_stmt_busy(s->st[id])) {
		w->fresh = true;
		return prepare(s, stmt_sql[id], &w->st, err);
	}
	return kept(s, id, &w->st, err);
}

/* The kept statement `id` in *st, prepared on its first use; the caller's is _cleanup_kept_. */
static int kept(struct pdk_store *s, enum store_stmt id, sqlite3_stmt **st, struct pdk_error **err)
{
	if (s->st[id] == NULL &&
	    sqlite3_prepare_v3(s->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s->st[id],
			       NULL) != SQLITE_OK)
		return db_error(s, err, stmt_sql[id]);
	*st = s->st[id];
	return 0;
}

/* Step a statement that returns no row. */
static int step_done(struct pdk_store *s, sqlite3_stmt *st, struct pdk_error **err)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
		return pdk_error_setx(err, EEXIST, "state store: %s", sqlite3_errmsg(s->db));
	if (rc != SQLITE_DONE)
		return db_error(s, err, sqlite3_sql(st));
	return 0;
}

static int exec_sql(struct pdk_store *s, const char *sql, struct pdk_error **err)
{
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	int rc;

	if (prepare(s, sql, &st, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE)
		return db_error(s, err, sql);
	return 0;
}

void pdk_store_free(struct pdk_store *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < ST_N; i++)
		(void)sqlite3_finalize(s->st[i]); /* NULL-safe */
	(void)sqlite3_close(s->db);
	free(s->path);
	free(s);
}

int pdk_store_open(const char *state_dir, struct pdk_store **out, struct pdk_error **err)
{
	struct pdk_store *s = pdk_xcalloc(1, sizeof(*s));
	int rc, fd;

	s->path = pdk_xasprintf("%s/%s", state_dir, PDK_STORE_DB);
	rc = pdk_mkdir_p(state_dir, err);
	/* SECURITY: the store is created 0600 before SQLite opens it (its -wal and -shm follow). */
	if (rc == 0) {
		fd = TEMP_FAILURE_RETRY(
			open(s->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
		if (fd < 0)
			rc = pdk_error_set(err, errno, "cannot open state store '%s'", s->path);
		else
			(void)close(fd);
	}
	if (rc == 0 &&
	    sqlite3_open_v2(s->path, &s->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
			    NULL) != SQLITE_OK)
		rc = s->db ? db_error(s, err, "open")
			   : pdk_error_setx(err, ENOMEM, "cannot open '%s'", s->path);
	if (rc == 0) {
		sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
		(void)sqlite3_extended_result_codes(s->db, 1);
		rc = exec_sql(s, "PRAGMA journal_mode=WAL", err);
	}
	/*
	 * No fsync per commit (rows change on every exec): in WAL mode NORMAL
	 * still survives a crash of the daemon; only an OS crash or power loss
	 * can lose the last commits, and re-adoption then finds fewer rows, never
	 * a torn one (docs/internals/daemon.md).
	 */
	if (rc == 0)
		rc = exec_sql(s, "PRAGMA synchronous=NORMAL", err);
	for (size_t i = 0; rc == 0 && i < PDK_ARRAY_SIZE(schema); i++)
		rc = exec_sql(s, schema[i], err);
	if (rc < 0) {
		pdk_store_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void pdk_store_sandbox_release(struct pdk_store_sandbox *sb)
{
	free(sb->id);
	free(sb->state);
	free(sb->profile);
	free(sb->labels);
	free(sb->spec);
	free(sb->idempotency_key);
	memset(sb, 0, sizeof(*sb));
}

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v == NULL)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
}

static int bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	return sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

static char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return t == NULL ? NULL : pdk_xstrdup((const char *)t);
}

static uint64_t col_u64(sqlite3_stmt *st, int i)
{
	return (uint64_t)sqlite3_column_int64(st, i);
}

static void read_row(sqlite3_stmt *st, struct pdk_store_sandbox *sb)
{
	sb->id = col_text(st, 0);
	sb->state = col_text(st, 1);
	sb->profile = col_text(st, 2);
	sb->labels = col_text(st, 3);
	sb->spec = col_text(st, 4);
	sb->idempotency_key = col_text(st, 5);
	sb->supervisor_pid = (pid_t)sqlite3_column_int64(st, 6);
	sb->created_ns = col_u64(st, 7);
	sb->expires_ns = col_u64(st, 8);
	sb->idle_timeout_s = col_u64(st, 9);
	sb->spool_offset = col_u64(st, 10);
	sb->output_bytes = col_u64(st, 11);
	sb->commands = col_u64(st, 12);
	sb->pool = sqlite3_column_int(st, 13);
	sb->claimed = sqlite3_column_int(st, 14);
}

int pdk_store_sandbox_insert(struct pdk_store *s, const struct pdk_store_sandbox *sb,
			     struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;
	int rc = 0;

	if (kept(s, ST_SB_INSERT, &st, err) < 0)
		return -EIO;
	rc |= bind_text(st, 1, sb->id);
	rc |= bind_text(st, 2, sb->state);
	rc |= bind_text(st, 3, sb->profile);
	rc |= bind_text(st, 4, sb->labels ? sb->labels : "{}");
	rc |= bind_text(st, 5, sb->spec ? sb->spec : "{}");
	rc |= bind_text(st, 6, sb->idempotency_key);
	rc |= sqlite3_bind_int64(st, 7, sb->supervisor_pid);
	rc |= bind_u64(st, 8, sb->created_ns);
	rc |= bind_u64(st, 9, sb->expires_ns);
	rc |= bind_u64(st, 10, sb->idle_timeout_s);
	rc |= bind_u64(st, 11, sb->spool_offset);
	rc |= bind_u64(st, 12, sb->output_bytes);
	rc |= bind_u64(st, 13, sb->commands);
	rc |= sqlite3_bind_int(st, 14, sb->pool);
	rc |= sqlite3_bind_int(st, 15, sb->claimed);
	if (rc != SQLITE_OK)
		return db_error(s, err, "bind");
	rc = step_done(s, st, err);
	if (rc == -EEXIST)
		return pdk_error_wrap(err, "sandbox '%s'", sb->id);
	return rc;
}

static int get_one(struct pdk_store *s, enum store_stmt id, const char *arg,
		   struct pdk_store_sandbox *out, struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;
	int rc;

	if (kept(s, id, &st, err) < 0)
		return -EIO;
	if (bind_text(st, 1, arg) != SQLITE_OK)
		return db_error(s, err, "bind");
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return pdk_error_setx(err, ENOENT, "no sandbox '%s'", arg);
	if (rc != SQLITE_ROW)
		return db_error(s, err, stmt_sql[id]);
	memset(out, 0, sizeof(*out));
	read_row(st, out);
	return 0;
}

int pdk_store_sandbox_get(struct pdk_store *s, const char *id, struct pdk_store_sandbox *out,
			  struct pdk_error **err)
{
	return get_one(s, ST_SB_GET, id, out, err);
}

int pdk_store_sandbox_by_key(struct pdk_store *s, const char *key, struct pdk_store_sandbox *out,
			     struct pdk_error **err)
{
	return get_one(s, ST_SB_BY_KEY, key, out, err);
}

int pdk_store_sandbox_each(struct pdk_store *s, pdk_store_sandbox_cb cb, void *data,
			   struct pdk_error **err)
{
	_cleanup_walk_ struct walk w = {0};
	int rc;

	if (walk_start(s, ST_SB_EACH, &w, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(w.st)) == SQLITE_ROW) {
		struct pdk_store_sandbox sb = {0};
		int r;

		read_row(w.st, &sb);
		r = cb(data, &sb);
		pdk_store_sandbox_release(&sb);
		if (r != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return db_error(s, err, "list sandboxes");
	return 0;
}

int pdk_store_sandbox_update(struct pdk_store *s, const struct pdk_store_sandbox *sb,
			     struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;
	int rc = 0;

	if (kept(s, ST_SB_UPDATE, &st, err) < 0)
		return -EIO;
	rc |= bind_text(st, 1, sb->state);
	rc |= sqlite3_bind_int64(st, 2, sb->supervisor_pid);
	rc |= bind_u64(st, 3, sb->spool_offset);
	rc |= bind_u64(st, 4, sb->output_bytes);
	rc |= bind_u64(st, 5, sb->commands);
	rc |= sqlite3_bind_int(st, 6, sb->pool);
	rc |= sqlite3_bind_int(st, 7, sb->claimed);
	rc |= bind_u64(st, 8, sb->expires_ns);
	rc |= bind_text(st, 9, sb->labels ? sb->labels : "{}");
	rc |= bind_text(st, 10, sb->idempotency_key);
	rc |= bind_u64(st, 11, sb->idle_timeout_s);
	rc |= bind_text(st, 12, sb->id);
	if (rc != SQLITE_OK)
		return db_error(s, err, "bind");
	if (step_done(s, st, err) < 0)
		return -EIO;
	if (sqlite3_changes(s->db) == 0)
		return pdk_error_setx(err, ENOENT, "no sandbox '%s'", sb->id);
	return 0;
}

static int exec_bound1(struct pdk_store *s, enum store_stmt id, const char *arg,
		       struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;

	if (kept(s, id, &st, err) < 0)
		return -EIO;
	if (bind_text(st, 1, arg) != SQLITE_OK)
		return db_error(s, err, "bind");
	return step_done(s, st, err);
}

int pdk_store_sandbox_delete(struct pdk_store *s, const char *id, struct pdk_error **err)
{
	return exec_bound1(s, ST_SB_DELETE, id, err);
}

int pdk_store_token_add(struct pdk_store *s, const char *name, const char *sha256_hex,
			struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;
	int rc = 0;

	if (kept(s, ST_TOKEN_ADD, &st, err) < 0)
		return -EIO;
	rc |= bind_text(st, 1, name);
	rc |= bind_text(st, 2, sha256_hex);
	rc |= bind_u64(st, 3, pdk_now_real_ns());
	if (rc != SQLITE_OK)
		return db_error(s, err, "bind");
	rc = step_done(s, st, err);
	if (rc == -EEXIST)
		return pdk_error_wrap(err, "token '%s'", name);
	return rc;
}

int pdk_store_token_check(struct pdk_store *s, const char *sha256_hex, char **name,
			  struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;
	int rc;

	if (kept(s, ST_TOKEN_CHECK, &st, err) < 0)
		return -EIO;
	if (bind_text(st, 1, sha256_hex) != SQLITE_OK)
		return db_error(s, err, "bind");
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return db_error(s, err, "check token");
	if (name != NULL)
		*name = col_text(st, 0);
	return 0;
}

/* Rows of (text, integer) from statement `id`, each handed to `cb`; `what` names the query in
 * errors. */
static int each_text_u64(struct pdk_store *s, enum store_stmt id, const char *what,
			 int (*cb)(void *data, const char *text, uint64_t n), void *data,
			 struct pdk_error **err)
{
	_cleanup_walk_ struct walk w = {0};
	int rc;

	if (walk_start(s, id, &w, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(w.st)) == SQLITE_ROW) {
		int r = cb(data, (const char *)sqlite3_column_text(w.st, 0), col_u64(w.st, 1));

		if (r != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return db_error(s, err, what);
	return 0;
}

int pdk_store_token_each(struct pdk_store *s, pdk_store_token_cb cb, void *data,
			 struct pdk_error **err)
{
	return each_text_u64(s, ST_TOKEN_EACH, "list tokens", cb, data, err);
}

int pdk_store_token_revoke(struct pdk_store *s, const char *name, struct pdk_error **err)
{
	if (exec_bound1(s, ST_TOKEN_REVOKE, name, err) < 0)
		return -EIO;
	if (sqlite3_changes(s->db) == 0)
		return pdk_error_setx(err, ENOENT, "no token named '%s'", name);
	return 0;
}

int pdk_store_pool_set(struct pdk_store *s, const char *profile, uint64_t size,
		       struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;
	int rc = 0;

	if (size == 0)
		return exec_bound1(s, ST_POOL_DELETE, profile, err);
	if (kept(s, ST_POOL_SET, &st, err) < 0)
		return -EIO;
	rc |= bind_text(st, 1, profile);
	rc |= bind_u64(st, 2, size);
	if (rc != SQLITE_OK)
		return db_error(s, err, "bind");
	return step_done(s, st, err);
}

int pdk_store_pool_each(struct pdk_store *s, pdk_store_pool_cb cb, void *data,
			struct pdk_error **err)
{
	return each_text_u64(s, ST_POOL_EACH, "list pools", cb, data, err);
}

/* ---- ended sandboxes ---- */

/* Run the kept statement `id`, which takes no binding and returns no row. */
static int exec_kept(struct pdk_store *s, enum store_stmt id, struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;

	if (kept(s, id, &st, err) < 0)
		return -EIO;
	return step_done(s, st, err);
}

static int rollback(struct pdk_store *s, int rc)
{
	(void)!exec_kept(s, ST_ROLLBACK, NULL);
	return rc;
}

static int insert_ended(struct pdk_store *s, const struct pdk_store_ended *e,
			struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;
	int rc = 0;

	if (kept(s, ST_ENDED_INSERT, &st, err) < 0)
		return -EIO;
	rc |= bind_text(st, 1, e->id);
	rc |= bind_text(st, 2, e->idempotency_key);
	rc |= bind_u64(st, 3, e->ended_ns);
	rc |= bind_text(st, 4, e->reason);
	rc |= bind_text(st, 5, e->sandbox);
	if (rc != SQLITE_OK)
		return db_error(s, err, "bind");
	return step_done(s, st, err);
}

int pdk_store_sandbox_end(struct pdk_store *s, const struct pdk_store_ended *e,
			  struct pdk_error **err)
{
	if (exec_kept(s, ST_BEGIN, err) < 0)
		return -EIO;
	if (exec_bound1(s, ST_SB_DELETE, e->id, err) < 0)
		return rollback(s, -EIO);
	if (insert_ended(s, e, err) < 0)
		return rollback(s, -EIO);
	if (exec_kept(s, ST_COMMIT, err) < 0)
		return rollback(s, -EIO);
	return 0;
}

void pdk_store_ended_release(struct pdk_store_ended *e)
{
	free(e->id);
	free(e->idempotency_key);
	free(e->reason);
	free(e->sandbox);
	memset(e, 0, sizeof(*e));
}

static void read_ended(sqlite3_stmt *st, struct pdk_store_ended *e)
{
	e->id = col_text(st, 0);
	e->idempotency_key = col_text(st, 1);
	e->ended_ns = col_u64(st, 2);
	e->reason = col_text(st, 3);
	e->sandbox = col_text(st, 4);
}

static int ended_one(struct pdk_store *s, enum store_stmt id, const char *arg,
		     struct pdk_store_ended *out, struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (kept(s, id, &st, err) < 0)
		return -EIO;
	if (bind_text(st, 1, arg) != SQLITE_OK)
		return db_error(s, err, "bind");
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return pdk_error_setx(err, ENOENT, "no ended sandbox '%s'", arg);
	if (rc != SQLITE_ROW)
		return db_error(s, err, stmt_sql[id]);
	read_ended(st, out);
	return 0;
}

int pdk_store_ended_get(struct pdk_store *s, const char *id, struct pdk_store_ended *out,
			struct pdk_error **err)
{
	return ended_one(s, ST_ENDED_GET, id, out, err);
}

int pdk_store_ended_by_key(struct pdk_store *s, const char *key, struct pdk_store_ended *out,
			   struct pdk_error **err)
{
	return ended_one(s, ST_ENDED_BY_KEY, key, out, err);
}

int pdk_store_ended_each(struct pdk_store *s, pdk_store_ended_cb cb, void *data,
			 struct pdk_error **err)
{
	_cleanup_walk_ struct walk w = {0};
	int rc;

	if (walk_start(s, ST_ENDED_EACH, &w, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(w.st)) == SQLITE_ROW) {
		struct pdk_store_ended e = {0};
		int r;

		read_ended(w.st, &e);
		r = cb(data, &e);
		pdk_store_ended_release(&e);
		if (r != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return db_error(s, err, "list ended sandboxes");
	return 0;
}

int pdk_store_ended_purge(struct pdk_store *s, uint64_t before_ns, struct pdk_error **err)
{
	_cleanup_kept_ sqlite3_stmt *st = NULL;

	if (kept(s, ST_ENDED_PURGE, &st, err) < 0)
		return -EIO;
	if (bind_u64(st, 1, before_ns) != SQLITE_OK)
		return db_error(s, err, "bind");
	if (step_done(s, st, err) < 0)
		return -EIO;
	return sqlite3_changes(s->db);
}

#ifdef PDK_UNIT_TESTING
int pdk__store_statements(struct pdk_store *s)
{
	int n = 0;

	for (sqlite3_stmt *st = sqlite3_next_stmt(s->db, NULL); st != NULL;
	     st = sqlite3_next_stmt(s->db, st))
		n++;
	return n;
}
#endif
