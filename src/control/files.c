/*
 * files.c - the files and archive routes: the supervisor opens the path
 * inside the sandbox's root and hands over the descriptor; the daemon does
 * the I/O on it, with size caps. Archives are made and unpacked by `tar`
 * run inside the sandbox, so a hostile archive meets the sandbox's own
 * confinement, never the daemon's.
 */
#include "common.h"
#include "base.h"
#include "daemon-internal.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void pdk__exec_tar(struct pdk_sb *sb, struct evhttp_request *req, const char *dir, bool create,
		   char *body, size_t body_len, uint64_t max);
void pdk__files_route(struct pdk_sb *sb, struct evhttp_request *req, const char *what,
		      enum evhttp_cmd_type method, const char *path, struct evkeyvalq *q,
		      uint64_t max_body);

struct file_op {
	struct evhttp_request *req;
	uint64_t max;
	char *data; /* PUT: the body */
	size_t len;
	char *path;
};

static void file_op_free(struct file_op *f)
{
	free(f->data);
	free(f->path);
	free(f);
}

/* The output budget left, as a cap on downloads (UINT64_MAX: none). */
static uint64_t budget_left(struct pdk_sb *sb)
{
	const char *what;

	if (!pdk__sb_budget_ok(sb, &what))
		return 0;
	return UINT64_MAX;
}

static void got_read_fd(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct file_op *f = ctx;
	struct stat st;

	if (reply == NULL || json_object_get(reply, "error") != NULL || nfds != 1) {
		for (size_t i = 0; i < nfds; i++)
			(void)close(fds[i]);
		if (nfds != 1 && reply != NULL && json_object_get(reply, "error") == NULL)
			pdk__http_error(f->req, 500, "internal", "path", "no descriptor came back");
		else
			pdk__http_svc_error(f->req, reply);
		file_op_free(f);
		return;
	}
	if (fstat(fds[0], &st) < 0 || !S_ISREG(st.st_mode)) {
		(void)close(fds[0]);
		pdk__http_error(f->req, 400, "bad_request", "path", "'%s' is not a regular file",
				f->path);
	} else if ((uint64_t)st.st_size > f->max) {
		(void)close(fds[0]);
		pdk__http_error(f->req, 413, "too_large", "path",
				"'%s' is %lld bytes, more than the %llu allowed", f->path,
				(long long)st.st_size, (unsigned long long)f->max);
	} else {
		struct evbuffer *b = evbuffer_new();

		if (b == NULL)
			pdk_oom();
		/* evbuffer_add_file() takes the descriptor (and closes it). */
		if (st.st_size > 0 && evbuffer_add_file(b, fds[0], 0, st.st_size) < 0)
			pdk_oom();
		if (st.st_size == 0)
			(void)close(fds[0]);
		pdk__sb_charge(sb, (uint64_t)st.st_size, 0);
		evhttp_add_header(evhttp_request_get_output_headers(f->req), "Content-Type",
				  "application/octet-stream");
		evhttp_send_reply(f->req, 200, "OK", b);
		evbuffer_free(b);
	}
	file_op_free(f);
}

static void got_write_fd(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct file_op *f = ctx;
	int rc;

	(void)sb;
	if (reply == NULL || json_object_get(reply, "error") != NULL || nfds != 1) {
		for (size_t i = 0; i < nfds; i++)
			(void)close(fds[i]);
		pdk__http_svc_error(f->req, reply);
		file_op_free(f);
		return;
	}
	/* A regular file in the sandbox's tmpfs or workspace: the write does not wait on anyone. */
	rc = pdk_write_all(fds[0], f->data, f->len);
	if (close(fds[0]) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0)
		pdk__http_error(f->req, rc == -ENOSPC || rc == -EDQUOT ? 429 : 500,
				rc == -ENOSPC || rc == -EDQUOT ? "limit" : "internal", "path",
				"cannot write '%s': %s", f->path, strerror(-rc));
	else
		pdk__http_json(
			f->req, 201,
			json_pack("{s:s, s:I}", "path", f->path, "bytes", (json_int_t)f->len));
	file_op_free(f);
}

