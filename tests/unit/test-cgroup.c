/*
 * test-cgroup.c - the cgroup module on fake cgroupfs trees (v1 and v2: plain
 * directories and files under a temporary directory), and for real on a
 * cgroup v1 machine when run as root.
 *
 * A fake tree works because the unit-test flavour of libpaddock gives a new
 * directory on a non-cgroupfs the (empty) files of its parent, as the kernel
 * would; tests then assert what the backends wrote.
 */
#include "common.h"
#include "cgroup.h"
#include "cgroup-internal.h"
#include "error.h"
#include "proc.h"
#include "util.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ULL * 1024ULL)

static char g_tmp[PATH_MAX];       /* the fake tree's root, made per test */
static struct pdk_cgroup *g_cg;    /* destroyed by teardown if a test failed early */
static char g_self[PATH_MAX + 32]; /* /proc/self/cgroup fixture */

/* --- helpers --- */

static char *tpath(const char *rel)
{
	return pdk_xasprintf("%s/%s", g_tmp, rel);
}

static void mkdirs(const char *rel)
{
	_cleanup_free_ char *p = tpath(rel);

	for (char *s = p + strlen(g_tmp) + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p,
			  strerror(errno));
		*s = '/';
	}
	cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
}

static void put_abs(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
	cr_assert_eq(fputs(text, f) >= 0, true);
	cr_assert_eq(fclose(f), 0);
}

static void put(const char *rel, const char *text)
{
	_cleanup_free_ char *p = tpath(rel);

	put_abs(p, text);
}

/* Contents of a file (static buffer), "<absent>" when it cannot be read. */
static const char *slurp_abs(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return "<absent>";
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static const char *slurp(const char *rel)
{
	_cleanup_free_ char *p = tpath(rel);

	return slurp_abs(p);
}

static bool exists(const char *rel)
{
	_cleanup_free_ char *p = tpath(rel);

	return access(p, F_OK) == 0;
}

static void put_files(const char *dir, const char *const *files)
{
	for (size_t i = 0; files[i] != NULL; i++) {
		_cleanup_free_ char *rel = pdk_xasprintf("%s/%s", dir, files[i]);

		put(rel, "");
	}
}

static const char *const v2_files[] = {
	"cgroup.procs", "cgroup.kill",     "cgroup.freeze", "cgroup.events",
	"memory.max",   "memory.swap.max", "memory.peak",   "memory.events",
	"pids.max",     "pids.events",     "cpu.max",       "cpu.stat",
	NULL,
};

/* A fake v2 tree: the parent cgroup `parent` offers `controllers`. */
static void fake_v2(const char *parent, const char *controllers)
{
	mkdirs(parent);
	put_files(parent, v2_files);
	_cleanup_free_ char *c = pdk_xasprintf("%s/cgroup.controllers", parent);
	_cleanup_free_ char *s = pdk_xasprintf("%s/cgroup.subtree_control", parent);
	put(c, controllers);
	put(s, "");
}

static void self_file(const char *text)
{
	(void)snprintf(g_self, sizeof(g_self), "%s/self-cgroup", g_tmp);
	put_abs(g_self, text);
}

static struct pdk_cgroup_opts fake_opts(enum pdk_cgroup_version v)
{
	struct pdk_cgroup_opts o = {
		.root = g_tmp,
		.self_cgroup_file = g_self,
		.version = v,
	};
	return o;
}

static const struct pdk_cgroup_limits all_limits = {
	.memory = 64 * MiB,
	.pids = 16,
	.cpu_milli = 500,
};

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static void setup(void)
{
	(void)snprintf(g_tmp, sizeof(g_tmp), "/tmp/pdk-cgroup-XXXXXX");
	cr_assert_not_null(mkdtemp(g_tmp));
	cr_assert_eq(chmod(g_tmp, 0755), 0);
	self_file("0::/\n");
}

static void teardown(void)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (g_cg != NULL && pdk_cgroup_destroy(g_cg, &err) < 0)
		cr_log_error("destroy: %s", err->msg);
	g_cg = NULL;
	if (g_tmp[0] != '\0')
		(void)nftw(g_tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(cgroup, .init = setup, .fini = teardown);

/* Criterion does not run .fini for a skipped test: clean up first. */
#define SKIP(...)                          \
	do {                               \
		teardown();                \
		cr_skip_test(__VA_ARGS__); \
	} while (0)

/* Create with the fake options; assert success. */
static struct pdk_cgroup *make(const char *name, const struct pdk_cgroup_opts *o,
			       const struct pdk_cgroup_limits *lim, unsigned required,
			       unsigned *down)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_cgroup *cg = pdk_cgroup_new(name, o, lim, required, down, &err);

	cr_assert_not_null(cg, "pdk_cgroup_new: %s", err != NULL ? err->msg : "?");
	g_cg = cg;
	return cg;
}

/* Create with the fake options; assert failure and return the message (caller frees). */
static char *make_fails(const char *name, const struct pdk_cgroup_opts *o,
			const struct pdk_cgroup_limits *lim, unsigned required, int status)
{
	struct pdk_error *err = NULL;
	struct pdk_cgroup *cg = pdk_cgroup_new(name, o, lim, required, NULL, &err);
	char *msg;

	cr_assert_null(cg);
	cr_assert_not_null(err);
	cr_assert_eq(err->status, status, "status %d, want %d: %s", err->status, status, err->msg);
	msg = steal_ptr(&err->msg);
	pdk_error_free(&err);
	return msg;
}

static void destroy_ok(void)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_cgroup *cg = steal_ptr(&g_cg);

	cr_assert_eq(pdk_cgroup_destroy(cg, &err), 0, "destroy: %s", err ? err->msg : "");
}

/* --- names --- */

Test(cgroup, rejects_bad_names)
{
	static const char *const bad[] = {"", ".", "..", "a/b", "a b", "x\n", "é", "../up"};
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);

	fake_v2("p", "memory pids cpu");
	for (size_t i = 0; i < PDK_ARRAY_SIZE(bad); i++) {
		_cleanup_free_ char *msg = make_fails(bad[i], &o, &all_limits, 0, EINVAL);

		cr_assert(strstr(msg, "invalid cgroup name") != NULL, "%s", msg);
	}
	_cleanup_free_ char *msg = make_fails(NULL, &o, &all_limits, 0, EINVAL);
	(void)msg;
	cr_assert(!exists("paddock-.."));
}

Test(cgroup, accepts_good_names)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);

	fake_v2("", "memory pids cpu");
	make("Ab.c_d-9", &o, NULL, 0, NULL);
	cr_assert(exists("paddock-Ab.c_d-9"));
	destroy_ok();
	cr_assert(!exists("paddock-Ab.c_d-9"));
}

/* --- parsers --- */

Test(cgroup, self_path_v1_v2_and_comounted)
{
	static const char text[] = "12:name=systemd:/init.scope\n"
				   "4:memory:/process_api/3e3b\n"
				   "3:cpu,cpuacct:/cpu/x\n"
				   "2:pids:/\n"
				   "0::/user.slice/app.scope\n";
	_cleanup_free_ char *mem = NULL;
	_cleanup_free_ char *cpu = NULL;
	_cleanup_free_ char *acct = NULL;
	_cleanup_free_ char *v2 = NULL;
	char *none = NULL;

	cr_assert_eq(pdk__cgroup_self_path(text, "memory", &mem), 0);
	cr_assert_str_eq(mem, "/process_api/3e3b");
	cr_assert_eq(pdk__cgroup_self_path(text, "cpu", &cpu), 0);
	cr_assert_str_eq(cpu, "/cpu/x");
	cr_assert_eq(pdk__cgroup_self_path(text, "cpuacct", &acct), 0);
	cr_assert_str_eq(acct, "/cpu/x");
	cr_assert_eq(pdk__cgroup_self_path(text, NULL, &v2), 0);
	cr_assert_str_eq(v2, "/user.slice/app.scope");
	cr_assert_eq(pdk__cgroup_self_path(text, "freezer", &none), -ENOENT);
	cr_assert_eq(pdk__cgroup_self_path(text, "systemd", &none), -ENOENT);
	cr_assert_eq(pdk__cgroup_self_path("4:memory:/a\n", NULL, &none), -ENOENT);
}

