#include "common.h"
#include "audit.h"
#include "db.h"
#include "events.h"
#include "redact.h"
#include "util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

/* ---- helpers ---- */

/* The test's temporary directories, removed after it (each test is its own process). */
static char *made[4];

static void remove_made(void)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(made) && made[i] != NULL; i++)
		(void)!pdk_rm_rf_at(AT_FDCWD, made[i]);
}

TestSuite(audit, .fini = remove_made);
TestSuite(audit_sink, .fini = remove_made);

static char *tmp_state(void)
{
	char tmpl[] = "/tmp/pdk-audit-XXXXXX";
	size_t i = 0;

	cr_assert_not_null(mkdtemp(tmpl));
	while (i + 1 < PDK_ARRAY_SIZE(made) && made[i] != NULL)
		i++;
	made[i] = pdk_xstrdup(tmpl);
	return pdk_xstrdup(tmpl);
}

/* An event shaped as the hub stamps it. */
static json_t *event(const char *sandbox, uint64_t n)
{
	json_t *e = json_object();
	json_t *a = json_object();
	char ts[40];

	pdk_events_format_ts(1700000000000000000ULL + n * 1000, ts, sizeof(ts));
	pdk_json_set(a, "n", json_integer((json_int_t)n));
	pdk_json_set(a, "note", json_string("k-0123456789"));
	pdk_json_set(e, "ts", json_string(ts));
	pdk_json_set(e, "seq", json_integer((json_int_t)n));
	pdk_json_set(e, "sandbox", json_string(sandbox));
	pdk_json_set(e, "session", json_null());
	pdk_json_set(e, "workflow", json_string("wf"));
	pdk_json_set(e, "actor", json_string("test"));
	pdk_json_set(e, "kind", json_string("process.exec"));
	pdk_json_set(e, "attrs", a);
	return e;
}

/* Append `total` events of `sandbox` in batches of `batch`. */
static void fill(struct pdk_audit *a, const char *sandbox, size_t total, size_t batch)
{
	struct pdk_error *err = NULL;
	json_t **v = pdk_xcalloc(batch, sizeof(*v));

	for (size_t done = 0; done < total;) {
		size_t n = total - done < batch ? total - done : batch;

		for (size_t i = 0; i < n; i++)
			v[i] = event(sandbox, done + i);
		cr_assert_eq(pdk_audit_append(a, v, n, false, &err), 0, "append: %s",
			     err ? err->msg : "");
		for (size_t i = 0; i < n; i++)
			json_decref(v[i]);
		done += n;
	}
	free(v);
}

static struct pdk_audit *open_store(const char *state)
{
	struct pdk_error *err = NULL;
	struct pdk_audit *a = NULL;

	cr_assert_eq(pdk_audit_open(state, &a, &err), 0, "open: %s", err ? err->msg : "");
	return a;
}

/* A store with `n` records, checkpoints every 1000 and one at the end. */
static struct pdk_audit *store_with(const char *state, size_t n)
{
	struct pdk_error *err = NULL;
	struct pdk_audit *a = open_store(state);

	fill(a, "sb-1", n, 100); /* checkpoints fall on 1000, 2000... */
	cr_assert_eq(pdk_audit_checkpoint(a, &err), 0);
	return a;
}

static void sql(const char *state, const char *stmt)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", state, PDK_AUDIT_DB);
	sqlite3 *db = NULL;
	char *msg = NULL;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 10000);
	cr_assert_eq(sqlite3_exec(db, stmt, NULL, NULL, &msg), SQLITE_OK, "%s: %s", stmt,
		     msg ? msg : "");
	cr_assert_gt(sqlite3_changes(db), 0, "'%s' changed nothing", stmt);
	sqlite3_close(db);
}

static struct pdk_audit_verify verify(struct pdk_audit *a)
{
	struct pdk_error *err = NULL;
	struct pdk_audit_verify v;

	cr_assert_eq(pdk_audit_verify_chain(a, NULL, &v, &err), 0, "verify: %s",
		     err ? err->msg : "");
	return v;
}

static void expect_break(struct pdk_audit *a, enum pdk_audit_break why, uint64_t seq)
{
	struct pdk_audit_verify v = verify(a);

	cr_assert_eq(v.reason, why, "reason: got '%s' (%s), want '%s'",
		     pdk_audit_break_name(v.reason), v.detail, pdk_audit_break_name(why));
	cr_assert_eq(v.broken_seq, seq, "seq: got %llu, want %llu (%s)",
		     (unsigned long long)v.broken_seq, (unsigned long long)seq, v.detail);
}

/*
 * A store of `n` records, tampered with by each SQL statement that follows
 * `seq` (up to a NULL) in turn: verify must find the break `why` at `seq`.
 */
static void expect_tampered(size_t n, enum pdk_audit_break why, uint64_t seq, ...)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, n);
	const char *stmt;
	va_list ap;

	va_start(ap, seq);
	while ((stmt = va_arg(ap, const char *)) != NULL)
		sql(state, stmt);
	va_end(ap);
	expect_break(a, why, seq);
	pdk_audit_free(a);
}

