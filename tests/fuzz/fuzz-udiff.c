/*
 * fuzz-udiff.c - libFuzzer target for the unified diff writer.
 *
 * The input is split at its first 0xff byte into the old and the new text.
 * The diff is applied back to the old text by a small applier here, which
 * checks every context and removed line against the old text; the result
 * must be the new text byte for byte. Equal texts must give no output.
 */
#include "common.h"
#include "udiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next line of s[*pos..len) (with its '\n'); false at the end. */
static bool next_line(const char *s, size_t len, size_t *pos, const char **l, size_t *ll)
{
	const char *nl;

	if (*pos >= len)
		return false;
	*l = s + *pos;
	nl = memchr(*l, '\n', len - *pos);
	*ll = nl ? (size_t)(nl - *l) + 1 : len - *pos;
	*pos += *ll;
	return true;
}

static void apply(const char *a, size_t alen, const char *d, size_t dlen, char *out, size_t *olen)
{
	size_t apos = 0, dpos = 0, aline = 0, n = 0;
	const char *l, *x;
	size_t ll, xl;
	char *last = NULL; /* where the last written line ends, to drop its '\n' */

	if (!next_line(d, dlen, &dpos, &l, &ll) || strncmp(l, "--- ", 4) != 0 ||
	    !next_line(d, dlen, &dpos, &l, &ll) || strncmp(l, "+++ ", 4) != 0)
		abort();
	while (next_line(d, dlen, &dpos, &l, &ll)) {
		if (l[0] == '@') {
			unsigned long start, count = 1;

			if (sscanf(l, "@@ -%lu,%lu", &start, &count) < 1)
				abort();
			/* An empty old range names the line before it; else its first line. */
			if (count > 0) {
				if (start == 0)
					abort();
				start--;
			}
			while (aline < start) { /* unchanged lines between hunks */
				if (!next_line(a, alen, &apos, &x, &xl))
					abort();
				memcpy(out + n, x, xl);
				n += xl;
				aline++;
			}
		} else if (l[0] == ' ' || l[0] == '-') {
			if (!next_line(a, alen, &apos, &x, &xl))
				abort();
			aline++;
			/* The diff line is the old line plus its tag (and maybe a marker after). */
			if (ll - 1 < xl - (x[xl - 1] == '\n' ? 1 : 0) ||
			    memcmp(l + 1, x, xl - (x[xl - 1] == '\n')) != 0)
				abort();
			if (l[0] == ' ') {
				memcpy(out + n, x, xl);
				n += xl;
				last = x[xl - 1] == '\n' ? NULL : out + n;
			}
		} else if (l[0] == '+') {
			memcpy(out + n, l + 1, ll - 1);
			n += ll - 1;
			last = out + n;
		} else if (l[0] == '\\') {
			/* the line before had no newline: the one we wrote for it goes */
			if (n > 0 && out[n - 1] == '\n' && last == out + n)
				n--;
		} else {
			abort();
		}
	}
	while (next_line(a, alen, &apos, &x, &xl)) {
		memcpy(out + n, x, xl);
		n += xl;
	}
	*olen = n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *cut = memchr(data, 0xff, size);
	size_t alen = cut ? (size_t)(cut - data) : size;
	const char *a = (const char *)data, *b = cut ? (const char *)cut + 1 : "";
	size_t blen = cut ? size - alen - 1 : 0;
	char *d = NULL, *out;
	size_t dlen = 0, olen = 0;
	FILE *f = open_memstream(&d, &dlen);
	int rc;

	if (f == NULL)
		abort();
	rc = pdk_udiff(f, "a/f", a, alen, "b/f", b, blen, (unsigned)(size % 4));
	if (fclose(f) != 0 || rc < 0)
		abort();
	if (rc == 0) {
		if (dlen != 0 || alen != blen || memcmp(a, b, alen) != 0)
			abort();
	} else {
		out = malloc(alen + dlen + 1);
		if (out == NULL)
			abort();
		apply(a, alen, d, dlen, out, &olen);
		if (olen != blen || memcmp(out, b, blen) != 0)
			abort();
		free(out);
	}
	free(d);
	return 0;
}
