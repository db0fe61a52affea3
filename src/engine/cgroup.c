/*
 * cgroup.c - the front of the cgroup module: name checks, backend choice,
 * parent resolution, and the parts v1 and v2 share (attach, the kill loop,
 * removal). See docs/internals/cgroup.md for the design.
 */
#include "common.h"
#include "base.h"
#include "cgroup-internal.h"
#include "cgroup.h"

#include <inttypes.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define READ_MAX       (64 * 1024)
#define RETRY_SLEEP_NS (10 * 1000 * 1000) /* 10 ms */
#define KILL_ROUNDS    100                /* x 10 ms: tasks get about 1 s to die */
#define RMDIR_ROUNDS   100                /* x 10 ms: rmdir retries EBUSY for about 1 s */

static void sleep_a_little(void)
{
	struct timespec ts = {0, RETRY_SLEEP_NS};

	(void)nanosleep(&ts, NULL); /* a short or interrupted nap is fine */
}

/* --- file helpers --- */

char *pdk__cgroup_join(const char *dir, const char *file)
{
	size_t n = strlen(dir);

	if (n > 0 && dir[n - 1] == '/')
		return pdk_xasprintf("%s%s", dir, file);
	return pdk_xasprintf("%s/%s", dir, file);
}

int pdk__cgroup_write(const char *dir, const char *file, const char *data, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk__cgroup_join(dir, file);

	return pdk_write_file_at(AT_FDCWD, path, data, false, err);
}

int pdk__cgroup_write_u64(const char *dir, const char *file, uint64_t v, struct pdk_error **err)
{
	char buf[32];

	(void)snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return pdk__cgroup_write(dir, file, buf, err);
}

int pdk__cgroup_read(const char *dir, const char *file, char **out, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk__cgroup_join(dir, file);

	return pdk_read_file_at(AT_FDCWD, path, READ_MAX, out, err);
}

bool pdk__cgroup_exists(const char *dir, const char *file)
{
	_cleanup_free_ char *path = pdk__cgroup_join(dir, file);

	return access(path, F_OK) == 0;
}

/* Parse the unsigned integer at s, which must end at whitespace or NUL. */
static int parse_number(const char *s, uint64_t *out)
{
	char *end = NULL;
	unsigned long long v;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || (*end != '\0' && *end != '\n' && *end != ' '))
		return -EINVAL;
	*out = v;
	return 0;
}

int pdk__cgroup_single(const char *text, uint64_t *out)
{
	return parse_number(text, out);
}

int pdk__cgroup_keyed(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);
	const char *line = text;

	while (line != NULL && *line != '\0') {
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
			return parse_number(line + klen + 1, out);
		line = strchr(line, '\n');
		if (line != NULL)
			line++;
	}
	return -ENOENT;
}

/*
 * dir/file into buf with a single read(), NUL-terminated: 0; 1 when the
 * text fills buf (then it may go on, and the caller reads it whole); -1
 * when it cannot be opened or read.
 */
static int stat_read(const char *dir, const char *file, char *buf, size_t len)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);
	ssize_t got;

	if (snprintf(path, sizeof(path), "%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/",
		     file) >= (int)sizeof(path))
		return -1;
	got = pdk_read_once(path, buf, len);
	if (got < 0)
		return -1;
	return (size_t)got == len - 1 ? 1 : 0;
}

/* The text of dir/file for stats: buf, or *big (allocated) when longer; NULL when unreadable. */
static const char *stat_text(const char *dir, const char *file, char *buf, size_t len, char **big)
{
	_cleanup_error_ struct pdk_error *ignored = NULL;
	int rc = dir != NULL ? stat_read(dir, file, buf, len) : -1;

	if (rc == 1 && pdk__cgroup_read(dir, file, big, &ignored) == 0)
		return *big;
	return rc == 0 ? buf : NULL;
}

void pdk__cgroup_stat_single(const char *dir, const char *file, uint64_t *out)
{
	char buf[4096];
	_cleanup_free_ char *big = NULL;
	const char *text = stat_text(dir, file, buf, sizeof(buf), &big);

	if (text != NULL)
		(void)pdk__cgroup_single(text, out); /* unparsable: stays as it was */
}

void pdk__cgroup_stat_keyed(const char *dir, const char *file, const char *key, uint64_t *out)
{
	char buf[4096];
	_cleanup_free_ char *big = NULL;
	const char *text = stat_text(dir, file, buf, sizeof(buf), &big);

	if (text != NULL)
		(void)pdk__cgroup_keyed(text, key, out); /* absent key: stays as it was */
}

/*
 * Read at every command's start (the supervisor's exec keeps the count to
 * tell an OOM kill during the command), so the file is opened once and read
 * again from its start each time: a cgroup file's text is made anew at each
 * read from offset 0. 0.6 µs a read against 5.2 µs for open, read and close
 * (this machine, cgroup v1).
 */
