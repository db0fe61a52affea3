/*
 * sandbox.c - the parent side of a sandbox's life: the setup order, the
 * supervisor loop, and teardown. See sandbox.h for the order of steps.
 */
#include "common.h"
#include "base.h"
#include "dns.h"
#include "init.h"
#include "ns.h"
#include "sandbox-internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

/*
 * The egress proxy (egress.c: libevent) and its CA (egress-ca.c: OpenSSL)
 * are weak references. The front binary, `paddock`, is linked without
 * them (docs/internals/binaries.md), and there they are NULL: every call
 * below is made only for a sandbox whose proxy or CA exists. A policy that
 * needs the proxy is handed to paddock-full before anything is made
 * (pdk_sandbox_has_egress(), session.c); prepare_egress_tls(), the first
 * egress step of a creation, refuses one that comes anyway. paddock-full
 * links them (cli/paddock.c, linked_in[]).
 */
#pragma weak pdk_egress_start
#pragma weak pdk_egress_stop
#pragma weak pdk_egress_fd
#pragma weak pdk_egress_failed
#pragma weak pdk_egress_allows_host
#pragma weak pdk_egress_ca_new
#pragma weak pdk_egress_ca_free
#pragma weak pdk_egress_ca_write_bundle

bool pdk_sandbox_has_egress(void)
{
	return pdk_egress_start != NULL && pdk_egress_ca_new != NULL;
}

/* A scratch directory younger than this may be a live run's not locked yet (reap_run_dirs()). */
#define RUN_DIR_MIN_AGE_S 60

static void kill_tree(struct pdk_sandbox *sb);

/*
 * A failing sink is reported, never silently dropped. Fail closed: a
 * sandbox whose events cannot be recorded (the audit store failed, or its
 * queue is full under the "stop" policy) does not run on.
 */
static void events_failed(struct pdk_sandbox *sb, const struct pdk_error *err)
{
	pdk_log(sb->cfg->log, PDK_LOG_WARN, "%s", err->msg);
	if (sb->pid > 0 && !sb->reaped) {
		pdk_log(sb->cfg->log, PDK_LOG_WARN,
			"events cannot be recorded: stopping the sandbox");
		kill_tree(sb);
	}
}

static void emit(struct pdk_sandbox *sb, const char *kind, uint64_t ts, json_t *attrs)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_events_emit(sb->cfg->events, kind, ts, attrs, &err) < 0)
		events_failed(sb, err);
}

void pdk__sandbox_on_egress(struct pdk_sandbox *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_egress_failed(sb->egress, &err) < 0)
		events_failed(sb, err);
}

/*
 * Why a name the sandbox looked up has no address, for the summary. In
 * allowlist mode a name the rules allow is not recorded: its program
 * bypassed the proxy, and --allow would not help it.
 */
static const char *dns_refusal(struct pdk_sandbox *sb, const char *name)
{
	if (sb->cfg->policy->network.mode != PDK_NET_ALLOWLIST)
		return "name lookup, network.mode none";
	/* The proxy's rules: the policy's and those added while it runs. */
	if (sb->egress != NULL && (pdk_egress_allows_host(sb->egress, name, 443) ||
				   pdk_egress_allows_host(sb->egress, name, 80)))
		return NULL;
	return "name lookup, no network.allow entry";
}

void pdk__sandbox_on_dns(struct pdk_sandbox *sb)
{
	uint8_t q[PDK_DNS_MAX], a[PDK_DNS_MAX];
	char name[PDK_DNS_NAME_MAX];

	/* A bounded batch: a sandbox that floods its name server does not starve the loop. */
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage from;
		socklen_t len = sizeof(from);
		ssize_t n = recvfrom(sb->dns_fd, q, sizeof(q), MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &len);
		ssize_t m;
		const char *why;

		if (n < 0)
			return; /* EAGAIN: all answered; another error: the next wake-up tries again
				 */
		m = pdk_dns_answer(q, (size_t)n, a, name);
		if (m < 0)
			continue;
		(void)sendto(sb->dns_fd, a, (size_t)m, MSG_DONTWAIT, (struct sockaddr *)&from,
			     len); /* a lost answer is the resolver's to retry */
		why = name[0] ? dns_refusal(sb, name) : NULL;
		if (why != NULL)
			pdk_net_denials_add(sb->denials, name, 0, why);
	}
}

/* pdk_exectrace_emit_cb */
static void trace_emit(void *data, const char *kind, uint64_t ts, json_t *attrs)
{
	emit(data, kind, ts, attrs);
}

/*
 * Exec tracing runs when the policy asks for it and someone listens (an
 * event hub). A kernel without seccomp user notification fails creation
 * unless the policy marks exec_trace best effort.
 */
static int plan_exec_trace(struct pdk_sandbox *sb, struct pdk_error **err)
{
	const struct pdk_policy *p = sb->cfg->policy;

	if (!p->audit.exec_trace || sb->cfg->events == NULL)
		return 0;
	if (pdk_seccomp_notify_supported()) {
		sb->exec_trace = true;
		return 0;
	}
	if (!(p->best_effort & PDK_BE_EXEC_TRACE))
		return pdk_error_setx(
			err, ENOSYS,
			"exec tracing: the kernel has no seccomp user notification (turn tracing off with --no-exec-trace or 'audit: {exec_trace: false}', or list exec_trace under best_effort)");
	sb->downgraded |= PDK_BE_EXEC_TRACE;
	pdk_log(sb->cfg->log, PDK_LOG_NOTICE,
		"exec tracing not applied (best effort): the kernel has no seccomp user "
		"notification");
	return 0;
}

/* What a sandbox built without settings uses: every default. */
static const struct pdk_settings no_settings;

static int open_init(struct pdk_sandbox *sb, struct pdk_error **err)
{
	const char *path = sb->cfg->init_path
				   ? sb->cfg->init_path
				   : (sb->cfg->settings ? sb->cfg->settings->init_path : NULL);
	_cleanup_free_ char *guess = NULL;

	if (path == NULL)
		path = guess = pdk_paths_helper("paddock-init");
	sb->init_fd = TEMP_FAILURE_RETRY(open(path, O_PATH | O_CLOEXEC));
	if (sb->init_fd < 0)
		return pdk_error_set(
			err, errno,
			"cannot open the sandbox init '%s' (set PADDOCK_INIT to its path)", path);
	return 0;
}

/* Limits whose bit is not marked best-effort must be applied or creation fails. */
static unsigned required_cgroup_ctrls(const struct pdk_policy *p)
{
	unsigned req = 0;

	if (p->limits.memory && !(p->best_effort & PDK_BE_MEMORY))
		req |= PDK_CGROUP_MEMORY;
	if (p->limits.pids && !(p->best_effort & PDK_BE_PIDS))
		req |= PDK_CGROUP_PIDS;
	if (p->limits.cpu_milli && !(p->best_effort & PDK_BE_CPU))
		req |= PDK_CGROUP_CPU;
	return req;
}

