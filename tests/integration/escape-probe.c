/*
 * escape-probe.c - one real escape attempt per name, run inside a sandbox.
 *
 *   escape-probe NAME [ARG]
 *
 * Prints "NAME: blocked (ERRNO)" and exits 1 when the kernel refused the
 * attempt, or "NAME: ESCAPED (detail)" and exits 0 when it worked. A few
 * probes report a value instead ("euid", "capeff"): they print it and exit 2.
 * The test scripts assert the exit status, the line and, where it matters,
 * the errno. Linked statically so that it needs nothing from the sandbox.
 */
#include "common.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <termios.h>
#include <unistd.h>

static const char *arg;  /* the probe's optional argument */
static const char *arg2; /* a second one (a port) */

/* Each probe returns 0 when the attack worked, else the errno that stopped it. */
static int ret(long r)
{
	return r < 0 ? errno : 0;
}

static int open_read(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	if (read(fd, buf, sizeof(buf)) < 0) {
		int e = errno;

		close(fd);
		return e;
	}
	close(fd);
	return 0;
}

static int open_write(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return errno;
	if (write(fd, "x", 1) != 1) {
		int e = errno;

		close(fd);
		return e;
	}
	close(fd);
	return 0;
}

static int list_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int p_read_shadow(void)
{
	return open_read("/etc/shadow");
}
static int p_list_root(void)
{
	return list_dir("/root");
}
static int p_list_home(void)
{
	return list_dir("/home");
}
static int p_proc1_root(void)
{
	return open_read("/proc/1/root/etc/passwd");
}
static int p_proc1_environ(void)
{
	return open_read("/proc/1/environ");
}
static int p_proc1_mem(void)
{
	return open_read("/proc/1/mem");
}
static int p_dotdot_root(void)
{
	return open_read("/proc/self/root/../../../etc/shadow");
}
static int p_dev_mem(void)
{
	return open_read("/dev/mem");
}
static int p_dev_disk(void)
{
	return open_read("/dev/vda") == 0 || open_read("/dev/sda") == 0 ? 0 : ENOENT;
}
static int p_sysfs(void)
{
	return list_dir("/sys/kernel");
}
static int p_host_proc_pid(void)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/%s/cmdline", arg ? arg : "1");
	return open_read(p) == 0 && arg != NULL ? 0 : ENOENT;
}
static int p_write_usr(void)
{
	return open_write("/usr/bin/paddock-escape");
}
static int p_write_etc(void)
{
	return open_write("/etc/paddock-escape");
}
static int p_mkdir_root(void)
{
	return ret(mkdir("/paddock-escape", 0755));
}
static int p_write_sysctl(void)
{
	return open_write("/proc/sys/kernel/hostname");
}
static int p_sysrq(void)
{
	return open_write("/proc/sysrq-trigger");
}
static int p_mount_tmpfs(void)
{
	return ret(mount("tmpfs", "/tmp", "tmpfs", 0, NULL));
}
static int p_remount_rw(void)
{
	return ret(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL));
}
static int p_umount_proc(void)
{
	return ret(umount2("/proc", MNT_DETACH));
}
static int p_fsopen(void)
{
	return ret(syscall(SYS_fsopen, "tmpfs", 0));
}
static int p_open_tree(void)
{
	return ret(syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* CLONE */));
}
static int p_pivot_root(void)
{
	return ret(syscall(SYS_pivot_root, "/tmp", "/tmp"));
}
static int p_chroot(void)
{
	return ret(chroot("/tmp"));
}
static int p_mount_cgroup(void)
{
	return ret(mount("cgroup", "/tmp", "cgroup", 0, "memory"));
}
static int p_unshare_user(void)
{
	return ret(unshare(CLONE_NEWUSER));
}
static int p_unshare_mount(void)
{
	return ret(unshare(CLONE_NEWNS));
}
static int p_unshare_net(void)
{
	return ret(unshare(CLONE_NEWNET));
}
static int p_clone_newuser(void)
{
	long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);

	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return ret(pid);
}
static int p_clone3(void)
{
	uint64_t args[11] = {0};

	args[0] = CLONE_NEWUSER;
	args[4] = SIGCHLD;
	long pid = syscall(SYS_clone3, args, sizeof(args));
	if (pid == 0)
		_exit(0);
	return ret(pid);
}
static int p_setns(void)
{
	int fd = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	return ret(setns(fd, 0));
}
static int p_ptrace_init(void)
{
	return ret(ptrace(PTRACE_ATTACH, 1, NULL, NULL));
}
static int p_ptrace_host(void)
{
	return ret(ptrace(PTRACE_ATTACH, arg ? atoi(arg) : 1, NULL, NULL));
}
static int p_vm_readv(void)
{
	char buf[8];
	struct iovec l = {buf, sizeof(buf)}, r = {(void *)0x400000, sizeof(buf)};

	return ret(process_vm_readv(1, &l, 1, &r, 1, 0));
}
static int p_kill_host(void)
{
	return ret(kill(arg ? atoi(arg) : 1, SIGKILL));
}
static int p_kill_all(void)
{
	/* Everything this can reach must be inside; the test checks the host. */
	(void)kill(-1, SIGKILL);
	return EPERM; /* "blocked" is decided by the test, from the host side */
}
static int p_keyctl(void)
{
	return ret(syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "paddock"));
}
static int p_add_key(void)
{
	return ret(syscall(SYS_add_key, "user", "paddock", "x", 1, KEY_SPEC_PROCESS_KEYRING));
}
static int p_bpf(void)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	return ret(syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a)));
}
static int p_perf(void)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	return ret(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
}
static int p_userfaultfd(void)
{
	return ret(syscall(SYS_userfaultfd, O_CLOEXEC));
}
static int p_io_uring(void)
{
	char params[120] = {0};

	return ret(syscall(SYS_io_uring_setup, 4, params));
}
static int p_kexec(void)
{
	return ret(syscall(SYS_kexec_load, 0, 0, NULL, 0));
}
static int p_init_module(void)
{
	return ret(syscall(SYS_finit_module, 0, "", 0));
}
static int p_open_by_handle(void)
{
	char h[64] = {0};

	return ret(syscall(SYS_open_by_handle_at, AT_FDCWD, h, O_RDONLY));
}
static int p_personality(void)
{
	return ret(personality(READ_IMPLIES_EXEC));
}
/* A seccomp listener of our own would receive exec tracing's notifications. */
static int p_seccomp_listener(void)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {.len = 1, .filter = &allow};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return errno;
	return ret(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			   &prog));
}
static int p_reboot(void)
{
	return ret(syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc, NULL));
}
static int p_sethostname(void)
{
	return ret(sethostname("escaped", 7));
}
static int p_setgroups(void)
{
	gid_t g = 0;

	return ret(setgroups(1, &g));
}
static int p_raise_rlimit(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) < 0)
		return errno;
	if (r.rlim_max == RLIM_INFINITY)
		return EPERM;
	r.rlim_max += 1;
	r.rlim_cur = r.rlim_max;
	return ret(setrlimit(RLIMIT_NOFILE, &r));
}
static int p_mknod(void)
{
	return ret(mknod("/tmp/paddock-null", S_IFCHR | 0666, makedev(1, 3)));
}
static int p_tiocsti(void)
{
	char c = '#';

	return ret(ioctl(0, TIOCSTI, &c));
}
static int p_tioclinux(void)
{
	char sub = 11; /* TIOCL_GETKMSGREDIRECT */

	return ret(ioctl(0, TIOCLINUX, &sub));
}
static int p_packet_socket(void)
{
	return ret(socket(AF_PACKET, SOCK_RAW, 0));
}
static int p_raw_socket(void)
{
	return ret(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
}
static int p_tcp_connect(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(arg ? atoi(arg) : 80)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return ret(connect(fd, (struct sockaddr *)&a, sizeof(a)));
}
static int p_tcp_bind(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(18080)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	return ret(bind(fd, (struct sockaddr *)&a, sizeof(a)));
}
/* A connect to ADDR (IPv4 or IPv6 text) and PORT: the sandbox's namespace has no route to it. */
static int connect_to(int type, const char *addr, int port)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	socklen_t len = sizeof(*a4);
	int fd;

	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		len = sizeof(*a6);
	} else {
		return EINVAL;
	}
	fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	return ret(connect(fd, (struct sockaddr *)&ss, len));
}
/* Routes out: TCP and UDP to an outside IPv4 or IPv6 address, or to ARG ARG2 (ADDR PORT). */
static int route_arg(int type, const char *addr, int port)
{
	return connect_to(type, arg ? arg : addr, arg2 ? atoi(arg2) : port);
}
static int p_tcp_out(void)
{
	return route_arg(SOCK_STREAM, "198.51.100.1", 80);
}
static int p_udp_out(void)
{
	return route_arg(SOCK_DGRAM, "198.51.100.1", 53);
}
static int p_tcp6_out(void)
{
	return route_arg(SOCK_STREAM, "2001:db8::1", 80);
}
/*
 * The sandbox's own loopback: a server on 127.0.0.1:ARG and on ::1:ARG (the
 * port a host listener has too) that its own client reaches. Prints
 * "loopback-own: ok" and exits 2 (not an escape: its own namespace).
 */
