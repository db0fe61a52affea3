#include "common.h"
#include "json.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

char *pdk_json_dump_line(const json_t *v)
{
	size_t n;
	char *s = pdk_json_dump_sorted(v, &n);

	if (s == NULL)
		return NULL;
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
	bool count;  /* only count the bytes (pdk_json_wire_size()) */
	bool sorted; /* an object's members in the order of their keys (pdk_json_dump_sorted()) */
};

/* A member of an object, for writing the members in the order of their keys. */
struct wire_member {
	const char *key;
	size_t len;
	json_t *value;
};

/* jansson's order (JSON_SORT_KEYS): the keys' bytes, then the shorter first. */
static int wire_member_cmp(const void *a, const void *b)
{
	const struct wire_member *x = a, *y = b;
	int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);

	return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

static void wire_put(struct wire *w, const char *s, size_t n)
{
	if (w->count) {
		w->len += n;
		return;
	}
	if (w->len + n + 2 > w->cap) {
		/* A message's line is rarely under 256 bytes: no realloc for each word of it. */
		w->cap = (w->len + n + 2) * 2 < 256 ? 256 : (w->len + n + 2) * 2;
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

/* The bytes a string's text holds as they are: printable ASCII but '"' and '\'. */
static const bool wire_plain[256] = {
	[0x20 ... 0x21] = true, [0x23 ... 0x5b] = true, [0x5d ... 0x7f] = true};

/* A string as jansson writes it with JSON_ENSURE_ASCII; false when its bytes are not UTF-8. */
static bool wire_string(struct wire *w, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run;
	long cp;

	wire_put(w, "\"", 1);
	while (i < n) {
		for (run = i; run < n && wire_plain[s[run]]; run++)
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

static bool wire_sorted_object(struct wire *w, const json_t *v, unsigned depth)
{
	struct wire_member few[16];
	size_t n = json_object_size(v), i = 0;
	struct wire_member *m = n <= PDK_ARRAY_SIZE(few) ? few : pdk_xcalloc(n, sizeof(*m));
	bool ok = true;

	for (void *it = json_object_iter((json_t *)v); it != NULL && i < n;
	     it = json_object_iter_next((json_t *)v, it), i++)
		m[i] = (struct wire_member){.key = json_object_iter_key(it),
					    .len = json_object_iter_key_len(it),
					    .value = json_object_iter_value(it)};
	qsort(m, i, sizeof(*m), wire_member_cmp);
	wire_put(w, "{", 1);
	for (size_t k = 0; k < i && ok; k++) {
		if (k > 0)
			wire_put(w, ",", 1);
		ok = wire_string(w, m[k].key, m[k].len);
		if (ok) {
			wire_put(w, ":", 1);
			ok = wire_value(w, m[k].value, depth + 1);
		}
	}
	wire_put(w, "}", 1);
	if (m != few)
		free(m);
	return ok;
}

static bool wire_container(struct wire *w, const json_t *v, unsigned depth)
{
	bool object = json_is_object(v), first = true;
	size_t i;
	json_t *x;

	if (depth >= WIRE_MAX_DEPTH)
		return false;
	if (object && w->sorted)
		return wire_sorted_object(w, v, depth);
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

char *pdk_json_dump_sorted(const json_t *v, size_t *len)
{
	struct wire w = {.sorted = true};

	if (!(json_is_object(v) || json_is_array(v)) || !wire_value(&w, v, 0)) {
		free(w.p);
		return NULL;
	}
	wire_put(&w, "", 0);
	w.p[w.len] = '\0';
	if (len != NULL)
		*len = w.len;
	return w.p;
}

size_t pdk_json_wire_size(const json_t *v)
{
	struct wire w = {.count = true};

	if (!(json_is_object(v) || json_is_array(v)) || !wire_value(&w, v, 0))
		return 0;
	return w.len + 1;
}

/* ---- the plain parser ---- */

/*
 * Deeper documents are left to jansson (which refuses past its own
 * JSON_PARSER_MAX_DEPTH): a message is rarely a tenth as deep.
 */
#define PLAIN_MAX_DEPTH 256
/* Integers of more digits are left to jansson, which says when one is too big. */
#define PLAIN_MAX_DIGITS 18

struct plain {
	const unsigned char *s, *end;
	char *scratch; /* a string's unescaped bytes */
	size_t scratch_cap;
};

static void plain_ws(struct plain *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

/* Whether the next byte is `c`, taken if so. */
static bool plain_eat(struct plain *p, unsigned char c)
{
	if (p->s >= p->end || *p->s != c)
		return false;
	p->s++;
	return true;
}

static int plain_hex4(const unsigned char *s)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		unsigned char c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* A "\uXXXX" escape at s (past its backslash and 'u'), a pair for a surrogate; -1: none. */
static long plain_unicode(struct plain *p)
{
	int hi, lo;

	if (p->end - p->s < 4 || (hi = plain_hex4(p->s)) < 0)
		return -1;
	p->s += 4;
	if (hi < 0xd800 || hi > 0xdfff)
		return hi;
	if (hi > 0xdbff || p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' ||
	    (lo = plain_hex4(p->s + 2)) < 0xdc00 || lo > 0xdfff)
		return -1;
	p->s += 6;
	return 0x10000 + (((long)hi - 0xd800) << 10) + (lo - 0xdc00);
}

static size_t plain_utf8(long cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * A string at p->s (past its opening quote): its bytes in *out (the input
 * itself when it has no escape, else the scratch buffer) and *len. False
 * when it is not a plain string: a control character, bytes that are not
 * UTF-8, a NUL, a lone surrogate, an unknown escape, no closing quote.
 */
static bool plain_string(struct plain *p, const char **out, size_t *len)
{
	const unsigned char *start = p->s;
	size_t n = 0;

	while (p->s < p->end && *p->s != '"' && *p->s != '\\') {
		size_t k = 1;

		if (*p->s < 0x20)
			return false;
		if (*p->s >= 0x80 && (k = pdk_utf8_len(p->s, (size_t)(p->end - p->s))) == 0)
			return false;
		p->s += k;
	}
	if (p->s >= p->end)
		return false;
	if (*p->s == '"') {
		*out = (const char *)start;
		*len = (size_t)(p->s - start);
		p->s++;
		return true;
	}
	/* Escapes: unescaped into the scratch buffer (never longer than the text). */
	if ((size_t)(p->end - start) + 4 > p->scratch_cap) {
		p->scratch_cap = (size_t)(p->end - start) + 4;
		p->scratch = pdk_xrealloc(p->scratch, p->scratch_cap);
	}
	memcpy(p->scratch, start, (size_t)(p->s - start));
	n = (size_t)(p->s - start);
	while (p->s < p->end && *p->s != '"') {
		unsigned char c = *p->s;
		size_t k = 1;
		long cp;

		if (c < 0x20)
			return false;
		if (c != '\\') {
			if (c >= 0x80 && (k = pdk_utf8_len(p->s, (size_t)(p->end - p->s))) == 0)
				return false;
			memcpy(p->scratch + n, p->s, k);
			n += k;
			p->s += k;
			continue;
		}
		if (p->end - p->s < 2)
			return false;
		c = p->s[1];
		p->s += 2;
		switch (c) {
		case '"':
		case '\\':
		case '/':
			p->scratch[n++] = (char)c;
			break;
		case 'b':
			p->scratch[n++] = '\b';
			break;
		case 'f':
			p->scratch[n++] = '\f';
			break;
		case 'n':
			p->scratch[n++] = '\n';
			break;
		case 'r':
			p->scratch[n++] = '\r';
			break;
		case 't':
			p->scratch[n++] = '\t';
			break;
		case 'u':
			cp = plain_unicode(p);
			if (cp <= 0) /* none, or U+0000 (jansson refuses NUL) */
				return false;
			n += plain_utf8(cp, p->scratch + n);
			break;
		default:
			return false;
		}
	}
	if (p->s >= p->end)
		return false;
	p->s++;
	*out = p->scratch;
	*len = n;
	return true;
}

static json_t *plain_value(struct plain *p, unsigned depth);

static json_t *plain_number(struct plain *p)
{
	bool neg = p->s < p->end && *p->s == '-';
	const unsigned char *d = p->s + neg;
	json_int_t v = 0;
	size_t n = 0;

	while (d + n < p->end && d[n] >= '0' && d[n] <= '9')
		n++;
	/* No digit, a leading zero, too many digits, a fraction or an exponent: jansson's. */
	if (n == 0 || (d[0] == '0' && n > 1) || n > PLAIN_MAX_DIGITS)
		return NULL;
	if (d + n < p->end && (d[n] == '.' || d[n] == 'e' || d[n] == 'E'))
		return NULL;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (d[i] - '0');
	p->s = d + n;
	return json_integer(neg ? -v : v);
}

static json_t *plain_word(struct plain *p, const char *word, json_t *v)
{
	size_t n = strlen(word);

	if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0)
		return NULL;
	p->s += n;
	/* "truex" is one invalid token to jansson: a letter may not follow. */
	if (p->s < p->end && *p->s >= 'a' && *p->s <= 'z')
		return NULL;
	return v;
}

static json_t *plain_array(struct plain *p, unsigned depth)
{
	json_t *a = json_array();

	if (a == NULL)
		pdk_oom();
	plain_ws(p);
	if (plain_eat(p, ']'))
		return a;
	for (;;) {
		json_t *v = plain_value(p, depth + 1);

		if (v == NULL || json_array_append_new(a, v) < 0)
			break;
		plain_ws(p);
		if (plain_eat(p, ','))
			continue;
		if (plain_eat(p, ']'))
			return a;
		break;
	}
	json_decref(a);
	return NULL;
}

static json_t *plain_object(struct plain *p, unsigned depth)
{
	json_t *o = json_object();

	if (o == NULL)
		pdk_oom();
	plain_ws(p);
	if (plain_eat(p, '}'))
		return o;
	for (;;) {
		_cleanup_free_ char *key = NULL;
		const char *k;
		size_t klen;
		json_t *v;

		if (!plain_eat(p, '"') || !plain_string(p, &k, &klen))
			break;
		/* The key is copied: the scratch buffer is reused by the value. */
		key = pdk_xmalloc(klen + 1);
		memcpy(key, k, klen);
		key[klen] = '\0';
		/* A duplicated key is refused (JSON_REJECT_DUPLICATES), by jansson's words. */
		if (json_object_getn(o, key, klen) != NULL)
			break;
		plain_ws(p);
		if (!plain_eat(p, ':'))
			break;
		v = plain_value(p, depth + 1);
		if (v == NULL)
			break;
		if (json_object_setn_new_nocheck(o, key, klen, v) < 0)
			pdk_oom();
		plain_ws(p);
		if (plain_eat(p, ',')) {
			plain_ws(p);
			continue;
		}
		if (plain_eat(p, '}'))
			return o;
		break;
	}
	json_decref(o);
	return NULL;
}

static json_t *plain_value(struct plain *p, unsigned depth)
{
	const char *str;
	size_t len;
	json_t *v;

	if (depth >= PLAIN_MAX_DEPTH)
		return NULL;
	plain_ws(p);
	if (p->s >= p->end)
		return NULL;
	switch (*p->s) {
	case '{':
		p->s++;
		return plain_object(p, depth);
	case '[':
		p->s++;
		return plain_array(p, depth);
	case '"':
		p->s++;
		if (!plain_string(p, &str, &len))
			return NULL;
		v = json_stringn_nocheck(str, len);
		if (v == NULL)
			pdk_oom();
		return v;
	case 't':
		return plain_word(p, "true", json_true());
	case 'f':
		return plain_word(p, "false", json_false());
	case 'n':
		return plain_word(p, "null", json_null());
	default:
		return plain_number(p);
	}
}

json_t *pdk_json_parse_plain(const char *s, size_t len)
{
	struct plain p = {.s = (const unsigned char *)s, .end = (const unsigned char *)s + len};
	json_t *v;

	plain_ws(&p);
	if (p.s >= p.end || (*p.s != '{' && *p.s != '['))
		return NULL;
	v = plain_value(&p, 0);
	free(p.scratch);
	if (v == NULL)
		return NULL;
	plain_ws(&p);
	if (p.s != p.end) {
		json_decref(v);
		return NULL;
	}
	return v;
}

json_t *pdk_json_loadb(const char *s, size_t len, size_t flags, json_error_t *je)
{
	json_t *v = (flags & JSON_DECODE_INT_AS_REAL) ? NULL : pdk_json_parse_plain(s, len);

	return v != NULL ? v : json_loadb(s, len, flags, je);
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
