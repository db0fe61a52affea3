/*
 * policy.c - profiles (YAML) resolved into a validated struct pdk_policy.
 *
 * Three stages, each small enough to review on its own:
 *
 *  1. libyaml events become a tree of struct node (tree_*). Everything that
 *     could make the tree blow up - aliases, anchors, deep nesting, large
 *     input - is refused here, so the later stages only walk bounded data.
 *  2. The tree is walked with the schema tables (struct field). An entry
 *     names a key, a parser that writes one member of struct pdk_policy and
 *     an emitter that writes it back out. pdk_policy_dump() runs the same
 *     tables, so a field cannot be parsed and then forgotten by the dump.
 *  3. `extends` loads the base profile first (the same code, recursively,
 *     with a chain for cycle detection) and the walk then overrides it.
 *
 * Every problem becomes a diagnostic with a position and a field path; the
 * walk never stops at the first one. docs/internals/policy.md has more.
 */
#include "common.h"
#include "base.h"
#include "netrule.h"
#include "policy.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#define MAX_PROFILE_BYTES ((size_t)1 << 20) /* bytes of YAML in one profile */
#define MAX_DEPTH         32                /* nested mappings and lists */
#define MAX_EXTENDS       8                 /* levels of `extends` below a profile */
#define MAX_DIAGS         64                /* diagnostics kept; later ones are only counted */
#define MAX_ENTRIES       1024              /* entries in one list, or variables in env */
#define MAX_NAME          128               /* bytes in a profile name */
#define MAX_HOST          64                /* bytes in a hostname (HOST_NAME_MAX) */
#define EXCERPT           48                /* bytes of a value quoted in a message */
#define MAX_FIELDS        16                /* entries in one schema table */

/* ------------------------------------------------------------------------ */
/* Diagnostics                                                                */
/* ------------------------------------------------------------------------ */

/* Where diagnostics go. `errors` also counts those dropped after MAX_DIAGS. */
struct sink {
	struct pdk_policy_report *r;
	size_t errors;
	const char *profile_dir; /* the user's profiles (base/paths.h), or NULL */
};

/* The report's own copy of `file`, which diagnostics borrow. */
static char *report_file(struct pdk_policy_report *r, const char *file)
{
	if (r->file == NULL)
		r->file = pdk_xstrdup(file);
	if (strcmp(r->file, file) == 0)
		return r->file;
	for (size_t i = 0; r->files != NULL && r->files[i] != NULL; i++) {
		if (strcmp(r->files[i], file) == 0)
			return r->files[i];
	}
	pdk_strv_push(&r->files, file);
	return r->files[pdk_strv_len(r->files) - 1];
}

static void diag(struct sink *s, const char *file, int line, int col, const char *field,
		 const char *fmt, ...) PDK_PRINTF(6, 7);

static void diag(struct sink *s, const char *file, int line, int col, const char *field,
		 const char *fmt, ...)
{
	struct pdk_policy_report *r = s->r;
	struct pdk_policy_diag *d;
	va_list ap;

	s->errors++;
	if (r->n > MAX_DIAGS)
		return;
	r->diags = pdk_xrealloc(r->diags, (r->n + 1) * sizeof(*r->diags));
	d = &r->diags[r->n++];
	*d = (struct pdk_policy_diag){.file = report_file(r, file)};
	if (r->n > MAX_DIAGS) {
		d->field = pdk_xstrdup("");
		d->msg = pdk_xstrdup("too many problems; the rest are not shown");
		return;
	}
	d->line = line;
	d->column = col;
	d->field = pdk_xstrdup(field);
	va_start(ap, fmt);
	if (vasprintf(&d->msg, fmt, ap) < 0)
		pdk_oom();
	va_end(ap);
}

/*
 * A printable excerpt of untrusted text for a message.
 * SECURITY: keys and values of a profile end up on a terminal. C0 and C1
 * control characters (ESC, CSI) are replaced so a profile cannot drive the
 * terminal, and long text is cut at a UTF-8 boundary.
 */