uint64_t pdk__cgroup_oom_read(struct pdk_cgroup *cg, const char *dir, const char *file)
{
	char buf[4096], path[PATH_MAX];
	uint64_t n = 0;
	ssize_t got;

	if (cg->oom_fd < 0 && dir != NULL &&
	    snprintf(path, sizeof(path), "%s/%s", dir, file) < (int)sizeof(path))
		cg->oom_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (cg->oom_fd < 0)
		return 0;
	got = pread(cg->oom_fd, buf, sizeof(buf) - 1, 0);
	if (got < 0)
		return 0;
	buf[got] = '\0';
	(void)pdk__cgroup_keyed(buf, "oom_kill", &n); /* absent: 0 */
	return n;
}

static void oom_close(struct pdk_cgroup *cg)
{
	if (cg->oom_fd >= 0)
		(void)close(cg->oom_fd);
	cg->oom_fd = -1;
}

/* --- directories of one sandbox cgroup --- */

int pdk__cgroup_find_dir(const struct pdk_cgroup *cg, const char *path)
{
	for (size_t i = 0; i < cg->n_dirs; i++)
		if (strcmp(cg->dirs[i].path, path) == 0)
			return (int)i;
	return -1;
}

int pdk__cgroup_add_dir(struct pdk_cgroup *cg, char *path)
{
	int found = pdk__cgroup_find_dir(cg, path);

	if (found >= 0 || cg->n_dirs >= PDK_ARRAY_SIZE(cg->dirs)) {
		free(path);
		return found >= 0 ? found : -E2BIG; /* E2BIG: one dir per v1 controller at most */
	}
	cg->dirs[cg->n_dirs].path = path;
	cg->dirs[cg->n_dirs].v1_ctrls = 0;
	return (int)cg->n_dirs++;
}

/* --- fake trees (unit tests only) --- */

static long fs_magic(const char *dir)
{
	struct statfs sfs;

	if (statfs(dir, &sfs) < 0)
		return 0;
	return (long)sfs.f_type;
}

/*
 * SECURITY: release builds only ever work on a real cgroupfs. The unit-test
 * flavour of the library also accepts a plain directory tree (a "fake tree")
 * so that the v2 backend can be tested on a v1 machine and the v1 one
 * without root; nothing in a release build looks at this.
 */
#ifdef PDK_UNIT_TESTING
static bool fake_tree(const char *dir)
{
	long magic = fs_magic(dir);

	return magic != 0 && magic != CGROUP_SUPER_MAGIC && magic != CGROUP2_SUPER_MAGIC;
}
#else
static bool fake_tree(const char *dir)
{
	(void)dir;
	return false;
}
#endif

/*
 * The kernel fills a new cgroup directory with its control files. A fake
 * tree imitates that by giving the new directory an empty file for every
 * regular file of its parent, so that the backends' writes (which never
 * create files) behave as on a real cgroupfs.
 */