static void done_ok(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct file_op *f = ctx;

	(void)sb;
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
	if (reply == NULL || json_object_get(reply, "error") != NULL)
		pdk__http_svc_error(f->req, reply);
	else
		pdk__http_json(f->req, 200, json_pack("{s:s, s:b}", "path", f->path, "deleted", 1));
	file_op_free(f);
}

/* The raw body, at most max bytes (libevent's limit is the same; this is belt and braces). */
static int take_body(struct evhttp_request *req, uint64_t max, char **out, size_t *len)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);

	if (n > max) {
		pdk__http_error(req, 413, "too_large", "", "the body is larger than %llu bytes",
				(unsigned long long)max);
		return -1;
	}
	*out = pdk_xmalloc(n + 1);
	if (evbuffer_remove(in, *out, n) != (int)n)
		pdk_oom();
	*len = n;
	return 0;
}

static int parse_mode(struct evhttp_request *req, const char *s, unsigned *mode)
{
	char *end = NULL;
	unsigned long m;

	if (s == NULL)
		return 0;
	errno = 0;
	m = strtoul(s, &end, 8);
	if (errno != 0 || end == s || *end != '\0' || m > 07777) {
		pdk__http_error(req, 400, "bad_request", "mode", "'mode' must be octal, e.g. 0644");
		return -1;
	}
	*mode = (unsigned)m;
	return 0;
}

static void call_or_fail(struct pdk_sb *sb, struct file_op *f, json_t *op, pdk_sb_reply_cb cb)
{
	if (pdk__sb_call(sb, op, NULL, 0, cb, f) < 0) {
		pdk__http_status_error(f->req, ENOTCONN, "cannot reach the sandbox's supervisor");
		file_op_free(f);
	}
}

void pdk__files_route(struct pdk_sb *sb, struct evhttp_request *req, const char *what,
		      enum evhttp_cmd_type method, const char *path, struct evkeyvalq *q,
		      uint64_t max_body)
{
	struct file_op *f;
	unsigned mode = 0644;
	const char *rec = evhttp_find_header(q, "recursive");

	if (strcmp(what, "archive") == 0) {
		char *body = NULL;
		size_t len = 0;

		if (method == EVHTTP_REQ_PUT && take_body(req, max_body, &body, &len) < 0)
			return;
		pdk__exec_tar(sb, req, path, method == EVHTTP_REQ_GET, body, len,
			      max_body < budget_left(sb) ? max_body : budget_left(sb));
		return;
	}
	f = pdk_xcalloc(1, sizeof(*f));
	f->req = req;
	f->path = pdk_xstrdup(path);
	f->max = max_body < budget_left(sb) ? max_body : budget_left(sb);
	if (method == EVHTTP_REQ_GET) {
		call_or_fail(sb, f,
			     json_pack("{s:s, s:s, s:s}", "op", "open", "path", path, "flags", "r"),
			     got_read_fd);
	} else if (method == EVHTTP_REQ_PUT) {
		if (parse_mode(req, evhttp_find_header(q, "mode"), &mode) < 0 ||
		    take_body(req, max_body, &f->data, &f->len) < 0) {
			file_op_free(f);
			return;
		}
		call_or_fail(sb, f,
			     json_pack("{s:s, s:s, s:s, s:i, s:b}", "op", "open", "path", path,
				       "flags", "w", "mode", (int)mode, "mkdir", 1),
			     got_write_fd);
	} else {
		call_or_fail(sb, f,
			     json_pack("{s:s, s:s, s:b}", "op", "delete", "path", path, "recursive",
				       rec != NULL && strcmp(rec, "1") == 0),
			     done_ok);
	}
}
