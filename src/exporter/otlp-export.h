/*
 * otlp-export.h - the OTLP/HTTP exporter proper: a bounded queue, a thread
 * that batches events (by count and by time) and POSTs them with libcurl
 * to ENDPOINT/v1/logs and ENDPOINT/v1/traces, with retry.
 *
 * It lives outside libpaddock (src/exporter/) because libcurl cannot be
 * linked into the static paddock binary: it is built into the helper
 * paddock-otlp (otlp.h's sink starts it) and into the unit tests, and a
 * dynamically linked front end may use it in-process. See
 * docs/internals/otlp.md.
 */
#ifndef PDK_OTLP_EXPORT_H
#define PDK_OTLP_EXPORT_H

#include "common.h"
#include "base.h"
#include "telemetry.h"

struct pdk_otlp;

struct pdk_otlp_stats {
	uint64_t received;    /* events offered to pdk_otlp_enqueue() */
	uint64_t exported;    /* accepted by the collector (both requests of their batch) */
	uint64_t dropped;     /* refused by the full queue */
	uint64_t failed;      /* given up: non-retryable answer, or retries exhausted */
	uint64_t unexported;  /* still queued or in flight when the close deadline passed */
	char last_error[160]; /* why the last request failed ("" if none); never a header */
};

/*
 * Start an exporter for `cfg` (copied; cfg->endpoint must be set). The
 * thread starts at once; nothing is sent before an event is queued.
 * Returns NULL + *err when libcurl or the thread cannot be set up.
 */
struct pdk_otlp *pdk_otlp_new(const struct pdk_otlp_config *cfg, struct pdk_error **err);

/*
 * Queue `event` (a reference is taken; borrowed otherwise). Never blocks on
 * the network: returns false, and counts a drop, when the queue holds
 * cfg->queue_max events or the exporter is closing. Thread-safe.
 */
bool pdk_otlp_enqueue(struct pdk_otlp *o, json_t *event);

/*
 * Send what is queued and stop, waiting at most `deadline_ms`; then fill
 * *st. Returns true when the thread finished (every event exported or
 * given up), false when the deadline passed first: the thread is told to
 * abort its request and pdk_otlp_free() joins it (libcurl notices within
 * about a second), or the process may simply exit.
 */
bool pdk_otlp_close(struct pdk_otlp *o, uint64_t deadline_ms, struct pdk_otlp_stats *st);

/* Stats so far (thread-safe). */
void pdk_otlp_get_stats(struct pdk_otlp *o, struct pdk_otlp_stats *st);

/* Stop (abort what is in flight, drop what is queued), join and free. NULL-safe. */
void pdk_otlp_free(struct pdk_otlp *o);

#endif
