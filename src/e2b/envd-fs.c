/*
 * envd-fs.c - envd's filesystem.Filesystem service over Connect
 * (docs/e2b.md, "filesystem.Filesystem"). Stat, ListDir and Remove are the
 * control layer's file operations, which the sandbox's supervisor performs
 * inside the sandbox's root; MakeDir and Move are mkdir and mv run inside
 * the sandbox (its user, its confinement), then a Stat of the result.
 * WatchDir is envd-watch.c.
 */
#include "common.h"
#include "e2b-internal.h"
#include "telemetry.h"

#include <string.h>
#include <sys/stat.h>

/* ListDir's deepest walk, and the most entries one answer holds. */
#define LIST_DEPTH_MAX   64
#define LIST_ENTRIES_MAX 10000

/* ---- shared by the methods ---- */

struct pdk_ctl_sb *pdk__e2b_call_sb(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sb *sb = NULL;

	if (pdk_ctl_find(call->e->ctl, call->who.sandbox, PDK_CTL_FIND_LIVE, &sb, &err) < 0) {
		pdk__e2b_fail(call, err);
		return NULL;
	}
	return sb;
}

char *pdk__e2b_call_path(struct pdk__e2b_call *call, struct pdk_ctl_sb *sb, const char *field)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *p = json_string_value(json_object_get(call->msg, field));
	char *path;

	if (p == NULL || p[0] == '\0') {
		(void)pdk_error_set_field(&err, EINVAL, field, "%s must be a non-empty string",
					  field);
		pdk__e2b_fail(call, err);
		return NULL;
	}
	path = pdk_ctl_sb_path(sb, p, &err);
	if (path == NULL)
		pdk__e2b_fail(call, err);
	return path;
}

static void fail_doc(struct pdk__e2b_call *call, const struct pdk_error *err)
{
	pdk__e2b_fail(call, err);
}

/* Go's os.FileMode string of `type` and permission bits, as envd writes it ("drwxr-xr-x"). */
static void permissions(const char *type, unsigned mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = strcmp(type, "dir") == 0 ? 'd' : strcmp(type, "symlink") == 0 ? 'L' : '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
	out[10] = '\0';
}

json_t *pdk__e2b_entry_json(const char *path, const json_t *doc)
{
	const char *type = json_string_value(json_object_get(doc, "type"));
	unsigned mode = (unsigned)json_integer_value(json_object_get(doc, "mode")) & 0777;
	json_int_t mtime = json_integer_value(json_object_get(doc, "mtime_ns"));
	const char *slash = strrchr(path, '/');
	char perm[11], ts[40], size[24];
	unsigned gomode = mode;

	type = type ? type : "other";
	/* Go's FileMode keeps the type in its high bits: ModeDir 1<<31, ModeSymlink 1<<27. */
	if (strcmp(type, "dir") == 0)
		gomode |= 1u << 31;
	else if (strcmp(type, "symlink") == 0)
		gomode |= 1u << 27;
	permissions(type, mode, perm);
	pdk_events_format_ts((uint64_t)mtime, ts, sizeof(ts));
	/* protobuf's JSON writes an int64 as a string. */
	(void)snprintf(size, sizeof(size), "%lld",
		       (long long)json_integer_value(json_object_get(doc, "size")));
	return json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s}", "name",
			 slash && slash[1] ? slash + 1 : path, "type",
			 strcmp(type, "dir") == 0       ? "FILE_TYPE_DIRECTORY"
			 : strcmp(type, "symlink") == 0 ? "FILE_TYPE_SYMLINK"
			 : strcmp(type, "file") == 0    ? "FILE_TYPE_FILE"
							: "FILE_TYPE_UNSPECIFIED",
			 "path", path, "size", size, "mode", (json_int_t)gomode, "permissions",
			 perm, "modifiedTime", ts);
}

/* ---- Stat ---- */

struct stat_op {
	struct pdk__e2b_call *call;
	char *path;
};

static void stat_done(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct stat_op *op = ctx;

	if (err != NULL)
		fail_doc(op->call, err);
	else
		pdk__e2b_reply(op->call,
			       json_pack("{s:o}", "entry", pdk__e2b_entry_json(op->path, doc)));
	free(op->path);
	free(op);
}

/* Answer `call` with {"entry": the stat of `path` (taken)} in the sandbox. */
static void stat_reply(struct pdk__e2b_call *call, struct pdk_ctl_sb *sb, char *path)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct stat_op *op = pdk_xcalloc(1, sizeof(*op));

	op->call = call;
	op->path = path;
	if (pdk_ctl_stat(sb, path, stat_done, op, &err) < 0) {
		free(op->path);
		free(op);
		pdk__e2b_fail(call, err);
	}
}

