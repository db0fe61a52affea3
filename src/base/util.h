/*
 * util.h - allocation, cleanup attributes, ownership transfer, I/O helpers.
 */
#ifndef PDK_UTIL_H
#define PDK_UTIL_H

#include "common.h"
#include "error.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

/* Allocation: abort on OOM (with pdk_bug(), the only places libpaddock may abort). */
PDK_NORETURN void pdk_oom(void);
/*
 * A broken invariant: a caller's bug, not a condition to report (git's
 * BUG()). Writes "paddock: BUG: `what`" to stderr and aborts.
 */
PDK_NORETURN void pdk_bug(const char *what);
void *pdk_xmalloc(size_t n);
void *pdk_xcalloc(size_t nmemb, size_t size);
void *pdk_xrealloc(void *p, size_t n);
char *pdk_xstrdup(const char *s);
char *pdk_xasprintf(const char *fmt, ...) PDK_PRINTF(1, 2);
/* pdk_xasprintf() of a va_list (`ap` is used up, as by vasprintf()). Never NULL. */
char *pdk_xvasprintf(const char *fmt, va_list ap) PDK_PRINTF(1, 0);

/* NULL-terminated string vectors. */
size_t pdk_strv_len(char *const *v);
/* Append a copy of s; *v may be NULL. */
void pdk_strv_push(char ***v, const char *s);
/* Append s, taking ownership of it. */
void pdk_strv_push_take(char ***v, char *s);
char **pdk_strv_dup(char *const *v);
void pdk_strv_free(char **v);

/* Cleanup attributes (bwrap, crun). */
static inline void pdk__cleanup_free(void *p)
{
	free(*(void **)p);
}
static inline void pdk__cleanup_close(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		(void)close(*fd); /* nothing to do on failure of a cleanup close */
		errno = saved;
	}
}
static inline void pdk__cleanup_fclose(FILE **f)
{
	if (*f != NULL)
		(void)fclose(*f);
}
static inline void pdk__cleanup_closedir(DIR **d)
{
	if (*d != NULL)
		(void)closedir(*d);
}
static inline void pdk__cleanup_strv(char ***v)
{
	pdk_strv_free(*v);
}
#define _cleanup_free_     __attribute__((cleanup(pdk__cleanup_free)))
#define _cleanup_close_    __attribute__((cleanup(pdk__cleanup_close)))
#define _cleanup_fclose_   __attribute__((cleanup(pdk__cleanup_fclose)))
#define _cleanup_closedir_ __attribute__((cleanup(pdk__cleanup_closedir)))
#define _cleanup_strv_     __attribute__((cleanup(pdk__cleanup_strv)))

/* Ownership transfer: the only way an owning local leaves its scope. */
#define steal_ptr(pp)                               \
	({                                          \
		__typeof__(*(pp)) pdk__tmp = *(pp); \
		*(pp) = NULL;                       \
		pdk__tmp;                           \
	})
static inline int steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}

/* Write all of buf, retrying EINTR and short writes. 0 or -errno. */
PDK_MUST_CHECK int pdk_write_all(int fd, const void *buf, size_t len);
/* Read exactly len bytes. Returns bytes read (< len only at EOF) or -errno. */
PDK_MUST_CHECK ssize_t pdk_read_all(int fd, void *buf, size_t len);

/*
 * Write `data` to `path` relative to dirfd (O_WRONLY, no O_CREAT unless
 * `create` is true, then mode 0644 and O_TRUNC). Error names the path.
 */
PDK_MUST_CHECK int pdk_write_file_at(int dirfd, const char *path, const char *data, bool create,
				     struct pdk_error **err);
/*
 * Replace `path` whole: `data` written to `tmp` (as pdk_write_file_at()
 * with create, in the same directory), then renamed over `path`, so that a
 * reader, or a crash, sees the old file or the new one, never a part. `tmp`
 * is removed when the rename fails. The error names the file that failed.
 */
PDK_MUST_CHECK int pdk_replace_file(const char *tmp, const char *path, const char *data,
				    struct pdk_error **err);
/*
 * Read at most `max` bytes of `path` (relative to dirfd) into a new
 * NUL-terminated string (*out, caller owns). -E2BIG if larger.
 */
PDK_MUST_CHECK int pdk_read_file_at(int dirfd, const char *path, size_t max, char **out,
				    struct pdk_error **err);

/*
 * A kernel-generated file (/proc, cgroupfs) into buf with one open, one
 * read() and one close: such files are made whole at the first read, and
 * each system call counts on a start's path. buf is NUL-terminated. Returns
 * the bytes read (len - 1: it filled buf and may go on), or -errno.
 */
PDK_MUST_CHECK ssize_t pdk_read_once(const char *path, char *buf, size_t len);

/*
 * Read a file a user names (a profile, a recipe, a gateway config): a
 * regular file, of which at most `max` + 1 bytes are read, so that the
 * caller can tell it is too long (*len > max) and say so in its words.
 * *out is NUL-terminated and the caller's; errors name `what` ("profile")
 * and the path: -errno (open, stat, read), -EINVAL (not a regular file).
 */
