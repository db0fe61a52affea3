/*
 * test-image.c - the image store (image/): archive names made relative or
 * refused, symlink targets that stay in the layer, pax records, the store's
 * records, names, reference counts and removal, the quota.
 */
#include "common.h"
#include "base.h"

/*
 * Criterion before the store's internals: zstd.h and zlib.h bring <limits.h>
 * in a way that leaves MB_LEN_MAX at a value glibc's fortified wchar.h (which
 * criterion includes) refuses.
 */
#include <criterion/criterion.h>

#include "image-internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

Test(image, clean_path)
{
	struct pdk_error *err = NULL;
	char *out = NULL;

	cr_assert_eq(pdk__img_clean_path("./a//b/./c/", "t", &out, &err), 0);
	cr_assert_str_eq(out, "a/b/c");
	free(out);
	cr_assert_eq(pdk__img_clean_path("./", "t", &out, &err), 0);
	cr_assert_str_eq(out, "");
	free(out);
	cr_assert_eq(pdk__img_clean_path("/", "t", &out, &err), 0, "umoci's root entry");
	free(out);
	cr_assert_lt(pdk__img_clean_path("/etc/passwd", "t", &out, &err), 0);
	cr_assert(strstr(err->msg, "entry '/etc/passwd' refused: an absolute name") != NULL);
	pdk_error_free(&err);
	cr_assert_lt(pdk__img_clean_path("a/../../b", "t", &out, &err), 0);
	cr_assert(strstr(err->msg, "'..'") != NULL);
	pdk_error_free(&err);
	cr_assert_eq(pdk__img_clean_path("a/..b/c..", "t", &out, &err), 0, "'..b' is a name");
	free(out);
}

Test(image, link_stays)
{
	cr_assert(pdk__img_link_stays("bin/sh", "busybox"));
	cr_assert(pdk__img_link_stays("usr/bin/x", "../lib/y"));
	cr_assert(pdk__img_link_stays("usr/bin/x", "../../etc/z"));
	cr_assert(!pdk__img_link_stays("usr/bin/x", "../../../etc/z"));
	cr_assert(!pdk__img_link_stays("x", "../y"));
	cr_assert(pdk__img_link_stays("x", "/etc/alternatives/y"),
		  "absolute: in the sandbox's root");
	cr_assert(pdk__img_link_stays("a/b", "./../c/./d"));
}

Test(image, pax_records)
{
	const char *d = "12 path=a/b\n17 linkpath=/x/y\n";
	const char *k, *v;
	size_t off = 0, kn, vn;

	cr_assert_eq(pdk_tar_pax_next((const unsigned char *)d, strlen(d), &off, &k, &kn, &v, &vn),
		     1);
	cr_assert_eq(kn, 4);
	cr_assert_eq(strncmp(v, "a/b", vn), 0);
	cr_assert_eq(pdk_tar_pax_next((const unsigned char *)d, strlen(d), &off, &k, &kn, &v, &vn),
		     1);
	cr_assert_eq(strncmp(k, "linkpath", kn), 0);
	cr_assert_eq(pdk_tar_pax_next((const unsigned char *)d, strlen(d), &off, &k, &kn, &v, &vn),
		     0);
	off = 0;
	cr_assert_lt(
		pdk_tar_pax_next((const unsigned char *)"99 path=x\n", 10, &off, &k, &kn, &v, &vn),
		0, "a length past the data");
}

Test(image, tar_rule)
{
	cr_assert_eq(pdk_tar_rule('3', 0644), PDK_TAR_DEVICE);
	cr_assert_eq(pdk_tar_rule('4', 0644), PDK_TAR_DEVICE);
	cr_assert_eq(pdk_tar_rule('0', 04755), PDK_TAR_SETID);
	cr_assert_eq(pdk_tar_rule('0', 02755), PDK_TAR_SETID);
	cr_assert_eq(pdk_tar_rule('0', 0755), PDK_TAR_OK);
}

static struct pdk_image_store *open_store(char *dir, uint64_t quota)
{
	struct pdk_error *err = NULL;
	struct pdk_image_store *st = NULL;
	struct pdk_image_store_opts o = {.state_dir = dir, .quota = quota};

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(pdk_image_store_open(&o, &st, &err), 0, "%s", err ? err->msg : "");
	return st;
}

