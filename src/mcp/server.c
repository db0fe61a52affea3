/*
 * server.c - the server object, connections, and the methods of the
 * protocol's legacy era: initialize, ping, tools/list, tools/call and the
 * notifications a client sends (docs/mcp.md, "Eras").
 */
#include "common.h"
#include "fixtures.h"
#include "mcp-internal.h"

#include <string.h>

#define DEFAULT_TTL_S 3600

static const char *const versions[] = {PDK_MCP_VERSION_LATEST, PDK_MCP_VERSION_PREV};

static const char instructions[] =
	"Tools run in paddock sandboxes: no network beyond the profile's allowlist, a "
	"workspace whose changes are a reviewable change set, every call audited. Calls "
	"without sandbox_id share one sandbox per session (2025 revisions); in the 2026-07-28 "
	"revision, create one with sandbox_create and pass its sandbox_id.";

struct pdk_mcp *pdk_mcp_new(const struct pdk_mcp_opts *o)
{
	struct pdk_mcp *m = pdk_xcalloc(1, sizeof(*m));

	m->ctl = o->ctl;
	m->base = o->base;
	if (o->log != NULL)
		m->log = *o->log;
	m->max_message = o->max_message ? o->max_message : PDK_RPC_MESSAGE_MAX;
	m->profile = pdk_xstrdup(o->profile ? o->profile : "default");
	m->ttl_s = o->ttl_s ? o->ttl_s : DEFAULT_TTL_S;
	m->workspace = o->workspace ? pdk_xstrdup(o->workspace) : NULL;
	m->approval_timeout_s = o->approval_timeout_s;
	m->elicit_approvals = !o->no_elicit_approvals;
	m->provider = o->provider;
	m->own_tools = o->provider == NULL || o->provider->own_tools;
	m->instructions = pdk_xstrdup(o->instructions ? o->instructions : instructions);
	m->tools = m->own_tools ? pdk__mcp_tools_json() : json_array();
	m->fixtures = o->conformance_fixtures;
	if (m->fixtures) {
		json_t *more = pdk__mcp_fixture_tools();

		json_array_extend(m->tools, more);
		json_decref(more);
	}
	pdk__mrtr_key(m->key);
	return m;
}

void pdk_mcp_free(struct pdk_mcp *m)
{
	if (m == NULL)
		return;
	pdk__mcp_held_free(m);
	json_decref(m->tools);
	free(m->instructions);
	free(m->profile);
	free(m->workspace);
	free(m);
}

/* ---- connections ---- */

struct pdk_mcp_conn *pdk_mcp_conn_new(struct pdk_mcp *m, const char *identity,
				      const char *transport, pdk_mcp_send_cb send, void *ctx)
{
	struct pdk_mcp_conn *c = pdk_xcalloc(1, sizeof(*c));

	c->m = m;
	c->identity = pdk_xstrdup(identity);
	c->principal = pdk_xstrdup(identity);
	c->transport = pdk_xstrdup(transport);
	c->send = send;
	c->send_ctx = ctx;
	c->refs = 1; /* the transport's */
	c->next_conn = m->conns;
	m->conns = c;
	return c;
}

void pdk__mcp_conn_set_principal(struct pdk_mcp_conn *c, const char *principal)
{
	free(c->principal);
	c->principal = pdk_xstrdup(principal);
}

const char *pdk_mcp_conn_principal(const struct pdk_mcp_conn *c)
{
	return c->principal;
}

const char *pdk_mcp_conn_session(const struct pdk_mcp_conn *c)
{
	return c->identity;
}

const char *pdk_mcp_conn_client(const struct pdk_mcp_conn *c)
{
	return json_string_value(json_object_get(c->client, "name"));
}

static void conn_unlink(struct pdk_mcp_conn *c)
{
	for (struct pdk_mcp_conn **p = &c->m->conns; *p != NULL; p = &(*p)->next_conn)
		if (*p == c) {
			*p = c->next_conn;
			return;
		}
}

static void conn_free(struct pdk_mcp_conn *c)
{
	free(c->identity);
	free(c->principal);
	free(c->transport);
	free(c->version);
	free(c->own_sb);
	json_decref(c->client);
	json_decref(c->caps);
	free(c);
}

void pdk__mcp_conn_unref(struct pdk_mcp_conn *c)
{
	if (--c->refs == 0)
		conn_free(c);
}

size_t pdk_mcp_conn_calls(const struct pdk_mcp_conn *c)
{
	size_t n = 0;

	for (const struct pdk_mcp_call *x = c->calls; x != NULL; x = x->next)
		n++;
	for (const struct pdk_mcp_call *x = c->waiting; x != NULL; x = x->next)
		n++;
	return n;
}

