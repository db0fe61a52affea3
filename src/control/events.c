/*
 * events.c - the control plane's events: its own (sandbox.create, kill,
 * auth failures...) appended to the audit store, and the fan-out of every
 * new audit record to the subscribers.
 *
 * The audit store is the one source of the stream: a record reaches
 * subscribers only once it is stored, with its audit sequence number, so
 * `since` replays and live events never disagree.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "control-internal.h"
#include "telemetry.h"

#include <string.h>

struct pdk_ctl_sub {
	struct pdk_ctl_sub *next;
	struct pdk_ctl *c;
	char *sandbox, *session, *kind, *decision;
	pdk_ctl_record_cb cb;
	void *ctx;
	bool dead; /* unsubscribed: freed at the next safe point */
	/* A paced replay (pdk_ctl_subscribe_paced): live records wait until it is over. */
	bool replaying;
	uint64_t after;     /* the replay goes on after this seq */
	struct event *page; /* the replay's next page */
	struct pdk_ctl_sub_pace pace;
};

/* Records a paced replay hands on per turn of the loop. */
#define PAGE_RECORDS 256
/* A page waits while the subscriber still holds this much (its pace.backlog), and retries. */
#define PAGE_BACKLOG_MAX (1u << 20)
#define PAGE_RETRY_MS    10

/* ---- the control plane's own events ---- */

/* The event's members but attrs: its time and seq are now's. */
static json_t *build_envelope(struct pdk_ctl *c, const char *sandbox, json_t *labels,
			      const char *kind)
{
	json_t *e = json_object();
	json_t *session = json_object_get(labels, "session");
	json_t *workflow = json_object_get(labels, "workflow");
	char ts[40];

	pdk_events_format_ts(pdk_now_real_ns(), ts, sizeof(ts));
	pdk_json_set(e, "ts", json_string(ts));
	pdk_json_set(e, "seq", json_integer((json_int_t)c->event_seq++));
	pdk_json_set(e, "sandbox", json_string(sandbox));
	pdk_json_set(e, "session", json_is_string(session) ? json_incref(session) : json_null());
	pdk_json_set(e, "workflow", json_is_string(workflow) ? json_incref(workflow) : json_null());
	pdk_json_set(e, "actor", json_string(c->actor));
	pdk_json_set(e, "kind", json_string(kind));
	return e;
}

/* The event of the control plane about `sandbox`, as it is stored (attrs taken or NULL). */
static json_t *build_event(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
			   json_t *attrs)
{
	json_t *e = build_envelope(c, sandbox, labels, kind);

	if (attrs == NULL)
		attrs = json_object();
	if (json_object_size(labels) > 0)
		json_object_set(attrs, "labels", labels);
	pdk_json_set(e, "attrs", attrs);
	return e;
}

/* ---- the spooled events (pdk_ctl_event_spooled) ---- */

/*
 * The spooled records folded into the store. A fold that fails keeps them
 * in the spool (on disk, folded by the next try: the tick's, the next
 * record's timer, the end's, or anyone's once this process is gone) and is
 * logged as an error, as a record that cannot be stored is.
 */
static void journal_fold(struct pdk_ctl *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (c->journal == NULL || pdk_audit_journal_pending(c->journal) == 0)
		return;
	if (pdk_audit_journal_fold(c->journal, c->audit, NULL, &err) < 0)
		pdk__ctl_log(c, PDK_LOG_ERROR, "%s", err->msg);
}

static void journal_due(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl *c = arg;

	(void)fd;
	(void)what;
	journal_fold(c);
	pdk__ctl_fanout(c);
}

/*
 * The control object's journal, made at its first spooled record: named
 * after its actor and a random id, so that two processes on one state
 * directory never share one.
 */
static struct pdk_audit_journal *journal_of(struct pdk_ctl *c)
{
	char id[37];
	_cleanup_free_ char *name = NULL;

	if (c->journal != NULL)
		return c->journal;
	pdk_make_id(id);
	name = pdk_xasprintf("%s-%s", c->actor, id);
	c->journal = pdk_audit_journal_new(c->state_dir, name);
	c->journal_ev = evtimer_new(c->base, journal_due, c);
	if (c->journal_ev == NULL)
		pdk_oom();
	return c->journal;
}

/*
 * The held events and then `e` (taken, may be NULL) appended in one
 * transaction; with `checkpoint`, a checkpoint is signed at the last.
 * The spooled records are folded first: they were made before.
 */
