/*
 * events.h - the normalized event stream (DESIGN.md "Events").
 *
 * Every event is one JSON object on one line:
 *   {"actor":..., "attrs":{...}, "kind":"process.exit", "sandbox":"<id>",
 *    "seq":N, "session":null, "ts":"2026-11-22T10:40:04.123456Z", "workflow":null}
 * This issue writes them to a file (--events); the hash-chained store is a
 * later sink of the same stream.
 */
#ifndef PDK_EVENTS_H
#define PDK_EVENTS_H

#include "common.h"
#include "error.h"
#include "json.h"

struct pdk_events;

/*
 * Open a JSON-lines sink appending to `path` (created 0600 if missing).
 * `sandbox_id` and `actor` are copied. Returns NULL + *err on failure.
 */
struct pdk_events *pdk_events_open(const char *path, const char *sandbox_id, const char *actor,
				   struct pdk_error **err);

/* Labels carried by every event (may be NULL). Copied. */
void pdk_events_set_labels(struct pdk_events *ev, const char *session, const char *workflow);

/*
 * Emit one event of `kind` with `attrs` (ownership taken; may be NULL).
 * `ts_ns` is CLOCK_REALTIME nanoseconds, 0 = now. Each line is written with
 * one write() on an O_APPEND fd, so concurrent writers never interleave.
 * NULL `ev` is a no-op returning 0.
 */
PDK_MUST_CHECK int pdk_events_emit(struct pdk_events *ev, const char *kind, uint64_t ts_ns,
				   json_t *attrs, struct pdk_error **err);

/* Format CLOCK_REALTIME ns as RFC 3339 UTC with microseconds into buf (>= 32 bytes). */
void pdk_events_format_ts(uint64_t ts_ns, char *buf, size_t len);

void pdk_events_free(struct pdk_events *ev);

#endif
