#include "common.h"
#include "events.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static char *tmp_path(void)
{
	char tmpl[] = "/tmp/pdk-events-XXXXXX";
	int fd = mkstemp(tmpl);

	cr_assert_geq(fd, 0);
	close(fd);
	return pdk_xstrdup(tmpl);
}

Test(events, line_shape_and_escaping)
{
	_cleanup_free_ char *path = tmp_path();
	struct pdk_error *err = NULL;
	struct pdk_events *ev =
		pdk_events_open(path, "0190c0de-0000-7000-8000-000000000000", "t", &err);
	json_t *a = json_object();
	char *data = NULL;
	json_t *line;
	json_error_t jerr;

	cr_assert_not_null(ev);
	/* Hostile bytes in an attribute must stay inside the string. */
	pdk_json_set(a, "argv", json_string("x\"}, \"kind\": \"forged\n"));
	cr_assert_eq(pdk_events_emit(ev, "process.exec", 1700000000123456789ULL, a, &err), 0);
	pdk_events_free(ev);
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 1 << 20, &data, &err), 0);
	cr_assert_eq(strchr(data, '\n'), data + strlen(data) - 1, "exactly one line: %s", data);
	line = json_loads(data, 0, &jerr);
	cr_assert_not_null(line, "valid JSON: %s", jerr.text);
	cr_assert_str_eq(json_string_value(json_object_get(line, "kind")), "process.exec");
	cr_assert_str_eq(json_string_value(json_object_get(line, "ts")),
			 "2023-11-14T22:13:20.123456Z");
	cr_assert_str_eq(json_string_value(json_object_get(line, "sandbox")),
			 "0190c0de-0000-7000-8000-000000000000");
	cr_assert(json_is_null(json_object_get(line, "session")));
	cr_assert_eq(json_integer_value(json_object_get(line, "seq")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(line, "attrs"), "argv")),
			 "x\"}, \"kind\": \"forged\n");
	json_decref(line);
	free(data);
	unlink(path);
}

Test(events, concurrent_writers_never_interleave)
{
	_cleanup_free_ char *path = tmp_path();
	struct pdk_error *err = NULL;
	char *data = NULL;
	size_t lines = 0;

	for (int w = 0; w < 4; w++) {
		if (fork() == 0) {
			struct pdk_events *ev = pdk_events_open(path, "id", "writer", &err);

			for (int i = 0; i < 500; i++) {
				json_t *a = json_object();

				pdk_json_set(
					a, "pad",
					json_string(
						"................................................................................................................................"));
				if (pdk_events_emit(ev, "test", 0, a, &err) < 0)
					_exit(1);
			}
			pdk_events_free(ev);
			_exit(0);
		}
	}
	for (int w = 0; w < 4; w++) {
		int st;

		wait(&st);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 64 << 20, &data, &err), 0);
	for (char *s = data, *nl; (nl = strchr(s, '\n')) != NULL; s = nl + 1) {
		json_error_t jerr;
		json_t *j = json_loadb(s, (size_t)(nl - s), 0, &jerr);

		cr_assert_not_null(j, "line %zu is not whole JSON: %s", lines, jerr.text);
		json_decref(j);
		lines++;
	}
	cr_assert_eq(lines, 2000);
	free(data);
	unlink(path);
}

Test(events, open_error_names_file)
{
	struct pdk_error *err = NULL;

	cr_assert_null(pdk_events_open("/nonexistent-dir/ev.jsonl", "id", "t", &err));
	cr_assert_not_null(strstr(err->msg, "/nonexistent-dir/ev.jsonl"));
	cr_assert_eq(err->status, ENOENT);
	pdk_error_free(&err);
}

Test(events, null_sink_is_noop)
{
	cr_assert_eq(pdk_events_emit(NULL, "x", 0, json_object(), NULL), 0);
}

struct rec {
	int events;
	int closes;
	int fail;
	int freed;
	char last_kind[32];
};

static int rec_emit(void *data, const json_t *event, struct pdk_error **err)
{
	struct rec *r = data;

	r->events++;
	(void)snprintf(r->last_kind, sizeof(r->last_kind), "%s",
		       json_string_value(json_object_get(event, "kind")));
	if (r->fail)
		return pdk_error_setx(err, EIO, "refused");
	return 0;
}

static int rec_close(void *data, struct pdk_error **err)
{
	struct rec *r = data;

	(void)err;
	r->closes++;
	return 0;
}

static void rec_free(void *data)
{
	((struct rec *)data)->freed++;
}

static const struct pdk_events_sink rec_sink = {
	.name = "recorder",
	.emit = rec_emit,
	.close = rec_close,
	.free = rec_free,
};

Test(events, every_sink_gets_every_event_and_failures_are_named)
{
	struct rec a = {0}, b = {.fail = 1};
	struct pdk_error *err = NULL;
	struct pdk_events *ev = pdk_events_new("id", "t");

	pdk_events_add_sink(ev, &rec_sink, &b); /* fails first */
	pdk_events_add_sink(ev, &rec_sink, &a);
	cr_assert_lt(pdk_events_emit(ev, "k.one", 0, NULL, &err), 0);
	cr_assert_not_null(err);
	cr_assert_str_eq(err->msg, "recorder: refused");
	pdk_error_free(&err);
	cr_assert_eq(a.events, 1, "the second sink still got the event");
	cr_assert_str_eq(a.last_kind, "k.one");
	b.fail = 0;
	cr_assert_eq(pdk_events_emit(ev, "k.two", 0, NULL, &err), 0);
	cr_assert_eq(pdk_events_close(ev, &err), 0);
	cr_assert_eq(pdk_events_close(ev, &err), 0);
	cr_assert_eq(a.closes, 1, "close runs once");
	cr_assert_lt(pdk_events_emit(ev, "k.late", 0, NULL, &err), 0, "no event after close");
	cr_assert_eq(a.events, 2);
	pdk_error_free(&err);
	pdk_events_free(ev);
	cr_assert_eq(a.freed + b.freed, 2);
}

/* The same text as gmtime_r() + strftime() at every day boundary, leap day and century tried. */
Test(events, ts_is_rfc3339_utc_like_gmtime)
{
	static const uint64_t secs[] = {
		0,          59,         86399,      86400,      951782399,  951782400,  951868800,
		1709164800, 1709251199, 1735689599, 1735689600, 4107542400, 4102444799, 1700000000,
	};
	char got[40], want[48];
	struct tm tm;

	for (size_t i = 0; i < sizeof(secs) / sizeof(secs[0]); i++) {
		time_t t = (time_t)secs[i];

		cr_assert_not_null(gmtime_r(&t, &tm));
		(void)strftime(want, sizeof(want), "%Y-%m-%dT%H:%M:%S.123456Z", &tm);
		pdk_events_format_ts(secs[i] * 1000000000ULL + 123456789ULL, got, sizeof(got));
		cr_assert_str_eq(got, want, "at %" PRIu64 " s", secs[i]);
	}
	for (uint64_t d = 0; d < 200000; d += 37) {
		time_t t = (time_t)(d * 86400 + 43210);

		cr_assert_not_null(gmtime_r(&t, &tm));
		(void)strftime(want, sizeof(want), "%Y-%m-%dT%H:%M:%S.000000Z", &tm);
		pdk_events_format_ts((uint64_t)t * 1000000000ULL, got, sizeof(got));
		cr_assert_str_eq(got, want, "day %" PRIu64, d);
	}
	pdk_events_format_ts(0, got, 8);
	cr_assert_str_eq(got, "", "a buffer too small gets an empty string");
}