static void append_with_held(struct pdk_ctl *c, json_t *e, bool checkpoint)
{
	_cleanup_json_ json_t *batch = c->held != NULL ? c->held : json_array();
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ json_t **v = NULL;
	size_t n;

	journal_fold(c);
	c->held = NULL;
	c->turn_pending = false;
	if (c->held_ev != NULL)
		(void)evtimer_del(c->held_ev);
	if (e != NULL)
		json_array_append_new(batch, e);
	n = json_array_size(batch);
	if (n == 0)
		return;
	/* The array's items are reached only through jansson's API: their pointers copied out. */
	v = pdk_xcalloc(n, sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(batch, i);
	if (pdk_audit_append(c->audit, v, n, checkpoint, &err) < 0) {
		/* An error, always reported: the audit trail is the record of what was done. */
		pdk__ctl_log(c, PDK_LOG_ERROR, "audit: %s", err->msg);
		return;
	}
	pdk__ctl_fanout(c);
}

/*
 * The event, appended after the held ones; with `checkpoint`, a checkpoint
 * is signed at it in the same transaction.
 */
static void record_event(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
			 json_t *attrs, bool checkpoint)
{
	append_with_held(c, build_event(c, sandbox, labels, kind, attrs), checkpoint);
}

static void held_due(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pdk__ctl_held_flush(arg);
}

/*
 * The records of one turn of the event loop go to the audit store in one
 * transaction: with many clients at once a turn often reads several
 * requests (claims, execs), and each write transaction of audit.db costs
 * its lock, its head and its commit.
 *
 * SECURITY: a record is still stored before the answer of its request is
 * written. Every front door stores the pending records before an answer's
 * bytes go out (pdk_ctl_events_store: the daemon's HTTP guards call it
 * before they copy an answer to its socket, MCP over stdio before each
 * write): libevent may run a socket's write event in the same turn as the
 * read of its request, before any store at the turn's end. Records no
 * answer waits for yet (exec.request: its answer comes with the exit) are
 * stored by an event made active now, which runs once the callbacks already
 * active in this turn have run; the control plane's end stores what is left
 * (pdk__ctl_held_free).
 */
static void store_at_turn_end(struct pdk_ctl *c)
{
	if (c->turn_ev == NULL && (c->turn_ev = event_new(c->base, -1, 0, held_due, c)) == NULL)
		pdk_oom();
	event_active(c->turn_ev, EV_TIMEOUT, 0);
}

/* The event, stored with the others of this loop turn at its end. */
static void record_at_turn_end(struct pdk_ctl *c, json_t *e)
{
	if (c->held == NULL)
		c->held = json_array();
	json_array_append_new(c->held, e);
	c->turn_pending = true;
	store_at_turn_end(c);
}

void pdk__ctl_held_flush(struct pdk_ctl *c)
{
	if (c->held != NULL)
		append_with_held(c, NULL, false);
	else
		journal_fold(c);
}

void pdk_ctl_events_store(struct pdk_ctl *c)
{
	/* Held records alone wait, as control.h says, for a record or their timer. */
	if (c != NULL && c->turn_pending)
		pdk__ctl_held_flush(c);
}

void pdk__ctl_held_free(struct pdk_ctl *c)
{
	pdk__ctl_held_flush(c);
	/* What a fold could not take stays in the spool, for the next fold of anyone. */
	pdk_audit_journal_free(c->journal);
	c->journal = NULL;
	if (c->journal_ev != NULL)
		event_free(c->journal_ev);
	c->journal_ev = NULL;
	if (c->held_ev != NULL)
		event_free(c->held_ev);
	c->held_ev = NULL;
	if (c->turn_ev != NULL)
		event_free(c->turn_ev);
	c->turn_ev = NULL;
}

void pdk_ctl_event_held(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
			json_t *attrs)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = PDK_CTL_HELD_MAX_MS * 1000};

	if (c->held == NULL)
		c->held = json_array();
	json_array_append_new(c->held, build_event(c, sandbox, labels, kind, attrs));
	if (c->held_ev == NULL)
		c->held_ev = evtimer_new(c->base, held_due, c);
	/* No timer (out of memory): stored at once, never left behind. */
	if (c->held_ev == NULL ||
	    (!evtimer_pending(c->held_ev, NULL) && evtimer_add(c->held_ev, &tv) < 0))
		pdk__ctl_held_flush(c);
}

