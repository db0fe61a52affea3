/*
 * unpack.c - a layer's tar stream into a directory of the store, by the
 * rules of image.h.
 *
 * The reader knows ustar, GNU (long names and link names) and pax (path,
 * linkpath, size, uid, gid, mtime; other records, xattrs among them, are
 * not kept). A member of a type it does not know (GNU sparse, volume
 * headers, ...) is refused: what is not understood is not unpacked. Every
 * file is made below the layer's directory fd, each directory on the way
 * opened by name with O_NOFOLLOW, so nothing of the archive reaches
 * outside it, whatever its symlinks say.
 */
#include "common.h"
#include "base.h"
#include "image-internal.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define PAX_MAX     (1u << 20) /* bytes of one pax extended header */
#define CHUNK       (128u << 10)
#define ENTRIES_MAX (8u << 20) /* entries of one layer */
#define OPAQUE_NAME ".wh..wh..opq"
#define WH_PREFIX   ".wh."

struct pdk__img_dirmode {
	char *path;
	mode_t mode;
	uint64_t mtime;
};

/* One member as the headers before it describe it. */
struct entry {
	char *path; /* the name as the archive gives it */
	char *link;
	char type;
	uint64_t mode, uid, gid, size, mtime;
};

/* What pax and GNU headers say of the next member. */
struct pending {
	char *path, *link;
	uint64_t size, uid, gid, mtime;
	bool has_size, has_uid, has_gid, has_mtime;
};

static void pending_release(struct pending *p)
{
	free(p->path);
	free(p->link);
	memset(p, 0, sizeof(*p));
}

static void entry_release(struct entry *e)
{
	free(e->path);
	free(e->link);
	memset(e, 0, sizeof(*e));
}

uint64_t pdk__img_cost(uint64_t size)
{
	return (size + 4095) / 4096 * 4096 + 512;
}

/* The refusal of one entry: "LABEL: entry 'NAME' refused: REASON". */
static int refuse(const char *label, const char *name, int status, const char *reason,
		  struct pdk_error **err)
{
	return pdk_error_setx(err, status, "%s: entry '%s' refused: %s", label, name, reason);
}

int pdk__img_clean_path(const char *name, const char *label, char **out, struct pdk_error **err)
{
	struct pdk_buf b = PDK_BUF_INIT(PATH_MAX);
	const char *s = name;

	/*
	 * "/" alone is the layer's root directory (umoci writes it so); every
	 * other absolute name is refused, not made relative: an archive that
	 * names host paths is not an image.
	 */
	if (name[0] == '/' && name[strspn(name, "/.")] != '\0')
		return refuse(label, name, EPERM, "an absolute name", err);
	while (*s != '\0') {
		size_t n = strcspn(s, "/");

		if (n == 2 && s[0] == '.' && s[1] == '.') {
			free(b.p);
			return refuse(label, name, EPERM, "a '..' component in its name", err);
		}
		if (n > 0 && !(n == 1 && s[0] == '.') &&
		    ((b.len > 0 && pdk_buf_add(&b, "/", 1) < 0) || pdk_buf_add(&b, s, n) < 0)) {
			free(b.p);
			return refuse(label, name, ENAMETOOLONG, "its name is too long", err);
		}
		s += n;
		while (*s == '/')
			s++;
	}
	*out = b.p != NULL ? b.p : pdk_xstrdup("");
	return 0;
}

bool pdk__img_link_stays(const char *path, const char *target)
{
	long depth = 0;
	const char *s;

	if (target[0] == '/')
		return true; /* resolved in the sandbox's root, never the host's */
	for (s = path; *s != '\0'; s++)
		depth += *s == '/';
	for (s = target; *s != '\0';) {
		size_t n = strcspn(s, "/");

		if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (--depth < 0)
				return false;
		} else if (n > 0 && !(n == 1 && s[0] == '.')) {
			depth++;
		}
		s += n;
		while (*s == '/')
			s++;
	}
	return true;
}

