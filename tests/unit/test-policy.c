/*
 * test-policy.c - the profile parser, built-ins, extends, dump and every
 * class of diagnostic (with its exact position and field).
 */
#include "common.h"
#include "error.h"
#include "paths.h"
#include "policy-internal.h"
#include "util.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DATA PDK_TEST_DATA "/policy/"

/* ---- helpers ---- */

static struct pdk_policy *parse(const char *yaml, struct pdk_policy_report *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy *p = pdk_policy_parse("test.yaml", yaml, strlen(yaml), r, &err);

	cr_assert((p == NULL) == (err != NULL), "a result or an error, never both");
	if (p == NULL)
		cr_assert_eq(err->status, EINVAL);
	return p;
}

static char *report_text(const struct pdk_policy_report *r)
{
	struct pdk_test_text t;

	pdk_policy_report_print(r, pdk_test_text_open(&t));
	return pdk_test_text_take(&t);
}

/* The one diagnostic for `field`; fails unless there is exactly one. */
static const struct pdk_policy_diag *diag_for(const struct pdk_policy_report *r, const char *field)
{
	const struct pdk_policy_diag *found = NULL;
	_cleanup_free_ char *all = report_text(r);

	for (size_t i = 0; i < r->n; i++) {
		if (strcmp(r->diags[i].field, field) != 0)
			continue;
		cr_assert_null(found, "two diagnostics for '%s':\n%s", field, all);
		found = &r->diags[i];
	}
	cr_assert_not_null(found, "no diagnostic for '%s':\n%s", field, all);
	return found;
}

static void assert_diag(const struct pdk_policy_report *r, const char *field, int line, int col,
			const char *msg)
{
	const struct pdk_policy_diag *d = diag_for(r, field);

	cr_assert_eq(d->line, line, "%s: line %d, expected %d (%s)", field, d->line, line, d->msg);
	cr_assert_eq(d->column, col, "%s: column %d, expected %d (%s)", field, d->column, col,
		     d->msg);
	cr_assert_not_null(strstr(d->msg, msg), "%s: '%s' does not contain '%s'", field, d->msg,
			   msg);
}

/* Parse `yaml`, expect exactly one diagnostic, check it. */
static void expect_one(const char *yaml, const char *field, int line, int col, const char *msg)
{
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = parse(yaml, &r);
	_cleanup_free_ char *all = report_text(&r);

	cr_assert_null(p, "'%s' was accepted", yaml);
	cr_assert_eq(r.n, 1, "expected 1 diagnostic, got %zu:\n%s", r.n, all);
	assert_diag(&r, field, line, col, msg);
	cr_assert_str_eq(r.diags[0].file, "test.yaml");
	pdk_policy_report_release(&r);
}

static struct pdk_policy *parse_ok(const char *yaml)
{
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = parse(yaml, &r);
	_cleanup_free_ char *all = report_text(&r);

	cr_assert_not_null(p, "'%s' was refused:\n%s", yaml, all);
	cr_assert_eq(r.n, 0);
	pdk_policy_report_release(&r);
	return p;
}

/* The user's profile directory the loads of a test search (base/paths.h resolves it). */
static char *profile_dir;

static void use_config_env(const char *xdg_config_home, const char *home)
{
	struct pdk_paths_env env = {.xdg_config_home = xdg_config_home, .home = home};
	struct pdk_paths paths;

	pdk_paths_resolve(&env, &paths);
	free(profile_dir);
	profile_dir = steal_ptr(&paths.profile_dir);
	pdk_paths_release(&paths);
}

static struct pdk_policy *load_ok(const char *name)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = pdk_policy_load(name, profile_dir, &r, &err);
	_cleanup_free_ char *all = report_text(&r);

	cr_assert_not_null(p, "%s: %s\n%s", name, err ? err->msg : "?", all);
	cr_assert_eq(r.n, 0, "%s has diagnostics:\n%s", name, all);
	pdk_policy_report_release(&r);
	return p;
}

static size_t nstrv(char *const *v)
{
	return pdk_strv_len(v);
}

static void assert_strv(char *const *v, const char *const *want)
{
	size_t n = 0;

	while (want[n] != NULL)
		n++;
	cr_assert_eq(nstrv(v), n, "%zu entries, expected %zu", nstrv(v), n);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(v[i], want[i]);
}

static void assert_strv_eq(char *const *a, char *const *b, const char *what)
{
	cr_assert_eq(nstrv(a), nstrv(b), "%s: %zu vs %zu entries", what, nstrv(a), nstrv(b));
	for (size_t i = 0; i < nstrv(a); i++)
		cr_assert_str_eq(a[i], b[i], "%s[%zu]", what, i);
}

static void assert_opt_str_eq(const char *a, const char *b, const char *what)
{
	cr_assert_eq(a == NULL, b == NULL, "%s: one is NULL", what);
	if (a != NULL)
		cr_assert_str_eq(a, b, "%s", what);
}

