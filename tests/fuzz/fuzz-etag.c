/*
 * fuzz-etag.c - libFuzzer target for the dashboard's If-None-Match check,
 * pdk__dashboard_etag_matches() (the header's bytes are the client's).
 *
 * The input is split at its first 0xff byte into the header's value and the
 * ETag it is compared with (without one, the ETag is a fixed quoted hash).
 * Properties: the check reads nothing past either string (ASan) and ends; it
 * agrees with a reference written another way here (the list copied and cut
 * at each comma, each member trimmed of spaces and tabs, an empty one
 * ignored, "*" matching all,
 * a "W/" prefix dropped before an exact comparison); a value that lists the
 * ETag as a member of its own, plain or weak, anywhere in a list, matches.
 */
#include "common.h"
#include "dashboard-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool reference(const char *inm, const char *etag)
{
	char *copy = strdup(inm), *item = copy;
	bool found = false;

	if (copy == NULL)
		abort();
	while (item != NULL && !found) {
		char *comma = strchr(item, ','), *end;

		if (comma != NULL)
			*comma = '\0';
		while (*item == ' ' || *item == '\t')
			item++;
		end = item + strlen(item);
		while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*item == '\0')
			found = false; /* an empty member is no member (RFC 9110, 5.6.1) */
		else if (strcmp(item, "*") == 0)
			found = true;
		else if (strncmp(item, "W/", 2) == 0)
			found = strcmp(item + 2, etag) == 0;
		else
			found = strcmp(item, etag) == 0;
		item = comma != NULL ? comma + 1 : NULL;
	}
	free(copy);
	return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *cut = memchr(data, 0xff, size);
	size_t ilen = cut != NULL ? (size_t)(cut - data) : size;
	char *inm = strndup((const char *)data, ilen);
	char *etag = cut != NULL ? strndup((const char *)cut + 1, size - ilen - 1)
				 : strdup("\"5f0c1e2a9b7d4c33\"");
	char *listed;
	size_t n;

	if (inm == NULL || etag == NULL)
		abort();
	if (pdk__dashboard_etag_matches(inm, etag) != reference(inm, etag))
		abort();
	/* The ETag as a member of the list, weak, between what the input had (no comma, tab or
	 * space at its ends, which would make it another member). */
	n = strlen(etag);
	if (n > 0 && strchr(etag, ',') == NULL && strchr(" \t", etag[0]) == NULL &&
	    strchr(" \t", etag[n - 1]) == NULL) {
		size_t cap = strlen(inm) * 2 + n + 8;

		listed = malloc(cap);
		if (listed == NULL)
			abort();
		(void)snprintf(listed, cap, "%s, W/%s ,%s", inm, etag, inm);
		if (!pdk__dashboard_etag_matches(listed, etag))
			abort();
		free(listed);
	}
	free(inm);
	free(etag);
	return 0;
}
