/*
 * guard.h - the request guard: a strict HTTP/1.1 framer in front of evhttp
 * (docs/internals/daemon.md, "The request guard").
 *
 * libevent 2.1 answers some requests itself, before the daemon sees them,
 * with an HTML page: a body over the size limit (413), a malformed request
 * line or header (400), an unknown method (501). The guard sits between the
 * socket and evhttp (a bufferevent filter installed with evhttp_set_bevcb)
 * and parses the client's bytes with libhttp-parser. evhttp receives a
 * canonical copy of every request the guard accepts: the request line and
 * headers written back as parsed, the body as received (Content-Length) or
 * re-chunked by the guard (chunked). A request the guard refuses is never
 * passed on: evhttp receives in its place a stand-in (a request of its own,
 * or the end of the chunked body already started), and the daemon's request
 * handler, which knows the stand-in by its place among the connection's
 * requests, answers it with the JSON error and closes the connection
 * (pdk_http_guard_answer(), http.h). Nothing the
 * client sends after a refusal is kept: it is discarded as it arrives.
 *
 * Memory: the guard holds at most one request head (max_headers bytes); a
 * body is never buffered by the guard, and a body over max_body is refused
 * at its Content-Length or at the chunk header that crosses the limit,
 * before its bytes are read.
 */
#ifndef PDK_GUARD_H
#define PDK_GUARD_H

#include "common.h"
#include "http.h"

enum pdk_guard_verdict {
	PDK_GUARD_PASS = 0,       /* everything so far was passed on */
	PDK_GUARD_TOO_LARGE,      /* 413 too_large "body": over max_body */
	PDK_GUARD_HEAD_TOO_LARGE, /* 431 too_large "headers": request line + headers over
				     max_headers */
	PDK_GUARD_BAD_REQUEST,    /* 400 bad_request: malformed (the field says where) */
	PDK_GUARD_METHOD,         /* 405 bad_request "method": not GET, POST, PUT or DELETE */
	PDK_GUARD_EXPECT,         /* 417 bad_request "Expect": other than 100-continue */
};

struct pdk_guard;

/* A guard for one connection (caller owns; pdk__guard_free). Never NULL (aborts on OOM). */
struct pdk_guard *pdk__guard_new(uint64_t max_body, size_t max_headers);
void pdk__guard_free(struct pdk_guard *g);

/*
 * Take `len` bytes from the client (borrowed). What evhttp must see is
 * appended to `out`. Returns the verdict, which is sticky: once it is not
 * PDK_GUARD_PASS, the stand-in has been appended and later bytes are
 * ignored (and appended nowhere).
 */
enum pdk_guard_verdict pdk__guard_feed(struct pdk_guard *g, const char *data, size_t len,
				       struct evbuffer *out);

/*
 * The same for everything in `src`, which is emptied. A Content-Length body's
 * bytes are moved from `src` to `out` (no copy); the rest as above.
 */
enum pdk_guard_verdict pdk__guard_feed_buffer(struct pdk_guard *g, struct evbuffer *src,
					      struct evbuffer *out);

/* The refusal's HTTP status, error code, field and message (borrowed; valid while g lives). */
int pdk__guard_status(const struct pdk_guard *g);
const char *pdk__guard_code(const struct pdk_guard *g);
const char *pdk__guard_field(const struct pdk_guard *g);
const char *pdk__guard_message(const struct pdk_guard *g);
/* Which request of the connection was refused (1 for the first); 0 while none was. */
uint64_t pdk__guard_refused_seq(const struct pdk_guard *g);
/* How many request heads were passed on to evhttp. */
uint64_t pdk__guard_heads(const struct pdk_guard *g);
/* True while a request's head is being read (begun, not complete), nothing refused. */
bool pdk__guard_in_head(const struct pdk_guard *g);
/* True between requests (none begun since the last one's end), nothing refused. */
bool pdk__guard_between(const struct pdk_guard *g);

#endif
