/*
 * test-tarcheck.c - the check of an uploaded tar archive (control/tarcheck.c):
 * set-id bits cleared with the checksum kept valid, device nodes and
 * unreadable bytes refused, sizes from pax records and GNU base-256 followed.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define BLOCK 512

static unsigned sum(const unsigned char *h)
{
	unsigned s = 0;

	for (size_t i = 0; i < BLOCK; i++)
		s += (i >= 148 && i < 156) ? ' ' : h[i];
	return s;
}

/* One header at `h`: name, octal mode, size, type; a valid checksum. */
static void header(unsigned char *h, const char *name, unsigned mode, unsigned long size, char type)
{
	memset(h, 0, BLOCK);
	memcpy(h, name, strlen(name));
	(void)snprintf((char *)h + 100, 8, "%07o", mode);
	(void)snprintf((char *)h + 124, 12, "%011lo", size);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	(void)snprintf((char *)h + 148, 8, "%06o", sum(h));
	h[155] = ' ';
}

static unsigned mode_of(const unsigned char *h)
{
	return (unsigned)strtoul((const char *)h + 100, NULL, 8);
}

Test(tarcheck, setid_bits_cleared_checksum_valid)
{
	unsigned char t[BLOCK * 5] = {0};
	struct pdk_error *err = NULL;

	header(t, "suid", 04755, 5, '0');
	memcpy(t + BLOCK, "hello", 5);
	header(t + 2 * BLOCK, "sgid-dir", 02775, 0, '5');
	cr_assert_eq(pdk__tar_sanitize((char *)t, sizeof(t), &err), 0);
	cr_assert_eq(mode_of(t), 0755);
	cr_assert_eq(mode_of(t + 2 * BLOCK), 0775);
	cr_assert_eq(strtoul((const char *)t + 148, NULL, 8), sum(t), "the checksum is recomputed");
	cr_assert_eq(strtoul((const char *)t + 2 * BLOCK + 148, NULL, 8), sum(t + 2 * BLOCK));
}

Test(tarcheck, device_nodes_refused)
{
	unsigned char t[BLOCK * 3] = {0};
	struct pdk_error *err = NULL;

	header(t, "null", 0666, 0, '3');
	cr_assert_eq(pdk__tar_sanitize((char *)t, sizeof(t), &err), -EPERM);
	cr_assert_str_eq(err->field, "body");
	cr_assert(strstr(err->msg, "'null'") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	header(t, "sda", 0660, 0, '4');
	cr_assert_lt(pdk__tar_sanitize((char *)t, sizeof(t), &err), 0);
	pdk_error_free(&err);
}

Test(tarcheck, unreadable_refused)
{
	unsigned char t[BLOCK * 3] = {0};
	struct pdk_error *err = NULL;

	memset(t, 'x', BLOCK);
	cr_assert_eq(pdk__tar_sanitize((char *)t, sizeof(t), &err), -EINVAL);
	pdk_error_free(&err);
	/* A member whose data would run past the end. */
	header(t, "f", 0644, 4096, '0');
	cr_assert_eq(pdk__tar_sanitize((char *)t, sizeof(t), &err), -EINVAL);
	pdk_error_free(&err);
	/* A bad checksum. */
	header(t, "f", 0644, 0, '0');
	t[0] = 'g';
	cr_assert_eq(pdk__tar_sanitize((char *)t, sizeof(t), &err), -EINVAL);
	pdk_error_free(&err);
}

Test(tarcheck, pax_size_is_followed)
{
	unsigned char t[BLOCK * 8] = {0};
	const char *rec = "13 size=1024\n";
	struct pdk_error *err = NULL;

	/* The pax header says the next member has 1024 bytes (two blocks), its own header 0. */
	header(t, "pax", 0644, strlen(rec), 'x');
	memcpy(t + BLOCK, rec, strlen(rec));
	header(t + 2 * BLOCK, "big", 0644, 0, '0');
	/* Inside the data: bytes that would be read as a set-uid header if the size were 0. */
	header(t + 3 * BLOCK, "hidden", 04755, 0, '0');
	header(t + 5 * BLOCK, "after", 04711, 0, '0');
	cr_assert_eq(pdk__tar_sanitize((char *)t, sizeof(t), &err), 0);
	cr_assert_eq(mode_of(t + 3 * BLOCK), 04755, "data is not taken for a header");
	cr_assert_eq(mode_of(t + 5 * BLOCK), 0711, "the member after the data is checked");
}

Test(tarcheck, gnu_base256_size)
{
	unsigned char t[BLOCK * 5] = {0};
	struct pdk_error *err = NULL;

	header(t, "b256", 0644, 0, '0');
	memset(t + 124, 0, 12);
	t[124] = 0x80;
	t[135] = 2; /* 2 bytes, base-256 */
	(void)snprintf((char *)t + 148, 8, "%06o", sum(t));
	t[155] = ' ';
	header(t + 2 * BLOCK, "next", 06755, 0, '0');
	cr_assert_eq(pdk__tar_sanitize((char *)t, sizeof(t), &err), 0);
	cr_assert_eq(mode_of(t + 2 * BLOCK), 0755);
}
