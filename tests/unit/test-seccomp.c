/*
 * test-seccomp.c - every rule of the filter, tried with a real syscall.
 *
 * Criterion runs each Test in its own process, so loading the filter
 * affects that test only. Arguments are chosen so that a call that slipped
 * through the filter would fail harmlessly in the kernel (a missing path, a
 * bad fd, a bad magic number): the test then sees that errno, not EPERM.
 * As root, the denylist test first runs every call without the filter and
 * checks it does not fail with EPERM, so the EPERM afterwards is the
 * filter's. docs/seccomp.md maps each rule to its test here.
 */
#include "common.h"
#include "seccomp.h"
#include "seccomp-internal.h"
#include "util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/kcmp.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <linux/reboot.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#ifndef SOCK_PACKET
#define SOCK_PACKET 10
#endif
#define NR_OPEN_TREE_ATTR 467
#define NOPATH            "/nonexistent-paddock-test"

/* Test hook in seccomp.c (PDK_UNIT_TESTING builds only). */

/*
 * Run LeakSanitizer's exit check now: it stops the world with ptrace,
 * which the filter denies, so it could not run at exit.
 */
static void leak_check_now(void)
{
#if defined(__SANITIZE_ADDRESS__)
	__lsan_do_leak_check();
#endif
}

/* For forked children, where Criterion's asserts do not belong: 0 or -1. */
static int load_filter_raw(unsigned flags)
{
	struct pdk_seccomp *s = pdk_seccomp_prepare(flags, NULL);
	int rc;

	if (s == NULL)
		return -1;
	rc = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? pdk_seccomp_apply_child(s, NULL) : -1;
	pdk_seccomp_free(s);
	return rc < 0 ? -1 : 0;
}

static void load_filter(unsigned flags)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_seccomp *s = pdk_seccomp_prepare(flags, &err);

	cr_assert_not_null(s, "prepare: %s", err ? err->msg : "?");
	leak_check_now();
	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	cr_assert_eq(pdk_seccomp_apply_child(s, NULL), 0);
	pdk_seccomp_free(s);
}

#define assert_denied(call, e)                                                                   \
	do {                                                                                     \
		errno = 0;                                                                       \
		long r__ = (long)(call);                                                         \
		cr_assert(r__ == -1 && errno == (e), "%s: got %ld errno %d (%s), want errno %d", \
			  #call, r__, errno, strerror(errno), (e));                              \
	} while (0)

#define assert_allowed(call)                                                        \
	do {                                                                        \
		errno = 0;                                                          \
		long r__ = (long)(call);                                            \
		cr_assert(r__ >= 0, "%s: got %ld errno %d (%s)", #call, r__, errno, \
			  strerror(errno));                                         \
	} while (0)

/* ---- the compiled program, evaluated in user space ---- */

/* A classic-BPF interpreter for the opcodes libseccomp emits. */
static uint32_t run_bpf(const struct sock_fprog *p, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};

	for (unsigned pc = 0; pc < p->len; pc++) {
		const struct sock_filter *f = &p->filter[pc];

		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			cr_assert_leq(f->k + 4, sizeof(*d));
			memcpy(&a, (const char *)d + f->k, 4);
			break;
		case BPF_LD | BPF_MEM:
			a = mem[f->k];
			break;
		case BPF_LDX | BPF_MEM:
			x = mem[f->k];
			break;
		case BPF_ST:
			mem[f->k] = a;
			break;
		case BPF_STX:
			mem[f->k] = x;
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= f->k;
			break;
		case BPF_MISC | BPF_TAX:
			x = a;
			break;
		case BPF_MISC | BPF_TXA:
			a = x;
			break;
		case BPF_JMP | BPF_JA:
			pc += f->k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += a == f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			pc += a > f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += a >= f->k ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			pc += (a & f->k) ? f->jt : f->jf;
			break;
		case BPF_RET | BPF_K:
			return f->k;
		default:
			cr_assert_fail("BPF opcode 0x%x at %u is not interpreted", f->code, pc);
		}
	}
	cr_assert_fail("BPF program fell off its end");
	return 0;
}

