#include "common.h"
#include "error.h"
#include "log.h"
#include "paths.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

Test(util, parse_size_units)
{
	uint64_t v = 0;

	cr_assert_eq(pdk_parse_size("512", &v), 0);
	cr_assert_eq(v, 512);
	cr_assert_eq(pdk_parse_size("64K", &v), 0);
	cr_assert_eq(v, 64 * 1024);
	cr_assert_eq(pdk_parse_size("1M", &v), 0);
	cr_assert_eq(v, 1 << 20);
	cr_assert_eq(pdk_parse_size("2GiB", &v), 0);
	cr_assert_eq(v, 2ULL << 30);
	cr_assert_eq(pdk_parse_size("3g", &v), 0);
	cr_assert_eq(v, 3ULL << 30);
	cr_assert_eq(pdk_parse_size("1T", &v), 0);
	cr_assert_eq(v, 1ULL << 40);
}

Test(util, parse_size_rejects_junk)
{
	uint64_t v = 7;

	cr_assert_eq(pdk_parse_size("", &v), -EINVAL);
	cr_assert_eq(pdk_parse_size("M", &v), -EINVAL);
	cr_assert_eq(pdk_parse_size("-1M", &v), -EINVAL);
	cr_assert_eq(pdk_parse_size("1.5G", &v), -EINVAL);
	cr_assert_eq(pdk_parse_size("10X", &v), -EINVAL);
	cr_assert_eq(pdk_parse_size("1 G", &v), -EINVAL);
	cr_assert_eq(pdk_parse_size("99999999999999999999", &v), -ERANGE);
	cr_assert_eq(pdk_parse_size("20000000T", &v), -ERANGE);
	cr_assert_eq(v, 7, "a failed parse must not touch the output");
}

Test(util, parse_duration)
{
	uint64_t ms = 0;

	cr_assert_eq(pdk_parse_duration("250ms", &ms), 0);
	cr_assert_eq(ms, 250);
	cr_assert_eq(pdk_parse_duration("30s", &ms), 0);
	cr_assert_eq(ms, 30000);
	cr_assert_eq(pdk_parse_duration("10", &ms), 0);
	cr_assert_eq(ms, 10000);
	cr_assert_eq(pdk_parse_duration("10m", &ms), 0);
	cr_assert_eq(ms, 600000);
	cr_assert_eq(pdk_parse_duration("2h", &ms), 0);
	cr_assert_eq(ms, 7200000);
	cr_assert_eq(pdk_parse_duration("1d", &ms), 0);
	cr_assert_eq(ms, 86400000);
	cr_assert_eq(pdk_parse_duration("1.5s", &ms), -EINVAL);
	cr_assert_eq(pdk_parse_duration("5 s", &ms), -EINVAL);
	cr_assert_eq(pdk_parse_duration("5y", &ms), -EINVAL);
	cr_assert_eq(pdk_parse_duration("", &ms), -EINVAL);
}