static void sha256_hex(const char *p, size_t n, char out[65])
{
	unsigned char h[32];
	unsigned int len = 0;

	cr_assert_eq(EVP_Digest(p, n, h, &len, EVP_sha256(), NULL), 1);
	for (size_t i = 0; i < 32; i++)
		(void)snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* ---- the chain ---- */

struct chain_check {
	char prev[65];
	uint64_t n;
};

/* An independent verifier: hash the stored bytes, follow prev_hash with a JSON parser. */
static int check_row(void *data, const struct pdk_audit_row *r)
{
	struct chain_check *c = data;
	json_t *j = json_loadb(r->line, r->line_len, 0, NULL);

	cr_assert_not_null(j);
	cr_assert_str_eq(json_string_value(json_object_get(j, "prev_hash")), c->prev);
	cr_assert_eq((uint64_t)json_integer_value(json_object_get(j, "seq")), r->seq);
	cr_assert_eq(r->seq, c->n + 1);
	json_decref(j);
	sha256_hex(r->line, r->line_len, c->prev);
	c->n++;
	return 0;
}

Test(audit, chain_append_and_verify)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 2500);
	struct pdk_audit_verify v = verify(a);
	struct chain_check c = {.n = 0};
	struct pdk_error *err = NULL;
	struct stat st;

	memset(c.prev, '0', 64);
	c.prev[64] = '\0';
	cr_assert_eq(v.reason, PDK_AUDIT_INTACT, "%s", v.detail);
	cr_assert_eq(v.records, 2500);
	cr_assert_eq(v.checkpoints, 3, "1000, 2000 and the end: %llu",
		     (unsigned long long)v.checkpoints);
	cr_assert_eq(v.signed_seq, 2500);
	cr_assert_eq(v.head_seq, 2500);
	cr_assert_eq(strlen(v.key_id), 64);
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){0}, check_row, &c, &err), 0);
	cr_assert_eq(c.n, 2500);
	cr_assert_str_eq(c.prev, v.head_hash, "the head is the hash of the last stored line");
	/* The store and the private key are the owner's only. */
	_cleanup_free_ char *db = pdk_xasprintf("%s/%s", state, PDK_AUDIT_DB);
	_cleanup_free_ char *key = pdk_xasprintf("%s/%s", state, PDK_AUDIT_KEY);
	cr_assert_eq(stat(db, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(stat(key, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	pdk_audit_free(a);
}

/* The kept query statement: fresh bindings each time, a fresh snapshot, nested queries. */
static int q_stop_row(void *data, const struct pdk_audit_row *r)
{
	(void)data;
	(void)r;
	return 5;
}

struct q_count {
	struct pdk_audit *a;
	uint64_t n, nested, last_seq;
};

static int q_count_row(void *data, const struct pdk_audit_row *r)
{
	struct q_count *q = data;

	q->n++;
	q->last_seq = r->seq;
	return 0;
}

static int q_nested_row(void *data, const struct pdk_audit_row *r)
{
	struct q_count *q = data, inner = {0};
	struct pdk_error *err = NULL;

	(void)r;
	q->n++;
	/* A query from inside a query's callback (the kept statement is mid-step). */
	cr_assert_eq(pdk_audit_query(q->a, &(struct pdk_audit_filter){.sandbox = "sb-2"},
				     q_count_row, &inner, &err),
		     0);
	q->nested += inner.n;
	return 0;
}

Test(audit, query_statement_kept_across_filters_appends_and_nesting)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = open_store(state);
	struct pdk_error *err = NULL;
	struct q_count q = {.a = a};

	fill(a, "sb-1", 30, 10);
	fill(a, "sb-2", 20, 10);
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){.sandbox = "sb-2"}, q_count_row,
				     &q, &err),
		     0);
	cr_assert_eq(q.n, 20);
	/* The previous sandbox binding does not stay: no filter sees every record. */
	q = (struct q_count){.a = a};
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){0}, q_count_row, &q, &err), 0);
	cr_assert_eq(q.n, 50);
	/* A callback that stops the walk leaves no read open: appends after it are seen. */
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){0}, q_stop_row, NULL, &err), 5);
	fill(a, "sb-1", 7, 7);
	q = (struct q_count){.a = a};
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){.after_seq = 45, .last = 100},
				     q_count_row, &q, &err),
		     0);
	cr_assert_eq(q.n, 12);
	cr_assert_eq(q.last_seq, 57);
	q = (struct q_count){.a = a};
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){.sandbox = "sb-1", .last = 3},
				     q_nested_row, &q, &err),
		     0);
	cr_assert_eq(q.n, 3);
	cr_assert_eq(q.nested, 3 * 20);
	cr_assert_eq(verify(a).reason, PDK_AUDIT_INTACT);
	pdk_audit_free(a);
}

/*
 * An event whose record would pass the record buffer's cap is refused with
 * its batch (-E2BIG, nothing stored), and the store goes on: the next
 * batch chains on the previous head.
 */
Test(audit, oversized_record_is_refused_with_its_batch)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 10);
	size_t big = PDK_AUDIT_RECORD_MAX + 1;
	_cleanup_free_ char *text = pdk_xmalloc(big + 1);
	struct pdk_error *err = NULL;
	json_t *v[2] = {event("sb-1", 10), event("sb-1", 11)};

	memset(text, 'a', big);
	text[big] = '\0';
	json_object_set_new(json_object_get(v[1], "attrs"), "huge", json_string(text));
	cr_assert_eq(pdk_audit_append(a, v, 2, false, &err), -E2BIG);
	cr_assert_not_null(strstr(err->msg, "larger than"), "%s", err->msg);
	pdk_error_free(&err);
	json_decref(v[1]);
	v[1] = event("sb-1", 11);
	cr_assert_eq(pdk_audit_append(a, v, 2, true, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(verify(a).records, 12);
	cr_assert_eq(verify(a).reason, PDK_AUDIT_INTACT);
	json_decref(v[0]);
	json_decref(v[1]);
	pdk_audit_free(a);
}

Test(audit, empty_store_is_intact)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = open_store(state);
	struct pdk_audit_verify v = verify(a);

	cr_assert_eq(v.reason, PDK_AUDIT_INTACT);
	cr_assert_eq(v.records, 0);
	pdk_audit_free(a);
}

/* A forger's edit of one field of record 17. */
static const char edit_17[] = "UPDATE events SET line = CAST(replace(CAST(line AS TEXT), "
			      "'k-0123456789', 'k-9999999999') AS BLOB) WHERE seq = 17";

Test(audit, edited_field_is_altered)
{
	expect_tampered(50, PDK_AUDIT_ALTERED, 17, edit_17, NULL);
}

Test(audit, edited_field_with_its_hash_recomputed_is_altered)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 50);

	/* The forger also rewrites the row's hash column: the next record's link still breaks. */
	sql(state, edit_17);
	sqlite3 *db = NULL;
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", state, PDK_AUDIT_DB);
	sqlite3_stmt *st = NULL;
	unsigned char h[32];
	unsigned int len = 0;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(
		sqlite3_prepare_v2(db, "SELECT line FROM events WHERE seq = 17", -1, &st, NULL),
		SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_eq(EVP_Digest(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), h,
				&len, EVP_sha256(), NULL),
		     1);
	sqlite3_finalize(st);
	cr_assert_eq(
		sqlite3_prepare_v2(db, "UPDATE events SET hash = ? WHERE seq = 17", -1, &st, NULL),
		SQLITE_OK);
	sqlite3_bind_blob(st, 1, h, 32, SQLITE_STATIC);
	cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
	expect_break(a, PDK_AUDIT_ALTERED, 17);
	pdk_audit_free(a);
}

Test(audit, deleted_row_is_missing)
{
	expect_tampered(50, PDK_AUDIT_MISSING, 23, "DELETE FROM events WHERE seq = 23", NULL);
}

Test(audit, deleted_first_row_is_missing)
{
	expect_tampered(10, PDK_AUDIT_MISSING, 1, "DELETE FROM events WHERE seq = 1", NULL);
}

Test(audit, swapped_rows_are_reordered)
{
	/* Swap every column of two rows but their seq: row 30 now holds record 31. */
	expect_tampered(50, PDK_AUDIT_REORDERED, 30, "UPDATE events SET seq = -1 WHERE seq = 30",
			"UPDATE events SET seq = 30 WHERE seq = 31",
			"UPDATE events SET seq = 31 WHERE seq = -1", NULL);
}

Test(audit, truncated_tail_is_truncated)
{
	expect_tampered(1500, PDK_AUDIT_TRUNCATED, 1201, "DELETE FROM events WHERE seq > 1200",
			NULL);
}

Test(audit, checkpoint_beyond_the_chain_is_truncated)
{
	expect_tampered(20, PDK_AUDIT_TRUNCATED, 21,
			"UPDATE checkpoints SET seq = 25 WHERE seq = 20", NULL);
}

/*
 * The signature's 11th byte changed: to 0x00, or to 0x01 when it was 0x00
 * already (a fixed 0x00 left one signature in 256 as it was, and the test
 * failed with "ok": signatures differ from run to run, their keys being new).
 */
Test(audit, corrupted_signature_is_bad_signature)
{
	expect_tampered(
		2100, PDK_AUDIT_BAD_SIGNATURE, 2000,
		"UPDATE checkpoints SET sig = CAST(substr(sig, 1, 10) || "
		"CAST(CASE substr(sig, 11, 1) WHEN x'00' THEN x'01' ELSE x'00' END AS BLOB) "
		"|| substr(sig, 12) AS BLOB) WHERE seq = 2000",
		NULL);
}

