/*
 * replay.c - run every file of a corpus directory (or the files named on the
 * command line) through LLVMFuzzerTestOneInput, without libFuzzer. Lets the
 * normal (gcc, sanitizer) builds exercise the fuzz targets on the corpus.
 */
#include "common.h"
#include "util.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The whole file, NULs and all (a tar or gzip input holds many), as libFuzzer gives it. */
static int run_file(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size > (16 << 20)) {
		fprintf(stderr, "replay: cannot read '%s'\n", path);
		return -1;
	}
	buf = pdk_xmalloc((size_t)st.st_size + 1);
	n = pdk_read_all(fd, buf, (size_t)st.st_size);
	if (n < 0) {
		fprintf(stderr, "replay: cannot read '%s'\n", path);
		return -1;
	}
	buf[n] = '\0';
	(void)LLVMFuzzerTestOneInput((const uint8_t *)buf, (size_t)n);
	return 0;
}

static int run_dir(const char *dir, int *count)
{
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;

	if (d == NULL) {
		perror(dir);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		_cleanup_free_ char *p = NULL;

		if (de->d_name[0] == '.')
			continue;
		p = pdk_xasprintf("%s/%s", dir, de->d_name);
		if (run_file(p) < 0)
			return -1;
		(*count)++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int count = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			return 1;
		}
		if (S_ISDIR(st.st_mode) ? run_dir(argv[i], &count) < 0 : run_file(argv[i]) < 0)
			return 1;
		if (!S_ISDIR(st.st_mode))
			count++;
	}
	printf("replayed %d inputs\n", count);
	return 0;
}
