/*
 * otlp-export.c - bounded queue + batching thread + libcurl POSTs with retry.
 *
 * One mutex guards the queue, the counters and the closing state; the
 * thread holds it only to take a batch and to count the outcome, never
 * during a request. Waits (for a batch to fill, for a backoff to pass) are
 * condition-variable waits, so close() wakes them at once. A request in
 * flight when the close deadline passes is aborted from libcurl's progress
 * callback (the `abort` flag).
 */
#include "common.h"
#include "base.h"
#include "otlp-export.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_ATTEMPTS    6
#define RETRY_WAIT_MAX  30000 /* ms: a longer Retry-After is cut to this */
#define CONNECT_MAX_MS  1000
#define RESPONSE_MAX    65536 /* bytes of a response body we read (and discard) */
#define RETRY_AFTER_MAX 64

struct pdk_otlp {
	struct pdk_otlp_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* queue changed, closing, or done */
	json_t **q;          /* ring of queue_max events */
	size_t head, n;
	uint64_t first_ns; /* monotonic time the oldest queued event arrived */
	size_t inflight;
	bool closing, done, started, global_init;
	uint64_t deadline_ns; /* monotonic; valid when closing */
	atomic_bool abort;
	struct pdk_otlp_stats st;
	pthread_t thread;
	/* Used by the thread only. */
	CURL *curl;
	struct curl_slist *headers;
	json_t *pending; /* span starts not yet matched (otlp.h) */
	char retry_after[RETRY_AFTER_MAX];
	size_t response_len;
	char errbuf[CURL_ERROR_SIZE];
};

static void abs_time(uint64_t mono_ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(mono_ns / 1000000000ULL);
	ts->tv_nsec = (long)(mono_ns % 1000000000ULL);
}

/* Wait on the condition until `until_ns` (monotonic). Called with the lock held. */
static void wait_until(struct pdk_otlp *o, uint64_t until_ns)
{
	struct timespec ts;

	abs_time(until_ns, &ts);
	(void)pthread_cond_timedwait(&o->cond, &o->lock, &ts);
}

/* ---- libcurl ---- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct pdk_otlp *o = arg;

	(void)data;
	o->response_len += size * nmemb;
	/* The body is not needed; a collector that sends too much is cut off. */
	return o->response_len > RESPONSE_MAX ? 0 : size * nmemb;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct pdk_otlp *o = arg;
	size_t n = size * nmemb;
	static const char name[] = "retry-after:";

	if (n > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		const char *v = data + sizeof(name) - 1;
		size_t vn = n - (sizeof(name) - 1);

		while (vn > 0 && (v[vn - 1] == '\r' || v[vn - 1] == '\n'))
			vn--;
		if (vn >= RETRY_AFTER_MAX)
			vn = RETRY_AFTER_MAX - 1;
		memcpy(o->retry_after, v, vn);
		o->retry_after[vn] = '\0';
	}
	return n;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct pdk_otlp *o = arg;

	(void)dt, (void)dn, (void)ut, (void)un;
	return atomic_load(&o->abort) ? 1 : 0;
}

static int setup_curl(struct pdk_otlp *o, struct pdk_error **err)
{
	CURL *c = o->curl = curl_easy_init();

	if (c == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot initialise libcurl");
	o->headers = curl_slist_append(NULL, "Content-Type: application/json");
	for (size_t i = 0; o->cfg.headers && o->cfg.headers[i]; i++)
		o->headers = curl_slist_append(o->headers, o->cfg.headers[i]);
	if (o->headers == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot build the request headers");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, o->headers);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(
		c, CURLOPT_CONNECTTIMEOUT_MS,
		(long)(o->cfg.timeout_ms < CONNECT_MAX_MS ? o->cfg.timeout_ms : CONNECT_MAX_MS));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, o);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, o);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, o);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, o->errbuf);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "paddock/" PDK_VERSION);
	return 0;
}

/* Milliseconds left before the close deadline, or UINT64_MAX when not closing. */
static uint64_t left_ms(struct pdk_otlp *o)
{
	uint64_t now = pdk_now_mono_ns();
	uint64_t left;

	pthread_mutex_lock(&o->lock);
	left = !o->closing            ? UINT64_MAX
	       : o->deadline_ns > now ? (o->deadline_ns - now) / 1000000
				      : 0;
	pthread_mutex_unlock(&o->lock);
	return left;
}