static int own_server(int fam, int port)
{
	struct sockaddr_storage ss = {0};
	socklen_t len = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int s = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0), c, a;
	char b = 0;

	if (fam == AF_INET) {
		((struct sockaddr_in *)&ss)->sin_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else {
		((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	}
	if (s < 0 || bind(s, (struct sockaddr *)&ss, len) < 0 || listen(s, 1) < 0)
		return errno;
	c = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&ss, len) < 0)
		return errno;
	a = accept(s, NULL, NULL);
	if (a < 0 || write(c, "x", 1) != 1 || read(a, &b, 1) != 1 || b != 'x')
		return errno ? errno : EIO;
	close(a);
	close(c);
	close(s);
	return 0;
}
static int p_loopback_own(void)
{
	int port = arg ? atoi(arg) : 18080;
	int e = own_server(AF_INET, port);

	if (e == 0)
		e = own_server(AF_INET6, port);
	if (e != 0)
		return e;
	printf("loopback-own: ok\n");
	return -1;
}
static int p_udp_send(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(arg ? atoi(arg) : 53)};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Sent on the sandbox's own lo: the test checks the host listener saw nothing. */
	(void)sendto(fd, "escape", 6, 0, (struct sockaddr *)&a, sizeof(a));
	return EPERM;
}
static int p_ipv6_connect(void)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(arg ? atoi(arg) : 80)};
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	a.sin6_addr = in6addr_loopback;
	return ret(connect(fd, (struct sockaddr *)&a, sizeof(a)));
}
static int p_abstract_unix(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	const char *name = arg ? arg : "paddock-test";
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	memcpy(a.sun_path + 1, name, strlen(name));
	return ret(connect(fd, (struct sockaddr *)&a,
			   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))));
}
/*
 * The daemon's authority (docs/daemon.md): ARG is the path of `paddock serve`'s unix socket
 * as the sandbox sees it. Without a token, ask for a sandbox with the host's network and
 * the host's root read-write: the refusal is the connect()'s errno (the socket is hidden),
 * or EACCES when the daemon answers 401 or 403; any other answer is the daemon obeying.
 */
