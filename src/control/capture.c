/*
 * capture.c - one output stream of a command answered at its end: a head
 * buffer (cap/2) and a tail ring (cap - cap/2), cut to whole lines in the
 * answer; past the cap, the whole output spilled into a file inside the sandbox
 * (/tmp/.paddock/exec/E.NAME), opened through the supervisor.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <string.h>
#include <unistd.h>

#define PENDING_MAX (8u << 20) /* output held while the spill file is being opened */

/* ---- head and tail ---- */

void pdk__capture_init(struct pdk_capture *c, const char *name, uint64_t cap)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
	c->head_max = cap / 2;
	c->tail_max = cap - c->head_max;
	c->head = pdk_xmalloc(c->head_max + 1);
	c->tail = pdk_xmalloc(c->tail_max + 1);
	c->fd = c->file_fd = -1;
}

void pdk__capture_release(struct pdk_capture *c)
{
	pdk__ctl_unwatch(&c->ev, &c->fd);
	if (c->file_fd >= 0)
		(void)close(c->file_fd);
	if (c->pending != NULL)
		evbuffer_free(c->pending);
	if (c->early != NULL)
		evbuffer_free(c->early);
	free(c->head);
	free(c->tail);
	free(c->file);
	free(c->tail_linear);
	memset(c, 0, sizeof(*c));
	c->fd = c->file_fd = -1;
}

static void tail_add(struct pdk_capture *c, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (c->tail_len == c->tail_max)
			c->tail_before = c->tail[c->tail_pos];
		c->tail[c->tail_pos] = p[i];
		c->tail_pos = (c->tail_pos + 1) % c->tail_max;
		if (c->tail_len < c->tail_max)
			c->tail_len++;
	}
}

/* The tail in order (caller frees). */
static char *tail_linear(const struct pdk_capture *c)
{
	char *o = pdk_xmalloc(c->tail_len + 1);
	size_t start = c->tail_max ? (c->tail_pos + c->tail_max - c->tail_len) % c->tail_max : 0;

	for (size_t i = 0; i < c->tail_len; i++)
		o[i] = c->tail[(start + i) % c->tail_max];
	return o;
}

static uint64_t count_newlines(const char *p, size_t n)
{
	uint64_t k = 0;

	for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
		k++;
	return k;
}

/* ---- the spill file ---- */

/*
 * What a pending spill-file open knows. When the command ends first, `c` is
 * cleared and the output held so far moves to `pending`: the answer has
 * already named the file, so it must still get every byte.
 */
struct spill_ctx {
	struct pdk_capture *c;
	struct evbuffer *pending;
};

static void spill_write(struct pdk_capture *c, const char *p, size_t n)
{
	if (c->file_failed)
		return;
	if (c->file_fd >= 0) {
		if (pdk_write_all(c->file_fd, p, n) < 0)
			c->file_failed = true;
		return;
	}
	if (evbuffer_get_length(c->pending) + n > PENDING_MAX) {
		c->file_failed = true;
		return;
	}
	pdk__ctl_buf_add(c->pending, p, n);
}

static void spill_opened(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct spill_ctx *s = ctx;
	struct pdk_capture *c = s->c;
	struct evbuffer *held = c != NULL ? c->pending : s->pending;
	size_t n = held != NULL ? evbuffer_get_length(held) : 0;
	bool ok = !pdk__svc_failed(reply) && nfds == 1;
	bool wrote =
		ok && (n == 0 || pdk_write_all(fds[0], evbuffer_pullup(held, (ssize_t)n), n) == 0);

	(void)sb;
	if (s->pending !=
	    NULL) /* the command ended before: the file gets what it held, then closes */
		evbuffer_free(s->pending);
	else if (held != NULL)
		(void)evbuffer_drain(held, n);
	free(s);
	if (c != NULL && wrote) {
		c->file_fd = fds[0];
		fds[0] = -1;
	} else if (c != NULL) {
		c->file_failed = true;
	}
	pdk__close_fds(fds, nfds);
	if (c != NULL && c->spill_ready != NULL)
		c->spill_ready(c->spill_ready_arg);
}

bool pdk__capture_spill_pending(const struct pdk_capture *c)
{
	return c->file_requested && c->file_fd < 0 && !c->file_failed;
}

/* The file's name inside the sandbox: the exec id's text (a string id without its quotes). */
static char *spill_name(const json_t *exec_id, const char *stream)
{
	_cleanup_free_ char *eid = json_dumps(exec_id, JSON_ENCODE_ANY);
	size_t n;

	if (eid == NULL)
		pdk_oom();
	n = strlen(eid);
	if (n >= 2 && eid[0] == '"' && eid[n - 1] == '"')
		return pdk_xasprintf("/tmp/.paddock/exec/%.*s.%s", (int)(n - 2), eid + 1, stream);
	return pdk_xasprintf("/tmp/.paddock/exec/%s.%s", eid, stream);
}

