/*
 * seccomp.h - the syscall filter every sandbox runs under.
 *
 * The rules (seccomp-rules.c) are compiled to BPF with libseccomp at build
 * time, by seccomp-gen (src/tools/), for every combination of flags; at
 * start-up the parent only picks the built-in program (prepare), and the
 * child loads it right before it execs the init (apply): no libseccomp
 * call and no allocation on that path. Every rule is documented in
 * docs/seccomp.md.
 */
#ifndef PDK_SECCOMP_H
#define PDK_SECCOMP_H

#include "common.h"
#include "base.h"
#include "child.h"

enum pdk_seccomp_flags {
	PDK_SECCOMP_ALLOW_PTRACE = 1 << 0, /* ptrace/process_vm_* allowed (pid ns confines them) */
	PDK_SECCOMP_ALLOW_NET_HOST = 1 << 1, /* reserved: host network mode */
	/*
	 * The supervisor's file helper (pdk_sandbox_enter_child()): openat2 is
	 * allowed, since the helper resolves every path with RESOLVE_IN_ROOT and
	 * its own code never asks for a set-id mode; everything else is the
	 * sandbox's filter.
	 */
	PDK_SECCOMP_FILE_HELPER = 1 << 2,
};

struct pdk_seccomp;

/* Build the filter. Returns NULL and sets *err on failure. */
struct pdk_seccomp *pdk_seccomp_prepare(unsigned flags, struct pdk_error **err);

/*
 * Load the filter into the calling thread (requires no_new_privs or
 * CAP_SYS_ADMIN). Async-signal-safe: no allocation. 0, or -errno and *ce
 * (child.h); -EINVAL without a filter.
 */
PDK_MUST_CHECK int pdk_seccomp_apply_child(const struct pdk_seccomp *s, struct pdk_child_error *ce);

/*
 * Whether the kernel supports seccomp user notification
 * (SECCOMP_RET_USER_NOTIF, Linux 5.0), which exec tracing needs.
 */
bool pdk_seccomp_notify_supported(void);

/*
 * Load the exec-tracing filter into the calling thread: execve and
 * execveat wait for a supervisor's answer on the returned listener fd
 * (close-on-exec; the caller hands it to the supervisor). Needs
 * no_new_privs or CAP_SYS_ADMIN. Async-signal-safe. fd, or -errno and *ce.
 */
PDK_MUST_CHECK int pdk_seccomp_apply_notify_child(struct pdk_child_error *ce);

/* Number of BPF instructions (for tests and stats). */
size_t pdk_seccomp_insn_count(const struct pdk_seccomp *s);

void pdk_seccomp_free(struct pdk_seccomp *s);

#endif