static int p_daemon_create(void)
{
	static const char body[] = "{\"overrides\":{\"network\":{\"mode\":\"host\"}},"
				   "\"workspace\":{\"path\":\"/\",\"mode\":\"rw\"}}";
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char req[512], ans[64] = "";
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int n, code = 0;

	if (fd < 0 || arg == NULL || strlen(arg) >= sizeof(a.sun_path))
		return fd < 0 ? errno : EINVAL;
	memcpy(a.sun_path, arg, strlen(arg));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return errno;
	n = snprintf(req, sizeof(req),
		     "POST /v1/sandboxes HTTP/1.1\r\nHost: paddock\r\nConnection: close\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		     strlen(body), body);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n || read(fd, ans, sizeof(ans) - 1) <= 0)
		return ECONNRESET;
	if (sscanf(ans, "HTTP/1.%*d %d", &code) != 1)
		return EPROTO;
	if (code == 401 || code == 403)
		return EACCES;
	fprintf(stderr, "daemon-create: the daemon answered %d\n", code);
	return 0;
}
/*
 * A supervisor's control socket (ARG: RUNDIR/sb/ID/ctl.sock as the sandbox sees it), where
 * the daemon drives a sandbox: a status request. The refusal is the connect()'s errno, or
 * ECONNRESET when the supervisor closes the connection without an answer.
 */
static int p_supervisor_ctl(void)
{
	static const char req[] = "{\"id\":1,\"op\":\"status\"}";
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char ans[256];
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0 || arg == NULL || strlen(arg) >= sizeof(a.sun_path))
		return fd < 0 ? errno : EINVAL;
	memcpy(a.sun_path, arg, strlen(arg));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return errno;
	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0 || read(fd, ans, sizeof(ans)) <= 0)
		return ECONNRESET;
	return 0;
}
static int p_exec_shm(void)
{
	/* /dev/shm is noexec: a copied binary must not run from there. */
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int out = open("/dev/shm/probe", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	char buf[65536];
	ssize_t n;
	char *av[] = {"/dev/shm/probe", "euid", NULL};

	if (in < 0 || out < 0)
		return errno;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			return errno;
	close(out);
	execv(av[0], av);
	return errno;
}
static int p_daemon(void)
{
	/*
	 * Double fork + setsid: the test checks nothing with this marker outlives
	 * run. ARG is the sleep's duration, unique per test run (a "sleep 300"
	 * of anything else on the machine must not fail the check).
	 */
	if (fork() == 0) {
		setsid();
		if (fork() == 0) {
			char *av[] = {"sleep", (char *)(arg ? arg : "300"), NULL};

			execvp("sleep", av);
			_exit(1);
		}
		_exit(0);
	}
	wait(NULL);
	return EPERM;
}

static int print_euid(void)
{
	printf("euid=%u\n", (unsigned)geteuid());
	return -1;
}
static int print_capeff(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "CapEff:", 7) == 0)
			printf("%s", line);
	return -1;
}

