/*
 * fuzz-gw-remote.c - libFuzzer target for the gateway's Streamable HTTP
 * client (src/gateway/remote.c): a remote MCP server's answer to a POST
 * (JSON or an SSE stream, an error status, interim answers, a session id
 * at initialize) and to the GET of its own stream, parsed by the code a
 * connection's reads go through (libhttp-parser, then base/sse.c).
 *
 * The first byte chooses what the bytes answer (bit 0: the GET stream;
 * bit 1: initialize; bit 2: a session already held) and where they are
 * cut in two reads. Properties: every message handed on is 1 to
 * PDK_GW_UP_MESSAGE_MAX bytes; every failure and every refusal names the
 * server first; nothing is reported after the transport failed; a
 * parser never reads past the bytes given (ASan); nothing leaks (the
 * transport is freed after each input, no connection is ever opened).
 */
#include "common.h"
#include "gateway-internal.h"
#include "util.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX "server fz: "

static bool failed;

static void on_message(void *ctx, const char *p, size_t n)
{
	volatile char sum = 0;

	(void)ctx;
	if (failed || n == 0 || n > PDK_GW_UP_MESSAGE_MAX)
		abort();
	for (size_t i = 0; i < n; i++) /* every byte readable (ASan) */
		sum = (char)(sum ^ p[i]);
}

static void on_end(void *ctx, json_int_t id, const struct pdk_error *err)
{
	(void)ctx;
	if (failed || id == 0 || (err != NULL && strncmp(err->msg, PREFIX, strlen(PREFIX)) != 0))
		abort();
}

static void on_lost(void *ctx, json_int_t id, bool current)
{
	(void)ctx;
	(void)id;
	(void)current;
	if (failed)
		abort();
}

static void on_failed(void *ctx, const struct pdk_error *err)
{
	(void)ctx;
	if (failed || err == NULL || strncmp(err->msg, PREFIX, strlen(PREFIX)) != 0)
		abort();
	failed = true;
}

static const struct pdk__gw_remote_cbs cbs = {
	.message = on_message,
	.request_end = on_end,
	.session_lost = on_lost,
	.failed = on_failed,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct event_base *base;
	struct pdk_gw_server s = {.id = "fz", .url = "http://127.0.0.1:9/mcp"};
	struct pdk__gw_remote *r;
	struct pdk_error *err = NULL;
	char *buf;
	size_t cut;

	if (size == 0)
		return 0;
	if (base == NULL && (base = event_base_new()) == NULL)
		abort();
	r = pdk__gw_remote_new(base, &s, NULL, &cbs, NULL, &err);
	if (r == NULL)
		abort();
	failed = false;
	/* A copy of exactly the bytes after the first: ASan catches a read past the end. */
	buf = pdk_xmalloc(size);
	memcpy(buf, data + 1, size - 1);
	cut = size > 1 ? (data[0] >> 3) % size : 0;
	if (data[0] & 4) {
		/* A session held: its answer's 404 is the session's end. */
		pdk__gw_remote_feed(
			r, false, 1, true,
			"HTTP/1.1 200 OK\r\nMcp-Session-Id: s1\r\nContent-Length: 0\r\n\r\n", 58,
			0);
	}
	pdk__gw_remote_feed(r, data[0] & 1, (data[0] & 1) ? 0 : 7, (data[0] & 2) != 0, buf,
			    size - 1, cut > size - 1 ? size - 1 : cut);
	free(buf);
	/* The session forgotten first: its DELETE would open a connection. */
	pdk__gw_remote_reset(r);
	pdk__gw_remote_free(r);
	return 0;
}
