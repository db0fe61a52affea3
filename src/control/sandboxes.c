/*
 * sandboxes.c - the daemon's side of each sandbox: start its supervisor,
 * wait for it without blocking, talk to it over its control socket, time
 * it out, destroy it, re-adopt it after a restart.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "daemon-internal.h"
#include "engine.h"
#include "supervisor.h"
#include "telemetry.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define STATUS_EVERY_NS (1000ULL * 1000 * 1000)
#define INGEST_MAX      (1u << 20)

struct pdk_sb *pdk__sb_find(struct pdk_daemon *d, const char *id)
{
	for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = sb->next)
		if (strcmp(sb->row.id, id) == 0)
			return sb;
	return NULL;
}

size_t pdk__sb_count(struct pdk_daemon *d)
{
	size_t n = 0;

	for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = sb->next)
		n++;
	return n;
}

static char *sb_dir(struct pdk_sb *sb)
{
	return pdk_xasprintf("%s/sb/%s", sb->d->run_dir, sb->row.id);
}

void pdk__sb_save(struct pdk_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	sb->dirty = false;
	if (pdk_store_sandbox_update(sb->d->store, &sb->row, &err) < 0 && !sb->d->quiet)
		fprintf(stderr, "paddock serve: %s\n", err->msg);
}

static void set_state(struct pdk_sb *sb, const char *state)
{
	free(sb->row.state);
	sb->row.state = pdk_xstrdup(state);
	pdk__sb_save(sb);
}

static void free_event(struct event **ev)
{
	if (*ev != NULL)
		event_free(*ev);
	*ev = NULL;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
	*fd = -1;
}

static void fail_calls(struct pdk_sb *sb);

static void sb_free(struct pdk_sb *sb)
{
	fail_calls(sb);
	free_event(&sb->ctl_ev);
	free_event(&sb->ready_ev);
	free_event(&sb->ingest_ev);
	close_fd(&sb->ctl_fd);
	close_fd(&sb->ready_fd);
	close_fd(&sb->pidfd);
	while (sb->waiters != NULL) {
		struct pdk_sb_waiter *w = sb->waiters;

		sb->waiters = w->next;
		pdk__http_error(w->req, 503, "unavailable", NULL, "the daemon is shutting down");
		free(w);
	}
	if (sb->destroy_req != NULL)
		pdk__http_error(sb->destroy_req, 503, "unavailable", NULL,
				"the daemon is shutting down");
	json_decref(sb->labels);
	json_decref(sb->limits);
	json_decref(sb->status);
	json_decref(sb->warm_exec);
	free(sb->end_reason);
	pdk_store_sandbox_release(&sb->row);
	free(sb);
}

static void sb_unlink(struct pdk_sb *sb)
{
	for (struct pdk_sb **p = &sb->d->sandboxes; *p != NULL; p = &(*p)->next) {
		if (*p == sb) {
			*p = sb->next;
			return;
		}
	}
}

void pdk__sb_free_all(struct pdk_daemon *d)
{
	while (d->sandboxes != NULL) {
		struct pdk_sb *sb = d->sandboxes;

		d->sandboxes = sb->next;
		pdk__exec_abort_all(sb);
		if (sb->dirty) /* an exec's charge not saved yet */
			pdk__sb_save(sb);
		sb_free(sb);
	}
}

static struct pdk_sb *sb_new(struct pdk_daemon *d)
{
	struct pdk_sb *sb = pdk_xcalloc(1, sizeof(*sb));

	sb->d = d;
	sb->ctl_fd = sb->ready_fd = sb->pidfd = -1;
	sb->next_req = 1;
	sb->last_active_ns = pdk_now_mono_ns();
	sb->next = d->sandboxes;
	d->sandboxes = sb;
	return sb;
}

/* ---- JSON view ---- */

static json_t *ts_or_null(uint64_t ns)
{
	char buf[40];

	if (ns == 0)
		return json_null();
	pdk_events_format_ts(ns, buf, sizeof(buf));
	return json_string(buf);
}

static uint64_t limit_of(struct pdk_sb *sb, const char *key)
{
	json_t *v = json_object_get(sb->limits, key);
	uint64_t n = 0;

	if (json_is_integer(v))
		return (uint64_t)json_integer_value(v);
	if (json_is_string(v) && pdk_parse_size(json_string_value(v), &n) == 0)
		return n;
	return 0;
}

static uint64_t output_limit(struct pdk_sb *sb)
{
	uint64_t n = limit_of(sb, "output_bytes");

	return n ? n : limit_of(sb, "output");
}

/* usage, limits, remaining: the supervisor's last status plus the daemon's own counters. */
static void add_budgets(struct pdk_sb *sb, json_t *o)
{
	json_t *usage = json_deep_copy(json_object_get(sb->status, "usage"));
	json_t *limits = json_deep_copy(json_object_get(sb->status, "limits"));
	json_t *remaining = json_object();
	const char *k;
	json_t *v;

	if (!json_is_object(usage))
		usage = (json_decref(usage), json_object());
	if (!json_is_object(limits))
		limits = (json_decref(limits), json_object());
	pdk_json_set(usage, "output_bytes", json_integer((json_int_t)sb->row.output_bytes));
	pdk_json_set(usage, "commands", json_integer((json_int_t)sb->row.commands));
	pdk_json_set(limits, "output_bytes", json_integer((json_int_t)output_limit(sb)));
	/* Before the supervisor's first status (the create answer): the request's own. */
	static const char *const asked[] = {"commands", "egress_bytes", "disk"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(asked); i++)
		if (json_integer_value(json_object_get(limits, asked[i])) == 0 &&
		    limit_of(sb, asked[i]) > 0)
			pdk_json_set(limits, asked[i],
				     json_integer((json_int_t)limit_of(sb, asked[i])));
	json_object_foreach(limits, k, v)
	{
		json_int_t lim = json_integer_value(v);
		json_t *u = json_object_get(usage, k);
		json_int_t used = json_integer_value(u);

		/* Only what is both counted and bounded (memory, pids: no running total). */
		if (lim > 0 && json_is_integer(u))
			pdk_json_set(remaining, k, json_integer(used >= lim ? 0 : lim - used));
	}
	pdk_json_set(o, "usage", usage);
	pdk_json_set(o, "limits", limits);
	pdk_json_set(o, "remaining", remaining);
}

/* The create token's scope and lifetime: the create's "token", else every op for 24 h. */
static unsigned token_ops(const struct pdk_sb *sb)
{
	return sb->token_ops ? sb->token_ops : PDK_TOKEN_OPS_ALL;
}