Test(cgroup, mountinfo_separate_and_comounted)
{
	static char text[] =
		"30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
		"31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
		"32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
		"33 30 0:30 /docker/abc /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
		"34 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
		"35 30 0:32 / /other/pids rw - cgroup cgroup rw,pids\n"
		"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
	char *dir = NULL, *root = NULL;
	FILE *f;

	f = fmemopen(text, strlen(text), "r");
	cr_assert_eq(pdk__cgroup_find_mount(f, "/sys/fs/cgroup", "cpuacct", &dir, &root), 0);
	cr_assert_str_eq(dir, "/sys/fs/cgroup/cpuacct");
	cr_assert_str_eq(root, "/");
	free(dir);
	free(root);
	fclose(f);

	f = fmemopen(text, strlen(text), "r");
	cr_assert_eq(pdk__cgroup_find_mount(f, "/sys/fs/cgroup", "memory", &dir, &root), 0);
	cr_assert_str_eq(dir, "/sys/fs/cgroup/memory");
	cr_assert_str_eq(root, "/docker/abc", "a bind-mounted hierarchy keeps its mount root");
	free(dir);
	free(root);
	fclose(f);

	f = fmemopen(text, strlen(text), "r");
	cr_assert_eq(pdk__cgroup_find_mount(f, "/sys/fs/cgroup", "pids", &dir, &root), -ENOENT,
		     "a mount outside the root is not used");
	fclose(f);

	f = fmemopen(text, strlen(text), "r");
	cr_assert_eq(pdk__cgroup_find_mount(f, "/sys/fs/cgroup", NULL, &dir, &root), -ENOENT,
		     "cgroup2 at unified/ is not the v2 root");
	fclose(f);

	static char only_co[] =
		"34 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
		"50 1 0:40 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
	f = fmemopen(only_co, strlen(only_co), "r");
	cr_assert_eq(pdk__cgroup_find_mount(f, "/sys/fs/cgroup", "cpu", &dir, &root), 0);
	cr_assert_str_eq(dir, "/sys/fs/cgroup/cpu,cpuacct");
	free(dir);
	free(root);
	fclose(f);
	f = fmemopen(only_co, strlen(only_co), "r");
	cr_assert_eq(pdk__cgroup_find_mount(f, "/sys/fs/cgroup", NULL, &dir, &root), 0);
	cr_assert_str_eq(dir, "/sys/fs/cgroup");
	free(dir);
	free(root);
	fclose(f);
}

Test(cgroup, keyed_and_single_values)
{
	uint64_t v = 0;

	cr_assert_eq(pdk__cgroup_keyed("low 0\nhigh 1\noom 3\noom_kill 2\n", "oom_kill", &v), 0);
	cr_assert_eq(v, 2);
	cr_assert_eq(pdk__cgroup_keyed("low 0\noom 3\noom_kill 2\n", "oom", &v), 0);
	cr_assert_eq(v, 3);
	cr_assert_eq(pdk__cgroup_keyed("oom_kill_disable 0\nunder_oom 0\n", "oom_kill", &v),
		     -ENOENT);
	cr_assert_eq(pdk__cgroup_keyed("max x\n", "max", &v), -EINVAL);
	cr_assert_eq(pdk__cgroup_single("123456789\n", &v), 0);
	cr_assert_eq(v, 123456789);
	cr_assert_eq(pdk__cgroup_single("", &v), -EINVAL);
	cr_assert_eq(pdk__cgroup_single("max\n", &v), -EINVAL);
	cr_assert(pdk__cgroup_has_word("cpuset cpu io memory pids\n", "cpu"));
	cr_assert(pdk__cgroup_has_word("cpuset cpu io memory pids\n", "pids"));
	cr_assert(!pdk__cgroup_has_word("cpuset io memory\n", "cpu"));
	cr_assert(!pdk__cgroup_has_word("", "cpu"));
}

/* --- v2 on a fake tree --- */

Test(cgroup, v2_writes_limits_and_enables_controllers)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	unsigned down = 77;
	const unsigned all = PDK_CGROUP_MEMORY | PDK_CGROUP_PIDS | PDK_CGROUP_CPU;
	_cleanup_free_ char *want = tpath("user.slice/app.scope/paddock-t1");

	fake_v2("user.slice/app.scope", "cpuset cpu io memory hugetlb pids rdma misc\n");
	self_file("0::/user.slice/app.scope\n");
	struct pdk_cgroup *cg = make("t1", &o, &all_limits, all, &down);

	cr_assert_eq(down, 0);
	cr_assert_eq(pdk_cgroup_version(cg), PDK_CGROUP_V2);
	cr_assert_str_eq(pdk_cgroup_path(cg), want);
	cr_assert_str_eq(slurp("user.slice/app.scope/cgroup.subtree_control"),
			 "+memory +pids +cpu");
	cr_assert_str_eq(slurp("user.slice/app.scope/paddock-t1/memory.max"), "67108864");
	cr_assert_str_eq(slurp("user.slice/app.scope/paddock-t1/memory.swap.max"), "0");
	cr_assert_str_eq(slurp("user.slice/app.scope/paddock-t1/pids.max"), "16");
	cr_assert_str_eq(slurp("user.slice/app.scope/paddock-t1/cpu.max"), "50000 100000");
	destroy_ok();
	cr_assert(!exists("user.slice/app.scope/paddock-t1"));
}

Test(cgroup, v2_cpu_quota_values)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	struct pdk_cgroup_limits two = {.cpu_milli = 2000};
	struct pdk_cgroup_limits tiny = {.cpu_milli = 1};

	fake_v2("", "cpu\n");
	make("c2", &o, &two, PDK_CGROUP_CPU, NULL);
	cr_assert_str_eq(slurp("paddock-c2/cpu.max"), "200000 100000");
	cr_assert_str_eq(slurp("cgroup.subtree_control"), "+cpu");
	destroy_ok();
	make("c3", &o, &tiny, PDK_CGROUP_CPU, NULL);
	cr_assert_str_eq(slurp("paddock-c3/cpu.max"), "1000 100000", "the kernel minimum is 1 ms");
	destroy_ok();
}

Test(cgroup, v2_only_enables_what_is_missing)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);

	fake_v2("", "cpu memory pids\n");
	put("cgroup.subtree_control", "memory pids\n");
	make("t2", &o, &all_limits, PDK_CGROUP_CPU, NULL);
	/* A fake file is overwritten in place, not truncated: look at what was written. */
	const char *got = slurp("cgroup.subtree_control");
	cr_assert(strncmp(got, "+cpu", 4) == 0 && strchr(got, '+') == strrchr(got, '+'), "%s", got);
	destroy_ok();

	put("cgroup.subtree_control", "cpu memory pids\n");
	make("t3", &o, &all_limits, PDK_CGROUP_CPU, NULL);
	cr_assert_str_eq(slurp("cgroup.subtree_control"), "cpu memory pids\n", "nothing to write");
	destroy_ok();
}

Test(cgroup, v2_accounting_only_enables_memory)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	unsigned down = 9;

	fake_v2("", "cpu memory pids\n");
	make("acct", &o, NULL, 0, &down);
	cr_assert_eq(down, 0);
	cr_assert_str_eq(slurp("cgroup.subtree_control"), "+memory");
	cr_assert_str_eq(slurp("paddock-acct/memory.max"), "", "no limit written");
	destroy_ok();
}