/*
 * Set-id bits from inside (issue 16, finding 3): each probe makes a file in
 * the directory ARG (an rw workspace or an --rw bind) and tries to give it
 * a set-id mode. The host side checks that no set-id file appeared.
 */
static int setid_path(char *buf, size_t n, const char *name)
{
	if (arg == NULL || snprintf(buf, n, "%s/%s", arg, name) >= (int)n)
		return EINVAL;
	(void)unlink(buf);
	return 0;
}
static int make_exec(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}
static int chmod_probe(const char *name, mode_t mode)
{
	char p[512];
	int e = setid_path(p, sizeof(p), name);

	if (e == 0)
		e = make_exec(p);
	return e ? e : ret(chmod(p, mode));
}
static int p_chmod_suid(void)
{
	return chmod_probe("chmod-suid", 04755);
}
static int p_chmod_sgid(void)
{
	return chmod_probe("chmod-sgid", 02755);
}
static int p_fchmodat2_suid(void)
{
	char p[512];
	int e = setid_path(p, sizeof(p), "fchmodat2-suid");

	if (e == 0)
		e = make_exec(p);
	return e ? e : ret(syscall(452 /* fchmodat2 */, AT_FDCWD, p, 04755, 0));
}
static int p_open_suid(void)
{
	char p[512];
	int e = setid_path(p, sizeof(p), "open-suid");

	return e ? e : ret(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 04755));
}
static int p_tmpfile_suid(void)
{
	return arg ? ret(open(arg, O_TMPFILE | O_WRONLY | O_CLOEXEC, 04755)) : EINVAL;
}
static int p_mknod_suid(void)
{
	char p[512];
	int e = setid_path(p, sizeof(p), "mknod-suid");

	return e ? e : ret(mknod(p, S_IFREG | 06755, 0));
}
static int p_openat2_suid(void)
{
	struct {
		uint64_t flags, mode, resolve;
	} how = {O_WRONLY | O_CREAT, 04755, 0};
	char p[512];
	int e = setid_path(p, sizeof(p), "openat2-suid");

	return e ? e : ret(syscall(SYS_openat2, AT_FDCWD, p, &how, sizeof(how)));
}
static int p_setcap_file(void)
{
	/* VFS_CAP_REVISION_2 | effective, permitted = CAP_SETUID (7). */
	uint32_t cap[5] = {0x02000001, 1u << 7, 0, 0, 0};
	char p[512];
	int e = setid_path(p, sizeof(p), "setcap-file");

	if (e == 0)
		e = make_exec(p);
	return e ? e : ret(setxattr(p, "security.capability", cap, sizeof(cap), 0));
}