static uint64_t token_ttl_s(const struct pdk_sb *sb)
{
	return sb->token_ttl_s ? sb->token_ttl_s : PDK_REQ_TOKEN_TTL_MAX;
}

static int mint_create_token(struct pdk_sb *sb, char **token, struct pdk_error **err)
{
	return pdk_token_mint(sb->d->key, sb->row.id, token_ops(sb),
			      pdk_now_real_ns() / 1000000000ULL + token_ttl_s(sb), token, err);
}

json_t *pdk__sb_json(struct pdk_sb *sb, const char *token)
{
	json_t *o = json_object();

	pdk_json_set(o, "id", json_string(sb->row.id));
	pdk_json_set(o, "state", json_string(sb->row.state));
	pdk_json_set(o, "profile", json_string(sb->row.profile));
	pdk_json_set(o, "labels", json_incref(sb->labels));
	pdk_json_set(o, "created_at", ts_or_null(sb->row.created_ns));
	pdk_json_set(o, "expires_at", ts_or_null(sb->row.expires_ns));
	pdk_json_set(o, "idle_timeout_s", json_integer((json_int_t)sb->row.idle_timeout_s));
	pdk_json_set(o, "pool", json_boolean(sb->row.claimed));
	pdk_json_set(o, "supervisor_pid", json_integer(sb->row.supervisor_pid));
	if (token != NULL) {
		pdk_json_set(o, "token", json_string(token));
		pdk_json_set(o, "token_expires_at",
			     ts_or_null(pdk_now_real_ns() + token_ttl_s(sb) * 1000000000ULL));
		pdk_json_set(o, "token_ops", pdk_token_ops_json(token_ops(sb)));
	}
	add_budgets(sb, o);
	return o;
}

/* ---- budgets ---- */

bool pdk__sb_budget_ok(struct pdk_sb *sb, const char **what)
{
	uint64_t out = output_limit(sb), cmds = limit_of(sb, "commands");

	if (out > 0 && sb->row.output_bytes >= out) {
		*what = "output_bytes";
		return false;
	}
	if (cmds > 0 && sb->row.commands >= cmds) {
		*what = "commands";
		return false;
	}
	return true;
}

void pdk__sb_charge(struct pdk_sb *sb, uint64_t output_bytes, uint64_t commands)
{
	sb->row.output_bytes += output_bytes;
	sb->row.commands += commands;
	sb->last_active_ns = pdk_now_mono_ns();
	pdk__sb_save(sb);
}

void pdk__sb_charge_exec(struct pdk_sb *sb, uint64_t output_bytes, uint64_t commands)
{
	sb->row.output_bytes += output_bytes;
	sb->row.commands += commands;
	sb->last_active_ns = pdk_now_mono_ns();
	if (output_bytes != 0 || commands != 0)
		sb->dirty = true;
}

/* ---- control socket ---- */

static void sb_lost_connection(struct pdk_sb *sb);

/*
 * The supervisor's nudge comes while the exec that wrote the events (its
 * process.exec) still runs: ingesting then (an audit transaction, the row's
 * save, the fan-out) would take the CPU from that exec and delay its answer.
 * While an exec of the sandbox runs, the ingest waits until that exec has
 * answered (pdk__sb_ingest_soon), at most INGEST_HOLD_MS; nothing is lost
 * meanwhile: the spool keeps the events and the offset says what is new.
 */
#define INGEST_HOLD_MS 50

static void ingest_due(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_sb *sb = arg;

	(void)fd;
	(void)what;
	pdk__sb_ingest(sb);
	if (sb->dirty) /* the ingest found nothing new: the exec's charge is saved alone */
		pdk__sb_save(sb);
}

static void ingest_arm(struct pdk_sb *sb, uint64_t ms)
{
	struct timeval tv = {0, (suseconds_t)(ms * 1000)};

	if (sb->ingest_ev == NULL &&
	    (sb->ingest_ev = evtimer_new(sb->d->base, ingest_due, sb)) == NULL)
		pdk_oom();
	if (evtimer_add(sb->ingest_ev, &tv) < 0)
		pdk_oom();
}

static void ingest_later(struct pdk_sb *sb)
{
	/*
	 * With no exec running, on the loop's next turn: the nudge often comes
	 * in the same read as an exec's exit, whose answer is queued but not yet
	 * written; a zero timer runs after that write.
	 */
	if (sb->execs == NULL) {
		ingest_arm(sb, 0);
		return;
	}
	if (sb->ingest_ev == NULL || !evtimer_pending(sb->ingest_ev, NULL))
		ingest_arm(sb, INGEST_HOLD_MS);
}

void pdk__sb_ingest_soon(struct pdk_sb *sb)
{
	/* A zero timer runs on the loop's next turn, after the answer's write (see refill). */
	if (sb->dirty || (sb->ingest_ev != NULL && evtimer_pending(sb->ingest_ev, NULL)))
		ingest_arm(sb, 0);
}

/*
 * The warm-up of a pool member. The first command in a fresh sandbox costs
 * about 1.5 ms more than the next ones (the init's first vfork, the
 * tracer's first notification, the first exec of the program in the new
 * mount namespace: page tables, dentries, the cgroup's first charges).
 * A pool member therefore runs `true` once, with /dev/null as its stdio,
 * before it can be claimed: the claimer's first exec is then as fast as
 * any other. The exec is recorded like any other (the supervisor marks it
 * "warm" and does not charge it to the commands budget).
 */
#define WARM_TIMEOUT_MS 5000

static void warm_done(struct pdk_sb *sb, json_t *exit)
{
	const char *end = json_string_value(json_object_get(exit, "end"));

	if (end == NULL || strcmp(end, "exited") != 0 ||
	    json_integer_value(json_object_get(exit, "exit_code")) != 0)
		pdk__daemon_event(sb->d, sb->row.id, sb->labels, "pool.warm_failed",
				  json_pack("{s:O}", "exit", exit));
	sb->warming = false;
	json_decref(sb->warm_exec);
	sb->warm_exec = NULL;
}

static void warm_started(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	(void)ctx;
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
	if (reply == NULL || json_object_get(reply, "error") != NULL) {
		/* Claimable anyway: the warm-up is an optimisation, not a check. */
		if (reply != NULL)
			pdk__daemon_event(
				sb->d, sb->row.id, sb->labels, "pool.warm_failed",
				json_pack("{s:O}", "error", json_object_get(reply, "error")));
		sb->warming = false;
		return;
	}
	sb->warm_exec = json_incref(json_object_get(reply, "exec"));
}

