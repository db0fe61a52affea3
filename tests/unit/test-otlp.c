#include "common.h"
#include "otlp.h"
#include "otlp-export.h"
#include "util.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SB "0190c0de-1234-7abc-8def-0123456789ab"

static json_t *ev(const char *kind, const char *ts, int seq, json_t *attrs)
{
	json_t *e = json_object();

	pdk_json_set(e, "ts", json_string(ts));
	pdk_json_set(e, "seq", json_integer(seq));
	pdk_json_set(e, "sandbox", json_string(SB));
	pdk_json_set(e, "session", json_string("sess-1"));
	pdk_json_set(e, "workflow", json_null());
	pdk_json_set(e, "actor", json_string("t"));
	pdk_json_set(e, "kind", json_string(kind));
	pdk_json_set(e, "attrs", attrs ? attrs : json_object());
	return e;
}

/* sandbox.create, process.exec, limit.exceeded, fs.change, net.connect, tool.call, process.exit,
 * sandbox.destroy */
static json_t *run_events(void)
{
	json_t *a = json_array();

	json_array_append_new(a, ev("sandbox.create", "2026-11-22T10:00:00.000001Z", 0,
				    json_pack("{s:s, s:i}", "profile", "default", "uid", 0)));
	json_array_append_new(a, ev("process.exec", "2026-11-22T10:00:00.100000Z", 1,
				    json_pack("{s:i, s:[sss], s:s}", "pid", 2, "argv", "/bin/sh",
					      "-c", "exit 3", "cwd", "/work")));
	json_array_append_new(
		a, ev("limit.exceeded", "2026-11-22T10:00:00.200000Z", 2,
		      json_pack("{s:s, s:I}", "limit", "memory", "value", (json_int_t)1 << 40)));
	json_array_append_new(a, ev("fs.change", "2026-11-22T10:00:00.300000Z", 3,
				    json_pack("{s:s, s:s, s:i}", "path", "/work/a.txt", "kind",
					      "added", "size", 12)));
	json_array_append_new(
		a, ev("net.connect", "2026-11-22T10:00:00.400000Z", 4,
		      json_pack("{s:s, s:i, s:s, s:s, s:f}", "host", "example.com", "port", 443,
				"peer", "93.184.216.34", "decision", "deny", "duration_ms", 50.0)));
	json_array_append_new(a, ev("tool.call", "2026-11-22T10:00:00.500000Z", 5,
				    json_pack("{s:s, s:s, s:I}", "tool", "read_file", "call_id",
					      "c-1", "duration_ns", (json_int_t)20000000)));
	json_array_append_new(a, ev("process.exit", "2026-11-22T10:00:01.000000Z", 6,
				    json_pack("{s:i, s:i}", "pid", 2, "exit_code", 3)));
	json_array_append_new(a, ev("sandbox.destroy", "2026-11-22T10:00:01.500000Z", 7, NULL));
	return a;
}

/* The value of attribute `key` in an OTLP attribute list, or NULL. */
static json_t *attr(const json_t *list, const char *key)
{
	json_t *x;
	size_t i;

	for (i = 0; i < json_array_size(list) && (x = json_array_get(list, i)); i++) {
		if (strcmp(json_string_value(json_object_get(x, "key")), key) == 0)
			return json_object_get(x, "value");
	}
	return NULL;
}

static const char *sattr(const json_t *list, const char *key)
{
	return json_string_value(json_object_get(attr(list, key), "stringValue"));
}

static const char *iattr(const json_t *list, const char *key)
{
	return json_string_value(json_object_get(attr(list, key), "intValue"));
}

