/*
 * sandbox-child.c - the child between its spawn and execveat() of the init.
 *
 * It runs in new user, mount, pid, ipc, uts (and net) namespaces, as pid 1
 * of the new pid namespace, with a copy of the parent's memory. It must
 * not return into the caller's code: every path ends in execveat() or
 * _exit(). A failed step writes a struct pdk__child_error to the sync
 * socket and exits 125; the parent turns that into the create() error.
 */
#include "common.h"
#include "base.h"
#include "caps.h"
#include "limits.h"
#include "ns.h"
#include "sandbox-internal.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

PDK_NORETURN static void child_fail(struct pdk_sandbox *sb, int e, const char *fmt, ...)
	PDK_PRINTF(3, 4);

PDK_NORETURN static void child_fail(struct pdk_sandbox *sb, int e, const char *fmt, ...)
{
	struct pdk__child_error ce;
	va_list ap;

	memset(&ce, 0, sizeof(ce));
	ce.err = e > 0 ? e : EIO;
	va_start(ap, fmt);
	(void)vsnprintf(ce.msg, sizeof(ce.msg), fmt, ap);
	va_end(ap);
	(void)!send(sb->sync[1], &ce, sizeof(ce), MSG_NOSIGNAL); /* parent may be gone */
	_exit(125);
}

static void reset_signals(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &dfl, NULL); /* EINVAL for SIGKILL/SIGSTOP/RT gaps: fine */
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
}

static void setup_namespaces(struct pdk_sandbox *sb)
{
	const char *what = NULL;
	const char *host = sb->cfg->policy->hostname ? sb->cfg->policy->hostname : "paddock";
	int rc = pdk_ns_write_idmaps_child(sb->uid, sb->gid, sb->uid, sb->gid, &what);

	if (rc < 0)
		child_fail(sb, -rc, "cannot write '%s': %s", what, strerror(-rc));
	/* The cgroup namespace is entered after the parent moved us into our cgroup. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		child_fail(sb, errno, "cannot create cgroup namespace: %s", strerror(errno));
	if (sethostname(host, strlen(host)) < 0)
		child_fail(sb, errno, "cannot set hostname '%s': %s", host, strerror(errno));
	if ((sb->ns_flags & CLONE_NEWNET) && (rc = pdk_ns_loopback_up_child()) < 0)
		child_fail(sb, -rc, "cannot bring up loopback: %s", strerror(-rc));
}

/* Hand the parent an fd (SCM_RIGHTS) in a one-byte message `tag`, then close it. */
static void send_fd(struct pdk_sandbox *sb, char tag, int fd, const char *what)
{
	ssize_t n = pdk_fdpass_send(sb->sync[1], &tag, 1, &fd, 1);

	if (n < 0)
		child_fail(sb, (int)-n, "cannot pass %s: %s", what, strerror((int)-n));
	(void)close(fd);
}

/*
 * Step 4 (allowlist mode): the proxy's listening socket on 127.0.0.1 in the
 * sandbox's own network namespace, handed to the supervisor. The sandbox
 * keeps no copy: it cannot accept its own connections, and Landlock later
 * denies it any bind.
 */
static void setup_egress(struct pdk_sandbox *sb)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(PDK_EGRESS_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd;

	if (sb->cfg->policy->network.mode != PDK_NET_ALLOWLIST)
		return;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		child_fail(sb, errno, "egress: socket: %s", strerror(errno));
	/*
	 * A backlog of PDK_EGRESS_BACKLOG: a burst of connections (200 at once in
	 * bench/egress) waits while the proxy thread accepts, instead of having
	 * its SYNs dropped and retried a second later.
	 */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, PDK_EGRESS_BACKLOG) < 0)
		child_fail(sb, errno, "egress: cannot listen on 127.0.0.1:%d: %s", PDK_EGRESS_PORT,
			   strerror(errno));
	send_fd(sb, PDK__CHILD_EGRESS_FD, fd, "the egress listening socket");
}

static void setup_filesystem(struct pdk_sandbox *sb)
{
	char msg[768];
	int upper_fd = -1;
	int rc = pdk_mount_apply_child(sb->plan, &upper_fd, msg, sizeof(msg));

	if (rc < 0)
		child_fail(sb, -rc, "mount: %s", msg);
	if (upper_fd >= 0)
		send_fd(sb, PDK__CHILD_UPPER_FD, upper_fd, "the workspace layer");
	if (chdir(sb->cwd) < 0)
		child_fail(sb, errno, "cannot change to working directory '%s' in the sandbox: %s",
			   sb->cwd, strerror(errno));
}

/* Step 5: rlimits, Landlock, capabilities, no_new_privs, seccomp. */
static void setup_confinement(struct pdk_sandbox *sb)
{
	const char *what = NULL;
	char msg[512];
	int rc;

	rc = pdk_limits_apply_child(&sb->cfg->policy->limits, &what);
	if (rc < 0)
		child_fail(sb, -rc, "cannot set rlimit %s: %s", what, strerror(-rc));
	rc = pdk_landlock_apply_child(sb->landlock, msg, sizeof(msg));
	if (rc < 0)
		child_fail(sb, -rc, "landlock: %s", msg);
	rc = pdk_caps_drop_all_child(&what);
	if (rc < 0)
		child_fail(sb, -rc, "cannot drop capabilities (%s): %s", what, strerror(-rc));
	rc = pdk_caps_no_new_privs_child();
	if (rc < 0)
		child_fail(sb, -rc, "cannot set no_new_privs: %s", strerror(-rc));
	/*
	 * SECURITY: the exec-tracing filter comes before the denylist (which
	 * does not stop seccomp() itself, but needs nothing from this one),
	 * and its listener reaches the parent before anything can exec: the
	 * first traced exec is our own execveat of the init, which a second
	 * parent thread answers while the clone call waits for us (sandbox.c start()).
	 */
	if (sb->exec_trace) {
		rc = pdk_seccomp_apply_notify_child();
		if (rc < 0)
			child_fail(sb, -rc, "cannot load the exec-tracing seccomp filter: %s",
				   strerror(-rc));
		send_fd(sb, PDK__CHILD_NOTIFY_FD, rc, "the exec-tracing listener");
	}
	rc = pdk_seccomp_apply_child(sb->seccomp);
	if (rc < 0)
		child_fail(sb, -rc, "cannot load seccomp filter: %s", strerror(-rc));
}

int pdk__sandbox_child(void *arg)
{
	struct pdk_sandbox *sb = arg;
	int rc;

	/* SECURITY: not one step of setup runs outside the sandbox's cgroup. */
	rc = pdk_cgroup_join_child(sb->cg_procs, sb->n_cg_procs);
	if (rc < 0)
		child_fail(sb, -rc, "cannot join the sandbox cgroup: %s", strerror(-rc));
	/* SECURITY: if the supervisor dies, the sandbox dies with it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(sb, errno, "cannot set parent-death signal: %s", strerror(errno));
	reset_signals();
	setup_namespaces(sb);
	setup_filesystem(sb);
	setup_egress(sb);
	setup_confinement(sb);
	/*
	 * SECURITY: no fd the caller of paddock leaked to us may reach the
	 * sandbox. The control channel is the one fd the init inherits
	 * besides stdio; the init fd and the sync socket close on exec.
	 */
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0 || fcntl(sb->ctl[1], F_SETFD, 0) < 0)
		child_fail(sb, errno, "cannot pass control socket: %s", strerror(errno));
	execveat(sb->init_fd, "", sb->init_argv, sb->cfg->envp, AT_EMPTY_PATH);
	child_fail(sb, errno, "cannot execute paddock-init: %s", strerror(errno));
}
