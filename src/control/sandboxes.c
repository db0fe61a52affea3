/*
 * sandboxes.c - the control plane's side of each sandbox: the object that
 * mirrors its store row, finding it for an operation, creating it (or
 * answering a repeated create, or claiming a pool member), destroying it
 * and forgetting it.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "control-internal.h"
#include "telemetry.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * How long a sandbox destroyed during its start is let finish that start
 * (a start takes milliseconds; one held longer is killed, its cgroups left).
 */
#define START_GRACE_MS 3000

/* ---- the objects ---- */

struct pdk_ctl_sb *pdk__sb_find(struct pdk_ctl *c, const char *id)
{
	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		if (strcmp(sb->row.id, id) == 0)
			return sb;
	return NULL;
}

char *pdk__sb_dir(const struct pdk_ctl_sb *sb)
{
	return pdk_xasprintf("%s/sb/%s", sb->c->run_dir, sb->row.id);
}

void pdk__sb_save(struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	sb->dirty = false;
	if (pdk_store_sandbox_update(sb->c->store, &sb->row, &err) < 0)
		pdk__ctl_log(sb->c, PDK_LOG_WARN, "%s", err->msg);
}

void pdk__sb_set_state(struct pdk_ctl_sb *sb, const char *state)
{
	free(sb->row.state);
	sb->row.state = pdk_xstrdup(state);
	pdk__sb_save(sb);
}

void pdk__sb_set_ttl(struct pdk_ctl_sb *sb, uint64_t ttl_s)
{
	sb->row.expires_ns = ttl_s ? pdk_now_real_ns() + ttl_s * 1000000000ULL : 0;
}

int pdk_ctl_set_ttl(struct pdk_ctl_sb *sb, uint64_t ttl_s, struct pdk_error **err)
{
	char ts[40] = "";

	if (ttl_s > PDK_CTL_TTL_MAX)
		return pdk_error_set_field(err, EINVAL, "ttl", "a TTL is at most %llu seconds",
					   (unsigned long long)PDK_CTL_TTL_MAX);
	pdk__sb_set_ttl(sb, ttl_s);
	pdk__sb_save(sb);
	if (sb->row.expires_ns != 0)
		pdk_events_format_ts(sb->row.expires_ns, ts, sizeof(ts));
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "sandbox.ttl",
		      json_pack("{s:I, s:s?}", "ttl_s", (json_int_t)ttl_s, "expires_at",
				ts[0] ? ts : NULL));
	return 0;
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

/* Each destroy waiting on `sb`, in the order asked: its end (`state`), or `err`. */
static void answer_destroys(struct pdk_ctl_sb *sb, const char *state, const struct pdk_error *err)
{
	while (sb->destroy_waiters != NULL) {
		struct pdk_sb_destroy_wait *w = sb->destroy_waiters;

		sb->destroy_waiters = w->next;
		w->cb(w->ctx, sb->row.id, state, err);
		free(w);
	}
}

/* What still waits on a sandbox that goes away with the control object. */
static void answer_shutdown(struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	(void)pdk_error_setx(&err, ENOTCONN, "the daemon is shutting down");
	pdk__sb_answer_waiters(sb, err);
	answer_destroys(sb, NULL, err);
}

void pdk__sb_free(struct pdk_ctl_sb *sb)
{
	pdk__sb_fail_calls(sb);
	pdk__sb_ports_close(sb, NULL);
	pdk__sb_procs_free(sb);
	free_event(&sb->ctl_ev);
	free_event(&sb->ready_ev);
	free_event(&sb->ingest_ev);
	free_event(&sb->start_grace_ev);
	close_fd(&sb->ctl_fd);
	close_fd(&sb->ready_fd);
	close_fd(&sb->pidfd);
	free(sb->lost_cgroup);
	answer_shutdown(sb);
	json_decref(sb->labels);
	json_decref(sb->limits);
	json_decref(sb->status);
	json_decref(sb->facts);
	json_decref(sb->warm_exec);
	free(sb->end_reason);
	free(sb->end_operator);
	pdk_store_sandbox_release(&sb->row);
	free(sb);
}

void pdk__sb_unlink(struct pdk_ctl_sb *sb)
{
	for (struct pdk_ctl_sb **p = &sb->c->sandboxes; *p != NULL; p = &(*p)->next) {
		if (*p == sb) {
			*p = sb->next;
			return;
		}
	}
}