Test(audit, replaced_key_is_bad_signature)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 1200);
	struct pdk_error *err = NULL;
	_cleanup_free_ char *key = pdk_xasprintf("%s/%s", state, PDK_AUDIT_KEY);
	_cleanup_free_ char *pub = pdk_xasprintf("%s/%s", state, PDK_AUDIT_PUBKEY);

	pdk_audit_free(a);
	/* A forger replaces the key pair and signs new checkpoints with it. */
	cr_assert_eq(unlink(key), 0);
	cr_assert_eq(unlink(pub), 0);
	a = open_store(state);
	fill(a, "sb-2", 10, 10);
	cr_assert_eq(pdk_audit_checkpoint(a, &err), 0);
	expect_break(a, PDK_AUDIT_BAD_SIGNATURE, 1000);
	pdk_audit_free(a);
}

Test(audit, missing_public_key_is_bad_signature)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 30);
	_cleanup_free_ char *pub = pdk_xasprintf("%s/%s", state, PDK_AUDIT_PUBKEY);

	cr_assert_eq(unlink(pub), 0);
	expect_break(a, PDK_AUDIT_BAD_SIGNATURE, 30);
	pdk_audit_free(a);
}

/* ---- the query columns: never read, and checked by verify ---- */

/* Every column edit verify must name: the statement, and the column it names. */
static const struct {
	const char *sql, *column;
} column_edits[] = {
	{"UPDATE events SET ts = '2001-01-01T00:00:00.000000Z' WHERE seq = 12", "'ts' column"},
	{"UPDATE events SET sandbox = 'sb-other' WHERE seq = 12", "'sandbox' column"},
	{"UPDATE events SET session = 'forged' WHERE seq = 12", "'session' column"},
	{"UPDATE events SET workflow = NULL WHERE seq = 12", "'workflow' column"},
	{"UPDATE events SET actor = 'someone' WHERE seq = 12", "'actor' column"},
	{"UPDATE events SET kind = 'process.nothing' WHERE seq = 12", "'kind' column"},
	{"UPDATE events SET sandbox = CAST(sandbox AS BLOB) WHERE seq = 12", "'sandbox' column"},
};

Test(audit, edited_column_is_reported_naming_seq_and_column)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(column_edits); i++) {
		_cleanup_free_ char *state = tmp_state();
		struct pdk_audit *a = store_with(state, 30);
		struct pdk_audit_verify v;

		sql(state, column_edits[i].sql);
		v = verify(a);
		cr_assert_eq(v.reason, PDK_AUDIT_COLUMN, "%s: got '%s' (%s)", column_edits[i].sql,
			     pdk_audit_break_name(v.reason), v.detail);
		cr_assert_eq(v.broken_seq, 12, "%s: %s", column_edits[i].sql, v.detail);
		cr_assert_not_null(strstr(v.detail, column_edits[i].column), "%s", v.detail);
		cr_assert_not_null(strstr(v.detail, "record 12"), "%s", v.detail);
		pdk_audit_free(a);
		(void)!pdk_rm_rf_at(AT_FDCWD, state);
		free(made[0]);
		made[0] = NULL;
	}
}

struct seen {
	uint64_t n, seq12;
	char kind[64], ts[64], sandbox[64];
};

static int seen_row(void *data, const struct pdk_audit_row *r)
{
	struct seen *s = data;

	s->n++;
	if (r->seq != 12)
		return 0;
	s->seq12++;
	(void)snprintf(s->kind, sizeof(s->kind), "%s", r->kind);
	(void)snprintf(s->ts, sizeof(s->ts), "%s", r->ts);
	(void)snprintf(s->sandbox, sizeof(s->sandbox), "%s", r->sandbox);
	return 0;
}

static struct seen query_seen(struct pdk_audit *a, struct pdk_audit_filter f)
{
	struct pdk_error *err = NULL;
	struct seen s = {0};

	cr_assert_eq(pdk_audit_query(a, &f, seen_row, &s, &err), 0, "%s", err ? err->msg : "");
	return s;
}

static int count_sandbox(void *data, const struct pdk_audit_sandbox *sb)
{
	if (strcmp(sb->sandbox, "sb-1") == 0)
		*(uint64_t *)data = sb->events;
	else
		*(uint64_t *)data += 1000; /* a sandbox that is no record's */
	return 0;
}

/*
 * A forger edits every query column of record 12 to move it into another
 * sandbox, rename and re-date it: the queries still show it as its line
 * says, under its own sandbox, and never under the forged one.
 */
Test(audit, queries_read_the_line_not_the_columns)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 30);
	struct pdk_error *err = NULL;
	_cleanup_free_ char *id = NULL;
	uint64_t events = 0;
	struct seen s;

	sql(state, "UPDATE events SET sandbox = 'sb-other', kind = 'forged.kind',"
		   " ts = '2001-01-01T00:00:00.000000Z', session = 'x', workflow = 'y',"
		   " actor = 'z' WHERE seq = 12");
	s = query_seen(a, (struct pdk_audit_filter){.sandbox = "sb-1"});
	cr_assert_eq(s.n, 30, "the record stays in its sandbox's view");
	cr_assert_str_eq(s.kind, "process.exec");
	cr_assert_str_eq(s.sandbox, "sb-1");
	cr_assert_neq(strncmp(s.ts, "2001", 4), 0, "%s", s.ts);
	cr_assert_eq(query_seen(a, (struct pdk_audit_filter){.sandbox = "sb-other"}).n, 0,
		     "the forged sandbox gets nothing");
	cr_assert_eq(query_seen(a, (struct pdk_audit_filter){.kind = "forged.kind"}).n, 0);
	cr_assert_eq(query_seen(a, (struct pdk_audit_filter){.kind = "process.exec"}).seq12, 1);
	cr_assert_eq(query_seen(a, (struct pdk_audit_filter){.sandbox = "sb-1", .last = 19}).seq12,
		     1, "the last 19 of sb-1 hold record 12");
	cr_assert_eq(pdk_audit_sandboxes(a, count_sandbox, &events, &err), 0);
	cr_assert_eq(events, 30, "ls: one sandbox, 30 events (%llu)", (unsigned long long)events);
	cr_assert_lt(pdk_audit_resolve_sandbox(a, "sb-o", &id, &err), 0, "no sandbox sb-other");
	cr_assert_eq(err->status, ENOENT);
	pdk_error_free(&err);
	pdk_audit_free(a);
}

/* A line that is not its row's record ends a query with an error, never a forged row. */
Test(audit, query_refuses_a_line_that_is_not_a_record)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 20);
	struct pdk_error *err = NULL;
	struct seen s = {0};

	sql(state, "UPDATE events SET line = CAST('{\"seq\":7}' AS BLOB) WHERE seq = 7");
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){0}, seen_row, &s, &err),
		     -EBADMSG);
	cr_assert_not_null(strstr(err->msg, "record 7"), "%s", err->msg);
	cr_assert_eq(s.n, 6, "the rows before it were shown, none after");
	pdk_error_free(&err);
	pdk_audit_free(a);
}

/* ---- the anchored head ---- */

static struct pdk_audit_anchor anchor_of(struct pdk_audit *a)
{
	struct pdk_audit_verify v = verify(a);
	_cleanup_free_ char *text =
		pdk_xasprintf("%llu:%s", (unsigned long long)v.head_seq, v.head_hash);
	struct pdk_error *err = NULL;
	struct pdk_audit_anchor an;

