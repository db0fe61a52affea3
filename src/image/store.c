/*
 * store.c - the image store's directories, its lock, layers moved into
 * place, lookups, holds, reference-counted removal and prune (image.h).
 */
#include "common.h"
#include "base.h"
#include "image-internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define LAYER_META_MAX (64u << 10)

int pdk_image_store_open(const struct pdk_image_store_opts *opts, struct pdk_image_store **out,
			 struct pdk_error **err)
{
	static const char *const subdirs[] = {"layers", "images", "tmp"};
	_cleanup_free_ char *dir = pdk_xasprintf("%s/images", opts->state_dir);
	struct pdk_image_store *st;
	int fd;

	if (pdk_mkdir_p(dir, err) < 0)
		return pdk_error_wrap(err, "image store");
	fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open the image store '%s'", dir);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(subdirs); i++)
		if (mkdirat(fd, subdirs[i], 0700) < 0 && errno != EEXIST) {
			int e = errno;

			(void)close(fd);
			return pdk_error_set(err, e, "cannot make '%s/%s'", dir, subdirs[i]);
		}
	st = pdk_xcalloc(1, sizeof(*st));
	st->dir = steal_ptr(&dir);
	st->dirfd = fd;
	st->quota = opts->quota ? opts->quota : PDK_IMAGE_QUOTA_DEFAULT;
	st->log = opts->log;
	*out = st;
	return 0;
}

void pdk_image_store_free(struct pdk_image_store *st)
{
	if (st == NULL)
		return;
	if (st->dirfd >= 0)
		(void)close(st->dirfd);
	free(st->dir);
	free(st);
}

const char *pdk_image_store_dir(const struct pdk_image_store *st)
{
	return st->dir;
}

uint64_t pdk_image_store_quota(const struct pdk_image_store *st)
{
	return st->quota;
}

const char *pdk__img_hex(const char *digest)
{
	return strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;
}