static char *excerpt(const char *s, size_t len)
{
	size_t max = len > EXCERPT ? EXCERPT : len;
	char *out = pdk_xmalloc(max + 4);
	size_t o = 0;

	while (max > 0 && max < len && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	for (size_t i = 0; i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == 0xc2 && i + 1 < max && (unsigned char)s[i + 1] < 0xa0) {
			out[o++] = '?';
			i++;
			continue;
		}
		out[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	if (max < len) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

static char *excerpt_str(const char *s)
{
	return excerpt(s, strlen(s));
}

/*
 * Like excerpt_str() for a file name or path, but a long one keeps its end
 * (the file's own name says more than the directories above it).
 */
static char *excerpt_path(const char *s)
{
	size_t len = strlen(s), start;

	if (len <= EXCERPT)
		return excerpt(s, len);
	start = len - EXCERPT;
	while (start < len && ((unsigned char)s[start] & 0xc0) == 0x80)
		start++;
	_cleanup_free_ char *tail = excerpt(s + start, len - start);
	return pdk_xasprintf("...%s", tail);
}

static char *xstrndup(const char *s, size_t n)
{
	char *out = pdk_xmalloc(n + 1);

	memcpy(out, s, n);
	out[n] = '\0';
	return out;
}

/* ------------------------------------------------------------------------ */
/* Stage 1: YAML events to a tree                                            */
/* ------------------------------------------------------------------------ */

enum node_type {
	NODE_SCALAR,
	NODE_SEQ,
	NODE_MAP,
};

struct node {
	enum node_type type;
	int line;   /* 1-based */
	int column; /* 1-based */
	bool plain; /* a plain scalar: may mean null */
	char *str;  /* scalar value, NUL-terminated (may hold a NUL: see len) */
	size_t len;
	struct node **kids; /* list items, or keys and values interleaved */
	size_t n;
	size_t cap;
};

static void node_free(struct node *n)
{
	if (n == NULL)
		return;
	for (size_t i = 0; i < n->n; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->str);
	free(n);
}

static inline void cleanup_node(struct node **n)
{
	node_free(*n);
}
#define _cleanup_node_ __attribute__((cleanup(cleanup_node)))

static int mark_int(size_t v)
{
	return v >= INT_MAX - 1 ? INT_MAX : (int)v + 1;
}

static struct node *node_new(enum node_type t, const yaml_event_t *ev)
{
	struct node *n = pdk_xcalloc(1, sizeof(*n));

	n->type = t;
	n->line = mark_int(ev->start_mark.line);
	n->column = mark_int(ev->start_mark.column);
	return n;
}

static void node_push(struct node *n, struct node *kid)
{
	if (n->n == n->cap) {
		n->cap = n->cap ? n->cap * 2 : 8;
		n->kids = pdk_xrealloc(n->kids, n->cap * sizeof(*n->kids));
	}
	n->kids[n->n++] = kid;
}

struct builder {
	yaml_parser_t parser;
	struct sink *sink;
	const char *file;
	const char *data;
	size_t len;
};

static void builder_diag(struct builder *b, yaml_mark_t m, const char *msg)
{
	diag(b->sink, b->file, mark_int(m.line), mark_int(m.column), "", "%s", msg);
}

/* Line and column of a byte offset (reader errors carry only an offset). */
static yaml_mark_t offset_mark(const char *data, size_t len, size_t off)
{
	yaml_mark_t m = {.index = off};

	for (size_t i = 0; i < off && i < len; i++) {
		m.column++;
		if (data[i] == '\n') {
			m.line++;
			m.column = 0;
		}
	}
	return m;
}

static void syntax_diag(struct builder *b)
{
	const yaml_parser_t *p = &b->parser;
	const char *problem = p->problem != NULL ? p->problem : "cannot parse the YAML";
	yaml_mark_t m = p->problem_mark;

	if (p->error == YAML_READER_ERROR)
		m = offset_mark(b->data, b->len, p->problem_offset);
	if (p->context != NULL)
		diag(b->sink, b->file, mark_int(m.line), mark_int(m.column), "", "%s: %s",
		     p->context, problem);
	else
		diag(b->sink, b->file, mark_int(m.line), mark_int(m.column), "", "%s", problem);
}

static bool pull(struct builder *b, yaml_event_t *ev)
{
	if (yaml_parser_parse(&b->parser, ev))
		return true;
	syntax_diag(b);
	return false;
}

/*
 * SECURITY: anchors and aliases are refused outright. An alias expands to
 * the whole aliased node, which is how "billion laughs" documents turn a few
 * hundred bytes into gigabytes; profiles have no use for them. Tags are
 * refused too: the schema decides every type.
 */
static bool refused_props(struct builder *b, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL;
	const yaml_char_t *tag = NULL;

	if (ev->type == YAML_ALIAS_EVENT) {
		builder_diag(b, ev->start_mark, "YAML aliases are not allowed");
		return true;
	}
	if (ev->type == YAML_SCALAR_EVENT) {
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
	} else if (ev->type == YAML_SEQUENCE_START_EVENT) {
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
	} else if (ev->type == YAML_MAPPING_START_EVENT) {
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
	}
	if (anchor != NULL)
		builder_diag(b, ev->start_mark, "YAML anchors are not allowed");
	else if (tag != NULL)
		builder_diag(b, ev->start_mark, "YAML tags are not allowed");
	return anchor != NULL || tag != NULL;
}

static struct node *build(struct builder *b, yaml_event_t *ev, int depth);

static struct node *build_collection(struct builder *b, const yaml_event_t *ev, int depth)
{
	bool map = ev->type == YAML_MAPPING_START_EVENT;
	yaml_event_type_t end = map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	_cleanup_node_ struct node *n = node_new(map ? NODE_MAP : NODE_SEQ, ev);

	if (depth > MAX_DEPTH) {
		diag(b->sink, b->file, n->line, n->column, "", "nesting is deeper than %d levels",
		     MAX_DEPTH);
		return NULL;
	}
	for (;;) {
		yaml_event_t kid;
		struct node *k;

		if (!pull(b, &kid))
			return NULL;
		if (kid.type == end) {
			yaml_event_delete(&kid);
			return steal_ptr(&n);
		}
		k = build(b, &kid, depth + 1);
		if (k == NULL)
			return NULL;
		node_push(n, k);
	}
}

static struct node *scalar_node(const yaml_event_t *ev)
{
	struct node *n = node_new(NODE_SCALAR, ev);

	n->len = ev->data.scalar.length;
	n->str = pdk_xmalloc(n->len + 1);
	memcpy(n->str, ev->data.scalar.value, n->len);
	n->str[n->len] = '\0';
	n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	return n;
}

/* Build the node that starts with `ev`; takes ownership of `ev`. */
static struct node *build(struct builder *b, yaml_event_t *ev, int depth)
{
	struct node *n = NULL;

	if (refused_props(b, ev))
		n = NULL;
	else if (ev->type == YAML_SCALAR_EVENT)
		n = scalar_node(ev);
	else if (ev->type == YAML_SEQUENCE_START_EVENT || ev->type == YAML_MAPPING_START_EVENT)
		n = build_collection(b, ev, depth);
	else
		builder_diag(b, ev->start_mark, "unexpected YAML structure");
	yaml_event_delete(ev);
	return n;
}

/* After the root node: the end of the document, then the end of the stream. */
static bool expect_end(struct builder *b)
{
	yaml_event_t ev;
	bool ok;

	if (!pull(b, &ev))
		return false;
	yaml_event_delete(&ev);
	if (!pull(b, &ev))
		return false;
	ok = ev.type == YAML_STREAM_END_EVENT;
	if (!ok)
		builder_diag(b, ev.start_mark, "only one YAML document is allowed");
	yaml_event_delete(&ev);
	return ok;
}

static struct node *tree_read(struct builder *b)
{
	_cleanup_node_ struct node *root = NULL;
	yaml_event_t ev;

	if (!pull(b, &ev)) /* stream start */
		return NULL;
	yaml_event_delete(&ev);
	if (!pull(b, &ev))
		return NULL;
	if (ev.type == YAML_STREAM_END_EVENT) {
		builder_diag(b, ev.start_mark,
			     "the profile is empty; expected a mapping of settings");
		yaml_event_delete(&ev);
		return NULL;
	}
	yaml_event_delete(&ev); /* document start */
	if (!pull(b, &ev))
		return NULL;
	root = build(b, &ev, 1);
	if (root == NULL || !expect_end(b))
		return NULL;
	return steal_ptr(&root);
}

/* Parse `data` into a tree, or NULL after exactly one diagnostic. */
static struct node *tree_load(struct sink *s, const char *file, const char *data, size_t len)
{
	struct builder b = {.sink = s, .file = file, .data = data, .len = len};
	struct node *root;

	if (!yaml_parser_initialize(&b.parser))
		pdk_oom();
	yaml_parser_set_input_string(&b.parser, (const unsigned char *)data, len);
	root = tree_read(&b);
	yaml_parser_delete(&b.parser);
	return root;
}

/* ------------------------------------------------------------------------ */
/* Stage 2: the schema walk                                                   */
/* ------------------------------------------------------------------------ */

/* A link of the `extends` chain, from the profile being read up to the top. */
struct chain {
	const char *id;   /* "builtin:NAME" or the real path of the file: what cycles compare */
	const char *name; /* what messages show */
	const struct chain *up;
	unsigned depth; /* 0 for the profile the caller asked for */
};

/* The document being walked. */
struct source {
	const char *name; /* "builtin:NAME" or the path, for diagnostics and `source` */
	const char *dir;  /* where relative `extends` paths start; NULL = cwd */
	const struct chain *chain;
};

struct walk {
	struct sink *sink;
	const struct source *src;
	struct pdk_policy *pol; /* being built; owned by the walk */
};

struct emitter;
struct field;

typedef void (*parse_fn)(struct walk *w, const struct node *n, const char *path,
			 const struct field *f);
typedef void (*emit_fn)(struct emitter *e, const struct pdk_policy *p, const struct field *f);

/* One key of a mapping in the schema. */
struct field {
	const char *key;
	parse_fn parse;
	emit_fn emit; /* NULL: not written by pdk_policy_dump() */
	size_t off;   /* offset of the target member in struct pdk_policy */
	const void *arg;
};

struct table {
	const struct field *fields;
	size_t n;
};

#define TABLE(a)                       \
	{                              \
		(a), PDK_ARRAY_SIZE(a) \
	}
#define MEMBER(f, type, p)  ((type *)(void *)((char *)(p) + (f)->off))
#define CMEMBER(f, type, p) ((type const *)(const void *)((const char *)(p) + (f)->off))

static struct pdk_policy *load_ref(struct sink *s, const char *ref, const char *dir,
				   const struct chain *up, struct pdk_error **err);

static void bad(struct walk *w, const struct node *n, const char *path, const char *fmt, ...)
	PDK_PRINTF(4, 5);

static void bad(struct walk *w, const struct node *n, const char *path, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		pdk_oom();
	va_end(ap);
	diag(w->sink, w->src->name, n->line, n->column, path, "%s", msg);
}

static bool is_null(const struct node *n)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};

	if (n->type != NODE_SCALAR || !n->plain)
		return false;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(nulls); i++) {
		if (strcmp(n->str, nulls[i]) == 0)
			return true;
	}
	return false;
}

/* "a list", "null", "'value'": what a message says was found. */
static char *describe(const struct node *n)
{
	_cleanup_free_ char *ex = NULL;

	if (n->type == NODE_MAP)
		return pdk_xstrdup("a mapping");
	if (n->type == NODE_SEQ)
		return pdk_xstrdup("a list");
	if (is_null(n))
		return pdk_xstrdup("null");
	ex = excerpt(n->str, n->len);
	return pdk_xasprintf("'%s'", ex);
}

static void expected(struct walk *w, const struct node *n, const char *path, const char *what)
{
	_cleanup_free_ char *found = describe(n);

	bad(w, n, path, "expected %s, found %s", what, found);
}

/* The text of a non-null scalar, or NULL after a diagnostic. */
static const char *want_string(struct walk *w, const struct node *n, const char *path,
			       const char *what)
{
	if (n->type != NODE_SCALAR || is_null(n)) {
		expected(w, n, path, what);
		return NULL;
	}
	if (strlen(n->str) != n->len) {
		bad(w, n, path, "expected %s, found a string with a NUL byte", what);
		return NULL;
	}
	return n->str;
}

static char *path_join(const char *path, const char *key)
{
	_cleanup_free_ char *k = excerpt_str(key);

	return *path ? pdk_xasprintf("%s.%s", path, k) : pdk_xstrdup(k);
}

static const struct field *table_find(const struct table *t, const struct node *key)
{
	if (strlen(key->str) != key->len)
		return NULL;
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->fields[i].key, key->str) == 0)
			return &t->fields[i];
	}
	return NULL;
}

static char *table_keys(const struct table *t)
{
	char *s = pdk_xstrdup(t->fields[0].key);

	for (size_t i = 1; i < t->n; i++) {
		char *next = pdk_xasprintf("%s, %s", s, t->fields[i].key);

		free(s);
		s = next;
	}
	return s;
}

static void unknown_key(struct walk *w, const struct node *key, const char *path,
			const struct table *t)
{
	_cleanup_free_ char *sub = path_join(path, key->str);
	_cleanup_free_ char *name = excerpt(key->str, key->len);
	_cleanup_free_ char *keys = table_keys(t);

	bad(w, key, sub, "unknown key '%s' (expected one of: %s)", name, keys);
}

static void walk_pair(struct walk *w, const struct node *key, const struct node *val,
		      const char *path, const struct table *t, int *first)
{
	_cleanup_free_ char *sub = NULL;
	const struct field *f;
	size_t i;

	if (key->type != NODE_SCALAR || is_null(key)) {
		expected(w, key, path, "a key name");
		return;
	}
	f = table_find(t, key);
	if (f == NULL) {
		unknown_key(w, key, path, t);
		return;
	}
	i = (size_t)(f - t->fields);
	sub = path_join(path, f->key);
	if (first[i] != 0) {
		bad(w, key, sub, "duplicate key '%s' (first set on line %d)", f->key, first[i]);
		return;
	}
	first[i] = key->line;
	f->parse(w, val, sub, f);
}