static bool is_hex(const char *s, size_t n)
{
	if (s == NULL || strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static json_t *records_of(json_t *req)
{
	json_t *rl = json_array_get(json_object_get(req, "resourceLogs"), 0);

	return json_object_get(json_array_get(json_object_get(rl, "scopeLogs"), 0), "logRecords");
}

static json_t *spans_of(json_t *req)
{
	json_t *rs = json_array_get(json_object_get(req, "resourceSpans"), 0);

	return json_object_get(json_array_get(json_object_get(rs, "scopeSpans"), 0), "spans");
}

static json_t *span_named(json_t *spans, const char *name)
{
	json_t *s;
	size_t i;

	for (i = 0; i < json_array_size(spans) && (s = json_array_get(spans, i)); i++) {
		if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0)
			return s;
	}
	return NULL;
}

Test(otlp, logs_resource_and_record_fields)
{
	_cleanup_json_ json_t *events = run_events();
	_cleanup_json_ json_t *req = pdk_otlp_encode_logs(events, NULL);
	json_t *rl = json_array_get(json_object_get(req, "resourceLogs"), 0);
	json_t *rattrs = json_object_get(json_object_get(rl, "resource"), "attributes");
	json_t *recs = records_of(req);
	json_t *r0 = json_array_get(recs, 0);

	cr_assert_not_null(req);
	cr_assert_eq(json_array_size(json_object_get(req, "resourceLogs")), 1);
	cr_assert_str_eq(sattr(rattrs, "service.name"), "paddock");
	cr_assert_str_eq(sattr(rattrs, "service.version"), PDK_VERSION);
	cr_assert_str_eq(sattr(rattrs, "paddock.sandbox.id"), SB);
	cr_assert_str_eq(sattr(rattrs, "paddock.session"), "sess-1");
	cr_assert_null(attr(rattrs, "paddock.workflow"), "a null label is left out");
	cr_assert_eq(json_array_size(recs), 8, "one record per event");
	/* 64-bit integers are strings, to the nanosecond. */
	cr_assert_str_eq(json_string_value(json_object_get(r0, "timeUnixNano")),
			 "1795341600000001000");
	cr_assert_str_eq(json_string_value(json_object_get(r0, "observedTimeUnixNano")),
			 "1795341600000001000");
	cr_assert_str_eq(json_string_value(json_object_get(r0, "eventName")), "sandbox.create");
	cr_assert_str_eq(
		json_string_value(json_object_get(json_object_get(r0, "body"), "stringValue")),
		"sandbox.create");
	cr_assert_eq(json_integer_value(json_object_get(r0, "severityNumber")), 9);
	cr_assert_str_eq(json_string_value(json_object_get(r0, "severityText")), "INFO");
	cr_assert_str_eq(json_string_value(json_object_get(r0, "traceId")),
			 "0190c0de12347abc8def0123456789ab");
	cr_assert(is_hex(json_string_value(json_object_get(r0, "spanId")), 16));
	cr_assert_str_eq(sattr(json_object_get(r0, "attributes"), "paddock.profile"), "default");
	cr_assert_str_eq(iattr(json_object_get(r0, "attributes"), "paddock.seq"), "0");
}

Test(otlp, logs_attribute_mapping_per_kind)
{
	_cleanup_json_ json_t *events = run_events();
	_cleanup_json_ json_t *req = pdk_otlp_encode_logs(events, "svc");
	json_t *recs = records_of(req);
	json_t *exec = json_object_get(json_array_get(recs, 1), "attributes");
	json_t *limit = json_array_get(recs, 2);
	json_t *fs = json_object_get(json_array_get(recs, 3), "attributes");
	json_t *net = json_array_get(recs, 4);
	json_t *tool = json_object_get(json_array_get(recs, 5), "attributes");
	json_t *exit = json_object_get(json_array_get(recs, 6), "attributes");
	json_t *args = json_object_get(
		json_object_get(attr(exec, "process.command_args"), "arrayValue"), "values");
	json_t *rattrs = json_object_get(
		json_object_get(json_array_get(json_object_get(req, "resourceLogs"), 0),
				"resource"),
		"attributes");

	cr_assert_str_eq(sattr(rattrs, "service.name"), "svc");
	cr_assert_str_eq(iattr(exec, "process.pid"), "2");
	cr_assert_eq(json_array_size(args), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(args, 2), "stringValue")),
			 "exit 3");
	cr_assert_str_eq(sattr(exec, "process.working_directory"), "/work");
	cr_assert_str_eq(sattr(exec, "process.executable.path"), "/bin/sh");
	cr_assert_str_eq(sattr(exec, "process.executable.name"), "sh");
	cr_assert_null(attr(exec, "paddock.pid"), "mapped keys are not repeated");
	cr_assert_str_eq(iattr(exit, "process.exit.code"), "3");
	/* limit.exceeded and a denied decision are WARN. */
	cr_assert_eq(json_integer_value(json_object_get(limit, "severityNumber")), 13);
	cr_assert_str_eq(json_string_value(json_object_get(limit, "severityText")), "WARN");
	cr_assert_str_eq(sattr(json_object_get(limit, "attributes"), "paddock.limit"), "memory");
	cr_assert_str_eq(iattr(json_object_get(limit, "attributes"), "paddock.value"),
			 "1099511627776");
	cr_assert_eq(json_integer_value(json_object_get(net, "severityNumber")), 13);
	cr_assert_str_eq(sattr(json_object_get(net, "attributes"), "server.address"),
			 "example.com");
	cr_assert_str_eq(iattr(json_object_get(net, "attributes"), "server.port"), "443");
	cr_assert_str_eq(sattr(json_object_get(net, "attributes"), "network.peer.address"),
			 "93.184.216.34");
	cr_assert_eq(json_real_value(json_object_get(
			     attr(json_object_get(net, "attributes"), "paddock.duration_ms"),
			     "doubleValue")),
		     50.0);
	cr_assert_str_eq(sattr(fs, "file.path"), "/work/a.txt");
	cr_assert_str_eq(iattr(fs, "file.size"), "12");
	cr_assert_str_eq(sattr(fs, "paddock.kind"), "added");
	cr_assert_str_eq(sattr(tool, "gen_ai.tool.name"), "read_file");
	cr_assert_str_eq(sattr(tool, "gen_ai.tool.call.id"), "c-1");
	cr_assert_str_eq(sattr(tool, "gen_ai.operation.name"), "execute_tool");
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(recs, 5), "severityNumber")),
		     9);
}

