#include "common.h"
#include "dashboard.h"
#include "dashboard-internal.h"

#include <criterion/criterion.h>
#include <string.h>

/* The embedded table: every file has a type and a strong ETag; the page is there. */
Test(dashboard, assets_table)
{
	bool index = false;

	cr_assert_geq(pdk_dashboard_count(), 10);
	for (size_t i = 0; i < pdk_dashboard_count(); i++) {
		const struct pdk_dashboard_asset *a = &pdk__dashboard_assets[i];
		const char *dot = strrchr(a->name, '.');

		cr_assert_not_null(dot, "%s", a->name);
		cr_assert_eq(strlen(a->etag), 34, "%s: %s", a->name, a->etag);
		cr_assert(a->etag[0] == '"' && a->etag[33] == '"', "%s: %s", a->name, a->etag);
		cr_assert_eq(a->data[a->len], '\0', "%s", a->name);
		if (strcmp(dot, ".js") == 0)
			cr_assert_str_eq(a->content_type, "text/javascript; charset=utf-8");
		if (strcmp(a->name, "index.html") == 0) {
			index = true;
			cr_assert_str_eq(a->content_type, "text/html; charset=utf-8");
			/* SECURITY: the CSP allows no inline script: the page loads its module. */
			cr_assert_not_null(
				strstr(a->data, "<script type=\"module\" src=\"app.js\">"));
		}
	}
	cr_assert(index, "index.html is embedded");
}

Test(dashboard, etag_matches)
{
	const char *e = "\"0123456789abcdef0123456789abcdef\"";

	cr_assert(pdk__dashboard_etag_matches(e, e));
	cr_assert(pdk__dashboard_etag_matches("*", e));
	cr_assert(pdk__dashboard_etag_matches("\"x\", \"0123456789abcdef0123456789abcdef\"", e));
	cr_assert(pdk__dashboard_etag_matches(" W/\"0123456789abcdef0123456789abcdef\" ", e));
	cr_assert(!pdk__dashboard_etag_matches("\"0123456789abcdef0123456789abcdee\"", e));
	cr_assert(!pdk__dashboard_etag_matches("\"0123456789abcdef\"", e));
	cr_assert(!pdk__dashboard_etag_matches("", e));
	cr_assert(!pdk__dashboard_etag_matches(",,, ", e));
	cr_assert(!pdk__dashboard_etag_matches("\"0123456789abcdef0123456789abcdef\"x", e));
	/* Separators at the end are no empty member (the fuzz target found it, fuzz-etag.c). */
	cr_assert(!pdk__dashboard_etag_matches("\"a\", ,\t, ", ""));
}
