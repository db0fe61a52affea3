/*
 * buf.h - a growable byte buffer with a hard cap (curl's dynbuf).
 *
 * Every buffer that holds bytes from outside (a response, an SSE line, a
 * string read from a traced process, a record built from an event) grows
 * up to `max` bytes and no further: an append past the cap fails with
 * -E2BIG instead of allocating, so "abort on OOM" never becomes a denial of
 * service that a peer can trigger. Growth is geometric (amortised O(1) per
 * byte) and never allocates more than max + 1 bytes.
 *
 * Once any byte was added, `p` holds `len` bytes followed by a NUL, so a
 * text buffer is a C string as it stands (pdk_buf_str()); the bytes may
 * hold NULs of their own. The fields may be read; only these functions
 * change them.
 */
#ifndef PDK_BUF_H
#define PDK_BUF_H

#include "common.h"

#include <string.h>

struct pdk_buf {
	char *p;    /* owned; NULL until the first byte (or reserve) */
	size_t len; /* bytes held, never more than max */
	size_t cap; /* bytes allocated at p (0, or at least len + 1) */
	size_t max; /* the hard cap on len, set at creation */
};

/* A static initialiser: an empty buffer that holds at most `m` bytes. */
#define PDK_BUF_INIT(m)                                   \
	{                                                 \
		.p = NULL, .len = 0, .cap = 0, .max = (m) \
	}

/* Make `b` an empty buffer of at most `max` bytes. Allocates nothing. */
void pdk_buf_init(struct pdk_buf *b, size_t max);

/* pdk_buf_add() when the bytes do not fit the memory already there. */
PDK_MUST_CHECK int pdk__buf_add_grow(struct pdk_buf *b, const void *data, size_t len);

/*
 * Append `len` bytes of `data` (which may hold NULs). 0, or -E2BIG when
 * the buffer would pass its cap: then nothing is appended. Aborts on OOM
 * like pdk_xmalloc(). Inline for the common case, where the bytes fit
 * (the redaction of every event string appends character by character):
 * cap never passes max + 1, so fitting in cap is within the cap.
 */
PDK_MUST_CHECK static inline int pdk_buf_add(struct pdk_buf *b, const void *data, size_t len)
{
	if (b->cap - b->len <= len) /* cap is 0, or at least len + 1 */
		return pdk__buf_add_grow(b, data, len);
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return 0;
}

/* pdk_buf_add() of a C string without its NUL. */
PDK_MUST_CHECK int pdk_buf_addstr(struct pdk_buf *b, const char *s);

/*
 * Make room for `n` more bytes (and the NUL after them) without adding
 * any, for a caller that writes into p + len itself (a read(), a
 * serialiser) and then calls pdk_buf_setlen(). 0, or -E2BIG when len + n
 * would pass the cap (nothing changes).
 */
PDK_MUST_CHECK int pdk_buf_reserve(struct pdk_buf *b, size_t n);

/* How many bytes may be written at p + len without another reserve. */
static inline size_t pdk_buf_room(const struct pdk_buf *b)
{
	return b->cap > b->len ? b->cap - b->len - 1 : 0;
}

/*
 * Set the length to `len` and write the NUL after it: to drop a tail
 * (len <= b->len) or to take in bytes written into reserved room
 * (len <= b->len + pdk_buf_room(b)). A length beyond that is a bug.
 */
void pdk_buf_setlen(struct pdk_buf *b, size_t len);

/* Empty the buffer, keeping its memory and its cap. */
void pdk_buf_reset(struct pdk_buf *b);

/* The bytes as a C string (borrowed; "" when nothing was added). */
const char *pdk_buf_str(const struct pdk_buf *b);

/*
 * Take the bytes: returns them NUL-terminated (caller frees; never NULL:
 * an empty buffer gives a new ""), with their length in *len (may be
 * NULL). The buffer is left empty, with its cap, ready for reuse.
 */
char *pdk_buf_take(struct pdk_buf *b, size_t *len);

/* Free the memory; the buffer is empty, with its cap. NULL-safe. */
void pdk_buf_release(struct pdk_buf *b);

static inline void pdk__cleanup_buf(struct pdk_buf *b)
{
	pdk_buf_release(b);
}
#define _cleanup_buf_ __attribute__((cleanup(pdk__cleanup_buf)))

#endif
