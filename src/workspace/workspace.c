/*
 * workspace.c - change sets: storage, snapshots, rollback, diff, import.
 * The commit into the host directory is in ws-commit.c.
 */
#include "common.h"
#include "base.h"
#include "workspace.h"
#include "workspace-internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define META      "meta.json"
#define OPAQUE_XA "user.overlay.opaque"

static char boot_id_text[37];

static void read_boot_id(void)
{
	_cleanup_close_ int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && read(fd, boot_id_text, 36) == 36)
		boot_id_text[36] = '\0';
	else
		boot_id_text[0] = '\0';
}

/* This boot's id (the kernel's random UUID, new at every boot); "" when unknown. */
static const char *boot_id(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	(void)pthread_once(&once, read_boot_id);
	return boot_id_text;
}

struct pdk_ws {
	char id[37];
	char *dir; /* STATE/ws/ID */
	char *workspace;
	char *sandbox;
	uint64_t created_ns;
	/*
	 * The boot the set was last mounted in (meta.json's "boot_id"): what
	 * tells a set whose sandbox was killed from one whose machine went
	 * down (pdk_ws_unsynced()). Empty: not recorded (an older set).
	 */
	char boot_id[37];
	uint64_t disk_limit;
	unsigned snaps;
	/*
	 * The layer each snapshot was taken on top of: parent[k] < k, and
	 * parent[k] == k - 1 unless snapshot k was copied from a mounted upper
	 * layer (pdk_ws_snapshot_copy). upper_base: the snapshot the upper
	 * layer's changes are relative to (snaps, unless such copies were taken
	 * since the upper layer was started).
	 */
	unsigned parent[PDK_WS_MAX_SNAP + 1];
	unsigned upper_base;
	uint64_t ws_dev;
	uint64_t ws_ino;
	char *upper;
	char *work;
	int lock_fd; /* the change set's directory, flocked; -1 */
	/* Layer root fds for diff, opened on demand: 0 the workspace, 1..snaps, snaps+1 upper. */
	int fds[PDK_WS_MAX_SNAP + 2];
	/* What the spare's last run set aside (GONE), being removed (tidy_start()). */
	pthread_t tidy;
	bool tidying;
	int tidy_fd;      /* the work directory */
	void *tidy_stack; /* its mapping, guard page included */
};

static void close_fds(struct pdk_ws *ws)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(ws->fds); i++) {
		if (ws->fds[i] >= 0)
			(void)close(ws->fds[i]);
		ws->fds[i] = -1;
	}
}

static struct pdk_ws *ws_alloc(void)
{
	struct pdk_ws *ws = pdk_xcalloc(1, sizeof(*ws));

	ws->lock_fd = ws->tidy_fd = -1;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(ws->fds); i++)
		ws->fds[i] = -1;
	return ws;
}

/*
 * overlayfs's mark of a volatile mount, below `base` in the set's work
 * directory: its work/work ("work"), or where pdk_ws_recycle() set that
 * aside (GONE). The directories from the top, then the file.
 */
struct mark_paths {
	char dir[3][32];
	char file[40];
};

static void mark_paths(const char *base, struct mark_paths *m)
{
	(void)snprintf(m->dir[0], sizeof(m->dir[0]), "%s", base);
	(void)snprintf(m->dir[1], sizeof(m->dir[1]), "%s/incompat", base);
	(void)snprintf(m->dir[2], sizeof(m->dir[2]), "%s/incompat/volatile", base);
	(void)snprintf(m->file, sizeof(m->file), "%s/incompat/volatile/dirty", base);
}

/*
 * overlayfs makes work/work and the mark's directories mode 000. Root
 * passes through them; an owner that is not root opens them first (it owns
 * them: the sandbox's root is its uid), as pdk_rm_rf_at() does.
 */
static void open_mark_dirs(int work_fd, const struct mark_paths *m)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(m->dir); i++)
		if (fchmodat(work_fd, m->dir[i], 0700, 0) < 0)
			return;
}

/*
 * Remove the mark below `base`: the file, then its two directories (`base`
 * itself stays). Known names only: no directory is read, nothing is
 * allocated. 0 when removed or never there; -errno otherwise.
 */
static int clear_mark_in(int work_fd, const char *base)
{
	struct mark_paths m;
	bool opened = false;

	mark_paths(base, &m);
	for (;;) {
		int rc = unlinkat(work_fd, m.file, 0) < 0 && errno != ENOENT ? -errno : 0;

		for (size_t i = PDK_ARRAY_SIZE(m.dir) - 1; rc == 0 && i >= 1; i--)
			if (unlinkat(work_fd, m.dir[i], AT_REMOVEDIR) < 0 && errno != ENOENT)
				rc = -errno;
		if (rc != -EACCES || opened)
			return rc;
		open_mark_dirs(work_fd, &m);
		opened = true;
	}
}

/* clear_mark_in() of the set's own work/work, its work directory named by path. */
static int clear_mark_at(const char *work)
{
	_cleanup_close_ int fd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	return clear_mark_in(fd, "work");
}

/*
 * A set taken from the spare (take_spare()) may hold, in its work
 * directory, what the spare's last run left there: overlayfs's work/work,
 * with a volatile mount's mark in it, renamed aside as GONE by
 * pdk_ws_recycle(). Removing it is four ext4 removals (0.4 ms here, on a
 * file system that discards each freed block at once), so it is done on a
 * thread of its own while the sandbox is made, beside the clone and the
 * mounts: the thread blocks every signal (the supervisor's signalfd takes
 * them), touches no memory but its own, and is joined by
 * pdk_ws_tidy_wait(), which the caller calls once the sandbox is made
 * (workspace.h says who else does). A thread that cannot start leaves the
 * removal to be done at once.
 */
#define GONE ".gone"

/*
 * The thread's stack is its own mapping (a guard page below), unmapped at
 * the join: glibc would keep a stack of its own making cached, its touched
 * pages in the idle supervisor's memory. It allocates nothing either, in
 * the common case, so no malloc arena is made for it.
 */
#define TIDY_GUARD 4096
#define TIDY_STACK (256 * 1024)

/* The set-aside directory's known entries; anything else there, the whole tree. */
static void *tidy_main(void *arg)
{
	int fd = *(int *)arg;

	if (clear_mark_in(fd, GONE) < 0 ||
	    (unlinkat(fd, GONE, AT_REMOVEDIR) < 0 && errno != ENOENT))
		(void)!pdk_rm_rf_at(fd, GONE);
	return NULL;
}

static bool tidy_thread(struct pdk_ws *ws)
{
	pthread_attr_t attr;
	bool started = false;

	ws->tidy_stack = mmap(NULL, TIDY_GUARD + TIDY_STACK, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (ws->tidy_stack == MAP_FAILED) {
		ws->tidy_stack = NULL;
		return false;
	}
	if (mprotect(ws->tidy_stack, TIDY_GUARD, PROT_NONE) < 0 || pthread_attr_init(&attr) != 0)
		return false;
	if (pthread_attr_setstack(&attr, (char *)ws->tidy_stack + TIDY_GUARD, TIDY_STACK) == 0)
		started = pdk_thread_start_quiet(&ws->tidy, &attr, tidy_main, &ws->tidy_fd) == 0;
	(void)pthread_attr_destroy(&attr);
	return started;
}

static void tidy_start(struct pdk_ws *ws)
{
	struct stat st;

	ws->tidy_fd = open(ws->work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ws->tidy_fd < 0 || fstatat(ws->tidy_fd, GONE, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		pdk_ws_tidy_wait(ws);
		return;
	}
	ws->tidying = tidy_thread(ws);
	if (!ws->tidying)
		tidy_main(&ws->tidy_fd);
}

void pdk_ws_tidy_wait(struct pdk_ws *ws)
{
	if (ws->tidying)
		(void)pthread_join(ws->tidy, NULL); /* cannot fail: joinable, not us */
	ws->tidying = false;
	if (ws->tidy_stack != NULL)
		(void)munmap(ws->tidy_stack, TIDY_GUARD + TIDY_STACK);
	ws->tidy_stack = NULL;
	if (ws->tidy_fd >= 0)
		(void)close(ws->tidy_fd);
	ws->tidy_fd = -1;
}

void pdk_ws_free(struct pdk_ws *ws)
{
	if (ws == NULL)
		return;
	pdk_ws_tidy_wait(ws);
	close_fds(ws);
	if (ws->lock_fd >= 0)
		(void)close(ws->lock_fd);
	free(ws->dir);
	free(ws->workspace);
	free(ws->sandbox);
	free(ws->upper);
	free(ws->work);
	free(ws);
}

void pdk_ws_json_set_path(json_t *o, const char *key, const char *path)
{
	if (pdk_utf8_valid(path, strlen(path))) {
		pdk_json_set(o, key, json_string(path));
	} else {
		_cleanup_free_ char *k = pdk_xasprintf("%s_hex", key);
		size_t n = strlen(path);
		_cleanup_free_ char *hex = pdk_xmalloc(2 * n + 1);

		for (size_t i = 0; i < n; i++)
			(void)snprintf(hex + 2 * i, 3, "%02x", (unsigned char)path[i]);
		pdk_json_set(o, key, json_null());
		pdk_json_set(o, k, json_string(hex));
	}
}

/* The bytes of pdk_ws_json_set_path()'s KEY_hex form, or NULL. */
static char *unhex(const char *hex)
{
	size_t n = strlen(hex);
	char *out;

	if (n % 2 != 0)
		return NULL;
	out = pdk_xmalloc(n / 2 + 1);
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1 || v == 0) {
			free(out);
			return NULL;
		}
		out[i] = (char)v;
	}
	out[n / 2] = '\0';
	return out;
}