/* Every field but `source` (which names where the policy came from). */
static void assert_policy_eq(const struct pdk_policy *a, const struct pdk_policy *b)
{
	assert_opt_str_eq(a->name, b->name, "name");
	assert_opt_str_eq(a->description, b->description, "description");
	assert_opt_str_eq(a->workspace.path, b->workspace.path, "workspace.path");
	cr_assert_eq(a->workspace.mode, b->workspace.mode);
	assert_strv_eq(a->read_only, b->read_only, "read_only");
	assert_strv_eq(a->read_write, b->read_write, "read_write");
	assert_strv_eq(a->tmpfs, b->tmpfs, "tmpfs");
	assert_strv_eq(a->hidden, b->hidden, "hidden");
	assert_strv_eq(a->etc, b->etc, "etc");
	cr_assert_eq(a->network.mode, b->network.mode);
	cr_assert_eq(memcmp(&a->limits, &b->limits, sizeof(a->limits)), 0, "limits differ");
	cr_assert_eq(a->best_effort, b->best_effort);
	cr_assert_eq(a->allow_ptrace, b->allow_ptrace);
	cr_assert_eq(a->audit.exec_trace, b->audit.exec_trace);
	assert_opt_str_eq(a->hostname, b->hostname, "hostname");
	assert_strv_eq(a->env, b->env, "env");
}

static char *dump(const struct pdk_policy *p)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_test_text t;

	cr_assert_eq(pdk_policy_dump(p, pdk_test_text_open(&t), &err), 0, "dump: %s",
		     err ? err->msg : "?");
	return pdk_test_text_take(&t);
}

/* dump -> parse gives the same policy, and dumping that gives the same text. */
static void assert_round_trip(const struct pdk_policy *p)
{
	_cleanup_free_ char *text = dump(p);
	struct pdk_policy_report r = {0};
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy *q = pdk_policy_parse("dumped.yaml", text, strlen(text), &r, &err);
	_cleanup_free_ char *all = report_text(&r);
	_cleanup_free_ char *again = NULL;

	cr_assert_not_null(q, "the dump does not parse:\n%s\n%s", text, all);
	assert_policy_eq(p, q);
	again = dump(q);
	cr_assert_str_eq(text, again);
	pdk_policy_free(q);
	pdk_policy_report_release(&r);
}

