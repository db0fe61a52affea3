/*
 * tar.h - the tar header, read the one way paddock reads it.
 *
 * Two places read tar archives that come from outside: the check of an
 * upload before tar inside a sandbox unpacks it (control/), and the image
 * store's unpacker (image/). Both read headers (ustar, GNU and pax) with
 * these functions and keep the same rules for a member (pdk_tar_rule()):
 * a device node is refused, set-user-ID and set-group-ID bits are never
 * let through.
 */
#ifndef PDK_TAR_H
#define PDK_TAR_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#define PDK_TAR_BLOCK 512

/* Header fields: offset and length (POSIX ustar; GNU's sparse fields). */
#define PDK_TAR_NAME         0
#define PDK_TAR_NAME_LEN     100
#define PDK_TAR_MODE         100
#define PDK_TAR_MODE_LEN     8
#define PDK_TAR_UID          108
#define PDK_TAR_GID          116
#define PDK_TAR_ID_LEN       8
#define PDK_TAR_SIZE         124
#define PDK_TAR_SIZE_LEN     12
#define PDK_TAR_MTIME        136
#define PDK_TAR_MTIME_LEN    12
#define PDK_TAR_CHK          148
#define PDK_TAR_CHK_LEN      8
#define PDK_TAR_TYPE         156
#define PDK_TAR_LINK         157
#define PDK_TAR_LINK_LEN     100
#define PDK_TAR_MAGIC        257
#define PDK_TAR_DEVMAJOR     329
#define PDK_TAR_DEVMINOR     337
#define PDK_TAR_PREFIX       345
#define PDK_TAR_PREFIX_LEN   155
#define PDK_TAR_GNU_EXTENDED 482 /* old GNU sparse: extension blocks follow */
#define PDK_TAR_EXT_EXTENDED 504 /* in an extension block: another one follows */

/*
 * A numeric field: octal (NUL- or space-terminated, leading spaces), or
 * base-256 (GNU) when its high bit is set. 0, or -1 when it is neither or
 * does not fit 64 bits (a negative base-256 value included).
 */
PDK_MUST_CHECK int pdk_tar_num(const unsigned char *f, size_t len, uint64_t *out);

/* The header's checksum as it should be (the checksum field counted as spaces). */
unsigned pdk_tar_checksum(const unsigned char *h);

/* Whether the 512 bytes at `h` are all zero (the end of an archive). */
bool pdk_tar_zero_block(const unsigned char *h);

/* Whether `h` is a header whose checksum and size field read. */
bool pdk_tar_header_valid(const unsigned char *h);

/*
 * The next record of a pax extended header's data (`len` bytes at `d`)
 * from *off: "LEN KEY=VALUE\n". Sets *key, *klen, *val and *vlen (pointers
 * into `d`) and moves *off past it. 1 for a record, 0 at the end, -1 when
 * the data is not a sequence of such records.
 */
PDK_MUST_CHECK int pdk_tar_pax_next(const unsigned char *d, size_t len, size_t *off,
				    const char **key, size_t *klen, const char **val, size_t *vlen);

/* What the shared rules say of one member (its type byte and mode). */
enum pdk_tar_verdict {
	PDK_TAR_OK = 0,
	PDK_TAR_DEVICE, /* a character or block device: refused */
	PDK_TAR_SETID,  /* set-id bits: cleared (or the member refused, where a caller is strict) */
};

/* SECURITY: the rules every archive paddock unpacks keeps, whoever unpacks it. */
enum pdk_tar_verdict pdk_tar_rule(char type, uint64_t mode);

#endif