static void walk_map(struct walk *w, const struct node *n, const char *path, const struct table *t)
{
	int first[MAX_FIELDS] = {0}; /* line where each key was first seen */

	if (n->type != NODE_MAP) {
		expected(w, n, path, "a mapping");
		return;
	}
	for (size_t i = 0; i + 1 < n->n; i += 2)
		walk_pair(w, n->kids[i], n->kids[i + 1], path, t, first);
}

/* ---- field parsers ---- */

static void parse_map(struct walk *w, const struct node *n, const char *path, const struct field *f)
{
	walk_map(w, n, path, f->arg);
}

/* `extends` is read before the walk (see base_policy()). */
static void parse_skip(struct walk *w, const struct node *n, const char *path,
		       const struct field *f)
{
	(void)w;
	(void)n;
	(void)path;
	(void)f;
}

static void set_str(char **dst, const char *s)
{
	free(*dst);
	*dst = s != NULL ? pdk_xstrdup(s) : NULL;
}

static bool has_control(const char *s)
{
	for (; *s; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	}
	return false;
}

static void parse_name(struct walk *w, const struct node *n, const char *path,
		       const struct field *f)
{
	const char *s = want_string(w, n, path, "a profile name");

	if (s == NULL)
		return;
	if (*s == '\0' || strlen(s) > MAX_NAME || has_control(s)) {
		bad(w, n, path, "expected a name of 1 to %d printable characters", MAX_NAME);
		return;
	}
	set_str(MEMBER(f, char *, w->pol), s);
}

/* Free text; null clears it. */
static void parse_text(struct walk *w, const struct node *n, const char *path,
		       const struct field *f)
{
	const char *s = NULL;

	if (!is_null(n)) {
		s = want_string(w, n, path, "a string");
		if (s == NULL)
			return;
	}
	set_str(MEMBER(f, char *, w->pol), s);
}

/* The workspace path may be relative (the CLI resolves it); null means the cwd. */
static void parse_ws_path(struct walk *w, const struct node *n, const char *path,
			  const struct field *f)
{
	const char *s = NULL;

	if (!is_null(n)) {
		s = want_string(w, n, path, "a directory");
		if (s == NULL)
			return;
		if (*s == '\0' || *s == '~') {
			expected(w, n, path, "a directory ('~' is not expanded)");
			return;
		}
		if (strlen(s) >= PATH_MAX) {
			bad(w, n, path, "the path is longer than %d bytes", PATH_MAX - 1);
			return;
		}
	}
	set_str(MEMBER(f, char *, w->pol), s);
}

static bool valid_label(const char *s, size_t len)
{
	if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '-')
			return false;
	}
	return true;
}

/* RFC 1123: dot-separated labels of letters, digits and inner hyphens. */
static bool valid_hostname(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > MAX_HOST)
		return false;
	while (*s) {
		const char *dot = strchr(s, '.');
		size_t l = dot ? (size_t)(dot - s) : strlen(s);

		if (!valid_label(s, l))
			return false;
		s += l + (dot ? 1 : 0);
		if (dot && *s == '\0')
			return false;
	}
	return true;
}

static void parse_hostname(struct walk *w, const struct node *n, const char *path,
			   const struct field *f)
{
	const char *s = want_string(w, n, path, "a hostname");

	if (s == NULL)
		return;
	if (!valid_hostname(s)) {
		expected(
			w, n, path,
			"a hostname of at most 64 characters (letters, digits, '-' and '.'; RFC 1123)");
		return;
	}
	set_str(MEMBER(f, char *, w->pol), s);
}

static bool parse_bool_text(const char *s, bool *out)
{
	static const struct {
		const char *text;
		bool value;
	} words[] = {
		{"true", true},   {"True", true},   {"TRUE", true},
		{"false", false}, {"False", false}, {"FALSE", false},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(words); i++) {
		if (strcmp(s, words[i].text) == 0) {
			*out = words[i].value;
			return true;
		}
	}
	return false;
}

static void parse_bool(struct walk *w, const struct node *n, const char *path,
		       const struct field *f)
{
	const char *s = want_string(w, n, path, "true or false");
	bool v;

	if (s == NULL)
		return;
	if (!parse_bool_text(s, &v)) {
		expected(w, n, path, "true or false");
		return;
	}
	*MEMBER(f, bool, w->pol) = v;
}

/* ---- enums ---- */

struct enum_val {
	const char *name;
	int value;
	const char *refusal; /* non-NULL: a known word that is refused, and why */
};

struct enum_spec {
	const struct enum_val *vals;
	size_t n;
};

_Static_assert(sizeof(enum pdk_ws_mode) == sizeof(int), "enum members are written as int");
_Static_assert(sizeof(enum pdk_net_mode) == sizeof(int), "enum members are written as int");

static const struct enum_val ws_modes[] = {
	{"overlay", PDK_WS_OVERLAY, NULL}, {"rw", PDK_WS_RW, NULL},     {"ro", PDK_WS_RO, NULL},
	{"tmpfs", PDK_WS_TMPFS, NULL},     {"none", PDK_WS_NONE, NULL},
};
static const struct enum_val net_modes[] = {
	{"none", PDK_NET_NONE, NULL},
	{"host", PDK_NET_HOST, NULL},
	{"allowlist", PDK_NET_ALLOWLIST, NULL},
};
static const struct enum_spec ws_mode_spec = {ws_modes, PDK_ARRAY_SIZE(ws_modes)};
static const struct enum_spec net_mode_spec = {net_modes, PDK_ARRAY_SIZE(net_modes)};

static char *enum_words(const struct enum_spec *es)
{
	char *s = pdk_xstrdup(es->vals[0].name);

	for (size_t i = 1; i < es->n; i++) {
		char *next;

		if (es->vals[i].refusal != NULL)
			continue;
		next = pdk_xasprintf("%s, %s", s, es->vals[i].name);
		free(s);
		s = next;
	}
	return s;
}

static void parse_enum(struct walk *w, const struct node *n, const char *path,
		       const struct field *f)
{
	const struct enum_spec *es = f->arg;
	_cleanup_free_ char *words = enum_words(es);
	_cleanup_free_ char *what = pdk_xasprintf("one of %s", words);
	const char *s = want_string(w, n, path, what);

	if (s == NULL)
		return;
	for (size_t i = 0; i < es->n; i++) {
		if (strcmp(s, es->vals[i].name) != 0)
			continue;
		if (es->vals[i].refusal != NULL) {
			bad(w, n, path, "%s", es->vals[i].refusal);
			return;
		}
		memcpy(MEMBER(f, int, w->pol), &es->vals[i].value, sizeof(int));
		return;
	}
	expected(w, n, path, what);
}

/* ---- lists of paths and names ---- */

typedef char *(*check_fn)(struct walk *w, const struct node *n, const char *path, const char *s);

struct list_spec {
	const char *what; /* "an absolute path" */
	check_fn check;   /* returns the (normalized) entry, or NULL after a diagnostic */
};

