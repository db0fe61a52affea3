/*
 * supervisor-ws.c - the workspace operations of a service-mode sandbox:
 * diff, snapshot, rollback and commit of its change set.
 *
 * Rollback and commit change the overlay's layers, which the sandbox's
 * mount namespace holds mounted: they need the sandbox's processes gone.
 * The init is restarted around them (same id, budgets and connection; a
 * new init pid, and sandbox.destroy + sandbox.create in the spool), so they
 * are refused while an exec runs; /tmp and the other tmpfs directories are
 * carried across (supervisor-files.c). A snapshot copies the upper layer
 * with the sandbox frozen instead (snapshot_live); it moves the layer
 * around a restart when the caller asks ("restart": true, no copy whatever
 * the size) or when the sandbox cannot be frozen.
 */
#include "common.h"
#include "base.h"
#include "supervisor-internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The whole patch is carried in a memfd; past this it stops and says it was cut. */
#define PATCH_TOTAL_MAX (16u << 20)

/*
 * The unified diff of every change in a memfd passed with the answer (an
 * answer holds at most PDK_SVC_MAX_MSG bytes; a patch is often more), kept
 * UTF-8 so the daemon can carry it in JSON. Its size goes into `reply`.
 */
static int write_patch(const struct pdk_ws_diff *d, json_t *reply, struct pdk_error **err)
{
	int fd = memfd_create("paddock-patch", MFD_CLOEXEC);
	int wfd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	FILE *f = wfd >= 0 ? fdopen(wfd, "w") : NULL;
	bool cut = false;
	long size;

	if (f == NULL) {
		int e = errno;

		if (wfd >= 0)
			(void)close(wfd);
		if (fd >= 0)
			(void)close(fd);
		return pdk_error_set(err, e, "patch: a memfd for it");
	}
	for (size_t i = 0; i < d->n && !cut; i++) {
		(void)pdk_ws_write_patch(f, &d->v[i], PDK_WS_PATCH_UTF8);
		cut = ftell(f) > (long)PATCH_TOTAL_MAX && i + 1 < d->n;
	}
	size = ftell(f);
	if (fclose(f) != 0 || size < 0) {
		(void)close(fd);
		return pdk_error_set(err, EIO, "patch: write");
	}
	pdk_json_set(reply, "patch_bytes", json_integer((json_int_t)size));
	pdk_json_set(reply, "patch_truncated", json_boolean(cut));
	return fd;
}

static json_t *changes_json(const struct pdk_ws_diff *d)
{
	json_t *changes = json_array();

	for (size_t i = 0; i < d->n; i++) {
		json_t *c = json_object();

		pdk_ws_json_set_path(c, "path", d->v[i].path);
		pdk_json_set(c, "kind",
			     json_string(d->v[i].kind == PDK_WS_ADDED     ? "added"
					 : d->v[i].kind == PDK_WS_DELETED ? "deleted"
									  : "modified"));
		json_array_append_new(changes, c);
	}
	return changes;
}

void pdk__sv_op_diff(struct pdk_supervisor *s, json_int_t req, json_t *msg)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ws *ws = pdk_session_ws(s->session);
	struct pdk_ws_diff d = {0};
	json_t *reply;
	int fd = -1;

	if (ws == NULL)
		return pdk__sv_reply_errorx(s, req, "conflict", NULL,
					    "the workspace is not an overlay: no changes are kept");
	if (pdk_ws_diff(ws, 0, PDK_WS_CURRENT, &d, &err) < 0)
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	reply = json_pack("{s:I, s:o}", "req", req, "changes", changes_json(&d));
	if (json_is_true(json_object_get(msg, "patch")) &&
	    (fd = write_patch(&d, reply, &err)) < 0) {
		json_decref(reply);
		pdk_ws_diff_release(&d);
		return pdk__sv_reply_error(s, req, "internal", NULL, err);
	}
	pdk_ws_diff_release(&d);
	pdk__sv_send(s, reply, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
	if (fd >= 0)
		(void)close(fd);
}

