/*
 * store.c - the daemon's SQLite state (store.h).
 */
#include "common.h"
#include "base.h"
#include "store.h"

#include <sqlite3.h>
#include <string.h>

/*
 * Every statement the store runs more than once (every exec saves its row,
 * every sandbox's end is a transaction) is a kept statement (base/db.h),
 * prepared on first use and kept until pdk_store_free(): each use binds,
 * steps, then resets and clears its bindings (_cleanup_db_kept_).
 * Re-preparing on every call was a visible share of an exec's cost
 * (sqlite3Parser in profiles). Only the set-up at open (pragmas, schema) and
 * a nested walk's second statement (pdk_db_walk_start()) are prepared for
 * one use and finalized.
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
	ST_E2B_KEY_ADD,
	ST_E2B_KEY_CHECK,
	ST_E2B_KEY_EACH,
	ST_E2B_KEY_REVOKE,
	ST_POOL_DELETE,
	ST_POOL_SET,
	ST_POOL_EACH,
	ST_ENDED_INSERT,
	ST_ENDED_GET,
	ST_ENDED_BY_KEY,
	ST_ENDED_EACH,
	ST_ENDED_PURGE,
	ST_N
};

struct pdk_store {
	struct pdk_db db;
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
	"CREATE TABLE IF NOT EXISTS e2b_keys ("
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
	[ST_E2B_KEY_ADD] = "INSERT INTO e2b_keys (name, sha256, created_ns) VALUES (?, ?, ?)",
	[ST_E2B_KEY_CHECK] = "SELECT name FROM e2b_keys WHERE sha256 = ?",
	[ST_E2B_KEY_EACH] = "SELECT name, created_ns FROM e2b_keys ORDER BY created_ns, name",
	[ST_E2B_KEY_REVOKE] = "DELETE FROM e2b_keys WHERE name = ?",
	[ST_POOL_DELETE] = "DELETE FROM pools WHERE profile = ?",
	[ST_POOL_SET] = "INSERT INTO pools (profile, size) VALUES (?, ?)"
			" ON CONFLICT(profile) DO UPDATE SET size = excluded.size",
	[ST_POOL_EACH] = "SELECT profile, size FROM pools ORDER BY profile",
	[ST_ENDED_INSERT] =
		"INSERT OR REPLACE INTO ended (" ENDED_COLUMNS ") VALUES (?, ?, ?, ?, ?)",
	[ST_ENDED_GET] = "SELECT " ENDED_COLUMNS " FROM ended WHERE id = ?",
	[ST_ENDED_BY_KEY] = "SELECT " ENDED_COLUMNS " FROM ended WHERE idempotency_key = ?"
			    " ORDER BY ended_ns DESC LIMIT 1",
	[ST_ENDED_EACH] = "SELECT " ENDED_COLUMNS " FROM ended ORDER BY ended_ns, id",
	[ST_ENDED_PURGE] = "DELETE FROM ended WHERE ended_ns < ?",
};

static const struct pdk_db_spec store_db = {
	.name = "state store",
	.busy_timeout_ms = 10000,
	.schema = schema,
	.n_schema = PDK_ARRAY_SIZE(schema),
	.stmts = stmt_sql,
	.n_stmts = ST_N,
};

static int db_error(struct pdk_store *s, struct pdk_error **err, const char *what)
{
	return pdk_db_error(&s->db, err, what);
}

/* The kept statement `id` in *st; the caller's local is _cleanup_db_kept_. */
static int kept(struct pdk_store *s, enum store_stmt id, sqlite3_stmt **st, struct pdk_error **err)
{
	return pdk_db_kept(&s->db, id, st, err);
}

static int step_done(struct pdk_store *s, sqlite3_stmt *st, struct pdk_error **err)
{
	return pdk_db_step_done(&s->db, st, err);
}

void pdk_store_free(struct pdk_store *s)
{
	if (s == NULL)
		return;
	pdk_db_close(&s->db);
	free(s);
}

/*
 * In WAL mode with synchronous=NORMAL (base/db.c) the rows, which change on
 * every exec, are not fsync()ed per commit; re-adoption after an OS crash
 * finds fewer rows, never a torn one (docs/internals/daemon.md).
 */
