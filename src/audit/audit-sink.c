/*
 * audit-sink.c - the audit store as an events sink: a bounded queue and a
 * writer thread, so that SQLite and fsync never sit on the supervisor's
 * path.
 *
 * emit() (called with the hub's lock held) only queues a reference to the
 * event. The writer takes the whole queue at once (swapping buffers) when
 * it is full, every flush_ms, or at close, and appends it as one
 * transaction. When the queue is full, emit() waits for the writer (block)
 * or fails (stop): an event is never dropped silently. A writer failure is
 * sticky: every later emit() and the close return it (fail closed).
 */
#include "common.h"
#include "audit-internal.h"
#include "base.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

struct audit_sink {
	pthread_mutex_t lock;
	pthread_cond_t wake;  /* the writer: work to do */
	pthread_cond_t space; /* emitters: the queue has room */
	json_t **q;           /* queued events (each holds a reference) */
	size_t n;
	size_t max;
	bool closing;
	bool started;
	struct pdk_error *failed; /* the writer's first error, sticky */
	pthread_t thread;
	struct pdk_audit *store; /* opened by the writer when it starts */
	char *state_dir;
	unsigned flush_ms;
	uint64_t checkpoint_every;
	enum pdk_audit_on_full on_full;
};

static void release_events(json_t **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		json_decref(v[i]);
}

static int write_batch(struct audit_sink *s, json_t **batch, size_t n, bool last,
		       struct pdk_error **err)
{
	/* The stream's end is signed, so a cut after it shows as truncation. */
	return pdk_audit_append(s->store, batch, n, last, err);
}

static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Called with the lock held: wait until the queue is full, old enough, or closing. */
static void wait_for_work(struct audit_sink *s)
{
	struct timespec deadline;

	while (!s->closing && s->n == 0)
		pthread_cond_wait(&s->wake, &s->lock);
	deadline_in(&deadline, s->flush_ms);
	while (!s->closing && s->n < s->max)
		if (pthread_cond_timedwait(&s->wake, &s->lock, &deadline) == ETIMEDOUT)
			break;
}

/*
 * Open the store and load the signing key as soon as the writer starts,
 * while the sandbox is built and runs: what is left for the end of a short
 * run is one insert, one signature and one commit.
 */
static void open_store(struct audit_sink *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_audit_open(s->state_dir, &s->store, &err) < 0 ||
	    pdk__audit_load_key(s->store, &err) < 0) {
		pthread_mutex_lock(&s->lock);
		s->failed = steal_ptr(&err);
		pthread_cond_broadcast(&s->space);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	pdk_audit_set_checkpoint_every(s->store, s->checkpoint_every);
}

static void *writer(void *data)
{
	struct audit_sink *s = data;
	json_t **batch = pdk_xcalloc(s->max, sizeof(*batch));

	(void)pthread_setname_np(pthread_self(), "paddock-audit"); /* for ps and perf */
	open_store(s);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		_cleanup_error_ struct pdk_error *err = NULL;
		json_t **full;
		size_t n;
		bool last;

		wait_for_work(s);
		full = s->q;
		n = s->n;
		last = s->closing;
		/* Swap buffers: emitters fill the other one while this one is written. */
		s->q = batch;
		s->n = 0;
		batch = full;
		pthread_cond_broadcast(&s->space);
		pthread_mutex_unlock(&s->lock);

		if (s->failed == NULL && write_batch(s, batch, n, last, &err) < 0) {
			pthread_mutex_lock(&s->lock);
			s->failed = steal_ptr(&err);
			pthread_cond_broadcast(&s->space);
			pthread_mutex_unlock(&s->lock);
		}
		release_events(batch, n);
		pthread_mutex_lock(&s->lock);
		if (last && s->n == 0)
			break;
	}
	pthread_mutex_unlock(&s->lock);
	free(batch);
	return NULL;
}

static int failed_error(const struct audit_sink *s, struct pdk_error **err)
{
	return pdk_error_setx(err, s->failed->status, "%s", s->failed->msg);
}

/*
 * A failure to start is kept like a writer failure: the first emit()
 * returns it. The writer blocks every signal (it inherits the mask it is
 * created with), so that the signals the supervisor forwards or handles
 * through its signalfd are never delivered to it instead.
 */
static void start_writer(struct audit_sink *s)
{
	int rc = pdk_thread_start_quiet(&s->thread, NULL, writer, s);

	if (rc != 0) {
		(void)pdk_error_set(&s->failed, rc, "cannot start the audit writer");
		return;
	}
	s->started = true;
}

static int sink_emit(void *data, const json_t *event, struct pdk_error **err)
{
	struct audit_sink *s = data;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	while (rc == 0 && s->failed == NULL && s->n == s->max) {
		if (s->on_full == PDK_AUDIT_STOP) {
			rc = pdk_error_setx(err, ENOBUFS,
					    "the audit queue is full (%zu events): stopping",
					    s->max);
			break;
		}
		pthread_cond_signal(&s->wake);
		pthread_cond_wait(&s->space, &s->lock);
	}
	if (rc == 0 && s->failed != NULL)
		rc = failed_error(s, err);
	if (rc == 0) {
		/* SECURITY: the hub never changes an event after its sinks had it. */
		s->q[s->n++] = json_incref((json_t *)event);
		if (s->n == s->max)
			pthread_cond_signal(&s->wake);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int sink_close(void *data, struct pdk_error **err)
{
	struct audit_sink *s = data;
	bool started;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	s->closing = true;
	started = s->started;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	if (started) {
		(void)pthread_join(s->thread, NULL);
		s->started = false;
	}
	if (s->failed != NULL)
		rc = failed_error(s, err);
	return rc;
}

static void sink_free(void *data)
{
	struct audit_sink *s = data;

	if (s->started) {
		_cleanup_error_ struct pdk_error *err = NULL;

		(void)!sink_close(s, &err); /* freed without close: still flush what is queued */
	}
	release_events(s->q, s->n);
	free(s->q);
	pdk_audit_free(s->store);
	pdk_error_free(&s->failed);
	free(s->state_dir);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->space);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static const struct pdk_events_sink audit_sink_ops = {
	.name = "audit store",
	.emit = sink_emit,
	.close = sink_close,
	.free = sink_free,
};

void pdk_audit_add_sink(struct pdk_events *ev, const struct pdk_audit_sink_config *cfg)
{
	struct audit_sink *s = pdk_xcalloc(1, sizeof(*s));
	pthread_condattr_t ca;

	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&s->space, NULL);
	s->max = cfg->queue_max ? cfg->queue_max : PDK_AUDIT_QUEUE_MAX;
	s->q = pdk_xcalloc(s->max, sizeof(*s->q));
	s->state_dir = pdk_xstrdup(cfg->state_dir);
	s->flush_ms = cfg->flush_ms ? cfg->flush_ms : PDK_AUDIT_FLUSH_MS;
	s->checkpoint_every =
		cfg->checkpoint_every ? cfg->checkpoint_every : PDK_AUDIT_CHECKPOINT_EVERY;
	s->on_full = cfg->on_full;
	/*
	 * The writer starts now, so that it opens the store and loads the key
	 * on the other core while the supervisor builds the sandbox.
	 */
	start_writer(s);
	pdk_events_add_sink(ev, &audit_sink_ops, s);
}