static uint32_t eval(const struct pdk_seccomp *s, uint32_t arch, int nr, const uint64_t *args)
{
	struct seccomp_data d = {.nr = nr, .arch = arch};

	for (int i = 0; args != NULL && i < 6; i++)
		d.args[i] = args[i];
	return run_bpf(pdk__seccomp_program(s), &d);
}

#define RET_EPERM (SECCOMP_RET_ERRNO | EPERM)

Test(seccomp, program_is_small_and_flags_are_checked)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_seccomp *s = pdk_seccomp_prepare(0, &err);

	cr_assert_not_null(s);
	cr_assert_gt(pdk_seccomp_insn_count(s), 50);
	cr_assert_leq(pdk_seccomp_insn_count(s), BPF_MAXINSNS);
	pdk_seccomp_free(s);
	cr_assert_null(pdk_seccomp_prepare(1u << 7, &err));
	cr_assert_eq(err->status, EINVAL);
	cr_assert_eq(pdk_seccomp_apply_child(NULL, NULL), -EINVAL);
}

/*
 * The file helper's program differs from the sandbox's in openat2 only: the
 * sandbox gets ENOSYS (its mode cannot be read), the helper, which resolves
 * with RESOLVE_IN_ROOT, gets it; a set-id chmod is refused to both.
 */
Test(seccomp, file_helper_program_differs_in_openat2_only)
{
	struct pdk_seccomp *sb = pdk_seccomp_prepare(0, NULL);
	struct pdk_seccomp *fh = pdk_seccomp_prepare(PDK_SECCOMP_FILE_HELPER, NULL);
	const uint64_t chmod_suid[6] = {0, 04755}; /* eval() reads all six arguments */

	cr_assert_not_null(sb);
	cr_assert_not_null(fh);
	cr_assert_eq(eval(sb, AUDIT_ARCH_X86_64, SYS_openat2, NULL), SECCOMP_RET_ERRNO | ENOSYS);
	cr_assert_eq(eval(fh, AUDIT_ARCH_X86_64, SYS_openat2, NULL), SECCOMP_RET_ALLOW);
	cr_assert_eq(eval(sb, AUDIT_ARCH_X86_64, SYS_chmod, chmod_suid), RET_EPERM);
	cr_assert_eq(eval(fh, AUDIT_ARCH_X86_64, SYS_chmod, chmod_suid), RET_EPERM);
	pdk_seccomp_free(sb);
	pdk_seccomp_free(fh);
}

Test(seccomp, foreign_architectures_kill_in_the_program)
{
	struct pdk_seccomp *s = pdk_seccomp_prepare(0, NULL);

	cr_assert_not_null(s);
	cr_assert_eq(eval(s, AUDIT_ARCH_I386, 20, NULL), SECCOMP_RET_KILL_PROCESS);
	cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, 0x40000000 | 39, NULL), SECCOMP_RET_KILL_PROCESS);
	cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_getpid, NULL), SECCOMP_RET_ALLOW);
	cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_mount, NULL), RET_EPERM);
	pdk_seccomp_free(s);
}

/* The 32-rule encoding of "personality is 0 or 0xffffffff", checked on many values. */
Test(seccomp, personality_encoding_in_the_program)
{
	struct pdk_seccomp *s = pdk_seccomp_prepare(0, NULL);
	uint64_t v = 0x9e3779b97f4a7c15ULL;

	cr_assert_not_null(s);
	for (int i = 0; i < 20000; i++) {
		/* Every other value keeps one low bit at most, to hit 0 with a dirty upper half. */
		uint64_t t = i % 2 ? v : v & (0xffffffff00000000ULL | (1ULL << (i % 40)));
		uint64_t arg[6] = {t};
		uint32_t lo = (uint32_t)t;
		uint32_t want = (lo == 0 || lo == 0xffffffff) ? SECCOMP_RET_ALLOW : RET_EPERM;

		cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_personality, arg), want, "0x%llx",
			     (unsigned long long)t);
		v ^= v << 13; /* xorshift64 */
		v ^= v >> 7;
		v ^= v << 17;
	}
	for (int i = 0; i < 32; i++) {
		uint64_t one[6] = {1ULL << i}, all_but[6] = {0xffffffffULL & ~(1ULL << i)};

		cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_personality, one), RET_EPERM);
		cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_personality, all_but), RET_EPERM);
	}
	pdk_seccomp_free(s);
}

