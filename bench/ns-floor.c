/*
 * ns-floor.c - the machine's own cost of starting a command in the
 * namespaces a sandbox has, without paddock: the floor under `paddock run`.
 *   ns-floor [--root] PROGRAM
 *   ns-floor --all [--exec-trace] [--record FILE] [--cgroup2 join|clone] [VIEW...]
 *                  -- PROGRAM [ARG...]
 * Clones a child into new user, pid, mount, network, ipc, uts and cgroup
 * namespaces (the set bwrap and paddock's default profile unshare), maps
 * the caller's uid and gid, and has it exec PROGRAM; waits for it and exits
 * with its status. With --root the child first builds a root of its own
 * as a sandbox does at the least: a tmpfs with /usr bound read-only, the
 * /bin, /lib and /lib64 links, a fresh /proc, and pivot_root into it.
 * No cgroup, seccomp, Landlock or audit: what is left of a sandbox's start
 * when nothing of its own is done.
 *
 * --all is the floor of every mechanism paddock applies, each done the
 * cheapest way the kernel offers and nothing else: a cgroup in each v1
 * hierarchy paddock joins (memory, pids, cpuacct, freezer: made with their
 * limits, joined by the child as its first step, removed at the end; on a
 * cgroup2-only host, one cgroup there), the view VIEW in bwrap's words
 * (--ro-bind SRC DST, --bind SRC DST, --symlink TARGET PATH, --proc DST,
 * --dev DST, --tmpfs DST, --chdir DIR, --hostname NAME, and --overlay-src
 * LOWER --overlay UPPER WORK DST for the default profile's workspace overlay:
 * bench/startup gives it the same view as bwrap and paddock's default
 * profile) built on a tmpfs
 * root made read-only, loopback up, rlimits, a Landlock ruleset with one
 * rule per bound path, no_new_privs, every capability and the bounding set
 * dropped, a seccomp filter of paddock's size (380 instructions), and a pid
 * 1 that forks the command and reaps it. No audit, no exec trace.
 * Built and run by bench/startup (no libpaddock).
 *
 * --all --exec-trace adds the default profile's exec trace, the cheapest
 * way: a second filter that sends every execve and execveat to a seccomp
 * listener (installed by the child after the first, as its last step), the
 * listener passed to the parent over a socket, and the parent answering each
 * notification with CONTINUE (RECV, ID_VALID, SEND; synchronous wake-ups
 * asked for, as paddock does) until the listener hangs up. Nothing is read
 * from the process and nothing is recorded: what observing an exec costs.
 * --record FILE (after --exec-trace when both are given) appends the run's records to FILE once
 * the command has ended, the cheapest way an audit can: one open of an
 * existing file, one write of about 1 KiB (the run's start, its exec, its
 * exit), no fsync (paddock's spool promises the page cache, as this does).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>

#define NS_FLAGS                                                                                   \
	(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)

struct child {
	char *prog;
	int root;
	int all;
	char **view; /* --all: the VIEW arguments, NULL-terminated */
	char **argv; /* --all: PROGRAM and its arguments */
	int procs[8];
	int n_procs;
	int sync[2];
	int trace[2]; /* --exec-trace: the socket the listener is passed over, else -1 */
};

static char stack[256 * 1024];

static void must(int ok, const char *what)
{
	if (!ok) {
		perror(what);
		_exit(126);
	}
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	must(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), path);
	close(fd);
}

