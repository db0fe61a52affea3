#include "common.h"
#include "request.h"
#include "token.h"
#include "util.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#define S(x) x, strlen(x)

/* Refused, naming `field`. */
static void create_refused(const char *body, const char *field)
{
	struct pdk_req_create r;
	struct pdk_req_error e = {0};

	cr_assert_eq(pdk_req_parse_create(S(body), &r, &e), -1, "accepted: %s", body);
	cr_assert_str_eq(e.field, field, "%s: field '%s' (%s)", body, e.field, e.msg);
	cr_assert_neq(e.msg[0], '\0');
}

static void exec_refused(const char *body, const char *field)
{
	struct pdk_req_exec r;
	struct pdk_req_error e = {0};

	cr_assert_eq(pdk_req_parse_exec(S(body), &r, &e), -1, "accepted: %s", body);
	cr_assert_str_eq(e.field, field, "%s: field '%s' (%s)", body, e.field, e.msg);
}

Test(request, create_defaults_and_full)
{
	struct pdk_req_create r;
	struct pdk_req_error e = {0};

	cr_assert_eq(pdk_req_parse_create(NULL, 0, &r, &e), 0);
	cr_assert_str_eq(r.profile, "default");
	cr_assert_eq(json_object_size(r.labels), 0);
	pdk_req_create_release(&r);
	cr_assert_eq(pdk_req_parse_create(S("{\"profile\":\"net\",\"ttl\":\"1h\",\"idle_timeout\":"
					    "600,\"labels\":{\"session\":\"s1\"},\"env\":{\"A\":"
					    "\"b\"},\"idempotency_key\":\"k\",\"workspace\":{"
					    "\"path\":null,\"mode\":\"overlay\"},\"overrides\":{"
					    "\"limits\":{\"memory\":\"512M\",\"pids\":64,\"cpu\":"
					    "0.5,\"wall\":\"10m\"},\"network\":{\"mode\":"
					    "\"allowlist\",\"allow\":[\"example.com:443\"]}}}"),
					  &r, &e),
		     0, "%s: %s", e.field, e.msg);
	cr_assert_str_eq(r.profile, "net");
	cr_assert_eq(r.ttl_s, 3600);
	cr_assert_eq(r.idle_timeout_s, 600);
	cr_assert_str_eq(r.idempotency_key, "k");
	cr_assert_str_eq(json_string_value(json_object_get(r.labels, "session")), "s1");
	pdk_req_create_release(&r);
}

Test(request, create_refusals_name_the_field)
{
	create_refused("[1]", "");
	create_refused("{\"ttl\":", "");
	create_refused("{\"bogus\":1}", "bogus");
	create_refused("{\"ttl\":\"soon\"}", "ttl");
	create_refused("{\"ttl\":-1}", "ttl");
	create_refused("{\"ttl\":true}", "ttl");
	create_refused("{\"idle_timeout\":[]}", "idle_timeout");
	create_refused("{\"profile\":\"../etc\"}", "profile");
	create_refused("{\"profile\":7}", "profile");
	create_refused("{\"labels\":{\"Session\":\"x\"}}", "labels.Session");
	create_refused("{\"labels\":{\"session\":1}}", "labels.session");
	create_refused("{\"env\":{\"1A\":\"x\"}}", "env.1A");
	create_refused("{\"overrides\":{\"limits\":{\"memory\":\"lots\"}}}",
		       "overrides.limits.memory");
	create_refused("{\"overrides\":{\"limits\":{\"swap\":1}}}", "overrides.limits.swap");
	create_refused("{\"overrides\":{\"network\":{\"mode\":\"open\"}}}",
		       "overrides.network.mode");
	create_refused("{\"overrides\":{\"network\":{\"allow\":[\"a b\"]}}}",
		       "overrides.network.allow[0]");
	create_refused("{\"workspace\":{\"path\":\"rel\"}}", "workspace.path");
	create_refused("{\"workspace\":{\"path\":\"/a/../b\"}}", "workspace.path");
	create_refused("{\"workspace\":{\"mode\":\"cow\"}}", "workspace.mode");
	create_refused("{\"idempotency_key\":\"\"}", "idempotency_key");
	create_refused("{\"ttl\":1,\"ttl\":2}", "");
}