static void own_destroyed(void *ctx, const char *id, const char *state, const struct pdk_error *err)
{
	struct pdk_mcp_conn *c = ctx;

	if (err != NULL)
		pdk_log(&c->m->log, PDK_LOG_WARN, "sandbox %s of an MCP session: %s", id, err->msg);
	(void)state;
	pdk__mcp_conn_unref(c);
}

void pdk_mcp_conn_close(struct pdk_mcp_conn *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_mcp_call *next;

	c->closed = true;
	conn_unlink(c);
	for (struct pdk_mcp_call *x = c->calls; x != NULL; x = next) {
		bool listen = x->listen;

		next = x->next;
		/* A provider may answer (and free) the call from its cancel callback. */
		pdk__mcp_call_cancel(x);
		if (listen)
			pdk__mcp_call_finish(x, NULL); /* nothing runs for it */
	}
	if (c->m->provider != NULL && c->m->provider->conn_end != NULL)
		c->m->provider->conn_end(c->m->provider->ctx, c);
	/* What the server still asks the client is answered by nobody now. */
	pdk__mcp_asks_fail(c);
	for (struct pdk_mcp_call *x = c->waiting; x != NULL; x = x->next)
		x->cancelled = true;
	/* The session's own sandbox ends with it; sandboxes made with a handle end at their TTL. */
	if (c->own_sb != NULL) {
		c->refs++;
		if (pdk_ctl_destroy(c->m->ctl, c->own_sb, "mcp session ended", NULL, own_destroyed,
				    c, &err) < 0)
			pdk__mcp_conn_unref(c);
	}
	pdk__mcp_conn_unref(c);
}

void pdk__mcp_send(struct pdk_mcp_conn *c, const json_t *related, json_t *msg)
{
	if (!c->closed && msg != NULL)
		c->send(c->send_ctx, related, msg);
	json_decref(msg);
}

/* ---- what both eras share ---- */

static void answer_error(struct pdk_mcp_conn *c, const json_t *id, int code, const char *msg,
			 json_t *data)
{
	pdk__mcp_send(c, id, pdk_rpc_error(id, code, msg, data));
}

static json_t *server_info(void)
{
	return json_pack("{s:s, s:s, s:s}", "name", "paddock", "title", "paddock sandboxes",
			 "version", PDK_VERSION);
}

static json_t *progress_token(const json_t *params)
{
	json_t *t = json_object_get(json_object_get(params, "_meta"), "progressToken");

	return json_is_string(t) || json_is_integer(t) ? json_incref(t) : NULL;
}

/* The tools connection `c` sees: paddock's own, then the provider's (new reference). */
static json_t *tools_of(struct pdk_mcp_conn *c)
{
	json_t *all = json_copy(c->m->tools);
	const struct pdk_mcp_provider *p = c->m->provider;

	if (all == NULL)
		pdk_oom();
	if (p != NULL && p->list != NULL) {
		_cleanup_json_ json_t *more = p->list(p->ctx, c);

		if (json_is_array(more))
			json_array_extend(all, more);
	}
	return all;
}

/* A call whose arguments do not fit the tool's schema: an isError result naming the field. */
static bool args_ok(struct pdk_mcp_call *call, const json_t *schema)
{
	const char *field = NULL;
	char msg[256];

	if (pdk__schema_check(schema, call->args, &field, msg, sizeof(msg)) == 0)
		return true;
	pdk__mcp_call_bad(call, field, "%s", msg);
	return false;
}

static struct pdk_mcp_call *call_new(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	struct pdk_mcp_call *call = pdk_xcalloc(1, sizeof(*call));

	call->conn = c;
	/* The request's id and params are only read: the call holds them with the message. */
	call->id = json_incref(m->id);
	call->params = m->params ? json_incref(m->params) : json_object();
	call->progress = progress_token(m->params);
	call->start_ns = pdk_now_mono_ns();
	c->refs++;
	call->next = c->calls;
	c->calls = call;
	return call;
}

static void unknown_tool(struct pdk_mcp_conn *c, const json_t *id, const char *name)
{
	answer_error(c, id, PDK_RPC_INVALID_PARAMS, "unknown tool: see tools/list",
		     json_pack("{s:s}", "name", name));
}

