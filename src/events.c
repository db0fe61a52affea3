#include "common.h"
#include "events.h"
#include "util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

struct pdk_events {
	int fd;
	uint64_t seq;
	char *sandbox;
	char *actor;
	char *session;
	char *workflow;
};

struct pdk_events *pdk_events_open(const char *path, const char *sandbox_id, const char *actor,
				   struct pdk_error **err)
{
	int fd = TEMP_FAILURE_RETRY(
		open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600));
	struct pdk_events *ev;

	if (fd < 0) {
		pdk_error_set(err, errno, "cannot open events file '%s'", path);
		return NULL;
	}
	ev = pdk_xcalloc(1, sizeof(*ev));
	ev->fd = fd;
	ev->sandbox = pdk_xstrdup(sandbox_id);
	ev->actor = pdk_xstrdup(actor);
	return ev;
}

void pdk_events_set_labels(struct pdk_events *ev, const char *session, const char *workflow)
{
	free(ev->session);
	free(ev->workflow);
	ev->session = session ? pdk_xstrdup(session) : NULL;
	ev->workflow = workflow ? pdk_xstrdup(workflow) : NULL;
}

void pdk_events_format_ts(uint64_t ts_ns, char *buf, size_t len)
{
	time_t secs = (time_t)(ts_ns / 1000000000ULL);
	struct tm tm;
	size_t n;

	if (gmtime_r(&secs, &tm) == NULL || len < 32) {
		if (len > 0)
			buf[0] = '\0';
		return;
	}
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	(void)snprintf(buf + n, len - n, ".%06lluZ",
		       (unsigned long long)((ts_ns % 1000000000ULL) / 1000ULL));
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

int pdk_events_emit(struct pdk_events *ev, const char *kind, uint64_t ts_ns, json_t *attrs,
		    struct pdk_error **err)
{
	_cleanup_json_ json_t *e = json_object();
	_cleanup_free_ char *line = NULL;
	char ts[40];
	int rc;

	if (ev == NULL) {
		json_decref(attrs);
		return 0;
	}
	pdk_events_format_ts(ts_ns ? ts_ns : pdk_now_real_ns(), ts, sizeof(ts));
	pdk_json_set(e, "ts", json_string(ts));
	pdk_json_set(e, "seq", json_integer((json_int_t)ev->seq++));
	pdk_json_set(e, "sandbox", json_string(ev->sandbox));
	pdk_json_set(e, "session", str_or_null(ev->session));
	pdk_json_set(e, "workflow", str_or_null(ev->workflow));
	pdk_json_set(e, "actor", json_string(ev->actor));
	pdk_json_set(e, "kind", json_string(kind));
	pdk_json_set(e, "attrs", attrs ? attrs : json_object());
	line = pdk_json_dump_line(e);
	if (line == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot serialise event '%s'", kind);
	rc = pdk_write_all(ev->fd, line, strlen(line));
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot write event '%s'", kind);
	return 0;
}

void pdk_events_free(struct pdk_events *ev)
{
	if (ev == NULL)
		return;
	if (ev->fd >= 0)
		(void)close(ev->fd);
	free(ev->sandbox);
	free(ev->actor);
	free(ev->session);
	free(ev->workflow);
	free(ev);
}
