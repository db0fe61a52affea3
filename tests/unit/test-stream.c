/*
 * test-stream.c - an event stream (src/http/stream.c) behind the request
 * guard (src/http/guard-conn.c) on a real loopback connection: the bytes a
 * client reads are well-framed chunks, whatever the guard's before-write
 * hook does to the same stream, and the hook still runs before any byte of
 * an answer reaches the socket.
 *
 * The daemon's hook stores the pending audit records, and storing them
 * sends them to every /v1/events stream: to the very stream whose write
 * called the hook, too.
 */
#include "common.h"
#include "base.h"
#include "http.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct server {
	struct event_base *base;
	struct evhttp *h;
	struct pdk_http_guards *gs;
	struct pdk_http_stream stream;
	bool started;
	/* The hook: when `nest` is set, it sends one more event on the stream. */
	bool nest;
	unsigned hook_calls;
	int client;         /* the client's socket, to look at what reached it */
	int queued_at_hook; /* bytes readable by the client when the hook ran (-1: not run) */
};

static struct server S;

static void handler(struct evhttp_request *req, void *arg)
{
	struct server *s = arg;

	if (pdk_http_guard_answer(s->gs, req))
		return;
	pdk_http_stream_start(&s->stream, req);
	s->started = true;
}

static void hook(void *arg)
{
	struct server *s = arg;
	int n = 0;

	s->hook_calls++;
	if (!s->nest)
		return;
	s->nest = false;
	cr_assert_eq(ioctl(s->client, FIONREAD, &n), 0);
	s->queued_at_hook = n;
	/* As the daemon's store does: the new record goes to every subscriber. */
	pdk_http_stream_send(&s->stream, "2", "nested", json_pack("{s:s}", "from", "the hook"));
}