void pdk_ctl_event(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
		   json_t *attrs)
{
	record_at_turn_end(c, build_event(c, sandbox, labels, kind, attrs));
}

/* Event `e` (taken) to the journal: as `n` bytes of `line` when given, else serialised there. */
static void spool(struct pdk_ctl *c, json_t *e, const char *line, size_t n)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct timeval tv = {.tv_sec = 0, .tv_usec = PDK_CTL_SPOOL_FOLD_MS * 1000};
	int rc;

	/*
	 * Records queued before it are stored first (one transaction, as they
	 * would have been before the answer): the chain keeps the order of the
	 * calls. A gateway's allowed call has none.
	 */
	if (c->held != NULL)
		append_with_held(c, NULL, false);
	/* SECURITY: on disk by one write() before the answer of its request is written. */
	rc = line != NULL ? pdk_audit_journal_append_line(journal_of(c), e, line, n, &err)
			  : pdk_audit_journal_append(journal_of(c), e, &err);
	if (rc < 0) {
		/* Never dropped: stored by a transaction before the answer instead. */
		pdk__ctl_log(c, PDK_LOG_ERROR, "%s (stored without the spool)", err->msg);
		record_at_turn_end(c, e);
		return;
	}
	json_decref(e);
	if (!evtimer_pending(c->journal_ev, NULL) && evtimer_add(c->journal_ev, &tv) < 0)
		pdk_oom();
}

void pdk_ctl_event_spooled(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
			   json_t *attrs)
{
	spool(c, build_event(c, sandbox, labels, kind, attrs), NULL, 0);
}

void pdk_ctl_event_spooled_text(struct pdk_ctl *c, const char *sandbox, const char *kind,
				json_t *attrs, const char *attrs_text)
{
	json_t *e = build_envelope(c, sandbox, NULL, kind);
	_cleanup_free_ char *head = pdk_json_dump_wire(e);
	_cleanup_free_ char *line = NULL;
	static const char key[] = ",\"attrs\":";
	size_t hn, an, n = 0;

	pdk_json_set(e, "attrs", attrs);
	if (head == NULL)
		pdk_oom();
	/* The envelope's members (without "}\n"), then attrs as the caller serialised them. */
	hn = strlen(head) - 2;
	an = strlen(attrs_text);
	line = pdk_xmalloc(hn + sizeof(key) - 1 + an + 3);
	memcpy(line + n, head, hn);
	n += hn;
	memcpy(line + n, key, sizeof(key) - 1);
	n += sizeof(key) - 1;
	memcpy(line + n, attrs_text, an);
	n += an;
	memcpy(line + n, "}\n", 3);
	spool(c, e, line, n + 2);
}

void pdk__ctl_event_final(struct pdk_ctl *c, const char *sandbox, json_t *labels, const char *kind,
			  json_t *attrs)
{
	/*
	 * SECURITY: a sandbox's history ends signed, as a run's does: its last
	 * event and a checkpoint over it (and every record before it) are one
	 * transaction, so its records are never an unsigned tail that could be
	 * cut without a trace.
	 */
	record_event(c, sandbox, labels, kind, attrs, true);
}

/* ---- subscribers ---- */

static bool sub_match(const struct pdk_ctl_sub *s, const struct pdk_audit_row *row)
{
	if (s->sandbox != NULL && strcmp(s->sandbox, row->sandbox) != 0)
		return false;
	if (s->kind != NULL && !pdk_audit_kind_match(s->kind, row->kind))
		return false;
	if (s->session != NULL && (row->session == NULL || strcmp(s->session, row->session) != 0))
		return false;
	if (s->decision != NULL) {
		const char *d = json_string_value(
			json_object_get(json_object_get(row->record, "attrs"), "decision"));

		return d != NULL && strcmp(s->decision, d) == 0;
	}
	return true;
}

/*
 * The row's fields and record are the hashed line's (audit.h): the kind a
 * subscriber is sent as the SSE event and the sandbox it was matched on are
 * never the table's columns.
 */
static void sub_row(struct pdk_ctl_sub *s, const struct pdk_audit_row *row)
{
	s->cb(s->ctx, row->seq, row->kind, row->record);
}

struct fan {
	struct pdk_ctl *c;
	struct pdk_ctl_sub *only; /* a replay: this subscriber, up to c->fanout_seq */
};

