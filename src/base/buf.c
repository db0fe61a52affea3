/*
 * buf.c - the capped growable buffer (buf.h).
 */
#include "common.h"
#include "buf.h"
#include "util.h"

#include <string.h>

/* The first allocation: most buffers hold a line or a short value. */
#define BUF_FIRST 64

void pdk_buf_init(struct pdk_buf *b, size_t max)
{
	*b = (struct pdk_buf)PDK_BUF_INIT(max);
}

/*
 * Room for `n` more bytes and a NUL. The new size doubles (amortised
 * growth), but stops at max + 1: the cap bounds the memory, not only the
 * length. `max` above SIZE_MAX / 2 is taken as SIZE_MAX / 2, so that
 * max + 1 and the doubling cannot wrap.
 */
int pdk_buf_reserve(struct pdk_buf *b, size_t n)
{
	size_t max = b->max < SIZE_MAX / 2 ? b->max : SIZE_MAX / 2;
	size_t need, cap;

	if (b->len > max || n > max - b->len)
		return -E2BIG;
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap > BUF_FIRST / 2 ? b->cap * 2 : BUF_FIRST;
	if (cap < need)
		cap = need;
	if (cap > max + 1)
		cap = max + 1;
	b->p = pdk_xrealloc(b->p, cap);
	b->cap = cap;
	b->p[b->len] = '\0';
	return 0;
}

int pdk__buf_add_grow(struct pdk_buf *b, const void *data, size_t len)
{
	int rc = pdk_buf_reserve(b, len);

	if (rc < 0)
		return rc;
	if (len > 0)
		memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return 0;
}

int pdk_buf_addstr(struct pdk_buf *b, const char *s)
{
	return pdk_buf_add(b, s, strlen(s));
}

void pdk_buf_setlen(struct pdk_buf *b, size_t len)
{
	if (b->p == NULL && len == 0)
		return;
	if (b->p == NULL || len >= b->cap)
		pdk_bug("pdk_buf_setlen: a length past the buffer's room");
	b->len = len;
	b->p[len] = '\0';
}

void pdk_buf_reset(struct pdk_buf *b)
{
	pdk_buf_setlen(b, 0);
}

const char *pdk_buf_str(const struct pdk_buf *b)
{
	return b->p != NULL ? b->p : "";
}

char *pdk_buf_take(struct pdk_buf *b, size_t *len)
{
	char *p = b->p != NULL ? steal_ptr(&b->p) : pdk_xstrdup("");

	if (len != NULL)
		*len = b->len;
	b->len = b->cap = 0;
	return p;
}

void pdk_buf_release(struct pdk_buf *b)
{
	if (b == NULL)
		return;
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