static unsigned ctrls_to_be(unsigned ctrls)
{
	return ((ctrls & PDK_CGROUP_MEMORY) ? PDK_BE_MEMORY : 0) |
	       ((ctrls & PDK_CGROUP_PIDS) ? PDK_BE_PIDS : 0) |
	       ((ctrls & PDK_CGROUP_CPU) ? PDK_BE_CPU : 0);
}

/*
 * One notice for every cgroup limit left out (best effort), naming the fix: a
 * rootless run without a delegated cgroup is the usual cause, and two lines
 * that only said "not applied" left the user with nothing to do about them.
 */
static void report_cgroup_downgrade(const struct pdk_sandbox *sb, unsigned down)
{
	static const struct {
		unsigned ctrl;
		const char *name;
	} names[] = {
		{PDK_CGROUP_MEMORY, "memory"},
		{PDK_CGROUP_PIDS, "pids"},
		{PDK_CGROUP_CPU, "cpu"},
	};
	const char *which[PDK_ARRAY_SIZE(names)] = {0};
	size_t n = 0;
	char list[64];

	for (size_t i = 0; i < PDK_ARRAY_SIZE(names); i++)
		if (down & names[i].ctrl)
			which[n++] = names[i].name;
	if (n == 1)
		(void)snprintf(list, sizeof(list), "%s limit", which[0]);
	else if (n == 2)
		(void)snprintf(list, sizeof(list), "%s and %s limits", which[0], which[1]);
	else
		(void)snprintf(list, sizeof(list), "%s, %s and %s limits", which[0], which[1],
			       which[2]);
	/* A cgroup was made, without the controllers: another cause, another fix. */
	if (pdk_cgroup_path(sb->cgroup) != NULL) {
		pdk_log(sb->cfg->log, PDK_LOG_NOTICE,
			"%s not applied (best effort): the sandbox's cgroup '%s' has no controller "
			"for %s; to apply %s, enable the controllers in the cgroup.subtree_control "
			"of the cgroups above it (v2), or point PADDOCK_CGROUP_ROOT at a cgroup mount "
			"that has them (docs/rootless.md)",
			list, pdk_cgroup_path(sb->cgroup), n == 1 ? "it" : "them",
			n == 1 ? "it" : "them");
		return;
	}
	pdk_log(sb->cfg->log, PDK_LOG_NOTICE,
		"%s not applied (best effort): no usable cgroup; to apply %s, give paddock a "
		"delegated cgroup with PADDOCK_CGROUP_PARENT (docs/rootless.md: one command with "
		"systemd-run --user -p Delegate=yes on cgroup v2, a mkdir and chown by root on v1)",
		list, n == 1 ? "it" : "them");
}

/*
 * The sandbox's cgroup made, its limits written and the cgroup.procs of each
 * hierarchy opened for the child to join. It runs on a thread of its own
 * (cgroup_begin()), so it writes only sb->cgroup and sb->cg_procs, which no
 * other creation step reads; the controllers left out are returned in *down.
 */
static int make_cgroup(struct pdk_sandbox *sb, unsigned *down, struct pdk_error **err)
{
	const struct pdk_policy *p = sb->cfg->policy;
	struct pdk_cgroup_limits lim = {
		.memory = p->limits.memory,
		.pids = p->limits.pids,
		.cpu_milli = p->limits.cpu_milli,
	};
	struct pdk_cgroup_opts opts =
		sb->cfg->cgroup_opts ? *sb->cfg->cgroup_opts : (struct pdk_cgroup_opts){0};
	char name[13];
	int rc;

	if (opts.parent == NULL && sb->cfg->settings != NULL) {
		opts.parent = sb->cfg->settings->cgroup_parent;
		opts.parent_from = "$PADDOCK_CGROUP_PARENT";
	}
	if (opts.root == NULL && sb->cfg->settings != NULL)
		opts.root = sb->cfg->settings->cgroup_root;
	if (opts.mountinfo == NULL)
		opts.mountinfo = sb->cfg->mountinfo;
	memcpy(name, sb->id + 24, 12); /* the random tail of the id */
	name[12] = '\0';
	sb->cgroup = pdk_cgroup_new(name, &opts, &lim, required_cgroup_ctrls(p), down, err);
	if (sb->cgroup == NULL)
		return pdk_error_wrap(err, "cgroup");
	pdk__sandbox_record_cgroup(sb); /* before anything can be killed in it */
	rc = pdk_cgroup_open_procs(sb->cgroup, sb->cg_procs, PDK_ARRAY_SIZE(sb->cg_procs), err);
	if (rc < 0)
		return pdk_error_wrap(err, "cgroup");
	sb->n_cg_procs = (size_t)rc;
	sb->cg_dir_fd = pdk_cgroup_open_dir(sb->cgroup);
	return 0;
}

/*
 * make_cgroup() beside the other creation steps. On cgroup v1 it is four
 * mkdir()s in four hierarchies, the limits, four opens: about a tenth of a
 * start's CPU, and none of it depends on what the other steps make (the
 * init's descriptor, the filesystem view, seccomp, the sockets), nor they on
 * it. So a thread makes it while this one makes them, and cgroup_end()
 * joins it before the child is cloned: the supervisor is single-threaded
 * again before anything forks (docs/internals/performance.md).
 */
struct cgroup_maker {
	struct pdk_sandbox *sb;
	pthread_t thread;
	bool threaded;
	unsigned down;
	struct pdk_error *err;
	int rc;
};

static void *cgroup_maker_main(void *arg)
{
	struct cgroup_maker *m = arg;

	m->rc = make_cgroup(m->sb, &m->down, &m->err);
	return NULL;
}

static void cgroup_begin(struct cgroup_maker *m, struct pdk_sandbox *sb)
{
	pthread_attr_t attr;

	*m = (struct cgroup_maker){.sb = sb};
	if (pthread_attr_init(&attr) != 0)
		return;
	(void)pthread_attr_setstacksize(&attr, 256 * 1024);
	m->threaded = pthread_create(&m->thread, &attr, cgroup_maker_main, m) == 0;
	(void)pthread_attr_destroy(&attr);
}

/* The cgroup made (here when no thread could start), its outcome taken. */
static int cgroup_end(struct cgroup_maker *m, struct pdk_error **err)
{
	struct pdk_sandbox *sb = m->sb;

	if (m->threaded)
		(void)pthread_join(m->thread, NULL); /* cannot fail: joinable, not us */
	else
		m->rc = make_cgroup(sb, &m->down, &m->err);
	if (m->rc < 0) {
		*err = steal_ptr(&m->err);
		return m->rc;
	}
	sb->downgraded |= ctrls_to_be(m->down);
	if (m->down != 0)
		report_cgroup_downgrade(sb, m->down);
	return 0;
}

/*
 * The caller's user name, for the sandbox's /etc/passwd. Read straight from
 * /etc/passwd: getpwuid() would load NSS modules on every start, and a
 * directory service's name is not worth a network round trip here.
 */
static char *user_name(uid_t uid)
{
	_cleanup_fclose_ FILE *f = fopen("/etc/passwd", "re");
	struct passwd *pw;

	while (f != NULL && (pw = fgetpwent(f)) != NULL) {
		if (pw->pw_uid == uid && pw->pw_name[0] != '\0')
			return pdk_xstrdup(pw->pw_name);
	}
	return pdk_xstrdup(uid == 0 ? "root" : "user");
}

