/*
 * policy-load.c - stage 3 of reading a profile: finding it (a path, a
 * built-in, or a name in the user's or the system's profile directory),
 * reading it (a regular file of at most 1 MiB), and `extends`: the base
 * profile is loaded first with the same code, recursively, along a chain
 * that finds cycles and bounds the depth, and the walk of the document
 * then overrides it (policy-schema.c).
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PROFILE_BYTES ((size_t)1 << 20) /* bytes of YAML in one profile */
#define MAX_EXTENDS       8                 /* levels of `extends` below a profile */

static struct pdk_policy *load_ref(struct pdk__policy_sink *s, const char *ref, const char *dir,
				   const struct pdk__policy_chain *up, struct pdk_error **err);

/* ---- one document ---- */

/* The policy named by `extends`, or an empty one (after a diagnostic on failure). */
static struct pdk_policy *base_policy(struct pdk__policy_walk *w,
				      const struct pdk__policy_node *root)
{
	const struct pdk__policy_node *n = pdk__policy_node_get(root, "extends");
	const char *ref =
		n != NULL ? pdk__policy_want_string(w, n, "extends", "a profile name or path")
			  : NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy *base;

	if (ref == NULL)
		return pdk__policy_new();
	base = load_ref(w->sink, ref, w->src->dir, w->src->chain, &err);
	if (base == NULL) {
		pdk__policy_bad(w, n, "extends", "%s",
				err != NULL ? err->msg : "cannot load the profile");
		return pdk__policy_new();
	}
	/* The name, description and source describe a profile; they are not inherited. */
	free(steal_ptr(&base->name));
	free(steal_ptr(&base->description));
	free(steal_ptr(&base->source));
	return base;
}

static struct pdk_policy *walk_root(struct pdk__policy_walk *w, const struct pdk__policy_node *root)
{
	if (root->type != PDK__POLICY_MAP) {
		pdk__policy_expected(w, root, "", "a mapping of settings");
		return NULL;
	}
	w->pol = base_policy(w, root);
	w->obj = w->pol;
	pdk__policy_walk(w, root);
	return steal_ptr(&w->pol);
}

/* Parse one document; NULL when it (or a profile it extends) has problems. */
static struct pdk_policy *parse_doc(struct pdk__policy_sink *s,
				    const struct pdk__policy_source *src, const char *data,
				    size_t len)
{
	struct pdk__policy_walk w = {.sink = s, .src = src};
	_cleanup_policy_node_ struct pdk__policy_node *root = NULL;
	size_t before = s->errors;
	struct pdk_policy *p;

	if (len > MAX_PROFILE_BYTES) {
		pdk__policy_diag(s, src->name, 0, 0, "", "the profile is larger than %zu bytes",
				 MAX_PROFILE_BYTES);
		return NULL;
	}
	root = pdk__policy_tree_load(s, src->name, data != NULL ? data : "",
				     data != NULL ? len : 0);
	if (root == NULL)
		return NULL;
	p = walk_root(&w, root);
	if (s->errors > before || p == NULL) {
		pdk_policy_free(p);
		return NULL;
	}
	return p;
}

static struct pdk_policy *parse_checked(struct pdk__policy_sink *s,
					const struct pdk__policy_source *src, const char *data,
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

/* ---- finding profiles, extends ---- */

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
	char *s = NULL;

	for (size_t i = 0; pdk_policy_builtin_names[i] != NULL; i++)
		s = pdk__policy_words_add(s, pdk_policy_builtin_names[i]);
	return s;
}

static int find_named(const char *ref, const char *user, char **out, struct pdk_error **err)
{
	_cleanup_free_ char *builtins = builtin_list();
	_cleanup_free_ char *ex = pdk__policy_excerpt_str(ref);
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
static int resolve_ref(const struct pdk__policy_sink *s, const char *ref, const char *dir,
		       char **name, const char **text, struct pdk_error **err)
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
	return pdk_xasprintf("%.*s", (int)(slash - path), path);
}

static int cycle_error(const char *id, const char *name, const struct pdk__policy_chain *up,
		       struct pdk_error **err)
{
	_cleanup_free_ char *s = pdk__policy_excerpt_path(name);

	for (const struct pdk__policy_chain *c = up; c != NULL; c = c->up) {
		_cleanup_free_ char *ex = pdk__policy_excerpt_path(c->name);
		char *next = pdk_xasprintf("%s -> %s", ex, s);

		free(s);
		s = next;
		if (strcmp(c->id, id) == 0)
			break;
	}
	return pdk_error_setx(err, ELOOP, "extends cycle: %s", s);
}

static int check_chain(const char *id, const char *name, const struct pdk__policy_chain *up,
		       struct pdk_error **err)
{
	for (const struct pdk__policy_chain *c = up; c != NULL; c = c->up) {
		if (strcmp(c->id, id) == 0)
			return cycle_error(id, name, up, err);
	}
	if (up != NULL && up->depth >= MAX_EXTENDS)
		return pdk_error_setx(err, ELOOP, "more than %d levels of extends", MAX_EXTENDS);
	return 0;
}

static struct pdk_policy *load_ref(struct pdk__policy_sink *s, const char *ref, const char *dir,
				   const struct pdk__policy_chain *up, struct pdk_error **err)
{
	_cleanup_free_ char *name = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *data = NULL;
	_cleanup_free_ char *own_dir = NULL;
	const char *text = NULL;
	size_t len = 0;
	struct pdk__policy_chain link;
	struct pdk__policy_source src;

	if (resolve_ref(s, ref, dir, &name, &text, err) < 0)
		return NULL;
	if (up == NULL)
		(void)pdk__policy_report_file(s->r,
					      name); /* the report names the profile asked for */
	id = text != NULL ? pdk_xstrdup(name) : canonical(name);
	if (check_chain(id, name, up, err) < 0)
		return NULL;
	if (text == NULL) {
		if (pdk_read_regular_file(name, "profile", MAX_PROFILE_BYTES, &data, &len, err) < 0)
			return NULL;
		text = data;
		own_dir = dir_of(name);
	} else {
		len = strlen(text);
	}
	link = (struct pdk__policy_chain){
		.id = id, .name = name, .up = up, .depth = up != NULL ? up->depth + 1 : 0};
	src = (struct pdk__policy_source){.name = name, .dir = own_dir, .chain = &link};
	return parse_checked(s, &src, text, len, err);
}

/* ---- the public entry points ---- */

struct pdk_policy *pdk_policy_load(const char *name_or_path, const char *profile_dir,
				   struct pdk_policy_report *report, struct pdk_error **err)
{
	struct pdk_policy_report local = {0};
	struct pdk__policy_sink s = {.r = report != NULL ? report : &local,
				     .profile_dir = profile_dir};
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
	struct pdk__policy_sink s = {.r = report != NULL ? report : &local};
	const char *name = file != NULL ? file : "<input>";
	_cleanup_free_ char *id = canonical(name);
	_cleanup_free_ char *dir = dir_of(name);
	struct pdk__policy_chain link = {.id = id, .name = name};
	struct pdk__policy_source src = {.name = name, .dir = dir, .chain = &link};
	struct pdk_policy *p;

	(void)pdk__policy_report_file(s.r, name);
	p = parse_checked(&s, &src, data, len, err);
	pdk_policy_report_release(&local);
	return p;
}
