/*
 * test-guard.c - the request guard's framer (src/http/guard.h): what it
 * passes on to evhttp, what it refuses, and that a refusal is sticky.
 */
#include "common.h"
#include "guard.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BODY    1024
#define MAX_HEADERS 4096

struct run {
	enum pdk_guard_verdict v;
	char *out; /* what evhttp would see, NUL-terminated (caller frees) */
	size_t out_len;
	struct pdk_guard *g;
};

/* Feed `in` in pieces of `step` bytes (0: at once). */
static struct run feed(const char *in, size_t len, size_t step)
{
	struct run r = {.g = pdk__guard_new(MAX_BODY, MAX_HEADERS)};
	struct evbuffer *out = evbuffer_new();

	cr_assert_not_null(out);
	if (step == 0)
		step = len ? len : 1;
	for (size_t i = 0; i < len; i += step)
		r.v = pdk__guard_feed(r.g, in + i, len - i < step ? len - i : step, out);
	r.out_len = evbuffer_get_length(out);
	r.out = calloc(1, r.out_len + 1);
	cr_assert_not_null(r.out);
	cr_assert_eq(evbuffer_remove(out, r.out, r.out_len), (int)r.out_len);
	evbuffer_free(out);
	return r;
}

static void release(struct run *r)
{
	free(r->out);
	pdk__guard_free(r->g);
}

/* The same input gives the same verdict and output whatever its pieces. */
static struct run feed_all_ways(const char *in)
{
	struct run whole = feed(in, strlen(in), 0);
	size_t steps[] = {1, 2, 7, 64};

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct run r = feed(in, strlen(in), steps[i]);

		cr_assert_eq(r.v, whole.v, "step %zu: verdict %d, whole %d", steps[i], r.v,
			     whole.v);
		/* A chunked body is re-chunked as it comes: only its framing differs. */
		if (whole.v != PDK_GUARD_PASS || strstr(in, "chunked") == NULL)
			cr_assert_str_eq(r.out, whole.out, "step %zu", steps[i]);
		release(&r);
	}
	return whole;
}

static void refused(const char *in, int status, const char *code, const char *field)
{
	struct run r = feed_all_ways(in);

	cr_assert_neq(r.v, PDK_GUARD_PASS, "passed: %s", in);
	cr_assert_eq(pdk__guard_status(r.g), status, "%s: status %d", in, pdk__guard_status(r.g));
	cr_assert_str_eq(pdk__guard_code(r.g), code);
	cr_assert_str_eq(pdk__guard_field(r.g), field, "%s: field '%s' (%s)", in,
			 pdk__guard_field(r.g), pdk__guard_message(r.g));
	cr_assert_neq(pdk__guard_message(r.g)[0], '\0');
	release(&r);
}

Test(guard, get_passes_canonical)
{
	struct run r =
		feed_all_ways("\r\nGET /v1/health?x=1 HTTP/1.1\r\nHost:  p\r\nAccept: */*\r\n\r\n");

	cr_assert_eq(r.v, PDK_GUARD_PASS);
	cr_assert_str_eq(r.out, "GET /v1/health?x=1 HTTP/1.1\r\nHost: p\r\nAccept: */*\r\n\r\n");
	cr_assert_eq(pdk__guard_refused_seq(r.g), 0);
	release(&r);
}

