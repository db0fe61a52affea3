/*
 * policy-schema.c - stage 2 of reading a profile: the schema, and the walk
 * of a document's tree with it.
 *
 * The schema is a set of tables, one per mapping. An entry names a key,
 * the parser that checks its value and writes one member of struct
 * pdk_policy (or adds a diagnostic and leaves the member as it was, so
 * that every problem of a file is reported in one run), and the emitter
 * that writes it back out: pdk_policy_dump() runs the same tables
 * (policy-dump.c), so a field cannot be parsed and then forgotten by the
 * dump. A kind's parser and emitter sit side by side: the simple kinds
 * here, lists in policy-lists.c, limits in policy-limits.c. The walk
 * starts from the defaults (pdk__policy_new()) or from the profile that
 * `extends` names (policy-load.c), and every key it finds overrides it.
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOST   64 /* bytes in a hostname (HOST_NAME_MAX) */
#define MAX_FIELDS 16 /* entries in one schema table */

#define TABLE(a)                       \
	{                              \
		(a), PDK_ARRAY_SIZE(a) \
	}

/* ---- the walk ---- */

void pdk__policy_bad(struct pdk__policy_walk *w, const struct pdk__policy_node *n, const char *path,
		     const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = pdk_xvasprintf(fmt, ap);
	va_end(ap);
	pdk__policy_diag(w->sink, w->src->name, n->line, n->column, path, "%s", msg);
}

/* "a list", "null", "'value'": what a message says was found. */
char *pdk__policy_describe(const struct pdk__policy_node *n)
{
	_cleanup_free_ char *ex = NULL;

	if (n->type == PDK__POLICY_MAP)
		return pdk_xstrdup("a mapping");
	if (n->type == PDK__POLICY_SEQ)
		return pdk_xstrdup("a list");
	if (pdk__policy_node_is_null(n))
		return pdk_xstrdup("null");
	ex = pdk__policy_excerpt(n->str, n->len);
	return pdk_xasprintf("'%s'", ex);
}

void pdk__policy_expected(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			  const char *path, const char *what)
{
	_cleanup_free_ char *found = pdk__policy_describe(n);

	pdk__policy_bad(w, n, path, "expected %s, found %s", what, found);
}

/* The text of a non-null scalar, or NULL after a diagnostic. */
const char *pdk__policy_want_string(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
				    const char *path, const char *what)
{
	if (n->type != PDK__POLICY_SCALAR || pdk__policy_node_is_null(n)) {
		pdk__policy_expected(w, n, path, what);
		return NULL;
	}
	if (strlen(n->str) != n->len) {
		pdk__policy_bad(w, n, path, "expected %s, found a string with a NUL byte", what);
		return NULL;
	}
	return n->str;
}

static char *path_join(const char *path, const char *key)
{
	_cleanup_free_ char *k = pdk__policy_excerpt_str(key);

	return *path ? pdk_xasprintf("%s.%s", path, k) : pdk_xstrdup(k);
}

static const struct pdk__policy_field *table_find(const struct pdk__policy_table *t,
						  const struct pdk__policy_node *key)
{
	if (strlen(key->str) != key->len)
		return NULL;
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->fields[i].key, key->str) == 0)
			return &t->fields[i];
	}
	return NULL;
}

static char *table_keys(const struct pdk__policy_table *t)
{
	char *s = NULL;

	for (size_t i = 0; i < t->n; i++)
		s = pdk__policy_words_add(s, t->fields[i].key);
	return s;
}

static void unknown_key(struct pdk__policy_walk *w, const struct pdk__policy_node *key,
			const char *path, const struct pdk__policy_table *t)
{
	_cleanup_free_ char *sub = path_join(path, key->str);
	_cleanup_free_ char *name = pdk__policy_excerpt(key->str, key->len);
	_cleanup_free_ char *keys = table_keys(t);

	pdk__policy_bad(w, key, sub, "unknown key '%s' (expected one of: %s)", name, keys);
}

