/*
 * ops.c - the operations the supervisor answers itself: pause, resume,
 * snapshot, rollback, commit, diff, stat, list and signal. Each is recorded
 * (sandbox.control) and forwarded; the answer comes back as the
 * supervisor's document, or for pause and resume as the sandbox's view.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fwd {
	pdk_ctl_doc_cb doc_cb;
	pdk_ctl_view_cb view_cb;
	void *ctx;
	const char *operator; /* who asked (borrowed for the call), or NULL */
};

static void forwarded(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *doc = NULL;
	struct fwd *f = ctx;

	pdk__close_fds(fds, nfds);
	if (pdk__svc_failed(reply)) {
		json_t *e = json_object_get(reply, "error");

		(void)pdk_ctl_svc_error(reply, &err);
		if (f->view_cb != NULL)
			f->view_cb(f->ctx, NULL, err);
		else
			f->doc_cb(f->ctx,
				  json_object_get(e, "conflicts") || json_object_get(e, "refused")
					  ? e
					  : NULL,
				  err);
	} else if (f->view_cb != NULL) {
		const char *state = json_string_value(json_object_get(reply, "state"));
		struct pdk_ctl_view v;

		if (state != NULL)
			pdk__sb_set_state(sb, state);
		pdk__sb_view(sb, &v);
		f->view_cb(f->ctx, &v, NULL);
		pdk_ctl_view_release(&v);
	} else {
		doc = json_deep_copy(reply);
		(void)json_object_del(doc, "req");
		f->doc_cb(f->ctx, doc, NULL);
	}
	free(f);
}

static int forward(struct pdk_ctl_sb *sb, json_t *op, struct fwd *f, struct pdk_error **err)
{
	const char *name = json_string_value(json_object_get(op, "op"));
	int rc;

	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "sandbox.control",
		      json_pack("{s:s, s:s*}", "op", name ? name : "?", "operator",
				f->operator != NULL && f->operator[0] != '\0' ? f->operator : NULL));
	f->operator= NULL;
	rc = pdk__sb_call(sb, op, NULL, 0, forwarded, f);
	if (rc < 0) {
		free(f);
		return pdk_error_setx(err, rc == -ENOTCONN ? ENOTCONN : EIO,
				      "cannot reach the sandbox's supervisor");
	}
	return 0;
}

int pdk__ctl_forward(struct pdk_ctl_sb *sb, json_t *op, pdk_ctl_doc_cb cb, void *ctx,
		     struct pdk_error **err)
{
	struct fwd *f = pdk_xcalloc(1, sizeof(*f));

	f->doc_cb = cb;
	f->ctx = ctx;
	return forward(sb, op, f, err);
}

static int forward_view(struct pdk_ctl_sb *sb, const char *name, const char *operator,
			pdk_ctl_view_cb cb, void *ctx, struct pdk_error **err)
{
	struct fwd *f = pdk_xcalloc(1, sizeof(*f));

	f->view_cb = cb;
	f->ctx = ctx;
	f->operator= operator;
	return forward(sb, json_pack("{s:s}", "op", name), f, err);
}

int pdk_ctl_pause(struct pdk_ctl_sb *sb, const char *operator, pdk_ctl_view_cb cb, void *ctx,
		  struct pdk_error **err)
{
	return forward_view(sb, "pause", operator, cb, ctx, err);
}

int pdk_ctl_resume(struct pdk_ctl_sb *sb, const char *operator, pdk_ctl_view_cb cb, void *ctx,
		   struct pdk_error **err)
{
	return forward_view(sb, "resume", operator, cb, ctx, err);
}

int pdk_ctl_snapshot(struct pdk_ctl_sb *sb, const char *name, bool restart, pdk_ctl_doc_cb cb,
		     void *ctx, struct pdk_error **err)
{
	_cleanup_free_ char *made = NULL;

	if (name == NULL) {
		char id[37];

		pdk_make_id(id);
		made = pdk_xasprintf("snap-%.8s", id + 28);
		name = made;
	}
	return pdk__ctl_forward(
		sb,
		json_pack("{s:s, s:b, s:s}", "op", "snapshot", "restart", restart, "name", name),
		cb, ctx, err);
}

int pdk_ctl_rollback(struct pdk_ctl_sb *sb, const char *snapshot, bool restart, pdk_ctl_doc_cb cb,
		     void *ctx, struct pdk_error **err)
{
	if (snapshot == NULL)
		return pdk_error_set_field(err, EINVAL, "snapshot",
					   "a rollback names its snapshot");
	return pdk__ctl_forward(sb,
				json_pack("{s:s, s:b, s:s}", "op", "rollback", "restart", restart,
					  "snapshot", snapshot),
				cb, ctx, err);
}

int pdk_ctl_commit(struct pdk_ctl_sb *sb, unsigned flags, pdk_ctl_doc_cb cb, void *ctx,
		   struct pdk_error **err)
{
	return pdk__ctl_forward(sb,
				json_pack("{s:s, s:b, s:b, s:b}", "op", "commit", "restart",
					  (flags & PDK_CTL_COMMIT_RESTART) != 0, "force",
					  (flags & PDK_CTL_COMMIT_FORCE) != 0, "dry_run",
					  (flags & PDK_CTL_COMMIT_DRY_RUN) != 0),
				cb, ctx, err);
}

