/*
 * dirlayer.c - a host directory (a rootfs, a build step's upper layer)
 * copied into a layer by the rules an archive's entries keep, and its
 * digest: the sha256 of a canonical listing (entries sorted by name, each
 * as "path\0type mode uid gid size\0target\0" then its content).
 *
 * SECURITY: the source is walked with directory fds and O_NOFOLLOW: a
 * symlink in it is copied as a symlink, never followed, so a directory a
 * sandbox wrote cannot point the copy at a host file.
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

#define DEPTH_MAX 256
#define CHUNK     (128u << 10)

/* A file of the source seen before under another name (its hard links). */
struct seen {
	dev_t dev;
	ino_t ino;
	char *path;
};

struct walk {
	dev_t dev; /* the source's filesystem: a mount below it is refused */
	struct pdk__img_unpack *u;
	EVP_MD_CTX *sha;
	struct seen *seen;
	size_t nseen;
};

static int refuse(struct walk *w, const char *path, const char *reason, struct pdk_error **err)
{
	return pdk_error_setx(err, EPERM, "%s: entry '%s' refused: %s", w->u->label, path, reason);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory `fd`, sorted (a canonical order for the digest). */
static int sorted_names(int fd, const char *label, char ***out, struct pdk_error **err)
{
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	_cleanup_closedir_ DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	_cleanup_strv_ char **v = NULL;
	struct dirent *de;
	size_t n = 0;

	if (d == NULL) {
		if (dup >= 0)
			(void)close(dup);
		return pdk_error_set(err, errno, "%s: cannot read a directory", label);
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		pdk_strv_push(&v, de->d_name);
		n++;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_str);
	*out = v ? steal_ptr(&v) : pdk_xcalloc(1, sizeof(char *));
	return 0;
}

static void hash_str(struct walk *w, const char *s)
{
	if (EVP_DigestUpdate(w->sha, s, strlen(s) + 1) != 1)
		pdk_oom();
}

static void hash_entry(struct walk *w, const char *path, const struct stat *st, const char *target)
{
	_cleanup_free_ char *head = pdk_xasprintf(
		"%o %u %u %llu", (unsigned)st->st_mode, (unsigned)st->st_uid, (unsigned)st->st_gid,
		S_ISREG(st->st_mode) ? (unsigned long long)st->st_size : 0ull);

	hash_str(w, path);
	hash_str(w, head);
	hash_str(w, target ? target : "");
}

static int copy_data(struct walk *w, int in, int out, const char *path, struct pdk_error **err)
{
	_cleanup_free_ unsigned char *buf = pdk_xmalloc(CHUNK);
	ssize_t n;

	while ((n = TEMP_FAILURE_RETRY(read(in, buf, CHUNK))) > 0) {
		int rc = pdk_write_all(out, buf, (size_t)n);

		if (rc < 0)
			return pdk_error_set(err, -rc, "%s: cannot write '%s'", w->u->label, path);
		if (EVP_DigestUpdate(w->sha, buf, (size_t)n) != 1)
			pdk_oom();
	}
	if (n < 0)
		return pdk_error_set(err, errno, "%s: cannot read '%s'", w->u->label, path);
	return 0;
}

static int keep_owner(struct walk *w, int dfd, const char *name, const char *path,
		      const struct stat *st, struct pdk_error **err)
{
	if (!w->u->chown || fchownat(dfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	return pdk_error_set(err, errno, "%s: cannot set the owner of '%s'", w->u->label, path);
}

/* A hard link to a file copied before, when this one is one of its names. */
static const char *seen_before(struct walk *w, const struct stat *st, const char *path)
{
	if (st->st_nlink < 2)
		return NULL;
	for (size_t i = 0; i < w->nseen; i++)
		if (w->seen[i].dev == st->st_dev && w->seen[i].ino == st->st_ino)
			return w->seen[i].path;
	w->seen = pdk_xrealloc(w->seen, (w->nseen + 1) * sizeof(*w->seen));
	w->seen[w->nseen++] = (struct seen){st->st_dev, st->st_ino, pdk_xstrdup(path)};
	return NULL;
}

static int link_to(struct walk *w, int dfd, const char *name, const char *path, const char *first,
		   struct pdk_error **err)
{
	_cleanup_close_ int tfd = -1;
	const char *tname;

	tfd = pdk__img_parent(w->u, first, &tname, err);
	if (tfd < 0)
		return -1;
	if (linkat(tfd, tname, dfd, name, 0) < 0)
		return pdk_error_set(err, errno, "%s: cannot link '%s' to '%s'", w->u->label, path,
				     first);
	hash_str(w, first);
	return 0;
}

static int copy_file(struct walk *w, int sfd, int dfd, const char *name, const char *path,
		     const struct stat *st, struct pdk_error **err)
{
	_cleanup_close_ int in = -1, out = -1;
	mode_t mode = st->st_mode & 07777;
	const char *first = seen_before(w, st, path);

	if (first != NULL)
		return link_to(w, dfd, name, path, first, err);
	if (pdk__img_setid(w->u, path, &mode, err) < 0)
		return -1;
	in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (in < 0)
		return pdk_error_set(err, errno, "%s: cannot open '%s'", w->u->label, path);
	out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return pdk_error_set(err, errno, "%s: cannot create '%s'", w->u->label, path);
	if (copy_data(w, in, out, path, err) < 0)
		return -1;
	if (keep_owner(w, dfd, name, path, st, err) < 0)
		return -1;
	if (fchmod(out, mode) < 0)
		return pdk_error_set(err, errno, "%s: cannot set the mode of '%s'", w->u->label,
				     path);
	(void)futimens(out, (struct timespec[2]){{.tv_nsec = UTIME_OMIT}, st->st_mtim});
	return 0;
}

static int copy_link(struct walk *w, int sfd, int dfd, const char *name, const char *path,
		     const struct stat *st, struct pdk_error **err)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
	_cleanup_free_ char *why = NULL;

	if (n < 0)
		return pdk_error_set(err, errno, "%s: cannot read the link '%s'", w->u->label,
				     path);
	target[n] = '\0';
	if (!pdk__img_link_stays(path, target)) {
		why = pdk_xasprintf("a symlink that leads out of the image ('%s')", target);
		return refuse(w, path, why, err);
	}
	hash_entry(w, path, st, target);
	if (symlinkat(target, dfd, name) < 0)
		return pdk_error_set(err, errno, "%s: cannot make the symlink '%s'", w->u->label,
				     path);
	return keep_owner(w, dfd, name, path, st, err);
}

/* An overlayfs upper layer's marks: 0:0 character devices are whiteouts. */
static int copy_special(struct walk *w, int dfd, const char *name, const char *path,
			const struct stat *st, struct pdk_error **err)
{
	bool whiteout = S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);

	if (whiteout && (w->u->flags & PDK_IMAGE_LAYER_UPPER)) {
		hash_entry(w, path, st, NULL);
		if (mknodat(dfd, name, S_IFCHR | 0000, makedev(0, 0)) < 0)
			return pdk_error_set(err, errno, "%s: cannot make the whiteout '%s'",
					     w->u->label, path);
		return 0;
	}
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		return refuse(w, path, "a device node (never unpacked)", err);
	return refuse(w, path, "a FIFO or socket (special files are never unpacked)", err);
}

static bool opaque(int fd)
{
	char v[2];

	return (fgetxattr(fd, "user.overlay.opaque", v, sizeof(v)) == 1 ||
		fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v)) == 1) &&
	       v[0] == 'y';
}

