/*
 * jschema.h - JSON Schema (draft 2020-12, the subset MCP tools use) for
 * schemas nobody here wrote: an upstream MCP server's inputSchema and
 * outputSchema (docs/gateway.md, "Schemas").
 *
 * A schema is compiled once (when a tool is pinned) and checked against
 * many instances. Compilation refuses what would be ignored otherwise: a
 * keyword the validator does not implement, a $ref that is not local
 * ("#..." inside the same document: no network, no file), a schema nested
 * deeper than PDK_JSCHEMA_DEPTH_MAX, a keyword whose value has the wrong
 * type. Validation is bounded: an instance nested deeper than
 * PDK_JSCHEMA_DEPTH_MAX fails, and $ref cycles cannot recurse without
 * bound. Pure functions of their arguments; no I/O.
 */
#ifndef PDK_JSCHEMA_H
#define PDK_JSCHEMA_H

#include "common.h"
#include "base.h"

/* The deepest schema and the deepest instance. */
#define PDK_JSCHEMA_DEPTH_MAX 64

struct pdk_jschema; /* a compiled schema (opaque) */

/*
 * Compile `schema` (borrowed; the compiled form keeps its own reference).
 * *out is the caller's (pdk_jschema_free()). -EINVAL with err->field the
 * JSON pointer of the offending keyword in the schema ("/properties/a/
 * pattern") and a message naming it: an unsupported keyword, a non-local
 * $ref, a bad value, a regex that does not compile, too deep.
 */
PDK_MUST_CHECK int pdk_jschema_compile(const json_t *schema, struct pdk_jschema **out,
				       struct pdk_error **err);
void pdk_jschema_free(struct pdk_jschema *s);

/*
 * Whether `instance` is valid: 0, or -EINVAL with err->field the JSON
 * pointer of the failing part of the instance ("" for the root, "/path",
 * "/items/0") and a message naming the keyword and what it wanted
 * ("minLength: at least 3 characters, got 1").
 */
PDK_MUST_CHECK int pdk_jschema_validate(const struct pdk_jschema *s, const json_t *instance,
					struct pdk_error **err);

/* The keywords compiled and checked, as a NULL-terminated list (docs/gateway.md lists them). */
extern const char *const pdk_jschema_keywords[];

#endif
