/*
 * otlp.c - events to OTLP/HTTP JSON request bodies: pure functions. The
 * configuration is otlp-config.c; the sink that feeds the export helper is
 * otlp-sink.c.
 */
#include "common.h"
#include "base.h"
#include "otlp.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ANY_DEPTH_MAX 16   /* nested attribute values deeper than this become a string */
#define PENDING_MAX   4096 /* span starts kept open across batches */

/* ---- strings ---- */

/* A string value: as it is when it is UTF-8, else with U+FFFD for each invalid byte. */
static json_t *utf8_string(const char *s, size_t n)
{
	json_t *v = json_stringn(s, n);
	_cleanup_free_ char *out = NULL;
	size_t len;

	if (v != NULL)
		return v;
	out = pdk_utf8_clean(s, n, false, &len, NULL);
	return json_stringn(out, len);
}

json_t *pdk_otlp_sanitize(const json_t *v)
{
	json_t *r;
	const char *k;
	json_t *x;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_STRING:
		return utf8_string(json_string_value(v), json_string_length(v));
	case JSON_ARRAY:
		r = json_array();
		for (i = 0; i < json_array_size(v) && (x = json_array_get(v, i)); i++) {
			json_array_append_new(r, pdk_otlp_sanitize(x));
		}
		return r;
	case JSON_OBJECT:
		r = json_object();
		/* Keys come from paddock's own code; jansson checks them on insertion. */
		for (void *it_ = json_object_iter((json_t *)v);
		     it_ && (k = json_object_iter_key(it_)) && (x = json_object_iter_value(it_));
		     it_ = json_object_iter_next((json_t *)v, it_)) {
			pdk_json_set(r, k, pdk_otlp_sanitize(x));
		}
		return r;
	case JSON_INTEGER:
	case JSON_REAL:
	case JSON_TRUE:
	case JSON_FALSE:
	case JSON_NULL:
	default:
		return json_deep_copy(v);
	}
}

static json_t *u64_string(uint64_t v)
{
	char buf[24];

	(void)snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return json_string(buf);
}

static const char *str_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---- ids ---- */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t id_hash(uint64_t seed, const char *sandbox, const char *role, int64_t n)
{
	uint64_t h = fnv1a(seed, sandbox, strlen(sandbox) + 1);

	h = fnv1a(h, role, strlen(role) + 1);
	h = fnv1a(h, &n, sizeof(n));
	/* A final mix so that close inputs give unrelated ids. */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h ? h : 1;
}

void pdk_otlp_trace_id(const char *sandbox, char out[static 33])
{
	size_t o = 0;
	bool zero = true;

	/* A UUID: 8-4-4-4-12 hex digits; its 16 bytes are the trace id (W3C: not all zero). */
	if (strlen(sandbox) == 36) {
		for (size_t i = 0; i < 36 && o <= 32; i++) {
			bool dash = i == 8 || i == 13 || i == 18 || i == 23;

			if (dash != (sandbox[i] == '-') || (!dash && pdk_hexval(sandbox[i]) < 0)) {
				o = 33;
				break;
			}
			if (!dash) {
				out[o++] = "0123456789abcdef"[pdk_hexval(sandbox[i])];
				zero &= sandbox[i] == '0';
			}
		}
		if (o == 32 && !zero) {
			out[32] = '\0';
			return;
		}
	}
	(void)snprintf(out, 33, "%016" PRIx64 "%016" PRIx64,
		       id_hash(0xcbf29ce484222325ULL, sandbox, "trace", 0),
		       id_hash(0x84222325cbf29ce4ULL, sandbox, "trace", 1));
}

void pdk_otlp_span_id(const char *sandbox, const char *role, int64_t n, char out[static 17])
{
	(void)snprintf(out, 17, "%016" PRIx64, id_hash(0xcbf29ce484222325ULL, sandbox, role, n));
}

/* ---- time ---- */

