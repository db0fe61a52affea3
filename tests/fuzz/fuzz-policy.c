/*
 * fuzz-policy.c - libFuzzer target for the profile parser.
 *
 * Every input goes through pdk_policy_parse(); whatever parses is dumped,
 * parsed again and dumped again, and the two dumps must be identical (the
 * dump is a fixed point). Everything is freed so LeakSanitizer sees leaks.
 * Built with replay.c for corpus replay in the normal test run, and with
 * `clang -fsanitize=fuzzer,address` for real fuzzing (docs/internals/policy.md).
 */
#include "common.h"
#include "error.h"
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The dump of `p` (caller frees), or NULL. */
static char *dump(const struct pdk_policy *p)
{
	struct pdk_error *err = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rc;

	if (f == NULL)
		abort();
	rc = pdk_policy_dump(p, f, &err);
	if (fclose(f) != 0)
		abort();
	if (rc < 0) {
		/* Everything the parser accepts must be writable. */
		fprintf(stderr, "dump failed: %s\n", err->msg);
		abort();
	}
	return buf;
}

static void check_round_trip(const struct pdk_policy *p)
{
	struct pdk_policy_report r = {0};
	struct pdk_error *err = NULL;
	char *first = dump(p);
	struct pdk_policy *q = pdk_policy_parse("dump.yaml", first, strlen(first), &r, &err);
	char *second;

	if (q == NULL) {
		fprintf(stderr, "the dump does not parse (%s):\n%s", err->msg, first);
		pdk_policy_report_print(&r, stderr);
		abort();
	}
	second = dump(q);
	if (strcmp(first, second) != 0) {
		fprintf(stderr, "dump is not a fixed point:\n%s---\n%s", first, second);
		abort();
	}
	free(first);
	free(second);
	pdk_policy_free(q);
	pdk_policy_report_release(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdk_policy_report r = {0};
	struct pdk_error *err = NULL;
	struct pdk_policy *p = pdk_policy_parse("fuzz.yaml", (const char *)data, size, &r, &err);
	FILE *devnull = fopen("/dev/null", "w");

	if ((p == NULL) != (err != NULL))
		abort();
	if (devnull != NULL) {
		pdk_policy_report_print(&r, devnull);
		(void)fclose(devnull);
	}
	if (p != NULL) {
		struct pdk_policy *d = pdk_policy_dup(p);

		check_round_trip(p);
		pdk_policy_free(d);
	}
	pdk_policy_free(p);
	pdk_policy_report_release(&r);
	pdk_error_free(&err);
	return 0;
}
