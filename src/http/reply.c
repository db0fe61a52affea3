/*
 * reply.c - answers (http.h): JSON bodies, the error object, raw bytes and
 * files, the request body, and the checked libevent calls they use.
 *
 * libevent reports an allocation failure as a -1 that callers easily drop
 * (an answer then goes out without its body or a header); here every such
 * result is checked, and a failure is pdk_oom() like any other.
 */
#include "common.h"
#include "base.h"
#include "http.h"

#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- checked libevent calls ---- */

struct evbuffer *pdk_http_buf_new(void)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL)
		pdk_oom();
	return b;
}

void pdk_http_buf_add(struct evbuffer *buf, const void *data, size_t len)
{
	if (len > 0 && evbuffer_add(buf, data, len) < 0)
		pdk_oom();
}

void pdk_http_buf_printf(struct evbuffer *buf, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = evbuffer_add_vprintf(buf, fmt, ap);
	va_end(ap);
	if (rc < 0)
		pdk_oom();
}

void pdk_http_header(struct evhttp_request *req, const char *name, const char *value)
{
	if (evhttp_add_header(evhttp_request_get_output_headers(req), name, value) < 0)
		pdk_oom();
}

/* ---- answers ---- */

static void send_buffer(struct evhttp_request *req, int code, struct evbuffer *buf)
{
	evhttp_send_reply(req, code, NULL, buf);
	evbuffer_free(buf);
}

void pdk_http_json(struct evhttp_request *req, int code, json_t *body)
{
	_cleanup_json_ json_t *b = body;
	_cleanup_free_ char *text = pdk_json_dump_line(b);
	struct evbuffer *buf = pdk_http_buf_new();

	if (text == NULL)
		pdk_oom();
	pdk_http_buf_add(buf, text, strlen(text));
	pdk_http_header(req, "Content-Type", "application/json");
	send_buffer(req, code, buf);
}

void pdk_http_error(struct evhttp_request *req, int code, const char *ecode, const char *field,
		    const char *fmt, ...)
{
	json_t *e = json_object();
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pdk_json_set(e, "code", json_string(ecode));
	pdk_json_set(e, "message", json_string(msg));
	if (field != NULL && field[0] != '\0')
		pdk_json_set(e, "field", json_string(field));
	pdk_http_json(req, code, json_pack("{s:o}", "error", e));
}

void pdk_http_bytes(struct evhttp_request *req, const char *content_type, const void *data,
		    size_t len)
{
	struct evbuffer *buf = pdk_http_buf_new();

	pdk_http_buf_add(buf, data, len);
	pdk_http_header(req, "Content-Type", content_type);
	send_buffer(req, 200, buf);
}

void pdk_http_file(struct evhttp_request *req, const char *content_type, int fd, uint64_t size)
{
	struct evbuffer *buf = pdk_http_buf_new();

	/* evbuffer_add_file() takes the descriptor (and closes it once sent). */
	if (size > 0 && evbuffer_add_file(buf, fd, 0, (ev_off_t)size) < 0)
		pdk_oom();
	if (size == 0)
		(void)close(fd);
	pdk_http_header(req, "Content-Type", content_type);
	send_buffer(req, 200, buf);
}

int pdk_http_body(struct evhttp_request *req, size_t max, char **out, size_t *len)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);

	if (n > max)
		return -E2BIG;
	*out = pdk_xmalloc(n + 1);
	if (evbuffer_remove(in, *out, n) != (int)n)
		pdk_oom();
	(*out)[n] = '\0';
	*len = n;
	return 0;
}
