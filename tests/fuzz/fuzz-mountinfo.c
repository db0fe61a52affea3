/*
 * fuzz-mountinfo.c - libFuzzer target for pdk_paths_aliases_in(), which reads
 * a mount table (/proc/self/mountinfo: mount points and roots are names
 * whoever made the mounts chose) to find every place a private directory is
 * in sight.
 *
 * The input is split at its first 0xff byte into the table and the directory
 * (without one, or with one not absolute, the directory is /var/lib/paddock).
 * Properties: the reader reads nothing past the table (ASan) and ends; the
 * directory itself comes first; every place is absolute, listed once, at or
 * under a mount point of the table, and ends with the part of the directory
 * below the root of a mount of it; there are at most as many places as lines
 * plus one. pdk_paths_kernel_mounts_in() on the same table: absolute points,
 * each once, at most one a line.
 */
#include "common.h"
#include "paths.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t lines(const char *s)
{
	size_t n = 1;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/* Every path of `v` (n of them) absolute, and listed once. */
static void absolute_and_once(char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i][0] != '/')
			abort();
		for (size_t j = 0; j < i; j++)
			if (strcmp(v[i], v[j]) == 0)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *cut = memchr(data, 0xff, size);
	size_t tlen = cut != NULL ? (size_t)(cut - data) : size;
	char *table = strndup((const char *)data, tlen);
	char *dir = cut != NULL ? strndup((const char *)cut + 1, size - tlen - 1) : NULL;
	char **v;
	size_t n;

	if (table == NULL)
		abort();
	if (dir == NULL || dir[0] != '/' || strchr(dir, '\n') != NULL) {
		free(dir);
		dir = strdup("/var/lib/paddock");
	}
	v = pdk_paths_aliases_in(table, dir);
	n = pdk_strv_len(v);
	if (n == 0 || strcmp(v[0], dir) != 0 || n > lines(table) + 1)
		abort();
	absolute_and_once(v, n);
	pdk_strv_free(v);
	v = pdk_paths_kernel_mounts_in(table);
	n = pdk_strv_len(v);
	if (n > lines(table))
		abort();
	absolute_and_once(v, n);
	pdk_strv_free(v);
	free(dir);
	free(table);
	return 0;
}
