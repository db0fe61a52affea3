/*
 * test-mcp.c - the MCP layer's pure parts: the JSON-RPC parser's answers
 * (src/mcp/jsonrpc.h), the argument check against a tool's schema
 * (src/mcp/schema.c), the MRTR requestState (src/mcp/mrtr.c), and the
 * requests the server sends its client (src/mcp/ask.c).
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

/* ---- a tool provider (mcp.h): the gateway's way in ---- */

struct prov {
	json_t *sent;              /* every message the client got */
	struct pdk_mcp_call *held; /* the call the provider holds */
	int calls, cancels, ends;
	bool reply_on_cancel;
};

static void prov_send(void *ctx, const json_t *related, const json_t *msg)
{
	struct prov *f = ctx;

	(void)related;
	if (msg != NULL)
		json_array_append(f->sent, (json_t *)msg);
}

static json_t *prov_list(void *ctx, struct pdk_mcp_conn *c)
{
	(void)ctx;
	cr_assert_str_eq(pdk_mcp_conn_principal(c), "agent-a");
	return json_pack("[{s:s, s:{s:s}}]", "name", "up__echo", "inputSchema", "type", "object");
}

static bool prov_call(void *ctx, struct pdk_mcp_call *call, const char *name, const json_t *args)
{
	struct prov *f = ctx;

	if (strcmp(name, "up__echo") != 0)
		return false;
	/* Not checked by the server: the provider validates. */
	cr_assert(json_is_object(args));
	f->calls++;
	f->held = call;
	return true;
}

static void prov_cancel(void *ctx, struct pdk_mcp_call *call)
{
	struct prov *f = ctx;

	f->cancels++;
	cr_assert(pdk_mcp_call_cancelled(call));
	if (f->reply_on_cancel) {
		f->held = NULL;
		pdk_mcp_call_reply(call, pdk__mcp_result("dropped", NULL));
	}
}

static void prov_end(void *ctx, struct pdk_mcp_conn *c)
{
	struct prov *f = ctx;

	(void)c;
	f->ends++;
}

static void msg(struct pdk_mcp_conn *c, const char *s)
{
	pdk_mcp_conn_message(c, s, strlen(s));
}

/* The last message the client got whose key `k` is the JSON `want`, or NULL. */
static const json_t *got(struct prov *f, const char *k, const char *want)
{
	json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
	const json_t *found = NULL;
	size_t i;
	json_t *m;

	json_array_foreach(f->sent, i, m) if (json_equal(json_object_get(m, k), w)) found = m;
	json_decref(w);
	return found;
}

#define INIT                                                                                       \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":" \
	"\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"

