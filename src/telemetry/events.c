#include "common.h"
#include "base.h"
#include "events.h"
#include "redact.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

struct sink {
	const struct pdk_events_sink *ops;
	void *data;
};

struct pdk_events {
	pthread_mutex_t lock; /* seq, the sinks' order, and sinks that are not thread-safe */
	uint64_t seq;
	char *sandbox;
	char *actor;
	char *session;
	char *workflow;
	struct sink *sinks;
	size_t n_sinks;
	struct pdk_redact *redact; /* applied to attrs before any sink sees them */
	bool closed;
};

/* ---- the JSON-lines file sink ---- */

static int file_emit(void *data, const json_t *event, struct pdk_error **err)
{
	int fd = *(int *)data;
	_cleanup_free_ char *line = pdk_json_dump_line(event);
	int rc;

	if (line == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot serialise an event");
	rc = pdk_write_all(fd, line, strlen(line));
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot write event '%s'",
				     json_string_value(json_object_get(event, "kind")));
	return 0;
}

static void file_free(void *data)
{
	int *fd = data;

	if (*fd >= 0)
		(void)close(*fd);
	free(fd);
}

static const struct pdk_events_sink file_sink = {
	.name = "events file",
	.emit = file_emit,
	.free = file_free,
};

/* ---- the hub ---- */

struct pdk_events *pdk_events_new(const char *sandbox_id, const char *actor)
{
	struct pdk_events *ev = pdk_xcalloc(1, sizeof(*ev));

	pthread_mutex_init(&ev->lock, NULL);
	ev->sandbox = pdk_xstrdup(sandbox_id);
	ev->actor = pdk_xstrdup(actor);
	ev->redact = pdk_redact_new();
	return ev;
}

bool pdk_events_add_secret(struct pdk_events *ev, const char *name, const char *value)
{
	bool searched;

	pthread_mutex_lock(&ev->lock);
	searched = pdk_redact_add_secret(ev->redact, name, value);
	pthread_mutex_unlock(&ev->lock);
	return searched;
}

void pdk_events_add_sink(struct pdk_events *ev, const struct pdk_events_sink *ops, void *data)
{
	pthread_mutex_lock(&ev->lock);
	ev->sinks = pdk_xrealloc(ev->sinks, (ev->n_sinks + 1) * sizeof(*ev->sinks));
	ev->sinks[ev->n_sinks++] = (struct sink){.ops = ops, .data = data};
	pthread_mutex_unlock(&ev->lock);
}

int pdk_events_add_file(struct pdk_events *ev, const char *path, struct pdk_error **err)
{
	int fd = TEMP_FAILURE_RETRY(
		open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600));
	int *data;

	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open events file '%s'", path);
	data = pdk_xmalloc(sizeof(*data));
	*data = fd;
	pdk_events_add_sink(ev, &file_sink, data);
	return 0;
}

struct pdk_events *pdk_events_open(const char *path, const char *sandbox_id, const char *actor,
				   struct pdk_error **err)
{
	struct pdk_events *ev = pdk_events_new(sandbox_id, actor);

	if (pdk_events_add_file(ev, path, err) < 0) {
		pdk_events_free(ev);
		return NULL;
	}
	return ev;
}

void pdk_events_set_labels(struct pdk_events *ev, const char *session, const char *workflow)
{
	pthread_mutex_lock(&ev->lock);
	free(ev->session);
	free(ev->workflow);
	ev->session = session ? pdk_xstrdup(session) : NULL;
	ev->workflow = workflow ? pdk_xstrdup(workflow) : NULL;
	pthread_mutex_unlock(&ev->lock);
}

/*
 * The civil date of a day count since 1970-01-01 (proleptic Gregorian), by
 * eras of 400 years. gmtime_r() would do it too, but glibc loads and parses
 * /etc/localtime at its first call (tzset), even for UTC: six system calls
 * and the page faults of the time zone code at every run's first event.
 */
static void civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;

	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

