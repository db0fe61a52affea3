/*
 * fuzz-tarcheck.c - libFuzzer target for the check of an uploaded tar
 * archive (control/tarcheck.c): bytes straight from a client's PUT body.
 *
 * Invariants: nothing crashes, reads past the buffer or leaks; a refusal is
 * -EPERM or -EINVAL with an error that blames the "body"; an archive the
 * check passed passes it again unchanged (the check is idempotent: what it
 * wrote, set-id bits cleared and checksums recomputed, is what it accepts).
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(int rc, const struct pdk_error *err)
{
	if ((rc != -EPERM && rc != -EINVAL) || err == NULL || err->field == NULL ||
	    strcmp(err->field, "body") != 0 || err->msg == NULL || err->msg[0] == '\0')
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdk_error *err = NULL;
	char *buf = malloc(size + 1), *again;
	int rc;

	if (buf == NULL)
		abort();
	memcpy(buf, data, size);
	rc = pdk__tar_sanitize(buf, size, &err);
	if (rc < 0) {
		check_refusal(rc, err);
		pdk_error_free(&err);
		free(buf);
		return 0;
	}
	if (rc != 0 || err != NULL)
		abort();
	again = malloc(size + 1);
	if (again == NULL)
		abort();
	memcpy(again, buf, size);
	if (pdk__tar_sanitize(again, size, &err) != 0 || memcmp(again, buf, size) != 0)
		abort();
	free(again);
	free(buf);
	return 0;
}