Test(provider, list_call_reply_progress_cancel_list_changed)
{
	struct prov f = {.sent = json_array(), .reply_on_cancel = true};
	struct pdk_mcp_provider p = {.ctx = &f,
				     .list = prov_list,
				     .call = prov_call,
				     .cancel = prov_cancel,
				     .conn_end = prov_end};
	struct pdk_mcp *m = pdk_mcp_new(&(struct pdk_mcp_opts){.provider = &p});
	struct pdk_mcp_conn *c = pdk_mcp_conn_new(m, "agent-a", "stdio", prov_send, &f);
	struct pdk_mcp_conn *quiet = pdk_mcp_conn_new(m, "agent-a", "stdio", prov_send, &f);
	const json_t *r;
	json_t *progress;

	msg(c, INIT);
	r = got(&f, "id", "1");
	cr_assert(json_is_true(json_object_get(
		json_object_get(json_object_get(json_object_get(r, "result"), "capabilities"),
				"tools"),
		"listChanged")));
	/* Only the provider's tools: own_tools is false. */
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	r = json_object_get(json_object_get(got(&f, "id", "2"), "result"), "tools");
	cr_assert_eq(json_array_size(r), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(r, 0), "name")),
			 "up__echo");
	/* An unknown tool: the server's error; the provider's: held, answered later. */
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
	       "\"run_command\",\"arguments\":{}}}");
	cr_assert_eq(json_integer_value(
			     json_object_get(json_object_get(got(&f, "id", "3"), "error"), "code")),
		     PDK_RPC_INVALID_PARAMS);
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
	       "\"up__echo\",\"arguments\":{\"x\":[1]},\"_meta\":{\"progressToken\":\"tok\"}}}");
	cr_assert_eq(f.calls, 1);
	cr_assert_null(got(&f, "id", "4"));
	cr_assert_str_eq(json_string_value(pdk_mcp_call_progress_token(f.held)), "tok");
	progress = json_pack("{s:i}", "progress", 5);
	pdk_mcp_call_progress(f.held, progress); /* borrowed */
	json_decref(progress);
	r = got(&f, "method", "\"notifications/progress\"");
	cr_assert_str_eq(
		json_string_value(json_object_get(json_object_get(r, "params"), "progressToken")),
		"tok");
	pdk_mcp_call_reply(f.held, pdk__mcp_result("done", NULL));
	cr_assert_not_null(got(&f, "id", "4"));
	/* Cancelled: the provider is told once and its answer is not sent. */
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
	       "\"up__echo\"}}");
	msg(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
	       "{\"requestId\":5}}");
	cr_assert_eq(f.cancels, 1);
	cr_assert_null(got(&f, "id", "5"));
	/* list_changed: to the connection that initialized, not to the other. */
	json_array_clear(f.sent);
	pdk_mcp_tools_changed(m);
	cr_assert_eq(json_array_size(f.sent), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(f.sent, 0), "method")),
			 "notifications/tools/list_changed");
	/* The connection's end cancels what the provider holds and tells it. */
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
	       "\"up__echo\"}}");
	pdk_mcp_conn_close(c);
	cr_assert_eq(f.cancels, 2);
	cr_assert_eq(f.ends, 1);
	pdk_mcp_conn_close(quiet);
	pdk_mcp_free(m);
	json_decref(f.sent);
}

/* ---- requests of the server to its client (ask.c) ---- */

struct answers {
	int n;
	int last_status; /* the last error's status, 0 for a result */
	json_t *last;    /* the last result (a copy) */
};

static void on_answer(void *ctx, const json_t *result, const struct pdk_error *err)
{
	struct answers *a = ctx;

	a->n++;
	a->last_status = err ? err->status : 0;
	json_decref(a->last);
	a->last = result ? json_deep_copy(result) : NULL;
}

#define INIT_ELICIT                                                                                \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":" \
	"\"2025-11-25\",\"capabilities\":{\"elicitation\":{}},\"clientInfo\":{\"name\":\"t\","     \
	"\"version\":\"1\"}}}"

/* Ask the held call's client; the request sent is returned (borrowed from f->sent). */
static const json_t *ask(struct prov *f, struct answers *a, const char *want_id)
{
	cr_assert_eq(pdk_mcp_call_ask(f->held, "elicitation/create",
				      json_pack("{s:s}", "message", "approve?"), 0, on_answer, a,
				      NULL, NULL),
		     0);
	return got(f, "id", want_id);
}

