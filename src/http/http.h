/*
 * http.h - the server plumbing every HTTP listener of paddock shares
 * (docs/internals/daemon.md): the request guard in front of evhttp, JSON
 * answers and error bodies, event streams (SSE), and checked forms of the
 * libevent calls that can fail only for want of memory.
 *
 * Stands on base/ alone: it knows HTTP, not sandboxes. Which status an
 * error becomes is the front door's decision (api/); this layer only
 * writes what it is given. Every function here runs on the loop's thread.
 * An allocation failure anywhere below is pdk_oom(), never a half-written
 * answer.
 */
#ifndef PDK_HTTP_H
#define PDK_HTTP_H

#include "common.h"
#include "base.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

/* The largest request line + headers (the guard's limit, and evhttp's own behind it). */
#define PDK_HTTP_HEADERS_MAX (64 * 1024)

/* ---- checked libevent calls (reply.c) ---- */

/* evbuffer_add(): `len` bytes of `data` (borrowed) appended to `buf`. */
void pdk_http_buf_add(struct evbuffer *buf, const void *data, size_t len);
/* evbuffer_add_printf(). */
void pdk_http_buf_printf(struct evbuffer *buf, const char *fmt, ...) PDK_PRINTF(2, 3);
/* A new, empty evbuffer (caller frees with evbuffer_free()). */
struct evbuffer *pdk_http_buf_new(void);
/* evhttp_add_header() on the answer's headers (both strings copied). */
void pdk_http_header(struct evhttp_request *req, const char *name, const char *value);

/* ---- answers (reply.c) ---- */

/*
 * Answer `req` with status `code` and `body` (taken; serialised compact,
 * keys sorted, one line) as application/json. `req` is evhttp's again
 * afterwards: no call may touch it.
 */
void pdk_http_json(struct evhttp_request *req, int code, json_t *body);
/*
 * Answer with the error object {"error":{"code","message","field"}}: `ecode`
 * is the machine-readable code ("not_found"), `field` names the part of the
 * request to blame (NULL or "": none), the message is printf-style and
 * clipped at 511 bytes. The one place an error body is built.
 */
void pdk_http_error(struct evhttp_request *req, int code, const char *ecode, const char *field,
		    const char *fmt, ...) PDK_PRINTF(5, 6);
/* Answer 200 with `len` bytes of `data` (borrowed) as `content_type`. */
void pdk_http_bytes(struct evhttp_request *req, const char *content_type, const void *data,
		    size_t len);
/*
 * Answer 200 with the first `size` bytes of the file open on `fd` (taken:
 * closed once sent, or at once when `size` is 0) as `content_type`.
 */
void pdk_http_file(struct evhttp_request *req, const char *content_type, int fd, uint64_t size);

/*
 * The whole request body of `req`, moved out of evhttp's buffer into a new
 * NUL-terminated string (*out, caller frees; *len its length). -E2BIG when
 * it is longer than `max` (nothing is taken then).
 */
PDK_MUST_CHECK int pdk_http_body(struct evhttp_request *req, size_t max, char **out, size_t *len);

/* ---- event streams: text/event-stream answers (stream.c) ---- */

/*
 * A long answer, one event at a time. Owned by whoever started it (its
 * storage must outlive the answer: until pdk_http_stream_end(), or until
 * on_close ran). A client that goes away marks the stream dead and calls
 * on_close once (the last thing the stream does with it); sends to a dead
 * stream are dropped.
 */
struct pdk_http_stream {
	struct evhttp_request *req; /* NULL once ended or gone */
	bool dead;
	void (*on_close)(void *arg); /* may be NULL */
	void *on_close_arg;
	struct event *peer_ev;   /* the client's socket, when watched (pdk_http_stream_watch) */
	void (*sent)(void *arg); /* pdk_http_stream_bytes(): the last chunk left */
	void *sent_arg;
};

/* Answer `req` 200 text/event-stream and keep it open. */
void pdk_http_stream_start(struct pdk_http_stream *s, struct evhttp_request *req);
/*
 * Also notice a client that goes away while nothing is written to it: its
 * socket is watched for EOF (a peek: the bytes stay evhttp's). A stream
 * whose client only listens would otherwise find out at its next write.
 */
void pdk_http_stream_watch(struct pdk_http_stream *s, struct event_base *base);
/* One event: "id: ID" (when not NULL), "event: EVENT", "data: " + `data` (taken) as JSON. */
void pdk_http_stream_send(struct pdk_http_stream *s, const char *id, const char *event,
			  json_t *data);
/* A comment line (": TEXT"): keeps an idle stream alive through proxies. */
void pdk_http_stream_comment(struct pdk_http_stream *s, const char *text);
/* End the answer (or just forget it when the client is gone). on_close is not called. */
void pdk_http_stream_end(struct pdk_http_stream *s);
/*
 * The bytes given to the stream that its client's socket has not taken yet
 * (0 once it ended): a writer that could produce much more waits while
 * they are many.
 */
size_t pdk_http_stream_backlog(const struct pdk_http_stream *s);

/*
 * The same streams for raw bytes: answer `req` 200 with `content_type`, its
 * body sent in chunks (chunked transfer coding; HTTP/1.0: up to the close).
 */
void pdk_http_stream_start_raw(struct pdk_http_stream *s, struct evhttp_request *req,
			       const char *content_type);
/*
 * One chunk of `len` bytes of `data` (copied). `sent(arg)` runs once the
 * chunk has left for the client's socket (flow control: send the next one
 * then), unless the stream ends or dies first. Dropped on a dead stream.
 */
void pdk_http_stream_bytes(struct pdk_http_stream *s, const void *data, size_t len,
			   void (*sent)(void *arg), void *arg);
