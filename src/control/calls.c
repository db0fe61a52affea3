/*
 * calls.c - the control socket to a sandbox's supervisor (svc-proto):
 * calls and their answers, the unsolicited messages, the connection's loss,
 * and the supervisor's error answers as control errors.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* How long a lost connection waits for its supervisor's exit to show (a crash). */
#define LOST_EXIT_WAIT_MS 50

void pdk__close_fds(int *fds, size_t nfds)
{
	for (size_t i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			(void)close(fds[i]);
}

bool pdk__svc_failed(const json_t *reply)
{
	return reply == NULL || json_object_get(reply, "error") != NULL;
}

int pdk_ctl_svc_error(const json_t *reply, struct pdk_error **err)
{
	json_t *e = json_object_get(reply, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	int status = pdk_svc_status_of(code);

	if (reply == NULL)
		return pdk_error_setx(err, ENOTCONN, "the sandbox's supervisor is gone");
	return pdk_error_set_field(err, status, json_string_value(json_object_get(e, "field")),
				   "%s",
				   msg                             ? msg
				   : status == EIO || code == NULL ? "supervisor error"
								   : code);
}

/* ---- status ---- */

void pdk__sb_status_answer(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	const char *state = json_string_value(json_object_get(reply, "state"));

	(void)ctx;
	pdk__close_fds(fds, nfds);
	if (pdk__svc_failed(reply))
		return;
	json_decref(sb->status);
	sb->status = json_incref(reply);
	if (json_is_object(json_object_get(reply, "facts"))) {
		json_decref(sb->facts);
		sb->facts = json_incref(json_object_get(reply, "facts"));
	}
	if (state != NULL && !sb->destroying &&
	    (strcmp(state, "running") == 0 || strcmp(state, "paused") == 0) &&
	    strcmp(state, sb->row.state) != 0)
		pdk__sb_set_state(sb, state);
}

void pdk__sb_ask_status(struct pdk_ctl_sb *sb)
{
	(void)!pdk__sb_call(sb, json_pack("{s:s}", "op", "status"), NULL, 0, pdk__sb_status_answer,
			    NULL);
}

/* ---- messages from the supervisor ---- */

static void answer_call(struct pdk_ctl_sb *sb, uint64_t req, json_t *msg, int *fds, size_t nfds)
{
	for (struct pdk_sb_call **p = &sb->calls; *p != NULL; p = &(*p)->next) {
		struct pdk_sb_call *call = *p;

		if (call->req != req)
			continue;
		*p = call->next;
		call->cb(sb, msg, fds, nfds, call->ctx);
		free(call);
		return;
	}
	pdk__close_fds(fds, nfds); /* an answer nobody waits for */
}

static void dispatch(struct pdk_ctl_sb *sb, json_t *msg, int *fds, size_t nfds)
{
	json_t *req = json_object_get(msg, "req");
	const char *ev = json_string_value(json_object_get(msg, "ev"));

	if (json_is_integer(req)) {
		answer_call(sb, (uint64_t)json_integer_value(req), msg, fds, nfds);
		return;
	}
	if (ev != NULL && strcmp(ev, "exit") == 0) {
		if (!pdk__warm_exited(sb, msg))
			pdk__exec_exited(sb, msg);
	} else if (ev != NULL && strcmp(ev, "events") == 0) {
		pdk__sb_ingest_later(sb);
	} else if (ev != NULL && strcmp(ev, "ended") == 0) {
		const char *why = json_string_value(json_object_get(msg, "reason"));

		free(sb->end_reason);
		sb->end_reason = pdk_xstrdup(why ? why : "ended");
	}
	/* An unknown message: its fds are closed. */
	pdk__close_fds(fds, nfds);
}

void pdk__sb_disconnect(struct pdk_ctl_sb *sb)
{
	pdk__ctl_unwatch(&sb->ctl_ev, &sb->ctl_fd);
}

void pdk__sb_fail_calls(struct pdk_ctl_sb *sb)
{
	while (sb->calls != NULL) {
		struct pdk_sb_call *call = sb->calls;

		sb->calls = call->next;
		call->cb(sb, NULL, NULL, 0, call->ctx);
		free(call);
	}
}

/*
 * A connection that ended with no end said: the supervisor died, or lives on
 * with another peer of our namespaces on its socket (a new connection
 * replaces the old one). A dead supervisor could not remove its sandbox's
 * cgroup: it is reaped now, from the file it wrote, before its directory
 * goes. A live one keeps its sandbox until the lost sandbox is deleted,
 * which kills it: the file's text is kept for that moment.
 */
static void lost_cgroup(struct pdk_ctl_sb *sb)
{
	/* Its socket closes as it exits, a moment before its pidfd says so. */
	struct pollfd pfd = {.fd = sb->pidfd, .events = POLLIN};
	bool dead = sb->pidfd >= 0 ? poll(&pfd, 1, LOST_EXIT_WAIT_MS) > 0
				   : sb->row.supervisor_pid > 1 &&
					     kill(sb->row.supervisor_pid, 0) < 0 && errno == ESRCH;

	if (dead)
		pdk__sb_reap_cgroup_file(sb);
	else if (sb->lost_cgroup == NULL)
		sb->lost_cgroup = pdk__sb_cgroup_text(sb); /* NULL: none written, nothing to reap */
}

static void lost_connection(struct pdk_ctl_sb *sb)
{
	pdk__sb_disconnect(sb);
	pdk__sb_fail_calls(sb);
	pdk__exec_abort_all(sb);
	/* Ended by itself (budget), destroyed on request, or its supervisor died. */
	if (sb->end_reason == NULL)
		sb->end_reason = pdk_xstrdup("supervisor_lost");
	if (sb->destroying || strcmp(sb->end_reason, "supervisor_lost") != 0) {
		pdk__sb_forget(sb, "ended");
		return;
	}
	lost_cgroup(sb);
	pdk__sb_forget(sb, "lost");
}

static void ctl_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl_sb *sb = arg;

	(void)what;
	for (int i = 0; i < 64; i++) {
		_cleanup_error_ struct pdk_error *err = NULL;
		_cleanup_json_ json_t *msg = NULL;
		int fds[PDK_SVC_MAX_FDS];
		size_t nfds = PDK_SVC_MAX_FDS;
		int rc = pdk_svc_recv(fd, &msg, fds, &nfds, &err);

		if (rc == -EAGAIN)
			return;
		if (rc <= 0) {
			lost_connection(sb);
			return;
		}
		dispatch(sb, msg, fds, nfds);
		if (sb->ctl_fd < 0)
			return;
	}
}

int pdk__sb_connect(struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/sb/%s/ctl.sock", sb->c->run_dir, sb->row.id);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_close_ int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	/* Non-blocking only after the connect: a local connect either works or fails at once. */
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	sb->ctl_fd = steal_fd(&fd);
	sb->ctl_ev = event_new(sb->c->base, sb->ctl_fd, EV_READ | EV_PERSIST, ctl_readable, sb);
	if (sb->ctl_ev == NULL || event_add(sb->ctl_ev, NULL) < 0)
		pdk_oom();
	return 0;
}

int pdk__sb_call(struct pdk_ctl_sb *sb, json_t *op, const int *fds, size_t nfds, pdk_sb_reply_cb cb,
		 void *ctx)
{
	_cleanup_json_ json_t *msg = op;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_sb_call *call;
	uint64_t req;

	if (sb->ctl_fd < 0)
		return -ENOTCONN;
	req = sb->next_req++;
	pdk_json_set(msg, "req", json_integer((json_int_t)req));
	if (pdk_svc_send(sb->ctl_fd, msg, fds, nfds, &err) < 0)
		return err ? -err->status : -EIO;
	call = pdk_xcalloc(1, sizeof(*call));
	call->req = req;
	call->cb = cb;
	call->ctx = ctx;
	call->next = sb->calls;
	sb->calls = call;
	return 0;
}