static void fs_stat(struct pdk__e2b_call *call)
{
	struct pdk_ctl_sb *sb = pdk__e2b_call_sb(call);
	char *path = sb ? pdk__e2b_call_path(call, sb, "path") : NULL;

	if (path != NULL)
		stat_reply(call, sb, path);
}

/* ---- Remove ---- */

static void removed(void *ctx, const char *path, uint64_t bytes, const struct pdk_error *err)
{
	struct pdk__e2b_call *call = ctx;

	(void)path;
	(void)bytes;
	if (err != NULL)
		pdk__e2b_fail(call, err);
	else
		pdk__e2b_reply(call, json_object());
}

static void fs_remove(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sb *sb = pdk__e2b_call_sb(call);
	_cleanup_free_ char *path = sb ? pdk__e2b_call_path(call, sb, "path") : NULL;

	if (path == NULL)
		return;
	/* envd removes a directory with what it holds (os.RemoveAll). */
	if (pdk_ctl_file_delete(sb, path, true, removed, call, &err) < 0)
		pdk__e2b_fail(call, err);
}

/* ---- MakeDir and Move: a short script run inside the sandbox ---- */

struct sh_op {
	struct pdk__e2b_call *call;
	char *result; /* the path to stat afterwards */
	const char *what;
};

/* Exit statuses of the scripts below, and what each means. */
#define SH_EXISTS  17
#define SH_MISSING 18
#define SH_FAILED  19

static void sh_done(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err)
{
	_cleanup_error_ struct pdk_error *e = NULL;
	struct sh_op *op = ctx;
	struct pdk_ctl_sb *sb;
	int code = r ? r->exit.exit_code : -1;

	if (err != NULL)
		pdk__e2b_fail(op->call, err);
	else if (code == SH_EXISTS || code == SH_MISSING || code != 0) {
		(void)pdk_error_setx(&e,
				     code == SH_EXISTS    ? EEXIST
				     : code == SH_MISSING ? ENOENT
							  : EINVAL,
				     "%s '%s': %.*s", op->what, op->result,
				     r ? (int)r->err.head_len : 0, r ? r->err.head : "");
		pdk__e2b_fail(op->call, e);
	} else if ((sb = pdk__e2b_call_sb(op->call)) != NULL) {
		stat_reply(op->call, sb, steal_ptr(&op->result));
	}
	free(op->result);
	free(op);
}

/* Run `script` with sh in the sandbox, arguments a1 and a2; then stat `result` (taken). */
static void run_sh(struct pdk__e2b_call *call, struct pdk_ctl_sb *sb, const char *what,
		   const char *script, const char *a1, const char *a2, char *result)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	char *argv[] = {"/bin/sh", "-c", (char *)script, "sh", (char *)a1, (char *)a2, NULL};
	struct pdk_ctl_exec_req req = {.argv = argv, .output_cap = 4096, .timeout_ms = 60000};
	static const struct pdk_ctl_exec_cbs cbs = {.done = sh_done};
	struct sh_op *op = pdk_xcalloc(1, sizeof(*op));

	op->call = call;
	op->result = result;
	op->what = what;
	if (pdk_ctl_exec(sb, &req, false, &cbs, op, NULL, &err) < 0) {
		free(op->result);
		free(op);
		pdk__e2b_fail(call, err);
	}
}

static void fs_make_dir(struct pdk__e2b_call *call)
{
	struct pdk_ctl_sb *sb = pdk__e2b_call_sb(call);
	char *path = sb ? pdk__e2b_call_path(call, sb, "path") : NULL;

	if (path == NULL)
		return;
	/* envd: an existing path is AlreadyExists (the SDKs answer false); parents are made. */
	run_sh(call, sb, "cannot make directory",
	       "if [ -e \"$1\" ] || [ -L \"$1\" ]; then exit 17; fi; mkdir -p -- \"$1\" || exit 19",
	       path, NULL, path);
}