void pdk__sv_op_snapshots(struct pdk_supervisor *s, json_int_t req)
{
	json_t *list = json_array();
	size_t n = pdk_strv_len(s->snap_names);

	if (pdk_session_ws(s->session) == NULL)
		return pdk__sv_reply_errorx(s, req, "conflict", NULL,
					    "the workspace is not an overlay: it has no snapshots");
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, json_pack("{s:s, s:I}", "name", s->snap_names[i],
						      "number", (json_int_t)(i + 1)));
	pdk__sv_send(s, json_pack("{s:I, s:o}", "req", req, "snapshots", list), NULL, 0);
}

typedef int (*ws_step_fn)(struct pdk_supervisor *s, json_t *msg, json_t *reply,
			  struct pdk_error **err);

static int restart_around(struct pdk_supervisor *s, ws_step_fn step, json_t *msg, json_t *reply,
			  struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *err2 = NULL;
	struct pdk_sandbox_usage u;
	bool paused = s->paused_since != 0;
	int rc;

	/* Before anything changes: a sandbox whose /tmp cannot be kept is left as it is. */
	if (pdk__sv_carry_out(s, err) < 0)
		return -1;
	pdk_sandbox_usage(pdk__sv_sandbox(s), &u);
	s->cpu_base_ns += u.cpu_ns;
	(void)close(s->root_fd);
	s->root_fd = -1;
	if (paused) /* SIGKILL reaches frozen tasks anyway */
		(void)!pdk_sandbox_resume(pdk__sv_sandbox(s), &err2);
	pdk_error_free(&err2);
	if (pdk_session_stop(s->session, &err2) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "restart: %s", err2->msg);
	pdk_error_free(&err2);
	rc = step(s, msg, reply, err);
	/* Whatever the step did, the sandbox runs again (or ends: init_lost). */
	if (pdk__sv_start_sandbox(s, &err2) < 0) {
		pdk_log(s->log, PDK_LOG_WARN, "restart: %s", err2->msg);
		if (rc == 0)
			rc = pdk_error_setx(err, err2->status, "%s", err2->msg);
		return rc;
	}
	if (pdk__sv_carry_in(s, &err2) < 0) {
		pdk_log(s->log, PDK_LOG_WARN, "restart: %s", err2->msg);
		pdk_json_set(reply, "tmp_kept", json_false());
		pdk_error_free(&err2);
	}
	if (paused && pdk_sandbox_pause(pdk__sv_sandbox(s), &err2) < 0)
		pdk_log(s->log, PDK_LOG_WARN, "restart: %s", err2->msg);
	return rc;
}

static int step_snapshot(struct pdk_supervisor *s, json_t *msg, json_t *reply,
			 struct pdk_error **err)
{
	const char *name = json_string_value(json_object_get(msg, "name"));
	struct pdk_ws *ws = pdk_session_ws(s->session);
	/* Mounted (a live snapshot): copied; unmounted (around a restart): moved. */
	int n = pdk__sv_sandbox(s) != NULL ? pdk_ws_snapshot_copy(ws, err)
					   : pdk_ws_snapshot(ws, err);

	if (n < 0)
		return n;
	while (pdk_strv_len(s->snap_names) < (size_t)n - 1)
		pdk_strv_push(&s->snap_names, "");
	if (name != NULL)
		pdk_strv_push(&s->snap_names, name);
	else
		pdk_strv_push_take(&s->snap_names, pdk_xasprintf("%d", n));
	pdk_json_set(reply, "snapshot", json_string(s->snap_names[n - 1]));
	return 0;
}