/* Exactly AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK pass, whatever the upper half holds. */
Test(seccomp, family_allowlist_in_the_program)
{
	struct pdk_seccomp *s = pdk_seccomp_prepare(0, NULL);

	cr_assert_not_null(s);
	for (uint64_t af = 0; af < 300; af++) {
		uint64_t arg[6] = {af, SOCK_STREAM, 0}, high[6] = {af | (1ULL << 40), SOCK_STREAM};
		bool ok = af == AF_UNIX || af == AF_INET || af == AF_INET6 || af == AF_NETLINK;

		cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_socket, arg),
			     ok ? SECCOMP_RET_ALLOW : RET_EPERM, "family %llu",
			     (unsigned long long)af);
		cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_socketpair, arg),
			     ok ? SECCOMP_RET_ALLOW : RET_EPERM, "family %llu",
			     (unsigned long long)af);
		cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_socket, high), RET_EPERM);
	}
	pdk_seccomp_free(s);
}

/* ---- the filter in the kernel ---- */

struct call {
	const char *name;
	long nr;
	long a[6];
};

static void calls_table(struct call *t, size_t cap, size_t *n)
{
	static struct timespec ts;
	static struct timex tx;
	size_t i = 0;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	memset(&tx, 0, sizeof(tx)); /* modes 0: a query, if it ever ran */
#define C(nr, ...)                                              \
	do {                                                    \
		cr_assert_lt(i, cap);                           \
		t[i++] = (struct call){#nr, nr, {__VA_ARGS__}}; \
	} while (0)
	C(SYS_mount, (long)"pdk", (long)NOPATH, (long)"tmpfs", 0, 0);
	C(SYS_umount2, (long)NOPATH, 0);
	C(SYS_pivot_root, (long)NOPATH "-a", (long)NOPATH "-b");
	C(SYS_chroot, (long)NOPATH);
	C(SYS_move_mount, -1, (long)NOPATH, -1, (long)NOPATH, 0);
	C(SYS_open_tree, -1, (long)NOPATH, 0);
	C(NR_OPEN_TREE_ATTR, -1, (long)NOPATH, 0, 0, 0);
	C(SYS_fsopen, (long)"paddock-no-such-fs", 0);
	C(SYS_fsconfig, -1, 0, 0, 0, 0);
	C(SYS_fsmount, -1, 0, 0);
	C(SYS_fspick, -1, (long)NOPATH, 0);
	C(SYS_mount_setattr, -1, (long)NOPATH, 0, 0, 0);
	C(SYS_setns, -1, 0);
	C(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 0);
	C(SYS_add_key, (long)"user", (long)"paddock-test", (long)"x", 1, KEY_SPEC_PROCESS_KEYRING);
	C(SYS_request_key, (long)"user", (long)"paddock-no-such-key", 0, 0);
	C(SYS_bpf, 0xffff, 0, 0);
	C(SYS_perf_event_open, 0, 0, -1, -1, 0);
	C(SYS_userfaultfd, O_CLOEXEC);
	C(SYS_io_uring_setup, 0, 0);
	C(SYS_io_uring_enter, -1, 0, 0, 0, 0, 0);
	C(SYS_io_uring_register, -1, 0, 0, 0);
	C(SYS_kexec_load, 0, 0, 0, 0xdead0000L);
	C(SYS_kexec_file_load, -1, -1, 0, 0, 0xdead0000L);
	C(SYS_init_module, 0, 0, (long)"");
	C(SYS_finit_module, -1, (long)"", 0);
	C(SYS_delete_module, (long)"paddock_no_such_module", O_NONBLOCK);
	C(SYS_open_by_handle_at, -1, 0, 0);
	C(SYS_name_to_handle_at, AT_FDCWD, (long)NOPATH, 0, 0, 0);
	C(SYS_acct, (long)NOPATH "/x");
	C(SYS_swapon, (long)NOPATH, 0);
	C(SYS_swapoff, (long)NOPATH);
	C(SYS_reboot, 0, 0, 0, 0); /* bad magic */
	C(SYS_settimeofday, 0, 0); /* sets nothing */
	C(SYS_clock_settime, CLOCK_MONOTONIC, (long)&ts);
	C(SYS_clock_adjtime, CLOCK_REALTIME, (long)&tx);
	C(SYS_adjtimex, (long)&tx);
	C(SYS_syslog, 10, 0, 0); /* SYSLOG_ACTION_SIZE_BUFFER */
	C(SYS_quotactl, 0, (long)NOPATH, 0, 0);
	C(SYS_quotactl_fd, -1, 0, 0, 0);
	C(SYS_lookup_dcookie, 0, 0, 0);
	C(SYS_nfsservctl, 0, 0, 0);
	C(SYS_uselib, (long)NOPATH);
	C(SYS_ustat, 0, 0);
	C(SYS_sysfs, 3);
	C(SYS__sysctl, 0);
	C(SYS_iopl, 0);
	C(SYS_ioperm, 0, 0, 0);
	C(SYS_fanotify_init, 0, 0);
	C(SYS_process_madvise, -1, 0, 0, 0, 0);
#undef C
	*n = i;
}

/* Calls that, without the filter, fail with EPERM on their own on some machines. */
static bool may_eperm_unfiltered(long nr)
{
	return nr == SYS_io_uring_setup || nr == SYS_userfaultfd || nr == SYS_iopl ||
	       nr == SYS_ioperm || nr == SYS_perf_event_open || nr == SYS_bpf;
}

static long do_call(const struct call *c)
{
	long r = syscall(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);

	if (r >= 0 && (c->nr == SYS_userfaultfd || c->nr == SYS_fanotify_init))
		(void)close((int)r);
	return r;
}

Test(seccomp, denylist_returns_eperm)
{
	struct call t[64];
	size_t n = 0;

	calls_table(t, PDK_ARRAY_SIZE(t), &n);
	for (size_t i = 0; geteuid() == 0 && i < n; i++) {
		errno = 0;
		long r = do_call(&t[i]);

		cr_assert(r >= 0 || errno != EPERM || may_eperm_unfiltered(t[i].nr),
			  "%s: EPERM even without the filter", t[i].name);
	}
	load_filter(0);
	for (size_t i = 0; i < n; i++) {
		errno = 0;
		long r = do_call(&t[i]);

		cr_expect(r == -1 && errno == EPERM, "%s: got %ld errno %d (%s)", t[i].name, r,
			  errno, strerror(errno));
	}
}

Test(seccomp, vhangup_denied)
{
	pid_t pid = fork();
	int st = 0;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* A new session has no controlling terminal: a vhangup that slipped through is a
		 * no-op. */
		if (setsid() < 0 || load_filter_raw(0) < 0)
			_exit(2);
		_exit(syscall(SYS_vhangup) == -1 && errno == EPERM ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}

Test(seccomp, x32_syscall_kills, .signal = SIGSYS)
{
	load_filter(0);
	(void)syscall(0x40000000 | SYS_getpid);
	cr_assert_fail("an x32 syscall returned");
}

/*
 * How "int $0x80" (i386 getpid) ends in a fresh child without our filter:
 * INT80_WORKS, INT80_GP (the fault a kernel without an i386 entry raises
 * on the instruction itself: #GP, or #NP for an absent gate, delivered as
 * SIGSEGV or SIGBUS with si_code SI_KERNEL) or another wait status.
 */
enum { INT80_WORKS = 0x100000, INT80_GP };

static void on_int80_segv(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	_exit(si->si_code == SI_KERNEL ? 3 : 4);
}

static int probe_int80(void)
{
	pid_t pid = fork();
	int st = 0;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct sigaction sa = {.sa_sigaction = on_int80_segv, .sa_flags = SA_SIGINFO};
		long r;

		/* Ours, not ASan's. */
		(void)sigaction(SIGSEGV, &sa, NULL);
		(void)sigaction(SIGBUS, &sa, NULL);
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory"); /* i386 getpid */
		_exit(r == (long)getpid() ? 0 : 5);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return INT80_WORKS;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
		return INT80_GP;
	return st;
}

/* The Seccomp: line of /proc/self/status: 0 when no filter is loaded. */
static int own_seccomp_mode(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	int mode = -1;

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	return mode;
}

Test(seccomp, i386_syscall_kills)
{
	int before = probe_int80();
	pid_t pid;
	int st = 0;

	/*
	 * Without ia32 emulation "int $0x80" faults (SI_KERNEL) before any
	 * filter runs: there is no 32-bit entry to escape through,
	 * and foreign_architectures_kill_in_the_program checks the rule on
	 * every kernel. That exact outcome is the only reason to skip: any
	 * other failure of the unfiltered call (a filter the test inherited,
	 * a wrong result) fails the test instead of hiding it.
	 */
	if (before == INT80_GP)
		cr_skip_test("the kernel has no i386 syscall entry (int $0x80 faults)");
	cr_assert_eq(before, INT80_WORKS,
		     "unfiltered int $0x80 getpid ended with wait status 0x%x (Seccomp: %d)",
		     before, own_seccomp_mode());
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		long r;

		if (load_filter_raw(0) < 0)
			_exit(2);
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
		_exit(r > 0 ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status 0x%x", st);
}

static const int ns_flags[] = {
	CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
	CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET, 0x80 /* CLONE_NEWTIME */,
};

/* The raw clone syscall; a child that should never have been created leaves at once. */
static long try_clone(int flags)
{
	long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);

	if (r == 0)
		_exit(0);
	return r;
}

Test(seccomp, namespaces_denied)
{
	int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	load_filter(0);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(ns_flags); i++) {
		assert_denied(unshare(ns_flags[i]), EPERM);
		assert_denied(unshare(ns_flags[i] | CLONE_FILES), EPERM);
		if (ns_flags[i] != 0x80)
			assert_denied(try_clone(ns_flags[i]), EPERM);
	}
	assert_denied(setns(fd, 0), EPERM);
	assert_denied(syscall(SYS_clone3, NULL, 0), ENOSYS);
}

static void *thread_fn(void *arg)
{
	return arg;
}

Test(seccomp, process_creation_still_works)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pthread_t th;
	void *ret = NULL;
	int st = 0;
	pid_t pid;

	cr_assert_geq(fd, 0);
	load_filter(0);
	pid = fork(); /* the clone syscall without namespace flags */
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(7);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	/* glibc tries clone3 first; ENOSYS must make it fall back. */
	cr_assert_eq(pthread_create(&th, NULL, thread_fn, (void *)0x1234), 0);
	cr_assert_eq(pthread_join(th, &ret), 0);
	cr_assert_eq(ret, (void *)0x1234);
	assert_allowed(unshare(CLONE_FILES));
	assert_allowed(unshare(CLONE_FS));
	assert_allowed(syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, fd, fd));
}

