/*
 * redact.c - secret values, NAME=VALUE words and token shapes out of
 * event strings (see redact.h for the rules).
 *
 * SECURITY: this runs in the event hub before any sink, so the audit store,
 * the --events file and the OTLP exporter never get a registered secret.
 * It is one pass over each string, left to right: at each position a
 * registered value is tried first (longest first), then the token shapes,
 * then a secret NAME= prefix; whatever matched is skipped as a whole.
 */
#include "common.h"
#include "base.h"
#include "redact.h"

#include <ctype.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

struct secret {
	char *name;
	char *value;
	size_t len;
};

struct pdk_redact {
	struct secret *v; /* longest value first */
	size_t n;
	size_t longest_name; /* of the registered secrets */
	bool first[256];     /* the first bytes of the registered values */
};

/*
 * The most bytes the redacted copy of `len` bytes can take: each step of
 * redact_step() writes at most 6 bytes per byte it consumes ("=[REDACTED]"
 * for "=x", "\xNN" for one byte), plus, for a registered value (at least
 * PDK_REDACT_MIN_SECRET bytes), its name. The output buffer is capped there.
 */
static size_t output_bound(const struct pdk_redact *r, size_t len)
{
	return 6 * len + (len / PDK_REDACT_MIN_SECRET) * (r != NULL ? r->longest_name : 0);
}

static void out_put(struct pdk_buf *o, const char *s, size_t n)
{
	if (pdk_buf_add(o, s, n) < 0)
		pdk_bug("redact: the output passed its bound");
}

static void out_str(struct pdk_buf *o, const char *s)
{
	out_put(o, s, strlen(s));
}

struct pdk_redact *pdk_redact_new(void)
{
	return pdk_xcalloc(1, sizeof(struct pdk_redact));
}

void pdk_redact_free(struct pdk_redact *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].name);
		/* The value was a secret: do not leave it in freed memory. */
		explicit_bzero(r->v[i].value, r->v[i].len);
		free(r->v[i].value);
	}
	free(r->v);
	free(r);
}

bool pdk_redact_add_secret(struct pdk_redact *r, const char *name, const char *value)
{
	size_t len = strlen(value);
	size_t at = 0;

	if (len < PDK_REDACT_MIN_SECRET)
		return false;
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].len == len && memcmp(r->v[i].value, value, len) == 0)
			return true;
	while (at < r->n && r->v[at].len >= len)
		at++;
	r->v = pdk_xrealloc(r->v, (r->n + 1) * sizeof(*r->v));
	memmove(r->v + at + 1, r->v + at, (r->n - at) * sizeof(*r->v));
	r->v[at] =
		(struct secret){.name = pdk_xstrdup(name), .value = pdk_xstrdup(value), .len = len};
	r->n++;
	r->first[(unsigned char)value[0]] = true;
	if (strlen(name) > r->longest_name)
		r->longest_name = strlen(name);
	return true;
}

bool pdk_redact_name_is_secret(const char *name, size_t len)
{
	static const char *const words[] = {"TOKEN",   "SECRET", "PASSWORD",   "PASSWD",
					    "API_KEY", "KEY",    "CREDENTIAL", "AUTH"};

	for (size_t w = 0; w < PDK_ARRAY_SIZE(words); w++) {
		size_t wl = strlen(words[w]);

		for (size_t i = 0; i + wl <= len; i++)
			if (strncasecmp(name + i, words[w], wl) == 0)
				return true;
	}
	return false;
}

