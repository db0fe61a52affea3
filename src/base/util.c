#include "common.h"
#include "util.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

void pdk_oom(void)
{
	static const char msg[] = "paddock: out of memory\n";

	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1); /* best effort before abort */
	abort();
}

void pdk_bug(const char *what)
{
	static const char head[] = "paddock: BUG: ";

	/* Best effort before abort, as pdk_oom(): no allocation, no stdio. */
	(void)!write(STDERR_FILENO, head, sizeof(head) - 1);
	(void)!write(STDERR_FILENO, what, strlen(what));
	(void)!write(STDERR_FILENO, "\n", 1);
	abort();
}

void *pdk_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		pdk_oom();
	return p;
}

void *pdk_xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (p == NULL)
		pdk_oom();
	return p;
}

void *pdk_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		pdk_oom();
	return q;
}

char *pdk_xstrdup(const char *s)
{
	char *p = strdup(s);

	if (p == NULL)
		pdk_oom();
	return p;
}

char *pdk_xvasprintf(const char *fmt, va_list ap)
{
	char *p = NULL;

	if (vasprintf(&p, fmt, ap) < 0)
		pdk_oom();
	return p;
}

char *pdk_xasprintf(const char *fmt, ...)
{
	char *p;
	va_list ap;

	va_start(ap, fmt);
	p = pdk_xvasprintf(fmt, ap);
	va_end(ap);
	return p;
}

size_t pdk_strv_len(char *const *v)
{
	size_t n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	return n;
}

void pdk_strv_push_take(char ***v, char *s)
{
	size_t n = pdk_strv_len(*v);

	*v = pdk_xrealloc(*v, (n + 2) * sizeof(char *));
	(*v)[n] = s;
	(*v)[n + 1] = NULL;
}

void pdk_strv_push(char ***v, const char *s)
{
	pdk_strv_push_take(v, pdk_xstrdup(s));
}

char **pdk_strv_dup(char *const *v)
{
	char **out = pdk_xcalloc(pdk_strv_len(v) + 1, sizeof(char *));

	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		out[i] = pdk_xstrdup(v[i]);
	return out;
}

void pdk_strv_free(char **v)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

int pdk_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = TEMP_FAILURE_RETRY(write(fd, p, len));

		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t pdk_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = TEMP_FAILURE_RETRY(read(fd, p + got, len - got));

		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int pdk_write_file_at(int dirfd, const char *path, const char *data, bool create,
		      struct pdk_error **err)
{
	int flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_TRUNC : 0);
	_cleanup_close_ int fd = TEMP_FAILURE_RETRY(openat(dirfd, path, flags, 0644));
	int rc;

	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open '%s' for writing", path);
	rc = pdk_write_all(fd, data, strlen(data));
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot write '%s' to '%s'", data, path);
	return 0;
}

int pdk_replace_file(const char *tmp, const char *path, const char *data, struct pdk_error **err)
{
	int e;

	if (pdk_write_file_at(AT_FDCWD, tmp, data, true, err) < 0)
		return -1;
	if (rename(tmp, path) == 0)
		return 0;
	e = errno;
	(void)unlink(tmp);
	return pdk_error_set(err, e, "cannot rename '%s' to '%s'", tmp, path);
}

ssize_t pdk_read_once(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC));
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = TEMP_FAILURE_RETRY(read(fd, buf, len - 1));
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

int pdk_read_file_at(int dirfd, const char *path, size_t max, char **out, struct pdk_error **err)
{
	_cleanup_close_ int fd = TEMP_FAILURE_RETRY(openat(dirfd, path, O_RDONLY | O_CLOEXEC));
	_cleanup_free_ char *buf = NULL;
	/*
	 * The buffer grows as the text comes, from a page: most files read here
	 * (cgroup and /proc files, profiles) are far below `max`, and a buffer of
	 * `max` bytes (256 KiB for mountinfo) is an mmap() and munmap() of its own.
	 */
	size_t cap = max + 2 < 4096 ? max + 2 : 4096, len = 0;

	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open '%s'", path);
	buf = pdk_xmalloc(cap);
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) { /* full, one byte kept for the NUL */
			if (len > max)
				break;
			cap = cap > (max + 2) / 2 ? max + 2 : cap * 2;
			buf = pdk_xrealloc(buf, cap);
		}
		n = TEMP_FAILURE_RETRY(read(fd, buf + len, cap - 1 - len));
		if (n < 0)
			return pdk_error_set(err, errno, "cannot read '%s'", path);
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max)
		return pdk_error_setx(err, E2BIG, "'%s' is larger than %zu bytes", path, max);
	buf[len] = '\0';
	*out = steal_ptr(&buf);
	return 0;
}

/*
 * SECURITY: O_NONBLOCK and the regular-file check keep a FIFO or a device
 * named by a user (a profile's `extends`, --config) from blocking or
 * streaming forever.
 */