/* A directory with one file of `content` at `name`, as a layer of the store. */
static char *layer_of(struct pdk_image_store *st, const char *name, const char *content)
{
	char dir[] = "/tmp/test-image-src-XXXXXX";
	_cleanup_free_ char *path = NULL;
	struct pdk_error *err = NULL;
	char *digest = NULL;

	cr_assert_not_null(mkdtemp(dir));
	path = pdk_xasprintf("%s/%s", dir, name);
	cr_assert_eq(pdk_write_file_at(AT_FDCWD, path, content, true, &err), 0);
	cr_assert_eq(pdk_image_layer_add_dir(st, dir, 0, &digest, NULL, &err), 0, "%s",
		     err ? err->msg : "");
	cr_assert_eq(pdk_rm_rf_at(AT_FDCWD, dir), 0);
	return digest;
}

Test(image, names_refs_and_removal)
{
	char dir[] = "/tmp/test-image-XXXXXX";
	struct pdk_image_store *st = open_store(dir, 0);
	_cleanup_free_ char *base = layer_of(st, "a", "base\n");
	_cleanup_free_ char *top = layer_of(st, "b", "top\n");
	_cleanup_free_ char *again = layer_of(st, "a", "base\n");
	char *v1[] = {base, NULL}, *v2[] = {base, top, NULL};
	struct pdk_image_rm_stats rs;
	struct pdk_image *img = NULL;
	struct pdk_error *err = NULL;
	unsigned refs = 0;
	int hold = -1;

	cr_assert_str_eq(base, again, "one content, one digest");
	cr_assert_eq(pdk_image_commit(st, "one", v1, NULL, "test", NULL, &err), 0);
	cr_assert_eq(pdk_image_commit(st, "two", v2, NULL, "test", NULL, &err), 0);
	cr_assert_eq(pdk_image_commit(st, "uno", v1, NULL, "test", NULL, &err), 0);
	cr_assert_eq(pdk_image_layer_refs(st, base, &refs, &err), 0);
	cr_assert_eq(refs, 2, "one's record (also named uno) and two's");
	cr_assert_eq(pdk_image_lookup(st, "uno", &img, &err), 0);
	cr_assert_str_eq(pdk_image_names(img)[0], "one");
	cr_assert_eq(pdk_image_hold(st, img, &hold, &err), 0);
	cr_assert_eq(pdk_image_remove(st, pdk_image_digest(img), &rs, &err), -EBUSY);
	pdk_error_free(&err);
	(void)close(hold);
	cr_assert_eq(pdk_image_remove(st, "uno", &rs, &err), 0);
	cr_assert_eq(rs.images, 0, "a name of several: the name goes");
	cr_assert_eq(pdk_image_remove(st, "two", &rs, &err), 0);
	cr_assert_eq(rs.layers, 1, "top goes, base stays for one");
	cr_assert(pdk_image_layer_exists(st, base));
	cr_assert(!pdk_image_layer_exists(st, top));
	cr_assert_eq(pdk_image_remove(st, "one", &rs, &err), 0);
	cr_assert(!pdk_image_layer_exists(st, base));
	cr_assert_eq(pdk_image_lookup(st, "one", &img, &err), -ENOENT);
	pdk_error_free(&err);
	pdk_image_free(img);
	pdk_image_store_free(st);
	cr_assert_eq(pdk_rm_rf_at(AT_FDCWD, dir), 0);
}

Test(image, quota)
{
	char dir[] = "/tmp/test-image-XXXXXX";
	char src[] = "/tmp/test-image-src-XXXXXX";
	struct pdk_image_store *st = open_store(dir, 64 << 10);
	_cleanup_free_ char *big = NULL, *path = NULL;
	struct pdk_error *err = NULL;
	char *digest = NULL;

	cr_assert_not_null(mkdtemp(src));
	big = pdk_xmalloc(128 << 10);
	memset(big, 'x', (128 << 10) - 1);
	big[(128 << 10) - 1] = '\0';
	path = pdk_xasprintf("%s/big", src);
	cr_assert_eq(pdk_write_file_at(AT_FDCWD, path, big, true, &err), 0);
	cr_assert_eq(pdk_image_layer_add_dir(st, src, 0, &digest, NULL, &err), -1);
	cr_assert_eq(err->status, EFBIG);
	cr_assert(strstr(err->msg, "entry 'big' refused") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	pdk_image_store_free(st);
	cr_assert_eq(pdk_rm_rf_at(AT_FDCWD, dir), 0);
	cr_assert_eq(pdk_rm_rf_at(AT_FDCWD, src), 0);
}
