/*
 * fuzz-guard.c - libFuzzer target for the daemon's request guard
 * (src/http/guard.h): raw bytes straight from a client's socket.
 *
 * The first byte picks how the input is cut into feeds (as a socket's reads
 * would cut it); the rest is the byte stream. Invariants: nothing crashes or
 * leaks; a refusal has a 4xx status, a code, a message and a request number;
 * once refused, further bytes add nothing to evhttp's side; and when
 * everything was passed on, a second guard passes the guard's output too
 * (the guard never hands evhttp bytes it would itself refuse).
 */
#include "common.h"
#include "guard.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BODY    4096
#define MAX_HEADERS 2048

static void check_refusal(const struct pdk_guard *g)
{
	int st = pdk__guard_status(g);

	if (st < 400 || st > 499 || pdk__guard_code(g) == NULL ||
	    pdk__guard_message(g)[0] == '\0' || pdk__guard_refused_seq(g) == 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdk_guard *g, *again;
	struct evbuffer *out, *out2;
	enum pdk_guard_verdict v = PDK_GUARD_PASS;
	size_t step, len, before;
	unsigned char *copy;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	g = pdk__guard_new(MAX_BODY, MAX_HEADERS);
	out = evbuffer_new();
	if (out == NULL)
		abort();
	for (size_t i = 0; i < size; i += step) {
		before = evbuffer_get_length(out);
		if (v != PDK_GUARD_PASS) {
			(void)pdk__guard_feed(g, (const char *)data + i,
					      size - i < step ? size - i : step, out);
			if (evbuffer_get_length(out) != before)
				abort(); /* bytes passed on after a refusal */
			continue;
		}
		v = pdk__guard_feed(g, (const char *)data + i, size - i < step ? size - i : step,
				    out);
	}
	if (v != PDK_GUARD_PASS)
		check_refusal(g);
	/* What evhttp would see must read cleanly: a guard of the same limits passes it. */
	/* (After a refusal, a stand-in may follow a request that ended the connection.) */
	len = evbuffer_get_length(out);
	copy = malloc(len + 1);
	if (copy == NULL || evbuffer_remove(out, copy, len) != (int)len)
		abort();
	again = pdk__guard_new(MAX_BODY, MAX_HEADERS);
	out2 = evbuffer_new();
	if (out2 == NULL)
		abort();
	if (pdk__guard_feed(again, (const char *)copy, len, out2) != PDK_GUARD_PASS &&
	    v == PDK_GUARD_PASS)
		abort();
	evbuffer_free(out2);
	pdk__guard_free(again);
	free(copy);
	evbuffer_free(out);
	pdk__guard_free(g);
	return 0;
}