Test(cgroup, v2_parent_from_env_and_option)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_free_ char *env_path = tpath("delegated/sub/paddock-e");
	_cleanup_free_ char *opt_path = tpath("opt/paddock-o");

	fake_v2("delegated/sub", "memory pids cpu\n");
	fake_v2("opt", "memory pids cpu\n");
	self_file("0::/not/there\n");
	o.parent = "/delegated//sub/";
	o.parent_from = "$PADDOCK_CGROUP_PARENT";
	struct pdk_cgroup *cg = make("e", &o, &all_limits, 0, NULL);
	cr_assert_str_eq(pdk_cgroup_path(cg), env_path);
	destroy_ok();

	o.parent = "/opt";
	o.parent_from = NULL;
	cg = make("o", &o, &all_limits, 0, NULL);
	cr_assert_str_eq(pdk_cgroup_path(cg), opt_path);
	destroy_ok();
}

Test(cgroup, v2_root_parent)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_free_ char *want = tpath("paddock-r");

	fake_v2("", "memory pids cpu\n");
	self_file("0::/\n");
	struct pdk_cgroup *cg = make("r", &o, &all_limits, 0, NULL);
	cr_assert_str_eq(pdk_cgroup_path(cg), want);
	destroy_ok();
}

Test(cgroup, v2_bad_parent)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);

	fake_v2("", "memory pids cpu\n");
	o.parent = "/a/../../etc";
	o.parent_from = "$PADDOCK_CGROUP_PARENT";
	_cleanup_free_ char *m1 = make_fails("b", &o, &all_limits, PDK_CGROUP_MEMORY, EINVAL);
	cr_assert(
		strstr(m1, "invalid cgroup parent '/a/../../etc' (from $PADDOCK_CGROUP_PARENT)") !=
			NULL,
		"%s", m1);
	o.parent = "relative";
	_cleanup_free_ char *m2 = make_fails("b", &o, &all_limits, PDK_CGROUP_MEMORY, EINVAL);
	cr_assert(strstr(m2, "must be an absolute path") != NULL, "%s", m2);

	o.parent = NULL;
	self_file("0::/../../outside\n");
	_cleanup_free_ char *m3 = make_fails("b", &o, &all_limits, PDK_CGROUP_MEMORY, EINVAL);
	cr_assert(strstr(m3, "outside this cgroup namespace") != NULL, "%s", m3);
}

Test(cgroup, v2_parent_missing)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_free_ char *want = NULL;

	fake_v2("", "cpu memory pids\n");
	o.parent = "/nope";
	o.parent_from = "$PADDOCK_CGROUP_PARENT";
	want = pdk_xasprintf(
		"the parent cgroup '%s/nope' (from $PADDOCK_CGROUP_PARENT) does not exist", g_tmp);
	_cleanup_free_ char *msg = make_fails("m", &o, &all_limits, PDK_CGROUP_MEMORY, ENOENT);
	cr_assert(strstr(msg, want) != NULL, "%s", msg);

	unsigned down = 0;
	struct pdk_cgroup *cg = make("m", &o, &all_limits, 0, &down);
	cr_assert_null(pdk_cgroup_path(cg), "best effort: an object without directories");
	cr_assert_eq(down, PDK_CGROUP_MEMORY | PDK_CGROUP_PIDS | PDK_CGROUP_CPU);
	destroy_ok();
}

Test(cgroup, parent_is_relative_to_the_mount_root)
{
	struct pdk__cgroup_req req = {.self_file = g_self};
	_cleanup_error_ struct pdk_error *err = NULL;
	char *out = NULL;

	self_file("4:memory:/docker/abc/sub\n3:pids:/docker/abc\n2:cpu:/docker/abcd\n");
	cr_assert_eq(pdk__cgroup_parent(&req, "memory", "/docker/abc", &out, &err), 0);
	cr_assert_str_eq(out, "/sub");
	free(out);
	cr_assert_eq(pdk__cgroup_parent(&req, "pids", "/docker/abc", &out, &err), 0);
	cr_assert_str_eq(out, "/");
	free(out);
	cr_assert_eq(pdk__cgroup_parent(&req, "cpu", "/docker/abc", &out, &err), 0);
	cr_assert_str_eq(out, "/docker/abcd", "only a whole-component prefix is stripped");
	free(out);
	cr_assert_eq(pdk__cgroup_parent(&req, "freezer", "/", &out, &err), -ENOENT);
	cr_assert(strstr(err->msg, "no line for the cgroup v1 'freezer' controller") != NULL, "%s",
		  err->msg);
	free(req.self_text); /* read once, at the first lookup */
}

Test(cgroup, v2_missing_controller_downgrades)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	unsigned down = 0;

	fake_v2("", "cpuset cpu io memory\n");
	make("d", &o, &all_limits, PDK_CGROUP_MEMORY | PDK_CGROUP_CPU, &down);
	cr_assert_eq(down, PDK_CGROUP_PIDS);
	cr_assert_str_eq(slurp("cgroup.subtree_control"), "+memory +cpu");
	cr_assert_str_eq(slurp("paddock-d/pids.max"), "", "no pids limit written");
	cr_assert_str_eq(slurp("paddock-d/memory.max"), "67108864");
	destroy_ok();
}

Test(cgroup, v2_missing_controller_required_fails)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);

	fake_v2("", "cpuset cpu io memory\n");
	_cleanup_free_ char *msg = make_fails("d", &o, &all_limits, PDK_CGROUP_PIDS, ENOTSUP);
	cr_assert(strstr(msg, "the pids limit needs the 'pids' controller") != NULL, "%s", msg);
	cr_assert(strstr(msg, "cgroup.controllers is 'cpuset cpu io memory'") != NULL, "%s", msg);
	cr_assert(strstr(msg, "PADDOCK_CGROUP_PARENT") != NULL, "%s", msg);
	cr_assert(!exists("paddock-d"), "nothing left behind");
}

Test(cgroup, v2_limit_write_failure_cleans_up)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_free_ char *cpu_max = tpath("cpu.max");

	fake_v2("", "cpu memory pids\n");
	cr_assert_eq(unlink(cpu_max), 0); /* the kernel would have it: make the write fail */
	_cleanup_free_ char *msg = make_fails("f", &o, &all_limits, PDK_CGROUP_CPU, ENOENT);
	cr_assert(strstr(msg, "paddock-f/cpu.max") != NULL, "the error names the file: %s", msg);
	cr_assert(!exists("paddock-f"), "the half-made cgroup was removed");

	unsigned down = 0;
	make("g", &o, &all_limits, PDK_CGROUP_MEMORY, &down);
	cr_assert_eq(down, PDK_CGROUP_CPU, "a best-effort limit that fails is downgraded");
	destroy_ok();
}

Test(cgroup, v2_without_swap_and_peak_files)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	struct pdk_cgroup_stats st;
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *swap = tpath("memory.swap.max");
	_cleanup_free_ char *peak = tpath("memory.peak");

	fake_v2("", "cpu memory pids\n");
	cr_assert_eq(unlink(swap), 0);
	cr_assert_eq(unlink(peak), 0);
	struct pdk_cgroup *cg = make("old", &o, &all_limits, PDK_CGROUP_MEMORY, NULL);
	cr_assert_str_eq(slurp("paddock-old/memory.max"), "67108864");
	put("paddock-old/memory.events", "oom 1\noom_kill 1\n");
	cr_assert_eq(pdk_cgroup_stats(cg, &st, &err), 0);
	cr_assert_eq(st.memory_peak, 0, "unknown on kernels without memory.peak");
	cr_assert_eq(st.oom_kills, 1);
	destroy_ok();
}

/*
 * The OOM counter is read at every command's start through a descriptor kept
 * from the first read: each read sees the file as it is now, and the
 * descriptor goes with the cgroup.
 */