void pdk__sb_free_all(struct pdk_ctl *c)
{
	while (c->sandboxes != NULL) {
		struct pdk_ctl_sb *sb = c->sandboxes;

		c->sandboxes = sb->next;
		pdk__exec_abort_all(sb);
		if (sb->dirty) /* an exec's charge not saved yet */
			pdk__sb_save(sb);
		pdk__sb_free(sb);
	}
}

struct pdk_ctl_sb *pdk__sb_new(struct pdk_ctl *c)
{
	struct pdk_ctl_sb *sb = pdk_xcalloc(1, sizeof(*sb));

	sb->c = c;
	sb->ctl_fd = sb->ready_fd = sb->pidfd = -1;
	sb->next_req = 1;
	sb->last_active_ns = pdk_now_mono_ns();
	sb->next = c->sandboxes;
	c->sandboxes = sb;
	return sb;
}

/* ---- finding one ---- */

int pdk_ctl_find(struct pdk_ctl *c, const char *id, unsigned flags, struct pdk_ctl_sb **out,
		 struct pdk_error **err)
{
	struct pdk_ctl_sb *sb = pdk__sb_find(c, id);
	struct pdk_ctl_view ended;

	if (sb == NULL && pdk__sb_ended(c, id, &ended)) {
		pdk_error_setx(err, EALREADY, "sandbox '%s' has ended (%s)", id,
			       ended.end_reason ? ended.end_reason : "ended");
		pdk_ctl_view_release(&ended);
		return -EALREADY;
	}
	if (sb == NULL || sb->destroying)
		return pdk_error_setx(err, ENOENT, "no sandbox '%s'", id);
	sb->last_active_ns = pdk_now_mono_ns();
	if ((flags & PDK_CTL_FIND_LIVE) && sb->ctl_fd < 0)
		return pdk_error_setx(err, EALREADY, "sandbox '%s' is %s", id, sb->row.state);
	*out = sb;
	return 0;
}

int pdk_ctl_get(struct pdk_ctl *c, const char *id, struct pdk_ctl_view *out, struct pdk_error **err)
{
	struct pdk_ctl_sb *sb = pdk__sb_find(c, id);

	if (sb != NULL && !sb->destroying) {
		sb->last_active_ns = pdk_now_mono_ns();
		pdk__sb_view(sb, out);
		return 0;
	}
	if (sb == NULL && pdk__sb_ended(c, id, out))
		return 0; /* state "ended", end_reason, ended_ns */
	return pdk_error_setx(err, ENOENT, "no sandbox '%s'", id);
}

/* ---- create ---- */

/* The create token's scope and lifetime: the create's "token", else every op for 24 h. */
static unsigned token_ops(const struct pdk_ctl_sb *sb)
{
	return sb->token_ops ? sb->token_ops : PDK_TOKEN_OPS_ALL;
}

static uint64_t token_ttl_s(const struct pdk_ctl_sb *sb)
{
	return sb->token_ttl_s ? sb->token_ttl_s : PDK_TOKEN_TTL_MAX;
}

/* A create's answer: the view and a fresh create token. */
static int answer_created(struct pdk_ctl_sb *sb, pdk_ctl_created_cb cb, void *ctx, bool again,
			  struct pdk_error **err)
{
	_cleanup_free_ char *token = NULL;
	uint64_t now = pdk_now_real_ns();
	struct pdk_ctl_created cr = {.token_ops = token_ops(sb), .again = again};

	if (pdk_token_mint(sb->c->key, sb->row.id, token_ops(sb),
			   now / 1000000000ULL + token_ttl_s(sb), &token, err) < 0)
		return -EIO;
	cr.token = token;
	cr.token_expires_ns = now + token_ttl_s(sb) * 1000000000ULL;
	pdk__sb_view(sb, &cr.view);
	cb(ctx, &cr, NULL);
	pdk_ctl_view_release(&cr.view);
	return 0;
}

void pdk__sb_add_waiter(struct pdk_ctl_sb *sb, pdk_ctl_created_cb cb, void *ctx, bool again)
{
	struct pdk_sb_waiter *w = pdk_xcalloc(1, sizeof(*w));

	w->cb = cb;
	w->ctx = ctx;
	w->again = again;
	w->next = sb->waiters;
	sb->waiters = w;
}

