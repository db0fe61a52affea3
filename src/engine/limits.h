/*
 * limits.h - resource limits (rlimits) applied in the child.
 */
#ifndef PDK_LIMITS_H
#define PDK_LIMITS_H

#include "common.h"
#include "child.h"
#include "policy.h"

/*
 * Apply the policy's rlimits: RLIMIT_CORE 0, RLIMIT_CPU from cpu_time_ms,
 * RLIMIT_NOFILE, RLIMIT_FSIZE, RLIMIT_MEMLOCK small, RLIMIT_MSGQUEUE small.
 * A limit is only ever lowered, never raised above the hard limit the caller
 * already has. 0, or -errno with *ce naming the failed resource (child.h);
 * -EINVAL for no limits at all.
 */
PDK_MUST_CHECK int pdk_limits_apply_child(const struct pdk_policy_limits *l,
					  struct pdk_child_error *ce);

#endif