/* "2026-11-22T10:40:04.123456Z" -> ns since the epoch; 0 when it is not that shape. */
static uint64_t ts_ns(const char *ts)
{
	struct tm tm = {0};
	const char *p;
	uint64_t frac = 0;
	int digits = 0;
	time_t secs;

	if (ts == NULL || (p = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
		return 0;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (digits++ < 9)
				frac = frac * 10 + (uint64_t)(*p - '0');
	while (digits++ < 9)
		frac *= 10;
	if (*p != 'Z' || p[1] != '\0')
		return 0;
	secs = timegm(&tm);
	if (secs < 0)
		return 0;
	return (uint64_t)secs * 1000000000ULL + frac;
}

static double num_of(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : -1;
}

/* ---- attributes ---- */

/* Event attribute -> semantic-convention name (docs/otlp.md); others become paddock.<key>. */
static const struct {
	const char *kind; /* NULL: any kind */
	const char *key;
	const char *name;
} attr_map[] = {
	{NULL, "pid", "process.pid"},
	{NULL, "ppid", "process.parent_pid"},
	{NULL, "parent_pid", "process.parent_pid"},
	{NULL, "argv", "process.command_args"},
	{NULL, "executable", "process.executable.path"},
	{NULL, "exe", "process.executable.path"},
	{NULL, "cwd", "process.working_directory"},
	{NULL, "exit_code", "process.exit.code"},
	{"fs.change", "path", "file.path"},
	{"fs.change", "size", "file.size"},
	{NULL, "host", "server.address"},
	{NULL, "port", "server.port"},
	{NULL, "peer", "network.peer.address"},
	{NULL, "peer_address", "network.peer.address"},
	{NULL, "peer_port", "network.peer.port"},
	{NULL, "transport", "network.transport"},
	{NULL, "tool", "gen_ai.tool.name"},
	{NULL, "tool_name", "gen_ai.tool.name"},
	{NULL, "call_id", "gen_ai.tool.call.id"},
	{NULL, "tool_call_id", "gen_ai.tool.call.id"},
	{"tool.call", "name", "gen_ai.tool.name"},
	{"tool.call", "description", "gen_ai.tool.description"},
	{"tool.call", "mcp_method", "mcp.method.name"},
	{"tool.call", "session", "mcp.session.id"},
};

static json_t *any_value(const json_t *v, int depth);

static json_t *any_array(const json_t *v, int depth)
{
	json_t *vals = json_array();
	json_t *wrap = json_object();
	json_t *x;
	size_t i;

	for (i = 0; i < json_array_size(v) && (x = json_array_get(v, i)); i++) {
		json_array_append_new(vals, any_value(x, depth + 1));
	}
	pdk_json_set(wrap, "values", vals);
	return wrap;
}

static json_t *kv(const char *key, json_t *value)
{
	json_t *o = json_object();

	pdk_json_set(o, "key", utf8_string(key, strlen(key)));
	pdk_json_set(o, "value", value);
	return o;
}

static json_t *any_kvlist(const json_t *v, int depth)
{
	json_t *vals = json_array();
	json_t *wrap = json_object();
	const char *k;
	json_t *x;

	for (void *it_ = json_object_iter((json_t *)v);
	     it_ && (k = json_object_iter_key(it_)) && (x = json_object_iter_value(it_));
	     it_ = json_object_iter_next((json_t *)v, it_)) {
		json_array_append_new(vals, kv(k, any_value(x, depth + 1)));
	}
	pdk_json_set(wrap, "values", vals);
	return wrap;
}

/* An AnyValue; null is the empty AnyValue. */
static json_t *any_value(const json_t *v, int depth)
{
	json_t *a = json_object();

	if (depth > ANY_DEPTH_MAX) {
		pdk_json_set(a, "stringValue", json_string("(nested too deep)"));
		return a;
	}
	switch (json_typeof(v)) {
	case JSON_STRING:
		pdk_json_set(a, "stringValue",
			     utf8_string(json_string_value(v), json_string_length(v)));
		break;
	case JSON_INTEGER:
		pdk_json_set(a, "intValue",
			     json_sprintf("%" JSON_INTEGER_FORMAT, json_integer_value(v)));
		break;
	case JSON_REAL:
		pdk_json_set(a, "doubleValue", json_real(json_real_value(v)));
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		pdk_json_set(a, "boolValue", json_boolean(json_is_true(v)));
		break;
	case JSON_ARRAY:
		pdk_json_set(a, "arrayValue", any_array(v, depth));
		break;
	case JSON_OBJECT:
		pdk_json_set(a, "kvlistValue", any_kvlist(v, depth));
		break;
	case JSON_NULL:
	default:
		break;
	}
	return a;
}

static json_t *str_value(const char *s)
{
	json_t *a = json_object();

	pdk_json_set(a, "stringValue", utf8_string(s, strlen(s)));
	return a;
}

static void add_attr(json_t *attrs, const char *key, json_t *value)
{
	json_array_append_new(attrs, kv(key, value));
}

static const char *mapped_name(const char *kind, const char *key)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(attr_map); i++)
		if (strcmp(attr_map[i].key, key) == 0 &&
		    (attr_map[i].kind == NULL || (kind && strcmp(attr_map[i].kind, kind) == 0)))
			return attr_map[i].name;
	return NULL;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}