/* The least root a sandbox has: a tmpfs, /usr read-only, the usrmerge links, /proc. */
static void make_root(void)
{
	must(mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0, "mount /");
	must(mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0, "tmpfs");
	must(mkdir("/tmp/usr", 0755) == 0 && mkdir("/tmp/proc", 0755) == 0 &&
		     mkdir("/tmp/old", 0755) == 0,
	     "mkdir");
	must(mount("/usr", "/tmp/usr", NULL, MS_BIND | MS_REC, NULL) == 0, "bind /usr");
	must(mount(NULL, "/tmp/usr", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) == 0, "ro /usr");
	must(symlink("usr/bin", "/tmp/bin") == 0 && symlink("usr/lib", "/tmp/lib") == 0 &&
		     symlink("usr/lib64", "/tmp/lib64") == 0,
	     "symlink");
	must(mount("proc", "/tmp/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0,
	     "proc");
	must(chdir("/tmp") == 0 && syscall(SYS_pivot_root, ".", "old") == 0, "pivot_root");
	must(umount2("/old", MNT_DETACH) == 0 && chdir("/") == 0, "umount old root");
}

/* ---- --all: every mechanism, the cheapest way ---- */

#define R "/mnt" /* the new root: a tmpfs on the host's /mnt, in the child's mount namespace */

static char *at_root(const char *path)
{
	static char buf[8][4096];
	static int next;
	char *b = buf[next++ % 8];

	snprintf(b, sizeof(buf[0]), R "%s", path);
	return b;
}

/* mkdir -p of `path`'s parents; then `path` as a dir, or as an empty file. */
static void make_point(const char *path, int dir)
{
	char buf[4096];
	int fd;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *s = buf + strlen(R) + 1; *s != '\0'; s++)
		if (*s == '/') {
			*s = '\0';
			(void)mkdir(buf, 0755);
			*s = '/';
		}
	if (dir) {
		must(mkdir(path, 0755) == 0 || errno == EEXIST, path);
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	must(fd >= 0, path);
	close(fd);
}

static void bind_at(const char *src, const char *dst, unsigned long long attr)
{
	struct stat st;
	struct mount_attr ma = {.attr_set = attr};

	must(stat(src, &st) == 0, src);
	make_point(dst, S_ISDIR(st.st_mode));
	must(mount(src, dst, NULL, MS_BIND | MS_REC, NULL) == 0, dst);
	must(syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &ma, sizeof(ma)) == 0, dst);
}

static void tmpfs_at(const char *dst, const char *opts)
{
	make_point(dst, 1);
	must(mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0, dst);
}

/* What bwrap's --dev makes: a tmpfs, the six device nodes bound, devpts, /dev/shm. */
static void dev_at(const char *dst)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	char src[64], to[4096];

	tmpfs_at(dst, "mode=0755");
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		snprintf(to, sizeof(to), "%s/%s", dst, nodes[i]);
		bind_at(src, to, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	}
	snprintf(to, sizeof(to), "%s/pts", dst);
	make_point(to, 1);
	must(mount("devpts", to, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666") == 0,
	     to);
	snprintf(to, sizeof(to), "%s/ptmx", dst);
	must(symlink("pts/ptmx", to) == 0, to);
	snprintf(to, sizeof(to), "%s/shm", dst);
	tmpfs_at(to, "mode=1777");
}

/*
 * bwrap's --overlay-src LOWER --overlay UPPER WORK DST: the workspace overlay as
 * paddock mounts it (the new mount API, volatile, userxattr, nosuid and nodev).
 * overlayfs refuses a work directory whose work/work holds a volatile mount's
 * mark: the last run's is renamed aside first, the cheapest way, and left for
 * the bench's end to remove (paddock sets it aside at its end and removes it
 * beside the next start).
 */
static void overlay_at(const char *lower, const char *upper, const char *work, const char *dst)
{
	int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC), mnt;
	char ww[4096], gone[4096];
	struct timespec ts;

	make_point(dst, 1);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(ww, sizeof(ww), "%s/work", work);
	snprintf(gone, sizeof(gone), "%s/gone-%lld.%09ld", work, (long long)ts.tv_sec, ts.tv_nsec);
	(void)rename(ww, gone); /* ENOENT: the first run */
	must(fs >= 0, "fsopen overlay");
	must(syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "lowerdir", lower, 0) == 0 &&
		     syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) == 0 &&
		     syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "workdir", work, 0) == 0 &&
		     syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "volatile", NULL, 0) == 0 &&
		     syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) == 0 &&
		     syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0,
	     "overlay");
	mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	must(mnt >= 0 &&
		     syscall(SYS_move_mount, mnt, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) == 0,
	     dst);
	close(mnt);
	close(fs);
}