/* The cap is passed: everything so far goes to the pending buffer, and the file is asked for. */
static void spill_start(struct pdk_ctl_sb *sb, const json_t *exec_id, struct pdk_capture *c)
{
	_cleanup_free_ char *t = tail_linear(c);
	struct spill_ctx *s = pdk_xcalloc(1, sizeof(*s));

	c->file_requested = true;
	sb->spilled = true;
	c->pending = pdk__ctl_buf_new();
	pdk__ctl_buf_add(c->pending, c->head, c->head_len);
	pdk__ctl_buf_add(c->pending, t, c->tail_len); /* the ring has not wrapped yet */
	c->file = spill_name(exec_id, c->name);
	s->c = c;
	if (pdk__sb_call(sb,
			 json_pack("{s:s, s:s, s:s, s:i, s:b}", "op", "open", "path", c->file,
				   "flags", "w", "mode", 0600, "mkdir", 1),
			 NULL, 0, spill_opened, s) < 0) {
		free(s);
		c->file_failed = true;
	}
}

void pdk__capture_detach(struct pdk_ctl_sb *sb, struct pdk_capture *c)
{
	for (struct pdk_sb_call *call = sb->calls; call != NULL; call = call->next) {
		struct spill_ctx *s = call->ctx;

		if (call->cb != spill_opened || s->c != c)
			continue;
		if (!c->file_failed)
			s->pending = steal_ptr(&c->pending);
		s->c = NULL;
	}
}

void pdk__capture_add(struct pdk_ctl_sb *sb, const json_t *exec_id, struct pdk_capture *c,
		      const char *p, size_t n)
{
	size_t h = 0;

	if (c->total + n > c->head_max + c->tail_max && !c->file_requested)
		spill_start(sb, exec_id, c);
	c->total += n;
	c->lines += count_newlines(p, n);
	if (c->file_requested)
		spill_write(c, p, n);
	if (c->head_len < c->head_max) {
		h = n < c->head_max - c->head_len ? n : c->head_max - c->head_len;
		memcpy(c->head + c->head_len, p, h);
		c->head_len += h;
	}
	tail_add(c, p + h, n - h);
}

/* The head's length kept past the cap: through its last newline, or all of it (a cut line). */
static size_t head_keep(const struct pdk_capture *c, bool *cut)
{
	const char *nl = c->head_len ? memrchr(c->head, '\n', c->head_len) : NULL;

	if (nl != NULL)
		return (size_t)(nl - c->head) + 1;
	*cut = c->head_len > 0;
	return c->head_len;
}

/*
 * Where the kept tail starts past the cap: at its oldest byte when the byte
 * before it ended a line, else after its first newline. A tail whose only
 * newline is its last byte, or that has none, is one line longer than the
 * tail: kept whole, cut at its start.
 */
static size_t tail_skip(const struct pdk_capture *c, const char *t, bool *cut)
{
	const char *nl = c->tail_len ? memchr(t, '\n', c->tail_len) : NULL;

	if (c->tail_before == '\n' || c->tail_len == 0)
		return 0;
	if (nl != NULL && (size_t)(nl - t) + 1 < c->tail_len)
		return (size_t)(nl - t) + 1;
	*cut = true;
	return 0;
}

void pdk__capture_output(struct pdk_capture *c, struct pdk_ctl_output *out)
{
	bool dropping = c->total > (uint64_t)c->head_len + c->tail_len, cut = false;
	size_t head = c->head_len, skip = 0;
	uint64_t kept_lines;
	char last_dropped;

	free(c->tail_linear);
	c->tail_linear = tail_linear(c);
	if (dropping) {
		head = head_keep(c, &cut);
		skip = tail_skip(c, c->tail_linear, &cut);
	}
	kept_lines = count_newlines(c->head, head) +
		     count_newlines(c->tail_linear + skip, c->tail_len - skip);
	last_dropped = skip > 0 ? '\n' : c->tail_before;
	*out = (struct pdk_ctl_output){.head = c->head,
				       .head_len = head,
				       .tail = c->tail_linear + skip,
				       .tail_len = c->tail_len - skip,
				       .total = c->total,
				       .dropped = c->total - head - (c->tail_len - skip),
				       .line_cut = cut};
	if (out->dropped > 0)
		out->dropped_lines = c->lines - kept_lines + (last_dropped != '\n');
	if (out->dropped > 0 && c->file != NULL && !c->file_failed)
		out->file = c->file;
}
