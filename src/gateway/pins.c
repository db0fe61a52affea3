/*
 * pins.c - pinned tool definitions (docs/gateway.md, PINNING): a tool's
 * canonical form and its hash, what changed between two forms, and the
 * store of the approved ones, STATE/gateway/pins.db, which every gateway
 * of a state directory shares (SQLite in WAL mode: several processes).
 */
#include "common.h"
#include "base.h"
#include "gateway.h"

#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * What makes a definition. The rest (_meta, icons, anything a later
 * revision of the protocol adds) is left out: a server that changes only
 * those between restarts has not changed what the model is told.
 */
static const char *const canonical_members[] = {"name",        "title",        "description",
						"inputSchema", "outputSchema", "annotations"};

json_t *pdk_gw_tool_canonical(const json_t *tool)
{
	json_t *c = json_object();

	for (size_t i = 0; json_is_object(tool) && i < PDK_ARRAY_SIZE(canonical_members); i++) {
		json_t *v = json_object_get(tool, canonical_members[i]);

		if (v != NULL)
			json_object_set_new(c, canonical_members[i], json_deep_copy(v));
	}
	return c;
}

/* The sorted, compact JSON of `v` (new string). */
static char *canonical_text(const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);

	if (s == NULL)
		pdk_oom();
	return s;
}

static void sha256_hex(const char *s, char hex[65])
{
	unsigned char h[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	if (EVP_Digest(s, strlen(s), h, &n, EVP_sha256(), NULL) != 1 || n != 32)
		pdk_oom(); /* only an allocation fails in a SHA-256 of memory */
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	hex[64] = '\0';
}

void pdk_gw_tool_hash(const json_t *tool, char hex[65])
{
	_cleanup_json_ json_t *c = pdk_gw_tool_canonical(tool);
	_cleanup_free_ char *s = canonical_text(c);

	sha256_hex(s, hex);
}

static void diff_member(json_t *d, const char *key, const json_t *before, const json_t *after)
{
	json_t *b = json_is_object(before) ? json_object_get(before, key) : NULL;
	json_t *a = json_is_object(after) ? json_object_get(after, key) : NULL;

	if ((a == NULL && b == NULL) || (a != NULL && b != NULL && json_equal(a, b)))
		return;
	json_object_set_new(d, key,
			    json_pack("{s:O,s:O}", "before", b ? b : json_null(), "after",
				      a ? a : json_null()));
}

json_t *pdk_gw_tool_diff(const json_t *before, const json_t *after)
{
	json_t *d = json_object();
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)before, key, v) diff_member(d, key, before, after);
	json_object_foreach((json_t *)after, key, v)
	{
		if (json_object_get(d, key) == NULL)
			diff_member(d, key, before, after);
	}
	return d;
}

/* ---- the store ---- */

enum {
	ST_GET,
	ST_SET,
	ST_LIST,
	ST_N,
};

static const char *const schema[] = {
	"CREATE TABLE IF NOT EXISTS pins (server TEXT NOT NULL, tool TEXT NOT NULL,"
	" hash TEXT NOT NULL, def TEXT NOT NULL, approver TEXT NOT NULL,"
	" pinned_at TEXT NOT NULL, PRIMARY KEY (server, tool))",
};

static const char *const stmt_sql[ST_N] = {
	[ST_GET] = "SELECT hash, def FROM pins WHERE server = ? AND tool = ?",
	[ST_SET] = "INSERT INTO pins (server, tool, hash, def, approver, pinned_at)"
		   " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(server, tool) DO UPDATE SET"
		   " hash = excluded.hash, def = excluded.def, approver = excluded.approver,"
		   " pinned_at = excluded.pinned_at",
	[ST_LIST] = "SELECT server, tool, hash, approver, pinned_at FROM pins"
		    " WHERE ?1 IS NULL OR server = ?1 ORDER BY server, tool",
};

static const struct pdk_db_spec pins_db = {
	.name = "pin store",
	.busy_timeout_ms = 10000, /* another gateway's write is one row */
	.schema = schema,
	.n_schema = PDK_ARRAY_SIZE(schema),
	.stmts = stmt_sql,
	.n_stmts = ST_N,
	.n_prepared_at_open = ST_N,
};

struct pdk_gw_pins {
	struct pdk_db db;
};