int pdk__img_setid(struct pdk__img_unpack *u, const char *path, mode_t *mode,
		   struct pdk_error **err)
{
	if ((*mode & (S_ISUID | S_ISGID)) == 0)
		return 0;
	if (u->flags & PDK_IMAGE_LAYER_STRICT)
		return refuse(u->label, path, EPERM,
			      "set-user-ID or set-group-ID bits (import without --strict to clear "
			      "them)",
			      err);
	*mode &= ~(mode_t)(S_ISUID | S_ISGID);
	u->setid_cleared++;
	pdk_log(u->log, PDK_LOG_NOTICE, "%s: cleared the set-user-ID/set-group-ID bits of '%s'",
		u->label, path);
	return 0;
}

void pdk__img_dir_later(struct pdk__img_unpack *u, const char *path, mode_t mode, uint64_t mtime)
{
	for (size_t i = 0; i < u->ndirs; i++)
		if (strcmp(u->dirs[i].path, path) == 0) {
			u->dirs[i].mode = mode;
			u->dirs[i].mtime = mtime;
			return;
		}
	if (u->ndirs == u->capdirs) {
		u->capdirs = u->capdirs ? 2 * u->capdirs : 64;
		u->dirs = pdk_xrealloc(u->dirs, u->capdirs * sizeof(*u->dirs));
	}
	u->dirs[u->ndirs++] = (struct pdk__img_dirmode){pdk_xstrdup(path), mode, mtime};
}

int pdk__img_clear(int dirfd, const char *name, bool keep_dir)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode))
		return keep_dir ? 0 : pdk_rm_rf_at(dirfd, name);
	return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
}

