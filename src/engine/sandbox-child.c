/*
 * sandbox-child.c - the child between its spawn and execveat() of the init.
 *
 * It runs in new user, mount, pid, ipc, uts (and net) namespaces, as pid 1
 * of the new pid namespace, with a copy of the parent's memory. It must
 * not return into the caller's code: every path ends in execveat() or
 * _exit(). A failed step records what failed in a struct pdk_child_error
 * on the child's stack (child.h), writes it to the sync socket and exits
 * 125; the parent turns that into the create() error.
 */
#include "common.h"
#include "base.h"
#include "caps.h"
#include "dns.h"
#include "limits.h"
#include "ns.h"
#include "sandbox-internal.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * A step failed: its record (child.h) goes to the parent whole, and the
 * child ends. `rc` is the step's -errno, for a step that did not say why.
 */
PDK_NORETURN static void child_fail(struct pdk_sandbox *sb, struct pdk_child_error *ce, int rc)
{
	if (ce->err == 0)
		(void)pdk_child_error_setx(ce, -rc, "a setup step failed without a message");
	(void)!send(sb->sync[1], ce, sizeof(*ce), MSG_NOSIGNAL); /* parent may be gone */
	_exit(125);
}

/*
 * The caller's dispositions and mask (the CLI blocks the signals it reads
 * by signalfd) must not reach the command: a blocked SIGTERM would make it
 * deaf to the init's forwarding.
 */
static void reset_signals(struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &dfl, NULL); /* EINVAL for SIGKILL/SIGSTOP/RT gaps: fine */
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		child_fail(sb, ce, pdk_child_error_set(ce, errno, "cannot reset the signal mask"));
}

static void setup_namespaces(struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	const char *host = sb->cfg->policy->hostname ? sb->cfg->policy->hostname : "paddock";
	int rc = pdk_ns_write_idmaps_child(sb->uid, sb->gid, sb->in_uid, sb->in_gid, ce);

	if (rc < 0)
		child_fail(sb, ce, rc);
	/* The cgroup namespace is entered after the parent moved us into our cgroup. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		child_fail(sb, ce,
			   pdk_child_error_set(ce, errno, "cannot create cgroup namespace"));
	if (sethostname(host, strlen(host)) < 0)
		child_fail(sb, ce,
			   pdk_child_error_set(ce, errno, "cannot set hostname '%s'", host));
	if ((sb->ns_flags & CLONE_NEWNET) && (rc = pdk_ns_loopback_up_child(ce)) < 0)
		child_fail(sb, ce, rc);
}

/* Hand the parent an fd (SCM_RIGHTS) in a one-byte message `tag`, then close it. */
static void send_fd(struct pdk_sandbox *sb, char tag, int fd, const char *what,
		    struct pdk_child_error *ce)
{
	ssize_t n = pdk_fdpass_send(sb->sync[1], &tag, 1, &fd, 1);

	if (n < 0)
		child_fail(sb, ce, pdk_child_error_set(ce, (int)-n, "cannot pass %s", what));
	(void)close(fd);
}

/*
 * Step 4 (allowlist mode): the proxy's listening socket on 127.0.0.1 in the
 * sandbox's own network namespace, handed to the supervisor. The sandbox
 * keeps no copy: it cannot accept its own connections, and Landlock later
 * denies it any bind.
 */
static void setup_egress(struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(PDK_EGRESS_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd;

	if (sb->cfg->policy->network.mode != PDK_NET_ALLOWLIST)
		return;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		child_fail(sb, ce, pdk_child_error_set(ce, errno, "egress: socket"));
	/*
	 * A backlog of PDK_EGRESS_BACKLOG: a burst of connections (200 at once in
	 * bench/egress) waits while the proxy thread accepts, instead of having
	 * its SYNs dropped and retried a second later.
	 */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, PDK_EGRESS_BACKLOG) < 0)
		child_fail(sb, ce,
			   pdk_child_error_set(ce, errno, "egress: cannot listen on 127.0.0.1:%d",
					       PDK_EGRESS_PORT));
	send_fd(sb, PDK__CHILD_EGRESS_FD, fd, "the egress listening socket", ce);
}

/*
 * Step 4 (own network namespace): the name server's socket on
 * 127.0.0.1:53, handed to the supervisor, which answers every question at
 * once (dns.h). Binding port 53 takes the capabilities the child still
 * has in its user namespace, which owns the network namespace.
 */
