/*
 * common.h - included first by every .c file of paddock.
 *
 * Feature macros, compiler attributes and the few project-wide constants.
 */
#ifndef PDK_COMMON_H
#define PDK_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <unistd.h>

/*
 * Retry a call that failed with EINTR (glibc's, which unistd.h defines
 * with _GNU_SOURCE; musl, which paddock-init is built with, has none).
 */
#ifndef TEMP_FAILURE_RETRY
#define TEMP_FAILURE_RETRY(expr)                         \
	({                                               \
		long pdk__r;                             \
		do                                       \
			pdk__r = (long)(expr);           \
		while (pdk__r == -1L && errno == EINTR); \
		pdk__r;                                  \
	})
#endif

#define PDK_MUST_CHECK    __attribute__((warn_unused_result))
#define PDK_PRINTF(a, b)  __attribute__((format(printf, a, b)))
#define PDK_NORETURN      __attribute__((noreturn))
#define PDK_UNUSED        __attribute__((unused))

#define PDK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * PDK_TESTABLE marks a function that is static in release builds but
 * visible to unit tests (curl's UNITTEST).
 */
#ifdef PDK_UNIT_TESTING
#define PDK_TESTABLE
#else
#define PDK_TESTABLE static
#endif

#ifndef PDK_VERSION
#define PDK_VERSION "0.1.0"
#endif

#endif
