/*
 * supervisor-loop.c - the supervisor's poll loop: the listening socket,
 * the one control connection, the signalfd and the sandbox's own
 * descriptors; the budgets it keeps (wall, cpu_time; commands is counted
 * by the execs); the nudges that tell the daemon the spool grew; and the
 * requests that are about the sandbox as a whole (status, pause, resume),
 * dispatched from here with the rest.
 */
#include "common.h"
#include "base.h"
#include "supervisor-internal.h"
#include "svc-proto.h"

#include <poll.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUDGET_CHECK_MS 100
#define NUDGE_MS        10 /* at most one {"ev":"events"} per this long */

uint64_t pdk__sv_wall_ns(const struct pdk_supervisor *s)
{
	uint64_t now = s->paused_since ? s->paused_since : pdk_now_mono_ns();

	return now - s->created_ns - s->paused_ns;
}

static void end_with(struct pdk_supervisor *s, const char *reason, const char *limit, json_t *value)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (s->ended != NULL)
		return;
	s->ended = reason;
	if (limit != NULL) {
		json_t *a = json_pack("{s:s, s:o}", "limit", limit, "value", value);

		(void)!pdk_events_emit(pdk_session_events(s->session), "limit.exceeded", 0, a,
				       &err);
	} else {
		json_decref(value);
	}
	pdk__sv_send(s, json_pack("{s:s, s:s}", "ev", "ended", "reason", reason), NULL, 0);
}

static void check_budgets(struct pdk_supervisor *s)
{
	struct pdk_sandbox_usage u;

	if (s->paused_since != 0)
		return;
	if (s->wall_limit_ns && pdk__sv_wall_ns(s) >= s->wall_limit_ns) {
		end_with(s, "wall", "wall",
			 json_integer((json_int_t)pdk__sv_policy(s)->limits.wall_ms));
		return;
	}
	if (s->cpu_limit_ns == 0)
		return;
	pdk_sandbox_usage(pdk__sv_sandbox(s), &u);
	if (s->cpu_base_ns + u.cpu_ns >= s->cpu_limit_ns)
		end_with(s, "cpu_time", "cpu_time",
			 json_integer((json_int_t)(s->cpu_limit_ns / PDK_SV_NSEC_PER_MS)));
}

/*
 * Tell the connected daemon that the spool grew, at most once per
 * NUDGE_MS; returns the ms until a nudge held back may go (-1: none).
 */
static int nudge(struct pdk_supervisor *s)
{
	uint64_t now = pdk_now_mono_ns();
	struct stat st;

	if (s->conn_fd < 0 || s->spool_fd < 0 || fstat(s->spool_fd, &st) < 0 ||
	    st.st_size == s->spool_told)
		return -1;
	if (now - s->nudge_ns < NUDGE_MS * PDK_SV_NSEC_PER_MS)
		return (int)((s->nudge_ns + NUDGE_MS * PDK_SV_NSEC_PER_MS - now) /
			     PDK_SV_NSEC_PER_MS) +
		       1;
	s->spool_told = st.st_size;
	s->nudge_ns = now;
	pdk__sv_send(s, json_pack("{s:s}", "ev", "events"), NULL, 0);
	return -1;
}

/* How long the loop may sleep: budgets, exec timeouts, the sandbox's own needs. */
static int loop_timeout_ms(struct pdk_supervisor *s)
{
	uint64_t now = pdk_now_mono_ns();
	uint64_t ms = UINT64_MAX;
	int sb_ms = pdk_sandbox_poll_timeout_ms(pdk__sv_sandbox(s));

	if (s->paused_since == 0 && s->wall_limit_ns) {
		uint64_t w = pdk__sv_wall_ns(s);

		ms = w >= s->wall_limit_ns
			     ? 0
			     : (s->wall_limit_ns - w + PDK_SV_NSEC_PER_MS - 1) / PDK_SV_NSEC_PER_MS;
	}
	if (s->paused_since == 0 && s->cpu_limit_ns && ms > BUDGET_CHECK_MS)
		ms = BUDGET_CHECK_MS;
	if (pdk__sv_exec_timeout_ms(s, now) < ms)
		ms = pdk__sv_exec_timeout_ms(s, now);
	if (sb_ms >= 0 && (uint64_t)sb_ms < ms)
		ms = (uint64_t)sb_ms;
	/* Events from the egress proxy's thread do not wake us: look again soon. */
	if (s->conn_fd >= 0 && pdk__sv_policy(s)->network.mode == PDK_NET_ALLOWLIST && ms > 100)
		ms = 100;
	return ms == UINT64_MAX ? -1 : ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* ---- status and pause ---- */

static json_t *usage_json(struct pdk_supervisor *s)
{
	struct pdk_sandbox_usage u;

	pdk_sandbox_usage(pdk__sv_sandbox(s), &u);
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "wall_ns",
			 (json_int_t)pdk__sv_wall_ns(s), "paused_ns",
			 (json_int_t)(s->paused_ns +
				      (s->paused_since ? pdk_now_mono_ns() - s->paused_since : 0)),
			 "cpu_ns", (json_int_t)(s->cpu_base_ns + u.cpu_ns), "memory_current",
			 (json_int_t)u.memory_current, "memory_peak", (json_int_t)u.memory_peak,
			 "pids_current", (json_int_t)u.pids_current, "commands",
			 (json_int_t)s->commands, "egress_bytes", (json_int_t)u.egress_bytes);
}

