/*
 * policy-internal.h - what the files of the profile reader share; nothing
 * outside src/policy/ includes it but the unit tests.
 *
 * A profile goes through three stages (docs/internals/policy.md):
 *  1. policy-tree.c: libyaml's events become a tree of nodes, each with
 *     its line and column; everything that could make the tree blow up
 *     is refused there;
 *  2. policy-schema.c: the tree is walked with the schema's tables, one
 *     entry a key with the parser that writes its member of struct
 *     pdk_policy and the emitter that writes it back out; the kinds of
 *     values with more to them are policy-lists.c and policy-limits.c;
 *  3. policy-load.c: names and paths are resolved, `extends` loads the
 *     base profile first (the same code, with a chain for cycles).
 * Every problem becomes a diagnostic (policy-report.c) and the walk goes
 * on. policy-dump.c writes a policy back as YAML with the same tables.
 */
#ifndef PDK_POLICY_INTERNAL_H
#define PDK_POLICY_INTERNAL_H

#include "common.h"
#include "base.h"
#include "policy.h"

#include <yaml.h>

#define PDK__POLICY_MAX_NAME    128  /* bytes in a profile name */
#define PDK__POLICY_MAX_ENTRIES 1024 /* entries in one list, or variables in env */

/* The YAML text of built-in profile `name`, or NULL (policy-builtin.c). */
const char *pdk__policy_builtin_yaml(const char *name);

/* ---- the words of the policy's enums (policy.c) ---- */

/*
 * One enum's words, in the order messages list them: what a profile, a flag
 * and a dump say for each value. The schema, the overrides and the name
 * functions of policy.h read these tables, so a word is written once.
 */
struct pdk__policy_enum {
	const struct pdk__policy_word {
		const char *name;
		int value;
	} * words;
	size_t n;
};

extern const struct pdk__policy_enum pdk__policy_ws_modes;  /* enum pdk_ws_mode */
extern const struct pdk__policy_enum pdk__policy_net_modes; /* enum pdk_net_mode */
extern const struct pdk__policy_enum pdk__policy_ws_syncs;  /* enum pdk_ws_sync */

/* The word of `value`, or NULL when it has none. */
const char *pdk__policy_enum_name(const struct pdk__policy_enum *e, int value);
/* The value of the word `name` into *value; false when `name` is not one of e's words. */
bool pdk__policy_enum_value(const struct pdk__policy_enum *e, const char *name, int *value);

/* ---- diagnostics (policy-report.c) ---- */

/* Where diagnostics go. `errors` also counts those dropped when the report is full. */
struct pdk__policy_sink {
	struct pdk_policy_report *r;
	size_t errors;
	const char *profile_dir; /* the user's profiles (base/paths.h), or NULL */
};

/*
 * Add a diagnostic "file:line:col: field: message" (line and col 0 when
 * unknown; field may be ""). Strings are copied; after the first 64 only
 * counted.
 */
void pdk__policy_diag(struct pdk__policy_sink *s, const char *file, int line, int col,
		      const char *field, const char *fmt, ...) PDK_PRINTF(6, 7);

/* The report's own copy of `file`, which its diagnostics borrow (made on first use). */
char *pdk__policy_report_file(struct pdk_policy_report *r, const char *file);

/*
 * A printable excerpt of untrusted text for a message: at most 48 bytes,
 * cut on a UTF-8 boundary, control characters replaced. New string.
 * _path keeps the end of a long path rather than its start.
 */
char *pdk__policy_excerpt(const char *s, size_t len);
char *pdk__policy_excerpt_str(const char *s);
char *pdk__policy_excerpt_path(const char *s);

/* "list, word": `list` (taken; NULL starts a list) with `word` appended. New string. */
char *pdk__policy_words_add(char *list, const char *word);

/* ---- the tree (policy-tree.c) ---- */

enum pdk__policy_node_type {
	PDK__POLICY_SCALAR,
	PDK__POLICY_SEQ,
	PDK__POLICY_MAP,
};

struct pdk__policy_node {
	enum pdk__policy_node_type type;
	int line;   /* 1-based */
	int column; /* 1-based */
	bool plain; /* a plain scalar: may mean null */
	char *str;  /* scalar value, NUL-terminated (may hold a NUL: see len) */
	size_t len;
	struct pdk__policy_node **kids; /* list items, or keys and values interleaved */
	size_t n;
	size_t cap;
};