/* One POST. Returns the verdict; *retry_ms is the server's Retry-After (or -1). */
static enum pdk_otlp_verdict post(struct pdk_otlp *o, const char *url, const char *body,
				  int64_t *retry_ms)
{
	uint64_t left = left_ms(o);
	uint64_t timeout = o->cfg.timeout_ms < left ? o->cfg.timeout_ms : left;
	long status = 0;
	CURLcode rc;
	enum pdk_otlp_verdict v;

	if (timeout == 0) {
		(void)snprintf(o->errbuf, sizeof(o->errbuf), "close deadline reached");
		return PDK_OTLP_FAIL;
	}
	o->retry_after[0] = '\0';
	o->errbuf[0] = '\0';
	o->response_len = 0;
	curl_easy_setopt(o->curl, CURLOPT_URL, url);
	curl_easy_setopt(o->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(o->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(o->curl, CURLOPT_TIMEOUT_MS, (long)timeout);
	rc = curl_easy_perform(o->curl);
	if (rc == CURLE_OK)
		curl_easy_getinfo(o->curl, CURLINFO_RESPONSE_CODE, &status);
	v = pdk_otlp_classify(rc != CURLE_OK, status);
	*retry_ms = pdk_otlp_retry_after_ms(o->retry_after, pdk_now_real_ns());
	if (v != PDK_OTLP_OK) {
		char msg[sizeof(o->st.last_error)];

		if (rc != CURLE_OK)
			(void)snprintf(msg, sizeof(msg), "%.150s",
				       o->errbuf[0] ? o->errbuf : curl_easy_strerror(rc));
		else
			(void)snprintf(msg, sizeof(msg), "HTTP %ld", status);
		pthread_mutex_lock(&o->lock);
		(void)snprintf(o->st.last_error, sizeof(o->st.last_error), "%s", msg);
		pthread_mutex_unlock(&o->lock);
	}
	return v;
}

/* Sleep `ms` unless aborted or the close deadline comes first. False: give up. */
static bool backoff(struct pdk_otlp *o, uint64_t ms)
{
	uint64_t until = pdk_now_mono_ns() + ms * 1000000ULL;
	bool ok = true;

	pthread_mutex_lock(&o->lock);
	while (!atomic_load(&o->abort) && pdk_now_mono_ns() < until) {
		if (o->closing && o->deadline_ns < until) {
			ok = false;
			break;
		}
		wait_until(o, until);
	}
	pthread_mutex_unlock(&o->lock);
	return ok && !atomic_load(&o->abort);
}

static bool post_retry(struct pdk_otlp *o, const char *path, const json_t *req)
{
	_cleanup_free_ char *url = pdk_xasprintf("%s%s", o->cfg.endpoint, path);
	_cleanup_free_ char *body = json_dumps(req, JSON_COMPACT);

	if (body == NULL)
		return false;
	for (unsigned attempt = 0; attempt < MAX_ATTEMPTS && !atomic_load(&o->abort); attempt++) {
		int64_t retry_ms = -1;
		uint64_t wait;

		switch (post(o, url, body, &retry_ms)) {
		case PDK_OTLP_OK:
			return true;
		case PDK_OTLP_FAIL:
			return false;
		case PDK_OTLP_RETRY:
		default:
			break;
		}
		wait = pdk_otlp_backoff_ms(attempt);
		if (retry_ms > (int64_t)wait)
			wait = retry_ms > RETRY_WAIT_MAX ? RETRY_WAIT_MAX : (uint64_t)retry_ms;
		if (attempt + 1 < MAX_ATTEMPTS && !backoff(o, wait))
			return false;
	}
	return false;
}

static bool send_batch(struct pdk_otlp *o, const json_t *batch)
{
	_cleanup_json_ json_t *logs = pdk_otlp_encode_logs(batch, o->cfg.service_name);
	_cleanup_json_ json_t *traces =
		pdk_otlp_encode_traces(batch, o->cfg.service_name, o->pending);
	bool ok = true;

	if (logs != NULL)
		ok = post_retry(o, "/v1/logs", logs);
	if (traces != NULL)
		ok = post_retry(o, "/v1/traces", traces) && ok;
	return ok;
}

/* ---- the thread ---- */

/* Wait for a batch: full, old enough, or closing. Lock held. False: nothing left, stop. */
static bool wait_batch(struct pdk_otlp *o)
{
	while (!o->closing && !atomic_load(&o->abort) && o->n < o->cfg.batch_max) {
		uint64_t due = o->first_ns + o->cfg.delay_ms * 1000000ULL;

		if (o->n == 0)
			(void)pthread_cond_wait(&o->cond, &o->lock);
		else if (pdk_now_mono_ns() >= due)
			break;
		else
			wait_until(o, due);
	}
	return o->n > 0 && !atomic_load(&o->abort);
}

static json_t *take_batch(struct pdk_otlp *o)
{
	json_t *batch = json_array();
	size_t k = o->n < o->cfg.batch_max ? o->n : o->cfg.batch_max;

	for (size_t i = 0; i < k; i++) {
		json_array_append_new(batch, o->q[o->head]);
		o->q[o->head] = NULL;
		o->head = (o->head + 1) % o->cfg.queue_max;
	}
	o->n -= k;
	o->inflight = k;
	o->first_ns = pdk_now_mono_ns();
	return batch;
}

static void *run(void *arg)
{
	struct pdk_otlp *o = arg;

	pthread_mutex_lock(&o->lock);
	while (wait_batch(o)) {
		_cleanup_json_ json_t *batch = take_batch(o);
		bool ok;

		pthread_mutex_unlock(&o->lock);
		ok = send_batch(o, batch);
		pthread_mutex_lock(&o->lock);
		if (ok)
			o->st.exported += o->inflight;
		else
			o->st.failed += o->inflight;
		o->inflight = 0;
	}
	o->done = true;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

/* ---- API ---- */

static void copy_config(struct pdk_otlp_config *dst, const struct pdk_otlp_config *src)
{
	*dst = *src;
	dst->endpoint = pdk_xstrdup(src->endpoint);
	dst->headers = pdk_strv_dup(src->headers);
	dst->service_name = src->service_name ? pdk_xstrdup(src->service_name) : NULL;
	if (dst->queue_max == 0)
		dst->queue_max = 1;
	if (dst->batch_max == 0)
		dst->batch_max = 1;
}

struct pdk_otlp *pdk_otlp_new(const struct pdk_otlp_config *cfg, struct pdk_error **err)
{
	struct pdk_otlp *o = pdk_xcalloc(1, sizeof(*o));
	pthread_condattr_t ca;
	int rc;

	if (cfg->endpoint == NULL) {
		free(o);
		(void)pdk_error_setx(err, EINVAL, "no OTLP endpoint configured");
		return NULL;
	}
	copy_config(&o->cfg, cfg);
	o->q = pdk_xcalloc(o->cfg.queue_max, sizeof(*o->q));
	o->pending = json_array();
	pthread_mutex_init(&o->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cond, &ca);
	pthread_condattr_destroy(&ca);
	/* Reference-counted by libcurl; released in pdk_otlp_free(). */
	o->global_init = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
	if (!o->global_init || setup_curl(o, err) < 0) {
		(void)pdk_error_setx(err, ENOMEM, "cannot initialise libcurl");
		pdk_otlp_free(o);
		return NULL;
	}
	rc = pthread_create(&o->thread, NULL, run, o);
	if (rc != 0) {
		(void)pdk_error_set(err, rc, "cannot start the OTLP exporter thread");
		pdk_otlp_free(o);
		return NULL;
	}
	o->started = true;
	return o;
}

bool pdk_otlp_enqueue(struct pdk_otlp *o, json_t *event)
{
	bool ok;

	pthread_mutex_lock(&o->lock);
	o->st.received++;
	ok = !o->closing && o->n < o->cfg.queue_max;
	if (ok) {
		if (o->n == 0)
			o->first_ns = pdk_now_mono_ns();
		o->q[(o->head + o->n) % o->cfg.queue_max] = json_incref(event);
		o->n++;
		if (o->n >= o->cfg.batch_max)
			pthread_cond_broadcast(&o->cond);
	} else {
		o->st.dropped++;
	}
	pthread_mutex_unlock(&o->lock);
	return ok;
}

void pdk_otlp_get_stats(struct pdk_otlp *o, struct pdk_otlp_stats *st)
{
	pthread_mutex_lock(&o->lock);
	*st = o->st;
	st->unexported = o->n + o->inflight;
	pthread_mutex_unlock(&o->lock);
}

bool pdk_otlp_close(struct pdk_otlp *o, uint64_t deadline_ms, struct pdk_otlp_stats *st)
{
	bool done;

	pthread_mutex_lock(&o->lock);
	if (!o->closing) {
		o->closing = true;
		o->deadline_ns = pdk_now_mono_ns() + deadline_ms * 1000000ULL;
	}
	pthread_cond_broadcast(&o->cond);
	while (!o->done && pdk_now_mono_ns() < o->deadline_ns)
		wait_until(o, o->deadline_ns);
	done = o->done;
	if (!done)
		atomic_store(&o->abort, true); /* the request in flight stops within ~1 s */
	*st = o->st;
	st->unexported = o->n + o->inflight;
	pthread_mutex_unlock(&o->lock);
	return done;
}

void pdk_otlp_free(struct pdk_otlp *o)
{
	if (o == NULL)
		return;
	if (o->started) {
		pthread_mutex_lock(&o->lock);
		o->closing = true;
		if (o->deadline_ns == 0)
			o->deadline_ns = pdk_now_mono_ns();
		atomic_store(&o->abort, true);
		pthread_cond_broadcast(&o->cond);
		pthread_mutex_unlock(&o->lock);
		(void)pthread_join(o->thread, NULL);
	}
	for (size_t i = 0; i < o->n; i++)
		json_decref(o->q[(o->head + i) % o->cfg.queue_max]);
	free(o->q);
	json_decref(o->pending);
	curl_slist_free_all(o->headers);
	if (o->curl)
		curl_easy_cleanup(o->curl);
	if (o->global_init)
		curl_global_cleanup();
	pthread_cond_destroy(&o->cond);
	pthread_mutex_destroy(&o->lock);
	pdk_otlp_config_release(&o->cfg);
	free(o);
}
