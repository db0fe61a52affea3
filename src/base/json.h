/*
 * json.h - the one way paddock writes JSON: a thin layer over jansson.
 *
 * Nothing in paddock assembles JSON with printf; values are added with
 * jansson's typed constructors and serialised here, compact with sorted
 * keys (a canonical form the audit log can hash).
 */
#ifndef PDK_JSON_H
#define PDK_JSON_H

#include "common.h"
#include "error.h"

#include <jansson.h>

/*
 * Seed jansson's hash tables from getrandom() once per process, before any
 * JSON value is made. Left to itself, jansson opens, reads and closes
 * /dev/urandom at its first object; getrandom() is one system call and
 * needs no device node. If it fails, jansson seeds itself as before. Later
 * calls (and jansson's own seeding after the first value) do nothing.
 */
void pdk_json_seed(void);

/* Serialise compact, keys sorted, with a trailing newline. Caller frees. NULL on OOM. */
char *pdk_json_dump_line(const json_t *v);

/*
 * The same without sorting the keys (in the order they were set): for a
 * message on the wire, whose reader parses it, on a request's path. Caller
 * frees. NULL on OOM.
 */
char *pdk_json_dump_wire(const json_t *v);

/*
 * The text of an object with the members of the compact object texts `a`
 * and then `b` ("{...}" each, as json_dumps() writes them), without parsing
 * either: splicing two texts costs a copy where serialising the merged
 * object again would walk it. The caller guarantees that no key is in
 * both. A new string (caller frees).
 */
char *pdk_json_splice(const char *a, const char *b);

/* A JSON array of strings from a NULL-terminated vector. */
json_t *pdk_json_strv(char *const *v);

/*
 * Set obj[key] = value, taking ownership of value (jansson's _new
 * variants). A NULL value is skipped, so optional fields read naturally.
 */
void pdk_json_set(json_t *obj, const char *key, json_t *value);

static inline void pdk__cleanup_json(json_t **j)
{
	json_decref(*j);
}
#define _cleanup_json_ __attribute__((cleanup(pdk__cleanup_json)))

#endif
