/*
 * fuzz-jschema.c - libFuzzer target for JSON Schema (src/mcp/jschema.h):
 * schemas and instances an upstream MCP server and a model chose.
 *
 * The input is a schema, a NUL byte and an instance; without a NUL, the
 * schema is checked against itself. A schema compiles or is refused with a
 * message and the pointer to blame; an instance is valid or not, with a
 * message and a pointer, and the same answer twice. Nothing may crash, leak,
 * hang or read out of bounds, whatever the schema's patterns and references.
 */
#include "common.h"
#include "jschema.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(int r, struct pdk_error **err)
{
	if (r == 0 && *err == NULL)
		return;
	if (r != -EINVAL || *err == NULL || (*err)->msg[0] == '\0' || (*err)->field == NULL)
		abort(); /* a refusal always says what and where */
	pdk_error_free(err);
}

static void run(const json_t *schema, const json_t *instance)
{
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	int r = pdk_jschema_compile(schema, &s, &err), again;

	check_error(r, &err);
	if (r < 0) {
		if (s != NULL)
			abort();
		return;
	}
	r = pdk_jschema_validate(s, instance, &err);
	check_error(r, &err);
	again = pdk_jschema_validate(s, instance, NULL);
	if (again != r)
		abort(); /* the same answer for the same instance */
	pdk_jschema_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t slen = nul ? (size_t)(nul - data) : size;
	json_t *schema = json_loadb((const char *)data, slen, JSON_DECODE_ANY, NULL);
	json_t *instance = NULL;

	if (schema == NULL)
		return 0;
	if (nul != NULL)
		instance =
			json_loadb((const char *)nul + 1, size - slen - 1, JSON_DECODE_ANY, NULL);
	run(schema, nul != NULL ? instance : schema);
	json_decref(schema);
	json_decref(instance);
	return 0;
}