static void build_view(char **v, const char **chdir_to)
{
	const char *lower = NULL;

	struct mount_attr ro = {.attr_set =
					MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};

	must(mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0, "mount /");
	must(mount("tmpfs", R, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0, "tmpfs root");
	for (; *v != NULL; v++) {
		if (strcmp(*v, "--ro-bind") == 0) {
			bind_at(v[1], at_root(v[2]),
				MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
			v += 2;
		} else if (strcmp(*v, "--bind") == 0) {
			bind_at(v[1], at_root(v[2]), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
			v += 2;
		} else if (strcmp(*v, "--symlink") == 0) {
			char *at = at_root(v[2]);

			make_point(at, 1);
			(void)rmdir(at);
			must(symlink(v[1], at) == 0, at);
			v += 2;
		} else if (strcmp(*v, "--proc") == 0) {
			char *at = at_root(v[1]);

			make_point(at, 1);
			must(mount("proc", at, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0,
			     at);
			v++;
		} else if (strcmp(*v, "--dev") == 0) {
			dev_at(at_root(v[1]));
			v++;
		} else if (strcmp(*v, "--tmpfs") == 0) {
			tmpfs_at(at_root(v[1]), "mode=1777");
			v++;
		} else if (strcmp(*v, "--overlay-src") == 0) {
			lower = v[1];
			v++;
		} else if (strcmp(*v, "--overlay") == 0) {
			overlay_at(lower, v[1], v[2], at_root(v[3]));
			v += 3;
		} else if (strcmp(*v, "--chdir") == 0) {
			*chdir_to = v[1];
			v++;
		} else if (strcmp(*v, "--hostname") == 0) {
			must(sethostname(v[1], strlen(v[1])) == 0, "sethostname");
			v++;
		} else {
			fprintf(stderr, "ns-floor: unknown view argument %s\n", *v);
			_exit(2);
		}
	}
	must(mkdir(R "/.old", 0700) == 0, "mkdir .old");
	must(chdir(R) == 0 && syscall(SYS_pivot_root, ".", ".old") == 0, "pivot_root");
	must(umount2("/.old", MNT_DETACH) == 0 && rmdir("/.old") == 0, "umount old root");
	must(syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &ro, sizeof(ro)) == 0, "read-only root");
}

static void loopback_up(void)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	must(fd >= 0, "socket");
	memcpy(ifr.ifr_name, "lo", 3);
	must(ioctl(fd, SIOCGIFFLAGS, &ifr) == 0, "SIOCGIFFLAGS");
	ifr.ifr_flags |= IFF_UP;
	must(ioctl(fd, SIOCSIFFLAGS, &ifr) == 0, "SIOCSIFFLAGS");
	close(fd);
}

/* One path-beneath rule per path of the view; reads everywhere, writes where bound rw. */
static void landlock(char **v)
{
	const __u64 rd = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
			 LANDLOCK_ACCESS_FS_READ_DIR;
	const __u64 all = (LANDLOCK_ACCESS_FS_REFER << 1) - 1;
	struct landlock_ruleset_attr ra = {.handled_access_fs = all};
	int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);

	must(rs >= 0, "landlock_create_ruleset");
	for (; *v != NULL; v++) {
		const char *path = NULL;
		__u64 access = rd;

		if (strcmp(*v, "--ro-bind") == 0 || strcmp(*v, "--bind") == 0) {
			path = v[2];
			if (strcmp(*v, "--bind") == 0)
				access = all;
			v += 2;
		} else if (strcmp(*v, "--symlink") == 0) {
			v += 2;
		} else if (strcmp(*v, "--overlay") == 0) {
			path = v[3];
			access = all;
			v += 3;
		} else if (strcmp(*v, "--tmpfs") == 0 || strcmp(*v, "--dev") == 0 ||
			   strcmp(*v, "--proc") == 0) {
			path = v[1];
			access = strcmp(*v, "--proc") == 0 ? rd : all;
			v++;
		} else {
			v++;
		}
		if (path == NULL)
			continue;
		struct stat st;
		struct landlock_path_beneath_attr pb = {.parent_fd =
								open(path, O_PATH | O_CLOEXEC)};

		must(pb.parent_fd >= 0 && fstat(pb.parent_fd, &st) == 0, path);
		pb.allowed_access = S_ISDIR(st.st_mode) ? access
							: access & (LANDLOCK_ACCESS_FS_EXECUTE |
								    LANDLOCK_ACCESS_FS_READ_FILE |
								    LANDLOCK_ACCESS_FS_WRITE_FILE);
		must(syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == 0,
		     path);
		close(pb.parent_fd);
	}
	must(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs");
	must(syscall(SYS_landlock_restrict_self, rs, 0) == 0, "landlock_restrict_self");
	close(rs);
}

static void drop_caps(void)
{
	struct {
		__u32 version;
		int pid;
	} hdr = {0x20080522, 0};
	struct {
		__u32 eff, perm, inh;
	} data[2] = {{0}};

	for (int c = 0; c <= 40; c++)
		(void)prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
	must(syscall(SYS_capset, &hdr, data) == 0, "capset");
}

/* About 380 instructions, as paddock's denylist: the arch checked, 187 syscall numbers refused. */
static void seccomp_filter(void)
{
	static struct sock_filter f[380];
	struct sock_fprog prog = {.filter = f};
	unsigned short n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4);
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xc000003e, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0);
	for (unsigned nr = 1000; n + 2 < 380; nr++) { /* no program calls these numbers */
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = n;
	must(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0, "seccomp");
}

/* SECCOMP_IOCTL_NOTIF_SET_FLAGS (Linux 6.6), absent from older headers. */
#define NOTIF_SET_FLAGS     SECCOMP_IOW(4, unsigned long long)
#define NOTIF_SYNC_WAKE_UPS 1ULL

/* --exec-trace, the child: execve and execveat to a listener, which goes to the parent. */
static void exec_trace_filter(int sock)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execve, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execveat, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = "l", .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = cbuf,
			   .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			      SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);

	must(fd >= 0, "seccomp listener");
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	must(sendmsg(sock, &m, 0) == 1, "send the listener");
	close(fd);
	close(sock);
}

