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
 * The length of pdk_json_dump_wire(v)'s line, with its newline, counted
 * without writing it; 0 when it cannot be written.
 */
size_t pdk_json_wire_size(const json_t *v);

/*
 * The same bytes as jansson's JSON_COMPACT | JSON_SORT_KEYS |
 * JSON_ENSURE_ASCII dump (an object's members in the order of their keys'
 * bytes), without a newline; its length in *len (may be NULL). The audit
 * store's canonical records are written so. Caller frees. NULL when `v` is
 * not an object or an array, or holds a string that is not UTF-8.
 */
char *pdk_json_dump_sorted(const json_t *v, size_t *len);

/*
 * A document of plain JSON parsed without jansson's lexer: an object or an
 * array of objects, arrays, strings, integers of at most 18 digits, true,
 * false and null, at most 256 deep, no key twice. NULL for anything else
 * (a real, a NUL, bytes that are not UTF-8, an error of any kind): the
 * caller then asks json_loadb(..., JSON_REJECT_DUPLICATES, ...), which
 * parses it or says why not. Whatever this accepts, jansson accepts as the
 * same document, with its keys in the same order (fuzz-jsonrpc checks it).
 * Caller decrefs.
 */
json_t *pdk_json_parse_plain(const char *s, size_t len);

/*
 * json_loadb(s, len, flags, je), the plain parser first: the same document
 * or the same refusal for any `flags` (what the plain parser takes, jansson
 * takes alike under any of them; the rest is jansson's own), but
 * JSON_DECODE_INT_AS_REAL, which goes to jansson directly.
 */
json_t *pdk_json_loadb(const char *s, size_t len, size_t flags, json_error_t *je);

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
