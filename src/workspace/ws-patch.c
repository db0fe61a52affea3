/*
 * ws-patch.c - a change as a unified diff of its old and new text, for
 * `paddock ws diff --patch` and the daemon's GET .../diff?patch=1.
 */
#include "common.h"
#include "base.h"
#include "workspace.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole of a regular file of a layer, up to PDK_WS_PATCH_MAX. NULL when larger or unreadable.
 */
static char *slurp(int layer_fd, const char *path, size_t *len)
{
	_cleanup_close_ int fd = openat(layer_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	char *buf;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > PDK_WS_PATCH_MAX)
		return NULL;
	buf = pdk_xmalloc((size_t)st.st_size + 1);
	n = pdk_read_all(fd, buf, (size_t)st.st_size);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	*len = (size_t)n;
	return buf;
}

/* Whether `path` may stand as it is in a "--- a/PATH" line: UTF-8, no control characters. */
static bool plain_path(const char *path)
{
	const unsigned char *p = (const unsigned char *)path;

	if (!pdk_utf8_valid(path, strlen(path)))
		return false;
	for (; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

/* Content that is not shown as text: NUL bytes, or (PDK_WS_PATCH_UTF8) not UTF-8. */
static bool binary(const char *p, size_t n, unsigned flags)
{
	if (p == NULL)
		return false;
	return pdk_udiff_is_binary(p, n) || ((flags & PDK_WS_PATCH_UTF8) && !pdk_utf8_valid(p, n));
}

static void not_shown(FILE *out, const struct pdk_ws_change *c, const char *why)
{
	fputs("Files a/", out);
	pdk_ws_print_path(out, c->path);
	fprintf(out, " differ (not shown: %s)\n", why);
}

int pdk_ws_write_patch(FILE *out, const struct pdk_ws_change *c, unsigned flags)
{
	bool old_reg = c->old_mode && S_ISREG(c->old_mode) && c->kind != PDK_WS_ADDED;
	bool new_reg = c->mode && S_ISREG(c->mode) && c->kind != PDK_WS_DELETED;
	_cleanup_free_ char *a = NULL;
	_cleanup_free_ char *b = NULL;
	_cleanup_free_ char *la = NULL;
	_cleanup_free_ char *lb = NULL;
	size_t alen = 0, blen = 0;

	if (c->kind == PDK_WS_MODE || (!old_reg && !new_reg))
		return 0;
	if ((old_reg && (a = slurp(c->base_fd, c->path, &alen)) == NULL) ||
	    (new_reg && (b = slurp(c->src_fd, c->path, &blen)) == NULL)) {
		not_shown(out, c, "larger than " PDK_WS_PATCH_MAX_TEXT " or unreadable");
		return 1;
	}
	/* A name with a newline would end the header line early: the patch would not apply. */
	if ((flags & PDK_WS_PATCH_UTF8) && !plain_path(c->path)) {
		not_shown(out, c, "its name is not printable UTF-8");
		return 1;
	}
	la = old_reg ? pdk_xasprintf("a/%s", c->path) : pdk_xstrdup("/dev/null");
	lb = new_reg ? pdk_xasprintf("b/%s", c->path) : pdk_xstrdup("/dev/null");
	if (binary(a, alen, flags) || binary(b, blen, flags)) {
		fprintf(out, "Binary files %s and %s differ\n", la, lb);
		return 1;
	}
	return pdk_udiff(out, la, a ? a : "", alen, lb, b ? b : "", blen, 3);
}
