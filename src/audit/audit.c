/*
 * audit.c - the audit store: schema, append with the hash chain,
 * checkpoints, queries. Verification is in audit-verify.c, the signing key
 * in audit-key.c, the events sink (writer thread) in audit-sink.c.
 */
#include "common.h"
#include "audit-internal.h"
#include "base.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <string.h>

static const char *const schema[] = {
	"CREATE TABLE IF NOT EXISTS events ("
	" seq INTEGER PRIMARY KEY NOT NULL,"
	" ts TEXT NOT NULL, sandbox TEXT NOT NULL, session TEXT, workflow TEXT,"
	" actor TEXT NOT NULL, kind TEXT NOT NULL,"
	" line BLOB NOT NULL,"
	" hash BLOB NOT NULL)",
	"CREATE TABLE IF NOT EXISTS checkpoints ("
	" seq INTEGER PRIMARY KEY NOT NULL,"
	" hash BLOB NOT NULL, key_id TEXT NOT NULL, sig BLOB NOT NULL, ts TEXT NOT NULL)",
	/* How far each spool (a sandbox's events.jsonl) is appended: pdk_audit_append_spool(). */
	"CREATE TABLE IF NOT EXISTS spool_offsets ("
	" source TEXT PRIMARY KEY NOT NULL, offset INTEGER NOT NULL)",
	/*
	 * The queries' indexes: the kind and the sandbox of each record's LINE
	 * (the hashed bytes), never the columns of the same name, which an
	 * edit of the database could change without touching a record. SQLite
	 * computes them from the line at each insert, so a query of one kind or
	 * one sandbox from the end of a store of millions reads only that
	 * kind's or sandbox's rows (GET /v1/events?kind=K&tail=N). A store made
	 * before them gets them at its first open by this version.
	 */
	"CREATE INDEX IF NOT EXISTS events_line_kind ON events"
	" (CAST(line AS TEXT) ->> '$.kind', seq)",
	"CREATE INDEX IF NOT EXISTS events_line_sandbox ON events"
	" (CAST(line AS TEXT) ->> '$.sandbox', seq)",
};

/*
 * The kept statements (base/db.h). The append path's are prepared at open;
 * from ST_QUERY on, at their first use (only the daemon queries).
 */
enum audit_stmt {
	ST_HEAD,
	ST_INSERT,
	ST_LAST_CHECKPOINT,
	ST_INSERT_CHECKPOINT,
	ST_QUERY,
	ST_QUERY_KIND,
	ST_QUERY_SANDBOX,
	ST_PAGE,
	ST_PAGE_KIND,
	ST_PAGE_SANDBOX,
	ST_SPOOL_OFFSET,
	ST_N,
};

/* The parts of the queries (pdk_audit_query): ?1 after_seq, ?2 sandbox, ?3 kind, ?4 last,
 * ?5 decision, ?6 session. */
#define Q_LINE    "CAST(line AS TEXT)"
#define Q_HEAD    "SELECT * FROM (SELECT seq, line FROM events WHERE seq > ?1"
#define Q_SANDBOX " AND (?2 IS NULL OR " Q_LINE " ->> '$.sandbox' = ?2)"
#define Q_KIND                                                                      \
	" AND (?3 IS NULL OR " Q_LINE " ->> '$.kind' = ?3 OR (substr(?3, -1) = '.'" \
	" AND substr(" Q_LINE " ->> '$.kind', 1, length(?3)) = ?3))"
#define Q_REST                                                        \
	" AND (?5 IS NULL OR " Q_LINE " ->> '$.attrs.decision' = ?5)" \
	" AND (?6 IS NULL OR " Q_LINE " ->> '$.session' = ?6)"        \
	" ORDER BY seq DESC LIMIT ?4) ORDER BY seq"