Test(seccomp, sockets_denied)
{
	int sv[2];

	load_filter(0);
	assert_denied(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
	assert_denied(socket(AF_PACKET, SOCK_DGRAM, 0), EPERM);
	assert_denied(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP), EPERM);
	assert_denied(socket(AF_INET6, SOCK_RAW | SOCK_NONBLOCK, IPPROTO_ICMPV6), EPERM);
	assert_denied(socket(AF_INET, SOCK_PACKET, 0), EPERM);
	assert_denied(socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT), EPERM);
	assert_denied(socket(AF_VSOCK, SOCK_STREAM, 0), EPERM);
	assert_denied(socket(AF_BLUETOOTH, SOCK_STREAM, 0), EPERM);
	assert_denied(socket(AF_KEY, SOCK_RAW, 2), EPERM);
	assert_denied(socket(AF_ALG, SOCK_SEQPACKET, 0), EPERM);
	assert_denied(socket(AF_UNSPEC, SOCK_STREAM, 0), EPERM);
	assert_denied(socket(AF_TIPC, SOCK_RDM, 0), EPERM);
	assert_denied(socket(AF_RDS, SOCK_SEQPACKET, 0), EPERM);
	/* The kernel reads an int: a high bit in the register must not sneak AF_PACKET past. */
	assert_denied(syscall(SYS_socket, (1L << 32) | AF_PACKET, SOCK_RAW, 0), EPERM);
	assert_denied(syscall(SYS_socket, (1L << 32) | AF_INET, SOCK_RAW, 0), EPERM);
	assert_denied(socketpair(AF_PACKET, SOCK_RAW, 0, sv), EPERM);
	assert_denied(socketpair(AF_INET, SOCK_RAW, 0, sv), EPERM);
}

