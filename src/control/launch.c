/*
 * launch.c - starting a sandbox's supervisor without blocking the loop:
 * the spec in a memfd, the daemon's own binary run as `paddock supervise`
 * in a session of its own, and its ready pipe watched until it reports the
 * sandbox built (or failed).
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "control-internal.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

json_t *pdk__ctl_spec(struct pdk_ctl *c, const char *id, const struct pdk_ctl_create *r)
{
	json_t *ws = r->workspace ? json_deep_copy(r->workspace) : json_object();
	json_t *spec;

	if (json_object_get(ws, "path") == NULL)
		pdk_json_set(ws, "path", json_null());
	if (json_object_get(ws, "mode") == NULL)
		pdk_json_set(ws, "mode", json_string("overlay"));
	/* "o" takes each value: the request's are increfed, the defaults are new. */
	spec = json_pack("{s:s, s:s, s:n, s:o, s:o, s:o, s:O, s:s, s:s, s:{s:b}}", "id", id,
			 "profile", r->profile, "policy_file", "overrides",
			 r->overrides ? json_incref(r->overrides) : json_object(), "workspace", ws,
			 "env", r->env ? json_incref(r->env) : json_object(), "labels", r->labels,
			 "state_dir", c->state_dir, "run_dir", c->run_dir, "audit", "exec_trace",
			 1);
	if (spec == NULL)
		pdk_oom();
	if (r->image != NULL)
		pdk_json_set(spec, "image", json_string(r->image));
	/*
	 * The create token's scope, kept for a repeated create after a restart (the supervisor
	 * ignores it).
	 */
	if (r->token_ops != 0 || r->token_ttl_s != 0)
		pdk_json_set(spec, "create_token",
			     json_pack("{s:I, s:I}", "ops", (json_int_t)r->token_ops, "ttl_s",
				       (json_int_t)r->token_ttl_s));
	return spec;
}

/* ---- the ready pipe ---- */

/*
 * The create failed with `why` (taken: freed here): the waiters get it, its
 * status and field kept (an unknown profile is the caller's 404, a broken
 * mechanism the daemon's 500), and the sandbox goes.
 */
static void create_failed(struct pdk_ctl_sb *sb, struct pdk_error *why)
{
	_cleanup_error_ struct pdk_error *err = why;
	_cleanup_free_ char *dir = pdk__sb_dir(sb);
	_cleanup_free_ char *msg = pdk_xstrdup(why->msg);

	(void)pdk_error_wrap(&err, "sandbox could not be created");
	pdk__sb_answer_waiters(sb, err);
	pdk_error_free(&err);
	/*
	 * The supervisor is reaped by the front end's SIGCHLD handler whenever it ends.
	 * One that failed cleaned up before it said so; one that started but cannot be
	 * reached has described its cgroup, which goes with it.
	 */
	if (sb->pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
	pdk__sb_reap_cgroup_file(sb);
	pdk__sb_ingest(sb);
	/* The sandbox's last event, after what its spool held: the checkpoint covers them all. */
	pdk__ctl_event_final(sb->c, sb->row.id, sb->labels, "sandbox.create_failed",
			     json_pack("{s:s}", "error", msg));
	(void)!pdk_audit_spool_forget(sb->c->audit, sb->row.id, NULL);
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
	(void)!pdk_store_sandbox_delete(sb->c->store, sb->row.id, &err);
	pdk__sb_answer_destroy(sb, "ended"); /* it was asked to end while it started */
	pdk__sb_unlink(sb);
	pdk__sb_free(sb);
}

/*
 * The ready line's failure, as a control error (caller frees): the
 * supervisor's svc-proto error answer, with its status and field.
 */
static struct pdk_error *ready_error(json_t *j)
{
	struct pdk_error *err = NULL;

	if (j == NULL)
		(void)pdk_error_setx(&err, EIO, "the supervisor ended without a ready message");
	else if (json_object_get(j, "error") == NULL)
		(void)pdk_error_setx(&err, EIO,
				     "the supervisor reported a failure without an error");
	else
		(void)pdk_ctl_svc_error(j, &err);
	return err;
}

static void ready_done(struct pdk_ctl_sb *sb)
{
	_cleanup_json_ json_t *j = pdk_json_loadb(sb->ready_buf, sb->ready_len, 0, NULL);
	int rc;

	pdk__ctl_unwatch(&sb->ready_ev, &sb->ready_fd);
	if (!json_is_true(json_object_get(j, "ok"))) {
		create_failed(sb, ready_error(j));
		return;
	}
	sb->init_pid = (pid_t)json_integer_value(json_object_get(j, "init_pid"));
	if (json_is_object(json_object_get(j, "facts")))
		sb->facts = json_incref(json_object_get(j, "facts"));
	rc = pdk__sb_connect(sb);
	if (rc < 0) {
		struct pdk_error *err = NULL;

		(void)pdk_error_setx(&err, EIO, "cannot connect to the supervisor: %s",
				     strerror(-rc));
		create_failed(sb, err);
		return;
	}
	pdk__sb_set_state(sb, "running");
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "sandbox.create",
		      json_pack("{s:s, s:i, s:b}", "profile", sb->row.profile, "supervisor_pid",
				(int)sb->row.supervisor_pid, "pool", sb->row.pool));
	pdk__sb_ask_status(sb);
	if (sb->row.pool && !sb->destroying)
		pdk__warm_start(sb);
	pdk__sb_answer_waiters(sb, NULL);
	if (sb->destroying) /* asked to end while it started (pdk__sb_destroy()) */
		pdk__sb_destroy_started(sb);
}