/* Snapshot number of `name` (0 = the workspace as it was), or -1. */
static int snap_number(struct pdk_supervisor *s, const char *name)
{
	size_t n = pdk_strv_len(s->snap_names);

	if (strcmp(name, "0") == 0)
		return 0;
	for (size_t i = n; i > 0; i--)
		if (strcmp(s->snap_names[i - 1], name) == 0)
			return (int)i;
	return -1;
}

static int step_rollback(struct pdk_supervisor *s, json_t *msg, json_t *reply,
			 struct pdk_error **err)
{
	const char *snap = json_string_value(json_object_get(msg, "snapshot"));
	int n = snap_number(s, snap);

	if (pdk_ws_rollback(pdk_session_ws(s->session), (unsigned)n, err) < 0)
		return -1;
	while (pdk_strv_len(s->snap_names) > (size_t)n) {
		size_t last = pdk_strv_len(s->snap_names) - 1;

		free(s->snap_names[last]);
		s->snap_names[last] = NULL;
	}
	pdk_json_set(reply, "snapshot", json_string(snap));
	return 0;
}

static int step_commit(struct pdk_supervisor *s, json_t *msg, json_t *reply, struct pdk_error **err)
{
	struct pdk_ws *ws = pdk_session_ws(s->session);
	struct pdk_ws_commit_report rep = {0};
	struct pdk_ws_diff d = {0};
	unsigned flags = json_is_true(json_object_get(msg, "force")) ? PDK_WS_COMMIT_FORCE : 0;
	int rc = pdk_ws_diff(ws, 0, PDK_WS_CURRENT, &d, err);

	if (rc == 0)
		rc = pdk_ws_commit(ws, &d, flags, &rep, err);
	if (rc == 0) {
		_cleanup_error_ struct pdk_error *e = NULL;

		if (pdk_ws_emit_changes(pdk_session_events(s->session), &d, "committed",
					pdk_ws_id(ws), &e) < 0)
			pdk_log(s->log, PDK_LOG_WARN, "%s", e->msg);
		pdk_json_set(reply, "committed", json_integer((json_int_t)rep.applied));
		/* The workspace has the changes now: start again from it, with no layer. */
		rc = pdk_ws_rollback(ws, 0, err);
		pdk_strv_free(s->snap_names);
		s->snap_names = NULL;
	}
	for (size_t i = 0; rc < 0 && i < rep.n_refused; i++)
		pdk_error_wrap(err, "'%s' refused: %s", rep.refused[i].path, rep.refused[i].reason);
	for (size_t i = 0; rc < 0 && i < rep.n_conflicts; i++)
		pdk_error_wrap(err, "'%s': %s", rep.conflicts[i].path, rep.conflicts[i].reason);
	pdk_ws_commit_report_release(&rep);
	pdk_ws_diff_release(&d);
	return rc;
}

static json_t *problems_json(const struct pdk_ws_refusal *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *c = json_object();

		pdk_ws_json_set_path(c, "path", v[i].path);
		pdk_json_set(c, "reason", json_string(v[i].reason));
		json_array_append_new(a, c);
	}
	return a;
}

/* A commit refused: "conflict" (the host changed) or "forbidden" (entries), each listed. */
static void reply_commit_refused(struct pdk_supervisor *s, json_int_t req,
				 const struct pdk_ws_commit_report *rep,
				 const struct pdk_error *err)
{
	const char *code = err->status == EEXIST  ? "conflict"
			   : err->status == EPERM ? "forbidden"
						  : "internal";
	json_t *e = json_pack("{s:s, s:s}", "code", code, "message", err->msg);

	if (rep->n_conflicts > 0)
		pdk_json_set(e, "conflicts", problems_json(rep->conflicts, rep->n_conflicts));
	if (rep->n_refused > 0)
		pdk_json_set(e, "refused", problems_json(rep->refused, rep->n_refused));
	pdk__sv_send(s, json_pack("{s:I, s:o}", "req", req, "error", e), NULL, 0);
}

