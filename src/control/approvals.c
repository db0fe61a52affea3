/*
 * approvals.c - the approval queue (control.h, "approvals"): requests a
 * human must allow, in STATE/approvals.db, shared by the processes of one
 * state directory. The asker keeps its waiters and a timer that reads their
 * rows; deciders (the daemon's API, the CLI) only change rows.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"
#include "telemetry.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How often an asker reads its waiters' rows: a human's decision needs no less. */
#define POLL_MS 200
/* The largest detail stored with a request (its JSON text). */
#define DETAIL_MAX (1u << 20)
/* Summary and reason are cut to this many bytes (at a character's start). */
#define LINE_MAX_BYTES 1024

/*
 * Every state change is a write transaction (BEGIN IMMEDIATE) that reads
 * the row and changes it only while it is still pending ("... AND state =
 * 'pending'"), so of two deciders at once exactly one wins and the other is
 * told the state it found.
 */
enum appr_stmt {
	AP_INSERT,
	AP_GET,
	AP_EACH,
	AP_EACH_PENDING,
	AP_PENDING_COUNT,
	AP_SETTLE,
	AP_DECIDE,
	AP_STATE,
	AP_N
};

static const char *const schema[] = {
	"CREATE TABLE IF NOT EXISTS approvals ("
	" id TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,"
	" principal TEXT NOT NULL, sandbox TEXT, summary TEXT NOT NULL, reason TEXT,"
	" detail TEXT, created_ns INTEGER NOT NULL, timeout_ns INTEGER NOT NULL,"
	" decided_ns INTEGER NOT NULL DEFAULT 0, approver TEXT, note TEXT,"
	" asker_pid INTEGER NOT NULL, asker_start INTEGER NOT NULL, asker_ns INTEGER NOT NULL)",
	"CREATE INDEX IF NOT EXISTS approvals_state ON approvals (state, created_ns)",
};

#define AP_COLUMNS                                                                  \
	"id, kind, state, principal, sandbox, summary, reason, detail, created_ns," \
	" timeout_ns, decided_ns, approver, note, asker_pid"

static const char *const stmt_sql[AP_N] = {
	[AP_INSERT] = "INSERT INTO approvals (id, kind, state, principal, sandbox, summary, reason,"
		      " detail, created_ns, timeout_ns, asker_pid, asker_start, asker_ns)"
		      " VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[AP_GET] = "SELECT " AP_COLUMNS " FROM approvals WHERE id = ?",
	[AP_EACH] = "SELECT " AP_COLUMNS " FROM approvals WHERE state = 'pending' OR ?"
		    " ORDER BY created_ns, id",
	[AP_EACH_PENDING] = "SELECT id, timeout_ns, asker_pid, asker_start, asker_ns"
			    " FROM approvals WHERE state = 'pending'",
	[AP_PENDING_COUNT] = "SELECT count(*) FROM approvals WHERE state = 'pending'",
	[AP_SETTLE] = "UPDATE approvals SET state = ?, decided_ns = ?"
		      " WHERE id = ? AND state = 'pending'",
	[AP_DECIDE] = "UPDATE approvals SET state = ?, decided_ns = ?, approver = ?, note = ?"
		      " WHERE id = ? AND state = 'pending'",
	[AP_STATE] = "SELECT state, approver, note, timeout_ns FROM approvals WHERE id = ?",
};

static const struct pdk_db_spec approvals_db = {
	.name = "approval queue",
	.busy_timeout_ms = 10000,
	.schema = schema,
	.n_schema = PDK_ARRAY_SIZE(schema),
	.stmts = stmt_sql,
	.n_stmts = AP_N,
};

struct pdk_ctl_approval_wait {
	struct pdk_ctl_approval_wait *next;
	struct pdk_ctl *c;
	char id[37];
	char *kind, *principal, *sandbox;
	uint64_t timeout_ns; /* CLOCK_REALTIME: the row's timeout_at */
	pdk_ctl_approval_cb cb;
	void *ctx;
	/* Set by a pass that found it decided: what the callback is told. */
	bool ready;
	char *state, *approver, *note;
};