/* --exec-trace, the parent: every notification answered CONTINUE until the listener hangs up. */
static void exec_trace_answer(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))], b;
	struct iovec iov = {.iov_base = &b, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = cbuf,
			   .msg_controllen = sizeof(cbuf)};
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	struct pollfd p;
	int fd;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1 || CMSG_FIRSTHDR(&m) == NULL)
		return; /* the child failed before: its status says why */
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	(void)ioctl(fd, NOTIF_SET_FLAGS, NOTIF_SYNC_WAKE_UPS);
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	while (poll(&p, 1, -1) >= 0 && !(p.revents & (POLLHUP | POLLERR))) {
		memset(&req, 0, sizeof(req));
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
			continue;
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) < 0)
			continue;
		memset(&resp, 0, sizeof(resp));
		resp.id = req.id;
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		(void)ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
	}
	close(fd);
}

/* --record: the run's records, about 1 KiB, appended to an existing FILE in one write. */
static void append_record(const char *file, char **argv, int rc)
{
	static char line[1024];
	int fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC);
	int n;

	must(fd >= 0, file);
	memset(line, ' ', sizeof(line));
	n = snprintf(line, sizeof(line), "{\"argv0\":\"%s\",\"pid\":%d,\"exit\":%d,\"pad\":\"",
		     argv[0], (int)getpid(), rc);
	memcpy(line + sizeof(line) - 3, "\"}\n", 3);
	must(n > 0 && write(fd, line, sizeof(line)) == (ssize_t)sizeof(line), file);
	close(fd);
}

static void limits(void)
{
	struct rlimit core = {0, 0}, nofile = {1024, 1024}, msgq = {0, 0};

	must(setrlimit(RLIMIT_CORE, &core) == 0 && setrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
		     setrlimit(RLIMIT_MSGQUEUE, &msgq) == 0,
	     "setrlimit");
}