void pdk_events_format_ts(uint64_t ts_ns, char *buf, size_t len)
{
	uint64_t secs = ts_ns / 1000000000ULL;
	unsigned sod = (unsigned)(secs % 86400);
	int64_t year;
	unsigned month, day;

	if (len < 32) {
		if (len > 0)
			buf[0] = '\0';
		return;
	}
	civil_from_days((int64_t)(secs / 86400), &year, &month, &day);
	if (year >= 0 && year <= 9999) {
		/* Every record has one: written digit by digit, the same text as below. */
		static const char form[] = "0000-00-00T00:00:00.000000Z";
		const unsigned fields[][3] = {
			{0, 4, (unsigned)year},
			{5, 2, month},
			{8, 2, day},
			{11, 2, sod / 3600},
			{14, 2, sod / 60 % 60},
			{17, 2, sod % 60},
			{20, 6, (unsigned)((ts_ns % 1000000000ULL) / 1000ULL)},
		};

		memcpy(buf, form, sizeof(form));
		for (size_t f = 0; f < PDK_ARRAY_SIZE(fields); f++)
			for (unsigned at = fields[f][0] + fields[f][1], v = fields[f][2];
			     at > fields[f][0]; v /= 10)
				buf[--at] = (char)('0' + v % 10);
		return;
	}
	(void)snprintf(buf, len, "%04" PRId64 "-%02u-%02uT%02u:%02u:%02u.%06lluZ", year, month, day,
		       sod / 3600, sod / 60 % 60, sod % 60,
		       (unsigned long long)((ts_ns % 1000000000ULL) / 1000ULL));
}

json_t *pdk_events_ts_json(uint64_t ts_ns)
{
	char buf[40];

	if (ts_ns == 0)
		return json_null();
	pdk_events_format_ts(ts_ns, buf, sizeof(buf));
	return json_string(buf);
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* Called with the lock held. */
static json_t *stamp(struct pdk_events *ev, const char *kind, uint64_t ts_ns, json_t *attrs)
{
	json_t *e = json_object();
	char ts[40];

	pdk_events_format_ts(ts_ns ? ts_ns : pdk_now_real_ns(), ts, sizeof(ts));
	pdk_json_set(e, "ts", json_string(ts));
	pdk_json_set(e, "seq", json_integer((json_int_t)ev->seq++));
	pdk_json_set(e, "sandbox", json_string(ev->sandbox));
	pdk_json_set(e, "session", str_or_null(ev->session));
	pdk_json_set(e, "workflow", str_or_null(ev->workflow));
	pdk_json_set(e, "actor", json_string(ev->actor));
	pdk_json_set(e, "kind", json_string(kind));
	pdk_json_set(e, "attrs", attrs ? attrs : json_object());
	return e;
}

/* The first failing sink's error, named after the sink. */
static int sink_failed(const struct sink *s, const struct pdk_error *serr, struct pdk_error **err)
{
	if (serr == NULL)
		return pdk_error_setx(err, EIO, "%s: failed", s->ops->name);
	return pdk_error_setx(err, serr->status, "%s: %s", s->ops->name, serr->msg);
}

int pdk_events_emit(struct pdk_events *ev, const char *kind, uint64_t ts_ns, json_t *attrs,
		    struct pdk_error **err)
{
	_cleanup_json_ json_t *e = NULL;
	int rc = 0;

	if (ev == NULL) {
		json_decref(attrs);
		return 0;
	}
	pthread_mutex_lock(&ev->lock);
	if (ev->closed) {
		pthread_mutex_unlock(&ev->lock);
		json_decref(attrs);
		return pdk_error_setx(err, EPIPE, "event '%s' after the stream was closed", kind);
	}
	/* SECURITY: secrets leave the attributes before any sink sees them. */
	if (attrs != NULL)
		(void)pdk_redact_json(ev->redact, attrs);
	e = stamp(ev, kind, ts_ns, attrs);
	for (size_t i = 0; i < ev->n_sinks; i++) {
		_cleanup_error_ struct pdk_error *serr = NULL;

		if (ev->sinks[i].ops->emit(ev->sinks[i].data, e, &serr) < 0 && rc == 0)
			rc = sink_failed(&ev->sinks[i], serr, err);
	}
	pthread_mutex_unlock(&ev->lock);
	return rc;
}

int pdk_events_close(struct pdk_events *ev, struct pdk_error **err)
{
	int rc = 0;

	if (ev == NULL)
		return 0;
	pthread_mutex_lock(&ev->lock);
	for (size_t i = 0; i < ev->n_sinks && !ev->closed; i++) {
		_cleanup_error_ struct pdk_error *serr = NULL;

		if (ev->sinks[i].ops->close != NULL &&
		    ev->sinks[i].ops->close(ev->sinks[i].data, &serr) < 0 && rc == 0)
			rc = sink_failed(&ev->sinks[i], serr, err);
	}
	ev->closed = true;
	pthread_mutex_unlock(&ev->lock);
	return rc;
}

void pdk_events_free(struct pdk_events *ev)
{
	if (ev == NULL)
		return;
	for (size_t i = 0; i < ev->n_sinks; i++)
		if (ev->sinks[i].ops->free != NULL)
			ev->sinks[i].ops->free(ev->sinks[i].data);
	free(ev->sinks);
	pdk_redact_free(ev->redact);
	pthread_mutex_destroy(&ev->lock);
	free(ev->sandbox);
	free(ev->actor);
	free(ev->session);
	free(ev->workflow);
	free(ev);
}
