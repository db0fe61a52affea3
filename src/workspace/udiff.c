/*
 * udiff.c - unified diff: lines, common prefix and suffix trimmed, Myers'
 * greedy shortest-edit-script search on the middle with a bound on the
 * number of edits, then hunks with context.
 */
#include "common.h"
#include "base.h"
#include "udiff.h"

#include <string.h>

struct line {
	const char *p;
	size_t len; /* with its '\n', if any */
	uint64_t hash;
};

struct text {
	struct line *v;
	size_t n;
};

static void split_lines(const char *s, size_t len, struct text *t)
{
	size_t cap = 16;

	t->v = pdk_xmalloc(cap * sizeof(*t->v));
	t->n = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(s + i, '\n', len - i);
		size_t l = nl ? (size_t)(nl - (s + i)) + 1 : len - i;
		uint64_t h = 1469598103934665603ULL;

		for (size_t k = 0; k < l; k++)
			h = (h ^ (unsigned char)s[i + k]) * 1099511628211ULL;
		if (t->n == cap) {
			cap *= 2;
			t->v = pdk_xrealloc(t->v, cap * sizeof(*t->v));
		}
		t->v[t->n++] = (struct line){s + i, l, h};
		i += l;
	}
}

static bool same(const struct line *x, const struct line *y)
{
	return x->hash == y->hash && x->len == y->len && memcmp(x->p, y->p, x->len) == 0;
}

/*
 * Mark the lines of a[0..n) deleted and of b[0..m) inserted along a shortest
 * edit script. false when it needs more than `max` edits (nothing marked).
 */
static bool myers(const struct line *a, size_t n, const struct line *b, size_t m, size_t max,
		  bool *del, bool *ins)
{
	size_t dmax = n + m < max ? n + m : max;
	size_t width = 2 * dmax + 3; /* k from -dmax-1 to dmax+1 */
	long *v = pdk_xcalloc(width, sizeof(long));
	long **trace = pdk_xcalloc(dmax + 1, sizeof(long *));
	long off = (long)dmax + 1;
	long found = -1;

	for (long d = 0; d <= (long)dmax && found < 0; d++) {
		for (long k = -d; k <= d; k += 2) {
			long x, y;

			if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
				x = v[off + k + 1]; /* down: an insertion */
			else
				x = v[off + k - 1] + 1; /* right: a deletion */
			y = x - k;
			while (x < (long)n && y < (long)m && same(&a[x], &b[y])) {
				x++;
				y++;
			}
			v[off + k] = x;
			if (x >= (long)n && y >= (long)m) {
				found = d;
				break;
			}
		}
		trace[d] = pdk_xmalloc(width * sizeof(long));
		memcpy(trace[d], v, width * sizeof(long));
	}
	if (found >= 0) {
		long x = (long)n, y = (long)m;

		for (long d = found; d > 0; d--) {
			const long *pv = trace[d - 1];
			long k = x - y, pk, px, py;

			if (k == -d || (k != d && pv[off + k - 1] < pv[off + k + 1]))
				pk = k + 1;
			else
				pk = k - 1;
			px = pv[off + pk];
			py = px - pk;
			while (x > px && y > py) { /* the diagonal: equal lines */
				x--;
				y--;
			}
			if (pk == k + 1)
				ins[--y] = true;
			else
				del[--x] = true;
		}
	}
	for (size_t d = 0; d <= dmax; d++)
		free(trace[d]);
	free(trace);
	free(v);
	return found >= 0;
}

static void put_line(FILE *out, char tag, const struct line *l)
{
	fputc(tag, out);
	fwrite(l->p, 1, l->len, out);
	if (l->len == 0 || l->p[l->len - 1] != '\n')
		fputs("\n\\ No newline at end of file\n", out);
}

/* "l,s" as diff -u writes it: ",s" only when s != 1; an empty range starts one line earlier. */
static void put_range(FILE *out, size_t start, size_t count)
{
	if (count == 1)
		fprintf(out, "%zu", start + 1);
	else
		fprintf(out, "%zu,%zu", count ? start + 1 : start, count);
}

int pdk_udiff(FILE *out, const char *a_label, const char *a, size_t alen, const char *b_label,
	      const char *b, size_t blen, unsigned context)
{
	struct text ta, tb;
	bool *del, *ins;
	size_t pre = 0, suf = 0, i = 0, j = 0;
	bool any = false;

	split_lines(a, alen, &ta);
	split_lines(b, blen, &tb);
	del = pdk_xcalloc(ta.n + 1, sizeof(bool));
	ins = pdk_xcalloc(tb.n + 1, sizeof(bool));
	while (pre < ta.n && pre < tb.n && same(&ta.v[pre], &tb.v[pre]))
		pre++;
	while (suf < ta.n - pre && suf < tb.n - pre &&
	       same(&ta.v[ta.n - 1 - suf], &tb.v[tb.n - 1 - suf]))
		suf++;
	if (!myers(ta.v + pre, ta.n - pre - suf, tb.v + pre, tb.n - pre - suf, PDK_UDIFF_MAX_EDITS,
		   del + pre, ins + pre)) {
		for (size_t k = pre; k < ta.n - suf; k++)
			del[k] = true;
		for (size_t k = pre; k < tb.n - suf; k++)
			ins[k] = true;
	}
	/* Walk both texts; i and j advance together over equal lines. */
	while (i < ta.n || j < tb.n) {
		size_t hi, hj, ei, ej, gap;

		if (i < ta.n && j < tb.n && !del[i] && !ins[j]) {
			i++;
			j++;
			continue;
		}
		/* A change starts at (i, j): the hunk starts `context` lines before. */
		hi = i > context ? i - context : 0;
		hj = j - (i - hi);
		ei = i;
		ej = j;
		/*
		 * Take the change, then the equal lines after it: when another
		 * change follows within 2*context of them, it joins this hunk;
		 * else `context` of them close the hunk.
		 */
		for (;;) {
			bool more;

			while (ei < ta.n && del[ei])
				ei++;
			while (ej < tb.n && ins[ej])
				ej++;
			gap = 0;
			while (ei + gap < ta.n && ej + gap < tb.n && !del[ei + gap] &&
			       !ins[ej + gap])
				gap++;
			more = ei + gap < ta.n || ej + gap < tb.n;
			if (more && gap <= 2 * (size_t)context) {
				ei += gap;
				ej += gap;
				continue;
			}
			gap = gap < context ? gap : context;
			ei += gap;
			ej += gap;
			break;
		}
		if (!any) {
			fprintf(out, "--- %s\n+++ %s\n", a_label, b_label);
			any = true;
		}
		fputs("@@ -", out);
		put_range(out, hi, ei - hi);
		fputs(" +", out);
		put_range(out, hj, ej - hj);
		fputs(" @@\n", out);
		while (hi < ei || hj < ej) {
			if (hi < ei && hj < ej && !del[hi] && !ins[hj]) {
				put_line(out, ' ', &ta.v[hi++]);
				hj++;
				continue;
			}
			while (hi < ei && del[hi])
				put_line(out, '-', &ta.v[hi++]);
			while (hj < ej && ins[hj])
				put_line(out, '+', &tb.v[hj++]);
		}
		i = ei;
		j = ej;
	}
	free(del);
	free(ins);
	free(ta.v);
	free(tb.v);
	if (ferror(out))
		return -EIO;
	return any ? 1 : 0;
}

bool pdk_udiff_is_binary(const char *p, size_t n)
{
	return memchr(p, '\0', n < 8000 ? n : 8000) != NULL;
}