static int fan_row(void *data, const struct pdk_audit_row *row)
{
	struct fan *f = data;

	if (f->only != NULL) {
		if (row->seq > f->c->fanout_seq)
			return 1;
		if (!f->only->dead && sub_match(f->only, row))
			sub_row(f->only, row);
		return 0;
	}
	for (struct pdk_ctl_sub *s = f->c->subscribers; s != NULL; s = s->next)
		if (!s->dead && !s->replaying && sub_match(s, row))
			sub_row(s, row);
	f->c->fanout_seq = row->seq;
	return 0;
}

static void sub_free(struct pdk_ctl_sub *s)
{
	if (s->page != NULL)
		event_free(s->page);
	free(s->sandbox);
	free(s->session);
	free(s->kind);
	free(s->decision);
	free(s);
}

static void reap_dead(struct pdk_ctl *c)
{
	for (struct pdk_ctl_sub **p = &c->subscribers; *p != NULL;) {
		struct pdk_ctl_sub *s = *p;

		if (s->dead) {
			*p = s->next;
			sub_free(s);
		} else {
			p = &s->next;
		}
	}
}

/*
 * A subscriber's callback runs inside the audit store's query: it may
 * unsubscribe (the subscriber is marked dead and freed at the next pass),
 * never record an event (control.h).
 */
void pdk__ctl_fanout(struct pdk_ctl *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_audit_filter f = {.after_seq = c->fanout_seq};
	struct fan fan = {.c = c};

	/*
	 * One pass over the store at a time: a fan-out asked for from inside
	 * another or a replay's page (a subscriber's callback that led to a
	 * store) would send the rows the outer one has not reached yet twice
	 * and out of order, and free subscribers under its walk. It runs after
	 * the outer one, from where that one stopped.
	 */
	if (c->fanning) {
		c->fan_again = true;
		return;
	}
	reap_dead(c);
	/*
	 * Nobody listens: nothing to read (this runs after every append, two
	 * or three times per exec). c->fanout_seq is brought to the head when
	 * the first subscriber comes (pdk_ctl_subscribe).
	 */
	if (c->subscribers == NULL)
		return;
	c->fanning = true;
	do {
		c->fan_again = false;
		f.after_seq = c->fanout_seq;
		if (pdk_audit_query(c->audit, &f, fan_row, &fan, &err) < 0) {
			pdk__ctl_log(c, PDK_LOG_WARN, "events: %s", err->msg);
			pdk_error_free(&err);
		}
	} while (c->fan_again);
	c->fanning = false;
}

/* c->fanout_seq = the audit store's head (no subscriber: nothing is sent). */
static void fanout_head(struct pdk_ctl *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_audit_filter f = {.after_seq = 0, .last = 1};
	struct fan fan = {.c = c};

	if (pdk_audit_query(c->audit, &f, fan_row, &fan, &err) < 0)
		pdk__ctl_log(c, PDK_LOG_WARN, "events: %s", err->msg);
}

static char *dup_or_null(const char *s)
{
	return s ? pdk_xstrdup(s) : NULL;
}

struct pdk_ctl_sub *pdk_ctl_subscribe(struct pdk_ctl *c, const struct pdk_ctl_sub_filter *f,
				      pdk_ctl_record_cb cb, void *ctx)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sub *s = pdk_xcalloc(1, sizeof(*s));
	/* The replay: the records after `since`, or the last `tail` of them, or both. */
	struct pdk_audit_filter q = {.sandbox = f->sandbox,
				     .kind = f->kind,
				     .session = f->session,
				     .decision = f->decision,
				     .after_seq = f->since != UINT64_MAX ? f->since : 0,
				     .last = f->tail};
	struct fan fan = {.c = c, .only = s};

	s->c = c;
	s->sandbox = dup_or_null(f->sandbox);
	s->session = dup_or_null(f->session);
	s->kind = dup_or_null(f->kind);
	s->decision = dup_or_null(f->decision);
	s->cb = cb;
	s->ctx = ctx;
	/* The held events are stored first: a replay never misses a request already made. */
	pdk__ctl_held_flush(c);
	/* c->fanout_seq is the head: the replay stops there. */
	reap_dead(c);
	if (c->subscribers == NULL)
		fanout_head(c);
	else
		pdk__ctl_fanout(c);
	if ((f->since != UINT64_MAX || f->tail > 0) &&
	    pdk_audit_query(c->audit, &q, fan_row, &fan, &err) < 0)
		pdk__ctl_log(c, PDK_LOG_WARN, "events replay: %s", err->msg);
	s->next = c->subscribers;
	c->subscribers = s;
	return s;
}