Test(cgroup, oom_counter_read_again_through_kept_descriptor)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	int before = pdk_test_open_fds();

	fake_v2("", "cpu memory pids\n");
	struct pdk_cgroup *cg = make("oom", &o, &all_limits, PDK_CGROUP_MEMORY, NULL);
	put("paddock-oom/memory.events", "low 0\noom 0\noom_kill 0\n");
	cr_assert_eq(pdk_cgroup_oom_kills(cg), 0);
	cr_assert_eq(pdk_test_open_fds(), before + 1,
		     "the counter's file stays open after its first read");
	put("paddock-oom/memory.events",
	    "low 0\noom 2\noom_kill 2\n"); /* the same file, rewritten */
	cr_assert_eq(pdk_cgroup_oom_kills(cg), 2, "the second read sees the new count");
	put("paddock-oom/memory.events", "low 0\noom 3\noom_kill 3\noom_group_kill 0\n");
	cr_assert_eq(pdk_cgroup_oom_kills(cg), 3);
	cr_assert_eq(pdk_test_open_fds(), before + 1, "one descriptor, not one per read");
	destroy_ok();
	cr_assert_eq(pdk_test_open_fds(), before, "the descriptor is closed with the cgroup");
}

/* The totals of v2_stats_from_fixtures' files. */
static void fixture_totals(const struct pdk_cgroup_stats *st)
{
	cr_assert_eq(st->memory_peak, 73400320);
	cr_assert_eq(st->oom_kills, 2);
	cr_assert_eq(st->pids_denied, 5);
	cr_assert_eq(st->cpu_usage_ns, 2500123000ULL);
}

Test(cgroup, v2_stats_from_fixtures)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	struct pdk_cgroup_stats st;
	_cleanup_error_ struct pdk_error *err = NULL;

	fake_v2("", "cpu memory pids\n");
	struct pdk_cgroup *cg = make("s", &o, &all_limits, 0, NULL);
	put("paddock-s/memory.peak", "73400320\n");
	put("paddock-s/memory.events",
	    "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n");
	put("paddock-s/pids.events", "max 5\n");
	put("paddock-s/cpu.stat", "usage_usec 2500123\nuser_usec 2000000\nsystem_usec 500123\n");
	put("paddock-s/memory.current", "1048576\n");
	put("paddock-s/pids.current", "3\n");
	cr_assert_eq(pdk_cgroup_stats(cg, &st, &err), 0);
	fixture_totals(&st);
	cr_assert_eq(st.memory_current, 1048576);
	cr_assert_eq(st.pids_current, 3);
	/* A finished sandbox's: the same totals; what it holds now is not read (0). */
	memset(&st, 0xff, sizeof(st));
	pdk_cgroup_end_stats(cg, &st);
	fixture_totals(&st);
	cr_assert_eq(st.memory_current, 0);
	cr_assert_eq(st.pids_current, 0);
	destroy_ok();
}

/* A stats file longer than the one read's buffer is read whole: its last key is found. */
Test(cgroup, v2_stats_of_a_long_file)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	struct pdk_cgroup_stats st;
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *text = NULL;
	size_t n = 0;

	fake_v2("", "cpu memory pids\n");
	struct pdk_cgroup *cg = make("l", &o, &all_limits, 0, NULL);
	text = pdk_xmalloc(8192);
	while (n < 6000)
		n += (size_t)snprintf(text + n, 8192 - n, "padding_%zu 0\n", n);
	(void)snprintf(text + n, 8192 - n, "usage_usec 42\n");
	put("paddock-l/cpu.stat", text);
	cr_assert_eq(pdk_cgroup_stats(cg, &st, &err), 0);
	cr_assert_eq(st.cpu_usage_ns, 42000ULL);
	destroy_ok();
}

Test(cgroup, v2_attach_writes_procs)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_error_ struct pdk_error *err = NULL;

	fake_v2("", "cpu memory pids\n");
	struct pdk_cgroup *cg = make("a", &o, &all_limits, 0, NULL);
	cr_assert_eq(pdk_cgroup_attach(cg, 424242, &err), 0);
	cr_assert_str_eq(slurp("paddock-a/cgroup.procs"), "424242");
	put("paddock-a/cgroup.procs", ""); /* it is no real pid: keep destroy from signalling it */
	cr_assert_lt(pdk_cgroup_attach(cg, 0, &err), 0);
	destroy_ok();
}

/* Without cgroup.kill: freeze, SIGKILL what cgroup.procs lists, thaw. */
Test(cgroup, v2_kill_fallback_freezes_and_kills)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *kill_file = tpath("cgroup.kill");
	char pid[32];
	int status = 0;

	fake_v2("", "cpu memory pids\n");
	cr_assert_eq(unlink(kill_file), 0);
	struct pdk_cgroup *cg = make("k", &o, NULL, 0, NULL);
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	(void)snprintf(pid, sizeof(pid), "%d\n", (int)child);
	put("paddock-k/cgroup.procs", pid);
	/* A fake cgroup.procs never empties, so the loop gives up after about 1 s. */
	cr_assert_eq(pdk_cgroup_kill(cg, &err), -EBUSY);
	cr_assert(strstr(err->msg, "tasks are still in cgroup") != NULL, "%s", err->msg);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	cr_assert_str_eq(slurp("paddock-k/cgroup.freeze"), "0", "thawed after the kill");
	put("paddock-k/cgroup.procs", "");
	destroy_ok();
}

/* --- the helpful errors --- */

/*
 * Run new() as an unprivileged user (nobody, when we are root) in a forked
 * child, against a tree where `locked` (relative) is made 0555. The child
 * exits 0 when the outcome matches: with `required`, a failure whose message
 * is `want` (exact, when `exact`; else a substring); without, a valid object
 * with every limit downgraded on which every call is a no-op.
 */
static void unprivileged_child(struct pdk_cgroup_opts *o, unsigned required, const char *want,
			       bool exact)
{
	struct pdk_error *err = NULL;
	struct pdk_cgroup_stats st;
	unsigned down = 0;
	struct pdk_cgroup *cg;

	if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
			       setresuid(65534, 65534, 65534) < 0))
		_exit(10);
	cg = pdk_cgroup_new("x", o, &all_limits, required, &down, &err);
	if (required != 0) {
		if (cg != NULL || err == NULL || err->status != EACCES)
			_exit(11);
		if (exact ? strcmp(err->msg, want) != 0 : strstr(err->msg, want) == NULL) {
			fprintf(stderr, "got:  %s\nwant: %s\n", err->msg, want);
			_exit(12);
		}
		_exit(0);
	}
	if (cg == NULL || down != (PDK_CGROUP_MEMORY | PDK_CGROUP_PIDS | PDK_CGROUP_CPU))
		_exit(13);
	if (pdk_cgroup_path(cg) != NULL || pdk_cgroup_attach(cg, getpid(), &err) != 0 ||
	    pdk_cgroup_stats(cg, &st, &err) != 0 || pdk_cgroup_kill(cg, &err) != 0 ||
	    pdk_cgroup_destroy(cg, &err) != 0)
		_exit(14);
	_exit(0);
}

static void run_unprivileged(struct pdk_cgroup_opts *o, const char *locked, unsigned required,
			     const char *want, bool exact)
{
	_cleanup_free_ char *dir = tpath(locked);
	int status = 0;
	pid_t pid;

	cr_assert_eq(chmod(dir, 0555), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		unprivileged_child(o, required, want, exact);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(chmod(dir, 0755), 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
}

static void v2_locked_tree(struct pdk_cgroup_opts *o)
{
	fake_v2("locked", "cpu memory pids\n");
	put("locked/cgroup.subtree_control", "cpu memory pids\n"); /* delegated, enabled */
	o->parent = "/locked";
}

Test(cgroup, eacces_says_how_to_fix)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_free_ char *want = pdk_xasprintf(
		"cannot create cgroup '%s/locked/paddock-x': Permission denied; the memory limit needs a delegated cgroup: run as root, or delegate a cgroup to this user and set PADDOCK_CGROUP_PARENT (see docs/internals/cgroup.md), or mark the limit best_effort in the profile",
		g_tmp);

	v2_locked_tree(&o);
	run_unprivileged(&o, "locked", PDK_CGROUP_MEMORY, want, true);
	cr_assert(!exists("locked/paddock-x"));
}

Test(cgroup, eacces_best_effort_gives_empty_object)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);

	v2_locked_tree(&o);
	run_unprivileged(&o, "locked", 0, NULL, false);
	cr_assert(!exists("locked/paddock-x"));
}