static int copy_tree(struct walk *w, int sfd, int dfd, const char *prefix, unsigned depth,
		     struct pdk_error **err);

static int copy_dir(struct walk *w, int sfd, int dfd, const char *name, const char *path,
		    const struct stat *st, unsigned depth, struct pdk_error **err)
{
	_cleanup_close_ int s = -1, d = -1;
	mode_t mode = st->st_mode & 07777;

	if (depth >= DEPTH_MAX)
		return refuse(w, path, "directories nested too deep", err);
	mode = pdk__img_dir_mode(mode);
	hash_entry(w, path, st, NULL);
	s = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s < 0)
		return pdk_error_set(err, errno, "%s: cannot open '%s'", w->u->label, path);
	if (mkdirat(dfd, name, 0700) < 0)
		return pdk_error_set(err, errno, "%s: cannot make '%s'", w->u->label, path);
	d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return pdk_error_set(err, errno, "%s: cannot open '%s'", w->u->label, path);
	if (keep_owner(w, dfd, name, path, st, err) < 0)
		return -1;
	if ((w->u->flags & PDK_IMAGE_LAYER_UPPER) && opaque(s)) {
		if (EVP_DigestUpdate(w->sha, "opaque", 7) != 1)
			pdk_oom();
		if (fsetxattr(d, "user.overlay.opaque", "y", 1, 0) < 0)
			return pdk_error_set(err, errno, "%s: cannot mark '%s' opaque", w->u->label,
					     path);
	}
	pdk__img_dir_later(w->u, path, mode, (uint64_t)st->st_mtim.tv_sec);
	return copy_tree(w, s, d, path, depth + 1, err);
}