/* A 2026-07-28 call (`caps` its clientCapabilities; NULL: legacy): what an MRTR retry carries. */
static void call_modern(struct pdk_mcp_call *call, const json_t *caps)
{
	call->modern = caps != NULL;
	if (caps == NULL)
		return;
	call->caps = json_deep_copy(caps);
	call->input_responses = json_object_get(call->params, "inputResponses");
	call->request_state = json_string_value(json_object_get(call->params, "requestState"));
}

/*
 * A tools/call the provider answers. SECURITY: its arguments are not
 * checked here (schema.c knows paddock's own tools only): the provider
 * validates them against the tool's own inputSchema before anything runs.
 */
static void provided_call(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, const char *name,
			  const json_t *caps)
{
	const struct pdk_mcp_provider *p = c->m->provider;
	json_t *args = json_object_get(m->params, "arguments");
	struct pdk_mcp_call *call = call_new(c, m);

	call->provided = true;
	call->name = pdk_xstrdup(name);
	call_modern(call, caps);
	/* A provider never changes its call's arguments (it copies them to redact). */
	call->args = args ? json_incref(args) : json_object();
	if (p->call(p->ctx, call, name, call->args))
		return;
	unknown_tool(c, m->id, name);
	call->answered = true;
	pdk__mcp_call_finish(call, NULL);
}

/* tools/call: `caps` the modern request's clientCapabilities (NULL: legacy). */
static void on_tools_call(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, bool modern,
			  const json_t *caps)
{
	const char *name = json_string_value(json_object_get(m->params, "name"));
	json_t *args = json_object_get(m->params, "arguments");
	const struct pdk_mcp_tool *t = name && c->m->own_tools ? pdk__mcp_tool_find(name) : NULL;
	_cleanup_json_ json_t *schema = NULL;
	struct pdk_mcp_call *call;

	if (name != NULL && t == NULL && c->m->provider != NULL &&
	    (args == NULL || json_is_object(args))) {
		provided_call(c, m, name, modern ? caps : NULL);
		return;
	}
	if (name == NULL || t == NULL) {
		answer_error(c, m->id, PDK_RPC_INVALID_PARAMS,
			     name ? "unknown tool: see tools/list"
				  : "tools/call needs the tool's 'name'",
			     name ? json_pack("{s:s}", "name", name) : NULL);
		return;
	}
	if (args != NULL && !json_is_object(args)) {
		answer_error(c, m->id, PDK_RPC_INVALID_PARAMS, "'arguments' must be an object",
			     NULL);
		return;
	}
	call = call_new(c, m);
	call->tool = t;
	call->args = args ? json_deep_copy(args) : json_object();
	call_modern(call, modern ? caps : NULL);
	schema = t->input();
	if (args_ok(call, schema))
		pdk__mcp_call_start(call);
}

static void on_cancelled(struct pdk_mcp_conn *c, const json_t *params)
{
	const json_t *id = json_object_get(params, "requestId");

	for (struct pdk_mcp_call *x = c->calls; id != NULL && x != NULL; x = x->next)
		if (json_equal(x->id, (json_t *)id)) {
			bool listen = x->listen;

			/* A provider may answer (and free) the call from its cancel callback. */
			pdk__mcp_call_cancel(x);
			/* A subscription has nothing running: it ends here, silently. */
			if (listen)
				pdk__mcp_call_finish(x, NULL);
			return;
		}
	for (struct pdk_mcp_call *x = c->waiting; id != NULL && x != NULL; x = x->next)
		if (json_equal(x->id, (json_t *)id))
			x->cancelled = true;
}

/* ---- the legacy era: 2025-11-25, 2025-06-18 ---- */

static const char *negotiate(const char *asked)
{
	for (size_t i = 0; asked != NULL && i < PDK_ARRAY_SIZE(versions); i++)
		if (strcmp(asked, versions[i]) == 0)
			return versions[i];
	/* A revision we do not speak: the latest we do; the client decides whether to go on. */
	return versions[0];
}

static void on_initialize(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	const json_t *p = m->params;
	const char *asked = json_string_value(json_object_get(p, "protocolVersion"));
	json_t *caps = json_object_get(p, "capabilities");
	json_t *info = json_object_get(p, "clientInfo");
	json_t *r;

	if (asked == NULL || !json_is_object(caps) || !json_is_object(info)) {
		answer_error(c, m->id, PDK_RPC_INVALID_PARAMS,
			     "initialize needs 'protocolVersion', 'capabilities' and 'clientInfo'",
			     NULL);
		return;
	}
	free(c->version);
	c->version = pdk_xstrdup(negotiate(asked));
	json_decref(c->caps);
	c->caps = json_incref(caps);
	json_decref(c->client);
	c->client = json_incref(info);
	c->initialized = true;
	r = json_pack("{s:s, s:{s:{s:b}}, s:o, s:s}", "protocolVersion", c->version, "capabilities",
		      "tools", "listChanged", c->m->provider != NULL, "serverInfo", server_info(),
		      "instructions", c->m->instructions);
	if (c->m->fixtures)
		pdk__mcp_fixture_caps(json_object_get(r, "capabilities"));
	pdk__mcp_send(c, m->id, pdk_rpc_result(m->id, r));
}