static int make_confinement(struct pdk_sandbox *sb, struct pdk_error **err)
{
	const struct pdk_sandbox_config *cfg = sb->cfg;
	const struct pdk_policy *p = cfg->policy;
	bool ll_required = !(p->best_effort & PDK_BE_LANDLOCK);
	_cleanup_free_ char *name = user_name(sb->in_uid);
	struct pdk_mount_spec spec = {
		.policy = p,
		.workspace = cfg->workspace,
		.ws_view = cfg->ws_view,
		.ws_mode = cfg->ws_mode,
		.ws_disk = p->limits.disk,
		.extra_ro = cfg->extra_ro,
		.extra_rw = cfg->extra_rw,
		.ro_files = sb->ro_files,
		.private_dirs = cfg->private_dirs,
		.uid = sb->in_uid,
		.gid = sb->in_gid,
		.user_name = name,
		.hostname = p->hostname ? p->hostname : "paddock",
		.own_net = (sb->ns_flags & CLONE_NEWNET) != 0,
		.root_layers = cfg->image_layers,
		.root_size = cfg->image_root_size,
		.root_rw_dir = cfg->image_rw_dir,
	};

	if (cfg->ws_mode == PDK_WS_OVERLAY && cfg->workspace != NULL) {
		if (cfg->ws == NULL)
			return pdk_error_setx(err, EINVAL,
					      "workspace: overlay mode needs a change set");
		sb->ws_lowers = pdk_ws_lower_paths(cfg->ws);
		spec.ws_lowers = sb->ws_lowers;
		spec.ws_upper = pdk_ws_upper_path(cfg->ws);
		spec.ws_work = pdk_ws_work_path(cfg->ws);
		spec.ws_disk = pdk_ws_disk_limit(cfg->ws);
		spec.ws_volatile = p->workspace.sync == PDK_WS_SYNC_END;
	}
	sb->landlock = pdk_landlock_prepare(ll_required, err);
	if (sb->landlock == NULL)
		return pdk_error_wrap(err, "landlock");
	if (pdk_landlock_get_abi(sb->landlock) == 0) {
		sb->downgraded |= PDK_BE_LANDLOCK;
		pdk_log(cfg->log, PDK_LOG_NOTICE,
			"landlock not applied (best effort): the kernel has no Landlock");
	}
	pdk_landlock_add_exec_fd(sb->landlock, sb->init_fd);
	/*
	 * SECURITY: TCP is confined by the network namespace, not by Landlock.
	 * In modes none and allowlist the sandbox has a namespace of its own
	 * with only lo and no route, so nothing it binds or connects to is
	 * outside it, and the egress proxy's socket (allowlist) is the one
	 * door. Landlock's network rules name ports, never addresses: handling
	 * TCP could not tell the sandbox's loopback from the host's, it could
	 * only deny the sandbox the servers it starts itself. In mode host the
	 * sandbox shares the host's network on purpose. A sandbox without a
	 * namespace of its own in any other mode keeps TCP denied.
	 */
	if ((sb->ns_flags & CLONE_NEWNET) || p->network.mode == PDK_NET_HOST)
		pdk_landlock_allow_tcp(sb->landlock);
	sb->plan = pdk_mount_plan_new(&spec, sb->landlock, err);
	if (sb->plan == NULL)
		return pdk_error_wrap(err, "filesystem view");
	sb->seccomp = pdk_seccomp_prepare(p->allow_ptrace ? PDK_SECCOMP_ALLOW_PTRACE : 0, err);
	if (sb->seccomp == NULL)
		return pdk_error_wrap(err, "seccomp");
	/* Prepared now: the helper that takes it on is forked from a threaded process. */
	if (sb->cfg->service) {
		sb->seccomp_files = pdk_seccomp_prepare(
			(p->allow_ptrace ? PDK_SECCOMP_ALLOW_PTRACE : 0) | PDK_SECCOMP_FILE_HELPER,
			err);
		if (sb->seccomp_files == NULL)
			return pdk_error_wrap(err, "seccomp");
	}
	return plan_exec_trace(sb, err);
}

static int make_sockets(struct pdk_sandbox *sb, struct pdk_error **err)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sb->sync) < 0)
		return pdk_error_set(err, errno, "socketpair");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sb->ctl) < 0)
		return pdk_error_set(err, errno, "socketpair");
	sb->init_argv = NULL;
	pdk_strv_push(&sb->init_argv, "paddock-init");
	pdk_strv_push_take(&sb->init_argv, pdk_xasprintf("%d", sb->ctl[1]));
	if (sb->cfg->service) {
		pdk_strv_push(&sb->init_argv, "--service");
		return 0;
	}
	pdk_strv_push(&sb->init_argv, "--");
	for (size_t i = 0; sb->cfg->argv[i] != NULL; i++)
		pdk_strv_push(&sb->init_argv, sb->cfg->argv[i]);
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
	*fd = -1;
}

/* What the child needed to be in its cgroup (cgroup.procs, the v2 directory): done with. */
static void close_cgroup_fds(struct pdk_sandbox *sb)
{
	for (size_t i = 0; i < sb->n_cg_procs; i++)
		close_fd(&sb->cg_procs[i]);
	sb->n_cg_procs = 0;
	close_fd(&sb->cg_dir_fd);
}

/* One message from the child; an fd it passes lands in *fd. Bytes, or -errno. */
static ssize_t recv_child(struct pdk_sandbox *sb, struct pdk_child_error *ce, int *fd)
{
	size_t nfds = 1;
	ssize_t n = pdk_fdpass_recv(sb->sync[0], ce, sizeof(*ce), fd, &nfds, 0);

	if (nfds == 0)
		*fd = -1;
	return n;
}

/*
 * Wait until the sync socket has something. With exec tracing, answer the
 * one notification the child causes meanwhile: its execveat of the init.
 * Any later one is the command's, for the supervisor loop to record.
 */
static int wait_sync(struct pdk_sandbox *sb, bool *answered, struct pdk_error **err)
{
	struct pollfd pfd[2] = {{.fd = sb->sync[0], .events = POLLIN}};

	while (sb->tracer != NULL && !*answered) {
		pfd[1] = (struct pollfd){.fd = pdk_exectrace_fd(sb->tracer), .events = POLLIN};
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			return pdk_error_set(err, errno, "poll");
		if (pfd[0].revents)
			return 0;
		if (pfd[1].revents & POLLIN) {
			if (pdk_exectrace_handle(sb->tracer, err) < 0)
				return -1;
			*answered = true;
		}
	}
	return 0;
}