static void set_paths(struct pdk_ws *ws)
{
	free(ws->upper);
	free(ws->work);
	ws->upper = pdk_xasprintf("%s/upper", ws->dir);
	ws->work = pdk_xasprintf("%s/work", ws->dir);
}

/* Each snapshot on top of the one before, the upper layer on top of the last. */
static bool linear(const struct pdk_ws *ws)
{
	for (unsigned k = 1; k <= ws->snaps; k++)
		if (ws->parent[k] != k - 1)
			return false;
	return ws->upper_base == ws->snaps;
}

static void set_linear(struct pdk_ws *ws)
{
	for (unsigned k = 1; k <= ws->snaps; k++)
		ws->parent[k] = k - 1;
	ws->upper_base = ws->snaps;
}

/* "parents" and "upper_base" of meta.json (absent: linear); false when they do not fit. */
static bool read_parents(struct pdk_ws *ws, const json_t *m)
{
	const json_t *p = json_object_get(m, "parents");
	const json_t *b = json_object_get(m, "upper_base");
	size_t i;
	json_t *v;

	set_linear(ws);
	if (p == NULL && b == NULL)
		return true;
	if (!json_is_array(p) || json_array_size(p) != ws->snaps || !json_is_integer(b) ||
	    json_integer_value(b) < 0 || json_integer_value(b) > (json_int_t)ws->snaps)
		return false;
	json_array_foreach(p, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > (json_int_t)i) /* parent[i + 1] <= i */
			return false;
		ws->parent[i + 1] = (unsigned)json_integer_value(v);
	}
	ws->upper_base = (unsigned)json_integer_value(b);
	return true;
}

/*
 * `text` over the file at `path` (made when missing): written from its start,
 * then cut to its length when the file was longer. A meta.json of a set taken
 * from the spare is about as long as the one it replaces, so this touches the
 * same block where O_TRUNC would free it and the write allocate another
 * (0.4 ms on ext4, measured).
 */
static int overwrite(const char *path, const char *text, struct pdk_error **err)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	size_t len = strlen(text);
	struct stat st;
	int rc;

	if (fd < 0)
		return pdk_error_set(err, errno, "cannot create '%s'", path);
	rc = pdk_write_all(fd, text, len);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot write '%s'", path);
	if (fstat(fd, &st) < 0 || (st.st_size > (off_t)len && ftruncate(fd, (off_t)len) < 0))
		return pdk_error_set(err, errno, "cannot write '%s'", path);
	return 0;
}

/*
 * meta.json of the set in `dir`, replaced atomically: written beside, then
 * renamed over. `in_place`: written over the file that is there instead, for
 * a directory no one else can see yet (take_spare()).
 */
static int write_meta_in(const struct pdk_ws *ws, const char *dir, bool in_place,
			 struct pdk_error **err)
{
	_cleanup_json_ json_t *m = json_object();
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ char *tmp = pdk_xasprintf("%s/" META ".tmp", dir);
	_cleanup_free_ char *dst = pdk_xasprintf("%s/" META, dir);
	_cleanup_close_ int fd = -1;
	int rc;

	pdk_json_set(m, "version", json_integer(1));
	pdk_json_set(m, "id", json_string(ws->id));
	pdk_ws_json_set_path(m, "workspace", ws->workspace);
	pdk_json_set(m, "workspace_dev", json_integer((json_int_t)ws->ws_dev));
	pdk_json_set(m, "workspace_ino", json_integer((json_int_t)ws->ws_ino));
	pdk_json_set(m, "sandbox", ws->sandbox ? json_string(ws->sandbox) : json_null());
	pdk_json_set(m, "created_ns", json_integer((json_int_t)ws->created_ns));
	if (ws->boot_id[0] != '\0')
		pdk_json_set(m, "boot_id", json_string(ws->boot_id));
	pdk_json_set(m, "snapshots", json_integer(ws->snaps));
	pdk_json_set(m, "disk_limit", json_integer((json_int_t)ws->disk_limit));
	if (!linear(ws)) {
		json_t *p = json_array();

		for (unsigned k = 1; k <= ws->snaps; k++)
			json_array_append_new(p, json_integer(ws->parent[k]));
		pdk_json_set(m, "parents", p);
		pdk_json_set(m, "upper_base", json_integer(ws->upper_base));
	}
	text = pdk_json_dump_line(m);
	if (text == NULL)
		return pdk_error_setx(err, EINVAL,
				      "cannot encode '%s' (is the workspace path UTF-8?)", dst);
	if (in_place)
		return overwrite(dst, text, err);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot create '%s'", tmp);
	rc = pdk_write_all(fd, text, strlen(text));
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot write '%s'", tmp);
	if (rename(tmp, dst) < 0)
		return pdk_error_set(err, errno, "cannot rename '%s' to '%s'", tmp, dst);
	return 0;
}

static int write_meta(const struct pdk_ws *ws, struct pdk_error **err)
{
	return write_meta_in(ws, ws->dir, false, err);
}