static char *tmp_dir(void)
{
	char *d = pdk_xstrdup("/tmp/test-policy-XXXXXX");

	cr_assert_not_null(mkdtemp(d));
	return d;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Remove a directory made by tmp_dir() and everything in it. */
static void cleanup_tmp_dir(char **dir)
{
	if (*dir != NULL)
		(void)nftw(*dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(*dir);
}
#define _cleanup_tmp_dir_ __attribute__((cleanup(cleanup_tmp_dir)))

static void write_file(const char *path, const char *text)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	cr_assert_eq(pdk_write_file_at(AT_FDCWD, path, text, true, &err), 0);
}

/* ---- built-ins ---- */

Test(policy, builtins_parse_without_diagnostics)
{
	size_t n = 0;

	for (size_t i = 0; pdk_policy_builtin_names[i] != NULL; i++, n++) {
		const char *name = pdk_policy_builtin_names[i];
		struct pdk_policy *p = load_ok(name);
		_cleanup_free_ char *src = pdk_xasprintf("builtin:%s", name);

		cr_assert_str_eq(p->name, name);
		cr_assert_str_eq(p->source, src);
		cr_assert_not_null(pdk__policy_builtin_yaml(name));
		pdk_policy_free(p);
	}
	cr_assert_geq(n, 2);
	cr_assert_null(pdk__policy_builtin_yaml("nope"));
}

Test(policy, default_profile_contents)
{
	struct pdk_policy *p = load_ok("default");
	static const char *const ro[] = {"/usr",   "/bin",   "/sbin",   "/lib",
					 "/lib32", "/lib64", "/libx32", NULL};

	cr_assert_null(p->workspace.path, "the workspace is the cwd at run time");
	cr_assert_eq(p->workspace.mode, PDK_WS_OVERLAY, "changes are kept, not applied");
	cr_assert_eq(p->limits.disk, 0);
	assert_strv(p->read_only, ro);
	assert_strv(p->tmpfs, (const char *const[]){"/tmp", NULL});
	cr_assert(nstrv(p->etc) >= 10);
	for (size_t i = 0; p->etc[i] != NULL; i++) {
		cr_assert_neq(strcmp(p->etc[i], "passwd"), 0);
		cr_assert_neq(strcmp(p->etc[i], "shadow"), 0);
	}
	cr_assert_eq(p->network.mode, PDK_NET_NONE);
	cr_assert_eq(p->limits.memory, 4ULL << 30);
	cr_assert_eq(p->limits.pids, 1024);
	cr_assert_eq(p->limits.cpu_milli, 0);
	cr_assert_eq(p->limits.wall_ms, 0);
	cr_assert_eq(p->limits.cpu_time_ms, 0);
	cr_assert_eq(p->limits.nofile, 4096);
	cr_assert_eq(p->limits.fsize, 0);
	cr_assert_eq(p->limits.tmp_size, 1ULL << 30);
	cr_assert_eq(p->best_effort, PDK_BE_MEMORY | PDK_BE_PIDS | PDK_BE_CPU);
	cr_assert_eq(p->allow_ptrace, false);
	cr_assert_eq(p->audit.exec_trace, true);
	cr_assert_str_eq(p->hostname, "paddock");
	cr_assert_eq(nstrv(p->env), 0);
	pdk_policy_free(p);
}

Test(policy, strict_extends_default)
{
	struct pdk_policy *d = load_ok("default");
	struct pdk_policy *s = load_ok("strict");

	cr_assert_str_eq(s->name, "strict");
	cr_assert_str_neq(s->description, d->description, "the description is not inherited");
	cr_assert_eq(s->workspace.mode, PDK_WS_RO);
	assert_strv_eq(s->read_only, d->read_only, "read_only (inherited)");
	assert_strv_eq(s->hidden, d->hidden, "hidden (inherited)");
	cr_assert_eq(nstrv(s->etc), 8);
	cr_assert_eq(s->limits.memory, 512ULL << 20);
	cr_assert_eq(s->limits.pids, 128);
	cr_assert_eq(s->limits.cpu_milli, 1000);
	cr_assert_eq(s->limits.wall_ms, 5 * 60 * 1000);
	cr_assert_eq(s->limits.cpu_time_ms, 2 * 60 * 1000);
	cr_assert_eq(s->limits.nofile, 256);
	cr_assert_eq(s->limits.fsize, 256ULL << 20);
	cr_assert_eq(s->limits.tmp_size, 128ULL << 20);
	cr_assert_eq(s->best_effort, 0, "everything is required");
	pdk_policy_free(d);
	pdk_policy_free(s);
}

/* ---- every field ---- */

Test(policy, every_field_parsed)
{
	struct pdk_policy *p = load_ok(DATA "full.yaml");

	cr_assert_str_eq(p->name, "coding");
	cr_assert_str_eq(p->source, DATA "full.yaml");
	cr_assert_str_eq(p->description,
			 "An agent that edits code: \"quotes\", colons: and # hashes");
	cr_assert_str_eq(p->workspace.path, "./src");
	cr_assert_eq(p->workspace.mode, PDK_WS_RO);
	assert_strv(p->read_only, (const char *const[]){"/usr", "/opt/toolchain/bin", NULL});
	assert_strv(p->read_write, (const char *const[]){"/var/cache/build", NULL});
	assert_strv(p->tmpfs, (const char *const[]){"/tmp", "/var/tmp", NULL});
	assert_strv(p->hidden, (const char *const[]){"/usr/share/secret", NULL});
	assert_strv(p->etc, (const char *const[]){"ld.so.cache", "ssl", "resolv.conf", NULL});
	cr_assert_eq(p->network.mode, PDK_NET_HOST);
	cr_assert_eq(p->limits.memory, 1ULL << 30);
	cr_assert_eq(p->limits.pids, 256);
	cr_assert_eq(p->limits.cpu_milli, 1500);
	cr_assert_eq(p->limits.wall_ms, 600000);
	cr_assert_eq(p->limits.cpu_time_ms, 300000);
	cr_assert_eq(p->limits.nofile, 1024);
	cr_assert_eq(p->limits.fsize, 512ULL << 20);
	cr_assert_eq(p->limits.tmp_size, 256ULL << 20);
	cr_assert_eq(p->best_effort, PDK_BE_MEMORY | PDK_BE_LANDLOCK);
	cr_assert_eq(p->allow_ptrace, true);
	cr_assert_str_eq(p->hostname, "build-box.example");
	assert_strv(p->env, (const char *const[]){"LANG=C.UTF-8", "EMPTY=", "NUMBER=42", NULL});
	pdk_policy_free(p);
}

Test(policy, limit_words_and_units)
{
	struct pdk_policy *p =
		parse_ok("limits: {memory: unlimited, pids: unlimited, cpu: 0.125,\n"
			 "  wall: none, cpu_time: 0, fsize: 1048576, tmp_size: 64KiB,\n"
			 "  nofile: 0}\n");

	cr_assert_eq(p->limits.memory, 0);
	cr_assert_eq(p->limits.pids, 0);
	cr_assert_eq(p->limits.cpu_milli, 125);
	cr_assert_eq(p->limits.wall_ms, 0);
	cr_assert_eq(p->limits.fsize, 1ULL << 20);
	cr_assert_eq(p->limits.tmp_size, 64 << 10);
	pdk_policy_free(p);
	p = parse_ok("limits: {cpu: 1024, wall: 250ms, cpu_time: 2h, memory: \"2G\"}\n");
	cr_assert_eq(p->limits.cpu_milli, 1024000);
	cr_assert_eq(p->limits.wall_ms, 250);
	cr_assert_eq(p->limits.cpu_time_ms, 7200000);
	cr_assert_eq(p->limits.memory, 2ULL << 30);
	pdk_policy_free(p);
}

Test(policy, defaults_without_extends)
{
	struct pdk_policy *p = parse_ok("description: bare\n");

	cr_assert_str_eq(p->name, "test", "the name comes from the file name");
	cr_assert_str_eq(p->source, "test.yaml");
	cr_assert_eq(nstrv(p->read_only), 0);
	assert_strv(p->tmpfs, (const char *const[]){"/tmp", NULL});
	cr_assert_eq(p->network.mode, PDK_NET_NONE);
	cr_assert_eq(p->limits.memory, 0);
	cr_assert_eq(p->best_effort, 0);
	cr_assert_str_eq(p->hostname, "paddock");
	pdk_policy_free(p);
}

Test(policy, tmp_is_always_a_tmpfs)
{
	struct pdk_policy *p = parse_ok("filesystem: {tmpfs: [/var/tmp]}\n");

	assert_strv(p->tmpfs, (const char *const[]){"/var/tmp", "/tmp", NULL});
	pdk_policy_free(p);
}

Test(policy, paths_are_normalized)
{
	struct pdk_policy *p = parse_ok("filesystem: {read_only: [//usr///lib/, /opt/]}\n");

	assert_strv(p->read_only, (const char *const[]){"/usr/lib", "/opt", NULL});
	pdk_policy_free(p);
}

Test(policy, null_workspace_path_means_cwd)
{
	struct pdk_policy *p = parse_ok("extends: " DATA "base.yaml\n"
					"filesystem: {workspace: {path: null}}\n");

	cr_assert_null(p->workspace.path);
	cr_assert_eq(p->workspace.mode, PDK_WS_RW);
	pdk_policy_free(p);
}

/* ---- round trip ---- */

Test(policy, round_trip_builtins_and_full)
{
	const char *names[] = {"default", "strict", DATA "full.yaml", DATA "child.yaml"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(names); i++) {
		struct pdk_policy *p = load_ok(names[i]);

		assert_round_trip(p);
		pdk_policy_free(p);
	}
}

Test(policy, round_trip_awkward_strings)
{
	struct pdk_policy *p = parse_ok(
		"name: \"- tricky: #name\"\n"
		"description: \"line one\\nline two\\ttab \\\"q\\\" 'single' \\u00e9\\u2028 \\x01\"\n"
		"filesystem:\n"
		"  workspace: {path: \"null\"}\n"
		"  read_only: [\"/a b\", \"/c:d\", \"/e#f\", \"/[g]\", \"/h,i\", \"/true\"]\n"
		"env: {A: \"\", B: \"null\", C: \" lead\", D: \"x: y\", E: \"~\", F: \"@at\",\n"
		"  \"NULL\": \"yes\", G: \"multi\\nline\"}\n");

	cr_assert_str_eq(p->workspace.path, "null");
	cr_assert_str_eq(p->env[0], "A=");
	cr_assert_str_eq(p->env[6], "NULL=yes");
	assert_round_trip(p);
	pdk_policy_free(p);
}

Test(policy, dump_is_human_readable)
{
	struct pdk_policy *p = load_ok("strict");
	_cleanup_free_ char *text = dump(p);

	cr_assert_not_null(strstr(text, "memory: 512M\n"), "%s", text);
	cr_assert_not_null(strstr(text, "tmp_size: 128M\n"), "%s", text);
	cr_assert_not_null(strstr(text, "wall: 5m\n"), "%s", text);
	cr_assert_not_null(strstr(text, "cpu: 1\n"), "%s", text);
	cr_assert_not_null(strstr(text, "best_effort: []\n"), "%s", text);
	cr_assert_null(strstr(text, "extends"), "a dump is fully resolved");
	pdk_policy_free(p);
	p = parse_ok("limits: {memory: 1536M, cpu: 0.25, wall: 90s, fsize: 1000, pids: 0}\n");
	free(text);
	text = dump(p);
	cr_assert_not_null(strstr(text, "memory: 1536M\n"), "%s", text);
	cr_assert_not_null(strstr(text, "cpu: 0.25\n"), "%s", text);
	cr_assert_not_null(strstr(text, "wall: 90s\n"), "%s", text);
	cr_assert_not_null(strstr(text, "fsize: 1000\n"), "%s", text);
	cr_assert_not_null(strstr(text, "pids: unlimited\n"), "%s", text);
	pdk_policy_free(p);
}

Test(policy, dup_is_deep_and_equal)
{
	struct pdk_policy *p = load_ok(DATA "full.yaml");
	struct pdk_policy *d = pdk_policy_dup(p);

	assert_policy_eq(p, d);
	cr_assert_str_eq(d->source, p->source);
	cr_assert_neq(d->read_only, p->read_only);
	cr_assert_neq(d->env[0], p->env[0]);
	pdk_policy_free(p);
	assert_round_trip(d);
	pdk_policy_free(d);
	cr_assert_null(pdk_policy_dup(NULL));
	pdk_policy_free(NULL);
}

/* ---- extends ---- */

Test(policy, extends_and_override)
{
	struct pdk_policy *p = load_ok(DATA "child.yaml");

	cr_assert_str_eq(p->name, "child", "the name is not inherited");
	cr_assert_null(p->description, "the description is not inherited");
	cr_assert_str_eq(p->workspace.path, "/srv/work", "maps merge key by key");
	cr_assert_eq(p->workspace.mode, PDK_WS_RO);
	assert_strv(p->read_only, (const char *const[]){"/usr", NULL}); /* lists are replaced */
	assert_strv(p->etc, (const char *const[]){"ssl", NULL});
	cr_assert_eq(p->limits.memory, 512ULL << 20);
	cr_assert_eq(p->limits.pids, 100);
	cr_assert_eq(p->limits.wall_ms, 3600000);
	assert_strv(p->env,
		    (const char *const[]){"A=from-base", "B=from-child", "C=from-child", NULL});
	pdk_policy_free(p);
}

Test(policy, extends_builtin)
{
	struct pdk_policy *p = parse_ok("extends: strict\nlimits: {pids: 64}\n");

	cr_assert_eq(p->limits.pids, 64);
	cr_assert_eq(p->limits.memory, 512ULL << 20);
	cr_assert_eq(p->workspace.mode, PDK_WS_RO);
	cr_assert_eq(p->best_effort, 0);
	pdk_policy_free(p);
}

Test(policy, extends_cycle)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = pdk_policy_load(DATA "cycle-a.yaml", profile_dir, &r, &err);
	_cleanup_free_ char *all = report_text(&r);

	cr_assert_null(p);
	cr_assert_not_null(err);
	cr_assert_eq(r.n, 2, "%s", all);
	/* cycle-b.yaml's extends closes the loop; cycle-a.yaml's extends then fails. */
	cr_assert(strstr(r.diags[0].file, "cycle-b.yaml") != NULL, "%s", all);
	cr_assert_eq(r.diags[0].line, 1);
	cr_assert_eq(r.diags[0].column, 10);
	cr_assert_str_eq(r.diags[0].field, "extends");
	cr_assert_not_null(strstr(r.diags[0].msg, "extends cycle:"), "%s", all);
	cr_assert_not_null(strstr(r.diags[0].msg, "cycle-a.yaml -> "), "%s", all);
	cr_assert_str_eq(r.diags[1].file, DATA "cycle-a.yaml");
	cr_assert_str_eq(r.file, DATA "cycle-a.yaml");
	pdk_policy_report_release(&r);
}