Test(otlp, hostile_strings_stay_strings)
{
	static const char evil[] = "x\"}]}],\"resourceLogs\":[{\"injected\":1\n\x01";
	_cleanup_json_ json_t *events = json_array();
	_cleanup_json_ json_t *req = NULL;
	_cleanup_json_ json_t *back = NULL;
	_cleanup_free_ char *text = NULL;
	json_t *a = json_object();
	json_t *recs;
	json_t *attrs;

	pdk_json_set(a, "argv", json_pack("[s]", evil));
	/* Bytes that are not UTF-8 (argv may hold anything) stay a string too. */
	pdk_json_set(a, "cwd",
		     json_stringn_nocheck("/w\xff\xfe"
					  "d",
					  5));
	pdk_json_set(a, evil, json_string("key too"));
	json_array_append_new(events, ev("process.exec", "2026-11-22T10:00:00Z", 1, a));
	req = pdk_otlp_encode_logs(events, NULL);
	text = json_dumps(req, JSON_COMPACT);
	cr_assert_not_null(text, "the request serialises");
	back = json_loads(text, 0, NULL);
	cr_assert_not_null(back);
	cr_assert_eq(json_object_size(back), 1, "no field was added: %s", text);
	recs = records_of(back);
	cr_assert_eq(json_array_size(recs), 1);
	attrs = json_object_get(json_array_get(recs, 0), "attributes");
	cr_assert_str_eq(
		json_string_value(json_object_get(
			json_array_get(
				json_object_get(json_object_get(attr(attrs, "process.command_args"),
								"arrayValue"),
						"values"),
				0),
			"stringValue")),
		evil);
	cr_assert_str_eq(sattr(attrs, "process.working_directory"), "/w\xef\xbf\xbd\xef\xbf\xbd"
								    "d");
	{
		_cleanup_free_ char *k = pdk_xasprintf("paddock.%s", evil);

		cr_assert_str_eq(sattr(attrs, k), "key too");
	}
}

Test(otlp, traces_sandbox_root_and_children)
{
	_cleanup_json_ json_t *events = run_events();
	_cleanup_json_ json_t *req = pdk_otlp_encode_traces(events, NULL, NULL);
	json_t *spans = spans_of(req);
	json_t *root = span_named(spans, "sandbox");
	json_t *proc = span_named(spans, "exec sh");
	json_t *net = span_named(spans, "connect example.com");
	json_t *tool = span_named(spans, "execute_tool read_file");
	const char *root_id;

	cr_assert_not_null(req);
	cr_assert_eq(json_array_size(spans), 4, "sandbox, process, connect, tool");
	cr_assert_not_null(root);
	cr_assert_not_null(proc);
	cr_assert_not_null(net);
	cr_assert_not_null(tool);
	root_id = json_string_value(json_object_get(root, "spanId"));
	cr_assert(is_hex(root_id, 16));
	cr_assert_null(json_object_get(root, "parentSpanId"));
	cr_assert_str_eq(json_string_value(json_object_get(root, "traceId")),
			 "0190c0de12347abc8def0123456789ab");
	cr_assert_str_eq(json_string_value(json_object_get(root, "startTimeUnixNano")),
			 "1795341600000001000");
	cr_assert_str_eq(json_string_value(json_object_get(root, "endTimeUnixNano")),
			 "1795341601500000000");
	cr_assert_eq(json_integer_value(json_object_get(root, "kind")), 1);
	/* The process: a child of the sandbox, exec .. exit, with its exit code. */
	cr_assert_str_eq(json_string_value(json_object_get(proc, "parentSpanId")), root_id);
	cr_assert_str_neq(json_string_value(json_object_get(proc, "spanId")), root_id);
	cr_assert_str_eq(json_string_value(json_object_get(proc, "startTimeUnixNano")),
			 "1795341600100000000");
	cr_assert_str_eq(json_string_value(json_object_get(proc, "endTimeUnixNano")),
			 "1795341601000000000");
	cr_assert_str_eq(iattr(json_object_get(proc, "attributes"), "process.exit.code"), "3");
	cr_assert_str_eq(iattr(json_object_get(proc, "attributes"), "process.pid"), "2");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(proc, "status"), "code")),
		     2);
	cr_assert_str_eq(
		json_string_value(json_object_get(json_object_get(proc, "status"), "message")),
		"exit code 3");
	/* net.connect: a client span lasting its duration; denied is an error. */
	cr_assert_eq(json_integer_value(json_object_get(net, "kind")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(net, "startTimeUnixNano")),
			 "1795341600350000000");
	cr_assert_str_eq(json_string_value(json_object_get(net, "endTimeUnixNano")),
			 "1795341600400000000");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(net, "status"), "code")),
		     2);
	cr_assert_str_eq(json_string_value(json_object_get(net, "parentSpanId")), root_id);
	/* tool.call: the GenAI execute_tool span. */
	cr_assert_str_eq(sattr(json_object_get(tool, "attributes"), "gen_ai.operation.name"),
			 "execute_tool");
	cr_assert_str_eq(sattr(json_object_get(tool, "attributes"), "gen_ai.tool.name"),
			 "read_file");
	cr_assert_str_eq(json_string_value(json_object_get(tool, "startTimeUnixNano")),
			 "1795341600480000000");
}