/* Free a tree: the node, its kids and their strings. NULL-safe. */
void pdk__policy_node_free(struct pdk__policy_node *n);

static inline void pdk__policy_cleanup_node(struct pdk__policy_node **n)
{
	pdk__policy_node_free(*n);
}
#define _cleanup_policy_node_ __attribute__((cleanup(pdk__policy_cleanup_node)))

/*
 * Parse `data` (len bytes, the caller checked the size) into a tree; NULL
 * after exactly one diagnostic naming `file`. Caller frees the tree.
 */
struct pdk__policy_node *pdk__policy_tree_load(struct pdk__policy_sink *s, const char *file,
					       const char *data, size_t len);

/* A word that plain YAML reads as null ("", "~", "null", ...). */
bool pdk__policy_null_word(const char *s);

/* A plain scalar holding a null word. */
bool pdk__policy_node_is_null(const struct pdk__policy_node *n);

/* The value of `key` in a mapping node, or NULL (borrowed). */
const struct pdk__policy_node *pdk__policy_node_get(const struct pdk__policy_node *map,
						    const char *key);

/* ---- the schema and its walk (policy-schema.c) ---- */

/* A link of the `extends` chain, from the profile being read up to the top. */
struct pdk__policy_chain {
	const char *id;   /* "builtin:NAME" or the real path of the file: what cycles compare */
	const char *name; /* what messages show */
	const struct pdk__policy_chain *up;
	unsigned depth; /* 0 for the profile the caller asked for */
};

/* The document being walked. */
struct pdk__policy_source {
	const char *name; /* "builtin:NAME" or the path, for diagnostics and `source` */
	const char *dir;  /* where relative `extends` paths start; NULL = cwd */
	const struct pdk__policy_chain *chain;
};

struct pdk__policy_walk {
	struct pdk__policy_sink *sink;
	const struct pdk__policy_source *src;
	struct pdk_policy *pol; /* being built; owned by the walk */
	/*
	 * What the fields' offsets point into: `pol` for a profile, a struct
	 * pdk_recipe for a build recipe (recipe.c), which has tables of its own
	 * and reuses the kinds of values (strings, lists, env) of this walk.
	 */
	void *obj;
};

struct pdk__policy_emitter; /* policy-dump.c, below */
struct pdk__policy_field;

/*
 * A field's parser: check node `n` (at dotted `path`) and write the
 * member `f` names, or add a diagnostic and leave it as it was.
 */
typedef void (*pdk__policy_parse_cb)(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
				     const char *path, const struct pdk__policy_field *f);
/* A field's emitter: write its key and value (or nothing, for an absent one). */
typedef void (*pdk__policy_emit_cb)(struct pdk__policy_emitter *e, const struct pdk_policy *p,
				    const struct pdk__policy_field *f);

/* One key of a mapping in the schema. */
struct pdk__policy_field {
	const char *key;
	pdk__policy_parse_cb parse;
	pdk__policy_emit_cb emit; /* NULL: not written by pdk_policy_dump() */
	size_t off;               /* offset of the target member in struct pdk_policy */
	const void *arg;          /* the kind's own description (a spec, a sub-table) */
};

struct pdk__policy_table {
	const struct pdk__policy_field *fields;
	size_t n;
};

/* The member of `p` (a policy, or the walk's obj) that field `f` names, as a `type *`. */
#define PDK__POLICY_MEMBER(f, type, p)  ((type *)(void *)((char *)(p) + (f)->off))
#define PDK__POLICY_CMEMBER(f, type, p) ((type const *)(const void *)((const char *)(p) + (f)->off))

/* The top of the schema: what pdk_policy_dump() writes. */
extern const struct pdk__policy_table pdk__policy_top;

/* A diagnostic at node `n`, field `path`. */
void pdk__policy_bad(struct pdk__policy_walk *w, const struct pdk__policy_node *n, const char *path,
		     const char *fmt, ...) PDK_PRINTF(4, 5);

/* "expected WHAT, found DESCRIPTION" at node `n`. */
void pdk__policy_expected(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			  const char *path, const char *what);

/* "a list", "null", "'value'": what a message says was found. New string. */
char *pdk__policy_describe(const struct pdk__policy_node *n);

/* The text of a non-null scalar (borrowed from the node), or NULL after a diagnostic. */
const char *pdk__policy_want_string(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
				    const char *path, const char *what);

