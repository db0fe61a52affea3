/*
 * envd-files.c - envd's GET and POST /files (docs/e2b.md, "Files"): a
 * file's bytes down (gzip when the client accepts it), uploads up as
 * multipart/form-data (one file or many: a directory's) or as one
 * application/octet-stream body (gzip when it says so). Every file is
 * read and written by the sandbox's supervisor inside the sandbox's root.
 */
#include "common.h"
#include "e2b-internal.h"

#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define UPLOAD_PARTS_MAX 1000

/* envd's error body for /files: {"code": status, "message"}; the status of a control error. */
static void files_error(struct evhttp_request *req, const struct pdk_error *err)
{
	pdk__e2b_plane_error(req, err);
}

static const char *query(const struct evkeyvalq *q, const char *k)
{
	return evhttp_find_header(q, k);
}

/* The older envd's ?username=: 'user' or 'root', both the sandbox's one user (envd.c). */
static bool user_ok(const char *u)
{
	return u == NULL || strcmp(u, "user") == 0 || strcmp(u, "root") == 0;
}

/* ---- gzip ---- */

/*
 * `len` bytes of `in` gzip-compressed (deflate) or decompressed (inflate),
 * into *out (caller frees) of at most `max` bytes. -E2BIG past it, -EINVAL
 * for a stream that is no gzip.
 */
static int gzip(bool compress, const char *in, size_t len, size_t max, char **out, size_t *olen,
		struct pdk_error **err)
{
	struct pdk_buf b = PDK_BUF_INIT(max);
	z_stream z = {0};
	char chunk[65536];
	int rc = compress ? deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY)
			  : inflateInit2(&z, 15 + 16);

	if (rc != Z_OK)
		pdk_oom();
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	do {
		z.next_out = (Bytef *)chunk;
		z.avail_out = sizeof(chunk);
		rc = compress ? deflate(&z, Z_FINISH) : inflate(&z, Z_NO_FLUSH);
		if (rc == Z_STREAM_ERROR || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR ||
		    rc == Z_NEED_DICT || (rc == Z_BUF_ERROR && z.avail_in == 0 && !compress))
			break;
		if (pdk_buf_add(&b, chunk, sizeof(chunk) - z.avail_out) < 0) {
			rc = Z_BUF_ERROR;
			compress ? deflateEnd(&z) : inflateEnd(&z);
			pdk_buf_release(&b);
			return pdk_error_set_field(err, E2BIG, "body",
						   "the %s body is larger than %zu bytes",
						   compress ? "answer's" : "inflated", max);
		}
	} while (rc != Z_STREAM_END);
	compress ? deflateEnd(&z) : inflateEnd(&z);
	if (rc != Z_STREAM_END) {
		pdk_buf_release(&b);
		return pdk_error_set_field(err, EINVAL, "body", "the body is not a gzip stream");
	}
	*olen = b.len;
	*out = b.p ? b.p : pdk_xstrdup("");
	return 0;
}

/* ---- GET /files ---- */

struct download {
	struct evhttp_request *req;
	bool gzip;
	uint64_t max;
};

/* The file's bytes, read whole (at most `max`), gzip-compressed. */
static void send_gzip(struct download *d, int fd, uint64_t size)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *raw = pdk_xmalloc(size + 1), *z = NULL;
	size_t got = 0, zlen = 0;

	while (got < size) {
		ssize_t n = read(fd, raw + got, size - got);

		if (n <= 0) {
			(void)pdk_error_set(&err, n < 0 ? errno : EIO, "cannot read the file");
			break;
		}
		got += (size_t)n;
	}
	(void)close(fd);
	if (err == NULL && gzip(true, raw, got, d->max, &z, &zlen, &err) == 0) {
		pdk_http_header(d->req, "Content-Encoding", "gzip");
		pdk_http_bytes(d->req, "application/octet-stream", z, zlen);
		return;
	}
	files_error(d->req, err);
}

static void downloaded(void *ctx, int fd, uint64_t size, const struct pdk_error *err)
{
	struct download *d = ctx;

	if (err != NULL)
		files_error(d->req, err);
	else if (d->gzip && size > 0)
		send_gzip(d, fd, size);
	else
		pdk_http_file(d->req, "application/octet-stream", fd, size);
	free(d);
}

static bool accepts_gzip(struct evhttp_request *req)
{
	const char *ae =
		evhttp_find_header(evhttp_request_get_input_headers(req), "Accept-Encoding");

	return ae != NULL && strstr(ae, "gzip") != NULL;
}

static void files_get(struct pdk_e2b *e, struct evhttp_request *req, struct pdk_ctl_sb *sb,
		      const char *path)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct download *d = pdk_xcalloc(1, sizeof(*d));

	d->req = req;
	d->gzip = accepts_gzip(req);
	d->max = e->max_body;
	if (pdk_ctl_file_read(sb, path, e->max_body, downloaded, d, &err) < 0) {
		free(d);
		files_error(req, err);
	}
}

/* ---- POST /files ---- */

/* One upload of one or more files, written one after the other. */
struct upload {
	struct pdk_e2b *e;
	struct evhttp_request *req;
	char *sandbox;
	char *body; /* the request body the parts point into */
	struct pdk_e2b_part *parts;
	size_t n, next;
	char *path; /* the query's path (one file), or NULL: each part's filename */
	json_t *written;
};

static void upload_free(struct upload *u)
{
	free(u->sandbox);
	free(u->body);
	free(u->parts);
	free(u->path);
	json_decref(u->written);
	free(u);
}

static void upload_next(struct upload *u);