/* A message carrying an fd: keep it where it belongs. */
static int take_child_fd(struct pdk_sandbox *sb, char tag, int fd, struct pdk_error **err)
{
	if (fd < 0)
		return pdk_error_setx(err, EPROTO, "the sandbox child sent no fd");
	if (tag == PDK__CHILD_UPPER_FD || tag == PDK__CHILD_EGRESS_FD ||
	    tag == PDK__CHILD_LANDLOCK_FD || tag == PDK__CHILD_DNS_FD) {
		int *slot = tag == PDK__CHILD_UPPER_FD      ? &sb->upper_fd
			    : tag == PDK__CHILD_EGRESS_FD   ? &sb->egress_fd
			    : tag == PDK__CHILD_LANDLOCK_FD ? &sb->landlock_fd
							    : &sb->dns_fd;

		close_fd(slot);
		*slot = fd;
		return 0;
	}
	if (sb->tracer != NULL || !sb->exec_trace) {
		(void)close(fd);
		return pdk_error_setx(err, EPROTO, "unexpected exec-tracing listener");
	}
	sb->tracer = pdk_exectrace_new(fd, trace_emit, sb, err);
	return sb->tracer != NULL ? 0 : pdk_error_wrap(err, "exec tracing");
}

/* Read the child's verdict: EOF means it exec'd the init. */
static int await_child(struct pdk_sandbox *sb, struct pdk_error **err)
{
	struct pdk_child_error ce;
	bool answered = false;
	ssize_t n;
	int fd = -1;

	for (;;) {
		if (wait_sync(sb, &answered, err) < 0)
			return -1;
		n = recv_child(sb, &ce, &fd);
		if (n != 1)
			break;
		if (strchr((char[]){PDK__CHILD_UPPER_FD, PDK__CHILD_NOTIFY_FD, PDK__CHILD_EGRESS_FD,
				    PDK__CHILD_LANDLOCK_FD, PDK__CHILD_DNS_FD, '\0'},
			   ((char *)&ce)[0]) == NULL)
			break;
		if (take_child_fd(sb, ((char *)&ce)[0], fd, err) < 0)
			return -1;
	}
	if (fd >= 0)
		(void)close(fd);
	if (n == 0)
		return 0;
	if (n < 0)
		return pdk_error_set(err, (int)-n, "cannot read from the sandbox child");
	if (n != (ssize_t)sizeof(ce))
		return pdk_error_setx(err, EPROTO, "short message from the sandbox child");
	ce.msg[sizeof(ce.msg) - 1] = '\0';
	return pdk_error_setx(err, ce.err, "sandbox setup failed: %s", ce.msg);
}

/* await_child() on a thread of its own (exec tracing: see start()). */
struct child_waiter {
	struct pdk_sandbox *sb;
	struct pdk_error *err;
	int rc;
};

static void *child_waiter_main(void *arg)
{
	struct child_waiter *w = arg;

	w->rc = await_child(w->sb, &w->err);
	return NULL;
}

static int start(struct pdk_sandbox *sb, struct pdk_error **err)
{
	struct child_waiter w = {.sb = sb};
	pthread_t waiter;
	int rc;

	/*
	 * With exec tracing, the child's execveat of the init waits for our
	 * answer, but the clone call with CLONE_VFORK returns only after that exec.
	 * CLONE_VFORK suspends the calling thread only, so a second thread
	 * reads the sync socket meanwhile and answers that one exec. It is
	 * joined before anything else happens: the supervisor stays
	 * single-threaded. The child only reads our memory; the waiter writes
	 * sb->upper_fd and sb->tracer, which the child never reads.
	 */
	if (sb->exec_trace && (rc = pthread_create(&waiter, NULL, child_waiter_main, &w)) != 0)
		return pdk_error_set(err, rc, "exec tracing: cannot start the setup thread");
	/*
	 * Returns once the child has exec'd the init or failed (CLONE_VFORK). On
	 * cgroup2 the child is made in its cgroup: no migration, which would wait
	 * for an RCU grace period (pdk_proc_clone_into()).
	 */
	if (sb->cg_dir_fd >= 0)
		sb->pid = pdk_proc_clone_into(sb->ns_flags, sb->cg_dir_fd, &sb->cg_at_clone,
					      pdk__sandbox_child, sb, &sb->pidfd, err);
	else
		sb->pid = pdk_proc_clone(sb->ns_flags, pdk__sandbox_child, sb, &sb->pidfd, err);
	close_cgroup_fds(sb);
	/* Our end closed, the child's gone (exec or exit): the waiter sees EOF or an error. */
	close_fd(&sb->sync[1]);
	close_fd(&sb->ctl[1]);
	if (sb->exec_trace) {
		(void)pthread_join(waiter, NULL); /* cannot fail: joinable, not us */
		rc = w.rc;
		if (rc < 0 && sb->pid >= 0)
			*err = steal_ptr(&w.err);
		pdk_error_free(&w.err);
	} else if (sb->pid >= 0) {
		rc = await_child(sb, err);
	}
	close_fd(&sb->sync[0]);
	close_fd(&sb->init_fd);
	return sb->pid < 0 ? sb->pid : rc;
}

/*
 * The scratch directories of runs that are gone: RUNTIME/run-* that no one
 * holds the lock of (a run holds its own from its creation to its end; a
 * killed one's goes with the process) and that is older than a minute (a run
 * locks its directory a few system calls after making it: a younger one may
 * be in between), removed. Best effort: what is left holds only public
 * certificates.
 */
static void reap_run_dirs(const char *runtime_dir, const char *own)
{
	_cleanup_close_ int dfd = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	time_t old = time(NULL) - RUN_DIR_MIN_AGE_S;
	struct dirent *e;

	if (d == NULL)
		return;
	dfd = -1; /* the stream's now */
	while ((e = readdir(d)) != NULL) {
		_cleanup_close_ int fd = -1;
		struct stat st;

		if (strncmp(e->d_name, "run-", 4) != 0 || strcmp(e->d_name, own) == 0)
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() || st.st_mtime > old ||
		    flock(fd, LOCK_EX | LOCK_NB) < 0)
			continue;
		(void)!pdk_rm_rf_at(dirfd(d), e->d_name);
	}
	closedir(d);
}

/*
 * The per-run scratch directory: RUNTIME/run-XXXXXX (base/paths.h; mkdtemp:
 * mode 0700, a name no one else chose), locked (flock) for as long as this
 * process lives, so that a run killed with SIGKILL leaves a directory the
 * next run that makes one can tell from a live run's and remove.
 */
static int make_run_dir(struct pdk_sandbox *sb, struct pdk_error **err)
{
	_cleanup_free_ char *tmpl = NULL;

	if (sb->cfg->runtime_dir == NULL)
		return pdk_error_setx(err, EINVAL, "no runtime directory for the scratch files");
	if (pdk_paths_private_dir(sb->cfg->runtime_dir, err) < 0)
		return -1;
	tmpl = pdk_xasprintf("%s/run-XXXXXX", sb->cfg->runtime_dir);
	if (mkdtemp(tmpl) == NULL)
		return pdk_error_set(err, errno, "cannot create a scratch directory '%s'", tmpl);
	sb->run_dir = steal_ptr(&tmpl);
	sb->run_dir_fd = open(sb->run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sb->run_dir_fd < 0 || flock(sb->run_dir_fd, LOCK_EX | LOCK_NB) < 0)
		return pdk_error_set(err, errno, "cannot lock the scratch directory '%s'",
				     sb->run_dir);
	reap_run_dirs(sb->cfg->runtime_dir, strrchr(sb->run_dir, '/') + 1);
	return 0;
}