Test(cgroup, eacces_names_the_limits_that_need_it)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);

	v2_locked_tree(&o);
	run_unprivileged(&o, "locked", PDK_CGROUP_MEMORY | PDK_CGROUP_PIDS,
			 "the memory and pids limits need a delegated cgroup", false);
}

Test(cgroup, v2_subtree_control_eacces_explained)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_free_ char *sc = tpath("locked/cgroup.subtree_control");

	fake_v2("locked", "cpu memory pids\n");
	cr_assert_eq(chmod(sc, 0444), 0);
	o.parent = "/locked";
	run_unprivileged(&o, "locked", PDK_CGROUP_CPU, "cannot enable '+memory +pids +cpu' in '",
			 false);
	run_unprivileged(
		&o, "locked", PDK_CGROUP_CPU,
		"/locked/cgroup.subtree_control': Permission denied; the cpu limit needs a delegated cgroup",
		false);
}

Test(cgroup, no_cgroupfs_at_all)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_AUTO);
	unsigned down = 0;

	_cleanup_free_ char *msg = make_fails("n", &o, &all_limits, PDK_CGROUP_PIDS, ENOENT);
	cr_assert(strstr(msg, "no cgroup file system at") != NULL, "%s", msg);
	cr_assert(strstr(msg, "the pids limit cannot be applied") != NULL, "%s", msg);
	struct pdk_cgroup *cg = make("n", &o, &all_limits, 0, &down);
	cr_assert_eq(down, PDK_CGROUP_MEMORY | PDK_CGROUP_PIDS | PDK_CGROUP_CPU);
	cr_assert_eq(pdk_cgroup_version(cg), PDK_CGROUP_AUTO);
	cr_assert_null(pdk_cgroup_path(cg));
	destroy_ok();
}

Test(cgroup, existing_cgroup_is_not_reused)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);

	fake_v2("", "cpu memory pids\n");
	mkdirs("paddock-dup");
	put("paddock-dup/marker", "x");
	_cleanup_free_ char *msg = make_fails("dup", &o, &all_limits, PDK_CGROUP_MEMORY, EEXIST);
	cr_assert(strstr(msg, "already exists") != NULL, "%s", msg);
	cr_assert_str_eq(slurp("paddock-dup/marker"), "x", "someone else's cgroup is left alone");
}

/* --- v1 on a fake tree --- */

static const char *const v1_mem_files[] = {
	"cgroup.procs",
	"memory.limit_in_bytes",
	"memory.memsw.limit_in_bytes",
	"memory.max_usage_in_bytes",
	"memory.oom_control",
	NULL,
};
static const char *const v1_pids_files[] = {"cgroup.procs", "pids.max", "pids.events", NULL};
static const char *const v1_cpu_files[] = {"cgroup.procs", "cpu.cfs_period_us", "cpu.cfs_quota_us",
					   NULL};
static const char *const v1_acct_files[] = {"cgroup.procs", "cpuacct.usage", NULL};
static const char *const v1_freezer_files[] = {"cgroup.procs", "freezer.state", NULL};

static void fake_v1_dir(const char *dir, const char *const *files)
{
	mkdirs(dir);
	put_files(dir, files);
}

/* memory at /a, pids at /, cpu+cpuacct co-mounted at /b, freezer at /. */
static void fake_v1_comounted(void)
{
	fake_v1_dir("memory/a", v1_mem_files);
	fake_v1_dir("pids", v1_pids_files);
	fake_v1_dir("cpu,cpuacct/b", v1_cpu_files);
	put_files("cpu,cpuacct/b", v1_acct_files);
	fake_v1_dir("freezer", v1_freezer_files);
	self_file("9:freezer:/\n4:memory:/a\n3:pids:/\n2:cpu,cpuacct:/b\n1:name=systemd:/\n0::/\n");
}

Test(cgroup, v1_comounted_limits_stats_destroy)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_AUTO);
	struct pdk_cgroup_stats st;
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *mem = tpath("memory/a/paddock-v");
	unsigned down = 5;

	fake_v1_comounted();
	struct pdk_cgroup *cg = make("v", &o, &all_limits,
				     PDK_CGROUP_MEMORY | PDK_CGROUP_PIDS | PDK_CGROUP_CPU, &down);
	cr_assert_eq(down, 0);
	cr_assert_eq(pdk_cgroup_version(cg), PDK_CGROUP_V1, "detected from the controller dirs");
	cr_assert_str_eq(pdk_cgroup_path(cg), mem);
	cr_assert_eq(cg->n_dirs, 4, "cpu and cpuacct share one directory");
	cr_assert_str_eq(slurp("memory/a/paddock-v/memory.limit_in_bytes"), "67108864");
	cr_assert_str_eq(slurp("memory/a/paddock-v/memory.memsw.limit_in_bytes"), "67108864");
	cr_assert_str_eq(slurp("pids/paddock-v/pids.max"), "16");
	cr_assert_str_eq(slurp("cpu,cpuacct/b/paddock-v/cpu.cfs_period_us"), "100000");
	cr_assert_str_eq(slurp("cpu,cpuacct/b/paddock-v/cpu.cfs_quota_us"), "50000");
	cr_assert(exists("freezer/paddock-v"));

	put("memory/a/paddock-v/memory.max_usage_in_bytes", "4194304\n");
	put("memory/a/paddock-v/memory.oom_control",
	    "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
	put("pids/paddock-v/pids.events", "max 7\n");
	put("cpu,cpuacct/b/paddock-v/cpuacct.usage", "987654321\n");
	cr_assert_eq(pdk_cgroup_stats(cg, &st, &err), 0);
	cr_assert_eq(st.memory_peak, 4194304);
	cr_assert_eq(st.oom_kills, 3);
	cr_assert_eq(st.pids_denied, 7);
	cr_assert_eq(st.cpu_usage_ns, 987654321);

	cr_assert_eq(pdk_cgroup_attach(cg, 424242, &err), 0);
	cr_assert_str_eq(slurp("memory/a/paddock-v/cgroup.procs"), "424242");
	cr_assert_str_eq(slurp("pids/paddock-v/cgroup.procs"), "424242");
	cr_assert_str_eq(slurp("cpu,cpuacct/b/paddock-v/cgroup.procs"), "424242");
	cr_assert_str_eq(slurp("freezer/paddock-v/cgroup.procs"), "424242");
	for (size_t i = 0; i < cg->n_dirs;
	     i++) { /* not a real pid: keep destroy from signalling it */
		_cleanup_free_ char *procs = pdk__cgroup_join(cg->dirs[i].path, "cgroup.procs");

		put_abs(procs, "");
	}
	destroy_ok();
	cr_assert(!exists("memory/a/paddock-v"));
	cr_assert(!exists("pids/paddock-v"));
	cr_assert(!exists("cpu,cpuacct/b/paddock-v"));
	cr_assert(!exists("freezer/paddock-v"));
}

Test(cgroup, v1_separate_cpu_cpuacct_without_memsw)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V1);
	static const char *const mem_no_swap[] = {"cgroup.procs", "memory.limit_in_bytes", NULL};

	fake_v1_dir("memory", mem_no_swap);
	fake_v1_dir("cpu", v1_cpu_files);
	fake_v1_dir("cpuacct", v1_acct_files);
	self_file("4:memory:/\n2:cpuacct:/\n1:cpu:/\n");
	struct pdk_cgroup *cg =
		make("s", &o, &all_limits, PDK_CGROUP_MEMORY | PDK_CGROUP_CPU, NULL);
	cr_assert_eq(cg->n_dirs, 3, "memory, cpu, cpuacct (no freezer, no pids)");
	cr_assert_str_eq(slurp("memory/paddock-s/memory.limit_in_bytes"), "67108864");
	cr_assert(!exists("memory/paddock-s/memory.memsw.limit_in_bytes"));
	cr_assert_str_eq(slurp("cpu/paddock-s/cpu.cfs_quota_us"), "50000");
	cr_assert(exists("cpuacct/paddock-s"));
	destroy_ok();
}

