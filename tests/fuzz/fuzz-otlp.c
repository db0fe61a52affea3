/*
 * fuzz-otlp.c - libFuzzer target for the OTLP encoders and the
 * OTEL_EXPORTER_OTLP_HEADERS parser, on bytes the sandboxed code chooses
 * (argv, paths, tool names end up in event attributes).
 *
 * The input is used three ways: as a JSON array of events (when it parses
 * as one), as the bytes of every string of a fixed event (argv, cwd, a key),
 * and as a headers value. Properties: the requests always serialise (every
 * string valid UTF-8), have exactly their one top-level field, one log
 * record per event, and a span never ends before it starts; every parsed
 * header is "name: value" without CR or LF.
 */
#include "common.h"
#include "otlp.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request(json_t *req, const char *field, size_t want_records)
{
	char *text;
	json_t *rl;
	size_t i, n = 0;

	if (req == NULL)
		return;
	text = json_dumps(req, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (text == NULL || json_object_size(req) != 1 || json_object_get(req, field) == NULL)
		abort();
	free(text);
	for (i = 0; i < json_array_size(json_object_get(req, field)) &&
		    (rl = json_array_get(json_object_get(req, field), i));
	     i++) {
		json_t *scopes = json_object_get(
			rl, strcmp(field, "resourceLogs") == 0 ? "scopeLogs" : "scopeSpans");
		json_t *sc;
		size_t j;

		for (j = 0; j < json_array_size(scopes) && (sc = json_array_get(scopes, j)); j++) {
			json_t *recs = json_object_get(sc, "logRecords");
			json_t *spans = json_object_get(sc, "spans");
			json_t *s;
			size_t k;

			n += json_array_size(recs);
			for (k = 0; k < json_array_size(spans) && (s = json_array_get(spans, k));
			     k++) {
				if (strtoull(json_string_value(
						     json_object_get(s, "endTimeUnixNano")),
					     NULL, 10) <
				    strtoull(json_string_value(
						     json_object_get(s, "startTimeUnixNano")),
					     NULL, 10))
					abort();
			}
		}
	}
	if (want_records != (size_t)-1 && n != want_records)
		abort();
}

static void encode_both(json_t *events)
{
	json_t *pending = json_array();
	json_t *logs = pdk_otlp_encode_logs(events, NULL);
	json_t *traces = pdk_otlp_encode_traces(events, "svc", pending);

	check_request(logs, "resourceLogs", json_array_size(events));
	check_request(traces, "resourceSpans", (size_t)-1);
	json_decref(logs);
	json_decref(traces);
	json_decref(pending);
}

static void as_strings(const char *s, size_t n)
{
	json_t *events = json_array();
	json_t *e = json_object();
	json_t *a = json_object();
	json_t *bytes = json_stringn_nocheck(s, n);
	char key[64];
	json_t *k;

	json_object_set_new(a, "argv", json_pack("[O, s]", bytes, "x"));
	json_object_set(a, "cwd", bytes);
	json_object_set(a, "tool", bytes);
	json_object_set_new(a, "pid", json_integer((json_int_t)n));
	(void)snprintf(key, sizeof(key), "%.*s", (int)(n < 40 ? n : 40), s);
	k = json_string(key); /* NULL unless UTF-8, which jansson wants of keys */
	if (k != NULL && key[0] != '\0')
		json_object_set(a, key, bytes);
	json_decref(k);
	json_object_set_new(e, "kind", json_string("process.exec"));
	json_object_set_new(e, "ts", json_string("2026-11-22T10:00:00.000001Z"));
	json_object_set(e, "sandbox", bytes);
	json_object_set_new(e, "attrs", a);
	json_array_append_new(events, e);
	e = json_deep_copy(e);
	json_object_set_new(e, "kind", json_string("tool.call"));
	json_array_append_new(events, e);
	encode_both(events);
	json_decref(bytes);
	json_decref(events);
}

static void as_headers(const char *s)
{
	struct pdk_otlp_config c;

	pdk_otlp_config_init(&c);
	if (pdk_otlp_config_parse_headers(&c, s, NULL) == 0)
		for (size_t i = 0; c.headers && c.headers[i]; i++)
			if (strpbrk(c.headers[i], "\r\n") != NULL ||
			    strstr(c.headers[i], ": ") == NULL)
				abort();
	(void)!pdk_otlp_config_set_endpoint(&c, s, NULL);
	pdk_otlp_config_release(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	json_t *j;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	j = json_loadb(s, size, JSON_DECODE_ANY, NULL);
	if (json_is_array(j))
		encode_both(j);
	json_decref(j);
	as_strings(s, size);
	as_headers(s);
	free(s);
	return 0;
}
