/*
 * seccomp-internal.h - shared by seccomp.c (run time), seccomp-rules.c
 * (the rules, compiled with libseccomp), seccomp-gen.c and the unit tests.
 */
#ifndef PDK_SECCOMP_INTERNAL_H
#define PDK_SECCOMP_INTERNAL_H

#include "common.h"
#include "base.h"

#include <linux/filter.h>

struct pdk_seccomp {
	struct sock_fprog prog; /* prog.filter is owned */
};

/* A program compiled at build time, for one combination of flags. */
struct pdk__seccomp_builtin {
	unsigned flags; /* enum pdk_seccomp_flags that change the program */
	size_t len;
	const struct sock_filter *insns;
};

/*
 * Compile the rules for `flags` with libseccomp into *out (out->filter is
 * malloc'd, caller frees). Used by seccomp-gen and the unit tests only.
 */
PDK_MUST_CHECK int pdk__seccomp_compile(unsigned flags, struct sock_fprog *out,
					struct pdk_error **err);

/*
 * Compile the exec-tracing program (USER_NOTIF for execve/execveat) into
 * *out (out->filter is malloc'd). seccomp-gen and the unit tests only.
 */
PDK_MUST_CHECK int pdk__seccomp_compile_notify(struct sock_fprog *out, struct pdk_error **err);

/* The exec-tracing program built into libpaddock. Borrowed. */
const struct sock_fprog *pdk__seccomp_notify_program(void);

/* The program a prepared filter holds (unit tests evaluate it). Borrowed. */
const struct sock_fprog *pdk__seccomp_program(const struct pdk_seccomp *s);

#endif