/* Append "/comp" for each component of `s`; false on "." or "..". */
static bool normalize_path(const char *s, char *out)
{
	size_t o = 0;

	while (*s) {
		size_t l;

		while (*s == '/')
			s++;
		l = strcspn(s, "/");
		if (l == 0)
			break;
		if ((l == 1 && s[0] == '.') || (l == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		out[o++] = '/';
		memcpy(out + o, s, l);
		o += l;
		s += l;
	}
	out[o] = '\0';
	return true;
}

static char *check_abs_path(struct walk *w, const struct node *n, const char *path, const char *s)
{
	_cleanup_free_ char *out = NULL;

	if (s[0] != '/') {
		expected(w, n, path,
			 s[0] == '~' ? "an absolute path ('~' is not expanded)"
				     : "an absolute path");
		return NULL;
	}
	if (strlen(s) >= PATH_MAX) {
		bad(w, n, path, "the path is longer than %d bytes", PATH_MAX - 1);
		return NULL;
	}
	out = pdk_xmalloc(strlen(s) + 1);
	if (!normalize_path(s, out)) {
		expected(w, n, path, "an absolute path without '.' or '..' components");
		return NULL;
	}
	if (out[0] == '\0') {
		bad(w, n, path, "'/' cannot be listed; name the directories instead");
		return NULL;
	}
	return steal_ptr(&out);
}

/*
 * Host /etc entries that a profile may not bind. The identity files are
 * generated inside the sandbox (mount.c); the others hold secrets.
 */
static const struct {
	const char *name;
	const char *why;
} etc_refused[] = {
	{"passwd", "is generated inside the sandbox"},
	{"group", "is generated inside the sandbox"},
	{"hostname", "is generated inside the sandbox"},
	{"hosts", "is generated inside the sandbox"},
	{"shadow", "holds password hashes"},
	{"shadow-", "holds password hashes"},
	{"gshadow", "holds password hashes"},
	{"gshadow-", "holds password hashes"},
	{"security", "holds old password hashes (opasswd)"},
	{"ssh", "holds the host's private keys"},
	{"sudoers", "is the host's privilege configuration"},
	{"sudoers.d", "is the host's privilege configuration"},
	{"krb5.keytab", "holds Kerberos keys"},
};

static bool valid_etc_name(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > NAME_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (; *s; s++) {
		if (!isalnum((unsigned char)*s) && strchr("._-+@", *s) == NULL)
			return false;
	}
	return true;
}

static char *check_etc_name(struct walk *w, const struct node *n, const char *path, const char *s)
{
	if (strchr(s, '/') != NULL) {
		expected(w, n, path, "a name under /etc, not a path");
		return NULL;
	}
	if (!valid_etc_name(s)) {
		expected(w, n, path,
			 "a file name under /etc (letters, digits, '.', '_', '-', '+', '@')");
		return NULL;
	}
	for (size_t i = 0; i < PDK_ARRAY_SIZE(etc_refused); i++) {
		if (strcmp(s, etc_refused[i].name) == 0) {
			bad(w, n, path, "'/etc/%s' cannot be bound: it %s", s, etc_refused[i].why);
			return NULL;
		}
	}
	return pdk_xstrdup(s);
}

/* A network.allow entry, stored in its canonical form (lowercase, IDNA, v6 compressed). */
static char *check_allow(struct walk *w, const struct node *n, const char *path, const char *s)
{
	struct pdk_net_rule r;
	_cleanup_free_ char *why = NULL;
	_cleanup_free_ char *ex = NULL;
	char *out;

	if (pdk_net_rule_parse(s, &r, &why) < 0) {
		ex = excerpt_str(s);
		bad(w, n, path,
		    "'%s' is not a host, '*.domain' or IP address with an optional "
		    ":port: %s",
		    ex, why);
		return NULL;
	}
	out = steal_ptr(&r.text);
	pdk_net_rule_release(&r);
	return out;
}

/* ---- network.credentials: a list of {host, header} ---- */

#define MAX_CREDENTIALS 32

static const struct node *cred_key(struct walk *w, const struct node *map, const char *path,
				   const char *key)
{
	const struct node *found = NULL;

	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct node *k = map->kids[i];

		if (k->type == NODE_SCALAR && strcmp(k->str, key) == 0 && strlen(key) == k->len)
			found = map->kids[i + 1];
	}
	if (found == NULL)
		bad(w, map, path, "a credential needs '%s'", key);
	return found;
}

static bool cred_keys_ok(struct walk *w, const struct node *map, const char *path)
{
	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct node *k = map->kids[i];
		_cleanup_free_ char *ex = NULL;

		if (k->type == NODE_SCALAR &&
		    (strcmp(k->str, "host") == 0 || strcmp(k->str, "header") == 0))
			continue;
		ex = excerpt(k->str, k->len);
		bad(w, k, path, "unknown key '%s' (expected host and header)", ex);
		return false;
	}
	return true;
}

static bool cred_item(struct walk *w, const struct node *n, const char *path, char ***v)
{
	_cleanup_free_ char *hpath = pdk_xasprintf("%s.host", path);
	_cleanup_free_ char *vpath = pdk_xasprintf("%s.header", path);
	_cleanup_free_ char *host = NULL;
	_cleanup_free_ char *field = NULL;
	_cleanup_free_ char *secret = NULL;
	_cleanup_free_ char *why = NULL;
	const struct node *hn, *vn;
	const char *hs, *vs;

	if (n->type != NODE_MAP) {
		expected(w, n, path, "a mapping {host: HOST, header: 'Name: ... ${secret:NAME}'}");
		return false;
	}
	if (!cred_keys_ok(w, n, path))
		return false;
	hn = cred_key(w, n, path, "host");
	vn = cred_key(w, n, path, "header");
	if (hn == NULL || vn == NULL)
		return false;
	hs = want_string(w, hn, hpath, "a host[:port]");
	host = hs != NULL ? check_allow(w, hn, hpath, hs) : NULL;
	vs = want_string(w, vn, vpath, "a header");
	if (host == NULL || vs == NULL)
		return false;
	if (pdk_net_cred_parse(vs, &field, &secret, &why) < 0) {
		bad(w, vn, vpath, "%s", why);
		return false;
	}
	pdk_strv_push_take(v, steal_ptr(&host));
	pdk_strv_push(v, vs);
	return true;
}

static const struct list_spec abs_paths = {"an absolute path", check_abs_path};
static const struct list_spec allow_entries = {"a host[:port]", check_allow};
static const struct list_spec etc_names = {"a name under /etc", check_etc_name};

static bool strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		if (strcmp(v[i], s) == 0)
			return true;
	}
	return false;
}

/* One list entry; false after a diagnostic. */
static bool list_item(struct walk *w, const struct node *n, const char *path,
		      const struct list_spec *ls, char ***v)
{
	const char *s = want_string(w, n, path, ls->what);
	_cleanup_free_ char *e = s != NULL ? ls->check(w, n, path, s) : NULL;
	_cleanup_free_ char *ex = NULL;

	if (e == NULL)
		return false;
	if (strv_has(*v, e)) {
		ex = excerpt_str(e);
		bad(w, n, path, "'%s' is listed twice", ex);
		return false;
	}
	pdk_strv_push_take(v, steal_ptr(&e));
	return true;
}

typedef bool (*item_fn)(struct walk *w, const struct node *n, const char *path, const void *arg,
			char ***v);

/*
 * A sequence of at most `max` items, each checked by `item`; the list
 * replaces the inherited one as a whole, and only when every item is good.
 */
static void parse_seq(struct walk *w, const struct node *n, const char *path, const struct field *f,
		      int max, item_fn item)
{
	_cleanup_strv_ char **v = NULL;
	char ***dst = MEMBER(f, char **, w->pol);
	bool ok = true;

	if (n->type != NODE_SEQ) {
		expected(w, n, path, "a list");
		return;
	}
	if (n->n > (size_t)max) {
		bad(w, n, path, "more than %d entries", max);
		return;
	}
	for (size_t i = 0; i < n->n; i++) {
		_cleanup_free_ char *sub = pdk_xasprintf("%s[%zu]", path, i);

		ok = item(w, n->kids[i], sub, f->arg, &v) && ok;
	}
	if (!ok)
		return;
	pdk_strv_free(*dst);
	*dst = steal_ptr(&v);
}

static bool list_item_fn(struct walk *w, const struct node *n, const char *path, const void *arg,
			 char ***v)
{
	return list_item(w, n, path, arg, v);
}

static bool cred_item_fn(struct walk *w, const struct node *n, const char *path, const void *arg,
			 char ***v)
{
	(void)arg;
	return cred_item(w, n, path, v);
}

static void parse_list(struct walk *w, const struct node *n, const char *path,
		       const struct field *f)
{
	parse_seq(w, n, path, f, MAX_ENTRIES, list_item_fn);
}

/* Each entry is a pair {host, header}, stored as two strings. */
static void parse_credentials(struct walk *w, const struct node *n, const char *path,
			      const struct field *f)
{
	parse_seq(w, n, path, f, MAX_CREDENTIALS, cred_item_fn);
}

/* ---- best_effort ---- */

static const struct {
	const char *name;
	unsigned flag;
} be_names[] = {
	{"memory", PDK_BE_MEMORY},
	{"pids", PDK_BE_PIDS},
	{"cpu", PDK_BE_CPU},
	{"landlock", PDK_BE_LANDLOCK},
	{"exec_trace", PDK_BE_EXEC_TRACE},
};

static unsigned be_flag(const char *s)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(be_names); i++) {
		if (strcmp(s, be_names[i].name) == 0)
			return be_names[i].flag;
	}
	return 0;
}

static bool be_item(struct walk *w, const struct node *n, const char *path, unsigned *flags)
{
	static const char what[] = "one of memory, pids, cpu, landlock, exec_trace";
	const char *s = want_string(w, n, path, what);
	unsigned flag = s != NULL ? be_flag(s) : 0;

	if (s == NULL)
		return false;
	if (flag == 0) {
		expected(w, n, path, what);
		return false;
	}
	if (*flags & flag) {
		bad(w, n, path, "'%s' is listed twice", s);
		return false;
	}
	*flags |= flag;
	return true;
}

static void parse_best_effort(struct walk *w, const struct node *n, const char *path,
			      const struct field *f)
{
	unsigned flags = 0;
	bool ok = true;

	if (n->type != NODE_SEQ) {
		expected(w, n, path, "a list");
		return;
	}
	for (size_t i = 0; i < n->n && i < MAX_ENTRIES; i++) {
		_cleanup_free_ char *sub = pdk_xasprintf("%s[%zu]", path, i);

		ok = be_item(w, n->kids[i], sub, &flags) && ok;
	}
	if (ok)
		*MEMBER(f, unsigned, w->pol) = flags;
}

