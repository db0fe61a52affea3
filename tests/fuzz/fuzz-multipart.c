/*
 * fuzz-multipart.c - libFuzzer target for the E2B front door's
 * multipart/form-data parser (src/e2b/e2b.h): upload bodies straight from
 * the network.
 *
 * The input's first line is the Content-Type, the rest the body. A body is
 * either accepted, every part lying inside it with a name, or refused with
 * a message and a field; nothing may crash, leak or read out of bounds.
 */
#include "common.h"
#include "e2b.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool inside(const char *p, size_t n, const char *body, size_t len)
{
	return p >= body && p + n <= body + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	struct pdk_e2b_part parts[8];
	struct pdk_error *err = NULL;
	char *ct, *body;
	size_t n = 0, len;
	int rc;

	if (nl == NULL)
		return 0;
	ct = strndup((const char *)data, (size_t)(nl - (const char *)data));
	len = size - (size_t)(nl - (const char *)data) - 1;
	/* The body in a buffer of its own size: a read past it is ASan's to see. */
	body = malloc(len ? len : 1);
	if (ct == NULL || body == NULL)
		abort();
	memcpy(body, nl + 1, len);
	rc = pdk_e2b_multipart_parse(ct, body, len, parts, 8, &n, &err);
	if (rc < 0 && (err == NULL || err->msg == NULL || err->field == NULL))
		abort();
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (n == 0 || !inside(parts[i].data, parts[i].len, body, len) ||
		    parts[i].name == NULL || !inside(parts[i].name, parts[i].name_len, body, len) ||
		    (parts[i].filename != NULL &&
		     !inside(parts[i].filename, parts[i].filename_len, body, len)))
			abort();
	}
	pdk_error_free(&err);
	free(body);
	free(ct);
	return 0;
}
