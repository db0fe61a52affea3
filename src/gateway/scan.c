/*
 * scan.c - the shapes of concealment and injection in a tool definition's
 * text (docs/gateway.md, PINNING): what a poisoned description looks like
 * to a reader who is not the model. The scan flags, it does not decide:
 * its findings go with the definition to the human who approves it.
 *
 * Every string of the definition is looked at, its keys too: the name,
 * the title and description, and everything inside the input and output
 * schemas (property descriptions are a known hiding place) and the
 * annotations. Each shape is reported once per field, with an excerpt.
 */
#include "common.h"
#include "base.h"
#include "gateway.h"

#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXCERPT_MAX 80 /* characters of an excerpt, an escape counting as one */
#define MAX_DEPTH   64 /* of a schema walked */

/* Case-insensitive POSIX extended expressions, one shape each. */
static const struct {
	const char *shape;
	const char *re;
} shapes[] = {
	{"conceal", "(do not|don't|dont|never|without)[[:space:]]+(tell|telling|mention|mentioning|"
		    "inform|informing|reveal|revealing|show|showing|notify|notifying|alert|"
		    "alerting|let)[^.]{0,60}[[:space:]]user"},
	{"conceal", "(hide|conceal|keep)[^.]{0,30}from[[:space:]]+the[[:space:]]+user"},
	{"conceal", "user[[:space:]]+(must|should)[[:space:]]+(not|never)[[:space:]]+(know|see|"
		    "learn|notice|find out)"},
	{"credentials",
	 "~/\\.ssh|\\.ssh/|id_rsa|id_ed25519|id_ecdsa|\\.aws/credentials|\\.netrc|"
	 "\\.npmrc|\\.pgpass|\\.docker/config\\.json|(^|[^[:alnum:]])\\.env([^[:alnum:]]|$)"},
	{"credentials", "(read|cat|open|include|send|pass|copy|extract|retrieve|print|upload|"
			"attach|append|dump|collect)[^.]{0,40}(credentials|api[ _-]?keys?|"
			"private[ _-]?keys?|secret keys?|passwords?|access tokens?|auth tokens?|"
			"bearer tokens?|session tokens?|ssh keys?)"},
	{"override", "(ignore|disregard|forget)[[:space:]]+(all[[:space:]]+)?(the[[:space:]]+)?"
		     "(previous|prior|above|earlier|preceding|other)[[:space:]]+"
		     "(instructions|prompts|rules|directions)"},
	{"override", "<[[:space:]]*/?[[:space:]]*(important|system|instructions?)[[:space:]]*>"},
	{"override", "system[[:space:]_-]+prompt"},
	{"exfiltrate",
	 "(send|pass|post|upload|forward|transmit|exfiltrate|leak|report)[^.]{0,60}"
	 "(https?://|to[[:space:]]+(the[[:space:]]+|this[[:space:]]+)?(url|endpoint|"
	 "webhook|server at|address)|to[[:space:]]+(an)?other[[:space:]]+tool|"
	 "as[[:space:]]+(the[[:space:]]+|an?[[:space:]]+)?(argument|parameter)[[:space:]]+"
	 "(of|to)[[:space:]]+[[:alnum:]_]+)"},
};

static regex_t compiled[PDK_ARRAY_SIZE(shapes)];
static bool compiled_ok;
static pthread_once_t compile_once = PTHREAD_ONCE_INIT;

static void compile_shapes(void)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(shapes); i++) {
		if (regcomp(&compiled[i], shapes[i].re, REG_EXTENDED | REG_ICASE) != 0)
			pdk_bug("a scan expression does not compile");
	}
	compiled_ok = true;
}

/*
 * An invisible code point: zero-width and direction marks, bidi embeddings
 * and isolates, word joiners and invisible operators, the byte-order mark,
 * and the tag characters (which spell hidden ASCII).
 */