static void setup_dns(struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(PDK_DNS_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd;

	if (!(sb->ns_flags & CLONE_NEWNET))
		return;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		child_fail(sb, ce, pdk_child_error_set(ce, errno, "name server: socket"));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		child_fail(sb, ce,
			   pdk_child_error_set(ce, errno, "name server: cannot bind 127.0.0.1:%d",
					       PDK_DNS_PORT));
	send_fd(sb, PDK__CHILD_DNS_FD, fd, "the name server's socket", ce);
}

static void setup_filesystem(struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	int upper_fd = -1;
	int rc = pdk_mount_apply_child(sb->plan, &upper_fd, ce);

	if (rc < 0)
		child_fail(sb, ce, pdk_child_error_wrap(ce, "mount"));
	if (upper_fd >= 0)
		send_fd(sb, PDK__CHILD_UPPER_FD, upper_fd, "the workspace layer", ce);
	if (chdir(sb->cwd) < 0)
		child_fail(sb, ce,
			   pdk_child_error_set(
				   ce, errno,
				   "cannot change to working directory '%s' in the sandbox",
				   sb->cwd));
}

/* Step 5: rlimits, Landlock, capabilities, no_new_privs, seccomp. */
static void setup_confinement(struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	int ruleset = -1;
	int rc;

	rc = pdk_limits_apply_child(&sb->cfg->policy->limits, ce);
	if (rc < 0)
		child_fail(sb, ce, rc);
	rc = pdk_landlock_apply_keep_child(sb->landlock, &ruleset, ce);
	if (rc < 0)
		child_fail(sb, ce, pdk_child_error_wrap(ce, "landlock"));
	/*
	 * SECURITY: a service-mode sandbox's supervisor does the file API's
	 * operations in a helper that enforces this very ruleset on itself
	 * (pdk_sandbox_enter_child()), so it is kept; no process of the
	 * sandbox holds it.
	 */
	if (ruleset >= 0 && sb->cfg->service)
		send_fd(sb, PDK__CHILD_LANDLOCK_FD, ruleset, "the Landlock ruleset", ce);
	else if (ruleset >= 0)
		(void)close(ruleset);
	rc = pdk_caps_drop_all_child(ce);
	if (rc < 0)
		child_fail(sb, ce, rc);
	rc = pdk_caps_no_new_privs_child(ce);
	if (rc < 0)
		child_fail(sb, ce, rc);
	/*
	 * SECURITY: the exec-tracing filter comes before the denylist (which
	 * does not stop seccomp() itself, but needs nothing from this one),
	 * and its listener reaches the parent before anything can exec: the
	 * first traced exec is our own execveat of the init, which a second
	 * parent thread answers while the clone call waits for us (sandbox.c start()).
	 */
	if (sb->exec_trace) {
		rc = pdk_seccomp_apply_notify_child(ce);
		if (rc < 0)
			child_fail(sb, ce, rc);
		send_fd(sb, PDK__CHILD_NOTIFY_FD, rc, "the exec-tracing listener", ce);
	}
	rc = pdk_seccomp_apply_child(sb->seccomp, ce);
	if (rc < 0)
		child_fail(sb, ce, rc);
}

/*
 * SECURITY: if the supervisor dies, the sandbox dies with it. The signal
 * is armed only for a death still to come: a supervisor killed between
 * the clone and the prctl() sends none. The supervisor's end of the sync
 * socket is its own alone (see drop_parent_ends()) and closes when it
 * dies, before the kernel would signal us: a hung-up socket after the
 * prctl() means it is gone already, and we end here.
 */
static void arm_parent_death(struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	struct pollfd pfd = {.fd = sb->sync[1], .events = POLLIN};

	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(sb, ce,
			   pdk_child_error_set(ce, errno, "cannot set parent-death signal"));
	if (poll(&pfd, 1, 0) < 0)
		child_fail(sb, ce, pdk_child_error_set(ce, errno, "cannot poll the sync socket"));
	if (pfd.revents & (POLLHUP | POLLERR))
		child_fail(sb, ce,
			   pdk_child_error_set(ce, EPIPE, "the supervisor died during setup"));
}

/*
 * SECURITY: the child's copies of the supervisor's ends of the sync and
 * control sockets go first. Held here, they would outlive a dead
 * supervisor: our sends (the exec-tracing listener among them) would
 * queue in a socket we hold ourselves, and our execveat of the init would
 * wait forever on a listener no one can read. Without them, the
 * supervisor's death fails our next send, and frees a listener in flight
 * with its queue, which fails the traced execveat (ENOSYS).
 * Our fd table is our own: sb, whose memory we share, is left as it is.
 */
static void drop_parent_ends(struct pdk_sandbox *sb)
{
	(void)close(sb->sync[0]);
	(void)close(sb->ctl[0]);
}

int pdk__sandbox_child(void *arg)
{
	struct pdk_sandbox *sb = arg;
	struct pdk_child_error ce = {0}; /* what failed, for the parent (child.h) */
	int rc;

	drop_parent_ends(sb);
	/*
	 * SECURITY: not one step of setup runs outside the sandbox's cgroup. On
	 * cgroup2 the child was made in it (pdk_proc_clone_into()); else it joins
	 * every hierarchy now.
	 */
	rc = sb->cg_at_clone ? 0 : pdk_cgroup_join_child(sb->cg_procs, sb->n_cg_procs, &ce);
	if (rc < 0)
		child_fail(sb, &ce, rc);
	arm_parent_death(sb, &ce);
	reset_signals(sb, &ce);
	setup_namespaces(sb, &ce);
	setup_filesystem(sb, &ce);
	setup_egress(sb, &ce);
	setup_dns(sb, &ce);
	setup_confinement(sb, &ce);
	/*
	 * SECURITY: no fd the caller of paddock leaked to us may reach the
	 * sandbox. The control channel is the one fd the init inherits
	 * besides stdio; the init fd and the sync socket close on exec.
	 */
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0 || fcntl(sb->ctl[1], F_SETFD, 0) < 0)
		child_fail(sb, &ce, pdk_child_error_set(&ce, errno, "cannot pass control socket"));
	execveat(sb->init_fd, "", sb->init_argv, sb->cfg->envp, AT_EMPTY_PATH);
	child_fail(sb, &ce, pdk_child_error_set(&ce, errno, "cannot execute paddock-init"));
}