Test(request, exec_argv_cmd_and_stdin)
{
	struct pdk_req_exec r;
	struct pdk_req_error e = {0};

	cr_assert_eq(pdk_req_parse_exec(S("{\"argv\":[\"echo\",\"hi\"],\"env\":{\"X\":\"1\"},"
					  "\"cwd\":\"/tmp\",\"timeout\":\"2s\",\"stdin_b64\":"
					  "\"aGVsbG8=\"}"),
					&r, &e),
		     0, "%s: %s", e.field, e.msg);
	cr_assert_str_eq(r.argv[1], "hi");
	cr_assert_str_eq(r.env[0], "X=1");
	cr_assert_eq(r.timeout_ms, 2000);
	cr_assert_eq(r.stdin_len, 5);
	cr_assert(memcmp(r.stdin_data, "hello", 5) == 0);
	cr_assert_eq(r.output_cap, PDK_REQ_OUTPUT_CAP_DEFAULT);
	pdk_req_exec_release(&r);
	cr_assert_eq(pdk_req_parse_exec(S("{\"cmd\":\"echo $X\",\"timeout\":1500}"), &r, &e), 0);
	cr_assert_str_eq(r.argv[0], "/bin/sh");
	cr_assert_str_eq(r.argv[2], "echo $X");
	cr_assert_eq(r.timeout_ms, 1500);
	pdk_req_exec_release(&r);
}

Test(request, exec_refusals_name_the_field)
{
	exec_refused("{}", "argv");
	exec_refused("{\"argv\":[]}", "argv");
	exec_refused("{\"argv\":\"ls\"}", "argv");
	exec_refused("{\"argv\":[1]}", "argv[0]");
	exec_refused("{\"argv\":[\"\"]}", "argv[0]");
	exec_refused("{\"argv\":[\"ls\",null]}", "argv[1]");
	exec_refused("{\"argv\":[\"a\\u0000b\"]}", "");
	exec_refused("{\"argv\":[\"ls\"],\"cmd\":\"ls\"}", "cmd");
	exec_refused("{\"argv\":[\"ls\"],\"cwd\":\"tmp\"}", "cwd");
	exec_refused("{\"argv\":[\"ls\"],\"timeout\":\"x\"}", "timeout");
	exec_refused("{\"argv\":[\"ls\"],\"output_cap\":1}", "output_cap");
	exec_refused("{\"argv\":[\"ls\"],\"output_cap\":\"big\"}", "output_cap");
	exec_refused("{\"argv\":[\"ls\"],\"stream\":1}", "stream");
	exec_refused("{\"argv\":[\"ls\"],\"stdin_b64\":\"***\"}", "stdin_b64");
	exec_refused("{\"argv\":[\"ls\"],\"env\":{\"A=B\":\"x\"}}", "env.A=B");
	exec_refused("{\"argv\":[\"ls\"],\"shell\":true}", "shell");
}