int pdk_read_regular_file(const char *path, const char *what, size_t max, char **out, size_t *len,
			  struct pdk_error **err)
{
	_cleanup_close_ int fd =
		TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open %s '%s'", what, path);
	if (fstat(fd, &st) < 0)
		return pdk_error_set(err, errno, "cannot stat %s '%s'", what, path);
	if (!S_ISREG(st.st_mode))
		return pdk_error_setx(err, EINVAL, "%s '%s' is not a regular file", what, path);
	buf = pdk_xmalloc(max + 2);
	n = pdk_read_all(fd, buf, max + 1);
	if (n < 0)
		return pdk_error_set(err, (int)-n, "cannot read %s '%s'", what, path);
	buf[n] = '\0';
	*len = (size_t)n;
	*out = steal_ptr(&buf);
	return 0;
}

int pdk_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s == NULL || *s == '\0')
		return -EINVAL;
	for (; *s != '\0'; s++) {
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* Split "123abc" into its number and its suffix. */
static int split_number(const char *s, uint64_t *num, const char **suffix)
{
	char digits[24];
	size_t n = 0;

	while (isdigit((unsigned char)s[n]))
		n++;
	if (n == 0 || n >= sizeof(digits))
		return n == 0 ? -EINVAL : -ERANGE;
	memcpy(digits, s, n);
	digits[n] = '\0';
	*suffix = s + n;
	return pdk_parse_u64(digits, UINT64_MAX, num);
}

struct unit {
	const char *sfx;
	uint64_t mul;
};

/* "<digits><suffix>" with the suffix looked up in `units`; the result is digits * mul. */
static int parse_with_units(const char *s, const struct unit *units, size_t n, bool nocase,
			    uint64_t *out)
{
	const char *sfx;
	uint64_t v;
	int rc;

	if (s == NULL)
		return -EINVAL;
	rc = split_number(s, &v, &sfx);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if ((nocase ? strcasecmp(sfx, units[i].sfx) : strcmp(sfx, units[i].sfx)) != 0)
			continue;
		if (units[i].mul != 0 && v > UINT64_MAX / units[i].mul)
			return -ERANGE;
		*out = v * units[i].mul;
		return 0;
	}
	return -EINVAL;
}

int pdk_parse_size(const char *s, uint64_t *out)
{
	static const struct unit units[] = {
		{"", 1},
		{"B", 1},
		{"K", 1ULL << 10},
		{"KB", 1ULL << 10},
		{"KiB", 1ULL << 10},
		{"M", 1ULL << 20},
		{"MB", 1ULL << 20},
		{"MiB", 1ULL << 20},
		{"G", 1ULL << 30},
		{"GB", 1ULL << 30},
		{"GiB", 1ULL << 30},
		{"T", 1ULL << 40},
		{"TB", 1ULL << 40},
		{"TiB", 1ULL << 40},
	};

	return parse_with_units(s, units, PDK_ARRAY_SIZE(units), true, out);
}

