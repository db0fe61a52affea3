/*
 * plane.c - E2B's control plane (docs/e2b.md, "Control plane"): the
 * routes the SDKs call on E2B_API_URL, their errors in E2B's shape
 * {"code": HTTP status, "message"}, and the dispatch.
 */
#include "common.h"
#include "e2b-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void pdk__e2b_plane_fail(struct evhttp_request *req, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pdk_http_json(req, code, json_pack("{s:i, s:s}", "code", code, "message", msg));
}

void pdk__e2b_plane_error(struct evhttp_request *req, const struct pdk_error *err)
{
	static const struct {
		int status, http;
	} map[] = {
		{ENOENT, 404},   {EINVAL, 400}, {ENOEXEC, 400},  {EEXIST, 409},
		{EALREADY, 409}, {EBUSY, 409},  {EDQUOT, 429},   {E2BIG, 413},
		{EACCES, 403},   {EPERM, 403},  {ENOTCONN, 503}, {EKEYREJECTED, 401},
	};
	int http = 500;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(map); i++)
		if (map[i].status == err->status)
			http = map[i].http;
	if (err->field != NULL)
		pdk__e2b_plane_fail(req, http, "%s: %s", err->field, err->msg);
	else
		pdk__e2b_plane_fail(req, http, "%s", err->msg);
}

static void route_health(struct evhttp_request *req)
{
	pdk_http_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

void pdk__e2b_plane(struct pdk_e2b *e, struct evhttp_request *req)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

	(void)e;
	if (path != NULL && strcmp(path, "/health") == 0 &&
	    evhttp_request_get_command(req) == EVHTTP_REQ_GET) {
		route_health(req);
		return;
	}
	pdk__e2b_plane_fail(req, 404, "no such route: '%s' is not one of E2B's that paddock serves",
			    path ? path : "");
}
