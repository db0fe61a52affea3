/*
 * supervisor-files.c - open/stat/list/delete/mkdir in a running sandbox,
 * for the daemon's file API.
 *
 * SECURITY: each operation runs in a helper process that took on the
 * sandbox's confinement first (run_in_helper(), pdk_sandbox_enter_child()):
 * the sandbox's user namespace, user and groups, the Landlock ruleset its
 * init enforces, no capabilities, its seccomp filter. So the API gets the
 * answer a process of the sandbox would get, never one only the
 * supervisor's credentials (root's, or the owner's of the sandbox's user
 * namespace) would. Within that, every path is resolved by openat2() from
 * an O_PATH fd of the sandbox's root (/proc/<init>/root) with
 * RESOLVE_IN_ROOT, so "..", and symlinks (absolute ones too), stay inside
 * the sandbox's view; with RESOLVE_NO_MAGICLINKS a /proc/<pid>/root or
 * /proc/self/fd/N link planted in the sandbox cannot lead out either. The
 * final component of stat/delete/mkdir is acted on with *at() calls
 * relative to its parent, never followed. What the helper makes is owned
 * by the sandbox's user because it is that user; a mode never carries the
 * set-id bits.
 */
#include "common.h"
#include "base.h"
#include "supervisor-internal.h"
#include "svc-proto.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <linux/openat2.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIST_MAX 10000

int pdk__sv_open_in(struct pdk_supervisor *s, const char *path, int flags, mode_t mode)
{
	/* openat2() refuses O_NOCTTY with O_PATH (its flags are checked strictly). */
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY)),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = TEMP_FAILURE_RETRY(syscall(SYS_openat2, s->root_fd, path, &how, sizeof(how)));

	return fd < 0 ? -errno : (int)fd;
}

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

static void reply_errno(struct pdk_supervisor *s, json_int_t req, int e, const char *what,
			const char *path)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	(void)pdk_error_set(&err, e, "%s '%s'", what, path);
	pdk__sv_reply_error(s, req, pdk_svc_code_of(e), "path", err);
}

/* The request's path: absolute, no NUL, at most PATH_MAX. NULL after replying bad_request. */
static const char *get_path(struct pdk_supervisor *s, json_int_t req, json_t *msg)
{
	json_t *p = json_object_get(msg, "path");
	_cleanup_error_ struct pdk_error *err = NULL;

	if (!json_is_string(p) || json_string_length(p) == 0 || json_string_length(p) >= PATH_MAX ||
	    json_string_value(p)[0] != '/' ||
	    strlen(json_string_value(p)) != json_string_length(p)) {
		(void)pdk_error_setx(&err, EINVAL, "'path' must be an absolute path");
		pdk__sv_reply_error(s, req, "bad_request", "path", err);
		return NULL;
	}
	return json_string_value(p);
}

/*
 * Split `path` into its parent (opened O_PATH inside the root) and its last
 * component (a new string in *base). "/" has no last component: -EINVAL.
 * A last component of "." or ".." is refused too: it would name a
 * directory other than the one the parent fd stands for.
 */
static int open_parent(struct pdk_supervisor *s, const char *path, char **base)
{
	_cleanup_free_ char *p = pdk_xstrdup(path);
	size_t n = strlen(p);
	char *slash;
	int fd;

	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	slash = strrchr(p, '/');
	if (slash[1] == '\0' || strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0)
		return -EINVAL;
	*base = pdk_xstrdup(slash + 1);
	if (slash == p)
		slash[1] = '\0';
	else
		*slash = '\0';
	fd = pdk__sv_open_in(s, p, O_PATH | O_DIRECTORY, 0);
	if (fd < 0) {
		free(*base);
		*base = NULL;
	}
	return fd;
}

static int open_flags(const char *f, int *flags)
{
	static const struct {
		const char *name;
		int flags;
	} tab[] = {
		{"r", O_RDONLY},
		{"w", O_WRONLY | O_CREAT | O_TRUNC},
		{"a", O_WRONLY | O_CREAT | O_APPEND},
		{"wx", O_WRONLY | O_CREAT | O_EXCL},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(tab); i++) {
		if (strcmp(f, tab[i].name) == 0) {
			*flags = tab[i].flags;
			return 0;
		}
	}
	return -EINVAL;
}