/* The caller's terminal (issue 16, finding 6): fd 0 is the terminal run was given. */
static int p_tiocsetd(void)
{
	int ldisc = 27; /* N_NULL: the terminal would discard all I/O */

	return ret(ioctl(0, TIOCSETD, &ldisc));
}
static int p_tiocexcl(void)
{
	return ret(ioctl(0, TIOCEXCL));
}

/*
 * /proc/PID/mem of a sibling (issue 16, finding 8): a child keeps a secret
 * in memory, and this process reads it through procfs. docs/seccomp.md
 * says which of these the sandbox allows and why.
 */
static volatile char mem_secret[16];

static int read_child_mem(int dumpable)
{
	int sync[2], fd, e = 0;
	char buf[sizeof(mem_secret)], path[64];
	pid_t pid;

	if (pipe(sync) < 0)
		return errno;
	pid = fork();
	if (pid == 0) {
		(void)prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
		memcpy((char *)mem_secret, "sibling-secret", 15);
		(void)!write(sync[1], "x", 1);
		pause();
		_exit(0);
	}
	if (pid < 0 || read(sync[0], buf, 1) != 1)
		return EAGAIN;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pread(fd, buf, sizeof(buf), (off_t)(uintptr_t)mem_secret) != sizeof(buf))
		e = errno;
	else if (memcmp(buf, "sibling-secret", 15) != 0)
		e = EIO;
	if (fd >= 0)
		close(fd);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return e;
}
static int p_sibling_mem(void)
{
	int e = read_child_mem(1);

	if (e != 0)
		return e;
	printf("sibling-mem: readable\n");
	return -1;
}
static int p_sibling_mem_nodump(void)
{
	return read_child_mem(0);
}