Test(policy, extends_self)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = pdk_policy_load(DATA "self.yaml", profile_dir, &r, &err);

	cr_assert_null(p);
	cr_assert_eq(r.n, 1);
	assert_diag(&r, "extends", 1, 10, "extends cycle:");
	pdk_policy_report_release(&r);
}

static void write_chain(const char *dir, int n)
{
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *path = pdk_xasprintf("%s/p%d.yaml", dir, i);
		_cleanup_free_ char *text = i + 1 < n ? pdk_xasprintf("extends: p%d.yaml\n", i + 1)
						      : pdk_xstrdup("limits: {pids: 7}\n");

		write_file(path, text);
	}
}

Test(policy, extends_depth_limit)
{
	_cleanup_tmp_dir_ char *dir = tmp_dir();
	_cleanup_free_ char *top = pdk_xasprintf("%s/p0.yaml", dir);
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report r = {0};
	struct pdk_policy *p;

	write_chain(dir, 9); /* p0 .. p8: eight levels of extends */
	p = load_ok(top);
	cr_assert_eq(p->limits.pids, 7);
	pdk_policy_free(p);
	write_chain(dir, 10); /* nine levels */
	p = pdk_policy_load(top, profile_dir, &r, &err);
	cr_assert_null(p);
	cr_assert_not_null(strstr(r.diags[0].msg, "more than 8 levels of extends"), "%s",
			   r.diags[0].msg);
	cr_assert_not_null(strstr(r.diags[0].file, "p8.yaml"));
	cr_assert_eq(r.n, 9, "every profile on the chain says why it failed");
	pdk_policy_report_release(&r);
}