Test(seccomp, ordinary_sockets_still_work)
{
	int sv[2];

	load_filter(0);
	assert_allowed(socket(AF_INET, SOCK_STREAM, 0));
	assert_allowed(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
	assert_allowed(socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0));
	assert_allowed(socket(AF_UNIX, SOCK_STREAM, 0));
	assert_allowed(socket(AF_UNIX, SOCK_DGRAM, 0));
	assert_allowed(socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
	assert_allowed(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
}

static int open_pty(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);

	cr_assert_geq(m, 0);
	cr_assert_eq(grantpt(m), 0);
	cr_assert_eq(unlockpt(m), 0);
	return m;
}

Test(seccomp, terminal_injection_denied)
{
	int m = open_pty();
	char c = 'x';
	int mode = 0;
	struct winsize ws;

	load_filter(0);
	assert_denied(ioctl(m, TIOCSTI, &c), EPERM);
	assert_denied(syscall(SYS_ioctl, m, (0xdeadL << 32) | TIOCSTI, &c), EPERM);
	assert_denied(ioctl(m, TIOCLINUX, &mode), EPERM);
	assert_allowed(ioctl(m, TIOCGWINSZ, &ws));
}

Test(seccomp, terminal_takeover_denied)
{
	int m = open_pty();
	int ldisc = 0; /* N_TTY */

	load_filter(0);
	assert_denied(ioctl(m, TIOCSETD, &ldisc), EPERM);
	assert_denied(syscall(SYS_ioctl, m, (0xdeadL << 32) | TIOCSETD, &ldisc), EPERM);
	assert_denied(ioctl(m, TIOCEXCL), EPERM);
	assert_denied(ioctl(m, TIOCCONS), EPERM);
	assert_denied(ioctl(m, TIOCVHANGUP), EPERM);
	assert_allowed(ioctl(m, TIOCGETD, &ldisc));
	assert_allowed(ioctl(m, TIOCNXCL));
}

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

/* A fresh directory with a 0644 file "f" in it, made before the filter is loaded. */
static void setid_dir(char *dir, size_t n, char *file, size_t fn)
{
	int fd;

	cr_assert_lt(snprintf(dir, n, "/tmp/paddock-setid-XXXXXX"), (int)n);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_lt(snprintf(file, fn, "%s/f", dir), (int)fn);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	(void)close(fd);
}

static void setid_cleanup(const char *dir)
{
	static const char *const names[] = {"f", "new"};
	char p[96];

	for (size_t i = 0; i < PDK_ARRAY_SIZE(names); i++)
		if (snprintf(p, sizeof(p), "%s/%s", dir, names[i]) < (int)sizeof(p))
			(void)unlink(p);
	cr_assert_eq(rmdir(dir), 0, "rmdir %s: %s", dir, strerror(errno));
}

/* An existing file: no mode with a set-id bit, whatever the call, on every bit width. */
static void assert_no_setid_chmod(const char *dir, const char *f)
{
	int fd = open(f, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	assert_denied(chmod(f, 04755), EPERM);
	assert_denied(chmod(f, 02755), EPERM);
	assert_denied(syscall(SYS_chmod, f, (0xdeadL << 32) | 06755), EPERM);
	assert_denied(syscall(SYS_chmod, f, 0x10000L | 04755), EPERM); /* umode_t sees 04755 */
	assert_denied(fchmod(fd, 04755), EPERM);
	assert_denied(fchmodat(AT_FDCWD, f, 02711, 0), EPERM);
	assert_denied(syscall(SYS_fchmodat2, AT_FDCWD, f, 04755, 0), EPERM);
	assert_allowed(chmod(f, 0755));
	assert_allowed(chmod(dir, 01777)); /* the sticky bit stays allowed */
	(void)close(fd);
}

/* New files: no creation mode with a set-id bit. */
static void assert_no_setid_create(const char *dir)
{
	char p[96];

	cr_assert_lt(snprintf(p, sizeof(p), "%s/new", dir), (int)sizeof(p));
	assert_denied(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 04755), EPERM);
	assert_denied(openat(AT_FDCWD, p, O_WRONLY | O_CREAT | O_CLOEXEC, 02755), EPERM);
	assert_denied(open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 04700), EPERM);
	assert_denied(creat(p, 04755), EPERM);
	assert_denied(mknod(p, S_IFREG | 04755, 0), EPERM);
	assert_denied(mknodat(AT_FDCWD, p, S_IFREG | 02755, 0), EPERM);
	assert_denied(syscall(SYS_openat2, AT_FDCWD, p, NULL, 0), ENOSYS);
	cr_assert_eq(access(p, F_OK), -1, "a denied call created %s", p);
	/* Without O_CREAT the kernel ignores the mode: Go and Rust always pass one. */
	assert_allowed(close((int)syscall(SYS_open, dir, O_RDONLY | O_CLOEXEC, 04755)));
	assert_allowed(close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0755)));
}

