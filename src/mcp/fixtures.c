/*
 * fixtures.c - what the MCP conformance suite's server scenarios call: its
 * fixture tools, resources, resource template and prompts, completion and
 * logging/setLevel (docs/mcp.md, "Conformance fixtures"). Served only by
 * `paddock mcp --conformance-fixtures`, a test option: no fixture runs
 * anything or touches a sandbox, they answer with fixed data.
 *
 * The data is fixtures.json, embedded at build time; this file looks it up,
 * puts a prompt's arguments and a template's id into it, and sends the log
 * messages and progress notifications a fixture tool asks for before its
 * result.
 */
#include "common.h"
#include "fixtures.h"

#include <string.h>

/* fixtures.json, NUL-terminated (src/tools/embed.py). */
extern const char pdk_mcp_fixtures_json[];

/* The resource template test://template/{id}/data. */
#define TEMPLATE_PREFIX "test://template/"
#define TEMPLATE_SUFFIX "/data"
#define META_LOG_LEVEL  "io.modelcontextprotocol/logLevel"
#define META_CAPS       "io.modelcontextprotocol/clientCapabilities"
/* How long a 2026-07-28 client may keep a fixture list or read: they never change. */
#define FIXTURE_TTL_MS 3600000

/* The fixtures, parsed once; the embedded text is ours, so a parse error is a bug. */
static json_t *doc(void)
{
	static json_t *d;

	if (d == NULL) {
		d = json_loads(pdk_mcp_fixtures_json, JSON_REJECT_DUPLICATES, NULL);
		if (d == NULL || !json_is_object(d))
			pdk_bug("the embedded conformance fixtures are not a JSON object");
	}
	return d;
}

/* The member of `list` (a fixtures.json array) whose `key` is `value`, or NULL. */
static json_t *find(const char *list, const char *key, const char *value)
{
	size_t i;
	json_t *v;

	if (value == NULL)
		return NULL;
	json_array_foreach(json_object_get(doc(), list), i, v)
	{
		const char *have = json_string_value(json_object_get(v, key));

		if (have != NULL && strcmp(have, value) == 0)
			return v;
	}
	return NULL;
}

/* `list` as the protocol lists it: each member without the members that only this file reads. */
static json_t *listed(const char *list)
{
	static const char *const own[] = {"result",   "log",      "progress", "requires",
					  "contents", "messages", "rounds",   "state"};
	json_t *out = json_array();
	size_t i;
	json_t *v;

	json_array_foreach(json_object_get(doc(), list), i, v)
	{
		json_t *copy = json_deep_copy(v);

		for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++)
			json_object_del(copy, own[k]);
		json_array_append_new(out, copy);
	}
	return out;
}

json_t *pdk__mcp_fixture_tools(void)
{
	return listed("tools");
}

void pdk__mcp_fixture_caps(json_t *caps)
{
	pdk_json_set(caps, "resources", json_pack("{s:b,s:b}", "subscribe", 1, "listChanged", 0));
	pdk_json_set(caps, "prompts", json_pack("{s:b}", "listChanged", 0));
	pdk_json_set(caps, "completions", json_object());
	pdk_json_set(caps, "logging", json_object());
}

static bool modern(const struct pdk_rpc_msg *m)
{
	return pdk__mcp_modern_version(m) != NULL;
}

/* A result as the request's era sends it (the modern one says resultType and serverInfo). */
static void answer(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, json_t *result)
{
	if (modern(m))
		result = pdk__mcp_modern_result(result);
	pdk__mcp_send(c, m->id, pdk_rpc_result(m->id, result));
}

/* A list or a read: in 2026-07-28 it says how long it may be kept, and by whom (caching). */
static void answer_cacheable(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, json_t *result)
{
	if (modern(m)) {
		pdk_json_set(result, "ttlMs", json_integer(FIXTURE_TTL_MS));
		pdk_json_set(result, "cacheScope", json_string("public"));
	}
	answer(c, m, result);
}

static void refuse(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, int code, const char *msg,
		   json_t *data)
{
	pdk__mcp_send(c, m->id, pdk_rpc_error(m->id, code, msg, data));
}

/* The client's capabilities: the request's (2026-07-28) or the session's (initialize). */
static const json_t *client_caps(const struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	if (modern(m))
		return json_object_get(json_object_get(m->params, "_meta"), META_CAPS);
	return c->caps;
}

/* ---- 2026-07-28 multi round-trip requests (MRTR) ---- */