/* mkdir one directory `path`; *made tells whether it was new. 0 or -errno. */
static int mkdir_one(struct pdk_supervisor *s, const char *path, mode_t mode, bool *made)
{
	_cleanup_free_ char *base = NULL;
	_cleanup_close_ int pfd = open_parent(s, path, &base);

	*made = false;
	if (pfd < 0)
		return pfd;
	if (mkdirat(pfd, base, mode) < 0)
		return -errno;
	*made = true;
	return 0;
}

/* mkdir -p: each missing directory of `path` (the last one too when `last`). */
static int mkdir_parents(struct pdk_supervisor *s, const char *path, bool last)
{
	_cleanup_free_ char *p = pdk_xstrdup(path);
	bool made;

	for (char *c = p + 1; *c != '\0'; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		int rc = mkdir_one(s, p, 0755, &made);

		*c = '/';
		if (rc < 0 && rc != -EEXIST)
			return rc;
	}
	if (last) {
		int rc = mkdir_one(s, p, 0755, &made);

		if (rc < 0 && rc != -EEXIST)
			return rc;
	}
	return 0;
}

static void op_open(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *path)
{
	const char *f = json_string_value(json_object_get(msg, "flags"));
	json_t *m = json_object_get(msg, "mode");
	/* SECURITY: a file made through the API is never set-user-ID or set-group-ID. */
	mode_t mode = json_is_integer(m) ? (mode_t)(json_integer_value(m) & 0777) : 0644;
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_close_ int fd = -1;
	bool created = false;
	struct stat st;
	int flags, rc;

	if (open_flags(f ? f : "r", &flags) < 0) {
		(void)pdk_error_setx(&err, EINVAL, "'flags' must be r, w, a or wx");
		pdk__sv_reply_error(s, req, "bad_request", "flags", err);
		return;
	}
	if (json_is_true(json_object_get(msg, "mkdir")) &&
	    (rc = mkdir_parents(s, path, false)) < 0) {
		reply_errno(s, req, -rc, "cannot make the parents of", path);
		return;
	}
	/*
	 * O_NONBLOCK: a FIFO planted in the sandbox must not hang the
	 * supervisor; only a regular file is handed out.
	 */
	if (flags & O_CREAT) {
		fd = pdk__sv_open_in(s, path, (flags & ~O_TRUNC) | O_EXCL | O_NONBLOCK, mode);
		created = fd >= 0;
	}
	if (fd == -EEXIST && !(flags & O_EXCL))
		fd = pdk__sv_open_in(s, path, (flags & ~O_CREAT) | O_NONBLOCK, 0);
	else if (!(flags & O_CREAT))
		fd = pdk__sv_open_in(s, path, flags | O_NONBLOCK, 0);
	if (fd < 0) {
		reply_errno(s, req, -fd, "cannot open", path);
		fd = -1;
		return;
	}
	if (fstat(fd, &st) < 0) {
		reply_errno(s, req, errno, "cannot stat", path);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		reply_errno(s, req, S_ISDIR(st.st_mode) ? EISDIR : EINVAL,
			    "not a regular file:", path);
		return;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0 ||
	    (!created && (flags & O_TRUNC) && ftruncate(fd, 0) < 0)) {
		reply_errno(s, req, errno, "cannot prepare", path);
		return;
	}
	{
		json_t *r = json_pack("{s:I, s:I, s:s}", "req", req, "size",
				      (json_int_t)(created || (flags & O_TRUNC) ? 0 : st.st_size),
				      "type", "file");

		pdk__sv_send(s, r, &fd, 1);
	}
}

static json_t *stat_json(const struct stat *st)
{
	return json_pack("{s:s, s:I, s:i, s:I}", "type", type_name(st->st_mode), "size",
			 (json_int_t)st->st_size, "mode", (int)(st->st_mode & 07777), "mtime_ns",
			 (json_int_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec);
}

static void op_stat(struct pdk_supervisor *s, json_int_t req, const char *path)
{
	_cleanup_free_ char *base = NULL;
	_cleanup_close_ int pfd = -1;
	struct stat st;
	json_t *r;
	int rc;

	if (strspn(path, "/") == strlen(path)) {
		rc = fstatat(s->root_fd, "", &st, AT_EMPTY_PATH);
	} else {
		pfd = open_parent(s, path, &base);
		rc = pfd < 0 ? (errno = -pfd, -1) : fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW);
	}
	if (rc < 0) {
		reply_errno(s, req, errno, "cannot stat", path);
		return;
	}
	r = stat_json(&st);
	pdk_json_set(r, "req", json_integer(req));
	pdk__sv_send(s, r, NULL, 0);
}

