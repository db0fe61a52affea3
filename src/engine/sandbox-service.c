/*
 * sandbox-service.c - a sandbox in service mode: the init (paddock-init
 * --service) runs no command of its own and starts one process per
 * pdk_sandbox_exec() request; the caller's loop (the supervisor, see
 * supervisor.c) polls the sandbox's descriptors, pauses and resumes it,
 * reads its usage and reaches its files through its root.
 */
#include "common.h"
#include "base.h"
#include "caps.h"
#include "init.h"
#include "sandbox-internal.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Weak, as in sandbox.c: NULL in the front binary, called only for a sandbox with a proxy. */
#pragma weak pdk_egress_fd
#pragma weak pdk_egress_allow
#pragma weak pdk_egress_bytes

/*
 * How long a pause may wait for every task to stop (a task in D state
 * delays it), in tries: the v1 freezer can stop a vfork child before its
 * exec while its parent, waiting for that exec, is never counted frozen
 * (seen about once in 30 pauses under a shell loop of commands). A try
 * that does not complete is undone, which lets the child exec, and the
 * next one usually completes.
 */
#define FREEZE_WAIT_MS 250
#define FREEZE_TRIES   4

/* Append `s` and its NUL to buf at *off; false when it does not fit. */
static bool put_str(char *buf, size_t cap, size_t *off, const char *s)
{
	size_t n = strlen(s) + 1;

	if (n > cap - *off)
		return false;
	memcpy(buf + *off, s, n);
	*off += n;
	return true;
}

static bool put_strv(char *buf, size_t cap, size_t *off, char *const *v, uint32_t *count)
{
	*count = 0;
	for (size_t i = 0; v != NULL && v[i] != NULL; i++, (*count)++)
		if (!put_str(buf, cap, off, v[i]))
			return false;
	return true;
}

static size_t strv_bytes(char *const *v)
{
	size_t n = 0;

	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		n += strlen(v[i]) + 1;
	return n;
}

static int send_req(struct pdk_sandbox *sb, const void *buf, size_t len, const int *fds,
		    size_t nfds, struct pdk_error **err)
{
	ssize_t n = pdk_fdpass_send(sb->ctl[0], buf, len, fds, nfds);

	if (n < 0)
		return pdk_error_set(err, (int)-n, "cannot send a request to the sandbox init");
	if ((size_t)n != len)
		return pdk_error_setx(err, EPROTO, "short request to the sandbox init");
	return 0;
}

int pdk_sandbox_exec(struct pdk_sandbox *sb, const struct pdk_sandbox_exec_req *req,
		     uint64_t *exec_id, struct pdk_error **err)
{
	_cleanup_free_ char *buf = NULL;
	struct pdk_init_req hdr = {.type = PDK_INIT_REQ_SPAWN};
	size_t off = sizeof(hdr);
	size_t cap;
	int fds[3];
	size_t nfds;
	int rc;

	if (!sb->cfg->service || sb->reaped)
		return pdk_error_setx(err, ESRCH, "the sandbox is not serving");
	if (req->argv == NULL || req->argv[0] == NULL || req->argv[0][0] == '\0')
		return pdk_error_setx(err, EINVAL, "no command to run");
	/* Sized to fit (a fixed 128 KiB buffer would be an mmap() and munmap() per exec). */
	cap = sizeof(hdr) + strlen(req->cwd ? req->cwd : "/") + 1 + strv_bytes(req->argv) +
	      strv_bytes(req->envp);
	if (cap > PDK_INIT_MAX_REQ)
		cap = PDK_INIT_MAX_REQ + 1; /* put_*() then say it does not fit */
	buf = pdk_xmalloc(cap);
	if (!put_str(buf, cap, &off, req->cwd ? req->cwd : "/") ||
	    !put_strv(buf, cap, &off, req->argv, &hdr.argc) ||
	    !put_strv(buf, cap, &off, req->envp, &hdr.envc) || off > PDK_INIT_MAX_REQ)
		return pdk_error_setx(err, E2BIG, "arguments and environment exceed %d bytes",
				      PDK_INIT_MAX_REQ);
	if (req->pty_fd >= 0) {
		hdr.flags = PDK_INIT_SPAWN_PTY;
		fds[0] = req->pty_fd;
		nfds = 1;
	} else {
		memcpy(fds, req->fds, sizeof(fds));
		nfds = 3;
	}
	hdr.id = sb->last_exec_id + 1;
	hdr.len = (uint32_t)(off - sizeof(hdr));
	memcpy(buf, &hdr, sizeof(hdr));
	rc = send_req(sb, buf, off, fds, nfds, err);
	if (rc < 0)
		return rc;
	*exec_id = ++sb->last_exec_id;
	return 0;
}

