/*
 * build-debian.c - a recipe's `debian:` base: mmdebstrap, run on the host
 * as the user who builds, writes the suite as one tar file that build.c
 * stores as the image's first layer.
 *
 * As root mmdebstrap runs in its `root` mode; otherwise in `unshare` mode,
 * which needs unprivileged user namespaces and the subordinate ids of
 * /etc/subuid (mmdebstrap says so when they are missing). `--skip=output/dev`
 * leaves the device nodes out of the tar: a layer never holds one (the
 * store refuses them), and a sandbox gets its own /dev.
 */
#include "common.h"
#include "base.h"
#include "build-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_MIRROR  "http://deb.debian.org/debian"
#define DEFAULT_VARIANT "apt"

struct spawn_arg {
	const char *path;
	char *const *argv;
	char *const *envp;
	int in;  /* /dev/null */
	int out; /* the pipe's writing end: stdout and stderr */
};

/* In the child (shares our memory until exec, see pdk_proc_clone): no allocation. */
static int debootstrap_child(void *arg)
{
	const struct spawn_arg *a = arg;

	if (dup2(a->in, STDIN_FILENO) < 0 || dup2(a->out, STDOUT_FILENO) < 0 ||
	    dup2(a->out, STDERR_FILENO) < 0)
		_exit(127);
	execve(a->path, a->argv, a->envp);
	(void)!write(STDERR_FILENO, "paddock: cannot execute mmdebstrap\n", 36);
	_exit(127);
}

/* mmdebstrap in the PATH of the environment handed down, else /usr/bin's. New string. */
static char *find_mmdebstrap(char *const *envp)
{
	const char *path = pdk_env_get(envp, "PATH");
	const char *p = path != NULL ? path : "/usr/bin:/bin";

	while (*p) {
		size_t len = strcspn(p, ":");
		char *cand = pdk_xasprintf("%.*s/mmdebstrap", (int)len, p);

		if (len > 0 && p[0] == '/' && access(cand, X_OK) == 0)
			return cand;
		free(cand);
		p += len + (p[len] == ':' ? 1 : 0);
	}
	return NULL;
}

static char **debootstrap_argv(const struct pdk_recipe *r, const char *out)
{
	char **v = NULL;

	pdk_strv_push(&v, "mmdebstrap");
	pdk_strv_push(&v, geteuid() == 0 ? "--mode=root" : "--mode=unshare");
	pdk_strv_push_take(&v, pdk_xasprintf("--variant=%s", r->debian.variant ? r->debian.variant
									       : DEFAULT_VARIANT));
	pdk_strv_push(&v, "--format=tar");
	pdk_strv_push(&v, "--skip=output/dev");
	/* SECURITY: "--" ends the options: the suite and mirror are the recipe's words. */
	pdk_strv_push(&v, "--");
	pdk_strv_push(&v, r->debian.suite);
	pdk_strv_push(&v, out);
	pdk_strv_push(&v, r->debian.mirror ? r->debian.mirror : DEFAULT_MIRROR);
	return v;
}

/* Read the child's output to its end, then its status. */
static int collect(struct pdk__build *b, int rd, int pidfd, struct pdk__build_end *end,
		   struct pdk_error **err)
{
	char buf[4096];
	siginfo_t si = {0};
	ssize_t n;

	while ((n = TEMP_FAILURE_RETRY(read(rd, buf, sizeof(buf)))) > 0)
		pdk__build_output(b, buf, (size_t)n);
	if (TEMP_FAILURE_RETRY(waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED)) < 0)
		return pdk_error_set(err, errno, "cannot wait for mmdebstrap");
	if (si.si_code == CLD_EXITED)
		end->exit_code = si.si_status;
	else
		end->signal = si.si_status;
	return 0;
}

int pdk__build_debootstrap(struct pdk__build *b, const char *out, struct pdk__build_end *end,
			   struct pdk_error **err)
{
	char *const *envp = b->o->settings->envp;
	static char *const empty[] = {NULL};
	_cleanup_free_ char *path = find_mmdebstrap(envp);
	_cleanup_strv_ char **argv = debootstrap_argv(b->o->recipe, out);
	_cleanup_close_ int in = -1;
	_cleanup_close_ int rd = -1;
	_cleanup_close_ int pidfd = -1;
	struct spawn_arg a = {.argv = argv, .envp = envp != NULL ? envp : empty};
	int p[2];
	pid_t pid;

	*end = (struct pdk__build_end){0};
	if (path == NULL)
		return pdk_error_setx(err, ENOENT,
				      "mmdebstrap is not in PATH: a 'debian:' base needs it "
				      "(apt-get install mmdebstrap), or start 'from:' an image");
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || pipe2(p, O_CLOEXEC) < 0)
		return pdk_error_set(err, errno, "cannot start mmdebstrap");
	rd = p[0];
	a.path = path;
	a.in = in;
	a.out = p[1];
	pid = pdk_proc_clone(0, debootstrap_child, &a, &pidfd, err);
	(void)close(p[1]);
	if (pid < 0)
		return pdk_error_wrap(err, "cannot start mmdebstrap '%s'", path);
	return collect(b, rd, pidfd, end, err);
}
