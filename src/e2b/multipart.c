/*
 * multipart.c - multipart/form-data bodies (RFC 7578) as E2B's SDKs upload
 * files to envd's POST /files: each part's name, filename and bytes, found
 * in place (nothing copied), every size capped.
 */
#include "common.h"
#include "e2b.h"

#include <string.h>

#define BOUNDARY_MAX 70   /* RFC 2046 */
#define HEADERS_MAX  8192 /* one part's header block */

/* The boundary parameter of a multipart/form-data Content-Type, into out (NUL-terminated). */
static int boundary_of(const char *ct, char out[BOUNDARY_MAX + 1], struct pdk_error **err)
{
	const char *b = ct ? strcasestr(ct, "boundary=") : NULL;
	size_t n;

	if (ct == NULL || strncasecmp(ct, "multipart/form-data", 19) != 0 || b == NULL)
		return pdk_error_set_field(err, EINVAL, "Content-Type",
					   "Content-Type must be multipart/form-data with a "
					   "boundary");
	b += 9;
	if (*b == '"') {
		b++;
		n = strcspn(b, "\"");
		if (b[n] != '"')
			return pdk_error_set_field(err, EINVAL, "Content-Type",
						   "the boundary's quote is not closed");
	} else {
		n = strcspn(b, "; \t");
	}
	if (n == 0 || n > BOUNDARY_MAX)
		return pdk_error_set_field(err, EINVAL, "Content-Type",
					   "the boundary must be 1 to %d characters", BOUNDARY_MAX);
	memcpy(out, b, n);
	out[n] = '\0';
	return 0;
}

/* memmem() that names what it looks for. */
static const char *find(const char *hay, size_t len, const char *needle, size_t nlen)
{
	return memmem(hay, len, needle, nlen);
}

/*
 * A parameter `key` (name, filename) of a Content-Disposition header value
 * `v` of `len` bytes: *out points into it (borrowed), *olen its length.
 * Quoted strings end at the next quote (browsers and the SDKs escape a quote
 * in a name as %22).
 */
static bool param(const char *v, size_t len, const char *key, const char **out, size_t *olen)
{
	size_t klen = strlen(key);

	for (size_t i = 0; i + klen + 1 < len; i++) {
		const char *p = v + i, *end;

		if ((i > 0 && p[-1] != ';' && p[-1] != ' ' && p[-1] != '\t') ||
		    strncasecmp(p, key, klen) != 0 || p[klen] != '=')
			continue;
		p += klen + 1;
		if (p < v + len && *p == '"') {
			end = memchr(p + 1, '"', (size_t)(v + len - p - 1));
			if (end == NULL)
				return false;
			*out = p + 1;
			*olen = (size_t)(end - p - 1);
		} else {
			end = p;
			while (end < v + len && *end != ';')
				end++;
			*out = p;
			*olen = (size_t)(end - p);
		}
		return true;
	}
	return false;
}

/* The part's Content-Disposition: form-data with its name and filename. */
static int disposition(const char *h, size_t hlen, struct pdk_e2b_part *part,
		       struct pdk_error **err)
{
	for (const char *line = h; line < h + hlen;) {
		const char *eol = find(line, (size_t)(h + hlen - line), "\r\n", 2);
		size_t llen = eol ? (size_t)(eol - line) : (size_t)(h + hlen - line);

		if (llen > 20 && strncasecmp(line, "Content-Disposition:", 20) == 0) {
			if (!param(line + 20, llen - 20, "name", &part->name, &part->name_len))
				return pdk_error_set_field(err, EINVAL, "body",
							   "a part's Content-Disposition has no "
							   "name");
			(void)param(line + 20, llen - 20, "filename", &part->filename,
				    &part->filename_len);
			return 0;
		}
		line += llen + 2;
	}
	return pdk_error_set_field(err, EINVAL, "body", "a part has no Content-Disposition");
}

int pdk_e2b_multipart_parse(const char *content_type, const char *body, size_t len,
			    struct pdk_e2b_part *parts, size_t max_parts, size_t *n,
			    struct pdk_error **err)
{
	char b[BOUNDARY_MAX + 5] = "\r\n--";
	size_t blen;
	const char *p, *end = body + len;

	*n = 0;
	if (boundary_of(content_type, b + 4, err) < 0)
		return -EINVAL;
	blen = strlen(b);
	/* The first delimiter may start the body (no CRLF before it) or follow a preamble. */
	if (len >= blen - 2 && memcmp(body, b + 2, blen - 2) == 0)
		p = body + blen - 2;
	else if ((p = find(body, len, b, blen)) != NULL)
		p += blen;
	else
		return pdk_error_set_field(err, EINVAL, "body", "the body holds no part");
	for (;;) {
		const char *hend, *next;
		struct pdk_e2b_part part = {0};

		if (end - p >= 2 && memcmp(p, "--", 2) == 0)
			return *n > 0 ? 0
				      : pdk_error_set_field(err, EINVAL, "body",
							    "the body holds no part");
		if (end - p < 2 || memcmp(p, "\r\n", 2) != 0)
			return pdk_error_set_field(err, EINVAL, "body",
						   "a delimiter is not followed by CRLF");
		p += 2;
		hend = find(p, (size_t)(end - p) < HEADERS_MAX ? (size_t)(end - p) : HEADERS_MAX,
			    "\r\n\r\n", 4);
		if (hend == NULL)
			return pdk_error_set_field(err, EINVAL, "body",
						   "a part's headers do not end within %d bytes",
						   HEADERS_MAX);
		if (disposition(p, (size_t)(hend - p) + 2, &part, err) < 0)
			return -EINVAL;
		p = hend + 4;
		next = find(p, (size_t)(end - p), b, blen);
		if (next == NULL)
			return pdk_error_set_field(err, EINVAL, "body",
						   "the body ends inside a part");
		if (*n == max_parts)
			return pdk_error_set_field(err, E2BIG, "body",
						   "more than %zu parts in one upload", max_parts);
		part.data = p;
		part.len = (size_t)(next - p);
		parts[(*n)++] = part;
		p = next + blen;
	}
}