/*
 * The answer cannot be completed: the connection is cut without the body's
 * last chunk, so the client sees an incomplete answer, never a short body
 * that looks whole. on_close is not called.
 */
void pdk_http_stream_abort(struct pdk_http_stream *s);

/* ---- the request guard and the connection budget (guard-conn.c, conns.c; guard.c) ---- */

/*
 * The guarded connections of one listener. The guard sits between each
 * connection's socket and evhttp and refuses oversized and malformed
 * requests with the JSON error before evhttp sees them. It also keeps the
 * listener's connection budget (docs/daemon.md, "Connections"):
 *
 * - at most `max_per_peer` connections from one address: one more is
 *   answered 503 and closed at once;
 * - at most `max_conns` at once: one more makes room by closing the oldest
 *   connection that has not sent a complete request head yet, and is
 *   answered 503 and closed when there is none;
 * - a connection the listener waits on for a request head (from its
 *   accept, or from the end of the previous answer) is answered 408 and
 *   closed when the head is not complete `head_timeout_ms` later;
 * - the listener never holds more than max_conns + PDK_HTTP_CONN_SLACK
 *   descriptors (connections being closed, refused ones lingering): past
 *   that it stops accepting until one is freed; and an accept that fails
 *   (no descriptor left: EMFILE, ENFILE, ENOBUFS) pauses it for
 *   PDK_HTTP_ACCEPT_PAUSE_MS instead of retrying at once.
 *
 * Refusals and pauses are written to `log` (give it a rate-limited sink).
 */
struct pdk_http_guards;

/* Descriptors a listener may hold beyond max_conns: connections being closed. */
#define PDK_HTTP_CONN_SLACK      32
#define PDK_HTTP_ACCEPT_PAUSE_MS 100

struct pdk_http_limits {
	uint64_t max_body;        /* the largest request body */
	unsigned max_conns;       /* connections at once; 0: no cap */
	unsigned max_per_peer;    /* connections at once from one address; 0: no cap */
	uint64_t head_timeout_ms; /* see above; 0: no deadline */
	/* What a refusal's message names as the setting to change (NULL: none). */
	const char *max_conns_flag, *max_per_peer_flag, *head_timeout_flag;
	const char *name;          /* the listener, in log lines ("tcp 127.0.0.1:8080") */
	const struct pdk_log *log; /* borrowed; must outlive the guards */
};

/*
 * Guards with limits `lim` (copied; its strings and log borrowed). They must
 * outlive every evhttp using them and the event loop itself: libevent may
 * finalise a connection's filter as late as event_base_free(). Free with
 * pdk_http_guards_stop() before the evhttp and the loop are freed, then
 * pdk_http_guards_free() after.
 */
struct pdk_http_guards *pdk_http_guards_new(struct event_base *base,
					    const struct pdk_http_limits *lim);
/* Stop timers, close lingering refused connections, forget the listener. */
void pdk_http_guards_stop(struct pdk_http_guards *gs);
void pdk_http_guards_free(struct pdk_http_guards *gs);

/*
 * `cb(arg)` runs before the bytes of any answer go to a connection's socket
 * (NULL: nothing runs). The daemon stores its pending audit records there:
 * a record is stored before the answer of its request is written, whatever
 * the order in which libevent runs the loop's ready events (a socket's write
 * event is often active in the same turn as the read of its request).
 * pdk_http_guards_stop() forgets `cb`.
 */
typedef void (*pdk_http_before_write_cb)(void *arg);
void pdk_http_guards_before_write(struct pdk_http_guards *gs, pdk_http_before_write_cb cb,
				  void *arg);

/*
 * Put a guard in front of every connection `h` accepts on `l` (the listener
 * bound to `h`; borrowed: the guards pause and resume it, and set its error
 * callback).
 */
void pdk_http_guard_install(struct pdk_http_guards *gs, struct evhttp *h, struct evconnlistener *l);

/*
 * In the request handler, first, for every request: when `req` is a guard's
 * stand-in for a refused request, answer it with the JSON error, close the
 * connection once the answer is written, and return true. False for every
 * other request (whose end the guard then watches for its deadline).
 */
bool pdk_http_guard_answer(struct pdk_http_guards *gs, struct evhttp_request *req);

/*
 * Whether the peer of `req`'s unix socket connection is in our user and pid
 * namespaces (base/peer.h: 1, 0, or negative + *err): on a connection of
 * `gs`, with what base/peer.h lets it keep from the connection's first
 * request (its pidfd and pid namespace; the user namespace is read every
 * time); else asked afresh.
 */
PDK_MUST_CHECK int pdk_http_peer_in_our_namespaces(struct pdk_http_guards *gs,
						   struct evhttp_request *req,
						   struct pdk_error **err);

/* ---- listeners (listen.c) ---- */

/*
 * A TCP socket bound to "HOST:PORT" (a numeric IPv4 or IPv6 address; "[V6]:PORT"),
 * non-blocking, close-on-exec, SO_REUSEADDR: its descriptor (caller's), or
 * negative + *err (-EINVAL naming the bad spec). *loopback (may be NULL)
 * says whether HOST is a loopback address.
 */
PDK_MUST_CHECK int pdk_http_bind_tcp(const char *spec, bool *loopback, struct pdk_error **err);

/*
 * Serve `h` on the bound socket `fd` (taken, closed on failure): listen,
 * hand its connections to evhttp through the guards `gs`.
 */
PDK_MUST_CHECK int pdk_http_serve_fd(struct event_base *base, struct evhttp *h,
				     struct pdk_http_guards *gs, int fd, struct pdk_error **err);

#endif