static void op_list(struct pdk_supervisor *s, json_int_t req, const char *path)
{
	_cleanup_closedir_ DIR *d = NULL;
	json_t *entries = json_array();
	json_t *r;
	struct dirent *de;
	bool truncated = false;
	int fd = pdk__sv_open_in(s, path, O_RDONLY | O_DIRECTORY, 0);

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		int e = fd < 0 ? -fd : errno;

		if (fd >= 0)
			(void)close(fd);
		json_decref(entries);
		reply_errno(s, req, e, "cannot list", path);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		json_t *e;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (json_array_size(entries) == LIST_MAX) {
			truncated = true;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		e = stat_json(&st);
		pdk_ws_json_set_path(e, "name", de->d_name);
		json_array_append_new(entries, e);
	}
	r = json_pack("{s:I, s:o}", "req", req, "entries", entries);
	if (truncated)
		pdk_json_set(r, "truncated", json_true());
	pdk__sv_send(s, r, NULL, 0);
}

static void reply_ok(struct pdk_supervisor *s, json_int_t req)
{
	pdk__sv_send(s, json_pack("{s:I, s:b}", "req", req, "ok", 1), NULL, 0);
}

static void op_delete(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *path)
{
	_cleanup_free_ char *base = NULL;
	_cleanup_close_ int pfd = open_parent(s, path, &base);
	struct stat st;
	int rc;

	if (pfd < 0) {
		reply_errno(s, req, -pfd, "cannot delete", path);
		return;
	}
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		reply_errno(s, req, errno, "cannot delete", path);
		return;
	}
	if (!S_ISDIR(st.st_mode))
		rc = unlinkat(pfd, base, 0) < 0 ? -errno : 0;
	else if (json_is_true(json_object_get(msg, "recursive")))
		rc = pdk_rm_rf_at(pfd, base);
	else
		rc = unlinkat(pfd, base, AT_REMOVEDIR) < 0 ? -errno : 0;
	if (rc < 0)
		reply_errno(s, req, -rc, "cannot delete", path);
	else
		reply_ok(s, req);
}

static void op_mkdir(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *path)
{
	json_t *parents = json_object_get(msg, "parents");
	bool made;
	int rc;

	if (parents == NULL || json_is_true(parents))
		rc = mkdir_parents(s, path, true);
	else
		rc = mkdir_one(s, path, 0755, &made);
	if (rc < 0)
		reply_errno(s, req, -rc, "cannot make directory", path);
	else
		reply_ok(s, req);
}

typedef void (*file_op_fn)(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *path);

static void do_stat(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *path)
{
	(void)msg;
	op_stat(s, req, path);
}

static void do_list(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *path)
{
	(void)msg;
	op_list(s, req, path);
}

/*
 * The helper's side: confined as the sandbox's processes are, it does the
 * one operation and answers on `sock` instead of the daemon's connection.
 */
static _Noreturn void helper_main(struct pdk_supervisor *s, int sock, file_op_fn fn, json_int_t req,
				  json_t *msg, const char *path, bool net)
{
	struct pdk_child_error ce = {0};
	int rc;

	/* A helper never outlives the supervisor, and never writes to the daemon itself. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (s->conn_fd >= 0)
		(void)close(s->conn_fd);
	if (s->listen_fd >= 0)
		(void)close(s->listen_fd);
	s->conn_fd = sock;
	s->listen_fd = -1;
	rc = net ? pdk_sandbox_enter_net_child(pdk__sv_sandbox(s), &ce)
		 : pdk_sandbox_enter_child(pdk__sv_sandbox(s), &ce);
	if (rc < 0) {
		struct pdk_error e = {.status = ce.err, .msg = ce.msg};

		pdk__sv_reply_error(s, req, "internal", NULL, &e);
		_exit(1);
	}
	fn(s, req, msg, path);
	_exit(0);
}

static void reap_helper(pid_t pid)
{
	int st;

	/* The helper has answered or died: this does not wait long. */
	(void)TEMP_FAILURE_RETRY(waitpid(pid, &st, 0));
}