/* Open directory `comp` under `dirfd` (made when `create` and missing); -errno. */
static int open_dir_comp(struct pdk__img_unpack *u, int dirfd, const char *comp, const char *prefix,
			 bool create)
{
	int fd = openat(dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0 || errno != ENOENT || !create)
		return fd >= 0 ? fd : -errno;
	if (mkdirat(dirfd, comp, 0755) < 0 && errno != EEXIST)
		return -errno;
	u->bytes += pdk__img_cost(0);
	pdk__img_dir_later(u, prefix, 0755, 0);
	fd = openat(dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

/* Why `prefix` cannot be walked through: a symlink of the archive, or not a directory. */
static int walk_refusal(struct pdk__img_unpack *u, int dirfd, const char *comp, const char *path,
			const char *prefix, int rc, struct pdk_error **err)
{
	struct stat st;
	_cleanup_free_ char *why = NULL;

	if (rc == -ENOENT)
		return refuse(u->label, path, ENOENT, "it is reached through a missing directory",
			      err);
	if (fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
		why = pdk_xasprintf("it is reached through the symlink '%s'", prefix);
	else if (rc == -ENOTDIR)
		why = pdk_xasprintf("'%s' is not a directory", prefix);
	else
		return pdk_error_set(err, -rc, "%s: cannot open the directory '%s'", u->label,
				     prefix);
	return refuse(u->label, path, EPERM, why, err);
}

/*
 * SECURITY: the directory `dir` (clean, relative) below the layer's root,
 * walked a component at a time with O_NOFOLLOW: a symlink on the way (one
 * the archive made) is refused, never followed out of the layer.
 */
static int walk(struct pdk__img_unpack *u, const char *path, const char *dir, bool create,
		struct pdk_error **err)
{
	_cleanup_free_ char *buf = pdk_xstrdup(dir);
	int fd = openat(u->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *s = buf;

	if (fd < 0)
		return pdk_error_set(err, errno, "%s: cannot open the layer", u->label);
	while (*s != '\0') {
		char *slash = strchr(s, '/');
		int next;

		if (slash != NULL)
			*slash = '\0';
		next = open_dir_comp(u, fd, s, buf, create);
		if (next < 0) {
			int rc = walk_refusal(u, fd, s, path, buf, next, err);

			(void)close(fd);
			return rc;
		}
		(void)close(fd);
		fd = next;
		if (slash == NULL)
			break;
		*slash = '/';
		s = slash + 1;
	}
	return fd;
}

int pdk__img_parent(struct pdk__img_unpack *u, const char *path, const char **name,
		    struct pdk_error **err)
{
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *dir = NULL;

	*name = slash ? slash + 1 : path;
	dir = slash ? pdk_xasprintf("%.*s", (int)(slash - path), path) : pdk_xstrdup("");
	return walk(u, path, dir, true, err);
}

/* ---- the tar reader ---- */

/*
 * A header block: 1, or 0 when the stream ends right there (an archive
 * without its two zero blocks: umoci writes its layers so, and tar reads
 * them), or negative + *err when it ends inside the block.
 */
static int read_block(struct pdk__img_in *in, unsigned char *h, struct pdk_error **err)
{
	ssize_t k = pdk__img_in_read(in, h, PDK_TAR_BLOCK, err);

	if (k <= 0)
		return (int)k;
	return pdk__img_in_full(in, h + k, PDK_TAR_BLOCK - (size_t)k, err) < 0 ? -1 : 1;
}

/* Skip `size` bytes of data and their padding. */
static int skip_data(struct pdk__img_in *in, uint64_t size, struct pdk_error **err)
{
	unsigned char buf[8192];
	uint64_t left = (size + PDK_TAR_BLOCK - 1) / PDK_TAR_BLOCK * PDK_TAR_BLOCK;

	while (left > 0) {
		size_t k = left < sizeof(buf) ? (size_t)left : sizeof(buf);

		if (pdk__img_in_full(in, buf, k, err) < 0)
			return -1;
		left -= k;
	}
	return 0;
}

/* A member's data as a string (long names, pax headers), at most `max` bytes. */
static int read_text(struct pdk__img_unpack *u, struct pdk__img_in *in, uint64_t size, size_t max,
		     char **out, struct pdk_error **err)
{
	uint64_t padded = (size + PDK_TAR_BLOCK - 1) / PDK_TAR_BLOCK * PDK_TAR_BLOCK;
	_cleanup_free_ char *buf = NULL;

	if (size > max)
		return pdk_error_setx(err, E2BIG,
				      "%s: a long name or pax header of %llu bytes (at most %zu)",
				      u->label, (unsigned long long)size, max);
	buf = pdk_xmalloc((size_t)padded + 1);
	if (pdk__img_in_full(in, buf, (size_t)padded, err) < 0)
		return -1;
	buf[size] = '\0';
	*out = steal_ptr(&buf);
	return 0;
}

static int pax_u64(const char *v, size_t n, uint64_t *out)
{
	char tmp[32];

	if (n == 0 || n >= sizeof(tmp))
		return -1;
	memcpy(tmp, v, n);
	tmp[n] = '\0';
	if (strchr(tmp, '.') != NULL)
		*strchr(tmp, '.') = '\0'; /* mtime: seconds, the fraction dropped */
	return pdk_parse_u64(tmp, UINT64_MAX, out) < 0 ? -1 : 0;
}

static bool key_is(const char *k, size_t n, const char *want)
{
	return strlen(want) == n && memcmp(k, want, n) == 0;
}

/* One pax record into *p; records paddock does not keep are skipped. */
static int pax_record(struct pending *p, const char *k, size_t kn, const char *v, size_t vn)
{
	if (key_is(k, kn, "path")) {
		free(p->path);
		p->path = pdk_xasprintf("%.*s", (int)vn, v);
		return strlen(p->path) == vn ? 0 : -1;
	}
	if (key_is(k, kn, "linkpath")) {
		free(p->link);
		p->link = pdk_xasprintf("%.*s", (int)vn, v);
		return strlen(p->link) == vn ? 0 : -1;
	}
	if (key_is(k, kn, "size"))
		return p->has_size = true, pax_u64(v, vn, &p->size);
	if (key_is(k, kn, "uid"))
		return p->has_uid = true, pax_u64(v, vn, &p->uid);
	if (key_is(k, kn, "gid"))
		return p->has_gid = true, pax_u64(v, vn, &p->gid);
	if (key_is(k, kn, "mtime"))
		return p->has_mtime = true, pax_u64(v, vn, &p->mtime);
	return 0;
}

static int read_pax(struct pdk__img_unpack *u, struct pdk__img_in *in, uint64_t size,
		    struct pending *p, bool global, struct pdk_error **err)
{
	_cleanup_free_ char *d = NULL;
	const char *k, *v;
	size_t off = 0, kn, vn;
	int rc;

	if (read_text(u, in, size, PAX_MAX, &d, err) < 0)
		return -1;
	while ((rc = pdk_tar_pax_next((unsigned char *)d, (size_t)size, &off, &k, &kn, &v, &vn)) >
	       0)
		if (!global && pax_record(p, k, kn, v, vn) < 0)
			rc = -1;
	if (rc < 0)
		return pdk_error_setx(err, EINVAL, "%s: a pax extended header that does not read",
				      u->label);
	return 0;
}

static char *header_str(const unsigned char *f, size_t len)
{
	return pdk_xasprintf("%.*s", (int)strnlen((const char *)f, len), (const char *)f);
}

/* The name of a ustar member: prefix "/" name. */
static char *header_name(const unsigned char *h)
{
	_cleanup_free_ char *name = header_str(h + PDK_TAR_NAME, PDK_TAR_NAME_LEN);
	_cleanup_free_ char *prefix = NULL;

	if (memcmp(h + PDK_TAR_MAGIC, "ustar\0", 6) != 0 || h[PDK_TAR_PREFIX] == '\0')
		return steal_ptr(&name);
	prefix = header_str(h + PDK_TAR_PREFIX, PDK_TAR_PREFIX_LEN);
	return pdk_xasprintf("%s/%s", prefix, name);
}

/* The member the header `h` starts, with what pending headers said of it. */
static int fill_entry(const unsigned char *h, struct pending *p, struct entry *e, const char *label,
		      struct pdk_error **err)
{
	e->type = (char)h[PDK_TAR_TYPE];
	e->path = p->path ? steal_ptr(&p->path) : header_name(h);
	e->link = p->link ? steal_ptr(&p->link) : header_str(h + PDK_TAR_LINK, PDK_TAR_LINK_LEN);
	if (pdk_tar_num(h + PDK_TAR_MODE, PDK_TAR_MODE_LEN, &e->mode) < 0 ||
	    pdk_tar_num(h + PDK_TAR_UID, PDK_TAR_ID_LEN, &e->uid) < 0 ||
	    pdk_tar_num(h + PDK_TAR_GID, PDK_TAR_ID_LEN, &e->gid) < 0 ||
	    pdk_tar_num(h + PDK_TAR_SIZE, PDK_TAR_SIZE_LEN, &e->size) < 0 ||
	    pdk_tar_num(h + PDK_TAR_MTIME, PDK_TAR_MTIME_LEN, &e->mtime) < 0)
		return refuse(label, e->path, EINVAL, "a header field that is not a number", err);
	if (p->has_size)
		e->size = p->size;
	if (p->has_uid)
		e->uid = p->uid;
	if (p->has_gid)
		e->gid = p->gid;
	if (p->has_mtime)
		e->mtime = p->mtime;
	pending_release(p);
	return 0;
}

/*
 * The next member: 1 (filled *e), 0 at the end of the archive, or negative
 * + *err. Long-name, long-link and pax headers are read on the way.
 */
static int next_entry(struct pdk__img_unpack *u, struct pdk__img_in *in, struct entry *e,
		      struct pdk_error **err)
{
	struct pending p = {0};
	unsigned char h[PDK_TAR_BLOCK];
	int rc = 0;

	for (;;) {
		uint64_t size;

		rc = read_block(in, h, err);
		if (rc < 0)
			break;
		if (rc == 0 || pdk_tar_zero_block(h)) {
			pending_release(&p);
			return 0;
		}
		if (!pdk_tar_header_valid(h)) {
			rc = pdk_error_setx(err, EINVAL,
					    "%s: not a tar archive that can be read (a header "
					    "with a bad checksum after byte %llu)",
					    u->label, (unsigned long long)in->bytes_out - 512);
			break;
		}
		if (pdk_tar_num(h + PDK_TAR_SIZE, PDK_TAR_SIZE_LEN, &size) < 0)
			size = 0; /* not reached: the header was found valid */
		switch (h[PDK_TAR_TYPE]) {
		case 'L':
			free(p.path);
			p.path = NULL;
			rc = read_text(u, in, size, PATH_MAX, &p.path, err);
			break;
		case 'K':
			free(p.link);
			p.link = NULL;
			rc = read_text(u, in, size, PATH_MAX, &p.link, err);
			break;
		case 'x':
		case 'g':
			rc = read_pax(u, in, size, &p, h[PDK_TAR_TYPE] == 'g', err);
			break;
		default:
			rc = fill_entry(h, &p, e, u->label, err);
			return rc < 0 ? rc : 1;
		}
		if (rc < 0)
			break;
	}
	pending_release(&p);
	return -1;
}

/* ---- writing members ---- */

/* The archive's owner, when we are root (a user's import owns its files). */
static int set_owner(struct pdk__img_unpack *u, int dirfd, const char *name, const char *path,
		     const struct entry *e, struct pdk_error **err)
{
	if (!u->chown ||
	    fchownat(dirfd, name, (uid_t)e->uid, (gid_t)e->gid, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	return pdk_error_set(err, errno, "%s: cannot set the owner of '%s'", u->label, path);
}

static void set_time(int dirfd, const char *name, uint64_t mtime)
{
	struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = (time_t)mtime}};

	(void)utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW);
}

/* A budget check before `cost` more bytes: a decompression bomb ends here. */
static int charge(struct pdk__img_unpack *u, const char *path, uint64_t cost,
		  struct pdk_error **err)
{
	_cleanup_free_ char *why = NULL;

	if (cost <= u->budget && u->bytes <= u->budget - cost) {
		u->bytes += cost;
		return 0;
	}
	why = pdk_xasprintf("the layer would pass the image store's quota (%llu bytes left): "
			    "remove images (paddock image rm, prune) or raise "
			    "PADDOCK_IMAGE_QUOTA",
			    (unsigned long long)(u->budget > u->bytes ? u->budget - u->bytes : 0));
	return refuse(u->label, path, EFBIG, why, err);
}

static int write_data(struct pdk__img_unpack *u, struct pdk__img_in *in, int fd,
		      const struct entry *e, struct pdk_error **err)
{
	_cleanup_free_ unsigned char *buf = pdk_xmalloc(CHUNK);
	uint64_t left = e->size;

	while (left > 0) {
		size_t k = left < CHUNK ? (size_t)left : CHUNK;
		int rc;

		if (pdk__img_in_full(in, buf, k, err) < 0)
			return -1;
		rc = pdk_write_all(fd, buf, k);
		if (rc < 0)
			return pdk_error_set(err, -rc, "%s: cannot write '%s'", u->label, e->path);
		left -= k;
	}
	return 0;
}

static int pad(struct pdk__img_in *in, uint64_t size, struct pdk_error **err)
{
	unsigned char buf[PDK_TAR_BLOCK];
	size_t rest = (size_t)(size % PDK_TAR_BLOCK);

	if (rest == 0)
		return 0;
	return pdk__img_in_full(in, buf, PDK_TAR_BLOCK - rest, err);
}

static int put_file(struct pdk__img_unpack *u, struct pdk__img_in *in, int pfd, const char *name,
		    const char *path, struct entry *e, struct pdk_error **err)
{
	mode_t mode = (mode_t)(e->mode & 07777);
	_cleanup_close_ int fd = -1;
	int rc;

	if (charge(u, path, pdk__img_cost(e->size), err) < 0 ||
	    pdk__img_setid(u, path, &mode, err) < 0)
		return -1;
	rc = pdk__img_clear(pfd, name, false);
	if (rc < 0)
		return pdk_error_set(err, -rc, "%s: cannot replace '%s'", u->label, path);
	fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return pdk_error_set(err, errno, "%s: cannot create '%s'", u->label, path);
	if (write_data(u, in, fd, e, err) < 0 || pad(in, e->size, err) < 0)
		return -1;
	if (set_owner(u, pfd, name, path, e, err) < 0)
		return -1;
	/* After the owner: chown clears set-id bits, and the mode is the archive's. */
	if (fchmod(fd, mode) < 0)
		return pdk_error_set(err, errno, "%s: cannot set the mode of '%s'", u->label, path);
	set_time(pfd, name, e->mtime);
	return 0;
}

static int put_dir(struct pdk__img_unpack *u, int pfd, const char *name, const char *path,
		   struct entry *e, struct pdk_error **err)
{
	mode_t mode = (mode_t)(e->mode & 07777);
	int rc;

	if (charge(u, path, pdk__img_cost(0), err) < 0)
		return -1;
	mode = pdk__img_dir_mode(mode);
	rc = pdk__img_clear(pfd, name, true);
	if (rc == 0 && mkdirat(pfd, name, 0700) < 0 && errno != EEXIST)
		rc = -errno;
	if (rc < 0)
		return pdk_error_set(err, -rc, "%s: cannot make the directory '%s'", u->label,
				     path);
	if (set_owner(u, pfd, name, path, e, err) < 0)
		return -1;
	/* Its mode once everything is in it (a 0555 directory holds files too). */
	pdk__img_dir_later(u, path, mode, e->mtime);
	return 0;
}

static int put_symlink(struct pdk__img_unpack *u, int pfd, const char *name, const char *path,
		       struct entry *e, struct pdk_error **err)
{
	_cleanup_free_ char *why = NULL;
	int rc;

	if (e->link[0] == '\0')
		return refuse(u->label, path, EPERM, "a symlink without a target", err);
	if (!pdk__img_link_stays(path, e->link)) {
		why = pdk_xasprintf("a symlink that leads out of the image ('%s')", e->link);
		return refuse(u->label, path, EPERM, why, err);
	}
	if (charge(u, path, pdk__img_cost(strlen(e->link)), err) < 0)
		return -1;
	rc = pdk__img_clear(pfd, name, false);
	if (rc == 0 && symlinkat(e->link, pfd, name) < 0)
		rc = -errno;
	if (rc < 0)
		return pdk_error_set(err, -rc, "%s: cannot make the symlink '%s'", u->label, path);
	if (set_owner(u, pfd, name, path, e, err) < 0)
		return -1;
	set_time(pfd, name, e->mtime);
	return 0;
}

/*
 * SECURITY: a hard link names an earlier entry of this layer, reached by
 * the same walk (no symlink followed): never a file of the host.
 */
static int put_hardlink(struct pdk__img_unpack *u, int pfd, const char *name, const char *path,
			struct entry *e, struct pdk_error **err)
{
	_cleanup_free_ char *target = NULL, *why = NULL, *tdir = NULL;
	_cleanup_close_ int tfd = -1;
	const char *slash, *tname;
	struct stat st;
	int rc;

	if (e->link[0] == '/' || pdk__img_clean_path(e->link, u->label, &target, err) < 0) {
		pdk_error_free(err);
		why = pdk_xasprintf("a hard link that leads out of the image ('%s')", e->link);
		return refuse(u->label, path, EPERM, why, err);
	}
	slash = strrchr(target, '/');
	tname = slash ? slash + 1 : target;
	tdir = slash ? pdk_xasprintf("%.*s", (int)(slash - target), target) : pdk_xstrdup("");
	tfd = walk(u, path, tdir, false, err);
	if (tfd < 0 || target[0] == '\0' || fstatat(tfd, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    S_ISDIR(st.st_mode)) {
		pdk_error_free(err);
		why = pdk_xasprintf("a hard link to '%s', which is not an earlier file of the "
				    "layer",
				    e->link);
		return refuse(u->label, path, EPERM, why, err);
	}
	if (charge(u, path, pdk__img_cost(0), err) < 0)
		return -1;
	if (strcmp(target, path) == 0)
		return 0;
	rc = pdk__img_clear(pfd, name, false);
	if (rc == 0 && linkat(tfd, tname, pfd, name, 0) < 0)
		rc = -errno;
	if (rc < 0)
		return pdk_error_set(err, -rc, "%s: cannot link '%s' to '%s'", u->label, path,
				     target);
	return 0;
}

/* An OCI whiteout: ".wh.NAME" hides NAME of the layers below, ".wh..wh..opq" all of them. */
static int put_whiteout(struct pdk__img_unpack *u, int pfd, const char *name, const char *path,
			struct pdk_error **err)
{
	const char *hidden = name + strlen(WH_PREFIX);
	int rc;

	if (charge(u, path, pdk__img_cost(0), err) < 0)
		return -1;
	if (strcmp(name, OPAQUE_NAME) == 0) {
		if (fsetxattr(pfd, "user.overlay.opaque", "y", 1, 0) < 0)
			return pdk_error_set(err, errno, "%s: cannot mark '%s' opaque", u->label,
					     path);
		return 0;
	}
	if (hidden[0] == '\0' || strcmp(hidden, ".") == 0 || strcmp(hidden, "..") == 0)
		return refuse(u->label, path, EPERM, "a whiteout without a name", err);
	rc = pdk__img_clear(pfd, hidden, false);
	if (rc == 0 && mknodat(pfd, hidden, S_IFCHR | 0000, makedev(0, 0)) < 0)
		rc = -errno;
	if (rc < 0)
		return pdk_error_set(err, -rc, "%s: cannot make the whiteout of '%s'", u->label,
				     path);
	return 0;
}

static int type_refusal(struct pdk__img_unpack *u, const char *path, char type,
			struct pdk_error **err)
{
	_cleanup_free_ char *why = NULL;

	switch (type) {
	case '3':
	case '4':
		return refuse(u->label, path, EPERM, "a device node (never unpacked)", err);
	case '6':
		return refuse(u->label, path, EPERM, "a FIFO (special files are never unpacked)",
			      err);
	case 'S':
		return refuse(u->label, path, EPERM, "a GNU sparse member (not supported)", err);
	default:
		why = pdk_xasprintf("a member of type '%c' the reader does not know",
				    type >= 32 && type < 127 ? type : '?');
		return refuse(u->label, path, EPERM, why, err);
	}
}

static int put_entry(struct pdk__img_unpack *u, struct pdk__img_in *in, struct entry *e,
		     const char *path, struct pdk_error **err)
{
	_cleanup_close_ int pfd = -1;
	const char *name;

	if (e->type == '3' || e->type == '4' || e->type == '6' ||
	    !(e->type == '0' || e->type == '\0' || e->type == '7' || e->type == '1' ||
	      e->type == '2' || e->type == '5'))
		return type_refusal(u, path, e->type, err);
	if (path[0] == '\0') /* "./": the root itself */
		return e->type == '5' ? 0
				      : refuse(u->label, e->path, EPERM, "not a directory", err);
	pfd = pdk__img_parent(u, path, &name, err);
	if (pfd < 0)
		return -1;
	if (strncmp(name, WH_PREFIX, strlen(WH_PREFIX)) == 0)
		return e->type == '5' ? refuse(u->label, path, EPERM, "a whiteout directory", err)
				      : put_whiteout(u, pfd, name, path, err);
	switch (e->type) {
	case '5':
		return put_dir(u, pfd, name, path, e, err);
	case '2':
		return put_symlink(u, pfd, name, path, e, err);
	case '1':
		return put_hardlink(u, pfd, name, path, e, err);
	default:
		return put_file(u, in, pfd, name, path, e, err);
	}
}

/* The data of a member that has none on disk (a link, a directory) is skipped. */
static bool has_data_written(char type)
{
	return type == '0' || type == '\0' || type == '7';
}

static int one_entry(struct pdk__img_unpack *u, struct pdk__img_in *in, struct entry *e,
		     struct pdk_error **err)
{
	_cleanup_free_ char *path = NULL;
	const char *name;
	bool wh;

	if (++u->entries > ENTRIES_MAX)
		return refuse(u->label, e->path, EFBIG, "the layer has too many entries", err);
	if (pdk__img_clean_path(e->path, u->label, &path, err) < 0)
		return -1;
	name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	wh = strncmp(name, WH_PREFIX, strlen(WH_PREFIX)) == 0;
	if (put_entry(u, in, e, path, err) < 0)
		return -1;
	if (has_data_written(e->type) && !wh)
		return 0;
	return skip_data(in, e->size, err);
}

/* The bytes after the end of the archive are read into the digest, a bounded amount. */
static int drain(struct pdk__img_unpack *u, struct pdk__img_in *in, struct pdk_error **err)
{
	unsigned char buf[8192];
	uint64_t total = 0;
	ssize_t k;

	while ((k = pdk__img_in_read(in, buf, sizeof(buf), err)) > 0) {
		total += (uint64_t)k;
		for (ssize_t i = 0; i < k; i++)
			if (buf[i] != 0)
				return pdk_error_setx(err, EINVAL,
						      "%s: bytes after the end of the tar archive",
						      u->label);
		if (total > (64u << 20))
			return pdk_error_setx(err, EFBIG,
					      "%s: more than 64 MiB of padding after the archive",
					      u->label);
	}
	return k < 0 ? -1 : 0;
}

int pdk__img_unpack(struct pdk__img_unpack *u, struct pdk__img_in *in, struct pdk_error **err)
{
	for (;;) {
		struct entry e = {0};
		int rc = next_entry(u, in, &e, err);

		if (rc == 0)
			break;
		if (rc < 0) {
			entry_release(&e); /* a refused header's names were read */
			return -1;
		}
		rc = one_entry(u, in, &e, err);
		entry_release(&e);
		if (rc < 0)
			return -1;
	}
	return drain(u, in, err);
}

int pdk__img_unpack_finish(struct pdk__img_unpack *u, struct pdk_error **err)
{
	/* Deepest first: a directory's time is set after its children changed it. */
	for (size_t i = u->ndirs; i > 0; i--) {
		const struct pdk__img_dirmode *d = &u->dirs[i - 1];
		int fd = walk(u, d->path, d->path, false, err);

		if (fd < 0) {
			/* A later entry of the archive replaced the directory: nothing to set. */
			pdk_error_free(err);
			continue;
		}
		if (fchmod(fd, d->mode) < 0) {
			(void)close(fd);
			return pdk_error_set(err, errno, "%s: cannot set the mode of '%s'",
					     u->label, d->path);
		}
		if (d->mtime != 0) {
			struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
						 {.tv_sec = (time_t)d->mtime}};

			(void)futimens(fd, ts);
		}
		(void)close(fd);
	}
	return 0;
}

void pdk__img_unpack_release(struct pdk__img_unpack *u)
{
	for (size_t i = 0; i < u->ndirs; i++)
		free(u->dirs[i].path);
	free(u->dirs);
	u->dirs = NULL;
	u->ndirs = u->capdirs = 0;
}