int pdk_sandbox_signal_exec(struct pdk_sandbox *sb, uint64_t exec_id, int sig,
			    struct pdk_error **err)
{
	struct pdk_init_req hdr = {.type = PDK_INIT_REQ_SIGNAL, .id = exec_id, .sig = sig};

	if (!sb->cfg->service || sb->reaped)
		return pdk_error_setx(err, ESRCH, "the sandbox is not serving");
	if (sig <= 0 || sig > 64)
		return pdk_error_setx(err, EINVAL, "invalid signal %d", sig);
	return send_req(sb, &hdr, sizeof(hdr), NULL, 0, err);
}

size_t pdk_sandbox_pollfds(struct pdk_sandbox *sb, struct pollfd *pfd, size_t max)
{
	bool lazy = sb->tracer != NULL && pdk_exectrace_lazy_exits(sb->tracer);
	size_t nt = 0;

	if (sb == NULL || max < PFD_FIXED || sb->reaped)
		return 0;
	pfd[PFD_INIT] = (struct pollfd){.fd = sb->pidfd, .events = POLLIN};
	pfd[PFD_CTL] = (struct pollfd){.fd = sb->ctl[0], .events = POLLIN};
	pfd[PFD_SIG] = (struct pollfd){.fd = -1};
	pfd[PFD_TRACE] = (struct pollfd){.fd = sb->tracer ? pdk_exectrace_fd(sb->tracer) : -1,
					 .events = POLLIN};
	pfd[PFD_EGRESS] = (struct pollfd){.fd = sb->egress ? pdk_egress_fd(sb->egress) : -1,
					  .events = POLLIN};
	pfd[PFD_DNS] = (struct pollfd){.fd = sb->dns_fd, .events = POLLIN};
	if (sb->tracer != NULL && !lazy)
		nt = pdk_exectrace_pollfds(sb->tracer, pfd + PFD_FIXED, max - PFD_FIXED);
	return PFD_FIXED + nt;
}

int pdk_sandbox_poll_timeout_ms(struct pdk_sandbox *sb)
{
	if (sb != NULL && sb->tracer != NULL && pdk_exectrace_lazy_exits(sb->tracer) &&
	    pdk_exectrace_watching(sb->tracer) > 0)
		return PDK__EXIT_SWEEP_MS;
	return -1;
}

int pdk_sandbox_dispatch(struct pdk_sandbox *sb, struct pollfd *pfd, size_t n,
			 struct pdk_error **err)
{
	(void)err;
	if (n < PFD_FIXED)
		return 0;
	if (sb->tracer != NULL)
		pdk__sandbox_on_trace(sb, pfd, n - PFD_FIXED, pdk_exectrace_lazy_exits(sb->tracer));
	if (pfd[PFD_EGRESS].revents)
		pdk__sandbox_on_egress(sb);
	if (pfd[PFD_DNS].revents)
		pdk__sandbox_on_dns(sb);
	if (pfd[PFD_INIT].revents) {
		pdk__sandbox_reap_init(sb);
		/* Every process of the sandbox is dead now: report the exits still watched. */
		if (sb->reaped)
			pdk_exectrace_finish(sb->tracer);
	}
	return 0;
}

void pdk_sandbox_sweep(struct pdk_sandbox *sb)
{
	if (sb != NULL && sb->tracer != NULL && pdk_exectrace_lazy_exits(sb->tracer))
		pdk_exectrace_sweep_exits(sb->tracer);
}

