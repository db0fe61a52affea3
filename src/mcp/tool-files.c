/*
 * tool-files.c - the file tools: read, write, list, stat, delete, move and
 * make a directory, each inside the sandbox. Paths are the sandbox's own
 * (absolute, or relative to its workspace); the supervisor's confined
 * helper opens them inside the sandbox's root, so a file tool sees exactly
 * what a command in the sandbox sees, never the host.
 */
#include "common.h"
#include "mcp-internal.h"

#include <openssl/evp.h>
#include <string.h>
#include <unistd.h>

#define READ_DEFAULT (1u << 20)

static char *base64(const unsigned char *p, size_t n)
{
	char *out = pdk_xmalloc(4 * ((n + 2) / 3) + 1);

	(void)EVP_EncodeBlock((unsigned char *)out, p, (int)n);
	return out;
}

/* The file as text when it is UTF-8 (and text was not refused), else as a base64 resource. */
static json_t *read_result(struct pdk_mcp_call *call, const char *path, const char *data, size_t n)
{
	const char *enc = pdk__mcp_arg_str(call, "encoding");
	bool text = (enc == NULL || strcmp(enc, "base64") != 0) && pdk_utf8_valid(data, n) &&
		    memchr(data, '\0', n) == NULL;
	_cleanup_free_ char *uri = pdk_xasprintf("file://%s", path);
	_cleanup_free_ char *b64 = NULL;
	json_t *r;

	if (text)
		return pdk__mcp_result(data, json_pack("{s:s, s:I, s:s}", "path", path, "bytes",
						       (json_int_t)n, "encoding", "text"));
	if (enc != NULL && strcmp(enc, "text") == 0) {
		pdk__mcp_call_bad(call, "encoding",
				  "'%s' is not UTF-8 text: read it with \"encoding\": \"base64\"",
				  path);
		return NULL;
	}
	b64 = base64((const unsigned char *)data, n);
	r = json_pack("{s:[{s:s, s:{s:s, s:s, s:s}}], s:{s:s, s:I, s:s, s:s}}", "content", "type",
		      "resource", "resource", "uri", uri, "mimeType", "application/octet-stream",
		      "blob", b64, "structuredContent", "path", path, "bytes", (json_int_t)n,
		      "encoding", "base64", "base64", b64);
	if (r == NULL)
		pdk_oom();
	return r;
}

struct read_ctx {
	struct pdk_mcp_call *call;
	char *path;
};

static void read_done(void *ctx, int fd, uint64_t size, const struct pdk_error *err)
{
	struct read_ctx *rc = ctx;
	_cleanup_free_ char *path = rc->path;
	struct pdk_mcp_call *call = rc->call;
	_cleanup_free_ char *data = NULL;
	json_t *r;
	ssize_t n;

	free(rc);
	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	data = pdk_xmalloc(size + 1);
	n = pdk_read_all(fd, data, size);
	(void)close(fd);
	if (n < 0) {
		pdk__mcp_call_bad(call, "path", "cannot read '%s'", path);
		return;
	}
	data[n] = '\0';
	r = read_result(call, path, data, (size_t)n);
	if (r != NULL)
		pdk__mcp_call_finish(call, r);
}

void pdk__tool_file_read(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	char *path = pdk__mcp_arg_path(call, sb, "path");
	struct read_ctx *rc;

	if (path == NULL)
		return;
	rc = pdk_xcalloc(1, sizeof(*rc));
	rc->call = call;
	rc->path = path;
	if (pdk_ctl_file_read(sb, path, pdk__mcp_arg_u64(call, "max_bytes", READ_DEFAULT),
			      read_done, rc, &err) < 0) {
		free(rc->path);
		free(rc);
		pdk__mcp_call_fail(call, err);
	}
}