static void warm_start(struct pdk_sb *sb)
{
	int null[3] = {-1, -1, -1};
	json_t *op;

	for (int i = 0; i < 3; i++)
		if ((null[i] = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
			goto out;
	op = json_pack("{s:s, s:[s], s:[], s:I, s:b, s:b}", "op", "exec", "argv", "true", "env",
		       "timeout_ms", (json_int_t)WARM_TIMEOUT_MS, "pty", 0, "warm", 1);
	if (pdk__sb_call(sb, op, null, 3, warm_started, NULL) == 0)
		sb->warming = true;
out:
	for (int i = 0; i < 3; i++)
		if (null[i] >= 0)
			(void)close(null[i]);
}

static void dispatch(struct pdk_sb *sb, json_t *msg, int *fds, size_t nfds)
{
	json_t *req = json_object_get(msg, "req");
	const char *ev = json_string_value(json_object_get(msg, "ev"));

	if (json_is_integer(req)) {
		for (struct pdk_sb_call **p = &sb->calls; *p != NULL; p = &(*p)->next) {
			struct pdk_sb_call *c = *p;

			if (c->req != (uint64_t)json_integer_value(req))
				continue;
			*p = c->next;
			c->cb(sb, msg, fds, nfds, c->ctx);
			free(c);
			return;
		}
	} else if (ev != NULL && strcmp(ev, "exit") == 0) {
		if (sb->warming && sb->warm_exec != NULL &&
		    json_equal(sb->warm_exec, json_object_get(msg, "exec")))
			warm_done(sb, msg);
		else
			pdk__exec_exited(sb, msg);
	} else if (ev != NULL && strcmp(ev, "events") == 0) {
		ingest_later(sb);
	} else if (ev != NULL && strcmp(ev, "ended") == 0) {
		const char *why = json_string_value(json_object_get(msg, "reason"));

		free(sb->end_reason);
		sb->end_reason = pdk_xstrdup(why ? why : "ended");
	}
	/* An answer nobody waits for, or an unknown message: its fds are closed. */
	for (size_t i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			(void)close(fds[i]);
}

static void ctl_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_sb *sb = arg;

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
			sb_lost_connection(sb);
			return;
		}
		dispatch(sb, msg, fds, nfds);
		if (sb->ctl_fd < 0)
			return;
	}
}

static int ctl_connect(struct pdk_sb *sb)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/sb/%s/ctl.sock", sb->d->run_dir, sb->row.id);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		(void)close(fd);
		return -e;
	}
	/* Non-blocking only after the connect: a local connect either works or fails at once. */
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		(void)close(fd);
		return -errno;
	}
	sb->ctl_fd = fd;
	sb->ctl_ev = event_new(sb->d->base, fd, EV_READ | EV_PERSIST, ctl_readable, sb);
	if (sb->ctl_ev == NULL || event_add(sb->ctl_ev, NULL) < 0)
		pdk_oom();
	return 0;
}

int pdk__sb_call(struct pdk_sb *sb, json_t *op, const int *fds, size_t nfds, pdk_sb_reply_cb cb,
		 void *ctx)
{
	_cleanup_json_ json_t *msg = op;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_sb_call *c;
	uint64_t req;

	if (sb->ctl_fd < 0)
		return -ENOTCONN;
	req = sb->next_req++;
	pdk_json_set(msg, "req", json_integer((json_int_t)req));
	if (pdk_svc_send(sb->ctl_fd, msg, fds, nfds, &err) < 0)
		return err ? -err->status : -EIO;
	c = pdk_xcalloc(1, sizeof(*c));
	c->req = req;
	c->cb = cb;
	c->ctx = ctx;
	c->next = sb->calls;
	sb->calls = c;
	return 0;
}

/* ---- the end of a sandbox ---- */

/*
 * The row leaves `sandboxes` for `ended` (one transaction) with the final API
 * object, unless retention is off or it was an unclaimed pool member (never
 * anyone's): then it is just deleted.
 */
static void store_end(struct pdk_sb *sb, const char *reason)
{
	struct pdk_daemon *d = sb->d;
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *o = NULL;
	_cleanup_free_ char *text = NULL;
	struct pdk_store_ended e;
	uint64_t now = pdk_now_real_ns();
	char ts[40];

	if (d->retention_ns == 0 || sb->row.pool) {
		if (pdk_store_sandbox_delete(d->store, sb->row.id, &err) < 0 && !d->quiet)
			fprintf(stderr, "paddock serve: %s\n", err->msg);
		return;
	}
	o = pdk__sb_json(sb, NULL);
	pdk_events_format_ts(now, ts, sizeof(ts));
	pdk_json_set(o, "state", json_string("ended"));
	pdk_json_set(o, "end_reason", json_string(reason));
	pdk_json_set(o, "ended_at", json_string(ts));
	text = json_dumps(o, JSON_COMPACT);
	if (text == NULL)
		pdk_oom();
	e = (struct pdk_store_ended){.id = sb->row.id,
				     .idempotency_key = sb->row.idempotency_key,
				     .ended_ns = now,
				     .reason = (char *)reason,
				     .sandbox = text};
	if (pdk_store_sandbox_end(d->store, &e, &err) < 0) {
		if (!d->quiet)
			fprintf(stderr, "paddock serve: %s\n", err->msg);
		pdk_error_free(&err);
		if (pdk_store_sandbox_delete(d->store, sb->row.id, &err) < 0 && !d->quiet)
			fprintf(stderr, "paddock serve: %s\n", err->msg);
	}
}

json_t *pdk__sb_ended(struct pdk_daemon *d, const char *id)
{
	struct pdk_store_ended e;
	json_t *o;

	if (pdk_store_ended_get(d->store, id, &e, NULL) < 0)
		return NULL;
	o = json_loads(e.sandbox, 0, NULL);
	pdk_store_ended_release(&e);
	if (!json_is_object(o))
		return (json_decref(o), NULL);
	return o;
}

