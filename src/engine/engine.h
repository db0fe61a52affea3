/*
 * engine.h - the sandbox: built from a policy by one sequence (sandbox.h),
 * one file per kernel mechanism (namespaces, mounts, cgroups v1 and v2,
 * seccomp, Landlock, capabilities, rlimits, exec tracing), and its pid 1
 * (init/, a binary of its own, spoken to through init/init.h).
 *
 * Contract: fail closed. Any mechanism that was asked for and could not
 * be applied stops the creation, and the error names the step; a
 * best-effort downgrade is only what the policy allows, and is said
 * through the caller's log. Other layers include this header; what they
 * may use is sandbox.h, and the cgroup and Landlock queries below it.
 */
#ifndef PDK_ENGINE_H
#define PDK_ENGINE_H

#include "common.h"
#include "cgroup.h"
#include "landlock.h"
#include "sandbox.h"

#endif