static void ready_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl_sb *sb = arg;
	ssize_t n;

	(void)what;
	n = read(fd, sb->ready_buf + sb->ready_len, sizeof(sb->ready_buf) - 1 - sb->ready_len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		sb->ready_len += (size_t)n;
		if (memchr(sb->ready_buf, '\n', sb->ready_len) == NULL &&
		    sb->ready_len < sizeof(sb->ready_buf) - 1)
			return;
	}
	ready_done(sb);
}

/* ---- the process ---- */

struct spawn_arg {
	int exe_fd, spec_fd, ready_fd, null_fd, log_fd;
	char *const *argv;
	char *const *envp;
	pid_t parent; /* end_with_us: our pid, else 0 */
};

/* The child, sharing our memory until execveat (pdk_proc_clone): only system calls here. */
static int spawn_child(void *p)
{
	const struct spawn_arg *a = p;

	if (setsid() < 0 || dup2(a->spec_fd, 3) < 0 || dup2(a->ready_fd, 4) < 0 ||
	    dup2(a->null_fd, 0) < 0 || dup2(a->log_fd, 1) < 0 || dup2(a->log_fd, 2) < 0)
		_exit(127);
	/*
	 * A control object nothing re-adopts after it: the supervisor gets
	 * SIGTERM (it ends its sandbox) when we end, even by SIGKILL. Kept
	 * across the exec (the binary is not set-id); a parent already gone
	 * (the supervisor is then init's) means the same end, at once.
	 */
	if (a->parent != 0 && (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0 ||
			       syscall(SYS_getppid) != a->parent))
		_exit(127);
	/* Every other descriptor of the daemon is close-on-exec: nothing else is inherited. */
	(void)syscall(SYS_close_range, 5U, ~0U, CLOSE_RANGE_CLOEXEC);
	syscall(SYS_execveat, a->exe_fd, "", a->argv, a->envp, AT_EMPTY_PATH);
	_exit(127);
}