/* Forget the sandbox: spool ingested, run dir removed, row moved to the ended ones. */
static void sb_forget(struct pdk_sb *sb, const char *final_state)
{
	struct pdk_daemon *d = sb->d;
	_cleanup_free_ char *dir = sb_dir(sb);
	struct evhttp_request *req = steal_ptr(&sb->destroy_req);

	pdk__exec_abort_all(sb);
	pdk__sb_ingest(sb);
	(void)!pdk_audit_spool_forget(d->audit, sb->row.id, NULL); /* the spool is removed below */
	pdk__daemon_event(d, sb->row.id, sb->labels, "sandbox.destroy",
			  json_pack("{s:s, s:s}", "reason",
				    sb->end_reason ? sb->end_reason : "destroyed", "state",
				    final_state));
	if (strcmp(final_state, "lost") == 0) {
		/* A lost sandbox stays listed (state lost) until it is deleted. */
		set_state(sb, "lost");
		free_event(&sb->ctl_ev);
		close_fd(&sb->ctl_fd);
		(void)!pdk_rm_rf_at(AT_FDCWD, dir);
		if (req != NULL)
			pdk__http_json(req, 200,
				       json_pack("{s:s, s:s}", "id", sb->row.id, "state", "lost"));
		return;
	}
	(void)!pdk_rm_rf_at(AT_FDCWD, dir); /* what the supervisor left: the ingested spool */
	store_end(sb, sb->end_reason ? sb->end_reason : "destroyed");
	if (req != NULL)
		pdk__http_json(req, 200,
			       json_pack("{s:s, s:s}", "id", sb->row.id, "state", "ended"));
	sb_unlink(sb);
	sb_free(sb);
}

static void fail_calls(struct pdk_sb *sb)
{
	while (sb->calls != NULL) {
		struct pdk_sb_call *c = sb->calls;

		sb->calls = c->next;
		c->cb(sb, NULL, NULL, 0, c->ctx);
		free(c);
	}
}

static void sb_lost_connection(struct pdk_sb *sb)
{
	free_event(&sb->ctl_ev);
	close_fd(&sb->ctl_fd);
	fail_calls(sb);
	pdk__exec_abort_all(sb);
	/* Ended by itself (budget), destroyed on request, or its supervisor died. */
	if (sb->end_reason == NULL)
		sb->end_reason = pdk_xstrdup("supervisor_lost");
	sb_forget(sb, sb->destroying || strcmp(sb->end_reason, "supervisor_lost") != 0 ? "ended"
										       : "lost");
}

static void destroyed(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	(void)reply;
	(void)fds;
	(void)nfds;
	(void)ctx;
	/* The supervisor closes the socket after its answer; the close finishes the job. */
	(void)sb;
}

void pdk__sb_destroy(struct pdk_sb *sb, const char *reason, struct evhttp_request *req)
{
	if (sb->destroy_req != NULL && req != NULL) {
		pdk__http_error(req, 409, "conflict", NULL, "sandbox '%s' is being destroyed",
				sb->row.id);
		return;
	}
	if (req != NULL)
		sb->destroy_req = req;
	if (sb->destroying)
		return;
	sb->destroying = true;
	/* A lost sandbox being deleted keeps why it ended (its supervisor died). */
	if (strcmp(sb->row.state, "lost") != 0 || sb->end_reason == NULL) {
		free(sb->end_reason);
		sb->end_reason = pdk_xstrdup(reason);
	}
	if (sb->ctl_fd < 0 ||
	    pdk__sb_call(sb, json_pack("{s:s, s:s}", "op", "destroy", "reason", reason), NULL, 0,
			 destroyed, NULL) < 0) {
		/* No supervisor to ask (lost, or never answered): forget it now. */
		if (sb->row.supervisor_pid > 0 && sb->pidfd >= 0)
			(void)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
		sb_forget(sb, "ended");
	}
}

/* ---- the spool ---- */

static void stamp_labels(struct pdk_sb *sb, json_t *e)
{
	static const char *const keys[] = {"session", "workflow"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(keys); i++) {
		json_t *v = json_object_get(sb->labels, keys[i]);

		if (json_is_string(v) && !json_is_string(json_object_get(e, keys[i])))
			json_object_set(e, keys[i], v);
	}
	if (json_object_size(sb->labels) > 0)
		json_object_set(e, "labels", sb->labels);
	/* Only the sandbox's own id: a supervisor cannot write into another's history. */
	pdk_json_set(e, "sandbox", json_string(sb->row.id));
}

void pdk__sb_ingest(struct pdk_sb *sb)
{
	_cleanup_free_ char *path =
		pdk_xasprintf("%s/sb/%s/events.jsonl", sb->d->run_dir, sb->row.id);
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t **events = NULL;
	size_t n = 0, used = 0;
	ssize_t got;

	if (fd < 0)
		return;
	buf = pdk_xmalloc(INGEST_MAX + 1);
	got = TEMP_FAILURE_RETRY(pread(fd, buf, INGEST_MAX, (off_t)sb->row.spool_offset));
	if (got <= 0)
		return;
	for (char *p = buf, *nl; (nl = memchr(p, '\n', (size_t)(buf + got - p))) != NULL;
	     p = nl + 1) {
		json_t *e = json_loadb(p, (size_t)(nl - p), 0, NULL);

		used = (size_t)(nl + 1 - buf);
		if (!json_is_object(e) || !json_is_string(json_object_get(e, "kind"))) {
			json_decref(e); /* a line that is not an event is skipped, not stored */
			continue;
		}
		stamp_labels(sb, e);
		events = pdk_xrealloc(events, (n + 1) * sizeof(*events));
		events[n++] = e;
	}
	/* The batch and the new offset in one audit.db transaction (daemon.db's copy follows). */
	if (used > 0 && pdk_audit_append_spool(sb->d->audit, events, n, sb->row.id,
					       sb->row.spool_offset + used, &err) < 0) {
		if (!sb->d->quiet)
			fprintf(stderr, "paddock serve: ingest %s: %s\n", sb->row.id, err->msg);
		used = 0; /* kept for the next pass: nothing is lost */
	}
	for (size_t i = 0; i < n; i++)
		json_decref(events[i]);
	free(events);
	if (used > 0) {
		sb->row.spool_offset += used;
		pdk__sb_save(sb);
		pdk__daemon_fanout(sb->d);
	}
	/* A full buffer: there may be more (each pass reads at most INGEST_MAX). */
	if (used > 0 && (size_t)got == INGEST_MAX)
		pdk__sb_ingest(sb);
}

/* ---- create: start the supervisor, wait on its ready pipe ---- */

struct spawn_arg {
	int exe_fd, spec_fd, ready_fd, null_fd, log_fd;
	char *const *argv;
	char *const *envp;
};

