/*
 * seccomp-rules.c - the sandbox's syscall denylist, and its compilation to
 * BPF with libseccomp.
 *
 * This file runs at build time (seccomp-gen writes the compiled programs
 * into seccomp-bpf.h, which seccomp.c loads at run time, so a sandbox start
 * pays nothing for compilation) and in the unit tests (which check that
 * the built-in programs are exactly what these rules compile to).
 *
 * The filter is a denylist: the default action is ALLOW and the rules below
 * take away what a process without capabilities could still use to attack
 * the kernel or leave its namespaces. docs/seccomp.md lists every rule with
 * the reason for it and the unit test that proves it.
 *
 * libseccomp builds the filter in pdk_seccomp_prepare() and exports it as
 * raw BPF, which we keep in struct pdk_seccomp. The child then only issues
 * one seccomp(2) call: no allocation, no libseccomp code after clone.
 */
#include "common.h"
#include "base.h"
#include "seccomp.h"

#include <seccomp.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/netlink.h>
#include <unistd.h>

/*
 * The bit the kernel tests for O_TMPFILE (libc's O_TMPFILE adds
 * O_DIRECTORY, which alone creates nothing).
 */
#define PDK_O_TMPFILE_BIT 020000000

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#include "seccomp-internal.h"

static inline void cleanup_seccomp(scmp_filter_ctx *ctx)
{
	if (*ctx != NULL)
		seccomp_release(*ctx);
}
#define _cleanup_seccomp_ __attribute__((cleanup(cleanup_seccomp)))

/*
 * Syscalls that get EPERM whatever their arguments. Grouped as in
 * docs/seccomp.md.
 */
static const char *const deny_always[] = {
	/* mount family: the view is fixed before the filter is loaded */
	"mount",
	"umount2",
	"pivot_root",
	"chroot",
	"move_mount",
	"open_tree",
	"open_tree_attr",
	"fsopen",
	"fsconfig",
	"fsmount",
	"fspick",
	"mount_setattr",
	/* namespaces (unshare and the clone flags are argument rules) */
	"setns",
	/* kernel keyring: not namespaced */
	"keyctl",
	"add_key",
	"request_key",
	/* large kernel attack surfaces an agent workload does not need */
	"bpf",
	"perf_event_open",
	"userfaultfd",
	"io_uring_setup",
	"io_uring_enter",
	"io_uring_register",
	/* loading or replacing kernel code */
	"kexec_load",
	"kexec_file_load",
	"init_module",
	"finit_module",
	"delete_module",
	/* file handles bypass path-based checks */
	"open_by_handle_at",
	"name_to_handle_at",
	/* host-global state, obsolete interfaces and hardware access */
	"acct",
	"swapon",
	"swapoff",
	"reboot",
	"settimeofday",
	"clock_settime",
	"clock_adjtime",
	"adjtimex",
	"syslog",
	"quotactl",
	"quotactl_fd",
	"lookup_dcookie",
	"vhangup",
	"nfsservctl",
	"uselib",
	"ustat",
	"sysfs",
	"_sysctl",
	"iopl",
	"ioperm",
	"fanotify_init",
	"process_madvise",
};

/* Syscalls that reach into another process; allowed with PDK_SECCOMP_ALLOW_PTRACE. */
static const char *const deny_ptrace[] = {
	"ptrace",
	"process_vm_readv",
	"process_vm_writev",
	"pidfd_getfd",
};

/*
 * Syscalls newer than libseccomp 2.5.4's table. Since Linux 5.1 every
 * architecture uses the same number for a new syscall, so the number is
 * portable.
 */
static const struct {
	const char *name;
	int nr;
} nr_fallback[] = {
	{"open_tree_attr", 467},
	{"fchmodat2", 452},
};

/*
 * The namespace flags. The clone syscall takes all but CLONE_NEWTIME (that
 * bit is part of CSIGNAL there); unshare takes all of them.
 */
