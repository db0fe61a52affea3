/*
 * audit.c - every tools/call is a tool.call event in the audit store
 * (docs/mcp.md, "Audit"): who called (the client's name and version, its
 * session or handle), which tool with which arguments (redacted: secret-
 * looking names and well-known token shapes, telemetry/redact.h; long
 * strings cut), how it ended, how long it took and how large its result
 * was. The OTLP export makes it a GenAI execute_tool span (docs/otlp.md).
 */
#include "common.h"
#include "mcp-internal.h"
#include "telemetry.h"

#include <string.h>

/* The longest argument string recorded whole: a file's content or a program is cut. */
#define ARG_KEEP 1024

static void cut_long(json_t *v)
{
	const char *k;
	json_t *x;

	json_object_foreach(v, k, x)
	{
		if (json_is_string(x) && json_string_length(x) > ARG_KEEP) {
			_cleanup_free_ char *s =
				pdk_xasprintf("%.*s... [%zu bytes]", ARG_KEEP, json_string_value(x),
					      json_string_length(x));
			_cleanup_free_ char *clean =
				pdk_utf8_clean(s, strlen(s), true, &(size_t){0}, NULL);

			(void)json_object_set_new(v, k, json_string(clean));
		}
	}
}

/* SECURITY: the arguments as the audit store may keep them: no secret, nothing huge. */
json_t *pdk_mcp_audit_args(const struct pdk_redact *secrets, const json_t *args)
{
	json_t *a = json_deep_copy(args);
	json_t *env = json_object_get(a, "env");
	const char *k;
	json_t *v;

	json_object_foreach(env, k, v) if (pdk_redact_name_is_secret(k, strlen(k)))
	{
		_cleanup_free_ char *r = pdk_xasprintf("[REDACTED:%s]", k);

		(void)json_object_set_new(env, k, json_string(r));
	}
	cut_long(a);
	(void)pdk_redact_json(secrets, a);
	return a;
}

static const char *decision_of(const struct pdk_mcp_call *call, const json_t *result)
{
	const char *type = json_string_value(json_object_get(result, "resultType"));

	if (call->answered || result == NULL)
		return "refused"; /* answered with a protocol error */
	if (call->cancelled)
		return "cancelled";
	if (type != NULL && strcmp(type, "input_required") == 0)
		return "input_required";
	return json_is_true(json_object_get(result, "isError")) ? "error" : "completed";
}

static json_t *client_of(const struct pdk_mcp_conn *c)
{
	const json_t *name = json_object_get(c->client, "name");
	const json_t *version = json_object_get(c->client, "version");

	return json_pack("{s:O?, s:O?}", "name", json_is_string(name) ? name : NULL, "version",
			 json_is_string(version) ? version : NULL);
}

void pdk__mcp_audit(const struct pdk_mcp_call *call, const json_t *result)
{
	struct pdk_mcp_conn *c = call->conn;
	const char *handle;
	_cleanup_free_ char *line = NULL, *id = NULL;
	const json_t *text;
	json_t *attrs;

	/* A subscription is no tool call; a provider's tool (the gateway's) records its own. */
	if (call->tool == NULL)
		return;
	handle = pdk__mcp_arg_str(call, "sandbox_id");
	line = result ? pdk_json_dump_line(result) : NULL;
	id = json_is_string(call->id)
		     ? pdk_xstrdup(json_string_value(call->id))
		     : pdk_xasprintf("%lld", (long long)json_integer_value(call->id));
	text = json_object_get(json_array_get(json_object_get(result, "content"), 0), "text");
	attrs = json_pack("{s:s, s:s, s:o, s:s, s:s, s:s?, s:s, s:o, s:s, s:I, s:I}", "tool",
			  call->tool->name, "call_id", id, "client", client_of(c), "mcp_transport",
			  c->transport, "session", c->identity, "handle", handle, "era",
			  call->modern ? PDK_MCP_VERSION_MODERN
			  : c->version ? c->version
				       : "legacy",
			  "arguments", pdk_mcp_audit_args(NULL, call->args), "decision",
			  decision_of(call, result), "duration_ms",
			  (json_int_t)((pdk_now_mono_ns() - call->start_ns) / 1000000),
			  "result_bytes", (json_int_t)(line ? strlen(line) : 0));
	if (attrs == NULL)
		pdk_oom();
	if (json_is_true(json_object_get(result, "isError")) && json_is_string(text))
		pdk_json_set(attrs, "error", json_string(json_string_value(text)));
	(void)pdk_redact_json(NULL, attrs);
	pdk_ctl_event(c->m->ctl, call->sandbox ? call->sandbox : "daemon", NULL, "tool.call",
		      attrs);
}