Test(policy, extends_unknown_profile)
{
	struct pdk_policy_report r = {0};
	struct pdk_policy *p;

	use_config_env("/nonexistent", NULL);
	p = parse("name: x\nextends: no-such-profile\n", &r);
	cr_assert_null(p);
	cr_assert_eq(r.n, 1);
	assert_diag(&r, "extends", 2, 10, "unknown profile 'no-such-profile'");
	cr_assert_not_null(strstr(r.diags[0].msg, "default, strict"), "%s", r.diags[0].msg);
	pdk_policy_report_release(&r);
}

Test(policy, extends_invalid_parent)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = pdk_policy_load(DATA "bad-parent.yaml", profile_dir, &r, &err);
	_cleanup_free_ char *all = report_text(&r);

	cr_assert_null(p);
	/* errors.yaml's five, the extends line that names it, and the child's own. */
	cr_assert_eq(r.n, 7, "%s", all);
	cr_assert_str_eq(r.file, DATA "bad-parent.yaml");
	cr_assert_str_eq(r.diags[0].file, DATA "errors.yaml");
	assert_diag(&r, "extends", 1, 10, "errors.yaml' is invalid (5 problems)");
	assert_diag(&r, "limits.pids", 3, 9, "expected a whole number");
	cr_assert_str_eq(diag_for(&r, "limits.pids")->file, DATA "bad-parent.yaml");
	pdk_policy_report_release(&r);
}

/* ---- load ---- */

Test(policy, load_by_name_from_config_dirs)
{
	_cleanup_tmp_dir_ char *dir = tmp_dir();
	_cleanup_free_ char *pdir = pdk_xasprintf("%s/paddock", dir);
	_cleanup_free_ char *prof = pdk_xasprintf("%s/paddock/profiles", dir);
	_cleanup_free_ char *file = pdk_xasprintf("%s/mine.yaml", prof);
	_cleanup_free_ char *shadow = pdk_xasprintf("%s/default.yaml", prof);
	_cleanup_free_ char *cfg = pdk_xasprintf("%s/.config", dir);
	_cleanup_free_ char *cfg_pdir = pdk_xasprintf("%s/.config/paddock", dir);
	_cleanup_free_ char *cfg_file = pdk_xasprintf("%s/.config/paddock/profiles/mine.yaml", dir);
	struct pdk_policy *p;

	cr_assert_eq(mkdir(pdir, 0700), 0);
	cr_assert_eq(mkdir(prof, 0700), 0);
	write_file(file, "extends: default\nlimits: {pids: 9}\n");
	write_file(shadow, "limits: {pids: 1}\n");
	use_config_env(dir, NULL);
	p = load_ok("mine");
	cr_assert_str_eq(p->source, file);
	cr_assert_str_eq(p->name, "mine");
	cr_assert_eq(p->limits.pids, 9);
	pdk_policy_free(p);
	p = load_ok("default");
	cr_assert_eq(p->limits.pids, 1024, "built-ins come before user files");
	pdk_policy_free(p);
	/* Without XDG_CONFIG_HOME: ~/.config. */
	use_config_env(NULL, dir);
	cr_assert_eq(mkdir(cfg, 0700), 0);
	cr_assert_eq(rename(pdir, cfg_pdir), 0);
	p = load_ok("mine");
	cr_assert_str_eq(p->source, cfg_file);
	pdk_policy_free(p);
}

