/*
 * config.c - the gateway's config file (docs/gateway.md, CONFIG): read
 * with libyaml's event parser into a small tree of nodes that keep their
 * line, then walked with one table of keys per mapping. The first problem
 * ends the load with "FILE:LINE: FIELD: message" and the field in
 * err->field, as profiles report theirs.
 *
 * What the servers' sandboxes are given is checked twice: field by field
 * here (absolute paths that exist, network entries in the egress syntax,
 * no secret-looking variables), and as a whole by reading the profile each
 * stdio server maps to (profile.c) with the profile reader, so that the
 * gateway never starts a sandbox its profile reader would refuse.
 */
#include "common.h"
#include "base.h"
#include "policy.h"
#include "telemetry.h"
#include "gateway.h"

#include <ctype.h>
#include <fcntl.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_DEPTH   16   /* nested mappings and lists */
#define MAX_ENTRIES 1024 /* servers, rules, principals, list entries */
#define MAX_NAME    64   /* bytes of a rule's or a principal's name */
#define MAX_RATE    100000

/*
 * ---- the tree ----
 *
 * The same event-to-tree reading as profiles' (policy/policy-tree.c), kept
 * apart on purpose: that reader reports into the profile report's
 * diagnostic sink ("FILE:LINE:COL", every problem of a profile listed) and
 * allows 32 levels without an entry limit; this one ends at the first
 * problem with one pdk_error ("FILE:LINE: FIELD: message", err->field
 * set, as `paddock gateway` shows it), 16 levels and MAX_ENTRIES entries
 * per collection, and its own messages. Sharing it would put the tree's
 * node type into policy.h and change either reader's limits or messages.
 */

enum node_type { N_SCALAR, N_SEQ, N_MAP };

struct node {
	enum node_type type;
	int line;
	bool plain;
	char *str; /* a scalar's value */
	size_t len;
	struct node **kids; /* items, or keys and values interleaved */
	size_t n, cap;
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

static void cleanup_node(struct node **n)
{
	node_free(*n);
}
#define _cleanup_node_ __attribute__((cleanup(cleanup_node)))

struct reader {
	yaml_parser_t parser;
	const char *file;
	struct pdk_error **err;
};

static int line_of(yaml_mark_t m)
{
	return m.line >= 1000000000 ? 1000000000 : (int)m.line + 1;
}

static int syntax_error(struct reader *r)
{
	const yaml_parser_t *p = &r->parser;

	return pdk_error_setx(r->err, EINVAL, "%s:%d: %s%s%s", r->file, line_of(p->problem_mark),
			      p->context ? p->context : "", p->context ? ": " : "",
			      p->problem ? p->problem : "cannot parse the YAML");
}

static int pull(struct reader *r, yaml_event_t *ev)
{
	if (yaml_parser_parse(&r->parser, ev))
		return 0;
	return syntax_error(r);
}

/*
 * SECURITY: anchors, aliases and tags are refused, as in profiles: an alias
 * expands to the whole aliased node ("billion laughs"), and the schema
 * decides every type.
 */
static int refused_props(struct reader *r, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	if (ev->type == YAML_ALIAS_EVENT)
		anchor = (const yaml_char_t *)"*";
	else if (ev->type == YAML_SCALAR_EVENT)
		anchor = ev->data.scalar.anchor, tag = ev->data.scalar.tag;
	else if (ev->type == YAML_SEQUENCE_START_EVENT)
		anchor = ev->data.sequence_start.anchor, tag = ev->data.sequence_start.tag;
	else if (ev->type == YAML_MAPPING_START_EVENT)
		anchor = ev->data.mapping_start.anchor, tag = ev->data.mapping_start.tag;
	if (anchor == NULL && tag == NULL)
		return 0;
	return pdk_error_setx(r->err, EINVAL, "%s:%d: YAML %s are not allowed", r->file,
			      line_of(ev->start_mark), anchor ? "anchors and aliases" : "tags");
}

static struct node *node_new(enum node_type t, const yaml_event_t *ev)
{
	struct node *n = pdk_xcalloc(1, sizeof(*n));

	n->type = t;
	n->line = line_of(ev->start_mark);
	if (t == N_SCALAR) {
		n->len = ev->data.scalar.length;
		n->str = pdk_xmalloc(n->len + 1);
		memcpy(n->str, ev->data.scalar.value, n->len);
		n->str[n->len] = '\0';
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	}
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

static int build(struct reader *r, yaml_event_t *ev, int depth, struct node **out);

static int build_kids(struct reader *r, struct node *n, yaml_event_type_t end, int depth)
{
	for (;;) {
		yaml_event_t kid;
		struct node *k = NULL;
		int rc = pull(r, &kid);

		if (rc < 0)
			return rc;
		if (kid.type == end) {
			yaml_event_delete(&kid);
			return 0;
		}
		if (n->n >= 2 * MAX_ENTRIES) {
			yaml_event_delete(&kid);
			return pdk_error_setx(r->err, EINVAL, "%s:%d: more than %d entries",
					      r->file, n->line, MAX_ENTRIES);
		}
		rc = build(r, &kid, depth + 1, &k);
		if (rc < 0)
			return rc;
		node_push(n, k);
	}
}

/* Build the node that starts with `ev` (taken) into *out. */
static int build(struct reader *r, yaml_event_t *ev, int depth, struct node **out)
{
	_cleanup_node_ struct node *n = NULL;
	int rc = refused_props(r, ev);

	if (rc == 0 && depth > MAX_DEPTH)
		rc = pdk_error_setx(r->err, EINVAL, "%s:%d: nesting is deeper than %d levels",
				    r->file, line_of(ev->start_mark), MAX_DEPTH);
	if (rc == 0 && ev->type == YAML_SCALAR_EVENT) {
		n = node_new(N_SCALAR, ev);
	} else if (rc == 0 && ev->type == YAML_SEQUENCE_START_EVENT) {
		n = node_new(N_SEQ, ev);
		rc = build_kids(r, n, YAML_SEQUENCE_END_EVENT, depth);
	} else if (rc == 0 && ev->type == YAML_MAPPING_START_EVENT) {
		n = node_new(N_MAP, ev);
		rc = build_kids(r, n, YAML_MAPPING_END_EVENT, depth);
	} else if (rc == 0) {
		rc = pdk_error_setx(r->err, EINVAL, "%s:%d: unexpected YAML structure", r->file,
				    line_of(ev->start_mark));
	}
	yaml_event_delete(ev);
	if (rc < 0)
		return rc;
	*out = steal_ptr(&n);
	return 0;
}

/* Skip what comes before the root node: the stream start, then the document start. */
static int read_start(struct reader *r)
{
	yaml_event_t ev;
	int rc = pull(r, &ev);

	if (rc < 0)
		return rc;
	yaml_event_delete(&ev);
	rc = pull(r, &ev);
	if (rc < 0)
		return rc;
	rc = ev.type == YAML_STREAM_END_EVENT
		     ? pdk_error_setx(
			       r->err, EINVAL,
			       "%s:1: the config is empty; expected a mapping with 'servers'",
			       r->file)
		     : 0;
	yaml_event_delete(&ev);
	return rc;
}

static int read_end(struct reader *r)
{
	yaml_event_t ev;
	int rc = pull(r, &ev); /* document end */

	if (rc < 0)
		return rc;
	yaml_event_delete(&ev);
	rc = pull(r, &ev);
	if (rc < 0)
		return rc;
	if (ev.type != YAML_STREAM_END_EVENT)
		rc = pdk_error_setx(r->err, EINVAL, "%s:%d: only one YAML document is allowed",
				    r->file, line_of(ev.start_mark));
	yaml_event_delete(&ev);
	return rc;
}

static int tree_read(struct reader *r, struct node **out)
{
	yaml_event_t ev;
	int rc = read_start(r);

	if (rc == 0)
		rc = pull(r, &ev);
	if (rc == 0)
		rc = build(r, &ev, 1, out);
	if (rc == 0)
		rc = read_end(r);
	return rc;
}

static int tree_load(const char *file, const char *data, size_t len, struct node **out,
		     struct pdk_error **err)
{
	struct reader r = {.file = file, .err = err};
	struct node *root = NULL;
	int rc;