/* A page: the first ?4 matching after ?1, in order, read forward (no sort, nothing held). */
#define P_HEAD "SELECT seq, line FROM events WHERE seq > ?1"
#define P_REST                                                        \
	" AND (?5 IS NULL OR " Q_LINE " ->> '$.attrs.decision' = ?5)" \
	" AND (?6 IS NULL OR " Q_LINE " ->> '$.session' = ?6)"        \
	" ORDER BY seq LIMIT ?4"

static const char *const stmt_sql[ST_N] = {
	[ST_HEAD] = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
	[ST_INSERT] = "INSERT INTO events (seq, ts, sandbox, session, workflow, actor, kind,"
		      " line, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[ST_LAST_CHECKPOINT] = "SELECT seq FROM checkpoints ORDER BY seq DESC LIMIT 1",
	[ST_INSERT_CHECKPOINT] = "INSERT INTO checkpoints (seq, hash, key_id, sig, ts)"
				 " VALUES (?, ?, ?, ?, ?)",
	/*
	 * pdk_audit_query's, for every filter: a NULL parameter matches all.
	 * The inner query takes the last N (by seq, descending); the outer one
	 * puts them back in order. SECURITY: the sandbox, the kind, the session
	 * and the decision are matched in the line (the hashed record), never
	 * in the columns of the same name: a column edited in the database
	 * would otherwise hide a record from its sandbox's views or move it
	 * into another's. With one sandbox, or one exact kind, the query walks
	 * that line index (schema above) instead of every row.
	 */
	[ST_QUERY] = Q_HEAD Q_SANDBOX Q_KIND Q_REST,
	[ST_QUERY_KIND] = Q_HEAD " AND " Q_LINE " ->> '$.kind' = ?3" Q_SANDBOX Q_REST,
	[ST_QUERY_SANDBOX] = Q_HEAD " AND " Q_LINE " ->> '$.sandbox' = ?2" Q_KIND Q_REST,
	[ST_PAGE] = P_HEAD Q_SANDBOX Q_KIND P_REST,
	[ST_PAGE_KIND] = P_HEAD " AND " Q_LINE " ->> '$.kind' = ?3" Q_SANDBOX P_REST,
	[ST_PAGE_SANDBOX] = P_HEAD " AND " Q_LINE " ->> '$.sandbox' = ?2" Q_KIND P_REST,
	/* The daemon's, with every spool batch it appends (pdk_audit_append_spool). */
	[ST_SPOOL_OFFSET] = "INSERT INTO spool_offsets (source, offset) VALUES (?, ?)"
			    " ON CONFLICT(source) DO UPDATE SET offset = excluded.offset",
};

/*
 * Each `paddock run` is a short-lived connection. By default the last one
 * to close checkpoints the WAL into the database (fdatasync()s) and deletes
 * it, at the end of every run. Instead the close leaves the WAL, and a
 * connection that finds it larger than wal_checkpoint_bytes checkpoints it
 * at open, which the sandbox's writer thread does while the sandbox is
 * built; that connection's first commit then restarts the WAL from its
 * start. The checkpoint is PASSIVE: a long `audit verify` never holds up a
 * run (base/db.c).
 */
static const struct pdk_db_spec audit_db = {
	.name = "audit store",
	.busy_timeout_ms = 30000, /* how long a writer waits for another process's transaction */
	.schema = schema,
	.n_schema = PDK_ARRAY_SIZE(schema),
	.stmts = stmt_sql,
	.n_stmts = ST_N,
	.n_prepared_at_open = ST_QUERY,
	.wal_checkpoint_bytes = 512 * 1024,
};

/* A reader's connection (pdk_audit_open_readonly): no schema, nothing written. */
static const struct pdk_db_spec audit_db_ro = {
	.name = "audit store",
	.busy_timeout_ms = 30000,
	.stmts = stmt_sql,
	.n_stmts = ST_N,
	.read_only = true,
};

