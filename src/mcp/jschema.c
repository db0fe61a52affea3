/*
 * jschema.c - JSON Schema 2020-12, the subset MCP tools use, for schemas
 * nobody here wrote (jschema.h, docs/json-schema.md).
 *
 * A schema is untrusted input: an upstream MCP server chose it. So the
 * compiler works on its own bounded copy (VALUES_MAX values,
 * nested at most DOC_DEPTH_MAX deep), refuses every keyword it would
 * otherwise ignore while it changes what is valid, resolves each $ref once
 * to a node of the same document and refuses a cycle of references that
 * never moves into the instance. The validator then counts its steps and its
 * nesting, so no schema and no instance can make it run without bound, and
 * a check that gave up is never taken as a failure that `not` could invert.
 */
#include "common.h"
#include "jschema.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* JSON values in one schema document, and how deep the document may nest. */
#define VALUES_MAX    65536
#define DOC_DEPTH_MAX (4 * PDK_JSCHEMA_DEPTH_MAX)
/* Schemas applied in place (allOf, $ref, ...) one inside the other. */
#define INPLACE_MAX 256
/* Nested evaluations in one validation, and evaluations in all. */
#define EVAL_DEPTH_MAX 1024
#define STEPS_MAX      (1u << 22)
#define SEARCH_STEPS   64
/* A pattern's length in bytes, and PCRE2's limits for one match. */
#define PATTERN_MAX    4096
#define MATCH_LIMIT    100000
#define MATCH_DEPTH    1000
#define MATCH_HEAP_KIB 4096
/* The text of an anyOf or oneOf failure that quotes its alternatives. */
#define BRANCHES_MSG 768

/* The return of a check that gave up (a bound), never inverted by `not`. */
#define GAVE_UP (-E2BIG)

enum type_bit {
	T_NULL = 1 << 0,
	T_BOOLEAN = 1 << 1,
	T_OBJECT = 1 << 2,
	T_ARRAY = 1 << 3,
	T_NUMBER = 1 << 4,
	T_STRING = 1 << 5,
	T_INTEGER = 1 << 6,
};

static const struct {
	const char *name;
	unsigned bit;
} type_names[] = {
	{"null", T_NULL},     {"boolean", T_BOOLEAN}, {"object", T_OBJECT},   {"array", T_ARRAY},
	{"number", T_NUMBER}, {"string", T_STRING},   {"integer", T_INTEGER},
};

struct jnode;

/* A subschema under a name: properties, dependentSchemas. */
struct kid {
	const char *name; /* borrowed from the schema's copy */
	struct jnode *node;
};

/* A patternProperties entry. */
struct pat {
	pcre2_code *re;
	struct jnode *node;
};

struct list {
	struct jnode **v;
	size_t n;
};

/* One compiled schema. Every pointer to JSON borrows from the schema's own copy. */
struct jnode {
	int boolean;    /* -1: an object schema; 0: false; 1: true */
	char *at;       /* its JSON pointer in the schema, for messages */
	unsigned types; /* T_* bits; 0: any */
	const json_t *enum_v, *const_v;
	struct kid *props; /* sorted by name */
	size_t nprops;
	const json_t *required;
	struct jnode *additional;
	struct pat *pprops;
	size_t npprops;
	struct jnode *names;
	long long min_props, max_props;
	const json_t *dep_required; /* object: name -> array of names */
	struct kid *dep_schemas;
	size_t ndep_schemas;
	struct list prefix;
	struct jnode *items;
	long long min_items, max_items;
	bool unique;
	struct jnode *contains;
	long long min_contains, max_contains;
	long long min_len, max_len;
	pcre2_code *pattern;
	const char *pattern_src;
	const json_t *minimum, *maximum, *xminimum, *xmaximum, *multiple;
	struct list all, any, one;
	struct jnode *not_, *if_, *then_, *else_;
	struct jnode *ref;
	const char *ref_src;
	int color; /* the cycle check's mark */
};

struct pdk_jschema {
	json_t *doc; /* the schema's own copy */
	struct jnode **nodes;
	size_t nnodes, cap;
	struct jnode *root;
	pcre2_match_context *mctx;
};

const char *const pdk_jschema_keywords[] = {
	"type",
	"enum",
	"const",
	"properties",
	"required",
	"additionalProperties",
	"patternProperties",
	"propertyNames",
	"minProperties",
	"maxProperties",
	"dependentRequired",
	"dependentSchemas",
	"prefixItems",
	"items",
	"minItems",
	"maxItems",
	"uniqueItems",
	"contains",
	"minContains",
	"maxContains",
	"minLength",
	"maxLength",
	"pattern",
	"minimum",
	"maximum",
	"exclusiveMinimum",
	"exclusiveMaximum",
	"multipleOf",
	"allOf",
	"anyOf",
	"oneOf",
	"not",
	"if",
	"then",
	"else",
	"$ref",
	"$defs",
	"definitions",
	NULL,
};

/* Keywords refused at compile, each with what to use instead. */
static const struct {
	const char *name;
	const char *why;
} refused[] = {
	{"unevaluatedProperties", "not supported (use additionalProperties)"},
	{"unevaluatedItems", "not supported (use items after prefixItems)"},
	{"$dynamicRef", "not supported (use a local $ref)"},
	{"$dynamicAnchor", "not supported (use $defs and a local $ref)"},
	{"$anchor", "not supported (use $defs and a local $ref '#/$defs/NAME')"},
	{"$recursiveRef", "draft 2019-09's keyword, not supported (use a local $ref)"},
	{"$recursiveAnchor", "draft 2019-09's keyword, not supported"},
	{"$vocabulary", "not supported (a meta-schema's keyword)"},
	{"additionalItems", "draft 7's keyword, not supported (use prefixItems and items)"},
	{"dependencies",
	 "draft 7's keyword, not supported (use dependentRequired or dependentSchemas)"},
};

/*
 * A JSON pointer being walked: a chain of parents on the stack, rendered
 * only when a message needs it.
 */
struct ptr {
	const struct ptr *up;
	const char *key; /* NULL: index */
	size_t index;
};

static void ptr_render(const struct ptr *p, FILE *f)
{
	const char *k;

	if (p == NULL)
		return;
	ptr_render(p->up, f);
	if (p->key == NULL) {
		(void)fprintf(f, "/%zu", p->index);
		return;
	}
	(void)fputc('/', f);
	for (k = p->key; *k != '\0'; k++) {
		if (*k == '~')
			(void)fputs("~0", f);
		else if (*k == '/')
			(void)fputs("~1", f);
		else
			(void)fputc(*k, f);
	}
}

/* The pointer as a string ("" for the root); caller frees. */
static char *ptr_str(const struct ptr *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		pdk_oom();
	ptr_render(p, f);
	if (fclose(f) != 0 || buf == NULL)
		pdk_oom();
	return buf;
}

/* "BASE/KEY" with KEY escaped as a pointer segment; caller frees. */
static char *ptr_join(const char *base, const char *key)
{
	struct ptr p = {NULL, key, 0};
	_cleanup_free_ char *seg = ptr_str(&p);

	return pdk_xasprintf("%s%s", base, seg);
}

static char *ptr_join_index(const char *base, size_t i)
{
	return pdk_xasprintf("%s/%zu", base, i);
}

/* ---- numbers and equality ---- */

static bool is_integral(const json_t *x)
{
	double d;

	if (json_is_integer(x))
		return true;
	d = json_real_value(x);
	return json_is_real(x) && isfinite(d) && floor(d) == d;
}

static long double num_ld(const json_t *x)
{
	if (json_is_integer(x))
		return (long double)json_integer_value(x);
	return (long double)json_real_value(x);
}