/*
 * SECURITY: every file operation runs in a helper process that took on the
 * sandbox's confinement (pdk_sandbox_enter_child(): its user namespace,
 * user, Landlock ruleset, no capabilities, its seccomp filter), so what the
 * API reads, writes, makes or deletes is what a process of the sandbox may:
 * never a file only the supervisor's credentials reach. Its answer (and the
 * descriptor of an open) comes back on a socket pair and goes on to the
 * daemon as it is.
 */
static void run_in_helper(struct pdk_supervisor *s, file_op_fn fn, json_int_t req, json_t *msg,
			  const char *path, bool net)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int fds[PDK_SVC_MAX_FDS];
	size_t nfds = PDK_SVC_MAX_FDS;
	json_t *reply = NULL;
	int sp[2], rc;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return pdk__sv_reply_errorx(s, req, "internal", NULL,
					    "cannot start the helper: out of descriptors");
	pid = pdk_proc_fork(&err);
	if (pid == 0)
		helper_main(s, sp[1], fn, req, msg, path, net);
	(void)close(sp[1]);
	if (pid < 0) {
		(void)close(sp[0]);
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	}
	rc = pdk_svc_recv(sp[0], &reply, fds, &nfds, &err);
	(void)close(sp[0]);
	reap_helper(pid);
	if (rc != 1)
		return pdk__sv_reply_errorx(s, req, "internal", net ? "port" : "path",
					    "the helper ended without an answer");
	pdk__sv_send(s, reply, fds, nfds);
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
}

/*
 * The helper's side of a connect: a TCP connection to 127.0.0.1:port made
 * in the sandbox's network namespace, as the sandbox's user, under its
 * Landlock network rules; the descriptor goes back with the answer.
 */
