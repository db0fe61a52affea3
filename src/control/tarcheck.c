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

#define BLOCK  PDK_TAR_BLOCK
#define F_NAME PDK_TAR_NAME
#define F_MODE PDK_TAR_MODE
#define F_SIZE PDK_TAR_SIZE
#define F_CHK  PDK_TAR_CHK
#define F_TYPE PDK_TAR_TYPE

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
	return pdk_xasprintf("%.*s", (int)strnlen((const char *)h + F_NAME, PDK_TAR_NAME_LEN),
			     (const char *)h + F_NAME);
}

/*
 * SECURITY: the rules of every archive paddock unpacks (base/tar.h): a
 * device node is refused, and set-user-ID and set-group-ID bits are cleared
 * (a root sandbox would otherwise unpack a set-id-root program into a host
 * directory).
 */
static int check_member(unsigned char *h, struct pdk_error **err)
{
	_cleanup_free_ char *name = member_name(h);
	uint64_t mode;

	if (pdk_tar_num(h + F_MODE, PDK_TAR_MODE_LEN, &mode) < 0)
		return pdk_error_set_field(err, EINVAL, "body", "the mode of '%s' is not a number",
					   name);
	switch (pdk_tar_rule((char)h[F_TYPE], mode)) {
	case PDK_TAR_DEVICE:
		return pdk_error_set_field(err, EPERM, "body",
					   "the archive holds a device node ('%s'): device nodes "
					   "are never unpacked",
					   name);
	case PDK_TAR_SETID:
		put_octal(h + F_MODE, PDK_TAR_MODE_LEN - 1,
			  mode & ~(uint64_t)(S_ISUID | S_ISGID) & 07777);
		put_octal(h + F_CHK, 6, pdk_tar_checksum(h));
		h[F_CHK + 7] = ' ';
		return 0;
	case PDK_TAR_OK:
	default:
		return 0;
	}
}

/* A pax extended header's "size" record, if any (*size untouched otherwise). */
static int pax_size(const unsigned char *d, size_t len, uint64_t *size)
{
	const char *key, *val;
	size_t off = 0, klen, vlen;
	int rc;

	while ((rc = pdk_tar_pax_next(d, len, &off, &key, &klen, &val, &vlen)) > 0) {
		_cleanup_free_ char *v = NULL;
		char *end = NULL;

		if (klen != 4 || memcmp(key, "size", 4) != 0)
			continue;
		v = pdk_xasprintf("%.*s", (int)vlen, val);
		errno = 0;
		*size = strtoull(v, &end, 10);
		if (errno != 0 || end == v || *end != '\0')
			return -1;
	}
	return rc;
}

/* Blocks of an old GNU sparse member's extension headers after `h` at *off. */
static int skip_sparse_ext(const unsigned char *data, size_t len, const unsigned char *h,
			   size_t *off)
{
	if (h[F_TYPE] != 'S' || h[PDK_TAR_GNU_EXTENDED] == 0)
		return 0;
	for (;;) {
		if (len - *off < BLOCK)
			return -1;
		*off += BLOCK;
		if (data[*off - BLOCK + PDK_TAR_EXT_EXTENDED] == 0)
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
		uint64_t size;
		int rc;

		if (pdk_tar_zero_block(h))
			return 0; /* the end of the archive: tar reads no further */
		if (!pdk_tar_header_valid(h) ||
		    pdk_tar_num(h + F_SIZE, PDK_TAR_SIZE_LEN, &size) < 0)
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