/* What the semantic conventions derive from an event's attributes beyond the key mapping. */
static void add_derived(json_t *out, const char *kind, const json_t *attrs)
{
	const char *argv0 = json_string_value(json_array_get(json_object_get(attrs, "argv"), 0));

	if (kind && strcmp(kind, "process.exec") == 0 && argv0 != NULL) {
		add_attr(out, "process.executable.name", str_value(base_name(argv0)));
		if (argv0[0] == '/' && json_object_get(attrs, "executable") == NULL)
			add_attr(out, "process.executable.path", str_value(argv0));
	}
	if (kind && strcmp(kind, "tool.call") == 0)
		add_attr(out, "gen_ai.operation.name", str_value("execute_tool"));
}

/* The event's attrs (but `skip`, may be NULL) as OTLP attributes. */
static void add_event_attrs(json_t *out, const char *kind, const json_t *attrs, const char *skip)
{
	const char *k;
	json_t *v;

	for (void *it_ = json_object_iter((json_t *)attrs);
	     it_ && (k = json_object_iter_key(it_)) && (v = json_object_iter_value(it_));
	     it_ = json_object_iter_next((json_t *)attrs, it_)) {
		const char *name = mapped_name(kind, k);
		_cleanup_free_ char *other = NULL;

		if (json_is_null(v) || (skip && strcmp(k, skip) == 0))
			continue;
		if (name == NULL)
			name = other = pdk_xasprintf("paddock.%s", k);
		add_attr(out, name, any_value(v, 0));
	}
	add_derived(out, kind, attrs);
}

static bool is_denied(const char *kind, const json_t *attrs)
{
	const char *d = str_of(attrs, "decision");

	if (kind && strcmp(kind, "limit.exceeded") == 0)
		return true;
	if (json_is_false(json_object_get(attrs, "allowed")))
		return true;
	return d && (strcmp(d, "deny") == 0 || strcmp(d, "denied") == 0 ||
		     strcmp(d, "block") == 0 || strcmp(d, "blocked") == 0);
}

/* ---- resources ---- */

static bool same_label(const json_t *a, const json_t *b)
{
	if (json_is_string(a) && json_is_string(b))
		return strcmp(json_string_value(a), json_string_value(b)) == 0;
	return !json_is_string(a) && !json_is_string(b);
}

static bool same_resource(const json_t *e, const json_t *f)
{
	return same_label(json_object_get(e, "sandbox"), json_object_get(f, "sandbox")) &&
	       same_label(json_object_get(e, "session"), json_object_get(f, "session")) &&
	       same_label(json_object_get(e, "workflow"), json_object_get(f, "workflow"));
}