/*
 * HTTPS credential injection (docs/egress.md): a policy with a credential
 * rule gets a CA of its own, whose certificate is added to a copy of the
 * host's trust bundle, bound read-only over the system bundle inside.
 * SECURITY: the CA's key stays in this process's memory (egress-ca.c).
 */
static int prepare_egress_tls(struct pdk_sandbox *sb, struct pdk_error **err)
{
	const struct pdk_policy *p = sb->cfg->policy;
	_cleanup_free_ char *bundle = NULL;

	if (p->network.mode != PDK_NET_ALLOWLIST)
		return 0;
	/* The first egress step of a creation (create_steps[]): fail closed here, before any call.
	 */
	if (!pdk_sandbox_has_egress())
		return pdk_error_setx(
			err, ENOSYS,
			"egress: this paddock binary is linked without the egress proxy "
			"(network.mode allowlist runs in paddock-full)");
	if (!pdk_egress_tls_wanted(p->network.credentials))
		return 0;
	sb->egress_ca = pdk_egress_ca_new(sb->id, err);
	if (sb->egress_ca == NULL || make_run_dir(sb, err) < 0)
		return pdk_error_wrap(err, "egress");
	bundle = pdk_xasprintf("%s/ca-bundle.crt", sb->run_dir);
	if (pdk_egress_ca_write_bundle(sb->egress_ca, bundle, NULL, err) < 0)
		return pdk_error_wrap(err, "egress: the sandbox's trust bundle");
	pdk_strv_push_take(&sb->ro_files, steal_ptr(&bundle));
	pdk_strv_push(&sb->ro_files, PDK_EGRESS_TLS_BUNDLE);
	return 0;
}

static void remove_run_dir(struct pdk_sandbox *sb)
{
	if (sb->run_dir == NULL)
		return;
	/* Best effort: a leftover holds only public certificates. */
	(void)!pdk_rm_rf_at(AT_FDCWD, sb->run_dir);
	close_fd(&sb->run_dir_fd); /* the lock, once the directory is gone */
	free(sb->run_dir);
	sb->run_dir = NULL;
}

/* Allowlist mode: parse the rules and start the proxy on the child's listening socket. */
static int start_egress(struct pdk_sandbox *sb, struct pdk_error **err)
{
	const struct pdk_policy *p = sb->cfg->policy;
	const struct pdk_settings *st = sb->cfg->settings ? sb->cfg->settings : &no_settings;
	struct pdk_egress_config ec = {
		.resolv_conf = st->resolv_conf,
		.hosts = st->hosts,
		.ca_file = st->egress_ca_file,
		.secrets_env = st->envp,
		.hold_total = pdk_env_get(st->envp, "PADDOCK_TEST_EGRESS_HOLD_TOTAL"),
		.max_bytes = p->limits.egress_bytes,
		.max_requests = p->limits.egress_requests,
		.max_connections = p->limits.egress_connections,
		.events = sb->cfg->events,
		.credentials = p->network.credentials,
		.sandbox_id = sb->id,
		.ca = sb->egress_ca,
		.denials = sb->denials,
	};
	size_t n = pdk_strv_len(p->network.allow);

	if (p->network.mode != PDK_NET_ALLOWLIST)
		return 0;
	if (sb->egress_fd < 0)
		return pdk_error_setx(err, EPROTO,
				      "egress: the sandbox passed no listening socket");
	sb->egress_rules = pdk_xcalloc(n + 1, sizeof(*sb->egress_rules));
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *why = NULL;

		if (pdk_net_rule_parse(p->network.allow[i], &sb->egress_rules[i], &why) < 0)
			return pdk_error_setx(err, EINVAL, "network.allow: '%s': %s",
					      p->network.allow[i], why);
		sb->n_egress_rules++;
	}
	ec.rules = sb->egress_rules;
	ec.n_rules = sb->n_egress_rules;
	sb->egress = pdk_egress_start(&ec, steal_fd(&sb->egress_fd), err);
	return sb->egress != NULL ? 0 : -1;
}

static json_t *create_attrs(struct pdk_sandbox *sb)
{
	const struct pdk_policy *p = sb->cfg->policy;
	json_t *a = json_object();
	json_t *down = json_array();

	pdk_json_set(a, "profile", json_string(p->name ? p->name : ""));
	pdk_json_set(a, "profile_source", json_string(p->source ? p->source : ""));
	if (sb->cfg->workspace != NULL)
		pdk_ws_json_set_path(a, "workspace", sb->cfg->workspace);
	else
		pdk_json_set(a, "workspace", json_null());
	pdk_json_set(a, "workspace_mode", json_string(pdk_policy_ws_mode_name(sb->cfg->ws_mode)));
	if (sb->cfg->ws != NULL && sb->ws_lowers != NULL)
		pdk_json_set(a, "change_set", json_string(pdk_ws_id(sb->cfg->ws)));
	pdk_json_set(a, "network", json_string(pdk_policy_net_mode_name(p->network.mode)));
	if (sb->cfg->image_layers != NULL) {
		pdk_json_set(a, "image", json_string(sb->cfg->image ? sb->cfg->image : ""));
		pdk_json_set(a, "image_digest",
			     json_string(sb->cfg->image_digest ? sb->cfg->image_digest : ""));
	}
	if (p->network.mode == PDK_NET_ALLOWLIST)
		pdk_json_set(a, "network.allow", pdk_json_strv(p->network.allow));
	pdk_json_set(a, "uid", json_integer(sb->uid));
	if (sb->in_uid != sb->uid)
		pdk_json_set(a, "uid_inside", json_integer(sb->in_uid));
	pdk_json_set(a, "cgroup",
		     pdk_cgroup_path(sb->cgroup) ? json_string(pdk_cgroup_path(sb->cgroup))
						 : json_null());
	pdk_json_set(a, "landlock_abi", json_integer(pdk_landlock_get_abi(sb->landlock)));
	pdk_json_set(a, "limits.memory", json_integer((json_int_t)p->limits.memory));
	pdk_json_set(a, "limits.pids", json_integer((json_int_t)p->limits.pids));
	pdk_json_set(a, "limits.cpu_milli", json_integer(p->limits.cpu_milli));
	pdk_json_set(a, "limits.wall_ms", json_integer((json_int_t)p->limits.wall_ms));
	if (sb->downgraded & PDK_BE_MEMORY)
		json_array_append_new(down, json_string("memory"));
	if (sb->downgraded & PDK_BE_PIDS)
		json_array_append_new(down, json_string("pids"));
	if (sb->downgraded & PDK_BE_CPU)
		json_array_append_new(down, json_string("cpu"));
	if (sb->downgraded & PDK_BE_LANDLOCK)
		json_array_append_new(down, json_string("landlock"));
	if (sb->downgraded & PDK_BE_EXEC_TRACE)
		json_array_append_new(down, json_string("exec_trace"));
	pdk_json_set(a, "exec_trace", json_boolean(sb->tracer != NULL));
	pdk_json_set(a, "downgraded", down);
	pdk_json_set(a, "setup_ms", json_real((double)(sb->t_exec_ns - sb->t_create_ns) / 1e6));
	return a;
}

