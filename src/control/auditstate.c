/*
 * auditstate.c - the audit chain's state for a front door (control.h,
 * pdk_ctl_audit_state()): the newest full verification of the store, made
 * on a worker thread.
 *
 * A verification reads and hashes every record (seconds on a store of
 * millions), so it never runs on the event loop: a thread of its own opens
 * a read-only connection to audit.db (SQLite allows one connection per
 * thread; the loop's own connection is never shared), verifies, counts the
 * records still in run spools, and writes one byte to a pipe the loop
 * watches. The loop then joins it and answers every request that waited.
 * At most one runs at a time; requests that come meanwhile wait for it.
 *
 * The thread touches nothing of the control object: it gets a copy of the
 * state directory and writes its result into its own job, which the loop
 * reads only after the join. At the end of the control object, a
 * verification still running is told to stop (an atomic flag its
 * connection's progress handler polls) and joined: nothing is left behind.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "control-internal.h"
#include "telemetry.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* One verification: made by the loop, filled by the thread, read by the loop after the join. */
struct audit_job {
	char *state_dir;       /* the thread's copy */
	int wake_fd;           /* borrowed: the pipe's write end */
	atomic_bool stop;      /* set by the loop at its end: the thread's statements stop */
	uint64_t started_ns;   /* CLOCK_REALTIME: the answer's verified_at */
	uint64_t started_mono; /* CLOCK_MONOTONIC: the result's age */
	int rc;                /* the thread's outcome: 0, or negative with err */
	struct pdk_error *err;
	struct pdk_audit_verify res;
	uint64_t unfolded;
	json_t *state; /* the loop's: the answer, made once after the join */
};

struct pdk_ctl_audit_wait {
	struct pdk_ctl_audit_wait *next;
	pdk_ctl_audit_cb cb;
	void *ctx;
};

struct pdk__audit_state {
	struct audit_job *job; /* the verification running, or NULL */
	pthread_t thread;
	int pipe[2]; /* the thread's wake-up: read end watched by `wake` */
	struct event *wake;
	struct pdk_ctl_audit_wait *waiters; /* requests waiting for `job` */
	struct audit_job *last;             /* the newest completed verification, or NULL */
};

static void job_free(struct audit_job *j)
{
	if (j == NULL)
		return;
	free(j->state_dir);
	pdk_error_free(&j->err);
	json_decref(j->state);
	free(j);
}

/* ---- the worker thread ---- */

static int count_unfolded(void *data, const struct pdk_audit_spool *s)
{
	uint64_t *n = data;

	*n += s->records;
	return 0;
}

static void *verify_main(void *arg)
{
	struct audit_job *j = arg;
	struct pdk_audit *a = NULL;
	int rc = pdk_audit_open_readonly(j->state_dir, &a, &j->err);

	if (rc == 0) {
		pdk_audit_set_stop(a, &j->stop);
		rc = pdk_audit_verify_chain(a, NULL, &j->res, &j->err);
	}
	if (rc == 0)
		rc = pdk_audit_pending(j->state_dir, count_unfolded, &j->unfolded, &j->err);
	pdk_audit_free(a);
	j->rc = rc;
	/* The last thing the thread does with the job: the loop owns it from here. */
	(void)!write(j->wake_fd, "", 1);
	return NULL;
}

/* ---- answers ---- */

static json_t *str_or_null(const char *s)
{
	return s != NULL && s[0] != '\0' ? json_string(s) : json_null();
}

/* The AuditState object of a completed verification (control.h; new reference). */
static json_t *state_json(const struct audit_job *j)
{
	const struct pdk_audit_verify *v = &j->res;
	bool ok = v->reason == PDK_AUDIT_INTACT;
	json_t *o = json_object();

	pdk_json_set(o, "state", json_string(pdk_audit_break_name(v->reason)));
	pdk_json_set(o, "head_seq", json_integer((json_int_t)v->head_seq));
	pdk_json_set(o, "head_hash", str_or_null(v->head_hash));
	/* What was checked: everything up to the head, or up to the record before the break. */
	pdk_json_set(o, "verified_seq",
		     json_integer((json_int_t)(ok ? v->head_seq : v->broken_seq - 1)));
	pdk_json_set(o, "signed_seq", json_integer((json_int_t)v->signed_seq));
	pdk_json_set(o, "signed_at", str_or_null(v->signed_ts));
	pdk_json_set(o, "broken_seq", ok ? json_null() : json_integer((json_int_t)v->broken_seq));
	pdk_json_set(o, "detail", ok ? json_null() : str_or_null(v->detail));
	pdk_json_set(o, "records", json_integer((json_int_t)v->records));
	pdk_json_set(o, "checkpoints", json_integer((json_int_t)v->checkpoints));
	pdk_json_set(o, "key_id", str_or_null(v->key_id));
	pdk_json_set(o, "unfolded_records", json_integer((json_int_t)j->unfolded));
	pdk_json_set(o, "verified_at", pdk_events_ts_json(j->started_ns));
	return o;
}

/* Every waiting request gets `state` or `err` (the list is taken first: a callback may ask again).
 */
static void answer_waiters(struct pdk__audit_state *st, const json_t *state,
			   const struct pdk_error *err)
{
	struct pdk_ctl_audit_wait *w = st->waiters;

	st->waiters = NULL;
	while (w != NULL) {
		struct pdk_ctl_audit_wait *next = w->next;

		w->cb(w->ctx, state, err);
		free(w);
		w = next;
	}
}