	cr_assert_eq(pdk_audit_parse_anchor(text, &an, &err), 0, "%s", err ? err->msg : "");
	return an;
}

static struct pdk_audit_verify verify_anchored(struct pdk_audit *a,
					       const struct pdk_audit_anchor *an)
{
	struct pdk_error *err = NULL;
	struct pdk_audit_verify v;

	cr_assert_eq(pdk_audit_verify_chain(a, an, &v, &err), 0, "%s", err ? err->msg : "");
	return v;
}

Test(audit, anchored_head_catches_a_tail_cut_with_its_checkpoint)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 1500);
	struct pdk_audit_anchor an = anchor_of(a);
	struct pdk_audit_verify v;

	cr_assert_eq(an.seq, 1500);
	cr_assert_eq(verify_anchored(a, &an).reason, PDK_AUDIT_INTACT);
	fill(a, "sb-2", 10, 10);
	cr_assert_eq(verify_anchored(a, &an).reason, PDK_AUDIT_INTACT, "the chain grew: fine");
	/* The cut a checkpoint alone does not catch: the records and the checkpoints after 1200. */
	sql(state, "DELETE FROM events WHERE seq > 1200; DELETE FROM checkpoints WHERE seq > 1200");
	cr_assert_eq(verify(a).reason, PDK_AUDIT_INTACT, "without the anchor, the cut is unseen");
	v = verify_anchored(a, &an);
	cr_assert_eq(v.reason, PDK_AUDIT_TRUNCATED, "%s", v.detail);
	cr_assert_eq(v.broken_seq, 1201, "%s", v.detail);
	cr_assert_not_null(strstr(v.detail, "anchored head is record 1500"), "%s", v.detail);
	pdk_audit_free(a);
}

Test(audit, anchored_head_catches_a_rewritten_chain)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 40);
	struct pdk_audit_anchor an = anchor_of(a);
	struct pdk_audit_verify v;

	an.hash[0] ^= 1; /* the chain at 40 is no longer the anchored one */
	v = verify_anchored(a, &an);
	cr_assert_eq(v.reason, PDK_AUDIT_ALTERED, "%s", v.detail);
	cr_assert_eq(v.broken_seq, 40);
	pdk_audit_free(a);
}

Test(audit, anchor_text_is_checked)
{
	static const char *const bad[] = {
		"",
		"12",
		"12:",
		":",
		":0000000000000000000000000000000000000000000000000000000000000000",
		"x:0000000000000000000000000000000000000000000000000000000000000000",
		"1:000000000000000000000000000000000000000000000000000000000000000",
		"1:00000000000000000000000000000000000000000000000000000000000000000",
		"1:000000000000000000000000000000000000000000000000000000000000000g",
		"0:0000000000000000000000000000000000000000000000000000000000000001",
	};
	struct pdk_audit_anchor an;
	struct pdk_error *err = NULL;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(bad); i++) {
		cr_assert_eq(pdk_audit_parse_anchor(bad[i], &an, &err), -EINVAL, "'%s'", bad[i]);
		cr_assert_not_null(strstr(err->msg, "SEQ:HASH") ? err->msg
								: strstr(err->msg, "zero"),
				   "%s", err->msg);
		pdk_error_free(&err);
	}
	cr_assert_eq(pdk_audit_parse_anchor(
			     "7:00000000000000000000000000000000000000000000000000000000000000AB",
			     &an, &err),
		     0);
	cr_assert_eq(an.seq, 7);
	cr_assert_eq(an.hash[31], 0xab);
}

/* Several processes append at once: one chain, every event. */
Test(audit, concurrent_writers_keep_one_chain)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = open_store(state);
	struct pdk_audit_verify v;
	pid_t pids[6];

	for (size_t p = 0; p < PDK_ARRAY_SIZE(pids); p++) {
		pids[p] = fork();
		cr_assert_geq(pids[p], 0);
		if (pids[p] == 0) {
			struct pdk_audit *mine = NULL;
			struct pdk_error *err = NULL;
			char name[16];

			(void)snprintf(name, sizeof(name), "sb-%zu", p);
			if (pdk_audit_open(state, &mine, &err) < 0)
				_exit(1);
			for (size_t i = 0; i < 300; i += 5) {
				json_t *e[5];

				for (size_t k = 0; k < 5; k++)
					e[k] = event(name, i + k);
				if (pdk_audit_append(mine, e, 5, i % 100 == 0, &err) < 0)
					_exit(2);
				for (size_t k = 0; k < 5; k++)
					json_decref(e[k]);
			}
			pdk_audit_free(mine);
			_exit(0);
		}
	}
	for (size_t p = 0; p < PDK_ARRAY_SIZE(pids); p++) {
		int status = 0;

		cr_assert_eq(waitpid(pids[p], &status, 0), pids[p]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %zu: %d", p,
			  status);
	}
	v = verify(a);
	cr_assert_eq(v.reason, PDK_AUDIT_INTACT, "%s", v.detail);
	cr_assert_eq(v.records, 6 * 300);
	cr_assert_gt(v.checkpoints, 0);
	pdk_audit_free(a);
}

/* ---- redaction ---- */

static char *redact(const struct pdk_redact *r, const char *s)
{
	char *out = pdk_redact_string(r, s, strlen(s));

	return out ? out : pdk_xstrdup(s);
}

static void expect_redacted(const char *in, const char *want)
{
	_cleanup_free_ char *got = redact(NULL, in);

	cr_assert_str_eq(got, want, "'%s'", in);
}

Test(redact, token_shapes)
{
	expect_redacted("token ghp_abcdefghijklmnopqrstuvwxyz0123456789 end",
			"token [REDACTED] end");
	expect_redacted("gho_ABCDEFGHIJKLMNOPQRSTUVWX", "[REDACTED]");
	expect_redacted("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[REDACTED]");
	expect_redacted("key=sk-proj-abcdefghijklmnopqrstuvwxyz", "key=[REDACTED]");
	expect_redacted("use sk-abcdefghijklmnopqrstuvwx now", "use [REDACTED] now");
	expect_redacted("AKIAIOSFODNN7EXAMPLE", "[REDACTED]");
	expect_redacted("aws:AKIAIOSFODNN7EXAMPLE,", "aws:[REDACTED],");
	expect_redacted("xoxb-123456789012-abcdefghij", "[REDACTED]");
	expect_redacted("xoxp-1234567890-abc", "[REDACTED]");
	expect_redacted("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc",
			"Authorization: Bearer [REDACTED]");
	expect_redacted("authorization: bearer abcdefgh12345678",
			"authorization: bearer [REDACTED]");
}

Test(redact, near_misses_stay)
{
	/* Too short, or part of a longer word: not a token. */
	expect_redacted("sk-short", "sk-short");
	expect_redacted("task-abcdefghijklmnopqrstuvwxyz0123",
			"task-abcdefghijklmnopqrstuvwxyz0123");
	expect_redacted("ghp_short", "ghp_short");
	expect_redacted("AKIA1234", "AKIA1234");
	expect_redacted("the bearer of news", "the bearer of news");
	expect_redacted("PATH=/usr/bin", "PATH=/usr/bin");
	expect_redacted("x = 1", "x = 1");
	expect_redacted("", "");
}