Test(request, token_kill_pool_name_signal)
{
	struct pdk_req_token t;
	struct pdk_req_kill k;
	struct pdk_req_error e = {0};
	uint64_t size;
	char *name = NULL;
	bool restart;
	int sig = 0;

	cr_assert_eq(pdk_req_parse_token(S("{\"ops\":[\"exec\",\"read\"],\"ttl\":\"5m\"}"), &t, &e),
		     0);
	cr_assert_eq(t.ops, PDK_TOKEN_OP_EXEC | PDK_TOKEN_OP_READ);
	cr_assert_eq(t.ttl_s, 300);
	cr_assert_eq(pdk_req_parse_token(S("{\"ops\":[\"root\"]}"), &t, &e), -1);
	cr_assert_str_eq(e.field, "ops[0]");
	cr_assert_eq(pdk_req_parse_token(S("{\"ops\":[\"exec\"],\"ttl\":\"2d\"}"), &t, &e), -1);
	cr_assert_str_eq(e.field, "ttl");

	cr_assert_eq(pdk_req_parse_kill(S("{}"), &k, &e), -1);
	cr_assert_str_eq(e.field, "session");
	cr_assert_eq(pdk_req_parse_kill(S("{\"ids\":[\"a\",3]}"), &k, &e), -1);
	cr_assert_str_eq(e.field, "ids[1]");
	cr_assert_eq(pdk_req_parse_kill(S("{\"session\":\"s\",\"reason\":\"r\"}"), &k, &e), 0);
	cr_assert_str_eq(k.session, "s");
	pdk_req_kill_release(&k);
	cr_assert_eq(pdk_req_parse_kill(S("{\"all\":true,\"reason\":\"r\"}"), &k, &e), 0);
	cr_assert(k.all);
	pdk_req_kill_release(&k);
	cr_assert_eq(pdk_req_parse_kill(S("{\"all\":true,\"labels\":{}}"), &k, &e), -1);
	cr_assert_str_eq(e.field, "all");
	cr_assert_eq(pdk_req_parse_kill(S("{\"all\":false}"), &k, &e), -1);
	cr_assert_str_eq(e.field, "session");

	cr_assert_eq(pdk_req_parse_pool(S("{\"size\":3}"), &size, &e), 0);
	cr_assert_eq(size, 3);
	cr_assert_eq(pdk_req_parse_pool(S("{\"size\":1000}"), &size, &e), -1);
	cr_assert_str_eq(e.field, "size");
	cr_assert_eq(pdk_req_parse_pool(S("{}"), &size, &e), -1);

	cr_assert_eq(pdk_req_parse_name(S("{\"name\":\"v1\"}"), "name", true, &name, &e), 0);
	cr_assert_str_eq(name, "v1");
	free(name);
	cr_assert_eq(pdk_req_parse_name(S("{\"name\":\"a/b\"}"), "name", true, &name, &e), -1);
	cr_assert_str_eq(e.field, "name");

	restart = false;
	cr_assert_eq(pdk_req_parse_ws(S("{\"name\":\"v2\",\"restart\":true}"), "name", false, &name,
				      &restart, &e),
		     0);
	cr_assert_str_eq(name, "v2");
	cr_assert(restart);
	free(name);
	cr_assert_eq(pdk_req_parse_ws(S("{\"restart\":1}"), "name", false, &name, &restart, &e),
		     -1);
	cr_assert_str_eq(e.field, "restart");
	cr_assert_eq(
		pdk_req_parse_ws(S("{\"restart\":false}"), "snapshot", true, &name, &restart, &e),
		-1);
	cr_assert_str_eq(e.field, "snapshot");
	/* commit: no name key, "restart" only */
	cr_assert_eq(pdk_req_parse_ws(S("{\"restart\":true}"), NULL, false, NULL, &restart, &e), 0);
	cr_assert(restart);
	cr_assert_eq(pdk_req_parse_ws(S("{\"name\":\"x\"}"), NULL, false, NULL, &restart, &e), -1);
	cr_assert_str_eq(e.field, "name");
	cr_assert_eq(pdk_req_parse_ws(NULL, 0, NULL, false, NULL, &restart, &e), 0);
	cr_assert(!restart);

	cr_assert_eq(pdk_req_parse_signal(S("{\"signal\":\"SIGTERM\"}"), &sig, &e), 0);
	cr_assert_eq(sig, SIGTERM);
	cr_assert_eq(pdk_req_parse_signal(S("{\"signal\":9}"), &sig, &e), 0);
	cr_assert_eq(sig, 9);
	cr_assert_eq(pdk_req_parse_signal(S("{\"signal\":\"NOPE\"}"), &sig, &e), -1);
	cr_assert_str_eq(e.field, "signal");
}

Test(request, resize)
{
	struct pdk_req_error e = {0};
	uint64_t cols = 0, rows = 0;

	cr_assert_eq(pdk_req_parse_resize(S("{\"cols\":100,\"rows\":30}"), &cols, &rows, &e), 0);
	cr_assert_eq(cols, 100);
	cr_assert_eq(rows, 30);
	cr_assert_eq(pdk_req_parse_resize(S("{\"cols\":0,\"rows\":30}"), &cols, &rows, &e), -1);
	cr_assert_str_eq(e.field, "cols");
	cr_assert_eq(pdk_req_parse_resize(S("{\"cols\":80}"), &cols, &rows, &e), -1);
	cr_assert_str_eq(e.field, "rows");
	cr_assert_eq(pdk_req_parse_resize(S("{\"cols\":80,\"rows\":5000}"), &cols, &rows, &e), -1);
	cr_assert_str_eq(e.field, "rows");
	cr_assert_eq(pdk_req_parse_resize(S("{\"cols\":\"wide\",\"rows\":5}"), &cols, &rows, &e),
		     -1);
	cr_assert_str_eq(e.field, "cols");
	cr_assert_eq(pdk_req_parse_resize(S("{\"cols\":8,\"rows\":5,\"x\":1}"), &cols, &rows, &e),
		     -1);
	cr_assert_str_eq(e.field, "x");
}

Test(request, exec_stdin_open)
{
	struct pdk_req_error e = {0};
	struct pdk_req_exec x;

	cr_assert_eq(pdk_req_parse_exec(S("{\"argv\":[\"cat\"],\"stdin_open\":true}"), &x, &e), 0);
	cr_assert(x.stdin_open);
	pdk_req_exec_release(&x);
	cr_assert_eq(pdk_req_parse_exec(S("{\"argv\":[\"cat\"],\"stdin_open\":1}"), &x, &e), -1);
	cr_assert_str_eq(e.field, "stdin_open");
}

