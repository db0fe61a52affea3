/*
 * build-step.c - one step's command in a sandbox: a session in service mode
 * (the sequence `paddock run` and the supervisor use) on the image built so
 * far, whose writable layer is a directory of the build's that becomes the
 * step's layer, with the default
 * profile's limits, no workspace, and a network of exactly the recipe's
 * entries (the egress proxy; none at all without entries). The command is
 * started through the sandbox's init with its stdout and stderr on a pipe
 * that this loop reads, so the output reaches the note callback as it
 * comes and its tail is kept for a failure's message.
 */
#include "common.h"
#include "base.h"
#include "build-internal.h"
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The poll set: the output pipe first, then the sandbox's descriptors. */
#define P_OUT 0
#define P_SB  1

struct step_run {
	struct pdk__build *b;
	struct pdk_sandbox *sb;
	uint64_t exec_id;
	int out; /* the pipe's reading end; -1 once at its end */
	bool exited;
	int status; /* as from waitpid() */
	int failed; /* the init could not start it: errno */
};

/* Read once; false when nothing was there (the pipe is empty, or ended: then closed). */
static bool read_output(struct step_run *r)
{
	char buf[4096];
	ssize_t n = TEMP_FAILURE_RETRY(read(r->out, buf, sizeof(buf)));

	if (n > 0) {
		pdk__build_output(r->b, buf, (size_t)n);
		return true;
	}
	if (n == 0 || errno != EAGAIN) {
		(void)close(r->out);
		r->out = -1;
	}
	return false;
}

static void take_procs(struct step_run *r)
{
	struct pdk_sandbox_proc p;

	while (pdk_sandbox_next_proc(r->sb, &p) == 1) {
		if (p.exec_id != r->exec_id)
			continue;
		if (p.kind == PDK_SANDBOX_PROC_FAILED) {
			r->failed = p.err != 0 ? p.err : EIO;
			r->exited = true;
		} else if (p.kind == PDK_SANDBOX_PROC_EXITED) {
			r->status = p.status;
			r->exited = true;
		}
	}
}

/*
 * Poll until the command exited, then take what its output pipe holds. A
 * process it left running may hold the pipe open: the build does not wait
 * for that one (the session's end kills it).
 */
static int wait_step(struct step_run *r, struct pdk_error **err)
{
	struct pollfd pfd[P_SB + PDK_SANDBOX_MAX_POLLFDS];

	while (!r->exited) {
		size_t n = pdk_sandbox_pollfds(r->sb, pfd + P_SB, PDK_SANDBOX_MAX_POLLFDS);
		int rc;

		pfd[P_OUT] = (struct pollfd){.fd = r->out, .events = POLLIN};
		rc = poll(pfd, P_SB + n, pdk_sandbox_poll_timeout_ms(r->sb));
		if (rc < 0 && errno != EINTR)
			return pdk_error_set(err, errno, "poll");
		if (rc < 0)
			continue;
		if (r->out >= 0 && pfd[P_OUT].revents)
			(void)read_output(r);
		if (n > 0 && pdk_sandbox_dispatch(r->sb, pfd + P_SB, n, err) < 0)
			return -1;
		take_procs(r);
		pdk_sandbox_sweep(r->sb);
		if (!r->exited && !pdk_sandbox_alive(r->sb))
			return pdk_error_setx(err, ECHILD,
					      "the step's sandbox ended before its command");
	}
	while (r->out >= 0 && read_output(r))
		;
	return 0;
}

/* The destinations the proxy refused, each "HOST:PORT (why); to allow it, ...". */
static char **denied_list(struct pdk_sandbox *sb)
{
	struct pdk_net_denial *v = NULL;
	uint64_t more = 0;
	size_t n = pdk_net_denials_since(pdk_sandbox_denials(sb), 0, &v, &more);
	char **out = NULL;

	for (size_t i = 0; i < n; i++)
		pdk_strv_push_take(
			&out,
			pdk_xasprintf("%s (%s); to allow it, add '%s' to the recipe's network",
				      v[i].dest, v[i].why, v[i].allow));
	pdk_net_denial_list_free(v, n);
	return out;
}

/* Start the command with stdin /dev/null, stdout and stderr the pipe; wait for it. */
static int exec_and_wait(struct step_run *r, struct pdk_session *s, char *const *argv,
			 struct pdk_error **err)
{
	_cleanup_close_ int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int wr = -1;
	int p[2];
	struct pdk_sandbox_exec_req req = {
		.argv = argv, .envp = pdk_session_env(s), .cwd = "/", .pty_fd = -1};

	if (in < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return pdk_error_set(err, errno, "cannot make the step's output pipe");
	r->out = p[0];
	wr = p[1];
	req.fds[0] = in;
	req.fds[1] = req.fds[2] = wr;
	if (pdk_sandbox_exec(r->sb, &req, &r->exec_id, err) < 0)
		return pdk_error_wrap(err, "cannot start the step's command");
	/* Ours closed: the pipe ends when the command and what it left running close theirs. */
	(void)close(steal_fd(&wr));
	return wait_step(r, err);
}

static void fill_end(const struct step_run *r, struct pdk__build_end *end)
{
	if (r->failed != 0)
		end->exit_code = r->failed == ENOENT ? 127 : 126;
	else if (WIFEXITED(r->status))
		end->exit_code = WEXITSTATUS(r->status);
	else
		end->signal = WTERMSIG(r->status);
	end->denied = denied_list(r->sb);
}

int pdk__build_run_step(struct pdk__build *b, const char *image, const char *rw_dir,
			char *const *argv, char *const *envp, struct pdk__build_end *end,
			struct pdk_error **err)
{
	const struct pdk_build_opts *o = b->o;
	struct pdk_session_opts so = {
		.profile = "default",
		.overrides = {.allow = o->recipe->network,
			      .allow_name = "network",
			      .ws_mode = {.set = true, .value = PDK_WS_NONE},
			      .image = image},
		.env = envp,
		.env_name = "config.env",
		.settings = o->settings,
		.log = o->log,
		.actor = "paddock-image-build",
		.audit = true,
		.cwd = "/",
		.image_rw_dir = rw_dir,
	};
	struct pdk_session_failure why = {0};
	struct pdk_session_result res = {0};
	struct step_run r = {.b = b, .out = -1};
	struct pdk_session *s = pdk_session_open(&so, &why, err);
	int rc;

	pdk_policy_report_release(&why.report);
	*end = (struct pdk__build_end){0};
	if (s == NULL)
		return pdk_error_wrap(err, "the step's sandbox (%s)",
				      pdk_session_step_name(why.step));
	rc = pdk_session_start(s, err);
	if (rc == 0) {
		r.sb = pdk_session_sandbox(s);
		rc = exec_and_wait(&r, s, argv, err);
	}
	if (rc == 0)
		fill_end(&r, end);
	if (r.out >= 0)
		(void)close(r.out);
	if (pdk_session_finish(s, &res, rc == 0 ? err : NULL) < 0 && rc == 0)
		rc = -1;
	pdk_session_result_release(&res);
	pdk_session_free(s);
	return rc;
}
