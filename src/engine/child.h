/*
 * child.h - how the code that runs in a sandbox's child reports a failure.
 *
 * Between pdk_proc_clone() and its exec of the init, the child shares the
 * parent's memory (CLONE_VM, except in AddressSanitizer builds) while the
 * parent is suspended: it may not allocate, and what it would write into
 * the parent's objects is not there in every build. So every child-side
 * step (a function whose name ends in _child) reports failure one way:
 *
 *   it returns -errno, and fills the caller's struct pdk_child_error (on
 *   the child's stack) with that errno and a message naming the step, the
 *   path or call, and the errno's text;
 *
 * a caller that adds context at a module boundary wraps the message
 * ("mount: ..."). The child sends the struct whole on the sync socket and
 * exits 125; the parent reads it once the child is gone and turns it into
 * the error of pdk_sandbox_create(): "sandbox setup failed: MESSAGE".
 * docs/internals/sandbox.md states the rule.
 */
#ifndef PDK_CHILD_H
#define PDK_CHILD_H

#include "common.h"

struct pdk_child_error {
	int err;        /* errno-style, > 0 once a failure is recorded */
	char msg[1024]; /* "cannot write '/proc/self/uid_map': Operation not permitted" */
};

/*
 * Record a failure in `ce` (NULL: nothing is recorded, the status is still
 * returned): errno `e` (0 is taken as EIO) and the printf-style message,
 * followed by ": strerror(e)". The first failure recorded wins. Returns -e.
 * Allocates nothing.
 */
int pdk_child_error_set(struct pdk_child_error *ce, int e, const char *fmt, ...) PDK_PRINTF(3, 4);

/* Like pdk_child_error_set(), without the strerror() suffix. */
int pdk_child_error_setx(struct pdk_child_error *ce, int e, const char *fmt, ...) PDK_PRINTF(3, 4);

/*
 * Prefix the recorded message with "prefix: " (cut at the buffer's end).
 * Returns -ce->err, or -EIO when nothing was recorded. NULL-safe.
 */
int pdk_child_error_wrap(struct pdk_child_error *ce, const char *prefix);

#endif