static int db_error(struct pdk_audit *a, struct pdk_error **err, const char *what)
{
	return pdk_db_error(&a->db, err, what);
}

/*
 * Step a kept statement that returns no row, and reset it (its bindings
 * are the event's own strings, SQLITE_STATIC, rebound at the next use).
 */
static int step_reset(struct pdk_audit *a, sqlite3_stmt *st, struct pdk_error **err)
{
	int rc = sqlite3_step(st);

	(void)sqlite3_reset(st); /* the step's status is the one that counts */
	if (rc != SQLITE_DONE)
		return db_error(a, err, sqlite3_sql(st));
	return 0;
}

void pdk__audit_hex(const unsigned char *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

int pdk__audit_sha256(struct pdk_audit *a, const void *p, size_t n, unsigned char out[32],
		      struct pdk_error **err)
{
	unsigned int len = 0;

	if (EVP_DigestInit_ex2(a->md, a->sha256, NULL) != 1 || EVP_DigestUpdate(a->md, p, n) != 1 ||
	    EVP_DigestFinal_ex(a->md, out, &len) != 1 || len != 32)
		return pdk_error_setx(err, EIO, "sha-256 failed");
	return 0;
}

static int open_with(const char *state_dir, const struct pdk_db_spec *spec, struct pdk_audit **out,
		     struct pdk_error **err);

int pdk_audit_open(const char *state_dir, struct pdk_audit **out, struct pdk_error **err)
{
	return open_with(state_dir, &audit_db, out, err);
}

int pdk_audit_open_readonly(const char *state_dir, struct pdk_audit **out, struct pdk_error **err)
{
	return open_with(state_dir, &audit_db_ro, out, err);
}

/* SQLite's progress handler: non-zero ends the running statement (SQLITE_INTERRUPT). */
static int stop_requested(void *arg)
{
	const atomic_bool *stop = arg;

	return atomic_load(stop) ? 1 : 0;
}

void pdk_audit_set_stop(struct pdk_audit *a, const atomic_bool *stop)
{
	/*
	 * Polled by the connection's own thread every 1000 virtual machine
	 * steps (microseconds), so no other thread ever calls into SQLite on
	 * this connection: a verification of a large store stops soon after
	 * its owner asks, wherever it is.
	 */
	sqlite3_progress_handler(a->db.conn, 1000, stop_requested, (void *)stop);
}

static int open_with(const char *state_dir, const struct pdk_db_spec *spec, struct pdk_audit **out,
		     struct pdk_error **err)
{
	struct pdk_audit *a = pdk_xcalloc(1, sizeof(*a));
	int rc;

	a->state_dir = pdk_xstrdup(state_dir);
	pdk_buf_init(&a->buf, PDK_AUDIT_RECORD_MAX);
	a->checkpoint_every = PDK_AUDIT_CHECKPOINT_EVERY;
	a->canon = json_object();
	a->canon_seq = json_integer(0);
	a->canon_prev = json_string("");
	json_object_set(a->canon, "seq", a->canon_seq);
	json_object_set(a->canon, "prev_hash", a->canon_prev);
	/*
	 * Only SHA-256 and Ed25519 from the default provider are used: the
	 * system's openssl.cnf is not read (it costs start-up time and could
	 * swap in another provider), and the legacy tables of every cipher,
	 * digest and error string are not loaded (milliseconds at every run).
	 */
	(void)OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
					  OPENSSL_INIT_NO_ADD_ALL_DIGESTS |
					  OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS,
				  NULL);
	a->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	a->md = EVP_MD_CTX_new();
	if (a->sha256 == NULL || a->md == NULL)
		rc = pdk_error_setx(err, EIO, "cannot set up sha-256");
	else
		rc = pdk_db_open(&a->db, state_dir, PDK_AUDIT_DB, spec, err);
	if (rc < 0) {
		pdk_audit_free(a);
		return rc;
	}
	*out = a;
	return 0;
}