/* a <=> b, exactly for two integers, in long double (64-bit mantissa) otherwise. */
static int num_cmp(const json_t *a, const json_t *b)
{
	long double x, y;

	if (json_is_integer(a) && json_is_integer(b)) {
		json_int_t i = json_integer_value(a), j = json_integer_value(b);
		return (i > j) - (i < j);
	}
	x = num_ld(a);
	y = num_ld(b);
	return (x > y) - (x < y);
}

static bool json_equal_deep(const json_t *a, const json_t *b);

static bool objects_equal(const json_t *a, const json_t *b)
{
	const char *k;
	json_t *v;

	if (json_object_size(a) != json_object_size(b))
		return false;
	json_object_foreach((json_t *)a, k, v)
	{
		json_t *w = json_object_get(b, k);
		if (w == NULL || !json_equal_deep(v, w))
			return false;
	}
	return true;
}

static bool arrays_equal(const json_t *a, const json_t *b)
{
	size_t i, n = json_array_size(a);

	if (n != json_array_size(b))
		return false;
	for (i = 0; i < n; i++)
		if (!json_equal_deep(json_array_get(a, i), json_array_get(b, i)))
			return false;
	return true;
}

/*
 * JSON equality as JSON Schema means it: 1 equals 1.0. The recursion is
 * bounded by the shallower value, and an instance is at most
 * PDK_JSCHEMA_DEPTH_MAX deep (checked before validation).
 */
static bool json_equal_deep(const json_t *a, const json_t *b)
{
	if (json_is_number(a) && json_is_number(b))
		return num_cmp(a, b) == 0;
	if (json_typeof(a) != json_typeof(b))
		return false;
	switch (json_typeof(a)) {
	case JSON_OBJECT:
		return objects_equal(a, b);
	case JSON_ARRAY:
		return arrays_equal(a, b);
	case JSON_STRING:
		return json_string_length(a) == json_string_length(b) &&
		       memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) ==
			       0;
	case JSON_INTEGER:
	case JSON_REAL:
	case JSON_TRUE:
	case JSON_FALSE:
	case JSON_NULL:
		return true;
	default:
		return false;
	}
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

static uint64_t bytes_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h;
}

/* A number's hash: equal numbers (1 and 1.0) hash alike. */
static uint64_t num_hash(const json_t *x)
{
	double d;
	uint64_t bits;

	if (json_is_integer(x))
		return mix(3, (uint64_t)json_integer_value(x));
	d = json_real_value(x);
	if (floor(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
		return mix(3, (uint64_t)(json_int_t)d);
	memcpy(&bits, &d, sizeof(bits));
	return mix(4, bits);
}

/* A hash consistent with json_equal_deep(); object members are combined without order. */
static uint64_t json_hash(const json_t *x)
{
	uint64_t h = (uint64_t)json_typeof(x);
	const char *k;
	json_t *v;
	size_t i;

	switch (json_typeof(x)) {
	case JSON_OBJECT:
		json_object_foreach((json_t *)x, k, v) h +=
			mix(bytes_hash(k, strlen(k)), json_hash(v));
		return mix(5, h);
	case JSON_ARRAY:
		for (i = 0; i < json_array_size(x); i++)
			h = mix(h, json_hash(json_array_get(x, i)));
		return mix(6, h);
	case JSON_STRING:
		return mix(7, bytes_hash(json_string_value(x), json_string_length(x)));
	case JSON_INTEGER:
	case JSON_REAL:
		return num_hash(x);
	case JSON_TRUE:
	case JSON_FALSE:
	case JSON_NULL:
		return h;
	default:
		return h;
	}
}

/* The shortest text that reads back as the same number. */
static void num_text(const json_t *x, char *buf, size_t len)
{
	double d = json_real_value(x);

	if (json_is_integer(x)) {
		(void)snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(x));
		return;
	}
	(void)snprintf(buf, len, "%.15g", d);
	if (strtod(buf, NULL) != d)
		(void)snprintf(buf, len, "%.17g", d);
}

static const char *type_of(const json_t *x)
{
	switch (json_typeof(x)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	default:
		return "unknown";
	}
}

/* ---- the document's bounds ---- */

struct bounds {
	size_t values;
	struct pdk_error **err;
};

/* SECURITY: a schema's size and nesting are bounded before anything is copied or compiled. */
static int doc_bounds(struct bounds *b, const json_t *x, const struct ptr *p, unsigned depth)
{
	const char *k;
	json_t *v;
	size_t i;
	int r;

	if (++b->values > VALUES_MAX || depth > DOC_DEPTH_MAX) {
		_cleanup_free_ char *at = ptr_str(p);
		return pdk_error_set_field(b->err, EINVAL, at,
					   "schema: larger than %d values or nested deeper than %d",
					   VALUES_MAX, DOC_DEPTH_MAX);
	}
	if (json_is_object(x)) {
		json_object_foreach((json_t *)x, k, v)
		{
			struct ptr q = {p, k, 0};
			if ((r = doc_bounds(b, v, &q, depth + 1)) < 0)
				return r;
		}
	} else if (json_is_array(x)) {
		for (i = 0; i < json_array_size(x); i++) {
			struct ptr q = {p, NULL, i};
			if ((r = doc_bounds(b, json_array_get(x, i), &q, depth + 1)) < 0)
				return r;
		}
	}
	return 0;
}

/* ---- compilation ---- */

struct slot {
	const json_t *key;
	struct jnode *node;
};

struct cctx {
	struct pdk_jschema *s;
	struct pdk_error **err;
	struct jnode **refs; /* $ref sites still to resolve */
	size_t nrefs, crefs;
	struct slot *map; /* schema object -> its node (open addressing) */
	size_t mapcap, mapn;
};

static size_t slot_of(const struct cctx *c, const json_t *key)
{
	size_t i = (size_t)(((uintptr_t)key >> 4) * 0x9e3779b97f4a7c15ULL) & (c->mapcap - 1);

	while (c->map[i].key != NULL && c->map[i].key != key)
		i = (i + 1) & (c->mapcap - 1);
	return i;
}

static void map_put(struct cctx *c, const json_t *key, struct jnode *node)
{
	size_t i;

	if (2 * (c->mapn + 1) > c->mapcap) {
		struct slot *old = c->map;
		size_t j, oldcap = c->mapcap;

		c->mapcap = oldcap ? 2 * oldcap : 64;
		c->map = pdk_xcalloc(c->mapcap, sizeof(*c->map));
		for (j = 0; j < oldcap; j++)
			if (old[j].key != NULL)
				c->map[slot_of(c, old[j].key)] = old[j];
		free(old);
	}
	i = slot_of(c, key);
	if (c->map[i].key == NULL)
		c->mapn++;
	c->map[i].key = key;
	c->map[i].node = node;
}

static struct jnode *map_get(const struct cctx *c, const json_t *key)
{
	return c->mapcap ? c->map[slot_of(c, key)].node : NULL;
}

static struct jnode *node_new(struct pdk_jschema *s, const char *at, int boolean)
{
	struct jnode *n = pdk_xcalloc(1, sizeof(*n));

	if (s->nnodes == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 32;
		s->nodes = pdk_xrealloc(s->nodes, s->cap * sizeof(*s->nodes));
	}
	s->nodes[s->nnodes++] = n;
	n->boolean = boolean;
	n->at = pdk_xstrdup(at);
	n->min_props = n->max_props = n->min_items = n->max_items = -1;
	n->min_len = n->max_len = n->max_contains = -1;
	n->min_contains = 1;
	return n;
}

static void node_free(struct jnode *n)
{
	size_t i;

	for (i = 0; i < n->npprops; i++)
		pcre2_code_free(n->pprops[i].re);
	pcre2_code_free(n->pattern);
	free(n->props);
	free(n->pprops);
	free(n->dep_schemas);
	free(n->prefix.v);
	free(n->all.v);
	free(n->any.v);
	free(n->one.v);
	free(n->at);
	free(n);
}

static int bad(struct cctx *c, const char *at, const char *kw, const char *wanted)
{
	return pdk_error_set_field(c->err, EINVAL, at, "%s: wanted %s", kw, wanted);
}

static int compile_node(struct cctx *c, const json_t *v, const char *at, unsigned depth,
			struct jnode **out);

/* The subschema under KEY of a keyword at AT (KEY NULL: the keyword's value itself). */
static int sub(struct cctx *c, const json_t *v, const char *at, const char *key, unsigned depth,
	       struct jnode **out)
{
	_cleanup_free_ char *p = key ? ptr_join(at, key) : pdk_xstrdup(at);

	return compile_node(c, v, p, depth + 1, out);
}

static int sub_index(struct cctx *c, const json_t *v, const char *at, size_t i, unsigned depth,
		     struct jnode **out)
{
	_cleanup_free_ char *p = ptr_join_index(at, i);

	return compile_node(c, v, p, depth + 1, out);
}

/* A count: a non-negative integer (2.0 too). */
static int count(struct cctx *c, const json_t *v, const char *at, const char *kw, long long *out)
{
	if (!json_is_number(v) || !is_integral(v) || num_ld(v) < 0 || num_ld(v) > 9.0e15L)
		return bad(c, at, kw, "a non-negative integer");
	*out = (long long)num_ld(v);
	return 0;
}

/* A regular expression of `len` bytes at `src`, or a refusal naming AT. */
static int compile_regex(struct cctx *c, const char *src, size_t len, const char *at,
			 const char *kw, pcre2_code **out)
{
	/*
	 * ECMA-262 as JSON Schema asks: UTF-8 code points, '$' only at the very
	 * end (PCRE2 would also match before a final newline), \uHHHH escapes;
	 * \C, which could split a code point, is refused.
	 */
	const uint32_t opts =
		PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX | PCRE2_NEVER_BACKSLASH_C;
	PCRE2_UCHAR msg[160];
	PCRE2_SIZE off;
	int code;

	if (len > PATTERN_MAX)
		return pdk_error_set_field(c->err, EINVAL, at, "%s: longer than %d bytes", kw,
					   PATTERN_MAX);
	*out = pcre2_compile((PCRE2_SPTR)src, len, opts, &code, &off, NULL);
	if (*out != NULL)
		return 0;
	if (pcre2_get_error_message(code, msg, sizeof(msg)) < 0)
		msg[0] = '\0';
	return pdk_error_set_field(c->err, EINVAL, at,
				   "%s: the regular expression does not compile at offset %zu: %s",
				   kw, (size_t)off, (const char *)msg);
}

static int schema_list(struct cctx *c, const json_t *v, const char *at, const char *kw,
		       unsigned depth, struct list *out)
{
	size_t i;
	int r;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return bad(c, at, kw, "a non-empty array of schemas");
	out->n = json_array_size(v);
	out->v = pdk_xcalloc(out->n, sizeof(*out->v));
	for (i = 0; i < out->n; i++)
		if ((r = sub_index(c, json_array_get(v, i), at, i, depth, &out->v[i])) < 0)
			return r;
	return 0;
}

static int kid_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kid *)a)->name, ((const struct kid *)b)->name);
}

