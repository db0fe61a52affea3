/*
 * otlp.h - OpenTelemetry export of the event stream (OTLP/HTTP, JSON encoding).
 *
 * Three layers (docs/internals/otlp.md):
 *   - pure encoders: a JSON array of normalized events (events.h) becomes an
 *     ExportLogsServiceRequest or ExportTraceServiceRequest body in the
 *     protobuf JSON mapping (camelCase, 64-bit integers as strings, ids in
 *     hex, enums as integers, AnyValue attributes);
 *   - configuration from the standard OTEL_* variables and `--otlp URL`;
 *   - a sink for the events hub that hands each event to `paddock-otlp`, a
 *     helper process holding the exporter proper (bounded queue, batching
 *     thread, libcurl, retry): paddock itself is a static binary and
 *     libcurl cannot be linked statically, and a helper also keeps an
 *     unreachable or hanging collector, and libcurl's memory, away from the
 *     supervisor. The exporter itself is src/exporter/otlp-export.h.
 *
 * Nothing here blocks a sandbox: the sink never waits for the helper while
 * the sandbox runs, and its close waits at most the configured deadline.
 */
#ifndef PDK_OTLP_H
#define PDK_OTLP_H

#include "common.h"
#include "base.h"
#include "events.h"

/* OTLP severity numbers (logs data model) and span kinds / status codes (enums as integers). */
enum {
	PDK_OTLP_SEV_INFO = 9,
	PDK_OTLP_SEV_WARN = 13,
	PDK_OTLP_SPAN_INTERNAL = 1,
	PDK_OTLP_SPAN_CLIENT = 3,
	PDK_OTLP_STATUS_UNSET = 0,
	PDK_OTLP_STATUS_ERROR = 2,
};

/* Defaults (docs/otlp.md). */
#define PDK_OTLP_DEFAULT_TIMEOUT_MS  5000
#define PDK_OTLP_DEFAULT_DEADLINE_MS 2000
#define PDK_OTLP_DEFAULT_QUEUE_MAX   2048
#define PDK_OTLP_DEFAULT_BATCH_MAX   512
#define PDK_OTLP_DEFAULT_DELAY_MS    1000
#define PDK_OTLP_URL_MAX             2048
#define PDK_OTLP_HEADERS_MAX         16384
/* The largest event the sink forwards; larger ones are dropped (and counted). */
#define PDK_OTLP_EVENT_MAX (1U << 20)

struct pdk_otlp_config {
	char *endpoint;       /* base URL without trailing '/', e.g. "http://127.0.0.1:4318" */
	char **headers;       /* "Name: value" lines, values decoded; NEVER printed */
	char *service_name;   /* service.name; NULL = "paddock" */
	uint64_t timeout_ms;  /* one request's total timeout (connect: at most 1 s of it) */
	uint64_t deadline_ms; /* close: how long to flush before giving up */
	uint64_t queue_max;   /* events waiting for export; more are dropped and counted */
	uint64_t batch_max;   /* events per request */
	uint64_t delay_ms;    /* a batch leaves at batch_max events or after delay_ms */
	char *const *envp;    /* the helper's environment (borrowed; NULL: an empty one) */
};

/* Fill `cfg` with the defaults above and no endpoint. */
void pdk_otlp_config_init(struct pdk_otlp_config *cfg);
/* Free what `cfg` owns (not cfg itself). */
void pdk_otlp_config_release(struct pdk_otlp_config *cfg);

/*
 * Check `url` (http:// or https://, a host, no user:password@, no query or
 * fragment, no space or control byte, at most PDK_OTLP_URL_MAX bytes) and
 * set cfg->endpoint to it without trailing '/'. -EINVAL + *err otherwise.
 */
PDK_MUST_CHECK int pdk_otlp_config_set_endpoint(struct pdk_otlp_config *cfg, const char *url,
						struct pdk_error **err);

/*
 * Parse OTEL_EXPORTER_OTLP_HEADERS syntax, "k=v,k2=v2" (spaces around keys
 * and values trimmed, values percent-decoded), appending "k: v" to
 * cfg->headers. Keys must be HTTP tokens; decoded values must not hold CR,
 * LF or NUL. Errors name the key, never the value.
 */
PDK_MUST_CHECK int pdk_otlp_config_parse_headers(struct pdk_otlp_config *cfg, const char *s,
						 struct pdk_error **err);