/* The child, sharing our memory until execveat (pdk_proc_clone): only system calls here. */
static int spawn_child(void *p)
{
	const struct spawn_arg *a = p;

	if (setsid() < 0 || dup2(a->spec_fd, 3) < 0 || dup2(a->ready_fd, 4) < 0 ||
	    dup2(a->null_fd, 0) < 0 || dup2(a->log_fd, 1) < 0 || dup2(a->log_fd, 2) < 0)
		_exit(127);
	/* Every other descriptor of the daemon is close-on-exec: nothing else is inherited. */
	(void)syscall(SYS_close_range, 5U, ~0U, CLOSE_RANGE_CLOEXEC);
	syscall(SYS_execveat, a->exe_fd, "", a->argv, a->envp, AT_EMPTY_PATH);
	_exit(127);
}

static void reply_waiters(struct pdk_sb *sb, const char *error_msg)
{
	while (sb->waiters != NULL) {
		struct pdk_sb_waiter *w = sb->waiters;
		_cleanup_free_ char *token = NULL;
		_cleanup_error_ struct pdk_error *err = NULL;

		sb->waiters = w->next;
		if (error_msg != NULL) {
			pdk__http_error(w->req, 500, "internal", NULL,
					"sandbox could not be created: %s", error_msg);
		} else if (mint_create_token(sb, &token, &err) < 0) {
			pdk__http_status_error(w->req, err->status, err->msg);
		} else {
			pdk__http_json(w->req, w->code, pdk__sb_json(sb, token));
		}
		free(w);
	}
}

static void status_answer(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	const char *state = json_string_value(json_object_get(reply, "state"));

	(void)fds;
	(void)nfds;
	(void)ctx;
	if (reply == NULL || json_object_get(reply, "error") != NULL)
		return;
	json_decref(sb->status);
	sb->status = json_incref(reply);
	if (state != NULL && !sb->destroying &&
	    (strcmp(state, "running") == 0 || strcmp(state, "paused") == 0) &&
	    strcmp(state, sb->row.state) != 0)
		set_state(sb, state);
}

static void create_failed(struct pdk_sb *sb, const char *msg)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *dir = sb_dir(sb);

	pdk__daemon_event(sb->d, sb->row.id, sb->labels, "sandbox.create_failed",
			  json_pack("{s:s}", "error", msg));
	reply_waiters(sb, msg);
	/* The supervisor is reaped by the SIGCHLD handler (serve.c) whenever it ends. */
	if (sb->pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
	pdk__sb_ingest(sb);
	(void)!pdk_audit_spool_forget(sb->d->audit, sb->row.id, NULL);
	(void)!pdk_rm_rf_at(AT_FDCWD, dir);
	(void)!pdk_store_sandbox_delete(sb->d->store, sb->row.id, &err);
	sb_unlink(sb);
	sb_free(sb);
}

static void ready_done(struct pdk_sb *sb)
{
	_cleanup_json_ json_t *j = json_loadb(sb->ready_buf, sb->ready_len, 0, NULL);
	json_t *e = json_object_get(j, "error");
	int rc;

	free_event(&sb->ready_ev);
	close_fd(&sb->ready_fd);
	if (!json_is_true(json_object_get(j, "ok"))) {
		const char *m = json_string_value(json_object_get(e, "message"));
		const char *step = json_string_value(json_object_get(e, "step"));
		_cleanup_free_ char *msg = NULL;

		if (j == NULL)
			msg = pdk_xstrdup("the supervisor ended without a ready message");
		else
			msg = pdk_xasprintf("%s%s%s", step ? step : "", step ? ": " : "",
					    m ? m : "failed");
		create_failed(sb, msg);
		return;
	}
	sb->init_pid = (pid_t)json_integer_value(json_object_get(j, "init_pid"));
	rc = ctl_connect(sb);
	if (rc < 0) {
		_cleanup_free_ char *msg =
			pdk_xasprintf("cannot connect to the supervisor: %s", strerror(-rc));
		create_failed(sb, msg);
		return;
	}
	set_state(sb, "running");
	pdk__daemon_event(sb->d, sb->row.id, sb->labels, "sandbox.create",
			  json_pack("{s:s, s:i, s:b}", "profile", sb->row.profile, "supervisor_pid",
				    (int)sb->row.supervisor_pid, "pool", sb->row.pool));
	(void)!pdk__sb_call(sb, json_pack("{s:s}", "op", "status"), NULL, 0, status_answer, NULL);
	if (sb->row.pool)
		warm_start(sb);
	reply_waiters(sb, NULL);
}

static void ready_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_sb *sb = arg;
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