/* The client capability an input request's method needs, or NULL. */
static const char *capability_of(const char *method)
{
	if (strcmp(method, "elicitation/create") == 0)
		return "elicitation";
	if (strcmp(method, "sampling/createMessage") == 0)
		return "sampling";
	if (strcmp(method, "roots/list") == 0)
		return "roots";
	return NULL;
}

/* `round`'s input requests the client can answer: those of capabilities it declared. */
static json_t *askable(const json_t *round, const json_t *caps)
{
	json_t *out = json_object();
	const char *key;
	json_t *req;

	json_object_foreach((json_t *)round, key, req)
	{
		const char *method = json_string_value(json_object_get(req, "method"));
		const char *cap = method != NULL ? capability_of(method) : NULL;

		if (cap != NULL && json_object_get(caps, cap) != NULL)
			json_object_set(out, key, req);
	}
	return out;
}

/* Whether `responses` answers every request of `requests` (extra keys are ignored). */
static bool answered(const json_t *requests, const json_t *responses)
{
	const char *key;
	json_t *req;

	if (json_object_size(requests) == 0)
		return true; /* nothing the client can answer: nothing to wait for */
	if (!json_is_object(responses))
		return false;
	json_object_foreach((json_t *)requests, key, req)
	{
		if (!json_is_object(json_object_get(responses, key)))
			return false;
	}
	return true;
}

/*
 * The call mrtr.c signs a fixture's requestState for: the fixture's name,
 * the client, and the round it asks (in place of arguments).
 */
static char *seal(struct pdk_mcp_conn *c, const char *name, size_t round)
{
	struct pdk_mcp_tool t = {.name = name};
	_cleanup_json_ json_t *args = json_pack("{s:I}", "round", (json_int_t)round);
	struct pdk_mcp_call call = {.conn = c, .tool = &t, .args = args};

	return pdk__mrtr_state(&call);
}

/* The round `state` was signed for, or -1 when it verifies for none of the n. */
static ssize_t unseal(struct pdk_mcp_conn *c, const char *name, const char *state, size_t n)
{
	struct pdk_mcp_tool t = {.name = name};

	for (size_t k = 0; k < n; k++) {
		_cleanup_json_ json_t *args = json_pack("{s:I}", "round", (json_int_t)k);
		struct pdk_mcp_call call = {.conn = c, .tool = &t, .args = args};

		if (pdk__mrtr_verify(&call, state))
			return (ssize_t)k;
	}
	return -1;
}

/* The round a request answers: 0 without state, the signed one, or -1 after a refusal. */
static ssize_t asked_round(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, const json_t *fx,
			   size_t n)
{
	const char *name = json_string_value(json_object_get(fx, "name"));
	const char *state = json_string_value(json_object_get(m->params, "requestState"));
	ssize_t k;

	if (!json_is_true(json_object_get(fx, "state")) || state == NULL)
		return 0;
	/* SECURITY: a requestState is the server's own only if its HMAC verifies. */
	k = unseal(c, name, state, n);
	if (k < 0)
		refuse(c, m, PDK_RPC_INVALID_PARAMS,
		       "requestState does not verify: it was changed, or is not this server's",
		       NULL);
	return k;
}

/*
 * A fixture with rounds: answer the round the client still has to answer
 * (an input_required result, its requestState signed when the fixture says
 * so), or a refusal, and return true; false when every round is answered
 * and the caller sends the fixture's result.
 */
static bool mrtr(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, const json_t *fx)
{
	const json_t *rounds = json_object_get(fx, "rounds");
	size_t n = json_array_size(rounds);
	const json_t *caps = client_caps(c, m);
	ssize_t k = asked_round(c, m, fx, n);
	_cleanup_json_ json_t *ask = NULL;
	json_t *r;

	if (k < 0)
		return true;
	ask = askable(json_array_get(rounds, (size_t)k), caps);
	if (answered(ask, json_object_get(m->params, "inputResponses"))) {
		if ((size_t)++k == n)
			return false;
		json_decref(ask);
		ask = askable(json_array_get(rounds, (size_t)k), caps);
	}
	r = json_pack("{s:s,s:O}", "resultType", "input_required", "inputRequests", ask);
	if (json_is_true(json_object_get(fx, "state"))) {
		_cleanup_free_ char *state =
			seal(c, json_string_value(json_object_get(fx, "name")), (size_t)k);

		pdk_json_set(r, "requestState", json_string(state));
	}
	answer(c, m, r);
	return true;
}

/*
 * A fixture tool: refused when it needs a capability the client did not
 * declare (a server must not rely on one, 2026-07-28 basic/lifecycle), else
 * its log messages (in 2026-07-28 only when the request names a log level),
 * its progress (when asked for), then its result.
 */
