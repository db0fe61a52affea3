/*
 * fuzz-dns.c - libFuzzer target for the sandbox's name server
 * (src/engine/dns.h): a datagram any process of the sandbox can send.
 *
 * Invariants: nothing reads or writes out of bounds; an answer is at most
 * PDK_DNS_MAX bytes, at least a header, echoes the query's id, has QR set
 * and RCODE NXDOMAIN, and carries no record; a recorded name is a plain
 * lower-case host name that fits its buffer.
 */
#include "common.h"
#include "dns.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name)
{
	size_t len = strnlen(name, PDK_DNS_NAME_MAX);

	if (len == PDK_DNS_NAME_MAX)
		abort();
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		      c == '.'))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *q = malloc(size ? size : 1), out[PDK_DNS_MAX];
	char name[PDK_DNS_NAME_MAX];
	ssize_t n;

	if (q == NULL)
		abort();
	memcpy(q, data, size);
	memset(name, 'x', sizeof(name));
	n = pdk_dns_answer(q, size, out, name);
	if (n < 0) {
		if (n != -1)
			abort();
		free(q);
		return 0;
	}
	if (n < 12 || n > PDK_DNS_MAX || size < 12)
		abort();
	if (out[0] != q[0] || out[1] != q[1] || !(out[2] & 0x80) || (out[3] & 0x0f) != 3)
		abort();
	if (out[6] != 0 || out[7] != 0 || out[8] != 0 || out[9] != 0 || out[10] != 0 ||
	    out[11] != 0)
		abort();
	check_name(name);
	free(q);
	return 0;
}