/* An object of schemas (properties, dependentSchemas, $defs), sorted by name. */
static int schema_map(struct cctx *c, const json_t *v, const char *at, const char *kw,
		      unsigned depth, struct kid **out, size_t *nout)
{
	const char *k;
	json_t *x;
	size_t i = 0;
	int r;

	if (!json_is_object(v))
		return bad(c, at, kw, "an object of schemas");
	*out = pdk_xcalloc(json_object_size(v) + 1, sizeof(**out));
	*nout = json_object_size(v);
	json_object_foreach((json_t *)v, k, x)
	{
		(*out)[i].name = k;
		if ((r = sub(c, x, at, k, depth, &(*out)[i].node)) < 0)
			return r;
		i++;
	}
	qsort(*out, *nout, sizeof(**out), kid_cmp);
	return 0;
}

static bool strings_array(const json_t *v)
{
	size_t i;

	if (!json_is_array(v))
		return false;
	for (i = 0; i < json_array_size(v); i++)
		if (!json_is_string(json_array_get(v, i)))
			return false;
	return true;
}

/* ---- one compile function per keyword ---- */

#define KW_ARGS struct cctx *c, struct jnode *n, const json_t *v, const char *at, unsigned depth

static int kw_type(KW_ARGS)
{
	size_t i, j;

	(void)depth;
	if (json_is_string(v)) {
		for (j = 0; j < PDK_ARRAY_SIZE(type_names); j++)
			if (strcmp(json_string_value(v), type_names[j].name) == 0)
				n->types = type_names[j].bit;
		return n->types ? 0 : bad(c, at, "type", "a type name or an array of type names");
	}
	if (!json_is_array(v) || json_array_size(v) == 0)
		return bad(c, at, "type", "a type name or an array of type names");
	for (i = 0; i < json_array_size(v); i++) {
		const char *t = json_string_value(json_array_get(v, i));
		unsigned bit = 0;
		for (j = 0; t != NULL && j < PDK_ARRAY_SIZE(type_names); j++)
			if (strcmp(t, type_names[j].name) == 0)
				bit = type_names[j].bit;
		if (bit == 0)
			return bad(c, at, "type", "a type name or an array of type names");
		n->types |= bit;
	}
	return 0;
}

static int kw_enum(KW_ARGS)
{
	(void)depth;
	if (!json_is_array(v))
		return bad(c, at, "enum", "an array of values");
	n->enum_v = v;
	return 0;
}

static int kw_const(KW_ARGS)
{
	(void)c, (void)at, (void)depth;
	n->const_v = v;
	return 0;
}

static int kw_properties(KW_ARGS)
{
	return schema_map(c, v, at, "properties", depth, &n->props, &n->nprops);
}

static int kw_required(KW_ARGS)
{
	(void)depth;
	if (!strings_array(v))
		return bad(c, at, "required", "an array of property names (strings)");
	n->required = v;
	return 0;
}

static int kw_additional(KW_ARGS)
{
	return sub(c, v, at, NULL, depth, &n->additional);
}

static int kw_pattern_properties(KW_ARGS)
{
	const char *k;
	json_t *x;
	size_t i = 0;
	int r;

	if (!json_is_object(v))
		return bad(c, at, "patternProperties", "an object of schemas");
	n->pprops = pdk_xcalloc(json_object_size(v) + 1, sizeof(*n->pprops));
	json_object_foreach((json_t *)v, k, x)
	{
		_cleanup_free_ char *p = ptr_join(at, k);
		if ((r = compile_regex(c, k, strlen(k), p, "patternProperties", &n->pprops[i].re)) <
		    0)
			return r;
		n->npprops = ++i;
		if ((r = compile_node(c, x, p, depth + 1, &n->pprops[i - 1].node)) < 0)
			return r;
	}
	return 0;
}

static int kw_property_names(KW_ARGS)
{
	return sub(c, v, at, NULL, depth, &n->names);
}

static int kw_min_properties(KW_ARGS)
{
	(void)depth;
	return count(c, v, at, "minProperties", &n->min_props);
}

static int kw_max_properties(KW_ARGS)
{
	(void)depth;
	return count(c, v, at, "maxProperties", &n->max_props);
}

