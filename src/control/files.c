/*
 * files.c - files and archives: the supervisor opens the path inside the
 * sandbox's root and hands over the descriptor; the control plane does the
 * I/O on it, with size caps. Archives are made and unpacked by `tar` run
 * inside the sandbox (exec.c), so a hostile archive meets the sandbox's own
 * confinement, never the daemon's.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_op {
	pdk_ctl_read_cb read_cb;
	pdk_ctl_file_cb file_cb;
	void *ctx;
	uint64_t max;
	char *data; /* a write: its bytes */
	size_t len;
	char *path;
};

static void file_op_free(struct file_op *f)
{
	free(f->data);
	free(f->path);
	free(f);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The supervisor's answer is an error, or carries no descriptor: *err says which. */
static bool no_descriptor(json_t *reply, size_t nfds, struct pdk_error **err)
{
	if (nfds == 1 && !pdk__svc_failed(reply))
		return false;
	if (!pdk__svc_failed(reply)) {
		(void)pdk_error_set_field(err, EIO, "path", "no descriptor came back");
	} else {
		(void)pdk_ctl_svc_error(reply, err);
	}
	return true;
}

/* A descriptor that is a regular file of at most f->max bytes; else *err. */
static int check_read(struct file_op *f, int fd, struct stat *st, struct pdk_error **err)
{
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode))
		return pdk_error_set_field(err, EINVAL, "path", "'%s' is not a regular file",
					   f->path);
	if ((uint64_t)st->st_size > f->max)
		return pdk_error_set_field(
			err, E2BIG, "path", "'%s' is %lld bytes, more than the %llu allowed",
			f->path, (long long)st->st_size, (unsigned long long)f->max);
	return 0;
}

static void got_read_fd(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct file_op *f = ctx;
	struct stat st;

	if (no_descriptor(reply, nfds, &err)) {
		pdk__close_fds(fds, nfds);
		f->read_cb(f->ctx, -1, 0, err);
	} else if (check_read(f, fds[0], &st, &err) < 0) {
		(void)close(fds[0]);
		f->read_cb(f->ctx, -1, 0, err);
	} else {
		pdk__sb_charge(sb, (uint64_t)st.st_size, 0);
		f->read_cb(f->ctx, fds[0], (uint64_t)st.st_size, NULL);
	}
	file_op_free(f);
}

static void got_write_fd(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct file_op *f = ctx;
	int rc;

	(void)sb;
	if (pdk__svc_failed(reply) || nfds != 1) {
		pdk__close_fds(fds, nfds);
		(void)pdk_ctl_svc_error(reply, &err);
		f->file_cb(f->ctx, f->path, 0, err);
		file_op_free(f);
		return;
	}
	/* A regular file in the sandbox's tmpfs or workspace: the write does not wait on anyone. */
	rc = pdk_write_all(fds[0], f->data, f->len);
	if (close(fds[0]) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0) {
		(void)pdk_error_set_field(&err, rc == -ENOSPC || rc == -EDQUOT ? EDQUOT : EIO,
					  "path", "cannot write '%s': %s", f->path, strerror(-rc));
	}
	f->file_cb(f->ctx, f->path, rc < 0 ? 0 : f->len, err);
	file_op_free(f);
}

static void deleted(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct file_op *f = ctx;

	(void)sb;
	pdk__close_fds(fds, nfds);
	if (pdk__svc_failed(reply))
		(void)pdk_ctl_svc_error(reply, &err);
	f->file_cb(f->ctx, f->path, 0, err);
	file_op_free(f);
}

static struct file_op *file_op_new(const char *path, void *ctx)
{
	struct file_op *f = pdk_xcalloc(1, sizeof(*f));

	f->path = pdk_xstrdup(path);
	f->ctx = ctx;
	return f;
}

static int call_or_fail(struct pdk_ctl_sb *sb, struct file_op *f, json_t *op, pdk_sb_reply_cb cb,
			struct pdk_error **err)
{
	if (pdk__sb_call(sb, op, NULL, 0, cb, f) < 0) {
		file_op_free(f);
		return pdk_error_setx(err, ENOTCONN, "cannot reach the sandbox's supervisor");
	}
	return 0;
}

