/*
 * test-recipe.c - the build recipe's reader (policy/recipe.c): a whole
 * recipe read into its struct, and each class of problem reported with its
 * file, line, column and field, all problems of a file at once.
 */
#include "common.h"
#include "error.h"
#include "policy-internal.h"
#include "util.h"
#include "test-helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct pdk_recipe *parse(const char *yaml, struct pdk_policy_report *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_recipe *p = pdk_recipe_parse("recipe.yaml", yaml, strlen(yaml), r, &err);

	cr_assert((p == NULL) == (err != NULL), "a result or an error, never both");
	if (p == NULL) {
		cr_assert_eq(err->status, EINVAL);
		cr_assert_not_null(strstr(err->msg, "recipe 'recipe.yaml' is invalid"), "%s",
				   err->msg);
	}
	return p;
}

static char *report_text(const struct pdk_policy_report *r)
{
	struct pdk_test_text t;

	pdk_policy_report_print(r, pdk_test_text_open(&t));
	return pdk_test_text_take(&t);
}

/* The report holds the line "recipe.yaml:LINE:COL: FIELD: ..." with `msg` in it. */
static void assert_diag(const struct pdk_policy_report *r, const char *field, int line, int col,
			const char *msg)
{
	_cleanup_free_ char *all = report_text(r);

	for (size_t i = 0; i < r->n; i++) {
		const struct pdk_policy_diag *d = &r->diags[i];

		if (strcmp(d->field, field) != 0)
			continue;
		cr_assert_str_eq(d->file, "recipe.yaml");
		cr_assert_eq(d->line, line, "%s: line %d, expected %d\n%s", field, d->line, line,
			     all);
		cr_assert_eq(d->column, col, "%s: column %d, expected %d\n%s", field, d->column,
			     col, all);
		cr_assert_not_null(strstr(d->msg, msg), "%s: no '%s' in\n%s", field, msg, all);
		return;
	}
	cr_assert_fail("no diagnostic for '%s':\n%s", field, all);
}

static void expect_one(const char *yaml, const char *field, int line, int col, const char *msg)
{
	struct pdk_policy_report r = {0};
	struct pdk_recipe *p = parse(yaml, &r);

	cr_assert_null(p);
	assert_diag(&r, field, line, col, msg);
	cr_assert_eq(r.n, 1, "one diagnostic expected, got %zu", r.n);
	pdk_policy_report_release(&r);
}

Test(recipe, whole)
{
	static const char yaml[] =
		"name: python-3.12-datasci\n"
		"description: Python with numpy and pandas\n"
		"debian:\n"
		"  suite: bookworm\n"
		"  mirror: http://deb.debian.org/debian\n"
		"  variant: minbase\n"
		"network: [deb.debian.org, 'Security.Debian.org:80']\n"
		"packages: [python3, python3-numpy, python3-pandas=1.5.3+dfsg-2]\n"
		"run:\n"
		"  - echo one > /etc/one\n"
		"  - |\n"
		"    set -e\n"
		"    echo two\n"
		"config:\n"
		"  env: {LANG: C.UTF-8, PYTHONUNBUFFERED: '1'}\n"
		"  workdir: /work\n"
		"  user: 1000:1000\n"
		"  entrypoint: [python3, -c, python3]\n";
	struct pdk_policy_report r = {0};
	struct pdk_recipe *p = parse(yaml, &r);

	cr_assert_not_null(p, "%s", report_text(&r));
	cr_assert_str_eq(p->name, "python-3.12-datasci");
	cr_assert_str_eq(p->source, "recipe.yaml");
	cr_assert_null(p->from);
	cr_assert_str_eq(p->debian.suite, "bookworm");
	cr_assert_str_eq(p->debian.variant, "minbase");
	cr_assert_str_eq(p->network[0], "deb.debian.org");
	cr_assert_str_eq(p->network[1], "security.debian.org:80");
	cr_assert_eq(pdk_strv_len(p->packages), 3);
	cr_assert_eq(p->n_steps, 2);
	cr_assert_str_eq(p->steps[0].run, "echo one > /etc/one");
	cr_assert_eq(p->steps[0].line, 10);
	cr_assert_str_eq(p->steps[1].run, "set -e\necho two\n");
	cr_assert_eq(p->steps[1].line, 11);
	cr_assert_str_eq(p->config.env[1], "PYTHONUNBUFFERED=1");
	cr_assert_str_eq(p->config.workdir, "/work");
	cr_assert_str_eq(p->config.user, "1000:1000");
	cr_assert_str_eq(p->config.entrypoint[2], "python3");
	pdk_recipe_free(p);
	pdk_policy_report_release(&r);
}