static json_t *limits_json(struct pdk_supervisor *s)
{
	const struct pdk_policy_limits *l = &pdk__sv_policy(s)->limits;

	return json_pack(
		"{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "wall_ns", (json_int_t)s->wall_limit_ns,
		"cpu_ns", (json_int_t)s->cpu_limit_ns, "memory", (json_int_t)l->memory, "pids",
		(json_int_t)l->pids, "commands", (json_int_t)s->commands_limit, "egress_bytes",
		(json_int_t)l->egress_bytes, "disk",
		(json_int_t)(pdk__sv_policy(s)->workspace.mode == PDK_WS_TMPFS ? l->disk : 0));
}

static void op_status(struct pdk_supervisor *s, json_int_t req)
{
	json_t *execs = json_array();

	for (size_t i = 0; i < s->n_execs; i++)
		json_array_append_new(execs, json_integer((json_int_t)s->execs[i].id));
	pdk__sv_send(
		s,
		json_pack("{s:I, s:s, s:s, s:i, s:i, s:I, s:o, s:o, s:o, s:o}", "req", req, "state",
			  s->ended          ? "ended"
			  : s->paused_since ? "paused"
					    : "running",
			  "id", s->id, "init_pid", (int)pdk_sandbox_init_pid(pdk__sv_sandbox(s)),
			  "supervisor_pid", (int)getpid(), "created_ns",
			  (json_int_t)s->created_real_ns, "usage", usage_json(s), "limits",
			  limits_json(s), "execs", execs, "facts", pdk__sv_facts(s)),
		NULL, 0);
}

static void op_pause(struct pdk_supervisor *s, json_int_t req, bool pause)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pause && s->paused_since == 0) {
		if (pdk_sandbox_pause(pdk__sv_sandbox(s), &err) < 0)
			return pdk__sv_reply_error(s, req,
						   err->status == EBUSY     ? "busy"
						   : err->status == ENOTSUP ? "conflict"
									    : "internal",
						   NULL, err);
		s->paused_since = pdk_now_mono_ns();
	} else if (!pause && s->paused_since != 0) {
		if (pdk_sandbox_resume(pdk__sv_sandbox(s), &err) < 0)
			return pdk__sv_reply_error(s, req, "internal", NULL, err);
		s->paused_ns += pdk_now_mono_ns() - s->paused_since;
		s->paused_since = 0;
	}
	pdk__sv_send(s, json_pack("{s:I, s:s}", "req", req, "state", pause ? "paused" : "running"),
		     NULL, 0);
}

static void handle(struct pdk_supervisor *s, json_t *msg, int *fds, size_t nfds)
{
	json_t *r = json_object_get(msg, "req");
	const char *op = json_string_value(json_object_get(msg, "op"));
	json_int_t req = json_is_integer(r) ? json_integer_value(r) : 0;

	if (op == NULL)
		pdk__sv_reply_errorx(s, req, "bad_request", "op", "no 'op'");
	else if (strcmp(op, "status") == 0)
		op_status(s, req);
	else if (s->ended != NULL && strcmp(op, "destroy") != 0)
		pdk__sv_reply_errorx(s, req, "conflict", NULL, "the sandbox has ended");
	else if (strcmp(op, "exec") == 0)
		pdk__sv_op_exec(s, req, msg, fds, nfds);
	else if (strcmp(op, "signal") == 0)
		pdk__sv_op_signal(s, req, msg);
	else if (strcmp(op, "pause") == 0 || strcmp(op, "resume") == 0)
		op_pause(s, req, op[0] == 'p');
	else if (strcmp(op, "diff") == 0)
		pdk__sv_op_diff(s, req, msg);
	else if (strcmp(op, "snapshots") == 0)
		pdk__sv_op_snapshots(s, req);
	else if (strcmp(op, "snapshot") == 0 || strcmp(op, "rollback") == 0 ||
		 strcmp(op, "commit") == 0)
		pdk__sv_op_ws(s, req, msg, op);
	else if (strcmp(op, "egress_allow") == 0)
		pdk__sv_op_egress_allow(s, req, msg);
	else if (strcmp(op, "destroy") == 0)
		s->destroy_requested = req ? req : -1;
	else if (!pdk__sv_file_op(s, op, req, msg))
		pdk__sv_reply_errorx(s, req, "bad_request", "op", "unknown op");
}