/* ---- who asked: a process, known by its pid, its start time and its pid namespace ---- */

/* /proc/PID/stat's field 22 (the start time in clock ticks since boot). 0 or -errno. */
static int proc_start_time(pid_t pid, uint64_t *out)
{
	_cleanup_free_ char *path = pdk_xasprintf("/proc/%d/stat", (int)pid), *text = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *p;
	int rc = pdk_read_file_at(AT_FDCWD, path, 4096, &text, &err);

	if (rc < 0)
		return rc;
	/* The command name (field 2) may hold spaces and ')': fields 3.. follow the last ')'. */
	p = strrchr(text, ')');
	if (p == NULL)
		return -EINVAL;
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (p == NULL)
			return -EINVAL;
	}
	*out = strtoull(p + 1, NULL, 10);
	return 0;
}

/* The inode of this process's pid namespace (0: unknown). */
static uint64_t own_pidns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/*
 * Whether the asker of a pending request has ended. Only a process in the
 * same pid namespace can tell (a pid means nothing across namespaces): from
 * elsewhere the request stays pending until its timeout.
 */
static bool asker_gone(int64_t pid, int64_t start, int64_t ns)
{
	uint64_t now_start = 0;

	if (ns == 0 || (uint64_t)ns != own_pidns())
		return false;
	if (proc_start_time((pid_t)pid, &now_start) < 0)
		return true;
	return now_start != (uint64_t)start;
}

/* ---- the store ---- */

static int queue_open(const char *state_dir, struct pdk_db *db, struct pdk_error **err)
{
	/* SECURITY: pdk_db_open() makes the directory 0700 and the file 0600, and refuses links. */
	return pdk_db_open(db, state_dir, "approvals.db", &approvals_db, err);
}

static void bind_text(struct sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL)
		(void)sqlite3_bind_null(st, i);
	else
		(void)sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
}

/* Set row `id` from pending to `state` (nothing when it is no longer pending). */
static int settle_one(struct pdk_db *db, const char *id, const char *state, uint64_t now,
		      struct pdk_error **err)
{
	_cleanup_db_kept_ struct sqlite3_stmt *st = NULL;

	if (pdk_db_kept(db, AP_SETTLE, &st, err) < 0)
		return -EIO;
	bind_text(st, 1, state);
	(void)sqlite3_bind_int64(st, 2, (sqlite3_int64)now);
	bind_text(st, 3, id);
	return pdk_db_step_done(db, st, err);
}

/*
 * Inside a write transaction: every pending request past its timeout is
 * "timed_out", every one whose asker ended is "withdrawn". Any process of
 * the state directory may settle them so: the asker would do the same, and
 * one that ended cannot.
 */
static int settle_pending(struct pdk_db *db, struct pdk_error **err)
{
	_cleanup_json_ json_t *ids = json_array(), *states = json_array();
	_cleanup_db_walk_ struct pdk_db_walk w = {0};
	uint64_t now = pdk_now_real_ns();
	int rc;

	if (pdk_db_walk_start(db, AP_EACH_PENDING, &w, err) < 0)
		return -EIO;
	/* Collected first: the rows are changed after the walk over them. */
	while ((rc = sqlite3_step(w.st)) == SQLITE_ROW) {
		const char *state = NULL;

		if ((uint64_t)sqlite3_column_int64(w.st, 1) <= now)
			state = "timed_out";
		else if (asker_gone(sqlite3_column_int64(w.st, 2), sqlite3_column_int64(w.st, 3),
				    sqlite3_column_int64(w.st, 4)))
			state = "withdrawn";
		if (state == NULL)
			continue;
		json_array_append_new(ids, json_string((const char *)sqlite3_column_text(w.st, 0)));
		json_array_append_new(states, json_string(state));
	}
	if (rc != SQLITE_DONE)
		return pdk_db_error(db, err, "read the pending requests");
	for (size_t i = 0; i < json_array_size(ids); i++)
		if (settle_one(db, json_string_value(json_array_get(ids, i)),
			       json_string_value(json_array_get(states, i)), now, err) < 0)
			return -EIO;
	return 0;
}

