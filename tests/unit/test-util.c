#include "common.h"
#include "error.h"
#include "log.h"
#include "paths.h"
#include "util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* A file replaced whole through its temporary name; a failed rename leaves no temporary. */
Test(util, replace_file)
{
	char dir[] = "/tmp/pdk-util-XXXXXX";
	_cleanup_free_ char *tmp = NULL, *path = NULL, *sub = NULL;
	struct pdk_error *err = NULL;
	char *out = NULL;

	cr_assert_not_null(mkdtemp(dir));
	tmp = pdk_xasprintf("%s/f.new", dir);
	path = pdk_xasprintf("%s/f", dir);
	cr_assert_eq(pdk_replace_file(tmp, path, "first, and longer", &err), 0);
	cr_assert_eq(pdk_replace_file(tmp, path, "second", &err), 0);
	cr_assert_eq(pdk_read_file_at(AT_FDCWD, path, 64, &out, &err), 0);
	cr_assert_str_eq(out, "second");
	free(out);
	cr_assert_eq(access(tmp, F_OK), -1, "the temporary name is gone");
	/* Over a directory that is not empty, the rename fails. */
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(mkdir(path, 0700), 0);
	sub = pdk_xasprintf("%s/x", path);
	cr_assert_eq(mkdir(sub, 0700), 0);
	cr_assert_lt(pdk_replace_file(tmp, path, "third", &err), 0);
	cr_assert_not_null(strstr(err->msg, path), "%s", err->msg);
	cr_assert_eq(access(tmp, F_OK), -1, "no temporary is left after a failure");
	pdk_error_free(&err);
	/* A directory that is not there: the write fails, naming the temporary. */
	cr_assert_eq(rmdir(sub), 0);
	cr_assert_eq(rmdir(path), 0);
	cr_assert_eq(rmdir(dir), 0);
	cr_assert_lt(pdk_replace_file(tmp, path, "fourth", &err), 0);
	cr_assert_eq(err->status, ENOENT);
	cr_assert_not_null(strstr(err->msg, tmp), "%s", err->msg);
	pdk_error_free(&err);
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

/* ---- the places a directory is in sight through mounts (pdk_paths_aliases_in) ---- */

/* The aliases of `dir` in `table`, joined with " ", are `want`. */
static void expect_aliases(const char *table, const char *dir, const char *want)
{
	_cleanup_strv_ char **v = pdk_paths_aliases_in(table, dir);
	_cleanup_free_ char *got = pdk_xstrdup("");

	for (size_t i = 0; v[i] != NULL; i++) {
		char *next = pdk_xasprintf("%s%s%s", got, i > 0 ? " " : "", v[i]);

		free(got);
		got = next;
	}
	cr_assert_str_eq(got, want, "in:\n%s", table);
}

#define ROOT_LINE "1 0 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"

Test(util, paths_aliases_follow_mounts_of_the_same_file_system)
{
	/* Nothing but the root: the directory alone, and a table without a root changes nothing. */
	expect_aliases(ROOT_LINE, "/var/lib/paddock", "/var/lib/paddock");
	expect_aliases("", "/var/lib/paddock", "/var/lib/paddock");
	expect_aliases("garbage\n1 2\n", "/var/lib/paddock", "/var/lib/paddock");
	/* A bind of a directory above it, and one of the directory itself; another disk's none. */
	expect_aliases(ROOT_LINE "30 1 254:0 /var/lib /mnt/alias rw - ext4 x rw\n"
				 "31 1 254:0 /var/lib/paddock /srv/x rw - ext4 x rw\n"
				 "32 1 8:1 /var/lib /srv/other rw - ext4 y rw\n"
				 "33 1 254:0 /usr /srv/usr rw - ext4 x rw\n",
		       "/var/lib/paddock", "/var/lib/paddock /mnt/alias/paddock /srv/x");
	/* Under it: the path inside the alias. */
	expect_aliases(ROOT_LINE "30 1 254:0 /var/lib /mnt/alias rw - ext4 x rw\n",
		       "/var/lib/paddock/ws", "/var/lib/paddock/ws /mnt/alias/paddock/ws");
	/* A bind of "/" itself. */
	expect_aliases(ROOT_LINE "30 1 254:0 / /mnt/all rw - ext4 x rw\n", "/run/p",
		       "/run/p /mnt/all/run/p");
}

Test(util, paths_aliases_leave_out_what_a_mount_on_top_hides)
{
	/* A tmpfs mounted on /mnt after /mnt/alias: /mnt/alias is the tmpfs's now. */
	expect_aliases(ROOT_LINE "30 1 254:0 /var/lib /mnt/alias rw - ext4 x rw\n"
				 "40 1 0:50 / /mnt rw - tmpfs t rw\n",
		       "/var/lib/paddock", "/var/lib/paddock");
	/* The same tmpfs first, the bind on it: in sight. */
	expect_aliases(ROOT_LINE "40 1 0:50 / /mnt rw - tmpfs t rw\n"
				 "30 40 254:0 /var/lib /mnt/alias rw - ext4 x rw\n",
		       "/var/lib/paddock", "/var/lib/paddock /mnt/alias/paddock");
	/* Stacked on one point: the last is in sight, the first is not. */
	expect_aliases(ROOT_LINE "50 1 254:0 /var/lib /srv/y rw - ext4 x rw\n"
				 "51 50 0:51 / /srv/y rw - tmpfs t rw\n",
		       "/var/lib/paddock", "/var/lib/paddock");
	expect_aliases(ROOT_LINE "51 1 0:51 / /srv/y rw - tmpfs t rw\n"
				 "50 51 254:0 /var/lib /srv/y rw - ext4 x rw\n",
		       "/var/lib/paddock", "/var/lib/paddock /srv/y/paddock");
	/* The directory itself hidden at its own path (a mount over /var/lib): still listed first.
	 */
	expect_aliases(ROOT_LINE "60 1 0:52 / /var/lib rw - tmpfs t rw\n"
				 "30 1 254:0 /var/lib /mnt/alias rw - ext4 x rw\n",
		       "/var/lib/paddock", "/var/lib/paddock");
}

Test(util, paths_aliases_of_a_file_system_of_its_own_escapes_and_subvolumes)
{
	/* The state directory is a mount point: other mounts of that disk, a recursive bind above.
	 */
	expect_aliases(ROOT_LINE "60 1 8:1 / /var/lib/paddock rw - ext4 y rw\n"
				 "61 1 8:1 / /data/pd rw - ext4 y rw\n"
				 "30 1 254:0 /var/lib /mnt/alias rw - ext4 x rw\n"
				 "62 30 8:1 / /mnt/alias/paddock rw - ext4 y rw\n",
		       "/var/lib/paddock", "/var/lib/paddock /data/pd /mnt/alias/paddock");
	/* mountinfo's escapes: a space and a backslash in a mount point. */
	expect_aliases(ROOT_LINE "30 1 254:0 /var/lib /mnt/a\\040b\\134c rw - ext4 x rw\n",
		       "/var/lib/paddock", "/var/lib/paddock /mnt/a b\\c/paddock");
	/* A btrfs subvolume as "/", the whole file system mounted elsewhere. */
	expect_aliases("1 0 0:30 /@ / rw - btrfs d rw\n"
		       "70 1 0:30 / /mnt/top rw - btrfs d rw\n",
		       "/var/lib/paddock", "/var/lib/paddock /mnt/top/@/var/lib/paddock");
}

/* The kernel's interfaces in a table: by file system type, each point once, escapes read. */
Test(util, paths_kernel_mounts_by_type)
{
	_cleanup_strv_ char **v = pdk_paths_kernel_mounts_in(
		ROOT_LINE "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
			  "23 1 0:22 / /sys rw shared:7 - sysfs sysfs rw\n"
			  "24 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
			  "25 1 0:27 / /srv/a\\040jail/proc rw - proc proc rw\n"
			  "26 1 0:28 / /tmp rw - tmpfs tmpfs rw\n"
			  "27 1 0:29 / /proc rw - proc proc rw\n"
			  "28 1 0:30 / /x rw - procfake procfake rw\n"
			  "29 1 0:31 / /no-dash rw proc\n");

	cr_assert_eq(pdk_strv_len(v), 4);
	cr_assert_str_eq(v[0], "/proc");
	cr_assert_str_eq(v[1], "/sys");
	cr_assert_str_eq(v[2], "/sys/fs/cgroup");
	cr_assert_str_eq(v[3], "/srv/a jail/proc");
	cr_assert_null(pdk_paths_kernel_mounts_in(ROOT_LINE));
	/* The engine's statfs() check reads the same table, by magic. */
	cr_assert_str_eq(pdk_paths_kernel_fs(0x9fa0 /* PROC_SUPER_MAGIC */, NULL), "procfs");
	cr_assert_str_eq(pdk_paths_kernel_fs(0, "cgroup2"), "cgroupfs (v2)");
	cr_assert_null(pdk_paths_kernel_fs(0xef53 /* EXT4_SUPER_MAGIC */, NULL));
	cr_assert_null(pdk_paths_kernel_fs(0, "procfake"));
}

/* A parsed table still gives its text as it came (the cgroup's lookups read it again). */
Test(util, paths_mounts_keep_their_text)
{
	static const char text[] = ROOT_LINE "22 1 0:21 / /a\\040b rw - proc proc rw\n";
	struct pdk_mounts *t = pdk_mounts_parse(text);
	_cleanup_strv_ char **k = pdk_mounts_kernel(t);

	cr_assert_str_eq(pdk_mounts_text(t), text);
	cr_assert_str_eq(k[0], "/a b", "parsed too: %s", k[0]);
	pdk_mounts_free(t);
}

/*
 * In a mount namespace of its own (and a user namespace when not root; a
 * fork, since a process with threads cannot unshare either): `priv` first
 * and AT/priv not among its aliases, then, once STATE is bound at AT, AT/priv.
 * 0, or the step that failed.
 */
static int aliases_after_a_bind(const char *state, const char *priv, const char *at)
{
	_cleanup_free_ char *want = pdk_xasprintf("%s/priv", at);
	_cleanup_strv_ char **v = NULL;
	char map[64];
	bool found = false;

	/* Root may mount in a mount namespace of its own; others need a user namespace too. */
	if (geteuid() == 0) {
		if (unshare(CLONE_NEWNS) < 0)
			return 1;
	} else {
		(void)snprintf(map, sizeof(map), "0 %u 1", (unsigned)geteuid());
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0 ||
		    pdk_write_file_at(AT_FDCWD, "/proc/self/uid_map", map, false, NULL) < 0)
			return 1;
		(void)snprintf(map, sizeof(map), "0 %u 1", (unsigned)getegid());
		if (pdk_write_file_at(AT_FDCWD, "/proc/self/setgroups", "deny", false, NULL) < 0 ||
		    pdk_write_file_at(AT_FDCWD, "/proc/self/gid_map", map, false, NULL) < 0)
			return 2;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return 2;
	if (pdk_paths_aliases(priv, &v, NULL) < 0 || strcmp(v[0], priv) != 0)
		return 3;
	for (size_t i = 0; v[i] != NULL; i++)
		if (strcmp(v[i], want) == 0)
			return 3;
	pdk_strv_free(steal_ptr(&v));
	if (mount(state, at, NULL, MS_BIND, NULL) < 0)
		return 4;
	if (pdk_paths_aliases(priv, &v, NULL) < 0)
		return 5;
	for (size_t i = 0; v[i] != NULL; i++)
		found |= strcmp(v[i], want) == 0;
	return found ? 0 : 6;
}

/* The real table: a bind of a directory's parent, in a mount namespace of this test's own. */
Test(util, paths_aliases_in_this_namespace)
{
	char dir[] = "/tmp/pdk-alias-XXXXXX";
	_cleanup_free_ char *canon = NULL, *state = NULL, *priv = NULL, *at = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	int status = -1;
	pid_t pid;

	cr_assert_not_null(mkdtemp(dir));
	canon = pdk_paths_canonical(dir);
	state = pdk_xasprintf("%s/state", canon);
	priv = pdk_xasprintf("%s/priv", state);
	at = pdk_xasprintf("%s/at", canon);
	cr_assert_eq(mkdir(at, 0700), 0);
	cr_assert_eq(pdk_paths_private_dir(priv, &err), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(aliases_after_a_bind(state, priv, at));
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	rmdir(priv);
	rmdir(state);
	rmdir(at);
	rmdir(canon);
	/* 1-2: the namespaces, 3: an alias before the bind, 4: the bind, 6: no alias after it. */
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
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

/* One read of a kernel-made file: whole and NUL-terminated, or len - 1 when it fills buf. */
Test(util, read_once)
{
	char buf[64], small[4];

	cr_assert_gt(pdk_read_once("/proc/self/stat", buf, sizeof(buf)), 0);
	cr_assert_eq(strtol(buf, NULL, 10), (long)getpid(), "%s", buf);
	cr_assert_eq(pdk_read_once("/proc/self/stat", small, sizeof(small)), 3);
	cr_assert_eq(small[3], '\0');
	cr_assert_eq(pdk_read_once("/proc/self/no-such-file", buf, sizeof(buf)), -ENOENT);
}