static const uint64_t clone_new_flags[] = {
	CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
	CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET, CLONE_NEWTIME,
};

/* Address families a sandbox may open; every other one gets EPERM. */
static const uint64_t allowed_families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

/* The largest allowed family; every value above it is denied by one rule. */
#define FAMILY_LIMIT AF_NETLINK

#define ARG32(n, v)                                         \
	{                                                   \
		(n), SCMP_CMP_MASKED_EQ, 0xffffffffULL, (v) \
	}
#define ARG_MASK(n, m, v)                         \
	{                                         \
		(n), SCMP_CMP_MASKED_EQ, (m), (v) \
	}

struct arg_rule {
	const char *syscall;
	unsigned n;
	struct scmp_arg_cmp cmp[3];
};

/*
 * Argument rules with fixed values (all EPERM). The kernel takes these
 * arguments as 32-bit ints and ignores the upper half of the register, so
 * every comparison masks it off: an "equal" on all 64 bits could be
 * dodged by setting a high bit.
 */
static const struct arg_rule arg_rules[] = {
	/* SECURITY: TIOCSTI pushes input into the terminal, TIOCLINUX can read the console. */
	{"ioctl", 1, {ARG32(1, TIOCSTI)}},
	{"ioctl", 1, {ARG32(1, TIOCLINUX)}},
	/*
	 * SECURITY: a sandbox may be handed the caller's terminal, which it must
	 * leave working: no line discipline change (N_NULL discards all I/O
	 * after run exits), no exclusive mode (the caller's own opens of the
	 * tty fail with EBUSY), no console redirection and no hangup.
	 */
	{"ioctl", 1, {ARG32(1, TIOCSETD)}},
	{"ioctl", 1, {ARG32(1, TIOCEXCL)}},
	{"ioctl", 1, {ARG32(1, TIOCCONS)}},
	{"ioctl", 1, {ARG32(1, TIOCVHANGUP)}},
	/* SECURITY: raw IP sockets forge packets; SOCK_PACKET on AF_INET is AF_PACKET. */
	{"socket", 2, {ARG32(0, AF_INET), ARG_MASK(1, 0xf, SOCK_RAW)}},
	{"socket", 2, {ARG32(0, AF_INET6), ARG_MASK(1, 0xf, SOCK_RAW)}},
	{"socket", 2, {ARG32(0, AF_INET), ARG_MASK(1, 0xf, SOCK_PACKET)}},
	{"socket", 2, {ARG32(0, AF_NETLINK), ARG32(2, NETLINK_AUDIT)}},
	{"socketpair", 2, {ARG32(0, AF_INET), ARG_MASK(1, 0xf, SOCK_RAW)}},
	{"socketpair", 2, {ARG32(0, AF_INET6), ARG_MASK(1, 0xf, SOCK_RAW)}},
	{"socketpair", 2, {ARG32(0, AF_INET), ARG_MASK(1, 0xf, SOCK_PACKET)}},
	{"socketpair", 2, {ARG32(0, AF_NETLINK), ARG32(2, NETLINK_AUDIT)}},
	/*
	 * SECURITY: a filter of the process's own with a listener would take
	 * exec tracing's notifications (the newest filter's listener gets a
	 * USER_NOTIF): its execs would run unrecorded.
	 */
	{"seccomp",
	 1,
	 {ARG_MASK(1, SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_FILTER_FLAG_NEW_LISTENER)}},
};

/*
 * Syscalls that give a file its mode bits: the index of the mode argument,
 * and for open and openat the index of the flags argument, whose mode
 * counts only with O_CREAT or O_TMPFILE (-1: the mode always counts).
 */
static const struct {
	const char *syscall;
	unsigned mode_arg;
	int flags_arg;
} mode_setters[] = {
	{"chmod", 1, -1},     {"fchmod", 1, -1}, {"fchmodat", 2, -1},
	{"fchmodat2", 2, -1}, {"creat", 1, -1},  {"mknod", 1, -1},
	{"mknodat", 2, -1},   {"open", 2, 1},    {"openat", 3, 2},
};