/* settle_pending() in a transaction of its own. */
static int settle_txn(struct pdk_db *db, struct pdk_error **err)
{
	if (pdk_db_begin(db, PDK_DB_WRITE, err) < 0)
		return -EIO;
	if (settle_pending(db, err) < 0)
		return pdk_db_rollback(db, -EIO);
	if (pdk_db_commit(db, err) < 0)
		return pdk_db_rollback(db, -EIO);
	return 0;
}

static json_t *col_str(struct sqlite3_stmt *st, int i)
{
	const char *s = (const char *)sqlite3_column_text(st, i);

	return s != NULL ? json_string(s) : json_null();
}

static json_t *col_ts(struct sqlite3_stmt *st, int i)
{
	uint64_t ns = (uint64_t)sqlite3_column_int64(st, i);
	char ts[40];

	if (ns == 0)
		return json_null();
	pdk_events_format_ts(ns, ts, sizeof(ts));
	return json_string(ts);
}

/* The Approval object of the row `st` is on (AP_COLUMNS). */
static json_t *row_json(struct sqlite3_stmt *st)
{
	const char *detail = (const char *)sqlite3_column_text(st, 7);
	json_t *d = detail != NULL ? json_loads(detail, 0, NULL) : NULL;

	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I}",
			 "id", col_str(st, 0), "kind", col_str(st, 1), "state", col_str(st, 2),
			 "principal", col_str(st, 3), "sandbox", col_str(st, 4), "summary",
			 col_str(st, 5), "reason", col_str(st, 6), "detail",
			 d != NULL ? d : json_null(), "created_at", col_ts(st, 8), "timeout_at",
			 col_ts(st, 9), "decided_at", col_ts(st, 10), "approver", col_str(st, 11),
			 "note", col_str(st, 12), "asker_pid",
			 (json_int_t)sqlite3_column_int64(st, 13));
}

