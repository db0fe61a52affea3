/*
 * jsonrpc.c - parse and build JSON-RPC 2.0 messages (jsonrpc.h).
 */
#include "common.h"
#include "jsonrpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

PDK_PRINTF(3, 4)
static int refuse(struct pdk_rpc_refusal *why, int code, const char *fmt, ...)
{
	va_list ap;

	why->code = code;
	va_start(ap, fmt);
	(void)vsnprintf(why->msg, sizeof(why->msg), fmt, ap);
	va_end(ap);
	return -1;
}

static bool id_ok(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

/* The members a message may have: anything else makes it no message of ours. */
static int check_members(const json_t *o, struct pdk_rpc_refusal *why)
{
	static const char *const known[] = {"jsonrpc", "id", "method", "params", "result", "error"};
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)o, key, v)
	{
		bool found = false;

		for (size_t i = 0; i < PDK_ARRAY_SIZE(known) && !found; i++)
			found = strcmp(key, known[i]) == 0;
		if (!found)
			return refuse(why, PDK_RPC_INVALID_REQUEST, "unknown member '%.64s'", key);
	}
	return 0;
}

static int parse_call(json_t *o, struct pdk_rpc_msg *out, struct pdk_rpc_refusal *why)
{
	json_t *method = json_object_get(o, "method");
	json_t *params = json_object_get(o, "params");

	if (json_object_get(o, "result") != NULL || json_object_get(o, "error") != NULL)
		return refuse(why, PDK_RPC_INVALID_REQUEST,
			      "a request has no 'result' or 'error' member");
	if (!json_is_string(method) || json_string_length(method) == 0)
		return refuse(why, PDK_RPC_INVALID_REQUEST, "'method' must be a non-empty string");
	if (strlen(json_string_value(method)) != json_string_length(method))
		return refuse(why, PDK_RPC_INVALID_REQUEST, "'method' holds a NUL byte");
	if (params != NULL && !json_is_object(params))
		return refuse(why, PDK_RPC_INVALID_REQUEST, "'params' must be an object");
	out->method = json_string_value(method);
	out->params = params;
	out->kind = out->id != NULL ? PDK_RPC_REQUEST : PDK_RPC_NOTIFICATION;
	return 0;
}

static int parse_reply(json_t *o, struct pdk_rpc_msg *out, struct pdk_rpc_refusal *why)
{
	json_t *result = json_object_get(o, "result");
	json_t *error = json_object_get(o, "error");

	if ((result == NULL) == (error == NULL))
		return refuse(why, PDK_RPC_INVALID_REQUEST,
			      "a response has exactly one of 'result' and 'error'");
	if (json_object_get(o, "params") != NULL)
		return refuse(why, PDK_RPC_INVALID_REQUEST, "a response has no 'params'");
	if (result != NULL) {
		if (!json_is_object(result) || out->id == NULL)
			return refuse(why, PDK_RPC_INVALID_REQUEST,
				      "a result is an object answering a request id");
		out->kind = PDK_RPC_RESPONSE;
		out->result = result;
		return 0;
	}
	if (!json_is_object(error) || !json_is_integer(json_object_get(error, "code")) ||
	    !json_is_string(json_object_get(error, "message")))
		return refuse(why, PDK_RPC_INVALID_REQUEST,
			      "an error is an object with an integer 'code' and a 'message'");
	out->kind = PDK_RPC_ERROR;
	out->error = error;
	return 0;
}

static int parse_object(json_t *o, struct pdk_rpc_msg *out, struct pdk_rpc_refusal *why)
{
	json_t *version = json_object_get(o, "jsonrpc");
	json_t *id = json_object_get(o, "id");

	/* An id that can be read is echoed in the refusal, so the client can match it. */
	if (id_ok(id))
		why->id = json_incref(id);
	if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0)
		return refuse(why, PDK_RPC_INVALID_REQUEST, "'jsonrpc' must be \"2.0\"");
	if (check_members(o, why) < 0)
		return -1;
	if (id != NULL && !id_ok(id) && !(json_is_null(id) && json_object_get(o, "error")))
		return refuse(why, PDK_RPC_INVALID_REQUEST,
			      "'id' must be a string or an integer (not null)");
	out->id = json_is_null(id) ? NULL : id;
	if (json_object_get(o, "method") != NULL)
		return parse_call(o, out, why);
	return parse_reply(o, out, why);
}