Test(redact, secret_names_in_assignments)
{
	expect_redacted("API_TOKEN=abc123", "API_TOKEN=[REDACTED]");
	expect_redacted("env DB_PASSWORD=hunter2 cmd", "env DB_PASSWORD=[REDACTED] cmd");
	expect_redacted("--api-key=xyz", "--api-key=[REDACTED]");
	expect_redacted("https://h/?auth_token=abc&x=1", "https://h/?auth_token=[REDACTED]&x=1");
	expect_redacted("my_secret='two words' x", "my_secret=[REDACTED] x");
	expect_redacted("PASSWORD=\"a b", "PASSWORD=[REDACTED]");
	expect_redacted("Credential=c passwd=p", "Credential=[REDACTED] passwd=[REDACTED]");
	expect_redacted("TOKEN=", "TOKEN=");
	cr_assert(pdk_redact_name_is_secret("github_token", 12));
	cr_assert(pdk_redact_name_is_secret("X-Auth", 6));
	cr_assert_not(pdk_redact_name_is_secret("HOME", 4));
	cr_assert_not(pdk_redact_name_is_secret("PATH", 4));
}

Test(redact, registered_values)
{
	struct pdk_redact *r = pdk_redact_new();
	_cleanup_free_ char *a = NULL;
	_cleanup_free_ char *b = NULL;

	cr_assert(pdk_redact_add_secret(r, "DB", "s3cr3t-value"));
	cr_assert(pdk_redact_add_secret(r, "LONG", "s3cr3t-value-longer"));
	cr_assert_not(pdk_redact_add_secret(r, "TINY", "ab"), "too short to search for");
	a = redact(r, "echo s3cr3t-value-longer s3cr3t-value|s3cr3t-value");
	cr_assert_str_eq(a, "echo [REDACTED:LONG] [REDACTED:DB]|[REDACTED:DB]");
	b = redact(r, "ab cd");
	cr_assert_str_eq(b, "ab cd");
	pdk_redact_free(r);
}

Test(redact, invalid_utf8_becomes_visible_escapes)
{
	_cleanup_free_ char *got = pdk_redact_string(NULL,
						     "a\xff"
						     "b\xc3\xa9",
						     5);

	cr_assert_str_eq(got, "a\\xffb\xc3\xa9");
}

/*
 * The fast path (no copy until the first change, steps only where one could
 * start) against every step from the first byte: a change at the start, in
 * the middle, at the end, after multi-byte characters, after near misses of
 * each kind, and none at all.
 */
Test(redact, fast_path_is_every_step)
{
	static const char *const in[] = {
		"plain text with no secret in it at all, only letters: gasxbB and = signs",
		"\xc3\xa9\xe2\x82\xac then ghp_abcdefghijklmnopqrstuvwxyz0123",
		"sk-short then the secret s3cr3t-value at the end s3cr3t-value",
		"xbox bearer of news; Bearer abcdefgh12345678",
		"bad byte at the end \xff",
		"NUL\0inside",
		"TOKEN= x=1 y=2 api_key=late",
		"AKIA1234 AKIAIOSFODNN7EXAMPLE",
		"s3cr3",
		"",
	};
	static const size_t len[] = {0, 0, 0, 0, 0, 11, 0, 0, 0, 0};
	struct pdk_redact *r = pdk_redact_new();

	cr_assert(pdk_redact_add_secret(r, "DB", "s3cr3t-value"));
	for (size_t i = 0; i < PDK_ARRAY_SIZE(in); i++) {
		size_t n = len[i] ? len[i] : strlen(in[i]);
		_cleanup_free_ char *fast = pdk_redact_string(r, in[i], n);
		_cleanup_free_ char *steps = pdk__redact_string_each_step(r, in[i], n);

		cr_assert_eq(fast == NULL, steps == NULL, "case %zu", i);
		if (fast != NULL)
			cr_assert_str_eq(fast, steps, "case %zu", i);
		/* Only the first and the last two cases have nothing to change. */
		cr_assert_eq(fast == NULL, i == 0 || i == 8 || i == 9, "case %zu: %s", i,
			     fast ? fast : "(unchanged)");
	}
	pdk_redact_free(r);
}

Test(redact, json_walk_rewrites_nested_strings)
{
	json_t *v = json_pack("{s:[s,s], s:{s:s}, s:i}", "argv", "PASSWORD=x1", "ok", "nested", "h",
			      "Bearer abcdefghijkl", "n", 3);
	_cleanup_free_ char *s = NULL;

	cr_assert_eq(pdk_redact_json(NULL, v), 2);
	s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(s, "{\"argv\":[\"PASSWORD=[REDACTED]\",\"ok\"],\"n\":3,"
			    "\"nested\":{\"h\":\"Bearer [REDACTED]\"}}");
	json_decref(v);
}

/* The hub redacts before any sink: the --events file never sees a registered secret. */
Test(redact, hub_redacts_before_sinks)
{
	char path[] = "/tmp/pdk-redact-XXXXXX";
	int fd = mkstemp(path);
	struct pdk_error *err = NULL;
	struct pdk_events *ev;
	char *data = NULL;

	cr_assert_geq(fd, 0);
	close(fd);
	ev = pdk_events_open(path, "sb", "t", &err);
	cr_assert_not_null(ev);
	cr_assert(pdk_events_add_secret(ev, "API_TOKEN", "tok-value-42"));
	cr_assert_eq(pdk_events_emit(ev, "process.exec", 0,
				     json_pack("{s:[s,s]}", "argv", "curl", "-Htok-value-42"),
				     &err),
		     0);
	cr_assert_eq(pdk_events_close(ev, &err), 0);
	pdk_events_free(ev);
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 1 << 20, &data, &err), 0);
	cr_assert_null(strstr(data, "tok-value-42"), "%s", data);
	cr_assert_not_null(strstr(data, "-H[REDACTED:API_TOKEN]"), "%s", data);
	free(data);
	unlink(path);
}

/* ---- the sink and its queue ---- */

/* Holds the store's write lock from another connection, as a slow writer would. */
static sqlite3 *hold_write_lock(const char *state)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", state, PDK_AUDIT_DB);
	struct pdk_audit *a = open_store(state); /* creates the schema */
	sqlite3 *db = NULL;

	pdk_audit_free(a);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	return db;
}

static void release_write_lock(sqlite3 *db)
{
	cr_assert_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static uint64_t stored(const char *state)
{
	struct pdk_audit *a = open_store(state);
	struct pdk_audit_verify v = verify(a);

	cr_assert_eq(v.reason, PDK_AUDIT_INTACT, "%s", v.detail);
	pdk_audit_free(a);
	return v.records;
}

static struct pdk_events *hub_with_sink(const char *state, enum pdk_audit_on_full policy)
{
	struct pdk_events *ev = pdk_events_new("sb-q", "t");
	struct pdk_audit_sink_config cfg = {
		.state_dir = state, .queue_max = 4, .flush_ms = 20, .on_full = policy};

	pdk_audit_add_sink(ev, &cfg);
	return ev;
}

Test(audit_sink, writes_everything_at_close)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_events *ev = hub_with_sink(state, PDK_AUDIT_BLOCK);
	struct pdk_error *err = NULL;

	for (int i = 0; i < 103; i++)
		cr_assert_eq(pdk_events_emit(ev, "tool.call", 0, NULL, &err), 0);
	cr_assert_eq(pdk_events_close(ev, &err), 0, "%s", err ? err->msg : "");
	pdk_events_free(ev);
	cr_assert_eq(stored(state), 103);
}

