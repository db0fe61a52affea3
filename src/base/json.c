#include "common.h"
#include "json.h"
#include "util.h"

#include <string.h>
#include <sys/random.h>

char *pdk_json_dump_line(const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	size_t n;

	if (s == NULL)
		return NULL;
	n = strlen(s);
	s = pdk_xrealloc(s, n + 2);
	s[n] = '\n';
	s[n + 1] = '\0';
	return s;
}

/* ---- the wire's serialiser ---- */

/* As deep as jansson's own parser goes (JSON_PARSER_MAX_DEPTH): deeper is refused. */
#define WIRE_MAX_DEPTH 2048

struct wire {
	char *p;
	size_t len, cap;
};

static void wire_put(struct wire *w, const char *s, size_t n)
{
	if (w->len + n + 2 > w->cap) {
		w->cap = (w->len + n + 2) * 2;
		w->p = pdk_xrealloc(w->p, w->cap);
	}
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

static void wire_u16(struct wire *w, unsigned u)
{
	static const char hex[] = "0123456789ABCDEF";
	const char e[6] = {
		'\\',       'u', hex[(u >> 12) & 15], hex[(u >> 8) & 15], hex[(u >> 4) & 15],
		hex[u & 15]};

	wire_put(w, e, sizeof(e));
}

/*
 * The code point of the UTF-8 sequence of `n` bytes at s[*i] (a lead byte
 * of 0x80 or more), *i advanced past it; -1 when it is not well-formed
 * (overlong, a surrogate, past U+10FFFF, cut short).
 */
static long utf8_next(const unsigned char *s, size_t n, size_t *i)
{
	static const long least[] = {0, 0x80, 0x800, 0x10000};
	unsigned char c = s[*i];
	size_t more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
	long cp = c & (0x3f >> more);

	if (c < 0xc2 || c > 0xf4 || n - *i <= more)
		return -1;
	for (size_t j = 1; j <= more; j++) {
		if ((s[*i + j] & 0xc0) != 0x80)
			return -1;
		cp = (cp << 6) | (s[*i + j] & 0x3f);
	}
	if (cp < least[more] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*i += more + 1;
	return cp;
}

/* One escape of byte `c` (below 0x20, or '"' or '\'), as jansson writes it. */
static void wire_escape(struct wire *w, unsigned char c)
{
	static const char *const named[] = {
		['"'] = "\\\"", ['\\'] = "\\\\", ['\b'] = "\\b", ['\f'] = "\\f",
		['\n'] = "\\n", ['\r'] = "\\r",  ['\t'] = "\\t"};

	if (named[c] != NULL)
		wire_put(w, named[c], 2);
	else
		wire_u16(w, c);
}

/* A string as jansson writes it with JSON_ENSURE_ASCII; false when its bytes are not UTF-8. */
static bool wire_string(struct wire *w, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run;
	long cp;

	wire_put(w, "\"", 1);
	while (i < n) {
		for (run = i;
		     run < n && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\';
		     run++)
			;
		wire_put(w, str + i, run - i);
		i = run;
		if (i == n)
			break;
		if (s[i] < 0x80) {
			wire_escape(w, s[i++]);
			continue;
		}
		cp = utf8_next(s, n, &i);
		if (cp < 0)
			return false;
		if (cp >= 0x10000) {
			wire_u16(w, 0xd800 | (unsigned)((cp - 0x10000) >> 10));
			wire_u16(w, 0xdc00 | (unsigned)((cp - 0x10000) & 0x3ff));
		} else {
			wire_u16(w, (unsigned)cp);
		}
	}
	wire_put(w, "\"", 1);
	return true;
}

static void wire_integer(struct wire *w, json_int_t v)
{
	char d[24];
	size_t k = sizeof(d);
	/* The magnitude as unsigned: the most negative value has no positive twin. */
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do
		d[--k] = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		d[--k] = '-';
	wire_put(w, d + k, sizeof(d) - k);
}

static bool wire_value(struct wire *w, const json_t *v, unsigned depth);

static bool wire_container(struct wire *w, const json_t *v, unsigned depth)
{
	bool object = json_is_object(v), first = true;
	size_t i;
	json_t *x;

	if (depth >= WIRE_MAX_DEPTH)
		return false;
	wire_put(w, object ? "{" : "[", 1);
	if (object) {
		for (void *it = json_object_iter((json_t *)v); it != NULL;
		     it = json_object_iter_next((json_t *)v, it)) {
			x = json_object_iter_value(it);
			if (!first)
				wire_put(w, ",", 1);
			first = false;
			/* A key may hold NUL bytes (JSON_ALLOW_NUL): its length, not strlen(). */
			if (!wire_string(w, json_object_iter_key(it), json_object_iter_key_len(it)))
				return false;
			wire_put(w, ":", 1);
			if (!wire_value(w, x, depth + 1))
				return false;
		}
	} else {
		json_array_foreach(v, i, x)
		{
			if (i > 0)
				wire_put(w, ",", 1);
			if (!wire_value(w, x, depth + 1))
				return false;
		}
	}
	wire_put(w, object ? "}" : "]", 1);
	return true;
}

static bool wire_value(struct wire *w, const json_t *v, unsigned depth)
{
	char *real;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
	case JSON_ARRAY:
		return wire_container(w, v, depth);
	case JSON_STRING:
		return wire_string(w, json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		wire_integer(w, json_integer_value(v));
		return true;
	case JSON_TRUE:
		wire_put(w, "true", 4);
		return true;
	case JSON_FALSE:
		wire_put(w, "false", 5);
		return true;
	case JSON_NULL:
		wire_put(w, "null", 4);
		return true;
	case JSON_REAL:
		/* Rare on the wire: jansson's own form (its shortest round-trip digits). */
		real = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		if (real == NULL)
			return false;
		wire_put(w, real, strlen(real));
		free(real);
		return true;
	default:
		return false;
	}
}

char *pdk_json_dump_wire(const json_t *v)
{
	struct wire w = {0};

	/* jansson writes only an object or an array at the top (no JSON_ENCODE_ANY). */
	if (!(json_is_object(v) || json_is_array(v)) || !wire_value(&w, v, 0)) {
		free(w.p);
		return NULL;
	}
	wire_put(&w, "\n", 1);
	w.p[w.len] = '\0';
	return w.p;
}

char *pdk_json_splice(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	bool a_empty = na == 2, b_empty = nb == 2; /* "{}" */
	char *s = pdk_xmalloc(na + nb + 1);
	size_t n = na - 1; /* a without its '}' */

	memcpy(s, a, n);
	if (!b_empty) {
		if (!a_empty)
			s[n++] = ',';
		memcpy(s + n, b + 1, nb - 1); /* b without its '{' */
		n += nb - 1;
	} else {
		s[n++] = '}';
	}
	s[n] = '\0';
	return s;
}

void pdk_json_seed(void)
{
	size_t seed = 0;

	/* A zero seed would make jansson read /dev/urandom after all. */
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed) && seed != 0)
		json_object_seed(seed);
}

json_t *pdk_json_strv(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		/* Invalid UTF-8 (argv may hold any bytes) is kept visible, not dropped. */
		json_t *s = json_string(v[i]);

		if (s == NULL)
			s = json_stringn_nocheck(v[i], strlen(v[i]));
		json_array_append_new(a, s);
	}
	return a;
}

void pdk_json_set(json_t *obj, const char *key, json_t *value)
{
	if (value != NULL)
		json_object_set_new(obj, key, value);
}