static void walk_pair(struct pdk__policy_walk *w, const struct pdk__policy_node *key,
		      const struct pdk__policy_node *val, const char *path,
		      const struct pdk__policy_table *t, int *first)
{
	_cleanup_free_ char *sub = NULL;
	const struct pdk__policy_field *f;
	size_t i;

	if (key->type != PDK__POLICY_SCALAR || pdk__policy_node_is_null(key)) {
		pdk__policy_expected(w, key, path, "a key name");
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
		pdk__policy_bad(w, key, sub, "duplicate key '%s' (first set on line %d)", f->key,
				first[i]);
		return;
	}
	first[i] = key->line;
	f->parse(w, val, sub, f);
}

void pdk__policy_walk_map(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			  const char *path, const struct pdk__policy_table *t)
{
	int first[MAX_FIELDS] = {0}; /* line where each key was first seen */

	if (n->type != PDK__POLICY_MAP) {
		pdk__policy_expected(w, n, path, "a mapping");
		return;
	}
	for (size_t i = 0; i + 1 < n->n; i += 2)
		walk_pair(w, n->kids[i], n->kids[i + 1], path, t, first);
}

/* ---- mappings, strings, booleans ---- */

void pdk__policy_parse_map(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			   const char *path, const struct pdk__policy_field *f)
{
	pdk__policy_walk_map(w, n, path, f->arg);
}

/* `extends` is read before the walk (see base_policy()). */
static void parse_skip(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		       const char *path, const struct pdk__policy_field *f)
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

