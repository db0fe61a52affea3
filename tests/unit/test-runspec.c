/*
 * test-runspec.c - what a caller asks for, made into a sandbox's policy,
 * workspace and environment: the typed overrides (policy/overrides.h, with
 * the text parsing of `paddock run`'s flags) and the session's environment
 * (session/session-env.c), shared by `paddock run` and `paddock supervise`.
 */
#include "common.h"
#include "policy.h"
#include "session-internal.h"
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

/* The message of an error (caller frees). */
static char *message(struct pdk_error *err)
{
	char *msg;

	cr_assert_not_null(err);
	msg = steal_ptr(&err->msg);
	pdk_error_free(&err);
	return msg;
}

/* Parse the text of a limit flag and expect failure; returns the message (caller frees). */
static char *parse_fails(enum pdk_override_limit which, const char *text, const char *name)
{
	struct pdk_overrides ov = {0};
	struct pdk_error *err = NULL;

	cr_assert_lt(pdk_overrides_parse_limit(&ov, which, text, name, &err), 0);
	cr_assert(!ov.limits[which].set, "a refused value is not set");
	return message(err);
}

/* Parsing `text` as limit `which` named `name` fails, with a message that holds `want`. */
static void expect_parse_error(enum pdk_override_limit which, const char *text, const char *name,
			       const char *want)
{
	_cleanup_free_ char *msg = parse_fails(which, text, name);

	cr_assert(strstr(msg, want) != NULL, "%s", msg);
}

/* Apply and expect failure; returns the message (caller frees). */
static char *apply_fails(const struct pdk_overrides *ov)
{
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;

	cr_assert_lt(pdk_overrides_apply(ov, p, &err), 0);
	pdk_policy_free(p);
	return message(err);
}

/* The session's options with only a caller's env and the host's environment. */
static struct pdk_session_opts env_opts(char *const *env, const char *name,
					const struct pdk_settings *st)
{
	return (struct pdk_session_opts){.env = env, .env_name = name, .settings = st};
}

Test(runspec, limits_override_and_are_never_best_effort)
{
	struct pdk_overrides ov = {0};
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;

	cr_assert_eq(
		pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_WALL, "1500ms", "limits.wall", &err),
		0);
	cr_assert_eq(
		pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_MEMORY, "64M", "limits.memory", &err),
		0);
	cr_assert_eq(pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_PIDS, "32", "limits.pids", &err),
		     0);
	cr_assert_eq(pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_CPUS, "0.5", "limits.cpu", &err),
		     0);
	cr_assert_eq(pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_EGRESS_BYTES, "10M",
					       "limits.egress_bytes", &err),
		     0);
	p->best_effort |= PDK_BE_MEMORY | PDK_BE_PIDS | PDK_BE_CPU;
	cr_assert_eq(pdk_overrides_apply(&ov, p, &err), 0);
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
	struct pdk_overrides ov = {0};
	struct pdk_error *err = NULL;
	_cleanup_free_ char *me = NULL;

	expect_parse_error(PDK_OVERRIDE_MEMORY, "lots", "--memory", "invalid --memory 'lots'");
	expect_parse_error(PDK_OVERRIDE_MEMORY, "lots", "limits.memory",
			   "invalid limits.memory 'lots'");
	expect_parse_error(PDK_OVERRIDE_WALL, "0", "limits.wall", "invalid limits.wall '0'");
	expect_parse_error(PDK_OVERRIDE_CPUS, "-1", "--cpus", "invalid --cpus '-1'");
	cr_assert_lt(pdk_overrides_parse_ws_mode(&ov, "sideways", "workspace.mode", &err), 0);
	me = message(err);
	cr_assert(strstr(me, "overlay, rw, ro, tmpfs or none") != NULL, "%s", me);
}