int pdk_rpc_parse(const char *data, size_t len, size_t max, struct pdk_rpc_msg *out,
		  struct pdk_rpc_refusal *why)
{
	json_error_t je;
	json_t *doc;

	*out = (struct pdk_rpc_msg){0};
	*why = (struct pdk_rpc_refusal){0};
	if (max == 0)
		max = PDK_RPC_MESSAGE_MAX;
	if (len > max)
		return refuse(why, PDK_RPC_PARSE_ERROR, "the message is larger than %zu bytes",
			      max);
	/*
	 * SECURITY: a duplicated key could mean one thing to us and another to
	 * a proxy. The plain parser takes the common messages; anything else,
	 * and every refusal, is jansson's.
	 */
	doc = pdk_json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	if (doc == NULL)
		return refuse(why, PDK_RPC_PARSE_ERROR, "not JSON: %s (column %d)", je.text,
			      je.column);
	if (json_is_array(doc)) {
		json_decref(doc);
		return refuse(why, PDK_RPC_INVALID_REQUEST,
			      "JSON-RPC batches are not accepted (MCP removed them in 2025-06-18)");
	}
	if (!json_is_object(doc)) {
		json_decref(doc);
		return refuse(why, PDK_RPC_INVALID_REQUEST, "a message is a JSON object");
	}
	out->doc = doc;
	if (parse_object(doc, out, why) < 0) {
		pdk_rpc_msg_release(out);
		return -1;
	}
	/* The id taken for a refusal is not needed by an accepted message. */
	json_decref(why->id);
	why->id = NULL;
	return 0;
}

void pdk_rpc_msg_release(struct pdk_rpc_msg *m)
{
	json_decref(m->doc);
	*m = (struct pdk_rpc_msg){0};
}

void pdk_rpc_refusal_release(struct pdk_rpc_refusal *why)
{
	json_decref(why->id);
	why->id = NULL;
}

static json_t *envelope(const json_t *id, bool with_id)
{
	json_t *o = json_object();

	if (o == NULL)
		pdk_oom();
	pdk_json_set(o, "jsonrpc", json_string("2.0"));
	if (with_id)
		pdk_json_set(o, "id", id != NULL ? json_incref((json_t *)id) : json_null());
	return o;
}

json_t *pdk_rpc_result(const json_t *id, json_t *result)
{
	json_t *o = envelope(id, true);

	pdk_json_set(o, "result", result != NULL ? result : json_object());
	return o;
}

json_t *pdk_rpc_error(const json_t *id, int code, const char *message, json_t *data)
{
	json_t *o = envelope(id, true);
	/*
	 * A message may quote the sender's bytes (a member's name, cut at 64
	 * bytes, perhaps inside a character): JSON carries only valid UTF-8.
	 */
	size_t len;
	_cleanup_free_ char *clean = pdk_utf8_clean(message, strlen(message), true, &len, NULL);
	json_t *e = json_pack("{s:i, s:s}", "code", code, "message", clean);

	if (e == NULL)
		pdk_oom();
	pdk_json_set(e, "data", data);
	pdk_json_set(o, "error", e);
	return o;
}

json_t *pdk_rpc_notification(const char *method, json_t *params)
{
	json_t *o = envelope(NULL, false);

	pdk_json_set(o, "method", json_string(method));
	pdk_json_set(o, "params", params);
	return o;
}

json_t *pdk_rpc_request(const json_t *id, const char *method, json_t *params)
{
	json_t *o = envelope(id, true);

	pdk_json_set(o, "method", json_string(method));
	pdk_json_set(o, "params", params);
	return o;
}