Test(guard, content_length_body_passes_as_is)
{
	struct run r = feed_all_ways("PUT /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");

	cr_assert_eq(r.v, PDK_GUARD_PASS);
	cr_assert_str_eq(r.out, "PUT /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
	release(&r);
}

/*
 * A value's trailing whitespace, and a folded line's, is not passed on: a
 * fold of a tab alone after "5" was read as Content-Length 5, and evhttp
 * (or a second guard) must read the same, not "5\t".
 */
Test(guard, folded_and_trailing_whitespace_is_dropped)
{
	struct run r =
		feed_all_ways("PUT /a HTTP/1.1\nContent-Length: 5\n\t\nX-A: b \t\r\n\r\nhello");
	struct run again;

	cr_assert_eq(r.v, PDK_GUARD_PASS);
	cr_assert_str_eq(r.out, "PUT /a HTTP/1.1\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello");
	again = feed(r.out, r.out_len, 0);
	cr_assert_eq(again.v, PDK_GUARD_PASS);
	cr_assert_str_eq(again.out, r.out);
	release(&again);
	release(&r);
}

Test(guard, chunked_body_is_rechunked_without_trailers)
{
	const char *in = "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
			 "5;ext=1\r\nhello\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n";
	struct run r = feed(in, strlen(in), 0);

	cr_assert_eq(r.v, PDK_GUARD_PASS);
	cr_assert_str_eq(r.out, "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
				"5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n");
	release(&r);
}

Test(guard, body_exactly_at_the_limit_passes)
{
	char in[2048];
	int n = snprintf(in, sizeof(in), "PUT /a HTTP/1.1\r\nContent-Length: %d\r\n\r\n", MAX_BODY);
	struct run r;

	memset(in + n, 'x', MAX_BODY);
	r = feed(in, (size_t)n + MAX_BODY, 100);
	cr_assert_eq(r.v, PDK_GUARD_PASS);
	cr_assert_eq(r.out_len, (size_t)n + MAX_BODY);
	release(&r);
}

Test(guard, content_length_over_the_limit_is_refused_before_the_body)
{
	const char *in = "PUT /a HTTP/1.1\r\nContent-Length: 1025\r\n\r\n";
	struct run r = feed_all_ways(in);

	cr_assert_eq(r.v, PDK_GUARD_TOO_LARGE);
	cr_assert_eq(pdk__guard_status(r.g), 413);
	cr_assert_str_eq(pdk__guard_field(r.g), "body");
	cr_assert(strstr(pdk__guard_message(r.g), "1024 bytes") != NULL, "%s",
		  pdk__guard_message(r.g));
	/* evhttp sees a stand-in, never the refused request's head. */
	cr_assert_str_eq(r.out, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
	cr_assert_eq(pdk__guard_refused_seq(r.g), 1);
	release(&r);
}

Test(guard, chunked_over_the_limit_is_refused_at_the_chunk_header)
{
	/* 1000 bytes pass; the next chunk (25 bytes) would make 1025. */
	char in[4096];
	int n = snprintf(in, sizeof(in),
			 "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n");
	struct run r;

	memset(in + n, 'y', 1000);
	n += 1000;
	n += snprintf(in + n, sizeof(in) - (size_t)n, "\r\n19\r\n%s", "zzzz");
	r = feed(in, (size_t)n, 0);
	cr_assert_eq(r.v, PDK_GUARD_TOO_LARGE);
	cr_assert_str_eq(pdk__guard_field(r.g), "body");
	/* The 1000 bytes, then the end of the body; none of the refused chunk. */
	cr_assert(strstr(r.out, "zz") == NULL);
	cr_assert_str_eq(r.out + r.out_len - 7, "\r\n0\r\n\r\n");
	cr_assert(strstr(r.out, "3e8\r\n") != NULL);
	cr_assert_eq(pdk__guard_refused_seq(r.g), 1);
	release(&r);
}

Test(guard, a_refusal_is_sticky)
{
	struct pdk_guard *g = pdk__guard_new(MAX_BODY, MAX_HEADERS);
	struct evbuffer *out = evbuffer_new();
	const char *bad = "BREW /pot HTCPCP/1.0\r\n\r\n";
	const char *good = "GET / HTTP/1.1\r\n\r\n";
	size_t before;

	cr_assert_neq(pdk__guard_feed(g, bad, strlen(bad), out), PDK_GUARD_PASS);
	before = evbuffer_get_length(out);
	cr_assert_neq(pdk__guard_feed(g, good, strlen(good), out), PDK_GUARD_PASS);
	cr_assert_eq(evbuffer_get_length(out), before, "bytes after a refusal were passed on");
	evbuffer_free(out);
	pdk__guard_free(g);
}

Test(guard, pipelined_second_request_refused_first_passed)
{
	const char *in = "GET /a HTTP/1.1\r\n\r\nPUT /b HTTP/1.1\r\nContent-Length: 99999\r\n\r\n";
	struct run r = feed_all_ways(in);

	cr_assert_eq(r.v, PDK_GUARD_TOO_LARGE);
	cr_assert_str_eq(r.out,
			 "GET /a HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nConnection: close\r\n\r\n");
	cr_assert_eq(pdk__guard_refused_seq(r.g), 2);
	release(&r);
}

Test(guard, malformed_requests_name_the_part)
{
	refused("GARBAGE\r\n\r\n", 400, "bad_request", "method");
	refused("\x01GET / HTTP/1.1\r\n\r\n", 400, "bad_request", "method");
	refused("GET / HTTP/9.9\r\n\r\n", 400, "bad_request", "version");
	refused("GET /a b HTTP/1.1\r\n\r\n", 400, "bad_request", "headers");
	refused("GET / HTTP/1.1\r\nNo colon here\r\n\r\n", 400, "bad_request", "headers");
	refused("GET / HTTP/1.1\r\nX\x01Y: z\r\n\r\n", 400, "bad_request", "headers");
	refused("GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400, "bad_request", "headers");
	refused("PUT / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n", 400, "bad_request",
		"Content-Length");
	refused("PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
		"bad_request", "Content-Length");
	refused("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "bad_request",
		"body");
}

Test(guard, evhttp_disagreements_are_refused)
{
	/* evhttp knows only a lone "chunked": anything else would desynchronise the two. */
	refused("PUT / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400, "bad_request",
		"Transfer-Encoding");
	refused("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		400, "bad_request", "Transfer-Encoding");
	refused("PUT / HTTP/1.1\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\nx", 417,
		"bad_request", "Expect");
	refused("GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", 400, "bad_request",
		"Upgrade");
	/* An Upgrade without Connection: upgrade is refused too (libhttp-parser ignores it). */
	refused("GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n", 400, "bad_request", "Upgrade");
	refused("GET / HTTP/1.1\r\nUpgrade: h2c\r\nConnection: close\r\n\r\n", 400, "bad_request",
		"Upgrade");
	refused("GET / HTTP/1.1\r\nuPgRaDe: websocket\r\n\r\n", 400, "bad_request", "Upgrade");
}

Test(guard, methods_outside_the_api_are_405)
{
	refused("PATCH /v1/x HTTP/1.1\r\n\r\n", 405, "bad_request", "method");
	refused("HEAD /v1/health HTTP/1.1\r\n\r\n", 405, "bad_request", "method");
	refused("OPTIONS * HTTP/1.1\r\n\r\n", 405, "bad_request", "method");
}

Test(guard, headers_over_the_limit_are_431)
{
	char *in = malloc(MAX_HEADERS + 64);
	int n = snprintf(in, MAX_HEADERS + 64, "GET / HTTP/1.1\r\nX-Big: ");

	cr_assert_not_null(in);
	memset(in + n, 'a', MAX_HEADERS);
	in[MAX_HEADERS + 16] = '\0';
	refused(in, 431, "too_large", "headers");
	free(in);
}

Test(guard, expect_continue_and_folded_headers_pass)
{
	struct run r = feed_all_ways("PUT /a HTTP/1.1\r\nExpect: 100-continue\r\nX-F: a\r\n b\r\n"
				     "Content-Length: 0\r\n\r\n");

	cr_assert_eq(r.v, PDK_GUARD_PASS);
	cr_assert(strstr(r.out, "Expect: 100-continue\r\n") != NULL);
	cr_assert(strstr(r.out, "\r\n b") == NULL, "a folded line reached evhttp: %s", r.out);
	release(&r);
}

/* The buffer form (what the connection uses) moves Content-Length bodies: same bytes out. */
Test(guard, feed_buffer_matches_feed)
{
	const char *in =
		"PUT /a HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789"
		"POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
		"PUT /c HTTP/1.1\r\nContent-Length: 4\r\n\r\nwxyz"
		"PUT /d HTTP/1.1\r\nContent-Length: 5000\r\n\r\n";
	struct run want = feed(in, strlen(in), 0);

	for (size_t step = 1; step < 40; step += 3) {
		struct pdk_guard *g = pdk__guard_new(MAX_BODY, MAX_HEADERS);
		struct evbuffer *src = evbuffer_new(), *out = evbuffer_new();
		enum pdk_guard_verdict v = PDK_GUARD_PASS;
		char *got;

		cr_assert(src != NULL && out != NULL);
		/* Several chains per call, as a socket's reads leave them. */
		for (size_t i = 0; i < strlen(in); i += step) {
			struct evbuffer *piece = evbuffer_new();

			evbuffer_add(piece, in + i, strlen(in) - i < step ? strlen(in) - i : step);
			evbuffer_add_buffer(src, piece);
			evbuffer_free(piece);
			if (i % (3 * step) == 0)
				v = pdk__guard_feed_buffer(g, src, out);
		}
		v = pdk__guard_feed_buffer(g, src, out);
		cr_assert_eq(evbuffer_get_length(src), 0);
		cr_assert_eq(v, want.v, "step %zu", step);
		got = calloc(1, evbuffer_get_length(out) + 1);
		evbuffer_remove(out, got, evbuffer_get_length(out));
		cr_assert(strstr(got, "0123456789POST /b") != NULL, "step %zu: %s", step, got);
		cr_assert(strstr(got, "\r\n\r\nwxyz") != NULL, "step %zu: %s", step, got);
		cr_assert_str_eq(got + strlen(got) - 37,
				 "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
		free(got);
		evbuffer_free(src);
		evbuffer_free(out);
		pdk__guard_free(g);
	}
	release(&want);
}