static int spawn(struct pdk_sb *sb, const char *spec, struct pdk_error **err)
{
	struct pdk_daemon *d = sb->d;
	_cleanup_close_ int spec_fd = -1, ready_r = -1, ready_w = -1, null_fd = -1, log_fd = -1;
	_cleanup_free_ char *dir = NULL, *log_path = NULL;
	_cleanup_strv_ char **argv = NULL;
	int pipefd[2];
	struct spawn_arg a;
	pid_t pid;

	spec_fd = memfd_create("paddock-spec", MFD_CLOEXEC);
	if (spec_fd < 0 || pdk_write_all(spec_fd, spec, strlen(spec)) < 0 ||
	    lseek(spec_fd, 0, SEEK_SET) < 0)
		return pdk_error_set(err, errno, "spec for the supervisor");
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return pdk_error_set(err, errno, "ready pipe");
	ready_r = pipefd[0];
	ready_w = pipefd[1];
	null_fd = TEMP_FAILURE_RETRY(open("/dev/null", O_RDWR | O_CLOEXEC));
	if (null_fd < 0)
		return pdk_error_set(err, errno, "open /dev/null");
	/* The supervisor's stdout and stderr: RUNDIR/sb/ID/log (contract). */
	dir = sb_dir(sb);
	if (mkdir(dir, 0700) < 0)
		return pdk_error_set(err, errno, "mkdir '%s'", dir);
	log_path = pdk_xasprintf("%s/log", dir);
	log_fd = TEMP_FAILURE_RETRY(
		open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
	if (log_fd < 0)
		return pdk_error_set(err, errno, "open '%s'", log_path);
	/* Above 4, so that the child's dup2 onto 3 and 4 never overwrites one of them. */
	pdk_strv_push(&argv, "paddock");
	pdk_strv_push(&argv, "supervise");
	pdk_strv_push(&argv, "--id");
	pdk_strv_push(&argv, sb->row.id);
	pdk_strv_push(&argv, "--spec-fd");
	pdk_strv_push(&argv, "3");
	pdk_strv_push(&argv, "--ready-fd");
	pdk_strv_push(&argv, "4");
	a = (struct spawn_arg){.exe_fd = d->exe_fd,
			       .null_fd = null_fd,
			       .log_fd = log_fd,
			       .argv = argv,
			       .envp = environ};
	a.spec_fd = fcntl(spec_fd, F_DUPFD_CLOEXEC, 10);
	a.ready_fd = fcntl(ready_w, F_DUPFD_CLOEXEC, 10);
	if (a.spec_fd < 0 || a.ready_fd < 0) {
		close_fd(&a.spec_fd);
		close_fd(&a.ready_fd);
		return pdk_error_set(err, errno, "dup");
	}
	pid = pdk_proc_clone(0, spawn_child, &a, &sb->pidfd, err);
	close_fd(&a.spec_fd);
	close_fd(&a.ready_fd);
	if (pid < 0)
		return -EIO;
	sb->row.supervisor_pid = pid;
	if (fcntl(ready_r, F_SETFL, O_NONBLOCK) < 0)
		return pdk_error_set(err, errno, "ready pipe");
	sb->ready_fd = steal_fd(&ready_r);
	sb->ready_ev = event_new(d->base, sb->ready_fd, EV_READ | EV_PERSIST, ready_readable, sb);
	if (sb->ready_ev == NULL || event_add(sb->ready_ev, NULL) < 0)
		pdk_oom();
	return 0;
}

static json_t *make_spec(struct pdk_daemon *d, const char *id, struct pdk_req_create *cr)
{
	json_t *ws = cr->workspace ? json_deep_copy(cr->workspace) : json_object();

	if (json_object_get(ws, "path") == NULL)
		pdk_json_set(ws, "path", json_null());
	if (json_object_get(ws, "mode") == NULL)
		pdk_json_set(ws, "mode", json_string("overlay"));
	/* "o" takes each value: the request's are increfed, the defaults are new. */
	json_t *spec = json_pack(
		"{s:s, s:s, s:n, s:o, s:o, s:o, s:O, s:s, s:s, s:{s:b}}", "id", id, "profile",
		cr->profile, "policy_file", "overrides",
		cr->overrides ? json_incref(cr->overrides) : json_object(), "workspace", ws, "env",
		cr->env ? json_incref(cr->env) : json_object(), "labels", cr->labels, "state_dir",
		d->state_dir, "run_dir", d->run_dir, "audit", "exec_trace", 1);

	/* The create token's scope, kept for a repeated create after a restart (the supervisor
	 * ignores it). */
	if (cr->token_ops != 0 || cr->token_ttl_s != 0)
		pdk_json_set(spec, "create_token",
			     json_pack("{s:I, s:I}", "ops", (json_int_t)cr->token_ops, "ttl_s",
				       (json_int_t)cr->token_ttl_s));
	return spec;
}

static void add_waiter(struct pdk_sb *sb, struct evhttp_request *req, int code)
{
	struct pdk_sb_waiter *w = pdk_xcalloc(1, sizeof(*w));

	w->req = req;
	w->code = code;
	w->next = sb->waiters;
	sb->waiters = w;
}

/*
 * A create with the key of a sandbox that has ended (and is still kept): 409, naming it. Not the
 * dead sandbox as if alive, and not a second sandbox for what the client may think is a retry.
 */
static bool replay_ended_key(struct pdk_daemon *d, struct evhttp_request *req, const char *key)
{
	struct pdk_store_ended e;

	if (pdk_store_ended_by_key(d->store, key, &e, NULL) < 0)
		return false;
	pdk__http_error(req, 409, "conflict", "idempotency_key",
			"the sandbox '%s' created with this idempotency key has ended (%s); a new "
			"sandbox needs a new key",
			e.id, e.reason);
	pdk_store_ended_release(&e);
	return true;
}

/* A create with a key seen before: the same sandbox (200), waiting for it if it is starting. */
static bool replay_key(struct pdk_daemon *d, struct evhttp_request *req, const char *key)
{
	for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = sb->next) {
		_cleanup_free_ char *token = NULL;
		_cleanup_error_ struct pdk_error *err = NULL;

		if (sb->destroying || sb->row.idempotency_key == NULL ||
		    strcmp(sb->row.idempotency_key, key) != 0)
			continue;
		if (strcmp(sb->row.state, "starting") == 0) {
			add_waiter(sb, req, 200);
			return true;
		}
		if (mint_create_token(sb, &token, &err) < 0)
			pdk__http_status_error(req, err->status, err->msg);
		else
			pdk__http_json(req, 200, pdk__sb_json(sb, token));
		return true;
	}
	return replay_ended_key(d, req, key);
}

/* A new sandbox object, stored and its supervisor started; NULL + *err on failure. */
static struct pdk_sb *sb_start(struct pdk_daemon *d, struct pdk_req_create *cr, const char *key,
			       bool pool, struct pdk_error **err)
{
	_cleanup_json_ json_t *spec = NULL;
	_cleanup_free_ char *spec_text = NULL;
	char id[37];
	struct pdk_sb *sb;

	pdk_make_id(id);
	spec = make_spec(d, id, cr);
	spec_text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
	sb = sb_new(d);
	sb->row.id = pdk_xstrdup(id);
	sb->row.state = pdk_xstrdup("starting");
	sb->row.profile = pdk_xstrdup(cr->profile);
	sb->row.labels = json_dumps(cr->labels, JSON_COMPACT | JSON_SORT_KEYS);
	sb->row.spec = pdk_xstrdup(spec_text);
	sb->row.idempotency_key = key ? pdk_xstrdup(key) : NULL;
	sb->row.created_ns = pdk_now_real_ns();
	sb->row.expires_ns = cr->ttl_s ? sb->row.created_ns + cr->ttl_s * 1000000000ULL : 0;
	sb->row.idle_timeout_s = cr->idle_timeout_s;
	sb->row.pool = pool;
	sb->labels = json_incref(cr->labels);
	sb->limits = json_deep_copy(json_object_get(cr->overrides, "limits"));
	if (sb->limits == NULL)
		sb->limits = json_object();
	sb->token_ops = cr->token_ops;
	sb->token_ttl_s = cr->token_ttl_s;
	if (pdk_store_sandbox_insert(d->store, &sb->row, err) < 0 ||
	    spawn(sb, spec_text, err) < 0) {
		(void)!pdk_store_sandbox_delete(d->store, id, NULL);
		sb_unlink(sb);
		sb_free(sb);
		return NULL;
	}
	pdk__sb_save(sb);
	return sb;
}