static void call_tool(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, json_t *tool)
{
	json_t *meta = json_object_get(m->params, "_meta");
	json_t *token = json_object_get(meta, "progressToken");
	const char *needs = json_string_value(json_object_get(tool, "requires"));
	bool logs = !modern(m) || json_object_get(meta, META_LOG_LEVEL) != NULL;
	size_t i;
	json_t *v;

	if (json_object_get(tool, "rounds") != NULL && !modern(m)) {
		answer(c, m,
		       json_pack("{s:b,s:[{s:s,s:s}]}", "isError", 1, "content", "type", "text",
				 "text",
				 "this fixture asks for input the 2026-07-28 way: "
				 "call it in that revision"));
		return;
	}
	if (json_object_get(tool, "rounds") != NULL && mrtr(c, m, tool))
		return;
	if (needs != NULL && json_object_get(client_caps(c, m), needs) == NULL) {
		refuse(c, m, PDK_RPC_MISSING_CAPABILITY,
		       "the client did not declare a capability this tool needs",
		       json_pack("{s:{s:{}}}", "requiredCapabilities", needs));
		return;
	}
	json_array_foreach(json_object_get(tool, "log"), i, v)
	{
		if (!logs)
			break;
		pdk__mcp_send(c, m->id,
			      pdk_rpc_notification("notifications/message",
						   json_pack("{s:s,s:s,s:O}", "level", "info",
							     "logger", "fixtures", "data", v)));
	}
	json_array_foreach(json_object_get(tool, "progress"), i, v)
	{
		if (token == NULL)
			break;
		pdk__mcp_send(c, m->id,
			      pdk_rpc_notification("notifications/progress",
						   json_pack("{s:O,s:O,s:i}", "progressToken",
							     token, "progress", v, "total", 100)));
	}
	answer(c, m, json_deep_copy(json_object_get(tool, "result")));
}

/* The id of a URI of the template test://template/{id}/data, or NULL. */
static char *template_id(const char *uri)
{
	size_t pre = strlen(TEMPLATE_PREFIX), suf = strlen(TEMPLATE_SUFFIX), len;

	if (uri == NULL || strncmp(uri, TEMPLATE_PREFIX, pre) != 0)
		return NULL;
	len = strlen(uri);
	if (len <= pre + suf || strcmp(uri + len - suf, TEMPLATE_SUFFIX) != 0)
		return NULL;
	if (memchr(uri + pre, '/', len - pre - suf) != NULL)
		return NULL;
	return pdk_xasprintf("%.*s", (int)(len - pre - suf), uri + pre);
}

static json_t *template_contents(const char *uri, const char *id)
{
	_cleanup_json_ json_t *data = json_pack("{s:s,s:b,s:s+}", "id", id, "templateTest", 1,
						"data", "Data for ID: ", id);
	_cleanup_free_ char *text = json_dumps(data, JSON_COMPACT);

	return json_pack("{s:[{s:s,s:s,s:s}]}", "contents", "uri", uri, "mimeType",
			 "application/json", "text", text);
}

/* resources/read: a fixture resource, a URI of the template, or -32602 naming the URI. */
static void read_resource(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	const char *uri = json_string_value(json_object_get(m->params, "uri"));
	json_t *r = find("resources", "uri", uri);
	_cleanup_free_ char *id = template_id(uri);

	if (r != NULL)
		answer_cacheable(c, m,
				 json_pack("{s:O}", "contents", json_object_get(r, "contents")));
	else if (id != NULL)
		answer_cacheable(c, m, template_contents(uri, id));
	else
		refuse(c, m, PDK_RPC_INVALID_PARAMS, "resource not found",
		       json_pack("{s:s?}", "uri", uri));
}

/* The longest prompt argument taken, and so the longest string substitute() can make. */
#define PROMPT_ARG_MAX 4096
#define FILLED_MAX     (64 * 1024)

static void add(struct pdk_buf *b, const char *s, size_t len)
{
	/* Fixture strings are short and hold at most two {NAME}s of PROMPT_ARG_MAX bytes. */
	if (pdk_buf_add(b, s, len) < 0)
		pdk_bug("a conformance fixture string outgrew its buffer");
}