/*
 * A commit is checked with the sandbox as it is before its init is
 * restarted, so that a commit that would be refused (entries that must not
 * land, paths changed on the host) ends no process; a dry run ends there.
 * true when answered, false to go on with the commit.
 */
static bool commit_checked(struct pdk_supervisor *s, json_int_t req, json_t *msg)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ws *ws = pdk_session_ws(s->session);
	struct pdk_ws_commit_report rep = {0};
	struct pdk_ws_diff d = {0};
	bool dry = json_is_true(json_object_get(msg, "dry_run"));
	unsigned flags = PDK_WS_COMMIT_DRY_RUN |
			 (json_is_true(json_object_get(msg, "force")) ? PDK_WS_COMMIT_FORCE : 0);
	int rc = pdk_ws_diff(ws, 0, PDK_WS_CURRENT, &d, &err);

	if (rc == 0)
		rc = pdk_ws_commit(ws, &d, flags, &rep, &err);
	if (rc < 0)
		reply_commit_refused(s, req, &rep, err);
	else if (dry)
		pdk__sv_send(s,
			     json_pack("{s:I, s:I, s:b}", "req", req, "would_commit",
				       (json_int_t)d.n, "dry_run", 1),
			     NULL, 0);
	pdk_ws_commit_report_release(&rep);
	pdk_ws_diff_release(&d);
	return rc < 0 || dry;
}

/*
 * A snapshot while the sandbox runs: its tasks are frozen while the upper
 * layer is copied (step_snapshot), so the copy is of one moment; the
 * overlay stays mounted, and the processes, /tmp and the exec ids go on as
 * they were. 1 when done (reply filled), 0 when the sandbox cannot be
 * frozen here (the caller restarts the init instead), -1 on failure.
 */
static int snapshot_live(struct pdk_supervisor *s, json_t *msg, json_t *reply,
			 struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *why = NULL;
	bool paused = s->paused_since != 0;
	uint64_t t0 = pdk_now_mono_ns();
	int rc;

	if (!paused && pdk_sandbox_pause(pdk__sv_sandbox(s), &why) < 0) {
		pdk_log(s->log, PDK_LOG_WARN, "snapshot: %s; the init is restarted instead",
			why->msg);
		return 0;
	}
	rc = step_snapshot(s, msg, reply, err);
	if (!paused && pdk_sandbox_resume(pdk__sv_sandbox(s), &why) < 0) {
		/* Still frozen: shown as paused, so that a resume can be tried again. */
		s->paused_since = pdk_now_mono_ns();
		if (rc == 0)
			rc = pdk_error_setx(err, why->status, "%s", why->msg);
	}
	if (rc < 0)
		return -1;
	pdk_json_set(reply, "frozen_ms",
		     json_integer((json_int_t)((pdk_now_mono_ns() - t0) / PDK_SV_NSEC_PER_MS)));
	return 1;
}

/*
 * How many tasks besides the init the sandbox holds: the cgroup's count,
 * or, where there is no pids controller (rootless without a delegated
 * cgroup), the init's children (every other task descends from it, and an
 * orphan is given to it), which is at least 1 whenever any other task runs.
 */
static uint64_t tasks_besides_init(struct pdk_supervisor *s)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *text = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_sandbox_usage u;
	pid_t init = pdk_sandbox_init_pid(pdk__sv_sandbox(s));
	uint64_t n = 0;

	pdk_sandbox_usage(pdk__sv_sandbox(s), &u);
	if (u.pids_current > 0)
		return u.pids_current - 1;
	path = pdk_xasprintf("/proc/%d/task/%d/children", (int)init, (int)init);
	if (init <= 0 || pdk_read_file_at(AT_FDCWD, path, 1 << 20, &text, &err) < 0)
		return 0;
	for (const char *p = text + strspn(text, " \n"); *p != '\0'; p += strspn(p, " \n")) {
		n++;
		p += strcspn(p, " \n");
	}
	return n;
}

