/*
 * cmd-cp.c - `paddock cp SRC DST`: files and directories into or out of a
 * sandbox of the daemon (one side is ID:/path).
 *
 * Directories travel as tar archives. The sandbox's side of the archive is
 * made or unpacked by tar inside the sandbox (the daemon's archive routes),
 * so a hostile archive meets the sandbox's confinement. This side runs the
 * host's GNU tar as the calling user, without its owners or permission bits
 * (--no-same-owner --no-same-permissions): GNU tar refuses members with
 * "..", strips leading "/", and extracts symlinks that point outside the
 * target as placeholders it replaces only at the end, so a member cannot be
 * written through a symlink of the same archive.
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char help[] =
	"usage: paddock cp [OPTIONS] SRC DST\n"
	"\n"
	"Copy a file or a directory between this machine and a sandbox of the daemon\n"
	"('paddock serve'). One of SRC and DST is ID:/PATH, a path inside sandbox ID;\n"
	"the other is a local path.\n"
	"\n"
	"  paddock cp ./src ID:/work       ./src into /work/src (when /work is a\n"
	"                                  directory; else it becomes /work)\n"
	"  paddock cp ID:/work/out.txt .   the file into ./out.txt\n"
	"  paddock cp ID:/work/build ./b   the directory into ./b (or ./b/build\n"
	"                                  when ./b is a directory)\n"
	"  paddock cp ID:/work/out.txt -   the file to standard output (a directory:\n"
	"                                  its tar archive)\n"
	"\n"
	"A file keeps its permission bits; a directory travels as a tar archive, made\n"
	"or unpacked inside the sandbox by tar under the sandbox's own confinement,\n"
	"and on this side by tar without owners or permission bits. An upload is\n"
	"limited to 64 MiB (the daemon's --max-body); a download, to the sandbox's\n"
	"output budget.\n"
	"\n"
	"options:\n" PDK_CLI_CONN_HELP "\n"
	"exit status: 0; 1 a local file or tar failed; 122 bad option or argument;\n"
	"125 the daemon could not be reached or refused (its error is printed).\n";

/* What one upload may weigh: the daemon's default --max-body. */
#define UPLOAD_MAX ((size_t)64 << 20)

static const struct pdk_cli_verb verb = {"", NULL, help, NULL, NULL};

struct remote {
	char *id;
	const char *path;
};

/* "ID:/path" -> remote; false for a local path. */
static bool parse_remote(const char *s, struct remote *r)
{
	const char *colon = strchr(s, ':');

	if (colon == NULL || colon == s || memchr(s, '/', (size_t)(colon - s)) != NULL)
		return false;
	r->id = strndup(s, (size_t)(colon - s));
	if (r->id == NULL)
		pdk_oom();
	r->path = colon + 1;
	return true;
}

static char *sb_path(const char *id, const char *route, const char *path, const char *extra)
{
	_cleanup_free_ char *eid = pdk_client_escape(id);
	_cleanup_free_ char *ep = pdk_client_escape(path);

	return pdk_xasprintf("/v1/sandboxes/%s/%s?path=%s%s", eid, route, ep, extra ? extra : "");
}

/* The remote entry's type ("file", "dir", ...), NULL when it does not exist; -1 on error. */
static int remote_type(struct pdk_client *c, const struct remote *r, char **type)
{
	_cleanup_free_ char *path = sb_path(r->id, "stat", r->path, NULL);
	struct pdk_error *err = NULL;
	json_t *out = NULL;

	*type = NULL;
	if (pdk_client_json(c, "GET", path, NULL, &out, NULL, &err) < 0) {
		if (err->status == ENOENT && strncmp(err->msg, "not_found", 9) == 0 &&
		    strstr(err->msg, "sandbox") == NULL) {
			pdk_error_free(&err);
			return 0;
		}
		(void)pdk_cli_api_fail(c, &err);
		return -1;
	}
	if (json_string_value(json_object_get(out, "type")) != NULL)
		*type = pdk_xstrdup(json_string_value(json_object_get(out, "type")));
	json_decref(out);
	return 0;
}

