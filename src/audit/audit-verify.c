/*
 * audit-verify.c - recompute the chain and check the checkpoints.
 *
 * The stored bytes are hashed as they are; nothing is re-serialised, so a
 * third party's verifier and this one agree on the bytes by construction.
 * The record's own "seq" and "prev_hash" are found without parsing the
 * JSON: in a canonical line (keys sorted, ASCII, compact) they are the
 * LAST occurrences of `"seq":` and `"prev_hash":"`, because the top-level
 * keys after "attrs" (prev_hash, sandbox, sandbox_seq, seq, session, ts,
 * workflow) hold scalars, and a string value cannot contain `h":` (its
 * quotes are escaped). That keeps verification at hashing speed.
 *
 * The table's other columns (ts, sandbox, session, workflow, actor, kind)
 * are copies kept for the schema; nothing reads them any more, and verify
 * reports one that disagrees with its record's line, so an edit made to
 * mislead a tool that still reads them is found.
 */
#include "common.h"
#include "audit-internal.h"
#include "base.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct checkpoint {
	uint64_t seq;
	unsigned char hash[32];
	char key_id[PDK_AUDIT_HASH_HEX];
	unsigned char sig[PDK_AUDIT_SIG_LEN];
	size_t sig_len;
};

struct verifier {
	struct pdk_audit *a;
	struct pdk_audit_verify *res;
	struct checkpoint *cp;
	size_t n_cp;
	size_t next_cp;
	EVP_PKEY *pub; /* NULL when the public key file could not be read */
	char pub_error[160];
	const struct pdk_audit_anchor *anchor; /* NULL: none given */
};

/*
 * The scan: each row's seq, line and hash, and the name of its first query
 * column that does not hold what the line holds (NULL when all do; "line"
 * when the line is not JSON at all). SQLite's JSON parser does the
 * comparison: a line is parsed once per row (the extractions share a
 * cache), which keeps verify near hashing speed; jansson parses only the
 * row that disagrees, for the message. `IS NOT` compares storage classes
 * too: a BLOB or NULL where the line has a string disagrees.
 */
static const char scan_sql[] = "SELECT seq, line, hash, CASE WHEN NOT json_valid(j) THEN 'line'"
			       " WHEN ts IS NOT (j ->> '$.ts') THEN 'ts'"
			       " WHEN sandbox IS NOT (j ->> '$.sandbox') THEN 'sandbox'"
			       " WHEN session IS NOT (j ->> '$.session') THEN 'session'"
			       " WHEN workflow IS NOT (j ->> '$.workflow') THEN 'workflow'"
			       " WHEN actor IS NOT (j ->> '$.actor') THEN 'actor'"
			       " WHEN kind IS NOT (j ->> '$.kind') THEN 'kind' END,"
			       " ts, sandbox, session, workflow, actor, kind"
			       " FROM (SELECT *, CAST(line AS TEXT) AS j FROM events) ORDER BY seq";
#define COL_DIFFERS 3
/* The query columns, in the scan's order from its fifth column on. */
static const char *const columns[] = {"ts", "sandbox", "session", "workflow", "actor", "kind"};
#define FIRST_COLUMN 4

const char *pdk_audit_break_name(enum pdk_audit_break b)
{
	switch (b) {
	case PDK_AUDIT_INTACT:
		return "ok";
	case PDK_AUDIT_ALTERED:
		return "altered";
	case PDK_AUDIT_MISSING:
		return "missing";
	case PDK_AUDIT_REORDERED:
		return "reordered";
	case PDK_AUDIT_TRUNCATED:
		return "truncated";
	case PDK_AUDIT_BAD_SIGNATURE:
		return "bad signature";
	case PDK_AUDIT_COLUMN:
		return "column";
	default:
		return "unknown";
	}
}