static int fake_populate(const char *parent, const char *path, struct pdk_error **err)
{
	_cleanup_closedir_ DIR *d = opendir(parent);
	_cleanup_close_ int dfd = open(path, O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;

	if (d == NULL || dfd < 0)
		return pdk_error_set(err, errno, "cannot open fake cgroup '%s'", path);
	while ((de = readdir(d)) != NULL) {
		_cleanup_close_ int fd = -1;

		if (de->d_type != DT_REG)
			continue;
		fd = openat(dfd, de->d_name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return pdk_error_set(err, errno, "cannot create '%s/%s'", path, de->d_name);
	}
	return 0;
}

static int fake_empty(const char *path)
{
	_cleanup_closedir_ DIR *d = opendir(path);
	struct dirent *de;

	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL)
		if (de->d_type == DT_REG && unlinkat(dirfd(d), de->d_name, 0) < 0)
			return -errno;
	return 0;
}

/* --- messages --- */

const char *pdk__cgroup_limit_names(unsigned ctrls)
{
	static const char *const names[] = {
		"accounting",          "memory limit",
		"pids limit",          "memory and pids limits",
		"cpu limit",           "memory and cpu limits",
		"pids and cpu limits", "memory, pids and cpu limits",
	};

	return names[ctrls & 7];
}

static bool plural(unsigned ctrls)
{
	return (ctrls & (ctrls - 1)) != 0;
}

int pdk__cgroup_soft_fail(struct pdk__cgroup_req *req, unsigned ctrls, struct pdk_error **local,
			  struct pdk_error **err)
{
	int rc = *local != NULL ? -(*local)->status : -EINVAL;

	if ((ctrls & req->required) != 0) {
		if (err != NULL && *err == NULL)
			*err = steal_ptr(local);
		pdk_error_free(local);
		return rc;
	}
	req->downgraded |= ctrls & req->wanted;
	pdk_error_free(local);
	return 0;
}

static int mkdir_error(const char *path, int e, unsigned ctrls, struct pdk_error **err)
{
	_cleanup_free_ char *parent = pdk_xstrdup(path);
	char *slash = strrchr(parent, '/');

	if (slash != NULL)
		*slash = '\0';
	if (e == EACCES || e == EPERM || e == EROFS)
		return pdk_error_setx(
			err, e,
			"cannot create cgroup '%s': %s; the %s need%s a delegated cgroup: run as root, or delegate a cgroup to this user and set PADDOCK_CGROUP_PARENT (see docs/internals/cgroup.md), or mark the limit best_effort in the profile",
			path, strerror(e), pdk__cgroup_limit_names(ctrls),
			plural(ctrls) ? "" : "s");
	if (e == ENOENT)
		return pdk_error_setx(
			err, e,
			"cannot create cgroup '%s': the parent cgroup '%s' does not exist; create it, or set PADDOCK_CGROUP_PARENT to an existing cgroup",
			path, parent);
	if (e == EEXIST)
		return pdk_error_setx(
			err, e,
			"cannot create cgroup '%s': it already exists (a sandbox with the same name is running, or a crashed one left it behind: remove it with rmdir)",
			path);
	return pdk_error_set(err, e, "cannot create cgroup '%s'", path);
}

int pdk__cgroup_mkdir(const char *path, unsigned ctrls, struct pdk_error **err)
{
	_cleanup_free_ char *parent = pdk_xstrdup(path);
	char *slash = strrchr(parent, '/');
	int rc;

	if (mkdir(path, 0755) < 0)
		return mkdir_error(path, errno, ctrls, err);
	if (slash != NULL)
		*slash = '\0';
	if (!fake_tree(parent))
		return 0;
	rc = fake_populate(parent, path, err);
	if (rc < 0 && fake_empty(path) == 0)
		(void)rmdir(path); /* best effort: the test tree is temporary */
	return rc;
}

/* rmdir, retrying EBUSY for about a second: killed tasks take a moment to exit. */
static int remove_dir(const char *path, struct pdk_error **err)
{
	int rc = fake_tree(path) ? fake_empty(path) : 0;

	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot empty fake cgroup '%s'", path);
	for (int i = 0; i < RMDIR_ROUNDS; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			break;
		sleep_a_little();
	}
	return pdk_error_set(err, errno, "cannot remove cgroup '%s'", path);
}

static int remove_dirs(struct pdk_cgroup *cg, struct pdk_error **err)
{
	int rc = 0;

	oom_close(cg); /* no file of the directories held open while they go */

	for (size_t i = cg->n_dirs; i-- > 0;) {
		int r = remove_dir(cg->dirs[i].path, err);

		if (r < 0 && rc == 0)
			rc = r;
	}
	return rc;
}

/* --- parent resolution --- */

/* Whether `word` is an item of the `sep`-separated list [list, list + len). */
static bool list_has(const char *list, size_t len, char sep, const char *word)
{
	size_t wlen = strlen(word);
	const char *p = list;
	const char *end = list + len;

	while (p < end) {
		const char *q = memchr(p, sep, (size_t)(end - p));
		size_t n = q != NULL ? (size_t)(q - p) : (size_t)(end - p);

		if (n == wlen && memcmp(p, word, n) == 0)
			return true;
		p += n + 1;
	}
	return false;
}

bool pdk__cgroup_has_word(const char *text, const char *word)
{
	size_t wlen = strlen(word);

	for (const char *p = text; *p != '\0';) {
		size_t n = strcspn(p, " \t\n");

		if (n == wlen && memcmp(p, word, n) == 0)
			return true;
		p += n;
		p += strspn(p, " \t\n");
	}
	return false;
}

static bool self_line_matches(const char *ctrls, size_t len, const char *ctrl)
{
	if (ctrl == NULL)
		return len == 0;
	return list_has(ctrls, len, ',', ctrl);
}

int pdk__cgroup_self_path(const char *text, const char *ctrl, char **out)
{
	const char *line = text;

	while (line != NULL && *line != '\0') {
		const char *eol = strchrnul(line, '\n');
		const char *c1 = memchr(line, ':', (size_t)(eol - line));
		const char *c2 = c1 != NULL ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;

		if (c2 != NULL && self_line_matches(c1 + 1, (size_t)(c2 - c1 - 1), ctrl)) {
			*out = strndup(c2 + 1, (size_t)(eol - c2 - 1));
			if (*out == NULL)
				pdk_oom();
			return 0;
		}
		line = *eol != '\0' ? eol + 1 : NULL;
	}
	return -ENOENT;
}

/*
 * Make `p` canonical in place: one leading '/', no empty components, no
 * trailing '/'. -EINVAL if it is relative or has a "." or ".." component
 * (a parent must not climb out of the hierarchy it names).
 */
static int normalize_cgroup_path(char *p)
{
	char *w = p;
	const char *r = p;

	if (*p != '/')
		return -EINVAL;
	while (*r != '\0') {
		const char *end;
		size_t n;

		while (*r == '/')
			r++;
		end = strchrnul(r, '/');
		n = (size_t)(end - r);
		if ((n == 1 && r[0] == '.') || (n == 2 && r[0] == '.' && r[1] == '.'))
			return -EINVAL;
		if (n > 0) {
			*w++ = '/';
			memmove(w, r, n);
			w += n;
		}
		r = end;
	}
	if (w == p)
		*w++ = '/';
	*w = '\0';
	return 0;
}

/* Make an own-cgroup path relative to the hierarchy's mount root. */
static void strip_mount_root(char **path, const char *mnt_root)
{
	size_t n = strlen(mnt_root);

	if (n <= 1 || strncmp(*path, mnt_root, n) != 0 || ((*path)[n] != '/' && (*path)[n] != '\0'))
		return;
	memmove(*path, *path + n, strlen(*path + n) + 1);
	if (**path == '\0') {
		free(*path);
		*path = pdk_xstrdup("/");
	}
}

static int own_cgroup(struct pdk__cgroup_req *req, const char *ctrl, char **out,
		      struct pdk_error **err)
{
	int rc;

	if (req->self_text == NULL) {
		rc = pdk_read_file_at(AT_FDCWD, req->self_file, READ_MAX, &req->self_text, err);
		if (rc < 0)
			return rc;
	}
	if (pdk__cgroup_self_path(req->self_text, ctrl, out) == 0)
		return 0;
	if (ctrl == NULL)
		return pdk_error_setx(
			err, ENOENT,
			"'%s' has no cgroup v2 line (\"0::/...\"); set PADDOCK_CGROUP_PARENT",
			req->self_file);
	return pdk_error_setx(err, ENOENT, "'%s' has no line for the cgroup v1 '%s' controller",
			      req->self_file, ctrl);
}

int pdk__cgroup_parent(struct pdk__cgroup_req *req, const char *ctrl, const char *mnt_root,
		       char **out, struct pdk_error **err)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *raw = NULL;
	int rc;

	if (req->parent != NULL) {
		path = pdk_xstrdup(req->parent);
	} else {
		rc = own_cgroup(req, ctrl, &path, err);
		if (rc < 0)
			return rc;
		strip_mount_root(&path, mnt_root != NULL ? mnt_root : "/");
	}
	raw = pdk_xstrdup(path); /* normalize_cgroup_path() may have rewritten path when it fails */
	if (normalize_cgroup_path(path) == 0) {
		*out = steal_ptr(&path);
		return 0;
	}
	if (req->parent != NULL)
		return pdk_error_setx(
			err, EINVAL,
			"invalid cgroup parent '%s' (from %s): it must be an absolute path inside the hierarchy, without '.' or '..'",
			raw, req->parent_from);
	return pdk_error_setx(
		err, EINVAL,
		"own cgroup '%s' (from '%s') is not usable as a parent (outside this cgroup namespace?); set PADDOCK_CGROUP_PARENT",
		raw, req->self_file);
}