static void on_legacy(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	if (strcmp(m->method, "initialize") == 0)
		on_initialize(c, m);
	else if (strcmp(m->method, "ping") == 0)
		pdk__mcp_send(c, m->id, pdk_rpc_result(m->id, NULL));
	else if (!c->initialized)
		answer_error(c, m->id, PDK_RPC_INVALID_REQUEST,
			     "the session is not initialized: send initialize first (or, in the "
			     "2026-07-28 revision, io.modelcontextprotocol/protocolVersion in "
			     "_meta)",
			     NULL);
	else if (c->m->fixtures && pdk__mcp_fixture_request(c, m))
		return; /* a conformance fixture answered */
	else if (strcmp(m->method, "tools/list") == 0)
		pdk__mcp_send(c, m->id,
			      pdk_rpc_result(m->id, json_pack("{s:o}", "tools", tools_of(c))));
	else if (strcmp(m->method, "tools/call") == 0)
		on_tools_call(c, m, false, NULL);
	else
		answer_error(c, m->id, PDK_RPC_METHOD_NOT_FOUND,
			     "method not found: this server offers tools only", NULL);
}

/* ---- the modern era: 2026-07-28 (stateless: every request says what it needs) ---- */

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS    "io.modelcontextprotocol/clientCapabilities"
#define META_CLIENT  "io.modelcontextprotocol/clientInfo"
#define META_SERVER  "io.modelcontextprotocol/serverInfo"
#define META_SUB     "io.modelcontextprotocol/subscriptionId"
/* How long a client may keep tools/list and server/discover: they change with the binary. */
#define LIST_TTL_MS 3600000

const char *pdk__mcp_modern_version(const struct pdk_rpc_msg *m)
{
	return json_string_value(
		json_object_get(json_object_get(m->params, "_meta"), META_VERSION));
}

json_t *pdk__mcp_modern_result(json_t *result)
{
	json_t *meta;

	if (result == NULL)
		result = json_object();
	if (json_object_get(result, "resultType") == NULL)
		pdk_json_set(result, "resultType", json_string("complete"));
	meta = json_object_get(result, "_meta");
	if (meta == NULL) {
		meta = json_object();
		pdk_json_set(result, "_meta", meta);
	}
	pdk_json_set(meta, META_SERVER, server_info());
	return result;
}

static json_t *supported(void)
{
	return json_pack("[s,s,s]", PDK_MCP_VERSION_MODERN, PDK_MCP_VERSION_LATEST,
			 PDK_MCP_VERSION_PREV);
}

static void answer_modern(struct pdk_mcp_conn *c, const json_t *id, json_t *result)
{
	pdk__mcp_send(c, id, pdk_rpc_result(id, pdk__mcp_modern_result(result)));
}

static void on_discover(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	json_t *r = json_pack("{s:o, s:{s:{}}, s:s, s:i, s:s}", "supportedVersions", supported(),
			      "capabilities", "tools", "instructions", c->m->instructions, "ttlMs",
			      LIST_TTL_MS, "cacheScope", "public");

	if (c->m->provider != NULL)
		pdk_json_set(json_object_get(r, "capabilities"), "tools",
			     json_pack("{s:b}", "listChanged", 1));
	if (c->m->fixtures)
		pdk__mcp_fixture_caps(json_object_get(r, "capabilities"));
	answer_modern(c, m->id, r);
}

/*
 * subscriptions/listen: paddock's own tools never change, so without a
 * provider the stream only ever says it is open; a provider's changes go to
 * the streams that asked for toolsListChanged (pdk_mcp_tools_changed()).
 */
static void on_listen(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	const json_t *want = json_object_get(m->params, "notifications");
	struct pdk_mcp_call *call = call_new(c, m);
	json_t *granted = json_object();

	call->listen = true;
	call->modern = true;
	if (json_is_true(json_object_get(want, "toolsListChanged"))) {
		pdk_json_set(granted, "toolsListChanged", json_true());
		call->list_changed = true;
	}
	pdk__mcp_send(c, m->id,
		      pdk_rpc_notification("notifications/subscriptions/acknowledged",
					   json_pack("{s:{s:O}, s:o}", "_meta", META_SUB, m->id,
						     "notifications", granted)));
}