static int copy_one(struct walk *w, int sfd, int dfd, const char *name, const char *path,
		    unsigned depth, struct pdk_error **err)
{
	struct stat st;

	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return pdk_error_set(err, errno, "%s: cannot read '%s'", w->u->label, path);
	if (++w->u->entries > (8u << 20))
		return refuse(w, path, "the layer has too many entries", err);
	/*
	 * SECURITY: a mount below the source (a /proc, a bind of a host directory) is not
	 * the root filesystem's: its files are not copied into an image.
	 */
	if (st.st_dev != w->dev)
		return refuse(w, path,
			      "another filesystem is mounted there (copy the tree without it)",
			      err);
	if (w->u->bytes > w->u->budget ||
	    pdk__img_cost(S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0) >
		    w->u->budget - w->u->bytes)
		return pdk_error_setx(err, EFBIG,
				      "%s: entry '%s' refused: the layer would pass the image "
				      "store's quota: remove images (paddock image rm, prune) or "
				      "raise PADDOCK_IMAGE_QUOTA",
				      w->u->label, path);
	w->u->bytes += pdk__img_cost(S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0);
	if (S_ISDIR(st.st_mode))
		return copy_dir(w, sfd, dfd, name, path, &st, depth, err);
	if (S_ISLNK(st.st_mode))
		return copy_link(w, sfd, dfd, name, path, &st, err);
	if (!S_ISREG(st.st_mode))
		return copy_special(w, dfd, name, path, &st, err);
	hash_entry(w, path, &st, NULL);
	return copy_file(w, sfd, dfd, name, path, &st, err);
}

static int copy_tree(struct walk *w, int sfd, int dfd, const char *prefix, unsigned depth,
		     struct pdk_error **err)
{
	_cleanup_strv_ char **names = NULL;

	if (sorted_names(sfd, w->u->label, &names, err) < 0)
		return -1;
	for (size_t i = 0; names[i] != NULL; i++) {
		_cleanup_free_ char *path = prefix[0] ? pdk_xasprintf("%s/%s", prefix, names[i])
						      : pdk_xstrdup(names[i]);

		if (strlen(path) >= PATH_MAX)
			return refuse(w, path, "its name is too long", err);
		if (copy_one(w, sfd, dfd, names[i], path, depth, err) < 0)
			return -1;
	}
	return 0;
}

int pdk__img_copy_dir(struct pdk__img_unpack *u, int src, EVP_MD_CTX *sha, struct pdk_error **err)
{
	struct walk w = {.u = u, .sha = sha};
	struct stat st;
	int rc;

	if (fstat(src, &st) < 0)
		return pdk_error_set(err, errno, "%s: cannot read the directory", u->label);
	w.dev = st.st_dev;
	rc = copy_tree(&w, src, u->root, "", 0, err);

	for (size_t i = 0; i < w.nseen; i++)
		free(w.seen[i].path);
	free(w.seen);
	return rc;
}