/* pid 1: the command forked and reaped, its status ours. */
static int run_as_init(char **argv, char **envp)
{
	int status;
	pid_t pid = fork();

	must(pid >= 0, "fork");
	if (pid == 0) {
		execve(argv[0], argv, envp);
		perror(argv[0]);
		_exit(127);
	}
	must(waitpid(pid, &status, 0) == pid, "waitpid");
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

static void all_child(struct child *c, char **envp)
{
	const char *dir = "/";

	for (int i = 0; i < c->n_procs; i++)
		must(write(c->procs[i], "0", 1) == 1, "join the cgroup");
	build_view(c->view, &dir);
	must(chdir(dir) == 0, dir);
	loopback_up();
	limits();
	landlock(c->view);
	drop_caps();
	seccomp_filter();
	if (c->trace[1] >= 0)
		exec_trace_filter(c->trace[1]);
	run_as_init(c->argv, envp);
}

/*
 * The cgroups of --all, made by the parent before the clone, their
 * cgroup.procs opened for the child. v1: in each hierarchy paddock joins,
 * below the caller's own cgroup there. Without a writable hierarchy
 * (rootless, no delegation) there is none, as paddock's best effort.
 */
static char cg_dirs[8][4096];
static int n_cg;

static void make_cgroups(struct child *c)
{
	static const char *const ctrls[] = {"memory", "pids", "cpuacct", "freezer"};
	char self[4096] = "", path[4096];
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, self, sizeof(self) - 1) : -1;

	if (fd >= 0)
		close(fd);
	self[n > 0 ? n : 0] = '\0';
	for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
		char *line = self, *own = NULL;

		while (line != NULL && *line != '\0') {
			char *end = strchr(line, '\n'), *c1 = strchr(line, ':'), *c2;

			if (end != NULL)
				*end = '\0';
			c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
			if (c2 != NULL) {
				*c2 = '\0';
				for (char *save = NULL, *w = strtok_r(c1 + 1, ",", &save);
				     w != NULL; w = strtok_r(NULL, ",", &save))
					if (strcmp(w, ctrls[i]) == 0)
						own = c2 + 1;
			}
			if (end != NULL)
				*end = '\n';
			if (c2 != NULL)
				*c2 = ':';
			if (own != NULL)
				break;
			line = end != NULL ? end + 1 : NULL;
		}
		if (own == NULL)
			continue;
		char *nl = strchr(own, '\n');
		int len = nl != NULL ? (int)(nl - own) : (int)strlen(own);

		snprintf(cg_dirs[n_cg], sizeof(cg_dirs[0]), "/sys/fs/cgroup/%s%.*s/ns-floor-%d",
			 ctrls[i], len, strcmp(own, "/") == 0 || own[0] == '\n' ? "" : own,
			 (int)getpid());
		if (mkdir(cg_dirs[n_cg], 0755) != 0)
			continue;
		if (strcmp(ctrls[i], "memory") == 0) {
			snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", cg_dirs[n_cg]);
			write_file(path, "1073741824");
		} else if (strcmp(ctrls[i], "pids") == 0) {
			snprintf(path, sizeof(path), "%s/pids.max", cg_dirs[n_cg]);
			write_file(path, "256");
		}
		snprintf(path, sizeof(path), "%s/cgroup.procs", cg_dirs[n_cg]);
		c->procs[c->n_procs] = open(path, O_WRONLY | O_CLOEXEC);
		must(c->procs[c->n_procs] >= 0, path);
		c->n_procs++;
		n_cg++;
	}
}

/*
 * --cgroup2 join|clone: one cgroup in the cgroup2 hierarchy instead of the
 * v1 ones (/sys/fs/cgroup/unified on a v1 host, else /sys/fs/cgroup), below
 * the caller's own there; "join": the child writes its cgroup.procs as its
 * first step, as with v1; "clone": the child is made in it by clone3() with
 * CLONE_INTO_CGROUP, so nothing migrates (a fork takes the cgroup rwsem for
 * reading; a migration takes it for writing, which may wait for an RCU grace
 * period).
 */
static int cg2_fd = -1;