Test(otlp, traces_straddle_batches_with_pending)
{
	_cleanup_json_ json_t *events = run_events();
	_cleanup_json_ json_t *first = json_array();
	_cleanup_json_ json_t *second = json_array();
	_cleanup_json_ json_t *pending = json_array();
	_cleanup_json_ json_t *r1 = NULL;
	_cleanup_json_ json_t *r2 = NULL;
	_cleanup_json_ json_t *alone = NULL;

	json_array_append(first, json_array_get(events, 0));
	json_array_append(first, json_array_get(events, 1));
	json_array_append(second, json_array_get(events, 6));
	json_array_append(second, json_array_get(events, 7));
	r1 = pdk_otlp_encode_traces(first, NULL, pending);
	cr_assert_null(r1, "only starts: no span yet");
	cr_assert_eq(json_array_size(pending), 2);
	r2 = pdk_otlp_encode_traces(second, NULL, pending);
	cr_assert_eq(json_array_size(spans_of(r2)), 2);
	cr_assert_eq(json_array_size(pending), 0);
	cr_assert_not_null(span_named(spans_of(r2), "exec sh"));
	/* Without the carried starts, the ends alone make no span. */
	alone = pdk_otlp_encode_traces(second, NULL, NULL);
	cr_assert_null(alone);
}

Test(otlp, failed_exec_is_an_error_span)
{
	_cleanup_json_ json_t *events = json_array();
	_cleanup_json_ json_t *req = NULL;
	json_t *s;

	json_array_append_new(events, ev("process.exec", "2026-11-22T10:00:00Z", 1,
					 json_pack("{s:i, s:[s], s:s}", "pid", 0, "argv", "nope",
						   "error", "No such file or directory")));
	req = pdk_otlp_encode_traces(events, NULL, NULL);
	s = json_array_get(spans_of(req), 0);
	cr_assert_not_null(s);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(s, "status"), "code")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(s, "startTimeUnixNano")),
			 json_string_value(json_object_get(s, "endTimeUnixNano")));
}

Test(otlp, ids_are_deterministic_hex)
{
	char t1[33], t2[33], s1[17], s2[17], s3[17];

	pdk_otlp_trace_id("not-a-uuid", t1);
	pdk_otlp_trace_id("not-a-uuid", t2);
	cr_assert(is_hex(t1, 32));
	cr_assert_str_eq(t1, t2);
	cr_assert_str_neq(t1, "00000000000000000000000000000000");
	pdk_otlp_trace_id("00000000-0000-0000-0000-000000000000", t2);
	cr_assert_str_neq(t2, "00000000000000000000000000000000", "an all-zero id is invalid");
	pdk_otlp_trace_id("0190C0DE-1234-7ABC-8DEF-0123456789AB", t2);
	cr_assert_str_eq(t2, "0190c0de12347abc8def0123456789ab");
	pdk_otlp_span_id(SB, "process", 1, s1);
	pdk_otlp_span_id(SB, "process", 1, s2);
	pdk_otlp_span_id(SB, "process", 2, s3);
	cr_assert(is_hex(s1, 16));
	cr_assert_str_eq(s1, s2);
	cr_assert_str_neq(s1, s3);
}

Test(otlp, retry_classification)
{
	cr_assert_eq(pdk_otlp_classify(true, 0), PDK_OTLP_RETRY, "connection error");
	cr_assert_eq(pdk_otlp_classify(false, 200), PDK_OTLP_OK);
	cr_assert_eq(pdk_otlp_classify(false, 204), PDK_OTLP_OK);
	cr_assert_eq(pdk_otlp_classify(false, 429), PDK_OTLP_RETRY);
	cr_assert_eq(pdk_otlp_classify(false, 502), PDK_OTLP_RETRY);
	cr_assert_eq(pdk_otlp_classify(false, 503), PDK_OTLP_RETRY);
	cr_assert_eq(pdk_otlp_classify(false, 504), PDK_OTLP_RETRY);
	cr_assert_eq(pdk_otlp_classify(false, 400), PDK_OTLP_FAIL);
	cr_assert_eq(pdk_otlp_classify(false, 401), PDK_OTLP_FAIL);
	cr_assert_eq(pdk_otlp_classify(false, 404), PDK_OTLP_FAIL);
	cr_assert_eq(pdk_otlp_classify(false, 500), PDK_OTLP_FAIL);
	cr_assert_eq(pdk_otlp_classify(false, 301), PDK_OTLP_FAIL);
	cr_assert_eq(pdk_otlp_backoff_ms(0), 100);
	cr_assert_eq(pdk_otlp_backoff_ms(1), 200);
	cr_assert_eq(pdk_otlp_backoff_ms(4), 1600);
	cr_assert_eq(pdk_otlp_backoff_ms(9), 2000);
}

Test(otlp, retry_after_values)
{
	/* 2015-10-21T07:28:00Z */
	uint64_t now = 1445412480ULL * 1000000000ULL;

	cr_assert_eq(pdk_otlp_retry_after_ms("5", now), 5000);
	cr_assert_eq(pdk_otlp_retry_after_ms(" 0", now), 0);
	cr_assert_eq(pdk_otlp_retry_after_ms("Wed, 21 Oct 2015 07:28:03 GMT", now), 3000);
	cr_assert_eq(pdk_otlp_retry_after_ms("Wed, 21 Oct 2015 07:27:00 GMT", now), 0);
	cr_assert_eq(pdk_otlp_retry_after_ms("soon", now), -1);
	cr_assert_eq(pdk_otlp_retry_after_ms("-3", now), -1);
	cr_assert_eq(pdk_otlp_retry_after_ms("", now), -1);
	cr_assert_eq(pdk_otlp_retry_after_ms(NULL, now), -1);
}