static struct pdk_sandbox *sandbox_alloc(const struct pdk_sandbox_config *cfg)
{
	struct pdk_sandbox *sb = pdk_xcalloc(1, sizeof(*sb));
	const char *ws = cfg->ws_mode == PDK_WS_NONE ? NULL
			 : cfg->ws_view != NULL      ? cfg->ws_view
						     : cfg->workspace;

	sb->t_create_ns = pdk_now_mono_ns();
	if (cfg->id != NULL && strlen(cfg->id) == 36)
		memcpy(sb->id, cfg->id, 37);
	else
		pdk_make_id(sb->id);
	sb->cfg = cfg;
	sb->uid = geteuid();
	sb->gid = getegid();
	sb->in_uid = cfg->user_set ? cfg->uid : sb->uid;
	sb->in_gid = cfg->user_set ? cfg->gid : sb->gid;
	sb->init_fd = sb->pidfd = sb->upper_fd = sb->egress_fd = sb->landlock_fd = sb->dns_fd = -1;
	sb->run_dir_fd = sb->cg_dir_fd = -1;
	sb->cg_record_fd = -1;
	sb->cg_record_slot = -1;
	sb->denials = pdk_net_denials_new();
	sb->sync[0] = sb->sync[1] = sb->ctl[0] = sb->ctl[1] = -1;
	sb->cmd_pid = -1;
	sb->cwd = pdk_xstrdup(cfg->cwd ? cfg->cwd : ws ? ws : "/");
	sb->ns_flags = PDK_NS_FLAGS;
	/* SECURITY: only host mode shares the host's network; allowlist goes through the proxy. */
	if (cfg->policy->network.mode != PDK_NET_HOST)
		sb->ns_flags |= CLONE_NEWNET;
	return sb;
}

/* Undo a half-made sandbox; the first error is the one to report. */
static int create_failed(struct pdk_sandbox *sb, int rc)
{
	_cleanup_error_ struct pdk_error *cleanup_err = NULL;

	(void)!pdk_sandbox_destroy(sb, &cleanup_err);
	return rc;
}

/*
 * The steps of a creation before the child, in their order, while the cgroup
 * is made beside them (cgroup_begin()); a failed one leaves the rest to
 * create_failed().
 */
static int (*const create_steps[])(struct pdk_sandbox *sb, struct pdk_error **err) = {
	open_init,
	prepare_egress_tls,
	make_confinement,
	make_sockets,
};

int pdk_sandbox_create(const struct pdk_sandbox_config *cfg, struct pdk_sandbox **out,
		       struct pdk_error **err)
{
	struct pdk_sandbox *sb = sandbox_alloc(cfg);
	struct cgroup_maker cgm;
	int rc = 0;

	if (!cfg->service && (cfg->argv == NULL || cfg->argv[0] == NULL))
		return create_failed(sb, pdk_error_setx(err, EINVAL, "no command to run"));
	cgroup_begin(&cgm, sb);
	for (size_t i = 0; rc == 0 && i < PDK_ARRAY_SIZE(create_steps); i++)
		rc = create_steps[i](sb, err);
	if (rc == 0) {
		rc = cgroup_end(&cgm, err);
	} else {
		if (cgm.threaded)
			(void)pthread_join(cgm.thread, NULL);
		pdk_error_free(&cgm.err);
		close_cgroup_fds(sb);
	}
	if (rc == 0)
		rc = start(sb, err);
	if (rc < 0)
		return create_failed(sb, rc);
	/* The cgroups of runs that were killed: once the child is on its way, beside it. */
	pdk__sandbox_reap_cgroups(sb);
	sb->t_exec_ns = pdk_now_mono_ns();
	/* SECURITY: the child loaded the filter, so it must have sent its listener. */
	if (sb->exec_trace && sb->tracer == NULL)
		return create_failed(sb, pdk_error_setx(err, EPROTO,
							"exec tracing: the sandbox "
							"child sent no listener"));
	if (sb->tracer != NULL)
		pdk_exectrace_start_recording(sb->tracer, sb->pid);
	if (sb->tracer != NULL && !cfg->service) {
		/*
		 * The command is the init's first child in a new pid namespace:
		 * pid 2. Its exit is ours to report (with the accounting); the
		 * tracer's would race with the init's message and repeat it.
		 */
		pdk_exectrace_skip_exit(sb->tracer, PDK_INIT_COMMAND_PID);
	}
	if (cfg->policy->network.mode == PDK_NET_HOST)
		pdk_log(cfg->log, PDK_LOG_WARN,
			"network mode 'host': the sandbox shares the host's network");
	emit(sb, "sandbox.create", 0, create_attrs(sb));
	/*
	 * The proxy starts after sandbox.create, so its net.connect events come
	 * after it; until then a connection waits in the listening socket's backlog.
	 */
	rc = start_egress(sb, err);
	if (rc < 0)
		return create_failed(sb, rc);
	*out = sb;
	return 0;
}

const char *pdk_sandbox_id(const struct pdk_sandbox *sb)
{
	return sb->id;
}

pid_t pdk_sandbox_init_pid(const struct pdk_sandbox *sb)
{
	return sb != NULL ? sb->pid : 0;
}

int pdk_sandbox_signal(struct pdk_sandbox *sb, int sig)
{
	if (sb->reaped)
		return -ESRCH;
	if (syscall(SYS_pidfd_send_signal, sb->pidfd, sig, NULL, 0) < 0)
		return -errno;
	return 0;
}

/* ---- supervision ---- */

static void on_exec_msg(struct pdk_sandbox *sb, const struct pdk_init_msg *m)
{
	json_t *a = json_object();

	sb->cmd_pid = m->pid;
	sb->cmd_exec_ts_ns = m->ts_ns;
	sb->exec_errno = m->err;
	sb->cmd_started = m->err == 0;
	/*
	 * With exec tracing, the command's exec is already a traced
	 * process.exec, and its process.exit is the supervisor's (with the
	 * sandbox's accounting), not the tracer's: one record of each.
	 */
	if (sb->tracer != NULL && m->err == 0) {
		json_decref(a);
		return;
	}
	pdk_json_set(a, "pid", json_integer(m->pid));
	pdk_json_set(a, "argv", pdk_json_strv(sb->cfg->argv));
	pdk_json_set(a, "cwd", json_string(sb->cwd));
	if (m->err != 0) {
		pdk_json_set(a, "error", json_string(strerror(m->err)));
		pdk_json_set(a, "errno", json_integer(m->err));
	}
	emit(sb, "process.exec", m->ts_ns, a);
}

static void read_ctl(struct pdk_sandbox *sb)
{
	struct pdk_init_msg m;

	for (;;) {
		ssize_t n = TEMP_FAILURE_RETRY(recv(sb->ctl[0], &m, sizeof(m), MSG_DONTWAIT));

		if (n != (ssize_t)sizeof(m))
			return; /* EAGAIN, EOF, or a malformed packet: ignore */
		if (m.type == PDK_INIT_MSG_EXEC) {
			on_exec_msg(sb, &m);
		} else if (m.type == PDK_INIT_MSG_EXIT) {
			sb->got_exit = true;
			sb->cmd_status = m.status;
			sb->rusage_cpu_us = m.utime_us + m.stime_us;
			sb->rusage_maxrss_kb = m.maxrss_kb;
		}
	}
}