/* A ready warm-pool member of the profile, when the request asks for nothing it lacks. */
static struct pdk_sb *pool_member(struct pdk_daemon *d, struct pdk_req_create *cr)
{
	/* A scoped create token is kept in the spec, which a pool member was started without. */
	if (cr->workspace != NULL || cr->overrides != NULL || cr->env != NULL ||
	    cr->token_ops != 0 || cr->token_ttl_s != 0)
		return NULL;
	for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = sb->next)
		if (sb->row.pool && !sb->destroying && !sb->warming && sb->ctl_fd >= 0 &&
		    strcmp(sb->row.state, "running") == 0 &&
		    strcmp(sb->row.profile, cr->profile) == 0)
			return sb;
	return NULL;
}

static void refill_hold(struct pdk_daemon *d);

static bool claim(struct pdk_daemon *d, struct evhttp_request *req, struct pdk_req_create *cr,
		  const char *key)
{
	struct pdk_sb *sb = pool_member(d, cr);
	_cleanup_error_ struct pdk_error *err = NULL;

	if (sb == NULL)
		return false;
	sb->row.pool = 0;
	sb->row.claimed = 1;
	free(sb->row.labels);
	sb->row.labels = json_dumps(cr->labels, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(sb->labels);
	sb->labels = json_incref(cr->labels);
	sb->row.idempotency_key = key ? pdk_xstrdup(key) : NULL;
	sb->row.expires_ns = cr->ttl_s ? pdk_now_real_ns() + cr->ttl_s * 1000000000ULL : 0;
	sb->row.idle_timeout_s = cr->idle_timeout_s;
	sb->last_active_ns = pdk_now_mono_ns();
	if (pdk_store_sandbox_update(d->store, &sb->row, &err) < 0) {
		pdk__http_status_error(req, err->status, err->msg);
		return true;
	}
	pdk__daemon_event(d, sb->row.id, sb->labels, "sandbox.claim",
			  json_pack("{s:s}", "profile", sb->row.profile));
	add_waiter(sb, req, 201);
	reply_waiters(sb, NULL);
	sb->first_exec_pending = true;
	refill_hold(d); /* the replacement starts once the first exec answered (see there) */
	return true;
}

void pdk__sb_create(struct pdk_daemon *d, struct evhttp_request *req, struct pdk_req_create *cr,
		    const char *header_key)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *key = cr->idempotency_key ? cr->idempotency_key : header_key;
	struct pdk_sb *sb;

	if (key != NULL && replay_key(d, req, key))
		return;
	if (claim(d, req, cr, key))
		return;
	sb = sb_start(d, cr, key, false, &err);
	if (sb == NULL) {
		pdk__http_status_error(req, err->status, err->msg);
		return;
	}
	add_waiter(sb, req, 201);
}

/* ---- warm pools ---- */

#define POOL_STARTING_MAX 4 /* supervisors of one pool starting at once */

static int pool_fill(void *data, const char *profile, uint64_t size)
{
	struct pdk_daemon *d = data;
	uint64_t have = 0, starting = 0;

	for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = sb->next) {
		if (!sb->row.pool || sb->destroying || strcmp(sb->row.profile, profile) != 0)
			continue;
		/* A pool that shrank gives back its extra ready members. */
		if (have >= size && strcmp(sb->row.state, "running") == 0)
			pdk__sb_destroy(sb, "pool_shrink", NULL);
		else
			have++;
		if (strcmp(sb->row.state, "starting") == 0)
			starting++;
	}
	/*
	 * The whole deficit at once, bounded: at most POOL_STARTING_MAX members of a pool start
	 * at the same time (the rest at the next tick or claim), so a refill never floods the
	 * machine.
	 */
	while (have < size && starting < POOL_STARTING_MAX) {
		_cleanup_error_ struct pdk_error *err = NULL;
		struct pdk_req_create cr = {.profile = (char *)profile, .labels = json_object()};
		struct pdk_sb *sb = sb_start(d, &cr, NULL, true, &err);

		json_decref(cr.labels);
		if (sb == NULL) {
			if (!d->quiet)
				fprintf(stderr, "paddock serve: pool '%s': %s\n", profile,
					err->msg);
			break;
		}
		have++;
		starting++;
	}
	return 0;
}

static void pools_pass(struct pdk_daemon *d)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (d->stopping)
		return;
	if (pdk_store_pool_each(d->store, pool_fill, d, &err) < 0 && !d->quiet)
		fprintf(stderr, "paddock serve: pools: %s\n", err->msg);
}

/*
 * The refill after a claim is held back: a replacement's start (a supervisor
 * building a sandbox: tens of ms of CPU) would compete with the claimed
 * sandbox's first exec for the CPUs, and that exec is what the client waits
 * for. It starts when no claimed sandbox waits for its first exec any more,
 * and at the latest REFILL_HOLD_MS after the claim (a client that never
 * execs does not stop the pool from refilling).
 */
#define REFILL_HOLD_MS 200

static void refill_due(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_daemon *d = arg;

	(void)fd;
	(void)what;
	for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = sb->next)
		sb->first_exec_pending = false; /* the hold is over for every claim so far */
	pools_pass(d);
}

static void refill_hold(struct pdk_daemon *d)
{
	struct timeval tv = {0, REFILL_HOLD_MS * 1000};

	if (d->refill == NULL && (d->refill = evtimer_new(d->base, refill_due, d)) == NULL)
		pdk_oom();
	/* A later claim does not push the first one's deadline back. */
	if (!evtimer_pending(d->refill, NULL) && evtimer_add(d->refill, &tv) < 0)
		pdk_oom();
}

void pdk__sb_first_exec_done(struct pdk_sb *sb)
{
	struct pdk_daemon *d = sb->d;

	if (!sb->first_exec_pending)
		return;
	sb->first_exec_pending = false;
	for (struct pdk_sb *o = d->sandboxes; o != NULL; o = o->next)
		if (o->first_exec_pending && !o->destroying)
			return;
	/*
	 * Not here: the exec's answer is only queued; libevent writes it on the
	 * loop's next turn. A zero timer runs after that write (the loop handles
	 * the ready sockets before the expired timers of the same turn).
	 */
	if (d->refill != NULL && evtimer_pending(d->refill, NULL)) {
		struct timeval now = {0, 0};

		evtimer_del(d->refill);
		if (evtimer_add(d->refill, &now) < 0)
			pdk_oom();
	}
}

void pdk__pools_tick(struct pdk_daemon *d)
{
	if (d->refill != NULL && evtimer_pending(d->refill, NULL))
		return; /* held back after a claim: refill_due() runs the pass */
	pools_pass(d);
}

void pdk__pools_now(struct pdk_daemon *d)
{
	pools_pass(d);
}

/* ---- re-adoption ---- */