static int kw_dependent_required(KW_ARGS)
{
	const char *k;
	json_t *x;

	(void)depth;
	if (!json_is_object(v))
		return bad(c, at, "dependentRequired", "an object of arrays of property names");
	json_object_foreach((json_t *)v, k, x)
	{
		if (!strings_array(x)) {
			_cleanup_free_ char *p = ptr_join(at, k);
			return bad(c, p, "dependentRequired", "an array of property names");
		}
	}
	n->dep_required = v;
	return 0;
}

static int kw_dependent_schemas(KW_ARGS)
{
	return schema_map(c, v, at, "dependentSchemas", depth, &n->dep_schemas, &n->ndep_schemas);
}

static int kw_prefix_items(KW_ARGS)
{
	return schema_list(c, v, at, "prefixItems", depth, &n->prefix);
}

static int kw_items(KW_ARGS)
{
	if (json_is_array(v))
		return bad(c, at, "items",
			   "a schema (an array of schemas is draft 7's form: use prefixItems)");
	return sub(c, v, at, NULL, depth, &n->items);
}

static int kw_min_items(KW_ARGS)
{
	(void)depth;
	return count(c, v, at, "minItems", &n->min_items);
}

static int kw_max_items(KW_ARGS)
{
	(void)depth;
	return count(c, v, at, "maxItems", &n->max_items);
}

static int kw_unique_items(KW_ARGS)
{
	(void)depth;
	if (!json_is_boolean(v))
		return bad(c, at, "uniqueItems", "a boolean");
	n->unique = json_is_true(v);
	return 0;
}

static int kw_contains(KW_ARGS)
{
	return sub(c, v, at, NULL, depth, &n->contains);
}

static int kw_min_contains(KW_ARGS)
{
	(void)depth;
	return count(c, v, at, "minContains", &n->min_contains);
}

static int kw_max_contains(KW_ARGS)
{
	(void)depth;
	return count(c, v, at, "maxContains", &n->max_contains);
}

static int kw_min_length(KW_ARGS)
{
	(void)depth;
	return count(c, v, at, "minLength", &n->min_len);
}

static int kw_max_length(KW_ARGS)
{
	(void)depth;
	return count(c, v, at, "maxLength", &n->max_len);
}

static int kw_pattern(KW_ARGS)
{
	(void)depth;
	if (!json_is_string(v))
		return bad(c, at, "pattern", "a regular expression (a string)");
	n->pattern_src = json_string_value(v);
	return compile_regex(c, n->pattern_src, json_string_length(v), at, "pattern", &n->pattern);
}

static int number(struct cctx *c, const json_t *v, const char *at, const char *kw,
		  const json_t **out)
{
	if (!json_is_number(v))
		return bad(c, at, kw, "a number");
	*out = v;
	return 0;
}

static int kw_minimum(KW_ARGS)
{
	(void)depth;
	return number(c, v, at, "minimum", &n->minimum);
}

static int kw_maximum(KW_ARGS)
{
	(void)depth;
	return number(c, v, at, "maximum", &n->maximum);
}

static int kw_xminimum(KW_ARGS)
{
	(void)depth;
	return number(c, v, at, "exclusiveMinimum", &n->xminimum);
}

static int kw_xmaximum(KW_ARGS)
{
	(void)depth;
	return number(c, v, at, "exclusiveMaximum", &n->xmaximum);
}

static int kw_multiple_of(KW_ARGS)
{
	(void)depth;
	if (!json_is_number(v) || num_ld(v) <= 0)
		return bad(c, at, "multipleOf", "a number greater than 0");
	n->multiple = v;
	return 0;
}

static int kw_all_of(KW_ARGS)
{
	return schema_list(c, v, at, "allOf", depth, &n->all);
}

static int kw_any_of(KW_ARGS)
{
	return schema_list(c, v, at, "anyOf", depth, &n->any);
}

static int kw_one_of(KW_ARGS)
{
	return schema_list(c, v, at, "oneOf", depth, &n->one);
}

static int kw_not(KW_ARGS)
{
	return sub(c, v, at, NULL, depth, &n->not_);
}

static int kw_if(KW_ARGS)
{
	return sub(c, v, at, NULL, depth, &n->if_);
}

static int kw_then(KW_ARGS)
{
	return sub(c, v, at, NULL, depth, &n->then_);
}

static int kw_else(KW_ARGS)
{
	return sub(c, v, at, NULL, depth, &n->else_);
}

/* SECURITY: only a reference inside the same document: no network, no file. */
static int kw_ref(KW_ARGS)
{
	(void)depth;
	if (!json_is_string(v))
		return bad(c, at, "$ref", "a string");
	if (json_string_value(v)[0] != '#')
		return pdk_error_set_field(
			c->err, EINVAL, at,
			"$ref: '%s' is not local (only '#...' inside the same schema is followed)",
			json_string_value(v));
	n->ref_src = json_string_value(v);
	if (c->nrefs == c->crefs) {
		c->crefs = c->crefs ? 2 * c->crefs : 16;
		c->refs = pdk_xrealloc(c->refs, c->crefs * sizeof(*c->refs));
	}
	c->refs[c->nrefs++] = n;
	return 0;
}

/* $defs and definitions: compiled (so a bad keyword in them is refused) and reachable by $ref. */
static int kw_defs(KW_ARGS)
{
	struct kid *defs = NULL;
	size_t ndefs = 0;
	int r = schema_map(c, v, at, "$defs", depth, &defs, &ndefs);

	(void)n;
	free(defs);
	return r;
}

static int kw_id(KW_ARGS)
{
	(void)n;
	if (depth > 0)
		return pdk_error_set_field(
			c->err, EINVAL, at,
			"$id: only at the root (a nested $id would change what $ref resolves against)");
	if (!json_is_string(v))
		return bad(c, at, "$id", "a string");
	return 0;
}

typedef int (*kw_fn)(KW_ARGS);

static const struct {
	const char *name;
	kw_fn fn;
} keywords[] = {
	{"type", kw_type},
	{"enum", kw_enum},
	{"const", kw_const},
	{"properties", kw_properties},
	{"required", kw_required},
	{"additionalProperties", kw_additional},
	{"patternProperties", kw_pattern_properties},
	{"propertyNames", kw_property_names},
	{"minProperties", kw_min_properties},
	{"maxProperties", kw_max_properties},
	{"dependentRequired", kw_dependent_required},
	{"dependentSchemas", kw_dependent_schemas},
	{"prefixItems", kw_prefix_items},
	{"items", kw_items},
	{"minItems", kw_min_items},
	{"maxItems", kw_max_items},
	{"uniqueItems", kw_unique_items},
	{"contains", kw_contains},
	{"minContains", kw_min_contains},
	{"maxContains", kw_max_contains},
	{"minLength", kw_min_length},
	{"maxLength", kw_max_length},
	{"pattern", kw_pattern},
	{"minimum", kw_minimum},
	{"maximum", kw_maximum},
	{"exclusiveMinimum", kw_xminimum},
	{"exclusiveMaximum", kw_xmaximum},
	{"multipleOf", kw_multiple_of},
	{"allOf", kw_all_of},
	{"anyOf", kw_any_of},
	{"oneOf", kw_one_of},
	{"not", kw_not},
	{"if", kw_if},
	{"then", kw_then},
	{"else", kw_else},
	{"$ref", kw_ref},
	{"$defs", kw_defs},
	{"definitions", kw_defs},
	{"$id", kw_id},
};

/*
 * One keyword of an object schema: compiled, refused, or (an annotation,
 * or a keyword nobody defined, as 2020-12 says) ignored.
 */