static void op_connect(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *path)
{
	uint16_t port = (uint16_t)json_integer_value(json_object_get(msg, "port"));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	(void)path;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || TEMP_FAILURE_RETRY(connect(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0) {
		int e = errno;

		(void)pdk_error_set(&err, e, "cannot connect to 127.0.0.1:%u in the sandbox",
				    (unsigned)port);
		pdk__sv_reply_error(s, req, e == ECONNREFUSED ? "not_found" : pdk_svc_code_of(e),
				    "port", err);
		return;
	}
	pdk__sv_send(s, json_pack("{s:I, s:b}", "req", req, "ok", 1), &fd, 1);
}

/* {"op":"connect","port":N}: 1 to 65535, else bad_request. */
static void connect_op(struct pdk_supervisor *s, json_int_t req, json_t *msg)
{
	json_t *p = json_object_get(msg, "port");

	if (!json_is_integer(p) || json_integer_value(p) < 1 || json_integer_value(p) > 65535)
		return pdk__sv_reply_errorx(s, req, "bad_request", "port",
					    "'port' must be a number from 1 to 65535");
	run_in_helper(s, op_connect, req, msg, NULL, true);
}

bool pdk__sv_file_op(struct pdk_supervisor *s, const char *op, json_int_t req, json_t *msg)
{
	static const struct {
		const char *name;
		file_op_fn fn;
	} ops[] = {
		{"open", op_open},     {"stat", do_stat},   {"list", do_list},
		{"delete", op_delete}, {"mkdir", op_mkdir},
	};
	const char *path;

	if (strcmp(op, "connect") == 0) {
		connect_op(s, req, msg);
		return true;
	}
	for (size_t i = 0; i < PDK_ARRAY_SIZE(ops); i++) {
		if (strcmp(op, ops[i].name) != 0)
			continue;
		path = get_path(s, req, msg);
		if (path != NULL)
			run_in_helper(s, ops[i].fn, req, msg, path, false);
		return true;
	}
	return false;
}

/* ---- carrying the tmpfs directories across an init restart ---- */

#define CARRY_DEPTH_MAX   128
#define CARRY_ENTRIES_MAX 100000

struct carry {
	dev_t dev;  /* of the source tree's top: deeper mounts are not entered */
	dev_t ddev; /* of the destination's top: the same there */
	bool chown; /* give what is made to the sandbox's user */
	uid_t uid;
	gid_t gid;
	uint64_t entries; /* made so far */
	uint64_t skipped; /* special files and mount points left out */
};

static int carry_tree(struct carry *c, int sfd, int dfd, unsigned depth);

static void carry_times(int fd, const struct stat *st)
{
	const struct timespec ts[2] = {st->st_atim, st->st_mtim};

	(void)futimens(fd, ts);
}

static int carry_dir(struct carry *c, int sfd, int dfd, const char *name, const struct stat *st,
		     unsigned depth)
{
	int in, out, rc;
	struct stat dst;

	if (st->st_dev != c->dev) { /* a mount point (the workspace, a bind): not ours */
		c->skipped++;
		return 0;
	}
	if (mkdirat(dfd, name, 0700) == 0) {
		c->entries++;
		if (c->chown)
			(void)!fchownat(dfd, name, c->uid, c->gid, AT_SYMLINK_NOFOLLOW);
	} else if (errno != EEXIST) {
		return -errno;
	}
	in = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -errno;
	out = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (out < 0) {
		rc = -errno;
		(void)close(in);
		return rc == -ENOTDIR || rc == -ELOOP ? (c->skipped++, 0) : rc;
	}
	/* An existing directory on another mounted file system is left alone. */
	if (fstat(out, &dst) < 0 || dst.st_dev != c->ddev) {
		c->skipped++;
		rc = 0;
	} else {
		rc = carry_tree(c, in, out, depth + 1);
		(void)fchmod(out, st->st_mode & 07777);
		carry_times(out, st);
	}
	(void)close(in);
	(void)close(out);
	return rc;
}

static int carry_file(struct carry *c, int sfd, int dfd, const char *name)
{
	struct stat st;
	int in, out, rc;

	in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) { /* swapped meanwhile */
		(void)close(in);
		c->skipped++;
		return 0;
	}
	out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = -errno;
		(void)close(in);
		return rc == -EEXIST ? (c->skipped++, 0) : rc;
	}
	c->entries++;
	rc = pdk_copy_sparse(in, out, (uint64_t)st.st_size);
	if (rc == 0) {
		if (c->chown)
			(void)!fchown(out, c->uid, c->gid);
		(void)fchmod(out, st.st_mode & 07777);
		carry_times(out, &st);
	}
	(void)close(in);
	(void)close(out);
	return rc;
}

static int carry_link(struct carry *c, int sfd, int dfd, const char *name)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);

	if (n < 0)
		return -errno;
	target[n] = '\0';
	if (symlinkat(target, dfd, name) < 0)
		return errno == EEXIST ? (c->skipped++, 0) : -errno;
	c->entries++;
	if (c->chown)
		(void)!fchownat(dfd, name, c->uid, c->gid, AT_SYMLINK_NOFOLLOW);
	return 0;
}

/*
 * Copy what is in directory sfd into dfd: directories, regular files (holes
 * kept), symlinks (never followed: every open is O_NOFOLLOW and relative to
 * a directory fd, so a sandbox swapping names meanwhile cannot lead the copy
 * anywhere else); FIFOs, sockets and devices are left out, as is any
 * directory on another file system. Existing entries in dfd are kept.
 */
static int carry_tree(struct carry *c, int sfd, int dfd, unsigned depth)
{
	DIR *d;
	struct dirent *de;
	int fd, rc = 0;

	if (depth > CARRY_DEPTH_MAX)
		return -ELOOP;
	fd = dup(sfd);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (d == NULL) {
		rc = -errno;
		(void)close(fd);
		return rc;
	}
	while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (c->entries >= CARRY_ENTRIES_MAX) {
			rc = -E2BIG;
			break;
		}
		if (fstatat(sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				rc = -errno;
			continue;
		}
		if (S_ISDIR(st.st_mode))
			rc = carry_dir(c, sfd, dfd, de->d_name, &st, depth);
		else if (S_ISREG(st.st_mode))
			rc = carry_file(c, sfd, dfd, de->d_name);
		else if (S_ISLNK(st.st_mode))
			rc = carry_link(c, sfd, dfd, de->d_name);
		else
			c->skipped++;
	}
	if (rc == 0 && errno != 0 && de == NULL)
		rc = -errno;
	(void)closedir(d);
	return rc;
}

