/*
 * test-mem.c - the start-up's pages given back (base/mem.h): the binary's
 * read-only pages leave the mapping, and nothing written since start-up
 * (relocated pointers, data, the heap) changes.
 */
#include "common.h"
#include "error.h"
#include "mem.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 MiB of read-only data in the file (one non-zero byte keeps it out of .bss). */
#define BIG (1u << 20)
static const uint8_t big[BIG] = {1, 2, 3};

/* Pointers the start-up relocated (RELRO in a PIE): dropped, they would read back as offsets. */
static const char *const names[] = {"alpha", "beta", "gamma"};
static int twice(int v)
{
	return 2 * v;
}
static int (*const table[])(int) = {twice};
static int counter = 7; /* written below, before the release */

/* Rss (KiB) of the mapping of this process that holds `addr`, from /proc/self/smaps. */
static long mapping_rss_kib(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	uintptr_t a = (uintptr_t)addr, lo = 0, hi = 0;
	bool inside = false;
	char line[512];
	long rss = -1;

	cr_assert_not_null(f);
	while (rss < 0 && fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2 && strchr(line, '-'))
			inside = a >= lo && a < hi;
		else if (inside && strncmp(line, "Rss:", 4) == 0)
			rss = strtol(line + 4, NULL, 10);
	}
	fclose(f);
	return rss;
}

static unsigned long sum_big(void)
{
	unsigned long s = 0;

	for (size_t i = 0; i < BIG; i++)
		s += ((const volatile uint8_t *)big)[i];
	return s;
}

static size_t release(void)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	size_t n = 0;

	cr_assert_eq(pdk_mem_release_startup(&n, &err), 0, "%s", err ? err->msg : "");
	return n;
}

Test(mem, read_only_pages_leave_the_mapping_and_read_back_the_same)
{
	cr_assert_eq(sum_big(), 6);
	cr_assert_geq(mapping_rss_kib(big), 1024, "the table was touched: all of it mapped");
	cr_assert_geq(release(), BIG, "at least the table's pages were advised away");
	cr_assert_lt(mapping_rss_kib(big), 512, "the table's pages left the mapping");
	cr_assert_eq(sum_big(), 6, "and read back from the page cache, unchanged");
	cr_assert_geq(release(), BIG, "a second call works too");
}

Test(mem, relocated_and_written_data_stay)
{
	char *heap = strdup("on the heap");

	counter++;
	(void)release();
	cr_assert_str_eq(names[0], "alpha");
	cr_assert_str_eq(names[2], "gamma");
	cr_assert_eq(table[0](21), 42, "a relocated function pointer still calls");
	cr_assert_eq(counter, 8, "a write to .data stays");
	cr_assert_str_eq(heap, "on the heap");
	free(heap);
}