/*
 * The caller's copy of the mount table is the one read (opts.mountinfo): the
 * memory hierarchy here is at ROOT/mem-hier, which neither this process's
 * own table nor a probe of ROOT/memory would find.
 */
Test(cgroup, v1_hierarchies_from_the_callers_mount_table)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_AUTO);
	static const char *const mem_no_swap[] = {"cgroup.procs", "memory.limit_in_bytes", NULL};
	_cleanup_free_ char *table = NULL;
	struct pdk_cgroup *cg;

	fake_v1_dir("mem-hier", mem_no_swap);
	self_file("4:memory:/\n");
	table = pdk_xasprintf("25 1 254:0 / / rw - ext4 /dev/root rw\n"
			      "30 25 0:26 / %s/mem-hier rw,nosuid - cgroup cgroup rw,memory\n",
			      g_tmp);
	o.mountinfo = table;
	cg = make("m", &o, &(struct pdk_cgroup_limits){.memory = 64 * MiB}, PDK_CGROUP_MEMORY,
		  NULL);
	cr_assert_eq(pdk_cgroup_version(cg), PDK_CGROUP_V1);
	cr_assert_eq(cg->n_dirs, 1);
	cr_assert_str_eq(slurp("mem-hier/paddock-m/memory.limit_in_bytes"), "67108864");
	destroy_ok();
}

Test(cgroup, v1_missing_pids_downgrades_or_fails_cleanly)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V1);
	unsigned down = 0;

	fake_v1_dir("memory/a", v1_mem_files);
	fake_v1_dir("freezer", v1_freezer_files);
	self_file("9:freezer:/\n4:memory:/a\n");
	make("p", &o, &all_limits, PDK_CGROUP_MEMORY, &down);
	cr_assert_eq(down, PDK_CGROUP_PIDS | PDK_CGROUP_CPU);
	cr_assert_str_eq(slurp("memory/a/paddock-p/memory.limit_in_bytes"), "67108864");
	destroy_ok();

	_cleanup_free_ char *msg =
		make_fails("q", &o, &all_limits, PDK_CGROUP_MEMORY | PDK_CGROUP_PIDS, ENOENT);
	cr_assert(
		strstr(msg,
		       "the pids limit needs the cgroup v1 'pids' controller, which is not mounted") !=
			NULL,
		"%s", msg);
	cr_assert(!exists("memory/a/paddock-q"), "memory dir made before the failure was removed");
	cr_assert(!exists("freezer/paddock-q"));
}

Test(cgroup, v1_eacces_on_memory_hierarchy)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V1);
	_cleanup_free_ char *want = NULL;

	fake_v1_dir("memory/a", v1_mem_files);
	fake_v1_dir("pids", v1_pids_files);
	self_file("4:memory:/a\n3:pids:/\n");
	want = pdk_xasprintf(
		"cannot create cgroup '%s/memory/a/paddock-x': Permission denied; the memory limit needs a delegated cgroup",
		g_tmp);
	run_unprivileged(&o, "memory/a", PDK_CGROUP_MEMORY, want, false);
	cr_assert(!exists("memory/a/paddock-x"));
}

/* --- real cgroup v1 (root on a v1 machine) --- */

static struct pdk_cgroup *real_v1_or_skip(const char *tag)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *name = pdk_xasprintf("t-%s-%d", tag, (int)getpid());
	struct pdk_cgroup_opts o = {0};
	struct pdk_cgroup *cg;
	unsigned down = 0;

	if (geteuid() != 0)
		SKIP("real cgroup v1 tests need root");
	if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) != 0 ||
	    access("/sys/fs/cgroup/pids", F_OK) != 0)
		SKIP("real cgroup v1 tests need the v1 memory and pids hierarchies");
	cg = pdk_cgroup_new(name, &o, &all_limits,
			    PDK_CGROUP_MEMORY | PDK_CGROUP_PIDS | PDK_CGROUP_CPU, &down, &err);
	cr_assert_not_null(cg, "%s", err ? err->msg : "");
	g_cg = cg;
	cr_assert_eq(pdk_cgroup_version(cg), PDK_CGROUP_V1);
	cr_assert_eq(down, 0);
	return cg;
}

static const char *dir_of(struct pdk_cgroup *cg, enum pdk__cgroup_v1_ctrl c)
{
	for (size_t i = 0; i < cg->n_dirs; i++)
		if (cg->dirs[i].v1_ctrls & (1U << c))
			return cg->dirs[i].path;
	cr_assert_fail("no directory for v1 controller %d", (int)c);
	return NULL;
}

/* Fork a child that waits for a byte on a pipe, then runs fn. */
static pid_t spawn_waiting(void (*fn)(int), int *go, int report)
{
	int p[2];
	pid_t pid;
	char c;

	cr_assert_eq(pipe(p), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(20);
		fn(report);
		_exit(0);
	}
	close(p[0]);
	*go = p[1];
	return pid;
}

static void hog_memory(int report)
{
	size_t n = 200 * MiB;
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)report;
	if (p == MAP_FAILED)
		_exit(21);
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	_exit(22); /* should have been OOM-killed */
}

static void in_cgroup(pid_t pid, const char *leaf)
{
	char path[64];

	(void)snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	cr_assert(strstr(slurp_abs(path), leaf) != NULL, "%s: %s", path, slurp_abs(path));
}

Test(cgroup, real_v1_memory_limit_oom_kills)
{
	struct pdk_cgroup *cg = real_v1_or_skip("oom");
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_cgroup_stats st;
	int go = -1, status = 0;
	pid_t pid = spawn_waiting(hog_memory, &go, -1);

	cr_assert_eq(pdk_cgroup_attach(cg, pid, &err), 0, "%s", err ? err->msg : "");
	in_cgroup(pid, cg->leaf);
	cr_assert_eq(write(go, "g", 1), 1);
	close(go);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
	cr_assert_eq(pdk_cgroup_stats(cg, &st, &err), 0);
	cr_assert_geq(st.oom_kills, 1);
	cr_assert_gt(st.memory_peak, 0);
	cr_assert_leq(st.memory_peak, 64 * MiB);
	_cleanup_free_ char *quota = pdk__cgroup_join(dir_of(cg, PDK__V1_CPU), "cpu.cfs_quota_us");
	cr_assert_str_eq(slurp_abs(quota), "50000\n");
	destroy_ok();
}

static void fork_until_refused(int report)
{
	int refused = 0;

	for (int i = 0; i < 40; i++) {
		pid_t p = fork();

		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0 && errno == EAGAIN)
			refused++;
	}
	if (write(report, &refused, sizeof(refused)) != sizeof(refused))
		_exit(23);
	pause();
}

