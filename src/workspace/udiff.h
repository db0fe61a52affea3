/*
 * udiff.h - unified diffs of two texts, for `paddock ws diff --patch`.
 */
#ifndef PDK_UDIFF_H
#define PDK_UDIFF_H

#include "common.h"

#include <stdio.h>

/*
 * Write a unified diff of a[0..alen) and b[0..blen) to `out`, with
 * `context` lines of context, under "--- a_label" / "+++ b_label" (for an
 * added file pass "/dev/null" and alen 0). A last line without a newline
 * gets "\ No newline at end of file"; other bytes are lines like any other.
 * The shortest edit script (Myers) is used up to PDK_UDIFF_MAX_EDITS edits;
 * beyond that the changed middle is shown as one replacement, so time and
 * memory stay bounded on hostile input. The output applies with `patch`.
 * Returns 0 when the texts are equal (nothing written), 1 when a diff was
 * written, -errno when writing failed.
 */
#define PDK_UDIFF_MAX_EDITS 4096
int pdk_udiff(FILE *out, const char *a_label, const char *a, size_t alen, const char *b_label,
	      const char *b, size_t blen, unsigned context);

/* Does the buffer look binary (a NUL byte in its first 8000 bytes)? */
bool pdk_udiff_is_binary(const char *p, size_t n);

#endif