/* Record the first break; returns 1 so the scan stops. */
PDK_PRINTF(4, 5)
static int broken(struct verifier *v, enum pdk_audit_break why, uint64_t seq, const char *fmt, ...)
{
	va_list ap;

	v->res->reason = why;
	v->res->broken_seq = seq;
	va_start(ap, fmt);
	(void)vsnprintf(v->res->detail, sizeof(v->res->detail), fmt, ap);
	va_end(ap);
	return 1;
}

/* The last occurrence of needle in hay[0..n). */
static const char *last_of(const char *hay, size_t n, const char *needle)
{
	size_t m = strlen(needle);

	for (size_t i = n >= m ? n - m + 1 : 0; i-- > 0;)
		if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0)
			return hay + i;
	return NULL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* 64 hex digits (either case) into 32 bytes. */
static bool unhex32(const char *p, unsigned char out[32])
{
	for (size_t i = 0; i < 32; i++) {
		int hi = hexval((char)tolower((unsigned char)p[2 * i]));
		int lo = hi < 0 ? -1 : hexval((char)tolower((unsigned char)p[2 * i + 1]));

		if (lo < 0)
			return false;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return true;
}

int pdk_audit_parse_anchor(const char *text, struct pdk_audit_anchor *out, struct pdk_error **err)
{
	static const unsigned char zero[32];
	const char *colon = strchr(text, ':');
	char num[24] = "";

	if (colon != NULL && (size_t)(colon - text) < sizeof(num))
		memcpy(num, text, (size_t)(colon - text));
	if (num[0] == '\0' || pdk_parse_u64(num, UINT64_MAX / 2, &out->seq) < 0 ||
	    strlen(colon + 1) != 64 || !unhex32(colon + 1, out->hash))
		return pdk_error_setx(
			err, EINVAL,
			"'%s' is not a head: expected SEQ:HASH, a sequence number and "
			"64 hex digits (as 'paddock audit head' prints it)",
			text);
	if (out->seq == 0 && memcmp(out->hash, zero, 32) != 0)
		return pdk_error_setx(
			err, EINVAL,
			"'%s' is not a head: the empty store's head (0) has the zero hash", text);
	return 0;
}

/* The record's own seq and prev_hash (raw). False when the line is not canonical. */
static bool parse_links(const char *line, size_t n, uint64_t *seq, unsigned char prev[32])
{
	const char *p = last_of(line, n, "\"prev_hash\":\"");
	const char *end = line + n;
	uint64_t s = 0;

	if (p == NULL || end - p < 13 + 65 || p[13 + 64] != '"')
		return false;
	p += 13;
	for (size_t i = 0; i < 32; i++) {
		int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		prev[i] = (unsigned char)(hi << 4 | lo);
	}
	p = last_of(line, n, "\"seq\":");
	if (p == NULL)
		return false;
	p += 6;
	if (p >= end || *p < '0' || *p > '9')
		return false;
	for (; p < end && *p >= '0' && *p <= '9'; p++)
		s = s * 10 + (uint64_t)(*p - '0');
	*seq = s;
	return true;
}

static int load_checkpoints(struct verifier *v, struct pdk_error **err)
{
	static const char sql[] = "SELECT seq, hash, key_id, sig FROM checkpoints ORDER BY seq";
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;
	int rc;

	if (pdk_db_prepare(&v->a->db, sql, &st, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct checkpoint *c;
		const char *kid = (const char *)sqlite3_column_text(st, 2);

		v->cp = pdk_xrealloc(v->cp, (v->n_cp + 1) * sizeof(*v->cp));
		c = &v->cp[v->n_cp++];
		memset(c, 0, sizeof(*c));
		c->seq = (uint64_t)sqlite3_column_int64(st, 0);
		if (sqlite3_column_bytes(st, 1) == 32)
			memcpy(c->hash, sqlite3_column_blob(st, 1), 32);
		(void)snprintf(c->key_id, sizeof(c->key_id), "%s", kid ? kid : "");
		c->sig_len = (size_t)sqlite3_column_bytes(st, 3);
		if (c->sig_len > sizeof(c->sig))
			c->sig_len = 0; /* cannot be an Ed25519 signature: fails below */
		if (c->sig_len > 0)
			memcpy(c->sig, sqlite3_column_blob(st, 3), c->sig_len);
	}
	if (rc != SQLITE_DONE)
		return pdk_db_error(&v->a->db, err, "read checkpoints");
	v->res->checkpoints = v->n_cp;
	return 0;
}

/* The checkpoint at `seq`, whose record hashes to `hash`. */
static int check_checkpoint(struct verifier *v, const struct checkpoint *c,
			    const unsigned char hash[32])
{
	char hex[PDK_AUDIT_HASH_HEX];
	_cleanup_free_ char *msg = NULL;

	if (memcmp(c->hash, hash, 32) != 0)
		return broken(v, PDK_AUDIT_ALTERED, c->seq,
			      "the chain up to record %" PRIu64
			      " differs from the one signed there",
			      c->seq);
	if (v->pub == NULL)
		return broken(v, PDK_AUDIT_BAD_SIGNATURE, c->seq, "checkpoint at %" PRIu64 ": %s",
			      c->seq, v->pub_error);
	if (strcmp(c->key_id, v->res->key_id) != 0)
		return broken(v, PDK_AUDIT_BAD_SIGNATURE, c->seq,
			      "checkpoint at %" PRIu64
			      " was signed by key %.16s..., the public key "
			      "file holds key %.16s... (was the key replaced?)",
			      c->seq, c->key_id, v->res->key_id);
	pdk__audit_hex(c->hash, 32, hex);
	msg = pdk__audit_checkpoint_msg(c->seq, hex, c->key_id);
	if (msg == NULL)
		pdk_oom();
	if (!pdk__audit_sig_ok(v->pub, msg, strlen(msg), c->sig, c->sig_len))
		return broken(v, PDK_AUDIT_BAD_SIGNATURE, c->seq,
			      "the signature of checkpoint %" PRIu64 " does not verify", c->seq);
	v->res->signed_seq = c->seq;
	return 0;
}

/* Which record, if any, hashes to `hash` (0: none). Only run once the chain is broken. */
static uint64_t record_with_hash(struct verifier *v, const unsigned char hash[32])
{
	static const char sql[] = "SELECT seq FROM events WHERE hash = ?1 LIMIT 1";
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;

	if (pdk_db_prepare(&v->a->db, sql, &st, NULL) < 0)
		return 0;
	(void)sqlite3_bind_blob(st, 1, hash, 32, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_ROW)
		return 0;
	return (uint64_t)sqlite3_column_int64(st, 0);
}

/* A printable copy of a value for a message: quoted, cut at 40 bytes; NULL is null. */
static void quoted(char out[48], const char *s, size_t n)
{
	size_t k = 0;

	if (s == NULL) {
		(void)snprintf(out, 48, "null");
		return;
	}
	out[k++] = '\'';
	for (size_t i = 0; i < n && i < 40; i++)
		out[k++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	if (n > 40)
		k += (size_t)snprintf(out + k, 48 - k, "...");
	out[k++] = '\'';
	out[k] = '\0';
}

/*
 * SECURITY: the query columns of row `seq` must hold what its line holds,
 * so that an edit of a column is found even though no view reads the
 * columns any more.
 */
static int check_columns(struct verifier *v, sqlite3_stmt *st, uint64_t seq, const char *line,
			 size_t n)
{
	const char *differs = (const char *)sqlite3_column_text(st, COL_DIFFERS);
	_cleanup_json_ json_t *rec = NULL;
	char h[48], w[48];
	size_t i = 0;

	if (differs == NULL)
		return 0;
	rec = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(rec))
		return broken(v, PDK_AUDIT_ALTERED, seq, "record %" PRIu64 " is not a JSON object",
			      seq);
	while (i + 1 < PDK_ARRAY_SIZE(columns) && strcmp(columns[i], differs) != 0)
		i++;
	if (sqlite3_column_type(st, FIRST_COLUMN + (int)i) == SQLITE_NULL)
		quoted(h, NULL, 0);
	else
		quoted(h, (const char *)sqlite3_column_text(st, FIRST_COLUMN + (int)i),
		       (size_t)sqlite3_column_bytes(st, FIRST_COLUMN + (int)i));
	quoted(w, json_string_value(json_object_get(rec, columns[i])),
	       json_string_length(json_object_get(rec, columns[i])));
	return broken(v, PDK_AUDIT_COLUMN, seq,
		      "the '%s' column of record %" PRIu64
		      " is %s but the record says %s (the column was edited)",
		      columns[i], seq, h, w);
}

/* The anchored head, at its seq: the record must hash to what was anchored. */
static int check_anchor(struct verifier *v, uint64_t seq, const unsigned char h[32])
{
	char have[PDK_AUDIT_HASH_HEX], want[PDK_AUDIT_HASH_HEX];

	if (v->anchor == NULL || v->anchor->seq != seq || memcmp(v->anchor->hash, h, 32) == 0)
		return 0;
	pdk__audit_hex(h, 32, have);
	pdk__audit_hex(v->anchor->hash, 32, want);
	return broken(v, PDK_AUDIT_ALTERED, seq,
		      "record %" PRIu64 " hashes to %.16s..., the anchored head to %.16s... "
		      "(the chain up to it was rewritten)",
		      seq, have, want);
}

/* The time of a signed record, from its line: parsed once per checkpoint, not per record. */
static void signed_ts(struct verifier *v, const char *line, size_t n)
{
	_cleanup_json_ json_t *rec = json_loadb(line, n, 0, NULL);
	const char *ts = json_string_value(json_object_get(rec, "ts"));

	(void)snprintf(v->res->signed_ts, sizeof(v->res->signed_ts), "%s", ts ? ts : "");
}

/* One record: `prev` is the hash of the record before it, updated to this one's. */
static int check_record(struct verifier *v, uint64_t seq, const char *line, size_t n,
			const void *stored, size_t stored_len, unsigned char prev[32],
			struct pdk_error **err)
{
	unsigned char h[32];
	unsigned char link[32];
	uint64_t own_seq;
	uint64_t other;

	if (pdk__audit_sha256(v->a, line, n, h, err) < 0)
		return -EIO;
	if (stored_len != 32 || memcmp(stored, h, 32) != 0)
		return broken(v, PDK_AUDIT_ALTERED, seq,
			      "record %" PRIu64 " does not hash to its stored hash", seq);
	if (!parse_links(line, n, &own_seq, link))
		return broken(v, PDK_AUDIT_ALTERED, seq,
			      "record %" PRIu64 " is not a canonical record", seq);
	if (own_seq != seq)
		return broken(v, PDK_AUDIT_REORDERED, seq,
			      "the row at %" PRIu64 " holds record %" PRIu64, seq, own_seq);
	if (memcmp(link, prev, 32) != 0) {
		other = record_with_hash(v, link);
		if (other != 0 && other != seq - 1)
			return broken(v, PDK_AUDIT_REORDERED, seq,
				      "record %" PRIu64 " links to record %" PRIu64
				      " instead of %" PRIu64,
				      seq, other, seq - 1);
		if (seq == 1)
			return broken(v, PDK_AUDIT_ALTERED, seq,
				      "record 1 does not start the chain (prev_hash is not zero)");
		return broken(v, PDK_AUDIT_ALTERED, seq - 1,
			      "record %" PRIu64 " was changed after record %" PRIu64
			      " chained it (its hash differs from that record's prev_hash)",
			      seq - 1, seq);
	}
	if (check_anchor(v, seq, h) != 0)
		return 1;
	memcpy(prev, h, 32);
	while (v->next_cp < v->n_cp && v->cp[v->next_cp].seq <= seq) {
		const struct checkpoint *c = &v->cp[v->next_cp++];

		if (c->seq != seq)
			continue;
		if (check_checkpoint(v, c, h) != 0)
			return 1;
		signed_ts(v, line, n);
	}
	return 0;
}

static int scan(struct verifier *v, struct pdk_error **err)
{
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;
	unsigned char prev[32] = {0};
	uint64_t expect = 1;
	int rc;

	if (pdk_db_prepare(&v->a->db, scan_sql, &st, err) < 0)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t seq = (uint64_t)sqlite3_column_int64(st, 0);
		const char *line = sqlite3_column_blob(st, 1);
		size_t n = (size_t)sqlite3_column_bytes(st, 1);
		const void *h = sqlite3_column_blob(st, 2);
		size_t hn = (size_t)sqlite3_column_bytes(st, 2);
		int r;

		if (seq != expect)
			return broken(v, PDK_AUDIT_MISSING, expect,
				      "record %" PRIu64 " is missing (the next one is %" PRIu64 ")",
				      expect, seq);
		r = check_record(v, seq, line ? line : "", n, h, hn, prev, err);
		if (r == 0)
			r = check_columns(v, st, seq, line ? line : "", n);
		if (r != 0)
			return r;
		v->res->records++;
		expect = seq + 1;
	}
	if (rc != SQLITE_DONE)
		return pdk_db_error(&v->a->db, err, "read records");
	if (v->next_cp < v->n_cp)
		return broken(v, PDK_AUDIT_TRUNCATED, expect,
			      "the chain ends at %" PRIu64
			      " but a checkpoint was signed at %" PRIu64,
			      expect - 1, v->cp[v->n_cp - 1].seq);
	if (v->anchor != NULL && v->anchor->seq >= expect)
		return broken(v, PDK_AUDIT_TRUNCATED, expect,
			      "the chain ends at %" PRIu64
			      " but the anchored head is record %" PRIu64 " (the tail was cut)",
			      expect - 1, v->anchor->seq);
	return 0;
}

static void load_pub(struct verifier *v)
{
	_cleanup_error_ struct pdk_error *e = NULL;

	if (pdk__audit_load_pubkey(v->a->state_dir, &v->pub, v->res->key_id, &e) < 0) {
		(void)snprintf(v->pub_error, sizeof(v->pub_error), "%s", e->msg);
		v->res->key_id[0] = '\0';
	}
}

static void read_head_hash(struct verifier *v)
{
	static const char sql[] = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1";
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;

	if (pdk_db_prepare(&v->a->db, sql, &st, NULL) < 0 || sqlite3_step(st) != SQLITE_ROW)
		return;
	v->res->head_seq = (uint64_t)sqlite3_column_int64(st, 0);
	if (sqlite3_column_bytes(st, 1) == 32)
		pdk__audit_hex(sqlite3_column_blob(st, 1), 32, v->res->head_hash);
}

int pdk_audit_verify_chain(struct pdk_audit *a, const struct pdk_audit_anchor *anchor,
			   struct pdk_audit_verify *res, struct pdk_error **err)
{
	struct verifier v = {.a = a, .res = res, .anchor = anchor};
	_cleanup_error_ struct pdk_error *rerr = NULL;
	int rc;

	memset(res, 0, sizeof(*res));
	load_pub(&v);
	/* One read transaction: a consistent snapshot while writers go on. */
	rc = pdk_db_begin(&a->db, PDK_DB_READ, err);
	if (rc == 0)
		rc = load_checkpoints(&v, err);
	if (rc == 0) {
		read_head_hash(&v);
		rc = scan(&v, err);
	}
	(void)!pdk_db_commit(&a->db, &rerr); /* a read transaction: nothing to lose */
	EVP_PKEY_free(v.pub);
	free(v.cp);
	return rc < 0 ? rc : 0;
}