/* The Approval object `id` (*out), or -ENOENT. */
static int row_get(struct pdk_db *db, const char *id, json_t **out, struct pdk_error **err)
{
	_cleanup_db_kept_ struct sqlite3_stmt *st = NULL;
	int rc;

	if (pdk_db_kept(db, AP_GET, &st, err) < 0)
		return -EIO;
	bind_text(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return pdk_error_set_field(err, ENOENT, "id",
					   "no approval request '%s' (paddock approvals --all "
					   "lists them)",
					   id);
	if (rc != SQLITE_ROW)
		return pdk_db_error(db, err, "read the request");
	*out = row_json(st);
	return 0;
}

/* ---- deciders: any process of the state directory ---- */

static int list_rows(struct pdk_db *db, bool all, json_t **out, struct pdk_error **err)
{
	_cleanup_db_walk_ struct pdk_db_walk w = {0};
	_cleanup_json_ json_t *arr = json_array();
	int rc;

	if (pdk_db_walk_start(db, AP_EACH, &w, err) < 0)
		return -EIO;
	(void)sqlite3_bind_int(w.st, 1, all ? 1 : 0);
	while ((rc = sqlite3_step(w.st)) == SQLITE_ROW)
		json_array_append_new(arr, row_json(w.st));
	if (rc != SQLITE_DONE)
		return pdk_db_error(db, err, "list the requests");
	*out = steal_ptr(&arr);
	return 0;
}

int pdk_ctl_approvals_list(const char *state_dir, bool all, json_t **out, struct pdk_error **err)
{
	struct pdk_db db = {0};
	int rc;

	*out = NULL;
	rc = queue_open(state_dir, &db, err);
	if (rc == 0)
		rc = settle_txn(&db, err);
	if (rc == 0)
		rc = list_rows(&db, all, out, err);
	pdk_db_close(&db);
	return rc;
}

int pdk_ctl_approval_get(const char *state_dir, const char *id, json_t **out,
			 struct pdk_error **err)
{
	struct pdk_db db = {0};
	int rc;

	*out = NULL;
	rc = queue_open(state_dir, &db, err);
	if (rc == 0)
		rc = settle_txn(&db, err);
	if (rc == 0)
		rc = row_get(&db, id, out, err);
	pdk_db_close(&db);
	return rc;
}

/* Inside a write transaction: the decision, if `id` is still pending. */
static int decide_in_txn(struct pdk_db *db, const char *id, bool approve, const char *approver,
			 const char *note, struct pdk_error **err)
{
	_cleanup_db_kept_ struct sqlite3_stmt *st = NULL;
	_cleanup_json_ json_t *row = NULL;
	const char *state;

	if (settle_pending(db, err) < 0 || row_get(db, id, &row, err) < 0)
		return err != NULL && *err != NULL ? -(*err)->status : -EIO;
	state = json_string_value(json_object_get(row, "state"));
	if (strcmp(state, "pending") != 0)
		return pdk_error_set_field(err, EALREADY, "state",
					   "approval request '%s' is %s, not pending", id, state);
	if (pdk_db_kept(db, AP_DECIDE, &st, err) < 0)
		return -EIO;
	bind_text(st, 1, approve ? "approved" : "denied");
	(void)sqlite3_bind_int64(st, 2, (sqlite3_int64)pdk_now_real_ns());
	bind_text(st, 3, approver);
	bind_text(st, 4, note);
	bind_text(st, 5, id);
	return pdk_db_step_done(db, st, err);
}

/* The decision on the open queue `db`, and the Approval object after it when `out`. */
static int decide_on(struct pdk_db *db, const char *id, bool approve, const char *approver,
		     const char *note, json_t **out, struct pdk_error **err)
{
	int rc = pdk_db_begin(db, PDK_DB_WRITE, err);

	if (rc == 0 && (rc = decide_in_txn(db, id, approve, approver, note, err)) < 0)
		(void)pdk_db_rollback(db, rc);
	else if (rc == 0 && (rc = pdk_db_commit(db, err)) < 0)
		(void)pdk_db_rollback(db, rc);
	if (rc == 0 && out != NULL)
		rc = row_get(db, id, out, err);
	return rc;
}

int pdk_ctl_approval_decide(const char *state_dir, const char *id, bool approve,
			    const char *approver, const char *note, json_t **out,
			    struct pdk_error **err)
{
	struct pdk_db db = {0};
	json_t *row = NULL;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (approver == NULL || approver[0] == '\0')
		return pdk_error_set_field(err, EINVAL, "approver", "an approver is required");
	rc = queue_open(state_dir, &db, err);
	if (rc < 0)
		return rc;
	rc = decide_on(&db, id, approve, approver, note, out != NULL ? &row : NULL, err);
	pdk_db_close(&db);
	if (out != NULL)
		*out = row;
	return rc;
}

static int asker_db(struct pdk_ctl *c, struct pdk_error **err);

int pdk_ctl_approval_decide_ctl(struct pdk_ctl *c, const char *id, bool approve,
				const char *approver, const char *note, json_t **out,
				struct pdk_error **err)
{
	json_t *row = NULL;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (approver == NULL || approver[0] == '\0')
		return pdk_error_set_field(err, EINVAL, "approver", "an approver is required");
	/*
	 * The control object's own connection to the queue, never a second one:
	 * POSIX locks are the process's, so closing a second connection of this
	 * process to approvals.db could drop what the first one holds, and
	 * another process's close would then delete the WAL under it.
	 */
	if (asker_db(c, err) < 0)
		return -EIO;
	rc = decide_on(c->approvals, id, approve, approver, note, out != NULL ? &row : NULL, err);
	if (out != NULL)
		*out = row;
	return rc;
}

/* ---- the asker ---- */

static void waiter_free(struct pdk_ctl_approval_wait *w)
{
	free(w->kind);
	free(w->principal);
	free(w->sandbox);
	free(w->state);
	free(w->approver);
	free(w->note);
	free(w);
}

static void waiter_unlink(struct pdk_ctl_approval_wait *w)
{
	for (struct pdk_ctl_approval_wait **p = &w->c->approval_waiters; *p != NULL;
	     p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			return;
		}
}

static void record(struct pdk_ctl_approval_wait *w, const char *kind, json_t *attrs)
{
	json_object_update_missing_new(attrs, json_pack("{s:s, s:s, s:s}", "id", w->id, "kind",
							w->kind, "principal", w->principal));
	pdk_ctl_event(w->c, w->sandbox != NULL ? w->sandbox : "daemon", NULL, kind, attrs);
}

/* The queue of the asking control object, opened at its first request. */
static int asker_db(struct pdk_ctl *c, struct pdk_error **err)
{
	if (c->approvals != NULL)
		return 0;
	c->approvals = pdk_xcalloc(1, sizeof(*c->approvals));
	if (queue_open(c->state_dir, c->approvals, err) < 0) {
		pdk_db_close(c->approvals);
		free(c->approvals);
		c->approvals = NULL;
		return -EIO;
	}
	return 0;
}

static int pending_count(struct pdk_db *db, int64_t *n, struct pdk_error **err)
{
	_cleanup_db_kept_ struct sqlite3_stmt *st = NULL;

	if (pdk_db_kept(db, AP_PENDING_COUNT, &st, err) < 0)
		return -EIO;
	if (sqlite3_step(st) != SQLITE_ROW)
		return pdk_db_error(db, err, "count the pending requests");
	*n = sqlite3_column_int64(st, 0);
	return 0;
}

static int insert_row(struct pdk_db *db, const struct pdk_ctl_approval_wait *w, const char *summary,
		      const char *reason, const char *detail, struct pdk_error **err)
{
	_cleanup_db_kept_ struct sqlite3_stmt *st = NULL;
	uint64_t start = 0;

	if (proc_start_time(getpid(), &start) < 0)
		return pdk_error_setx(err, EIO, "cannot read this process's start time");
	if (pdk_db_kept(db, AP_INSERT, &st, err) < 0)
		return -EIO;
	bind_text(st, 1, w->id);
	bind_text(st, 2, w->kind);
	bind_text(st, 3, w->principal);
	bind_text(st, 4, w->sandbox);
	bind_text(st, 5, summary);
	bind_text(st, 6, reason);
	bind_text(st, 7, detail);
	(void)sqlite3_bind_int64(st, 8, (sqlite3_int64)pdk_now_real_ns());
	(void)sqlite3_bind_int64(st, 9, (sqlite3_int64)w->timeout_ns);
	(void)sqlite3_bind_int64(st, 10, (sqlite3_int64)getpid());
	(void)sqlite3_bind_int64(st, 11, (sqlite3_int64)start);
	(void)sqlite3_bind_int64(st, 12, (sqlite3_int64)own_pidns());
	return pdk_db_step_done(db, st, err);
}

/* The request's row, in one write transaction: -EDQUOT past the pending bound. */
static int queue_insert(struct pdk_db *db, const struct pdk_ctl_approval_wait *w,
			const char *summary, const char *reason, const char *detail,
			struct pdk_error **err)
{
	int64_t n = 0;
	int rc;

	if (pdk_db_begin(db, PDK_DB_WRITE, err) < 0)
		return -EIO;
	rc = settle_pending(db, err);
	if (rc == 0)
		rc = pending_count(db, &n, err);
	if (rc == 0 && n >= PDK_CTL_APPROVALS_PENDING_MAX)
		rc = pdk_error_setx(err, EDQUOT,
				    "%d approval requests are pending already: decide some "
				    "(paddock approvals)",
				    PDK_CTL_APPROVALS_PENDING_MAX);
	if (rc == 0)
		rc = insert_row(db, w, summary, reason, detail, err);
	if (rc == 0)
		rc = pdk_db_commit(db, err);
	return rc < 0 ? pdk_db_rollback(db, rc) : 0;
}

/* `s` cut to at most LINE_MAX_BYTES, never inside a UTF-8 character (caller frees). */
static char *line_cut(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	if (s == NULL)
		return NULL;
	if (n > LINE_MAX_BYTES) {
		n = LINE_MAX_BYTES;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	char *out = pdk_xmalloc(n + 1);

	memcpy(out, s, n);
	out[n] = '\0';
	return out;
}

static int req_check(const struct pdk_ctl_approval_req *r, struct pdk_error **err)
{
	if (r->kind == NULL || r->kind[0] == '\0')
		return pdk_error_set_field(err, EINVAL, "kind", "an approval request needs a kind");
	if (r->principal == NULL || r->principal[0] == '\0')
		return pdk_error_set_field(err, EINVAL, "principal",
					   "an approval request needs a principal");
	if (r->summary == NULL || r->summary[0] == '\0')
		return pdk_error_set_field(err, EINVAL, "summary",
					   "an approval request needs a summary");
	return 0;
}

static void poll_due(evutil_socket_t fd, short what, void *arg);

/* The next pass in POLL_MS, only while there are waiters: never a busy loop. */
static void arm(struct pdk_ctl *c)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = POLL_MS * 1000};

	if (c->approval_ev == NULL && (c->approval_ev = evtimer_new(c->base, poll_due, c)) == NULL)
		pdk_oom();
	if (!evtimer_pending(c->approval_ev, NULL) && evtimer_add(c->approval_ev, &tv) < 0)
		pdk__ctl_log(c, PDK_LOG_ERROR, "approvals: cannot arm the timer");
}