/* ---- the loop ---- */

enum { P_LISTEN, P_CONN, P_SIG, P_SB };

static void on_conn(struct pdk_supervisor *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int fds[PDK_SVC_MAX_FDS];
	size_t nfds = PDK_SVC_MAX_FDS;
	json_t *msg = NULL;
	int rc = pdk_svc_recv(s->conn_fd, &msg, fds, &nfds, &err);

	if (rc == -EAGAIN)
		return;
	if (rc == -EBADMSG || rc == -EMSGSIZE) {
		/* A malformed request is answered; the connection stays. */
		pdk__sv_reply_error(s, 0, "bad_request", NULL, err);
		return;
	}
	if (rc <= 0) {
		if (rc < 0 && err->status != ECONNRESET)
			pdk_log(s->log, PDK_LOG_WARN, "%s", err->msg);
		/* A closed connection: wait for the next one. */
		(void)close(s->conn_fd);
		s->conn_fd = -1;
		return;
	}
	handle(s, msg, fds, nfds);
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
	json_decref(msg);
}

static void on_accept(struct pdk_supervisor *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	int rc;

	if (fd < 0)
		return;
	/*
	 * SECURITY: the socket is 0600, but a sandboxed process has our uid: only a peer in
	 * our own user and pid namespaces (the daemon, which started us) may drive the
	 * sandbox, never a process of any sandbox that reached the path (base/peer.h).
	 */
	rc = pdk_peer_in_our_namespaces(fd, &err);
	if (rc <= 0) {
		pdk_log(s->log, PDK_LOG_WARN, "a connection to ctl.sock refused: %s",
			rc < 0 ? err->msg : "its peer is in another user or pid namespace");
		(void)close(fd);
		return;
	}
	/* One connection at a time: a new one replaces the old. */
	if (s->conn_fd >= 0)
		(void)close(s->conn_fd);
	s->conn_fd = fd;
}

int pdk__sv_serve(struct pdk_supervisor *s, struct pdk_error **err)
{
	_cleanup_free_ struct pollfd *pfd =
		pdk_xcalloc(P_SB + PDK_SANDBOX_MAX_POLLFDS, sizeof(*pfd));
	int held = -1; /* ms until a held-back nudge may go */

	while (s->ended == NULL && !s->destroy_requested) {
		size_t n = pdk_sandbox_pollfds(pdk__sv_sandbox(s), pfd + P_SB,
					       PDK_SANDBOX_MAX_POLLFDS);
		int timeout = loop_timeout_ms(s);
		int rc;

		pfd[P_LISTEN] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
		pfd[P_CONN] = (struct pollfd){.fd = s->conn_fd, .events = POLLIN};
		pfd[P_SIG] = (struct pollfd){.fd = s->sig_fd, .events = POLLIN};
		if (held >= 0 && (timeout < 0 || held < timeout))
			timeout = held;
		rc = poll(pfd, P_SB + n, timeout);
		if (rc < 0 && errno != EINTR)
			return pdk_error_set(err, errno, "poll");
		if (rc < 0)
			continue;
		if (pfd[P_SIG].revents) {
			struct signalfd_siginfo si;

			while (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				s->destroy_requested = -1;
		}
		if (n > 0 && pdk_sandbox_dispatch(pdk__sv_sandbox(s), pfd + P_SB, n, err) < 0)
			return -1;
		pdk__sv_drain_procs(s);
		pdk_sandbox_sweep(pdk__sv_sandbox(s));
		pdk__sv_check_exec_timeouts(s);
		if (pfd[P_LISTEN].revents)
			on_accept(s);
		else if (pfd[P_CONN].revents)
			on_conn(s);
		if (!pdk_sandbox_alive(pdk__sv_sandbox(s)))
			end_with(s, "init_lost", NULL, NULL);
		check_budgets(s);
		held = nudge(s);
	}
	return 0;
}