/*
 * Whether a new snapshot's name is one already kept, or "0" (the start):
 * a rollback names its snapshot, so two of one name would make it ambiguous.
 */
static bool name_taken(struct pdk_supervisor *s, const json_t *name)
{
	const char *n = json_string_value(name);

	return n != NULL && snap_number(s, n) >= 0;
}

/* Whether `step` may not run on this sandbox at all; then it was answered. */
static bool ws_refused(struct pdk_supervisor *s, json_int_t req, json_t *msg, ws_step_fn step)
{
	const char *snap = json_string_value(json_object_get(msg, "snapshot"));

	if (pdk_session_ws(s->session) == NULL)
		pdk__sv_reply_errorx(s, req, "conflict", NULL,
				     "the workspace is not an overlay: it has no layers");
	else if (step == step_commit && pdk_session_private_workspace(s->session))
		pdk__sv_reply_errorx(s, req, "conflict", NULL,
				     "the sandbox has a private workspace: nothing to commit to");
	else if (step == step_rollback && (snap == NULL || snap_number(s, snap) < 0))
		pdk__sv_reply_errorx(s, req, "not_found", "snapshot", "no such snapshot");
	else if (step == step_snapshot && name_taken(s, json_object_get(msg, "name")))
		pdk__sv_reply_errorx(s, req, "conflict", "name",
				     "a snapshot of this sandbox already has this name: choose "
				     "another, or roll back to it");
	else
		return false;
	return true;
}

/*
 * Whether the init may not be restarted for `op` now; then it was answered.
 * The layers change only with the overlay unmounted, so the init is
 * restarted (restart_around), which ends every process of the sandbox.
 * Processes left running by earlier execs (a server started in the
 * background) are not ended silently: the caller must say so.
 */
static bool restart_refused(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *op)
{
	_cleanup_free_ char *m = NULL;
	uint64_t others;

	if (s->n_execs > 0) {
		pdk__sv_reply_errorx(s, req, "conflict", NULL,
				     "execs are running: the workspace layers change only when "
				     "none does");
		return true;
	}
	if (json_is_true(json_object_get(msg, "restart")))
		return false;
	others = tasks_besides_init(s);
	if (others == 0)
		return false;
	m = pdk_xasprintf("%llu task(s) besides the init run in the sandbox (left by earlier "
			  "execs); %s restarts the sandbox's init and would end them: stop "
			  "them, or give \"restart\": true",
			  (unsigned long long)others, op);
	pdk__sv_reply_errorx(s, req, "conflict", "restart", m);
	return true;
}

void pdk__sv_op_ws(struct pdk_supervisor *s, json_int_t req, json_t *msg, const char *op)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *reply = NULL;
	ws_step_fn step = strcmp(op, "snapshot") == 0   ? step_snapshot
			  : strcmp(op, "rollback") == 0 ? step_rollback
							: step_commit;
	int rc = 0;

	if (ws_refused(s, req, msg, step))
		return;
	if (step == step_commit && commit_checked(s, req, msg))
		return;
	reply = json_pack("{s:I}", "req", req);
	/* "restart": true asks for the move (no copy) around a restart of the init. */
	if (step == step_snapshot && !json_is_true(json_object_get(msg, "restart")))
		rc = snapshot_live(s, msg, reply, &err);
	if (rc == 0 && restart_refused(s, req, msg, op)) {
		json_decref(reply);
		return;
	}
	if (rc == 0)
		rc = restart_around(s, step, msg, reply, &err) < 0 ? -1 : 1;
	if (rc < 0) {
		json_decref(reply);
		/* A commit that refused entries (EPERM) is the caller's to fix, not ours. */
		return pdk__sv_reply_error(s, req,
					   err->status == EPERM    ? "forbidden"
					   : err->status == EEXIST ? "conflict"
								   : "internal",
					   NULL, err);
	}
	pdk__sv_send(s, reply, NULL, 0);
}