Test(audit_sink, full_queue_with_stop_fails_and_drops_nothing)
{
	_cleanup_free_ char *state = tmp_state();
	sqlite3 *lock = hold_write_lock(state);
	struct pdk_events *ev = hub_with_sink(state, PDK_AUDIT_STOP);
	struct pdk_error *err = NULL;
	uint64_t ok = 0, refused = 0;

	for (int i = 0; i < 20; i++) {
		if (pdk_events_emit(ev, "tool.call", 0, NULL, &err) == 0) {
			ok++;
		} else {
			cr_assert_not_null(strstr(err->msg, "queue is full"), "%s", err->msg);
			refused++;
			pdk_error_free(&err);
		}
	}
	cr_assert_gt(refused, 0, "the writer is stuck: the queue must fill");
	cr_assert_leq(ok, 8, "at most the queue and the writer's batch: %llu",
		      (unsigned long long)ok);
	release_write_lock(lock);
	cr_assert_eq(pdk_events_close(ev, &err), 0, "%s", err ? err->msg : "");
	pdk_events_free(ev);
	cr_assert_eq(stored(state), ok, "every accepted event is stored");
}

struct emitter {
	struct pdk_events *ev;
	atomic_int done;
	int failures;
};

static void *emit_many(void *data)
{
	struct emitter *e = data;

	for (int i = 0; i < 20; i++) {
		struct pdk_error *err = NULL;

		if (pdk_events_emit(e->ev, "tool.call", 0, NULL, &err) < 0) {
			e->failures++;
			pdk_error_free(&err);
		}
		atomic_fetch_add(&e->done, 1);
	}
	return NULL;
}

Test(audit_sink, full_queue_with_block_waits_for_the_writer)
{
	_cleanup_free_ char *state = tmp_state();
	sqlite3 *lock = hold_write_lock(state);
	struct emitter e = {.ev = hub_with_sink(state, PDK_AUDIT_BLOCK)};
	const struct timespec wait = {.tv_nsec = 300 * 1000000L};
	struct pdk_error *err = NULL;
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, emit_many, &e), 0);
	nanosleep(&wait, NULL);
	cr_assert_lt(atomic_load(&e.done), 20, "emit must wait while the writer is stuck");
	release_write_lock(lock);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(e.failures, 0);
	cr_assert_eq(pdk_events_close(e.ev, &err), 0, "%s", err ? err->msg : "");
	pdk_events_free(e.ev);
	cr_assert_eq(stored(state), 20);
}

Test(audit_sink, writer_failure_fails_closed)
{
	_cleanup_free_ char *dir = tmp_state();
	_cleanup_free_ char *state = pdk_xasprintf("%s/not-a-dir", dir);
	struct pdk_events *ev;
	struct pdk_error *err = NULL;
	int failed = 0;
	int fd = open(state, O_CREAT | O_WRONLY, 0600);

	cr_assert_geq(fd, 0);
	close(fd);
	ev = hub_with_sink(state, PDK_AUDIT_BLOCK);
	for (int i = 0; i < 50; i++) {
		if (pdk_events_emit(ev, "tool.call", 0, NULL, &err) < 0) {
			failed++;
			pdk_error_free(&err);
		}
	}
	cr_assert_gt(failed, 0, "once the writer failed, emit fails");
	cr_assert_lt(pdk_events_close(ev, &err), 0);
	cr_assert_not_null(strstr(err->msg, "not-a-dir"), "%s", err->msg);
	pdk_error_free(&err);
	pdk_events_free(ev);
}

Test(audit, spool_offset_moves_with_its_batch)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = open_store(state);
	struct pdk_error *err = NULL;
	json_t *ev[2] = {event("sb-s", 0), event("sb-s", 1)};
	uint64_t off = 99;
	struct pdk_audit_verify v;

	cr_assert_eq(pdk_audit_spool_offset(a, "sb-s", &off, &err), 0);
	cr_assert_eq(off, 0, "no offset yet");
	cr_assert_eq(pdk_audit_append_spool(a, ev, 2, "sb-s", 120, &err), 0, "%s",
		     err ? err->msg : "");
	cr_assert_eq(pdk_audit_spool_offset(a, "sb-s", &off, &err), 0);
	cr_assert_eq(off, 120);
	cr_assert_eq(pdk_audit_append_spool(a, NULL, 0, "sb-s", 130, &err), 0, "offset only");
	cr_assert_eq(pdk_audit_spool_offset(a, "sb-s", &off, &err), 0);
	cr_assert_eq(off, 130);
	/* A batch that cannot be stored moves nothing: the offset stays with the events. */
	sql(state, "CREATE TRIGGER no_more BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'x'); "
		   "END; UPDATE spool_offsets SET offset = offset WHERE source = 'sb-s'");
	cr_assert_lt(pdk_audit_append_spool(a, ev, 2, "sb-s", 999, &err), 0);
	pdk_error_free(&err);
	cr_assert_eq(pdk_audit_spool_offset(a, "sb-s", &off, &err), 0);
	cr_assert_eq(off, 130, "the failed batch's offset was rolled back");
	sql(state, "DROP TRIGGER no_more; UPDATE spool_offsets SET offset = offset");
	v = verify(a);
	cr_assert_eq(v.reason, PDK_AUDIT_INTACT, "%s", v.detail);
	cr_assert_eq(v.records, 2);
	cr_assert_eq(pdk_audit_spool_forget(a, "sb-s", &err), 0);
	cr_assert_eq(pdk_audit_spool_offset(a, "sb-s", &off, &err), 0);
	cr_assert_eq(off, 0);
	json_decref(ev[0]);
	json_decref(ev[1]);
	pdk_audit_free(a);
}

/* A file of the spool directory: its inode, 0 when it is not there. */
static ino_t spool_ino(const char *state, const char *name)
{
	_cleanup_free_ char *p = pdk_xasprintf("%s/" PDK_AUDIT_SPOOL_DIR "/%s", state, name);
	struct stat st;

	return stat(p, &st) == 0 && st.st_size == 0 ? st.st_ino : 0;
}

/*
 * A fold keeps a spool that held records, emptied, as a spare, and removes
 * an empty one (a run that took a spare and has not locked it yet looks the
 * same: it must find its spool removed, never renamed away); a run's spool
 * then takes the spare (id "c": 0xc % 128 = 12 tried first, then 0).
 */
