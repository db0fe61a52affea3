/*
 * fuzz-connect.c - libFuzzer target for the Connect protocol's framing in
 * the E2B front door (src/e2b/e2b.h): request bodies and headers straight
 * from the network.
 *
 * The first byte picks the parser (an enveloped streaming request, a unary
 * message, the Connect-Timeout-Ms value); the rest is the input. Each must
 * be accepted with its invariants holding (an object; a frame that
 * round-trips; a positive deadline), or refused with a message and a
 * field; nothing may crash, leak or read out of bounds.
 */
#include "common.h"
#include "e2b.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(int rc, struct pdk_error *err)
{
	if (rc < 0 && (err == NULL || err->msg == NULL || err->field == NULL))
		abort(); /* a refusal always says why, and names what */
	pdk_error_free(&err);
}

/* An accepted message, framed again and read back, is the same message. */
static void round_trip(const json_t *msg)
{
	struct pdk_error *err = NULL;
	json_t *again = NULL;
	size_t len;
	char *frame = pdk_e2b_connect_frame(0, msg, &len);

	if (pdk_e2b_connect_unframe(frame, len, len, &again, &err) < 0 || !json_equal(msg, again))
		abort();
	json_decref(again);
	free(frame);
}

static void fuzz_unframe(const char *b, size_t n)
{
	struct pdk_error *err = NULL;
	json_t *msg = NULL;
	int rc = pdk_e2b_connect_unframe(b, n, 4096, &msg, &err);

	if (rc == 0) {
		if (!json_is_object(msg))
			abort();
		round_trip(msg);
	}
	json_decref(msg);
	check_refusal(rc, err);
}

static void fuzz_unary(const char *b, size_t n)
{
	struct pdk_error *err = NULL;
	json_t *msg = NULL;
	int rc = pdk_e2b_connect_unary_msg(b, n, &msg, &err);

	if (rc == 0 && !json_is_object(msg))
		abort();
	json_decref(msg);
	check_refusal(rc, err);
}

static void fuzz_timeout(const char *b, size_t n)
{
	struct pdk_error *err = NULL;
	char *s = strndup(b, n);
	uint64_t ms = 0;
	int rc;

	if (s == NULL)
		abort();
	rc = pdk_e2b_connect_timeout(s, &ms, &err);
	if (rc == 0 && (ms == 0 || ms > 9999999999ULL))
		abort();
	free(s);
	check_refusal(rc, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *b = (const char *)data + 1;

	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_unframe(b, size - 1);
		break;
	case 1:
		fuzz_unary(b, size - 1);
		break;
	default:
		fuzz_timeout(b, size - 1);
		break;
	}
	return 0;
}