/*
 * The configuration from the environment `envp` (a front end's; borrowed,
 * and handed to the helper as its own): OTEL_EXPORTER_OTLP_ENDPOINT
 * (overridden by `endpoint`, the --otlp option, when not NULL),
 * OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT (milliseconds),
 * OTEL_SERVICE_NAME, OTEL_SDK_DISABLED=true, and paddock's own
 * PADDOCK_OTLP_DEADLINE (a duration: 500ms, 2s). Returns 1 with an endpoint
 * set, 0 when export is not configured, or negative + *err on an invalid
 * setting (the message names the variable, never a header value).
 */
PDK_MUST_CHECK int pdk_otlp_config_from_env(struct pdk_otlp_config *cfg, char *const *envp,
					    const char *endpoint, struct pdk_error **err);

/*
 * The request bodies. `events` is a JSON array of events as events.h
 * stamps them (borrowed); `service_name` may be NULL ("paddock"). Events
 * are grouped into one resource per (sandbox, session, workflow). Strings
 * that are not UTF-8 are carried with U+FFFD in place of invalid bytes;
 * nothing in an event can add or change a field of the request.
 *
 * encode_logs returns an ExportLogsServiceRequest (one LogRecord per
 * event), or NULL when `events` is empty.
 */
json_t *pdk_otlp_encode_logs(const json_t *events, const char *service_name);

/*
 * encode_traces returns an ExportTraceServiceRequest, or NULL when the
 * events close no span. Spans: the sandbox (sandbox.create ..
 * sandbox.destroy) is the root; each process.exec .. process.exit (same
 * pid) is its child; a failed exec is a zero-length child; net.connect and
 * tool.call are children spanning their `duration_ms`. `pending` (may be
 * NULL) is a JSON array carried between calls: starts still open are
 * appended to it, and starts it holds are matched with this call's ends,
 * so spans may straddle batches. Without it, unmatched starts are dropped.
 */
json_t *pdk_otlp_encode_traces(const json_t *events, const char *service_name, json_t *pending);

/* The 32-hex-digit traceId of a sandbox: its UUID's 16 bytes, else a hash of the id. */
void pdk_otlp_trace_id(const char *sandbox, char out[static 33]);
/* A 16-hex-digit spanId derived from (sandbox, role, n); never all zeros. */
void pdk_otlp_span_id(const char *sandbox, const char *role, int64_t n, char out[static 17]);

/* What to do with the answer to an export request. */
enum pdk_otlp_verdict {
	PDK_OTLP_OK,    /* 2xx */
	PDK_OTLP_RETRY, /* connection error, timeout, 429, 502, 503, 504 */
	PDK_OTLP_FAIL,  /* any other status: the batch is given up */
};
/* `transport_failed`: no HTTP answer at all (connect refused, timeout, reset). */
enum pdk_otlp_verdict pdk_otlp_classify(bool transport_failed, long http_status);

/*
 * A Retry-After value: delta-seconds or an HTTP-date (relative to
 * `now_real_ns`). Returns milliseconds to wait (0 for a past date), or -1
 * when `value` is neither.
 */
int64_t pdk_otlp_retry_after_ms(const char *value, uint64_t now_real_ns);

/* Exponential backoff before retry `attempt` (0-based): 100 ms doubling, capped at 2 s. */
uint64_t pdk_otlp_backoff_ms(unsigned attempt);

/*
 * Add the OTLP sink to `ev`: start the helper `helper` (a front end takes
 * it from PADDOCK_OTLP; NULL: where pdk_paths_helper() finds paddock-otlp)
 * and hand it `cfg` (copied; headers go over a socket, never argv or the environment). Each event
 * is written to the helper without blocking; when the helper's socket is full the event is dropped
 * and counted. The sink's close flushes within cfg->deadline_ms and fails with a message saying how
 * many events were not exported (dropped, or not delivered) and why. Returns 0 or negative + *err
 * when the helper cannot be started (nothing added).
 */
PDK_MUST_CHECK int pdk_otlp_add_sink(struct pdk_events *ev, const struct pdk_otlp_config *cfg,
				     const char *helper, struct pdk_error **err);

/*
 * A JSON copy of `cfg` for the helper (with header values: caller must not
 * log it), and back. from_json returns 0 or negative + *err.
 */
json_t *pdk_otlp_config_to_json(const struct pdk_otlp_config *cfg);
PDK_MUST_CHECK int pdk_otlp_config_from_json(struct pdk_otlp_config *cfg, const json_t *j,
					     struct pdk_error **err);

/* A deep copy of `v` in which every string is valid UTF-8 (invalid bytes become U+FFFD). */
json_t *pdk_otlp_sanitize(const json_t *v);

#endif
