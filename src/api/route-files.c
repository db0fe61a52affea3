/*
 * route-files.c - the files and archive routes of a sandbox: GET, PUT and
 * DELETE .../files?path=P, GET and PUT .../archive?path=DIR. Bodies are raw
 * bytes of at most --max-body.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"

#include <string.h>

static void read_answer(void *ctx, int fd, uint64_t size, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_file(req, "application/octet-stream", fd, size);
}

static void written(void *ctx, const char *path, uint64_t bytes, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, 201,
			      json_pack("{s:s, s:I}", "path", path, "bytes", (json_int_t)bytes));
}

static void deleted(void *ctx, const char *path, uint64_t bytes, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	(void)bytes;
	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, 200, json_pack("{s:s, s:b}", "path", path, "deleted", 1));
}

static void archived(void *ctx, const char *data, size_t len, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	if (err != NULL)
		pdk_api_error(req, err);
	else if (data != NULL)
		pdk_http_bytes(req, "application/x-tar", data, len);
	else
		pdk_http_json(req, 200, json_pack("{s:b}", "ok", 1));
}

/* The raw body, at most max bytes (libevent's limit is the same; this is belt and braces). */
static int take_body(struct pdk_route *r, char **out, size_t *len)
{
	if (pdk_http_body(r->req, r->a->max_body, out, len) < 0) {
		pdk_http_error(r->req, 413, "too_large", "", "the body is larger than %llu bytes",
			       (unsigned long long)r->a->max_body);
		return -1;
	}
	return 0;
}

static int parse_mode(struct pdk_route *r, const char *s, unsigned *mode)
{
	char *end = NULL;
	unsigned long m;

	if (s == NULL)
		return 0;
	errno = 0;
	m = strtoul(s, &end, 8);
	if (errno != 0 || end == s || *end != '\0' || m > 07777) {
		pdk_http_error(r->req, 400, "bad_request", "mode",
			       "'mode' must be octal, e.g. 0644");
		return -1;
	}
	*mode = (unsigned)m;
	return 0;
}

static int route_archive(struct pdk_route *r, struct pdk_ctl_sb *sb, const char *path,
			 struct pdk_error **err)
{
	char *body = NULL;
	size_t len = 0;

	if (r->method == EVHTTP_REQ_GET)
		return pdk_ctl_archive_get(sb, path, r->a->max_body, archived, r->req, err);
	if (take_body(r, &body, &len) < 0)
		return 0;
	return pdk_ctl_archive_put(sb, path, body, len, archived, r->req, err);
}

static int route_put(struct pdk_route *r, struct pdk_ctl_sb *sb, const char *path,
		     struct pdk_error **err)
{
	unsigned mode = 0644;
	char *body = NULL;
	size_t len = 0;

	if (parse_mode(r, pdk__route_query(r, "mode"), &mode) < 0 || take_body(r, &body, &len) < 0)
		return 0;
	return pdk_ctl_file_write(sb, path, mode, body, len, written, r->req, err);
}

void pdk__route_files(struct pdk_route *r, struct pdk_ctl_sb *sb, const char *what,
		      const char *path)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *rec = pdk__route_query(r, "recursive");
	int rc;

	if (strcmp(what, "archive") == 0)
		rc = route_archive(r, sb, path, &err);
	else if (r->method == EVHTTP_REQ_GET)
		rc = pdk_ctl_file_read(sb, path, r->a->max_body, read_answer, r->req, &err);
	else if (r->method == EVHTTP_REQ_PUT)
		rc = route_put(r, sb, path, &err);
	else
		rc = pdk_ctl_file_delete(sb, path, rec != NULL && strcmp(rec, "1") == 0, deleted,
					 r->req, &err);
	if (rc < 0)
		pdk_api_error(r->req, err);
}
