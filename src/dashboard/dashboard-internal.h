/*
 * dashboard-internal.h - the table of embedded files, written at build time
 * by tools/embed-dir.py (dashboard-assets.c) and read by dashboard.c, and
 * the ETag comparison (dashboard.c; unit-tested).
 */
#ifndef PDK_DASHBOARD_INTERNAL_H
#define PDK_DASHBOARD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/* One file of ui/: every member is static data. */
struct pdk_dashboard_asset {
	const char *name;         /* its base name ("app.js"); NULL ends the table */
	const char *data;         /* its bytes (NUL-terminated beyond len) */
	size_t len;               /* their number */
	const char *content_type; /* from its extension */
	const char *etag;         /* a strong ETag, quoted: its hash */
};

/* The files, in ui/'s order; the last entry's name is NULL. */
extern const struct pdk_dashboard_asset pdk__dashboard_assets[];

/*
 * Whether the If-None-Match list `inm` names `etag` (quoted) or is "*": the
 * weak comparison RFC 9110 asks of If-None-Match ("W/" is ignored).
 */
bool pdk__dashboard_etag_matches(const char *inm, const char *etag);

#endif