void pdk__policy_parse_name(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const struct pdk__policy_field *f)
{
	const char *s = pdk__policy_want_string(w, n, path, "a profile name");

	if (s == NULL)
		return;
	if (*s == '\0' || strlen(s) > PDK__POLICY_MAX_NAME || has_control(s)) {
		pdk__policy_bad(w, n, path, "expected a name of 1 to %d printable characters",
				PDK__POLICY_MAX_NAME);
		return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/* Free text; null clears it. */
void pdk__policy_parse_text(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const struct pdk__policy_field *f)
{
	const char *s = NULL;

	if (!pdk__policy_node_is_null(n)) {
		s = pdk__policy_want_string(w, n, path, "a string");
		if (s == NULL)
			return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/* The workspace path may be relative (the CLI resolves it); null means the cwd. */
static void parse_ws_path(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			  const char *path, const struct pdk__policy_field *f)
{
	const char *s = NULL;

	if (!pdk__policy_node_is_null(n)) {
		s = pdk__policy_want_string(w, n, path, "a directory");
		if (s == NULL)
			return;
		if (*s == '\0' || *s == '~') {
			pdk__policy_expected(w, n, path, "a directory ('~' is not expanded)");
			return;
		}
		if (strlen(s) >= PATH_MAX) {
			pdk__policy_bad(w, n, path, "the path is longer than %d bytes",
					PATH_MAX - 1);
			return;
		}
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
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

static void parse_hostname(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			   const char *path, const struct pdk__policy_field *f)
{
	const char *s = pdk__policy_want_string(w, n, path, "a hostname");

	if (s == NULL)
		return;
	if (!valid_hostname(s)) {
		pdk__policy_expected(
			w, n, path,
			"a hostname of at most 64 characters (letters, digits, '-' and '.'; RFC 1123)");
		return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/* An image reference: a name or digest of the image store, printable, at most 255 bytes. */
static void parse_image(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			const char *path, const struct pdk__policy_field *f)
{
	const char *s = NULL;

	if (!pdk__policy_node_is_null(n)) {
		s = pdk__policy_want_string(w, n, path, "an image name or digest");
		if (s == NULL)
			return;
	}
	for (const char *c = s; c != NULL && *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			s = "";
	if (s != NULL && (s[0] == '\0' || strlen(s) > 255)) {
		pdk__policy_expected(w, n, path,
				     "an image name or digest (paddock image ls), at most 255 "
				     "printable characters");
		return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
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

static void parse_bool(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		       const char *path, const struct pdk__policy_field *f)
{
	const char *s = pdk__policy_want_string(w, n, path, "true or false");
	bool v;

	if (s == NULL)
		return;
	if (!parse_bool_text(s, &v)) {
		pdk__policy_expected(w, n, path, "true or false");
		return;
	}
	*PDK__POLICY_MEMBER(f, bool, w->obj) = v;
}

static void emit_map(struct pdk__policy_emitter *e, const struct pdk_policy *p,
		     const struct pdk__policy_field *f)
{
	pdk__policy_emit_str(e, f->key);
	pdk__policy_emit_table(e, p, f->arg);
}

/* A string member; absent (NULL) strings are left out. */
static void emit_string(struct pdk__policy_emitter *e, const struct pdk_policy *p,
			const struct pdk__policy_field *f)
{
	const char *s = *PDK__POLICY_CMEMBER(f, char *, p);

	if (s == NULL)
		return;
	pdk__policy_emit_str(e, f->key);
	pdk__policy_emit_str(e, s);
}

static void emit_bool(struct pdk__policy_emitter *e, const struct pdk_policy *p,
		      const struct pdk__policy_field *f)
{
	pdk__policy_emit_str(e, f->key);
	pdk__policy_emit_str(e, *PDK__POLICY_CMEMBER(f, bool, p) ? "true" : "false");
}

/* ---- enums ---- */

/* The words a value may be. */
static char *enum_words(const struct pdk__policy_enum *e)
{
	char *s = NULL;

	for (size_t i = 0; i < e->n; i++)
		s = pdk__policy_words_add(s, e->words[i].name);
	return s;
}

static void parse_enum(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		       const char *path, const struct pdk__policy_field *f)
{
	const struct pdk__policy_enum *e = f->arg;
	_cleanup_free_ char *words = enum_words(e);
	_cleanup_free_ char *what = pdk_xasprintf("one of %s", words);
	const char *s = pdk__policy_want_string(w, n, path, what);
	int v;

	if (s == NULL)
		return;
	if (pdk__policy_enum_value(e, s, &v))
		memcpy(PDK__POLICY_MEMBER(f, int, w->obj), &v, sizeof(int));
	else
		pdk__policy_expected(w, n, path, what);
}

static void emit_enum(struct pdk__policy_emitter *e, const struct pdk_policy *p,
		      const struct pdk__policy_field *f)
{
	const char *name;
	int v;

	memcpy(&v, PDK__POLICY_CMEMBER(f, int, p), sizeof(v));
	name = pdk__policy_enum_name(f->arg, v);
	if (name == NULL) {
		e->failed = true;
		e->problem = "a mode has no name";
		return;
	}
	pdk__policy_emit_str(e, f->key);
	pdk__policy_emit_str(e, name);
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

static bool be_item(struct pdk__policy_walk *w, const struct pdk__policy_node *n, const char *path,
		    unsigned *flags)
{
	static const char what[] = "one of memory, pids, cpu, landlock, exec_trace";
	const char *s = pdk__policy_want_string(w, n, path, what);
	unsigned flag = s != NULL ? be_flag(s) : 0;

	if (s == NULL)
		return false;
	if (flag == 0) {
		pdk__policy_expected(w, n, path, what);
		return false;
	}
	if (*flags & flag) {
		pdk__policy_bad(w, n, path, "'%s' is listed twice", s);
		return false;
	}
	*flags |= flag;
	return true;
}

static void parse_best_effort(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			      const char *path, const struct pdk__policy_field *f)
{
	unsigned flags = 0;
	bool ok = true;

	if (n->type != PDK__POLICY_SEQ) {
		pdk__policy_expected(w, n, path, "a list");
		return;
	}
	for (size_t i = 0; i < n->n && i < PDK__POLICY_MAX_ENTRIES; i++) {
		_cleanup_free_ char *sub = pdk_xasprintf("%s[%zu]", path, i);

		ok = be_item(w, n->kids[i], sub, &flags) && ok;
	}
	if (ok)
		*PDK__POLICY_MEMBER(f, unsigned, w->obj) = flags;
}

static void emit_best_effort(struct pdk__policy_emitter *e, const struct pdk_policy *p,
			     const struct pdk__policy_field *f)
{
	unsigned flags = *PDK__POLICY_CMEMBER(f, unsigned, p);

	pdk__policy_emit_str(e, f->key);
	pdk__policy_emit_start(e, false, true);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(be_names); i++) {
		if (flags & be_names[i].flag)
			pdk__policy_emit_str(e, be_names[i].name);
	}
	pdk__policy_emit_end(e, false);
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
static bool env_dup(const struct pdk__policy_node *map, size_t upto, const char *key)
{
	for (size_t j = 0; j < upto; j += 2) {
		const struct pdk__policy_node *k = map->kids[j];

		if (k->type == PDK__POLICY_SCALAR && strcmp(k->str, key) == 0)
			return true;
	}
	return false;
}

static void env_pair(struct pdk__policy_walk *w, const struct pdk__policy_node *map, size_t i,
		     const char *path, char ***env)
{
	const struct pdk__policy_node *k = map->kids[i];
	const struct pdk__policy_node *v = map->kids[i + 1];
	const char *key = pdk__policy_want_string(w, k, path, "a variable name");
	_cleanup_free_ char *sub = key != NULL ? path_join(path, key) : NULL;
	const char *val;

	if (key == NULL)
		return;
	if (!valid_env_name(key)) {
		pdk__policy_expected(w, k, sub, "a variable name ([A-Za-z_][A-Za-z0-9_]*)");
		return;
	}
	if (env_dup(map, i, key)) {
		pdk__policy_bad(w, k, sub, "duplicate key '%s'", key);
		return;
	}
	val = pdk__policy_want_string(w, v, sub, "a string");
	if (val != NULL)
		pdk_env_set_take(env, pdk_xasprintf("%s=%s", key, val));
}

/* Variables merge with the inherited ones, key by key. */
void pdk__policy_parse_env(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			   const char *path, const struct pdk__policy_field *f)
{
	if (n->type != PDK__POLICY_MAP) {
		pdk__policy_expected(w, n, path, "a mapping of NAME: value");
		return;
	}
	if (n->n / 2 > PDK__POLICY_MAX_ENTRIES) {
		pdk__policy_bad(w, n, path, "more than %d variables", PDK__POLICY_MAX_ENTRIES);
		return;
	}
	for (size_t i = 0; i + 1 < n->n; i += 2)
		env_pair(w, n, i, path, PDK__POLICY_MEMBER(f, char **, w->obj));
}

static void emit_env(struct pdk__policy_emitter *e, const struct pdk_policy *p,
		     const struct pdk__policy_field *f)
{
	char *const *v = *PDK__POLICY_CMEMBER(f, char **, p);

	pdk__policy_emit_str(e, f->key);
	pdk__policy_emit_start(e, true, v == NULL || v[0] == NULL);
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		const char *eq = strchr(v[i], '=');
		_cleanup_free_ char *key =
			eq ? pdk_xasprintf("%.*s", (int)(eq - v[i]), v[i]) : NULL;

		if (eq == NULL)
			continue; /* not KEY=value: nothing the parser could read back */
		pdk__policy_emit_str(e, key);
		pdk__policy_emit_str(e, eq + 1);
	}
	pdk__policy_emit_end(e, true);
}

/* ---- the schema ---- */

#define OFF(member) offsetof(struct pdk_policy, member)

static const struct pdk__policy_field workspace_fields[] = {
	{"path", parse_ws_path, emit_string, OFF(workspace.path), NULL},
	{"mode", parse_enum, emit_enum, OFF(workspace.mode), &pdk__policy_ws_modes},
	{"sync", parse_enum, emit_enum, OFF(workspace.sync), &pdk__policy_ws_syncs},
};
static const struct pdk__policy_table workspace_table = TABLE(workspace_fields);

static const struct pdk__policy_field fs_fields[] = {
	{"workspace", pdk__policy_parse_map, emit_map, 0, &workspace_table},
	{"read_only", pdk__policy_parse_list, pdk__policy_emit_list, OFF(read_only),
	 &pdk__policy_abs_paths},
	{"read_write", pdk__policy_parse_list, pdk__policy_emit_list, OFF(read_write),
	 &pdk__policy_abs_paths},
	{"tmpfs", pdk__policy_parse_list, pdk__policy_emit_list, OFF(tmpfs),
	 &pdk__policy_abs_paths},
	{"hidden", pdk__policy_parse_list, pdk__policy_emit_list, OFF(hidden),
	 &pdk__policy_abs_paths},
	{"etc", pdk__policy_parse_list, pdk__policy_emit_list, OFF(etc), &pdk__policy_etc_names},
};
static const struct pdk__policy_table fs_table = TABLE(fs_fields);

static const struct pdk__policy_field net_fields[] = {
	{"mode", parse_enum, emit_enum, OFF(network.mode), &pdk__policy_net_modes},
	{"allow", pdk__policy_parse_list, pdk__policy_emit_list, OFF(network.allow),
	 &pdk__policy_allow_entries},
	{"credentials", pdk__policy_parse_credentials, pdk__policy_emit_credentials,
	 OFF(network.credentials), NULL},
};
static const struct pdk__policy_table net_table = TABLE(net_fields);

static const struct pdk__policy_limit_spec lim_memory = {PDK__POLICY_LIM_SIZE, "unlimited",
							 UINT64_MAX, 1};
static const struct pdk__policy_limit_spec lim_pids = {PDK__POLICY_LIM_COUNT, "unlimited", 4194304,
						       1};
static const struct pdk__policy_limit_spec lim_cpu = {PDK__POLICY_LIM_CPU, "unlimited", 1024000, 1};
static const struct pdk__policy_limit_spec lim_wall = {PDK__POLICY_LIM_DURATION, "none", UINT64_MAX,
						       1};
/* RLIMIT_CPU counts whole seconds; a fraction would silently round. */
static const struct pdk__policy_limit_spec lim_cpu_time = {PDK__POLICY_LIM_DURATION, "none",
							   UINT64_MAX, 1000};
static const struct pdk__policy_limit_spec lim_nofile = {PDK__POLICY_LIM_COUNT, NULL, 1U << 30, 1};
static const struct pdk__policy_limit_spec lim_fsize = {PDK__POLICY_LIM_SIZE, "unlimited",
							UINT64_MAX, 1};
static const struct pdk__policy_limit_spec lim_tmp_size = {PDK__POLICY_LIM_SIZE, NULL, UINT64_MAX,
							   1};
static const struct pdk__policy_limit_spec lim_disk = {PDK__POLICY_LIM_SIZE, "unlimited",
						       UINT64_MAX, 1};
static const struct pdk__policy_limit_spec lim_egress_bytes = {PDK__POLICY_LIM_SIZE, "unlimited",
							       UINT64_MAX, 1};
static const struct pdk__policy_limit_spec lim_egress_count = {PDK__POLICY_LIM_COUNT, "unlimited",
							       UINT32_MAX, 1};

static const struct pdk__policy_field limit_fields[] = {
	{"memory", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.memory),
	 &lim_memory},
	{"pids", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.pids), &lim_pids},
	{"cpu", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.cpu_milli), &lim_cpu},
	{"wall", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.wall_ms), &lim_wall},
	{"cpu_time", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.cpu_time_ms),
	 &lim_cpu_time},
	{"nofile", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.nofile),
	 &lim_nofile},
	{"fsize", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.fsize), &lim_fsize},
	{"tmp_size", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.tmp_size),
	 &lim_tmp_size},
	{"disk", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.disk), &lim_disk},
	{"egress_bytes", pdk__policy_parse_limit, pdk__policy_emit_limit, OFF(limits.egress_bytes),
	 &lim_egress_bytes},
	{"egress_requests", pdk__policy_parse_limit, pdk__policy_emit_limit,
	 OFF(limits.egress_requests), &lim_egress_count},
	{"egress_connections", pdk__policy_parse_limit, pdk__policy_emit_limit,
	 OFF(limits.egress_connections), &lim_egress_count},
};
static const struct pdk__policy_table limit_table = TABLE(limit_fields);

static const struct pdk__policy_field process_fields[] = {
	{"allow_ptrace", parse_bool, emit_bool, OFF(allow_ptrace), NULL},
};
static const struct pdk__policy_table process_table = TABLE(process_fields);

static const struct pdk__policy_field audit_fields[] = {
	{"exec_trace", parse_bool, emit_bool, OFF(audit.exec_trace), NULL},
};
static const struct pdk__policy_table audit_table = TABLE(audit_fields);

static const struct pdk__policy_field top_fields[] = {
	{"extends", parse_skip, NULL, 0, NULL},
	{"name", pdk__policy_parse_name, emit_string, OFF(name), NULL},
	{"description", pdk__policy_parse_text, emit_string, OFF(description), NULL},
	{"filesystem", pdk__policy_parse_map, emit_map, 0, &fs_table},
	{"network", pdk__policy_parse_map, emit_map, 0, &net_table},
	{"limits", pdk__policy_parse_map, emit_map, 0, &limit_table},
	{"best_effort", parse_best_effort, emit_best_effort, OFF(best_effort), NULL},
	{"process", pdk__policy_parse_map, emit_map, 0, &process_table},
	{"audit", pdk__policy_parse_map, emit_map, 0, &audit_table},
	{"hostname", parse_hostname, emit_string, OFF(hostname), NULL},
	{"env", pdk__policy_parse_env, emit_env, OFF(env), NULL},
	{"image", parse_image, emit_string, OFF(image), NULL},
};
const struct pdk__policy_table pdk__policy_top = TABLE(top_fields);

_Static_assert(PDK_ARRAY_SIZE(top_fields) <= MAX_FIELDS, "raise MAX_FIELDS");
_Static_assert(PDK_ARRAY_SIZE(limit_fields) <= MAX_FIELDS, "raise MAX_FIELDS");

struct pdk_policy *pdk__policy_new(void)
{
	struct pdk_policy *p = pdk_xcalloc(1, sizeof(*p));

	p->workspace.mode = PDK_WS_OVERLAY;
	p->network.mode = PDK_NET_NONE;
	p->hostname = pdk_xstrdup("paddock");
	p->audit.exec_trace = true;
	return p;
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
	if (len == 0 || len > PDK__POLICY_MAX_NAME)
		return pdk_xstrdup("profile");
	name = pdk_xasprintf("%.*s", (int)len, base);
	for (char *c = name; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	}
	return name;
}

/* Whole-policy rules, after every field is read. */
static void finish(struct pdk__policy_walk *w)
{
	struct pdk_policy *p = w->pol;

	if (p->name == NULL)
		p->name = name_from_source(w->src->name);
	set_str(&p->source, w->src->name);
	/* The sandbox's HOME is /tmp: it is always a fresh tmpfs. */
	if (!pdk__policy_strv_has(p->tmpfs, "/tmp"))
		pdk_strv_push(&p->tmpfs, "/tmp");
}

void pdk__policy_walk(struct pdk__policy_walk *w, const struct pdk__policy_node *root)
{
	pdk__policy_walk_map(w, root, "", &pdk__policy_top);
	finish(w);
}

bool pdk__policy_strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		if (strcmp(v[i], s) == 0)
			return true;
	}
	return false;
}
