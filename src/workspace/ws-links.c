/*
 * ws-links.c - where a symlink of a change set will lead once committed.
 *
 * A link's text alone does not say where it leads: "via -> hostlink/passwd"
 * is outside the directory when the directory already holds
 * "hostlink -> /etc", and "x/../y" climbs out of wherever x leads. So each
 * link of the diff is walked component by component in the directory as it
 * will be after the commit (the diff's entries over the directory's own),
 * following every link on the way as the kernel would. Nothing is followed
 * on the host while doing so: an entry is looked up with its parent opened
 * beneath the root with RESOLVE_NO_SYMLINKS, and the walk itself decides
 * what each link it meets means.
 */
#include "common.h"
#include "base.h"
#include "workspace-internal.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct pdk__ws_view {
	int root;
	const char *root_path;
	size_t root_len; /* root_path without a trailing '/' */
	const struct pdk_ws_diff *diff;
	const struct pdk_ws_change **sorted; /* the diff by path, made on first use */
};

enum entry {
	ENTRY_ABSENT = 0,
	ENTRY_DIR,
	ENTRY_LINK,
	ENTRY_OTHER, /* a file of any other type */
};

/* One walk: where it is, what is left of the path, what it went through. */
struct walk {
	const char *target; /* the judged link's own target */
	char *loc;          /* the directory reached, relative to the root ("" = the root) */
	char *rest;         /* what is left to walk */
	size_t pos;         /* in rest */
	unsigned hops;      /* links followed */
	char *via;          /* the last link followed on the way: "'PATH' -> 'TARGET'" */
	char *lost_at;      /* the first missing name or file met, after which only text counts */
};

struct pdk__ws_view *pdk__ws_view_new(int root_fd, const char *root_path,
				      const struct pdk_ws_diff *diff)
{
	struct pdk__ws_view *v = pdk_xcalloc(1, sizeof(*v));

	v->root = root_fd;
	v->root_path = root_path;
	v->root_len = strlen(root_path);
	while (v->root_len > 0 && root_path[v->root_len - 1] == '/')
		v->root_len--;
	v->diff = diff;
	return v;
}

void pdk__ws_view_free(struct pdk__ws_view *v)
{
	if (v == NULL)
		return;
	free(v->sorted);
	free(v);
}

static int by_path(const void *a, const void *b)
{
	const struct pdk_ws_change *const *x = a;
	const struct pdk_ws_change *const *y = b;

	return strcmp((*x)->path, (*y)->path);
}

/* The diff's change at `path`, or NULL. */
static const struct pdk_ws_change *find_change(struct pdk__ws_view *v, const char *path)
{
	struct pdk_ws_change key = {.path = (char *)path};
	const struct pdk_ws_change *k = &key;
	const struct pdk_ws_change **hit;
	size_t n = v->diff->n;

	if (n == 0)
		return NULL;
	if (v->sorted == NULL) {
		v->sorted = pdk_xcalloc(n, sizeof(*v->sorted));
		for (size_t i = 0; i < n; i++)
			v->sorted[i] = &v->diff->v[i];
		qsort(v->sorted, n, sizeof(*v->sorted), by_path);
	}
	hit = bsearch(&k, v->sorted, n, sizeof(*v->sorted), by_path);
	return hit != NULL ? *hit : NULL;
}

/*
 * The entry at `rel` in the directory as it is now. Its parent is opened
 * beneath the root without following any symlink: an entry below a link
 * of the host (which the diff replaces by a directory, or the walk has
 * followed already) is not the entry at that path, so it counts as absent.
 */
static enum entry host_entry(struct pdk__ws_view *v, const char *rel, char **link)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	const char *slash = strrchr(rel, '/');
	_cleanup_free_ char *dir =
		slash != NULL ? pdk_xasprintf("%.*s", (int)(slash - rel), rel) : NULL;
	const char *name = slash != NULL ? slash + 1 : rel;
	_cleanup_close_ int dfd = -1;
	char buf[PATH_MAX];
	struct stat st;
	ssize_t n;

	dfd = (int)syscall(SYS_openat2, v->root, dir != NULL ? dir : ".", &how, sizeof(how));
	if (dfd < 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return ENTRY_ABSENT;
	if (S_ISDIR(st.st_mode))
		return ENTRY_DIR;
	if (!S_ISLNK(st.st_mode))
		return ENTRY_OTHER;
	n = readlinkat(dfd, name, buf, sizeof(buf) - 1);
	if (n >= 0) {
		buf[n] = '\0';
		*link = pdk_xstrdup(buf);
	}
	return ENTRY_LINK; /* *link stays NULL when it cannot be read: judged as outside */
}

/* The entry at `rel` after the commit: the diff's, else the directory's. */
static enum entry view_entry(struct pdk__ws_view *v, const char *rel, char **link)
{
	const struct pdk_ws_change *ch = find_change(v, rel);

	*link = NULL;
	if (ch == NULL)
		return host_entry(v, rel, link);
	if (ch->kind == PDK_WS_DELETED)
		return ENTRY_ABSENT;
	if (S_ISDIR(ch->mode))
		return ENTRY_DIR;
	if (!S_ISLNK(ch->mode))
		return ENTRY_OTHER;
	if (ch->link != NULL)
		*link = pdk_xstrdup(ch->link);
	return ENTRY_LINK;
}