static void start(void)
{
	struct pdk_http_limits lim = {.max_body = 1024, .head_timeout_ms = 10000, .name = "test"};
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	struct pdk_error *err = NULL;
	int fd;

	memset(&S, 0, sizeof(S));
	S.queued_at_hook = -1;
	S.base = event_base_new();
	S.h = evhttp_new(S.base);
	cr_assert(S.base != NULL && S.h != NULL);
	evhttp_set_gencb(S.h, handler, &S);
	S.gs = pdk_http_guards_new(S.base, &lim);
	pdk_http_guards_before_write(S.gs, hook, &S);
	fd = pdk_http_bind_tcp("127.0.0.1:0", NULL, &err);
	cr_assert(fd >= 0, "bind: %s", err ? err->msg : "?");
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	cr_assert(pdk_http_serve_fd(S.base, S.h, S.gs, fd, &err) == 0, "serve: %s",
		  err ? err->msg : "?");
	S.client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(S.client >= 0);
	/* The listener is listening: the kernel completes the connect before the loop runs. */
	cr_assert_eq(connect(S.client, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

static void stop(void)
{
	pdk_http_stream_end(&S.stream);
	(void)close(S.client);
	pdk_http_guards_stop(S.gs);
	evhttp_free(S.h);
	event_base_free(S.base);
	pdk_http_guards_free(S.gs);
}

/*
 * Turn the loop and read what the client got into `got`: until `want` is in
 * it (2 s at most), or for 100 ms when `want` is NULL.
 */
static void pump(struct pdk_buf *got, const char *want)
{
	struct timespec t0, now;

	(void)clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		char b[4096];
		ssize_t n;

		(void)event_base_loop(S.base, EVLOOP_NONBLOCK);
		while ((n = recv(S.client, b, sizeof(b), MSG_DONTWAIT)) > 0)
			cr_assert_eq(pdk_buf_add(got, b, (size_t)n), 0);
		if (want != NULL && got->len > 0 && memmem(got->p, got->len, want, strlen(want)))
			return;
		(void)clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >=
		    (want != NULL ? 2000 : 100)) {
			cr_assert(want == NULL, "'%s' never arrived; the client got: %.*s", want,
				  (int)got->len, got->p);
			return;
		}
		(void)usleep(1000);
	}
}

/*
 * The chunked body after the head in `got`, decoded strictly (each chunk: a
 * hex size, CRLF, that many bytes, CRLF), each chunk one whole event: the
 * events' names in order, joined by ','.
 */
static char *events_of(const struct pdk_buf *got)
{
	const char *p = memmem(got->p, got->len, "\r\n\r\n", 4);
	const char *end = got->p + got->len;
	struct pdk_buf names = PDK_BUF_INIT(4096);

	cr_assert(p != NULL, "no head: %.*s", (int)got->len, got->p);
	cr_assert(memmem(got->p, (size_t)(p - got->p), "Transfer-Encoding: chunked", 26),
		  "not chunked: %.*s", (int)(p - got->p), got->p);
	for (p += 4; p < end;) {
		char *after;
		unsigned long n = strtoul(p, &after, 16);
		const char *ev;

		cr_assert(after > p && after + 2 <= end && after[0] == '\r' && after[1] == '\n',
			  "a chunk size line is not a hex number and CRLF at: %.*s",
			  (int)(end - p < 80 ? end - p : 80), p);
		p = after + 2;
		if (n == 0)
			break;
		cr_assert((size_t)(end - p) >= n + 2 && p[n] == '\r' && p[n + 1] == '\n',
			  "a chunk of %lu bytes is not followed by CRLF: %.*s", n, (int)(end - p),
			  p);
		cr_assert(n >= 2 && p[n - 2] == '\n' && p[n - 1] == '\n',
			  "a chunk is not one whole event: %.*s", (int)n, p);
		if (p[0] == ':') { /* a comment: no event */
			p += n + 2;
			continue;
		}
		ev = memmem(p, n, "event: ", 7);
		cr_assert(ev != NULL, "a chunk without an event: %.*s", (int)n, p);
		if (names.len > 0)
			cr_assert_eq(pdk_buf_addstr(&names, ","), 0);
		cr_assert_eq(pdk_buf_add(&names, ev + 7, strcspn(ev + 7, "\n")), 0);
		p += n + 2;
	}
	return names.p != NULL ? names.p : pdk_xstrdup("");
}

Test(stream, an_event_the_hook_sends_to_the_same_stream_follows_whole)
{
	struct pdk_buf got = PDK_BUF_INIT(1 << 20);
	_cleanup_free_ char *names = NULL;
	static const char req[] = "GET /events HTTP/1.1\r\nHost: t\r\n\r\n";

	start();
	cr_assert_eq(send(S.client, req, sizeof(req) - 1, 0), (ssize_t)sizeof(req) - 1);
	pump(&got, "text/event-stream");
	cr_assert(S.started);
	pump(&got, NULL); /* nothing more is coming: the head is all */
	/* The hook stores a record whose fan-out writes to this stream, as the daemon's can. */
	S.nest = true;
	pdk_http_stream_send(&S.stream, "1", "outer", json_pack("{s:s}", "pad", "outer's data"));
	pump(&got, "event: nested");
	pump(&got, NULL);
	names = events_of(&got);
	cr_assert_str_eq(names, "outer,nested", "the client got the events %s; its bytes: %.*s",
			 names, (int)got.len, got.p);
	/* SECURITY: the hook ran before any byte of the event reached the socket. */
	cr_assert_eq(S.queued_at_hook, 0, "the client could read %d bytes when the hook ran",
		     S.queued_at_hook);
	free(got.p);
	stop();
}

Test(stream, the_hook_runs_before_each_answer_reaches_the_socket)
{
	struct pdk_buf got = PDK_BUF_INIT(1 << 20);
	_cleanup_free_ char *names = NULL;
	static const char req[] = "GET /events HTTP/1.1\r\nHost: t\r\n\r\n";
	unsigned before;

	start();
	cr_assert_eq(send(S.client, req, sizeof(req) - 1, 0), (ssize_t)sizeof(req) - 1);
	pump(&got, "text/event-stream");
	cr_assert(S.hook_calls >= 1, "the head reached the client without the hook");
	for (int i = 0; i < 3; i++) {
		before = S.hook_calls;
		pdk_http_stream_comment(&S.stream, "keepalive");
		pdk_http_stream_send(&S.stream, "1", "e", json_pack("{s:i}", "i", i));
		pump(&got, NULL);
		cr_assert(S.hook_calls > before, "round %d: written without the hook", i);
	}
	pdk_http_stream_end(&S.stream);
	pump(&got, "0\r\n\r\n");
	names = events_of(&got);
	cr_assert_str_eq(names, "e,e,e");
	free(got.p);
	stop();
}