/* ---- env ---- */

static bool valid_env_name(const char *s)
{
	if (!isalpha((unsigned char)*s) && *s != '_')
		return false;
	for (s++; *s; s++) {
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	}
	return true;
}

/* Set KEY=value in *env, replacing an inherited KEY. */
static void env_set(char ***env, const char *key, const char *value)
{
	size_t klen = strlen(key);
	char *entry = pdk_xasprintf("%s=%s", key, value);

	for (size_t i = 0; *env != NULL && (*env)[i] != NULL; i++) {
		if (strncmp((*env)[i], key, klen) == 0 && (*env)[i][klen] == '=') {
			free((*env)[i]);
			(*env)[i] = entry;
			return;
		}
	}
	pdk_strv_push_take(env, entry);
}

static bool env_dup(const struct node *map, size_t upto, const char *key)
{
	for (size_t j = 0; j < upto; j += 2) {
		const struct node *k = map->kids[j];

		if (k->type == NODE_SCALAR && strcmp(k->str, key) == 0)
			return true;
	}
	return false;
}

static void env_pair(struct walk *w, const struct node *map, size_t i, const char *path,
		     char ***env)
{
	const struct node *k = map->kids[i];
	const struct node *v = map->kids[i + 1];
	const char *key = want_string(w, k, path, "a variable name");
	_cleanup_free_ char *sub = key != NULL ? path_join(path, key) : NULL;
	const char *val;

	if (key == NULL)
		return;
	if (!valid_env_name(key)) {
		expected(w, k, sub, "a variable name ([A-Za-z_][A-Za-z0-9_]*)");
		return;
	}
	if (env_dup(map, i, key)) {
		bad(w, k, sub, "duplicate key '%s'", key);
		return;
	}
	val = want_string(w, v, sub, "a string");
	if (val != NULL)
		env_set(env, key, val);
}

/* Variables merge with the inherited ones, key by key. */
static void parse_env(struct walk *w, const struct node *n, const char *path, const struct field *f)
{
	if (n->type != NODE_MAP) {
		expected(w, n, path, "a mapping of NAME: value");
		return;
	}
	if (n->n / 2 > MAX_ENTRIES) {
		bad(w, n, path, "more than %d variables", MAX_ENTRIES);
		return;
	}
	for (size_t i = 0; i + 1 < n->n; i += 2)
		env_pair(w, n, i, path, MEMBER(f, char **, w->pol));
}

/* ---- limits ---- */

enum limit_kind {
	LIM_SIZE,
	LIM_COUNT,
	LIM_CPU,
	LIM_DURATION,
};

struct limit_spec {
	enum limit_kind kind;
	const char *zero_word; /* a word that means 0, or NULL */
	uint64_t max;
	uint64_t unit; /* values must be a multiple of this (1 = any) */
};

static int parse_count(const char *s, uint64_t *out)
{
	return pdk_parse_u64(s, UINT64_MAX, out);
}

/* "1", "0.5", "1.25", "2.125": CPUs with up to three decimals, in thousandths. */
static int parse_cpu(const char *s, uint64_t *milli)
{
	const char *dot = strchr(s, '.');
	uint64_t whole, frac = 0;
	char buf[16];
	size_t ilen = dot ? (size_t)(dot - s) : strlen(s);
	size_t flen = dot ? strlen(dot + 1) : 0;
	int rc;

	if (ilen == 0 || ilen >= sizeof(buf) || (dot && (flen == 0 || flen > 3)))
		return ilen >= sizeof(buf) ? -ERANGE : -EINVAL;
	memcpy(buf, s, ilen);
	buf[ilen] = '\0';
	rc = pdk_parse_u64(buf, UINT64_MAX / 1000 - 1, &whole);
	if (rc == 0 && dot)
		rc = pdk_parse_u64(dot + 1, 999, &frac);
	if (rc < 0)
		return rc;
	for (size_t i = flen; i < 3; i++)
		frac *= 10;
	*milli = whole * 1000 + frac;
	return 0;
}

static void fmt_unit(uint64_t v, char *buf, size_t size, const uint64_t *mul,
		     const char *const *sfx, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v >= mul[i] && v % mul[i] == 0) {
			snprintf(buf, size, "%llu%s", (unsigned long long)(v / mul[i]), sfx[i]);
			return;
		}
	}
	snprintf(buf, size, "%llu", (unsigned long long)v);
}

static void fmt_size(uint64_t v, char *buf, size_t size)
{
	static const uint64_t mul[] = {1ULL << 40, 1ULL << 30, 1ULL << 20, 1ULL << 10};
	static const char *const sfx[] = {"T", "G", "M", "K"};

	fmt_unit(v, buf, size, mul, sfx, PDK_ARRAY_SIZE(mul));
}

static void fmt_duration(uint64_t v, char *buf, size_t size)
{
	static const uint64_t mul[] = {86400000, 3600000, 60000, 1000, 1};
	static const char *const sfx[] = {"d", "h", "m", "s", "ms"};

	fmt_unit(v, buf, size, mul, sfx, PDK_ARRAY_SIZE(mul));
}

static void fmt_count(uint64_t v, char *buf, size_t size)
{
	snprintf(buf, size, "%llu", (unsigned long long)v);
}

static void fmt_cpu(uint64_t v, char *buf, size_t size)
{
	unsigned frac = (unsigned)(v % 1000);
	int digits = 3;

	if (frac == 0) {
		fmt_count(v / 1000, buf, size);
		return;
	}
	for (; frac % 10 == 0; frac /= 10)
		digits--;
	snprintf(buf, size, "%llu.%0*u", (unsigned long long)(v / 1000), digits, frac);
}

static const struct {
	const char *expect;
	int (*parse)(const char *s, uint64_t *out);
	void (*fmt)(uint64_t v, char *buf, size_t size);
} limit_kinds[] = {
	[LIM_SIZE] = {"a size such as 512M or 4G", pdk_parse_size, fmt_size},
	[LIM_COUNT] = {"a whole number", parse_count, fmt_count},
	[LIM_CPU] = {"a number of CPUs such as 0.5 or 2 (at most 3 decimals)", parse_cpu, fmt_cpu},
	[LIM_DURATION] = {"a duration such as 250ms, 30s, 10m or 2h", pdk_parse_duration,
			  fmt_duration},
};

static void limit_diag(struct walk *w, const struct node *n, const char *path,
		       const struct limit_spec *ls, int rc)
{
	_cleanup_free_ char *what = NULL;
	_cleanup_free_ char *found = describe(n);
	char max[32];

	if (rc == -ERANGE) {
		limit_kinds[ls->kind].fmt(ls->max, max, sizeof(max));
		if (ls->max == UINT64_MAX)
			bad(w, n, path, "%s is out of range", found);
		else
			bad(w, n, path, "%s is out of range (at most %s)", found, max);
		return;
	}
	what = ls->zero_word
		       ? pdk_xasprintf("%s, or '%s'", limit_kinds[ls->kind].expect, ls->zero_word)
		       : pdk_xstrdup(limit_kinds[ls->kind].expect);
	expected(w, n, path, what);
}

static void parse_limit(struct walk *w, const struct node *n, const char *path,
			const struct field *f)
{
	const struct limit_spec *ls = f->arg;
	const char *s = want_string(w, n, path, limit_kinds[ls->kind].expect);
	uint64_t v = 0;
	int rc;

	if (s == NULL)
		return;
	rc = ls->zero_word && strcmp(s, ls->zero_word) == 0 ? 0
							    : limit_kinds[ls->kind].parse(s, &v);
	if (rc == 0 && v > ls->max)
		rc = -ERANGE;
	if (rc < 0) {
		limit_diag(w, n, path, ls, rc);
		return;
	}
	if (v % ls->unit != 0) {
		bad(w, n, path, "expected a whole number of seconds, found '%s'", s);
		return;
	}
	if (ls->kind == LIM_CPU)
		*MEMBER(f, uint32_t, w->pol) = (uint32_t)v;
	else
		*MEMBER(f, uint64_t, w->pol) = v;
}

/* ------------------------------------------------------------------------ */
/* Dump: the same tables, backwards                                           */
/* ------------------------------------------------------------------------ */

struct emitter {
	yaml_emitter_t y;
	bool failed;
	const char *problem; /* our own reason, when libyaml has none */
};

static void send(struct emitter *e, yaml_event_t *ev, int init_ok)
{
	if (!init_ok) {
		e->failed = true;
		e->problem = "a string is not valid UTF-8";
		return;
	}
	/* yaml_emitter_emit() takes ownership of the event, also on failure. */
	if (!yaml_emitter_emit(&e->y, ev))
		e->failed = true;
}

static void emit_scalar(struct emitter *e, const char *s, yaml_scalar_style_t style)
{
	yaml_event_t ev;
	size_t len = strlen(s);

	if (e->failed)
		return;
	if (len > INT_MAX) {
		e->failed = true;
		e->problem = "a string is too long";
		return;
	}
	send(e, &ev,
	     yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)len, 1, 1,
					  style));
}