Test(otlp, endpoint_validation)
{
	struct pdk_otlp_config c;
	static const char *const bad[] = {
		"ftp://h/",      "127.0.0.1:4318",     "http://",     "http:///x",
		"http://u:p@h/", "http://h/?q=1",      "http://h/#f", "http://h /",
		"http://h\n/",   "file:///etc/passwd", "HTTP://h",
	};

	pdk_otlp_config_init(&c);
	cr_assert_eq(pdk_otlp_config_set_endpoint(&c, "http://127.0.0.1:4318/", NULL), 0);
	cr_assert_str_eq(c.endpoint, "http://127.0.0.1:4318");
	cr_assert_eq(pdk_otlp_config_set_endpoint(&c, "https://otel.example/base//", NULL), 0);
	cr_assert_str_eq(c.endpoint, "https://otel.example/base");
	for (size_t i = 0; i < PDK_ARRAY_SIZE(bad); i++) {
		struct pdk_error *err = NULL;

		cr_assert_lt(pdk_otlp_config_set_endpoint(&c, bad[i], &err), 0, "%s", bad[i]);
		cr_assert_not_null(err);
		pdk_error_free(&err);
	}
	cr_assert_str_eq(c.endpoint, "https://otel.example/base", "a refused URL changes nothing");
	pdk_otlp_config_release(&c);
}

