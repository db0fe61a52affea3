/*
 * route-files.c - the files and archive routes of a sandbox: GET, PUT and
 * DELETE .../files?path=P, GET and PUT .../archive?path=DIR. Bodies are raw
 * bytes of at most --max-body. A downloaded archive is streamed (chunked)
 * as tar writes it, one chunk in flight at a time.
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

/* An upload's end. */
static void extracted(void *ctx, const char *data, size_t len, const struct pdk_error *err)
{
	struct evhttp_request *req = ctx;

	(void)data;
	(void)len;
	if (err != NULL)
		pdk_api_error(req, err);
	else
		pdk_http_json(req, 200, json_pack("{s:b}", "ok", 1));
}

/* A download while it streams: tar's bytes go out a chunk at a time. */
struct archive_get {
	struct evhttp_request *req;
	struct pdk_http_stream stream;
	struct pdk_ctl_exec *x; /* until the end */
	bool started;           /* the answer's head is sent */
};

static void chunk_sent(void *arg)
{
	struct archive_get *g = arg;

	if (g->x != NULL)
		pdk_ctl_archive_more(g->x);
}

/* The client went away: tar loses its stdout, the end comes later (and frees g). */
static void client_gone(void *arg)
{
	struct archive_get *g = arg;
	struct pdk_ctl_exec *x = g->x;

	g->x = NULL;
	if (x != NULL)
		pdk_ctl_exec_close(x);
}

static void archive_chunk(void *ctx, const char *data, size_t len, const struct pdk_error *err)
{
	struct archive_get *g = ctx;

	if (data == NULL) {
		g->x = NULL;
		/* An error before the first byte is an answer; after it, the answer is cut short.
		 */
		if (err != NULL && !g->started)
			pdk_api_error(g->req, err);
		else if (err != NULL)
			pdk_http_stream_abort(&g->stream);
		else
			pdk_http_stream_end(&g->stream);
		free(g);
		return;
	}
	if (!g->started) {
		g->started = true;
		pdk_http_stream_start_raw(&g->stream, g->req, "application/x-tar");
		g->stream.on_close = client_gone;
		g->stream.on_close_arg = g;
	}
	pdk_http_stream_bytes(&g->stream, data, len, chunk_sent, g);
}

static int archive_get(struct pdk_route *r, struct pdk_ctl_sb *sb, const char *path,
		       struct pdk_error **err)
{
	struct archive_get *g = pdk_xcalloc(1, sizeof(*g));
	int rc;

	g->req = r->req;
	g->stream.dead = true; /* until the first bytes */
	rc = pdk_ctl_archive_get(sb, path, r->a->max_body, archive_chunk, g, &g->x, err);
	if (rc < 0)
		free(g);
	return rc;
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
		return archive_get(r, sb, path, err);
	if (take_body(r, &body, &len) < 0)
		return 0;
	return pdk_ctl_archive_put(sb, path, body, len, extracted, r->req, err);
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