/* --- finding hierarchies --- */

/* Whether `mp` is `root` (exact) or below it. */
static bool mount_matches(const char *root, const char *mp, bool exact)
{
	size_t n = strlen(root);

	if (strcmp(root, "/") == 0)
		return exact ? strcmp(mp, "/") == 0 : mp[0] == '/';
	if (strncmp(mp, root, n) != 0)
		return false;
	return exact ? mp[n] == '\0' : mp[n] == '/';
}

/*
 * One mountinfo line: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS".
 * Mount points with spaces (escaped as \040) are not expected under a cgroupfs root.
 */
static bool mountinfo_line_matches(char *line, const char *root, const char *ctrl, char **mp,
				   char **mroot)
{
	char *f[40];
	size_t n = 0, dash = 0;
	char *save = NULL;

	for (char *t = strtok_r(line, " \n", &save); t != NULL && n < PDK_ARRAY_SIZE(f);
	     t = strtok_r(NULL, " \n", &save))
		f[n++] = t;
	for (size_t i = 6; i < n && dash == 0; i++)
		if (strcmp(f[i], "-") == 0)
			dash = i;
	if (dash == 0 || dash + 3 >= n)
		return false;
	if (strcmp(f[dash + 1], ctrl != NULL ? "cgroup" : "cgroup2") != 0)
		return false;
	if (ctrl != NULL && !list_has(f[dash + 3], strlen(f[dash + 3]), ',', ctrl))
		return false;
	if (!mount_matches(root, f[4], ctrl == NULL))
		return false;
	*mp = f[4];
	*mroot = f[3];
	return true;
}

int pdk__cgroup_find_mount(FILE *mountinfo, const char *root, const char *ctrl, char **mnt_dir,
			   char **mnt_root)
{
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;

	while (getline(&line, &cap, mountinfo) > 0) {
		char *mp = NULL, *mroot = NULL;

		if (!mountinfo_line_matches(line, root, ctrl, &mp, &mroot))
			continue;
		*mnt_dir = pdk_xstrdup(mp);
		*mnt_root = pdk_xstrdup(mroot);
		return 0;
	}
	return -ENOENT;
}

/*
 * mountinfo is read once per request and searched in memory: the backend's
 * choice and each of the five v1 controllers used to read it anew (the
 * kernel formats every mount of the namespace at each read). A text larger
 * than MOUNTINFO_KEEP (hosts with thousands of mounts) is read per lookup.
 */
#define MOUNTINFO_KEEP ((size_t)256 << 10)

static FILE *mountinfo_open(struct pdk__cgroup_req *req)
{
	if (!req->mountinfo_tried) {
		req->mountinfo_tried = true;
		if (pdk_read_file_at(AT_FDCWD, PDK__CGROUP_MOUNTINFO, MOUNTINFO_KEEP,
				     &req->mountinfo, NULL) < 0)
			req->mountinfo = NULL;
	}
	if (req->mountinfo == NULL)
		return fopen(PDK__CGROUP_MOUNTINFO, "re");
	if (req->mountinfo[0] == '\0') {
		errno = ENOENT;
		return NULL;
	}
	return fmemopen(req->mountinfo, strlen(req->mountinfo), "r");
}