static json_t *resource(const json_t *e, const char *service_name)
{
	json_t *r = json_object();
	json_t *attrs = json_array();
	const char *labels[][2] = {
		{"sandbox", "paddock.sandbox.id"},
		{"session", "paddock.session"},
		{"workflow", "paddock.workflow"},
	};

	add_attr(attrs, "service.name", str_value(service_name ? service_name : "paddock"));
	add_attr(attrs, "service.version", str_value(PDK_VERSION));
	for (size_t i = 0; i < PDK_ARRAY_SIZE(labels); i++)
		if (str_of(e, labels[i][0]) != NULL)
			add_attr(attrs, labels[i][1], str_value(str_of(e, labels[i][0])));
	pdk_json_set(r, "attributes", attrs);
	return r;
}

static json_t *scope(void)
{
	json_t *s = json_object();

	pdk_json_set(s, "name", json_string("paddock"));
	pdk_json_set(s, "version", json_string(PDK_VERSION));
	return s;
}

/*
 * Group items into resources: `items[i]` belongs to `events[i]`'s resource.
 * Returns [{"resource":..., "<scope_key>":[{"scope":..., "<list_key>":[...]}]}].
 */
static json_t *group(const json_t *events, json_t *items, const char *service_name,
		     const char *scope_key, const char *list_key)
{
	json_t *out = json_array();
	size_t n = json_array_size(items);
	bool *done = pdk_xcalloc(n ? n : 1, sizeof(*done));

	for (size_t i = 0; i < n; i++) {
		json_t *list, *rs, *sc, *scs;

		if (done[i])
			continue;
		list = json_array();
		for (size_t j = i; j < n; j++) {
			if (done[j] ||
			    !same_resource(json_array_get(events, i), json_array_get(events, j)))
				continue;
			done[j] = true;
			json_array_append(list, json_array_get(items, j));
		}
		sc = json_object();
		pdk_json_set(sc, "scope", scope());
		pdk_json_set(sc, list_key, list);
		scs = json_array();
		json_array_append_new(scs, sc);
		rs = json_object();
		pdk_json_set(rs, "resource", resource(json_array_get(events, i), service_name));
		pdk_json_set(rs, scope_key, scs);
		json_array_append_new(out, rs);
	}
	free(done);
	return out;
}

/* ---- logs ---- */

static bool kind_is(const json_t *e, const char *kind)
{
	const char *k = str_of(e, "kind");

	return k != NULL && strcmp(k, kind) == 0;
}

static int64_t int_of(const json_t *o, const char *key, int64_t dflt)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

/*
 * The span a record belongs to: its own for process.exec, net.connect and
 * tool.call; for process.exit, its exec's when that is earlier in the same
 * batch; else the sandbox's root span.
 */
static void log_span(const json_t *events, size_t idx, char span[static 17])
{
	const json_t *e = json_array_get(events, idx);
	const char *sandbox = str_of(e, "sandbox");
	int64_t pid = int_of(json_object_get(e, "attrs"), "pid", -1);

	if (kind_is(e, "process.exec")) {
		pdk_otlp_span_id(sandbox, "process", int_of(e, "seq", 0), span);
		return;
	}
	if (kind_is(e, "net.connect") || kind_is(e, "tool.call")) {
		pdk_otlp_span_id(sandbox, str_of(e, "kind"), int_of(e, "seq", 0), span);
		return;
	}
	for (size_t i = idx; kind_is(e, "process.exit") && i-- > 0;) {
		const json_t *x = json_array_get(events, i);
		const char *xs = str_of(x, "sandbox");

		if (kind_is(x, "process.exec") && xs != NULL && strcmp(xs, sandbox) == 0 &&
		    int_of(json_object_get(x, "attrs"), "pid", -2) == pid) {
			pdk_otlp_span_id(sandbox, "process", int_of(x, "seq", 0), span);
			return;
		}
	}
	pdk_otlp_span_id(sandbox, "sandbox", 0, span);
}

