/*
 * envd-watch.c - filesystem.Filesystem/WatchDir (docs/e2b.md): inotify in
 * the sandbox. A small watcher (Python's ctypes over inotify, run inside
 * the sandbox as its user, under its confinement) reports one line per
 * event on its stdout; each becomes a WatchDirResponse on the stream. The
 * watcher ends when its stdin closes: when the client goes away, the call's
 * deadline passes or the daemon stops (pdk_ctl_exec_close()).
 */
#include "common.h"
#include "e2b-internal.h"

#include <string.h>

/*
 * The watcher: "ready" once every watch is in place, then "KIND<TAB>NAME"
 * per event (NAME relative to the watched directory), exit 18 when the
 * directory is missing, 19 when it is no directory.
 */
static const char watcher[] =
	"import ctypes, os, select, struct, sys\n"
	"d, rec = sys.argv[1], sys.argv[2] == '1'\n"
	"if not os.path.exists(d): raise SystemExit(18)\n"
	"if not os.path.isdir(d): raise SystemExit(19)\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"fd = libc.inotify_init1(0o2000000)\n"
	"M = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800\n"
	"wd = {}\n"
	"def add(p):\n"
	"    w = libc.inotify_add_watch(fd, p.encode(), M)\n"
	"    if w >= 0: wd[w] = os.path.relpath(p, d)\n"
	"add(d)\n"
	"if rec:\n"
	"    for r, ds, _ in os.walk(d):\n"
	"        for x in ds: add(os.path.join(r, x))\n"
	"print('ready', flush=True)\n"
	"K = ((0x100, 'CREATE'), (0x80, 'CREATE'), (0x2, 'WRITE'), (0x200, 'REMOVE'),\n"
	"     (0x40, 'RENAME'), (0x4, 'CHMOD'))\n"
	"while True:\n"
	"    r, _, _ = select.select([fd, 0], [], [])\n"
	"    if 0 in r and not os.read(0, 4096): raise SystemExit(0)\n"
	"    if fd not in r: continue\n"
	"    b, i = os.read(fd, 65536), 0\n"
	"    while i + 16 <= len(b):\n"
	"        w, m, _, n = struct.unpack_from('iIII', b, i)\n"
	"        name = b[i + 16:i + 16 + n].rstrip(b'\\0').decode(errors='replace')\n"
	"        i += 16 + n\n"
	"        base = wd.get(w)\n"
	"        if base is None or not name: continue\n"
	"        rel = name if base == '.' else base + '/' + name\n"
	"        if rec and m & 0x40000000 and m & (0x100 | 0x80): add(os.path.join(d, rel))\n"
	"        for bit, k in K:\n"
	"            if m & bit: print(k + '\\t' + rel.replace('\\n', ' '), flush=True); break\n";

struct watch {
	struct pdk__e2b_call *call;
	struct pdk_ctl_exec *x; /* until done */
	struct pdk_buf line;    /* a line not yet whole */
	bool ready;
};

static void on_line(struct watch *w, const char *line)
{
	const char *tab = strchr(line, '\t');
	_cleanup_free_ char *kind = NULL;

	if (!w->ready && strcmp(line, "ready") == 0) {
		w->ready = true;
		pdk__e2b_send(w->call, json_pack("{s:{}}", "start"));
		return;
	}
	if (tab == NULL)
		return;
	kind = pdk_xasprintf("EVENT_TYPE_%.*s", (int)(tab - line), line);
	pdk__e2b_send(w->call,
		      json_pack("{s:{s:s, s:s}}", "filesystem", "name", tab + 1, "type", kind));
}

static void watch_output(void *ctx, int stream, const char *data, size_t len)
{
	struct watch *w = ctx;

	if (stream != 1)
		return;
	for (size_t i = 0; i < len; i++) {
		if (data[i] != '\n') {
			/* A line past the cap (a name longer than PATH_MAX) is dropped whole. */
			if (pdk_buf_add(&w->line, &data[i], 1) < 0)
				w->line.len = w->line.max;
			continue;
		}
		if (w->line.len < w->line.max && w->line.p != NULL)
			on_line(w, w->line.p);
		pdk_buf_setlen(&w->line, 0);
	}
}

static void watch_done(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err)
{
	_cleanup_error_ struct pdk_error *e = NULL;
	struct watch *w = ctx;
	int code = r && r->exit.has_exit_code ? r->exit.exit_code : -1;

	if (err == NULL && !w->call->cancelled && (code == 18 || code == 19 || !w->ready))
		(void)pdk_error_set_field(&e,
					  code == 18   ? ENOENT
					  : code == 19 ? EINVAL
						       : EIO,
					  "path",
					  code == 18 ? "the directory to watch does not exist"
					  : code == 19
						  ? "the path to watch is not a directory"
						  : "the watcher could not start in the sandbox "
						    "(it needs python3 there)");
	w->call->on_cancel = NULL;
	pdk__e2b_end(w->call, err ? err : e);
	pdk_buf_release(&w->line);
	free(w);
}

static void watch_started(void *ctx, uint64_t exec_id, int pid, bool pty)
{
	(void)ctx;
	(void)exec_id;
	(void)pid;
	(void)pty;
}

static void watch_cancel(struct pdk__e2b_call *call)
{
	struct watch *w = call->svc;

	/* The watcher loses its stdin and ends; watch_done still comes and finishes the call. */
	if (w->x != NULL)
		pdk_ctl_exec_close(w->x);
}

void pdk__e2b_fs_watch(struct pdk__e2b_call *call)
{
	static const struct pdk_ctl_exec_cbs cbs = {
		.started = watch_started, .output = watch_output, .done = watch_done};
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sb *sb = pdk__e2b_call_sb(call);
	_cleanup_free_ char *path = sb ? pdk__e2b_call_path(call, sb, "path") : NULL;
	char rec[2] = {json_is_true(json_object_get(call->msg, "recursive")) ? '1' : '0', 0};
	char *argv[] = {"python3", "-c", (char *)watcher, path, rec, NULL};
	struct pdk_ctl_exec_req req = {.argv = argv, .output_cap = 4096, .stdin_open = true};
	struct watch *w;

	if (path == NULL)
		return;
	w = pdk_xcalloc(1, sizeof(*w));
	w->call = call;
	pdk_buf_init(&w->line, 8192);
	call->svc = w;
	call->keepalive = json_pack("{s:{}}", "keepalive");
	if (pdk_ctl_exec(sb, &req, true, &cbs, w, &w->x, &err) < 0) {
		pdk_buf_release(&w->line);
		free(w);
		call->svc = NULL;
		pdk__e2b_fail(call, err);
		return;
	}
	call->on_cancel = watch_cancel;
}