/* ---- the paced replay ---- */

struct page {
	struct pdk_ctl_sub *s;
	unsigned n;
};

static int page_row(void *data, const struct pdk_audit_row *row)
{
	struct page *p = data;
	struct pdk_ctl_sub *s = p->s;

	/* Past what the live subscribers were given: the live records take over from here. */
	if (row->seq > s->c->fanout_seq || s->dead)
		return 1;
	sub_row(s, row);
	s->after = row->seq;
	return ++p->n == PAGE_RECORDS ? 2 : 0;
}

static void replay_page(evutil_socket_t fd, short what, void *arg)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sub *s = arg;
	struct pdk_ctl *c = s->c;
	struct pdk_audit_filter q = {.sandbox = s->sandbox,
				     .kind = s->kind,
				     .session = s->session,
				     .decision = s->decision,
				     .after_seq = s->after,
				     .first = PAGE_RECORDS};
	struct page p = {.s = s};
	struct timeval retry = {.tv_sec = 0, .tv_usec = PAGE_RETRY_MS * 1000};
	int rc;

	(void)fd;
	(void)what;
	if (s->dead)
		return;
	/* The subscriber has not sent what it was given yet: the store waits, not its memory. */
	if (s->pace.backlog != NULL && s->pace.backlog(s->ctx) > PAGE_BACKLOG_MAX) {
		if (evtimer_add(s->page, &retry) < 0)
			pdk_oom();
		return;
	}
	c->fanning = true;
	rc = pdk_audit_query(c->audit, &q, page_row, &p, &err);
	c->fanning = false;
	if (rc < 0)
		pdk__ctl_log(c, PDK_LOG_WARN, "events replay: %s", err->msg);
	if (rc == 2 && !s->dead) {
		/* A full page: the next one on the next turn. */
		event_active(s->page, EV_TIMEOUT, 0);
	} else {
		s->replaying = false;
		if (!s->dead && s->pace.replayed != NULL)
			s->pace.replayed(s->ctx);
	}
	/* s may be freed from here on (a dead subscriber is reaped). */
	if (c->fan_again)
		pdk__ctl_fanout(c);
}

/* The seq of the first of the last `tail` records `q` matches (0: none matches). */
static int first_row(void *data, const struct pdk_audit_row *row)
{
	*(uint64_t *)data = row->seq;
	return 1;
}

struct pdk_ctl_sub *pdk_ctl_subscribe_paced(struct pdk_ctl *c, const struct pdk_ctl_sub_filter *f,
					    pdk_ctl_record_cb cb, void *ctx,
					    const struct pdk_ctl_sub_pace *pace)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sub_filter live = *f;
	struct pdk_ctl_sub *s;
	uint64_t first = 0;

	/* The filter without a replay: subscribed, and c->fanout_seq brought to the head. */
	live.since = UINT64_MAX;
	live.tail = 0;
	s = pdk_ctl_subscribe(c, &live, cb, ctx);
	s->pace = *pace;
	if (f->since == UINT64_MAX && f->tail == 0)
		return s;
	s->after = f->since != UINT64_MAX ? f->since : 0;
	if (f->tail > 0) {
		/* Where the tail starts: one query from the end, the records not handed on. */
		struct pdk_audit_filter q = {.sandbox = f->sandbox,
					     .kind = f->kind,
					     .session = f->session,
					     .decision = f->decision,
					     .after_seq = s->after,
					     .last = f->tail};

		if (pdk_audit_query(c->audit, &q, first_row, &first, &err) < 0)
			pdk__ctl_log(c, PDK_LOG_WARN, "events replay: %s", err->msg);
		s->after = first > 0 ? first - 1 : c->fanout_seq;
	}
	s->replaying = true;
	s->page = event_new(c->base, -1, 0, replay_page, s);
	if (s->page == NULL)
		pdk_oom();
	event_active(s->page, EV_TIMEOUT, 0);
	return s;
}

void pdk_ctl_unsubscribe(struct pdk_ctl_sub *s)
{
	if (s != NULL)
		s->dead = true;
}

void pdk__subs_free_all(struct pdk_ctl *c)
{
	while (c->subscribers != NULL) {
		struct pdk_ctl_sub *s = c->subscribers;

		c->subscribers = s->next;
		sub_free(s);
	}
}