int pdk_gw_pins_open(const char *state_dir, struct pdk_gw_pins **out, struct pdk_error **err)
{
	_cleanup_free_ char *dir = pdk_xasprintf("%s/gateway", state_dir);
	struct pdk_gw_pins *p = pdk_xcalloc(1, sizeof(*p));
	int rc = pdk_db_open(&p->db, dir, "pins.db", &pins_db, err);

	if (rc < 0) {
		pdk_gw_pins_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void pdk_gw_pins_free(struct pdk_gw_pins *p)
{
	if (p == NULL)
		return;
	pdk_db_close(&p->db);
	free(p);
}

int pdk_gw_pin_get(struct pdk_gw_pins *p, const char *server, const char *tool, char hash[65],
		   json_t **def, struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
	const char *h, *d;
	json_error_t je;
	int rc = pdk_db_kept(&p->db, ST_GET, &st, err);

	if (rc < 0)
		return rc;
	(void)sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 2, tool, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return -ENOENT;
	if (rc != SQLITE_ROW)
		return pdk_db_error(&p->db, err, "read a pin");
	h = (const char *)sqlite3_column_text(st, 0);
	d = (const char *)sqlite3_column_text(st, 1);
	if (h == NULL || d == NULL || strlen(h) != 64)
		return pdk_error_setx(err, EIO, "pin store '%s': the pin of %s/%s is damaged",
				      p->db.path, server, tool);
	memcpy(hash, h, 65);
	*def = json_loads(d, JSON_REJECT_DUPLICATES, &je);
	if (*def == NULL)
		return pdk_error_setx(err, EIO, "pin store '%s': the pin of %s/%s is damaged: %s",
				      p->db.path, server, tool, je.text);
	return 0;
}

/* Now as "2026-11-26T14:20:05.123Z". */
static void now_text(char buf[32])
{
	uint64_t ns = pdk_now_real_ns();
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;

	gmtime_r(&s, &tm);
	size_t n = strftime(buf, 24, "%Y-%m-%dT%H:%M:%S", &tm);

	snprintf(buf + n, 32 - n, ".%03uZ", (unsigned)(ns / 1000000u % 1000u));
}

int pdk_gw_pin_set(struct pdk_gw_pins *p, const char *server, const char *tool, const json_t *def,
		   const char *approver, struct pdk_error **err)
{
	_cleanup_db_kept_ sqlite3_stmt *st = NULL;
	_cleanup_json_ json_t *c = pdk_gw_tool_canonical(def);
	_cleanup_free_ char *text = canonical_text(c);
	char hash[65], at[32];
	int rc = pdk_db_kept(&p->db, ST_SET, &st, err);

	if (rc < 0)
		return rc;
	sha256_hex(text, hash);
	now_text(at);
	(void)sqlite3_bind_text(st, 1, server, -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 2, tool, -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 3, hash, -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 4, text, -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 5, approver ? approver : "", -1, SQLITE_STATIC);
	(void)sqlite3_bind_text(st, 6, at, -1, SQLITE_STATIC);
	return pdk_db_step_done(&p->db, st, err);
}

static json_t *col_str(sqlite3_stmt *st, int i)
{
	const char *s = (const char *)sqlite3_column_text(st, i);

	return json_string(s ? s : "");
}

int pdk_gw_pin_list(struct pdk_gw_pins *p, const char *server, json_t **out, struct pdk_error **err)
{
	_cleanup_db_walk_ struct pdk_db_walk w = {0};
	_cleanup_json_ json_t *all = json_array();
	int rc = pdk_db_walk_start(&p->db, ST_LIST, &w, err);

	if (rc < 0)
		return rc;
	/* A kept statement keeps its bindings: a walk of every server binds NULL. */
	if (server != NULL)
		(void)sqlite3_bind_text(w.st, 1, server, -1, SQLITE_STATIC);
	else
		(void)sqlite3_bind_null(w.st, 1);
	while ((rc = sqlite3_step(w.st)) == SQLITE_ROW) {
		json_t *row = json_object();

		pdk_json_set(row, "server", col_str(w.st, 0));
		pdk_json_set(row, "tool", col_str(w.st, 1));
		pdk_json_set(row, "hash", col_str(w.st, 2));
		pdk_json_set(row, "approver", col_str(w.st, 3));
		pdk_json_set(row, "pinned_at", col_str(w.st, 4));
		json_array_append_new(all, row);
	}
	if (rc != SQLITE_DONE)
		return pdk_db_error(&p->db, err, "list the pins");
	*out = json_incref(all);
	return 0;
}
