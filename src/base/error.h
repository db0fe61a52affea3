/*
 * error.h - the error object every fallible libpaddock function reports.
 *
 * Contract (crun's model): a fallible function returns an int, negative on
 * failure, and takes `struct pdk_error **err` as its last parameter. On
 * failure it sets *err (if err is not NULL and *err is NULL) and returns
 * -status. The caller owns *err and frees it with pdk_error_free().
 */
#ifndef PDK_ERROR_H
#define PDK_ERROR_H

#include "common.h"

struct pdk_error {
	int status;  /* errno-style, > 0 */
	char *msg;   /* caller owns; lowercase, no trailing period */
	char *field; /* the part of a request to blame ("argv[0]", "path"), or NULL */
};

/*
 * Set *err to a new error with `status` (an errno value or its negation;
 * 0 is taken as EINVAL) and a printf-style message, to which ": strerror(status)" is
 * appended (pdk_error_setx() appends nothing). Returns -status so callers
 * can write
 * `return pdk_error_set(err, errno, "open '%s'", path);`.
 * If *err is already set, the first error wins and is kept.
 */
int pdk_error_set(struct pdk_error **err, int status, const char *fmt, ...) PDK_PRINTF(3, 4);

/* Like pdk_error_set() but the message gets no strerror() suffix. */
int pdk_error_setx(struct pdk_error **err, int status, const char *fmt, ...) PDK_PRINTF(3, 4);

/*
 * Prefix the message of *err with context: "context: old message", unless
 * the message already starts with "context: " (a context is said once).
 * Returns -(*err)->status, or -EINVAL if *err is NULL.
 */
int pdk_error_wrap(struct pdk_error **err, const char *fmt, ...) PDK_PRINTF(2, 3);

/* True when `msg` starts with "CTX: " (`ctx` non-empty): wrapping it with `ctx` adds nothing. */
bool pdk_error_has_context(const char *msg, const char *ctx);

/*
 * Like pdk_error_setx(), naming `field` (copied; may be NULL), the part of a
 * request to blame: `return pdk_error_set_field(err, EINVAL, "path", "...");`.
 */
int pdk_error_set_field(struct pdk_error **err, int status, const char *field, const char *fmt, ...)
	PDK_PRINTF(4, 5);

/*
 * Name the part of a request that *err blames (copied; replaces an earlier
 * field; NULL: none). Returns -(*err)->status, or -EINVAL if *err is NULL.
 */
int pdk_error_field(struct pdk_error **err, const char *field);

/* Free an error and set *err to NULL. NULL-safe. */
void pdk_error_free(struct pdk_error **err);

static inline void pdk__cleanup_error(struct pdk_error **e)
{
	pdk_error_free(e);
}
#define _cleanup_error_ __attribute__((cleanup(pdk__cleanup_error)))

#endif