static bool invisible(uint32_t c)
{
	return (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
	       (c >= 0x2060 && c <= 0x2064) || (c >= 0x2066 && c <= 0x2069) || c == 0xFEFF ||
	       (c >= 0xE0000 && c <= 0xE007F);
}

/* The code point at `p` (n bytes left) into *cp; its length (1 for a stray byte). */
static size_t decode(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t len = pdk_utf8_len(p, n);

	if (len <= 1 || len > n) {
		*cp = p[0];
		return 1;
	}
	*cp = p[0] & (0xFF >> (len + 1));
	for (size_t i = 1; i < len; i++)
		*cp = (*cp << 6) | (p[i] & 0x3F);
	return len;
}

/* Up to EXCERPT_MAX characters of `s` from byte `from`, invisibles as \uXXXX. */
static char *excerpt(const char *s, size_t from)
{
	size_t n = strlen(s), chars = 0;
	_cleanup_free_ char *out = pdk_xmalloc(EXCERPT_MAX * 10 + 1);
	size_t k = 0;

	for (size_t i = from; i < n && chars < EXCERPT_MAX; chars++) {
		uint32_t cp;
		size_t len = decode((const unsigned char *)s + i, n - i, &cp);

		if (invisible(cp) || cp < 0x20 || cp == 0x7F)
			k += (size_t)snprintf(out + k, 11, cp > 0xFFFF ? "\\u%05X" : "\\u%04X", cp);
		else
			memcpy(out + k, s + i, len), k += len;
		i += len;
	}
	out[k] = '\0';
	return steal_ptr(&out);
}

/* Where the excerpt of a match at byte `at` starts: a little before it, on a character. */
static size_t excerpt_start(const char *s, size_t at)
{
	size_t from = at > 20 ? at - 20 : 0;

	while (from > 0 && ((unsigned char)s[from] & 0xC0) == 0x80)
		from--;
	return from;
}

static void add(json_t *found, const char *field, const char *shape, const char *s, size_t at)
{
	_cleanup_free_ char *ex = excerpt(s, excerpt_start(s, at));

	json_array_append_new(
		found, json_pack("{s:s,s:s,s:s}", "field", field, "shape", shape, "excerpt", ex));
}

static void scan_invisible(json_t *found, const char *field, const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t len = decode((const unsigned char *)s + i, n - i, &cp);

		if (invisible(cp)) {
			add(found, field, "invisible", s, i);
			return;
		}
		i += len;
	}
}

static void scan_string(json_t *found, const char *field, const char *s)
{
	const char *last = NULL;

	scan_invisible(found, field, s);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(shapes); i++) {
		regmatch_t m;

		if (last != NULL && strcmp(last, shapes[i].shape) == 0)
			continue; /* this shape is already reported for this field */
		if (regexec(&compiled[i], s, 1, &m, 0) == 0) {
			add(found, field, shapes[i].shape, s, (size_t)m.rm_so);
			last = shapes[i].shape;
		}
	}
}

/* Every string of `v`, keys included, each named by its JSON pointer below `field`. */
static void scan_value(json_t *found, const char *field, const json_t *v, int depth)
{
	const char *key;
	json_t *kid;
	size_t i;

	if (depth > MAX_DEPTH)
		return;
	if (json_is_string(v))
		scan_string(found, field, json_string_value(v));
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, kid)
		{
			_cleanup_free_ char *f = pdk_xasprintf("%s/%s", field, key);

			scan_string(found, f, key);
			scan_value(found, f, kid, depth + 1);
		}
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, kid)
		{
			_cleanup_free_ char *f = pdk_xasprintf("%s/%zu", field, i);

			scan_value(found, f, kid, depth + 1);
		}
	}
}

json_t *pdk_gw_scan_tool(const json_t *tool)
{
	static const char *const members[] = {"name",        "title",        "description",
					      "inputSchema", "outputSchema", "annotations"};
	json_t *found = json_array();

	pthread_once(&compile_once, compile_shapes);
	for (size_t i = 0; compiled_ok && json_is_object(tool) && i < PDK_ARRAY_SIZE(members);
	     i++) {
		const json_t *v = json_object_get(tool, members[i]);

		if (v != NULL)
			scan_value(found, members[i], v, 0);
	}
	return found;
}