Test(ask, ids_answers_errors_cancel_and_the_end)
{
	struct prov f = {.sent = json_array(), .reply_on_cancel = true};
	struct pdk_mcp_provider p = {
		.ctx = &f, .list = prov_list, .call = prov_call, .cancel = prov_cancel};
	struct pdk_mcp *m = pdk_mcp_new(&(struct pdk_mcp_opts){.provider = &p});
	struct pdk_mcp_conn *c = pdk_mcp_conn_new(m, "agent-a", "stdio", prov_send, &f);
	struct pdk_mcp_conn *plain = pdk_mcp_conn_new(m, "agent-a", "stdio", prov_send, &f);
	struct answers a = {0};
	const json_t *r;

	/* A client that declared nothing is never asked. */
	msg(plain, INIT);
	msg(plain, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
		   "\"up__echo\"}}");
	cr_assert_not(pdk_mcp_call_can_elicit(f.held));
	pdk_mcp_conn_close(plain);
	msg(c, INIT_ELICIT);
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
	       "\"up__echo\"}}");
	cr_assert(pdk_mcp_call_can_elicit(f.held));
	/* The server's own ids; an answer to another id (one of the client's) changes nothing. */
	r = ask(&f, &a, "\"paddock-1\"");
	cr_assert_str_eq(json_string_value(json_object_get(r, "method")), "elicitation/create");
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"action\":\"accept\"}}");
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":\"paddock-77\",\"result\":{}}");
	cr_assert_eq(a.n, 0);
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":\"paddock-1\",\"result\":{\"action\":\"accept\"}}");
	cr_assert_eq(a.n, 1);
	cr_assert_eq(a.last_status, 0);
	cr_assert_str_eq(json_string_value(json_object_get(a.last, "action")), "accept");
	/* Answered once: the same answer again is ignored. */
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":\"paddock-1\",\"result\":{\"action\":\"decline\"}}");
	cr_assert_eq(a.n, 1);
	/* The client's error. */
	ask(&f, &a, "\"paddock-2\"");
	msg(c, "{\"jsonrpc\":\"2.0\",\"id\":\"paddock-2\",\"error\":{\"code\":-32601,\"message\":"
	       "\"no\"}}");
	cr_assert_eq(a.n, 2);
	cr_assert_eq(a.last_status, EPROTO);
	/* Cancelled by the asker: called back at once, and the client is told. */
	ask(&f, &a, "\"paddock-3\"");
	pdk_mcp_ask_cancel(f.held->conn->asks);
	cr_assert_eq(a.n, 3);
	cr_assert_eq(a.last_status, ECANCELED);
	r = got(&f, "method", "\"notifications/cancelled\"");
	cr_assert_str_eq(
		json_string_value(json_object_get(json_object_get(r, "params"), "requestId")),
		"paddock-3");
	/* The connection's end fails what is still asked. */
	ask(&f, &a, "\"paddock-4\"");
	pdk_mcp_conn_close(c);
	cr_assert_eq(a.n, 4);
	cr_assert_eq(a.last_status, ECONNRESET);
	json_decref(a.last);
	pdk_mcp_free(m);
	json_decref(f.sent);
}

/* The wire's serialiser (base/json.c) writes what jansson's compact ASCII dump writes. */
Test(wire, writes_what_jansson_writes)
{
	static const char *const docs[] = {
		"{}",
		"[]",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
		"\"Echo: hello\"}],\"isError\":false}}",
		"{\"a\\u00e9b\":\"\\u0000\\u0001\\u001f\\u007f \\\" \\\\ / \\b\\f\\n\\r\\t\"}",
		"{\"u\":\"\\u00e9\\u4e2d\\ud83d\\ude00\\udbff\\udfff\"}",
		"[-9223372036854775808,9223372036854775807,0,1.5,-2.5e-07,1e+300,true,false,null]",
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		json_t *v = json_loads(docs[i], JSON_ALLOW_NUL, NULL);
		char *ours, *theirs;

		cr_assert_not_null(v, "%s", docs[i]);
		ours = pdk_json_dump_wire(v);
		theirs = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII);
		cr_assert_not_null(ours);
		cr_assert_eq(strlen(ours), strlen(theirs) + 1, "%s", docs[i]);
		cr_assert_eq(memcmp(ours, theirs, strlen(theirs)), 0, "%s\nours   %s\ntheirs %s",
			     docs[i], ours, theirs);
		cr_assert_eq(ours[strlen(theirs)], '\n');
		free(ours);
		free(theirs);
		json_decref(v);
	}
}

/* The sorted dump (audit records) and the counted size, against jansson's dumps. */
Test(wire, sorted_and_size_are_janssons)
{
	static const char *const docs[] = {
		"{}",
		"{\"b\":1,\"a\":{\"z\":[{\"y\":1,\"x\":2}],\"ab\":\"\\u00e9\",\"a\":null},\"\":0}",
		"{\"\\u00e9\":1,\"e\":2,\"E\":3,\"ee\":4,\"e\\u00e9\":5,\"_\":6,\"0\":7}",
		"[{\"k2\":1,\"k10\":2,\"k1\":3},1.5,\"\\ud83d\\ude00\"]",
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		json_t *v = json_loads(docs[i], 0, NULL);
		size_t len = 0;
		char *ours, *theirs, *wire;

		cr_assert_not_null(v, "%s", docs[i]);
		ours = pdk_json_dump_sorted(v, &len);
		theirs = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
		cr_assert_not_null(ours);
		cr_assert_str_eq(ours, theirs, "%s", docs[i]);
		cr_assert_eq(len, strlen(theirs));
		wire = pdk_json_dump_wire(v);
		cr_assert_eq(pdk_json_wire_size(v), strlen(wire), "%s", docs[i]);
		free(wire);
		free(ours);
		free(theirs);
		json_decref(v);
	}
}