Test(runspec, allow_turns_none_into_allowlist_and_is_refused_with_host)
{
	char *allow[] = {"example.com:443", "example.com:443", NULL};
	struct pdk_overrides rs = {.allow = allow, .allow_name = "--allow"};
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;

	p->network.mode = PDK_NET_NONE;
	cr_assert_eq(pdk_overrides_apply(&rs, p, &err), 0);
	cr_assert_eq(p->network.mode, PDK_NET_ALLOWLIST);
	cr_assert_eq(pdk_strv_len(p->network.allow), 1, "a repeated entry is added once");
	p->network.mode = PDK_NET_HOST;
	cr_assert_lt(pdk_overrides_apply(&rs, p, &err), 0);
	cr_assert(strstr(err->msg, "--allow needs network mode none or allowlist") != NULL, "%s",
		  err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
}

Test(runspec, env_order_base_profile_caller)
{
	char *env[] = {"FOO=caller", "HOME=/work", "FROM_HOST", NULL};
	char *host_env[] = {"FROM_HOST=copied", NULL};
	struct pdk_settings st = {.envp = host_env};
	struct pdk_session_opts rs = env_opts(env, "env", &st);
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	char **out = NULL;
	int home = 0;

	pdk_strv_push(&p->env, "FOO=profile");
	pdk_strv_push(&p->env, "BAR=profile");
	cr_assert_eq(pdk__session_env(&rs, p, NULL, &out, &err), 0);
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
	struct pdk_settings st = {0};
	struct pdk_session_opts rs = env_opts(env, "--env", &st);
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	char **out = NULL;

	cr_assert_lt(pdk__session_env(&rs, p, NULL, &out, &err), 0);
	cr_assert_null(out);
	cr_assert(strstr(err->msg, "invalid --env '1BAD=x'") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	pdk_policy_free(p);
}

Test(runspec, workspace_checks)
{
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	struct pdk_overrides root = {.workspace = "/"};
	struct pdk_overrides missing = {.workspace = "/nonexistent-paddock-ws"};
	struct pdk_overrides file = {.workspace = "/etc/passwd"};
	struct pdk_overrides tmp = {.workspace = "/tmp/../tmp"};
	char *out = NULL;

	p->workspace.mode = PDK_WS_OVERLAY;
	cr_assert_lt(pdk_overrides_workspace(&root, p, &out, &err), 0);
	cr_assert(strstr(err->msg, "cannot be '/'") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_lt(pdk_overrides_workspace(&missing, p, &out, &err), 0);
	pdk_error_free(&err);
	cr_assert_lt(pdk_overrides_workspace(&file, p, &out, &err), 0);
	cr_assert(strstr(err->msg, "not a directory") != NULL, "%s", err->msg);
	pdk_error_free(&err);
	cr_assert_eq(pdk_overrides_workspace(&tmp, p, &out, &err), 0);
	cr_assert_str_eq(out, "/tmp", "resolved to its real path");
	free(out);
	p->workspace.mode = PDK_WS_NONE;
	cr_assert_eq(pdk_overrides_workspace(&tmp, p, &out, &err), 0);
	cr_assert_null(out, "mode none: no workspace");
	pdk_policy_free(p);
}

Test(runspec, flag_text_becomes_typed_values)
{
	struct pdk_overrides ov = {0};
	struct pdk_error *err = NULL;

	cr_assert_eq(pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_WALL, "30s", "--timeout", &err),
		     0);
	cr_assert_eq(pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_MEMORY, "2G", "--memory", &err),
		     0);
	cr_assert_eq(pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_CPUS, "1.5", "--cpus", &err), 0);
	cr_assert_eq(pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_PIDS, "4194304", "--pids", &err),
		     0);
	cr_assert_eq(pdk_overrides_parse_limit(&ov, PDK_OVERRIDE_DISK, "100M", NULL, &err), 0);
	cr_assert_eq(pdk_overrides_parse_ws_mode(&ov, "tmpfs", "--workspace-mode", &err), 0);
	cr_assert_eq(pdk_overrides_parse_net_mode(&ov, "allowlist", NULL, &err), 0);
	cr_assert_eq(ov.limits[PDK_OVERRIDE_WALL].value, 30000, "durations in ms");
	cr_assert_eq(ov.limits[PDK_OVERRIDE_MEMORY].value, 2ULL << 30, "sizes in bytes");
	cr_assert_eq(ov.limits[PDK_OVERRIDE_CPUS].value, 1500, "CPUs in thousandths");
	cr_assert_eq(ov.limits[PDK_OVERRIDE_PIDS].value, 4194304);
	cr_assert_str_eq(ov.limits[PDK_OVERRIDE_WALL].name, "--timeout");
	cr_assert_str_eq(ov.limits[PDK_OVERRIDE_DISK].name, "limits.disk",
			 "the policy file's name");
	cr_assert(ov.ws_mode.set && ov.ws_mode.value == PDK_WS_TMPFS);
	cr_assert(ov.net_mode.set && ov.net_mode.value == PDK_NET_ALLOWLIST);
	cr_assert(!ov.limits[PDK_OVERRIDE_EGRESS_BYTES].set, "what is not given is not set");
}

