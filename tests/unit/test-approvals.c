/*
 * test-approvals.c - the approval queue (src/control/approvals.c): a
 * request asked by a control object on its loop and decided through the
 * state directory (approved, denied), its timeout, its withdrawal (by the
 * asker, by the asker's end, by the asker's death), the list's order, the
 * bound on pending requests, and two deciders at once, of whom exactly one
 * wins.
 */
#include "common.h"
#include "control-internal.h"
#include "control.h"
#include "util.h"

#include <criterion/criterion.h>
#include <event2/event.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct fix {
	char dir[64];
	char *state, *run;
	struct event_base *base;
	struct pdk_ctl *c;
};

struct answer {
	int calls;
	char state[32], approver[64], note[64];
};

static void on_decided(void *ctx, const struct pdk_ctl_approval *a)
{
	struct answer *an = ctx;

	an->calls++;
	snprintf(an->state, sizeof(an->state), "%s", a->state);
	snprintf(an->approver, sizeof(an->approver), "%s", a->approver ? a->approver : "");
	snprintf(an->note, sizeof(an->note), "%s", a->note ? a->note : "");
}

static void fix_open(struct fix *f)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	snprintf(f->dir, sizeof(f->dir), "/tmp/pdk-test-approvals-XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
	f->state = pdk_xasprintf("%s/state", f->dir);
	f->run = pdk_xasprintf("%s/run", f->dir);
	f->base = event_base_new();
	cr_assert_eq(pdk_ctl_new(&(struct pdk_ctl_opts){.base = f->base,
							.state_dir = f->state,
							.run_dir = f->run},
				 &f->c, &err),
		     0, "%s", err ? err->msg : "");
}

static void fix_close(struct fix *f)
{
	pdk_ctl_free(f->c);
	f->c = NULL;
	event_base_free(f->base);
	free(f->state);
	free(f->run);
}

static void ask(struct fix *f, const char *summary, uint64_t timeout_s, struct answer *an,
		char id[37], struct pdk_ctl_approval_wait **w)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *detail = json_pack("{s:s}", "token", "ghp_0123456789abcdefghijKLMN");

	cr_assert_eq(pdk_ctl_approval_ask(f->c,
					  &(struct pdk_ctl_approval_req){.kind = "commit",
									 .principal = "unit",
									 .sandbox = "sb-1",
									 .summary = summary,
									 .reason = "a test",
									 .detail = detail,
									 .timeout_s = timeout_s},
					  on_decided, an, id, w, &err),
		     0, "%s", err ? err->msg : "");
}

/* Every approval.* record of the audit store, in order. */
static void collect(void *ctx, uint64_t seq, const char *kind, json_t *event)
{
	(void)seq;
	if (strncmp(kind, "approval.", 9) == 0)
		json_array_append(ctx, event);
}

static json_t *approval_events(struct fix *f)
{
	struct pdk_ctl_sub_filter filter = {.since = 0};
	json_t *out = json_array();

	pdk_ctl_events_store(f->c);
	pdk__ctl_held_flush(f->c);
	pdk_ctl_unsubscribe(pdk_ctl_subscribe(f->c, &filter, collect, out));
	return out;
}

/* Run the loop until `an` is answered (the test's own timeout bounds it). */
static void run_until_answered(struct fix *f, struct answer *an)
{
	while (an->calls == 0)
		cr_assert_geq(event_base_loop(f->base, EVLOOP_ONCE), 0);
}

static const char *state_of(struct fix *f, const char *id)
{
	static char state[32];
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *row = NULL;

	cr_assert_eq(pdk_ctl_approval_get(f->state, id, &row, &err), 0, "%s", err ? err->msg : "");
	snprintf(state, sizeof(state), "%s", json_string_value(json_object_get(row, "state")));
	return state;
}