static json_t *log_record(const json_t *events, size_t idx)
{
	const json_t *e = json_array_get(events, idx);
	const char *kind = str_of(e, "kind");
	const char *sandbox = str_of(e, "sandbox");
	const json_t *attrs = json_object_get(e, "attrs");
	uint64_t t = ts_ns(str_of(e, "ts"));
	bool warn = is_denied(kind, attrs);
	json_t *r = json_object();
	json_t *a = json_array();
	char trace[33], span[17];

	pdk_json_set(r, "timeUnixNano", u64_string(t));
	pdk_json_set(r, "observedTimeUnixNano", u64_string(t));
	pdk_json_set(r, "severityNumber",
		     json_integer(warn ? PDK_OTLP_SEV_WARN : PDK_OTLP_SEV_INFO));
	pdk_json_set(r, "severityText", json_string(warn ? "WARN" : "INFO"));
	pdk_json_set(r, "eventName", utf8_string(kind ? kind : "", kind ? strlen(kind) : 0));
	pdk_json_set(r, "body", str_value(kind ? kind : ""));
	if (json_is_integer(json_object_get(e, "seq")))
		add_attr(a, "paddock.seq", any_value(json_object_get(e, "seq"), 0));
	if (str_of(e, "actor") != NULL)
		add_attr(a, "paddock.actor", str_value(str_of(e, "actor")));
	if (json_is_object(attrs))
		add_event_attrs(a, kind, attrs, NULL);
	pdk_json_set(r, "attributes", a);
	if (sandbox != NULL) {
		pdk_otlp_trace_id(sandbox, trace);
		log_span(events, idx, span);
		pdk_json_set(r, "traceId", json_string(trace));
		pdk_json_set(r, "spanId", json_string(span));
	}
	return r;
}

json_t *pdk_otlp_encode_logs(const json_t *events, const char *service_name)
{
	_cleanup_json_ json_t *records = json_array();
	json_t *req;
	json_t *e;
	size_t i;

	if (json_array_size(events) == 0)
		return NULL;
	for (i = 0; i < json_array_size(events) && (e = json_array_get(events, i)); i++) {
		json_array_append_new(records, log_record(events, i));
	}
	req = json_object();
	pdk_json_set(req, "resourceLogs",
		     group(events, records, service_name, "scopeLogs", "logRecords"));
	return req;
}

/* ---- spans ---- */

struct span_list {
	json_t *events; /* the event each span belongs to (for its resource) */
	json_t *spans;
};

static json_t *new_span(const json_t *e, const char *name, int kind, uint64_t start, uint64_t end)
{
	const char *sandbox = str_of(e, "sandbox");
	json_t *s = json_object();
	char trace[33];

	pdk_otlp_trace_id(sandbox, trace);
	pdk_json_set(s, "traceId", json_string(trace));
	pdk_json_set(s, "name", utf8_string(name, strlen(name)));
	pdk_json_set(s, "kind", json_integer(kind));
	pdk_json_set(s, "startTimeUnixNano", u64_string(start));
	pdk_json_set(s, "endTimeUnixNano", u64_string(end < start ? start : end));
	pdk_json_set(s, "attributes", json_array());
	return s;
}

static void set_ids(json_t *s, const json_t *e, const char *role, int64_t n, bool child)
{
	const char *sandbox = str_of(e, "sandbox");
	char id[17];

	pdk_otlp_span_id(sandbox, role, n, id);
	pdk_json_set(s, "spanId", json_string(id));
	if (child) {
		pdk_otlp_span_id(sandbox, "sandbox", 0, id);
		pdk_json_set(s, "parentSpanId", json_string(id));
	}
}

static void set_status(json_t *s, bool error, const char *message)
{
	json_t *st = json_object();

	pdk_json_set(st, "code",
		     json_integer(error ? PDK_OTLP_STATUS_ERROR : PDK_OTLP_STATUS_UNSET));
	if (error && message != NULL)
		pdk_json_set(st, "message", utf8_string(message, strlen(message)));
	pdk_json_set(s, "status", st);
}