/* Does the NULL-terminated list `v` (may be NULL) hold the string `s`? */
bool pdk__policy_strv_has(char *const *v, const char *s);

/* What a profile without `extends` starts from: nothing allowed but /tmp. New. */
struct pdk_policy *pdk__policy_new(void);

/*
 * Walk mapping `n` (at dotted `path`) with table `t` over w->obj: every key
 * is looked up in the table (an unknown or duplicate key is a diagnostic)
 * and its value handed to the field's parser.
 */
void pdk__policy_walk_map(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			  const char *path, const struct pdk__policy_table *t);

/* The simple kinds, for other tables (recipe.c): f->arg unused but for parse_map. */
void pdk__policy_parse_map(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			   const char *path, const struct pdk__policy_field *f); /* f->arg: table */
void pdk__policy_parse_name(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const struct pdk__policy_field *f);
void pdk__policy_parse_text(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const struct pdk__policy_field *f);
void pdk__policy_parse_env(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			   const char *path, const struct pdk__policy_field *f);

/*
 * Walk a document's root mapping over w->pol (the defaults or the base
 * profile), then apply the whole-policy rules (name, source, /tmp).
 */
void pdk__policy_walk(struct pdk__policy_walk *w, const struct pdk__policy_node *root);

/* ---- lists (policy-lists.c) ---- */

/* Checks one entry; returns it (normalized, new) or NULL after a diagnostic. */
typedef char *(*pdk__policy_check_cb)(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
				      const char *path, const char *s);

struct pdk__policy_list_spec {
	const char *what; /* "an absolute path" */
	pdk__policy_check_cb check;
};

extern const struct pdk__policy_list_spec pdk__policy_abs_paths;     /* filesystem lists */
extern const struct pdk__policy_list_spec pdk__policy_allow_entries; /* network.allow */
extern const struct pdk__policy_list_spec pdk__policy_etc_names;     /* filesystem.etc */

/* A list of strings (f->arg: its list spec); it replaces the inherited one, when all is good. */
void pdk__policy_parse_list(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const struct pdk__policy_field *f);
void pdk__policy_emit_list(struct pdk__policy_emitter *e, const struct pdk_policy *p,
			   const struct pdk__policy_field *f);

/* network.credentials: a list of {host, header}, stored as pairs of strings. */
void pdk__policy_parse_credentials(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
				   const char *path, const struct pdk__policy_field *f);
void pdk__policy_emit_credentials(struct pdk__policy_emitter *e, const struct pdk_policy *p,
				  const struct pdk__policy_field *f);

/* ---- limits (policy-limits.c) ---- */

enum pdk__policy_limit_kind {
	PDK__POLICY_LIM_SIZE,
	PDK__POLICY_LIM_COUNT,
	PDK__POLICY_LIM_CPU,
	PDK__POLICY_LIM_DURATION,
};

struct pdk__policy_limit_spec {
	enum pdk__policy_limit_kind kind;
	const char *zero_word; /* a word that means 0, or NULL */
	uint64_t max;
	uint64_t unit; /* values must be a multiple of this (1 = any) */
};

/* A limit (f->arg: its limit spec); PDK__POLICY_LIM_CPU members are uint32_t, others uint64_t. */
void pdk__policy_parse_limit(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			     const char *path, const struct pdk__policy_field *f);
void pdk__policy_emit_limit(struct pdk__policy_emitter *e, const struct pdk_policy *p,
			    const struct pdk__policy_field *f);

/* ---- dump (policy-dump.c) ---- */

struct pdk__policy_emitter {
	yaml_emitter_t y;
	bool failed;
	const char *problem; /* our own reason, when libyaml has none */
};

/*
 * A string, plain when that reads back as the same string (the null words
 * are quoted). Nothing happens once the emitter failed.
 */
void pdk__policy_emit_str(struct pdk__policy_emitter *e, const char *s);

/* The start and end of a mapping (`map`) or a list, in flow style ([a, b]) or block style. */
void pdk__policy_emit_start(struct pdk__policy_emitter *e, bool map, bool flow);
void pdk__policy_emit_end(struct pdk__policy_emitter *e, bool map);

/* A mapping with every field of `t` that has an emitter. */
void pdk__policy_emit_table(struct pdk__policy_emitter *e, const struct pdk_policy *p,
			    const struct pdk__policy_table *t);

#endif