Test(approvals, approved_by_a_decider_calls_the_asker_back_with_the_approver)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *list = NULL, *after = NULL, *events = NULL;
	struct answer an = {0};
	json_t *req;
	struct fix f = {0};
	char id[37];

	fix_open(&f);
	ask(&f, "commit 2 changes of sb-1", 0, &an, id, NULL);
	cr_assert_eq(pdk_ctl_approvals_list(f.state, false, &list, &err), 0);
	cr_assert_eq(json_array_size(list), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "id")), id);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "state")),
			 "pending");
	cr_assert_eq(pdk_ctl_approval_decide(f.state, id, true, "uid:tester", "looks fine", &after,
					     &err),
		     0, "%s", err ? err->msg : "");
	cr_assert_str_eq(json_string_value(json_object_get(after, "state")), "approved");
	cr_assert_str_eq(json_string_value(json_object_get(after, "approver")), "uid:tester");
	cr_assert(json_is_string(json_object_get(after, "decided_at")));
	run_until_answered(&f, &an);
	cr_assert_eq(an.calls, 1);
	cr_assert_str_eq(an.state, "approved");
	cr_assert_str_eq(an.approver, "uid:tester");
	cr_assert_str_eq(an.note, "looks fine");
	events = approval_events(&f);
	cr_assert_eq(json_array_size(events), 2);
	req = json_object_get(json_array_get(events, 0), "attrs");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(events, 0), "kind")),
			 "approval.requested");
	cr_assert_str_eq(json_string_value(json_object_get(req, "id")), id);
	cr_assert_str_eq(json_string_value(json_object_get(req, "summary")),
			 "commit 2 changes of sb-1");
	cr_assert(json_is_string(json_object_get(req, "timeout_at")));
	/* The token in the detail is stored in the queue, and only redacted in the event. */
	cr_assert_null(
		strstr(json_string_value(json_object_get(json_object_get(req, "detail"), "token")),
		       "ghp_"));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(events, 1), "kind")),
			 "approval.granted");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_array_get(events, 1), "attrs"), "approver")),
			 "uid:tester");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_array_get(list, 0), "detail"), "token")),
			 "ghp_0123456789abcdefghijKLMN");
	fix_close(&f);
}

Test(approvals, denied_is_told_and_a_second_decision_is_refused_naming_the_state)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct answer an = {0};
	struct fix f = {0};
	char id[37];

	fix_open(&f);
	ask(&f, "commit", 0, &an, id, NULL);
	cr_assert_eq(pdk_ctl_approval_decide(f.state, id, false, "uid:tester", NULL, NULL, &err),
		     0);
	cr_assert_eq(pdk_ctl_approval_decide(f.state, id, true, "uid:other", NULL, NULL, &err),
		     -EALREADY);
	cr_assert_str_eq(err->field, "state");
	cr_assert_not_null(strstr(err->msg, "denied"), "%s", err->msg);
	run_until_answered(&f, &an);
	cr_assert_str_eq(an.state, "denied");
	fix_close(&f);
}

Test(approvals, unknown_ids_and_missing_fields_are_refused)
{
	_cleanup_error_ struct pdk_error *e1 = NULL, *e2 = NULL, *e3 = NULL;
	struct answer an = {0};
	struct fix f = {0};
	char id[37];
	json_t *row = NULL;

	fix_open(&f);
	cr_assert_eq(pdk_ctl_approval_get(f.state, "nope", &row, &e1), -ENOENT);
	cr_assert_not_null(strstr(e1->msg, "'nope'"));
	cr_assert_eq(pdk_ctl_approval_decide(f.state, "nope", true, "x", NULL, NULL, &e2), -ENOENT);
	cr_assert_eq(pdk_ctl_approval_ask(
			     f.c,
			     &(struct pdk_ctl_approval_req){.kind = "commit", .principal = "unit"},
			     on_decided, &an, id, NULL, &e3),
		     -EINVAL);
	cr_assert_str_eq(e3->field, "summary");
	fix_close(&f);
}

