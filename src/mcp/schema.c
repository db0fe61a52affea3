/*
 * schema.c - the tools' JSON Schemas, and the one check of a call's
 * arguments against them: what tools/list shows a client is what the
 * server enforces, so the two cannot drift apart.
 */
#include "common.h"
#include "mcp-internal.h"

#include <stdio.h>
#include <string.h>

static json_t *checked(json_t *v)
{
	if (v == NULL)
		pdk_oom();
	return v;
}

json_t *pdk__schema_object(json_t *properties, const char *const *required)
{
	json_t *o = checked(json_pack("{s:s, s:o, s:b}", "type", "object", "properties", properties,
				      "additionalProperties", 0));
	json_t *req = checked(json_array());

	for (size_t i = 0; required != NULL && required[i] != NULL; i++)
		(void)json_array_append_new(req, json_string(required[i]));
	if (json_array_size(req) > 0)
		pdk_json_set(o, "required", req);
	else
		json_decref(req);
	return o;
}

json_t *pdk__schema_str(const char *description)
{
	return checked(json_pack("{s:s, s:s}", "type", "string", "description", description));
}

json_t *pdk__schema_enum(const char *description, const char *const *values)
{
	json_t *o = pdk__schema_str(description);
	json_t *e = checked(json_array());

	for (size_t i = 0; values[i] != NULL; i++)
		(void)json_array_append_new(e, json_string(values[i]));
	pdk_json_set(o, "enum", e);
	return o;
}

json_t *pdk__schema_int(const char *description, int64_t min, int64_t max)
{
	return checked(json_pack("{s:s, s:s, s:I, s:I}", "type", "integer", "description",
				 description, "minimum", (json_int_t)min, "maximum",
				 (json_int_t)max));
}

json_t *pdk__schema_bool(const char *description)
{
	return checked(json_pack("{s:s, s:s}", "type", "boolean", "description", description));
}

json_t *pdk__schema_strv(const char *description)
{
	return checked(json_pack("{s:s, s:s, s:{s:s}}", "type", "array", "description", description,
				 "items", "type", "string"));
}

json_t *pdk__schema_strmap(const char *description)
{
	return checked(json_pack("{s:s, s:s, s:{s:s}}", "type", "object", "description",
				 description, "additionalProperties", "type", "string"));
}

json_t *pdk__schema_handle(void)
{
	return pdk__schema_str("the sandbox (a handle from sandbox_create); without it, the "
			       "sandbox of this MCP session, made at its first call");
}

/* ---- the check ---- */

PDK_PRINTF(3, 4)
static int bad(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return -1;
}

static bool all_strings(const json_t *v, bool array)
{
	const char *key;
	size_t i;
	json_t *x;

	if (array) {
		json_array_foreach(v, i, x) if (!json_is_string(x)) return false;
		return true;
	}
	json_object_foreach((json_t *)v, key, x) if (!json_is_string(x)) return false;
	return true;
}

static bool in_enum(const json_t *e, const char *s)
{
	size_t i;
	json_t *x;

	json_array_foreach(e, i, x) if (strcmp(json_string_value(x), s) == 0) return true;
	return false;
}

static int check_string(const json_t *prop, const json_t *v, const char *key, char *msg, size_t len)
{
	const json_t *e = json_object_get(prop, "enum");

	if (!json_is_string(v))
		return bad(msg, len, "'%s' must be a string", key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return bad(msg, len, "'%s' must not hold a NUL character", key);
	if (e != NULL && !in_enum(e, json_string_value(v)))
		return bad(msg, len, "'%s' must be one of the values its schema lists", key);
	return 0;
}

static int check_integer(const json_t *prop, const json_t *v, const char *key, char *msg,
			 size_t len)
{
	json_int_t min = json_integer_value(json_object_get(prop, "minimum"));
	json_int_t max = json_integer_value(json_object_get(prop, "maximum"));

	if (!json_is_integer(v))
		return bad(msg, len, "'%s' must be an integer", key);
	if (json_integer_value(v) < min || json_integer_value(v) > max)
		return bad(msg, len, "'%s' must be from %lld to %lld", key, (long long)min,
			   (long long)max);
	return 0;
}

static int check_value(const json_t *prop, const json_t *v, const char *key, char *msg, size_t len)
{
	const char *type = json_string_value(json_object_get(prop, "type"));

	if (strcmp(type, "string") == 0)
		return check_string(prop, v, key, msg, len);
	if (strcmp(type, "integer") == 0)
		return check_integer(prop, v, key, msg, len);
	if (strcmp(type, "boolean") == 0)
		return json_is_boolean(v) ? 0 : bad(msg, len, "'%s' must be true or false", key);
	if (strcmp(type, "array") == 0)
		return json_is_array(v) && all_strings(v, true)
			       ? 0
			       : bad(msg, len, "'%s' must be an array of strings", key);
	return json_is_object(v) && all_strings(v, false)
		       ? 0
		       : bad(msg, len, "'%s' must be an object of strings", key);
}

int pdk__schema_check(const json_t *schema, const json_t *args, const char **field, char *msg,
		      size_t len)
{
	const json_t *props = json_object_get(schema, "properties");
	const json_t *req = json_object_get(schema, "required");
	const char *key;
	json_t *v;
	size_t i;

	json_object_foreach((json_t *)args, key, v)
	{
		const json_t *prop = json_object_get(props, key);

		*field = key;
		if (prop == NULL)
			return bad(msg, len,
				   "unknown argument '%s': this tool takes only those its "
				   "inputSchema lists",
				   key);
		if (check_value(prop, v, key, msg, len) < 0)
			return -1;
	}
	json_array_foreach(req, i, v)
	{
		*field = json_string_value(v);
		if (json_object_get(args, *field) == NULL)
			return bad(msg, len, "'%s' is required", *field);
	}
	*field = NULL;
	return 0;
}