/* The set-id mode bits, and the open flags that make the kernel read the mode. */
static const uint64_t setid_bits[] = {S_ISUID, S_ISGID};
static const uint64_t creating_flags[] = {O_CREAT, PDK_O_TMPFILE_BIT};

static int resolve(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

	for (size_t i = 0; nr == __NR_SCMP_ERROR && i < PDK_ARRAY_SIZE(nr_fallback); i++)
		if (strcmp(name, nr_fallback[i].name) == 0)
			nr = nr_fallback[i].nr;
	return nr;
}

/*
 * Add one rule. A name libseccomp knows but this architecture lacks (say
 * "iopl" on arm64) resolves to a negative pseudo-number, which libseccomp
 * accepts and leaves out of the native filter.
 */
static int add_rule(scmp_filter_ctx ctx, const char *name, uint32_t action, unsigned n,
		    const struct scmp_arg_cmp *cmp, struct pdk_error **err)
{
	int nr = resolve(name);
	int rc;

	if (nr == __NR_SCMP_ERROR)
		return pdk_error_setx(err, EINVAL, "unknown syscall '%s'", name);
	rc = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot add seccomp rule for '%s'", name);
	return 0;
}

static int add_names(scmp_filter_ctx ctx, const char *const *names, size_t n,
		     struct pdk_error **err)
{
	for (size_t i = 0; i < n; i++) {
		int rc = add_rule(ctx, names[i], SCMP_ACT_ERRNO(EPERM), 0, NULL, err);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static int add_arg_rules(scmp_filter_ctx ctx, struct pdk_error **err)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(arg_rules); i++) {
		const struct arg_rule *r = &arg_rules[i];
		int rc = add_rule(ctx, r->syscall, SCMP_ACT_ERRNO(EPERM), r->n, r->cmp, err);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * SECURITY: no new namespaces. A user namespace is where an unprivileged
 * process gets the capabilities that unlock most kernel attack surface.
 * libseccomp cannot express "any of these bits" in one rule, so there is
 * one rule per flag.
 */
static int add_namespace_rules(scmp_filter_ctx ctx, struct pdk_error **err)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(clone_new_flags); i++) {
		struct scmp_arg_cmp c = ARG_MASK(0, clone_new_flags[i], clone_new_flags[i]);
		int rc = add_rule(ctx, "unshare", SCMP_ACT_ERRNO(EPERM), 1, &c, err);

		if (rc == 0 && clone_new_flags[i] != CLONE_NEWTIME)
			rc = add_rule(ctx, "clone", SCMP_ACT_ERRNO(EPERM), 1, &c, err);
		if (rc < 0)
			return rc;
	}
	/*
	 * clone3 passes its flags in memory, which a BPF filter cannot read.
	 * ENOSYS makes glibc fall back to the register-based call above.
	 */
	return add_rule(ctx, "clone3", SCMP_ACT_ERRNO(ENOSYS), 0, NULL, err);
}

/*
 * The rules of one mode-setting syscall: EPERM when the mode has a set-id
 * bit (and, for open and openat, the flags create a file), one rule per
 * bit and flag since libseccomp 2.5 compares each argument once a rule.
 * umode_t is 16 bits: a masked test of the bit ignores the upper half.
 */
static int add_setid_rule(scmp_filter_ctx ctx, unsigned i, struct pdk_error **err)
{
	int rc = 0;

	for (size_t b = 0; rc == 0 && b < PDK_ARRAY_SIZE(setid_bits); b++) {
		struct scmp_arg_cmp c[2] = {
			ARG_MASK(mode_setters[i].mode_arg, setid_bits[b], setid_bits[b]),
		};

		if (mode_setters[i].flags_arg < 0) {
			rc = add_rule(ctx, mode_setters[i].syscall, SCMP_ACT_ERRNO(EPERM), 1, c,
				      err);
			continue;
		}
		for (size_t f = 0; rc == 0 && f < PDK_ARRAY_SIZE(creating_flags); f++) {
			c[1] = (struct scmp_arg_cmp)ARG_MASK((unsigned)mode_setters[i].flags_arg,
							     creating_flags[f], creating_flags[f]);
			rc = add_rule(ctx, mode_setters[i].syscall, SCMP_ACT_ERRNO(EPERM), 2, c,
				      err);
		}
	}
	return rc;
}