PDK_MUST_CHECK int pdk_read_regular_file(const char *path, const char *what, size_t max, char **out,
					 size_t *len, struct pdk_error **err);

/*
 * Copy `size` bytes from in_fd to out_fd (both at offset 0), keeping holes:
 * data ranges found with SEEK_DATA/SEEK_HOLE go through copy_file_range()
 * (read/write where the kernel cannot), and out_fd is extended to `size`.
 * 0 or -errno.
 */
PDK_MUST_CHECK int pdk_copy_sparse(int in_fd, int out_fd, uint64_t size);

/*
 * Remove `name` under dirfd and, when it is a directory, everything in it,
 * without following symlinks; directories that lack u+rwx get it first.
 * ENOENT is success. 0 or -errno.
 */
PDK_MUST_CHECK int pdk_rm_rf_at(int dirfd, const char *name);

/*
 * The value of `name` in `envp` (an environment a front end handed down:
 * "K=V" strings, NULL-terminated; NULL envp: none), borrowed; NULL when it
 * is not there. The library reads no environment of its own (getenv).
 */
const char *pdk_env_get(char *const *envp, const char *name);

/*
 * Put `kv` ("K=V"; taken: freed or kept by *env) into the environment
 * vector *env (a NULL-terminated strv, may be NULL): it replaces the entry
 * named K, else it is appended.
 */
void pdk_env_set_take(char ***env, char *kv);

/* mkdir -p: every missing directory of `path` is made, mode 0700. 0 or negative + *err. */
PDK_MUST_CHECK int pdk_mkdir_p(const char *path, struct pdk_error **err);

/*
 * Give the directory `path` ext4's "top directory" flag (FS_TOPDIR_FL,
 * chattr +T), so that the file system places each directory made in it in
 * a block group of its own choosing (the Orlov allocator spreads the
 * children of a top directory), and with it everything made inside that
 * child. Meant for the directories that hold one child per sandbox or
 * workspace set, made and removed by the hundred: on ext4 without a journal
 * an inode freed in the last minute (six when its table block is still
 * dirty) is skipped by every allocation in its group, one lookup each, so
 * churn kept in one group makes every file made there dearer
 * (docs/internals/performance.md, eleventh and fourteenth rounds). Other
 * file systems ignore the flag or refuse it, and nothing changes there.
 * Whether the flag was set just now, on a directory that had none.
 */
bool pdk_dir_spread(const char *path);

/*
 * The length of the UTF-8 sequence that starts at `p` (n > 0 bytes there):
 * 1 to 4, or 0 when those bytes do not start a valid one (RFC 3629: no
 * overlong form, no surrogate, nothing above U+10FFFF). NUL is a valid
 * one-byte sequence.
 */
size_t pdk_utf8_len(const unsigned char *p, size_t n);

/* Whether the `n` bytes of `s` are valid UTF-8 (pdk_utf8_len() all along). */
bool pdk_utf8_valid(const char *s, size_t n);

/*
 * The `n` bytes of `p` as valid UTF-8, in a new NUL-terminated string (caller
 * frees; its length in *out_len): each byte that does not start a valid
 * sequence, and each NUL when `nul_bad`, is replaced by U+FFFD. *lossy (may
 * be NULL) says whether any byte was replaced.
 */
char *pdk_utf8_clean(const char *p, size_t n, bool nul_bad, size_t *out_len, bool *lossy);

/* The value of one hex digit (either case), or -1. */
int pdk_hexval(char c);

/*
 * Parse "512", "64K", "1M", "2G", "1T" (binary multiples; optional "i"/"iB"/"B"
 * suffix). 0 or -EINVAL / -ERANGE.
 */
PDK_MUST_CHECK int pdk_parse_size(const char *s, uint64_t *out);
/* Parse "250ms", "30s", "10m", "2h", "1d" or a bare number of seconds into milliseconds. */
PDK_MUST_CHECK int pdk_parse_duration(const char *s, uint64_t *out_ms);
/* Parse an unsigned decimal integer with range check (no sign, no junk). */
PDK_MUST_CHECK int pdk_parse_u64(const char *s, uint64_t max, uint64_t *out);

/*
 * Start a thread of `fn(arg)` that takes no signal: it is created with every
 * signal blocked (a thread inherits its creator's mask), so a signal the
 * process handles, or reads from a signalfd, never lands in it. `attr` as
 * pthread_create()'s (NULL: the defaults). The caller's mask is left as it
 * was. 0 or pthread_create()'s error number.
 */
PDK_MUST_CHECK int pdk_thread_start_quiet(pthread_t *t, const pthread_attr_t *attr,
					  void *(*fn)(void *), void *arg);

/* CLOCK_MONOTONIC and CLOCK_REALTIME in nanoseconds. */
uint64_t pdk_now_mono_ns(void);
uint64_t pdk_now_real_ns(void);

/* Format a UUIDv7-style time-ordered id into buf (at least 37 bytes). */
void pdk_make_id(char buf[static 37]);

#endif