int pdk_store_open(const char *state_dir, struct pdk_store **out, struct pdk_error **err)
{
	struct pdk_store *s = pdk_xcalloc(1, sizeof(*s));
	int rc = pdk_db_open(&s->db, state_dir, PDK_STORE_DB, &store_db, err);

	if (rc < 0) {
		free(s);
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

/*
 * The one row of kept statement `id` for `arg` (an id or a key), read by
 * `read` into `out`; -ENOENT "no `noun` 'arg'" when there is none.
 */
static int one_row(struct pdk_store *s, enum store_stmt id, const char *arg, const char *noun,
		   void (*read)(sqlite3_stmt *st, void *out), void *out, struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
	int rc;

	if (kept(s, id, &st, err) < 0)
		return -EIO;
	if (bind_text(st, 1, arg) != SQLITE_OK)
		return db_error(s, err, "bind");
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return pdk_error_setx(err, ENOENT, "no %s '%s'", noun, arg);
	if (rc != SQLITE_ROW)
		return db_error(s, err, stmt_sql[id]);
	read(st, out);
	return 0;
}

/*
 * Every row of the walk `id`, each handed to `row` (which reads it and calls
 * the caller's callback; a non-zero return ends the walk and is returned).
 * `what` names the query in errors.
 */
static int each_row(struct pdk_store *s, enum store_stmt id, const char *what,
		    int (*row)(void *ctx, sqlite3_stmt *st), void *ctx, struct pdk_error **err)
{
	_cleanup_db_walk_ struct pdk_db_walk w = {0};
	int rc;

	if (pdk_db_walk_start(&s->db, id, &w, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(w.st)) == SQLITE_ROW) {
		int r = row(ctx, w.st);

		if (r != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return db_error(s, err, what);
	return 0;
}

/* A sandbox row into `out` (a struct pdk_store_sandbox, overwritten). */
static void read_row(sqlite3_stmt *st, void *out)
{
	struct pdk_store_sandbox *sb = out;

	memset(sb, 0, sizeof(*sb));
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
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
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

int pdk_store_sandbox_get(struct pdk_store *s, const char *id, struct pdk_store_sandbox *out,
			  struct pdk_error **err)
{
	return one_row(s, ST_SB_GET, id, "sandbox", read_row, out, err);
}

int pdk_store_sandbox_by_key(struct pdk_store *s, const char *key, struct pdk_store_sandbox *out,
			     struct pdk_error **err)
{
	return one_row(s, ST_SB_BY_KEY, key, "sandbox", read_row, out, err);
}

struct sandbox_walk {
	pdk_store_sandbox_cb cb;
	void *data;
};

static int sandbox_row(void *ctx, sqlite3_stmt *st)
{
	struct sandbox_walk *w = ctx;
	struct pdk_store_sandbox sb;
	int r;

	read_row(st, &sb);
	r = w->cb(w->data, &sb);
	pdk_store_sandbox_release(&sb);
	return r;
}

int pdk_store_sandbox_each(struct pdk_store *s, pdk_store_sandbox_cb cb, void *data,
			   struct pdk_error **err)
{
	struct sandbox_walk w = {cb, data};

	return each_row(s, ST_SB_EACH, "list sandboxes", sandbox_row, &w, err);
}

int pdk_store_sandbox_update(struct pdk_store *s, const struct pdk_store_sandbox *sb,
			     struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
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
	if (sqlite3_changes(s->db.conn) == 0)
		return pdk_error_setx(err, ENOENT, "no sandbox '%s'", sb->id);
	return 0;
}

static int exec_bound1(struct pdk_store *s, enum store_stmt id, const char *arg,
		       struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;

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

/*
 * Credentials whose SHA-256 alone is stored: admin tokens and E2B API keys,
 * each in a table of its own (name, sha256, created_ns). `st` is the
 * table's first statement: its add, check, each and revoke follow it.
 */
static int cred_add(struct pdk_store *s, enum store_stmt st_add, const char *what, const char *name,
		    const char *sha256_hex, struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
	int rc = 0;

	if (kept(s, st_add, &st, err) < 0)
		return -EIO;
	rc |= bind_text(st, 1, name);
	rc |= bind_text(st, 2, sha256_hex);
	rc |= bind_u64(st, 3, pdk_now_real_ns());
	if (rc != SQLITE_OK)
		return db_error(s, err, "bind");
	rc = step_done(s, st, err);
	if (rc == -EEXIST)
		return pdk_error_wrap(err, "%s '%s'", what, name);
	return rc;
}

static int cred_check(struct pdk_store *s, enum store_stmt st_check, const char *sha256_hex,
		      char **name, struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
	int rc;

	if (kept(s, st_check, &st, err) < 0)
		return -EIO;
	if (bind_text(st, 1, sha256_hex) != SQLITE_OK)
		return db_error(s, err, "bind");
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return db_error(s, err, "check a credential");
	if (name != NULL)
		*name = col_text(st, 0);
	return 0;
}

struct text_u64_walk {
	int (*cb)(void *data, const char *text, uint64_t n);
	void *data;
};

static int text_u64_row(void *ctx, sqlite3_stmt *st)
{
	struct text_u64_walk *w = ctx;

	return w->cb(w->data, (const char *)sqlite3_column_text(st, 0), col_u64(st, 1));
}

static int cred_revoke(struct pdk_store *s, enum store_stmt st_revoke, const char *what,
		       const char *name, struct pdk_error **err)
{
	if (exec_bound1(s, st_revoke, name, err) < 0)
		return -EIO;
	if (sqlite3_changes(s->db.conn) == 0)
		return pdk_error_setx(err, ENOENT, "no %s named '%s'", what, name);
	return 0;
}

int pdk_store_token_add(struct pdk_store *s, const char *name, const char *sha256_hex,
			struct pdk_error **err)
{
	return cred_add(s, ST_TOKEN_ADD, "token", name, sha256_hex, err);
}

int pdk_store_token_check(struct pdk_store *s, const char *sha256_hex, char **name,
			  struct pdk_error **err)
{
	return cred_check(s, ST_TOKEN_CHECK, sha256_hex, name, err);
}

int pdk_store_token_each(struct pdk_store *s, pdk_store_token_cb cb, void *data,
			 struct pdk_error **err)
{
	struct text_u64_walk w = {cb, data};

	return each_row(s, ST_TOKEN_EACH, "list tokens", text_u64_row, &w, err);
}

int pdk_store_token_revoke(struct pdk_store *s, const char *name, struct pdk_error **err)
{
	return cred_revoke(s, ST_TOKEN_REVOKE, "token", name, err);
}

int pdk_store_e2b_key_add(struct pdk_store *s, const char *name, const char *sha256_hex,
			  struct pdk_error **err)
{
	return cred_add(s, ST_E2B_KEY_ADD, "E2B API key", name, sha256_hex, err);
}

int pdk_store_e2b_key_check(struct pdk_store *s, const char *sha256_hex, char **name,
			    struct pdk_error **err)
{
	return cred_check(s, ST_E2B_KEY_CHECK, sha256_hex, name, err);
}

int pdk_store_e2b_key_each(struct pdk_store *s, pdk_store_token_cb cb, void *data,
			   struct pdk_error **err)
{
	struct text_u64_walk w = {cb, data};

	return each_row(s, ST_E2B_KEY_EACH, "list E2B API keys", text_u64_row, &w, err);
}

int pdk_store_e2b_key_revoke(struct pdk_store *s, const char *name, struct pdk_error **err)
{
	return cred_revoke(s, ST_E2B_KEY_REVOKE, "E2B API key", name, err);
}

int pdk_store_pool_set(struct pdk_store *s, const char *profile, uint64_t size,
		       struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
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
	struct text_u64_walk w = {cb, data};

	return each_row(s, ST_POOL_EACH, "list pools", text_u64_row, &w, err);
}

/* ---- ended sandboxes ---- */

static int insert_ended(struct pdk_store *s, const struct pdk_store_ended *e,
			struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
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
	if (pdk_db_begin(&s->db, PDK_DB_WRITE, err) < 0)
		return -EIO;
	if (exec_bound1(s, ST_SB_DELETE, e->id, err) < 0)
		return pdk_db_rollback(&s->db, -EIO);
	if (insert_ended(s, e, err) < 0)
		return pdk_db_rollback(&s->db, -EIO);
	if (pdk_db_commit(&s->db, err) < 0)
		return pdk_db_rollback(&s->db, -EIO);
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

/* An ended row into `out` (a struct pdk_store_ended, overwritten). */
static void read_ended(sqlite3_stmt *st, void *out)
{
	struct pdk_store_ended *e = out;

	memset(e, 0, sizeof(*e));
	e->id = col_text(st, 0);
	e->idempotency_key = col_text(st, 1);
	e->ended_ns = col_u64(st, 2);
	e->reason = col_text(st, 3);
	e->sandbox = col_text(st, 4);
}

int pdk_store_ended_get(struct pdk_store *s, const char *id, struct pdk_store_ended *out,
			struct pdk_error **err)
{
	memset(out, 0, sizeof(*out));
	return one_row(s, ST_ENDED_GET, id, "ended sandbox", read_ended, out, err);
}

int pdk_store_ended_by_key(struct pdk_store *s, const char *key, struct pdk_store_ended *out,
			   struct pdk_error **err)
{
	memset(out, 0, sizeof(*out));
	return one_row(s, ST_ENDED_BY_KEY, key, "ended sandbox", read_ended, out, err);
}

struct ended_walk {
	pdk_store_ended_cb cb;
	void *data;
};

static int ended_row(void *ctx, sqlite3_stmt *st)
{
	struct ended_walk *w = ctx;
	struct pdk_store_ended e;
	int r;

	read_ended(st, &e);
	r = w->cb(w->data, &e);
	pdk_store_ended_release(&e);
	return r;
}

int pdk_store_ended_each(struct pdk_store *s, pdk_store_ended_cb cb, void *data,
			 struct pdk_error **err)
{
	struct ended_walk w = {cb, data};

	return each_row(s, ST_ENDED_EACH, "list ended sandboxes", ended_row, &w, err);
}

int pdk_store_ended_purge(struct pdk_store *s, uint64_t before_ns, struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;

	if (kept(s, ST_ENDED_PURGE, &st, err) < 0)
		return -EIO;
	if (bind_u64(st, 1, before_ns) != SQLITE_OK)
		return db_error(s, err, "bind");
	if (step_done(s, st, err) < 0)
		return -EIO;
	return sqlite3_changes(s->db.conn);
}

#ifdef PDK_UNIT_TESTING
int pdk__store_statements(struct pdk_store *s)
{
	int n = 0;

	for (sqlite3_stmt *st = sqlite3_next_stmt(s->db.conn, NULL); st != NULL;
	     st = sqlite3_next_stmt(s->db.conn, st))
		n++;
	return n;
}
#endif