Test(approvals, nobody_deciding_before_the_timeout_is_timed_out, .timeout = 30)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct answer an = {0};
	struct fix f = {0};
	char id[37];

	fix_open(&f);
	ask(&f, "commit", 1, &an, id, NULL);
	run_until_answered(&f, &an);
	cr_assert_str_eq(an.state, "timed_out");
	cr_assert_str_eq(state_of(&f, id), "timed_out");
	cr_assert_eq(pdk_ctl_approval_decide(f.state, id, true, "uid:late", NULL, NULL, &err),
		     -EALREADY);
	cr_assert_not_null(strstr(err->msg, "timed_out"), "%s", err->msg);
	fix_close(&f);
}

Test(approvals, withdrawn_by_the_asker_or_its_end_is_not_decidable_and_not_called_back)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_approval_wait *w = NULL;
	struct answer a1 = {0}, a2 = {0};
	struct fix f = {0};
	char id1[37], id2[37];

	fix_open(&f);
	ask(&f, "one", 0, &a1, id1, &w);
	ask(&f, "two", 0, &a2, id2, NULL);
	pdk_ctl_approval_withdraw(w);
	cr_assert_str_eq(state_of(&f, id1), "withdrawn");
	cr_assert_eq(pdk_ctl_approval_decide(f.state, id1, true, "uid:x", NULL, NULL, &err),
		     -EALREADY);
	pdk_ctl_free(f.c);
	f.c = NULL;
	cr_assert_str_eq(state_of(&f, id2), "withdrawn");
	cr_assert_eq(a1.calls + a2.calls, 0);
	fix_close(&f);
}

/* A raw row, as another process would have written it (asker `pid`, started at `start`). */
static void insert_raw(struct fix *f, const char *id, long long created, long long pid,
		       long long start)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/approvals.db", f->state);
	char *sql = NULL; /* sqlite3_free() */
	struct stat st;
	sqlite3 *db = NULL;

	cr_assert_eq(stat("/proc/self/ns/pid", &st), 0);
	sql = sqlite3_mprintf(
		"INSERT INTO approvals (id, kind, state, principal, summary, created_ns,"
		" timeout_ns, asker_pid, asker_start, asker_ns) VALUES (%Q, 'commit', 'pending',"
		" 'raw', 'raw', %lld, %lld, %lld, %lld, %lld)",
		id, created, (long long)(pdk_now_real_ns() + 3600000000000ULL), pid, start,
		(long long)st.st_ino);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 10000);
	cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_free(sql);
	sqlite3_close(db);
}

/* This process's start time (/proc/self/stat field 22). */
static long long own_start(void)
{
	char buf[4096] = {0};
	FILE *fp = fopen("/proc/self/stat", "r");
	const char *p;

	cr_assert_not_null(fp);
	cr_assert_gt(fread(buf, 1, sizeof(buf) - 1, fp), 0);
	fclose(fp);
	p = strrchr(buf, ')');
	for (int i = 2; i < 22; i++)
		p = strchr(p + 1, ' ');
	return strtoll(p + 1, NULL, 10);
}

Test(approvals, a_pending_request_whose_asker_died_is_withdrawn)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *list = NULL;
	struct answer an = {0};
	struct fix f = {0};
	char id[37];
	pid_t child;

	fix_open(&f);
	/* Open the queue (its schema) through an ask, then add a row whose asker has ended. */
	ask(&f, "alive", 0, &an, id, NULL);
	child = fork();
	if (child == 0)
		_exit(0);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	insert_raw(&f, "dead-asker", 1, child, own_start());
	/* Same pid, another start time: the pid was reused by someone else. */
	insert_raw(&f, "reused-pid", 2, getpid(), own_start() + 1);
	cr_assert_eq(pdk_ctl_approvals_list(f.state, false, &list, &err), 0);
	cr_assert_eq(json_array_size(list), 1, "only the live asker's request is pending");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "id")), id);
	cr_assert_str_eq(state_of(&f, "dead-asker"), "withdrawn");
	cr_assert_str_eq(state_of(&f, "reused-pid"), "withdrawn");
	cr_assert_eq(
		pdk_ctl_approval_decide(f.state, "dead-asker", true, "uid:x", NULL, NULL, &err),
		-EALREADY);
	fix_close(&f);
}