	if (!yaml_parser_initialize(&r.parser))
		pdk_oom();
	yaml_parser_set_input_string(&r.parser, (const unsigned char *)data, len);
	rc = tree_read(&r, &root);
	yaml_parser_delete(&r.parser);
	if (rc < 0) {
		node_free(root);
		return rc;
	}
	*out = root;
	return 0;
}

/* ---- the walk ---- */

struct walk {
	const char *file;
	struct pdk_gw_config *c;
	struct pdk_error **err;
};

/* "FILE:LINE: FIELD: message", with err->field set to FIELD. Returns -EINVAL. */
static int bad(struct walk *w, const struct node *n, const char *field, const char *fmt, ...)
	PDK_PRINTF(4, 5);
static int bad(struct walk *w, const struct node *n, const char *field, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = pdk_xvasprintf(fmt, ap);
	va_end(ap);
	if (field[0] == '\0')
		pdk_error_setx(w->err, EINVAL, "%s:%d: %s", w->file, n ? n->line : 1, msg);
	else
		pdk_error_set_field(w->err, EINVAL, field, "%s:%d: %s: %s", w->file,
				    n ? n->line : 1, field, msg);
	return -EINVAL;
}

static bool is_null(const struct node *n)
{
	return n->type == N_SCALAR && n->plain &&
	       (n->len == 0 || strcmp(n->str, "~") == 0 || strcmp(n->str, "null") == 0 ||
		strcmp(n->str, "Null") == 0 || strcmp(n->str, "NULL") == 0);
}

static const char *kind_of(const struct node *n)
{
	if (is_null(n))
		return "null";
	return n->type == N_MAP ? "a mapping" : n->type == N_SEQ ? "a list" : "a string";
}

static int want_map(struct walk *w, const struct node *n, const char *field)
{
	if (n->type == N_MAP)
		return 0;
	return bad(w, n, field, "expected a mapping, found %s", kind_of(n));
}

static int want_seq(struct walk *w, const struct node *n, const char *field)
{
	if (n->type == N_SEQ)
		return 0;
	return bad(w, n, field, "expected a list, found %s", kind_of(n));
}

/* A non-null scalar without NUL bytes, in *out (borrowed from the tree). */
static int want_str(struct walk *w, const struct node *n, const char *field, const char **out)
{
	if (n->type != N_SCALAR || is_null(n))
		return bad(w, n, field, "expected a string, found %s", kind_of(n));
	if (strlen(n->str) != n->len)
		return bad(w, n, field, "a NUL byte is not allowed");
	*out = n->str;
	return 0;
}

static int want_bool(struct walk *w, const struct node *n, const char *field, bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE"};
	static const char *const no[] = {"false", "False", "FALSE"};

	for (size_t i = 0; n->type == N_SCALAR && n->plain && i < PDK_ARRAY_SIZE(yes); i++) {
		if (strcmp(n->str, yes[i]) == 0 || strcmp(n->str, no[i]) == 0) {
			*out = strcmp(n->str, yes[i]) == 0;
			return 0;
		}
	}
	return bad(w, n, field, "expected true or false");
}

static int want_duration(struct walk *w, const struct node *n, const char *field, uint64_t *ms)
{
	const char *s = NULL;
	int rc = want_str(w, n, field, &s);

	if (rc < 0)
		return rc;
	if (pdk_parse_duration(s, ms) < 0 || *ms == 0)
		return bad(w, n, field, "expected a duration such as 500ms, 30s or 5m, found '%s'",
			   s);
	return 0;
}

static int want_count(struct walk *w, const struct node *n, const char *field, uint64_t max,
		      uint64_t *out)
{
	const char *s = NULL;
	int rc = want_str(w, n, field, &s);

	if (rc < 0)
		return rc;
	if (pdk_parse_u64(s, max, out) < 0)
		return bad(w, n, field, "expected a whole number of at most %llu, found '%s'",
			   (unsigned long long)max, s);
	return 0;
}

static bool ends_with(const char *s, const char *sfx)
{
	size_t n = strlen(s), m = strlen(sfx);

	return n >= m && strcmp(s + n - m, sfx) == 0;
}

/* An absolute path with no '.' or '..' component. */
static int want_abs_path(struct walk *w, const struct node *n, const char *field, const char **out)
{
	const char *s = NULL;
	int rc = want_str(w, n, field, &s);

	if (rc < 0)
		return rc;
	if (s[0] != '/')
		return bad(w, n, field, "'%s' is not an absolute path: write it from '/'", s);
	if (strstr(s, "/./") || strstr(s, "/../") || ends_with(s, "/.") || ends_with(s, "/.."))
		return bad(w, n, field, "'%s' has a '.' or '..' component", s);
	*out = s;
	return 0;
}

/* One key of a mapping: its parser gets the value node and the dotted field. */
struct key {
	const char *name;
	int (*parse)(struct walk *w, void *obj, const struct node *v, const char *field);
};

static const struct key *key_find(const struct key *keys, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	}
	return NULL;
}

static char *key_list(const struct key *keys, size_t n)
{
	char *list = pdk_xstrdup(keys[0].name);

	for (size_t i = 1; i < n; i++) {
		char *more = pdk_xasprintf("%s, %s", list, keys[i].name);

		free(list);
		list = more;
	}
	return list;
}

static char *field_join(const char *field, const char *key)
{
	return field[0] ? pdk_xasprintf("%s.%s", field, key) : pdk_xstrdup(key);
}

/* A mapping's keys: plain strings, each once. */
static int check_key(struct walk *w, const struct node *map, size_t i, const char *field)
{
	const struct node *k = map->kids[i];

	if (k->type != N_SCALAR || strlen(k->str) != k->len || k->len == 0)
		return bad(w, k, field, "keys must be plain strings");
	for (size_t j = 0; j < i; j += 2) {
		if (strcmp(map->kids[j]->str, k->str) == 0)
			return bad(w, k, field, "key '%s' appears twice", k->str);
	}
	return 0;
}

/* Walk mapping `map` with the table `keys`: an unknown key is refused, naming it. */
static int walk_map(struct walk *w, void *obj, const struct node *map, const char *field,
		    const struct key *keys, size_t n_keys)
{
	int rc = want_map(w, map, field);

	for (size_t i = 0; rc == 0 && i + 1 < map->n; i += 2) {
		const struct key *k = NULL;
		_cleanup_free_ char *f = NULL;

		rc = check_key(w, map, i, field);
		if (rc < 0)
			break;
		k = key_find(keys, n_keys, map->kids[i]->str);
		f = field_join(field, map->kids[i]->str);
		if (k == NULL) {
			_cleanup_free_ char *list = key_list(keys, n_keys);

			return bad(w, map->kids[i], f, "unknown key '%s' (expected one of: %s)",
				   map->kids[i]->str, list);
		}
		rc = k->parse(w, obj, map->kids[i + 1], f);
	}
	return rc;
}

/* The value of `key` in a mapping, or NULL. */
static const struct node *map_get(const struct node *map, const char *key)
{
	for (size_t i = 0; map->type == N_MAP && i + 1 < map->n; i += 2) {
		if (strcmp(map->kids[i]->str, key) == 0)
			return map->kids[i + 1];
	}
	return NULL;
}

/*
 * A list of strings into *out (a new vector): a set of entries each checked
 * by `one`, or, with `one` NULL, an argv (any strings, repeats allowed).
 */
static int want_strv(struct walk *w, const struct node *n, const char *field,
		     int (*one)(struct walk *w, const struct node *n, const char *field,
				const char **s),
		     char ***out)
{
	_cleanup_strv_ char **v = pdk_xcalloc(1, sizeof(*v));
	int rc = want_seq(w, n, field);

	for (size_t i = 0; rc == 0 && i < n->n; i++) {
		_cleanup_free_ char *f = pdk_xasprintf("%s[%zu]", field, i);
		const char *s = NULL;

		rc = one ? one(w, n->kids[i], f, &s) : want_str(w, n->kids[i], f, &s);
		for (size_t j = 0; rc == 0 && one != NULL && v[j]; j++) {
			if (strcmp(v[j], s) == 0)
				rc = bad(w, n->kids[i], f, "'%s' is listed twice", s);
		}
		if (rc == 0)
			pdk_strv_push(&v, s);
	}
	if (rc < 0)
		return rc;
	pdk_strv_free(*out);
	*out = steal_ptr(&v);
	return 0;
}

/* ---- what the profile reader checks ---- */

/* The first diagnostic of a failed profile read, as "FIELD: message" (new string). */
static char *first_diag(const struct pdk_policy_report *rep, const struct pdk_error *e)
{
	if (rep->n > 0)
		return pdk_xasprintf("%s%s%s", rep->diags[0].field,
				     rep->diags[0].field[0] ? ": " : "", rep->diags[0].msg);
	return pdk_xstrdup(e && e->msg ? e->msg : "refused");
}

/* Read profile text `yaml`; NULL when it is accepted, else what is wrong (new string). */
static char *profile_refusal(const char *name, const char *yaml)
{
	struct pdk_policy_report rep = {0};
	_cleanup_error_ struct pdk_error *e = NULL;
	struct pdk_policy *p = pdk_policy_parse(name, yaml, strlen(yaml), &rep, &e);
	char *why = p == NULL ? first_diag(&rep, e) : NULL;

	pdk_policy_free(p);
	pdk_policy_report_release(&rep);
	return why;
}

static int check_limit(struct walk *w, const struct node *k, const char *field, const char *key,
		       const char *val)
{
	_cleanup_json_ json_t *s = json_string(val);
	_cleanup_free_ char *quoted = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
	_cleanup_free_ char *yaml = NULL, *why = NULL;

	if (strspn(key, "abcdefghijklmnopqrstuvwxyz_") != strlen(key) || quoted == NULL)
		return bad(w, k, field, "unknown limit '%s' (see the limits of docs/policy.md)",
			   key);
	yaml = pdk_xasprintf("extends: strict\nlimits:\n  %s: %s\n", key, quoted);
	why = profile_refusal("limits", yaml);
	if (why != NULL)
		return bad(w, k, field, "%s", why);
	return 0;
}

static int check_profile(struct walk *w, const struct pdk_gw_server *s, const struct node *k,
			 const char *field)
{
	_cleanup_free_ char *yaml = pdk_gw_profile_yaml(s);
	_cleanup_free_ char *why = profile_refusal("profile", yaml);

	if (why != NULL)
		return bad(w, k, field, "the sandbox profile its manifest maps to is refused: %s",
			   why);
	return 0;
}
/* ---- servers ---- */

/*
 * A manifest path must exist when the config is read: the sandbox would
 * skip a missing bind, and the user would learn of it only from a server
 * that fails later without saying why.
 */
static int existing_path(struct walk *w, const struct node *n, const char *field, const char **out)
{
	struct stat st;
	int rc = want_abs_path(w, n, field, out);

	if (rc < 0)
		return rc;
	if (stat(*out, &st) < 0)
		return bad(w, n, field, "'%s' cannot be granted: %s", *out, strerror(errno));
	return 0;
}

static int net_entry(struct walk *w, const struct node *n, const char *field, const char **out)
{
	struct pdk_net_rule r = {0};
	_cleanup_free_ char *why = NULL;
	int rc = want_str(w, n, field, out);

	if (rc < 0)
		return rc;
	if (pdk_net_rule_parse(*out, &r, &why) < 0)
		return bad(w, n, field, "'%s': %s", *out, why);
	pdk_net_rule_release(&r);
	return 0;
}

static int fs_read(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_strv(w, v, field, existing_path, &((struct pdk_gw_server *)obj)->perm.fs_read);
}

static int fs_write(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_strv(w, v, field, existing_path, &((struct pdk_gw_server *)obj)->perm.fs_write);
}

static int perm_filesystem(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {{"read", fs_read}, {"write", fs_write}};

	return walk_map(w, obj, v, field, keys, PDK_ARRAY_SIZE(keys));
}

/* Hosts are kept in the egress syntax's canonical form, as profiles keep them. */
static int net_client(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_server *s = obj;
	int rc = want_strv(w, v, field, net_entry, &s->perm.net_client);

	for (size_t i = 0; rc == 0 && s->perm.net_client[i]; i++) {
		struct pdk_net_rule r = {0};
		_cleanup_free_ char *why = NULL;

		if (pdk_net_rule_parse(s->perm.net_client[i], &r, &why) == 0) {
			free(s->perm.net_client[i]);
			s->perm.net_client[i] = pdk_xstrdup(r.text);
			pdk_net_rule_release(&r);
		}
	}
	return rc;
}

static int perm_network(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {{"client", net_client}};

	return walk_map(w, obj, v, field, keys, PDK_ARRAY_SIZE(keys));
}

static bool env_name_ok(const char *s)
{
	if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
	       strlen(s);
}

/*
 * SECURITY: a variable whose name looks like a secret is refused: an
 * upstream's environment is readable by all of its code and whatever it
 * runs; a secret reaches it only through the egress proxy's injection
 * (credentials), which the upstream never sees.
 */
static int perm_environment(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_server *s = obj;
	int rc = want_map(w, v, field);

	for (size_t i = 0; rc == 0 && i + 1 < v->n; i += 2) {
		const char *name = v->kids[i]->str, *value = NULL;
		_cleanup_free_ char *f = NULL;

		rc = check_key(w, v, i, field);
		if (rc < 0)
			return rc;
		f = field_join(field, name);
		if (!env_name_ok(name))
			return bad(w, v->kids[i], f,
				   "'%s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", name);
		if (pdk_redact_name_is_secret(name, strlen(name)))
			return bad(
				w, v->kids[i], f,
				"'%s' looks like a secret: use credentials instead (the egress proxy "
				"adds the secret to the requests it lets out, and the upstream never "
				"holds it)",
				name);
		rc = want_str(w, v->kids[i + 1], f, &value);
		if (rc == 0)
			pdk_strv_push_take(&s->perm.env, pdk_xasprintf("%s=%s", name, value));
	}
	return rc;
}

static int sys_process(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_bool(w, v, field, &((struct pdk_gw_server *)obj)->perm.process);
}

static int perm_system(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {{"process", sys_process}};

	return walk_map(w, obj, v, field, keys, PDK_ARRAY_SIZE(keys));
}

static int srv_permissions(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {
		{"filesystem", perm_filesystem},
		{"network", perm_network},
		{"environment", perm_environment},
		{"system", perm_system},
	};

	return walk_map(w, obj, v, field, keys, PDK_ARRAY_SIZE(keys));
}

static int srv_command(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_server *s = obj;
	int rc = want_strv(w, v, field, NULL, &s->command);

	if (rc == 0 && (s->command[0] == NULL || s->command[0][0] == '\0'))
		rc = bad(w, v, field,
			 "expected the program and its arguments, such as [node, "
			 "/path/to/server.js]");
	return rc;
}

/* SECURITY: the url goes into a request line: nothing that could end or split it. */
static bool url_printable(const char *url)
{
	for (const char *p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return false;
	return true;
}

static int srv_url(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_server *s = obj;
	const char *url = NULL;
	int rc = want_str(w, v, field, &url);

	if (rc < 0)
		return rc;
	if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
		return bad(w, v, field, "'%s' is not an http:// or https:// URL", url);
	if (strlen(url) > 2048 || !url_printable(url))
		return bad(w, v, field,
			   "expected a URL of printable ASCII without spaces, at most 2048 bytes");
	s->url = pdk_xstrdup(url);
	return 0;
}

/* Fields the gateway sets itself, or that would change how the message is framed. */
static const char *const reserved_headers[] = {
	"host",
	"content-length",
	"content-type",
	"accept",
	"connection",
	"transfer-encoding",
	"te",
	"trailer",
	"upgrade",
	"keep-alive",
	"mcp-session-id",
	"mcp-protocol-version",
	"last-event-id",
	"user-agent",
};

/* What is wrong with header `h` ("Name: value"), or NULL. New string. */
static char *header_problem(const char *h)
{
	const char *colon = strchr(h, ':');
	_cleanup_free_ char *name = NULL, *secret = NULL, *why = NULL;
	size_t n = colon ? (size_t)(colon - h) : 0;

	if (colon == NULL || n == 0 ||
	    strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789-") != n)
		return pdk_xstrdup("expected 'Name: value' with a field name of letters, digits "
				   "and '-'");
	for (size_t i = 0; i < PDK_ARRAY_SIZE(reserved_headers); i++)
		if (strlen(reserved_headers[i]) == n && strncasecmp(h, reserved_headers[i], n) == 0)
			return pdk_xasprintf("'%.*s' is set by the gateway itself", (int)n, h);
	if (strncasecmp(h, "proxy-", 6) == 0)
		return pdk_xasprintf("'%.*s' is a hop-by-hop field", (int)n, h);
	for (const char *p = colon + 1; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			return pdk_xstrdup("the header may hold printable ASCII only");
	if (colon[1 + strspn(colon + 1, " \t")] == '\0')
		return pdk_xstrdup("the header has no value");
	/* A secret is one ${secret:NAME}, checked as the egress proxy's credentials are. */
	if (strstr(colon, "${") != NULL && pdk_net_cred_parse(h, &name, &secret, &why) < 0)
		return steal_ptr(&why);
	return NULL;
}

static int srv_header(struct walk *w, const struct node *n, const char *field, const char **s)
{
	_cleanup_free_ char *why = NULL;
	int rc = want_str(w, n, field, s);

	if (rc == 0 && (why = header_problem(*s)) != NULL)
		rc = bad(w, n, field, "%s", why);
	return rc;
}

static int srv_headers(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_strv(w, v, field, srv_header, &((struct pdk_gw_server *)obj)->headers);
}

static int srv_ca_file(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_server *s = obj;
	const char *p = NULL;
	int rc = want_abs_path(w, v, field, &p);

	if (rc == 0)
		s->ca_file = pdk_xstrdup(p);
	return rc;
}

static int srv_insecure_http(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_bool(w, v, field, &((struct pdk_gw_server *)obj)->insecure_http);
}

/* Whether `url` (http:// or https://) names a loopback host: localhost, 127.0.0.0/8 or ::1. */
static bool url_loopback(const char *url)
{
	const char *h = strstr(url, "://") + 3;
	size_t n = strcspn(h, "/?#");

	if (memchr(h, '@', n) != NULL)
		return false;
	if (strncmp(h, "[::1]", 5) == 0)
		return n == 5 || h[5] == ':';
	if (strncasecmp(h, "localhost", 9) == 0)
		return n == 9 || h[9] == ':';
	if (strncmp(h, "127.", 4) != 0)
		return false;
	for (size_t i = 4; i < n && h[i] != ':'; i++)
		if (!isdigit((unsigned char)h[i]) && h[i] != '.')
			return false;
	return true;
}

static int srv_cwd(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_server *s = obj;
	const char *p = NULL;
	int rc = want_abs_path(w, v, field, &p);

	if (rc == 0)
		s->cwd = pdk_xstrdup(p);
	return rc;
}

static int srv_image(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_server *s = obj;
	const char *p = NULL;
	int rc = want_str(w, v, field, &p);

	if (rc == 0 && (p[0] == '\0' || strlen(p) > 255))
		rc = bad(w, v, field, "expected an image name or digest of 1 to 255 characters");
	if (rc == 0)
		s->image = pdk_xstrdup(p);
	return rc;
}

static int cred_one(struct walk *w, struct pdk_gw_cred *cr, const struct node *n, const char *field)
{
	const struct node *host = map_get(n, "host"), *header = map_get(n, "header");
	_cleanup_free_ char *fh = field_join(field, "host"), *fv = field_join(field, "header");
	_cleanup_free_ char *why = NULL, *name = NULL, *secret = NULL;
	struct pdk_net_rule r = {0};
	const char *h = NULL, *t = NULL;

	if (host == NULL || header == NULL)
		return bad(w, n, field, "a credential needs 'host' and 'header'");
	if (want_str(w, host, fh, &h) < 0 || want_str(w, header, fv, &t) < 0)
		return -EINVAL;
	if (pdk_net_rule_parse(h, &r, &why) < 0)
		return bad(w, host, fh, "'%s': %s", h, why);
	cr->host = pdk_xstrdup(r.text);
	pdk_net_rule_release(&r);
	if (pdk_net_cred_parse(t, &name, &secret, &why) < 0)
		return bad(w, header, fv, "%s", why);
	cr->header = pdk_xstrdup(t);
	return 0;
}

static int cred_key(struct walk *w, void *obj, const struct node *v, const char *field)
{
	(void)w, (void)obj, (void)v, (void)field;
	return 0; /* read by cred_one() */
}

static int srv_credentials(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {{"host", cred_key}, {"header", cred_key}};
	struct pdk_gw_server *s = obj;
	int rc = want_seq(w, v, field);

	if (rc == 0)
		s->creds = pdk_xcalloc(v->n + 1, sizeof(*s->creds));
	for (size_t i = 0; rc == 0 && i < v->n; i++) {
		_cleanup_free_ char *f = pdk_xasprintf("%s[%zu]", field, i);

		rc = walk_map(w, NULL, v->kids[i], f, keys, PDK_ARRAY_SIZE(keys));
		if (rc == 0)
			rc = cred_one(w, &s->creds[s->n_creds++], v->kids[i], f);
	}
	return rc;
}

/*
 * Limits are checked by the profile reader itself: a profile holding only
 * them is read, and its first problem is reported at the config's line.
 */
static int srv_limits(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_server *s = obj;
	int rc = want_map(w, v, field);

	json_decref(s->limits);
	s->limits = json_object();
	for (size_t i = 0; rc == 0 && i + 1 < v->n; i += 2) {
		_cleanup_free_ char *f = NULL;
		const char *val = NULL;

		rc = check_key(w, v, i, field);
		if (rc < 0)
			break;
		f = field_join(field, v->kids[i]->str);
		rc = want_str(w, v->kids[i + 1], f, &val);
		if (rc == 0)
			json_object_set_new(s->limits, v->kids[i]->str, json_string(val));
		if (rc == 0)
			rc = check_limit(w, v->kids[i], f, v->kids[i]->str, val);
	}
	return rc;
}

static int srv_timeout(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_duration(w, v, field, &((struct pdk_gw_server *)obj)->timeout_ms);
}

static int srv_start_timeout(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_duration(w, v, field, &((struct pdk_gw_server *)obj)->start_timeout_ms);
}

static const struct key server_keys[] = {
	{"command", srv_command},
	{"url", srv_url},
	{"headers", srv_headers},
	{"ca_file", srv_ca_file},
	{"insecure_http", srv_insecure_http},
	{"cwd", srv_cwd},
	{"image", srv_image},
	{"permissions", srv_permissions},
	{"credentials", srv_credentials},
	{"limits", srv_limits},
	{"timeout", srv_timeout},
	{"start_timeout", srv_start_timeout},
};

static bool id_ok(const char *id)
{
	size_t n = strlen(id);

	return n >= 1 && n <= PDK_GW_ID_MAX &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* What only a sandboxed (stdio) server has, and what only a remote one has. */
static const char *const stdio_only[] = {"cwd", "image", "permissions", "limits", "credentials"};
static const char *const remote_only[] = {"headers", "ca_file", "insecure_http"};

static int only_for(struct walk *w, const struct node *v, const char *field,
		    const char *const *keys, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (map_get(v, keys[i]) != NULL) {
			_cleanup_free_ char *f = field_join(field, keys[i]);

			return bad(w, map_get(v, keys[i]), f, "only a server with %s has '%s'",
				   what, keys[i]);
		}
	}
	return 0;
}

static int server_shape(struct walk *w, const struct pdk_gw_server *s, const struct node *v,
			const char *field)
{
	if (s->command == NULL && s->url == NULL)
		return bad(w, v, field,
			   "a server needs 'command' (a program run in a sandbox) or "
			   "'url' (a remote Streamable HTTP server)");
	if (s->command != NULL && s->url != NULL)
		return bad(w, map_get(v, "url"), field,
			   "a server has 'command' or 'url', not both");
	if (s->url != NULL && only_for(w, v, field, stdio_only, PDK_ARRAY_SIZE(stdio_only),
				       "'command' (run in a sandbox)") < 0)
		return -EINVAL;
	if (s->url == NULL && only_for(w, v, field, remote_only, PDK_ARRAY_SIZE(remote_only),
				       "'url' (a remote server)") < 0)
		return -EINVAL;
	/* SECURITY: fail closed: headers (a token) never cross a network in clear text. */
	if (s->url != NULL && strncmp(s->url, "http://", 7) == 0 && !url_loopback(s->url) &&
	    !s->insecure_http) {
		_cleanup_free_ char *f = field_join(field, "url");

		return bad(w, map_get(v, "url"), f,
			   "'%s' is plain http to a host that is not loopback: use https://, or "
			   "set insecure_http: true to send its traffic (headers too) in clear",
			   s->url);
	}
	if (s->url != NULL && strncmp(s->url, "http://", 7) == 0 && s->ca_file != NULL) {
		_cleanup_free_ char *f = field_join(field, "ca_file");

		return bad(w, map_get(v, "ca_file"), f, "ca_file is for an https:// url");
	}
	return 0;
}

/* SECURITY: a credential goes only to a host the manifest lets the server reach. */
static int creds_reachable(struct walk *w, const struct pdk_gw_server *s, const struct node *v,
			   const char *field)
{
	for (size_t i = 0; i < s->n_creds; i++) {
		bool listed = false;

		for (size_t j = 0; s->perm.net_client && s->perm.net_client[j]; j++)
			listed = listed || strcmp(s->perm.net_client[j], s->creds[i].host) == 0;
		if (!listed) {
			_cleanup_free_ char *f =
				pdk_xasprintf("%s.credentials[%zu].host", field, i);

			return bad(w, map_get(v, "credentials")->kids[i], f,
				   "'%s' is not in permissions.network.client: add it there",
				   s->creds[i].host);
		}
	}
	return 0;
}

static int walk_server(struct walk *w, struct pdk_gw_server *s, const struct node *k,
		       const struct node *v)
{
	_cleanup_free_ char *field = pdk_xasprintf("servers.%s", k->str);
	int rc;

	if (!id_ok(k->str))
		return bad(w, k, field, "'%s' is not a server id: 1 to %d of a-z, 0-9 and '-'",
			   k->str, PDK_GW_ID_MAX);
	s->id = pdk_xstrdup(k->str);
	s->line = k->line;
	s->timeout_ms = 60000;
	s->start_timeout_ms = 30000;
	rc = walk_map(w, s, v, field, server_keys, PDK_ARRAY_SIZE(server_keys));
	if (rc == 0)
		rc = server_shape(w, s, v, field);
	if (rc == 0)
		rc = creds_reachable(w, s, v, field);
	if (rc == 0 && s->command != NULL)
		rc = check_profile(w, s, k, field);
	return rc;
}

static int top_servers(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_config *c = obj;
	int rc = want_map(w, v, field);

	if (rc == 0 && v->n == 0)
		return bad(w, v, field, "no server: list at least one");
	if (rc == 0)
		c->servers = pdk_xcalloc(v->n / 2 + 1, sizeof(*c->servers));
	for (size_t i = 0; rc == 0 && i + 1 < v->n; i += 2) {
		const struct pdk_gw_server *dup = v->kids[i]->type == N_SCALAR
							  ? pdk_gw_config_server(c, v->kids[i]->str)
							  : NULL;

		if (dup != NULL)
			return bad(w, v->kids[i], field,
				   "server id '%s' is declared twice (first on line %d)", dup->id,
				   dup->line);
		rc = check_key(w, v, i, field);
		if (rc == 0)
			rc = walk_server(w, &c->servers[c->n_servers++], v->kids[i],
					 v->kids[i + 1]);
	}
	return rc;
}

/* ---- policy ---- */

static int want_action(struct walk *w, const struct node *v, const char *field,
		       enum pdk_gw_action *out)
{
	static const enum pdk_gw_action all[] = {PDK_GW_ALLOW, PDK_GW_DENY, PDK_GW_APPROVE};
	const char *s = NULL;
	int rc = want_str(w, v, field, &s);

	for (size_t i = 0; rc == 0 && i < PDK_ARRAY_SIZE(all); i++) {
		if (strcmp(s, pdk_gw_action_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	}
	if (rc < 0)
		return rc;
	return bad(w, v, field, "expected one of allow, deny, require_approval, found '%s'", s);
}

static int pol_default(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_action(w, v, field, &((struct pdk_gw_config *)obj)->dflt);
}

static int want_dup(struct walk *w, const struct node *v, const char *field, size_t max, char **out)
{
	const char *s = NULL;
	int rc = want_str(w, v, field, &s);

	if (rc == 0 && (s[0] == '\0' || strlen(s) > max))
		rc = bad(w, v, field, "expected 1 to %zu characters", max);
	if (rc == 0) {
		free(*out);
		*out = pdk_xstrdup(s);
	}
	return rc;
}

static int rule_name(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_dup(w, v, field, MAX_NAME, &((struct pdk_gw_rule *)obj)->name);
}

static int rule_server(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_dup(w, v, field, 256, &((struct pdk_gw_rule *)obj)->server);
}

static int rule_tool(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_dup(w, v, field, 256, &((struct pdk_gw_rule *)obj)->tool);
}

static int rule_principal(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_dup(w, v, field, 256, &((struct pdk_gw_rule *)obj)->principal);
}

static int rule_reason(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_dup(w, v, field, 1024, &((struct pdk_gw_rule *)obj)->reason);
}

static int rule_action(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_action(w, v, field, &((struct pdk_gw_rule *)obj)->action);
}

static const char *const arg_ops[] = {"equals", "prefix", "glob", "contains", "regex"};

/* One condition: {OP: STRING} with exactly one OP; a regex must compile. */
static int arg_cond(struct walk *w, const struct node *v, const char *field, json_t *args,
		    const char *arg)
{
	const char *s = NULL;
	_cleanup_free_ char *f = NULL;
	size_t op = PDK_ARRAY_SIZE(arg_ops);
	int rc = want_map(w, v, field);

	if (rc == 0 && v->n != 2)
		return bad(w, v, field, "expected one of equals, prefix, glob, contains, regex");
	if (rc == 0)
		rc = check_key(w, v, 0, field);
	for (size_t i = 0; rc == 0 && i < PDK_ARRAY_SIZE(arg_ops); i++)
		op = strcmp(v->kids[0]->str, arg_ops[i]) == 0 ? i : op;
	if (rc == 0 && op == PDK_ARRAY_SIZE(arg_ops))
		return bad(w, v->kids[0], field,
			   "unknown condition '%s' (expected one of: equals, prefix, glob, "
			   "contains, regex)",
			   v->kids[0]->str);
	if (rc < 0)
		return rc;
	f = field_join(field, arg_ops[op]);
	rc = want_str(w, v->kids[1], f, &s);
	if (rc == 0 && op == 4) {
		regex_t re;
		int e = regcomp(&re, s, REG_EXTENDED | REG_NOSUB);
		char msg[128];

		if (e != 0) {
			regerror(e, &re, msg, sizeof(msg));
			return bad(w, v->kids[1], f, "'%s' is not a POSIX extended regex: %s", s,
				   msg);
		}
		regfree(&re);
	}
	if (rc == 0)
		json_object_set_new(args, arg, json_pack("{ss}", arg_ops[op], s));
	return rc;
}

static int rule_args(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_rule *r = obj;
	_cleanup_json_ json_t *args = json_object();
	int rc = want_map(w, v, field);

	for (size_t i = 0; rc == 0 && i + 1 < v->n; i += 2) {
		_cleanup_free_ char *f = NULL;

		rc = check_key(w, v, i, field);
		if (rc < 0)
			break;
		f = field_join(field, v->kids[i]->str);
		rc = arg_cond(w, v->kids[i + 1], f, args, v->kids[i]->str);
	}
	if (rc < 0)
		return rc;
	json_decref(r->args);
	r->args = json_object_size(args) ? json_incref(args) : NULL;
	return 0;
}

static const struct key rule_keys[] = {
	{"name", rule_name},           {"server", rule_server}, {"tool", rule_tool},
	{"principal", rule_principal}, {"args", rule_args},     {"action", rule_action},
	{"reason", rule_reason},
};

static int walk_rule(struct walk *w, struct pdk_gw_rule *r, const struct node *v, const char *field,
		     const struct pdk_gw_config *c)
{
	int rc;

	r->line = v->line;
	rc = walk_map(w, r, v, field, rule_keys, PDK_ARRAY_SIZE(rule_keys));
	if (rc == 0 && r->name == NULL)
		return bad(w, v, field, "a rule needs a 'name' (decisions name their rule)");
	if (rc == 0 && map_get(v, "action") == NULL)
		return bad(w, v, field,
			   "rule '%s' needs an 'action': allow, deny or "
			   "require_approval",
			   r->name);
	for (size_t i = 0; rc == 0 && &c->rules[i] != r; i++) {
		if (strcmp(c->rules[i].name, r->name) == 0)
			return bad(w, map_get(v, "name"), field,
				   "rule name '%s' is already used by the rule of line %d", r->name,
				   c->rules[i].line);
	}
	return rc;
}

static int pol_rules(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_config *c = obj;
	int rc = want_seq(w, v, field);

	if (rc == 0 && c->rules == NULL)
		c->rules = pdk_xcalloc(v->n + 1, sizeof(*c->rules));
	for (size_t i = 0; rc == 0 && i < v->n; i++) {
		_cleanup_free_ char *f = pdk_xasprintf("%s[%zu]", field, i);

		rc = walk_rule(w, &c->rules[c->n_rules++], v->kids[i], f, c);
	}
	return rc;
}

static int top_policy(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {{"default", pol_default}, {"rules", pol_rules}};

	return walk_map(w, obj, v, field, keys, PDK_ARRAY_SIZE(keys));
}

/* ---- budgets, approvals, pinning ---- */

static int bud_principal(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_count(w, v, field, UINT64_MAX,
			  &((struct pdk_gw_config *)obj)->budgets.calls_per_principal);
}

static int bud_session(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_count(w, v, field, UINT64_MAX,
			  &((struct pdk_gw_config *)obj)->budgets.calls_per_session);
}

static int bud_server(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_count(w, v, field, UINT64_MAX,
			  &((struct pdk_gw_config *)obj)->budgets.calls_per_server);
}

static int bud_rate(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_count(w, v, field, MAX_RATE,
			  &((struct pdk_gw_config *)obj)->budgets.rate_per_minute);
}

static int top_budgets(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {
		{"calls_per_principal", bud_principal},
		{"calls_per_session", bud_session},
		{"calls_per_server", bud_server},
		{"rate_per_minute", bud_rate},
	};

	return walk_map(w, obj, v, field, keys, PDK_ARRAY_SIZE(keys));
}

static int appr_timeout(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_config *c = obj;
	uint64_t ms = 0;
	int rc = want_duration(w, v, field, &ms);

	if (rc == 0 && (ms % 1000 != 0 || ms > 86400000))
		rc = bad(w, v, field, "expected whole seconds, at most 1d");
	if (rc == 0)
		c->approval_timeout_s = ms / 1000;
	return rc;
}

static int appr_in_band(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_bool(w, v, field, &((struct pdk_gw_config *)obj)->approvals_in_band);
}

static int top_approvals(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {{"timeout", appr_timeout}, {"in_band", appr_in_band}};

	return walk_map(w, obj, v, field, keys, PDK_ARRAY_SIZE(keys));
}

static int pin_first_contact(struct walk *w, void *obj, const struct node *v, const char *field)
{
	const char *s = NULL;
	int rc = want_str(w, v, field, &s);

	if (rc == 0 && strcmp(s, "trust") != 0 && strcmp(s, "approve") != 0)
		return bad(w, v, field, "expected trust or approve, found '%s'", s);
	if (rc == 0)
		((struct pdk_gw_config *)obj)->approve_first_contact = strcmp(s, "approve") == 0;
	return rc;
}

static int top_pinning(struct walk *w, void *obj, const struct node *v, const char *field)
{
	static const struct key keys[] = {{"first_contact", pin_first_contact}};

	return walk_map(w, obj, v, field, keys, PDK_ARRAY_SIZE(keys));
}

/* ---- principals ---- */

static int prin_name(struct walk *w, void *obj, const struct node *v, const char *field)
{
	return want_dup(w, v, field, MAX_NAME, &((struct pdk_gw_principal *)obj)->name);
}

static int prin_token(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_principal *p = obj;
	const char *s = NULL;
	int rc = want_str(w, v, field, &s);

	if (rc == 0 && strlen(s) != 64)
		return bad(w, v, field,
			   "expected the token's SHA-256 as 64 hex digits "
			   "(sha256sum of the token)");
	for (size_t i = 0; rc == 0 && i < 32; i++) {
		int hi = pdk_hexval(s[2 * i]), lo = pdk_hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return bad(w, v, field, "expected 64 hex digits, found '%s'", s);
		p->token_sha256[i] = (unsigned char)(hi << 4 | lo);
	}
	return rc;
}

static int walk_principal(struct walk *w, struct pdk_gw_config *c, struct pdk_gw_principal *p,
			  const struct node *v, const char *field)
{
	static const struct key keys[] = {{"name", prin_name}, {"token_sha256", prin_token}};
	int rc = walk_map(w, p, v, field, keys, PDK_ARRAY_SIZE(keys));

	if (rc == 0 && (p->name == NULL || map_get(v, "token_sha256") == NULL))
		return bad(w, v, field, "a principal needs 'name' and 'token_sha256'");
	for (size_t i = 0; rc == 0 && &c->principals[i] != p; i++) {
		if (strcmp(c->principals[i].name, p->name) == 0)
			return bad(w, v, field, "principal '%s' is declared twice", p->name);
		if (memcmp(c->principals[i].token_sha256, p->token_sha256, 32) == 0)
			return bad(w, v, field, "principals '%s' and '%s' have the same token",
				   c->principals[i].name, p->name);
	}
	return rc;
}

static int top_principals(struct walk *w, void *obj, const struct node *v, const char *field)
{
	struct pdk_gw_config *c = obj;
	int rc = want_seq(w, v, field);

	if (rc == 0 && c->principals == NULL)
		c->principals = pdk_xcalloc(v->n + 1, sizeof(*c->principals));
	for (size_t i = 0; rc == 0 && i < v->n; i++) {
		_cleanup_free_ char *f = pdk_xasprintf("%s[%zu]", field, i);

		rc = walk_principal(w, c, &c->principals[c->n_principals++], v->kids[i], f);
	}
	return rc;
}

static int walk_top(struct walk *w, const struct node *root)
{
	static const struct key keys[] = {
		{"servers", top_servers}, {"policy", top_policy},
		{"budgets", top_budgets}, {"approvals", top_approvals},
		{"pinning", top_pinning}, {"principals", top_principals},
	};
	int rc = walk_map(w, w->c, root, "", keys, PDK_ARRAY_SIZE(keys));

	if (rc == 0 && map_get(root, "servers") == NULL)
		return bad(w, root, "servers", "no 'servers': list at least one MCP server");
	return rc;
}

/* ---- the file ---- */

/*
 * Read the file: a regular file (pdk_read_regular_file(), which keeps a
 * FIFO or a device from blocking or streaming forever) of at most
 * PDK_GW_CONFIG_MAX bytes.
 */
static int read_config(const char *path, char **out, size_t *len, struct pdk_error **err)
{
	_cleanup_free_ char *buf = NULL;
	int rc = pdk_read_regular_file(path, "gateway config", PDK_GW_CONFIG_MAX, &buf, len, err);

	if (rc < 0)
		return rc;
	if (*len > PDK_GW_CONFIG_MAX)
		return pdk_error_setx(err, EINVAL, "gateway config '%s' is larger than %u bytes",
				      path, PDK_GW_CONFIG_MAX);
	*out = steal_ptr(&buf);
	return 0;
}

int pdk_gw_config_parse(const char *path, const char *data, size_t len, struct pdk_gw_config **out,
			struct pdk_error **err)
{
	_cleanup_node_ struct node *root = NULL;
	struct pdk_gw_config *c = pdk_xcalloc(1, sizeof(*c));
	struct walk w = {.file = path, .c = c, .err = err};
	int rc;

	c->path = pdk_xstrdup(path);
	c->approval_timeout_s = 300;
	c->approvals_in_band = true;
	rc = tree_load(path, data, len, &root, err);
	if (rc == 0)
		rc = walk_top(&w, root);
	if (rc == 0)
		rc = pdk_gw_rules_compile(c, err);
	if (rc < 0) {
		pdk_gw_config_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int pdk_gw_config_load(const char *path, struct pdk_gw_config **out, struct pdk_error **err)
{
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	int rc = read_config(path, &data, &len, err);

	if (rc < 0)
		return rc == -ENOENT ? -ENOENT : rc == -EINVAL ? -EINVAL : -EIO;
	return pdk_gw_config_parse(path, data, len, out, err);
}

const struct pdk_gw_server *pdk_gw_config_server(const struct pdk_gw_config *c, const char *id)
{
	for (size_t i = 0; c != NULL && id != NULL && i < c->n_servers; i++) {
		if (strcmp(c->servers[i].id, id) == 0)
			return &c->servers[i];
	}
	return NULL;
}

static void server_release(struct pdk_gw_server *s)
{
	free(s->id);
	pdk_strv_free(s->command);
	free(s->url);
	pdk_strv_free(s->headers);
	free(s->ca_file);
	free(s->cwd);
	free(s->image);
	pdk_strv_free(s->perm.fs_read);
	pdk_strv_free(s->perm.fs_write);
	pdk_strv_free(s->perm.net_client);
	pdk_strv_free(s->perm.env);
	for (size_t i = 0; i < s->n_creds; i++) {
		free(s->creds[i].host);
		free(s->creds[i].header);
	}
	free(s->creds);
	json_decref(s->limits);
}

void pdk_gw_config_free(struct pdk_gw_config *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n_servers; i++)
		server_release(&c->servers[i]);
	free(c->servers);
	for (size_t i = 0; i < c->n_rules; i++) {
		free(c->rules[i].name);
		free(c->rules[i].principal);
		free(c->rules[i].server);
		free(c->rules[i].tool);
		pdk_gw_rule_release(&c->rules[i]);
		json_decref(c->rules[i].args);
		free(c->rules[i].reason);
	}
	free(c->rules);
	for (size_t i = 0; i < c->n_principals; i++)
		free(c->principals[i].name);
	free(c->principals);
	free(c->path);
	free(c);
}

const char *pdk_gw_action_name(enum pdk_gw_action a)
{
	if (a == PDK_GW_ALLOW)
		return "allow";
	if (a == PDK_GW_APPROVE)
		return "require_approval";
	return "deny"; /* and any other value: fail closed */
}