Test(policy, load_unknown_name_lists_builtins)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report r = {0};

	use_config_env("/nonexistent", NULL);
	cr_assert_null(pdk_policy_load("nope", profile_dir, &r, &err));
	cr_assert_eq(err->status, ENOENT);
	cr_assert_not_null(strstr(err->msg, "unknown profile 'nope'"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "default, strict"), "%s", err->msg);
	cr_assert_eq(r.n, 0);
	pdk_error_free(&err);
	cr_assert_null(pdk_policy_load("bad name!", profile_dir, &r, &err));
	cr_assert_eq(err->status, EINVAL);
	pdk_error_free(&err);
	cr_assert_null(pdk_policy_load("missing.yaml", profile_dir, &r, &err),
		       "a .yaml name is a path");
	cr_assert_eq(err->status, ENOENT);
	pdk_error_free(&err);
	cr_assert_null(pdk_policy_load("/dev/null", profile_dir, &r, &err));
	cr_assert_not_null(strstr(err->msg, "not a regular file"), "%s", err->msg);
	pdk_policy_report_release(&r);
}

Test(policy, report_print_format)
{
	struct pdk_policy_report r = {0};
	_cleanup_free_ char *text = NULL;

	cr_assert_null(parse("name: x\nlimits:\n  memory: 1X\n", &r));
	text = report_text(&r);
	cr_assert_str_eq(text, "test.yaml:3:11: limits.memory: expected a size such as 512M or 4G, "
			       "or 'unlimited', found '1X'\n");
	pdk_policy_report_release(&r);
	cr_assert_null(r.diags);
	cr_assert_eq(r.n, 0);
}

Test(policy, mode_names)
{
	cr_assert_str_eq(pdk_policy_ws_mode_name(PDK_WS_RW), "rw");
	cr_assert_str_eq(pdk_policy_ws_mode_name(PDK_WS_RO), "ro");
	cr_assert_str_eq(pdk_policy_ws_mode_name(PDK_WS_NONE), "none");
	cr_assert_str_eq(pdk_policy_ws_mode_name(PDK_WS_OVERLAY), "overlay");
	cr_assert_str_eq(pdk_policy_ws_mode_name(PDK_WS_TMPFS), "tmpfs");
	cr_assert_str_eq(pdk_policy_net_mode_name(PDK_NET_NONE), "none");
	cr_assert_str_eq(pdk_policy_net_mode_name(PDK_NET_HOST), "host");
}

/* ---- each class of error, with its position ---- */

Test(policy, error_unknown_key_top)
{
	expect_one("name: x\nfrobnicate: 1\n", "frobnicate", 2, 1,
		   "unknown key 'frobnicate' (expected one of: extends, name, description");
}

Test(policy, error_unknown_key_nested)
{
	expect_one("limits:\n  memory: 1G\n  swap: 1G\n", "limits.swap", 3, 3,
		   "unknown key 'swap' (expected one of: memory, pids, cpu");
	expect_one("filesystem:\n  workspace: {mode: ro, writable: yes}\n",
		   "filesystem.workspace.writable", 2, 25, "unknown key 'writable'");
}

Test(policy, error_wrong_type)
{
	expect_one("filesystem:\n  read_only: {usr: yes}\n", "filesystem.read_only", 2, 14,
		   "expected a list, found a mapping");
	expect_one("limits: [1G]\n", "limits", 1, 9, "expected a mapping, found a list");
	expect_one("hostname: [a]\n", "hostname", 1, 11, "expected a hostname, found a list");
	expect_one("name:\n", "name", 1, 6, "expected a profile name, found null");
	expect_one("- a\n- b\n", "", 1, 1, "expected a mapping of settings, found a list");
	expect_one("env: [A=b]\n", "env", 1, 6, "expected a mapping of NAME: value, found a list");
	expect_one("process: {allow_ptrace: yes}\n", "process.allow_ptrace", 1, 25,
		   "expected true or false, found 'yes'");
	expect_one("best_effort: memory\n", "best_effort", 1, 14,
		   "expected a list, found 'memory'");
}

Test(policy, error_bad_size)
{
	expect_one("limits:\n  memory: 1X\n", "limits.memory", 2, 11,
		   "expected a size such as 512M or 4G, or 'unlimited', found '1X'");
	expect_one("limits:\n  tmp_size: unlimited\n", "limits.tmp_size", 2, 13,
		   "expected a size such as 512M or 4G, found 'unlimited'");
	expect_one("limits:\n  fsize: 99999999999T\n", "limits.fsize", 2, 10,
		   "'99999999999T' is out of range");
	expect_one("limits:\n  pids: 5000000\n", "limits.pids", 2, 9,
		   "'5000000' is out of range (at most 4194304)");
	expect_one("limits:\n  pids: -1\n", "limits.pids", 2, 9, "expected a whole number");
}

Test(policy, error_bad_cpu)
{
	expect_one("limits: {cpu: 1.2345}\n", "limits.cpu", 1, 15, "at most 3 decimals");
	expect_one("limits: {cpu: 2000}\n", "limits.cpu", 1, 15, "out of range (at most 1024)");
	expect_one("limits: {cpu: .5}\n", "limits.cpu", 1, 15, "expected a number of CPUs");
	expect_one("limits: {cpu: 1.}\n", "limits.cpu", 1, 15, "expected a number of CPUs");
}

Test(policy, error_bad_duration)
{
	expect_one("limits:\n  wall: 10y\n", "limits.wall", 2, 9,
		   "expected a duration such as 250ms, 30s, 10m or 2h, or 'none', found '10y'");
	expect_one("limits:\n  cpu_time: 1500ms\n", "limits.cpu_time", 2, 13,
		   "expected a whole number of seconds, found '1500ms'");
}