static void fs_move(struct pdk__e2b_call *call)
{
	struct pdk_ctl_sb *sb = pdk__e2b_call_sb(call);
	_cleanup_free_ char *src = sb ? pdk__e2b_call_path(call, sb, "source") : NULL;
	char *dst = src ? pdk__e2b_call_path(call, sb, "destination") : NULL;

	if (dst == NULL)
		return;
	/* envd renames, making the destination's parents; a missing source is NotFound. */
	run_sh(call, sb, "cannot move",
	       "if ! [ -e \"$1\" ] && ! [ -L \"$1\" ]; then exit 18; fi; "
	       "mkdir -p -- \"$(dirname -- \"$2\")\" && mv -T -- \"$1\" \"$2\" || exit 19",
	       src, dst, dst);
}

/* ---- ListDir: breadth first, `depth` levels ---- */

struct list_op {
	struct pdk__e2b_call *call;
	json_t *entries; /* the answer's */
	json_t *todo;    /* [[dir, level]...] still to list */
	unsigned depth;
};

static void list_next(struct list_op *op);

static void list_end(struct list_op *op, const struct pdk_error *err)
{
	if (err != NULL)
		pdk__e2b_fail(op->call, err);
	else
		pdk__e2b_reply(op->call, json_pack("{s:O}", "entries", op->entries));
	json_decref(op->entries);
	json_decref(op->todo);
	free(op);
}

static void listed(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct list_op *op = ctx;
	json_t *head = json_array_get(op->todo, 0);
	const char *dir = json_string_value(json_array_get(head, 0));
	unsigned level = (unsigned)json_integer_value(json_array_get(head, 1));
	size_t i;
	json_t *e;

	/* A directory that went away below the first level is skipped, as envd's walk does. */
	if (err != NULL && (level == 1 || err->status != ENOENT)) {
		list_end(op, err);
		return;
	}
	json_array_foreach(json_object_get(doc, "entries"), i, e)
	{
		const char *name = json_string_value(json_object_get(e, "name"));
		_cleanup_free_ char *path = NULL;

		if (name == NULL || json_array_size(op->entries) >= LIST_ENTRIES_MAX)
			continue;
		path = pdk_xasprintf("%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name);
		json_array_append_new(op->entries, pdk__e2b_entry_json(path, e));
		if (level < op->depth &&
		    strcmp(json_string_value(json_object_get(e, "type")), "dir") == 0)
			json_array_append_new(op->todo,
					      json_pack("[s, I]", path, (json_int_t)level + 1));
	}
	json_array_remove(op->todo, 0);
	list_next(op);
}

static void list_next(struct list_op *op)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sb *sb = NULL;
	json_t *head = json_array_get(op->todo, 0);

	if (head == NULL || json_array_size(op->entries) >= LIST_ENTRIES_MAX) {
		list_end(op, NULL);
		return;
	}
	if (pdk_ctl_find(op->call->e->ctl, op->call->who.sandbox, PDK_CTL_FIND_LIVE, &sb, &err) <
		    0 ||
	    pdk_ctl_ls(sb, json_string_value(json_array_get(head, 0)), listed, op, &err) < 0)
		list_end(op, err);
}

static void fs_list_dir(struct pdk__e2b_call *call)
{
	struct pdk_ctl_sb *sb = pdk__e2b_call_sb(call);
	_cleanup_free_ char *path = sb ? pdk__e2b_call_path(call, sb, "path") : NULL;
	json_t *d = json_object_get(call->msg, "depth");
	struct list_op *op;

	if (path == NULL)
		return;
	if (d != NULL && (!json_is_integer(d) || json_integer_value(d) < 0 ||
			  json_integer_value(d) > LIST_DEPTH_MAX)) {
		_cleanup_error_ struct pdk_error *err = NULL;

		(void)pdk_error_set_field(&err, EINVAL, "depth", "depth must be 1 to %d",
					  LIST_DEPTH_MAX);
		pdk__e2b_fail(call, err);
		return;
	}
	op = pdk_xcalloc(1, sizeof(*op));
	op->call = call;
	op->entries = json_array();
	op->depth = d && json_integer_value(d) > 0 ? (unsigned)json_integer_value(d) : 1;
	op->todo = json_pack("[[s, i]]", path, 1);
	list_next(op);
}

static const struct pdk__e2b_method methods[] = {
	{"Stat", false, fs_stat},        {"ListDir", false, fs_list_dir},
	{"MakeDir", false, fs_make_dir}, {"Move", false, fs_move},
	{"Remove", false, fs_remove},    {"WatchDir", true, pdk__e2b_fs_watch},
};

const struct pdk__e2b_service pdk__e2b_svc_filesystem = {
	.name = "filesystem.Filesystem",
	.methods = methods,
	.n = PDK_ARRAY_SIZE(methods),
};