Test(util, parse_u64_range)
{
	uint64_t v = 0;

	cr_assert_eq(pdk_parse_u64("0", 10, &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(pdk_parse_u64("10", 10, &v), 0);
	cr_assert_eq(pdk_parse_u64("11", 10, &v), -ERANGE);
	cr_assert_eq(pdk_parse_u64("+1", 10, &v), -EINVAL);
	cr_assert_eq(pdk_parse_u64("1x", 10, &v), -EINVAL);
	cr_assert_eq(pdk_parse_u64("18446744073709551616", UINT64_MAX, &v), -ERANGE);
}

Test(util, strv)
{
	char **v = NULL;
	char **d;

	cr_assert_eq(pdk_strv_len(v), 0);
	pdk_strv_push(&v, "a");
	pdk_strv_push_take(&v, pdk_xstrdup("b"));
	cr_assert_eq(pdk_strv_len(v), 2);
	d = pdk_strv_dup(v);
	cr_assert_str_eq(d[0], "a");
	cr_assert_str_eq(d[1], "b");
	cr_assert_null(d[2]);
	cr_assert_neq(d[0], v[0]);
	pdk_strv_free(v);
	pdk_strv_free(d);
}

Test(util, error_first_wins_and_wrap)
{
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_error_set(&err, ENOENT, "open '%s'", "/x"), -ENOENT);
	cr_assert_eq(pdk_error_setx(&err, EPERM, "second"), -EPERM);
	cr_assert_eq(err->status, ENOENT);
	cr_assert_str_eq(err->msg, "open '/x': No such file or directory");
	cr_assert_eq(pdk_error_wrap(&err, "load profile"), -ENOENT);
	cr_assert_str_eq(err->msg, "load profile: open '/x': No such file or directory");
	pdk_error_free(&err);
	cr_assert_null(err);
	cr_assert_eq(pdk_error_setx(NULL, 0, "no sink"), -EINVAL);
}

Test(util, read_file_cap)
{
	char path[] = "/tmp/pdk-util-XXXXXX";
	int fd = mkstemp(path);
	struct pdk_error *err = NULL;
	char *out = NULL;

	cr_assert_geq(fd, 0);
	cr_assert_eq(pdk_write_all(fd, "0123456789", 10), 0);
	close(fd);
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 10, &out, &err), 0);
	cr_assert_str_eq(out, "0123456789");
	free(out);
	out = NULL;
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 9, &out, &err), -E2BIG);
	cr_assert_null(out);
	cr_assert_not_null(strstr(err->msg, path));
	pdk_error_free(&err);
	unlink(path);
}

/* Texts past the first page: the buffer grows as they come, up to the cap and no further. */
Test(util, read_file_grows_to_the_cap)
{
	static const size_t sizes[] = {4094, 4095, 4096, 4097, 8191, 70000, 262145};
	char path[] = "/tmp/pdk-util-XXXXXX";
	int fd = mkstemp(path);
	char *text = malloc(262145);

	cr_assert_geq(fd, 0);
	for (size_t i = 0; i < 262145; i++)
		text[i] = (char)('a' + i % 26);
	for (size_t k = 0; k < PDK_ARRAY_SIZE(sizes); k++) {
		size_t n = sizes[k];
		struct pdk_error *err = NULL;
		char *out = NULL;

		cr_assert_eq(ftruncate(fd, (off_t)n), 0);
		cr_assert_eq(pwrite(fd, text, n, 0), (ssize_t)n);
		cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, n, &out, &err), 0, "%zu bytes", n);
		cr_assert_eq(strlen(out), n, "%zu bytes read whole", n);
		cr_assert_eq(memcmp(out, text, n), 0);
		free(out);
		out = NULL;
		cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, n - 1, &out, &err), -E2BIG,
			     "%zu bytes over a cap of %zu", n, n - 1);
		cr_assert_null(out);
		pdk_error_free(&err);
		cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 1 << 20, &out, &err), 0);
		cr_assert_eq(strlen(out), n);
		free(out);
	}
	close(fd);
	free(text);
	unlink(path);
}

Test(util, make_id_is_uuidv7_and_ordered)
{
	char a[37], b[37];

	pdk_make_id(a);
	usleep(2000);
	pdk_make_id(b);
	cr_assert_eq(strlen(a), 36);
	cr_assert_eq(a[8], '-');
	cr_assert_eq(a[14], '7', "version nibble: %s", a);
	cr_assert(strchr("89ab", a[19]) != NULL, "variant: %s", a);
	cr_assert_lt(strcmp(a, b), 0, "ids are time-ordered: %s %s", a, b);
}