Test(policy, workspace_modes_and_disk_limit)
{
	struct pdk_policy *p = parse_ok("filesystem: {workspace: {mode: tmpfs}}\n"
					"limits: {disk: 512M}\n");

	cr_assert_eq(p->workspace.mode, PDK_WS_TMPFS);
	cr_assert_eq(p->limits.disk, 512ull << 20);
	pdk_policy_free(p);
	p = parse_ok("limits: {disk: unlimited}\n");
	cr_assert_eq(p->workspace.mode, PDK_WS_OVERLAY, "a profile from nothing has an overlay");
	cr_assert_eq(p->limits.disk, 0);
	pdk_policy_free(p);
}

Test(policy, error_bad_mode)
{
	expect_one("filesystem:\n  workspace:\n    mode: rwx\n", "filesystem.workspace.mode", 3, 11,
		   "expected one of overlay, rw, ro, tmpfs, none, found 'rwx'");
	expect_one("network:\n  mode: bridge\n", "network.mode", 2, 9,
		   "expected one of none, host, allowlist, found 'bridge'");
}

Test(policy, error_relative_path)
{
	expect_one("filesystem:\n  read_only: [/usr, /bin, usr/lib]\n", "filesystem.read_only[2]",
		   2, 27, "expected an absolute path, found 'usr/lib'");
	expect_one("filesystem:\n  hidden:\n    - ~/.ssh\n", "filesystem.hidden[0]", 3, 7,
		   "'~' is not expanded");
	expect_one("filesystem: {tmpfs: [/tmp/../etc]}\n", "filesystem.tmpfs[0]", 1, 22,
		   "without '.' or '..' components");
	expect_one("filesystem: {read_write: [/]}\n", "filesystem.read_write[0]", 1, 27,
		   "'/' cannot be listed");
	expect_one("filesystem: {read_write: [/a, /a/]}\n", "filesystem.read_write[1]", 1, 31,
		   "'/a' is listed twice");
}

Test(policy, error_refused_etc)
{
	struct pdk_policy_report r = {0};

	cr_assert_null(
		parse("filesystem:\n  etc: [ssl, passwd, shadow, ssl/certs, '..', hosts]\n", &r));
	cr_assert_eq(r.n, 5);
	assert_diag(&r, "filesystem.etc[1]", 2, 14,
		    "'/etc/passwd' cannot be bound: it is generated inside the sandbox");
	assert_diag(&r, "filesystem.etc[2]", 2, 22, "'/etc/shadow' cannot be bound: it holds");
	assert_diag(&r, "filesystem.etc[3]", 2, 30, "expected a name under /etc, not a path");
	assert_diag(&r, "filesystem.etc[4]", 2, 41, "expected a file name under /etc");
	assert_diag(&r, "filesystem.etc[5]", 2, 47, "'/etc/hosts' cannot be bound");
	pdk_policy_report_release(&r);
}

Test(policy, error_duplicate_key)
{
	expect_one("name: a\nlimits:\n  pids: 1\nname: b\n", "name", 4, 1,
		   "duplicate key 'name' (first set on line 1)");
	expect_one("limits:\n  pids: 1\n  memory: 1G\n  pids: 2\n", "limits.pids", 4, 3,
		   "duplicate key 'pids' (first set on line 2)");
	expect_one("env:\n  A: 1\n  A: 2\n", "env.A", 3, 3, "duplicate key 'A'");
}

Test(policy, error_alias)
{
	expect_one("limits: &l {pids: 1}\nprocess: *l\n", "", 1, 9, "YAML anchors are not allowed");
	expect_one("name: x\nhostname: *h\n", "", 2, 11, "YAML aliases are not allowed");
	expect_one("name: !!str x\n", "", 1, 7, "YAML tags are not allowed");
}

Test(policy, error_billion_laughs_is_refused_early)
{
	const char *lol =
		"a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
		"b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
		"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n";

	expect_one(lol, "", 1, 4, "YAML anchors are not allowed");
}

Test(policy, error_syntax)
{
	expect_one("name: x\nlimits: [1, 2\n", "", 3, 1,
		   "while parsing a flow sequence: did not find expected ',' or ']'");
	expect_one("name: x\n  bad: indent\n", "", 2, 6, "mapping values are not allowed");
	expect_one("name: \"\\xff\xff\"\n", "", 1, 12, "invalid");
}

Test(policy, error_too_deep)
{
	char buf[128] = "";
	size_t n = 0;

	for (int i = 0; i < 33; i++)
		buf[n++] = '[';
	for (int i = 0; i < 33; i++)
		buf[n++] = ']';
	buf[n] = '\0';
	expect_one(buf, "", 1, 33, "nesting is deeper than 32 levels");
	buf[0] = ' '; /* 32 levels: the tree is built; the schema refuses the list */
	buf[n - 1] = '\0';
	expect_one(buf, "", 1, 2, "expected a mapping of settings, found a list");
}

Test(policy, error_too_big)
{
	size_t len = (1 << 20) + 1;
	_cleanup_free_ char *big = pdk_xmalloc(len + 1);

	memset(big, '#', len);
	big[len] = '\0';
	expect_one(big, "", 0, 0, "the profile is larger than 1048576 bytes");
	big[len - 1] = '\0';
	big[0] = 'x'; /* one byte less: parsed (and refused for what it says) */
	big[1] = ':';
	big[2] = ' ';
	big[3] = '1';
	big[4] = '\n';
	expect_one(big, "x", 1, 1, "unknown key 'x'");
}