/*
 * A string, plain when that reads back as the same string. libyaml quotes
 * what cannot be plain; the words that plain YAML reads as null are quoted
 * here, since the parser gives null its own meaning.
 */
static void emit_str(struct emitter *e, const char *s)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
	yaml_scalar_style_t style = YAML_PLAIN_SCALAR_STYLE;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(nulls); i++) {
		if (strcmp(s, nulls[i]) == 0)
			style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	}
	emit_scalar(e, s, style);
}

static void emit_start(struct emitter *e, bool map, bool flow)
{
	yaml_event_t ev;

	if (e->failed)
		return;
	if (map)
		send(e, &ev,
		     yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
							 flow ? YAML_FLOW_MAPPING_STYLE
							      : YAML_BLOCK_MAPPING_STYLE));
	else
		send(e, &ev,
		     yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
							  flow ? YAML_FLOW_SEQUENCE_STYLE
							       : YAML_BLOCK_SEQUENCE_STYLE));
}

static void emit_end(struct emitter *e, bool map)
{
	yaml_event_t ev;

	if (e->failed)
		return;
	if (map)
		send(e, &ev, yaml_mapping_end_event_initialize(&ev));
	else
		send(e, &ev, yaml_sequence_end_event_initialize(&ev));
}

static void emit_table(struct emitter *e, const struct pdk_policy *p, const struct table *t)
{
	emit_start(e, true, false);
	for (size_t i = 0; i < t->n; i++) {
		if (t->fields[i].emit != NULL)
			t->fields[i].emit(e, p, &t->fields[i]);
	}
	emit_end(e, true);
}

static void emit_map(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	emit_str(e, f->key);
	emit_table(e, p, f->arg);
}

/* A string member; absent (NULL) strings are left out. */
static void emit_string(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	const char *s = *CMEMBER(f, char *, p);

	if (s == NULL)
		return;
	emit_str(e, f->key);
	emit_str(e, s);
}

static void emit_bool(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	emit_str(e, f->key);
	emit_str(e, *CMEMBER(f, bool, p) ? "true" : "false");
}

static void emit_enum(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	const struct enum_spec *es = f->arg;
	int v;

	memcpy(&v, CMEMBER(f, int, p), sizeof(v));
	for (size_t i = 0; i < es->n; i++) {
		if (es->vals[i].value == v && es->vals[i].refusal == NULL) {
			emit_str(e, f->key);
			emit_str(e, es->vals[i].name);
			return;
		}
	}
	e->failed = true;
	e->problem = "a mode has no name";
}

/* Short lists on one line ([a, b]), longer ones one entry per line. */
static void emit_list(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	char *const *v = *CMEMBER(f, char **, p);
	size_t width = 0;

	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		width += strlen(v[i]) + 2;
	emit_str(e, f->key);
	emit_start(e, false, width <= 60);
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		emit_str(e, v[i]);
	emit_end(e, false);
}

static void emit_best_effort(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	unsigned flags = *CMEMBER(f, unsigned, p);

	emit_str(e, f->key);
	emit_start(e, false, true);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(be_names); i++) {
		if (flags & be_names[i].flag)
			emit_str(e, be_names[i].name);
	}
	emit_end(e, false);
}

static void emit_env(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	char *const *v = *CMEMBER(f, char **, p);

	emit_str(e, f->key);
	emit_start(e, true, v == NULL || v[0] == NULL);
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		const char *eq = strchr(v[i], '=');
		_cleanup_free_ char *key = eq ? xstrndup(v[i], (size_t)(eq - v[i])) : NULL;

		if (eq == NULL)
			continue; /* not KEY=value: nothing the parser could read back */
		emit_str(e, key);
		emit_str(e, eq + 1);
	}
	emit_end(e, true);
}

static void emit_credentials(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	char *const *v = *CMEMBER(f, char **, p);

	emit_str(e, f->key);
	emit_start(e, false, v == NULL || v[0] == NULL);
	for (size_t i = 0; v != NULL && v[i] != NULL && v[i + 1] != NULL; i += 2) {
		emit_start(e, true, true);
		emit_str(e, "host");
		emit_str(e, v[i]);
		emit_str(e, "header");
		emit_str(e, v[i + 1]);
		emit_end(e, true);
	}
	emit_end(e, false);
}

static void emit_limit(struct emitter *e, const struct pdk_policy *p, const struct field *f)
{
	const struct limit_spec *ls = f->arg;
	uint64_t v = ls->kind == LIM_CPU ? *CMEMBER(f, uint32_t, p) : *CMEMBER(f, uint64_t, p);
	char buf[32];

	emit_str(e, f->key);
	if (v == 0 && ls->zero_word != NULL) {
		emit_str(e, ls->zero_word);
		return;
	}
	limit_kinds[ls->kind].fmt(v, buf, sizeof(buf));
	emit_str(e, buf);
}

/* ------------------------------------------------------------------------ */
/* The schema                                                                 */
/* ------------------------------------------------------------------------ */

#define OFF(member) offsetof(struct pdk_policy, member)

static const struct field workspace_fields[] = {
	{"path", parse_ws_path, emit_string, OFF(workspace.path), NULL},
	{"mode", parse_enum, emit_enum, OFF(workspace.mode), &ws_mode_spec},
};
static const struct table workspace_table = TABLE(workspace_fields);

static const struct field fs_fields[] = {
	{"workspace", parse_map, emit_map, 0, &workspace_table},
	{"read_only", parse_list, emit_list, OFF(read_only), &abs_paths},
	{"read_write", parse_list, emit_list, OFF(read_write), &abs_paths},
	{"tmpfs", parse_list, emit_list, OFF(tmpfs), &abs_paths},
	{"hidden", parse_list, emit_list, OFF(hidden), &abs_paths},
	{"etc", parse_list, emit_list, OFF(etc), &etc_names},
};
static const struct table fs_table = TABLE(fs_fields);

static const struct field net_fields[] = {
	{"mode", parse_enum, emit_enum, OFF(network.mode), &net_mode_spec},
	{"allow", parse_list, emit_list, OFF(network.allow), &allow_entries},
	{"credentials", parse_credentials, emit_credentials, OFF(network.credentials), NULL},
};
static const struct table net_table = TABLE(net_fields);

static const struct limit_spec lim_memory = {LIM_SIZE, "unlimited", UINT64_MAX, 1};
static const struct limit_spec lim_pids = {LIM_COUNT, "unlimited", 4194304, 1};
static const struct limit_spec lim_cpu = {LIM_CPU, "unlimited", 1024000, 1};
static const struct limit_spec lim_wall = {LIM_DURATION, "none", UINT64_MAX, 1};
/* RLIMIT_CPU counts whole seconds; a fraction would silently round. */
static const struct limit_spec lim_cpu_time = {LIM_DURATION, "none", UINT64_MAX, 1000};
static const struct limit_spec lim_nofile = {LIM_COUNT, NULL, 1U << 30, 1};
static const struct limit_spec lim_fsize = {LIM_SIZE, "unlimited", UINT64_MAX, 1};
static const struct limit_spec lim_tmp_size = {LIM_SIZE, NULL, UINT64_MAX, 1};
static const struct limit_spec lim_disk = {LIM_SIZE, "unlimited", UINT64_MAX, 1};
static const struct limit_spec lim_egress_bytes = {LIM_SIZE, "unlimited", UINT64_MAX, 1};
static const struct limit_spec lim_egress_count = {LIM_COUNT, "unlimited", UINT32_MAX, 1};

static const struct field limit_fields[] = {
	{"memory", parse_limit, emit_limit, OFF(limits.memory), &lim_memory},
	{"pids", parse_limit, emit_limit, OFF(limits.pids), &lim_pids},
	{"cpu", parse_limit, emit_limit, OFF(limits.cpu_milli), &lim_cpu},
	{"wall", parse_limit, emit_limit, OFF(limits.wall_ms), &lim_wall},
	{"cpu_time", parse_limit, emit_limit, OFF(limits.cpu_time_ms), &lim_cpu_time},
	{"nofile", parse_limit, emit_limit, OFF(limits.nofile), &lim_nofile},
	{"fsize", parse_limit, emit_limit, OFF(limits.fsize), &lim_fsize},
	{"tmp_size", parse_limit, emit_limit, OFF(limits.tmp_size), &lim_tmp_size},
	{"disk", parse_limit, emit_limit, OFF(limits.disk), &lim_disk},
	{"egress_bytes", parse_limit, emit_limit, OFF(limits.egress_bytes), &lim_egress_bytes},
	{"egress_requests", parse_limit, emit_limit, OFF(limits.egress_requests),
	 &lim_egress_count},
	{"egress_connections", parse_limit, emit_limit, OFF(limits.egress_connections),
	 &lim_egress_count},
};
static const struct table limit_table = TABLE(limit_fields);