Test(audit, fold_keeps_spools_that_held_records_as_spares)
{
	_cleanup_free_ char *state = tmp_state();
	_cleanup_free_ char *dir = pdk_xasprintf("%s/" PDK_AUDIT_SPOOL_DIR, state);
	_cleanup_free_ char *full = pdk_xasprintf("%s/b.jsonl", dir);
	_cleanup_free_ char *empty = pdk_xasprintf("%s/a.jsonl", dir);
	_cleanup_json_ json_t *e = event("b", 0);
	_cleanup_free_ char *line = pdk_json_dump_line(e);
	struct pdk_audit *a = open_store(state);
	struct pdk_error *err = NULL;
	struct pdk_audit_fold res;
	struct pdk_events *ev;
	ino_t spare;

	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(pdk_write_file_at(AT_FDCWD, full, line, true, &err), 0);
	cr_assert_eq(pdk_write_file_at(AT_FDCWD, empty, "", true, &err), 0);
	cr_assert_eq(pdk_audit_fold(a, &res, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(res.records, 1);
	cr_assert_eq(res.spools, 2);
	spare = spool_ino(state, ".spare-0");
	cr_assert_neq(spare, 0, "the spool that held a record is kept, empty, as .spare-0");
	cr_assert_eq(spool_ino(state, ".spare-1"), 0, "the empty spool is not kept");
	cr_assert(access(empty, F_OK) < 0 && access(full, F_OK) < 0, "both spools are gone");

	ev = pdk_events_new("c", "test");
	cr_assert_eq(pdk_audit_add_spool(ev, state, "c", &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(spool_ino(state, "c.jsonl"), spare, "the run's spool is the spare");
	cr_assert_eq(spool_ino(state, ".spare-0"), 0);
	cr_assert_eq(pdk_events_emit(ev, "k.one", 0, NULL, &err), 0);
	cr_assert_eq(pdk_events_close(ev, &err), 0);
	pdk_events_free(ev);
	cr_assert_eq(pdk_audit_fold(a, &res, &err), 0);
	cr_assert_eq(res.records, 1, "the run's record is folded from the spare it took");
	pdk_audit_free(a);
}

struct ns {
	uint64_t v[16];
	size_t n;
};

static int ns_row(void *data, const struct pdk_audit_row *r)
{
	struct ns *ns = data;

	cr_assert_lt(ns->n, PDK_ARRAY_SIZE(ns->v));
	ns->v[ns->n++] = (uint64_t)json_integer_value(
		json_object_get(json_object_get(r->record, "attrs"), "n"));
	return 0;
}

/* The store verifies and holds exactly the records n = want[0..n), in that order. */
static void expect_ns(struct pdk_audit *a, const uint64_t *want, size_t n)
{
	struct pdk_audit_verify v = verify(a);
	struct pdk_error *err = NULL;
	struct ns got = {0};

	cr_assert_eq(v.reason, PDK_AUDIT_INTACT, "%s", v.detail);
	cr_assert_eq(pdk_audit_query(a, &(struct pdk_audit_filter){0}, ns_row, &got, &err), 0);
	cr_assert_eq(got.n, n, "%zu records, %zu expected", got.n, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(got.v[i], want[i], "record %zu is n=%" PRIu64 ", %" PRIu64 " expected",
			     i + 1, got.v[i], want[i]);
}

/* The journal's files in the spool directory. */
static size_t journal_files(const char *state)
{
	_cleanup_free_ char *dir = pdk_xasprintf("%s/" PDK_AUDIT_SPOOL_DIR, state);
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	while (d != NULL && (de = readdir(d)) != NULL)
		n += strncmp(de->d_name, "gw-", 3) == 0;
	return n;
}

struct pending_seen {
	uint64_t spools, records, running;
};

static int pending_row(void *data, const struct pdk_audit_spool *sp)
{
	struct pending_seen *p = data;

	p->spools++;
	p->records += sp->records;
	p->running += sp->running;
	return 0;
}

/* What `paddock audit verify` lists as not folded yet. */
static struct pending_seen pending_of(const char *state)
{
	struct pending_seen p = {0};
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_audit_pending(state, pending_row, &p, &err), 0);
	return p;
}

static void journal_add(struct pdk_audit_journal *j, uint64_t n)
{
	_cleanup_json_ json_t *e = event("gw", n);
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_audit_journal_append(j, e, &err), 0, "%s", err ? err->msg : "");
}

/*
 * A journal folds its own records while it holds its spool (a fold of
 * anyone else skips it), each fold starting a new file; what a writer left
 * unfolded (it was killed) is folded by the next fold of anyone; the chain
 * keeps the order they were written in.
 */
Test(audit, journal_folds_itself_and_leaves_the_rest_to_any_fold)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = open_store(state);
	struct pdk_audit_journal *j = pdk_audit_journal_new(state, "gw-a");
	struct pdk_error *err = NULL;
	struct pdk_audit_fold res;
	uint64_t folded = 0;
	struct pending_seen p;
	static const uint64_t want[] = {1, 2, 3, 4, 5};

	cr_assert_eq(journal_files(state), 0, "nothing is made before the first record");
	journal_add(j, 1);
	journal_add(j, 2);
	journal_add(j, 3);
	cr_assert_eq(pdk_audit_journal_pending(j), 3);
	p = pending_of(state);
	cr_assert(p.spools == 1 && p.records == 3 && p.running == 1,
		  "verify lists the live journal's 3 records as running (%" PRIu64 " %" PRIu64
		  " %" PRIu64 ")",
		  p.spools, p.records, p.running);
	cr_assert_eq(pdk_audit_fold(a, &res, &err), 0);
	cr_assert_eq(res.records, 0, "a live journal's spool is not folded by others");
	cr_assert_eq(res.running, 1);
	cr_assert_eq(pdk_audit_journal_fold(j, a, &folded, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(folded, 3);
	cr_assert_eq(pdk_audit_journal_pending(j), 0);
	cr_assert_eq(journal_files(state), 0, "the folded file is removed");
	journal_add(j, 4);
	journal_add(j, 5);
	cr_assert_eq(journal_files(state), 1, "the next record starts the next file");
	pdk_audit_journal_free(j); /* as a killed writer: the lock goes, the records stay */
	p = pending_of(state);
	cr_assert(p.spools == 1 && p.records == 2 && p.running == 0,
		  "verify lists the dead journal's 2 records, not running");
	cr_assert_eq(pdk_audit_fold(a, &res, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(res.records, 2);
	cr_assert_eq(journal_files(state), 0);
	expect_ns(a, want, PDK_ARRAY_SIZE(want));
	cr_assert_eq(pending_of(state).spools, 0, "nothing is left to fold");
	pdk_audit_free(a);
}

/*
 * A writer killed inside its own fold, after the records' transaction and
 * before the file was removed: the next fold finds the offset saved with
 * them and appends none of them again.
 */
Test(audit, journal_killed_inside_its_fold_doubles_nothing)
{
	_cleanup_free_ char *state = tmp_state();
	_cleanup_free_ char *file =
		pdk_xasprintf("%s/" PDK_AUDIT_SPOOL_DIR "/gw-b-00000000.jsonl", state);
	struct pdk_audit *a = open_store(state);
	struct pdk_audit_journal *j = pdk_audit_journal_new(state, "gw-b");
	struct pdk_error *err = NULL;
	json_t *ev[2] = {event("gw", 1), event("gw", 2)};
	struct pdk_audit_fold res;
	struct stat st;
	static const uint64_t want[] = {1, 2, 3};

	journal_add(j, 1);
	journal_add(j, 2);
	cr_assert_eq(stat(file, &st), 0, "the first file is %s", file);
	/* The fold's first step, as it commits it: the records and how far the file is folded. */
	cr_assert_eq(
		pdk_audit_append_spool(a, ev, 2, "spool/gw-b-00000000", (uint64_t)st.st_size, &err),
		0, "%s", err ? err->msg : "");
	pdk_audit_journal_free(j);
	cr_assert_eq(pdk_audit_fold(a, &res, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(res.records, 0, "nothing is appended twice");
	cr_assert_eq(res.spools, 1);
	cr_assert_eq(journal_files(state), 0);
	/* A later writer's journal: its records follow. */
	j = pdk_audit_journal_new(state, "gw-c");
	journal_add(j, 3);
	cr_assert_eq(pdk_audit_journal_fold(j, a, NULL, &err), 0, "%s", err ? err->msg : "");
	pdk_audit_journal_free(j);
	expect_ns(a, want, PDK_ARRAY_SIZE(want));
	json_decref(ev[0]);
	json_decref(ev[1]);
	pdk_audit_free(a);
}

/* A fold that fails keeps the file, and the next one goes on: nothing lost, nothing twice. */
Test(audit, journal_fold_that_fails_is_taken_up_again)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = open_store(state);
	struct pdk_audit_journal *j = pdk_audit_journal_new(state, "gw-d");
	struct pdk_error *err = NULL;
	uint64_t folded = 0;
	static const uint64_t want[] = {1, 2, 3};

	journal_add(j, 1);
	journal_add(j, 2);
	sql(state, "CREATE TRIGGER no_more BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'x'); "
		   "END; CREATE TABLE mark (x); INSERT INTO mark VALUES (1)");
	cr_assert_lt(pdk_audit_journal_fold(j, a, &folded, &err), 0);
	pdk_error_free(&err);
	cr_assert_eq(pdk_audit_journal_pending(j), 2, "the records wait in their file");
	cr_assert_eq(journal_files(state), 1);
	journal_add(j, 3);
	sql(state, "DROP TRIGGER no_more; INSERT INTO mark VALUES (2)");
	cr_assert_eq(pdk_audit_journal_fold(j, a, &folded, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(folded, 3);
	pdk_audit_journal_free(j);
	expect_ns(a, want, PDK_ARRAY_SIZE(want));
	pdk_audit_free(a);
}

/*
 * Processes that open a new store at the same moment (two runs folding
 * their spools into a store just made) all get it: switching it to WAL
 * mode made one of them fail with "database is locked" at once, without
 * the busy timeout, in about one try in twenty-five with six processes
 * (base/db.c set_wal()). 100 tries of six processes each.
 */
Test(audit, a_new_store_opened_by_processes_at_once)
{
	static const char *const schema[] = {"CREATE TABLE IF NOT EXISTS t (x INTEGER)"};
	static const struct pdk_db_spec spec = {
		.name = "test store", .busy_timeout_ms = 10000, .schema = schema, .n_schema = 1};
	_cleanup_free_ char *top = tmp_state();

	for (int trial = 0; trial < 100; trial++) {
		_cleanup_free_ char *dir = pdk_xasprintf("%s/%d", top, trial);
		pid_t pids[6];
		int gate[2];

		cr_assert_eq(pipe(gate), 0);
		for (size_t p = 0; p < PDK_ARRAY_SIZE(pids); p++) {
			pids[p] = fork();
			cr_assert_geq(pids[p], 0);
			if (pids[p] == 0) {
				struct pdk_db db;
				struct pdk_error *err = NULL;
				char c;

				(void)close(gate[1]);
				(void)!read(gate[0], &c,
					    1); /* all start when the parent closes it */
				if (pdk_db_open(&db, dir, "t.db", &spec, &err) < 0) {
					(void)fprintf(stderr, "%s\n", err->msg);
					_exit(1);
				}
				pdk_db_close(&db);
				_exit(0);
			}
		}
		(void)close(gate[0]);
		(void)close(gate[1]);
		for (size_t p = 0; p < PDK_ARRAY_SIZE(pids); p++) {
			int status = 0;

			cr_assert_eq(waitpid(pids[p], &status, 0), pids[p]);
			cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
				  "try %d, process %zu: %d", trial, p, status);
		}
	}
}

/* A reader's connection beside the writer: it verifies, writes nothing, and stops when told. */
Test(audit, readonly_connection_verifies_and_stops_when_told)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = store_with(state, 2500);
	struct pdk_audit *ro = NULL;
	struct pdk_audit_verify v;
	struct pdk_error *err = NULL;
	json_t *e = event("sb-1", 9);
	atomic_bool stop;

	atomic_init(&stop, false);
	cr_assert_eq(pdk_audit_open_readonly(state, &ro, &err), 0, "%s", err ? err->msg : "");
	pdk_audit_set_stop(ro, &stop);
	cr_assert_eq(pdk_audit_verify_chain(ro, NULL, &v, &err), 0);
	cr_assert_eq(v.reason, PDK_AUDIT_INTACT, "%s", v.detail);
	cr_assert_eq(v.signed_seq, 2500);
	cr_assert_str_eq(v.signed_ts, "2023-11-14T22:13:20.002499Z", "the ts of record 2500");
	cr_assert_lt(pdk_audit_append(ro, &e, 1, false, &err), 0, "a reader cannot append");
	pdk_error_free(&err);
	atomic_store(&stop, true);
	cr_assert_lt(pdk_audit_verify_chain(ro, NULL, &v, &err), 0,
		     "told to stop: no verification");
	pdk_error_free(&err);
	pdk_audit_free(ro);
	cr_assert_eq(pdk_audit_open_readonly("/nonexistent-pdk", &ro, &err), -ENOENT);
	pdk_error_free(&err);
	json_decref(e);
	pdk_audit_free(a);
}

/*
 * The decision and session filters read the line; a tail of one kind or one
 * sandbox walks the line indexes, so an edited kind or sandbox column hides
 * nothing from it either.
 */
Test(audit, decision_and_session_filters_and_indexed_tails_read_the_line)
{
	_cleanup_free_ char *state = tmp_state();
	struct pdk_audit *a = open_store(state);
	struct pdk_error *err = NULL;
	json_t *v[30];
	struct seen s;

	for (size_t i = 0; i < 30; i++) {
		v[i] = event("sb-1", i);
		if (i % 3 == 2) {
			pdk_json_set(v[i], "kind", json_string("net.connect"));
			pdk_json_set(json_object_get(v[i], "attrs"), "decision",
				     json_string(i == 11 || i == 20 ? "deny" : "allow"));
		}
		if (i == 11)
			pdk_json_set(v[i], "session", json_string("s-1"));
	}
	cr_assert_eq(pdk_audit_append(a, v, 30, false, &err), 0);
	for (size_t i = 0; i < 30; i++)
		json_decref(v[i]);
	sql(state, "UPDATE events SET kind = 'forged.kind', sandbox = 'sb-x' WHERE seq = 12");
	s = query_seen(a, (struct pdk_audit_filter){.kind = "net.connect", .decision = "deny"});
	cr_assert_eq(s.n, 2, "the two denials (%llu)", (unsigned long long)s.n);
	cr_assert_eq(s.seq12, 1, "record 12 (a denial) despite its edited kind column");
	s = query_seen(a, (struct pdk_audit_filter){.kind = "net.connect", .last = 2});
	cr_assert_eq(s.n, 2);
	s = query_seen(a,
		       (struct pdk_audit_filter){.sandbox = "sb-1", .decision = "deny", .last = 1});
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.seq12, 0, "the last denial is record 21");
	s = query_seen(a, (struct pdk_audit_filter){.sandbox = "sb-1",
						    .kind = "net.connect",
						    .decision = "deny",
						    .last = 2});
	cr_assert_eq(s.seq12, 1, "record 12 stays in sb-1's tail");
	s = query_seen(a, (struct pdk_audit_filter){.session = "s-1"});
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.seq12, 1);
	cr_assert_eq(query_seen(a, (struct pdk_audit_filter){.decision = "inject"}).n, 0);
	pdk_audit_free(a);
}