/*
 * SECURITY: no set-user-ID or set-group-ID file from inside a sandbox.
 * The sandbox's uids are host uids (root is host root), so a set-id file
 * left in a host-writable mount (an rw workspace, an --rw bind, an
 * overlay's upper directory) is a set-id program on the host. Inside the
 * sandbox the bits do nothing (no_new_privs), so denying them takes
 * nothing away there. openat2 takes its mode in a struct the filter cannot
 * read: ENOSYS makes callers fall back to openat, as for clone3. File
 * capabilities (security.capability) need CAP_SETFCAP, which no sandbox
 * process has. docs/seccomp.md has the reasoning.
 */
static int add_setid_rules(scmp_filter_ctx ctx, unsigned flags, struct pdk_error **err)
{
	for (unsigned i = 0; i < PDK_ARRAY_SIZE(mode_setters); i++) {
		int rc = add_setid_rule(ctx, i, err);

		if (rc < 0)
			return rc;
	}
	if (flags & PDK_SECCOMP_FILE_HELPER)
		return 0;
	return add_rule(ctx, "openat2", SCMP_ACT_ERRNO(ENOSYS), 0, NULL, err);
}

static bool family_allowed(uint64_t af)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(allowed_families); i++)
		if (allowed_families[i] == af)
			return true;
	return false;
}

/*
 * SECURITY: an allowlist of address families. Rare families (packet,
 * vsock, bluetooth, alg, rds, tipc, ...) are where socket bugs live, and
 * vsock reaches the hypervisor host past the network namespace. Values
 * above FAMILY_LIMIT are denied on all 64 bits, so a high bit set in the
 * register is denied too.
 */
static int add_family_rules(scmp_filter_ctx ctx, const char *syscall, struct pdk_error **err)
{
	struct scmp_arg_cmp above = {0, SCMP_CMP_GT, FAMILY_LIMIT, 0};
	int rc = add_rule(ctx, syscall, SCMP_ACT_ERRNO(EPERM), 1, &above, err);

	for (uint64_t af = 0; rc == 0 && af < FAMILY_LIMIT; af++) {
		struct scmp_arg_cmp c = ARG32(0, af);

		if (!family_allowed(af))
			rc = add_rule(ctx, syscall, SCMP_ACT_ERRNO(EPERM), 1, &c, err);
	}
	return rc;
}

/*
 * SECURITY: personality(2) may only be queried (0xffffffff) or set to
 * PER_LINUX (0); other values turn off ASLR (ADDR_NO_RANDOMIZE) or make
 * data executable (READ_IMPLIES_EXEC). libseccomp 2.5 allows one
 * comparison per argument and rule, so "neither all zeros nor all ones"
 * is written as 32 rules: a 32-bit value is neither exactly when some bit
 * i is set and bit i+1 (mod 32) is clear.
 */