/* obj[key] as a string; NULL when absent, null or not a string. */
static const char *str_or_null(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

static int read_meta(struct pdk_ws *ws, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/" META, ws->dir);
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ json_t *m = NULL;
	json_error_t je;
	const char *id = NULL, *wsp, *hex;
	json_int_t ver = 0, dev = 0, ino = 0, created = 0, snaps = 0, limit = 0;

	if (pdk_read_file_at(AT_FDCWD, path, 1 << 16, &text, err) < 0)
		return -(*err)->status;
	m = json_loads(text, 0, &je);
	if (m == NULL ||
	    json_unpack(m, "{s:I, s:s, s:I, s:I, s:I, s:I, s:I}", "version", &ver, "id", &id,
			"workspace_dev", &dev, "workspace_ino", &ino, "created_ns", &created,
			"snapshots", &snaps, "disk_limit", &limit) < 0 ||
	    ver != 1 || strlen(id) != 36 || snaps < 0 || snaps > PDK_WS_MAX_SNAP)
		return pdk_error_setx(err, EINVAL, "'%s' is not a valid change set record", path);
	/* The workspace path is a string, or hex when it is not UTF-8. */
	wsp = str_or_null(m, "workspace");
	hex = str_or_null(m, "workspace_hex");
	ws->workspace = wsp ? pdk_xstrdup(wsp) : hex ? unhex(hex) : NULL;
	if (ws->workspace == NULL || ws->workspace[0] != '/')
		return pdk_error_setx(err, EINVAL, "'%s' names no workspace", path);
	memcpy(ws->id, id, 37);
	ws->sandbox = str_or_null(m, "sandbox") ? pdk_xstrdup(str_or_null(m, "sandbox")) : NULL;
	ws->ws_dev = (uint64_t)dev;
	ws->ws_ino = (uint64_t)ino;
	ws->created_ns = (uint64_t)created;
	if (str_or_null(m, "boot_id") != NULL && strlen(str_or_null(m, "boot_id")) == 36)
		memcpy(ws->boot_id, str_or_null(m, "boot_id"), 37);
	ws->snaps = (unsigned)snaps;
	ws->disk_limit = (uint64_t)limit;
	if (!read_parents(ws, m))
		return pdk_error_setx(err, EINVAL, "'%s' has layer parents that do not fit", path);
	return 0;
}

/* A fresh, empty layer directory with the permissions of the workspace root. */
static int make_layer_dir(const char *path, mode_t mode, struct pdk_error **err)
{
	if (mkdir(path, 0700) < 0)
		return pdk_error_set(err, errno, "cannot create '%s'", path);
	if (chmod(path, mode & 07777) < 0)
		return pdk_error_set(err, errno, "cannot set the mode of '%s'", path);
	return 0;
}

static int reset_work(struct pdk_ws *ws, struct pdk_error **err)
{
	int rc = pdk_rm_rf_at(AT_FDCWD, ws->work);

	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot clear '%s'", ws->work);
	if (mkdir(ws->work, 0700) < 0)
		return pdk_error_set(err, errno, "cannot create '%s'", ws->work);
	return 0;
}

/*
 * STATE/ws/.spare: the directory of a set that a run made and left empty
 * (pdk_ws_recycle()), kept for the next set. Taking it is one rename where
 * a new set is three mkdirs, each a journaled block allocation on ext4, and
 * its removal at the end five unlinks freeing them. The rename is atomic:
 * of two runs, one takes it and the other makes a set.
 *
 * It is taken under a name of its own first (.spare-ID, which no listing
 * shows and no other run takes), its layer given the new workspace's mode
 * and its meta.json written over the old one in place, then renamed to the
 * set's name: the set appears with its own meta.json, never the last run's,
 * and no file is made and freed for it (a meta.json renamed over the old
 * one freed an inode on ext4: a third of a millisecond). The base is
 * written anew by the caller, as for a new set. Whether it was taken (its
 * meta.json written).
 */
static bool take_spare(struct pdk_ws *ws, const char *root, mode_t mode)
{
	_cleanup_error_ struct pdk_error *ignored = NULL;
	_cleanup_free_ char *spare = pdk_xasprintf("%s/" PDK__WS_SPARE, root);
	_cleanup_free_ char *claim = pdk_xasprintf("%s/" PDK__WS_SPARE "-%s", root, ws->id);
	_cleanup_free_ char *upper = pdk_xasprintf("%s/upper", claim);

	if (rename(spare, claim) < 0)
		return false;
	if (chmod(upper, mode & 07777) == 0 && write_meta_in(ws, claim, true, &ignored) == 0 &&
	    rename(claim, ws->dir) == 0)
		return true;
	(void)!pdk_rm_rf_at(AT_FDCWD, claim); /* a fresh set instead */
	return false;
}

/*
 * STATE/ws is a top directory (pdk_dir_spread()): each set made in it is
 * placed in a block group of its own choosing, away from the state
 * directory's. Every overlay mount makes seven inodes in its work directory
 * and frees three at once; a set taken back frees four more, and a group
 * that other sets, other state directories or other programs churn too made
 * a default run 2.5 ms dearer here (docs/internals/performance.md, eleventh
 * round).
 */
/* A new set's own directories: the set, its work directory, its upper layer. */
static int make_set_dirs(struct pdk_ws *ws, mode_t mode, struct pdk_error **err)
{
	if (mkdir(ws->dir, 0700) < 0)
		return pdk_error_set(err, errno, "cannot create '%s'", ws->dir);
	/* layers/ comes with the first snapshot. */
	if (mkdir(ws->work, 0700) < 0) {
		(void)pdk_error_set(err, errno, "cannot create '%s'", ws->work);
		(void)rmdir(ws->dir);
		return -1;
	}
	if (make_layer_dir(ws->upper, mode, err) < 0) {
		(void)!pdk_rm_rf_at(AT_FDCWD, ws->dir);
		return -1;
	}
	return 0;
}

int pdk_ws_create(const char *state_dir, const char *workspace, const char *sandbox_id,
		  uint64_t disk_limit, const struct pdk_mounts *mounts, struct pdk_ws **out,
		  struct pdk_error **err)
{
	struct pdk_ws *ws = ws_alloc();
	_cleanup_free_ char *root = NULL;
	_cleanup_strv_ char **places = NULL;
	char real[PATH_MAX];
	struct stat st;
	int rc;

	if (stat(workspace, &st) < 0) {
		rc = pdk_error_set(err, errno, "workspace '%s'", workspace);
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		rc = pdk_error_setx(err, ENOTDIR, "workspace '%s' is not a directory", workspace);
		goto fail;
	}
	root = pdk_xasprintf("%s/ws", state_dir);
	rc = pdk_mkdir_p(root, err);
	if (rc < 0)
		goto fail;
	if (realpath(root, real) == NULL) {
		rc = pdk_error_set(err, errno, "state directory '%s'", root);
		goto fail;
	}
	/* Under any name a mount gives it: an overlay of /mnt/x, a bind of /var/lib, too. */
	if (mounts != NULL)
		places = pdk_mounts_aliases(mounts, real);
	else if ((rc = pdk_paths_aliases(real, &places, err)) < 0)
		goto fail;
	for (size_t i = 0; places[i] != NULL; i++) {
		if (!pdk_paths_within(places[i], workspace))
			continue;
		/* The caller's choice of workspace: it names the field (a 400, not a 500). */
		rc = pdk_error_set_field(
			err, EINVAL, "workspace",
			"workspace '%s' holds the state directory '%s'%s%s%s: an overlay cannot keep "
			"its changes there; choose a workspace outside it, or set "
			"PADDOCK_STATE_DIR to a directory outside the workspace",
			workspace, real, i > 0 ? " (mounted at '" : "", i > 0 ? places[i] : "",
			i > 0 ? "')" : "");
		goto fail;
	}
	pdk_make_id(ws->id);
	ws->dir = pdk_xasprintf("%s/%s", real, ws->id);
	ws->workspace = pdk_xstrdup(workspace);
	ws->sandbox = sandbox_id ? pdk_xstrdup(sandbox_id) : NULL;
	ws->created_ns = pdk_now_real_ns();
	memcpy(ws->boot_id, boot_id(), sizeof(ws->boot_id));
	ws->disk_limit = disk_limit;
	ws->ws_dev = st.st_dev;
	ws->ws_ino = st.st_ino;
	set_paths(ws);
	/*
	 * A state directory flagged just now keeps its spare where it was made,
	 * beside it: the spare goes, so that the next set is made spread out and
	 * becomes the spare (once per state directory).
	 */
	if (pdk_dir_spread(real)) {
		_cleanup_free_ char *spare = pdk_xasprintf("%s/" PDK__WS_SPARE, real);
		_cleanup_free_ char *gone = pdk_xasprintf("%s/" PDK__WS_SPARE "-%s", real, ws->id);

		/* Claimed first, as take_spare() does: a run taking it meanwhile keeps it whole. */
		if (rename(spare, gone) == 0)
			(void)!pdk_rm_rf_at(AT_FDCWD, gone);
	}
	if (disk_limit == 0 && take_spare(ws, real, st.st_mode)) {
		tidy_start(ws);
		rc = 0;
	} else {
		rc = make_set_dirs(ws, st.st_mode, err);
		if (rc < 0)
			goto fail;
		rc = write_meta(ws, err);
	}
	/* The base: the directory as it is now, before any sandbox sees it. */
	if (rc == 0)
		rc = pdk__ws_base_reset(ws->dir, err);
	if (rc == 0)
		rc = pdk_ws_lock(ws, err);
	if (rc < 0)
		goto remove;
	*out = ws;
	return 0;
remove:
	pdk_ws_tidy_wait(ws);
	(void)!pdk_rm_rf_at(AT_FDCWD, ws->dir);
fail:
	pdk_ws_free(ws);
	return rc;
}

static bool valid_id_prefix(const char *id)
{
	size_t n = strlen(id);

	if (n < 4 || n > 36)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f') ||
		      id[i] == '-'))
			return false;
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int pdk_ws_list(const char *state_dir, char ***ids, struct pdk_error **err)
{
	_cleanup_free_ char *root = pdk_xasprintf("%s/ws", state_dir);
	_cleanup_closedir_ DIR *d = opendir(root);
	struct dirent *de;
	char **v = NULL;

	*ids = NULL;
	if (d == NULL && errno == ENOENT) {
		*ids = pdk_xcalloc(1, sizeof(char *));
		return 0;
	}
	if (d == NULL)
		return pdk_error_set(err, errno, "cannot read '%s'", root);
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);

		if (n == 36 && valid_id_prefix(de->d_name))
			pdk_strv_push(&v, de->d_name);
		/* A removal that was interrupted (pdk_ws_remove renames first): finish it. */
		else if (n == 36 + strlen(".removing") && strcmp(de->d_name + 36, ".removing") == 0)
			(void)!pdk_rm_rf_at(dirfd(d), de->d_name);
	}
	if (v == NULL)
		v = pdk_xcalloc(1, sizeof(char *));
	/* UUIDv7 text sorts by creation time. */
	qsort(v, pdk_strv_len(v), sizeof(char *), cmp_str);
	*ids = v;
	return 0;
}

int pdk_ws_open(const char *state_dir, const char *id, struct pdk_ws **out, struct pdk_error **err)
{
	_cleanup_strv_ char **ids = NULL;
	const char *match = NULL;
	struct pdk_ws *ws;
	int rc;

	if (!valid_id_prefix(id))
		return pdk_error_setx(err, EINVAL,
				      "'%s' is not a change set id (at least 4 characters of one)",
				      id);
	rc = pdk_ws_list(state_dir, &ids, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; ids[i] != NULL; i++) {
		if (strncmp(ids[i], id, strlen(id)) != 0)
			continue;
		if (match != NULL)
			return pdk_error_setx(err, EEXIST, "'%s' matches more than one change set",
					      id);
		match = ids[i];
	}
	if (match == NULL)
		return pdk_error_setx(err, ENOENT, "no change set '%s' in '%s/ws'", id, state_dir);
	ws = ws_alloc();
	ws->dir = pdk_xasprintf("%s/ws/%s", state_dir, match);
	rc = read_meta(ws, err);
	if (rc == -ENOENT) {
		pdk_error_free(err);
		rc = pdk_error_setx(err, ENOENT, "change set '%s' is being removed", match);
	}
	if (rc < 0) {
		pdk_ws_free(ws);
		return rc;
	}
	set_paths(ws);
	*out = ws;
	return 0;
}

int pdk_ws_lock(struct pdk_ws *ws, struct pdk_error **err)
{
	if (ws->lock_fd >= 0)
		return 0;
	ws->lock_fd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ws->lock_fd < 0)
		return pdk_error_set(err, errno, "cannot open '%s'", ws->dir);
	if (flock(ws->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		(void)close(ws->lock_fd);
		ws->lock_fd = -1;
		if (e == EWOULDBLOCK)
			return pdk_error_setx(err, EBUSY,
					      "change set %s is in use (by a running sandbox or "
					      "another 'paddock ws')",
					      ws->id);
		return pdk_error_set(err, e, "cannot lock '%s'", ws->dir);
	}
	return 0;
}