Test(approvals, the_list_is_oldest_first_and_all_shows_decided_ones)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *pending = NULL, *all = NULL;
	struct answer an[3] = {0};
	struct fix f = {0};
	char ids[3][37];

	fix_open(&f);
	for (int i = 0; i < 3; i++)
		ask(&f, "req", 0, &an[i], ids[i], NULL);
	cr_assert_eq(pdk_ctl_approval_decide(f.state, ids[1], true, "uid:x", NULL, NULL, &err), 0);
	cr_assert_eq(pdk_ctl_approvals_list(f.state, false, &pending, &err), 0);
	cr_assert_eq(json_array_size(pending), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pending, 0), "id")),
			 ids[0]);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pending, 1), "id")),
			 ids[2]);
	cr_assert_eq(pdk_ctl_approvals_list(f.state, true, &all, &err), 0);
	cr_assert_eq(json_array_size(all), 3);
	for (int i = 0; i < 3; i++)
		cr_assert_str_eq(
			json_string_value(json_object_get(json_array_get(all, (size_t)i), "id")),
			ids[i]);
	fix_close(&f);
}

Test(approvals, past_the_pending_bound_an_ask_is_refused, .timeout = 60)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *path = NULL;
	struct answer an = {0};
	struct fix f = {0};
	char id[37];
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;

	fix_open(&f);
	ask(&f, "first", 0, &an, id, NULL);
	path = pdk_xasprintf("%s/approvals.db", f.state);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
	/* Rows of this live process, as its own asks would be. */
	cr_assert_eq(
		sqlite3_prepare_v2(db,
				   "INSERT INTO approvals (id, kind, state, principal, summary,"
				   " created_ns, timeout_ns, asker_pid, asker_start, asker_ns)"
				   " SELECT ?1 || ?2, kind, state, principal, summary,"
				   " created_ns, timeout_ns, asker_pid, asker_start, asker_ns"
				   " FROM approvals WHERE id = ?1",
				   -1, &st, NULL),
		SQLITE_OK);
	for (int i = 1; i < PDK_CTL_APPROVALS_PENDING_MAX; i++) {
		sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 2, i);
		cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	cr_assert_eq(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	cr_assert_eq(pdk_ctl_approval_ask(f.c,
					  &(struct pdk_ctl_approval_req){.kind = "commit",
									 .principal = "unit",
									 .summary = "one too many"},
					  on_decided, &an, id, NULL, &err),
		     -EDQUOT);
	cr_assert_not_null(strstr(err->msg, "paddock approvals"), "%s", err->msg);
	fix_close(&f);
}

Test(approvals, two_deciders_at_once_exactly_one_wins, .timeout = 60)
{
	struct answer an = {0};
	struct fix f = {0};
	char id[37];
	pid_t kids[2];
	int won = 0, status;

	fix_open(&f);
	for (int round = 0; round < 10; round++) {
		ask(&f, "race", 0, &an, id, NULL);
		for (int k = 0; k < 2; k++) {
			kids[k] = fork();
			if (kids[k] == 0) {
				struct pdk_error *err = NULL;

				_exit(pdk_ctl_approval_decide(f.state, id, k == 0,
							      k == 0 ? "uid:a" : "uid:b", NULL,
							      NULL, &err) == 0
					      ? 0
					      : 1);
			}
		}
		won = 0;
		for (int k = 0; k < 2; k++) {
			cr_assert_eq(waitpid(kids[k], &status, 0), kids[k]);
			won += WIFEXITED(status) && WEXITSTATUS(status) == 0;
		}
		cr_assert_eq(won, 1, "round %d: exactly one decider wins", round);
	}
	fix_close(&f);
}