static void part_written(void *ctx, const char *path, uint64_t bytes, const struct pdk_error *err)
{
	struct upload *u = ctx;
	const char *slash = strrchr(path, '/');

	(void)bytes;
	if (err != NULL) {
		files_error(u->req, err);
		upload_free(u);
		return;
	}
	json_array_append_new(u->written,
			      json_pack("{s:s, s:s, s:s}", "name", slash ? slash + 1 : path, "type",
					"file", "path", path));
	upload_next(u);
}

/* The path a part goes to: the query's, else its filename (a relative one in the workspace). */
static char *part_path(struct upload *u, struct pdk_ctl_sb *sb, const struct pdk_e2b_part *p,
		       struct pdk_error **err)
{
	_cleanup_free_ char *name = NULL;

	if (u->path != NULL)
		return pdk_ctl_sb_path(sb, u->path, err);
	if (p->filename == NULL || p->filename_len == 0) {
		(void)pdk_error_set_field(err, EINVAL, "path",
					  "a part without a filename needs ?path=");
		return NULL;
	}
	name = strndup(p->filename, p->filename_len);
	if (name == NULL)
		pdk_oom();
	return pdk_ctl_sb_path(sb, name, err);
}

static void upload_next(struct upload *u)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *path = NULL;
	struct pdk_ctl_sb *sb = NULL;
	const struct pdk_e2b_part *p = &u->parts[u->next];
	char *data;

	if (u->next == u->n) {
		pdk_http_json(u->req, 200, json_incref(u->written));
		upload_free(u);
		return;
	}
	u->next++;
	if (pdk_ctl_find(u->e->ctl, u->sandbox, PDK_CTL_FIND_LIVE, &sb, &err) < 0 ||
	    (path = part_path(u, sb, p, &err)) == NULL) {
		files_error(u->req, err);
		upload_free(u);
		return;
	}
	data = pdk_xmalloc(p->len + 1);
	memcpy(data, p->data, p->len);
	if (pdk_ctl_file_write(sb, path, 0644, data, p->len, part_written, u, &err) < 0) {
		files_error(u->req, err);
		upload_free(u);
	}
}

/* The upload's parts: the multipart body's "file" parts, or the whole body as one. */
static int upload_parts(struct upload *u, size_t len, struct pdk_error **err)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(u->req);
	const char *ct = evhttp_find_header(h, "Content-Type");
	const char *ce = evhttp_find_header(h, "Content-Encoding");

	u->parts = pdk_xcalloc(UPLOAD_PARTS_MAX, sizeof(*u->parts));
	if (ct != NULL && strncasecmp(ct, "multipart/form-data", 19) == 0)
		return pdk_e2b_multipart_parse(ct, u->body, len, u->parts, UPLOAD_PARTS_MAX, &u->n,
					       err);
	if (u->path == NULL)
		return pdk_error_set_field(err, EINVAL, "path",
					   "an application/octet-stream upload needs ?path=");
	if (ce != NULL && strcasecmp(ce, "gzip") == 0) {
		char *raw = NULL;
		size_t rlen = 0;

		if (gzip(false, u->body, len, u->e->max_body, &raw, &rlen, err) < 0)
			return -EINVAL;
		free(u->body);
		u->body = raw;
		len = rlen;
	} else if (ce != NULL && strcasecmp(ce, "identity") != 0) {
		return pdk_error_set_field(err, EINVAL, "Content-Encoding",
					   "Content-Encoding must be gzip or identity");
	}
	u->parts[0] = (struct pdk_e2b_part){.data = u->body, .len = len};
	u->n = 1;
	return 0;
}

static void files_post(struct pdk_e2b *e, struct evhttp_request *req, const char *sandbox,
		       const char *path)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct upload *u = pdk_xcalloc(1, sizeof(*u));
	size_t len = 0;

	u->e = e;
	u->req = req;
	u->sandbox = pdk_xstrdup(sandbox);
	u->path = path ? pdk_xstrdup(path) : NULL;
	u->written = json_array();
	if (pdk_http_body(req, e->max_body, &u->body, &len) < 0) {
		pdk__e2b_plane_fail(req, 413, "the upload is larger than %llu bytes (--max-body)",
				    (unsigned long long)e->max_body);
		upload_free(u);
		return;
	}
	if (upload_parts(u, len, &err) < 0) {
		files_error(req, err);
		upload_free(u);
		return;
	}
	upload_next(u);
}

void pdk__e2b_files(struct pdk_e2b *e, struct evhttp_request *req, const char *sandbox)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *path = NULL;
	struct evkeyvalq q;
	const char *qs = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	struct pdk_ctl_sb *sb = NULL;

	TAILQ_INIT(&q);
	if (qs != NULL && evhttp_parse_query_str(qs, &q) < 0) {
		pdk__e2b_plane_fail(req, 400, "malformed query string");
		return;
	}
	if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_POST)
		pdk__e2b_plane_fail(req, 405, "/files takes GET and POST");
	else if (!user_ok(query(&q, "username")))
		pdk__e2b_plane_fail(req, 400,
				    "username names no user this sandbox has: 'user' or 'root'");
	else if (pdk_ctl_find(e->ctl, sandbox, PDK_CTL_FIND_LIVE, &sb, &err) < 0)
		files_error(req, err);
	else if (m == EVHTTP_REQ_POST)
		files_post(e, req, sandbox, query(&q, "path"));
	else if (query(&q, "path") == NULL)
		pdk__e2b_plane_fail(req, 400, "GET /files needs ?path=");
	else if ((path = pdk_ctl_sb_path(sb, query(&q, "path"), &err)) == NULL)
		files_error(req, err);
	else
		files_get(e, req, sb, path);
	evhttp_clear_headers(&q);
}