static int flock_at(struct pdk_image_store *st, const char *name, int op, int *fd,
		    struct pdk_error **err)
{
	int lfd = openat(st->dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (lfd < 0)
		return pdk_error_set(err, errno, "cannot open '%s/%s'", st->dir, name);
	if (TEMP_FAILURE_RETRY(flock(lfd, op)) < 0) {
		int e = errno;

		(void)close(lfd);
		return pdk_error_set(err, e, "cannot lock '%s/%s'", st->dir, name);
	}
	*fd = lfd;
	return 0;
}

int pdk__img_lock(struct pdk_image_store *st, int *fd, struct pdk_error **err)
{
	return flock_at(st, "lock", LOCK_EX, fd, err);
}

/*
 * An import in progress holds "imports" shared, so that prune (which takes
 * it exclusive, without waiting) leaves its unpacking and the layers it
 * completed before its image is recorded alone.
 */
int pdk__img_import_hold(struct pdk_image_store *st, int *fd, struct pdk_error **err)
{
	return flock_at(st, "imports", LOCK_SH, fd, err);
}

int pdk__img_tmp_layer(struct pdk_image_store *st, char **dir, int *root, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/tmp/layer-XXXXXX", st->dir);
	_cleanup_free_ char *rootp = NULL;

	if (mkdtemp(path) == NULL)
		return pdk_error_set(err, errno, "cannot make a directory in '%s/tmp'", st->dir);
	rootp = pdk_xasprintf("%s/root", path);
	if (mkdir(rootp, 0755) < 0)
		return pdk_error_set(err, errno, "cannot make '%s'", rootp);
	*root = open(rootp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*root < 0)
		return pdk_error_set(err, errno, "cannot open '%s'", rootp);
	*dir = steal_ptr(&path);
	return 0;
}

static void remove_path(const char *path)
{
	_cleanup_free_ char *parent = pdk_xstrdup(path);
	char *slash = strrchr(parent, '/');
	_cleanup_close_ int fd = -1;

	if (slash == NULL)
		return;
	*slash = '\0';
	fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		(void)!pdk_rm_rf_at(fd, slash + 1); /* leftovers are prune's */
}

int pdk__img_layer_commit(struct pdk_image_store *st, const char *dir, const char *digest,
			  uint64_t bytes, uint64_t entries, struct pdk_error **err)
{
	_cleanup_json_ json_t *meta = json_object();
	_cleanup_free_ char *text = NULL, *metap = pdk_xasprintf("%s/layer.json", dir);
	_cleanup_free_ char *dst = pdk_xasprintf("layers/%s", pdk__img_hex(digest));
	_cleanup_close_ int lock = -1;
	struct stat sb;

	pdk_json_set(meta, "digest", json_string(digest));
	pdk_json_set(meta, "bytes", json_integer((json_int_t)bytes));
	pdk_json_set(meta, "entries", json_integer((json_int_t)entries));
	pdk_json_set(meta, "created_ns", json_integer((json_int_t)pdk_now_real_ns()));
	text = pdk_json_dump_line(meta);
	if (text == NULL)
		pdk_oom();
	if (pdk_write_file_at(AT_FDCWD, metap, text, true, err) < 0 ||
	    pdk__img_lock(st, &lock, err) < 0) {
		remove_path(dir);
		return -1;
	}
	if (fstatat(st->dirfd, dst, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		remove_path(dir); /* stored before, or by another import meanwhile */
		return 1;
	}
	if (renameat(AT_FDCWD, dir, st->dirfd, dst) < 0) {
		int e = errno;

		remove_path(dir);
		return pdk_error_set(err, e, "cannot move the layer into '%s/%s'", st->dir, dst);
	}
	return 0;
}

bool pdk_image_layer_exists(struct pdk_image_store *st, const char *digest)
{
	_cleanup_free_ char *p = NULL;
	struct stat sb;

	if (!pdk__img_digest_valid(digest))
		return false;
	p = pdk_xasprintf("layers/%s/root", pdk__img_hex(digest));
	return fstatat(st->dirfd, p, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode);
}

static uint64_t layer_bytes_hex(struct pdk_image_store *st, const char *hex)
{
	_cleanup_free_ char *p = pdk_xasprintf("layers/%s/layer.json", hex);
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ json_t *o = NULL;
	struct pdk_error *err = NULL;

	if (pdk_read_file_at(st->dirfd, p, LAYER_META_MAX, &text, &err) < 0) {
		pdk_error_free(&err);
		return 0;
	}
	o = json_loads(text, 0, NULL);
	return (uint64_t)json_integer_value(json_object_get(o, "bytes"));
}

uint64_t pdk__img_layer_bytes(struct pdk_image_store *st, const char *digest)
{
	return layer_bytes_hex(st, pdk__img_hex(digest));
}

uint64_t pdk_image_store_used(struct pdk_image_store *st)
{
	int fd = openat(st->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	uint64_t sum = 0;

	if (d == NULL) {
		if (fd >= 0)
			(void)close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			sum += layer_bytes_hex(st, de->d_name);
	return sum;
}

int pdk_image_layer_refs(struct pdk_image_store *st, const char *digest, unsigned *out,
			 struct pdk_error **err)
{
	struct pdk_image **v = NULL;
	size_t n = 0;
	unsigned refs = 0;

	if (pdk__img_records(st, &v, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; v[i]->layers[j] != NULL; j++)
			if (strcmp(v[i]->layers[j], digest) == 0) {
				refs++;
				break;
			}
	pdk__img_records_free(v, n);
	*out = refs;
	return 0;
}

/* ---- images ---- */

const char *pdk_image_name(const struct pdk_image *img)
{
	return img->names[0];
}

char *const *pdk_image_names(const struct pdk_image *img)
{
	return img->names;
}

const char *pdk_image_digest(const struct pdk_image *img)
{
	return img->digest;
}

const char *pdk_image_source(const struct pdk_image *img)
{
	return img->source ? img->source : "";
}

const struct pdk_image_config *pdk_image_config(const struct pdk_image *img)
{
	return &img->config;
}

uint64_t pdk_image_created_ns(const struct pdk_image *img)
{
	return img->created_ns;
}

uint64_t pdk_image_size(const struct pdk_image *img)
{
	return img->size;
}

char *const *pdk_image_layers(const struct pdk_image *img)
{
	return img->layers;
}

void pdk_image_free(struct pdk_image *img)
{
	if (img == NULL)
		return;
	pdk_strv_free(img->names);
	free(img->digest);
	free(img->source);
	pdk_strv_free(img->layers);
	pdk_image_config_release(&img->config);
	free(img);
}

/* The hex digits `ref` gives of a digest (after "sha256:"), or NULL when it is not hex. */
static const char *ref_hex(const char *ref)
{
	const char *h = pdk__img_hex(ref);
	size_t len = strlen(h);

	if (len < 12 || len > 64)
		return NULL;
	for (const char *c = h; *c != '\0'; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return NULL;
	return h;
}

/* The index in v of the image `ref` names, -1 for none, -2 when a prefix is ambiguous. */
static long find_ref(struct pdk_image **v, size_t n, const char *ref)
{
	const char *hex = ref_hex(ref);
	long found = -1;

	for (size_t i = 0; i < n; i++)
		if (pdk__img_has_name(v[i], ref))
			return (long)i;
	for (size_t i = 0; hex != NULL && i < n; i++) {
		if (strncmp(pdk__img_hex(v[i]->digest), hex, strlen(hex)) != 0)
			continue;
		if (found >= 0)
			return -2;
		found = (long)i;
	}
	return found;
}

static int lookup_in(struct pdk_image **v, size_t n, const char *ref, long *idx,
		     struct pdk_error **err)
{
	*idx = find_ref(v, n, ref);
	if (*idx == -2)
		return pdk_error_set_field(err, EINVAL, "image",
					   "image '%s' is ambiguous: more digits of the digest, "
					   "or the name",
					   ref);
	if (*idx < 0)
		return pdk_error_set_field(err, ENOENT, "image",
					   "no image '%s' in the store (paddock image ls lists "
					   "them; paddock image import adds one)",
					   ref);
	return 0;
}

int pdk_image_lookup(struct pdk_image_store *st, const char *ref, struct pdk_image **out,
		     struct pdk_error **err)
{
	struct pdk_image **v = NULL;
	size_t n = 0;
	long idx;
	int rc;

	if (pdk__img_records(st, &v, &n, err) < 0)
		return -1;
	rc = lookup_in(v, n, ref, &idx, err);
	if (rc < 0) {
		pdk__img_records_free(v, n);
		return rc;
	}
	*out = v[idx];
	v[idx] = NULL;
	pdk__img_records_free(v, n);
	return 0;
}

static int cmp_images(const void *pa, const void *pb)
{
	const struct pdk_image *x = *(struct pdk_image *const *)pa;
	const struct pdk_image *y = *(struct pdk_image *const *)pb;
	const char *a = x->names[0], *b = y->names[0];

	if ((a == NULL) != (b == NULL))
		return a == NULL ? 1 : -1;
	if (a != NULL && strcmp(a, b) != 0)
		return strcmp(a, b);
	return strcmp(x->digest, y->digest);
}

int pdk_image_list(struct pdk_image_store *st, struct pdk_image ***out, size_t *n,
		   struct pdk_error **err)
{
	if (pdk__img_records(st, out, n, err) < 0)
		return -1;
	if (*n > 1)
		qsort(*out, *n, sizeof(**out), cmp_images);
	return 0;
}

int pdk_image_layer_paths(struct pdk_image_store *st, const struct pdk_image *img, char ***out,
			  struct pdk_error **err)
{
	size_t n = pdk_strv_len(img->layers);
	_cleanup_strv_ char **v = NULL;

	for (size_t i = n; i > 0; i--) {
		const char *d = img->layers[i - 1];

		if (!pdk_image_layer_exists(st, d))
			return pdk_error_setx(
				err, ENOENT,
				"image '%s': its layer '%s' is missing from the store "
				"(import the image again)",
				pdk__img_display(img), d);
		pdk_strv_push_take(&v,
				   pdk_xasprintf("%s/layers/%s/root", st->dir, pdk__img_hex(d)));
	}
	if (v == NULL)
		v = pdk_xcalloc(1, sizeof(char *));
	*out = steal_ptr(&v);
	return 0;
}

static char *record_path(const struct pdk_image *img)
{
	return pdk_xasprintf("images/%s.json", pdk__img_hex(img->digest));
}

int pdk_image_hold(struct pdk_image_store *st, const struct pdk_image *img, int *fd,
		   struct pdk_error **err)
{
	_cleanup_free_ char *p = record_path(img);
	_cleanup_close_ int rfd = openat(st->dirfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat a, b;

	if (rfd < 0 || TEMP_FAILURE_RETRY(flock(rfd, LOCK_SH)) < 0)
		return pdk_error_set(err, errno, "cannot hold image '%s'", pdk__img_display(img));
	/* Removed between the open and the lock: the hold would hold nothing. */
	if (fstat(rfd, &a) < 0 || fstatat(st->dirfd, p, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
	    a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		return pdk_error_setx(err, ENOENT, "image '%s' was removed", pdk__img_display(img));
	*fd = steal_fd(&rfd);
	return 0;
}

/* ---- removal ---- */

/* Remove layer `hex` (moved into tmp/ first, so layers/ never holds half of one). */
static int remove_layer(struct pdk_image_store *st, const char *hex, struct pdk_image_rm_stats *s,
			struct pdk_error **err)
{
	_cleanup_free_ char *src = pdk_xasprintf("layers/%s", hex);
	_cleanup_free_ char *dst = pdk_xasprintf("tmp/rm-%s", hex);
	uint64_t bytes = layer_bytes_hex(st, hex);
	_cleanup_close_ int tmp = openat(st->dirfd, "tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (tmp < 0)
		return pdk_error_set(err, errno, "cannot open '%s/tmp'", st->dir);
	rc = pdk_rm_rf_at(tmp, dst + 4); /* an earlier removal's leftover */
	if (rc == 0 && renameat(st->dirfd, src, st->dirfd, dst) < 0)
		rc = -errno;
	if (rc == 0)
		rc = pdk_rm_rf_at(tmp, dst + 4);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot remove the layer '%s/%s'", st->dir, src);
	s->layers++;
	s->bytes_freed += bytes;
	return 0;
}

static bool layer_used(struct pdk_image **v, size_t n, const char *digest)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; v[i] != NULL && v[i]->layers[j] != NULL; j++)
			if (strcmp(v[i]->layers[j], digest) == 0)
				return true;
	return false;
}

/*
 * Remove record v[idx] unless a sandbox holds it (-EBUSY), then the layers
 * of it no other record lists. Under the store lock.
 */
static int remove_image(struct pdk_image_store *st, struct pdk_image **v, size_t n, size_t idx,
			struct pdk_image_rm_stats *s, struct pdk_error **err)
{
	struct pdk_image *img = v[idx];
	_cleanup_free_ char *p = record_path(img);
	_cleanup_close_ int rfd = openat(st->dirfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (rfd < 0)
		return pdk_error_set(err, errno, "cannot open '%s/%s'", st->dir, p);
	if (flock(rfd, LOCK_EX | LOCK_NB) < 0)
		return pdk_error_set_field(err, EBUSY, "image",
					   "image '%s' is in use by a running sandbox (stop it "
					   "first)",
					   pdk__img_display(img));
	if (unlinkat(st->dirfd, p, 0) < 0)
		return pdk_error_set(err, errno, "cannot remove '%s/%s'", st->dir, p);
	s->images++;
	v[idx] = NULL;
	for (size_t j = 0; img->layers[j] != NULL; j++) {
		if (layer_used(v, n, img->layers[j]) || !pdk_image_layer_exists(st, img->layers[j]))
			continue;
		if (remove_layer(st, pdk__img_hex(img->layers[j]), s, err) < 0) {
			pdk_image_free(img);
			return -1;
		}
	}
	pdk_image_free(img);
	return 0;
}

int pdk_image_remove(struct pdk_image_store *st, const char *ref, struct pdk_image_rm_stats *stats,
		     struct pdk_error **err)
{
	struct pdk_image_rm_stats s = {0};
	_cleanup_close_ int lock = -1;
	struct pdk_image **v = NULL;
	size_t n = 0;
	long idx;
	int rc;

	if (pdk__img_lock(st, &lock, err) < 0 || pdk__img_records(st, &v, &n, err) < 0)
		return -1;
	rc = lookup_in(v, n, ref, &idx, err);
	if (rc == 0 && pdk__img_has_name(v[idx], ref) && pdk_strv_len(v[idx]->names) > 1) {
		/* One name of several: the name goes, the image stays under the others. */
		pdk__img_drop_name(v[idx], ref);
		rc = pdk__img_record_write(st, v[idx], err);
	} else if (rc == 0) {
		rc = remove_image(st, v, n, (size_t)idx, &s, err);
	}
	pdk__img_records_free(v, n);
	if (stats != NULL)
		*stats = s;
	return rc;
}

/* Layers no record lists, and leftovers in tmp/ (no import runs: the caller checked). */
static int prune_layers(struct pdk_image_store *st, struct pdk_image **v, size_t n,
			struct pdk_image_rm_stats *s, struct pdk_error **err)
{
	int fd = openat(st->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	_cleanup_close_ int tmp = openat(st->dirfd, "tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_strv_ char **gone = NULL;
	struct dirent *de;

	if (d == NULL || tmp < 0)
		return pdk_error_set(err, errno, "cannot read '%s/layers'", st->dir);
	while ((de = readdir(d)) != NULL) {
		_cleanup_free_ char *digest = pdk_xasprintf("sha256:%s", de->d_name);

		if (de->d_name[0] != '.' && !layer_used(v, n, digest))
			pdk_strv_push(&gone, de->d_name);
	}
	for (size_t i = 0; gone != NULL && gone[i] != NULL; i++)
		if (remove_layer(st, gone[i], s, err) < 0)
			return -1;
	(void)close(steal_fd(&tmp));
	tmp = openat(st->dirfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tmp >= 0) {
		_cleanup_closedir_ DIR *t = fdopendir(steal_fd(&tmp));

		while (t != NULL && (de = readdir(t)) != NULL)
			if (de->d_name[0] != '.')
				(void)!pdk_rm_rf_at(dirfd(t), de->d_name);
	}
	return 0;
}

int pdk_image_prune(struct pdk_image_store *st, struct pdk_image_rm_stats *stats,
		    struct pdk_error **err)
{
	struct pdk_image_rm_stats s = {0};
	_cleanup_close_ int lock = -1, imports = -1;
	struct pdk_image **v = NULL;
	size_t n = 0;
	int rc = 0;

	if (pdk__img_lock(st, &lock, err) < 0 || pdk__img_records(st, &v, &n, err) < 0)
		return -1;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (v[i]->names[0] != NULL)
			continue;
		rc = remove_image(st, v, n, i, &s, err);
		if (rc < 0 && (*err)->status == EBUSY) {
			pdk_error_free(err);
			rc = 0;
		}
	}
	/* An import running: its new layers and tmp/ directory are not leftovers. */
	if (rc == 0 && flock_at(st, "imports", LOCK_EX | LOCK_NB, &imports, err) < 0) {
		pdk_error_free(err);
		imports = -1;
	}
	if (rc == 0 && imports >= 0)
		rc = prune_layers(st, v, n, &s, err);
	pdk__img_records_free(v, n);
	if (stats != NULL)
		*stats = s;
	return rc;
}
