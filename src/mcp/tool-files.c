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

/* ---- write ---- */

/* Base64 `s` decoded (caller frees; *n its length), or NULL when it is not base64. */
static char *unbase64(const char *s, size_t len, size_t *n)
{
	char *out;
	int k;

	if (len % 4 != 0)
		return NULL;
	out = pdk_xmalloc(len / 4 * 3 + 1);
	k = len > 0 ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len) : 0;
	if (k < 0) {
		free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding's bytes too. */
	for (size_t i = len; i > 0 && s[i - 1] == '=' && k > 0; i--)
		k--;
	*n = (size_t)k;
	return out;
}

static void file_written(void *ctx, const char *path, uint64_t bytes, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	_cleanup_free_ char *text = NULL;

	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	text = pdk_xasprintf("wrote %llu bytes to %s", (unsigned long long)bytes, path);
	pdk__mcp_call_finish(call, pdk__mcp_result(text, json_pack("{s:s, s:I}", "path", path,
								   "bytes", (json_int_t)bytes)));
}

void pdk__tool_file_write(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *path = pdk__mcp_arg_path(call, sb, "path");
	json_t *content = json_object_get(call->args, "content");
	const char *enc = pdk__mcp_arg_str(call, "encoding");
	char *data;
	size_t n = json_string_length(content);

	if (path == NULL)
		return;
	if (enc != NULL && strcmp(enc, "base64") == 0) {
		data = unbase64(json_string_value(content), n, &n);
		if (data == NULL) {
			pdk__mcp_call_bad(call, "content", "'content' is not base64");
			return;
		}
	} else {
		data = pdk_xstrdup(json_string_value(content));
	}
	if (pdk_ctl_file_write(sb, path, 0644, data, n, file_written, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

/* ---- list, stat ---- */

static void listed(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	const json_t *entries = json_object_get(doc, "entries");
	struct pdk_buf text = PDK_BUF_INIT(1 << 20);
	json_t *e;
	size_t i;

	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	json_array_foreach(entries, i, e)
	{
		_cleanup_free_ char *line = pdk_xasprintf(
			"%s\t%lld\t%s\n", json_string_value(json_object_get(e, "type")),
			(long long)json_integer_value(json_object_get(e, "size")),
			json_string_value(json_object_get(e, "name")));

		if (pdk_buf_addstr(&text, line) < 0)
			break;
	}
	pdk__mcp_call_finish(call, pdk__mcp_result(pdk_buf_str(&text), json_incref(doc)));
	pdk_buf_release(&text);
}

void pdk__tool_file_list(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *path = NULL;

	if (pdk__mcp_arg_str(call, "path") == NULL)
		(void)json_object_set_new(call->args, "path", json_string("."));
	path = pdk__mcp_arg_path(call, sb, "path");
	if (path != NULL && pdk_ctl_ls(sb, path, listed, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

void pdk__tool_file_stat(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *path = pdk__mcp_arg_path(call, sb, "path");

	if (path != NULL && pdk_ctl_stat(sb, path, pdk__mcp_call_doc, call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

/* ---- delete ---- */

static void deleted(void *ctx, const char *path, uint64_t bytes, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	_cleanup_free_ char *text = NULL;

	(void)bytes;
	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	text = pdk_xasprintf("deleted %s", path);
	pdk__mcp_call_finish(
		call, pdk__mcp_result(text, json_pack("{s:s, s:b}", "path", path, "deleted", 1)));
}

void pdk__tool_file_delete(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *path = pdk__mcp_arg_path(call, sb, "path");

	if (path != NULL &&
	    pdk_ctl_file_delete(sb, path, pdk__mcp_arg_bool(call, "recursive", false), deleted,
				call, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

/* ---- move, mkdir: mv and mkdir run in the sandbox, as its user, under its rules ---- */

static void tool_done(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	_cleanup_free_ char *why = NULL;

	call->x = NULL;
	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	if (!r->exit.has_exit_code || r->exit.exit_code != 0) {
		why = pdk_utf8_clean(r->err.head, r->err.head_len, true, &(size_t){0}, NULL);
		why[strcspn(why, "\n")] = '\0';
		pdk__mcp_call_bad(call, "path", "%s", why[0] ? why : "the operation failed");
		return;
	}
	pdk__mcp_call_finish(call, pdk__mcp_result("done", json_pack("{s:b}", "ok", 1)));
}

static void run_tool(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb, char *const *argv)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	static const struct pdk_ctl_exec_cbs cbs = {.done = tool_done};
	struct pdk_ctl_exec_req r = {.argv = argv, .timeout_ms = 60000, .output_cap = 4096};

	if (pdk_ctl_exec(sb, &r, false, &cbs, call, &call->x, &err) < 0)
		pdk__mcp_call_fail(call, err);
}

void pdk__tool_file_move(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *from = pdk__mcp_arg_path(call, sb, "from");
	_cleanup_free_ char *to = from ? pdk__mcp_arg_path(call, sb, "to") : NULL;

	if (from != NULL && to != NULL)
		run_tool(call, sb, (char *const[]){"mv", "-T", "--", from, to, NULL});
}

void pdk__tool_file_mkdir(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *path = pdk__mcp_arg_path(call, sb, "path");

	if (path != NULL)
		run_tool(call, sb, (char *const[]){"mkdir", "-p", "--", path, NULL});
}