const char *pdk_ws_id(const struct pdk_ws *ws)
{
	return ws->id;
}

const char *pdk_ws_workspace(const struct pdk_ws *ws)
{
	return ws->workspace;
}

const char *pdk_ws_dir(const struct pdk_ws *ws)
{
	return ws->dir;
}

const char *pdk_ws_sandbox(const struct pdk_ws *ws)
{
	return ws->sandbox;
}

uint64_t pdk_ws_created_ns(const struct pdk_ws *ws)
{
	return ws->created_ns;
}

unsigned pdk_ws_snapshots(const struct pdk_ws *ws)
{
	return ws->snaps;
}

uint64_t pdk_ws_disk_limit(const struct pdk_ws *ws)
{
	return ws->disk_limit;
}

const char *pdk_ws_upper_path(const struct pdk_ws *ws)
{
	return ws->upper;
}

const char *pdk_ws_work_path(const struct pdk_ws *ws)
{
	return ws->work;
}

char **pdk_ws_lower_paths(const struct pdk_ws *ws)
{
	char **v = NULL;

	for (unsigned i = ws->upper_base; i >= 1; i = ws->parent[i])
		pdk_strv_push_take(&v, pdk_xasprintf("%s/layers/%u", ws->dir, i));
	pdk_strv_push(&v, ws->workspace);
	return v;
}

int pdk_ws_snapshot(struct pdk_ws *ws, struct pdk_error **err)
{
	_cleanup_free_ char *layer = NULL;
	struct stat st;
	int rc;

	if (ws->snaps >= PDK_WS_MAX_SNAP)
		return pdk_error_setx(err, ENOSPC, "change set %s already has %d snapshots", ws->id,
				      PDK_WS_MAX_SNAP);
	if (stat(ws->upper, &st) < 0)
		return pdk_error_set(err, errno, "cannot read '%s'", ws->upper);
	close_fds(ws);
	layer = pdk_xasprintf("%s/layers", ws->dir);
	if (mkdir(layer, 0700) < 0 && errno != EEXIST)
		return pdk_error_set(err, errno, "cannot create '%s'", layer);
	free(layer);
	layer = pdk_xasprintf("%s/layers/%u", ws->dir, ws->snaps + 1);
	if (rename(ws->upper, layer) < 0)
		return pdk_error_set(err, errno, "cannot freeze '%s' as '%s'", ws->upper, layer);
	rc = make_layer_dir(ws->upper, st.st_mode, err);
	if (rc == 0)
		rc = reset_work(ws, err);
	if (rc < 0) {
		/* Put the layer back so the change set stays as it was. */
		(void)rmdir(ws->upper);
		(void)rename(layer, ws->upper);
		return rc;
	}
	ws->snaps++;
	ws->parent[ws->snaps] = ws->upper_base;
	ws->upper_base = ws->snaps;
	rc = write_meta(ws, err);
	return rc < 0 ? rc : (int)ws->snaps;
}

int pdk_ws_rollback(struct pdk_ws *ws, unsigned snap, struct pdk_error **err)
{
	_cleanup_free_ char *trash = pdk_xasprintf("%s/upper.rollback", ws->dir);
	struct stat st;
	unsigned old = ws->snaps, old_base = ws->upper_base;
	int rc;

	if (snap > ws->snaps)
		return pdk_error_setx(err, ENOENT, "change set %s has no snapshot %u (it has %u)",
				      ws->id, snap, ws->snaps);
	if (stat(ws->upper, &st) < 0)
		return pdk_error_set(err, errno, "cannot read '%s'", ws->upper);
	close_fds(ws);
	rc = pdk_rm_rf_at(AT_FDCWD, trash);
	if (rc == 0 && rename(ws->upper, trash) < 0)
		rc = -errno;
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot set aside '%s'", ws->upper);
	rc = make_layer_dir(ws->upper, st.st_mode, err);
	if (rc < 0)
		return rc;
	/* From here the record says `snap`: a crash below leaves unused layers, no mixed state. */
	ws->snaps = snap;
	ws->upper_base = snap;
	rc = write_meta(ws, err);
	if (rc < 0) {
		ws->snaps = old;
		ws->upper_base = old_base;
		return rc;
	}
	for (unsigned i = old; i > snap; i--) {
		_cleanup_free_ char *layer = pdk_xasprintf("%s/layers/%u", ws->dir, i);

		rc = pdk_rm_rf_at(AT_FDCWD, layer);
		if (rc < 0)
			return pdk_error_set(err, -rc, "cannot remove '%s'", layer);
	}
	rc = pdk_rm_rf_at(AT_FDCWD, trash);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot remove '%s'", trash);
	/* Back to the directory as it is now: later changes are made against it. */
	if (snap == 0 && pdk__ws_base_reset(ws->dir, err) < 0)
		return -1;
	return reset_work(ws, err);
}

/* ---- the volatile mark (pdk_ws_settle()) ---- */

static int clear_mark(struct pdk_ws *ws, struct pdk_error **err)
{
	int rc = clear_mark_at(ws->work);

	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot remove overlayfs's volatile mark in '%s'",
				     ws->work);
	return 0;
}

int pdk_ws_settle(struct pdk_ws *ws, bool sync, struct pdk_error **err)
{
	pdk_ws_tidy_wait(ws);
	if (sync) {
		_cleanup_close_ int fd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		/* The mark stays: the set is not known to be on disk. */
		if (fd < 0 || syncfs(fd) < 0)
			return pdk_error_set(
				err, errno, "change set %s: cannot sync its changes to disk ('%s')",
				ws->id, ws->dir);
	}
	return clear_mark(ws, err);
}