Test(otlp, headers_are_decoded_and_never_echoed)
{
	struct pdk_otlp_config c;
	struct pdk_error *err = NULL;

	pdk_otlp_config_init(&c);
	cr_assert_eq(pdk_otlp_config_parse_headers(
			     &c, "api-key=s3cr%65t , X-Scope = team%20a,,x-b64=YQ==", NULL),
		     0);
	cr_assert_eq(pdk_strv_len(c.headers), 3);
	cr_assert_str_eq(c.headers[0], "api-key: s3cret");
	cr_assert_str_eq(c.headers[1], "X-Scope: team a");
	cr_assert_str_eq(c.headers[2], "x-b64: YQ==");
	/* Header injection through a decoded CR LF is refused; the error names the key only. */
	cr_assert_lt(pdk_otlp_config_parse_headers(&c, "auth=TOPSECRET%0d%0aHost: evil", &err), 0);
	cr_assert_not_null(err);
	cr_assert_not_null(strstr(err->msg, "'auth'"), "%s", err->msg);
	cr_assert_null(strstr(err->msg, "TOPSECRET"), "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_lt(pdk_otlp_config_parse_headers(&c, "bad key=v", &err), 0);
	pdk_error_free(&err);
	cr_assert_lt(pdk_otlp_config_parse_headers(&c, "k=TOPSECRET%zz", &err), 0);
	cr_assert_null(strstr(err->msg, "TOPSECRET"), "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_lt(pdk_otlp_config_parse_headers(&c, "novalue", &err), 0);
	pdk_error_free(&err);
	pdk_otlp_config_release(&c);
}

Test(otlp, config_from_env)
{
	struct pdk_otlp_config c;
	struct pdk_error *err = NULL;
	char *none[] = {NULL};
	char *set[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318/",
		       "OTEL_EXPORTER_OTLP_HEADERS=a=b",
		       "OTEL_EXPORTER_OTLP_TIMEOUT=750",
		       "OTEL_SERVICE_NAME=agents",
		       "PADDOCK_OTLP_DEADLINE=500ms",
		       NULL};
	char *disabled[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318/",
			    "OTEL_SDK_DISABLED=true", NULL};
	char *bad[] = {"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318/",
		       "OTEL_EXPORTER_OTLP_TIMEOUT=soon", NULL};

	pdk_otlp_config_init(&c);
	cr_assert_eq(pdk_otlp_config_from_env(&c, none, NULL, NULL), 0, "nothing configured");
	cr_assert_eq(pdk_otlp_config_from_env(&c, set, NULL, NULL), 1);
	cr_assert_str_eq(c.endpoint, "http://collector:4318");
	cr_assert_str_eq(c.headers[0], "a: b");
	cr_assert_eq(c.timeout_ms, 750);
	cr_assert_eq(c.deadline_ms, 500);
	cr_assert_str_eq(c.service_name, "agents");
	cr_assert_eq(c.envp, set, "the helper gets the environment the config came from");
	pdk_otlp_config_release(&c);
	cr_assert_lt(pdk_otlp_config_from_env(&c, set, "", &err), 0, "an empty --otlp is an error");
	pdk_error_free(&err);
	/* --otlp wins over the variable. */
	pdk_otlp_config_init(&c);
	cr_assert_eq(pdk_otlp_config_from_env(&c, set, "https://other", NULL), 1);
	cr_assert_str_eq(c.endpoint, "https://other");
	pdk_otlp_config_release(&c);
	pdk_otlp_config_init(&c);
	cr_assert_eq(pdk_otlp_config_from_env(&c, disabled, NULL, NULL), 0, "OTEL_SDK_DISABLED");
	cr_assert_lt(pdk_otlp_config_from_env(&c, bad, NULL, &err), 0);
	cr_assert_not_null(strstr(err->msg, "OTEL_EXPORTER_OTLP_TIMEOUT"), "%s", err->msg);
	pdk_error_free(&err);
	pdk_otlp_config_release(&c);
}

Test(otlp, config_round_trip_for_the_helper)
{
	struct pdk_otlp_config a, b;
	_cleanup_json_ json_t *j = NULL;

	pdk_otlp_config_init(&a);
	pdk_otlp_config_init(&b);
	cr_assert_eq(pdk_otlp_config_set_endpoint(&a, "http://h:1", NULL), 0);
	cr_assert_eq(pdk_otlp_config_parse_headers(&a, "k=v", NULL), 0);
	a.deadline_ms = 1234;
	j = pdk_otlp_config_to_json(&a);
	cr_assert_eq(pdk_otlp_config_from_json(&b, j, NULL), 0);
	cr_assert_str_eq(b.endpoint, "http://h:1");
	cr_assert_str_eq(b.headers[0], "k: v");
	cr_assert_eq(b.deadline_ms, 1234);
	cr_assert_eq(b.queue_max, PDK_OTLP_DEFAULT_QUEUE_MAX);
	pdk_otlp_config_release(&a);
	pdk_otlp_config_release(&b);
}

/* ---- the exporter against a loopback HTTP server ---- */

struct server {
	int fd;
	int port;
	const int *statuses; /* answer i gets statuses[i]; the last repeats */
	size_t n_statuses;
	int requests;
	char paths[16][32];
	pthread_t thread;
};

static void serve_one(struct server *s, int c)
{
	char buf[1 << 16];
	size_t len = 0;
	char *hdr_end = NULL;
	long clen = 0;
	char reply[256];
	int status;
	ssize_t n;

	while (len < sizeof(buf) - 1 &&
	       (hdr_end == NULL || (long)(len - (size_t)(hdr_end + 4 - buf)) < clen)) {
		n = read(c, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			return;
		len += (size_t)n;
		buf[len] = '\0';
		if (hdr_end == NULL && (hdr_end = strstr(buf, "\r\n\r\n")) != NULL) {
			char *cl = strcasestr(buf, "content-length:");

			clen = cl ? strtol(cl + 15, NULL, 10) : 0;
		}
	}
	if (s->requests < 16)
		(void)sscanf(buf, "POST %31s", s->paths[s->requests]);
	status = s->statuses[(size_t)s->requests < s->n_statuses ? (size_t)s->requests
								 : s->n_statuses - 1];
	s->requests++;
	n = snprintf(reply, sizeof(reply),
		     "HTTP/1.1 %d X\r\nContent-Length: 2\r\nRetry-After: 0\r\nConnection: "
		     "close\r\n\r\n{}",
		     status);
	cr_assert_eq(write(c, reply, (size_t)n), n);
}

static void *serve(void *arg)
{
	struct server *s = arg;
	int c;

	while ((c = accept(s->fd, NULL, NULL)) >= 0) {
		serve_one(s, c);
		close(c);
	}
	return NULL;
}

static void server_start(struct server *s, const int *statuses, size_t n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	s->statuses = statuses;
	s->n_statuses = n;
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(s->fd, 0);
	cr_assert_eq(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(s->fd, 8), 0);
	cr_assert_eq(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
	s->port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&s->thread, NULL, serve, s), 0);
}

static struct pdk_otlp *exporter_for(int port, uint64_t queue_max, uint64_t delay_ms)
{
	struct pdk_otlp_config c;
	_cleanup_free_ char *url = pdk_xasprintf("http://127.0.0.1:%d", port);
	struct pdk_error *err = NULL;
	struct pdk_otlp *o;

	pdk_otlp_config_init(&c);
	cr_assert_eq(pdk_otlp_config_set_endpoint(&c, url, NULL), 0);
	c.queue_max = queue_max;
	c.batch_max = 100;
	c.delay_ms = delay_ms;
	o = pdk_otlp_new(&c, &err);
	cr_assert_not_null(o, "%s", err ? err->msg : "");
	pdk_otlp_config_release(&c);
	return o;
}

/* A port nothing listens on: bound, never listened to. */
static int dead_port(int *fd)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	*fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(bind(*fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(*fd, (struct sockaddr *)&a, &al), 0);
	return ntohs(a.sin_port);
}

Test(otlp_export, queue_is_bounded_and_drops_are_counted)
{
	int fd;
	struct pdk_otlp *o = exporter_for(dead_port(&fd), 4, 60000);
	_cleanup_json_ json_t *events = run_events();
	struct pdk_otlp_stats st;
	int accepted = 0;

	/* The batch is not due for a minute: the queue only fills. */
	for (int i = 0; i < 10; i++)
		accepted += pdk_otlp_enqueue(o, json_array_get(events, (size_t)i % 8));
	cr_assert_eq(accepted, 4);
	pdk_otlp_get_stats(o, &st);
	cr_assert_eq(st.received, 10);
	cr_assert_eq(st.dropped, 6);
	cr_assert_eq(st.unexported, 4);
	/* Closing sends them; nobody listens, so they fail or run out of time. */
	(void)pdk_otlp_close(o, 400, &st);
	cr_assert_eq(st.exported, 0);
	cr_assert_eq(st.failed + st.unexported, 4);
	cr_assert_eq(st.dropped, 6);
	cr_assert_neq(st.last_error[0], '\0', "the reason is kept");
	pdk_otlp_free(o);
	close(fd);
}

/* An exporter to a collector answering `statuses`, with a run's events queued. */
static struct pdk_otlp *export_run(struct server *s, const int *statuses, size_t n)
{
	_cleanup_json_ json_t *events = run_events();
	struct pdk_otlp *o;

	server_start(s, statuses, n);
	o = exporter_for(s->port, 64, 10);
	for (size_t i = 0; i < json_array_size(events); i++)
		cr_assert(pdk_otlp_enqueue(o, json_array_get(events, i)));
	return o;
}

Test(otlp_export, retries_503_then_exports)
{
	static const int statuses[] = {503, 200};
	struct server s = {0};
	struct pdk_otlp *o = export_run(&s, statuses, 2);
	struct pdk_otlp_stats st;

	cr_assert(pdk_otlp_close(o, 3000, &st), "flushed before the deadline");
	cr_assert_eq(st.exported, 8);
	cr_assert_eq(st.failed, 0);
	cr_assert_eq(s.requests, 3, "logs 503, logs again, traces");
	cr_assert_str_eq(s.paths[0], "/v1/logs");
	cr_assert_str_eq(s.paths[1], "/v1/logs");
	cr_assert_str_eq(s.paths[2], "/v1/traces");
	pdk_otlp_free(o);
}

Test(otlp_export, no_retry_on_400)
{
	static const int statuses[] = {400};
	struct server s = {0};
	struct pdk_otlp *o = export_run(&s, statuses, 1);
	struct pdk_otlp_stats st;

	cr_assert(pdk_otlp_close(o, 3000, &st));
	cr_assert_eq(st.exported, 0);
	cr_assert_eq(st.failed, 8);
	cr_assert_eq(s.requests, 2, "one logs and one traces request, neither retried");
	cr_assert_str_eq(st.last_error, "HTTP 400");
	pdk_otlp_free(o);
}

/* ---- the supervisor's sink, with a helper that never reads ---- */

Test(otlp_sink, full_socket_drops_and_close_keeps_its_deadline)
{
	char dir[] = "/tmp/pdk-otlp-XXXXXX";
	_cleanup_free_ char *helper = NULL;
	struct pdk_otlp_config c;
	struct pdk_error *err = NULL;
	struct pdk_events *ev;
	_cleanup_free_ char *big = pdk_xmalloc(4097);
	unsigned long long lost = 0, total = 0, dropped = 0;
	uint64_t t0;
	int rc;

	cr_assert_not_null(mkdtemp(dir));
	helper = pdk_xasprintf("%s/stuck-helper", dir);
	/* Keeps the socket open as stdin and stdout, and never reads it nor reports. */
	cr_assert_eq(pdk_write_file_at(AT_FDCWD, helper, "#!/bin/sh\nexec sleep 30\n", true, &err),
		     0);
	cr_assert_eq(chmod(helper, 0755), 0);
	memset(big, 'a', 4096);
	big[4096] = '\0';
	pdk_otlp_config_init(&c);
	cr_assert_eq(pdk_otlp_config_set_endpoint(&c, "http://127.0.0.1:9", NULL), 0);
	c.deadline_ms = 300;
	ev = pdk_events_new(SB, "t");
	cr_assert_eq(pdk_otlp_add_sink(ev, &c, helper, &err), 0, "%s", err ? err->msg : "");
	for (int i = 0; i < 2000; i++)
		cr_assert_eq(pdk_events_emit(ev, "process.exec", 0,
					     json_pack("{s:i, s:[s]}", "pid", i, "argv", big),
					     &err),
			     0, "a full export queue is no error of the event stream");
	t0 = pdk_now_mono_ns();
	rc = pdk_events_close(ev, &err);
	cr_assert_lt(rc, 0, "close reports what was not exported");
	/* A bound on the close, not a speed measurement: without the deadline it waits 30 s. */
	cr_assert_lt(pdk_now_mono_ns() - t0, 5000000000ULL);
	cr_assert_eq(sscanf(strstr(err->msg, "exporter: ") + 10,
			    "%llu of %llu event(s) not exported", &lost, &total),
		     2, "%s", err->msg);
	cr_assert_eq(total, 2000, "%s", err->msg);
	cr_assert_eq(lost, 2000, "nothing was exported: %s", err->msg);
	cr_assert_eq(sscanf(strstr(err->msg, "deadline: ") + 10, "%llu dropped", &dropped), 1);
	cr_assert_gt(dropped, 0, "the socket filled up: %s", err->msg);
	cr_assert_lt(dropped, 2000, "some were handed over: %s", err->msg);
	cr_assert_not_null(strstr(err->msg, "no report from the exporter"), "%s", err->msg);
	pdk_error_free(&err);
	pdk_events_free(ev);
	pdk_otlp_config_release(&c);
	unlink(helper);
	rmdir(dir);
}

Test(otlp_sink, missing_helper_is_an_error_and_adds_nothing)
{
	struct pdk_otlp_config c;
	struct pdk_error *err = NULL;
	struct pdk_events *ev = pdk_events_new(SB, "t");

	pdk_otlp_config_init(&c);
	cr_assert_eq(pdk_otlp_config_set_endpoint(&c, "http://127.0.0.1:9", NULL), 0);
	cr_assert_lt(pdk_otlp_add_sink(ev, &c, "/nonexistent/paddock-otlp", &err), 0);
	cr_assert_not_null(strstr(err->msg, "/nonexistent/paddock-otlp"), "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_eq(pdk_events_emit(ev, "process.exec", 0, NULL, &err), 0);
	cr_assert_eq(pdk_events_close(ev, &err), 0, "no sink was added");
	pdk_events_free(ev);
	pdk_otlp_config_release(&c);
}

Test(otlp, open_processes_end_at_reexec_and_at_sandbox_end)
{
	_cleanup_json_ json_t *events = json_array();
	_cleanup_json_ json_t *pending = json_array();
	_cleanup_json_ json_t *req = NULL;
	_cleanup_json_ json_t *flood = json_array();
	_cleanup_json_ json_t *none = NULL;
	json_t *spans, *sh, *py, *sb;

	json_array_append_new(events, ev("sandbox.create", "2026-11-22T10:00:00Z", 0, NULL));
	json_array_append_new(events, ev("process.exec", "2026-11-22T10:00:01Z", 1,
					 json_pack("{s:i, s:[s]}", "pid", 7, "argv", "sh")));
	/* The same pid execs another program: the first span ends there. */
	json_array_append_new(events, ev("process.exec", "2026-11-22T10:00:02Z", 2,
					 json_pack("{s:i, s:[s]}", "pid", 7, "argv", "python3")));
	/* No process.exit for it: the sandbox's end ends it. */
	json_array_append_new(events, ev("sandbox.destroy", "2026-11-22T10:00:03Z", 3, NULL));
	req = pdk_otlp_encode_traces(events, NULL, pending);
	spans = spans_of(req);
	cr_assert_eq(json_array_size(spans), 3);
	sh = span_named(spans, "exec sh");
	py = span_named(spans, "exec python3");
	sb = span_named(spans, "sandbox");
	cr_assert(sh && py && sb);
	cr_assert_str_eq(json_string_value(json_object_get(sh, "endTimeUnixNano")),
			 "1795341602000000000");
	cr_assert_str_eq(sattr(json_object_get(sh, "attributes"), "paddock.ended_by"),
			 "process.exec");
	cr_assert_str_eq(json_string_value(json_object_get(py, "endTimeUnixNano")),
			 "1795341603000000000");
	cr_assert_str_eq(sattr(json_object_get(py, "attributes"), "paddock.ended_by"),
			 "sandbox.destroy");
	cr_assert_str_neq(json_string_value(json_object_get(sh, "spanId")),
			  json_string_value(json_object_get(py, "spanId")));
	cr_assert_eq(json_array_size(pending), 0, "nothing is left open");
	/* Starts that never end are bounded. */
	for (int i = 0; i < 5000; i++)
		json_array_append_new(flood, ev("process.exec", "2026-11-22T10:00:00Z", i,
						json_pack("{s:i}", "pid", 100 + i)));
	none = pdk_otlp_encode_traces(flood, NULL, pending);
	cr_assert_null(none);
	cr_assert_eq(json_array_size(pending), 4096);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(pending, 0), "seq")), 904,
		     "the oldest were dropped");
}