/* `s` with each {NAME} replaced by the string argument NAME of `args` (caller frees). */
static char *substitute(const char *s, const json_t *args)
{
	_cleanup_buf_ struct pdk_buf out = PDK_BUF_INIT(FILLED_MAX);

	while (*s != '\0') {
		const char *open = strchr(s, '{'), *close = open ? strchr(open, '}') : NULL;
		_cleanup_free_ char *name = NULL;
		const char *value;

		if (close == NULL) {
			add(&out, s, strlen(s));
			break;
		}
		name = pdk_xasprintf("%.*s", (int)(close - open - 1), open + 1);
		value = json_string_value(json_object_get(args, name));
		add(&out, s, (size_t)(open - s));
		if (value != NULL)
			add(&out, value, strlen(value));
		else
			add(&out, open, (size_t)(close - open + 1));
		s = close + 1;
	}
	return pdk_buf_take(&out, NULL);
}

/* A copy of `v` with every string substituted (substitute()). */
static json_t *fill(const json_t *v, const json_t *args)
{
	const char *key;
	size_t i;
	json_t *x, *out;

	if (json_is_string(v)) {
		_cleanup_free_ char *s = substitute(json_string_value(v), args);

		return json_string(s);
	}
	if (json_is_array(v)) {
		out = json_array();
		json_array_foreach(v, i, x) json_array_append_new(out, fill(x, args));
		return out;
	}
	if (json_is_object(v)) {
		out = json_object();
		json_object_foreach((json_t *)v, key, x)
			json_object_set_new(out, key, fill(x, args));
		return out;
	}
	return json_deep_copy(v);
}

/* prompts/get: the prompt's messages with its arguments in; a missing one is -32602. */
static void get_prompt(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	const char *name = json_string_value(json_object_get(m->params, "name"));
	json_t *p = find("prompts", "name", name);
	json_t *args = json_object_get(m->params, "arguments");
	size_t i;
	json_t *a;

	if (p == NULL) {
		refuse(c, m, PDK_RPC_INVALID_PARAMS, "prompt not found",
		       json_pack("{s:s?}", "name", name));
		return;
	}
	json_array_foreach(json_object_get(p, "arguments"), i, a)
	{
		const char *arg = json_string_value(json_object_get(a, "name"));

		json_t *value = json_object_get(args, arg);

		if (json_is_true(json_object_get(a, "required")) && !json_is_string(value)) {
			refuse(c, m, PDK_RPC_INVALID_PARAMS,
			       "a required prompt argument is missing",
			       json_pack("{s:s}", "argument", arg));
			return;
		}
		if (json_is_string(value) && json_string_length(value) > PROMPT_ARG_MAX) {
			refuse(c, m, PDK_RPC_INVALID_PARAMS, "a prompt argument is over 4096 bytes",
			       json_pack("{s:s}", "argument", arg));
			return;
		}
	}
	if (json_object_get(p, "rounds") != NULL && modern(m) && mrtr(c, m, p))
		return;
	answer(c, m,
	       json_pack("{s:O,s:o}", "description", json_object_get(p, "description"), "messages",
			 fill(json_object_get(p, "messages"), args)));
}

/* completion/complete: no suggestions (the scenario asks only for the shape). */
static void complete(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	answer(c, m,
	       json_pack("{s:{s:[],s:i,s:b}}", "completion", "values", "total", 0, "hasMore", 0));
}

/*
 * Methods of the legacy era that 2026-07-28 removed (its changelog): a
 * modern request for one is the server's to refuse as an unknown method.
 */
static bool removed_in_modern(const char *method)
{
	return strcmp(method, "resources/subscribe") == 0 ||
	       strcmp(method, "resources/unsubscribe") == 0 ||
	       strcmp(method, "logging/setLevel") == 0;
}

bool pdk__mcp_fixture_request(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	const char *method = m->method;
	json_t *tool;

	if (strcmp(method, "tools/call") == 0) {
		tool = find("tools", "name", json_string_value(json_object_get(m->params, "name")));
		if (tool == NULL)
			return false; /* one of the server's own tools */
		call_tool(c, m, tool);
	} else if (strcmp(method, "resources/list") == 0)
		answer_cacheable(c, m, json_pack("{s:o}", "resources", listed("resources")));
	else if (strcmp(method, "resources/templates/list") == 0)
		answer_cacheable(
			c, m, json_pack("{s:o}", "resourceTemplates", listed("resourceTemplates")));
	else if (strcmp(method, "resources/read") == 0)
		read_resource(c, m);
	else if (removed_in_modern(method)) {
		if (modern(m))
			return false; /* the server refuses it as an unknown method */
		answer(c, m, json_object());
	} else if (strcmp(method, "prompts/list") == 0)
		answer_cacheable(c, m, json_pack("{s:o}", "prompts", listed("prompts")));
	else if (strcmp(method, "prompts/get") == 0)
		get_prompt(c, m);
	else if (strcmp(method, "completion/complete") == 0)
		complete(c, m);
	else
		return false;
	return true;
}