/*
 * The plain parser takes the common messages as jansson does, and leaves
 * every other document (and every error) to jansson.
 */
Test(wire, plain_parser_takes_plain_json_only)
{
	static const char *const taken[] = {
		"{}",
		" [ ] \r\n",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"up__echo\","
		"\"arguments\":{\"message\":\"hello\"}}}",
		"{\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u4E2D\\ud83d\\ude00 \xc3\xa9\"}",
		"[-0,0,-123456789012345678,123456789012345678,true,false,null,[[]],{\"\":{}}]",
	};
	static const char *const left[] = {
		"",
		"1",
		"\"s\"",
		"{\"a\":1,\"a\":2}",           /* a key twice: jansson refuses it */
		"{\"a\":1.5}",                 /* a real: jansson's */
		"{\"a\":1e3}",                 /* the same */
		"{\"a\":1234567890123456789}", /* 19 digits: jansson says whether it fits */
		"{\"a\":01}",                  /* a leading zero */
		"{\"a\":-}",                   /* no digit */
		"{\"a\":\"\\u0000\"}",         /* NUL */
		"{\"a\":\"\\ud83d\"}",         /* a lone high surrogate */
		"{\"a\":\"\\ude00\"}",         /* a lone low surrogate */
		"{\"a\":\"\\x41\"}",           /* no such escape */
		"{\"a\":\"\xc3\x28\"}",        /* not UTF-8 */
		"{\"a\":\"\t\"}",              /* a raw control character */
		"{\"a\":tru}",                 /* a cut word */
		"{\"a\":truex}",               /* one invalid token to jansson */
		"{\"a\":1,}",                  /* a trailing comma */
		"{\"a\":1} x",                 /* something after the document */
		"{\"a\":1",                    /* not closed */
		"{\"a\" 1}",                   /* no colon */
		"{1:2}",                       /* a key that is not a string */
	};

	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
		json_t *ours = pdk_json_parse_plain(taken[i], strlen(taken[i]));
		json_t *theirs = json_loads(taken[i], JSON_REJECT_DUPLICATES, NULL);
		char *a, *b;

		cr_assert_not_null(ours, "%s", taken[i]);
		cr_assert_not_null(theirs, "%s", taken[i]);
		a = pdk_json_dump_wire(ours);
		b = pdk_json_dump_wire(theirs);
		cr_assert_str_eq(a, b, "%s", taken[i]);
		free(a);
		free(b);
		json_decref(ours);
		json_decref(theirs);
	}
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++)
		cr_assert_null(pdk_json_parse_plain(left[i], strlen(left[i])), "%s", left[i]);
	/* A document cut at its length: the bytes after it are not read. */
	cr_assert_null(pdk_json_parse_plain("{\"a\":1}", 6));
}

Test(wire, refuses_what_jansson_refuses)
{
	json_t *bad = json_stringn_nocheck("\xc3\x28", 2); /* not UTF-8 */
	json_t *o = json_pack("{s:o}", "k", bad);
	json_t *one = json_integer(1);

	cr_assert_null(pdk_json_dump_wire(o));
	cr_assert_null(json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII));
	cr_assert_null(pdk_json_dump_wire(one), "only an object or an array at the top");
	json_decref(one);
	json_decref(o);
}

Test(wire, splice_joins_two_objects_texts)
{
	static const char *const cases[][3] = {
		{"{\"a\":1}", "{\"b\":[2]}", "{\"a\":1,\"b\":[2]}"},
		{"{}", "{\"b\":2}", "{\"b\":2}"},
		{"{\"a\":1}", "{}", "{\"a\":1}"},
		{"{}", "{}", "{}"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = pdk_json_splice(cases[i][0], cases[i][1]);

		cr_assert_str_eq(s, cases[i][2]);
		free(s);
	}
}
