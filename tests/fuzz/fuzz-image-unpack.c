/*
 * fuzz-image-unpack.c - libFuzzer target for the image store's unpacker
 * (image/unpack.c, input.c): the bytes of a layer, as an archive someone
 * else made gives them (plain tar, gzip or zstd), unpacked into a scratch
 * directory.
 *
 * Invariants: nothing crashes, leaks or reads past the input; a refusal
 * carries a message; whatever was unpacked stays inside the layer's
 * directory (the directory above it holds nothing but it), holds no
 * device node but an overlayfs whiteout (0:0), no FIFO or socket, no
 * set-id file (a set-group-ID directory is no privilege), and no symlink
 * whose relative target climbs out of it.
 */
#include "common.h"
#include "base.h"
#include "image-internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char scratch[] = "/tmp/fuzz-image-XXXXXX";
static bool scratch_made;

/* The scratch directory goes with the process. */
static void remove_scratch(void)
{
	(void)!pdk_rm_rf_at(AT_FDCWD, scratch);
}

static void check_tree(int dirfd, const char *prefix, unsigned depth)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (d == NULL || depth > 300)
		abort();
	while ((de = readdir(d)) != NULL) {
		char path[PATH_MAX], target[PATH_MAX];
		struct stat st;
		ssize_t n;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		(void)snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "/" : "",
			       de->d_name);
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			abort();
		if ((st.st_mode & S_ISUID) != 0 ||
		    ((st.st_mode & S_ISGID) != 0 && !S_ISDIR(st.st_mode)) || S_ISFIFO(st.st_mode) ||
		    S_ISSOCK(st.st_mode) || S_ISBLK(st.st_mode))
			abort();
		if (S_ISCHR(st.st_mode) && st.st_rdev != makedev(0, 0))
			abort();
		if (S_ISLNK(st.st_mode)) {
			n = readlinkat(dirfd, de->d_name, target, sizeof(target) - 1);
			if (n < 0)
				abort();
			target[n] = '\0';
			if (!pdk__img_link_stays(path, target))
				abort();
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			if (sub < 0 && fchmodat(dirfd, de->d_name, 0700, 0) == 0)
				sub = openat(dirfd, de->d_name,
					     O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
			if (sub < 0)
				abort();
			check_tree(sub, path, depth + 1);
			(void)close(sub);
		}
	}
	(void)closedir(d);
}

/* The scratch directory holds "root" and nothing else: nothing was written beside it. */
static void check_outside(int top)
{
	int fd = fcntl(top, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (d == NULL)
		abort();
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    strcmp(de->d_name, "root") != 0)
			abort();
	(void)closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdk_error *err = NULL;
	struct pdk__img_unpack u = {0};
	struct pdk__img_in in;
	int mfd, top, root, rc;

	/* A flag, not the template's last byte: mkdtemp() may end the name in 'X'. */
	if (!scratch_made) {
		if (mkdtemp(scratch) == NULL || atexit(remove_scratch) != 0)
			abort();
		scratch_made = true;
	}
	top = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0 || pdk_rm_rf_at(top, "root") < 0 || mkdirat(top, "root", 0755) < 0)
		abort();
	root = openat(top, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	mfd = memfd_create("layer", MFD_CLOEXEC);
	if (root < 0 || mfd < 0 || pdk_write_all(mfd, data, size) < 0)
		abort();
	u.root = root;
	u.budget = 16u << 20;
	u.label = "fuzz";
	u.flags = size > 0 && (data[0] & 1) ? PDK_IMAGE_LAYER_STRICT : 0;
	rc = pdk__img_in_open(&in, mfd, 0, size, "fuzz", &err);
	if (rc == 0)
		rc = pdk__img_unpack(&u, &in, &err);
	if (rc == 0)
		rc = pdk__img_unpack_finish(&u, &err);
	if (rc < 0 && (err == NULL || err->msg == NULL || err->msg[0] == '\0'))
		abort();
	if (rc == 0 && err != NULL)
		abort();
	pdk_error_free(&err);
	pdk__img_in_close(&in);
	pdk__img_unpack_release(&u);
	check_tree(root, "", 0);
	check_outside(top);
	(void)close(root);
	(void)close(mfd);
	(void)close(top);
	return 0;
}