static int mountinfo_lookup(struct pdk__cgroup_req *req, const char *ctrl, char **mnt_dir,
			    char **mnt_root)
{
	_cleanup_fclose_ FILE *f = mountinfo_open(req);

	if (f == NULL)
		return -errno;
	return pdk__cgroup_find_mount(f, req->root, ctrl, mnt_dir, mnt_root);
}

/* root/<name>, when it is a cgroup v1 mount (or, in tests, a fake one). */
static int probe_v1_dir(const char *root, const char *name, char **mnt_dir)
{
	_cleanup_free_ char *path = pdk__cgroup_join(root, name);
	_cleanup_free_ char *real = realpath(path, NULL);
	struct stat st;

	if (real == NULL || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
		return -ENOENT;
	if (fs_magic(real) != CGROUP_SUPER_MAGIC && !fake_tree(real))
		return -ENOENT;
	*mnt_dir = steal_ptr(&real);
	return 0;
}

int pdk__cgroup_v1_find(struct pdk__cgroup_req *req, const char *ctrl, char **mnt_dir,
			char **mnt_root)
{
	const char *const names[] = {ctrl, "cpu,cpuacct", "cpuacct,cpu"};
	bool cpuish = strcmp(ctrl, "cpu") == 0 || strcmp(ctrl, "cpuacct") == 0;

	if (mountinfo_lookup(req, ctrl, mnt_dir, mnt_root) == 0)
		return 0;
	for (size_t i = 0; i < (cpuish ? PDK_ARRAY_SIZE(names) : 1); i++) {
		if (probe_v1_dir(req->root, names[i], mnt_dir) == 0) {
			*mnt_root = pdk_xstrdup("/");
			return 0;
		}
	}
	return -ENOENT;
}

char *pdk__cgroup_v2_mount_root(struct pdk__cgroup_req *req)
{
	_cleanup_free_ char *mnt_dir = NULL;
	char *mnt_root = NULL;

	if (mountinfo_lookup(req, NULL, &mnt_dir, &mnt_root) == 0)
		return mnt_root;
	return pdk_xstrdup("/");
}

/* --- backend choice --- */

static enum pdk_cgroup_version detect(struct pdk__cgroup_req *req)
{
	static const char *const v1_ctrls[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

	if (fs_magic(req->root) == CGROUP2_SUPER_MAGIC)
		return PDK_CGROUP_V2;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(v1_ctrls); i++) {
		_cleanup_free_ char *dir = NULL;
		_cleanup_free_ char *mroot = NULL;

		if (pdk__cgroup_v1_find(req, v1_ctrls[i], &dir, &mroot) == 0)
			return PDK_CGROUP_V1;
	}
	return PDK_CGROUP_AUTO;
}

static int pick_backend(struct pdk_cgroup *cg, struct pdk__cgroup_req *req,
			enum pdk_cgroup_version version, struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *local = NULL;

	if (version == PDK_CGROUP_AUTO)
		version = detect(req);
	switch (version) {
	case PDK_CGROUP_V2:
		if (fs_magic(req->root) == CGROUP2_SUPER_MAGIC || fake_tree(req->root)) {
			cg->ops = &pdk__cgroup_v2_ops;
			break;
		}
		(void)pdk_error_setx(&local, ENOTSUP,
				     "'%s' is not a cgroup2 file system; the %s cannot be applied",
				     req->root, pdk__cgroup_limit_names(req->required));
		return pdk__cgroup_soft_fail(req, req->wanted, &local, err);
	case PDK_CGROUP_V1:
		cg->ops = &pdk__cgroup_v1_ops;
		break;
	case PDK_CGROUP_AUTO:
	default:
		(void)pdk_error_setx(
			&local, ENOENT,
			"no cgroup file system at '%s' (neither cgroup2 nor cgroup v1 controllers); the %s cannot be applied: mount cgroupfs there, or mark the limit best_effort in the profile",
			req->root, pdk__cgroup_limit_names(req->required));
		return pdk__cgroup_soft_fail(req, req->wanted, &local, err);
	}
	cg->version = cg->ops->version;
	return 0;
}

/* --- public API --- */

static int check_name(const char *name, struct pdk_error **err)
{
	static const char allowed[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
	size_t n = name != NULL ? strlen(name) : 0;

	if (n > 0 && n <= 200 && strspn(name, allowed) == n && strcmp(name, ".") != 0 &&
	    strcmp(name, "..") != 0)
		return 0;
	return pdk_error_setx(
		err, EINVAL,
		"invalid cgroup name '%s': use 1 to 200 of [A-Za-z0-9._-], not '.' or '..'",
		name != NULL ? name : "(null)");
}

static char *normalize_root(const char *root)
{
	char *r = pdk_xstrdup(root);
	size_t n = strlen(r);

	while (n > 1 && r[n - 1] == '/')
		r[--n] = '\0';
	return r;
}

static unsigned wanted_ctrls(const struct pdk_cgroup_limits *lim)
{
	return (lim->memory ? PDK_CGROUP_MEMORY : 0U) | (lim->pids ? PDK_CGROUP_PIDS : 0U) |
	       (lim->cpu_milli ? PDK_CGROUP_CPU : 0U);
}

static void set_parent(struct pdk__cgroup_req *req, const struct pdk_cgroup_opts *opts)
{
	if (opts->parent != NULL && *opts->parent != '\0') {
		req->parent = opts->parent;
		req->parent_from =
			opts->parent_from ? opts->parent_from : "the cgroup parent option";
	}
}

static void cgroup_free_p(struct pdk_cgroup **cg)
{
	pdk_cgroup_free(*cg);
}

struct pdk_cgroup *pdk_cgroup_new(const char *name, const struct pdk_cgroup_opts *opts,
				  const struct pdk_cgroup_limits *limits, unsigned required,
				  unsigned *downgraded, struct pdk_error **err)
{
	static const struct pdk_cgroup_opts no_opts;
	static const struct pdk_cgroup_limits no_limits;
	__attribute__((cleanup(cgroup_free_p))) struct pdk_cgroup *cg = NULL;
	_cleanup_free_ char *root = NULL;
	struct pdk__cgroup_req req = {0};
	int rc;

	if (downgraded != NULL)
		*downgraded = 0;
	if (check_name(name, err) < 0)
		return NULL;
	opts = opts != NULL ? opts : &no_opts;
	req.limits = limits != NULL ? limits : &no_limits;
	root = normalize_root(opts->root != NULL ? opts->root : PDK__CGROUP_DEFAULT_ROOT);
	req.root = root;
	req.self_file =
		opts->self_cgroup_file != NULL ? opts->self_cgroup_file : PDK__CGROUP_SELF_FILE;
	if (opts->mountinfo != NULL) {
		req.mountinfo = pdk_xstrdup(opts->mountinfo);
		req.mountinfo_tried = true;
	}
	req.wanted = wanted_ctrls(req.limits);
	req.required = required & req.wanted;
	set_parent(&req, opts);
	cg = pdk_xcalloc(1, sizeof(*cg));
	cg->oom_fd = -1;
	cg->leaf = pdk_xasprintf(PDK__CGROUP_PREFIX "%s", name);
	rc = pick_backend(cg, &req, opts->version, err);
	if (rc == 0 && cg->ops != NULL && cg->ops->create(cg, &req, err) < 0) {
		_cleanup_error_ struct pdk_error *ignored = NULL;

		(void)remove_dirs(cg, &ignored); /* empty: nothing was attached yet */
		rc = -EIO;
	}
	free(req.mountinfo);
	free(req.self_text);
	if (rc < 0)
		return NULL;
	if (downgraded != NULL)
		*downgraded = req.downgraded;
	return steal_ptr(&cg);
}

enum pdk_cgroup_version pdk_cgroup_version(const struct pdk_cgroup *cg)
{
	return cg != NULL ? cg->version : PDK_CGROUP_AUTO;
}

const char *pdk_cgroup_path(const struct pdk_cgroup *cg)
{
	if (cg == NULL || cg->n_dirs == 0)
		return NULL;
	for (size_t i = 0; i < cg->n_dirs; i++)
		if (cg->dirs[i].v1_ctrls & (1U << PDK__V1_MEMORY))
			return cg->dirs[i].path;
	return cg->dirs[0].path;
}

int pdk_cgroup_attach(struct pdk_cgroup *cg, pid_t pid, struct pdk_error **err)
{
	char buf[32];

	if (cg == NULL || cg->n_dirs == 0)
		return 0;
	if (pid <= 0)
		return pdk_error_setx(err, EINVAL, "cannot attach pid %d to a cgroup", (int)pid);
	(void)snprintf(buf, sizeof(buf), "%d", (int)pid);
	for (size_t i = 0; i < cg->n_dirs; i++) {
		int rc = pdk__cgroup_write(cg->dirs[i].path, "cgroup.procs", buf, err);

		if (rc < 0) {
			(void)pdk_error_wrap(err, "cannot move pid %d into cgroup '%s'", (int)pid,
					     cg->dirs[i].path);
			return rc;
		}
	}
	return 0;
}

void pdk__cgroup_poll(const char *dir, bool (*done)(const char *dir))
{
	struct timespec ts = {0, 2 * 1000000};

	for (int i = 0; i < 50 && !done(dir); i++)
		(void)nanosleep(&ts, NULL); /* a short nap is fine */
}

int pdk__cgroup_freeze_file(const char *dir, const char *file, const char *state, bool frozen,
			    bool (*done)(const char *dir), struct pdk_error **err)
{
	int rc = pdk__cgroup_write(dir, file, state, err);

	if (rc == 0 && frozen)
		pdk__cgroup_poll(dir, done);
	return rc;
}

int pdk_cgroup_open_procs(struct pdk_cgroup *cg, int *fds, size_t max, struct pdk_error **err)
{
	size_t n = 0;

	for (size_t i = 0; cg != NULL && i < cg->n_dirs; i++) {
		_cleanup_free_ char *p = pdk_xasprintf("%s/cgroup.procs", cg->dirs[i].path);
		int fd;

		if (n == max) {
			errno = E2BIG;
			fd = -1;
		} else {
			fd = TEMP_FAILURE_RETRY(open(p, O_WRONLY | O_CLOEXEC));
		}
		if (fd < 0) {
			int e = errno;

			while (n > 0)
				(void)close(fds[--n]);
			return pdk_error_set(err, e, "cannot open '%s'", p);
		}
		fds[n++] = fd;
	}
	return (int)n;
}

int pdk_cgroup_open_dir(struct pdk_cgroup *cg)
{
	if (cg == NULL || cg->version != PDK_CGROUP_V2 || cg->n_dirs != 1)
		return -1;
	return TEMP_FAILURE_RETRY(open(cg->dirs[0].path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

int pdk_cgroup_join_child(const int *fds, size_t n, struct pdk_child_error *ce)
{
	for (size_t i = 0; i < n; i++) {
		if (TEMP_FAILURE_RETRY(write(fds[i], "0", 1)) != 1)
			return pdk_child_error_set(ce, errno, "cannot join the sandbox cgroup");
	}
	return 0;
}

int pdk_cgroup_stats(struct pdk_cgroup *cg, struct pdk_cgroup_stats *st, struct pdk_error **err)
{
	(void)err; /* missing files are not errors: their fields stay 0 */
	memset(st, 0, sizeof(*st));
	if (cg != NULL && cg->n_dirs > 0)
		cg->ops->stats(cg, st, true);
	return 0;
}

void pdk_cgroup_end_stats(struct pdk_cgroup *cg, struct pdk_cgroup_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (cg != NULL && cg->n_dirs > 0)
		cg->ops->stats(cg, st, false);
}

uint64_t pdk_cgroup_oom_kills(struct pdk_cgroup *cg)
{
	return cg != NULL && cg->n_dirs > 0 ? cg->ops->oom_kills(cg) : 0;
}

/*
 * Count the pids in cgroup.procs of dir; with `send`, SIGKILL each. Our own
 * pid is never signalled (it can only be there by a caller's mistake, and
 * the kill loop then reports the cgroup as not emptied).
 */
static int scan_dir(const char *dir, bool send, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk__cgroup_join(dir, "cgroup.procs");
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	int n = 0;

	if (f == NULL)
		return pdk_error_set(err, errno, "cannot open '%s'", path);
	while (getline(&line, &cap, f) > 0) {
		uint64_t pid = 0;

		if (parse_number(line, &pid) < 0 || pid == 0 || pid > INT32_MAX)
			continue;
		n++;
		if (send && (pid_t)pid != getpid() && kill((pid_t)pid, SIGKILL) < 0 &&
		    errno != ESRCH)
			return pdk_error_set(err, errno, "cannot kill pid %" PRIu64 " of '%s'", pid,
					     dir);
	}
	return n;
}

static int scan_procs(struct pdk_cgroup *cg, bool send, struct pdk_error **err)
{
	int total = 0;

	for (size_t i = 0; i < cg->n_dirs; i++) {
		int n = scan_dir(cg->dirs[i].path, send, err);

		if (n < 0)
			return n;
		total += n;
	}
	return total;
}

/*
 * One round of killing. Freezing first stops a fork bomb from outrunning
 * the loop, and (v1) keeps the pids in cgroup.procs from exiting and being
 * reused by unrelated processes between the read and the kill().
 */
static int kill_round(struct pdk_cgroup *cg, struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *ignored = NULL;
	bool frozen;
	int rc = cg->ops->kill_all != NULL ? cg->ops->kill_all(cg, err) : -ENOTSUP;

	if (rc != -ENOTSUP)
		return rc;
	frozen = cg->ops->freeze(cg, true, &ignored) == 0;
	rc = scan_procs(cg, true, err);
	if (frozen) {
		int r = cg->ops->freeze(cg, false, err);

		rc = rc < 0 ? rc : r;
	}
	return rc < 0 ? rc : 0;
}

int pdk_cgroup_kill(struct pdk_cgroup *cg, struct pdk_error **err)
{
	if (cg == NULL || cg->n_dirs == 0)
		return 0;
	for (int i = 0; i < KILL_ROUNDS; i++) {
		int n = scan_procs(cg, false, err);

		if (n <= 0)
			return n;
		n = kill_round(cg, err);
		if (n < 0)
			return n;
		sleep_a_little();
	}
	return pdk_error_setx(err, EBUSY,
			      "tasks are still in cgroup '%s' after about %d ms of SIGKILL",
			      pdk_cgroup_path(cg), KILL_ROUNDS * RETRY_SLEEP_NS / 1000000);
}

int pdk_cgroup_freeze(struct pdk_cgroup *cg, bool frozen, unsigned wait_ms, struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *ignored = NULL;
	struct timespec ts = {0, 1000000};
	int rc;

	if (cg == NULL || cg->n_dirs == 0)
		return pdk_error_setx(
			err, ENOTSUP,
			"no cgroup: the sandbox cannot be %s (unprivileged, it needs a "
			"delegated cgroup: PADDOCK_CGROUP_PARENT)",
			frozen ? "frozen" : "thawed");
	rc = cg->ops->freeze(cg, frozen, err);
	if (rc == -ENOTSUP)
		return pdk_error_setx(err, ENOTSUP,
				      "cgroup '%s' has no freezer (v1: mount the freezer "
				      "controller; v2: Linux 5.2 or later)",
				      pdk_cgroup_path(cg));
	if (rc < 0 || !frozen)
		return rc;
	for (unsigned i = 0; i < wait_ms && !cg->ops->is_frozen(cg); i++)
		(void)nanosleep(&ts, NULL); /* a short nap is fine */
	if (cg->ops->is_frozen(cg))
		return 0;
	(void)!cg->ops->freeze(cg, false, &ignored); /* do not leave it half frozen */
	return pdk_error_setx(err, EBUSY, "cgroup '%s' did not freeze within %u ms",
			      pdk_cgroup_path(cg), wait_ms);
}

/*
 * The usual end: the sandbox's tasks are gone already (its init was reaped,
 * and the pid namespace took the rest with it), so each directory is
 * removed at once, the last one joined first, without reading any
 * cgroup.procs (16 system calls on v1). The kernel refuses to remove a
 * cgroup that has a task (EBUSY): the first refusal stops this, and the
 * kill loop runs over the directories still there. On v1 every hierarchy
 * holds the same tasks, so when the first one could go, the others are
 * empty too. Whether it emptied them all.
 */
static bool remove_if_empty(struct pdk_cgroup *cg)
{
	oom_close(cg);
	while (cg->n_dirs > 0) {
		char *path = cg->dirs[cg->n_dirs - 1].path;

		if (fake_tree(path) || (rmdir(path) < 0 && errno != ENOENT))
			return false;
		free(path);
		cg->n_dirs--;
	}
	return true;
}

int pdk_cgroup_destroy(struct pdk_cgroup *cg, struct pdk_error **err)
{
	int rc, r;

	if (cg == NULL)
		return 0;
	if (remove_if_empty(cg)) {
		pdk_cgroup_free(cg);
		return 0;
	}
	rc = pdk_cgroup_kill(cg, err);
	r = remove_dirs(cg, err); /* even when the kill failed: remove what can be removed */
	pdk_cgroup_free(cg);
	return rc < 0 ? rc : r;
}

void pdk_cgroup_free(struct pdk_cgroup *cg)
{
	if (cg == NULL)
		return;
	oom_close(cg);
	for (size_t i = 0; i < cg->n_dirs; i++)
		free(cg->dirs[i].path);
	free(cg->leaf);
	free(cg);
}

char *pdk_cgroup_describe(const struct pdk_cgroup *cg)
{
	char *text = pdk_xstrdup("");

	for (size_t i = 0; cg != NULL && i < cg->n_dirs; i++) {
		char *next = pdk_xasprintf("%s%d %u %s\n", text, (int)cg->version,
					   cg->dirs[i].v1_ctrls, cg->dirs[i].path);

		free(text);
		text = next;
	}
	return text;
}

/* An absolute path under `root`, no "." or ".." component, ending in `leaf`. */
static bool adoptable_dir(const char *path, const char *root, const char *leaf)
{
	size_t rl = strlen(root), pl = strlen(path), ll = strlen(leaf);

	if (strncmp(path, root, rl) != 0 || path[rl] != '/' || pl <= ll + 1 ||
	    strcmp(path + pl - ll, leaf) != 0 || path[pl - ll - 1] != '/')
		return false;
	for (const char *p = path; (p = strchr(p, '/')) != NULL; p++)
		if (strncmp(p, "/./", 3) == 0 || strncmp(p, "/../", 4) == 0 ||
		    strcmp(p, "/.") == 0 || strcmp(p, "/..") == 0 || strncmp(p, "//", 2) == 0)
			return false;
	return true;
}

int pdk_cgroup_adopt(const char *text, const char *name, const char *root, struct pdk_cgroup **out,
		     struct pdk_error **err)
{
	__attribute__((cleanup(cgroup_free_p))) struct pdk_cgroup *cg = NULL;
	_cleanup_free_ char *r = normalize_root(root != NULL ? root : PDK__CGROUP_DEFAULT_ROOT);
	_cleanup_free_ char *copy = pdk_xstrdup(text);
	char *save = NULL;

	if (check_name(name, err) < 0)
		return -EINVAL;
	cg = pdk_xcalloc(1, sizeof(*cg));
	cg->oom_fd = -1;
	cg->leaf = pdk_xasprintf(PDK__CGROUP_PREFIX "%s", name);
	for (char *line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		int version = 0, off = 0;
		unsigned ctrls = 0;

		if (cg->n_dirs == PDK__V1_COUNT ||
		    sscanf(line, "%d %u %n", &version, &ctrls, &off) != 2 || off == 0 ||
		    (version != PDK_CGROUP_V1 && version != PDK_CGROUP_V2) ||
		    (cg->n_dirs > 0 && (enum pdk_cgroup_version)version != cg->version) ||
		    ctrls >= (1U << PDK__V1_COUNT) || !adoptable_dir(line + off, r, cg->leaf))
			return pdk_error_setx(err, EINVAL,
					      "not a description of sandbox cgroup '%s': '%s'",
					      cg->leaf, line);
		cg->version = (enum pdk_cgroup_version)version;
		cg->ops = version == PDK_CGROUP_V2 ? &pdk__cgroup_v2_ops : &pdk__cgroup_v1_ops;
		cg->dirs[cg->n_dirs].path = pdk_xstrdup(line + off);
		cg->dirs[cg->n_dirs].v1_ctrls = ctrls;
		cg->n_dirs++;
	}
	*out = steal_ptr(&cg);
	return 0;
}