void pdk_audit_free(struct pdk_audit *a)
{
	if (a == NULL)
		return;
	pdk_db_close(&a->db);
	EVP_PKEY_free(a->key);
	json_decref(a->canon_seq);
	json_decref(a->canon_prev);
	json_decref(a->canon);
	EVP_MD_CTX_free(a->md);
	EVP_MD_free(a->sha256);
	pdk_buf_release(&a->buf);
	free(a->state_dir);
	free(a);
}

void pdk_audit_set_checkpoint_every(struct pdk_audit *a, uint64_t n)
{
	a->checkpoint_every = n;
}

/* The head of the chain: its seq (0 when empty) and hash (zeros when empty). */
static int read_head(struct pdk_audit *a, uint64_t *seq, unsigned char hash[32],
		     struct pdk_error **err)
{
	sqlite3_stmt *st = a->db.kept[ST_HEAD];
	int rc = sqlite3_step(st);

	*seq = 0;
	memset(hash, 0, 32);
	if (rc == SQLITE_ROW) {
		if (sqlite3_column_bytes(st, 1) != 32) {
			(void)sqlite3_reset(st);
			return pdk_error_setx(err, EIO,
					      "audit store '%s': the head's hash is not 32 bytes",
					      a->db.path);
		}
		*seq = (uint64_t)sqlite3_column_int64(st, 0);
		memcpy(hash, sqlite3_column_blob(st, 1), 32);
		rc = sqlite3_step(st);
	}
	(void)sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return db_error(a, err, "read the head");
	return 0;
}

/*
 * The canonical line of one event at `seq` after `prev`, into a->buf.
 * 0, -EINVAL when jansson cannot serialise it, -E2BIG past the cap. The
 * record object is kept from one event to the next (allocating one per
 * event was a third of the cost of an append): its values are replaced by
 * the event's own, which are shared, not changed.
 */
static int canonical(struct pdk_audit *a, const json_t *event, uint64_t seq,
		     const unsigned char prev[32])
{
	static const char *const keep[] = {"ts",    "sandbox", "session", "workflow",
					   "actor", "kind",    "attrs"};
	char hex[PDK_AUDIT_HASH_HEX];
	json_t *ss = json_object_get(event, "seq");
	_cleanup_free_ char *text = NULL;
	size_t n;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(keep); i++) {
		json_t *v = json_object_get(event, keep[i]);

		json_object_set(a->canon, keep[i], v ? v : json_null());
	}
	json_object_set(a->canon, "sandbox_seq", ss ? ss : json_null());
	pdk__audit_hex(prev, 32, hex);
	(void)json_string_setn_nocheck(a->canon_prev, hex, 64); /* hex digits: valid UTF-8 */
	(void)json_integer_set(a->canon_seq, (json_int_t)seq);
	pdk_buf_reset(&a->buf);
	/* pdk_json_dump_line()'s text, without its newline (jansson's sorted compact dump). */
	text = pdk_json_dump_sorted(a->canon, &n);
	if (text == NULL)
		return -EINVAL;
	if (pdk_buf_add(&a->buf, text, n) < 0)
		return -E2BIG;
	return 0;
}

static const char *str_field(const json_t *event, const char *key)
{
	return json_string_value(json_object_get(event, key));
}

