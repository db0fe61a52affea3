/*
 * ingest.c - a sandbox's event spool (RUNDIR/sb/ID/events.jsonl, written by
 * its supervisor) read into the audit store from the saved offset, and when
 * that happens; and the run spools (STATE/audit-spool, `paddock run`'s
 * records) folded into the store while the daemon serves.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "control-internal.h"

#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#define INGEST_MAX (1u << 20)

/*
 * The supervisor's nudge comes while the exec that wrote the events (its
 * process.exec) still runs: ingesting then (an audit transaction, the row's
 * save, the fan-out) would take the CPU from that exec and delay its answer.
 * While an exec of the sandbox runs, the ingest waits until that exec has
 * answered (pdk__sb_ingest_soon), at most INGEST_HOLD_MS; nothing is lost
 * meanwhile: the spool keeps the events and the offset says what is new.
 * The same holds while claimed sandboxes wait for their first exec (many
 * clients claiming at once, pdk__pools_holding): their execs come first, and
 * each ingest at most INGEST_HOLD_MS after its nudge.
 */
#define INGEST_HOLD_MS 50

static void ingest_due(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl_sb *sb = arg;

	(void)fd;
	(void)what;
	/*
	 * Most often the answer this ingest waited for was written in this
	 * turn and its client woken. A wake-up by a write to a socket is a
	 * "synchronous" one (the writer is expected to sleep next), so the
	 * scheduler often queues the client on this CPU, though the other is
	 * idle; the ingest (two write transactions, about 0.1 ms) then runs
	 * before the client reads its answer. Yielding first lets the client
	 * run. With nothing else queued on this CPU, it is one system call.
	 */
	(void)sched_yield();
	pdk__sb_ingest(sb);
	if (sb->dirty) /* the ingest found nothing new: the exec's charge is saved alone */
		pdk__sb_save(sb);
}

static void ingest_arm(struct pdk_ctl_sb *sb, uint64_t ms)
{
	struct timeval tv = {0, (suseconds_t)(ms * 1000)};

	if (sb->ingest_ev == NULL &&
	    (sb->ingest_ev = evtimer_new(sb->c->base, ingest_due, sb)) == NULL)
		pdk_oom();
	if (evtimer_add(sb->ingest_ev, &tv) < 0)
		pdk_oom();
}

/* Held back: at most INGEST_HOLD_MS from the first ask (a later one does not push it back). */
static void ingest_hold(struct pdk_ctl_sb *sb)
{
	if (sb->ingest_ev == NULL || !evtimer_pending(sb->ingest_ev, NULL))
		ingest_arm(sb, INGEST_HOLD_MS);
}

void pdk__sb_ingest_later(struct pdk_ctl_sb *sb)
{
	/*
	 * With no exec running, on the loop's next turn: the nudge often comes
	 * in the same read as an exec's exit, whose answer is queued but not yet
	 * written; a zero timer runs after that write.
	 */
	if (sb->execs == NULL && !pdk__pools_holding(sb->c)) {
		ingest_arm(sb, 0);
		return;
	}
	ingest_hold(sb);
}

void pdk__sb_ingest_soon(struct pdk_ctl_sb *sb)
{
	if (!sb->dirty && (sb->ingest_ev == NULL || !evtimer_pending(sb->ingest_ev, NULL)))
		return;
	if (pdk__pools_holding(sb->c)) {
		ingest_hold(sb);
		return;
	}
	/* A zero timer runs on the loop's next turn, after the answer's write (see pools.c). */
	ingest_arm(sb, 0);
}

static void stamp_labels(struct pdk_ctl_sb *sb, json_t *e)
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

/* The events of the complete lines in buf[0..got); *used: the bytes those lines take. */
static json_t **parse_lines(struct pdk_ctl_sb *sb, char *buf, size_t got, size_t *n, size_t *used)
{
	json_t **events = NULL;

	*n = *used = 0;
	for (char *p = buf, *nl; (nl = memchr(p, '\n', (size_t)(buf + got - p))) != NULL;
	     p = nl + 1) {
		json_t *e = pdk_json_loadb(p, (size_t)(nl - p), 0, NULL);

		*used = (size_t)(nl + 1 - buf);
		if (!json_is_object(e) || !json_is_string(json_object_get(e, "kind"))) {
			json_decref(e); /* a line that is not an event is skipped, not stored */
			continue;
		}
		stamp_labels(sb, e);
		events = pdk_xrealloc(events, (*n + 1) * sizeof(*events));
		events[(*n)++] = e;
	}
	return events;
}