static const struct field process_fields[] = {
	{"allow_ptrace", parse_bool, emit_bool, OFF(allow_ptrace), NULL},
};
static const struct table process_table = TABLE(process_fields);

static const struct field audit_fields[] = {
	{"exec_trace", parse_bool, emit_bool, OFF(audit.exec_trace), NULL},
};
static const struct table audit_table = TABLE(audit_fields);

static const struct field top_fields[] = {
	{"extends", parse_skip, NULL, 0, NULL},
	{"name", parse_name, emit_string, OFF(name), NULL},
	{"description", parse_text, emit_string, OFF(description), NULL},
	{"filesystem", parse_map, emit_map, 0, &fs_table},
	{"network", parse_map, emit_map, 0, &net_table},
	{"limits", parse_map, emit_map, 0, &limit_table},
	{"best_effort", parse_best_effort, emit_best_effort, OFF(best_effort), NULL},
	{"process", parse_map, emit_map, 0, &process_table},
	{"audit", parse_map, emit_map, 0, &audit_table},
	{"hostname", parse_hostname, emit_string, OFF(hostname), NULL},
	{"env", parse_env, emit_env, OFF(env), NULL},
};
static const struct table top_table = TABLE(top_fields);

_Static_assert(PDK_ARRAY_SIZE(top_fields) <= MAX_FIELDS, "raise MAX_FIELDS");
_Static_assert(PDK_ARRAY_SIZE(limit_fields) <= MAX_FIELDS, "raise MAX_FIELDS");

/* ------------------------------------------------------------------------ */
/* Stage 3: extends, and the whole document                                   */
/* ------------------------------------------------------------------------ */

/* What a profile without `extends` starts from: nothing allowed but /tmp. */
static struct pdk_policy *policy_new(void)
{
	struct pdk_policy *p = pdk_xcalloc(1, sizeof(*p));

	p->workspace.mode = PDK_WS_OVERLAY;
	p->network.mode = PDK_NET_NONE;
	p->hostname = pdk_xstrdup("paddock");
	p->audit.exec_trace = true;
	return p;
}

static const struct node *map_get(const struct node *map, const char *key)
{
	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct node *k = map->kids[i];

		if (k->type == NODE_SCALAR && k->len == strlen(key) && strcmp(k->str, key) == 0)
			return map->kids[i + 1];
	}
	return NULL;
}

/* The policy named by `extends`, or an empty one (after a diagnostic on failure). */
static struct pdk_policy *base_policy(struct walk *w, const struct node *root)
{
	const struct node *n = map_get(root, "extends");
	const char *ref = n != NULL ? want_string(w, n, "extends", "a profile name or path") : NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy *base;

	if (ref == NULL)
		return policy_new();
	base = load_ref(w->sink, ref, w->src->dir, w->src->chain, &err);
	if (base == NULL) {
		bad(w, n, "extends", "%s", err != NULL ? err->msg : "cannot load the profile");
		return policy_new();
	}
	/* The name, description and source describe a profile; they are not inherited. */
	set_str(&base->name, NULL);
	set_str(&base->description, NULL);
	set_str(&base->source, NULL);
	return base;
}

/* "builtin:strict" -> "strict", "dir/coding.yaml" -> "coding". */
static char *name_from_source(const char *src)
{
	const char *base = strrchr(src, '/');
	size_t len;
	char *name;

	base = strncmp(src, "builtin:", 8) == 0 ? src + 8 : base != NULL ? base + 1 : src;
	len = strlen(base);
	if (len > 5 && strcmp(base + len - 5, ".yaml") == 0)
		len -= 5;
	else if (len > 4 && strcmp(base + len - 4, ".yml") == 0)
		len -= 4;
	if (len == 0 || len > MAX_NAME)
		return pdk_xstrdup("profile");
	name = xstrndup(base, len);
	for (char *c = name; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	}
	return name;
}

/* Whole-policy rules, after every field is read. */
static void finish(struct walk *w)
{
	struct pdk_policy *p = w->pol;

	if (p->name == NULL)
		p->name = name_from_source(w->src->name);
	set_str(&p->source, w->src->name);
	/* The sandbox's HOME is /tmp: it is always a fresh tmpfs. */
	if (!strv_has(p->tmpfs, "/tmp"))
		pdk_strv_push(&p->tmpfs, "/tmp");
}

static struct pdk_policy *walk_root(struct walk *w, const struct node *root)
{
	if (root->type != NODE_MAP) {
		expected(w, root, "", "a mapping of settings");
		return NULL;
	}
	w->pol = base_policy(w, root);
	walk_map(w, root, "", &top_table);
	finish(w);
	return steal_ptr(&w->pol);
}

/* Parse one document; NULL when it (or a profile it extends) has problems. */
static struct pdk_policy *parse_doc(struct sink *s, const struct source *src, const char *data,
				    size_t len)
{
	struct walk w = {.sink = s, .src = src};
	_cleanup_node_ struct node *root = NULL;
	size_t before = s->errors;
	struct pdk_policy *p;

	if (len > MAX_PROFILE_BYTES) {
		diag(s, src->name, 0, 0, "", "the profile is larger than %zu bytes",
		     MAX_PROFILE_BYTES);
		return NULL;
	}
	root = tree_load(s, src->name, data != NULL ? data : "", data != NULL ? len : 0);
	if (root == NULL)
		return NULL;
	p = walk_root(&w, root);
	if (s->errors > before || p == NULL) {
		pdk_policy_free(p);
		return NULL;
	}
	return p;
}

static struct pdk_policy *parse_checked(struct sink *s, const struct source *src, const char *data,
					size_t len, struct pdk_error **err)
{
	size_t before = s->errors;
	struct pdk_policy *p = parse_doc(s, src, data, len);
	size_t n = s->errors - before;

	if (p == NULL)
		pdk_error_setx(err, EINVAL, "profile '%s' is invalid (%zu problem%s)", src->name, n,
			       n == 1 ? "" : "s");
	return p;
}

/* ---- finding profiles ---- */

static bool ends_with(const char *s, const char *suffix)
{
	size_t l = strlen(s), sl = strlen(suffix);

	return l >= sl && strcmp(s + l - sl, suffix) == 0;
}

static bool is_path_ref(const char *ref)
{
	return strchr(ref, '/') != NULL || ends_with(ref, ".yaml") || ends_with(ref, ".yml");
}

static bool valid_profile_name(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > 64 || s[0] == '.' || s[0] == '-')
		return false;
	for (; *s; s++) {
		if (!isalnum((unsigned char)*s) && strchr("._-", *s) == NULL)
			return false;
	}
	return true;
}

static char *builtin_list(void)
{
	char *s = pdk_xstrdup(pdk_policy_builtin_names[0]);

	for (size_t i = 1; pdk_policy_builtin_names[i] != NULL; i++) {
		char *next = pdk_xasprintf("%s, %s", s, pdk_policy_builtin_names[i]);

		free(s);
		s = next;
	}
	return s;
}

static int find_named(const char *ref, const char *user, char **out, struct pdk_error **err)
{
	_cleanup_free_ char *builtins = builtin_list();
	_cleanup_free_ char *ex = excerpt_str(ref);
	const char *dirs[] = {user, "/etc/paddock/profiles"};

	if (!valid_profile_name(ref))
		return pdk_error_setx(err, EINVAL,
				      "invalid profile name '%s' (built-in profiles: %s)", ex,
				      builtins);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(dirs); i++) {
		_cleanup_free_ char *p = NULL;

		if (dirs[i] == NULL)
			continue;
		p = pdk_xasprintf("%s/%s.yaml", dirs[i], ref);
		if (access(p, F_OK) == 0) {
			*out = steal_ptr(&p);
			return 0;
		}
	}
	return pdk_error_setx(
		err, ENOENT, "unknown profile '%s' (built-in profiles: %s; no %s.yaml in %s or %s)",
		ex, builtins, ex, user != NULL ? user : "~/.config/paddock/profiles", dirs[1]);
}

/* A --profile argument or an `extends` value -> a name for messages and, for built-ins, the text.
 */
static int resolve_ref(const struct sink *s, const char *ref, const char *dir, char **name,
		       const char **text, struct pdk_error **err)
{
	*text = NULL;
	if (is_path_ref(ref)) {
		*name = ref[0] != '/' && dir != NULL ? pdk_xasprintf("%s/%s", dir, ref)
						     : pdk_xstrdup(ref);
		return 0;
	}
	*text = pdk__policy_builtin_yaml(ref);
	if (*text != NULL) {
		*name = pdk_xasprintf("builtin:%s", ref);
		return 0;
	}
	return find_named(ref, s->profile_dir, name, err);
}

