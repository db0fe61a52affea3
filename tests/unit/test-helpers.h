/*
 * test-helpers.h - what several unit suites share: the text a function
 * writes to a FILE, caught as a string, paths under a test's directory
 * that need no freeing around asserts, and the count of open descriptors.
 *
 * Each suite is an executable of its own (tests/meson.build), so these are
 * static inline functions a suite includes rather than a library.
 */
#ifndef PDK_TEST_HELPERS_H
#define PDK_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>

/* A stream whose text is kept: pdk_test_text_open(), write to ->f, pdk_test_text_take(). */
struct pdk_test_text {
	char *buf;
	size_t len;
	FILE *f;
};

static inline FILE *pdk_test_text_open(struct pdk_test_text *t)
{
	t->buf = NULL;
	t->len = 0;
	t->f = open_memstream(&t->buf, &t->len);
	cr_assert_not_null(t->f);
	return t->f;
}

/* Close the stream; the text written to it (caller frees). */
static inline char *pdk_test_text_take(struct pdk_test_text *t)
{
	cr_assert_eq(fclose(t->f), 0);
	t->f = NULL;
	return t->buf;
}

/* "dir/rel" in one of four static buffers used in turn (nothing to free in an assert). */
static inline const char *pdk_test_path(const char *dir, const char *rel)
{
	static char bufs[4][512];
	static unsigned i;
	char *b = bufs[i++ % 4];

	(void)snprintf(b, sizeof(bufs[0]), "%s/%s", dir, rel);
	return b;
}

/* How many descriptors this process has open (/proc/self/fd, less the listing's own). */
static inline int pdk_test_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	cr_assert_not_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n - 3; /* ".", ".." and the directory's own */
}

#endif