Test(seccomp, setid_modes_denied)
{
	char dir[64], f[96];

	setid_dir(dir, sizeof(dir), f, sizeof(f));
	load_filter(0);
	assert_no_setid_chmod(dir, f);
	assert_no_setid_create(dir);
	setid_cleanup(dir);
}

Test(seccomp, personality_only_query_and_linux)
{
	load_filter(0);
	assert_allowed(personality(0xffffffff));
	assert_allowed(personality(PER_LINUX));
	assert_allowed(syscall(SYS_personality, 1L << 32)); /* the kernel sees PER_LINUX */
	assert_denied(personality(ADDR_NO_RANDOMIZE), EPERM);
	assert_denied(personality(READ_IMPLIES_EXEC), EPERM);
	assert_denied(personality(PER_LINUX32), EPERM);
	assert_denied(personality(0xfffffffe), EPERM);
}

static int peek_self(void)
{
	char src[4] = "abc", dst[4] = "";
	struct iovec l = {dst, sizeof(dst)}, r = {src, sizeof(src)};

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof(src) ? 0 : -1;
}

Test(seccomp, ptrace_family_denied_by_default)
{
	load_filter(0);
	assert_denied(ptrace(PTRACE_PEEKDATA, getppid(), 0, 0), EPERM);
	assert_denied(peek_self(), EPERM);
	assert_denied(syscall(SYS_process_vm_writev, getpid(), NULL, 0, NULL, 0, 0), EPERM);
	assert_denied(syscall(SYS_pidfd_getfd, -1, 0, 0), EPERM);
}