/* SIGKILL to the init (and so the whole pid namespace); ESRCH is an init already gone. */
static void kill_init(struct pdk_sandbox *sb)
{
	int rc = pdk_sandbox_signal(sb, SIGKILL);

	/* SECURITY: a kill that did not happen is said, never dropped. */
	if (rc < 0 && rc != -ESRCH)
		pdk_log(sb->cfg->log, PDK_LOG_ERROR, "cannot kill the sandbox's init (pid %d): %s",
			(int)sb->pid, strerror(-rc));
}

static void kill_tree(struct pdk_sandbox *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	kill_init(sb);
	if (pdk_cgroup_kill(sb->cgroup, &err) < 0)
		pdk_log(sb->cfg->log, PDK_LOG_WARN, "%s", err->msg);
}

void pdk__sandbox_reap_init(struct pdk_sandbox *sb)
{
	siginfo_t si;

	if (sb->reaped)
		return;
	if (TEMP_FAILURE_RETRY(waitid(P_PIDFD, (id_t)sb->pidfd, &si, WEXITED)) == 0)
		sb->reaped = true;
}

static void forward_signals(struct pdk_sandbox *sb, int sigfd)
{
	struct signalfd_siginfo si;

	while (TEMP_FAILURE_RETRY(read(sigfd, &si, sizeof(si))) == (ssize_t)sizeof(si))
		(void)!pdk_sandbox_signal(sb, (int)si.ssi_signo); /* ESRCH: it is ending anyway */
}

static int poll_timeout_ms(struct pdk_sandbox *sb, uint64_t deadline)
{
	uint64_t now;

	if (deadline == 0 || sb->timed_out)
		return -1;
	now = pdk_now_mono_ns();
	if (now >= deadline)
		return 0;
	return (int)((deadline - now + 999999) / 1000000);
}

/* Answer exec notifications and report traced exits; a broken listener stops tracing. */
void pdk__sandbox_on_trace(struct pdk_sandbox *sb, struct pollfd *pfd, size_t n, bool lazy)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	/* Exits first: their pids may be reused by the execs queued behind them. */
	if (!lazy)
		pdk_exectrace_on_exits(sb->tracer, pfd + PFD_FIXED, n);
	if ((pfd[PFD_TRACE].revents & POLLIN) && pdk_exectrace_handle(sb->tracer, &err) < 0) {
		pdk_log(sb->cfg->log, PDK_LOG_WARN, "%s", err->msg);
		pfd[PFD_TRACE].fd = -1;
	} else if (pfd[PFD_TRACE].revents & (POLLHUP | POLLERR | POLLNVAL)) {
		pfd[PFD_TRACE].fd = -1; /* no process is left under the filter */
	}
}

static int supervise_timeout_ms(struct pdk_sandbox *sb, uint64_t deadline, bool lazy)
{
	int ms = poll_timeout_ms(sb, deadline);

	if (lazy && pdk_exectrace_watching(sb->tracer) > 0 && (ms < 0 || ms > PDK__EXIT_SWEEP_MS))
		ms = PDK__EXIT_SWEEP_MS;
	return ms;
}

/* The poll timeout `ms` (-1: none) shortened so that poll() returns by `at` (monotonic; 0: none).
 */
static int sooner_ms(int ms, uint64_t at)
{
	uint64_t now = pdk_now_mono_ns();
	uint64_t left = at > now ? (at - now + 999999) / 1000000 : 0;

	if (at == 0 || (ms >= 0 && (uint64_t)ms <= left))
		return ms;
	return left > INT_MAX ? INT_MAX : (int)left;
}

/*
 * The set-up is over and the loop is all this process does until the
 * command ends: the pages of paddock's binary that the set-up touched go
 * back (base/mem.h). A failure loses nothing (they stay mapped).
 */
static void release_startup(struct pdk_sandbox *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_mem_release_startup(NULL, &err) < 0)
		pdk_log(sb->cfg->log, PDK_LOG_INFO, "memory: start-up pages kept: %s", err->msg);
}

static int supervise(struct pdk_sandbox *sb, int sigfd, uint32_t release_ms, struct pdk_error **err)
{
	uint64_t wall = sb->cfg->policy->limits.wall_ms;
	uint64_t deadline = wall ? sb->t_exec_ns + wall * 1000000ULL : 0;
	uint64_t release_at = release_ms ? sb->t_exec_ns + release_ms * 1000000ULL : 0;
	bool lazy = sb->tracer != NULL && pdk_exectrace_lazy_exits(sb->tracer);
	_cleanup_free_ struct pollfd *pfd =
		pdk_xcalloc(PFD_FIXED + PDK_EXECTRACE_MAX_TRACKED, sizeof(*pfd));

	pfd[PFD_INIT] = (struct pollfd){.fd = sb->pidfd, .events = POLLIN};
	pfd[PFD_CTL] = (struct pollfd){.fd = sb->ctl[0], .events = POLLIN};
	pfd[PFD_SIG] = (struct pollfd){.fd = sigfd, .events = POLLIN};
	pfd[PFD_TRACE] = (struct pollfd){.fd = sb->tracer ? pdk_exectrace_fd(sb->tracer) : -1,
					 .events = POLLIN};
	pfd[PFD_EGRESS] = (struct pollfd){.fd = sb->egress ? pdk_egress_fd(sb->egress) : -1,
					  .events = POLLIN};
	pfd[PFD_DNS] = (struct pollfd){.fd = sb->dns_fd, .events = POLLIN};
	while (!sb->reaped) {
		size_t nt = sb->tracer && !lazy ? pdk_exectrace_pollfds(sb->tracer, pfd + PFD_FIXED,
									PDK_EXECTRACE_MAX_TRACKED)
						: 0;
		int n = poll(pfd, PFD_FIXED + nt,
			     sooner_ms(supervise_timeout_ms(sb, deadline, lazy), release_at));

		if (n < 0 && errno != EINTR)
			return pdk_error_set(err, errno, "poll");
		if (n == 0 && deadline != 0 && !sb->timed_out && pdk_now_mono_ns() >= deadline) {
			sb->timed_out = true;
			kill_tree(sb);
			continue;
		}
		if (n < 0)
			continue;
		if (sb->tracer != NULL)
			pdk__sandbox_on_trace(sb, pfd, nt, lazy);
		/* After the answer: the process that asked is not kept waiting for this. */
		pdk_sandbox_sweep(sb);
		if (pfd[PFD_CTL].revents)
			read_ctl(sb);
		if (pfd[PFD_SIG].revents)
			forward_signals(sb, sigfd);
		if (pfd[PFD_EGRESS].revents)
			pdk__sandbox_on_egress(sb);
		if (pfd[PFD_DNS].revents)
			pdk__sandbox_on_dns(sb);
		if (pfd[PFD_CTL].revents & (POLLHUP | POLLERR))
			pfd[PFD_CTL].fd = -1; /* init closed its end; keep waiting for its exit */
		if (pfd[PFD_INIT].revents)
			pdk__sandbox_reap_init(sb);
		if (release_at != 0 && !sb->reaped && pdk_now_mono_ns() >= release_at) {
			release_startup(sb);
			release_at = 0;
		}
	}
	read_ctl(sb);
	/* Every process of the sandbox is dead now: report the exits still watched. */
	pdk_exectrace_finish(sb->tracer);
	return 0;
}

