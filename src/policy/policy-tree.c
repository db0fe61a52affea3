/*
 * policy-tree.c - stage 1 of reading a profile: libyaml's events (its
 * event parser, not its document loader) become a tree of nodes, scalars,
 * lists and mappings, each with its 1-based line and column. Everything
 * that could make the tree blow up (aliases, anchors, deep nesting) is
 * refused here, so the later stages only walk bounded data; any problem
 * is exactly one diagnostic and no tree.
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 32 /* nested mappings and lists */

void pdk__policy_node_free(struct pdk__policy_node *n)
{
	if (n == NULL)
		return;
	for (size_t i = 0; i < n->n; i++)
		pdk__policy_node_free(n->kids[i]);
	free(n->kids);
	free(n->str);
	free(n);
}

static int mark_int(size_t v)
{
	return v >= INT_MAX - 1 ? INT_MAX : (int)v + 1;
}

static struct pdk__policy_node *node_new(enum pdk__policy_node_type t, const yaml_event_t *ev)
{
	struct pdk__policy_node *n = pdk_xcalloc(1, sizeof(*n));

	n->type = t;
	n->line = mark_int(ev->start_mark.line);
	n->column = mark_int(ev->start_mark.column);
	return n;
}

static void node_push(struct pdk__policy_node *n, struct pdk__policy_node *kid)
{
	if (n->n == n->cap) {
		n->cap = n->cap ? n->cap * 2 : 8;
		n->kids = pdk_xrealloc(n->kids, n->cap * sizeof(*n->kids));
	}
	n->kids[n->n++] = kid;
}

struct builder {
	yaml_parser_t parser;
	struct pdk__policy_sink *sink;
	const char *file;
	const char *data;
	size_t len;
};

static void builder_diag(struct builder *b, yaml_mark_t m, const char *msg)
{
	pdk__policy_diag(b->sink, b->file, mark_int(m.line), mark_int(m.column), "", "%s", msg);
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
		pdk__policy_diag(b->sink, b->file, mark_int(m.line), mark_int(m.column), "",
				 "%s: %s", p->context, problem);
	else
		pdk__policy_diag(b->sink, b->file, mark_int(m.line), mark_int(m.column), "", "%s",
				 problem);
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

static struct pdk__policy_node *build(struct builder *b, yaml_event_t *ev, int depth);

static struct pdk__policy_node *build_collection(struct builder *b, const yaml_event_t *ev,
						 int depth)
{
	bool map = ev->type == YAML_MAPPING_START_EVENT;
	yaml_event_type_t end = map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	_cleanup_policy_node_ struct pdk__policy_node *n =
		node_new(map ? PDK__POLICY_MAP : PDK__POLICY_SEQ, ev);

	if (depth > MAX_DEPTH) {
		pdk__policy_diag(b->sink, b->file, n->line, n->column, "",
				 "nesting is deeper than %d levels", MAX_DEPTH);
		return NULL;
	}
	for (;;) {
		yaml_event_t kid;
		struct pdk__policy_node *k;

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

static struct pdk__policy_node *scalar_node(const yaml_event_t *ev)
{
	struct pdk__policy_node *n = node_new(PDK__POLICY_SCALAR, ev);

	n->len = ev->data.scalar.length;
	n->str = pdk_xmalloc(n->len + 1);
	memcpy(n->str, ev->data.scalar.value, n->len);
	n->str[n->len] = '\0';
	n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	return n;
}

/* Build the node that starts with `ev`; takes ownership of `ev`. */
static struct pdk__policy_node *build(struct builder *b, yaml_event_t *ev, int depth)
{
	struct pdk__policy_node *n = NULL;

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

static struct pdk__policy_node *tree_read(struct builder *b)
{
	_cleanup_policy_node_ struct pdk__policy_node *root = NULL;
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

struct pdk__policy_node *pdk__policy_tree_load(struct pdk__policy_sink *s, const char *file,
					       const char *data, size_t len)
{
	struct builder b = {.sink = s, .file = file, .data = data, .len = len};
	struct pdk__policy_node *root;

	if (!yaml_parser_initialize(&b.parser))
		pdk_oom();
	yaml_parser_set_input_string(&b.parser, (const unsigned char *)data, len);
	root = tree_read(&b);
	yaml_parser_delete(&b.parser);
	return root;
}

bool pdk__policy_null_word(const char *s)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(nulls); i++) {
		if (strcmp(s, nulls[i]) == 0)
			return true;
	}
	return false;
}

bool pdk__policy_node_is_null(const struct pdk__policy_node *n)
{
	return n->type == PDK__POLICY_SCALAR && n->plain && pdk__policy_null_word(n->str);
}

const struct pdk__policy_node *pdk__policy_node_get(const struct pdk__policy_node *map,
						    const char *key)
{
	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct pdk__policy_node *k = map->kids[i];

		if (k->type == PDK__POLICY_SCALAR && k->len == strlen(key) &&
		    strcmp(k->str, key) == 0)
			return map->kids[i + 1];
	}
	return NULL;
}