/* The spec in a memfd, read from its start. */
static int spec_memfd(const char *spec, struct pdk_error **err)
{
	_cleanup_close_ int fd = memfd_create("paddock-spec", MFD_CLOEXEC);

	if (fd < 0 || pdk_write_all(fd, spec, strlen(spec)) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return pdk_error_set(err, errno, "spec for the supervisor");
	return steal_fd(&fd);
}

/* The supervisor's stdout and stderr: RUNDIR/sb/ID/log (contract), in its new directory. */
static int log_file(struct pdk_ctl_sb *sb, struct pdk_error **err)
{
	_cleanup_free_ char *dir = pdk__sb_dir(sb);
	_cleanup_free_ char *path = NULL;
	int fd;

	if (mkdir(dir, 0700) < 0)
		return pdk_error_set(err, errno, "mkdir '%s'", dir);
	path = pdk_xasprintf("%s/log", dir);
	fd = TEMP_FAILURE_RETRY(
		open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
	if (fd < 0)
		return pdk_error_set(err, errno, "open '%s'", path);
	return fd;
}

static char **supervise_argv(const char *id)
{
	char **argv = NULL;
	const char *const words[] = {"paddock",   "supervise", "--id",       id,
				     "--spec-fd", "3",         "--ready-fd", "4"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(words); i++)
		pdk_strv_push(&argv, words[i]);
	return argv;
}

static int watch_ready(struct pdk_ctl_sb *sb, int *ready_r, struct pdk_error **err)
{
	if (fcntl(*ready_r, F_SETFL, O_NONBLOCK) < 0)
		return pdk_error_set(err, errno, "ready pipe");
	sb->ready_fd = steal_fd(ready_r);
	sb->ready_ev =
		event_new(sb->c->base, sb->ready_fd, EV_READ | EV_PERSIST, ready_readable, sb);
	if (sb->ready_ev == NULL || event_add(sb->ready_ev, NULL) < 0)
		pdk_oom();
	return 0;
}

int pdk__ctl_start_supervisor(struct pdk_ctl_sb *sb, const char *spec, struct pdk_error **err)
{
	struct pdk_ctl *c = sb->c;
	_cleanup_close_ int spec_fd = -1, ready_r = -1, ready_w = -1, null_fd = -1, log_fd = -1;
	_cleanup_strv_ char **argv = supervise_argv(sb->row.id);
	int pipefd[2];
	struct spawn_arg a;
	pid_t pid;

	if ((spec_fd = spec_memfd(spec, err)) < 0)
		return -EIO;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return pdk_error_set(err, errno, "ready pipe");
	ready_r = pipefd[0];
	ready_w = pipefd[1];
	null_fd = TEMP_FAILURE_RETRY(open("/dev/null", O_RDWR | O_CLOEXEC));
	if (null_fd < 0)
		return pdk_error_set(err, errno, "open /dev/null");
	if ((log_fd = log_file(sb, err)) < 0)
		return -EIO;
	a = (struct spawn_arg){.exe_fd = c->exe_fd,
			       .null_fd = null_fd,
			       .log_fd = log_fd,
			       .argv = argv,
			       .parent = c->end_with_us ? getpid() : 0};
	a.envp = c->envp != NULL ? c->envp : (char *const[]){NULL};
	/* Above 4, so that the child's dup2 onto 3 and 4 never overwrites one of them. */
	a.spec_fd = fcntl(spec_fd, F_DUPFD_CLOEXEC, 10);
	a.ready_fd = fcntl(ready_w, F_DUPFD_CLOEXEC, 10);
	if (a.spec_fd < 0 || a.ready_fd < 0) {
		int e = errno;

		if (a.spec_fd >= 0)
			(void)close(a.spec_fd);
		if (a.ready_fd >= 0)
			(void)close(a.ready_fd);
		return pdk_error_set(err, e, "dup");
	}
	pid = pdk_proc_clone(0, spawn_child, &a, &sb->pidfd, err);
	(void)close(a.spec_fd);
	(void)close(a.ready_fd);
	if (pid < 0)
		return -EIO;
	sb->row.supervisor_pid = pid;
	return watch_ready(sb, &ready_r, err);
}
