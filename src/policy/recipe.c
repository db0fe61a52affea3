/*
 * recipe.c - the build recipe's schema (recipe.h), read with the profile
 * reader's machinery: the tree of policy-tree.c, the table walk and the
 * kinds of values of policy-schema.c and policy-lists.c (network entries
 * are network.allow's, env is a profile's env), the diagnostics of
 * policy-report.c. What is a recipe's own: the image name, the source of
 * the first layer (`from` or `debian`, exactly one), package names, the
 * run steps with their lines, and the config.
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"

#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECIPE_BYTES ((size_t)1 << 20) /* bytes of YAML in one recipe */
#define MAX_RUN_BYTES    (64 * 1024)       /* bytes in one run: command */
#define MAX_PACKAGES     1024
#define MAX_ARGS         64 /* entries of config.entrypoint */

#define TABLE(a)                       \
	{                              \
		(a), PDK_ARRAY_SIZE(a) \
	}
#define OFF(m) offsetof(struct pdk_recipe, m)

/* ---- names ---- */

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

/* NAME or NAME:TAG, each of letters, digits, '.', '_', '-', starting with a letter or digit. */
static bool valid_image_name(const char *s)
{
	const char *colon = strchr(s, ':');
	size_t len = strlen(s);

	if (len == 0 || len > PDK_RECIPE_MAX_NAME || !isalnum((unsigned char)s[0]))
		return false;
	if (colon != NULL && (colon[1] == '\0' || strchr(colon + 1, ':') != NULL))
		return false;
	for (; *s; s++) {
		if (!name_char(*s) && s != colon)
			return false;
	}
	return true;
}

/* "sha256:" and 64 lowercase hex digits. */
static bool valid_digest(const char *s)
{
	if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
		return false;
	for (s += 7; *s; s++) {
		if (!isdigit((unsigned char)*s) && !(*s >= 'a' && *s <= 'f'))
			return false;
	}
	return true;
}

static void set_str(char **dst, const char *s)
{
	free(*dst);
	*dst = pdk_xstrdup(s);
}

