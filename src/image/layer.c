/*
 * layer.c - layers into the store (from a tar stream, from a directory)
 * and images recorded from stored layers.
 */
#include "common.h"
#include "base.h"
#include "image-internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The quota left to a new layer. */
static uint64_t budget(struct pdk_image_store *st)
{
	uint64_t used = pdk_image_store_used(st);

	return used < st->quota ? st->quota - used : 0;
}

static void unpack_init(struct pdk__img_unpack *u, struct pdk_image_store *st, int root,
			unsigned flags, const char *label)
{
	memset(u, 0, sizeof(*u));
	u->root = root;
	u->flags = flags;
	u->budget = budget(st);
	u->chown = geteuid() == 0;
	u->log = st->log;
	u->label = label;
}

static void add_stats(struct pdk_image_import_stats *s, const struct pdk__img_unpack *u,
		      uint64_t bytes_in)
{
	if (s == NULL)
		return;
	s->layers_new++;
	s->bytes_in += bytes_in;
	s->bytes_stored += u->bytes;
	s->entries += u->entries;
	s->setid_cleared += u->setid_cleared;
}

/* The digest check of a layer against what its image declares (`expect` may be NULL). */
static int check_digest(const char *label, const char *what, const char *got, const char *expect,
			struct pdk_error **err)
{
	if (expect == NULL || strcmp(got, expect) == 0)
		return 0;
	return pdk_error_setx(err, EINVAL, "%s: its %s is %s, the image declares %s", label, what,
			      got, expect);
}

int pdk__img_layer_from(struct pdk_image_store *st, int fd, uint64_t off, uint64_t len,
			const char *label, unsigned flags, const char *expect_blob,
			const char *expect_diff, char **digest,
			struct pdk_image_import_stats *stats, struct pdk_error **err)
{
	_cleanup_free_ char *dir = NULL, *diff = NULL, *blob = NULL;
	_cleanup_close_ int root = -1;
	struct pdk__img_unpack u;
	struct pdk__img_in in;
	int rc;

	if (pdk__img_tmp_layer(st, &dir, &root, err) < 0)
		return -1;
	unpack_init(&u, st, root, flags, label);
	rc = pdk__img_in_open(&in, fd, off, len, label, err);
	if (rc == 0)
		rc = pdk__img_unpack(&u, &in, err);
	if (rc == 0)
		rc = pdk__img_unpack_finish(&u, err);
	if (rc == 0) {
		diff = pdk__img_in_digest(&in, true);
		blob = pdk__img_in_digest(&in, false);
		rc = check_digest(label, "digest", blob, expect_blob, err);
	}
	if (rc == 0)
		rc = check_digest(label, "content's digest (diff_id)", diff, expect_diff, err);
	if (rc == 0)
		rc = pdk__img_layer_commit(st, dir, diff, u.bytes, u.entries, err);
	else
		(void)!pdk_rm_rf_at(AT_FDCWD, dir);
	if (rc == 0)
		add_stats(stats, &u, in.bytes_in);
	rc = rc > 0 ? 0 : rc;
	pdk__img_in_close(&in);
	pdk__img_unpack_release(&u);
	if (rc == 0)
		*digest = steal_ptr(&diff);
	return rc;
}

int pdk_image_layer_add_tar(struct pdk_image_store *st, int fd, const char *label, unsigned flags,
			    char **digest, uint64_t *bytes, struct pdk_error **err)
{
	struct pdk_image_import_stats s = {0};
	_cleanup_close_ int hold = -1;

	if (pdk__img_import_hold(st, &hold, err) < 0 ||
	    pdk__img_layer_from(st, fd, 0, UINT64_MAX, label, flags, NULL, NULL, digest, &s, err) <
		    0)
		return -1;
	if (bytes != NULL)
		*bytes = pdk__img_layer_bytes(st, *digest);
	return 0;
}

/* SECURITY: a source that holds the store would copy the store (and what it is writing) into it. */
static int check_source_dir(struct pdk_image_store *st, const char *src, struct pdk_error **err)
{
	_cleanup_free_ char *canon = pdk_paths_canonical(src);
	_cleanup_free_ char *store = pdk_paths_canonical(st->dir);

	if (pdk_paths_within(store, canon))
		return pdk_error_set_field(err, EINVAL, "source",
					   "'%s' holds the image store '%s': give the root "
					   "filesystem's own directory",
					   src, st->dir);
	return 0;
}

