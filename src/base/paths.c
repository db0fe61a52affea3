/*
 * paths.c - the state, runtime and profile directories (paths.h).
 */
#include "common.h"
#include "error.h"
#include "paths.h"
#include "util.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The build sets it to PREFIX/LIBEXECDIR/paddock (src/base/meson.build). */
#ifndef PDK_LIBEXECDIR
#define PDK_LIBEXECDIR "/usr/local/libexec/paddock"
#endif

static bool absolute(const char *s)
{
	return s != NULL && s[0] == '/';
}

static char *state_dir(const struct pdk_paths_env *e)
{
	if (e->state_dir != NULL && e->state_dir[0] != '\0')
		return pdk_xstrdup(e->state_dir);
	if (absolute(e->xdg_state_home))
		return pdk_xasprintf("%s/paddock", e->xdg_state_home);
	if (e->euid == 0)
		return pdk_xstrdup("/var/lib/paddock");
	return pdk_xasprintf("%s/.local/state/paddock",
			     e->home != NULL && e->home[0] != '\0' ? e->home : "/tmp");
}

static char *runtime_dir(const struct pdk_paths_env *e)
{
	if (absolute(e->runtime_dir))
		return pdk_xstrdup(e->runtime_dir);
	if (absolute(e->xdg_runtime_dir))
		return pdk_xasprintf("%s/paddock", e->xdg_runtime_dir);
	if (e->euid == 0)
		return pdk_xstrdup("/run/paddock");
	return pdk_xasprintf("/tmp/paddock-%u", (unsigned)e->euid);
}

static char *profile_dir(const struct pdk_paths_env *e)
{
	if (absolute(e->xdg_config_home))
		return pdk_xasprintf("%s/paddock/profiles", e->xdg_config_home);
	if (absolute(e->home))
		return pdk_xasprintf("%s/.config/paddock/profiles", e->home);
	return NULL;
}

void pdk_paths_resolve(const struct pdk_paths_env *env, struct pdk_paths *out)
{
	out->state_dir = state_dir(env);
	out->runtime_dir = runtime_dir(env);
	out->profile_dir = profile_dir(env);
}

void pdk_paths_release(struct pdk_paths *p)
{
	free(p->state_dir);
	free(p->runtime_dir);
	free(p->profile_dir);
	*p = (struct pdk_paths){0};
}

int pdk_paths_private_dir(const char *path, struct pdk_error **err)
{
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (pdk_mkdir_p(path, err) < 0)
		return -1;
	fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0 || fstat(fd, &st) < 0)
		return pdk_error_set(err, errno, "cannot open directory '%s'", path);
	/* SECURITY: a directory someone else made (or can write) is not a place for our files. */
	if (st.st_uid != geteuid())
		return pdk_error_setx(err, EPERM, "'%s' belongs to uid %u, not to uid %u", path,
				      (unsigned)st.st_uid, (unsigned)geteuid());
	if ((st.st_mode & 077) != 0 && fchmod(fd, st.st_mode & 07700) < 0)
		return pdk_error_set(err, errno, "chmod '%s'", path);
	return 0;
}

char *pdk_paths_canonical(const char *path)
{
	char buf[PATH_MAX];
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *parent = NULL, *canon = NULL;

	if (realpath(path, buf) != NULL)
		return pdk_xstrdup(buf);
	if (slash == NULL || slash == path)
		return pdk_xstrdup(path[0] == '\0' ? "/" : path);
	parent = pdk_xasprintf("%.*s", (int)(slash - path), path);
	canon = pdk_paths_canonical(parent);
	if (strcmp(slash + 1, "") == 0 || strcmp(slash + 1, ".") == 0)
		return steal_ptr(&canon);
	if (strcmp(slash + 1, "..") == 0) {
		char *up = strrchr(canon, '/');

		up[up == canon ? 1 : 0] = '\0';
		return steal_ptr(&canon);
	}
	return pdk_xasprintf("%s%s", strcmp(canon, "/") == 0 ? "" : canon, slash);
}

bool pdk_paths_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* ---- the names a directory has through mounts ---- */

/* The fields of one /proc/self/mountinfo line that say what a mount shows where. */
struct mount_line {
	unsigned long id, parent;
	const char *dev;   /* "MAJ:MIN": the file system */
	const char *root;  /* the directory of that file system at the mount's top */
	const char *point; /* where it is mounted */
	const char *type;  /* the file system's type ("" when the line has none) */
};

/* A mount table, parsed once (pdk_mounts_parse()). */
struct pdk_mounts {
	char *raw;  /* the table as read */
	char *text; /* its copy, split in place */
	struct mount_line *m;
	size_t n;
	ssize_t root; /* the namespace's root mount, or -1 */
};

/* mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash), in place. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/*
 * "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE SUPEROPTIONS" (the
 * fields split in place), or false.
 */