static void make_cgroup2(struct child *c)
{
	const char *root = access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0
				   ? "/sys/fs/cgroup/unified"
				   : "/sys/fs/cgroup";
	char self[4096] = "", *own, *nl;
	int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, self, sizeof(self) - 1) : -1;

	if (fd >= 0)
		close(fd);
	self[n > 0 ? n : 0] = '\0';
	own = strncmp(self, "0::", 3) == 0 ? self + 3 : strstr(self, "\n0::");
	must(own != NULL, "no cgroup2 line in /proc/self/cgroup");
	if (own != self + 3)
		own += 4;
	nl = strchr(own, '\n');
	if (nl != NULL)
		*nl = '\0';
	snprintf(cg_dirs[0], sizeof(cg_dirs[0]), "%s%s/ns-floor-%d", root,
		 strcmp(own, "/") == 0 ? "" : own, (int)getpid());
	must(mkdir(cg_dirs[0], 0755) == 0, cg_dirs[0]);
	n_cg = 1;
	cg2_fd = open(cg_dirs[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	must(cg2_fd >= 0, cg_dirs[0]);
	snprintf(self, sizeof(self), "%s/cgroup.procs", cg_dirs[0]);
	c->procs[0] = open(self, O_WRONLY | O_CLOEXEC);
	must(c->procs[0] >= 0, self);
	c->n_procs = 1;
}

static void remove_cgroups(struct child *c)
{
	for (int i = 0; i < c->n_procs; i++)
		close(c->procs[i]);
	for (int i = n_cg; i-- > 0;)
		(void)rmdir(cg_dirs[i]);
}

static int child_main(void *data)
{
	struct child *c = data;
	char *argv[] = {c->prog, NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	char b;

	close(c->sync[1]);
	if (c->trace[0] >= 0)
		close(c->trace[0]);
	must(read(c->sync[0], &b, 1) == 1, "sync");
	if (c->all)
		all_child(c, envp);
	if (c->root)
		make_root();
	execve(c->prog, argv, envp);
	perror(c->prog);
	return 127;
}

static void map_ids(pid_t pid)
{
	char path[64], line[64];

	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	snprintf(line, sizeof(line), "0 %d 1", (int)getuid());
	write_file(path, line);
	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
	write_file(path, "deny");
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	snprintf(line, sizeof(line), "0 %d 1", (int)getgid());
	write_file(path, line);
}

int main(int argc, char **argv)
{
	struct child c = {.trace = {-1, -1}};
	int status, rc, trace = 0, cg2 = 0;
	const char *record = NULL;
	pid_t pid;

	c.root = argc > 1 && strcmp(argv[1], "--root") == 0;
	c.all = argc > 1 && strcmp(argv[1], "--all") == 0;
	if (c.all) {
		int i = 2;

		for (;;) {
			if (argc > 2 && strcmp(argv[2], "--exec-trace") == 0) {
				trace = 1;
				argv++;
				argc--;
				must(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
						c.trace) == 0,
				     "socketpair");
			} else if (argc > 3 && strcmp(argv[2], "--record") == 0) {
				record = argv[3];
				argv += 2;
				argc -= 2;
			} else if (argc > 3 && strcmp(argv[2], "--cgroup2") == 0) {
				cg2 = strcmp(argv[3], "clone") == 0 ? 2 : 1;
				argv += 2;
				argc -= 2;
			} else {
				break;
			}
		}

		while (i < argc && strcmp(argv[i], "--") != 0)
			i++;
		if (i + 2 > argc) {
			fputs("usage: ns-floor --all [--exec-trace] [--record FILE] [--cgroup2 join|clone] "
			      "[VIEW...] -- PROGRAM [ARG...]\n",
			      stderr);
			return 2;
		}
		argv[i] = NULL;
		c.view = argv + 2;
		c.argv = argv + i + 1;
		c.prog = argv[i + 1];
		if (cg2)
			make_cgroup2(&c);
		else
			make_cgroups(&c);
	} else if (argc != 2 + c.root) {
		fputs("usage: ns-floor [--root] PROGRAM | ns-floor --all [--exec-trace] [--record FILE] "
		      "[--cgroup2 join|clone] [VIEW...] -- "
		      "PROGRAM\n",
		      stderr);
		return 2;
	} else {
		c.prog = argv[1 + c.root];
	}
	must(pipe2(c.sync, O_CLOEXEC) == 0, "pipe");
	if (cg2 == 2) {
		/* Made in its cgroup: no cgroup.procs write, no migration. */
		struct clone_args ca = {.flags = NS_FLAGS | CLONE_INTO_CGROUP,
					.exit_signal = SIGCHLD,
					.cgroup = (unsigned long long)cg2_fd};

		c.n_procs = 0;
		pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (pid == 0)
			_exit(child_main(&c));
	} else {
		pid = clone(child_main, stack + sizeof(stack), NS_FLAGS | SIGCHLD, &c);
	}
	must(pid > 0, "clone");
	close(c.sync[0]);
	map_ids(pid);
	must(write(c.sync[1], "x", 1) == 1, "sync");
	if (trace) {
		close(c.trace[1]);
		exec_trace_answer(c.trace[0]);
		close(c.trace[0]);
	}
	must(waitpid(pid, &status, 0) == pid, "waitpid");
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (c.all)
		remove_cgroups(&c);
	if (record != NULL)
		append_record(record, c.argv, rc);
	return rc;
}
