/*
 * dashboard.h - the operator's dashboard (docs/dashboard.md): the page's
 * files, served at /ui/ on the daemon's listeners, the API's own origin.
 *
 * The page is static: HTML, CSS and ES modules kept as source in ui/ and
 * embedded at build time with their content type and a strong ETag. It holds
 * no data; every datum it shows comes from the REST API, with the token the
 * operator types in. So the files are served without authentication, and
 * this layer decides nothing: it answers GET /ui (301 to /ui/), GET /ui/
 * (index.html), GET /ui/NAME (the file, or a JSON 404) and refuses other
 * methods (405).
 *
 * SECURITY: every answer carries a strict Content-Security-Policy (only the
 * page's own scripts, styles and connections; no frames, no forms, no base),
 * nosniff, no referrer and DENY framing, so that nothing the API returns
 * (a sandbox's labels, a command's output) can run as script in the page.
 *
 * Stands on http/. Every call runs on the loop's thread.
 */
#ifndef PDK_DASHBOARD_H
#define PDK_DASHBOARD_H

#include "common.h"
#include "http.h"

/* The Content-Security-Policy of every answer under /ui. */
#define PDK_DASHBOARD_CSP                                                                 \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* Whether `req` is the dashboard's: its path is /ui or under /ui/. */
bool pdk_dashboard_wants(struct evhttp_request *req);

/*
 * Answer a request pdk_dashboard_wants() took. `req` is evhttp's again
 * afterwards: no call may touch it.
 */
void pdk_dashboard_handle(struct evhttp_request *req);

/* The number of embedded files (tests). */
size_t pdk_dashboard_count(void);

#endif