static void adopt_status(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	status_answer(sb, reply, fds, nfds, ctx);
	if (reply != NULL)
		pdk__daemon_event(
			sb->d, sb->row.id, sb->labels, "sandbox.adopt",
			json_pack("{s:i}", "supervisor_pid", (int)sb->row.supervisor_pid));
}

/*
 * A lost sandbox's cgroup, from RUNDIR/sb/ID/cgroup (the supervisor wrote it): every process in
 * it killed (cgroup.kill on v2, else SIGKILL of each pid of cgroup.procs until empty), the
 * directories removed, and a sandbox.reap event saying so.
 */
static void reap_cgroup(struct pdk_sb *sb)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/sb/%s/cgroup", sb->d->run_dir, sb->row.id);
	_cleanup_free_ char *text = NULL, *where = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_cgroup *cg = NULL;
	char name[13];
	int rc;

	if (pdk_read_file_at(AT_FDCWD, path, 64 * 1024, &text, &err) < 0) {
		if (err->status != ENOENT)
			pdk__daemon_event(sb->d, sb->row.id, sb->labels, "sandbox.reap",
					  json_pack("{s:s}", "error", err->msg));
		return;
	}
	if (text[0] == '\0')
		return;                    /* the sandbox had no cgroup */
	memcpy(name, sb->row.id + 24, 12); /* the id's random tail names the cgroup */
	name[12] = '\0';
	rc = pdk_cgroup_adopt(text, name, NULL, &cg, &err);
	if (rc == 0) {
		where = pdk_xstrdup(pdk_cgroup_path(cg) ? pdk_cgroup_path(cg) : "");
		rc = pdk_cgroup_destroy(cg, &err);
	}
	pdk__daemon_event(sb->d, sb->row.id, sb->labels, "sandbox.reap",
			  json_pack("{s:s?, s:b, s:s?}", "cgroup", where, "removed", rc == 0,
				    "error", rc < 0 && err ? err->msg : NULL));
	if (rc < 0 && !sb->d->quiet)
		fprintf(stderr, "paddock serve: %s: lost sandbox's cgroup: %s\n", sb->row.id,
			err ? err->msg : "failed");
}

static int adopt_one(void *data, const struct pdk_store_sandbox *row)
{
	struct pdk_daemon *d = data;
	struct pdk_sb *sb = sb_new(d);
	_cleanup_json_ json_t *spec = json_loads(row->spec, 0, NULL);
	uint64_t spool = 0;

	sb->row = *row;
	sb->row.id = pdk_xstrdup(row->id);
	sb->row.state = pdk_xstrdup(row->state);
	sb->row.profile = pdk_xstrdup(row->profile);
	sb->row.labels = pdk_xstrdup(row->labels);
	sb->row.spec = pdk_xstrdup(row->spec);
	sb->row.idempotency_key = row->idempotency_key ? pdk_xstrdup(row->idempotency_key) : NULL;
	sb->labels = json_loads(row->labels, 0, NULL);
	if (!json_is_object(sb->labels))
		sb->labels = (json_decref(sb->labels), json_object());
	/*
	 * audit.db's offset moves in the same transaction as the events: it wins over daemon.db's
	 * copy, which a crash may have left behind (the batch would be appended twice).
	 */
	if (pdk_audit_spool_offset(d->audit, row->id, &spool, NULL) == 0 &&
	    spool > sb->row.spool_offset)
		sb->row.spool_offset = spool;
	sb->limits = json_deep_copy(json_object_get(json_object_get(spec, "overrides"), "limits"));
	if (sb->limits == NULL)
		sb->limits = json_object();
	sb->token_ops = (unsigned)json_integer_value(
		json_object_get(json_object_get(spec, "create_token"), "ops"));
	sb->token_ttl_s = (uint64_t)json_integer_value(
		json_object_get(json_object_get(spec, "create_token"), "ttl_s"));
	if (strcmp(row->state, "lost") == 0)
		return 0;
	if (ctl_connect(sb) == 0 &&
	    pdk__sb_call(sb, json_pack("{s:s}", "op", "status"), NULL, 0, adopt_status, NULL) == 0)
		return 0;
	/*
	 * Nobody answers: the supervisor is gone. What it left is cleaned: its
	 * process group (in case it hangs without its socket), every process of
	 * the sandbox's cgroup and the cgroup, its run directory; the spool is
	 * ingested first.
	 */
	if (row->supervisor_pid > 1)
		(void)kill(-row->supervisor_pid, SIGKILL);
	reap_cgroup(sb);
	free_event(&sb->ctl_ev);
	close_fd(&sb->ctl_fd);
	free(sb->end_reason);
	sb->end_reason = pdk_xstrdup("supervisor_lost");
	sb_forget(sb, "lost");
	return 0;
}

void pdk__sb_adopt_all(struct pdk_daemon *d)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_store_sandbox_each(d->store, adopt_one, d, &err) < 0 && !d->quiet)
		fprintf(stderr, "paddock serve: re-adoption: %s\n", err->msg);
}

/* ---- once a second ---- */

#define PURGE_EVERY_TICKS 10

void pdk__sb_tick(struct pdk_daemon *d)
{
	uint64_t now = pdk_now_real_ns(), mono = pdk_now_mono_ns();
	struct pdk_sb *next;
	static unsigned ticks;

	/* Ended sandboxes past the retention period are forgotten (checked every 10 s). */
	if (ticks++ % PURGE_EVERY_TICKS == 0) {
		_cleanup_error_ struct pdk_error *err = NULL;

		if (pdk_store_ended_purge(d->store,
					  now > d->retention_ns ? now - d->retention_ns : 0,
					  &err) < 0 &&
		    !d->quiet)
			fprintf(stderr, "paddock serve: %s\n", err->msg);
	}

	for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = next) {
		next = sb->next;
		if (sb->destroying || strcmp(sb->row.state, "starting") == 0 ||
		    strcmp(sb->row.state, "lost") == 0)
			continue;
		if (sb->row.expires_ns != 0 && now >= sb->row.expires_ns) {
			pdk__sb_destroy(sb, "ttl", NULL);
			continue;
		}
		if (sb->row.idle_timeout_s != 0 && sb->execs == NULL &&
		    mono - sb->last_active_ns >= sb->row.idle_timeout_s * 1000000000ULL) {
			pdk__sb_destroy(sb, "idle", NULL);
			continue;
		}
		(void)!pdk__sb_call(sb, json_pack("{s:s}", "op", "status"), NULL, 0, status_answer,
				    NULL);
		pdk__sb_ingest(sb);
	}
}
