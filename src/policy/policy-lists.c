/*
 * policy-lists.c - the schema's lists: paths (filesystem.read_only, ...),
 * names under /etc, network.allow entries (the syntax of policy/netrule.h,
 * stored in their canonical form) and network.credentials pairs. A list
 * replaces the inherited one as a whole, and only when every entry is
 * good; each entry is checked, and a duplicate is a diagnostic.
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

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

static char *check_abs_path(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const char *s)
{
	_cleanup_free_ char *out = NULL;

	if (s[0] != '/') {
		pdk__policy_expected(w, n, path,
				     s[0] == '~' ? "an absolute path ('~' is not expanded)"
						 : "an absolute path");
		return NULL;
	}
	if (strlen(s) >= PATH_MAX) {
		pdk__policy_bad(w, n, path, "the path is longer than %d bytes", PATH_MAX - 1);
		return NULL;
	}
	out = pdk_xmalloc(strlen(s) + 1);
	if (!normalize_path(s, out)) {
		pdk__policy_expected(w, n, path, "an absolute path without '.' or '..' components");
		return NULL;
	}
	if (out[0] == '\0') {
		pdk__policy_bad(w, n, path, "'/' cannot be listed; name the directories instead");
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

static char *check_etc_name(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const char *s)
{
	if (strchr(s, '/') != NULL) {
		pdk__policy_expected(w, n, path, "a name under /etc, not a path");
		return NULL;
	}
	if (!valid_etc_name(s)) {
		pdk__policy_expected(
			w, n, path,
			"a file name under /etc (letters, digits, '.', '_', '-', '+', '@')");
		return NULL;
	}
	for (size_t i = 0; i < PDK_ARRAY_SIZE(etc_refused); i++) {
		if (strcmp(s, etc_refused[i].name) == 0) {
			pdk__policy_bad(w, n, path, "'/etc/%s' cannot be bound: it %s", s,
					etc_refused[i].why);
			return NULL;
		}
	}
	return pdk_xstrdup(s);
}

/* A network.allow entry, stored in its canonical form (lowercase, IDNA, v6 compressed). */
static char *check_allow(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			 const char *path, const char *s)
{
	struct pdk_net_rule r;
	_cleanup_free_ char *why = NULL;
	_cleanup_free_ char *ex = NULL;
	char *out;

	if (pdk_net_rule_parse(s, &r, &why) < 0) {
		ex = pdk__policy_excerpt_str(s);
		pdk__policy_bad(w, n, path,
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

static const struct pdk__policy_node *cred_key(struct pdk__policy_walk *w,
					       const struct pdk__policy_node *map, const char *path,
					       const char *key)
{
	const struct pdk__policy_node *found = NULL;

	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct pdk__policy_node *k = map->kids[i];

		if (k->type == PDK__POLICY_SCALAR && strcmp(k->str, key) == 0 &&
		    strlen(key) == k->len)
			found = map->kids[i + 1];
	}
	if (found == NULL)
		pdk__policy_bad(w, map, path, "a credential needs '%s'", key);
	return found;
}

static bool cred_keys_ok(struct pdk__policy_walk *w, const struct pdk__policy_node *map,
			 const char *path)
{
	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct pdk__policy_node *k = map->kids[i];
		_cleanup_free_ char *ex = NULL;

		if (k->type == PDK__POLICY_SCALAR &&
		    (strcmp(k->str, "host") == 0 || strcmp(k->str, "header") == 0))
			continue;
		ex = pdk__policy_excerpt(k->str, k->len);
		pdk__policy_bad(w, k, path, "unknown key '%s' (expected host and header)", ex);
		return false;
	}
	return true;
}

static bool cred_item(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		      const char *path, char ***v)
{
	_cleanup_free_ char *hpath = pdk_xasprintf("%s.host", path);
	_cleanup_free_ char *vpath = pdk_xasprintf("%s.header", path);
	_cleanup_free_ char *host = NULL;
	_cleanup_free_ char *field = NULL;
	_cleanup_free_ char *secret = NULL;
	_cleanup_free_ char *why = NULL;
	const struct pdk__policy_node *hn, *vn;
	const char *hs, *vs;

	if (n->type != PDK__POLICY_MAP) {
		pdk__policy_expected(w, n, path,
				     "a mapping {host: HOST, header: 'Name: ... ${secret:NAME}'}");
		return false;
	}
	if (!cred_keys_ok(w, n, path))
		return false;
	hn = cred_key(w, n, path, "host");
	vn = cred_key(w, n, path, "header");
	if (hn == NULL || vn == NULL)
		return false;
	hs = pdk__policy_want_string(w, hn, hpath, "a host[:port]");
	host = hs != NULL ? check_allow(w, hn, hpath, hs) : NULL;
	vs = pdk__policy_want_string(w, vn, vpath, "a header");
	if (host == NULL || vs == NULL)
		return false;
	if (pdk_net_cred_parse(vs, &field, &secret, &why) < 0) {
		pdk__policy_bad(w, vn, vpath, "%s", why);
		return false;
	}
	pdk_strv_push_take(v, steal_ptr(&host));
	pdk_strv_push(v, vs);
	return true;
}

const struct pdk__policy_list_spec pdk__policy_abs_paths = {"an absolute path", check_abs_path};
const struct pdk__policy_list_spec pdk__policy_allow_entries = {"a host[:port]", check_allow};
const struct pdk__policy_list_spec pdk__policy_etc_names = {"a name under /etc", check_etc_name};

/* One list entry; false after a diagnostic. */
static bool list_item(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		      const char *path, const struct pdk__policy_list_spec *ls, char ***v)
{
	const char *s = pdk__policy_want_string(w, n, path, ls->what);
	_cleanup_free_ char *e = s != NULL ? ls->check(w, n, path, s) : NULL;
	_cleanup_free_ char *ex = NULL;

	if (e == NULL)
		return false;
	if (pdk__policy_strv_has(*v, e)) {
		ex = pdk__policy_excerpt_str(e);
		pdk__policy_bad(w, n, path, "'%s' is listed twice", ex);
		return false;
	}
	pdk_strv_push_take(v, steal_ptr(&e));
	return true;
}

typedef bool (*item_fn)(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			const char *path, const void *arg, char ***v);

/*
 * A sequence of at most `max` items, each checked by `item`; the list
 * replaces the inherited one as a whole, and only when every item is good.
 */
static void parse_seq(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		      const char *path, const struct pdk__policy_field *f, int max, item_fn item)
{
	_cleanup_strv_ char **v = NULL;
	char ***dst = PDK__POLICY_MEMBER(f, char **, w->obj);
	bool ok = true;

	if (n->type != PDK__POLICY_SEQ) {
		pdk__policy_expected(w, n, path, "a list");
		return;
	}
	if (n->n > (size_t)max) {
		pdk__policy_bad(w, n, path, "more than %d entries", max);
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

static bool list_item_fn(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			 const char *path, const void *arg, char ***v)
{
	return list_item(w, n, path, arg, v);
}

static bool cred_item_fn(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			 const char *path, const void *arg, char ***v)
{
	(void)arg;
	return cred_item(w, n, path, v);
}

void pdk__policy_parse_list(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			    const char *path, const struct pdk__policy_field *f)
{
	parse_seq(w, n, path, f, PDK__POLICY_MAX_ENTRIES, list_item_fn);
}

/* Short lists on one line ([a, b]), longer ones one entry per line. */
void pdk__policy_emit_list(struct pdk__policy_emitter *e, const struct pdk_policy *p,
			   const struct pdk__policy_field *f)
{
	char *const *v = *PDK__POLICY_CMEMBER(f, char **, p);
	size_t width = 0;

	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		width += strlen(v[i]) + 2;
	pdk__policy_emit_str(e, f->key);
	pdk__policy_emit_start(e, false, width <= 60);
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		pdk__policy_emit_str(e, v[i]);
	pdk__policy_emit_end(e, false);
}

/* Each entry is a pair {host, header}, stored as two strings. */
void pdk__policy_parse_credentials(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
				   const char *path, const struct pdk__policy_field *f)
{
	parse_seq(w, n, path, f, MAX_CREDENTIALS, cred_item_fn);
}

void pdk__policy_emit_credentials(struct pdk__policy_emitter *e, const struct pdk_policy *p,
				  const struct pdk__policy_field *f)
{
	char *const *v = *PDK__POLICY_CMEMBER(f, char **, p);

	pdk__policy_emit_str(e, f->key);
	pdk__policy_emit_start(e, false, v == NULL || v[0] == NULL);
	for (size_t i = 0; v != NULL && v[i] != NULL && v[i + 1] != NULL; i += 2) {
		pdk__policy_emit_start(e, true, true);
		pdk__policy_emit_str(e, "host");
		pdk__policy_emit_str(e, v[i]);
		pdk__policy_emit_str(e, "header");
		pdk__policy_emit_str(e, v[i + 1]);
		pdk__policy_emit_end(e, true);
	}
	pdk__policy_emit_end(e, false);
}