Test(cgroup, real_v1_pids_limit_kill_and_destroy)
{
	struct pdk_cgroup *cg = real_v1_or_skip("pids");
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_cgroup_stats st;
	char *paths[PDK__V1_COUNT] = {0};
	size_t n_dirs = cg->n_dirs;
	int rep[2], go = -1, status = 0, refused = 0;

	cr_assert_eq(pipe(rep), 0);
	pid_t pid = spawn_waiting(fork_until_refused, &go, rep[1]);
	cr_assert_eq(pdk_cgroup_attach(cg, pid, &err), 0, "%s", err ? err->msg : "");
	in_cgroup(pid, cg->leaf);
	cr_assert_eq(write(go, "g", 1), 1);
	cr_assert_eq(read(rep[0], &refused, sizeof(refused)), sizeof(refused));
	cr_assert_geq(refused, 1, "pids.max 16 refuses some of 40 forks");
	cr_assert_eq(pdk_cgroup_stats(cg, &st, &err), 0);
	cr_assert_geq(st.pids_denied, 1);

	cr_assert_eq(pdk_cgroup_kill(cg, &err), 0, "%s", err ? err->msg : "");
	for (size_t i = 0; i < cg->n_dirs; i++) {
		_cleanup_free_ char *procs = pdk__cgroup_join(cg->dirs[i].path, "cgroup.procs");

		cr_assert_str_eq(slurp_abs(procs), "", "%s emptied", procs);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	for (size_t i = 0; i < n_dirs; i++)
		paths[i] = pdk_xstrdup(cg->dirs[i].path);
	cr_assert_geq(n_dirs, 4, "memory, pids, cpu, cpuacct (+ freezer)");
	destroy_ok();
	for (size_t i = 0; i < n_dirs; i++) {
		cr_assert_neq(access(paths[i], F_OK), 0, "%s removed", paths[i]);
		free(paths[i]);
	}
}

/* destroy() kills what is still running and removes the directories. */
/*
 * A task attached to g_cg, then g_cg destroyed with no kill first: the removal
 * is refused while the task lives, the kill loop ends it, and the directory
 * at `path` goes.
 */
static void destroy_kills_a_survivor(const char *path)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int status = 0;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	cr_assert_eq(pdk_cgroup_attach(g_cg, pid, &err), 0, "%s", err ? err->msg : "");
	in_cgroup(pid, g_cg->leaf);
	destroy_ok();
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %d", status);
	cr_assert_neq(access(path, F_OK), 0, "%s removed", path);
}

Test(cgroup, real_v1_destroy_kills_survivors)
{
	struct pdk_cgroup *cg = real_v1_or_skip("destroy");
	_cleanup_free_ char *mem = pdk_xstrdup(pdk_cgroup_path(cg));

	destroy_kills_a_survivor(mem);
}

/* --- real cgroup v2: the controller-less hybrid hierarchy of a v1 machine --- */

/* Burn 50 ms of CPU time (not wall time: the machine may be busy), then wait. */
static void spin_then_wait(int report)
{
	struct timespec ts = {0};

	(void)report;
	do
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	while (ts.tv_sec == 0 && ts.tv_nsec < 50 * 1000000L);
	pause();
}

/*
 * /sys/fs/cgroup/unified has no controllers, but it is a real cgroup2: it
 * has cgroup.kill, cgroup.freeze and cpu.stat. That is enough to run the v2
 * backend's attach, accounting, kill and removal against the kernel.
 */
Test(cgroup, real_v2_unified_attach_kill_destroy)
{
	static const char unified[] = "/sys/fs/cgroup/unified";
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *name = pdk_xasprintf("t-v2-%d", (int)getpid());
	struct pdk_cgroup_opts o = {.root = unified, .version = PDK_CGROUP_V2};
	struct pdk_cgroup_limits mem = {.memory = 64 * MiB};
	struct pdk_cgroup_stats st;
	struct statfs sfs;
	unsigned down = 0;
	int go = -1, status = 0;

	if (geteuid() != 0)
		SKIP("real cgroup v2 test needs root");
	if (statfs(unified, &sfs) != 0 || sfs.f_type != CGROUP2_SUPER_MAGIC)
		SKIP("no cgroup2 mounted at %s (a v1 machine's hybrid hierarchy)", unified);
	cr_assert_null(pdk_cgroup_new(name, &o, &mem, PDK_CGROUP_MEMORY, NULL, &err));
	cr_assert(strstr(err->msg, "the memory limit needs the 'memory' controller") != NULL, "%s",
		  err->msg);
	pdk_error_free(&err);

	struct pdk_cgroup *cg = make(name, &o, &mem, 0, &down);
	cr_assert_eq(down, PDK_CGROUP_MEMORY);
	_cleanup_free_ char *path = pdk_xstrdup(pdk_cgroup_path(cg));
	pid_t pid = spawn_waiting(spin_then_wait, &go, -1);
	cr_assert_eq(pdk_cgroup_attach(cg, pid, &err), 0, "%s", err ? err->msg : "");
	in_cgroup(pid, cg->leaf);
	cr_assert_eq(write(go, "g", 1), 1);
	close(go);
	for (int i = 0; i < 500; i++) {
		cr_assert_eq(pdk_cgroup_stats(cg, &st, &err), 0);
		if (st.cpu_usage_ns >= 40 * 1000000ULL)
			break;
		usleep(10000);
	}
	cr_assert_geq(st.cpu_usage_ns, 40 * 1000000ULL, "cpu.stat usage_usec counts the spin");
	cr_assert_eq(pdk_cgroup_kill(cg, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	destroy_ok();
	cr_assert_neq(access(path, F_OK), 0, "%s removed", path);
}

/*
 * Destroy without a kill first, on the kernel's cgroup2: the removal is tried
 * at once (the usual end, nothing left), is refused while the task lives,
 * and the kill loop then ends it and removes the directory. Then an empty
 * one goes at the first try.
 */
Test(cgroup, real_v2_unified_destroy_kills_survivors_and_removes_empty)
{
	static const char unified[] = "/sys/fs/cgroup/unified";
	_cleanup_free_ char *name = pdk_xasprintf("t-v2d-%d", (int)getpid());
	struct pdk_cgroup_opts o = {.root = unified, .version = PDK_CGROUP_V2};
	struct statfs sfs;

	if (geteuid() != 0)
		SKIP("real cgroup v2 test needs root");
	if (statfs(unified, &sfs) != 0 || sfs.f_type != CGROUP2_SUPER_MAGIC)
		SKIP("no cgroup2 mounted at %s (a v1 machine's hybrid hierarchy)", unified);
	struct pdk_cgroup *cg = make(name, &o, NULL, 0, NULL);
	_cleanup_free_ char *path = pdk_xstrdup(pdk_cgroup_path(cg));

	destroy_kills_a_survivor(path);
	cg = make(name, &o, NULL, 0, NULL);
	cr_assert_eq(access(path, F_OK), 0, "%s made again", path);
	destroy_ok();
	cr_assert_neq(access(path, F_OK), 0, "the empty %s removed", path);
}

/* --- freeze / thaw (pause and resume of a service-mode sandbox) --- */

Test(cgroup, v2_freeze_waits_for_frozen_and_thaws)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_error_ struct pdk_error *err = NULL;

	fake_v2("", "memory pids cpu\n");
	struct pdk_cgroup *cg = make("fz", &o, &all_limits, 0, NULL);

	put("paddock-fz/cgroup.procs", "");
	/* The kernel has not reported "frozen 1": the freeze times out and is undone. */
	put("paddock-fz/cgroup.events", "populated 1\nfrozen 0\n");
	cr_assert_eq(pdk_cgroup_freeze(cg, true, 5, &err), -EBUSY);
	cr_assert(strstr(err->msg, "did not freeze") != NULL, "%s", err->msg);
	cr_assert_str_eq(slurp("paddock-fz/cgroup.freeze"), "0", "thawed again after the timeout");
	pdk_error_free(&err);
	/* Once cgroup.events says so, the freeze succeeds and stays. */
	put("paddock-fz/cgroup.events", "populated 1\nfrozen 1\n");
	cr_assert_eq(pdk_cgroup_freeze(cg, true, 5, &err), 0, "%s", err ? err->msg : "");
	cr_assert_str_eq(slurp("paddock-fz/cgroup.freeze"), "1");
	cr_assert_eq(pdk_cgroup_freeze(cg, false, 5, &err), 0);
	cr_assert_str_eq(slurp("paddock-fz/cgroup.freeze"), "0");
	destroy_ok();
}

Test(cgroup, v2_freeze_without_freezer_is_enotsup)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *f = NULL;

	fake_v2("", "memory pids cpu\n");
	struct pdk_cgroup *cg = make("nf", &o, &all_limits, 0, NULL);

	f = tpath("paddock-nf/cgroup.freeze");
	cr_assert_eq(unlink(f), 0);
	put("paddock-nf/cgroup.procs", "");
	cr_assert_eq(pdk_cgroup_freeze(cg, true, 5, &err), -ENOTSUP);
	cr_assert(strstr(err->msg, "no freezer") != NULL, "%s", err->msg);
	destroy_ok();
}

