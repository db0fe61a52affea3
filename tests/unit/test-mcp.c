/*
 * test-mcp.c - the MCP layer's pure parts: the JSON-RPC parser's answers
 * (src/mcp/jsonrpc.h), the argument check against a tool's schema
 * (src/mcp/schema.c), and the MRTR requestState (src/mcp/mrtr.c).
 */
#include "common.h"
#include "mcp-internal.h"

#include <criterion/criterion.h>
#include <string.h>

static int parse(const char *s, struct pdk_rpc_msg *m, struct pdk_rpc_refusal *why)
{
	return pdk_rpc_parse(s, strlen(s), 0, m, why);
}

Test(jsonrpc, request_notification_response)
{
	struct pdk_rpc_msg m;
	struct pdk_rpc_refusal why;

	cr_assert_eq(parse("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}", &m, &why), 0);
	cr_assert_eq(m.kind, PDK_RPC_REQUEST);
	cr_assert_str_eq(m.method, "ping");
	pdk_rpc_msg_release(&m);
	cr_assert_eq(parse("{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{}}", &m, &why), 0);
	cr_assert_eq(m.kind, PDK_RPC_NOTIFICATION);
	cr_assert(json_is_object(m.params));
	pdk_rpc_msg_release(&m);
	cr_assert_eq(parse("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", &m, &why), 0);
	cr_assert_eq(m.kind, PDK_RPC_RESPONSE);
	pdk_rpc_msg_release(&m);
}

/* Each refusal: its code, and the id when it could be read. */
Test(jsonrpc, refusals)
{
	static const struct {
		const char *in;
		int code;
		bool id;
	} cases[] = {
		{"{\"jsonrpc\":\"2.0\",\"id\":1,", PDK_RPC_PARSE_ERROR, false},
		{"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", PDK_RPC_INVALID_REQUEST,
		 false},
		{"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", PDK_RPC_INVALID_REQUEST,
		 true},
		{"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", PDK_RPC_INVALID_REQUEST,
		 false},
		{"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", PDK_RPC_INVALID_REQUEST,
		 false},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\",\"params\":[1]}",
		 PDK_RPC_INVALID_REQUEST, true},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\",\"x\":1}", PDK_RPC_INVALID_REQUEST,
		 true},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\",\"method\":\"q\"}",
		 PDK_RPC_PARSE_ERROR, false},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", PDK_RPC_INVALID_REQUEST, true},
		{"\"ping\"", PDK_RPC_PARSE_ERROR, false},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(cases); i++) {
		struct pdk_rpc_msg m;
		struct pdk_rpc_refusal why;

		cr_assert_eq(parse(cases[i].in, &m, &why), -1, "%s", cases[i].in);
		cr_assert_eq(why.code, cases[i].code, "%s: %d", cases[i].in, why.code);
		cr_assert(why.msg[0] != '\0');
		cr_assert_eq(why.id != NULL, cases[i].id, "%s", cases[i].in);
		pdk_rpc_refusal_release(&why);
	}
}

Test(jsonrpc, size_bound)
{
	struct pdk_rpc_msg m;
	struct pdk_rpc_refusal why;
	const char *s = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";

	cr_assert_eq(pdk_rpc_parse(s, strlen(s), 10, &m, &why), -1);
	cr_assert_eq(why.code, PDK_RPC_PARSE_ERROR);
	cr_assert(strstr(why.msg, "larger") != NULL);
}

static json_t *schema(void)
{
	static const char *const req[] = {"path", NULL};
	static const char *const enc[] = {"text", "base64", NULL};
	json_t *p = json_object();

	pdk_json_set(p, "path", pdk__schema_str("p"));
	pdk_json_set(p, "n", pdk__schema_int("n", 1, 10));
	pdk_json_set(p, "enc", pdk__schema_enum("e", enc));
	pdk_json_set(p, "argv", pdk__schema_strv("a"));
	pdk_json_set(p, "env", pdk__schema_strmap("m"));
	return pdk__schema_object(p, req);
}