static void push_span(struct span_list *l, const json_t *e, json_t *span)
{
	json_array_append(l->events, (json_t *)e);
	json_array_append_new(l->spans, span);
}

static void sandbox_span(struct span_list *l, const json_t *start, const json_t *end)
{
	json_t *s = new_span(start, "sandbox", PDK_OTLP_SPAN_INTERNAL, ts_ns(str_of(start, "ts")),
			     ts_ns(str_of(end, "ts")));

	set_ids(s, start, "sandbox", 0, false);
	add_attr(json_object_get(s, "attributes"), "paddock.sandbox.id",
		 str_value(str_of(start, "sandbox")));
	add_event_attrs(json_object_get(s, "attributes"), "sandbox.create",
			json_object_get(start, "attrs"), NULL);
	set_status(s, false, NULL);
	push_span(l, start, s);
}

/*
 * A process span from `exec` to `end`. `exit` (may be NULL) is its
 * process.exit; without one the span ends at `end`: the failed exec itself,
 * a new exec of the same pid, or the sandbox's end (the tree was killed).
 */
static void process_span(struct span_list *l, const json_t *exec, const json_t *exit,
			 const json_t *end)
{
	const json_t *xa = json_object_get(exec, "attrs");
	const json_t *ea = exit ? json_object_get(exit, "attrs") : NULL;
	const char *argv0 = json_string_value(json_array_get(json_object_get(xa, "argv"), 0));
	_cleanup_free_ char *name = pdk_xasprintf("exec %s", argv0 ? base_name(argv0) : "?");
	json_t *s = new_span(exec, name, PDK_OTLP_SPAN_INTERNAL, ts_ns(str_of(exec, "ts")),
			     ts_ns(str_of(end, "ts")));
	json_t *attrs = json_object_get(s, "attributes");
	int64_t code = int_of(ea, "exit_code", 0);
	const char *sig = str_of(ea, "signal");
	const char *error = str_of(xa, "error");
	_cleanup_free_ char *msg = NULL;

	set_ids(s, exec, "process", int_of(exec, "seq", 0), true);
	add_event_attrs(attrs, "process.exec", xa, NULL);
	if (ea != NULL)
		add_event_attrs(attrs, "process.exit", ea, "pid");
	else if (end != exec)
		add_attr(attrs, "paddock.ended_by", str_value(str_of(end, "kind")));
	if (error != NULL)
		msg = pdk_xasprintf("exec failed: %s", error);
	else if (sig != NULL)
		msg = pdk_xasprintf("killed by %s", sig);
	else if (code != 0)
		msg = pdk_xasprintf("exit code %" PRId64, code);
	set_status(s, msg != NULL, msg);
	push_span(l, exec, s);
}

/* net.connect and tool.call: a span ending at the event, lasting its duration_ms. */
static void timed_span(struct span_list *l, const json_t *e)
{
	const json_t *a = json_object_get(e, "attrs");
	bool tool = kind_is(e, "tool.call");
	uint64_t end = ts_ns(str_of(e, "ts"));
	double ms = num_of(a, "duration_ms") >= 0 ? num_of(a, "duration_ms")
						  : num_of(a, "duration_ns") / 1e6;
	uint64_t dur = ms > 0 && ms < 1e12 ? (uint64_t)(ms * 1e6) : 0;
	const char *tname = str_of(a, "tool") ? str_of(a, "tool") : str_of(a, "name");
	const char *host = str_of(a, "host");
	_cleanup_free_ char *name =
		tool ? pdk_xasprintf("execute_tool%s%s", tname ? " " : "", tname ? tname : "")
		     : pdk_xasprintf("connect%s%s", host ? " " : "", host ? host : "");
	json_t *s = new_span(e, name, tool ? PDK_OTLP_SPAN_INTERNAL : PDK_OTLP_SPAN_CLIENT,
			     dur < end ? end - dur : 0, end);
	bool denied = is_denied(str_of(e, "kind"), a);
	const char *error = str_of(a, "error");

	set_ids(s, e, str_of(e, "kind"), int_of(e, "seq", 0), true);
	add_event_attrs(json_object_get(s, "attributes"), str_of(e, "kind"), a, NULL);
	set_status(s, denied || error != NULL, denied ? "denied" : error);
	push_span(l, e, s);
}