void pdk__sb_answer_waiters(struct pdk_ctl_sb *sb, const struct pdk_error *e)
{
	while (sb->waiters != NULL) {
		struct pdk_sb_waiter *w = sb->waiters;
		_cleanup_error_ struct pdk_error *err = NULL;

		sb->waiters = w->next;
		if (e != NULL)
			w->cb(w->ctx, NULL, e);
		else if (answer_created(sb, w->cb, w->ctx, w->again, &err) < 0)
			w->cb(w->ctx, NULL, err);
		free(w);
	}
}

/*
 * A create with the key of a sandbox that has ended (and is still kept): a conflict, naming it.
 * Not the dead sandbox as if alive, and not a second sandbox for what the client may think is a
 * retry.
 */
static int replay_ended_key(struct pdk_ctl *c, const char *key, struct pdk_error **err)
{
	struct pdk_store_ended e;

	if (pdk_store_ended_by_key(c->store, key, &e, NULL) < 0)
		return 0;
	pdk_error_set_field(err, EALREADY, "idempotency_key",
			    "the sandbox '%s' created with this idempotency key has ended (%s); a "
			    "new sandbox needs a new key",
			    e.id, e.reason);
	pdk_store_ended_release(&e);
	return -EALREADY;
}

/*
 * A create with a key seen before: the same sandbox (again), waiting for it if it is starting.
 * 1 when answered (or waiting), 0 when the key is new, negative on error.
 */
static int replay_key(struct pdk_ctl *c, const char *key, pdk_ctl_created_cb cb, void *ctx,
		      struct pdk_error **err)
{
	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next) {
		if (sb->destroying || sb->row.idempotency_key == NULL ||
		    strcmp(sb->row.idempotency_key, key) != 0)
			continue;
		if (strcmp(sb->row.state, "starting") == 0) {
			pdk__sb_add_waiter(sb, cb, ctx, true);
			return 1;
		}
		return answer_created(sb, cb, ctx, true, err) < 0 ? -EIO : 1;
	}
	return replay_ended_key(c, key, err);
}

struct pdk_ctl_sb *pdk__sb_start(struct pdk_ctl *c, const struct pdk_ctl_create *r, bool pool,
				 struct pdk_error **err)
{
	_cleanup_json_ json_t *spec = NULL;
	_cleanup_free_ char *spec_text = NULL;
	char id[37];
	struct pdk_ctl_sb *sb;

	pdk_make_id(id);
	spec = pdk__ctl_spec(c, id, r);
	spec_text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
	if (spec_text == NULL)
		pdk_oom();
	sb = pdk__sb_new(c);
	sb->row.id = pdk_xstrdup(id);
	sb->row.state = pdk_xstrdup("starting");
	sb->row.profile = pdk_xstrdup(r->profile);
	sb->row.labels = json_dumps(r->labels, JSON_COMPACT | JSON_SORT_KEYS);
	sb->row.spec = pdk_xstrdup(spec_text);
	sb->row.idempotency_key = r->idempotency_key ? pdk_xstrdup(r->idempotency_key) : NULL;
	sb->row.created_ns = pdk_now_real_ns();
	sb->row.expires_ns = r->ttl_s ? sb->row.created_ns + r->ttl_s * 1000000000ULL : 0;
	sb->row.idle_timeout_s = r->idle_timeout_s;
	sb->row.pool = pool;
	sb->labels = json_incref(r->labels);
	sb->limits = json_deep_copy(json_object_get(r->overrides, "limits"));
	if (sb->limits == NULL)
		sb->limits = json_object();
	sb->token_ops = r->token_ops;
	sb->token_ttl_s = r->token_ttl_s;
	if (pdk_store_sandbox_insert(c->store, &sb->row, err) < 0 ||
	    pdk__ctl_start_supervisor(sb, spec_text, err) < 0) {
		(void)!pdk_store_sandbox_delete(c->store, id, NULL);
		pdk__sb_unlink(sb);
		pdk__sb_free(sb);
		return NULL;
	}
	pdk__sb_save(sb);
	return sb;
}