/* `abs` with "." and ".." taken by their text (".." of "/" is "/"), for messages. */
static char *lexical(const char *abs)
{
	char *out = pdk_xmalloc(strlen(abs) + 2);
	size_t len = 0;

	for (const char *s = abs; *s != '\0';) {
		size_t n;

		while (*s == '/')
			s++;
		n = strcspn(s, "/");
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			while (len > 0 && out[len] != '/')
				len--;
		} else if (n > 0 && !(n == 1 && s[0] == '.')) {
			out[len++] = '/';
			memcpy(out + len, s, n);
			len += n;
		}
		out[len] = '\0';
		s += n;
	}
	if (len == 0)
		memcpy(out, "/", 2);
	return out;
}

/* `path` without doubled or trailing '/' (a new string), for messages. */
static char *tidy(const char *path)
{
	char *out = pdk_xmalloc(strlen(path) + 1);
	size_t len = 0;

	for (const char *s = path; *s != '\0'; s++)
		if (*s != '/' || (len == 0 || out[len - 1] != '/'))
			out[len++] = *s;
	while (len > 1 && out[len - 1] == '/')
		len--;
	out[len] = '\0';
	return out;
}

/* The reason for a walk that left the root for `where` (taken). */
static char *escaped(struct walk *w, char *where)
{
	char *why;

	if (w->via != NULL)
		why = pdk_xasprintf("which leads to '%s' through %s", where, w->via);
	else if (strcmp(where, w->target) == 0)
		why = pdk_xstrdup("which is outside");
	else
		why = pdk_xasprintf("which leads to '%s'", where);
	free(where);
	return why;
}

/* Absolute `t` beneath the root: what follows the root's path in it; else NULL. */
static const char *beneath_root(const struct pdk__ws_view *v, const char *t)
{
	if (strncmp(t, v->root_path, v->root_len) != 0)
		return NULL;
	if (t[v->root_len] != '/' && t[v->root_len] != '\0')
		return NULL;
	return t + v->root_len;
}

/* Go on at the target of the link at `link_path` (the walk is in the link's directory). */
static char *follow(const struct pdk__ws_view *v, struct walk *w, const char *link_path,
		    const char *target)
{
	const char *in = target;
	const char *after = w->rest != NULL ? w->rest + w->pos : "";
	char *rest;

	if (++w->hops > PDK__WS_LINK_HOPS)
		return pdk_xasprintf("which passes more than %d symlinks (a loop)",
				     PDK__WS_LINK_HOPS);
	if (w->hops > 1) {
		free(w->via);
		w->via = pdk_xasprintf("'%s' -> '%s'", link_path, target);
	}
	if (target[0] == '\0')
		return pdk_xasprintf("whose walk meets an empty target at '%s'", link_path);
	if (target[0] == '/') {
		in = beneath_root(v, target);
		if (in == NULL) {
			_cleanup_free_ char *raw = pdk_xasprintf("%s/%s", target, after);

			return escaped(w, tidy(raw));
		}
		w->loc[0] = '\0';
	}
	rest = pdk_xasprintf("%s/%s", in, after);
	free(w->rest);
	w->rest = rest;
	w->pos = 0;
	return NULL;
}

/* A ".." of the walk. */
static char *climb(const struct pdk__ws_view *v, struct walk *w)
{
	char *slash;

	if (w->lost_at != NULL)
		return pdk_xasprintf("whose '..' after '%s' (missing, or not a directory) may lead "
				     "anywhere",
				     w->lost_at);
	if (w->loc[0] == '\0') {
		_cleanup_free_ char *raw = pdk_xasprintf("%.*s/../%s", (int)v->root_len,
							 v->root_path, w->rest + w->pos);

		return escaped(w, lexical(raw));
	}
	slash = strrchr(w->loc, '/');
	if (slash != NULL)
		*slash = '\0';
	else
		w->loc[0] = '\0';
	return NULL;
}

/* The next component of what is left (a new string; "" at the end). */
static char *next_name(struct walk *w)
{
	const char *s = w->rest + w->pos;
	size_t n;

	while (*s == '/')
		s++;
	n = strcspn(s, "/");
	w->pos = (size_t)(s + n - w->rest);
	return pdk_xasprintf("%.*s", (int)n, s);
}

/* One component of the walk: NULL to go on, or the reason it is outside. */
static char *step(struct pdk__ws_view *v, struct walk *w)
{
	_cleanup_free_ char *name = next_name(w);
	_cleanup_free_ char *link = NULL;
	char *cand;

	if (name[0] == '\0' || strcmp(name, ".") == 0)
		return NULL;
	if (strcmp(name, "..") == 0)
		return climb(v, w);
	cand = w->loc[0] != '\0' ? pdk_xasprintf("%s/%s", w->loc, name) : pdk_xstrdup(name);
	if (w->lost_at == NULL) {
		enum entry e = view_entry(v, cand, &link);

		if (e == ENTRY_LINK) {
			char *why = link != NULL
					    ? follow(v, w, cand, link)
					    : pdk_xasprintf("whose walk meets the symlink '%s', "
							    "which cannot be read",
							    cand);

			free(cand);
			return why;
		}
		if (e != ENTRY_DIR)
			w->lost_at = pdk_xstrdup(cand);
	}
	free(w->loc);
	w->loc = cand;
	return NULL;
}

char *pdk__ws_link_outside(struct pdk__ws_view *v, const char *path, const char *target)
{
	const char *slash = strrchr(path, '/');
	struct walk w = {.target = target};
	char *why;

	w.loc = slash != NULL ? pdk_xasprintf("%.*s", (int)(slash - path), path) : pdk_xstrdup("");
	why = follow(v, &w, path, target);
	while (why == NULL && w.rest[w.pos] != '\0')
		why = step(v, &w);
	free(w.loc);
	free(w.rest);
	free(w.via);
	free(w.lost_at);
	return why;
}