/* DIR + "/" + basename(NAME). Caller frees. */
static char *join_base(const char *dir, const char *name)
{
	_cleanup_free_ char *copy = pdk_xstrdup(name);
	size_t n = strlen(dir);

	/* basename() of "a/b/" is "b": trailing slashes are not a name. */
	return pdk_xasprintf("%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", basename(copy));
}

/* ---- the local tar ---- */

struct tar_arg {
	const char *path;
	char *const *argv;
	int fd;     /* the pipe end tar reads or writes */
	int target; /* STDIN_FILENO or STDOUT_FILENO */
};

/* In the child (shares our memory until exec, see pdk_proc_clone): no allocation. */
static int tar_child(void *arg)
{
	const struct tar_arg *a = arg;

	if (dup2(a->fd, a->target) < 0)
		_exit(127);
	execve(a->path, a->argv, environ);
	_exit(127);
}

static const char *tar_path(void)
{
	static const char *const paths[] = {"/usr/bin/tar", "/bin/tar"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(paths); i++) {
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	}
	return NULL;
}

/* Start tar with `argv`; *fd is our end of its stdin (extract) or stdout (create). */
static pid_t tar_start(char *const *argv, bool extract, int *fd)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_close_ int pidfd = -1;
	int p[2];
	struct tar_arg a = {.path = tar_path(), .argv = argv};
	pid_t pid;

	if (a.path == NULL) {
		pdk_cli_error("tar is not installed here (/usr/bin/tar)");
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		pdk_cli_error("pipe: %s", strerror(errno));
		return -1;
	}
	a.fd = extract ? p[0] : p[1];
	a.target = extract ? STDIN_FILENO : STDOUT_FILENO;
	pid = pdk_proc_clone(0, tar_child, &a, &pidfd, &err);
	(void)close(a.fd);
	*fd = extract ? p[1] : p[0];
	if (pid < 0) {
		(void)close(*fd);
		pdk_cli_error("tar: %s", err->msg);
		return -1;
	}
	return pid;
}