/* A ready pool member becomes the request's sandbox. 1 when claimed, 0 when none, or negative. */
static int claim(struct pdk_ctl *c, const struct pdk_ctl_create *r, pdk_ctl_created_cb cb,
		 void *ctx, struct pdk_error **err)
{
	struct pdk_ctl_sb *sb = pdk__pool_member(c, r);

	if (sb == NULL)
		return 0;
	sb->row.pool = 0;
	sb->row.claimed = 1;
	free(sb->row.labels);
	sb->row.labels = json_dumps(r->labels, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(sb->labels);
	sb->labels = json_incref(r->labels);
	sb->row.idempotency_key = r->idempotency_key ? pdk_xstrdup(r->idempotency_key) : NULL;
	pdk__sb_set_ttl(sb, r->ttl_s);
	sb->row.idle_timeout_s = r->idle_timeout_s;
	sb->last_active_ns = pdk_now_mono_ns();
	if (pdk_store_sandbox_update(c->store, &sb->row, err) < 0)
		return -EIO;
	pdk_ctl_event(c, sb->row.id, sb->labels, "sandbox.claim",
		      json_pack("{s:s}", "profile", sb->row.profile));
	pdk__sb_add_waiter(sb, cb, ctx, false);
	pdk__sb_answer_waiters(sb, NULL);
	sb->first_exec_pending = true;
	pdk__pools_claimed(c); /* the replacement starts once the first exec answered */
	return 1;
}

int pdk_ctl_create(struct pdk_ctl *c, const struct pdk_ctl_create *r, pdk_ctl_created_cb cb,
		   void *ctx, struct pdk_error **err)
{
	struct pdk_ctl_sb *sb;
	int rc;

	if (r->idempotency_key != NULL) {
		rc = replay_key(c, r->idempotency_key, cb, ctx, err);
		if (rc != 0)
			return rc < 0 ? rc : 0;
	}
	rc = claim(c, r, cb, ctx, err);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	sb = pdk__sb_start(c, r, false, err);
	if (sb == NULL)
		return -EIO;
	pdk__sb_add_waiter(sb, cb, ctx, false);
	return 0;
}

/* ---- the end of a sandbox ---- */

/*
 * The row leaves `sandboxes` for `ended` (one transaction) with the final
 * view, unless retention is off or it was an unclaimed pool member (never
 * anyone's): then it is just deleted.
 */
static void store_end(struct pdk_ctl_sb *sb, const char *reason)
{
	struct pdk_ctl *c = sb->c;
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *o = NULL;
	_cleanup_free_ char *text = NULL;
	struct pdk_ctl_view v;
	struct pdk_store_ended e;
	uint64_t now = pdk_now_real_ns();

	if (c->retention_ns == 0 || sb->row.pool) {
		if (pdk_store_sandbox_delete(c->store, sb->row.id, &err) < 0)
			pdk__ctl_log(c, PDK_LOG_WARN, "%s", err->msg);
		return;
	}
	pdk__sb_view(sb, &v);
	free(v.state);
	v.state = pdk_xstrdup("ended");
	v.end_reason = pdk_xstrdup(reason);
	v.ended_ns = now;
	o = pdk_ctl_view_json(&v);
	pdk_ctl_view_release(&v);
	text = json_dumps(o, JSON_COMPACT);
	if (text == NULL)
		pdk_oom();
	e = (struct pdk_store_ended){.id = sb->row.id,
				     .idempotency_key = sb->row.idempotency_key,
				     .ended_ns = now,
				     .reason = (char *)reason,
				     .sandbox = text};
	if (pdk_store_sandbox_end(c->store, &e, &err) < 0) {
		pdk__ctl_log(c, PDK_LOG_WARN, "%s", err->msg);
		pdk_error_free(&err);
		if (pdk_store_sandbox_delete(c->store, sb->row.id, &err) < 0)
			pdk__ctl_log(c, PDK_LOG_WARN, "%s", err->msg);
	}
}

void pdk__sb_answer_destroy(struct pdk_ctl_sb *sb, const char *state)
{
	answer_destroys(sb, state, NULL);
}

void pdk__sb_forget(struct pdk_ctl_sb *sb, const char *final_state)
{
	struct pdk_ctl *c = sb->c;
	_cleanup_free_ char *dir = pdk__sb_dir(sb);

	pdk__exec_abort_all(sb);
	/* Its listeners go and its forwarded connections are cut: the sandbox has ended. */
	pdk__sb_ports_close(sb, "the sandbox ended");
	pdk__sb_ingest(sb);
	(void)!pdk_audit_spool_forget(c->audit, sb->row.id, NULL); /* the spool is removed below */
	pdk__ctl_event_final(c, sb->row.id, sb->labels, "sandbox.destroy",
			     json_pack("{s:s, s:s, s:s*}", "reason",
				       sb->end_reason ? sb->end_reason : "destroyed", "state",
				       final_state, "operator", sb->end_operator));
	if (strcmp(final_state, "lost") == 0) {
		/* A lost sandbox stays listed (state lost) until it is deleted. */
		pdk__sb_set_state(sb, "lost");
		pdk__sb_disconnect(sb);
		(void)!pdk_rm_rf_at(AT_FDCWD, dir);
		pdk__sb_answer_destroy(sb, "lost");
		return;
	}
	(void)!pdk_rm_rf_at(AT_FDCWD, dir); /* what the supervisor left: the ingested spool */
	store_end(sb, sb->end_reason ? sb->end_reason : "destroyed");
	pdk__sb_answer_destroy(sb, "ended");
	pdk__sb_unlink(sb);
	pdk__sb_free(sb);
}

static void destroyed(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	(void)sb;
	(void)reply;
	(void)ctx;
	/* The supervisor closes the socket after its answer; the close finishes the job. */
	pdk__close_fds(fds, nfds);
}

/* No supervisor to ask (lost, never answered, or too slow to start): forget it now. */
static void forget_unasked(struct pdk_ctl_sb *sb)
{
	free_event(&sb->start_grace_ev);
	if (sb->row.supervisor_pid > 0 && sb->pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
	/* A lost one's supervisor lived on: its cgroup goes with it. */
	if (sb->lost_cgroup != NULL) {
		if (sb->pidfd < 0 && sb->row.supervisor_pid > 1)
			(void)kill(-sb->row.supervisor_pid, SIGKILL);
		pdk__sb_reap_cgroup_text(sb, sb->lost_cgroup);
		free(steal_ptr(&sb->lost_cgroup));
	}
	pdk__sb_forget(sb, "ended");
}

static void start_grace_over(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	forget_unasked(arg);
}

/*
 * A sandbox asked to end while its supervisor still starts: killed now, the
 * supervisor would leave the cgroups it has made but not yet described in
 * RUNDIR/sb/ID/cgroup (docs/internals/cgroup.md). Its start is let finish,
 * for at most START_GRACE_MS: ready_done() then ends it the usual way
 * (pdk__sb_destroy_started()), or the grace runs out and it is killed.
 * -1 when there is no start to wait for.
 */
static int wait_for_start(struct pdk_ctl_sb *sb)
{
	const struct timeval tv = {START_GRACE_MS / 1000, (START_GRACE_MS % 1000) * 1000};

	if (sb->ctl_fd >= 0 || sb->ready_ev == NULL || sb->pidfd < 0)
		return -1;
	if (sb->start_grace_ev == NULL &&
	    (sb->start_grace_ev = evtimer_new(sb->c->base, start_grace_over, sb)) == NULL)
		pdk_oom();
	if (evtimer_add(sb->start_grace_ev, &tv) < 0)
		pdk_oom();
	return 0;
}

/* Ask the supervisor to end the sandbox, or forget a sandbox that has none. */
static void ask_destroy(struct pdk_ctl_sb *sb)
{
	if (wait_for_start(sb) == 0)
		return;
	if (sb->ctl_fd < 0 ||
	    pdk__sb_call(sb, json_pack("{s:s, s:s}", "op", "destroy", "reason", sb->end_reason),
			 NULL, 0, destroyed, NULL) < 0)
		forget_unasked(sb);
}

void pdk__sb_destroy_started(struct pdk_ctl_sb *sb)
{
	free_event(&sb->start_grace_ev);
	ask_destroy(sb);
}

static void spill_removed(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	(void)ctx;
	pdk__close_fds(fds, nfds);
	/*
	 * No reply: the connection was lost or the sandbox is being freed, and
	 * whoever failed the call forgets it. A refused delete is no reason to
	 * keep the sandbox.
	 */
	if (reply != NULL)
		ask_destroy(sb);
}

/*
 * The destroy is written down before anything is asked: RUNDIR/sb/ID/ending
 * holds its reason and operator. A daemon that stops or dies before the
 * supervisor has been told (the spill files go first, a start is let finish)
 * leaves the file, and the next one finishes the destroy when it adopts the
 * sandbox (adopt.c): a kill that was answered never leaves it running.
 */
static void note_ending(struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *dir = pdk__sb_dir(sb);
	_cleanup_free_ char *tmp = pdk_xasprintf("%s/" PDK_CTL_ENDING ".new", dir);
	_cleanup_free_ char *path = pdk_xasprintf("%s/" PDK_CTL_ENDING, dir);
	_cleanup_json_ json_t *j =
		json_pack("{s:s, s:s*}", "reason", sb->end_reason, "operator", sb->end_operator);
	_cleanup_free_ char *text = json_dumps(j, JSON_COMPACT);
	_cleanup_error_ struct pdk_error *err = NULL;

	if (text == NULL)
		pdk_oom();
	/* A lost sandbox has no directory left, and nothing left to end. */
	if (pdk_replace_file(tmp, path, text, &err) < 0 && err->status != ENOENT)
		pdk__ctl_log(sb->c, PDK_LOG_WARN, "%s: %s", sb->row.id, err->msg);
}

json_t *pdk__sb_ending(struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *dir = pdk__sb_dir(sb);
	_cleanup_free_ char *path = pdk_xasprintf("%s/" PDK_CTL_ENDING, dir);
	_cleanup_free_ char *text = NULL;
	json_t *j;

	if (pdk_read_file_at(AT_FDCWD, path, 4096, &text, NULL) < 0)
		return NULL;
	j = json_loads(text, 0, NULL);
	/* Unreadable: it was being written when the daemon died; the end was asked all the same. */
	if (!json_is_object(j) || !json_is_string(json_object_get(j, "reason"))) {
		json_decref(j);
		j = json_pack("{s:s}", "reason", "destroyed");
	}
	return j;
}

void pdk__sb_destroy(struct pdk_ctl_sb *sb, const char *reason)
{
	if (sb->destroying)
		return;
	sb->destroying = true;
	/* A lost sandbox being deleted keeps why it ended (its supervisor died). */
	if (strcmp(sb->row.state, "lost") != 0 || sb->end_reason == NULL) {
		free(sb->end_reason);
		sb->end_reason = pdk_xstrdup(reason);
	}
	note_ending(sb);
	/*
	 * The spill files of its commands' output go first. /tmp is the
	 * sandbox's own tmpfs unless a workspace is bound there, where they
	 * would outlive it (and show in its changes).
	 */
	if (sb->spilled && sb->ctl_fd >= 0 &&
	    pdk__sb_call(sb,
			 json_pack("{s:s, s:s, s:b}", "op", "delete", "path", "/tmp/.paddock/exec",
				   "recursive", 1),
			 NULL, 0, spill_removed, NULL) == 0)
		return;
	ask_destroy(sb);
}

void pdk__sb_set_operator(struct pdk_ctl_sb *sb, const char *operator)
{
	/* The first who asked is who ended it: a later request finds it being destroyed. */
	if (operator!= NULL && operator[0] != '\0' && sb->end_operator == NULL && !sb->destroying)
		sb->end_operator = pdk_xstrdup(operator);
}

int pdk_ctl_destroy(struct pdk_ctl *c, const char *id, const char *reason, const char *operator,
		    pdk_ctl_destroyed_cb cb, void *ctx, struct pdk_error **err)
{
	struct pdk_ctl_sb *sb = pdk__sb_find(c, id);
	struct pdk_sb_destroy_wait *w, **tail;
	struct pdk_ctl_view ended;

	if (sb == NULL && pdk__sb_ended(c, id, &ended)) {
		/* Already ended: the same answer as the destroy that ended it. */
		pdk_ctl_view_release(&ended);
		cb(ctx, id, "ended", NULL);
		return 0;
	}
	if (sb == NULL)
		return pdk_error_setx(err, ENOENT, "no sandbox '%s'", id);
	/* One being destroyed already: this caller waits for the same end (last in line). */
	w = pdk_xcalloc(1, sizeof(*w));
	w->cb = cb;
	w->ctx = ctx;
	for (tail = &sb->destroy_waiters; *tail != NULL; tail = &(*tail)->next)
		;
	*tail = w;
	pdk__sb_set_operator(sb, operator);
	pdk__sb_destroy(sb, reason);
	return 0;
}