static void requested(struct pdk_ctl_approval_wait *w, const struct pdk_ctl_approval_req *r,
		      const char *summary, const char *reason)
{
	json_t *detail = r->detail != NULL ? json_deep_copy(r->detail) : json_null();
	char ts[40];

	/* SECURITY: the event stream is read more widely than the queue: its detail is redacted. */
	(void)pdk_redact_json(NULL, detail);
	pdk_events_format_ts(w->timeout_ns, ts, sizeof(ts));
	record(w, "approval.requested",
	       json_pack("{s:s?, s:s, s:s?, s:s, s:o}", "sandbox", w->sandbox, "summary", summary,
			 "reason", reason, "timeout_at", ts, "detail", detail));
}

int pdk_ctl_approval_ask(struct pdk_ctl *c, const struct pdk_ctl_approval_req *r,
			 pdk_ctl_approval_cb cb, void *ctx, char id[37],
			 struct pdk_ctl_approval_wait **out, struct pdk_error **err)
{
	_cleanup_free_ char *detail = NULL, *summary = NULL, *reason = NULL;
	struct pdk_ctl_approval_wait *w;
	uint64_t timeout_s = r->timeout_s != 0 ? r->timeout_s : PDK_CTL_APPROVAL_TIMEOUT_S;

	if (req_check(r, err) < 0)
		return -EINVAL;
	detail = r->detail != NULL ? json_dumps(r->detail, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (detail != NULL && strlen(detail) > DETAIL_MAX)
		return pdk_error_set_field(err, E2BIG, "detail",
					   "an approval request's detail is over %u bytes",
					   DETAIL_MAX);
	if (asker_db(c, err) < 0)
		return -EIO;
	summary = line_cut(r->summary);
	reason = line_cut(r->reason);
	w = pdk_xcalloc(1, sizeof(*w));
	w->c = c;
	pdk_make_id(w->id);
	w->kind = pdk_xstrdup(r->kind);
	w->principal = pdk_xstrdup(r->principal);
	w->sandbox = r->sandbox != NULL ? pdk_xstrdup(r->sandbox) : NULL;
	w->timeout_ns = pdk_now_real_ns() + timeout_s * 1000000000ULL;
	w->cb = cb;
	w->ctx = ctx;
	if (queue_insert(c->approvals, w, summary, reason, detail, err) < 0) {
		waiter_free(w);
		return (*err)->status == EDQUOT ? -EDQUOT : -EIO;
	}
	requested(w, r, summary, reason);
	w->next = c->approval_waiters;
	c->approval_waiters = w;
	arm(c);
	memcpy(id, w->id, 37);
	if (out != NULL)
		*out = w;
	return 0;
}

/* Mark `w` ready with what its callback is told. */
static void ready(struct pdk_ctl_approval_wait *w, const char *state, const char *approver,
		  const char *note)
{
	w->ready = true;
	w->state = pdk_xstrdup(state);
	w->approver = approver != NULL ? pdk_xstrdup(approver) : NULL;
	w->note = note != NULL ? pdk_xstrdup(note) : NULL;
	if (strcmp(state, "approved") == 0 || strcmp(state, "denied") == 0)
		record(w, strcmp(state, "approved") == 0 ? "approval.granted" : "approval.denied",
		       json_pack("{s:s?, s:s?}", "approver", approver, "note", note));
	else if (strcmp(state, "timed_out") == 0) {
		char ts[40];

		pdk_events_format_ts(w->timeout_ns, ts, sizeof(ts));
		record(w, "approval.timeout", json_pack("{s:s}", "timeout_at", ts));
	} else
		record(w, "approval.withdrawn", json_object());
}

/* Read `w`'s row; past its timeout a pending one is settled "timed_out" first. */
static int poll_one(struct pdk_ctl_approval_wait *w, uint64_t now, struct pdk_error **err)
{
	struct pdk_db *db = w->c->approvals;
	_cleanup_db_kept_ struct sqlite3_stmt *st = NULL;
	int rc;

	if (now >= w->timeout_ns && settle_one(db, w->id, "timed_out", now, err) < 0)
		return -EIO;
	if (pdk_db_kept(db, AP_STATE, &st, err) < 0)
		return -EIO;
	bind_text(st, 1, w->id);
	rc = sqlite3_step(st);
	/* SECURITY: a row that is gone is no approval: the asker is told "withdrawn". */
	if (rc == SQLITE_DONE)
		ready(w, "withdrawn", NULL, NULL);
	else if (rc != SQLITE_ROW)
		return pdk_db_error(db, err, "read a request's state");
	else if (strcmp((const char *)sqlite3_column_text(st, 0), "pending") != 0)
		ready(w, (const char *)sqlite3_column_text(st, 0),
		      (const char *)sqlite3_column_text(st, 1),
		      (const char *)sqlite3_column_text(st, 2));
	return 0;
}

/* Call back, one at a time, every ready waiter (a callback may withdraw another). */
static void dispatch(struct pdk_ctl *c)
{
	struct pdk_ctl_approval_wait *w;

	for (;;) {
		for (w = c->approval_waiters; w != NULL && !w->ready; w = w->next)
			;
		if (w == NULL)
			return;
		waiter_unlink(w);
		w->cb(w->ctx, &(struct pdk_ctl_approval){.id = w->id,
							 .state = w->state,
							 .approver = w->approver,
							 .note = w->note});
		waiter_free(w);
	}
}

static void poll_due(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl *c = arg;
	uint64_t now = pdk_now_real_ns();

	(void)fd;
	(void)what;
	for (struct pdk_ctl_approval_wait *w = c->approval_waiters; w != NULL; w = w->next) {
		_cleanup_error_ struct pdk_error *err = NULL;

		if (w->ready || poll_one(w, now, &err) == 0)
			continue;
		pdk__ctl_log(c, PDK_LOG_WARN, "approvals: %s", err->msg);
		/* SECURITY: a queue that cannot be read never grants: past the timeout it is one.
		 */
		if (now >= w->timeout_ns)
			ready(w, "timed_out", NULL, NULL);
	}
	dispatch(c);
	if (c->approval_waiters != NULL)
		arm(c);
}

void pdk_ctl_approval_withdraw(struct pdk_ctl_approval_wait *w)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl *c;

	if (w == NULL)
		return;
	c = w->c;
	waiter_unlink(w);
	if (!w->ready) {
		if (settle_one(c->approvals, w->id, "withdrawn", pdk_now_real_ns(), &err) < 0)
			pdk__ctl_log(c, PDK_LOG_WARN, "approvals: %s", err->msg);
		else if (sqlite3_changes(c->approvals->conn) > 0)
			record(w, "approval.withdrawn", json_object());
	}
	waiter_free(w);
}

void pdk__approvals_free(struct pdk_ctl *c)
{
	while (c->approval_waiters != NULL)
		pdk_ctl_approval_withdraw(c->approval_waiters);
	if (c->approval_ev != NULL)
		event_free(c->approval_ev);
	c->approval_ev = NULL;
	if (c->approvals != NULL) {
		pdk_db_close(c->approvals);
		free(c->approvals);
		c->approvals = NULL;
	}
}
