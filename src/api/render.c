/*
 * render.c - the control layer's results as the API's JSON (docs/api.yaml):
 * a created sandbox, a command's end and output, streamed chunks.
 *
 * The Sandbox object is the control layer's own (pdk_ctl_view_json()), the
 * record it keeps of an ended sandbox: GET /v1/sandboxes/ID answers a live
 * and an ended sandbox alike.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"
#include "telemetry.h"

#include <string.h>

json_t *pdk__api_created_json(const struct pdk_ctl_created *c)
{
	json_t *o = pdk_ctl_view_json(&c->view);

	pdk_json_set(o, "token", json_string(c->token));
	pdk_json_set(o, "token_expires_at", pdk_events_ts_json(c->token_expires_ns));
	pdk_json_set(o, "token_ops", pdk_token_ops_json(c->token_ops));
	return o;
}

json_t *pdk__api_exit_json(const struct pdk_ctl_exit *e)
{
	json_t *o = json_object();

	pdk_json_set(o, "exec_id", json_integer((json_int_t)e->exec_id));
	pdk_json_set(o, "exit_code", e->has_exit_code ? json_integer(e->exit_code) : json_null());
	pdk_json_set(o, "signal", e->has_signal ? json_integer(e->signal) : json_null());
	pdk_json_set(o, "end", json_string(e->end));
	pdk_json_set(o, "duration_ms", json_integer((json_int_t)e->duration_ms));
	/* The network refusals during the command, for the caller to tell its user (docs/api.yaml).
	 */
	pdk_json_set(o, "denied", e->denied != NULL ? json_deep_copy(e->denied) : json_array());
	pdk_json_set(o, "denied_more", json_integer((json_int_t)e->denied_more));
	return o;
}

/*
 * Whether `clean` (pdk_utf8_clean() of p, n) is p itself and holds no NUL,
 * so a client reading "text"/"data" as a C string gets the exact bytes.
 */
static bool text_exact(const char *clean, size_t len, const char *p, size_t n)
{
	return n == 0 || (len == n && memcmp(clean, p, n) == 0 && memchr(p, '\0', n) == NULL);
}

/* Text for JSON: valid UTF-8 (U+FFFD for each other byte). */
static json_t *json_text(const char *p, size_t n)
{
	size_t len;
	_cleanup_free_ char *clean = pdk_utf8_clean(p, n, false, &len, NULL);
	json_t *s = json_stringn(clean, len);

	if (s == NULL) /* jansson refuses NUL only with checks; a NUL is valid UTF-8 here */
		s = json_string("");
	return s;
}

/* Standard base64 with padding (caller frees). */
static char *b64_std(const unsigned char *p, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *o = pdk_xmalloc((n + 2) / 3 * 4 + 1);
	size_t k = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		o[k++] = tab[v >> 18 & 63];
		o[k++] = tab[v >> 12 & 63];
		o[k++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		o[k++] = i + 2 < n ? tab[v & 63] : '=';
	}
	o[k] = '\0';
	return o;
}

/*
 * Output is bytes, not text: `key` carries the exact bytes p, n in base64
 * when the text beside it is not them (bytes that are not UTF-8, or a NUL
 * at which a client reading C strings would stop).
 */
static void add_b64_unless_exact(json_t *o, const char *key, const char *p, size_t n)
{
	size_t len;
	_cleanup_free_ char *clean = pdk_utf8_clean(p, n, false, &len, NULL);
	_cleanup_free_ char *b = NULL;

	if (text_exact(clean, len, p, n))
		return;
	b = b64_std((const unsigned char *)p, n);
	pdk_json_set(o, key, json_string(b));
}

/*
 * The line standing for what was dropped between head and tail, on a line of
 * its own: the head ends at a line end unless a line longer than the cap was
 * cut, which the marker then says.
 */
static void add_marker(struct evbuffer *b, const struct pdk_ctl_output *o)
{
	if (o->head_len > 0 && o->head[o->head_len - 1] != '\n')
		pdk_http_buf_add(b, "\n", 1);
	pdk_http_buf_printf(b, "[... %llu line%s, %llu bytes dropped%s; full output in %s ...]\n",
			    (unsigned long long)o->dropped_lines, o->dropped_lines == 1 ? "" : "s",
			    (unsigned long long)o->dropped,
			    o->line_cut ? " (a line longer than the cap was cut)" : "",
			    o->file ? o->file : "(not kept)");
}

json_t *pdk__api_output_json(const struct pdk_ctl_output *o)
{
	struct evbuffer *b = pdk_http_buf_new();
	const char *p;
	json_t *out;
	size_t n;

	pdk_http_buf_add(b, o->head, o->head_len);
	if (o->dropped > 0)
		add_marker(b, o);
	pdk_http_buf_add(b, o->tail, o->tail_len);
	n = evbuffer_get_length(b);
	p = (const char *)evbuffer_pullup(b, (ssize_t)n);
	out = json_pack("{s:o, s:I, s:I, s:I, s:b, s:b, s:o}", "text", json_text(p, n), "bytes",
			(json_int_t)o->total, "dropped", (json_int_t)o->dropped, "dropped_lines",
			(json_int_t)o->dropped_lines, "truncated", o->dropped > 0, "line_cut",
			o->line_cut, "file", o->file ? json_string(o->file) : json_null());
	add_b64_unless_exact(out, "text_b64", p, n);
	evbuffer_free(b);
	return out;
}

json_t *pdk__api_chunk_json(const char *buf, size_t n)
{
	json_t *o = json_pack("{s:o}", "data", json_text(buf, n));

	add_b64_unless_exact(o, "data_b64", buf, n);
	return o;
}