Test(recipe, from_an_image)
{
	struct pdk_policy_report r = {0};
	struct pdk_recipe *p = parse("name: tools:1\nfrom: busybox\nrun: [true]\n", &r);

	cr_assert_not_null(p, "%s", report_text(&r));
	cr_assert_str_eq(p->from, "busybox");
	cr_assert_str_eq(p->name, "tools:1");
	cr_assert_null(p->network);
	pdk_recipe_free(p);
	pdk_policy_report_release(&r);
}

Test(recipe, one_problem_each)
{
	expect_one("from: busybox\n", "name", 1, 1, "names the image");
	expect_one("name: a b\nfrom: busybox\n", "name", 1, 7, "expected an image name");
	expect_one("name: x\nfrom: sha256:12\n", "from", 2, 7, "sha256:DIGEST");
	expect_one("name: x\n", "from", 1, 1, "starts from an image");
	expect_one("name: x\nfrom: b\ndebian: {suite: bookworm}\n", "debian", 3, 9,
		   "'from' (line 2) or 'debian', not both");
	expect_one("name: x\ndebian: {mirror: 'http://m'}\n", "debian.suite", 2, 9,
		   "suite to bootstrap is missing");
	expect_one("name: x\ndebian: {suite: bookworm, mirror: 'ftp://m'}\n", "debian.mirror", 2,
		   35, "http:// or https:// URL");
	expect_one("name: x\ndebian: {suite: '-o x'}\n", "debian.suite", 2, 17, "a suite name");
	expect_one("name: x\nfrom: b\npackages: [Python3]\n", "packages[0]", 3, 12,
		   "Debian package name");
	expect_one("name: x\nfrom: b\npackages: [vim, vim]\n", "packages[1]", 3, 17,
		   "listed twice");
	expect_one("name: x\nfrom: b\nnetwork: ['http://x/']\n", "network[0]", 3, 11,
		   "is not a host");
	expect_one("name: x\nfrom: b\nrun: echo\n", "run", 3, 6, "a list of shell commands");
	expect_one("name: x\nfrom: b\nrun:\n  - true\n  - ''\n", "run[1]", 5, 5, "a shell command");
	expect_one("name: x\nfrom: b\nconfig: {workdir: rel}\n", "config.workdir", 3, 19,
		   "an absolute path");
	expect_one("name: x\nfrom: b\nconfig: {user: 'a b'}\n", "config.user", 3, 16,
		   "NAME, UID or UID:GID");
	expect_one("name: x\nfrom: b\nconfig: {entrypoint: []}\n", "config.entrypoint", 3, 22,
		   "1 to 64 arguments");
	expect_one("name: x\nfrom: b\nconfig: {env: {1X: y}}\n", "config.env.1X", 3, 16,
		   "a variable name");
	expect_one("name: x\nfrom: b\nstep: [true]\n", "step", 3, 1, "unknown key 'step'");
	expect_one("name: x\nfrom: b\nname: y\n", "name", 3, 1, "duplicate key");
	expect_one("- a\n", "", 1, 1, "expected a mapping");
}

Test(recipe, every_problem_at_once)
{
	static const char yaml[] = "name: 'bad name'\n"
				   "from: busybox\n"
				   "packages: [BAD]\n"
				   "run: [true, '']\n";
	struct pdk_policy_report r = {0};
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_recipe *p = pdk_recipe_parse("recipe.yaml", yaml, strlen(yaml), &r, &err);

	cr_assert_null(p);
	cr_assert_eq(r.n, 3, "%s", report_text(&r));
	cr_assert_str_eq(err->msg, "recipe 'recipe.yaml' is invalid (3 problems)");
	assert_diag(&r, "name", 1, 7, "image name");
	assert_diag(&r, "packages[0]", 3, 12, "package");
	assert_diag(&r, "run[1]", 4, 13, "shell command");
	pdk_policy_report_release(&r);
}

Test(recipe, yaml_syntax_and_load)
{
	struct pdk_policy_report r = {0};
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_recipe *p = parse("name: [x\n", &r);

	cr_assert_null(p);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.diags[0].line, 2, "%s", report_text(&r));
	pdk_policy_report_release(&r);

	p = pdk_recipe_load("/nonexistent/recipe.yaml", &r, &err);
	cr_assert_null(p);
	cr_assert_str_eq(
		err->msg,
		"cannot open recipe '/nonexistent/recipe.yaml': No such file or directory");
	pdk_policy_report_release(&r);
}
