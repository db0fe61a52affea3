/*
 * tarcheck.c - an uploaded tar archive made safe to unpack on a sandbox's
 * behalf before tar inside the sandbox sees it (pdk__tar_sanitize()).
 *
 * The walk reads the headers of the ustar, GNU and pax formats: each
 * member is a 512-byte header, then its data rounded up to 512 bytes. What
 * changes a member's data size besides the header's own field is followed
 * too: a pax extended header's "size" record (for the next member), the
 * extension blocks of an old GNU sparse member. Anything the walk cannot
 * read (a bad checksum, a size past the end, compressed bytes) is refused:
 * what is not understood is not let through.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BLOCK 512

/* Header fields: offset and length (POSIX ustar; GNU's sparse fields). */
#define F_NAME       0
#define F_NAME_LEN   100
#define F_MODE       100
#define F_MODE_LEN   8
#define F_SIZE       124
#define F_SIZE_LEN   12
#define F_CHK        148
#define F_CHK_LEN    8
#define F_TYPE       156
#define GNU_EXTENDED 482 /* old GNU sparse: extension blocks follow */
#define EXT_EXTENDED 504 /* in an extension block: another one follows */

/* An octal field (NUL- or space-terminated), or base-256 (GNU) when its high bit is set. */
static int field_num(const unsigned char *f, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		if (f[0] != 0x80) /* negative or too large */
			return -1;
		for (i = 1; i < len; i++) {
			if (v >> 56)
				return -1;
			v = (v << 8) | f[i];
		}
		*out = v;
		return 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = (v << 3) | (uint64_t)(f[i] - '0');
	}
	if (i < len && f[i] != '\0' && f[i] != ' ')
		return -1;
	*out = v;
	return 0;
}

static unsigned checksum(const unsigned char *h)
{
	unsigned sum = 0;

	for (size_t i = 0; i < BLOCK; i++)
		sum += (i >= F_CHK && i < F_CHK + F_CHK_LEN) ? ' ' : h[i];
	return sum;
}

static bool all_zero(const unsigned char *h)
{
	for (size_t i = 0; i < BLOCK; i++)
		if (h[i] != 0)
			return false;
	return true;
}

/* Write `v` as `len - 1` octal digits and a NUL (the mode) or the checksum's 6 digits, NUL, space.
 */
static void put_octal(unsigned char *f, size_t digits, uint64_t v)
{
	for (size_t i = digits; i > 0; i--) {
		f[i - 1] = (unsigned char)('0' + (v & 7));
		v >>= 3;
	}
	f[digits] = '\0';
}

static char *member_name(const unsigned char *h)
{
	return pdk_xasprintf("%.*s", (int)strnlen((const char *)h + F_NAME, F_NAME_LEN),
			     (const char *)h + F_NAME);
}

/*
 * SECURITY: clear the set-user-ID and set-group-ID bits of a member's mode
 * (a root sandbox would otherwise unpack a set-id-root program into a host
 * directory), and refuse device nodes.
 */
static int check_member(unsigned char *h, struct pdk_error **err)
{
	_cleanup_free_ char *name = member_name(h);
	uint64_t mode;

	if (h[F_TYPE] == '3' || h[F_TYPE] == '4')
		return pdk_error_set_field(err, EPERM, "body",
					   "the archive holds a device node ('%s'): device nodes "
					   "are never unpacked",
					   name);
	if (field_num(h + F_MODE, F_MODE_LEN, &mode) < 0)
		return pdk_error_set_field(err, EINVAL, "body", "the mode of '%s' is not a number",
					   name);
	if ((mode & (S_ISUID | S_ISGID)) == 0)
		return 0;
	put_octal(h + F_MODE, F_MODE_LEN - 1, mode & ~(uint64_t)(S_ISUID | S_ISGID) & 07777);
	put_octal(h + F_CHK, 6, checksum(h));
	h[F_CHK + 7] = ' ';
	return 0;
}

/* A pax extended header's "size" record, if any (*size untouched otherwise). */
static int pax_size(const unsigned char *d, size_t len, uint64_t *size)
{
	size_t off = 0;

	while (off < len && d[off] != '\0') {
		uint64_t n = 0;
		size_t i = off;

		while (i < len && d[i] >= '0' && d[i] <= '9' && n < len)
			n = n * 10 + (uint64_t)(d[i++] - '0');
		if (i >= len || d[i] != ' ' || n == 0 || n > len - off)
			return -1;
		if (i + 6 <= off + n && memcmp(d + i + 1, "size=", 5) == 0) {
			_cleanup_free_ char *v = pdk_xasprintf("%.*s", (int)(off + n - (i + 6)),
							       (const char *)d + i + 6);
			char *end = NULL;

			errno = 0;
			*size = strtoull(v, &end, 10);
			if (errno != 0 || end == v || (*end != '\n' && *end != '\0'))
				return -1;
		}
		off += n;
	}
	return 0;
}

/* Blocks of an old GNU sparse member's extension headers after `h` at *off. */
static int skip_sparse_ext(const unsigned char *data, size_t len, const unsigned char *h,
			   size_t *off)
{
	if (h[F_TYPE] != 'S' || h[GNU_EXTENDED] == 0)
		return 0;
	for (;;) {
		if (len - *off < BLOCK)
			return -1;
		*off += BLOCK;
		if (data[*off - BLOCK + EXT_EXTENDED] == 0)
			return 0;
	}
}

static int unreadable(size_t off, struct pdk_error **err)
{
	return pdk_error_set_field(err, EINVAL, "body",
				   "the body is not a tar archive that can be checked (at byte "
				   "%zu): send an uncompressed tar (ustar, GNU or pax)",
				   off);
}

int pdk__tar_sanitize(char *buf, size_t len, struct pdk_error **err)
{
	unsigned char *data = (unsigned char *)buf;
	uint64_t next_size = UINT64_MAX; /* from a pax "size" record */
	size_t off = 0;

	while (len - off >= BLOCK) {
		unsigned char *h = data + off;
		uint64_t size, chk;
		int rc;

		if (all_zero(h))
			return 0; /* the end of the archive: tar reads no further */
		if (field_num(h + F_CHK, F_CHK_LEN, &chk) < 0 || chk != checksum(h) ||
		    field_num(h + F_SIZE, F_SIZE_LEN, &size) < 0)
			return unreadable(off, err);
		rc = check_member(h, err);
		if (rc < 0)
			return rc;
		off += BLOCK;
		if (skip_sparse_ext(data, len, h, &off) < 0)
			return unreadable(off, err);
		if (next_size != UINT64_MAX && h[F_TYPE] != 'x' && h[F_TYPE] != 'g')
			size = next_size, next_size = UINT64_MAX;
		if (size > len - off || (size + BLOCK - 1) / BLOCK * BLOCK > len - off)
			return unreadable(off, err);
		if (h[F_TYPE] == 'x' && pax_size(data + off, (size_t)size, &next_size) < 0)
			return unreadable(off, err);
		off += (size_t)((size + BLOCK - 1) / BLOCK * BLOCK);
	}
	return len == off ? 0 : unreadable(off, err);
}