int pdk_sandbox_next_proc(struct pdk_sandbox *sb, struct pdk_sandbox_proc *p)
{
	struct pdk_init_msg m;

	if (sb == NULL)
		return 0;
	for (;;) {
		ssize_t n = TEMP_FAILURE_RETRY(recv(sb->ctl[0], &m, sizeof(m), MSG_DONTWAIT));

		if (n <= 0)
			return 0; /* EAGAIN, or EOF: the init is gone */
		if (n != (ssize_t)sizeof(m))
			continue; /* malformed: ignore */
		memset(p, 0, sizeof(*p));
		p->exec_id = m.id;
		p->pid = m.pid;
		p->ts_ns = m.ts_ns;
		if (m.type == PDK_INIT_MSG_EXEC) {
			p->kind = m.err ? PDK_SANDBOX_PROC_FAILED : PDK_SANDBOX_PROC_STARTED;
			p->err = m.err;
			p->stage = (int)m.stage;
			return 1;
		}
		if (m.type == PDK_INIT_MSG_EXIT) {
			p->kind = PDK_SANDBOX_PROC_EXITED;
			p->status = m.status;
			p->cpu_us = m.utime_us + m.stime_us;
			p->maxrss_kb = m.maxrss_kb;
			return 1;
		}
	}
}

bool pdk_sandbox_alive(const struct pdk_sandbox *sb)
{
	return sb != NULL && sb->pid > 0 && !sb->reaped;
}

int pdk_sandbox_pause(struct pdk_sandbox *sb, struct pdk_error **err)
{
	for (int i = 1; pdk_cgroup_freeze(sb->cgroup, true, FREEZE_WAIT_MS, err) < 0; i++) {
		if ((*err)->status != EBUSY || i == FREEZE_TRIES)
			return pdk_error_wrap(err, "pause");
		pdk_error_free(err);
	}
	return 0;
}

int pdk_sandbox_resume(struct pdk_sandbox *sb, struct pdk_error **err)
{
	if (pdk_cgroup_freeze(sb->cgroup, false, 0, err) < 0)
		return pdk_error_wrap(err, "resume");
	return 0;
}

int pdk_sandbox_egress_allow(struct pdk_sandbox *sb, struct pdk_net_rule *r, struct pdk_error **err)
{
	if (sb == NULL)
		return pdk_error_setx(err, ESRCH, "the sandbox is not running");
	if (sb->egress == NULL)
		return pdk_error_setx(err, ENOTSUP,
				      "the sandbox has no egress proxy (network.mode is not "
				      "allowlist): there is no allowlist to widen");
	pdk_egress_allow(sb->egress, r);
	return 0;
}

char *pdk_sandbox_cgroup_describe(const struct pdk_sandbox *sb)
{
	return pdk_cgroup_describe(sb != NULL ? sb->cgroup : NULL);
}

void pdk_sandbox_usage(struct pdk_sandbox *sb, struct pdk_sandbox_usage *u)
{
	_cleanup_error_ struct pdk_error *ignored = NULL;
	struct pdk_cgroup_stats st;

	memset(u, 0, sizeof(*u));
	if (sb != NULL && sb->egress != NULL)
		u->egress_bytes = pdk_egress_bytes(sb->egress);
	if (sb == NULL || pdk_cgroup_stats(sb->cgroup, &st, &ignored) < 0)
		return;
	u->cpu_ns = st.cpu_usage_ns;
	u->memory_current = st.memory_current;
	u->memory_peak = st.memory_peak;
	u->pids_current = st.pids_current;
	u->oom_kills = st.oom_kills;
	u->pids_denied = st.pids_denied;
}

uint64_t pdk_sandbox_oom_kills(struct pdk_sandbox *sb)
{
	return sb != NULL ? pdk_cgroup_oom_kills(sb->cgroup) : 0;
}

int pdk_sandbox_root_fd(struct pdk_sandbox *sb, struct pdk_error **err)
{
	_cleanup_free_ char *path = NULL;
	int fd;

	if (!pdk_sandbox_alive(sb))
		return pdk_error_setx(err, ESRCH, "the sandbox has ended");
	path = pdk_xasprintf("/proc/%d/root", (int)sb->pid);
	fd = TEMP_FAILURE_RETRY(open(path, O_PATH | O_DIRECTORY | O_CLOEXEC));
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open the sandbox's root '%s'", path);
	return fd;
}

void pdk_sandbox_owner(const struct pdk_sandbox *sb, uid_t *uid, gid_t *gid)
{
	*uid = sb->uid;
	*gid = sb->gid;
}

struct pdk_events *pdk_sandbox_events(const struct pdk_sandbox *sb)
{
	return sb->cfg->events;
}

bool pdk_sandbox_traced(const struct pdk_sandbox *sb)
{
	return sb->tracer != NULL;
}