static int compile_keyword(struct cctx *c, struct jnode *n, const char *k, const json_t *v,
			   unsigned depth)
{
	_cleanup_free_ char *at = ptr_join(n->at, k);
	size_t i;

	for (i = 0; i < PDK_ARRAY_SIZE(refused); i++)
		if (strcmp(k, refused[i].name) == 0)
			return pdk_error_set_field(c->err, EINVAL, at, "%s: %s", k, refused[i].why);
	for (i = 0; i < PDK_ARRAY_SIZE(keywords); i++)
		if (strcmp(k, keywords[i].name) == 0)
			return keywords[i].fn(c, n, v, at, depth);
	return 0;
}

static int compile_node(struct cctx *c, const json_t *v, const char *at, unsigned depth,
			struct jnode **out)
{
	struct jnode *n;
	const char *k;
	json_t *x;
	int r;

	if (json_is_boolean(v)) {
		*out = node_new(c->s, at, json_is_true(v));
		return 0;
	}
	if (!json_is_object(v))
		return pdk_error_set_field(c->err, EINVAL, at,
					   "schema: wanted an object or a boolean, got %s",
					   type_of(v));
	/* SECURITY: a schema nested without bound would recurse without bound. */
	if (depth > PDK_JSCHEMA_DEPTH_MAX)
		return pdk_error_set_field(c->err, EINVAL, at,
					   "schema: nested deeper than %d schemas",
					   PDK_JSCHEMA_DEPTH_MAX);
	*out = n = node_new(c->s, at, -1);
	map_put(c, v, n);
	json_object_foreach((json_t *)v, k, x)
	{
		if ((r = compile_keyword(c, n, k, x, depth)) < 0)
			return r;
	}
	return 0;
}

/* Undo a fragment's %-escapes in place; false if one is malformed. */
static bool percent_decode(char *s)
{
	char *w = s, hex[3] = {0, 0, 0};

	for (; *s != '\0'; s++) {
		if (*s != '%') {
			*w++ = *s;
			continue;
		}
		if (!isxdigit((unsigned char)s[1]) || !isxdigit((unsigned char)s[2]))
			return false;
		hex[0] = s[1];
		hex[1] = s[2];
		*w++ = (char)strtol(hex, NULL, 16);
		s += 2;
	}
	*w = '\0';
	return true;
}

/* One pointer segment (~0, ~1 undone) looked up in x; NULL if absent. */
static const json_t *pointer_step(const json_t *x, char *seg)
{
	char *r = seg, *w = seg, *end;
	unsigned long long i;

	for (; *r != '\0'; r++, w++) {
		if (*r == '~' && (r[1] == '0' || r[1] == '1'))
			*w = *++r == '0' ? '~' : '/';
		else if (*r == '~')
			return NULL;
		else
			*w = *r;
	}
	*w = '\0';
	if (json_is_object(x))
		return json_object_get(x, seg);
	if (!json_is_array(x) || seg[0] == '\0' || (seg[0] == '0' && seg[1] != '\0'))
		return NULL;
	errno = 0;
	i = strtoull(seg, &end, 10);
	if (*end != '\0' || errno != 0 || seg[0] == '-' || seg[0] == '+')
		return NULL;
	return json_array_get(x, (size_t)i);
}

/* The value a local $ref ("#", "#/a/b") names in the document, or NULL. */
static const json_t *pointer_resolve(const json_t *doc, const char *ref, char **decoded)
{
	char *p, *seg;
	const json_t *x = doc;

	*decoded = pdk_xstrdup(ref + 1);
	if (!percent_decode(*decoded))
		return NULL;
	p = *decoded;
	if (*p == '\0')
		return doc;
	if (*p != '/')
		return NULL;
	{
		_cleanup_free_ char *walk = pdk_xstrdup(p + 1);
		char *rest = walk;
		while (x != NULL && (seg = strsep(&rest, "/")) != NULL)
			x = pointer_step(x, seg);
	}
	return x;
}

static int resolve_one(struct cctx *c, struct jnode *n)
{
	_cleanup_free_ char *at = ptr_join(n->at, "$ref");
	_cleanup_free_ char *decoded = NULL;
	const json_t *target = pointer_resolve(c->s->doc, n->ref_src, &decoded);

	if (target == NULL)
		return pdk_error_set_field(c->err, EINVAL, at,
					   "$ref: '%s' resolves to nothing in this schema",
					   n->ref_src);
	if (!json_is_object(target) && !json_is_boolean(target))
		return pdk_error_set_field(
			c->err, EINVAL, at, "$ref: '%s' names %s %s, not a schema", n->ref_src,
			json_is_array(target) || json_is_integer(target) ? "an" : "a",
			type_of(target));
	n->ref = json_is_object(target) ? map_get(c, target) : NULL;
	if (n->ref != NULL)
		return 0;
	/*
	 * A part of the document no keyword compiled (or a boolean): compiled
	 * now, once, as a subschema (depth 1: not the root, so no $id).
	 */
	return compile_node(c, target, decoded, 1, &n->ref);
}

/* Every $ref to its node; compiling a target may add references, resolved in turn. */
static int resolve_refs(struct cctx *c)
{
	int r;

	while (c->nrefs > 0)
		if ((r = resolve_one(c, c->refs[--c->nrefs])) < 0)
			return r;
	return 0;
}

static int no_cycle(struct cctx *c, struct jnode *n, unsigned depth);

static int no_cycle_list(struct cctx *c, const struct list *l, unsigned depth)
{
	size_t i;
	int r;

	for (i = 0; i < l->n; i++)
		if ((r = no_cycle(c, l->v[i], depth)) < 0)
			return r;
	return 0;
}

static int no_cycle_kids(struct cctx *c, struct jnode *n, unsigned depth)
{
	struct jnode *inplace[] = {n->not_, n->if_, n->then_, n->else_, n->ref};
	size_t i;
	int r;

	for (i = 0; i < PDK_ARRAY_SIZE(inplace); i++)
		if (inplace[i] != NULL && (r = no_cycle(c, inplace[i], depth)) < 0)
			return r;
	for (i = 0; i < n->ndep_schemas; i++)
		if ((r = no_cycle(c, n->dep_schemas[i].node, depth)) < 0)
			return r;
	if ((r = no_cycle_list(c, &n->all, depth)) < 0 ||
	    (r = no_cycle_list(c, &n->any, depth)) < 0)
		return r;
	return no_cycle_list(c, &n->one, depth);
}

/*
 * SECURITY: schemas applied to the same instance (allOf, anyOf, oneOf, not,
 * if/then/else, dependentSchemas, $ref) must not lead back to themselves:
 * {"$ref": "#"} would never end. A cycle through properties or items is
 * fine (each turn goes one level into the instance, which is bounded).
 */
static int no_cycle(struct cctx *c, struct jnode *n, unsigned depth)
{
	int r;

	if (n->color == 2)
		return 0;
	if (n->color == 1)
		return pdk_error_set_field(c->err, EINVAL, n->at,
					   "$ref: a cycle back to '%s' that never moves into the "
					   "instance",
					   n->at[0] ? n->at : "#");
	if (depth > INPLACE_MAX)
		return pdk_error_set_field(
			c->err, EINVAL, n->at,
			"$ref: more than %d schemas applied one inside the other", INPLACE_MAX);
	n->color = 1;
	if ((r = no_cycle_kids(c, n, depth + 1)) < 0)
		return r;
	n->color = 2;
	return 0;
}

