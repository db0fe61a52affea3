/*
 * fuzz-client-response.c - libFuzzer target for the daemon client's
 * response parsers (src/client.c): the HTTP/1.1 response (libhttp-parser
 * underneath; fixed-length, chunked, close-delimited bodies), once collected
 * and once streamed as Server-Sent Events, and the SSE parser alone.
 *
 * The first byte chooses where the input is cut in two feeds (a response
 * arrives in pieces). Properties: a complete response has a status of
 * 100..999 and a collected body NUL-terminated at its length, within the
 * cap; every event has a type, data NUL-terminated at its length, within
 * the cap; a parser never reads past the bytes given (ASan).
 */
#include "common.h"
#include "client.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check_event(void *ud, const char *event, const char *id, const char *d, size_t len)
{
	(void)ud;
	if (event == NULL || event[0] == '\0' || d == NULL || d[len] != '\0' ||
	    len > PDK_CLIENT_SSE_MAX)
		abort();
	if (id != NULL && strlen(id) > 256)
		abort();
	return 0;
}

static void run_http(const char *buf, size_t size, size_t cut, bool sse)
{
	struct pdk__client_parser *p = pdk__client_parser_new(false);
	struct pdk_error *err = NULL;
	int r;

	if (sse)
		pdk__client_parser_set_sink(p, NULL, check_event, NULL);
	r = pdk__client_parser_feed(p, buf, cut, &err);
	if (r == 0)
		r = pdk__client_parser_feed(p, buf + cut, size - cut, &err);
	if (r == 0)
		r = pdk__client_parser_feed(p, buf + size, 0, &err); /* the peer closed */
	if (r < 0 && (err == NULL || err->msg == NULL))
		abort();
	if (r == 1) {
		struct pdk_client_resp resp;
		bool keep;

		pdk__client_parser_take(p, &resp, &keep);
		if (resp.status < 100 || resp.status > 999)
			abort();
		if (resp.body != NULL &&
		    (resp.body[resp.body_len] != '\0' || resp.body_len > PDK_CLIENT_BODY_MAX))
			abort();
		pdk_client_resp_release(&resp);
	}
	pdk_error_free(&err);
	pdk__client_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdk_sse *s;
	size_t cut;
	char *buf;
	int r;

	if (size == 0)
		return 0;
	cut = data[0] % size;
	/* A copy of exactly the bytes after the first: ASan catches a read past the end. */
	buf = pdk_xmalloc(size);
	memcpy(buf, data + 1, size - 1);
	run_http(buf, size - 1, cut > size - 1 ? size - 1 : cut, false);
	run_http(buf, size - 1, cut > size - 1 ? size - 1 : cut, true);
	s = pdk_sse_new(PDK_CLIENT_SSE_MAX, check_event, NULL);
	cut = cut > size - 1 ? size - 1 : cut;
	r = pdk_sse_feed(s, buf, cut);
	if (r == 0)
		r = pdk_sse_feed(s, buf + cut, size - 1 - cut);
	if (r != 0 && r != -E2BIG)
		abort(); /* the callback never stops it: only a cap may */
	pdk_sse_free(s);
	free(buf);
	return 0;
}
