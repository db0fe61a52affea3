/*
 * test-runspec.c - the request -> policy/workspace/env code shared by
 * `paddock run` and `paddock supervise`.
 */
#include "common.h"
#include "policy.h"
#include "runspec.h"
#include "util.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct pdk_policy *load(const char *name)
{
	struct pdk_error *err = NULL;
	struct pdk_policy *p = pdk_policy_load(name, NULL, NULL, &err);

	cr_assert_not_null(p, "%s", err ? err->msg : "");
	return p;
}

/* Apply and expect failure; returns the message (caller frees). */
static char *apply_fails(const struct pdk_runspec *rs)
{
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	char *msg;

	cr_assert_lt(pdk_runspec_apply(rs, p, &err), 0);
	cr_assert_not_null(err);
	msg = steal_ptr(&err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
	return msg;
}

Test(runspec, limits_override_and_are_never_best_effort)
{
	struct pdk_runspec rs = {
		.wall = {"1500ms", "limits.wall"},
		.memory = {"64M", "limits.memory"},
		.pids = {"32", "limits.pids"},
		.cpus = {"0.5", "limits.cpu"},
		.egress_bytes = {"10M", "limits.egress_bytes"},
	};
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;

	p->best_effort |= PDK_BE_MEMORY | PDK_BE_PIDS | PDK_BE_CPU;
	cr_assert_eq(pdk_runspec_apply(&rs, p, &err), 0);
	cr_assert_eq(p->limits.wall_ms, 1500);
	cr_assert_eq(p->limits.memory, 64ULL << 20);
	cr_assert_eq(p->limits.pids, 32);
	cr_assert_eq(p->limits.cpu_milli, 500);
	cr_assert_eq(p->limits.egress_bytes, 10ULL << 20);
	cr_assert_eq(p->best_effort & (PDK_BE_MEMORY | PDK_BE_PIDS | PDK_BE_CPU), 0);
	pdk_policy_free(p);
}

Test(runspec, bad_values_are_named_as_the_caller_knows_them)
{
	struct pdk_runspec a = {.memory = {"lots", "--memory"}};
	struct pdk_runspec b = {.memory = {"lots", "limits.memory"}};
	struct pdk_runspec c = {.wall = {"0", "limits.wall"}};
	struct pdk_runspec d = {.cpus = {"-1", "--cpus"}};
	struct pdk_runspec e = {.ws_mode = {"sideways", "workspace.mode"}};
	_cleanup_free_ char *ma = apply_fails(&a), *mb = apply_fails(&b), *mc = apply_fails(&c),
			    *md = apply_fails(&d), *me = apply_fails(&e);

	cr_assert(strstr(ma, "invalid --memory 'lots'") != NULL, "%s", ma);
	cr_assert(strstr(mb, "invalid limits.memory 'lots'") != NULL, "%s", mb);
	cr_assert(strstr(mc, "invalid limits.wall '0'") != NULL, "%s", mc);
	cr_assert(strstr(md, "invalid --cpus '-1'") != NULL, "%s", md);
	cr_assert(strstr(me, "overlay, rw, ro, tmpfs or none") != NULL, "%s", me);
}

Test(runspec, allow_turns_none_into_allowlist_and_is_refused_with_host)
{
	char *allow[] = {"example.com:443", "example.com:443", NULL};
	struct pdk_runspec rs = {.allow = allow, .allow_name = "--allow"};
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;

	p->network.mode = PDK_NET_NONE;
	cr_assert_eq(pdk_runspec_apply(&rs, p, &err), 0);
	cr_assert_eq(p->network.mode, PDK_NET_ALLOWLIST);
	cr_assert_eq(pdk_strv_len(p->network.allow), 1, "a repeated entry is added once");
	p->network.mode = PDK_NET_HOST;
	cr_assert_lt(pdk_runspec_apply(&rs, p, &err), 0);
	cr_assert(strstr(err->msg, "--allow needs network mode none or allowlist") != NULL, "%s",
		  err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
}

Test(runspec, env_order_base_profile_caller)
{
	char *env[] = {"FOO=caller", "HOME=/work", "FROM_HOST", NULL};
	char *host_env[] = {"FROM_HOST=copied", NULL};
	struct pdk_runspec rs = {.env = env, .env_name = "env", .host_env = host_env};
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	char **out = NULL;
	int home = 0;

	pdk_strv_push(&p->env, "FOO=profile");
	pdk_strv_push(&p->env, "BAR=profile");
	cr_assert_eq(pdk_runspec_env(&rs, p, &out, &err), 0);
	for (size_t i = 0; out[i] != NULL; i++) {
		cr_assert(strncmp(out[i], "FOO=", 4) != 0 || strcmp(out[i], "FOO=caller") == 0,
			  "%s", out[i]);
		if (strncmp(out[i], "HOME=", 5) == 0) {
			home++;
			cr_assert_str_eq(out[i], "HOME=/work");
		}
	}
	cr_assert_eq(home, 1, "one HOME, the caller's");
	cr_assert(pdk_strv_len(out) >= 6);
	{
		bool bar = false, host = false, path = false;

		for (size_t i = 0; out[i] != NULL; i++) {
			bar |= strcmp(out[i], "BAR=profile") == 0;
			host |= strcmp(out[i], "FROM_HOST=copied") == 0;
			path |= strncmp(out[i], "PATH=", 5) == 0;
		}
		cr_assert(bar && host && path);
	}
	pdk_strv_free(out);
	pdk_policy_free(p);
}

Test(runspec, env_bad_name_is_refused)
{
	char *env[] = {"1BAD=x", NULL};
	struct pdk_runspec rs = {.env = env, .env_name = "--env"};
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	char **out = NULL;

	cr_assert_lt(pdk_runspec_env(&rs, p, &out, &err), 0);
	cr_assert_null(out);
	cr_assert(strstr(err->msg, "invalid --env '1BAD=x'") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
}

Test(runspec, workspace_checks)
{
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	struct pdk_runspec root = {.workspace = "/"};
	struct pdk_runspec missing = {.workspace = "/nonexistent-paddock-ws"};
	struct pdk_runspec file = {.workspace = "/etc/passwd"};
	struct pdk_runspec tmp = {.workspace = "/tmp/../tmp"};
	char *out = NULL;

	p->workspace.mode = PDK_WS_OVERLAY;
	cr_assert_lt(pdk_runspec_workspace(&root, p, &out, &err), 0);
	cr_assert(strstr(err->msg, "cannot be '/'") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_lt(pdk_runspec_workspace(&missing, p, &out, &err), 0);
	pdk_error_free(&err);
	cr_assert_lt(pdk_runspec_workspace(&file, p, &out, &err), 0);
	cr_assert(strstr(err->msg, "not a directory") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_eq(pdk_runspec_workspace(&tmp, p, &out, &err), 0);
	cr_assert_str_eq(out, "/tmp", "resolved to its real path");
	free(out);
	p->workspace.mode = PDK_WS_NONE;
	cr_assert_eq(pdk_runspec_workspace(&tmp, p, &out, &err), 0);
	cr_assert_null(out, "mode none: no workspace");
	pdk_policy_free(p);
}