static bool tar_wait(pid_t pid)
{
	int st = 0;

	if (TEMP_FAILURE_RETRY(waitpid(pid, &st, 0)) < 0)
		return false;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return true;
	pdk_cli_error("tar failed (%s %d)", WIFEXITED(st) ? "exit status" : "signal",
		      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return false;
}

/* ---- uploads ---- */

static int put(struct pdk_client *c, const char *path, const char *ctype, const char *body,
	       size_t len)
{
	struct pdk_error *err = NULL;
	struct pdk_client_req q = {.method = "PUT",
				   .path = path,
				   .content_type = ctype,
				   .body = body,
				   .body_len = len};
	int r = pdk_cli_request(c, &q, &err);

	return r < 0 ? pdk_cli_api_fail(c, &err) : r;
}

static int upload_file(struct pdk_client *c, const char *src, const struct stat *st,
		       const struct remote *dst, const char *target)
{
	_cleanup_close_ int fd = TEMP_FAILURE_RETRY(open(src, O_RDONLY | O_CLOEXEC));
	_cleanup_free_ char *buf = NULL;
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *mode = pdk_xasprintf("&mode=%04o", (unsigned)(st->st_mode & 07777));
	size_t len = 0;
	int r;

	if (fd < 0) {
		pdk_cli_error("cannot open '%s': %s", src, strerror(errno));
		return 1;
	}
	r = pdk_cli_slurp(fd, UPLOAD_MAX, &buf, &len);
	if (r < 0) {
		pdk_cli_error("read '%s': %s", src,
			      r == -E2BIG ? "larger than 64 MiB" : strerror(-r));
		return 1;
	}
	path = sb_path(dst->id, "files", target, mode);
	return put(c, path, "application/octet-stream", buf, len);
}

/*
 * mkdir -p TARGET in the sandbox, by its own mkdir (as the sandbox's user):
 * the archive route extracts into an existing directory.
 */
static int remote_mkdir(struct pdk_client *c, const char *id, const char *target)
{
	_cleanup_free_ char *eid = pdk_client_escape(id);
	_cleanup_free_ char *path = pdk_xasprintf("/v1/sandboxes/%s/exec", eid);
	_cleanup_json_ json_t *body = json_pack("{s:[s, s, s]}", "argv", "mkdir", "-p", target);
	_cleanup_json_ json_t *out = pdk_cli_call(c, "POST", path, body);
	json_t *code;

	if (out == NULL)
		return PDK_CLI_EXIT_API;
	code = json_object_get(out, "exit_code");
	if (!json_is_integer(code) || json_integer_value(code) != 0) {
		pdk_cli_error(
			"cannot make directory '%s' in sandbox %s: %s", target, id,
			json_string_value(json_object_get(json_object_get(out, "stderr"), "text")));
		return PDK_CLI_EXIT_API;
	}
	return 0;
}

static int upload_dir(struct pdk_client *c, const char *src, const struct remote *dst,
		      const char *target)
{
	char *const argv[] = {"tar", "-c", "-f", "-", "-C", (char *)src, ".", NULL};
	_cleanup_free_ char *buf = NULL;
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -1;
	size_t len = 0;
	pid_t pid = tar_start(argv, false, &fd);
	int r;

	if (pid < 0)
		return 1;
	r = pdk_cli_slurp(fd, UPLOAD_MAX, &buf, &len);
	if (r < 0) {
		(void)kill(pid, SIGKILL);
		(void)tar_wait(pid);
		pdk_cli_error("archive of '%s': %s", src,
			      r == -E2BIG ? "larger than 64 MiB" : strerror(-r));
		return 1;
	}
	if (!tar_wait(pid))
		return 1;
	r = remote_mkdir(c, dst->id, target);
	if (r != 0)
		return r;
	path = sb_path(dst->id, "archive", target, NULL);
	return put(c, path, "application/x-tar", buf, len);
}

static int upload(struct pdk_client *c, const char *src, const struct remote *dst)
{
	_cleanup_free_ char *type = NULL;
	_cleanup_free_ char *target = NULL;
	struct stat st;

	if (stat(src, &st) < 0) {
		pdk_cli_error("cannot copy '%s': %s", src, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		pdk_cli_error("'%s' is neither a file nor a directory", src);
		return 1;
	}
	if (remote_type(c, dst, &type) < 0)
		return PDK_CLI_EXIT_API;
	target = type != NULL && strcmp(type, "dir") == 0 ? join_base(dst->path, src)
							  : pdk_xstrdup(dst->path);
	if (S_ISDIR(st.st_mode))
		return upload_dir(c, src, dst, target);
	return upload_file(c, src, &st, dst, target);
}

/* ---- downloads ---- */

struct sink {
	int fd;
	bool failed;
	int err;
};

static int to_fd(void *ud, const char *data, size_t len)
{
	struct sink *s = ud;

	if (!pdk_cli_write(s->fd, data, len)) {
		s->failed = true;
		s->err = errno;
		return 1;
	}
	return 0;
}

static int get_into(struct pdk_client *c, const char *path, struct sink *s)
{
	struct pdk_error *err = NULL;
	struct pdk_client_req q = {.method = "GET", .path = path, .on_data = to_fd, .ud = s};
	int r = pdk_cli_request(c, &q, &err);

	if (r >= 0)
		return r;
	if (!s->failed)
		return pdk_cli_api_fail(c, &err);
	pdk_error_free(&err);
	pdk_cli_error("write: %s", strerror(s->err));
	return 1;
}

static int download_file(struct pdk_client *c, const struct remote *src, const char *target)
{
	_cleanup_free_ char *path = sb_path(src->id, "files", src->path, NULL);
	struct sink s = {.fd = TEMP_FAILURE_RETRY(
				 open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644))};
	int r;

	if (s.fd < 0) {
		pdk_cli_error("cannot write '%s': %s", target, strerror(errno));
		return 1;
	}
	r = get_into(c, path, &s);
	if (close(s.fd) < 0 && r == 0) {
		pdk_cli_error("write '%s': %s", target, strerror(errno));
		r = 1;
	}
	return r;
}

static int download_dir(struct pdk_client *c, const struct remote *src, const char *target)
{
	char *const argv[] = {
		"tar", "-x",           "-f", "-", "--no-same-owner", "--no-same-permissions",
		"-C",  (char *)target, NULL};
	_cleanup_free_ char *path = sb_path(src->id, "archive", src->path, NULL);
	struct sink s = {.fd = -1};
	pid_t pid;
	int r;

	if (mkdir(target, 0755) < 0 && errno != EEXIST) {
		pdk_cli_error("cannot make directory '%s': %s", target, strerror(errno));
		return 1;
	}
	pid = tar_start(argv, true, &s.fd);
	if (pid < 0)
		return 1;
	r = get_into(c, path, &s);
	(void)close(s.fd);
	if (!tar_wait(pid) && r == 0)
		r = 1;
	return r;
}

/*
 * DST "-": the bytes go to standard output, never to a file named "-": a
 * file's contents, or a directory as the tar archive the daemon sends.
 */
static int download_stdout(struct pdk_client *c, const struct remote *src, const char *type)
{
	_cleanup_free_ char *path = NULL;
	struct sink s = {.fd = STDOUT_FILENO};

	if (strcmp(type, "file") != 0 && strcmp(type, "dir") != 0) {
		pdk_cli_error("'%s' in sandbox %s is a %s: only files and directories are copied",
			      src->path, src->id, type);
		return 1;
	}
	path = sb_path(src->id, strcmp(type, "dir") == 0 ? "archive" : "files", src->path, NULL);
	return get_into(c, path, &s);
}

static int download(struct pdk_client *c, const struct remote *src, const char *dst)
{
	_cleanup_free_ char *type = NULL;
	_cleanup_free_ char *target = NULL;
	struct stat st;
	bool dst_dir = stat(dst, &st) == 0 && S_ISDIR(st.st_mode);

	if (remote_type(c, src, &type) < 0)
		return PDK_CLI_EXIT_API;
	if (type == NULL) {
		pdk_cli_error("not_found: no '%s' in sandbox %s", src->path, src->id);
		return PDK_CLI_EXIT_API;
	}
	if (strcmp(dst, "-") == 0)
		return download_stdout(c, src, type);
	target = dst_dir ? join_base(dst, src->path) : pdk_xstrdup(dst);
	if (strcmp(type, "dir") == 0)
		return download_dir(c, src, target);
	if (strcmp(type, "file") == 0)
		return download_file(c, src, target);
	pdk_cli_error("'%s' in sandbox %s is a %s: only files and directories are copied",
		      src->path, src->id, type);
	return 1;
}

int pdk_cmd_cp(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct remote from = {0}, to = {0};
	bool rf, rt;
	struct pdk_client *c;
	int r = pdk_cli_parse(&verb, argc, argv, &conn, NULL);

	if (r != 0)
		return r < 0 ? 0 : r;
	if (argc - optind != 2)
		return pdk_cli_usage_error("cp", "expected SRC DST");
	rf = parse_remote(argv[optind], &from);
	rt = parse_remote(argv[optind + 1], &to);
	if (rf == rt || (rf ? from.path : to.path)[0] != '/') {
		free(from.id);
		free(to.id);
		return pdk_cli_usage_error("cp",
					   "exactly one of SRC and DST must be ID:/ABSOLUTE/PATH");
	}
	c = pdk_cli_connect(&conn);
	r = c == NULL ? PDK_CLI_EXIT_USAGE
	    : rf      ? download(c, &from, argv[optind + 1])
		      : upload(c, argv[optind], &to);
	pdk_client_free(c);
	free(from.id);
	free(to.id);
	return r;
}