static int insert_one(struct pdk_audit *a, const json_t *event, uint64_t seq,
		      unsigned char prev[32], struct pdk_error **err)
{
	sqlite3_stmt *st = a->db.kept[ST_INSERT];
	int rc = canonical(a, event, seq, prev);
	const char *kind = str_field(event, "kind");

	if (rc == -E2BIG)
		return pdk_error_setx(err, E2BIG, "audit: event '%s' is larger than %zu bytes",
				      kind ? kind : "?", a->buf.max);
	if (rc < 0 || kind == NULL || str_field(event, "sandbox") == NULL)
		return pdk_error_setx(err, EINVAL, "audit: event '%s' cannot be serialised",
				      kind ? kind : "?");
	if (pdk__audit_sha256(a, a->buf.p, a->buf.len, prev, err) < 0)
		return -EIO;
	(void)sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
	(void)sqlite3_bind_text(st, 2, str_field(event, "ts"), -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 3, str_field(event, "sandbox"), -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 4, str_field(event, "session"), -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 5, str_field(event, "workflow"), -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 6, str_field(event, "actor"), -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 7, kind, -1, SQLITE_STATIC);
	(void)sqlite3_bind_blob(st, 8, a->buf.p, (int)a->buf.len, SQLITE_STATIC);
	(void)sqlite3_bind_blob(st, 9, prev, 32, SQLITE_STATIC);
	return step_reset(a, st, err);
}

static int last_checkpoint(struct pdk_audit *a, uint64_t *seq, struct pdk_error **err)
{
	sqlite3_stmt *st = a->db.kept[ST_LAST_CHECKPOINT];
	int rc = sqlite3_step(st);

	*seq = 0;
	if (rc == SQLITE_ROW) {
		*seq = (uint64_t)sqlite3_column_int64(st, 0);
		rc = sqlite3_step(st);
	}
	(void)sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return db_error(a, err, "read the last checkpoint");
	return 0;
}

char *pdk__audit_checkpoint_msg(uint64_t seq, const char *hash_hex, const char *key_id)
{
	_cleanup_json_ json_t *o = json_object();

	pdk_json_set(o, "hash", json_string(hash_hex));
	pdk_json_set(o, "key_id", json_string(key_id));
	pdk_json_set(o, "seq", json_integer((json_int_t)seq));
	return json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
}

/* Inside a write transaction: sign {seq, hash} unless it is signed already. */
static int sign_head(struct pdk_audit *a, uint64_t seq, const unsigned char hash[32],
		     struct pdk_error **err)
{
	sqlite3_stmt *st = a->db.kept[ST_INSERT_CHECKPOINT];
	unsigned char sig[PDK_AUDIT_SIG_LEN];
	char hex[PDK_AUDIT_HASH_HEX];
	_cleanup_free_ char *msg = NULL;
	char ts[40];
	uint64_t last;

	if (seq == 0 || last_checkpoint(a, &last, err) < 0)
		return seq == 0 ? 0 : -EIO;
	if (last == seq)
		return 0;
	if (a->key == NULL && pdk__audit_load_key(a, err) < 0)
		return -EIO;
	pdk__audit_hex(hash, 32, hex);
	msg = pdk__audit_checkpoint_msg(seq, hex, a->key_id);
	if (msg == NULL)
		pdk_oom();
	if (pdk__audit_sign(a, msg, strlen(msg), sig, err) < 0)
		return -EIO;
	pdk_events_format_ts(pdk_now_real_ns(), ts, sizeof(ts));
	(void)sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
	(void)sqlite3_bind_blob(st, 2, hash, 32, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 3, a->key_id, -1, SQLITE_STATIC);
	(void)sqlite3_bind_blob(st, 4, sig, sizeof(sig), SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 5, ts, -1, SQLITE_STATIC);
	return step_reset(a, st, err);
}

/* The body of one write transaction. */
static int append_locked(struct pdk_audit *a, json_t *const *events, size_t n, bool checkpoint,
			 struct pdk_error **err)
{
	unsigned char hash[32];
	uint64_t head;
	uint64_t every = a->checkpoint_every;

	if (read_head(a, &head, hash, err) < 0)
		return -EIO;
	for (size_t i = 0; i < n; i++)
		if (insert_one(a, events[i], head + 1 + i, hash, err) < 0)
			return -EIO;
	if (checkpoint || (every > 0 && n > 0 && head / every != (head + n) / every))
		return sign_head(a, head + n, hash, err);
	return 0;
}