/* CLOCK_REALTIME of this boot's start, in ns (an older set's mark, without a boot id). */
static uint64_t boot_real_ns(void)
{
	struct timespec boot;

	if (clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
		return 0;
	return pdk_now_real_ns() - ((uint64_t)boot.tv_sec * 1000000000ULL + (uint64_t)boot.tv_nsec);
}

enum pdk_ws_unsynced pdk_ws_unsynced(const struct pdk_ws *ws)
{
	_cleanup_close_ int fd = open(ws->work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct mark_paths m;
	struct stat st;

	if (fd < 0)
		return PDK_WS_SYNCED;
	mark_paths("work", &m);
	if (fstatat(fd, m.dir[2], &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != EACCES)
			return PDK_WS_SYNCED;
		open_mark_dirs(fd, &m);
		if (fstatat(fd, m.dir[2], &st, AT_SYMLINK_NOFOLLOW) < 0)
			return PDK_WS_SYNCED;
	}
	/*
	 * Marked at the mount. Mounted in another boot: the machine went down
	 * since. The boot id (written before the mount, with the set's
	 * meta.json) says so whatever the clock did; a clock behind after the
	 * reboot would make the mark's time look like this boot's.
	 */
	if (ws->boot_id[0] != '\0' && boot_id()[0] != '\0')
		return strcmp(ws->boot_id, boot_id()) == 0 ? PDK_WS_KILLED : PDK_WS_CRASHED;
	if ((uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec <
	    boot_real_ns())
		return PDK_WS_CRASHED;
	return PDK_WS_KILLED;
}

int pdk_ws_check_synced(struct pdk_ws *ws, bool force, bool clear, struct pdk_error **err)
{
	enum pdk_ws_unsynced u = pdk_ws_unsynced(ws);

	if (u == PDK_WS_CRASHED && !force)
		return pdk_error_setx(
			err, EUCLEAN,
			"change set %s was in use by a sandbox when the machine went down: its "
			"last changes were never synced to disk and may be incomplete; review them "
			"with 'paddock ws diff %s', then apply them with 'paddock ws commit --force "
			"%s' or drop them with 'paddock ws discard %s'",
			ws->id, ws->id, ws->id, ws->id);
	if (u != PDK_WS_SYNCED && clear && clear_mark(ws, err) < 0)
		return -1;
	/* To be mounted: in this boot, which its meta.json says before the mount marks it. */
	if (clear && boot_id()[0] != '\0' && strcmp(ws->boot_id, boot_id()) != 0) {
		memcpy(ws->boot_id, boot_id(), sizeof(ws->boot_id));
		return write_meta(ws, err);
	}
	return 0;
}

/*
 * The common case, a set that never held anything (a run that changed
 * nothing): its known entries, without reading directories. false when
 * anything else is there. The base file (ws-base.c) is one of them: made
 * with the set, it was missed here, and every empty set took the slow way
 * (a rename, a directory walk).
 */
static bool remove_empty(struct pdk_ws *ws)
{
	static const char *const dirs[] = {"upper",      "work/work", "work/index",
					   "work/" GONE, "work",      "layers"};
	_cleanup_close_ int fd = -1;

	if (ws->snaps > 0 || clear_mark_at(ws->work) < 0)
		return false;
	fd = open(ws->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || unlinkat(fd, META, 0) < 0)
		return false;
	if (unlinkat(fd, PDK__WS_BASE_FILE, 0) < 0 && errno != ENOENT)
		return false;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(dirs); i++)
		if (unlinkat(fd, dirs[i], AT_REMOVEDIR) < 0 && errno != ENOENT)
			return false;
	return rmdir(ws->dir) == 0;
}

/* Whether directory `path` holds nothing. */
static bool dir_empty(const char *path)
{
	_cleanup_closedir_ DIR *d = opendir(path);
	struct dirent *de;

	if (d == NULL)
		return false;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			return false;
	return true;
}

/*
 * A set as pdk_ws_create() makes it and an overlay leaves it when nothing
 * changed: no snapshot, no layers/, no record of a base, no index, an empty
 * upper layer. overlayfs's own work/work (mode 000: not read here, the
 * caller removes it, which only an empty directory allows) is the rest.
 */
static bool pristine(struct pdk_ws *ws)
{
	_cleanup_free_ char *layers = pdk_xasprintf("%s/layers", ws->dir);
	_cleanup_free_ char *record = pdk_xasprintf("%s/base.json", ws->dir);
	_cleanup_free_ char *index = pdk_xasprintf("%s/index", ws->work);
	struct stat st;

	return ws->snaps == 0 && ws->disk_limit == 0 && lstat(layers, &st) < 0 &&
	       lstat(record, &st) < 0 && lstat(index, &st) < 0 && dir_empty(ws->upper);
}

int pdk_ws_recycle(struct pdk_ws *ws, struct pdk_error **err)
{
	_cleanup_free_ char *spare = NULL;
	char *slash = strrchr(ws->dir, '/');

	pdk_ws_tidy_wait(ws);
	close_fds(ws);
	/* The lock goes first: whoever takes the spare locks it as its own set. */
	if (ws->lock_fd >= 0)
		(void)close(steal_fd(&ws->lock_fd));
	if (slash != NULL && pristine(ws)) {
		_cleanup_free_ char *work = pdk_xasprintf("%s/work", ws->work);
		_cleanup_free_ char *gone = pdk_xasprintf("%s/" GONE, ws->work);

		/*
		 * overlayfs makes work/work at every mount, and finding one
		 * there costs it a removal and a second try. It goes aside
		 * (one rename in its directory: no permission on it needed),
		 * a volatile mount's mark with it (nothing was written,
		 * nothing needs a sync), for the set that takes the spare to
		 * remove beside its sandbox's start (tidy_start()). When
		 * something is aside still, both go now.
		 */
		if (rename(work, gone) < 0 && errno != ENOENT &&
		    (pdk_rm_rf_at(AT_FDCWD, gone) < 0 || clear_mark_at(ws->work) < 0 ||
		     (rmdir(work) < 0 && errno != ENOENT)))
			return pdk_ws_remove(ws, err);
		spare = pdk_xasprintf("%.*s/" PDK__WS_SPARE, (int)(slash - ws->dir), ws->dir);
		/* Fails when a spare is there already (ENOTEMPTY): then it goes. */
		if (rename(ws->dir, spare) == 0)
			return 0;
	}
	return pdk_ws_remove(ws, err);
}

int pdk_ws_remove(struct pdk_ws *ws, struct pdk_error **err)
{
	_cleanup_free_ char *trash = NULL;
	int rc;

	pdk_ws_tidy_wait(ws);
	close_fds(ws);
	if (remove_empty(ws))
		return 0;
	/* Out of the way first (one rename), so no one opens a half-removed set. */
	trash = pdk_xasprintf("%s.removing", ws->dir);
	if (rename(ws->dir, trash) == 0) {
		rc = pdk_rm_rf_at(AT_FDCWD, trash);
		if (rc < 0)
			return pdk_error_set(err, -rc, "cannot remove change set '%s'", trash);
		return 0;
	}
	rc = pdk_rm_rf_at(AT_FDCWD, ws->dir);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot remove change set '%s'", ws->dir);
	return 0;
}

/* ---- diff ---- */

/* The directories that make up one directory of a merged view, topmost first. */
struct stack {
	unsigned n;
	unsigned idx[PDK_WS_MAX_SNAP + 2]; /* layer index */
	int fd[PDK_WS_MAX_SNAP + 2];
	bool owned; /* fds are ours to close (false for the layer roots) */
};

struct ent {
	bool exists;
	unsigned layer;
	struct stat st;
};

struct walk {
	struct pdk_ws *ws;
	bool shared[PDK_WS_MAX_SNAP + 2]; /* the layers both views are made of */
	struct pdk_ws_diff *out;
	size_t cap;
	struct pdk_error **err;
};

static void stack_release(struct stack *s)
{
	if (s->owned)
		for (unsigned i = 0; i < s->n; i++)
			(void)close(s->fd[i]);
	s->n = 0;
}

static bool is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(int dirfd)
{
	char v[4];
	ssize_t n = fgetxattr(dirfd, OPAQUE_XA, v, sizeof(v));

	return n == 1 && v[0] == 'y';
}

/*
 * Find `name` in the merged directory `s`: the topmost entry wins; a
 * whiteout hides everything below it; a directory merges with directories
 * below it until an opaque one. With `child`, collect the merged child
 * directory. 0 or -errno.
 */
static int lookup(const struct stack *s, const char *name, struct ent *e, struct stack *child)
{
	e->exists = false;
	if (child != NULL) {
		child->n = 0;
		child->owned = true;
	}
	for (unsigned i = 0; i < s->n; i++) {
		struct stat st;
		int fd;

		if (fstatat(s->fd[i], name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				continue;
			return -errno;
		}
		if (is_whiteout(&st))
			break;
		if (!e->exists) {
			e->exists = true;
			e->layer = s->idx[i];
			e->st = st;
		}
		if (!S_ISDIR(st.st_mode) || child == NULL)
			break;
		fd = openat(s->fd[i], name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		child->idx[child->n] = s->idx[i];
		child->fd[child->n++] = fd;
		if (is_opaque(fd))
			break;
	}
	return 0;
}

/*
 * Add to *names the names in the directories of `s`, but for those of
 * layers `skip` marks (skip NULL: all). Sorted, without duplicates.
 */
static int collect_names(const struct stack *s, const bool *skip, char ***names)
{
	char **v = *names;
	size_t n = pdk_strv_len(v), cap = v != NULL ? n + 1 : 0; /* slots, the NULL's included */

	for (unsigned i = 0; i < s->n; i++) {
		int fd;
		DIR *d;
		struct dirent *de;

		if (skip != NULL && skip[s->idx[i]])
			continue;
		fd = openat(s->fd[i], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || (d = fdopendir(fd)) == NULL) {
			int e = errno;

			if (fd >= 0)
				(void)close(fd);
			pdk_strv_free(v);
			*names = NULL;
			return -e;
		}
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			if (n + 2 > cap) {
				cap = cap >= 32 ? cap * 2 : 64;
				v = pdk_xrealloc(v, cap * sizeof(char *));
			}
			v[n++] = pdk_xstrdup(de->d_name);
			v[n] = NULL;
		}
		(void)closedir(d);
	}
	if (v == NULL)
		v = pdk_xcalloc(1, sizeof(char *));
	qsort(v, n, sizeof(char *), cmp_str);
	/* Drop duplicates (the same name in several layers). */
	size_t w = 0;
	for (size_t r = 0; r < n; r++) {
		if (w > 0 && strcmp(v[w - 1], v[r]) == 0) {
			free(v[r]);
			continue;
		}
		v[w++] = v[r];
	}
	v[w] = NULL;
	*names = v;
	return 0;
}

static int root_fd(struct pdk_ws *ws, unsigned idx, struct pdk_error **err)
{
	_cleanup_free_ char *path = NULL;
	int fd;

	if (ws->fds[idx] >= 0)
		return ws->fds[idx];
	if (idx == 0)
		path = pdk_xstrdup(ws->workspace);
	else if (idx == ws->snaps + 1)
		path = pdk_xstrdup(ws->upper);
	else
		path = pdk_xasprintf("%s/layers/%u", ws->dir, idx);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open layer '%s'", path);
	ws->fds[idx] = fd;
	return fd;
}

/* The layers of the view `top` (a snapshot, or snaps + 1 for the upper layer), topmost first. */
static void root_stack(struct pdk_ws *ws, unsigned top, struct stack *s)
{
	unsigned i = top;

	s->n = 0;
	s->owned = false;
	if (top == ws->snaps + 1) {
		s->idx[s->n] = top;
		s->fd[s->n++] = ws->fds[top];
		i = ws->upper_base;
	}
	for (;;) {
		s->idx[s->n] = i;
		s->fd[s->n++] = ws->fds[i];
		if (i == 0)
			break;
		i = ws->parent[i];
	}
}

static struct pdk_ws_change *add_change(struct walk *w, const char *path, enum pdk_ws_kind kind)
{
	struct pdk_ws_change *c;

	if (w->out->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 256;
		w->out->v = pdk_xrealloc(w->out->v, w->cap * sizeof(*c));
	}
	c = &w->out->v[w->out->n++];
	memset(c, 0, sizeof(*c));
	c->path = pdk_xstrdup(path);
	c->kind = kind;
	c->src_fd = c->base_fd = -1;
	return c;
}

static char *read_link(int layer_fd, const char *path, size_t size)
{
	char *buf = pdk_xmalloc(size + 1);
	ssize_t n = readlinkat(layer_fd, path, buf, size + 1);

	if (n < 0 || (size_t)n > size) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* 1 when the two regular files have the same bytes, 0 when not, -errno. */
static int same_content(int a_dir, const char *a_path, int b_dir, const char *b_path)
{
	_cleanup_close_ int a = openat(a_dir, a_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int b = openat(b_dir, b_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *ba = NULL;
	_cleanup_free_ char *bb = NULL;
	const size_t chunk = 65536;

	if (a < 0 || b < 0)
		return -errno;
	ba = pdk_xmalloc(chunk);
	bb = pdk_xmalloc(chunk);
	for (;;) {
		ssize_t na = pdk_read_all(a, ba, chunk);
		ssize_t nb = pdk_read_all(b, bb, chunk);

		if (na < 0 || nb < 0)
			return (int)(na < 0 ? na : nb);
		if (na != nb || memcmp(ba, bb, (size_t)na) != 0)
			return 0;
		if (na == 0)
			return 1;
	}
}

static void fill_new(struct walk *w, struct pdk_ws_change *c, const struct ent *e)
{
	c->mode = e->st.st_mode;
	c->size = S_ISREG(e->st.st_mode) || S_ISLNK(e->st.st_mode) ? (uint64_t)e->st.st_size : 0;
	c->src_fd = w->ws->fds[e->layer];
	if (S_ISLNK(e->st.st_mode))
		c->link = read_link(c->src_fd, c->path, (size_t)e->st.st_size);
}

static void fill_old(struct walk *w, struct pdk_ws_change *c, const struct ent *e)
{
	c->old_mode = e->st.st_mode;
	c->old_size =
		S_ISREG(e->st.st_mode) || S_ISLNK(e->st.st_mode) ? (uint64_t)e->st.st_size : 0;
	c->base_fd = w->ws->fds[e->layer];
}

static char *join(const char *dir, const char *name)
{
	return dir[0] ? pdk_xasprintf("%s/%s", dir, name) : pdk_xstrdup(name);
}

/* Every entry of the old merged directory `s` (at `dir`) is gone. */
static int list_deleted(struct walk *w, const struct stack *s, const char *dir)
{
	_cleanup_strv_ char **names = NULL;
	int rc = collect_names(s, NULL, &names);

	if (rc < 0)
		return pdk_error_set(w->err, -rc, "cannot read '%s' in the workspace", dir);
	for (size_t i = 0; names[i] != NULL; i++) {
		_cleanup_free_ char *path = join(dir, names[i]);
		struct stack child;
		struct ent e;

		rc = lookup(s, names[i], &e, &child);
		if (rc < 0)
			return pdk_error_set(w->err, -rc, "cannot look up '%s'", path);
		if (e.exists) {
			fill_old(w, add_change(w, path, PDK_WS_DELETED), &e);
			if (S_ISDIR(e.st.st_mode))
				rc = list_deleted(w, &child, path);
		}
		stack_release(&child);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int walk_dir(struct walk *w, const struct stack *nw, const struct stack *old,
		    const char *dir);

/* Compare one name present in the new and/or old view. */
static int compare(struct walk *w, const char *path, const struct ent *ne, const struct ent *oe,
		   const struct stack *nchild, const struct stack *ochild)
{
	static const struct stack empty = {0};
	mode_t nt = ne->st.st_mode & S_IFMT, ot = oe->st.st_mode & S_IFMT;
	bool mode_differs = (ne->st.st_mode & 07777) != (oe->st.st_mode & 07777);
	struct pdk_ws_change *c;
	int same;

	if (!ne->exists && !oe->exists)
		return 0;
	if (ne->exists && oe->exists && ne->layer == oe->layer)
		return 0; /* the same entry of a layer both views share */
	if (!oe->exists || !ne->exists || nt != ot) {
		enum pdk_ws_kind k = !oe->exists   ? PDK_WS_ADDED
				     : !ne->exists ? PDK_WS_DELETED
						   : PDK_WS_REPLACED;

		c = add_change(w, path, k);
		if (ne->exists)
			fill_new(w, c, ne);
		if (oe->exists)
			fill_old(w, c, oe);
		if (k == PDK_WS_DELETED && ot == S_IFDIR)
			return list_deleted(w, ochild, path);
		if (ne->exists && nt == S_IFDIR)
			return walk_dir(w, nchild, &empty, path);
		return 0;
	}
	switch (nt) {
	case S_IFDIR:
		if (mode_differs) {
			c = add_change(w, path, PDK_WS_MODE);
			fill_new(w, c, ne);
			fill_old(w, c, oe);
		}
		return walk_dir(w, nchild, ochild, path);
	case S_IFREG:
		same = ne->st.st_size != oe->st.st_size ? 0
							: same_content(w->ws->fds[ne->layer], path,
								       w->ws->fds[oe->layer], path);
		if (same < 0)
			same = 0; /* unreadable: report it as modified rather than hide it */
		if (same && !mode_differs)
			return 0;
		break;
	case S_IFLNK: {
		_cleanup_free_ char *a =
			read_link(w->ws->fds[ne->layer], path, (size_t)ne->st.st_size);
		_cleanup_free_ char *b =
			read_link(w->ws->fds[oe->layer], path, (size_t)oe->st.st_size);

		same = a != NULL && b != NULL && strcmp(a, b) == 0;
		if (same)
			return 0; /* a symlink's mode means nothing */
		break;
	}
	default:
		same = ne->st.st_rdev == oe->st.st_rdev;
		if (same && !mode_differs)
			return 0;
		break;
	}
	c = add_change(w, path, same ? PDK_WS_MODE : PDK_WS_MODIFIED);
	fill_new(w, c, ne);
	fill_old(w, c, oe);
	return 0;
}

/* Whether the two merged directories reach the layers both views share in the same way. */
static bool same_shared_tail(const struct walk *w, const struct stack *a, const struct stack *b)
{
	unsigned i = 0, j = 0;

	for (;;) {
		while (i < a->n && !w->shared[a->idx[i]])
			i++;
		while (j < b->n && !w->shared[b->idx[j]])
			j++;
		if (i == a->n || j == b->n)
			return i == a->n && j == b->n;
		if (a->idx[i++] != b->idx[j++])
			return false;
	}
}

/*
 * One directory present in the new view (`nw`) and possibly the old one
 * (`old`, maybe empty). Only names that a layer of one view alone holds
 * can differ, unless one view's directory stops short of the shared
 * layers the other reaches (an opaque directory, or no directory at all):
 * then every name of both.
 */
static int walk_dir(struct walk *w, const struct stack *nw, const struct stack *old,
		    const char *dir)
{
	_cleanup_strv_ char **names = NULL;
	const bool *skip = same_shared_tail(w, nw, old) ? w->shared : NULL;
	int rc = collect_names(nw, skip, &names);

	if (rc == 0)
		rc = collect_names(old, skip, &names);
	if (rc < 0)
		return pdk_error_set(w->err, -rc, "cannot read '%s' in the change set",
				     dir[0] ? dir : ".");
	for (size_t i = 0; names[i] != NULL; i++) {
		_cleanup_free_ char *path = NULL;
		struct stack nchild = {0}, ochild = {0};
		struct ent ne, oe;

		if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		path = join(dir, names[i]);
		rc = lookup(nw, names[i], &ne, &nchild);
		if (rc == 0)
			rc = lookup(old, names[i], &oe, &ochild);
		if (rc < 0)
			rc = pdk_error_set(w->err, -rc, "cannot look up '%s'", path);
		else
			rc = compare(w, path, &ne, &oe, &nchild, &ochild);
		stack_release(&nchild);
		stack_release(&ochild);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cmp_deleted_size(const void *a, const void *b)
{
	const struct pdk_ws_change *x = *(const struct pdk_ws_change *const *)a;
	const struct pdk_ws_change *y = *(const struct pdk_ws_change *const *)b;

	return x->old_size < y->old_size ? -1 : x->old_size > y->old_size;
}

/* Pair each added regular file with a deleted one of the same content (a rename). */
static void find_renames(struct pdk_ws_diff *d)
{
	struct pdk_ws_change **del = pdk_xcalloc(d->n, sizeof(*del));
	bool *used;
	size_t nd = 0;

	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].kind == PDK_WS_DELETED && S_ISREG(d->v[i].old_mode))
			del[nd++] = &d->v[i];
	used = pdk_xcalloc(nd ? nd : 1, sizeof(*used));
	qsort(del, nd, sizeof(*del), cmp_deleted_size);
	for (size_t i = 0; i < d->n && nd > 0; i++) {
		struct pdk_ws_change *a = &d->v[i];
		size_t lo = 0, hi = nd, tries = 0;

		if (a->kind != PDK_WS_ADDED || !S_ISREG(a->mode) || a->size == 0)
			continue;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (del[mid]->old_size < a->size)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t j = lo; j < nd && del[j]->old_size == a->size && tries < 8; j++) {
			if (used[j])
				continue;
			tries++;
			if (same_content(a->src_fd, a->path, del[j]->base_fd, del[j]->path) == 1) {
				a->renamed_from = pdk_xstrdup(del[j]->path);
				used[j] = true;
				break;
			}
		}
	}
	free(used);
	free(del);
}

int pdk_ws_diff(struct pdk_ws *ws, unsigned from, unsigned to, struct pdk_ws_diff *out,
		struct pdk_error **err)
{
	struct walk w = {.ws = ws, .out = out, .err = err};
	struct stack nw, old;
	unsigned top = to == PDK_WS_CURRENT ? ws->snaps + 1 : to;
	int rc;

	memset(out, 0, sizeof(*out));
	if (from >= top || top > ws->snaps + 1)
		return pdk_error_setx(err, EINVAL,
				      "cannot diff snapshot %u against %u (change set %s has %u)",
				      from, to, ws->id, ws->snaps);
	for (unsigned i = 0; i <= top; i++)
		if ((rc = root_fd(ws, i, err)) < 0)
			return rc;
	root_stack(ws, top, &nw);
	root_stack(ws, from, &old);
	for (unsigned i = 0; i < nw.n; i++)
		for (unsigned j = 0; j < old.n; j++)
			if (nw.idx[i] == old.idx[j])
				w.shared[nw.idx[i]] = true;
	rc = walk_dir(&w, &nw, &old, "");
	if (rc < 0) {
		pdk_ws_diff_release(out);
		return rc;
	}
	find_renames(out);
	for (size_t i = 0; i < out->n; i++)
		if ((out->v[i].kind == PDK_WS_ADDED || out->v[i].kind == PDK_WS_MODIFIED ||
		     out->v[i].kind == PDK_WS_REPLACED) &&
		    S_ISREG(out->v[i].mode))
			out->bytes_added += out->v[i].size;
	return 0;
}

void pdk_ws_diff_release(struct pdk_ws_diff *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].path);
		free(d->v[i].link);
		free(d->v[i].renamed_from);
	}
	free(d->v);
	memset(d, 0, sizeof(*d));
}

const char *pdk_ws_kind_name(enum pdk_ws_kind k)
{
	switch (k) {
	case PDK_WS_ADDED:
		return "added";
	case PDK_WS_MODIFIED:
		return "modified";
	case PDK_WS_DELETED:
		return "deleted";
	case PDK_WS_MODE:
		return "mode";
	case PDK_WS_REPLACED:
		return "replaced";
	default:
		return "unknown";
	}
}

static const char *type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return "file";
	case S_IFDIR:
		return "dir";
	case S_IFLNK:
		return "symlink";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "socket";
	case S_IFCHR:
		return "char-device";
	case S_IFBLK:
		return "block-device";
	default:
		return "unknown";
	}
}

json_t *pdk_ws_change_json(const struct pdk_ws_change *c)
{
	json_t *o = json_object();

	pdk_ws_json_set_path(o, "path", c->path);
	pdk_json_set(o, "kind", json_string(pdk_ws_kind_name(c->kind)));
	if (c->mode) {
		pdk_json_set(o, "type", json_string(type_name(c->mode)));
		pdk_json_set(o, "mode", json_integer(c->mode & 07777));
		pdk_json_set(o, "size", json_integer((json_int_t)c->size));
	}
	if (c->old_mode) {
		pdk_json_set(o, "old_type", json_string(type_name(c->old_mode)));
		pdk_json_set(o, "old_mode", json_integer(c->old_mode & 07777));
		pdk_json_set(o, "old_size", json_integer((json_int_t)c->old_size));
	}
	if (c->link)
		pdk_ws_json_set_path(o, "link", c->link);
	if (c->renamed_from)
		pdk_ws_json_set_path(o, "renamed_from", c->renamed_from);
	return o;
}

int pdk_ws_emit_changes(struct pdk_events *ev, const struct pdk_ws_diff *d, const char *action,
			const char *set_id, struct pdk_error **err)
{
	for (size_t i = 0; ev != NULL && i < d->n; i++) {
		json_t *a = pdk_ws_change_json(&d->v[i]);
		int rc;

		pdk_json_set(a, "action", json_string(action));
		pdk_json_set(a, "change_set", json_string(set_id));
		rc = pdk_events_emit(ev, "fs.change", 0, a, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void pdk_ws_print_path(FILE *out, const char *path)
{
	const unsigned char *p = (const unsigned char *)path;
	bool plain = pdk_utf8_valid(path, strlen(path));

	for (size_t i = 0; plain && p[i]; i++)
		if (p[i] < 0x20 || p[i] == 0x7f || p[i] == '"' || p[i] == '\\')
			plain = false;
	if (plain) {
		fputs(path, out);
		return;
	}
	fputc('"', out);
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", out);
		else if (*p == '\t')
			fputs("\\t", out);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(out, "\\x%02x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

/* ---- copies of an upper layer (import of a tmpfs one, snapshot of a mounted one) ---- */

/*
 * Extended attributes in the user namespace, the overlay's own marks among
 * them (user.overlay.opaque: the overlay is mounted with userxattr). Others
 * (security.*, trusted.*) are not copied: the sandbox cannot set them.
 */
static int copy_xattrs(int src, int dst)
{
	_cleanup_free_ char *names = NULL;
	/* A value is the sandbox's bytes: the kernel's own bound is the buffer's cap. */
	_cleanup_buf_ struct pdk_buf v = PDK_BUF_INIT(XATTR_SIZE_MAX);
	ssize_t len = flistxattr(src, NULL, 0);

	if (len <= 0)
		return len == 0 || errno == ENOTSUP ? 0 : -errno;
	names = pdk_xmalloc((size_t)len);
	len = flistxattr(src, names, (size_t)len);
	if (len < 0)
		return -errno; /* ERANGE: the list grew meanwhile; nothing writes while we copy */
	for (ssize_t off = 0; off < len; off += (ssize_t)strlen(names + off) + 1) {
		const char *name = names + off;
		ssize_t n;

		if (strncmp(name, "user.", 5) != 0)
			continue;
		n = fgetxattr(src, name, NULL, 0);
		if (n > 0 && pdk_buf_reserve(&v, (size_t)n) < 0)
			return -E2BIG;
		if (n > 0)
			n = fgetxattr(src, name, v.p, pdk_buf_room(&v));
		if (n < 0 && errno == ENODATA)
			continue;
		if (n < 0 || fsetxattr(dst, name, v.p, (size_t)n, 0) < 0)
			return -errno;
	}
	return 0;
}

/*
 * Owner, mode and times of `st` on `fd`, in that order. The owner only
 * where we may give it: rootless, every file of the layer is ours anyway.
 * SECURITY: never the set-id bits of a file. What a sandbox wrote is copied
 * onto the host here (a disk-limited upper layer, a snapshot of a running
 * one); as root it would be a set-id program of the sandbox's choosing on
 * the host. A directory keeps its set-gid bit (group inheritance, no
 * privilege), as the overlay shows it.
 */
static int copy_attrs(int fd, const struct stat *st)
{
	const struct timespec t[2] = {st->st_atim, st->st_mtim};
	mode_t keep = S_ISDIR(st->st_mode) ? 07777 : 01777;

	if (fchown(fd, st->st_uid, st->st_gid) < 0 && errno != EPERM)
		return -errno;
	if (fchmod(fd, st->st_mode & keep) < 0)
		return -errno;
	return futimens(fd, t) < 0 ? -errno : 0;
}

/*
 * Open `name` in `src` for reading. The agent may have taken every
 * permission off it: the owner (we are, rootless) may give read back for
 * as long as the copy takes; *restore is then the mode to put back.
 */
static int open_source(int src, const char *name, int flags, mode_t mode, mode_t add, bool *restore)
{
	int fd = openat(src, name, flags | O_NOFOLLOW | O_CLOEXEC);

	*restore = false;
	if (fd >= 0 || errno != EACCES)
		return fd;
	if (fchmodat(src, name, (mode & 07777) | add, 0) < 0)
		return -1;
	*restore = true;
	return openat(src, name, flags | O_NOFOLLOW | O_CLOEXEC);
}

static int copy_tree(int src, int dst, const char *path, struct pdk_error **err);

static int copy_entry(int src, int dst, const char *name, const char *path, struct pdk_error **err)
{
	struct stat st;
	bool restore = false;
	int rc = 0;

	if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return pdk_error_set(err, errno, "cannot read '%s'", path);
	switch (st.st_mode & S_IFMT) {
	case S_IFREG: {
		_cleanup_close_ int in =
			open_source(src, name, O_RDONLY, st.st_mode, 0400, &restore);
		_cleanup_close_ int out = -1;
		int e = errno;

		if (restore) /* an open descriptor reads on whatever the mode */
			(void)!fchmodat(src, name, st.st_mode & 07777, 0);
		if (in < 0)
			return pdk_error_set(err, e, "cannot open '%s'", path);
		out = openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0)
			return pdk_error_set(err, errno, "cannot create '%s'", path);
		rc = pdk_copy_sparse(in, out, (uint64_t)st.st_size);
		if (rc == 0)
			rc = copy_xattrs(in, out);
		if (rc == 0)
			rc = copy_attrs(out, &st);
		if (rc < 0)
			return pdk_error_set(err, -rc, "cannot copy '%s'", path);
		return 0;
	}
	case S_IFDIR: {
		_cleanup_close_ int s = -1;
		_cleanup_close_ int d = -1;

		s = open_source(src, name, O_RDONLY | O_DIRECTORY, st.st_mode, 0700, &restore);
		if (s < 0)
			return pdk_error_set(err, errno, "cannot open '%s'", path);
		if (mkdirat(dst, name, 0700) < 0)
			rc = pdk_error_set(err, errno, "cannot create '%s'", path);
		else if ((d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
			 0)
			rc = pdk_error_set(err, errno, "cannot open '%s'", path);
		else if ((rc = copy_xattrs(s, d)) < 0)
			rc = pdk_error_set(err, -rc, "cannot copy the attributes of '%s'", path);
		else
			rc = copy_tree(s, d, path, err);
		/* Put back what the agent had set, before anything else can fail. */
		if (restore && fchmod(s, st.st_mode & 07777) < 0 && rc == 0)
			rc = pdk_error_set(err, errno, "cannot restore the mode of '%s'", path);
		if (rc == 0 && (rc = copy_attrs(d, &st)) < 0)
			rc = pdk_error_set(err, -rc, "cannot set the owner, mode or times of '%s'",
					   path);
		return rc;
	}
	case S_IFLNK: {
		_cleanup_free_ char *target = read_link(src, name, (size_t)st.st_size);
		const struct timespec t[2] = {st.st_atim, st.st_mtim};

		if (target == NULL || symlinkat(target, dst, name) < 0)
			return pdk_error_set(err, errno ? errno : EIO, "cannot copy symlink '%s'",
					     path);
		(void)!fchownat(dst, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
		(void)!utimensat(dst, name, t, AT_SYMLINK_NOFOLLOW);
		return 0;
	}
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
		/* SECURITY: a device node other than a whiteout is never made on the host. */
		if (!S_ISFIFO(st.st_mode) && !is_whiteout(&st))
			return pdk_error_setx(err, EPERM, "'%s' is a device node: refused", path);
		/*
		 * Whiteouts (0:0) and FIFOs. Without CAP_MKNOD (rootless) a
		 * whiteout is linked instead: the overlay never changes one in
		 * place, it only removes it. Anything else the kernel refuses us,
		 * and says so.
		 */
		if (mknodat(dst, name, st.st_mode, st.st_rdev) < 0 &&
		    !(errno == EPERM && is_whiteout(&st) && linkat(src, name, dst, name, 0) == 0))
			return pdk_error_set(err, errno, "cannot recreate '%s'", path);
		return 0;
	default:
		return 0; /* sockets: nothing to keep; a bound socket is not content */
	}
}

static int copy_tree(int src, int dst, const char *path, struct pdk_error **err)
{
	int fd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (d == NULL) {
		if (fd >= 0)
			(void)close(fd);
		return pdk_error_set(err, errno, "cannot read '%s'", path);
	}
	while ((de = readdir(d)) != NULL) {
		_cleanup_free_ char *sub = NULL;
		int rc;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		sub = join(path, de->d_name);
		rc = copy_entry(src, dst, de->d_name, sub, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A copy of the tree at src_fd in the new directory `path` (mode of `mode`); removed on failure. */
static int copy_layer(int src_fd, const char *path, mode_t mode, struct pdk_error **err)
{
	_cleanup_close_ int dst = -1;
	int rc = pdk_rm_rf_at(AT_FDCWD, path);

	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot clear '%s'", path);
	rc = make_layer_dir(path, mode, err);
	if (rc < 0)
		return rc;
	dst = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dst < 0)
		rc = pdk_error_set(err, errno, "cannot open '%s'", path);
	else
		rc = copy_tree(src_fd, dst, "", err);
	if (rc == 0 && (rc = copy_xattrs(src_fd, dst)) < 0)
		rc = pdk_error_set(err, -rc, "cannot copy the attributes of '%s'", path);
	if (rc < 0)
		(void)!pdk_rm_rf_at(AT_FDCWD, path);
	return rc;
}

int pdk_ws_snapshot_copy(struct pdk_ws *ws, struct pdk_error **err)
{
	_cleanup_free_ char *layers = pdk_xasprintf("%s/layers", ws->dir);
	_cleanup_free_ char *tmp = pdk_xasprintf("%s/layers/copy", ws->dir);
	_cleanup_free_ char *layer = NULL;
	_cleanup_close_ int up = -1;
	unsigned n = ws->snaps + 1;
	struct stat st;
	int rc;

	if (ws->snaps >= PDK_WS_MAX_SNAP)
		return pdk_error_setx(err, ENOSPC, "change set %s already has %d snapshots", ws->id,
				      PDK_WS_MAX_SNAP);
	up = open(ws->upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0 || fstat(up, &st) < 0)
		return pdk_error_set(err, errno, "cannot read '%s'", ws->upper);
	close_fds(ws); /* the upper layer's index moves up by one */
	if (mkdir(layers, 0700) < 0 && errno != EEXIST)
		return pdk_error_set(err, errno, "cannot create '%s'", layers);
	rc = copy_layer(up, tmp, st.st_mode, err);
	if (rc < 0)
		return pdk_error_wrap(err, "snapshot of change set %s", ws->id);
	layer = pdk_xasprintf("%s/layers/%u", ws->dir, n);
	if (rename(tmp, layer) < 0) {
		rc = pdk_error_set(err, errno, "cannot rename '%s' to '%s'", tmp, layer);
		(void)!pdk_rm_rf_at(AT_FDCWD, tmp);
		return rc;
	}
	/* The upper layer stays where it was: relative to upper_base, not to the copy. */
	ws->parent[n] = ws->upper_base;
	ws->snaps = n;
	rc = write_meta(ws, err);
	if (rc < 0) {
		ws->snaps = n - 1;
		(void)!pdk_rm_rf_at(AT_FDCWD, layer);
		return rc;
	}
	return (int)n;
}

int pdk_ws_import_upper(struct pdk_ws *ws, int src_fd, struct pdk_error **err)
{
	_cleanup_free_ char *tmp = pdk_xasprintf("%s/upper.import", ws->dir);
	struct stat st;
	int rc;

	close_fds(ws);
	if (stat(ws->upper, &st) < 0)
		return pdk_error_set(err, errno, "cannot read '%s'", ws->upper);
	rc = copy_layer(src_fd, tmp, st.st_mode, err);
	if (rc == 0 && (rc = pdk_rm_rf_at(AT_FDCWD, ws->upper)) < 0)
		rc = pdk_error_set(err, -rc, "cannot replace '%s'", ws->upper);
	if (rc == 0 && rename(tmp, ws->upper) < 0)
		rc = pdk_error_set(err, errno, "cannot rename '%s' to '%s'", tmp, ws->upper);
	if (rc < 0) {
		(void)!pdk_rm_rf_at(AT_FDCWD, tmp);
		return pdk_error_wrap(err, "change set %s", ws->id);
	}
	return 0;
}

/* ---- commit ---- */

int pdk_ws_record_base(struct pdk_ws *ws, const struct pdk_ws_diff *diff, struct pdk_error **err)
{
	return pdk__ws_record(ws->dir, diff, err);
}

/*
 * The conflicts with what changed on the host since the base; EEXIST when
 * there are any (listed in the report).
 */
static int check_conflicts(struct pdk_ws *ws, int fd, const struct pdk_ws_diff *diff,
			   struct pdk_ws_commit_report *report, struct pdk_error **err)
{
	_cleanup_json_ json_t *record = NULL;
	struct timespec base;

	if (pdk__ws_base_get(ws->dir, ws->created_ns, &base, err) < 0 ||
	    pdk__ws_record_read(ws->dir, &record, err) < 0 ||
	    pdk_ws_conflicts_at(fd, diff, &base, record, report, err) < 0)
		return -1;
	if (report->n_conflicts == 0)
		return 0;
	return pdk_error_setx(err, EEXIST,
			      "%zu path(s) changed on the host since the run began: the commit "
			      "would overwrite them; look, then commit with --force to overwrite",
			      report->n_conflicts);
}

int pdk_ws_commit(struct pdk_ws *ws, const struct pdk_ws_diff *diff, unsigned flags,
		  struct pdk_ws_commit_report *report, struct pdk_error **err)
{
	_cleanup_close_ int fd = open(ws->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct pdk_ws_commit_report found = {0};
	struct stat st;
	int rc;

	memset(report, 0, sizeof(*report));
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open the workspace '%s'", ws->workspace);
	if (fstat(fd, &st) < 0)
		return pdk_error_set(err, errno, "cannot read the workspace '%s'", ws->workspace);
	/* SECURITY: the directory the changes were made on, not whatever has its name now. */
	if ((uint64_t)st.st_dev != ws->ws_dev || (uint64_t)st.st_ino != ws->ws_ino)
		return pdk_error_setx(err, ESTALE,
				      "the workspace '%s' is not the directory change set %s was "
				      "made on (it was replaced since)",
				      ws->workspace, ws->id);
	if (pdk_ws_check_synced(ws, flags & PDK_WS_COMMIT_FORCE, false, err) < 0)
		return -1;
	if (!(flags & PDK_WS_COMMIT_FORCE) && check_conflicts(ws, fd, diff, &found, err) < 0) {
		*report = found;
		return -1;
	}
	pdk_ws_commit_report_release(&found);
	rc = pdk_ws_commit_at(fd, ws->workspace, diff, flags, report, err);
	/* The directory holds the changes now: it is the base of whatever comes next. */
	if (rc == 0 && !(flags & PDK_WS_COMMIT_DRY_RUN) && pdk__ws_base_reset(ws->dir, err) < 0)
		return -1;
	return rc;
}
