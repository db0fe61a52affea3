/*
 * The unified diff writer against GNU diff: exact output on plain cases,
 * and on random ones the property that matters, that `patch` turns the old
 * text into the new one with our output.
 */
#include "common.h"
#include "udiff.h"
#include "util.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *run_udiff(const char *a, const char *b, unsigned ctx, int *rc)
{
	struct pdk_test_text t;

	*rc = pdk_udiff(pdk_test_text_open(&t), "a/f", a, strlen(a), "b/f", b, strlen(b), ctx);
	return pdk_test_text_take(&t);
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(s, f);
	fclose(f);
}

static char *gnu_diff(const char *a, const char *b)
{
	char dir[] = "/tmp/pdk-udiff-XXXXXX";
	char cmd[256];
	char *out = NULL;
	struct pdk_error *err = NULL;

	cr_assert_not_null(mkdtemp(dir));
	write_file(pdk_test_path(dir, "a"), a);
	write_file(pdk_test_path(dir, "b"), b);
	snprintf(cmd, sizeof(cmd), "cd %s && diff -u --label a/f --label b/f a b > out", dir);
	cr_assert_neq(system(cmd), -1);
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, pdk_test_path(dir, "out"), 1 << 24, &out, &err), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	return out;
}

static void same_as_gnu(const char *a, const char *b)
{
	int rc;
	char *mine = run_udiff(a, b, 3, &rc);
	char *theirs = gnu_diff(a, b);

	cr_assert_str_eq(mine, theirs, "a:\n%s\nb:\n%s", a, b);
	cr_assert_eq(rc, strcmp(a, b) != 0 ? 1 : 0);
	free(mine);
	free(theirs);
}

Test(udiff, equal_texts_print_nothing)
{
	int rc;
	char *s = run_udiff("x\ny\n", "x\ny\n", 3, &rc);

	cr_assert_eq(rc, 0);
	cr_assert_str_eq(s, "");
	free(s);
}

Test(udiff, plain_cases_match_gnu_diff)
{
	same_as_gnu("", "one\ntwo\n");
	same_as_gnu("one\ntwo\n", "");
	same_as_gnu("a\nb\nc\n", "a\nB\nc\n");
	same_as_gnu("a\nb\nc\n", "z\na\nb\nc\n");
	same_as_gnu("a\nb\nc\n", "a\nb\nc\nd\n");
	same_as_gnu("a\nb\nc\n", "a\nc\n");
	same_as_gnu("a\nb", "a\nb\n");
	same_as_gnu("a\nb\n", "a\nb");
	same_as_gnu("a\nb", "a\nc");
	same_as_gnu("a\r\nb\r\n", "a\r\nc\r\n");
	same_as_gnu("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n",
		    "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\nY\n16\n");
	same_as_gnu("1\n2\n3\n4\n5\n6\n7\n8\n", "1\nX\n3\n4\n5\n6\n7\nY\n"); /* hunks merge */
}

Test(udiff, context_zero_and_one)
{
	int rc;
	char *s = run_udiff("a\nb\nc\nd\n", "a\nB\nc\nd\n", 0, &rc);

	cr_assert_str_eq(s, "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n");
	free(s);
	s = run_udiff("a\nb\nc\nd\n", "a\nb\nc\nd\ne\n", 1, &rc);
	cr_assert_str_eq(s, "--- a/f\n+++ b/f\n@@ -4 +4,2 @@\n d\n+e\n");
	free(s);
}

/* A random text of `n` lines from a tiny alphabet (many equal lines: hard cases). */
static char *random_text(unsigned *seed, size_t n)
{
	char *s = pdk_xmalloc(n * 3 + 2);
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		s[w++] = (char)('a' + rand_r(seed) % 4);
		s[w++] = '\n';
	}
	if (n > 0 && rand_r(seed) % 5 == 0)
		w--; /* no newline at the end */
	s[w] = '\0';
	return s;
}

Test(udiff, random_pairs_apply_with_patch, .timeout = 120)
{
	unsigned seed = 20261122;
	char dir[] = "/tmp/pdk-udiff-XXXXXX";
	struct pdk_error *err = NULL;

	cr_assert_not_null(mkdtemp(dir));
	for (int round = 0; round < 300; round++) {
		char *a = random_text(&seed, (size_t)(rand_r(&seed) % 40));
		char *b = random_text(&seed, (size_t)(rand_r(&seed) % 40));
		int rc;
		char *p = run_udiff(a, b, (unsigned)(rand_r(&seed) % 4), &rc);
		char cmd[512];
		char *patched = NULL;

		write_file(pdk_test_path(dir, "f"), a);
		write_file(pdk_test_path(dir, "p"), p);
		snprintf(cmd, sizeof(cmd), "cd %s && patch -s -p1 -i p f >/dev/null 2>&1", dir);
		if (rc == 1)
			cr_assert_eq(system(cmd), 0, "patch failed (round %d):\n%s", round, p);
		cr_assert_eq(pdk_read_file_at(AT_FDCWD, pdk_test_path(dir, "f"), 1 << 20, &patched,
					      &err),
			     0);
		cr_assert_str_eq(patched, b, "round %d:\na:\n%s\nb:\n%s\npatch:\n%s", round, a, b,
				 p);
		free(patched);
		free(p);
		free(a);
		free(b);
	}
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
}

Test(udiff, long_files_and_the_edit_bound, .timeout = 60)
{
	size_t n = 10000;
	char *a = pdk_xmalloc(n * 8 + 1), *b = pdk_xmalloc(n * 8 + 1);
	size_t wa = 0, wb = 0;
	int rc;
	char *p;

	for (size_t i = 0; i < n; i++) {
		wa += (size_t)sprintf(a + wa, "%06zu\n", i);
		/* Every 97th line changed: about 200 edits. */
		wb += (size_t)sprintf(b + wb, i % 97 == 0 ? "x%05zu\n" : "%06zu\n", i);
	}
	p = run_udiff(a, b, 3, &rc);
	cr_assert_eq(rc, 1);
	{
		char *g = gnu_diff(a, b);

		cr_assert_str_eq(p, g);
		free(g);
	}
	free(p);
	/* Completely different texts need more edits than the bound: one replacement. */
	for (size_t i = 0; i < wb; i++)
		if (b[i] != '\n')
			b[i] = 'y';
	p = run_udiff(a, b, 3, &rc);
	cr_assert_eq(rc, 1);
	cr_assert(strstr(p, "@@ -1,10000 +1,10000 @@\n") != NULL);
	free(p);
	free(a);
	free(b);
}

Test(udiff, binary_detection)
{
	cr_assert(pdk_udiff_is_binary("ab\0cd", 5));
	cr_assert_not(pdk_udiff_is_binary("abcd\n", 5));
}