static int compile_all(struct cctx *c, const json_t *schema)
{
	struct bounds b = {0, c->err};
	size_t i;
	int r;

	if ((r = doc_bounds(&b, schema, NULL, 0)) < 0)
		return r;
	c->s->doc = json_deep_copy(schema);
	if (c->s->doc == NULL)
		pdk_oom();
	if ((r = compile_node(c, c->s->doc, "", 0, &c->s->root)) < 0)
		return r;
	if ((r = resolve_refs(c)) < 0)
		return r;
	for (i = 0; i < c->s->nnodes; i++)
		if ((r = no_cycle(c, c->s->nodes[i], 0)) < 0)
			return r;
	c->s->mctx = pcre2_match_context_create(NULL);
	if (c->s->mctx == NULL)
		pdk_oom();
	/* SECURITY: a pattern nobody here wrote cannot backtrack without bound. */
	(void)pcre2_set_match_limit(c->s->mctx, MATCH_LIMIT);
	(void)pcre2_set_depth_limit(c->s->mctx, MATCH_DEPTH);
	(void)pcre2_set_heap_limit(c->s->mctx, MATCH_HEAP_KIB);
	return 0;
}

int pdk_jschema_compile(const json_t *schema, struct pdk_jschema **out, struct pdk_error **err)
{
	struct pdk_jschema *s = pdk_xcalloc(1, sizeof(*s));
	struct cctx c = {.s = s, .err = err};
	int r;

	*out = NULL;
	if (schema == NULL) {
		pdk_jschema_free(s);
		return pdk_error_set_field(err, EINVAL, "", "schema: missing");
	}
	r = compile_all(&c, schema);
	free(c.refs);
	free(c.map);
	if (r < 0) {
		pdk_jschema_free(s);
		return r;
	}
	*out = s;
	return 0;
}

void pdk_jschema_free(struct pdk_jschema *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->nnodes; i++)
		node_free(s->nodes[i]);
	free(s->nodes);
	pcre2_match_context_free(s->mctx);
	json_decref(s->doc);
	free(s);
}

/* ---- validation ---- */

struct vctx {
	const struct pdk_jschema *s;
	struct pdk_error **err;    /* NULL: only whether it is valid (inside not, if, anyOf...) */
	struct pdk_error *gave_up; /* why a bound stopped it, kept even when quiet */
	size_t steps;
	unsigned depth;
	pcre2_match_data *md;
};

#define CHECK_ARGS \
	struct vctx *v, const struct jnode *n, const json_t *x, const struct ptr *p, unsigned idepth

static int check(CHECK_ARGS);

static int fail(struct vctx *v, const struct ptr *p, const char *fmt, ...) PDK_PRINTF(3, 4);

/* An instance that is not valid: the message, and the instance pointer as the field. */
static int fail(struct vctx *v, const struct ptr *p, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	_cleanup_free_ char *at = NULL;
	va_list ap;

	if (v->err == NULL)
		return -EINVAL;
	va_start(ap, fmt);
	msg = pdk_xvasprintf(fmt, ap);
	va_end(ap);
	at = ptr_str(p);
	return pdk_error_set_field(v->err, EINVAL, at, "%s", msg);
}

/* A bound reached: not an answer, so nothing above may take it for one. */
static int give_up(struct vctx *v, const struct ptr *p, const char *what)
{
	_cleanup_free_ char *at = ptr_str(p);

	(void)pdk_error_set_field(&v->gave_up, E2BIG, at, "%s", what);
	return GAVE_UP;
}

/* Descend into a member or an item (one level deeper into the instance). */
static int check_child(struct vctx *v, const struct jnode *n, const json_t *x, const struct ptr *p,
		       unsigned idepth)
{
	return check(v, n, x, p, idepth + 1);
}

/* Run a check quietly: 0 valid, -EINVAL not, GAVE_UP a bound. */
static int quiet(struct vctx *v, const struct jnode *n, const json_t *x, const struct ptr *p,
		 unsigned idepth)
{
	struct pdk_error **saved = v->err;
	int r;

	v->err = NULL;
	r = check(v, n, x, p, idepth);
	v->err = saved;
	return r;
}

static int check_type(CHECK_ARGS)
{
	unsigned have;
	char want[96] = "";
	size_t j;

	(void)idepth;
	if (n->types == 0)
		return 0;
	switch (json_typeof(x)) {
	case JSON_OBJECT:
		have = T_OBJECT;
		break;
	case JSON_ARRAY:
		have = T_ARRAY;
		break;
	case JSON_STRING:
		have = T_STRING;
		break;
	case JSON_INTEGER:
	case JSON_REAL:
		have = T_NUMBER | (is_integral(x) ? T_INTEGER : 0);
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		have = T_BOOLEAN;
		break;
	case JSON_NULL:
		have = T_NULL;
		break;
	default:
		have = 0;
		break;
	}
	if (have & n->types)
		return 0;
	for (j = 0; j < PDK_ARRAY_SIZE(type_names); j++)
		if (n->types & type_names[j].bit)
			(void)snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s",
				       want[0] ? " or " : "", type_names[j].name);
	return fail(v, p, "type: wanted %s, got %s", want, type_of(x));
}

static int check_enum_const(CHECK_ARGS)
{
	size_t i;

	(void)idepth;
	if (n->const_v != NULL && !json_equal_deep(n->const_v, x))
		return fail(v, p, "const: wanted the one value the schema names");
	if (n->enum_v == NULL)
		return 0;
	for (i = 0; i < json_array_size(n->enum_v); i++)
		if (json_equal_deep(json_array_get(n->enum_v, i), x))
			return 0;
	return fail(v, p, "enum: wanted one of the %zu values the schema lists",
		    json_array_size(n->enum_v));
}

/* Whether x is a multiple of m: exactly for integers, to a relative 1e-9 otherwise. */
static bool multiple_of(const json_t *x, const json_t *m)
{
	long double q;

	if (json_is_integer(x) && json_is_integer(m))
		return json_integer_value(x) % json_integer_value(m) == 0;
	q = num_ld(x) / num_ld(m);
	if (!isfinite(q))
		return false;
	return fabsl(q - roundl(q)) <= 1e-9L * (fabsl(q) > 1 ? fabsl(q) : 1);
}

static int number_bound(struct vctx *v, const struct ptr *p, const json_t *x, const json_t *b,
			int reject_if, bool equal_too, const char *kw, const char *wanted)
{
	char bt[40], xt[40];
	int cmp;

	if (b == NULL)
		return 0;
	cmp = num_cmp(x, b);
	if (cmp != reject_if && !(equal_too && cmp == 0))
		return 0;
	num_text(b, bt, sizeof(bt));
	num_text(x, xt, sizeof(xt));
	return fail(v, p, "%s: %s %s, got %s", kw, wanted, bt, xt);
}

static int check_number(CHECK_ARGS)
{
	char mt[40];
	int r;

	(void)idepth;
	if (!json_is_number(x))
		return 0;
	if ((r = number_bound(v, p, x, n->minimum, -1, false, "minimum", "at least")) < 0 ||
	    (r = number_bound(v, p, x, n->maximum, 1, false, "maximum", "at most")) < 0 ||
	    (r = number_bound(v, p, x, n->xminimum, -1, true, "exclusiveMinimum", "greater than")) <
		    0 ||
	    (r = number_bound(v, p, x, n->xmaximum, 1, true, "exclusiveMaximum", "less than")) < 0)
		return r;
	if (n->multiple == NULL || multiple_of(x, n->multiple))
		return 0;
	num_text(n->multiple, mt, sizeof(mt));
	return fail(v, p, "multipleOf: wanted a multiple of %s", mt);
}

/* Unicode code points of a UTF-8 string (jansson's strings are valid UTF-8). */
static size_t code_points(const char *s, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xc0) != 0x80;
	return n;
}