static char *canonical(const char *name)
{
	char *real = realpath(name, NULL);

	return real != NULL ? real : pdk_xstrdup(name);
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		return NULL;
	if (slash == path)
		return pdk_xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

static int cycle_error(const char *id, const char *name, const struct chain *up,
		       struct pdk_error **err)
{
	_cleanup_free_ char *s = excerpt_path(name);

	for (const struct chain *c = up; c != NULL; c = c->up) {
		_cleanup_free_ char *ex = excerpt_path(c->name);
		char *next = pdk_xasprintf("%s -> %s", ex, s);

		free(s);
		s = next;
		if (strcmp(c->id, id) == 0)
			break;
	}
	return pdk_error_setx(err, ELOOP, "extends cycle: %s", s);
}

static int check_chain(const char *id, const char *name, const struct chain *up,
		       struct pdk_error **err)
{
	for (const struct chain *c = up; c != NULL; c = c->up) {
		if (strcmp(c->id, id) == 0)
			return cycle_error(id, name, up, err);
	}
	if (up != NULL && up->depth >= MAX_EXTENDS)
		return pdk_error_setx(err, ELOOP, "more than %d levels of extends", MAX_EXTENDS);
	return 0;
}

/*
 * Read a profile file. O_NONBLOCK and the regular-file check keep a FIFO or
 * a device named by `extends` from blocking or streaming forever; one byte
 * more than MAX_PROFILE_BYTES is read so that parse_doc() can report the size.
 */
static int read_profile(const char *path, char **out, size_t *len, struct pdk_error **err)
{
	_cleanup_close_ int fd =
		TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open profile '%s'", path);
	if (fstat(fd, &st) < 0)
		return pdk_error_set(err, errno, "cannot stat profile '%s'", path);
	if (!S_ISREG(st.st_mode))
		return pdk_error_setx(err, EINVAL, "profile '%s' is not a regular file", path);
	buf = pdk_xmalloc(MAX_PROFILE_BYTES + 2);
	n = pdk_read_all(fd, buf, MAX_PROFILE_BYTES + 1);
	if (n < 0)
		return pdk_error_set(err, (int)-n, "cannot read profile '%s'", path);
	buf[n] = '\0';
	*len = (size_t)n;
	*out = steal_ptr(&buf);
	return 0;
}

static struct pdk_policy *load_ref(struct sink *s, const char *ref, const char *dir,
				   const struct chain *up, struct pdk_error **err)
{
	_cleanup_free_ char *name = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *data = NULL;
	_cleanup_free_ char *own_dir = NULL;
	const char *text = NULL;
	size_t len = 0;
	struct chain link;
	struct source src;

	if (resolve_ref(s, ref, dir, &name, &text, err) < 0)
		return NULL;
	if (up == NULL)
		(void)report_file(s->r, name); /* the report names the profile asked for */
	id = text != NULL ? pdk_xstrdup(name) : canonical(name);
	if (check_chain(id, name, up, err) < 0)
		return NULL;
	if (text == NULL) {
		if (read_profile(name, &data, &len, err) < 0)
			return NULL;
		text = data;
		own_dir = dir_of(name);
	} else {
		len = strlen(text);
	}
	link = (struct chain){
		.id = id, .name = name, .up = up, .depth = up != NULL ? up->depth + 1 : 0};
	src = (struct source){.name = name, .dir = own_dir, .chain = &link};
	return parse_checked(s, &src, text, len, err);
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                 */
/* ------------------------------------------------------------------------ */

struct pdk_policy *pdk_policy_load(const char *name_or_path, const char *profile_dir,
				   struct pdk_policy_report *report, struct pdk_error **err)
{
	struct pdk_policy_report local = {0};
	struct sink s = {.r = report != NULL ? report : &local, .profile_dir = profile_dir};
	struct pdk_policy *p;

	if (name_or_path == NULL || *name_or_path == '\0') {
		pdk_error_setx(err, EINVAL, "no profile name given");
		return NULL;
	}
	p = load_ref(&s, name_or_path, NULL, NULL, err);
	pdk_policy_report_release(&local);
	return p;
}

struct pdk_policy *pdk_policy_parse(const char *file, const char *data, size_t len,
				    struct pdk_policy_report *report, struct pdk_error **err)
{
	struct pdk_policy_report local = {0};
	struct sink s = {.r = report != NULL ? report : &local};
	const char *name = file != NULL ? file : "<input>";
	_cleanup_free_ char *id = canonical(name);
	_cleanup_free_ char *dir = dir_of(name);
	struct chain link = {.id = id, .name = name};
	struct source src = {.name = name, .dir = dir, .chain = &link};
	struct pdk_policy *p;

	(void)report_file(s.r, name);
	p = parse_checked(&s, &src, data, len, err);
	pdk_policy_report_release(&local);
	return p;
}

void pdk_policy_report_release(struct pdk_policy_report *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->n; i++) {
		free(r->diags[i].field);
		free(r->diags[i].msg);
	}
	free(r->diags);
	free(r->file);
	pdk_strv_free(r->files);
	*r = (struct pdk_policy_report){0};
}

void pdk_policy_report_print(const struct pdk_policy_report *r, FILE *out)
{
	for (size_t i = 0; r != NULL && i < r->n; i++) {
		const struct pdk_policy_diag *d = &r->diags[i];

		fputs(d->file != NULL ? d->file : "<input>", out);
		if (d->line > 0)
			fprintf(out, ":%d:%d", d->line, d->column);
		fputs(": ", out);
		if (d->field != NULL && d->field[0] != '\0')
			fprintf(out, "%s: ", d->field);
		fprintf(out, "%s\n", d->msg);
	}
}

static char *str_copy(const char *s)
{
	return s != NULL ? pdk_xstrdup(s) : NULL;
}

static char **strv_copy(char *const *v)
{
	return v != NULL && v[0] != NULL ? pdk_strv_dup(v) : NULL;
}

struct pdk_policy *pdk_policy_dup(const struct pdk_policy *p)
{
	struct pdk_policy *d;

	if (p == NULL)
		return NULL;
	d = pdk_xmalloc(sizeof(*d));
	*d = *p; /* the scalars; every pointer is replaced below */
	d->name = str_copy(p->name);
	d->source = str_copy(p->source);
	d->description = str_copy(p->description);
	d->workspace.path = str_copy(p->workspace.path);
	d->read_only = strv_copy(p->read_only);
	d->read_write = strv_copy(p->read_write);
	d->tmpfs = strv_copy(p->tmpfs);
	d->hidden = strv_copy(p->hidden);
	d->etc = strv_copy(p->etc);
	d->hostname = str_copy(p->hostname);
	d->env = strv_copy(p->env);
	d->network.allow = strv_copy(p->network.allow);
	d->network.credentials = strv_copy(p->network.credentials);
	return d;
}

void pdk_policy_free(struct pdk_policy *p)
{
	if (p == NULL)
		return;
	free(p->name);
	free(p->source);
	free(p->description);
	free(p->workspace.path);
	pdk_strv_free(p->read_only);
	pdk_strv_free(p->read_write);
	pdk_strv_free(p->tmpfs);
	pdk_strv_free(p->hidden);
	pdk_strv_free(p->etc);
	free(p->hostname);
	pdk_strv_free(p->env);
	pdk_strv_free(p->network.allow);
	pdk_strv_free(p->network.credentials);
	free(p);
}

static void emit_document(struct emitter *e, const struct pdk_policy *p)
{
	yaml_event_t ev;

	send(e, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
	if (!e->failed)
		send(e, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
	emit_table(e, p, &top_table);
	if (!e->failed)
		send(e, &ev, yaml_document_end_event_initialize(&ev, 1));
	if (!e->failed)
		send(e, &ev, yaml_stream_end_event_initialize(&ev));
}

int pdk_policy_dump(const struct pdk_policy *p, FILE *out, struct pdk_error **err)
{
	struct emitter e = {.failed = false};
	int rc = 0;

	if (!yaml_emitter_initialize(&e.y))
		pdk_oom();
	yaml_emitter_set_output_file(&e.y, out);
	yaml_emitter_set_unicode(&e.y, 1);
	yaml_emitter_set_width(&e.y, -1);
	yaml_emitter_set_indent(&e.y, 2);
	emit_document(&e, p);
	if (e.failed)
		rc = pdk_error_setx(err, EINVAL, "cannot write the policy as YAML: %s",
				    e.y.problem != NULL ? e.y.problem
				    : e.problem != NULL ? e.problem
							: "write error");
	yaml_emitter_delete(&e.y);
	if (rc == 0 && fflush(out) != 0)
		rc = pdk_error_set(err, errno, "cannot write the policy");
	return rc;
}

const char *pdk_policy_ws_mode_name(enum pdk_ws_mode m)
{
	switch (m) {
	case PDK_WS_RW:
		return "rw";
	case PDK_WS_RO:
		return "ro";
	case PDK_WS_NONE:
		return "none";
	case PDK_WS_OVERLAY:
		return "overlay";
	case PDK_WS_TMPFS:
		return "tmpfs";
	default:
		return "unknown";
	}
}

const char *pdk_policy_net_mode_name(enum pdk_net_mode m)
{
	switch (m) {
	case PDK_NET_NONE:
		return "none";
	case PDK_NET_HOST:
		return "host";
	case PDK_NET_ALLOWLIST:
		return "allowlist";
	default:
		return "unknown";
	}
}