/*
 * Step 1 of pdk_sandbox_enter_child(): into the sandbox's user namespace,
 * with its root as ours. The root is entered before the namespace: the
 * link /proc/PID/root is followed with the caller's credentials.
 */
/*
 * The sandbox's network namespace, opened through the host's /proc, or -1
 * (with 0 returned) when it is ours (network.mode host). 0 or -errno + *ce.
 */
static int open_netns(const struct pdk_sandbox *sb, int *fd, struct pdk_child_error *ce)
{
	char path[64];
	struct stat theirs, ours;

	*fd = -1;
	(void)snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb->pid);
	if (stat(path, &theirs) < 0 || stat("/proc/self/ns/net", &ours) < 0)
		return pdk_child_error_set(ce, errno, "cannot look at '%s'", path);
	if (theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino)
		return 0;
	*fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC));
	if (*fd < 0)
		return pdk_child_error_set(ce, errno, "cannot open '%s'", path);
	return 0;
}

/*
 * Step 1b of pdk_sandbox_enter_net_child(): into the sandbox's network
 * namespace (`fd`; -1: it is already ours). Its owner is the sandbox's
 * user namespace, where we now hold every capability until they are
 * dropped.
 */
static int enter_netns(int fd, struct pdk_child_error *ce)
{
	if (fd >= 0 && setns(fd, CLONE_NEWNET) < 0)
		return pdk_child_error_set(ce, errno,
					   "cannot enter the sandbox's network namespace");
	return 0;
}

static int enter_userns_root(const struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	char path[64];
	_cleanup_close_ int ns = -1;

	(void)snprintf(path, sizeof(path), "/proc/%d/root", (int)sb->pid);
	if (chdir(path) < 0)
		return pdk_child_error_set(ce, errno, "cannot enter '%s'", path);
	(void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)sb->pid);
	ns = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC));
	if (ns < 0)
		return pdk_child_error_set(ce, errno, "cannot open '%s'", path);
	/*
	 * SECURITY: from here on no capability of ours reaches past the
	 * sandbox's user namespace: not over host files, and not as the owner
	 * of that namespace either (an owner in the parent namespace holds
	 * every capability in it, whatever its own sets say).
	 */
	if (setns(ns, CLONE_NEWUSER) < 0)
		return pdk_child_error_set(ce, errno, "cannot enter the sandbox's user namespace");
	if (chroot(".") < 0 || chdir("/") < 0)
		return pdk_child_error_set(ce, errno, "cannot enter the sandbox's root");
	/* The sandbox maps its user to the ids it has inside (the caller's own, or an image's). */
	if (geteuid() != sb->in_uid || getegid() != sb->in_gid)
		return pdk_child_error_set(ce, EPERM, "not the sandbox's user after entering it");
	return 0;
}

static int enter_child(const struct pdk_sandbox *sb, bool net, struct pdk_child_error *ce)
{
	_cleanup_close_ int netfd = -1;
	int rc;

	if (!sb->cfg->service || sb->pid <= 0)
		return pdk_child_error_set(ce, EINVAL, "not a running service-mode sandbox");
	/* SECURITY: a Landlock the sandbox has, the helper has too, or it does nothing. */
	if (pdk_landlock_get_abi(sb->landlock) > 0 && sb->landlock_fd < 0)
		return pdk_child_error_set(ce, EPROTO, "the sandbox's Landlock ruleset is missing");
	rc = net ? open_netns(sb, &netfd, ce) : 0;
	if (rc == 0)
		rc = enter_userns_root(sb, ce);
	if (rc == 0)
		rc = enter_netns(netfd, ce);
	if (rc == 0)
		rc = pdk_caps_no_new_privs_child(ce);
	if (rc == 0 && sb->landlock_fd >= 0)
		rc = pdk_landlock_restrict_fd_child(sb->landlock_fd, ce);
	if (rc == 0)
		rc = pdk_caps_drop_all_child(ce);
	if (rc == 0)
		rc = pdk_seccomp_apply_child(sb->seccomp_files, ce);
	return rc;
}

int pdk_sandbox_enter_child(const struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	return enter_child(sb, false, ce);
}

int pdk_sandbox_enter_net_child(const struct pdk_sandbox *sb, struct pdk_child_error *ce)
{
	return enter_child(sb, true, ce);
}