static void parse_image_name(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			     const char *path, const struct pdk__policy_field *f)
{
	static const char what[] = "an image name (NAME or NAME:TAG: letters, digits, '.', '_', "
				   "'-'; at most 128 bytes)";
	const char *s = pdk__policy_want_string(w, n, path, what);

	if (s == NULL)
		return;
	if (!valid_image_name(s)) {
		pdk__policy_expected(w, n, path, what);
		return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/* `from:` is an image name or a digest. */
static void parse_image_ref(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const struct pdk__policy_field *f)
{
	static const char what[] = "an image in the store (NAME, NAME:TAG or sha256:DIGEST)";
	const char *s = pdk__policy_want_string(w, n, path, what);

	if (s == NULL)
		return;
	if (strncmp(s, "sha256:", 7) == 0 ? !valid_digest(s) : !valid_image_name(s)) {
		pdk__policy_expected(w, n, path, what);
		return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/* A word of letters, digits and `extra`: a suite, a variant. */
static bool valid_word(const char *s, const char *extra)
{
	if (*s == '\0' || strlen(s) > 64 || !isalnum((unsigned char)*s))
		return false;
	for (; *s; s++) {
		if (!isalnum((unsigned char)*s) && strchr(extra, *s) == NULL)
			return false;
	}
	return true;
}

static void parse_word(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		       const char *path, const struct pdk__policy_field *f)
{
	const char *what = f->arg;
	const char *s = pdk__policy_want_string(w, n, path, what);

	if (s == NULL)
		return;
	if (!valid_word(s, "-_.")) {
		pdk__policy_expected(w, n, path, what);
		return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/*
 * The mirror is handed to mmdebstrap on the host and to apt in the image.
 * SECURITY: only an http(s) URL of printable characters without spaces, so
 * that it cannot be read as an option or split into more arguments.
 */
static void parse_mirror(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			 const char *path, const struct pdk__policy_field *f)
{
	static const char what[] = "an http:// or https:// URL";
	const char *s = pdk__policy_want_string(w, n, path, what);

	if (s == NULL)
		return;
	if ((strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0) || strlen(s) > 512) {
		pdk__policy_expected(w, n, path, what);
		return;
	}
	for (const char *c = s; *c; c++) {
		if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
			pdk__policy_expected(w, n, path, what);
			return;
		}
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/* ---- lists ---- */

/* Debian's package names (policy 5.6.1), with an optional =VERSION. */
static bool valid_package(const char *s)
{
	const char *eq = strchr(s, '=');
	size_t name_len = eq != NULL ? (size_t)(eq - s) : strlen(s);

	if (name_len < 2 || name_len > 128 || !isalnum((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < name_len; i++) {
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) &&
		    strchr("+-.", s[i]) == NULL)
			return false;
	}
	return eq == NULL || valid_word(eq + 1, "+-.~:");
}

static char *check_package(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			   const char *path, const char *s)
{
	if (!valid_package(s)) {
		pdk__policy_expected(w, n, path,
				     "a Debian package name (lowercase letters, digits, '+', '-', "
				     "'.'), optionally =VERSION");
		return NULL;
	}
	return pdk_xstrdup(s);
}

static const struct pdk__policy_list_spec packages_spec = {"a package name", check_package};

static void parse_packages(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			   const char *path, const struct pdk__policy_field *f)
{
	if (n->type == PDK__POLICY_SEQ && n->n > MAX_PACKAGES) {
		pdk__policy_bad(w, n, path, "more than %d packages", MAX_PACKAGES);
		return;
	}
	pdk__policy_parse_list(w, n, path, f);
}

/* A string without a NUL (the caller checked) holds text, not control bytes but tab/newline. */
static bool printable_text(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
			return false;
	}
	return true;
}

static bool run_item(struct pdk__policy_walk *w, const struct pdk__policy_node *n, const char *path,
		     struct pdk_recipe *r)
{
	const char *s = pdk__policy_want_string(w, n, path, "a shell command");

	if (s == NULL)
		return false;
	if (*s == '\0' || strlen(s) > MAX_RUN_BYTES || !printable_text(s)) {
		pdk__policy_expected(w, n, path,
				     "a shell command of 1 to 65536 bytes of text (no control "
				     "characters but tab and newline)");
		return false;
	}
	r->steps[r->n_steps++] = (struct pdk_recipe_step){.run = pdk_xstrdup(s), .line = n->line};
	return true;
}

static void parse_run(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		      const char *path, const struct pdk__policy_field *f)
{
	struct pdk_recipe *r = w->obj;

	(void)f;
	if (n->type != PDK__POLICY_SEQ) {
		pdk__policy_expected(w, n, path, "a list of shell commands");
		return;
	}
	if (n->n > PDK_RECIPE_MAX_STEPS) {
		pdk__policy_bad(w, n, path, "more than %d steps", PDK_RECIPE_MAX_STEPS);
		return;
	}
	r->steps = pdk_xcalloc(n->n + 1, sizeof(*r->steps));
	for (size_t i = 0; i < n->n; i++) {
		_cleanup_free_ char *sub = pdk_xasprintf("%s[%zu]", path, i);

		(void)run_item(w, n->kids[i], sub, r);
	}
}

/* An argument of the entrypoint: any text; unlike the lists above, repeats are fine. */
static void parse_argv(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		       const char *path, const struct pdk__policy_field *f)
{
	_cleanup_strv_ char **v = NULL;
	char ***dst = PDK__POLICY_MEMBER(f, char **, w->obj);
	bool ok = true;

	if (n->type != PDK__POLICY_SEQ || n->n == 0 || n->n > MAX_ARGS) {
		pdk__policy_expected(w, n, path, "a list of 1 to 64 arguments");
		return;
	}
	for (size_t i = 0; i < n->n; i++) {
		_cleanup_free_ char *sub = pdk_xasprintf("%s[%zu]", path, i);
		const char *s = pdk__policy_want_string(w, n->kids[i], sub, "an argument");

		if (s == NULL) {
			ok = false;
			continue;
		}
		pdk_strv_push(&v, s);
	}
	if (!ok)
		return;
	pdk_strv_free(*dst);
	*dst = steal_ptr(&v);
}

/* ---- config ---- */

static void parse_workdir(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			  const char *path, const struct pdk__policy_field *f)
{
	const char *s = pdk__policy_want_string(w, n, path, "an absolute path");

	if (s == NULL)
		return;
	if (s[0] != '/' || strlen(s) >= PATH_MAX || strstr(s, "/../") != NULL ||
	    !printable_text(s) || strchr(s, '\n') != NULL) {
		pdk__policy_expected(w, n, path, "an absolute path without '..'");
		return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/* NAME, UID or UID:GID; YAML reads a bare number as a scalar too, so 1000 works unquoted. */
static void parse_user(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		       const char *path, const struct pdk__policy_field *f)
{
	static const char what[] = "a user: NAME, UID or UID:GID";
	const char *s = pdk__policy_want_string(w, n, path, what);

	if (s == NULL)
		return;
	if (!valid_word(s, "-_.:") || s[strlen(s) - 1] == ':') {
		pdk__policy_expected(w, n, path, what);
		return;
	}
	set_str(PDK__POLICY_MEMBER(f, char *, w->obj), s);
}

/* ---- the schema ---- */

static const struct pdk__policy_field debian_fields[] = {
	{"suite", parse_word, NULL, OFF(debian.suite), "a suite name (bookworm, trixie, ...)"},
	{"mirror", parse_mirror, NULL, OFF(debian.mirror), NULL},
	{"variant", parse_word, NULL, OFF(debian.variant),
	 "an mmdebstrap variant (apt, minbase, required, important, standard)"},
};
static const struct pdk__policy_table debian_table = TABLE(debian_fields);

static const struct pdk__policy_field config_fields[] = {
	{"env", pdk__policy_parse_env, NULL, OFF(config.env), NULL},
	{"workdir", parse_workdir, NULL, OFF(config.workdir), NULL},
	{"user", parse_user, NULL, OFF(config.user), NULL},
	{"entrypoint", parse_argv, NULL, OFF(config.entrypoint), NULL},
};
static const struct pdk__policy_table config_table = TABLE(config_fields);

static const struct pdk__policy_field top_fields[] = {
	{"name", parse_image_name, NULL, OFF(name), NULL},
	{"description", pdk__policy_parse_text, NULL, OFF(description), NULL},
	{"from", parse_image_ref, NULL, OFF(from), NULL},
	{"debian", pdk__policy_parse_map, NULL, 0, &debian_table},
	{"network", pdk__policy_parse_list, NULL, OFF(network), &pdk__policy_allow_entries},
	{"packages", parse_packages, NULL, OFF(packages), &packages_spec},
	{"run", parse_run, NULL, 0, NULL},
	{"config", pdk__policy_parse_map, NULL, 0, &config_table},
};
static const struct pdk__policy_table recipe_top = TABLE(top_fields);

/* Rules across fields, after the walk: a name, and exactly one source of the first layer. */
static void check_whole(struct pdk__policy_walk *w, const struct pdk__policy_node *root)
{
	const struct pdk_recipe *r = w->obj;
	const struct pdk__policy_node *debian = pdk__policy_node_get(root, "debian");
	const struct pdk__policy_node *from = pdk__policy_node_get(root, "from");

	if (pdk__policy_node_get(root, "name") == NULL)
		pdk__policy_bad(w, root, "name", "a recipe names the image it builds (name: NAME)");
	if (from != NULL && debian != NULL)
		pdk__policy_bad(w, debian, "debian",
				"a recipe starts from one base: 'from' (line %d) or 'debian', "
				"not both",
				from->line);
	else if (from == NULL && debian == NULL)
		pdk__policy_bad(w, root, "from",
				"a recipe starts from an image ('from: NAME') or a Debian suite "
				"('debian: {suite: bookworm}')");
	if (debian != NULL && debian->type == PDK__POLICY_MAP && r->debian.suite == NULL &&
	    pdk__policy_node_get(debian, "suite") == NULL)
		pdk__policy_bad(w, debian, "debian.suite", "the suite to bootstrap is missing");
}

void pdk_recipe_free(struct pdk_recipe *r)
{
	if (r == NULL)
		return;
	free(r->name);
	free(r->source);
	free(r->description);
	free(r->from);
	free(r->debian.suite);
	free(r->debian.mirror);
	free(r->debian.variant);
	pdk_strv_free(r->packages);
	for (size_t i = 0; i < r->n_steps; i++)
		free(r->steps[i].run);
	free(r->steps);
	pdk_strv_free(r->network);
	pdk_strv_free(r->config.env);
	free(r->config.workdir);
	free(r->config.user);
	pdk_strv_free(r->config.entrypoint);
	free(r);
}

static struct pdk_recipe *parse_doc(struct pdk__policy_sink *s, const char *file, const char *data,
				    size_t len)
{
	struct pdk__policy_source src = {.name = file};
	struct pdk_recipe *r = pdk_xcalloc(1, sizeof(*r));
	struct pdk__policy_walk w = {.sink = s, .src = &src, .obj = r};
	_cleanup_policy_node_ struct pdk__policy_node *root = NULL;
	size_t before = s->errors;

	r->source = pdk_xstrdup(file);
	if (len > MAX_RECIPE_BYTES) {
		pdk__policy_diag(s, file, 0, 0, "", "the recipe is larger than %zu bytes",
				 MAX_RECIPE_BYTES);
	} else if ((root = pdk__policy_tree_load(s, file, data, len)) != NULL) {
		if (root->type != PDK__POLICY_MAP) {
			pdk__policy_expected(&w, root, "", "a mapping (name:, from:, run: ...)");
		} else {
			pdk__policy_walk_map(&w, root, "", &recipe_top);
			check_whole(&w, root);
		}
	}
	if (s->errors == before)
		return r;
	pdk_recipe_free(r);
	return NULL;
}

struct pdk_recipe *pdk_recipe_parse(const char *file, const char *data, size_t len,
				    struct pdk_policy_report *report, struct pdk_error **err)
{
	struct pdk_policy_report local = {0};
	struct pdk__policy_sink s = {.r = report != NULL ? report : &local};
	const char *name = file != NULL ? file : "<input>";
	struct pdk_recipe *r;

	(void)pdk__policy_report_file(s.r, name);
	r = parse_doc(&s, name, data != NULL ? data : "", data != NULL ? len : 0);
	if (r == NULL)
		pdk_error_setx(err, EINVAL, "recipe '%s' is invalid (%zu problem%s)", name,
			       s.errors, s.errors == 1 ? "" : "s");
	pdk_policy_report_release(&local);
	return r;
}

struct pdk_recipe *pdk_recipe_load(const char *path, struct pdk_policy_report *report,
				   struct pdk_error **err)
{
	_cleanup_free_ char *data = NULL;
	size_t len = 0;

	if (pdk_read_regular_file(path, "recipe", MAX_RECIPE_BYTES, &data, &len, err) < 0)
		return NULL;
	return pdk_recipe_parse(path, data, len, report, err);
}