/*
 * A broken chain, or a verification that took a second or more, is worth a
 * line in the daemon's log; an intact one, asked for every few seconds by
 * a dashboard, is not.
 */
static void log_result(struct pdk_ctl *c, const struct audit_job *j, uint64_t ms)
{
	const struct pdk_audit_verify *v = &j->res;

	if (v->reason != PDK_AUDIT_INTACT)
		pdk__ctl_log(c, PDK_LOG_WARN, "audit state: the chain is broken at %llu: %s: %s",
			     (unsigned long long)v->broken_seq, pdk_audit_break_name(v->reason),
			     v->detail);
	else if (ms >= 1000)
		pdk__ctl_log(c, PDK_LOG_INFO, "audit state: %llu records verified in %llu ms",
			     (unsigned long long)v->records, (unsigned long long)ms);
}

/* The loop's side of a verification's end: join, keep the result, answer. */
static void job_done(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl *c = arg;
	struct pdk__audit_state *st = c->audit_state;
	struct audit_job *j = st->job;
	char byte;

	(void)what;
	while (read(fd, &byte, 1) > 0)
		;
	if (j == NULL)
		return;
	(void)pthread_join(st->thread, NULL);
	st->job = NULL;
	if (j->rc < 0) {
		pdk__ctl_log(c, PDK_LOG_WARN, "audit state: %s", j->err->msg);
		answer_waiters(st, NULL, j->err);
		job_free(j);
		return;
	}
	log_result(c, j, (pdk_now_mono_ns() - j->started_mono) / 1000000);
	j->state = state_json(j);
	job_free(st->last);
	st->last = j;
	answer_waiters(st, j->state, NULL);
}

/* ---- starting one ---- */

static struct pdk__audit_state *state_new(struct pdk_ctl *c, struct pdk_error **err)
{
	struct pdk__audit_state *st = pdk_xcalloc(1, sizeof(*st));

	if (pipe2(st->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(st);
		(void)pdk_error_set(err, errno, "audit state: cannot make a pipe");
		return NULL;
	}
	st->wake = event_new(c->base, st->pipe[0], EV_READ | EV_PERSIST, job_done, c);
	if (st->wake == NULL || event_add(st->wake, NULL) < 0)
		pdk_oom();
	return st;
}

/*
 * Start the thread with every signal blocked: the daemon's signals (its
 * loop's SIGTERM, SIGCHLD) are for the loop's thread, never for a worker.
 */
static int start_thread(struct pdk__audit_state *st, struct audit_job *j, struct pdk_error **err)
{
	int rc = pdk_thread_start_quiet(&st->thread, NULL, verify_main, j);

	if (rc != 0)
		return pdk_error_set(err, rc, "audit state: cannot start a verification thread");
	return 0;
}

static int start_job(struct pdk_ctl *c, struct pdk_error **err)
{
	struct pdk__audit_state *st = c->audit_state;
	struct audit_job *j = pdk_xcalloc(1, sizeof(*j));

	j->state_dir = pdk_xstrdup(c->state_dir);
	j->wake_fd = st->pipe[1];
	atomic_init(&j->stop, false);
	j->started_ns = pdk_now_real_ns();
	j->started_mono = pdk_now_mono_ns();
	if (start_thread(st, j, err) < 0) {
		job_free(j);
		return -EIO;
	}
	st->job = j;
	return 0;
}

int pdk_ctl_audit_state(struct pdk_ctl *c, uint64_t max_age_s, pdk_ctl_audit_cb cb, void *ctx,
			struct pdk_error **err)
{
	struct pdk__audit_state *st = c->audit_state;
	struct pdk_ctl_audit_wait *w;

	if (c->stopping)
		return pdk_error_setx(err, ENOTCONN, "the daemon is shutting down");
	if (st == NULL && (st = c->audit_state = state_new(c, err)) == NULL)
		return -EIO;
	if (st->last != NULL &&
	    pdk_now_mono_ns() - st->last->started_mono <= max_age_s * 1000000000ULL) {
		cb(ctx, st->last->state, NULL);
		return 0;
	}
	if (st->job == NULL && start_job(c, err) < 0)
		return -EIO;
	w = pdk_xcalloc(1, sizeof(*w));
	w->cb = cb;
	w->ctx = ctx;
	w->next = st->waiters;
	st->waiters = w;
	return 0;
}

void pdk__audit_state_free(struct pdk_ctl *c)
{
	struct pdk__audit_state *st = c->audit_state;
	struct pdk_error *err = NULL;

	if (st == NULL)
		return;
	if (st->job != NULL) {
		/* Told to stop, it ends at its next statement step: joined, never left running. */
		atomic_store(&st->job->stop, true);
		(void)pthread_join(st->thread, NULL);
		job_free(st->job);
		st->job = NULL;
	}
	(void)pdk_error_setx(&err, ENOTCONN, "the daemon is shutting down");
	answer_waiters(st, NULL, err);
	pdk_error_free(&err);
	job_free(st->last);
	event_free(st->wake);
	(void)close(st->pipe[0]);
	(void)close(st->pipe[1]);
	free(st);
	c->audit_state = NULL;
}