int pdk_parse_duration(const char *s, uint64_t *out_ms)
{
	/* Case matters: "m" is minutes, "ms" milliseconds. */
	static const struct unit units[] = {
		{"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
	};

	return parse_with_units(s, units, PDK_ARRAY_SIZE(units), false, out_ms);
}

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	if (clock_gettime(clk, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t pdk_now_mono_ns(void)
{
	return now_ns(CLOCK_MONOTONIC);
}

uint64_t pdk_now_real_ns(void)
{
	return now_ns(CLOCK_REALTIME);
}

void pdk_make_id(char buf[static 37])
{
	uint64_t ms = pdk_now_real_ns() / 1000000ULL;
	unsigned char r[10] = {0};

	/* getrandom() of 10 bytes never blocks once the pool is up; fall back to time bits. */
	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		uint64_t t = pdk_now_mono_ns() ^ (uint64_t)getpid();

		memcpy(r, &t, sizeof(t));
	}
	r[0] = (unsigned char)(0x70 | (r[0] & 0x0f)); /* version 7 */
	r[2] = (unsigned char)(0x80 | (r[2] & 0x3f)); /* variant 10 */
	(void)snprintf(
		buf, 37, "%08" PRIx64 "-%04" PRIx64 "-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		ms >> 16, ms & 0xffff, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]);
}

static int copy_range(int in_fd, int out_fd, off_t off, off_t end)
{
	bool no_cfr = false; /* the kernel has no copy_file_range(): read and write the rest */
	char buf[65536];

	while (off < end) {
		size_t want = (size_t)(end - off);
		ssize_t n = -1;

		if (!no_cfr) {
			loff_t in_off = off, out_off = off;

			n = copy_file_range(in_fd, &in_off, out_fd, &out_off, want, 0);
			if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP ||
				      errno == EINVAL)) {
				no_cfr = errno == ENOSYS;
				n = -1;
				errno = 0;
			} else if (n < 0) {
				return -errno;
			}
		}
		if (n < 0) {
			n = TEMP_FAILURE_RETRY(
				pread(in_fd, buf, want < sizeof(buf) ? want : sizeof(buf), off));
			if (n < 0)
				return -errno;
			if (n > 0) {
				ssize_t w = TEMP_FAILURE_RETRY(pwrite(out_fd, buf, (size_t)n, off));

				if (w < 0)
					return -errno;
				n = w;
			}
		}
		if (n == 0)
			return -EIO; /* the source shrank under us */
		off += n;
	}
	return 0;
}

int pdk_copy_sparse(int in_fd, int out_fd, uint64_t size)
{
	off_t end = (off_t)size;
	off_t off = 0;

	while (off < end) {
		off_t data = lseek(in_fd, off, SEEK_DATA);
		off_t hole;
		int rc;

		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		if (data < 0) {
			data = off; /* no SEEK_DATA here: copy everything */
			hole = end;
		} else {
			hole = lseek(in_fd, data, SEEK_HOLE);
			if (hole < 0 || hole > end)
				hole = end;
		}
		rc = copy_range(in_fd, out_fd, data, hole);
		if (rc < 0)
			return rc;
		off = hole;
	}
	if (ftruncate(out_fd, end) < 0)
		return -errno;
	return 0;
}

int pdk_rm_rf_at(int parent, const char *name)
{
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;
	int fd;

	if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && fchmodat(parent, name, 0700, 0) == 0)
		fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* A directory we may read but not write or search: give ourselves u+rwx. */
	(void)fchmod(fd, 0700);
	d = fdopendir(fd);
	if (d == NULL) {
		int e = errno;

		(void)close(fd);
		return -e;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		int rc;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		rc = pdk_rm_rf_at(dirfd(d), de->d_name);
		if (rc < 0)
			return rc;
	}
	if (errno != 0)
		return -errno;
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int pdk_mkdir_p(const char *path, struct pdk_error **err)
{
	_cleanup_free_ char *buf = pdk_xstrdup(path);

	for (char *s = buf + 1;; s++) {
		bool end = *s == '\0';

		if (*s != '/' && !end)
			continue;
		*s = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return pdk_error_set(err, errno, "cannot create directory '%s'", buf);
		if (end)
			return 0;
		*s = '/';
	}
}

bool pdk_dir_spread(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int flags = 0;

	if (fd < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0 || (flags & FS_TOPDIR_FL))
		return false;
	flags |= FS_TOPDIR_FL;
	return ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
}

size_t pdk_utf8_len(const unsigned char *p, size_t n)
{
	size_t len = p[0] < 0x80             ? 1
		     : (p[0] & 0xe0) == 0xc0 ? 2
		     : (p[0] & 0xf0) == 0xe0 ? 3
		     : (p[0] & 0xf8) == 0xf0 ? 4
					     : 0;

	if (len == 0 || len > n || (len == 2 && p[0] < 0xc2) || p[0] > 0xf4)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* Overlong three- and four-byte forms, surrogates, and past U+10FFFF. */
	if ((len == 3 && p[0] == 0xe0 && p[1] < 0xa0) ||
	    (len == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
	    (len == 4 && p[0] == 0xf0 && p[1] < 0x90) || (len == 4 && p[0] == 0xf4 && p[1] >= 0x90))
		return 0;
	return len;
}

bool pdk_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		size_t len = pdk_utf8_len(p + i, n - i);

		if (len == 0)
			return false;
		i += len;
	}
	return true;
}

char *pdk_utf8_clean(const char *p, size_t n, bool nul_bad, size_t *out_len, bool *lossy)
{
	const unsigned char *u = (const unsigned char *)p;
	char *out = pdk_xmalloc(3 * n + 1);
	size_t o = 0;

	if (lossy != NULL)
		*lossy = false;
	for (size_t i = 0; i < n;) {
		size_t len = nul_bad && u[i] == 0 ? 0 : pdk_utf8_len(u + i, n - i);

		if (len == 0) {
			memcpy(out + o, "\xef\xbf\xbd", 3); /* U+FFFD */
			o += 3;
			i++;
			if (lossy != NULL)
				*lossy = true;
			continue;
		}
		memcpy(out + o, p + i, len);
		o += len;
		i += len;
	}
	out[o] = '\0';
	*out_len = o;
	return out;
}

int pdk_thread_start_quiet(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, attr, fn, arg);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int pdk_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

void pdk_env_set_take(char ***env, char *kv)
{
	size_t klen = strcspn(kv, "=");

	for (size_t i = 0; *env != NULL && (*env)[i] != NULL; i++) {
		if (strncmp((*env)[i], kv, klen) == 0 && (*env)[i][klen] == '=') {
			free((*env)[i]);
			(*env)[i] = kv;
			return;
		}
	}
	pdk_strv_push_take(env, kv);
}

const char *pdk_env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
			return envp[i] + n + 1;
	return NULL;
}