Test(policy, error_empty_and_multiple_documents)
{
	expect_one("# only a comment\n", "", 2, 1, "the profile is empty");
	expect_one("name: a\n---\nname: b\n", "", 2, 1, "only one YAML document is allowed");
}

Test(policy, error_bad_values)
{
	expect_one("hostname: -bad-\n", "hostname", 1, 11, "expected a hostname");
	expect_one("hostname: a..b\n", "hostname", 1, 11, "expected a hostname");
	expect_one("hostname: "
		   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
		   "hostname", 1, 11, "expected a hostname");
	expect_one("env: {1BAD: x}\n", "env.1BAD", 1, 7, "expected a variable name");
	expect_one("env: {GOOD: null}\n", "env.GOOD", 1, 13, "expected a string, found null");
	expect_one("best_effort: [memory, swap]\n", "best_effort[1]", 1, 23,
		   "expected one of memory, pids, cpu, landlock, exec_trace, found 'swap'");
	expect_one("best_effort: [cpu, cpu]\n", "best_effort[1]", 1, 20, "'cpu' is listed twice");
	expect_one("description: \"a\\0b\"\n", "description", 1, 14, "NUL byte");
	expect_one("name: \"a\\nb\"\n", "name", 1, 7, "printable characters");
}

Test(policy, multiple_errors_all_reported)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = pdk_policy_load(DATA "errors.yaml", profile_dir, &r, &err);
	_cleanup_free_ char *all = report_text(&r);

	cr_assert_null(p);
	cr_assert_eq(r.n, 5, "%s", all);
	cr_assert_str_eq(err->msg, "profile '" DATA "errors.yaml' is invalid (5 problems)");
	assert_diag(&r, "filesystem.read_only[1]", 4, 21, "expected an absolute path");
	assert_diag(&r, "filesystem.etc[0]", 5, 9, "'/etc/passwd' cannot be bound");
	assert_diag(&r, "limits.memory", 7, 11, "found 'lots'");
	assert_diag(&r, "limits.wall", 8, 9, "found '10y'");
	assert_diag(&r, "network.mode", 10, 9, "found 'bridge'");
	for (size_t i = 1; i < r.n; i++)
		cr_assert_gt(r.diags[i].line, r.diags[i - 1].line, "in file order");
	pdk_policy_report_release(&r);
}

Test(policy, too_many_errors_are_capped)
{
	char *yaml = pdk_xstrdup("");
	struct pdk_policy_report r = {0};

	for (int i = 0; i < 200; i++) {
		char *next = pdk_xasprintf("%sk%d: 1\n", yaml, i);

		free(yaml);
		yaml = next;
	}
	cr_assert_null(parse(yaml, &r));
	cr_assert_eq(r.n, 65);
	cr_assert_not_null(strstr(r.diags[64].msg, "too many problems"));
	pdk_policy_report_release(&r);
	free(yaml);
}

Test(policy, messages_do_not_carry_control_characters)
{
	struct pdk_policy_report r = {0};

	cr_assert_null(parse("\"\\e[31mred\": 1\nhostname: \"\\e]0;title\\a\"\n", &r));
	cr_assert_eq(r.n, 2);
	for (size_t i = 0; i < r.n; i++) {
		for (const char *c = r.diags[i].msg; *c; c++)
			cr_assert((unsigned char)*c >= 0x20, "control byte in '%s'",
				  r.diags[i].msg);
		for (const char *c = r.diags[i].field; *c; c++)
			cr_assert((unsigned char)*c >= 0x20, "control byte in '%s'",
				  r.diags[i].field);
	}
	pdk_policy_report_release(&r);
}

Test(policy, parse_without_report)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	cr_assert_null(pdk_policy_parse(NULL, "x: 1\n", 5, NULL, &err));
	cr_assert_str_eq(err->msg, "profile '<input>' is invalid (1 problem)");
}

Test(policy, load_too_big_file)
{
	_cleanup_tmp_dir_ char *dir = tmp_dir();
	_cleanup_free_ char *path = pdk_xasprintf("%s/big.yaml", dir);
	_cleanup_free_ char *big = pdk_xmalloc((2 << 20) + 1);
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report r = {0};

	memset(big, '#', 2 << 20);
	big[2 << 20] = '\0';
	write_file(path, big);
	cr_assert_null(pdk_policy_load(path, profile_dir, &r, &err));
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.diags[0].file, path);
	cr_assert_not_null(strstr(r.diags[0].msg, "larger than 1048576 bytes"));
	pdk_policy_report_release(&r);
}

/* Exec tracing is on unless a profile turns it off; it may be marked best effort. */
Test(policy, audit_exec_trace)
{
	struct pdk_policy *on = parse_ok("name: x\n");
	struct pdk_policy *off =
		parse_ok("audit: {exec_trace: false}\nbest_effort: [exec_trace]\n");
	struct pdk_policy *copy;

	cr_assert_eq(on->audit.exec_trace, true);
	cr_assert_eq(off->audit.exec_trace, false);
	cr_assert_eq(off->best_effort, PDK_BE_EXEC_TRACE);
	copy = pdk_policy_dup(off);
	cr_assert_eq(copy->audit.exec_trace, false);
	expect_one("audit: {exec_trace: 1}\n", "audit.exec_trace", 1, 21, "expected true or false");
	expect_one("audit: {trace: false}\n", "audit.trace", 1, 9, "unknown key");
	pdk_policy_free(on);
	pdk_policy_free(off);
	pdk_policy_free(copy);
}