int pdk__img_layer_dir(struct pdk_image_store *st, const char *src, unsigned flags, char **digest,
		       struct pdk_image_import_stats *stats, struct pdk_error **err)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int root = -1;
	_cleanup_close_ int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct pdk__img_unpack u;
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	int rc;

	if (sha == NULL || EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1)
		pdk_oom();
	if (sfd < 0) {
		EVP_MD_CTX_free(sha);
		return pdk_error_set(err, errno, "cannot open the directory '%s'", src);
	}
	rc = check_source_dir(st, src, err);
	if (rc == 0)
		rc = pdk__img_tmp_layer(st, &dir, &root, err);
	unpack_init(&u, st, root, flags, src);
	if (rc == 0)
		rc = pdk__img_copy_dir(&u, sfd, sha, err);
	if (rc == 0)
		rc = pdk__img_unpack_finish(&u, err);
	if (rc == 0) {
		_cleanup_free_ char *d = pdk__img_sha256_final(sha);

		rc = pdk__img_layer_commit(st, dir, d, u.bytes, u.entries, err);
		if (rc == 0)
			add_stats(stats, &u, 0);
		if (rc >= 0)
			*digest = steal_ptr(&d);
		rc = rc > 0 ? 0 : rc;
	} else if (dir != NULL) {
		(void)!pdk_rm_rf_at(AT_FDCWD, dir);
	}
	EVP_MD_CTX_free(sha);
	pdk__img_unpack_release(&u);
	return rc;
}

int pdk_image_layer_add_dir(struct pdk_image_store *st, const char *dir, unsigned flags,
			    char **digest, uint64_t *bytes, struct pdk_error **err)
{
	struct pdk_image_import_stats s = {0};
	_cleanup_close_ int hold = -1;

	if (pdk__img_import_hold(st, &hold, err) < 0 ||
	    pdk__img_layer_dir(st, dir, flags, digest, &s, err) < 0)
		return -1;
	if (bytes != NULL)
		*bytes = pdk__img_layer_bytes(st, *digest);
	return 0;
}

/* Every record named `name` but the one of `digest` loses its name. Under the lock. */
static int move_name(struct pdk_image_store *st, const char *name, const char *digest,
		     struct pdk_error **err)
{
	struct pdk_image **v = NULL;
	size_t n = 0;
	int rc = 0;

	if (pdk__img_records(st, &v, &n, err) < 0)
		return -1;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!pdk__img_has_name(v[i], name) || strcmp(v[i]->digest, digest) == 0)
			continue;
		pdk__img_drop_name(v[i], name);
		rc = pdk__img_record_write(st, v[i], err);
	}
	pdk__img_records_free(v, n);
	return rc;
}

/* The names of the image already recorded under `digest` (an import of the same content). */
static char **existing_names(struct pdk_image_store *st, const char *digest)
{
	struct pdk_image *old = NULL;
	struct pdk_error *err = NULL;
	char **names;

	if (pdk__img_record_read(st, pdk__img_hex(digest), &old, &err) < 0) {
		pdk_error_free(&err);
		return pdk_xcalloc(1, sizeof(char *));
	}
	names = steal_ptr(&old->names);
	pdk_image_free(old);
	return names;
}

static int check_name(const char *name, struct pdk_error **err)
{
	size_t len = strlen(name);

	if (len == 0 || len > 255 || !pdk_utf8_valid(name, len))
		return pdk_error_set_field(err, EINVAL, "name",
					   "an image name is 1 to 255 characters of UTF-8");
	for (const char *c = name; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return pdk_error_set_field(err, EINVAL, "name",
						   "the image name '%s' holds a control character",
						   name);
	return 0;
}

int pdk__img_commit(struct pdk_image_store *st, const char *name, char *const *layers,
		    const struct pdk_image_config *config, const char *source,
		    struct pdk_image **out, struct pdk_error **err)
{
	_cleanup_close_ int lock = -1;
	struct pdk_image *img;
	int rc = 0;

	if (name != NULL && check_name(name, err) < 0)
		return -1;
	if (pdk_strv_len(layers) > PDK_IMAGE_MAX_LAYERS)
		return pdk_error_setx(err, E2BIG, "an image has at most %d layers",
				      PDK_IMAGE_MAX_LAYERS);
	if (pdk__img_lock(st, &lock, err) < 0)
		return -1;
	img = pdk_xcalloc(1, sizeof(*img));
	img->layers = layers ? pdk_strv_dup(layers) : pdk_xcalloc(1, sizeof(char *));
	for (size_t i = 0; rc == 0 && img->layers[i] != NULL; i++) {
		if (!pdk_image_layer_exists(st, img->layers[i]))
			rc = pdk_error_setx(err, ENOENT,
					    "the layer '%s' is not in the store (removed "
					    "meanwhile? import again)",
					    img->layers[i]);
		img->size += pdk__img_layer_bytes(st, img->layers[i]);
	}
	pdk__img_config_copy(&img->config, config);
	img->source = pdk_xstrdup(source ? source : "");
	img->created_ns = pdk_now_real_ns();
	pdk__img_compute_digest(img);
	img->names = existing_names(st, img->digest);
	if (name != NULL && !pdk__img_has_name(img, name))
		pdk_strv_push(&img->names, name);
	if (rc == 0 && name != NULL)
		rc = move_name(st, name, img->digest, err);
	if (rc == 0)
		rc = pdk__img_record_write(st, img, err);
	if (rc < 0 || out == NULL)
		pdk_image_free(img);
	else
		*out = img;
	return rc;
}

int pdk_image_commit(struct pdk_image_store *st, const char *name, char *const *layers,
		     const struct pdk_image_config *config, const char *source,
		     struct pdk_image **out, struct pdk_error **err)
{
	return pdk__img_commit(st, name, layers, config, source, out, err);
}