static char *carry_stage(struct pdk_supervisor *s)
{
	return pdk_xasprintf("%s/carry", s->run_dir);
}

int pdk__sv_carry_out(struct pdk_supervisor *s, struct pdk_error **err)
{
	_cleanup_free_ char *stage = carry_stage(s);
	char *const *dirs = pdk__sv_policy(s)->tmpfs;
	int sd = -1, rc = 0;

	(void)!pdk_rm_rf_at(AT_FDCWD, stage);
	if (mkdir(stage, 0700) < 0)
		return pdk_error_set(err, errno, "cannot make '%s'", stage);
	sd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sd < 0)
		return pdk_error_set(err, errno, "cannot open '%s'", stage);
	for (size_t i = 0; rc == 0 && dirs != NULL && dirs[i] != NULL; i++) {
		_cleanup_free_ char *slot = pdk_xasprintf("%zu", i);
		struct carry c = {0};
		struct stat st;
		int in = pdk__sv_open_in(s, dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0), out;

		if (in < 0) {
			if (in == -ENOENT)
				continue;
			rc = pdk_error_set(err, -in, "cannot open the sandbox's '%s'", dirs[i]);
			break;
		}
		if (fstat(in, &st) < 0 || mkdirat(sd, slot, 0700) < 0 ||
		    (out = openat(sd, slot, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			rc = pdk_error_set(err, errno, "cannot stage '%s'", dirs[i]);
			(void)close(in);
			break;
		}
		c.dev = st.st_dev;
		if (fstat(out, &st) < 0) {
			rc = pdk_error_set(err, errno, "cannot stage '%s'", dirs[i]);
			(void)close(in);
			(void)close(out);
			break;
		}
		c.ddev = st.st_dev;
		rc = carry_tree(&c, in, out, 0);
		if (rc < 0)
			rc = pdk_error_set(err, -rc, "cannot keep the sandbox's '%s'%s", dirs[i],
					   rc == -E2BIG ? " (too many entries)" : "");
		(void)close(in);
		(void)close(out);
	}
	(void)close(sd);
	if (rc < 0)
		(void)!pdk_rm_rf_at(AT_FDCWD, stage);
	return rc;
}

int pdk__sv_carry_in(struct pdk_supervisor *s, struct pdk_error **err)
{
	_cleanup_free_ char *stage = carry_stage(s);
	char *const *dirs = pdk__sv_policy(s)->tmpfs;
	struct carry c = {.chown = true};
	int sd, rc = 0;

	pdk_sandbox_owner(pdk__sv_sandbox(s), &c.uid, &c.gid);
	sd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sd < 0)
		return errno == ENOENT ? 0 : pdk_error_set(err, errno, "cannot open '%s'", stage);
	for (size_t i = 0; rc == 0 && dirs != NULL && dirs[i] != NULL; i++) {
		_cleanup_free_ char *slot = pdk_xasprintf("%zu", i);
		int in = openat(sd, slot, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), out;
		struct stat st;

		if (in < 0)
			continue;
		out = pdk__sv_open_in(s, dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
		if (out >= 0 && fstat(in, &st) == 0)
			c.dev = st.st_dev;
		if (out < 0 || fstat(out, &st) < 0) {
			rc = pdk_error_set(err, out < 0 ? -out : errno,
					   "cannot open the new sandbox's '%s'", dirs[i]);
		} else {
			/* Mount points in the new tree (the workspace under /tmp) are not entered.
			 */
			c.ddev = st.st_dev;
			rc = carry_tree(&c, in, out, 0);
			if (rc < 0)
				rc = pdk_error_set(err, -rc, "cannot put back the sandbox's '%s'",
						   dirs[i]);
		}
		if (out >= 0)
			(void)close(out);
		(void)close(in);
	}
	(void)close(sd);
	(void)!pdk_rm_rf_at(AT_FDCWD, stage);
	return rc;
}
