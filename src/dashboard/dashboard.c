/*
 * dashboard.c - the page's files at /ui/ (dashboard.h): lookup, the
 * security headers, ETag revalidation, and the refusals (404, 405).
 */
#include "common.h"
#include "dashboard.h"
#include "dashboard-internal.h"
#include "http.h"

#include <string.h>

#define PREFIX     "/ui"
#define PREFIX_LEN 3

/* The headers of every answer, whatever its status. */
static void security_headers(struct evhttp_request *req)
{
	/* SECURITY: nothing but the page's own files runs, styles or connects (dashboard.h). */
	pdk_http_header(req, "Content-Security-Policy", PDK_DASHBOARD_CSP);
	pdk_http_header(req, "X-Content-Type-Options", "nosniff");
	pdk_http_header(req, "Referrer-Policy", "no-referrer");
	/* SECURITY: the page's buttons kill sandboxes: it is never framed (clickjacking). */
	pdk_http_header(req, "X-Frame-Options", "DENY");
	pdk_http_header(req, "Cache-Control", "no-cache");
}

static const char *req_path(struct evhttp_request *req)
{
	return evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
}

bool pdk_dashboard_wants(struct evhttp_request *req)
{
	const char *path = req_path(req);

	return path != NULL && strncmp(path, PREFIX, PREFIX_LEN) == 0 &&
	       (path[PREFIX_LEN] == '\0' || path[PREFIX_LEN] == '/');
}

size_t pdk_dashboard_count(void)
{
	size_t n = 0;

	while (pdk__dashboard_assets[n].name != NULL)
		n++;
	return n;
}

/* The file called `name` (the part of the path after /ui/), or NULL. */
static const struct pdk_dashboard_asset *find(const char *name)
{
	if (*name == '\0')
		name = "index.html";
	for (size_t i = 0; pdk__dashboard_assets[i].name != NULL; i++)
		if (strcmp(pdk__dashboard_assets[i].name, name) == 0)
			return &pdk__dashboard_assets[i];
	return NULL;
}

/*
 * Whether the If-None-Match list `inm` names `etag` (or is "*"): the weak
 * comparison RFC 9110 asks for, so a "W/" prefix is ignored.
 */
bool pdk__dashboard_etag_matches(const char *inm, const char *etag)
{
	size_t elen = strlen(etag);
	const char *p = inm;

	while (*p != '\0') {
		size_t n;

		p += strspn(p, " \t,");
		if (*p == '\0')
			break; /* only separators were left: no member (not an empty one) */
		n = strcspn(p, ",");
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n == 1 && *p == '*')
			return true;
		if (n >= 2 && strncmp(p, "W/", 2) == 0) {
			p += 2;
			n -= 2;
		}
		if (n == elen && strncmp(p, etag, n) == 0)
			return true;
		p += n;
		p += strcspn(p, ",");
	}
	return false;
}

static void send_asset(struct evhttp_request *req, const struct pdk_dashboard_asset *a)
{
	const char *inm =
		evhttp_find_header(evhttp_request_get_input_headers(req), "If-None-Match");

	pdk_http_header(req, "ETag", a->etag);
	if (inm != NULL && pdk__dashboard_etag_matches(inm, a->etag)) {
		evhttp_send_reply(req, 304, "Not Modified", NULL);
		return;
	}
	pdk_http_bytes(req, a->content_type, a->data, a->len);
}

void pdk_dashboard_handle(struct evhttp_request *req)
{
	const char *path = req_path(req);
	const struct pdk_dashboard_asset *a;

	security_headers(req);
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		pdk_http_header(req, "Allow", "GET");
		pdk_http_error(req, 405, "bad_request", NULL,
			       "method not allowed: the dashboard's files are read with GET");
		return;
	}
	if (path[PREFIX_LEN] == '\0') {
		/* The page's modules are addressed relative to /ui/: one canonical URL. */
		pdk_http_header(req, "Location", PREFIX "/");
		evhttp_send_reply(req, 301, "Moved Permanently", NULL);
		return;
	}
	a = find(path + PREFIX_LEN + 1);
	if (a == NULL) {
		pdk_http_error(req, 404, "not_found", "path",
			       "no dashboard file '%s': the page is at /ui/", path);
		return;
	}
	send_asset(req, a);
}
