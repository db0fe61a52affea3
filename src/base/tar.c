/*
 * tar.c - tar header fields, checksums, pax records and the shared rules
 * for a member (tar.h).
 */
#include "common.h"
#include "tar.h"

#include <string.h>
#include <sys/stat.h>

int pdk_tar_num(const unsigned char *f, size_t len, uint64_t *out)
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

unsigned pdk_tar_checksum(const unsigned char *h)
{
	unsigned sum = 0;

	for (size_t i = 0; i < PDK_TAR_BLOCK; i++)
		sum += (i >= PDK_TAR_CHK && i < PDK_TAR_CHK + PDK_TAR_CHK_LEN) ? ' ' : h[i];
	return sum;
}

bool pdk_tar_zero_block(const unsigned char *h)
{
	for (size_t i = 0; i < PDK_TAR_BLOCK; i++)
		if (h[i] != 0)
			return false;
	return true;
}

bool pdk_tar_header_valid(const unsigned char *h)
{
	uint64_t chk, size;

	return pdk_tar_num(h + PDK_TAR_CHK, PDK_TAR_CHK_LEN, &chk) == 0 &&
	       chk == pdk_tar_checksum(h) &&
	       pdk_tar_num(h + PDK_TAR_SIZE, PDK_TAR_SIZE_LEN, &size) == 0;
}

int pdk_tar_pax_next(const unsigned char *d, size_t len, size_t *off, const char **key,
		     size_t *klen, const char **val, size_t *vlen)
{
	size_t start = *off, i = *off, n = 0, eq;

	if (start >= len || d[start] == '\0')
		return 0;
	while (i < len && d[i] >= '0' && d[i] <= '9' && n <= len)
		n = n * 10 + (size_t)(d[i++] - '0');
	if (i >= len || d[i] != ' ' || n == 0 || n > len - start || start + n <= i + 1 ||
	    d[start + n - 1] != '\n')
		return -1;
	for (eq = i + 1; eq < start + n - 1 && d[eq] != '='; eq++)
		;
	if (eq >= start + n - 1)
		return -1;
	*key = (const char *)d + i + 1;
	*klen = eq - (i + 1);
	*val = (const char *)d + eq + 1;
	*vlen = start + n - 1 - (eq + 1);
	*off = start + n;
	return 1;
}

enum pdk_tar_verdict pdk_tar_rule(char type, uint64_t mode)
{
	if (type == '3' || type == '4')
		return PDK_TAR_DEVICE;
	if ((mode & (S_ISUID | S_ISGID)) != 0)
		return PDK_TAR_SETID;
	return PDK_TAR_OK;
}