static bool parse_mount(char *line, struct mount_line *m)
{
	char *save = NULL, *f[5], *end, *dash = strstr(line, " - ");

	m->type = "";
	if (dash != NULL) {
		*dash = '\0';
		m->type = dash + 3;
		end = strchr(dash + 3, ' ');
		if (end != NULL)
			*end = '\0';
	}
	for (int i = 0; i < 5; i++)
		if ((f[i] = strtok_r(i == 0 ? line : NULL, " ", &save)) == NULL)
			return false;
	unescape(f[3]);
	unescape(f[4]);
	if (f[3][0] != '/' || f[4][0] != '/')
		return false;
	m->id = strtoul(f[0], &end, 10);
	if (*end != '\0')
		return false;
	m->parent = strtoul(f[1], &end, 10);
	if (*end != '\0')
		return false;
	m->dev = f[2];
	m->root = f[3];
	m->point = f[4];
	return true;
}

/* The mount that is `parent`'s child at `point`, the last listed of several; -1 if none. */
static ssize_t child_at(const struct mount_line *m, size_t n, size_t parent, const char *point)
{
	ssize_t found = -1;

	for (size_t i = 0; i < n; i++)
		if (i != parent && m[i].parent == m[parent].id && strcmp(m[i].point, point) == 0)
			found = (ssize_t)i;
	return found;
}