Test(seccomp, ptrace_family_allowed_with_flag)
{
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);

	cr_assert_geq(pidfd, 0);
	load_filter(PDK_SECCOMP_ALLOW_PTRACE);
	assert_allowed(peek_self());
	assert_allowed(syscall(SYS_pidfd_getfd, pidfd, 0, 0));
	/* Reaches the kernel, which refuses for its own reason (the parent is not traced). */
	assert_denied(ptrace(PTRACE_PEEKDATA, getppid(), 0, 0), ESRCH);
}

/*
 * The programs built into libpaddock (seccomp-gen, at build time) must be
 * exactly what the rules in seccomp-rules.c compile to now.
 */
Test(seccomp, builtin_programs_match_the_rules)
{
	const unsigned variants[] = {0, PDK_SECCOMP_ALLOW_PTRACE, PDK_SECCOMP_FILE_HELPER,
				     PDK_SECCOMP_ALLOW_PTRACE | PDK_SECCOMP_FILE_HELPER};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(variants); i++) {
		struct pdk_error *err = NULL;
		struct sock_fprog fresh = {0};
		struct pdk_seccomp *s = pdk_seccomp_prepare(variants[i], &err);
		const struct sock_fprog *built;

		cr_assert_not_null(s);
		cr_assert_eq(pdk__seccomp_compile(variants[i], &fresh, &err), 0);
		built = pdk__seccomp_program(s);
		cr_assert_eq(built->len, fresh.len, "flags %u: %u vs %u insns", variants[i],
			     built->len, fresh.len);
		cr_assert_eq(memcmp(built->filter, fresh.filter, fresh.len * sizeof(*fresh.filter)),
			     0, "flags %u: the built-in program differs from the rules",
			     variants[i]);
		free(fresh.filter);
		pdk_seccomp_free(s);
	}
}