int pdk_ctl_diff(struct pdk_ctl_sb *sb, pdk_ctl_doc_cb cb, void *ctx, struct pdk_error **err)
{
	return pdk__ctl_forward(sb, json_pack("{s:s}", "op", "diff"), cb, ctx, err);
}

int pdk_ctl_snapshots(struct pdk_ctl_sb *sb, pdk_ctl_doc_cb cb, void *ctx, struct pdk_error **err)
{
	return pdk__ctl_forward(sb, json_pack("{s:s}", "op", "snapshots"), cb, ctx, err);
}

/* What the daemon reads of a patch's memfd at most (the supervisor stops near 16 MiB). */
#define PATCH_READ_MAX (64u << 20)

/* The patch the supervisor wrote into fds[0], as "patch" in `doc`. */
static int read_patch(json_t *doc, const int *fds, size_t nfds, struct pdk_error **err)
{
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	ssize_t n;
	json_t *text;

	if (nfds < 1 || fstat(fds[0], &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > PATCH_READ_MAX)
		return pdk_error_setx(err, EIO, "the supervisor's patch is missing or too large");
	buf = pdk_xmalloc((size_t)st.st_size + 1);
	n = pread(fds[0], buf, (size_t)st.st_size, 0);
	if (n != (ssize_t)st.st_size)
		return pdk_error_set(err, n < 0 ? errno : EIO, "read the supervisor's patch");
	/* json_stringn() checks the text is UTF-8, as the supervisor made it. */
	if ((text = json_stringn(buf, (size_t)n)) == NULL)
		return pdk_error_setx(err, EIO, "the supervisor's patch is not UTF-8");
	pdk_json_set(doc, "patch", text);
	return 0;
}

static void diff_patched(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *doc = NULL;
	struct fwd *f = ctx;

	(void)sb;
	if (pdk__svc_failed(reply)) {
		(void)pdk_ctl_svc_error(reply, &err);
	} else {
		doc = json_deep_copy(reply);
		(void)json_object_del(doc, "req");
		(void)read_patch(doc, fds, nfds, &err);
	}
	pdk__close_fds(fds, nfds);
	f->doc_cb(f->ctx, err ? NULL : doc, err);
	free(f);
}

int pdk_ctl_diff_patch(struct pdk_ctl_sb *sb, pdk_ctl_doc_cb cb, void *ctx, struct pdk_error **err)
{
	json_t *op = json_pack("{s:s, s:b}", "op", "diff", "patch", 1);
	struct fwd *f = pdk_xcalloc(1, sizeof(*f));
	int rc;

	f->doc_cb = cb;
	f->ctx = ctx;
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "sandbox.control",
		      json_pack("{s:s}", "op", "diff"));
	rc = pdk__sb_call(sb, op, NULL, 0, diff_patched, f);
	if (rc < 0) {
		free(f);
		return pdk_error_setx(err, rc == -ENOTCONN ? ENOTCONN : EIO,
				      "cannot reach the sandbox's supervisor");
	}
	return 0;
}

char *pdk_ctl_sb_path(const struct pdk_ctl_sb *sb, const char *path, struct pdk_error **err)
{
	const char *ws =
		json_string_value(json_object_get(json_object_get(sb->facts, "workspace"), "path"));

	if (path == NULL || path[0] == '\0' || strlen(path) > 4096) {
		(void)pdk_error_set_field(err, EINVAL, "path",
					  "'path' must be a path in the sandbox: absolute, or "
					  "relative to its workspace (1 to 4096 bytes)");
		return NULL;
	}
	if (path[0] == '/')
		return pdk_xstrdup(path);
	if (ws == NULL) {
		(void)pdk_error_set_field(err, EINVAL, "path",
					  "'path' is relative but the sandbox has no workspace: "
					  "give an absolute path");
		return NULL;
	}
	/* Only joined: the supervisor resolves it inside the sandbox's root, ".." included. */
	return pdk_xasprintf("%s%s%s", ws, ws[strlen(ws) - 1] == '/' ? "" : "/", path);
}

int pdk_ctl_stat(struct pdk_ctl_sb *sb, const char *path, pdk_ctl_doc_cb cb, void *ctx,
		 struct pdk_error **err)
{
	return pdk__ctl_forward(sb, json_pack("{s:s, s:s}", "op", "stat", "path", path), cb, ctx,
				err);
}

int pdk_ctl_ls(struct pdk_ctl_sb *sb, const char *path, pdk_ctl_doc_cb cb, void *ctx,
	       struct pdk_error **err)
{
	return pdk__ctl_forward(sb, json_pack("{s:s, s:s}", "op", "list", "path", path), cb, ctx,
				err);
}

int pdk_ctl_signal(struct pdk_ctl_sb *sb, uint64_t exec_id, int sig, pdk_ctl_doc_cb cb, void *ctx,
		   struct pdk_error **err)
{
	return pdk__ctl_forward(sb,
				json_pack("{s:s, s:I, s:i}", "op", "signal", "exec",
					  (json_int_t)exec_id, "sig", sig),
				cb, ctx, err);
}
