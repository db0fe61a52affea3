/*
 * sse.c - Server-Sent Events, parsed incrementally (sse.h). One parser for
 * every layer that reads an event stream: the API's client (client/) and the
 * gateway's remote upstreams (gateway/remote.c).
 */
#include "common.h"
#include "buf.h"
#include "sse.h"
#include "util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct pdk_sse {
	pdk_sse_cb cb;
	void *ud;
	struct pdk_buf line;
	struct pdk_buf data;
	struct pdk_buf event;
	struct pdk_buf id;
	bool have_id;
	bool after_cr; /* the last byte was CR: a following LF ends no new line */
};

struct pdk_sse *pdk_sse_new(size_t max, pdk_sse_cb cb, void *ud)
{
	struct pdk_sse *s = pdk_xcalloc(1, sizeof(*s));

	s->cb = cb;
	s->ud = ud;
	pdk_buf_init(&s->line, max);
	pdk_buf_init(&s->data, max);
	pdk_buf_init(&s->event, 256);
	pdk_buf_init(&s->id, 256);
	return s;
}

void pdk_sse_free(struct pdk_sse *s)
{
	if (s == NULL)
		return;
	pdk_buf_release(&s->line);
	pdk_buf_release(&s->data);
	pdk_buf_release(&s->event);
	pdk_buf_release(&s->id);
	free(s);
}

static int sse_dispatch(struct pdk_sse *s)
{
	const char *event = s->event.len ? pdk_buf_str(&s->event) : "message";
	int r = 0;

	if (s->data.len > 0) {
		/* The data lines were each followed by LF; the last one is not data. */
		pdk_buf_setlen(&s->data, s->data.len - 1);
		if (s->cb != NULL && s->cb(s->ud, event, s->have_id ? pdk_buf_str(&s->id) : NULL,
					   pdk_buf_str(&s->data), s->data.len) != 0)
			r = -ECANCELED;
	}
	pdk_buf_reset(&s->data);
	pdk_buf_reset(&s->event);
	return r;
}

static bool field_is(const char *f, size_t flen, const char *name)
{
	return flen == strlen(name) && memcmp(f, name, flen) == 0;
}

static int sse_line(struct pdk_sse *s, const char *l, size_t len)
{
	const char *colon, *v;
	size_t flen, vlen;
	int r;

	if (len == 0)
		return sse_dispatch(s);
	if (l[0] == ':')
		return 0; /* a comment: keep-alive */
	colon = memchr(l, ':', len);
	flen = colon ? (size_t)(colon - l) : len;
	v = colon ? colon + 1 : l + len;
	vlen = len - (size_t)(v - l);
	if (vlen > 0 && v[0] == ' ') {
		v++;
		vlen--;
	}
	if (field_is(l, flen, "data")) {
		r = pdk_buf_add(&s->data, v, vlen);
		return r < 0 ? r : pdk_buf_add(&s->data, "\n", 1);
	}
	if (field_is(l, flen, "event") && memchr(v, '\0', vlen) == NULL) {
		pdk_buf_reset(&s->event);
		return pdk_buf_add(&s->event, v, vlen);
	}
	if (field_is(l, flen, "id") && memchr(v, '\0', vlen) == NULL) {
		pdk_buf_reset(&s->id);
		s->have_id = true;
		return pdk_buf_add(&s->id, v, vlen);
	}
	return 0; /* retry and unknown fields are ignored, as the format says */
}

int pdk_sse_feed(struct pdk_sse *s, const char *data, size_t len)
{
	size_t start = 0;
	int r;

	for (size_t i = 0; i < len; i++) {
		char c = data[i];

		if (c != '\r' && c != '\n')
			continue;
		if (c == '\n' && s->after_cr && i == start && s->line.len == 0) {
			/* The LF of a CRLF split from its CR: the line already ended. */
			s->after_cr = false;
			start = i + 1;
			continue;
		}
		r = pdk_buf_add(&s->line, data + start, i - start);
		if (r < 0)
			return r;
		r = sse_line(s, pdk_buf_str(&s->line), s->line.len);
		pdk_buf_reset(&s->line);
		if (r < 0)
			return r;
		s->after_cr = c == '\r';
		if (c == '\r' && i + 1 < len && data[i + 1] == '\n') {
			i++;
			s->after_cr = false;
		}
		start = i + 1;
	}
	if (start < len) {
		s->after_cr = false;
		return pdk_buf_add(&s->line, data + start, len - start);
	}
	return 0;
}