Test(util, env_get_and_set)
{
	char **env = NULL;
	char *fixed[] = {"A=1", "AB=2", "EMPTY=", NULL};

	cr_assert_str_eq(pdk_env_get(fixed, "A"), "1");
	cr_assert_str_eq(pdk_env_get(fixed, "AB"), "2", "a name is matched whole");
	cr_assert_str_eq(pdk_env_get(fixed, "EMPTY"), "");
	cr_assert_null(pdk_env_get(fixed, "B"));
	cr_assert_null(pdk_env_get(NULL, "A"), "no environment at all");
	pdk_env_set_take(&env, pdk_xstrdup("K=one"));
	pdk_env_set_take(&env, pdk_xstrdup("KEY=x"));
	pdk_env_set_take(&env, pdk_xstrdup("K=two"));
	cr_assert_eq(pdk_strv_len(env), 2, "K is replaced, not added twice");
	cr_assert_str_eq(env[0], "K=two");
	cr_assert_str_eq(env[1], "KEY=x");
	pdk_strv_free(env);
}

/* The canonical path of a directory, existing or not, and "within". */
Test(util, paths_canonical_and_within)
{
	char dir[] = "/tmp/pdk-paths-XXXXXX";
	_cleanup_free_ char *real = NULL, *link = NULL, *via = NULL, *missing = NULL, *want = NULL,
			    *up = NULL;

	cr_assert_not_null(mkdtemp(dir));
	real = pdk_xasprintf("%s/real", dir);
	link = pdk_xasprintf("%s/link", dir);
	cr_assert_eq(mkdir(real, 0700), 0);
	cr_assert_eq(symlink("real", link), 0);
	via = pdk_paths_canonical(link);
	want = pdk_paths_canonical(real);
	cr_assert_str_eq(via, want);
	free(via);
	via = pdk_xasprintf("%s/link/not/yet", dir);
	missing = pdk_paths_canonical(via);
	free(via);
	via = pdk_xasprintf("%s/not/yet", want);
	cr_assert_str_eq(missing, via, "a missing tail is appended to its parent's real path");
	up = pdk_xasprintf("%s/link/gone/..", dir);
	free(via);
	via = pdk_paths_canonical(up);
	cr_assert_str_eq(via, want);
	cr_assert(pdk_paths_within(missing, want));
	cr_assert(pdk_paths_within(want, want));
	cr_assert(pdk_paths_within(want, "/"));
	cr_assert(!pdk_paths_within(want, missing));
	cr_assert(!pdk_paths_within("/tmp/paddock-10", "/tmp/paddock-1"), "a prefix is no parent");
	unlink(link);
	rmdir(real);
	rmdir(dir);
}

/* ---- the rate-limited log sink (log.h) ---- */

struct lines {
	unsigned n, suppressed_reports;
	char last[256];
};

static void count_line(void *data, enum pdk_log_level level, const char *msg)
{
	struct lines *l = data;

	(void)level;
	l->n++;
	if (strstr(msg, "log lines suppressed") != NULL)
		l->suppressed_reports++;
	(void)snprintf(l->last, sizeof(l->last), "%s", msg);
}

Test(util, log_limit_passes_a_burst_then_counts_what_it_drops)
{
	struct lines seen = {0};
	struct pdk_log inner = {.fn = count_line, .data = &seen};
	struct pdk_log_limit lim;

	uint64_t t0 = pdk_now_mono_ns(), secs;

	pdk_log_limit_init(&lim, &inner, 5, 1);
	for (int i = 0; i < 10000; i++)
		pdk_log(&lim.log, PDK_LOG_WARN, "line %d", i);
	/* 5 at once, then at most one more a second (two lines: a count and a line). */
	secs = (pdk_now_mono_ns() - t0) / 1000000000 + 1;
	cr_assert_leq(seen.n, 5 + secs, "%u lines passed in %llu s", seen.n,
		      (unsigned long long)secs);
	cr_assert_geq(seen.n, 5);
	cr_assert_geq(lim.suppressed, 1);
	/* After a second, the count is reported before anything else. */
	(void)usleep(1100 * 1000);
	pdk_log_limit_flush(&lim);
	cr_assert_eq(seen.suppressed_reports >= 1, true);
	cr_assert(strstr(seen.last, "log lines suppressed (more than 5 at once or 1 a second)") !=
			  NULL,
		  "last line: %s", seen.last);
	cr_assert_eq(lim.suppressed, 0);
}