/*
 * Whether the regex matches anywhere in s (an unanchored search, as the
 * spec says): 1, 0, or GAVE_UP. A search costs SEARCH_STEPS of the budget,
 * so a check runs at most STEPS_MAX / SEARCH_STEPS of them, each within
 * PCRE2's match limit.
 */
static int search(struct vctx *v, const struct ptr *p, const pcre2_code *re, const char *s,
		  size_t len, const char *kw)
{
	int rc;

	v->steps += SEARCH_STEPS;
	if (v->steps > STEPS_MAX)
		return give_up(v, p, "schema: the check took more than its budget of steps");
	if (v->md == NULL && (v->md = pcre2_match_data_create(1, NULL)) == NULL)
		pdk_oom();
	rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, v->md, v->s->mctx);
	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	{
		_cleanup_free_ char *why = pdk_xasprintf(
			"%s: the regular expression gave up (match limit %d reached, error %d)", kw,
			MATCH_LIMIT, rc);
		return give_up(v, p, why);
	}
}

static int check_string(CHECK_ARGS)
{
	size_t len;
	int r;

	(void)idepth;
	if (!json_is_string(x))
		return 0;
	len = code_points(json_string_value(x), json_string_length(x));
	if (n->min_len >= 0 && len < (size_t)n->min_len)
		return fail(v, p, "minLength: at least %lld characters, got %zu", n->min_len, len);
	if (n->max_len >= 0 && len > (size_t)n->max_len)
		return fail(v, p, "maxLength: at most %lld characters, got %zu", n->max_len, len);
	if (n->pattern == NULL)
		return 0;
	r = search(v, p, n->pattern, json_string_value(x), json_string_length(x), "pattern");
	if (r < 0)
		return r;
	return r ? 0 : fail(v, p, "pattern: wanted a match of '%.80s'", n->pattern_src);
}

struct hashed {
	uint64_t h;
	size_t i;
};

