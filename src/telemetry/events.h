/*
 * events.h - the normalized event stream (DESIGN.md "Events").
 *
 * Every event is one JSON object:
 *   {"actor":..., "attrs":{...}, "kind":"process.exit", "sandbox":"<id>",
 *    "seq":N, "session":null, "ts":"2026-11-22T10:40:04.123456Z", "workflow":null}
 * A struct pdk_events is the hub of one stream: it stamps each event and
 * hands it, in order, to every sink added to it: a JSON-lines file
 * (--events), the audit store, an OTLP exporter. Sinks are called with the
 * hub's lock held, so emit() may be called from several threads (the
 * supervisor loop, the egress proxy) and each sink sees one ordered stream.
 */
#ifndef PDK_EVENTS_H
#define PDK_EVENTS_H

#include "common.h"
#include "base.h"

struct pdk_events;

/*
 * A sink. `emit` gets each stamped event (borrowed; it must copy or
 * json_incref what it keeps) and may fail: the failure is returned by
 * pdk_events_emit() after every other sink has had the event. `close`
 * (may be NULL) flushes what the sink still queues; pdk_events_close()
 * calls it once. `free` (may be NULL) releases `data`.
 */
struct pdk_events_sink {
	const char *name;
	int (*emit)(void *data, const json_t *event, struct pdk_error **err);
	int (*close)(void *data, struct pdk_error **err);
	void (*free)(void *data);
};

/* A hub with no sink yet. `sandbox_id` and `actor` are copied. */
struct pdk_events *pdk_events_new(const char *sandbox_id, const char *actor);

/*
 * Add a JSON-lines sink appending to `path` (created 0600 if missing). Each
 * line is written with one write() on an O_APPEND fd, so concurrent
 * writers never interleave.
 */
PDK_MUST_CHECK int pdk_events_add_file(struct pdk_events *ev, const char *path,
				       struct pdk_error **err);

/* Add a sink; the hub owns `data` from now on (ops->free releases it). `ops` is borrowed. */
void pdk_events_add_sink(struct pdk_events *ev, const struct pdk_events_sink *ops, void *data);

/* pdk_events_new() plus pdk_events_add_file(). Returns NULL + *err on failure. */
struct pdk_events *pdk_events_open(const char *path, const char *sandbox_id, const char *actor,
				   struct pdk_error **err);

/*
 * Register a secret `value` (named `name`) that no sink may see: every
 * event's attribute strings are redacted (redact.h) before the sinks get
 * them, this value becoming "[REDACTED:name]". Secret-looking NAME=VALUE
 * words and well-known token shapes are redacted without registration.
 * Returns false when the value is too short to be searched for
 * (PDK_REDACT_MIN_SECRET). Thread-safe.
 */
bool pdk_events_add_secret(struct pdk_events *ev, const char *name, const char *value);

/* Labels carried by every event (may be NULL). Copied. */
void pdk_events_set_labels(struct pdk_events *ev, const char *session, const char *workflow);

/*
 * Emit one event of `kind` with `attrs` (ownership taken; may be NULL).
 * `ts_ns` is CLOCK_REALTIME nanoseconds, 0 = now. Thread-safe. NULL `ev` is
 * a no-op returning 0. On a sink's failure, returns its error (the other
 * sinks still got the event).
 */
PDK_MUST_CHECK int pdk_events_emit(struct pdk_events *ev, const char *kind, uint64_t ts_ns,
				   json_t *attrs, struct pdk_error **err);

/*
 * Flush and close every sink (their `close`), in the order they were added.
 * Returns the first failure; NULL-safe. Events emitted afterwards fail.
 */
PDK_MUST_CHECK int pdk_events_close(struct pdk_events *ev, struct pdk_error **err);

/* Format CLOCK_REALTIME ns as RFC 3339 UTC with microseconds into buf (>= 32 bytes). */
void pdk_events_format_ts(uint64_t ts_ns, char *buf, size_t len);

/* The same text as a JSON string (new reference); JSON null for 0, no time. */
json_t *pdk_events_ts_json(uint64_t ts_ns);

/* Free the hub and its sinks (without close: call pdk_events_close() first to flush). */
void pdk_events_free(struct pdk_events *ev);

#endif
