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
 */
#include "common.h"
#include "audit-internal.h"
#include "base.h"

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
};

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
	memcpy(prev, h, 32);
	while (v->next_cp < v->n_cp && v->cp[v->next_cp].seq <= seq) {
		const struct checkpoint *c = &v->cp[v->next_cp++];

		if (c->seq == seq && check_checkpoint(v, c, h) != 0)
			return 1;
	}
	return 0;
}

static int scan(struct verifier *v, struct pdk_error **err)
{
	static const char sql[] = "SELECT seq, line, hash FROM events ORDER BY seq";
	_cleanup_db_stmt_ sqlite3_stmt *st = NULL;
	unsigned char prev[32] = {0};
	uint64_t expect = 1;
	int rc;

	if (pdk_db_prepare(&v->a->db, sql, &st, err) < 0)
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

int pdk_audit_verify_chain(struct pdk_audit *a, struct pdk_audit_verify *res,
			   struct pdk_error **err)
{
	struct verifier v = {.a = a, .res = res};
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