int pdk_audit_append(struct pdk_audit *a, json_t *const *events, size_t n, bool checkpoint,
		     struct pdk_error **err)
{
	int rc;

	if (n == 0 && !checkpoint)
		return 0;
	/* SECURITY: BEGIN IMMEDIATE takes the write lock before the head is read (one chain). */
	if (pdk_db_begin(&a->db, PDK_DB_WRITE, err) < 0)
		return -EIO;
	rc = append_locked(a, events, n, checkpoint, err);
	if (rc == 0)
		rc = pdk_db_commit(&a->db, err);
	if (rc < 0) {
		(void)pdk_db_rollback(&a->db, rc);
		return pdk_error_wrap(err, "audit: %zu event(s) not stored", n);
	}
	return 0;
}

int pdk_audit_checkpoint(struct pdk_audit *a, struct pdk_error **err)
{
	return pdk_audit_append(a, NULL, 0, true, err);
}

/* ---- queries ---- */

static const char *col_text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* The string member `key` of the record, or NULL (absent, null, not a string). */
static const char *rec_str(const json_t *rec, const char *key)
{
	return json_string_value(json_object_get(rec, key));
}

/*
 * Fill *row from its line, parsed (row->record, which the caller
 * releases): every field shown or filtered comes from the hashed bytes.
 * False when the line is not a record of row `seq`.
 */
static bool row_from_line(struct pdk_audit_row *row, uint64_t seq, const void *line, size_t n)
{
	json_t *rec = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
	json_t *own = json_object_get(rec, "seq");

	*row = (struct pdk_audit_row){.seq = seq, .record = rec, .line = line, .line_len = n};
	if (!json_is_integer(own) || (uint64_t)json_integer_value(own) != seq)
		return false;
	row->ts = rec_str(rec, "ts");
	row->sandbox = rec_str(rec, "sandbox");
	row->session = rec_str(rec, "session");
	row->workflow = rec_str(rec, "workflow");
	row->actor = rec_str(rec, "actor");
	row->kind = rec_str(rec, "kind");
	return row->ts != NULL && row->sandbox != NULL && row->actor != NULL && row->kind != NULL;
}

bool pdk_audit_kind_match(const char *want, const char *kind)
{
	size_t n = strlen(want);

	if (n > 0 && want[n - 1] == '.')
		return strncmp(want, kind, n) == 0;
	return strcmp(want, kind) == 0;
}

/* Whether the record matches the filter (SQLite matched the line already: this re-checks). */
static bool row_matches(const struct pdk_audit_row *row, const struct pdk_audit_filter *f)
{
	const char *decision = rec_str(json_object_get(row->record, "attrs"), "decision");

	return (f->sandbox == NULL || strcmp(f->sandbox, row->sandbox) == 0) &&
	       (f->kind == NULL || pdk_audit_kind_match(f->kind, row->kind)) &&
	       (f->decision == NULL || (decision != NULL && strcmp(f->decision, decision) == 0)) &&
	       (f->session == NULL ||
		(row->session != NULL && strcmp(f->session, row->session) == 0));
}

/* One row of the query: parsed, re-checked, handed to the callback. */
static int query_row(struct pdk_audit *a, sqlite3_stmt *st, const struct pdk_audit_filter *f,
		     pdk_audit_row_cb cb, void *data, struct pdk_error **err)
{
	struct pdk_audit_row row;
	uint64_t seq = (uint64_t)sqlite3_column_int64(st, 0);
	bool ok = row_from_line(&row, seq, sqlite3_column_blob(st, 1),
				(size_t)sqlite3_column_bytes(st, 1));
	int r = 0;

	/* SECURITY: a line that is not its row's record is never shown as one (fail closed). */
	if (!ok)
		r = pdk_error_setx(err, EBADMSG,
				   "audit store '%s': record %" PRIu64
				   " is not a well-formed record (the store was tampered with: "
				   "run 'paddock audit verify')",
				   a->db.path, seq);
	else if (row_matches(&row, f))
		r = cb(data, &row);
	json_decref(row.record);
	return r;
}