static int add_personality_rules(scmp_filter_ctx ctx, struct pdk_error **err)
{
	for (unsigned i = 0; i < 32; i++) {
		uint64_t bit = 1ULL << i;
		uint64_t next = 1ULL << ((i + 1) % 32);
		struct scmp_arg_cmp c = ARG_MASK(0, bit | next, bit);
		int rc = add_rule(ctx, "personality", SCMP_ACT_ERRNO(EPERM), 1, &c, err);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static int set_attrs(scmp_filter_ctx ctx, struct pdk_error **err)
{
	/* SECURITY: i386 and x32 syscalls would bypass every rule written for x86_64. */
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);

	/* A binary tree of syscall numbers instead of a linear list. */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot set seccomp filter attributes");
	return 0;
}

static int add_all_rules(scmp_filter_ctx ctx, unsigned flags, struct pdk_error **err)
{
	int rc = set_attrs(ctx, err);

	if (rc == 0)
		rc = add_names(ctx, deny_always, PDK_ARRAY_SIZE(deny_always), err);
	if (rc == 0 && !(flags & PDK_SECCOMP_ALLOW_PTRACE))
		rc = add_names(ctx, deny_ptrace, PDK_ARRAY_SIZE(deny_ptrace), err);
	if (rc == 0)
		rc = add_namespace_rules(ctx, err);
	if (rc == 0)
		rc = add_family_rules(ctx, "socket", err);
	if (rc == 0)
		rc = add_family_rules(ctx, "socketpair", err);
	if (rc == 0)
		rc = add_arg_rules(ctx, err);
	if (rc == 0)
		rc = add_personality_rules(ctx, err);
	if (rc == 0)
		rc = add_setid_rules(ctx, flags, err);
	return rc;
}

/* Export the compiled filter through a memfd (libseccomp 2.5 writes only to fds). */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *prog, struct pdk_error **err)
{
	_cleanup_close_ int fd = memfd_create("paddock-seccomp", MFD_CLOEXEC);
	_cleanup_free_ struct sock_filter *insns = NULL;
	struct stat st;
	ssize_t n;
	int rc;

	if (fd < 0)
		return pdk_error_set(err, errno, "memfd_create");
	rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot export seccomp filter");
	if (fstat(fd, &st) < 0)
		return pdk_error_set(err, errno, "fstat seccomp memfd");
	if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
	    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
		return pdk_error_setx(err, EINVAL, "seccomp filter has a bad size (%lld bytes)",
				      (long long)st.st_size);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return pdk_error_set(err, errno, "lseek seccomp memfd");
	insns = pdk_xmalloc(st.st_size);
	n = pdk_read_all(fd, insns, st.st_size);
	if (n != st.st_size)
		return pdk_error_set(err, n < 0 ? -n : EIO, "cannot read seccomp filter back");
	prog->len = st.st_size / sizeof(struct sock_filter);
	prog->filter = steal_ptr(&insns);
	return 0;
}

int pdk__seccomp_compile(unsigned flags, struct sock_fprog *out, struct pdk_error **err)
{
	const unsigned known =
		PDK_SECCOMP_ALLOW_PTRACE | PDK_SECCOMP_ALLOW_NET_HOST | PDK_SECCOMP_FILE_HELPER;
	_cleanup_seccomp_ scmp_filter_ctx ctx = NULL;

	if (flags & ~known)
		return pdk_error_setx(err, EINVAL, "unknown seccomp flags 0x%x", flags & ~known);
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (ctx == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot create seccomp filter");
	if (add_all_rules(ctx, flags, err) < 0)
		return -EINVAL;
	return export_bpf(ctx, out, err);
}

/*
 * The exec-tracing program: USER_NOTIF for execve and execveat, ALLOW for
 * everything else. Foreign architectures and x32 are allowed here because
 * the denylist program kills them (the kernel applies the strictest action
 * of all loaded filters: KILL and ERRNO beat USER_NOTIF).
 */
int pdk__seccomp_compile_notify(struct sock_fprog *out, struct pdk_error **err)
{
	static const char *const traced[] = {"execve", "execveat"};
	_cleanup_seccomp_ scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc;

	if (ctx == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot create seccomp filter");
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW);
	if (rc < 0)
		return pdk_error_set(err, -rc, "cannot set seccomp filter attributes");
	for (size_t i = 0; i < PDK_ARRAY_SIZE(traced); i++) {
		rc = add_rule(ctx, traced[i], SCMP_ACT_NOTIFY, 0, NULL, err);
		if (rc < 0)
			return rc;
	}
	return export_bpf(ctx, out, err);
}