static const struct {
	const char *name;
	int (*fn)(void);
} probes[] = {
	{"read-shadow", p_read_shadow},
	{"list-root", p_list_root},
	{"list-home", p_list_home},
	{"proc1-root", p_proc1_root},
	{"proc1-environ", p_proc1_environ},
	{"proc1-mem", p_proc1_mem},
	{"dotdot-root", p_dotdot_root},
	{"dev-mem", p_dev_mem},
	{"dev-disk", p_dev_disk},
	{"sysfs", p_sysfs},
	{"host-proc-pid", p_host_proc_pid},
	{"write-usr", p_write_usr},
	{"write-etc", p_write_etc},
	{"mkdir-root", p_mkdir_root},
	{"write-sysctl", p_write_sysctl},
	{"sysrq", p_sysrq},
	{"mount-tmpfs", p_mount_tmpfs},
	{"remount-rw", p_remount_rw},
	{"umount-proc", p_umount_proc},
	{"fsopen", p_fsopen},
	{"open-tree", p_open_tree},
	{"pivot-root", p_pivot_root},
	{"chroot", p_chroot},
	{"mount-cgroup", p_mount_cgroup},
	{"unshare-user", p_unshare_user},
	{"unshare-mount", p_unshare_mount},
	{"unshare-net", p_unshare_net},
	{"clone-newuser", p_clone_newuser},
	{"clone3-newuser", p_clone3},
	{"setns", p_setns},
	{"ptrace-init", p_ptrace_init},
	{"ptrace-host", p_ptrace_host},
	{"vm-readv", p_vm_readv},
	{"kill-host", p_kill_host},
	{"kill-all", p_kill_all},
	{"keyctl", p_keyctl},
	{"add-key", p_add_key},
	{"bpf", p_bpf},
	{"perf-event", p_perf},
	{"userfaultfd", p_userfaultfd},
	{"io-uring", p_io_uring},
	{"kexec", p_kexec},
	{"init-module", p_init_module},
	{"open-by-handle", p_open_by_handle},
	{"personality", p_personality},
	{"seccomp-listener", p_seccomp_listener},
	{"reboot", p_reboot},
	{"sethostname", p_sethostname},
	{"setgroups", p_setgroups},
	{"raise-rlimit", p_raise_rlimit},
	{"mknod", p_mknod},
	{"tiocsti", p_tiocsti},
	{"tioclinux", p_tioclinux},
	{"packet-socket", p_packet_socket},
	{"raw-socket", p_raw_socket},
	{"tcp-connect", p_tcp_connect},
	{"tcp-bind", p_tcp_bind},
	{"udp-send", p_udp_send},
	{"tcp-out", p_tcp_out},
	{"udp-out", p_udp_out},
	{"tcp6-out", p_tcp6_out},
	{"loopback-own", p_loopback_own},
	{"ipv6-connect", p_ipv6_connect},
	{"abstract-unix", p_abstract_unix},
	{"exec-shm", p_exec_shm},
	{"daemon", p_daemon},
	{"daemon-create", p_daemon_create},
	{"supervisor-ctl", p_supervisor_ctl},
	{"euid", print_euid},
	{"capeff", print_capeff},
	{"chmod-suid", p_chmod_suid},
	{"chmod-sgid", p_chmod_sgid},
	{"fchmodat2-suid", p_fchmodat2_suid},
	{"open-suid", p_open_suid},
	{"tmpfile-suid", p_tmpfile_suid},
	{"mknod-suid", p_mknod_suid},
	{"openat2-suid", p_openat2_suid},
	{"setcap-file", p_setcap_file},
	{"tiocsetd", p_tiocsetd},
	{"tiocexcl", p_tiocexcl},
	{"sibling-mem", p_sibling_mem},
	{"sibling-mem-nodump", p_sibling_mem_nodump},
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: escape-probe NAME [ARG]\n");
		return 3;
	}
	arg = argc > 2 ? argv[2] : NULL;
	arg2 = argc > 3 ? argv[3] : NULL;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(probes); i++) {
		int e;

		if (strcmp(argv[1], probes[i].name) != 0)
			continue;
		e = probes[i].fn();
		if (e < 0)
			return 2;
		if (e == 0) {
			printf("%s: ESCAPED\n", argv[1]);
			return 0;
		}
		printf("%s: blocked (%s)\n", argv[1],
		       strerrorname_np(e) ? strerrorname_np(e) : "?");
		return 1;
	}
	fprintf(stderr, "escape-probe: unknown probe '%s'\n", argv[1]);
	return 3;
}