/*
 * A provider's tools change while the binary runs and may depend on the
 * principal: its list is private and not kept.
 */
static void on_modern_list(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	bool fixed = c->m->provider == NULL;

	answer_modern(c, m->id,
		      json_pack("{s:o, s:i, s:s}", "tools", tools_of(c), "ttlMs",
				fixed ? LIST_TTL_MS : 0, "cacheScope",
				fixed ? "public" : "private"));
}

static bool modern_ok(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, const char *version)
{
	const json_t *meta = json_object_get(m->params, "_meta");

	if (strcmp(version, PDK_MCP_VERSION_MODERN) != 0) {
		answer_error(
			c, m->id, PDK_RPC_UNSUPPORTED_VERSION, "Unsupported protocol version",
			json_pack("{s:o, s:s}", "supported", supported(), "requested", version));
		return false;
	}
	if (!json_is_object(json_object_get(meta, META_CAPS))) {
		answer_error(c, m->id, PDK_RPC_INVALID_PARAMS,
			     "a 2026-07-28 request carries " META_CAPS " (an object) in _meta",
			     NULL);
		return false;
	}
	return true;
}

static void on_modern(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m, const char *version)
{
	const json_t *meta = json_object_get(m->params, "_meta");

	if (!modern_ok(c, m, version))
		return;
	if (c->client == NULL && json_is_object(json_object_get(meta, META_CLIENT)))
		c->client = json_deep_copy(json_object_get(meta, META_CLIENT));
	if (c->m->fixtures && pdk__mcp_fixture_request(c, m))
		return; /* a conformance fixture answered */
	if (strcmp(m->method, "server/discover") == 0)
		on_discover(c, m);
	else if (strcmp(m->method, "tools/list") == 0)
		on_modern_list(c, m);
	else if (strcmp(m->method, "tools/call") == 0)
		on_tools_call(c, m, true, json_object_get(meta, META_CAPS));
	else if (strcmp(m->method, "subscriptions/listen") == 0)
		on_listen(c, m);
	else
		answer_error(c, m->id, PDK_RPC_METHOD_NOT_FOUND,
			     "method not found in 2026-07-28: this server offers server/discover, "
			     "tools/list, tools/call and subscriptions/listen",
			     NULL);
}

/* ---- a provider's tools changed ---- */

static void notify_changed(struct pdk_mcp_conn *c)
{
	if (c->initialized)
		pdk__mcp_send(c, NULL,
			      pdk_rpc_notification("notifications/tools/list_changed", NULL));
	for (struct pdk_mcp_call *x = c->calls; x != NULL; x = x->next)
		if (x->listen && x->list_changed && !x->cancelled)
			pdk__mcp_send(c, x->id,
				      pdk_rpc_notification(
					      "notifications/tools/list_changed",
					      json_pack("{s:{s:O}}", "_meta", META_SUB, x->id)));
}

void pdk_mcp_tools_changed(struct pdk_mcp *m)
{
	for (struct pdk_mcp_conn *c = m->conns; c != NULL; c = c->next_conn)
		if (!c->closed)
			notify_changed(c);
}

/* ---- dispatch ---- */

/* Notifications get no answer, whatever they say (JSON-RPC 2.0, section 4.1). */
static void on_notification(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	if (strcmp(m->method, "notifications/cancelled") == 0)
		on_cancelled(c, m->params);
}

void pdk__mcp_dispatch(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m)
{
	const char *modern;

	if (m->kind == PDK_RPC_NOTIFICATION) {
		on_notification(c, m);
		return;
	}
	/* A response answers one of the server's own requests (ask.c), or nothing. */
	if (m->kind != PDK_RPC_REQUEST) {
		pdk__mcp_answer(c, m);
		return;
	}
	modern = pdk__mcp_modern_version(m);
	if (modern != NULL)
		on_modern(c, m, modern);
	else
		on_legacy(c, m);
}

void pdk_mcp_conn_message(struct pdk_mcp_conn *c, const char *data, size_t len)
{
	struct pdk_rpc_msg m;
	struct pdk_rpc_refusal why;

	if (pdk_rpc_parse(data, len, c->m->max_message, &m, &why) < 0) {
		answer_error(c, why.id, why.code, why.msg, NULL);
		pdk_rpc_refusal_release(&why);
		return;
	}
	pdk__mcp_dispatch(c, &m);
	pdk_rpc_msg_release(&m);
}