Test(request, create_disk_needs_a_tmpfs_workspace)
{
	struct pdk_req_create r;
	struct pdk_req_error e = {0};

	create_refused("{\"overrides\":{\"limits\":{\"disk\":\"2M\"}}}", "overrides.limits.disk");
	create_refused("{\"overrides\":{\"limits\":{\"disk\":\"2M\"}},\"workspace\":{\"mode\":"
		       "\"overlay\"}}",
		       "overrides.limits.disk");
	create_refused("{\"overrides\":{\"limits\":{\"disk\":\"lots\"}},\"workspace\":{\"mode\":"
		       "\"tmpfs\"}}",
		       "overrides.limits.disk");
	cr_assert_eq(pdk_req_parse_create(S("{\"overrides\":{\"limits\":{\"disk\":\"2M\"}},"
					    "\"workspace\":{\"mode\":\"tmpfs\"}}"),
					  &r, &e),
		     0, "%s", e.msg);
	pdk_req_create_release(&r);
}

Test(request, create_token_scope_and_lifetime)
{
	struct pdk_req_create r;
	struct pdk_req_error e = {0};

	cr_assert_eq(
		pdk_req_parse_create(S("{\"ttl\":\"1h\",\"token\":{\"ops\":[\"read\",\"exec\"],"
				       "\"ttl_s\":600}}"),
				     &r, &e),
		0, "%s", e.msg);
	cr_assert_eq(r.token_ops, PDK_TOKEN_OP_READ | PDK_TOKEN_OP_EXEC);
	cr_assert_eq(r.token_ttl_s, 600);
	pdk_req_create_release(&r);
	cr_assert_eq(pdk_req_parse_create(S("{}"), &r, &e), 0);
	cr_assert_eq(r.token_ops, 0, "default: every operation");
	cr_assert_eq(r.token_ttl_s, 0, "default: the daemon's maximum");
	pdk_req_create_release(&r);
	create_refused("{\"token\":{\"ttl_s\":86401}}", "token.ttl_s");
	create_refused("{\"token\":{\"ttl_s\":0}}", "token.ttl_s");
	create_refused("{\"ttl\":60,\"token\":{\"ttl_s\":61}}", "token.ttl_s");
	create_refused("{\"token\":{\"ops\":[\"root\"]}}", "token.ops[0]");
	create_refused("{\"token\":{\"ops\":[]}}", "token.ops");
	create_refused("{\"token\":[]}", "token");
}

/* overrides.limits leave the API as numbers: the supervisor parses no text. */
Test(request, create_limits_become_numbers)
{
	struct pdk_req_create r;
	struct pdk_req_error e = {0};
	json_t *l;

	cr_assert_eq(pdk_req_parse_create(S("{\"overrides\":{\"limits\":{\"memory\":\"512M\","
					    "\"pids\":64,\"cpu\":2,\"wall\":\"10m\",\"cpu_time\":"
					    "30,\"egress_bytes\":1024,\"commands\":5,\"output\":"
					    "\"1K\",\"disk\":\"2M\"}},\"workspace\":{\"mode\":"
					    "\"tmpfs\"}}"),
					  &r, &e),
		     0, "%s: %s", e.field, e.msg);
	l = json_object_get(r.overrides, "limits");
	cr_assert(json_is_integer(json_object_get(l, "memory")));
	cr_assert_eq(json_integer_value(json_object_get(l, "memory")), 512 << 20, "bytes");
	cr_assert_eq(json_integer_value(json_object_get(l, "pids")), 64);
	cr_assert(json_is_real(json_object_get(l, "cpu")), "CPUs as a real");
	cr_assert_float_eq(json_real_value(json_object_get(l, "cpu")), 2.0, 1e-9);
	cr_assert_eq(json_integer_value(json_object_get(l, "wall")), 600000, "ms");
	cr_assert_eq(json_integer_value(json_object_get(l, "cpu_time")), 30000,
		     "a number is seconds, given on as ms");
	cr_assert_eq(json_integer_value(json_object_get(l, "egress_bytes")), 1024);
	cr_assert_eq(json_integer_value(json_object_get(l, "commands")), 5);
	cr_assert_eq(json_integer_value(json_object_get(l, "output")), 1024);
	cr_assert_eq(json_integer_value(json_object_get(l, "disk")), 2 << 20);
	cr_assert_eq(json_object_size(l), 9, "nothing added");
	pdk_req_create_release(&r);
	create_refused("{\"overrides\":{\"limits\":{\"memory\":\"99999999999T\"}}}",
		       "overrides.limits.memory");
}