Test(runspec, flag_text_out_of_range_quotes_the_text)
{
	struct pdk_overrides ov = {0};
	struct pdk_error *err = NULL;
	_cleanup_free_ char *a = parse_fails(PDK_OVERRIDE_MEMORY, "512K", "--memory");
	_cleanup_free_ char *e = NULL;

	cr_assert_str_eq(a, "invalid --memory '512K': expected a size of at least 1M, such as 512M "
			    "or 2G");
	expect_parse_error(PDK_OVERRIDE_PIDS, "4194305", "--pids",
			   "invalid --pids '4194305': expected a whole number");
	expect_parse_error(PDK_OVERRIDE_CPUS, "0.0001", "--cpus", "invalid --cpus '0.0001'");
	expect_parse_error(PDK_OVERRIDE_DISK, "1K", "--disk", "invalid --disk '1K'");
	cr_assert_lt(pdk_overrides_parse_net_mode(&ov, "open", "overrides.network.mode", &err), 0);
	e = message(err);
	cr_assert_str_eq(e, "invalid overrides.network.mode 'open': expected none, allowlist or "
			    "host");
}

Test(runspec, typed_values_are_checked_again_when_applied)
{
	struct pdk_overrides mem = {.limits[PDK_OVERRIDE_MEMORY] = {true, 512, "limits.memory"}};
	struct pdk_overrides wall = {.limits[PDK_OVERRIDE_WALL] = {true, 0, NULL}};
	struct pdk_overrides cpus = {.limits[PDK_OVERRIDE_CPUS] = {true, 2000000, "limits.cpu"}};
	struct pdk_overrides pids = {.limits[PDK_OVERRIDE_PIDS] = {true, 0, "limits.pids"}};
	_cleanup_free_ char *a = apply_fails(&mem), *b = apply_fails(&wall),
			    *c = apply_fails(&cpus), *d = apply_fails(&pids);

	cr_assert_str_eq(a, "invalid limits.memory (512 bytes): expected a size of at least 1M, "
			    "such as 512M or 2G");
	cr_assert(strstr(b, "invalid limits.wall (0 ms)") != NULL, "unnamed: the file's name: %s",
		  b);
	cr_assert(strstr(c, "invalid limits.cpu (2000.000 CPUs)") != NULL, "%s", c);
	cr_assert(strstr(d, "invalid limits.pids (0)") != NULL, "%s", d);
}

Test(runspec, network_mode_is_applied_before_the_allow_list)
{
	char *allow[] = {"example.com:443", NULL};
	struct pdk_overrides host = {.net_mode = {true, PDK_NET_HOST, "overrides.network.mode"},
				     .allow = allow,
				     .allow_name = "overrides.network.allow"};
	struct pdk_overrides none = {.net_mode = {true, PDK_NET_NONE, NULL}, .allow = allow};
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	_cleanup_free_ char *m = apply_fails(&host);

	cr_assert(strstr(m, "overrides.network.allow needs network mode none or allowlist") != NULL,
		  "%s", m);
	cr_assert_eq(pdk_overrides_apply(&none, p, &err), 0);
	cr_assert_eq(p->network.mode, PDK_NET_ALLOWLIST, "none plus an allow list is allowlist");
	pdk_policy_free(p);
}

Test(runspec, change_set_and_discard_rules)
{
	struct pdk_overrides named = {.change_set = "0123", .workspace = "/tmp"};
	struct pdk_overrides named_rw = {.change_set = "0123", .ws_mode = {true, PDK_WS_RW, NULL}};
	struct pdk_overrides discard_rw = {.discard = true, .ws_mode = {true, PDK_WS_RW, NULL}};
	struct pdk_overrides named_ok = {.change_set = "0123", .discard = true};
	struct pdk_policy *p = load("default");
	struct pdk_error *err = NULL;
	_cleanup_free_ char *a = apply_fails(&named), *b = apply_fails(&named_rw),
			    *c = apply_fails(&discard_rw);

	cr_assert(strstr(a, "invalid --change-set '0123'") != NULL, "%s", a);
	cr_assert(strstr(b, "no other --workspace-mode") != NULL, "%s", b);
	cr_assert_str_eq(c, "--discard needs the overlay workspace mode (it is 'rw')");
	p->workspace.mode = PDK_WS_RW;
	cr_assert_eq(pdk_overrides_apply(&named_ok, p, &err), 0);
	cr_assert_eq(p->workspace.mode, PDK_WS_OVERLAY, "a change set is an overlay");
	pdk_policy_free(p);
}

Test(runspec, cpus_in_thousandths)
{
	uint64_t m = 0;

	cr_assert_eq(pdk_override_cpus_milli(0.5, &m), 0);
	cr_assert_eq(m, 500);
	cr_assert_eq(pdk_override_cpus_milli(1024, &m), 0);
	cr_assert_eq(m, 1024000);
	cr_assert_lt(pdk_override_cpus_milli(0, &m), 0);
	cr_assert_lt(pdk_override_cpus_milli(-1, &m), 0);
	cr_assert_lt(pdk_override_cpus_milli(0.0004, &m), 0, "rounds to no CPU at all");
	cr_assert_lt(pdk_override_cpus_milli(1e300, &m), 0);
}