static int hashed_cmp(const void *a, const void *b)
{
	const struct hashed *x = a, *y = b;

	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* uniqueItems in n log n: items sorted by a hash equal items share, then compared in runs. */
static int check_unique(struct vctx *v, const json_t *x, const struct ptr *p)
{
	size_t n = json_array_size(x), i, j;
	_cleanup_free_ struct hashed *h = pdk_xcalloc(n + 1, sizeof(*h));

	for (i = 0; i < n; i++)
		h[i] = (struct hashed){json_hash(json_array_get(x, i)), i};
	qsort(h, n, sizeof(*h), hashed_cmp);
	for (i = 0; i < n; i++) {
		for (j = i + 1; j < n && h[j].h == h[i].h; j++) {
			if (++v->steps > STEPS_MAX)
				return give_up(v, p, "uniqueItems: too many comparisons");
			if (json_equal_deep(json_array_get(x, h[i].i), json_array_get(x, h[j].i)))
				return fail(v, p, "uniqueItems: items %zu and %zu are equal",
					    h[i].i, h[j].i);
		}
	}
	return 0;
}

static int check_contains(struct vctx *v, const struct jnode *n, const json_t *x,
			  const struct ptr *p, unsigned idepth)
{
	size_t i, found = 0;
	int r;

	if (n->contains == NULL)
		return 0;
	for (i = 0; i < json_array_size(x); i++) {
		struct ptr q = {p, NULL, i};
		r = quiet(v, n->contains, json_array_get(x, i), &q, idepth + 1);
		if (r == GAVE_UP)
			return r;
		found += r == 0;
	}
	if (found < (size_t)n->min_contains)
		return fail(v, p, "%s: at least %lld items matching its schema, got %zu",
			    n->min_contains == 1 ? "contains" : "minContains", n->min_contains,
			    found);
	if (n->max_contains >= 0 && found > (size_t)n->max_contains)
		return fail(v, p, "maxContains: at most %lld items matching its schema, got %zu",
			    n->max_contains, found);
	return 0;
}

static int check_array(CHECK_ARGS)
{
	size_t i, len;
	int r;

	if (!json_is_array(x))
		return 0;
	len = json_array_size(x);
	if (n->min_items >= 0 && len < (size_t)n->min_items)
		return fail(v, p, "minItems: at least %lld items, got %zu", n->min_items, len);
	if (n->max_items >= 0 && len > (size_t)n->max_items)
		return fail(v, p, "maxItems: at most %lld items, got %zu", n->max_items, len);
	for (i = 0; i < len; i++) {
		struct ptr q = {p, NULL, i};
		const struct jnode *s = i < n->prefix.n ? n->prefix.v[i] : n->items;
		if (s != NULL && (r = check_child(v, s, json_array_get(x, i), &q, idepth)) < 0)
			return r;
	}
	if ((r = check_contains(v, n, x, p, idepth)) < 0)
		return r;
	return n->unique ? check_unique(v, x, p) : 0;
}

static const struct jnode *prop_node(const struct jnode *n, const char *key)
{
	struct kid k = {key, NULL};
	const struct kid *f =
		n->nprops ? bsearch(&k, n->props, n->nprops, sizeof(k), kid_cmp) : NULL;

	return f ? f->node : NULL;
}

/* One member: properties, then every matching patternProperties, else additionalProperties. */
static int check_member(struct vctx *v, const struct jnode *n, const char *key, const json_t *m,
			const struct ptr *p, unsigned idepth)
{
	const struct jnode *s = prop_node(n, key);
	struct ptr q = {p, key, 0};
	bool matched = s != NULL;
	size_t i;
	int r;

	if (s != NULL && (r = check_child(v, s, m, &q, idepth)) < 0)
		return r;
	for (i = 0; i < n->npprops; i++) {
		if ((r = search(v, &q, n->pprops[i].re, key, strlen(key), "patternProperties")) < 0)
			return r;
		if (r == 0)
			continue;
		matched = true;
		if ((r = check_child(v, n->pprops[i].node, m, &q, idepth)) < 0)
			return r;
	}
	if (matched || n->additional == NULL)
		return 0;
	if (n->additional->boolean == 0)
		return fail(v, &q, "additionalProperties: property '%s' is not allowed", key);
	return check_child(v, n->additional, m, &q, idepth);
}

static int check_name(struct vctx *v, const struct jnode *n, const char *key, const struct ptr *p,
		      unsigned idepth)
{
	struct ptr q = {p, key, 0};
	json_t *name;
	int r;

	if (n->names == NULL)
		return 0;
	if ((name = json_string(key)) == NULL)
		pdk_oom();
	r = quiet(v, n->names, name, &q, idepth);
	json_decref(name);
	if (r == -EINVAL)
		return fail(v, &q, "propertyNames: the name '%s' does not match its schema", key);
	return r;
}

static int check_required(struct vctx *v, const json_t *names, const json_t *x, const struct ptr *p,
			  const char *kw, const char *because)
{
	size_t i;

	for (i = 0; i < json_array_size(names); i++) {
		const char *k = json_string_value(json_array_get(names, i));
		if (json_object_get(x, k) == NULL)
			return fail(v, p, "%s: missing property '%s'%s%s", kw, k,
				    because ? ", required with " : "", because ? because : "");
	}
	return 0;
}

static int check_dependent(CHECK_ARGS)
{
	const char *k;
	json_t *names;
	size_t i;
	int r;

	json_object_foreach((json_t *)n->dep_required, k, names)
	{
		if (json_object_get(x, k) != NULL &&
		    (r = check_required(v, names, x, p, "dependentRequired", k)) < 0)
			return r;
	}
	for (i = 0; i < n->ndep_schemas; i++) {
		if (json_object_get(x, n->dep_schemas[i].name) != NULL &&
		    (r = check(v, n->dep_schemas[i].node, x, p, idepth)) < 0)
			return r;
	}
	return 0;
}

static int check_object(CHECK_ARGS)
{
	size_t size;
	const char *k;
	json_t *m;
	int r;

	if (!json_is_object(x))
		return 0;
	size = json_object_size(x);
	if (n->min_props >= 0 && size < (size_t)n->min_props)
		return fail(v, p, "minProperties: at least %lld properties, got %zu", n->min_props,
			    size);
	if (n->max_props >= 0 && size > (size_t)n->max_props)
		return fail(v, p, "maxProperties: at most %lld properties, got %zu", n->max_props,
			    size);
	if (n->required != NULL && (r = check_required(v, n->required, x, p, "required", NULL)) < 0)
		return r;
	json_object_foreach((json_t *)x, k, m)
	{
		if ((r = check_member(v, n, k, m, p, idepth)) < 0 ||
		    (r = check_name(v, n, k, p, idepth)) < 0)
			return r;
	}
	return check_dependent(v, n, x, p, idepth);
}

static int check_all_of(CHECK_ARGS)
{
	size_t i;
	int r;

	for (i = 0; i < n->all.n; i++)
		if ((r = check(v, n->all.v[i], x, p, idepth)) < 0)
			return r;
	return 0;
}

/*
 * The alternatives of anyOf or oneOf checked quietly until `enough` matched:
 * *matched counts them (0 or GAVE_UP returned).
 */
static int branches(struct vctx *v, const struct list *l, const json_t *x, const struct ptr *p,
		    unsigned idepth, size_t enough, size_t *matched)
{
	size_t i;
	int r;

	*matched = 0;
	for (i = 0; i < l->n && *matched < enough; i++) {
		r = quiet(v, l->v[i], x, p, idepth);
		if (r == GAVE_UP)
			return r;
		*matched += r == 0;
	}
	return 0;
}

/*
 * No alternative matched: the failure names each one's (checked again for
 * its message, only now, so a call that passes builds no text).
 */
static int none_matched(struct vctx *v, const struct list *l, const json_t *x, const struct ptr *p,
			unsigned idepth, const char *kw)
{
	struct pdk_error **saved = v->err;
	_cleanup_free_ char *why = NULL;
	size_t i, len = 0;
	FILE *f;
	int r = 0;

	if (saved == NULL)
		return -EINVAL;
	if ((f = open_memstream(&why, &len)) == NULL)
		pdk_oom();
	for (i = 0; i < l->n && r != GAVE_UP; i++) {
		struct pdk_error *e = NULL;
		v->err = &e;
		r = check(v, l->v[i], x, p, idepth);
		v->err = saved;
		if (e != NULL && ftell(f) < BRANCHES_MSG)
			(void)fprintf(f, "%s[%zu] at '%s': %.300s", i ? "; " : "", i,
				      e->field ? e->field : "", e->msg);
		pdk_error_free(&e);
	}
	if (fclose(f) != 0)
		pdk_oom();
	if (r == GAVE_UP)
		return r;
	return fail(v, p, "%s: matched none of its %zu schemas (%s)", kw, l->n, why ? why : "");
}

static int check_any_of(CHECK_ARGS)
{
	size_t matched;
	int r;

	if (n->any.n == 0)
		return 0;
	r = branches(v, &n->any, x, p, idepth, 1, &matched);
	if (r < 0 || matched > 0)
		return r;
	return none_matched(v, &n->any, x, p, idepth, "anyOf");
}

static int check_one_of(CHECK_ARGS)
{
	size_t matched;
	int r;

	if (n->one.n == 0)
		return 0;
	r = branches(v, &n->one, x, p, idepth, 2, &matched);
	if (r < 0 || matched == 1)
		return r;
	if (matched > 1)
		return fail(v, p,
			    "oneOf: matched more than one of its %zu schemas, wanted exactly one",
			    n->one.n);
	return none_matched(v, &n->one, x, p, idepth, "oneOf");
}

static int check_not(CHECK_ARGS)
{
	int r;

	if (n->not_ == NULL)
		return 0;
	r = quiet(v, n->not_, x, p, idepth);
	if (r == GAVE_UP)
		return r;
	return r == 0 ? fail(v, p, "not: the value matches the schema it must not match") : 0;
}

static int check_if(CHECK_ARGS)
{
	int r;

	if (n->if_ == NULL)
		return 0;
	r = quiet(v, n->if_, x, p, idepth);
	if (r == GAVE_UP)
		return r;
	if (r == 0)
		return n->then_ ? check(v, n->then_, x, p, idepth) : 0;
	return n->else_ ? check(v, n->else_, x, p, idepth) : 0;
}

static int check_ref(CHECK_ARGS)
{
	return n->ref ? check(v, n->ref, x, p, idepth) : 0;
}

typedef int (*check_fn)(CHECK_ARGS);

/* An object schema's checks, in order; the first failure is the answer. */
static const check_fn checks[] = {
	check_ref,    check_type,   check_enum_const, check_number, check_string, check_array,
	check_object, check_all_of, check_any_of,     check_one_of, check_not,    check_if,
};

static int check(CHECK_ARGS)
{
	size_t i;
	int r = 0;

	/* SECURITY: every schema nobody here wrote ends: its steps and its nesting are counted. */
	if (++v->steps > STEPS_MAX)
		return give_up(v, p, "schema: the check took more than its budget of steps");
	if (idepth > PDK_JSCHEMA_DEPTH_MAX)
		return give_up(v, p, "instance: nested too deep");
	if (n->boolean == 0)
		return fail(v, p, "false: the schema allows no value here");
	if (n->boolean == 1)
		return 0;
	if (++v->depth > EVAL_DEPTH_MAX) {
		v->depth--;
		return give_up(v, p,
			       "schema: applied more than its bound of times one inside another");
	}
	for (i = 0; i < PDK_ARRAY_SIZE(checks) && r == 0; i++)
		r = checks[i](v, n, x, p, idepth);
	v->depth--;
	return r;
}

/* SECURITY: an instance deeper than the bound is refused before any check recurses into it. */
static bool too_deep(const json_t *x, unsigned depth, const struct ptr *p, char **where)
{
	const char *k;
	json_t *m;
	size_t i;

	if (depth > PDK_JSCHEMA_DEPTH_MAX) {
		*where = ptr_str(p);
		return true;
	}
	if (json_is_object(x)) {
		json_object_foreach((json_t *)x, k, m)
		{
			struct ptr q = {p, k, 0};
			if (too_deep(m, depth + 1, &q, where))
				return true;
		}
	} else if (json_is_array(x)) {
		for (i = 0; i < json_array_size(x); i++) {
			struct ptr q = {p, NULL, i};
			if (too_deep(json_array_get(x, i), depth + 1, &q, where))
				return true;
		}
	}
	return false;
}

int pdk_jschema_validate(const struct pdk_jschema *s, const json_t *instance,
			 struct pdk_error **err)
{
	_cleanup_free_ char *where = NULL;
	struct vctx v = {.s = s, .err = err};
	int r;

	if (instance == NULL)
		return pdk_error_set_field(err, EINVAL, "", "instance: missing");
	if (too_deep(instance, 0, NULL, &where))
		return pdk_error_set_field(err, EINVAL, where,
					   "instance: nested deeper than %d levels",
					   PDK_JSCHEMA_DEPTH_MAX);
	r = check(&v, s->root, instance, NULL, 0);
	pcre2_match_data_free(v.md);
	if (r == GAVE_UP) {
		r = pdk_error_set_field(err, EINVAL, v.gave_up->field, "%s", v.gave_up->msg);
		pdk_error_free(&v.gave_up);
		return r;
	}
	pdk_error_free(&v.gave_up);
	return r < 0 ? -EINVAL : 0;
}