void pdk__sb_ingest(struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *path =
		pdk_xasprintf("%s/sb/%s/events.jsonl", sb->c->run_dir, sb->row.id);
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t **events;
	size_t n, used;
	ssize_t got;

	if (fd < 0)
		return;
	buf = pdk_xmalloc(INGEST_MAX + 1);
	got = TEMP_FAILURE_RETRY(pread(fd, buf, INGEST_MAX, (off_t)sb->row.spool_offset));
	if (got <= 0)
		return;
	events = parse_lines(sb, buf, (size_t)got, &n, &used);
	/* The control plane's events of this turn first: the chain keeps the order of the calls. */
	pdk__ctl_held_flush(sb->c);
	/* The batch and the new offset in one audit.db transaction (daemon.db's copy follows). */
	if (used > 0 && pdk_audit_append_spool(sb->c->audit, events, n, sb->row.id,
					       sb->row.spool_offset + used, &err) < 0) {
		pdk__ctl_log(sb->c, PDK_LOG_WARN, "ingest %s: %s", sb->row.id, err->msg);
		used = 0; /* kept for the next pass: nothing is lost */
	}
	for (size_t i = 0; i < n; i++)
		json_decref(events[i]);
	free(events);
	if (used > 0) {
		sb->row.spool_offset += used;
		pdk__sb_save(sb);
		pdk__ctl_fanout(sb->c);
	}
	/* A full buffer: there may be more (each pass reads at most INGEST_MAX). */
	if (used > 0 && (size_t)got == INGEST_MAX)
		pdk__sb_ingest(sb);
}

/* ---- the run spools ---- */

/*
 * `paddock run` leaves its records in STATE/audit-spool and whoever comes
 * next folds them (audit.h); while a daemon serves the state directory it
 * does so itself, once a second, so that a run's records reach the chain
 * (and the subscribers of /v1/events) without an audit command. A pass folds
 * at most RUN_FOLD_MAX spools (a few milliseconds) and waits while an exec
 * of any sandbox runs or claimed sandboxes wait for their first exec, at
 * most RUN_FOLD_HOLD_TICKS ticks: their answers come first.
 */
#define RUN_FOLD_MAX        16
#define RUN_FOLD_HOLD_TICKS 5

static bool execs_running(const struct pdk_ctl *c)
{
	for (const struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		if (sb->execs != NULL)
			return true;
	return pdk__pools_holding(c);
}

/* A fold that fails (a spool that is not events) is logged once, not every second. */
static void fold_failed(struct pdk_ctl *c, const char *msg)
{
	if (c->fold_err != NULL && strcmp(c->fold_err, msg) == 0)
		return;
	free(c->fold_err);
	c->fold_err = pdk_xstrdup(msg);
	pdk__ctl_log(c, PDK_LOG_WARN, "%s", msg);
}

static void fold_due(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl *c = arg;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_audit_fold res;

	(void)fd;
	(void)what;
	if (c->stopping)
		return;
	if (execs_running(c) && c->fold_held++ < RUN_FOLD_HOLD_TICKS)
		return;
	c->fold_held = 0;
	pdk__ctl_held_flush(c);
	if (pdk_audit_fold_some(c->audit, RUN_FOLD_MAX, &res, &err) < 0) {
		fold_failed(c, err->msg);
		return;
	}
	free(c->fold_err);
	c->fold_err = NULL;
	if (res.records > 0)
		pdk__ctl_fanout(c);
}

void pdk__ctl_fold_runs(struct pdk_ctl *c)
{
	struct timeval now = {0, 0};

	/* A readdir when none waits; the live runs' spools are skipped by the fold itself. */
	if (pdk_audit_spool_count(c->state_dir) == 0) {
		c->fold_held = 0;
		return;
	}
	/* A zero timer: answers queued in this turn are written first (see pools.c). */
	if (c->fold_ev == NULL && (c->fold_ev = evtimer_new(c->base, fold_due, c)) == NULL)
		pdk_oom();
	if (evtimer_add(c->fold_ev, &now) < 0)
		pdk_oom();
}