static bool is_alnum(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Character classes of the token shapes. */
enum cls { CLS_WORD, CLS_WORD_DASH, CLS_UPPER_DIGIT, CLS_ALNUM_DASH, CLS_BEARER };

static bool in_class(enum cls c, unsigned char ch)
{
	switch (c) {
	case CLS_WORD:
		return is_alnum(ch) || ch == '_';
	case CLS_WORD_DASH:
		return is_alnum(ch) || ch == '_' || ch == '-';
	case CLS_UPPER_DIGIT:
		return (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z');
	case CLS_ALNUM_DASH:
		return is_alnum(ch) || ch == '-';
	case CLS_BEARER:
		return is_alnum(ch) || strchr("-._~+/=", ch) != NULL;
	default:
		return false;
	}
}

/*
 * A token shape: a literal prefix (matched case-sensitively unless
 * `icase`), then at least `min` characters of `cls`. `keep` is true when
 * the prefix stays visible ("Bearer ").
 */
struct shape {
	const char *prefix;
	enum cls cls;
	size_t min;
	bool icase;
	bool keep;
};

static const struct shape shapes[] = {
	{"ghp_", CLS_WORD, 20, false, false},        {"gho_", CLS_WORD, 20, false, false},
	{"ghu_", CLS_WORD, 20, false, false},        {"ghs_", CLS_WORD, 20, false, false},
	{"ghr_", CLS_WORD, 20, false, false},        {"github_pat_", CLS_WORD, 20, false, false},
	{"sk-", CLS_WORD_DASH, 20, false, false},    {"AKIA", CLS_UPPER_DIGIT, 16, false, false},
	{"xoxb-", CLS_ALNUM_DASH, 10, false, false}, {"xoxa-", CLS_ALNUM_DASH, 10, false, false},
	{"xoxp-", CLS_ALNUM_DASH, 10, false, false}, {"xoxs-", CLS_ALNUM_DASH, 10, false, false},
	{"xoxr-", CLS_ALNUM_DASH, 10, false, false}, {"bearer ", CLS_BEARER, 8, true, true},
};

/*
 * Length of a token shape starting at s[0] (0: none). *keep gets the
 * length of the prefix to copy unredacted.
 */
static size_t match_shape(const char *s, size_t len, size_t *keep)
{
	for (size_t k = 0; k < PDK_ARRAY_SIZE(shapes); k++) {
		const struct shape *sh = &shapes[k];
		size_t pl = strlen(sh->prefix);
		size_t n;

		/* A shape's first byte is a letter: for `icase`, either case of it. */
		if (((unsigned char)s[0] | (sh->icase ? 0x20 : 0)) != (unsigned char)sh->prefix[0])
			continue;
		if (len < pl ||
		    (sh->icase ? strncasecmp(s, sh->prefix, pl) : memcmp(s, sh->prefix, pl)) != 0)
			continue;
		n = pl;
		while (sh->keep && n < len && s[n] == ' ')
			n++;
		*keep = sh->keep ? n : 0;
		while (n < len && in_class(sh->cls, (unsigned char)s[n]))
			n++;
		if (n - (sh->keep ? *keep : pl) >= sh->min)
			return n;
	}
	return 0;
}

/* A registered secret starting at s[0], or NULL. */
static const struct secret *match_secret(const struct pdk_redact *r, const char *s, size_t len)
{
	for (size_t i = 0; r != NULL && i < r->n; i++)
		if (r->v[i].len <= len && memcmp(s, r->v[i].value, r->v[i].len) == 0)
			return &r->v[i];
	return NULL;
}

static bool name_char(unsigned char c)
{
	return is_alnum(c) || c == '_' || c == '-';
}

/*
 * At s[i] == '=': if the word before it is a secret-looking name, the
 * length of the value after '=' (a quoted value up to its closing quote,
 * else up to a blank, quote, '&', ';' or ','), else 0.
 */
static size_t secret_assignment(const char *s, size_t len, size_t i)
{
	size_t start = i;
	size_t n = 0;

	while (start > 0 && name_char((unsigned char)s[start - 1]))
		start--;
	if (start == i || !pdk_redact_name_is_secret(s + start, i - start))
		return 0;
	if (i + 1 < len && (s[i + 1] == '\'' || s[i + 1] == '"')) {
		/* A quoted value: up to the closing quote, or the end. */
		const char *close = memchr(s + i + 2, s[i + 1], len - i - 2);

		return close ? (size_t)(close - (s + i)) : len - i - 1;
	}
	while (i + 1 + n < len && strchr(" \t\r\n\"'&;,", s[i + 1 + n]) == NULL)
		n++;
	return n;
}

/* One step at s[i]: appends to `o` and returns how many input bytes it took. */
static size_t redact_step(const struct pdk_redact *r, const char *s, size_t len, size_t i,
			  struct pdk_buf *o, bool *changed)
{
	const unsigned char c = (unsigned char)s[i];
	const struct secret *sec = match_secret(r, s + i, len - i);
	size_t keep = 0;
	size_t n;

	if (sec != NULL) {
		out_str(o, "[REDACTED:");
		out_str(o, sec->name);
		out_str(o, "]");
		*changed = true;
		return sec->len;
	}
	if ((i == 0 || !is_alnum((unsigned char)s[i - 1])) &&
	    (n = match_shape(s + i, len - i, &keep)) > 0) {
		out_put(o, s + i, keep);
		out_str(o, "[REDACTED]");
		*changed = true;
		return n;
	}
	if (c == '=' && (n = secret_assignment(s, len, i)) > 0) {
		out_str(o, "=[REDACTED]");
		*changed = true;
		return n + 1;
	}
	n = pdk_utf8_len((const unsigned char *)s + i, len - i);
	if (n == 0 || c == 0) {
		char hex[8];

		(void)snprintf(hex, sizeof(hex), "\\x%02x", c);
		out_str(o, hex);
		*changed = true;
		return 1;
	}
	out_put(o, s + i, n);
	return n;
}

static bool step_starts[256]; /* the first bytes of the shapes (both cases for icase), '=', NUL */
static pthread_once_t step_starts_once = PTHREAD_ONCE_INIT;

/* From the shapes table itself: a shape added there is never missed here. */
static void step_starts_init(void)
{
	for (size_t k = 0; k < PDK_ARRAY_SIZE(shapes); k++) {
		unsigned char c = (unsigned char)shapes[k].prefix[0];

		step_starts[c] = true;
		if (shapes[k].icase)
			step_starts[(unsigned char)toupper(c)] =
				step_starts[(unsigned char)tolower(c)] = true;
	}
	step_starts['='] = step_starts['\0'] = true;
}

/*
 * Whether a step at a byte `c` can be anything but a copy of one ASCII
 * byte: the first byte of a registered value, of a token shape, '=', NUL,
 * or a byte that starts (or breaks) a multi-byte character.
 */
static bool may_change(const struct pdk_redact *r, unsigned char c)
{
	return c >= 0x80 || step_starts[c] || (r != NULL && r->first[c]);
}

/*
 * What redact_step() would take at s[i] when it copies it unchanged, or 0
 * when it would change something there.
 */
static size_t quiet_step(const struct pdk_redact *r, const char *s, size_t len, size_t i)
{
	const unsigned char c = (unsigned char)s[i];
	size_t keep = 0;
	size_t n;

	if (match_secret(r, s + i, len - i) != NULL)
		return 0;
	if ((i == 0 || !is_alnum((unsigned char)s[i - 1])) &&
	    match_shape(s + i, len - i, &keep) > 0)
		return 0;
	if (c == '=' && secret_assignment(s, len, i) > 0)
		return 0;
	n = pdk_utf8_len((const unsigned char *)s + i, len - i);
	return c == 0 ? 0 : n;
}

char *pdk_redact_string(const struct pdk_redact *r, const char *s, size_t len)
{
	_cleanup_buf_ struct pdk_buf o = PDK_BUF_INIT(output_bound(r, len));
	bool changed = false;
	size_t i = 0;

	/*
	 * Most strings have nothing to redact: they are walked without a copy,
	 * the steps tried only where one could start, up to the first change.
	 */
	(void)pthread_once(&step_starts_once, step_starts_init);
	while (i < len) {
		size_t n;

		if (!may_change(r, (unsigned char)s[i])) {
			i++;
			continue;
		}
		n = quiet_step(r, s, len, i);
		if (n == 0)
			break;
		i += n;
	}
	if (i >= len)
		return NULL;
	/* The same steps from there, with the unchanged bytes before copied as they are. */
	out_put(&o, s, i);
	while (i < len)
		i += redact_step(r, s, len, i, &o, &changed);
	if (!changed)
		pdk_bug("redact: a step that changed nothing was taken for a change");
	return pdk_buf_take(&o, NULL);
}

char *pdk__redact_string_each_step(const struct pdk_redact *r, const char *s, size_t len)
{
	_cleanup_buf_ struct pdk_buf o = PDK_BUF_INIT(output_bound(r, len));
	bool changed = false;

	for (size_t i = 0; i < len;)
		i += redact_step(r, s, len, i, &o, &changed);
	return changed ? pdk_buf_take(&o, NULL) : NULL;
}

static bool redact_value(const struct pdk_redact *r, json_t *v)
{
	_cleanup_free_ char *s = NULL;

	if (!json_is_string(v))
		return false;
	s = pdk_redact_string(r, json_string_value(v), json_string_length(v));
	if (s == NULL)
		return false;
	/* SECURITY: the new text is valid UTF-8 by construction, so the set cannot fail. */
	if (json_string_set(v, s) < 0)
		pdk_oom();
	return true;
}

bool pdk_redact_json_needed(const struct pdk_redact *r, const json_t *v)
{
	const char *key;
	json_t *item;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, item) if (pdk_redact_json_needed(r, item))
		{
			return true;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, item) if (pdk_redact_json_needed(r, item))
		{
			return true;
		}
	} else if (json_is_string(v)) {
		_cleanup_free_ char *s =
			pdk_redact_string(r, json_string_value(v), json_string_length(v));

		return s != NULL;
	}
	return false;
}

size_t pdk_redact_json(const struct pdk_redact *r, json_t *v)
{
	size_t n = 0;
	const char *key;
	json_t *item;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach(v, key, item) n += pdk_redact_json(r, item);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, item) n += pdk_redact_json(r, item);
	} else {
		n += redact_value(r, v);
	}
	return n;
}