/* ---- the exec-tracing program (seccomp user notification) ---- */

static uint32_t eval_notify(uint32_t arch, int nr)
{
	struct seccomp_data d = {.nr = nr, .arch = arch};

	return run_bpf(pdk__seccomp_notify_program(), &d);
}

Test(seccomp, notify_program_matches_the_rules)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct sock_fprog fresh = {0};
	const struct sock_fprog *built = pdk__seccomp_notify_program();

	cr_assert_eq(pdk__seccomp_compile_notify(&fresh, &err), 0);
	cr_assert_eq(built->len, fresh.len);
	cr_assert_eq(memcmp(built->filter, fresh.filter, fresh.len * sizeof(*fresh.filter)), 0,
		     "the built-in notify program differs from the rules");
	free(fresh.filter);
}

/*
 * Only execve and execveat notify. Foreign ABIs are allowed by this
 * program, because the denylist kills them and KILL beats USER_NOTIF.
 */
Test(seccomp, notify_program_traps_exactly_exec)
{
	struct pdk_seccomp *s = pdk_seccomp_prepare(0, NULL);

	cr_assert_eq(eval_notify(AUDIT_ARCH_X86_64, SYS_execve), SECCOMP_RET_USER_NOTIF);
	cr_assert_eq(eval_notify(AUDIT_ARCH_X86_64, SYS_execveat), SECCOMP_RET_USER_NOTIF);
	for (int nr = 0; nr < 460; nr++) {
		if (nr == SYS_execve || nr == SYS_execveat)
			continue;
		cr_assert_eq(eval_notify(AUDIT_ARCH_X86_64, nr), SECCOMP_RET_ALLOW, "nr %d", nr);
	}
	/* i386 execve (11) and x32 execve (520): allowed here, killed by the denylist. */
	cr_assert_eq(eval_notify(AUDIT_ARCH_I386, 11), SECCOMP_RET_ALLOW);
	cr_assert_eq(eval_notify(AUDIT_ARCH_X86_64, 0x40000000 | 520), SECCOMP_RET_ALLOW);
	cr_assert_not_null(s);
	cr_assert_eq(eval(s, AUDIT_ARCH_I386, 11, NULL), SECCOMP_RET_KILL_PROCESS);
	cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, 0x40000000 | 520, NULL), SECCOMP_RET_KILL_PROCESS);
	/* No listener of the sandbox's own: it would take exec tracing's notifications. */
	{
		uint64_t listen[6] = {SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER};
		uint64_t plain[6] = {SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC};

		cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_seccomp, listen), RET_EPERM);
		cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_seccomp, plain), SECCOMP_RET_ALLOW);
	}
	/* The denylist leaves exec alone: the notify program alone decides to trace it. */
	cr_assert_eq(eval(s, AUDIT_ARCH_X86_64, SYS_execve, NULL), SECCOMP_RET_ALLOW);
	pdk_seccomp_free(s);
}

/* In the kernel: an exec waits for the listener; with both filters, EPERM beats USER_NOTIF. */
Test(seccomp, notify_filter_in_the_kernel)
{
	int fd;
	long r;

	cr_assert(pdk_seccomp_notify_supported());
	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	fd = pdk_seccomp_apply_notify_child(NULL);
	cr_assert_geq(fd, 0, "load: %s", strerror(-fd));
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC, "the listener must close on exec");
	load_filter(0);
	/* Under the denylist, no second listener (see notify_program_traps_exactly_exec). */
	cr_assert_eq(pdk_seccomp_apply_notify_child(NULL), -EPERM);
	/* A denied syscall never reaches the listener. */
	assert_denied(syscall(SYS_mount, "none", NOPATH, "tmpfs", 0, NULL), EPERM);
	/* With the listener closed, a traced syscall fails with ENOSYS instead of waiting. */
	(void)close(fd);
	r = syscall(SYS_execve, NOPATH, NULL, NULL);
	cr_assert(r == -1 && errno == ENOSYS, "execve with no listener: %ld errno %d", r, errno);
}