/* The index in `pending` of the start that `end` closes, or -1. */
static ssize_t find_start(const json_t *pending, const json_t *end)
{
	bool proc = kind_is(end, "process.exit");
	const char *sandbox = str_of(end, "sandbox");
	int64_t pid = int_of(json_object_get(end, "attrs"), "pid", -1);

	for (size_t i = json_array_size(pending); i-- > 0;) {
		const json_t *s = json_array_get(pending, i);
		const char *ss = str_of(s, "sandbox");

		if (ss == NULL || sandbox == NULL || strcmp(ss, sandbox) != 0)
			continue;
		if (proc && kind_is(s, "process.exec") &&
		    int_of(json_object_get(s, "attrs"), "pid", -2) == pid)
			return (ssize_t)i;
		if (!proc && kind_is(s, "sandbox.create"))
			return (ssize_t)i;
	}
	return -1;
}

/* End the open process spans of e's sandbox (of `pid`, or all when pid < 0) at e. */
static void end_processes(struct span_list *l, json_t *open, const json_t *e, int64_t pid)
{
	const char *sandbox = str_of(e, "sandbox");

	for (size_t i = json_array_size(open); i-- > 0;) {
		const json_t *s = json_array_get(open, i);

		if (!kind_is(s, "process.exec") || strcmp(str_of(s, "sandbox"), sandbox) != 0 ||
		    (pid >= 0 && int_of(json_object_get(s, "attrs"), "pid", -2) != pid))
			continue;
		process_span(l, s, NULL, e);
		json_array_remove(open, i);
	}
}

static void span_event(struct span_list *l, json_t *open, const json_t *e)
{
	const json_t *a = json_object_get(e, "attrs");
	bool exec = kind_is(e, "process.exec");
	ssize_t i;

	if (str_of(e, "sandbox") == NULL)
		return;
	if (exec && str_of(a, "error") != NULL) {
		process_span(l, e, NULL, e);
	} else if (exec || kind_is(e, "sandbox.create")) {
		/* A pid that execs again starts a new span: the previous program is gone. */
		if (exec)
			end_processes(l, open, e, int_of(a, "pid", -1));
		json_array_append(open, (json_t *)e);
		/* Starts whose end never comes must not pile up: the oldest go first. */
		while (json_array_size(open) > PENDING_MAX)
			json_array_remove(open, 0);
	} else if (kind_is(e, "net.connect") || kind_is(e, "tool.call")) {
		timed_span(l, e);
	} else if (kind_is(e, "process.exit") || kind_is(e, "sandbox.destroy")) {
		if (kind_is(e, "sandbox.destroy"))
			end_processes(l, open, e, -1);
		i = find_start(open, e);
		if (i < 0)
			return;
		if (kind_is(e, "process.exit"))
			process_span(l, json_array_get(open, (size_t)i), e, e);
		else
			sandbox_span(l, json_array_get(open, (size_t)i), e);
		json_array_remove(open, (size_t)i);
	}
}

json_t *pdk_otlp_encode_traces(const json_t *events, const char *service_name, json_t *pending)
{
	_cleanup_json_ json_t *open = pending ? json_incref(pending) : json_array();
	_cleanup_json_ json_t *evs = json_array();
	_cleanup_json_ json_t *spans = json_array();
	struct span_list l = {.events = evs, .spans = spans};
	json_t *req;
	json_t *e;
	size_t i;

	for (i = 0; i < json_array_size(events) && (e = json_array_get(events, i)); i++) {
		span_event(&l, open, e);
	}
	if (json_array_size(spans) == 0)
		return NULL;
	req = json_object();
	pdk_json_set(req, "resourceSpans", group(evs, spans, service_name, "scopeSpans", "spans"));
	return req;
}
