/*
 * sse.h - an incremental parser of Server-Sent Events (the WHATWG HTML
 * "event stream" format), for bytes a peer sent: lines end at LF, CRLF or
 * CR, even split across feeds; `data` lines are joined by LF; `event` and
 * `id` are kept; comments, `retry` and unknown fields are ignored. A line
 * or an event's data past `max` bytes is refused, never grown into.
 */
#ifndef PDK_SSE_H
#define PDK_SSE_H

#include "common.h"

#include <stddef.h>

/*
 * Called with each complete event: its type ("message" when none was
 * given), its id (NULL when none), its data (NUL-terminated, len bytes).
 * Nonzero stops the feed (-ECANCELED).
 */
typedef int (*pdk_sse_cb)(void *ud, const char *event, const char *id, const char *data,
			  size_t len);

struct pdk_sse;
/* A parser whose lines and events hold at most `max` bytes. Never NULL. */
struct pdk_sse *pdk_sse_new(size_t max, pdk_sse_cb cb, void *ud);
void pdk_sse_free(struct pdk_sse *s);
/* Take `len` more bytes: 0, -E2BIG past `max`, or -ECANCELED when the callback said stop. */
PDK_MUST_CHECK int pdk_sse_feed(struct pdk_sse *s, const char *data, size_t len);

#endif