static void fill_result(struct pdk_sandbox *sb, struct pdk_sandbox_result *res)
{
	struct pdk_cgroup_stats st;
	int status = sb->cmd_status;

	memset(res, 0, sizeof(*res));
	pdk_cgroup_end_stats(sb->cgroup, &st);
	res->setup_ns = sb->t_exec_ns - sb->t_create_ns;
	res->wall_ns = pdk_now_mono_ns() - sb->t_exec_ns;
	res->cpu_ns = st.cpu_usage_ns ? st.cpu_usage_ns : sb->rusage_cpu_us * 1000ULL;
	res->memory_peak = st.memory_peak ? st.memory_peak : sb->rusage_maxrss_kb * 1024ULL;
	res->oom_kills = st.oom_kills;
	res->pids_denied = st.pids_denied;
	res->downgraded = sb->downgraded;
	res->exec_errno = sb->exec_errno;
	if (sb->timed_out)
		res->end = PDK_SANDBOX_TIMEOUT;
	else if (!sb->cmd_started && sb->exec_errno != 0)
		res->end = PDK_SANDBOX_EXEC_FAILED;
	else if (!sb->got_exit)
		res->end = st.oom_kills ? PDK_SANDBOX_OOM : PDK_SANDBOX_LOST;
	else if (st.oom_kills > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		/*
		 * The OOM killer acted and the command failed: the memory limit
		 * ended it, whether the victim was the command itself or a child
		 * whose death it passed on (a shell's 137).
		 */
		res->end = PDK_SANDBOX_OOM;
	else if (WIFSIGNALED(status))
		res->end = PDK_SANDBOX_SIGNALED;
	else
		res->end = PDK_SANDBOX_EXITED;
	res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
	res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	if (!sb->got_exit && sb->cmd_started)
		res->signal = SIGKILL; /* the tree was killed with init */
}

static void emit_limit(struct pdk_sandbox *sb, const char *limit, json_t *value)
{
	json_t *a = json_object();

	pdk_json_set(a, "limit", json_string(limit));
	pdk_json_set(a, "value", value);
	emit(sb, "limit.exceeded", 0, a);
}

static void emit_end(struct pdk_sandbox *sb, const struct pdk_sandbox_result *r)
{
	const struct pdk_policy_limits *l = &sb->cfg->policy->limits;
	json_t *a = json_object();

	if (r->end == PDK_SANDBOX_TIMEOUT)
		emit_limit(sb, "wall", json_integer((json_int_t)l->wall_ms));
	if (r->oom_kills > 0)
		emit_limit(sb, "memory", json_integer((json_int_t)l->memory));
	if (r->pids_denied > 0)
		emit_limit(sb, "pids", json_integer((json_int_t)l->pids));
	if (r->end == PDK_SANDBOX_SIGNALED && r->signal == SIGXCPU)
		emit_limit(sb, "cpu_time", json_integer((json_int_t)l->cpu_time_ms));
	pdk_json_set(a, "pid", json_integer(sb->cmd_pid));
	if (r->end == PDK_SANDBOX_EXITED)
		pdk_json_set(a, "exit_code", json_integer(r->exit_code));
	if (r->signal)
		pdk_json_set(a, "signal", json_string(sigabbrev_np(r->signal)));
	pdk_json_set(a, "wall_ms", json_real((double)r->wall_ns / 1e6));
	pdk_json_set(a, "cpu_ms", json_real((double)r->cpu_ns / 1e6));
	pdk_json_set(a, "memory_peak_bytes", json_integer((json_int_t)r->memory_peak));
	pdk_json_set(a, "oom_kills", json_integer((json_int_t)r->oom_kills));
	if (sb->cmd_started)
		emit(sb, "process.exit", 0, a);
	else
		json_decref(a);
}

int pdk_sandbox_wait(struct pdk_sandbox *sb, int sigfd, uint32_t release_ms,
		     struct pdk_sandbox_result *res, struct pdk_error **err)
{
	int rc = supervise(sb, sigfd, release_ms, err);

	if (rc < 0) {
		kill_tree(sb);
		pdk__sandbox_reap_init(sb);
		return rc;
	}
	fill_result(sb, res);
	emit_end(sb, res);
	return 0;
}

int pdk_sandbox_destroy(struct pdk_sandbox *sb, struct pdk_error **err)
{
	int rc = 0;

	if (sb == NULL)
		return 0;
	if (sb->pid > 0 && !sb->reaped) {
		kill_init(sb);
		pdk__sandbox_reap_init(sb);
		/* Service mode: the exits of the processes still watched, before sandbox.destroy.
		 */
		if (sb->cfg->service)
			pdk_exectrace_finish(sb->tracer);
	}
	/* The proxy's open connections get their net.connect events before sandbox.destroy. */
	if (sb->egress != NULL)
		pdk_egress_stop(sb->egress);
	for (size_t i = 0; i < sb->n_egress_rules; i++)
		pdk_net_rule_release(&sb->egress_rules[i]);
	free(sb->egress_rules);
	if (sb->egress_ca != NULL)
		pdk_egress_ca_free(sb->egress_ca);
	remove_run_dir(sb);
	pdk_strv_free(sb->ro_files);
	if (sb->cgroup != NULL)
		rc = pdk_cgroup_destroy(sb->cgroup, err);
	pdk__sandbox_forget_cgroup(sb, rc == 0);
	if (sb->t_exec_ns)
		emit(sb, "sandbox.destroy", 0, NULL);
	pdk_landlock_free(sb->landlock);
	pdk_mount_plan_free(sb->plan);
	pdk_seccomp_free(sb->seccomp);
	pdk_seccomp_free(sb->seccomp_files);
	pdk_exectrace_free(sb->tracer);
	pdk_strv_free(sb->init_argv);
	close_fd(&sb->init_fd);
	close_fd(&sb->sync[0]);
	close_fd(&sb->sync[1]);
	close_fd(&sb->ctl[0]);
	close_fd(&sb->ctl[1]);
	close_fd(&sb->pidfd);
	close_fd(&sb->upper_fd);
	close_fd(&sb->egress_fd);
	close_fd(&sb->landlock_fd);
	close_fd(&sb->dns_fd);
	pdk_net_denials_free(sb->denials);
	pdk_strv_free(sb->ws_lowers);
	free(sb->cwd);
	free(sb);
	return rc;
}

struct pdk_net_denials *pdk_sandbox_denials(struct pdk_sandbox *sb)
{
	return sb != NULL ? sb->denials : NULL;
}

int pdk_sandbox_take_upper_fd(struct pdk_sandbox *sb)
{
	return steal_fd(&sb->upper_fd);
}