/* What the schema refuses, and the field each refusal names. */
Test(schema, check_names_the_field)
{
	static const struct {
		const char *args, *field;
	} cases[] = {
		{"{}", "path"},
		{"{\"path\":1}", "path"},
		{"{\"path\":\"a\",\"n\":0}", "n"},
		{"{\"path\":\"a\",\"n\":\"1\"}", "n"},
		{"{\"path\":\"a\",\"enc\":\"hex\"}", "enc"},
		{"{\"path\":\"a\",\"argv\":[1]}", "argv"},
		{"{\"path\":\"a\",\"env\":{\"A\":1}}", "env"},
		{"{\"path\":\"a\",\"extra\":true}", "extra"},
		{"{\"path\":\"a\\u0000b\"}", "path"},
	};
	_cleanup_json_ json_t *s = schema();

	for (size_t i = 0; i < PDK_ARRAY_SIZE(cases); i++) {
		_cleanup_json_ json_t *a = json_loads(cases[i].args, JSON_ALLOW_NUL, NULL);
		const char *field = NULL;
		char msg[256];

		cr_assert_not_null(a, "%s", cases[i].args);
		cr_assert_eq(pdk__schema_check(s, a, &field, msg, sizeof(msg)), -1, "%s",
			     cases[i].args);
		cr_assert_str_eq(field, cases[i].field, "%s: %s", cases[i].args, msg);
	}
}

Test(schema, accepts_what_fits)
{
	_cleanup_json_ json_t *s = schema();
	_cleanup_json_ json_t *a = json_loads(
		"{\"path\":\"a\",\"n\":10,\"enc\":\"base64\",\"argv\":[\"x\"],\"env\":{\"A\":\"b\"}}",
		0, NULL);
	const char *field = NULL;
	char msg[256];

	cr_assert_eq(pdk__schema_check(s, a, &field, msg, sizeof(msg)), 0, "%s", msg);
}

/* A call as the MRTR code sees it: a server key, a principal, a tool, arguments. */
static struct pdk_mcp_call *fake_call(struct pdk_mcp *m, struct pdk_mcp_conn *c, const char *who,
				      const char *args)
{
	static const struct pdk_mcp_tool tool = {.name = "sandbox_destroy"};
	struct pdk_mcp_call *call = calloc(1, sizeof(*call));

	c->m = m;
	c->identity = (char *)who;
	call->conn = c;
	call->tool = &tool;
	call->args = json_loads(args, 0, NULL);
	return call;
}

Test(mrtr, state_verifies_for_its_call_only)
{
	struct pdk_mcp m = {0};
	struct pdk_mcp_conn c1 = {0}, c2 = {0};
	struct pdk_mcp_call *a, *b, *other;
	char *state;

	pdk__mrtr_key(m.key);
	a = fake_call(&m, &c1, "alice", "{\"sandbox_id\":\"sbx_1\"}");
	b = fake_call(&m, &c2, "bob", "{\"sandbox_id\":\"sbx_1\"}");
	other = fake_call(&m, &c1, "alice", "{\"sandbox_id\":\"sbx_2\"}");
	state = pdk__mrtr_state(a);
	cr_assert(pdk__mrtr_verify(a, state));
	cr_assert_not(pdk__mrtr_verify(b, state), "another principal");
	cr_assert_not(pdk__mrtr_verify(other, state), "other arguments");
	state[5] ^= 1;
	cr_assert_not(pdk__mrtr_verify(a, state), "a tampered payload");
	state[5] ^= 1;
	state[strlen(state) - 1] = state[strlen(state) - 1] == '0' ? '1' : '0';
	cr_assert_not(pdk__mrtr_verify(a, state), "a tampered signature");
	cr_assert_not(pdk__mrtr_verify(a, "garbage"));
	cr_assert_not(pdk__mrtr_verify(a, ""));
	pdk__mrtr_key(m.key);
	state[strlen(state) - 1] = state[strlen(state) - 1] == '0' ? '1' : '0';
	cr_assert_not(pdk__mrtr_verify(a, state), "another server's key");
	free(state);
	for (struct pdk_mcp_call **x = (struct pdk_mcp_call *[]){a, b, other, NULL}; *x; x++) {
		json_decref((*x)->args);
		free(*x);
	}
}