static int query_rows(struct pdk_audit *a, sqlite3_stmt *st, const struct pdk_audit_filter *f,
		      pdk_audit_row_cb cb, void *data, struct pdk_error **err)
{
	int rc;

	(void)sqlite3_bind_int64(st, 1, (sqlite3_int64)f->after_seq);
	(void)sqlite3_bind_text(st, 2, f->sandbox, -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 3, f->kind, -1, SQLITE_STATIC);
	(void)sqlite3_bind_int64(st, 4,
				 f->first  ? (sqlite3_int64)f->first
				 : f->last ? (sqlite3_int64)f->last
					   : -1);
	(void)sqlite3_bind_text(st, 5, f->decision, -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 6, f->session, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int r = query_row(a, st, f, cb, data, err);

		if (r != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return db_error(a, err, "query events");
	return 0;
}

/*
 * The statement for `f`: one sandbox's records (their line index), else one
 * exact kind's, else every row after after_seq. A sandbox has fewer records
 * than most kinds; a kind prefix ("sandbox.") has no index.
 */
static size_t query_of(const struct pdk_audit_filter *f)
{
	size_t n = f->kind != NULL ? strlen(f->kind) : 0;
	bool page = f->first > 0 && f->last == 0;

	if (f->sandbox != NULL)
		return page ? ST_PAGE_SANDBOX : ST_QUERY_SANDBOX;
	if (n > 0 && f->kind[n - 1] != '.')
		return page ? ST_PAGE_KIND : ST_QUERY_KIND;
	return page ? ST_PAGE : ST_QUERY;
}

int pdk_audit_query(struct pdk_audit *a, const struct pdk_audit_filter *f, pdk_audit_row_cb cb,
		    void *data, struct pdk_error **err)
{
	_cleanup_db_walk_ struct pdk_db_walk w = {0};

	/*
	 * The daemon queries after every append (its subscribers' fan-out): the
	 * statement is kept (parsing it each time showed in profiles). A query
	 * from inside another's callback gets its own.
	 */
	if (pdk_db_walk_start(&a->db, query_of(f), &w, err) < 0)
		return -EIO;
	return query_rows(a, w.st, f, cb, data, err);
}

int pdk_audit_sandboxes(struct pdk_audit *a, pdk_audit_sandbox_cb cb, void *data,
			struct pdk_error **err)
{
	/* SECURITY: from the lines (the hashed records), never the columns of the same names. */
	static const char sql[] =
		"SELECT sandbox, MIN(ts), MAX(ts), MAX(session), MAX(workflow), COUNT(*), MIN(seq)"
		" FROM (SELECT seq, j ->> '$.sandbox' AS sandbox, j ->> '$.ts' AS ts,"
		" j ->> '$.session' AS session, j ->> '$.workflow' AS workflow"
		" FROM (SELECT seq, CAST(line AS TEXT) AS j FROM events))"
		" GROUP BY sandbox ORDER BY MIN(seq)";
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;
	int rc;

	if (pdk_db_prepare(&a->db, sql, &st, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct pdk_audit_sandbox s = {
			.sandbox = col_text(st, 0),
			.first_ts = col_text(st, 1),
			.last_ts = col_text(st, 2),
			.session = col_text(st, 3),
			.workflow = col_text(st, 4),
			.events = (uint64_t)sqlite3_column_int64(st, 5),
		};
		int r = cb(data, &s);

		if (r != 0)
			return r;
	}
	if (rc != SQLITE_DONE)
		return db_error(a, err, "list sandboxes");
	return 0;
}

int pdk_audit_resolve_sandbox(struct pdk_audit *a, const char *prefix, char **out,
			      struct pdk_error **err)
{
	/*
	 * A prefix match with LIKE would treat '%' and '_' as wildcards: compare substr instead.
	 * SECURITY: the ids are the lines' (the hashed records), never the sandbox column.
	 */
	static const char sql[] =
		"SELECT DISTINCT sandbox FROM (SELECT CAST(line AS TEXT) ->> '$.sandbox' AS sandbox"
		" FROM events) WHERE substr(sandbox, 1, length(?1)) = ?1 LIMIT 3";
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;
	_cleanup_strv_ char **found = NULL;
	int rc;

	if (pdk_db_prepare(&a->db, sql, &st, err) < 0)
		return -EIO;
	(void)sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		pdk_strv_push(&found, col_text(st, 0));
	if (rc != SQLITE_DONE)
		return db_error(a, err, "find sandbox");
	if (found == NULL || prefix[0] == '\0')
		return pdk_error_setx(err, ENOENT, "no sandbox '%s' in the audit store '%s'",
				      prefix, a->db.path);
	if (found[1] != NULL)
		return pdk_error_setx(err, EEXIST, "'%s' names several sandboxes (%s, %s%s)",
				      prefix, found[0], found[1], found[2] ? ", ..." : "");
	*out = pdk_xstrdup(found[0]);
	return 0;
}

/* ---- spool offsets: the append and the offset in one transaction ---- */

static int bound_step(struct pdk_audit *a, const char *sql, const char *source, bool with_offset,
		      uint64_t offset, struct pdk_error **err)
{
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;

	if (pdk_db_prepare(&a->db, sql, &st, err) < 0)
		return -EIO;
	if (sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC) != SQLITE_OK ||
	    (with_offset && sqlite3_bind_int64(st, 2, (sqlite3_int64)offset) != SQLITE_OK) ||
	    sqlite3_step(st) != SQLITE_DONE)
		return db_error(a, err, sql);
	return 0;
}

/* The spool's offset, on its kept statement (it was parsed again for every batch). */
static int save_offset(struct pdk_audit *a, const char *source, uint64_t offset,
		       struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;

	if (pdk_db_kept(&a->db, ST_SPOOL_OFFSET, &st, err) < 0)
		return -EIO;
	if (sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 2, (sqlite3_int64)offset) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_DONE)
		return db_error(a, err, "save the spool offset");
	return 0;
}

int pdk_audit_append_spool(struct pdk_audit *a, json_t *const *events, size_t n, const char *source,
			   uint64_t offset, struct pdk_error **err)
{
	int rc;

	if (pdk_db_begin(&a->db, PDK_DB_WRITE, err) < 0)
		return -EIO;
	rc = n > 0 ? append_locked(a, events, n, false, err) : 0;
	if (rc == 0)
		rc = save_offset(a, source, offset, err);
	if (rc == 0)
		rc = pdk_db_commit(&a->db, err);
	if (rc < 0) {
		(void)pdk_db_rollback(&a->db, rc);
		return pdk_error_wrap(err, "audit: %zu event(s) of '%s' not stored", n, source);
	}
	return 0;
}

int pdk_audit_spool_offset(struct pdk_audit *a, const char *source, uint64_t *offset,
			   struct pdk_error **err)
{
	static const char sql[] = "SELECT offset FROM spool_offsets WHERE source = ?";
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;
	int rc;

	*offset = 0;
	if (pdk_db_prepare(&a->db, sql, &st, err) < 0)
		return -EIO;
	if (sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC) != SQLITE_OK)
		return db_error(a, err, sql);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*offset = (uint64_t)sqlite3_column_int64(st, 0);
	else if (rc != SQLITE_DONE)
		return db_error(a, err, sql);
	return 0;
}

int pdk_audit_spool_forget(struct pdk_audit *a, const char *source, struct pdk_error **err)
{
	return bound_step(a, "DELETE FROM spool_offsets WHERE source = ?", source, false, 0, err);
}