int pdk_ctl_file_read(struct pdk_ctl_sb *sb, const char *path, uint64_t max, pdk_ctl_read_cb cb,
		      void *ctx, struct pdk_error **err)
{
	struct file_op *f = file_op_new(path, ctx);

	f->read_cb = cb;
	f->max = min_u64(max, pdk__sb_budget_left(sb));
	return call_or_fail(sb, f,
			    json_pack("{s:s, s:s, s:s}", "op", "open", "path", path, "flags", "r"),
			    got_read_fd, err);
}

int pdk_ctl_file_write(struct pdk_ctl_sb *sb, const char *path, unsigned mode, char *data,
		       size_t len, pdk_ctl_file_cb cb, void *ctx, struct pdk_error **err)
{
	struct file_op *f = file_op_new(path, ctx);

	f->file_cb = cb;
	f->data = data;
	f->len = len;
	return call_or_fail(sb, f,
			    json_pack("{s:s, s:s, s:s, s:i, s:b}", "op", "open", "path", path,
				      "flags", "w", "mode", (int)mode, "mkdir", 1),
			    got_write_fd, err);
}

int pdk_ctl_file_delete(struct pdk_ctl_sb *sb, const char *path, bool recursive, pdk_ctl_file_cb cb,
			void *ctx, struct pdk_error **err)
{
	struct file_op *f = file_op_new(path, ctx);

	f->file_cb = cb;
	return call_or_fail(
		sb, f,
		json_pack("{s:s, s:s, s:b}", "op", "delete", "path", path, "recursive", recursive),
		deleted, err);
}

int pdk_ctl_archive_get(struct pdk_ctl_sb *sb, const char *dir, uint64_t max, pdk_ctl_archive_cb cb,
			void *ctx, struct pdk_ctl_exec **out, struct pdk_error **err)
{
	return pdk__exec_tar(sb, dir, true, NULL, 0, min_u64(max, pdk__sb_budget_left(sb)), cb, ctx,
			     out, err);
}

/* An upload waiting for its directory. */
struct archive_put {
	char *dir;
	char *data;
	size_t len;
	pdk_ctl_archive_cb cb;
	void *ctx;
};

static void archive_put_free(struct archive_put *p)
{
	free(p->dir);
	free(p->data);
	free(p);
}

static void put_dir_made(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct archive_put *p = ctx;

	pdk__close_fds(fds, nfds);
	if (pdk__svc_failed(reply)) {
		(void)pdk_ctl_svc_error(reply, &err);
		p->cb(p->ctx, NULL, 0, err);
	} else if (pdk__exec_tar(sb, p->dir, false, steal_ptr(&p->data), p->len, UINT64_MAX, p->cb,
				 p->ctx, NULL, &err) < 0) {
		p->cb(p->ctx, NULL, 0, err);
	}
	archive_put_free(p);
}

int pdk_ctl_archive_put(struct pdk_ctl_sb *sb, const char *dir, char *data, size_t len,
			pdk_ctl_archive_cb cb, void *ctx, struct pdk_error **err)
{
	_cleanup_free_ char *body = data;
	struct archive_put *p;
	int rc;

	if (pdk__transfer_check(sb, err) < 0)
		return -EAGAIN;
	/* SECURITY: no set-id bit and no device node reaches tar (docs/internals/daemon.md). */
	rc = pdk__tar_sanitize(body, len, err);
	if (rc < 0)
		return rc;
	p = pdk_xcalloc(1, sizeof(*p));
	p->dir = pdk_xstrdup(dir);
	p->data = steal_ptr(&body);
	p->len = len;
	p->cb = cb;
	p->ctx = ctx;
	/* The directory is made as any file of the API is: by the sandbox's user, confined. */
	if (pdk__sb_call(sb, json_pack("{s:s, s:s, s:b}", "op", "mkdir", "path", dir, "parents", 1),
			 NULL, 0, put_dir_made, p) < 0) {
		archive_put_free(p);
		return pdk_error_setx(err, ENOTCONN, "cannot reach the sandbox's supervisor");
	}
	return 0;
}