static int cmp_ids(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* The namespace's root mount: "/" mounted on no mount listed. -1 if none is. */
static ssize_t root_mount(const struct mount_line *m, size_t n)
{
	_cleanup_free_ unsigned long *ids = pdk_xmalloc((n + 1) * sizeof(*ids));

	for (size_t i = 0; i < n; i++)
		ids[i] = m[i].id;
	qsort(ids, n, sizeof(*ids), cmp_ids);
	for (size_t i = 0; i < n; i++)
		if (strcmp(m[i].point, "/") == 0 &&
		    bsearch(&m[i].parent, ids, n, sizeof(*ids), cmp_ids) == NULL)
			return (ssize_t)i;
	return -1;
}

/*
 * The mount that shows `path` (canonical), as a lookup finds it: from the root
 * mount, one component after another, into the mount at that point (and
 * the ones stacked on it) whose parent is the mount the lookup is in. A mount on
 * a point that a later mount covers is the covered mount's child, and is out of
 * sight. -1 when there is no root.
 */
static ssize_t showing(const struct pdk_mounts *t, const char *path)
{
	_cleanup_free_ char *prefix = pdk_xstrdup(path);
	const struct mount_line *m = t->m;
	size_t n = t->n;
	ssize_t cur = t->root, next;
	size_t len = strlen(path);

	/* Stacked mounts follow their parents: a table that loops (none the kernel writes) stops.
	 */
	for (size_t end = 1, steps = 0; cur >= 0 && end <= len; end++) {
		if (end > 1 && end < len && path[end] != '/')
			continue;
		/* "/", then "/a", "/a/b" ...: the path cut after each component. */
		memcpy(prefix, path, end);
		prefix[end] = '\0';
		while (steps < n && (next = child_at(m, n, (size_t)cur, prefix)) >= 0) {
			cur = next;
			steps++;
		}
	}
	return cur;
}

/* `base` followed by the part of `path` below `prefix` (`path` is within `prefix`). */
static char *rebase(const char *base, const char *path, const char *prefix)
{
	const char *rest = strcmp(prefix, "/") == 0 ? path : path + strlen(prefix);

	if (strcmp(rest, "/") == 0)
		rest = "";
	if (strcmp(base, "/") == 0)
		return pdk_xstrdup(rest[0] != '\0' ? rest : "/");
	return pdk_xasprintf("%s%s", base, rest);
}

static bool listed(char *const *v, const char *s)
{
	for (; *v != NULL; v++)
		if (strcmp(*v, s) == 0)
			return true;
	return false;
}

/* The table `raw` (taken) parsed. */
static struct pdk_mounts *parse_taken(char *raw)
{
	struct pdk_mounts *t = pdk_xcalloc(1, sizeof(*t));
	char *save = NULL;
	size_t cap = 0;

	t->raw = raw;
	t->text = pdk_xstrdup(raw);
	for (char *line = strtok_r(t->text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (t->n == cap)
			t->m = pdk_xrealloc(t->m, (cap = cap != 0 ? cap * 2 : 64) * sizeof(*t->m));
		t->n += parse_mount(line, &t->m[t->n]);
	}
	t->root = root_mount(t->m, t->n);
	return t;
}

struct pdk_mounts *pdk_mounts_parse(const char *mountinfo)
{
	return parse_taken(pdk_xstrdup(mountinfo));
}

const char *pdk_mounts_text(const struct pdk_mounts *t)
{
	return t->raw;
}

void pdk_mounts_free(struct pdk_mounts *t)
{
	if (t == NULL)
		return;
	free(t->raw);
	free(t->text);
	free(t->m);
	free(t);
}

char **pdk_mounts_aliases(const struct pdk_mounts *t, const char *dir)
{
	_cleanup_free_ char *in_fs = NULL;
	const struct mount_line *m = t->m;
	char **out = NULL;
	ssize_t top;

	pdk_strv_push(&out, dir);
	if ((top = showing(t, dir)) < 0)
		return out;
	/* Where `dir` lies in its file system, then every mount of that file system above it. */
	in_fs = rebase(m[top].root, dir, m[top].point);
	for (size_t i = 0; i < t->n; i++) {
		_cleanup_free_ char *alias = NULL;

		if (strcmp(m[i].dev, m[top].dev) != 0 || !pdk_paths_within(in_fs, m[i].root))
			continue;
		alias = rebase(m[i].point, in_fs, m[i].root);
		/* A mount on top of it hides it there (what is there then is that mount's). */
		if (showing(t, alias) == (ssize_t)i && !listed(out, alias))
			pdk_strv_push_take(&out, steal_ptr(&alias));
	}
	return out;
}

/*
 * The host kernel's own interfaces, which no view may show: procfs
 * (`/proc/PID/root`, `/fd`, `/environ` of the user's own processes reach past every
 * namespace: the ptrace check lets a process of the same uid through), cgroupfs (a
 * delegated cgroup the user owns would let the sandbox raise its own limits), sysfs
 * and the file systems mounted in it (bpf's pinned maps and programs, the tracing and
 * debug interfaces, security and EFI variables, configfs). The sandbox has a /proc of
 * its own, and no /sys. One table for both ways of telling them: the session reads
 * mount types in the mount table, the engine asks statfs() for the magic.
 */
static const struct {
	long magic;
	const char *type; /* in /proc/self/mountinfo */
	const char *name; /* in messages */
} kernel_fs[] = {
	{PROC_SUPER_MAGIC, "proc", "procfs"},
	{SYSFS_MAGIC, "sysfs", "sysfs"},
	{CGROUP_SUPER_MAGIC, "cgroup", "cgroupfs (v1)"},
	{CGROUP2_SUPER_MAGIC, "cgroup2", "cgroupfs (v2)"},
	{BPF_FS_MAGIC, "bpf", "bpffs"},
	{DEBUGFS_MAGIC, "debugfs", "debugfs"},
	{TRACEFS_MAGIC, "tracefs", "tracefs"},
	{SECURITYFS_MAGIC, "securityfs", "securityfs"},
	{EFIVARFS_MAGIC, "efivarfs", "efivarfs"},
	{0x62656570 /* CONFIGFS_MAGIC */, "configfs", "configfs"},
};

const char *pdk_paths_kernel_fs(long magic, const char *type)
{
	for (size_t k = 0; k < PDK_ARRAY_SIZE(kernel_fs); k++)
		if (type != NULL ? strcmp(type, kernel_fs[k].type) == 0
				 : magic == kernel_fs[k].magic)
			return kernel_fs[k].name;
	return NULL;
}

char **pdk_mounts_kernel(const struct pdk_mounts *t)
{
	char **out = NULL;

	for (size_t i = 0; i < t->n; i++)
		if (pdk_paths_kernel_fs(0, t->m[i].type) != NULL &&
		    (out == NULL || !listed(out, t->m[i].point)))
			pdk_strv_push(&out, t->m[i].point);
	return out;
}

char **pdk_paths_aliases_in(const char *mountinfo, const char *dir)
{
	struct pdk_mounts *t = pdk_mounts_parse(mountinfo);
	char **out = pdk_mounts_aliases(t, dir);

	pdk_mounts_free(t);
	return out;
}

char **pdk_paths_kernel_mounts_in(const char *mountinfo)
{
	struct pdk_mounts *t = pdk_mounts_parse(mountinfo);
	char **out = pdk_mounts_kernel(t);

	pdk_mounts_free(t);
	return out;
}

int pdk_mounts_read(struct pdk_mounts **out, struct pdk_error **err)
{
	_cleanup_free_ char *text = NULL;
	/* A mount table of thousands of lines (a container host) is a few hundred KiB. */
	int rc = pdk_read_file_at(AT_FDCWD, "/proc/self/mountinfo", 64u << 20, &text, err);

	*out = rc < 0 ? NULL : parse_taken(steal_ptr(&text));
	return rc < 0 ? rc : 0;
}

int pdk_paths_aliases(const char *dir, char ***out, struct pdk_error **err)
{
	struct pdk_mounts *t = NULL;
	int rc = pdk_mounts_read(&t, err);

	*out = rc < 0 ? NULL : pdk_mounts_aliases(t, dir);
	pdk_mounts_free(t);
	return rc;
}

/* The directory of the running executable (a new string), or NULL. */
static char *self_dir(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash == NULL)
		return NULL;
	*slash = '\0';
	return pdk_xstrdup(self);
}

/* `path` (taken) when it is an executable regular file, else NULL (and it is freed). */
static char *if_executable(char *path)
{
	struct stat st;

	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
		return path;
	free(path);
	return NULL;
}

char *pdk_paths_helper(const char *name)
{
	_cleanup_free_ char *dir = self_dir();
	char *p = NULL;

	if (dir != NULL)
		p = if_executable(pdk_xasprintf("%s/%s", dir, name));
	if (p == NULL && dir != NULL)
		p = if_executable(pdk_xasprintf("%s/../libexec/paddock/%s", dir, name));
	if (p == NULL)
		p = pdk_xasprintf("%s/%s", PDK_LIBEXECDIR, name);
	return p;
}
