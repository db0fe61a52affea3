/*
 * ns-floor.c - the machine's own cost of starting a command in the
 * namespaces a sandbox has, without paddock: the floor under `paddock run`.
 *   ns-floor [--root] PROGRAM
 * Clones a child into new user, pid, mount, network, ipc, uts and cgroup
 * namespaces (the set bwrap and paddock's default profile unshare), maps
 * the caller's uid and gid, and has it exec PROGRAM; waits for it and exits
 * with its status. With --root the child first builds a root of its own
 * as a sandbox does at the least: a tmpfs with /usr bound read-only, the
 * /bin, /lib and /lib64 links, a fresh /proc, and pivot_root into it.
 * No cgroup, seccomp, Landlock or audit: what is left of a sandbox's start
 * when nothing of its own is done. Built and run by bench/startup (no
 * libpaddock).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS_FLAGS                                                                                   \
	(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)

struct child {
	char *prog;
	int root;
	int sync[2];
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

static int child_main(void *data)
{
	struct child *c = data;
	char *argv[] = {c->prog, NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	char b;

	close(c->sync[1]);
	must(read(c->sync[0], &b, 1) == 1, "sync");
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
	struct child c = {0};
	int status;
	pid_t pid;

	c.root = argc > 1 && strcmp(argv[1], "--root") == 0;
	if (argc != 2 + c.root) {
		fputs("usage: ns-floor [--root] PROGRAM\n", stderr);
		return 2;
	}
	c.prog = argv[1 + c.root];
	must(pipe2(c.sync, O_CLOEXEC) == 0, "pipe");
	pid = clone(child_main, stack + sizeof(stack), NS_FLAGS | SIGCHLD, &c);
	must(pid > 0, "clone");
	close(c.sync[0]);
	map_ids(pid);
	must(write(c.sync[1], "x", 1) == 1, "sync");
	must(waitpid(pid, &status, 0) == pid, "waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