Test(otlp, log_records_point_at_their_spans)
{
	_cleanup_json_ json_t *events = run_events();
	_cleanup_json_ json_t *logs = pdk_otlp_encode_logs(events, NULL);
	_cleanup_json_ json_t *traces = pdk_otlp_encode_traces(events, NULL, NULL);
	json_t *recs = records_of(logs);
	json_t *spans = spans_of(traces);
#define SPAN_OF_REC(i) json_string_value(json_object_get(json_array_get(recs, i), "spanId"))
#define ID_OF(name)    json_string_value(json_object_get(span_named(spans, name), "spanId"))

	cr_assert_str_eq(SPAN_OF_REC(0), ID_OF("sandbox"), "sandbox.create: the root");
	cr_assert_str_eq(SPAN_OF_REC(1), ID_OF("exec sh"), "process.exec: its process");
	cr_assert_str_eq(SPAN_OF_REC(2), ID_OF("sandbox"), "limit.exceeded: the root");
	cr_assert_str_eq(SPAN_OF_REC(4), ID_OF("connect example.com"));
	cr_assert_str_eq(SPAN_OF_REC(5), ID_OF("execute_tool read_file"));
	cr_assert_str_eq(SPAN_OF_REC(6), ID_OF("exec sh"), "process.exit: its exec's process");
	cr_assert_str_eq(SPAN_OF_REC(7), ID_OF("sandbox"));
#undef SPAN_OF_REC
#undef ID_OF
}