Test(cgroup, v2_stats_current_values)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_cgroup_stats st;

	fake_v2("", "memory pids cpu\n");
	struct pdk_cgroup *cg = make("cur", &o, &all_limits, 0, NULL);

	put("paddock-cur/memory.current", "1048576\n");
	put("paddock-cur/pids.current", "3\n");
	put("paddock-cur/cpu.stat", "usage_usec 1500\nuser_usec 1000\n");
	put("paddock-cur/cgroup.procs", "");
	cr_assert_eq(pdk_cgroup_stats(cg, &st, &err), 0);
	cr_assert_eq(st.memory_current, 1048576);
	cr_assert_eq(st.pids_current, 3);
	cr_assert_eq(st.cpu_usage_ns, 1500000);
	destroy_ok();
}

Test(cgroup, v1_freeze_writes_freezer_state)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_AUTO);
	_cleanup_error_ struct pdk_error *err = NULL;

	fake_v1_comounted();
	struct pdk_cgroup *cg = make("f1", &o, &all_limits, 0, NULL);

	for (size_t i = 0; i < cg->n_dirs; i++) {
		_cleanup_free_ char *procs = pdk__cgroup_join(cg->dirs[i].path, "cgroup.procs");

		put_abs(procs, "");
	}
	/*
	 * A fake file keeps what was written: "FROZEN" reads back as FROZEN,
	 * so the wait ends at once, as the kernel's would once every task stopped.
	 */
	cr_assert_eq(pdk_cgroup_freeze(cg, true, 5, &err), 0, "%s", err ? err->msg : "");
	cr_assert_str_eq(slurp("freezer/paddock-f1/freezer.state"), "FROZEN");
	cr_assert_eq(pdk_cgroup_freeze(cg, false, 5, &err), 0);
	cr_assert_str_eq(slurp("freezer/paddock-f1/freezer.state"), "THAWED");
	destroy_ok();
}

/* --- a dead process's cgroup: describe, adopt, destroy --- */

static void adopt_refused(const char *text, const char *why)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_cgroup *cg = NULL;

	cr_assert_eq(pdk_cgroup_adopt(text, "sbtail", g_tmp, &cg, &err), -EINVAL, "%s", why);
	cr_assert_null(cg);
	cr_assert_not_null(err);
}

Test(cgroup, describe_adopt_and_destroy)
{
	struct pdk_cgroup_opts o = fake_opts(PDK_CGROUP_V2);
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *text = NULL, *want = NULL, *bad = NULL;
	struct pdk_cgroup *cg = NULL;

	fake_v2("", "memory pids cpu");
	make("sbtail", &o, NULL, 0, NULL);
	text = pdk_cgroup_describe(g_cg);
	want = pdk_xasprintf("2 0 %s/paddock-sbtail\n", g_tmp);
	cr_assert_str_eq(text, want);
	pdk_cgroup_free(steal_ptr(&g_cg)); /* the maker goes away without removing it */
	cr_assert(exists("paddock-sbtail"));
	cr_assert_eq(pdk_cgroup_adopt(text, "sbtail", g_tmp, &cg, &err), 0, "%s",
		     err ? err->msg : "");
	cr_assert_eq(pdk_cgroup_version(cg), PDK_CGROUP_V2);
	cr_assert_eq(pdk_cgroup_destroy(cg, &err), 0, "%s", err ? err->msg : "");
	cr_assert(!exists("paddock-sbtail"));

	adopt_refused("2 0 /etc/paddock-sbtail\n", "outside the root");
	bad = pdk_xasprintf("2 0 %s/../paddock-sbtail\n", g_tmp);
	adopt_refused(bad, "a .. component");
	free(bad);
	bad = pdk_xasprintf("2 0 %s/paddock-other\n", g_tmp);
	adopt_refused(bad, "another sandbox's cgroup");
	free(bad);
	bad = pdk_xasprintf("2 0 %s/x/paddock-sbtail\n1 1 %s/y/paddock-sbtail\n", g_tmp, g_tmp);
	adopt_refused(bad, "mixed versions");
	free(bad);
	bad = pdk_xasprintf("3 0 %s/paddock-sbtail\n", g_tmp);
	adopt_refused(bad, "no such version");
	free(steal_ptr(&bad));
	adopt_refused("garbage", "not a description");
	cg = NULL;
	cr_assert_eq(pdk_cgroup_adopt("", "sbtail", g_tmp, &cg, &err), 0, "no cgroup at all");
	cr_assert_eq(pdk_cgroup_destroy(cg, &err), 0);
}

/* The child of pdk_proc_clone_into(): its own /proc/self/cgroup, written to a pipe. */
static int report_cgroup_child(void *p)
{
	const int *wfd = p;
	char buf[1024];
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	_exit(n > 0 && write(*wfd, buf, (size_t)n) == n ? 0 : 1);
}

/* Start report_cgroup_child() with pdk_proc_clone_into(dir_fd): its report, *into set. */
static char *clone_into_report(int dir_fd, bool *into)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	char *buf = pdk_xcalloc(1, 1024);
	int p[2], pidfd = -1, status = 0;
	pid_t pid;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	*into = !*into; /* pdk_proc_clone_into() must set it either way */
	pid = pdk_proc_clone_into(0, dir_fd, into, report_cgroup_child, &p[1], &pidfd, &err);
	cr_assert_gt(pid, 0, "%s", err ? err->msg : "");
	close(p[1]);
	cr_assert_gt(read(p[0], buf, 1023), 0);
	close(p[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pidfd);
	return buf;
}

/*
 * On the kernel's cgroup2, a child made by clone3() with CLONE_INTO_CGROUP
 * (pdk_proc_clone_into(), what the engine does on cgroup v2: nothing
 * migrates, so no RCU grace period is waited for) is in the cgroup from its
 * first instruction; with a descriptor of a directory that is not a cgroup2
 * one, the usual clone is made instead and *into says so.
 */
Test(cgroup, real_v2_unified_clone_into)
{
	static const char unified[] = "/sys/fs/cgroup/unified";
	_cleanup_free_ char *name = pdk_xasprintf("t-v2c-%d", (int)getpid());
	_cleanup_free_ char *own = pdk_xstrdup(slurp_abs("/proc/self/cgroup"));
	struct pdk_cgroup_opts o = {.root = unified, .version = PDK_CGROUP_V2};
	struct statfs sfs;
	unsigned down = 0;
	bool into = false;
	int fd;

	if (geteuid() != 0)
		SKIP("real cgroup v2 test needs root");
	if (statfs(unified, &sfs) != 0 || sfs.f_type != CGROUP2_SUPER_MAGIC)
		SKIP("no cgroup2 mounted at %s (a v1 machine's hybrid hierarchy)", unified);
	struct pdk_cgroup *cg = make(name, &o, NULL, 0, &down);
	fd = pdk_cgroup_open_dir(cg);
	cr_assert_geq(fd, 0, "pdk_cgroup_open_dir: %s", strerror(errno));
	_cleanup_free_ char *in = clone_into_report(fd, &into);
	close(fd);
	cr_assert(into, "made in the cgroup by clone3");
	cr_assert(strstr(in, cg->leaf) != NULL, "the child's own view: %s", in);
	fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *out = clone_into_report(fd, &into);
	close(fd);
	cr_assert(!into, "/tmp is no cgroup: the usual clone");
	cr_assert_str_eq(out, own, "the child stayed in our cgroups");
	destroy_ok();
}

/* v1 has no CLONE_INTO_CGROUP: no directory to clone into, so the child joins by cgroup.procs. */
Test(cgroup, open_dir_is_v2_only)
{
	cr_assert_eq(pdk_cgroup_open_dir(NULL), -1);
}
