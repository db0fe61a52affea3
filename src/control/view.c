/*
 * view.c - the Sandbox view (control.h): built from a live sandbox, or read
 * back from the record the store keeps of an ended one; lists and the kill
 * switch's selection.
 *
 * The record of an ended sandbox is JSON in the store's `ended` table:
 * {"id","state":"ended","profile","labels","created_at","expires_at",
 * "idle_timeout_s","pool","supervisor_pid","usage","limits","remaining",
 * "workspace","network","image","end_reason","ended_at"}, times as RFC 3339 text with
 * microseconds. Rows
 * written by earlier versions have the same form, so the format is fixed:
 * fields may be added, none renamed.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"
#include "telemetry.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void pdk_ctl_view_release(struct pdk_ctl_view *v)
{
	free(v->id);
	free(v->state);
	free(v->profile);
	json_decref(v->labels);
	json_decref(v->facts);
	pdk__figures_release(&v->usage);
	pdk__figures_release(&v->limits);
	pdk__figures_release(&v->remaining);
	free(v->end_reason);
	memset(v, 0, sizeof(*v));
}

void pdk_ctl_views_free(struct pdk_ctl_view *views, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pdk_ctl_view_release(&views[i]);
	free(views);
}

void pdk__sb_view(const struct pdk_ctl_sb *sb, struct pdk_ctl_view *out)
{
	memset(out, 0, sizeof(*out));
	out->id = pdk_xstrdup(sb->row.id);
	out->state = pdk_xstrdup(sb->row.state);
	out->profile = pdk_xstrdup(sb->row.profile);
	out->labels = json_incref(sb->labels);
	out->created_ns = sb->row.created_ns;
	out->expires_ns = sb->row.expires_ns;
	out->idle_timeout_s = sb->row.idle_timeout_s;
	out->claimed = sb->row.claimed;
	out->pool_member = sb->row.pool;
	out->supervisor_pid = (int)sb->row.supervisor_pid;
	out->facts = sb->facts ? json_incref(sb->facts) : NULL;
	pdk__budgets(sb->status, sb->limits, sb->row.output_bytes, sb->row.commands, &out->usage,
		     &out->limits, &out->remaining);
}

/* ---- the record of an ended sandbox ---- */

/* "2026-11-25T10:00:00.123456Z" (pdk_events_format_ts) -> ns; 0 for anything else. */
static uint64_t ts_parse(const json_t *v)
{
	const char *s = json_string_value(v);
	struct tm tm = {0};
	unsigned us = 0;
	int n = 0;
	time_t t;

	if (s == NULL ||
	    sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%6uZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &us, &n) != 7 ||
	    s[n] != '\0')
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	t = timegm(&tm);
	if (t < 0)
		return 0;
	return (uint64_t)t * 1000000000ULL + (uint64_t)us * 1000ULL;
}

static json_t *figures_json(const struct pdk_ctl_figures *f)
{
	json_t *o = json_object();

	for (size_t i = 0; i < f->n; i++)
		pdk_json_set(o, f->v[i].name, json_integer((json_int_t)f->v[i].value));
	return o;
}

static void figures_from(const json_t *o, struct pdk_ctl_figures *f)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v) if (json_is_integer(v))
		pdk__figures_add(f, k, (int64_t)json_integer_value(v));
}

/* A copy of the supervisor's fact `key`, or null. */
static json_t *fact(const struct pdk_ctl_view *v, const char *key)
{
	json_t *x = json_object_get(v->facts, key);

	return x != NULL ? json_deep_copy(x) : json_null();
}

json_t *pdk_ctl_view_json(const struct pdk_ctl_view *v)
{
	json_t *o = json_object();

	pdk_json_set(o, "id", json_string(v->id));
	pdk_json_set(o, "state", json_string(v->state));
	pdk_json_set(o, "profile", json_string(v->profile));
	pdk_json_set(o, "labels", json_incref(v->labels));
	pdk_json_set(o, "created_at", pdk_events_ts_json(v->created_ns));
	pdk_json_set(o, "expires_at", pdk_events_ts_json(v->expires_ns));
	pdk_json_set(o, "idle_timeout_s", json_integer((json_int_t)v->idle_timeout_s));
	pdk_json_set(o, "pool", json_boolean(v->claimed));
	pdk_json_set(o, "pool_member", json_boolean(v->pool_member));
	pdk_json_set(o, "supervisor_pid", json_integer(v->supervisor_pid));
	pdk_json_set(o, "usage", figures_json(&v->usage));
	pdk_json_set(o, "limits", figures_json(&v->limits));
	pdk_json_set(o, "remaining", figures_json(&v->remaining));
	pdk_json_set(o, "workspace", fact(v, "workspace"));
	pdk_json_set(o, "network", fact(v, "network"));
	pdk_json_set(o, "image", fact(v, "image"));
	if (v->end_reason != NULL) {
		pdk_json_set(o, "end_reason", json_string(v->end_reason));
		pdk_json_set(o, "ended_at", pdk_events_ts_json(v->ended_ns));
	}
	return o;
}

static char *str_of(const json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? pdk_xstrdup(s) : dflt ? pdk_xstrdup(dflt) : NULL;
}

int pdk__view_from_record(const char *text, struct pdk_ctl_view *out)
{
	_cleanup_json_ json_t *o = json_loads(text, 0, NULL);
	json_t *labels = json_object_get(o, "labels");

	memset(out, 0, sizeof(*out));
	if (!json_is_object(o) || !json_is_string(json_object_get(o, "id")))
		return -EINVAL;
	out->id = str_of(o, "id", NULL);
	out->state = str_of(o, "state", "ended");
	out->profile = str_of(o, "profile", "");
	out->labels = json_is_object(labels) ? json_incref(labels) : json_object();
	out->created_ns = ts_parse(json_object_get(o, "created_at"));
	out->expires_ns = ts_parse(json_object_get(o, "expires_at"));
	out->idle_timeout_s = (uint64_t)json_integer_value(json_object_get(o, "idle_timeout_s"));
	out->claimed = json_is_true(json_object_get(o, "pool"));
	out->supervisor_pid = (int)json_integer_value(json_object_get(o, "supervisor_pid"));
	figures_from(json_object_get(o, "usage"), &out->usage);
	figures_from(json_object_get(o, "limits"), &out->limits);
	figures_from(json_object_get(o, "remaining"), &out->remaining);
	/* Records written before these fields existed have neither: null then. */
	out->facts = json_pack("{s:O?, s:O?, s:O?}", "workspace", json_object_get(o, "workspace"),
			       "network", json_object_get(o, "network"), "image",
			       json_object_get(o, "image"));
	out->end_reason = str_of(o, "end_reason", "ended");
	out->ended_ns = ts_parse(json_object_get(o, "ended_at"));
	return 0;
}

bool pdk__sb_ended(struct pdk_ctl *c, const char *id, struct pdk_ctl_view *out)
{
	struct pdk_store_ended e;
	int rc;

	if (pdk_store_ended_get(c->store, id, &e, NULL) < 0)
		return false;
	rc = pdk__view_from_record(e.sandbox, out);
	pdk_store_ended_release(&e);
	return rc == 0;
}

/* ---- lists ---- */

static bool label_matches(const json_t *labels, const char *key, const char *want)
{
	const char *v = json_string_value(json_object_get(labels, key));

	return want == NULL || (v != NULL && strcmp(v, want) == 0);
}

static bool labels_match(const struct pdk_ctl_filter *f, const json_t *labels)
{
	return label_matches(labels, "session", f->session) &&
	       label_matches(labels, "workflow", f->workflow) &&
	       label_matches(labels, "agent", f->agent) &&
	       (f->label_key == NULL || label_matches(labels, f->label_key, f->label_value));
}

static bool list_match(const struct pdk_ctl_filter *f, const struct pdk_ctl_sb *sb)
{
	if (sb->destroying || !labels_match(f, sb->labels))
		return false;
	return f->state == NULL || strcmp(f->state, "all") == 0 ||
	       strcmp(f->state, sb->row.state) == 0;
}

struct view_list {
	const struct pdk_ctl_filter *f;
	struct pdk_ctl_view *v;
	size_t n;
};

static struct pdk_ctl_view *list_slot(struct view_list *l)
{
	l->v = pdk_xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	return &l->v[l->n++];
}

static int add_ended(void *data, const struct pdk_store_ended *e)
{
	struct view_list *l = data;
	struct pdk_ctl_view v;

	if (pdk__view_from_record(e->sandbox, &v) < 0)
		return 0;
	if (labels_match(l->f, v.labels))
		*list_slot(l) = v;
	else
		pdk_ctl_view_release(&v);
	return 0;
}

/* A state filter names a state a sandbox can be in, or "all": another matches nothing, by mistake.
 */
static bool state_known(const char *state)
{
	static const char *const known[] = {"starting", "running", "paused",
					    "lost",     "ended",   "all"};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(known); i++)
		if (strcmp(state, known[i]) == 0)
			return true;
	return false;
}

int pdk_ctl_list(struct pdk_ctl *c, const struct pdk_ctl_filter *f, struct pdk_ctl_view **views,
		 size_t *n, struct pdk_error **err)
{
	struct view_list l = {.f = f};

	if (f->state != NULL && !state_known(f->state))
		return pdk_error_set_field(err, EINVAL, "state",
					   "unknown state '%s' (starting, running, paused, lost, "
					   "ended or all)",
					   f->state);

	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		if (list_match(f, sb))
			pdk__sb_view(sb, list_slot(&l));
	if (f->state != NULL && (strcmp(f->state, "ended") == 0 || strcmp(f->state, "all") == 0) &&
	    pdk_store_ended_each(c->store, add_ended, &l, err) < 0) {
		pdk_ctl_views_free(l.v, l.n);
		return -EIO;
	}
	*views = l.v;
	*n = l.n;
	return 0;
}

/* ---- the kill switch ---- */

bool pdk_ctl_selector_match(const struct pdk_ctl_selector *s, const char *id, const json_t *labels)
{
	const char *key;
	json_t *v;

	if (s->all)
		return true;
	for (size_t i = 0; s->ids != NULL && s->ids[i] != NULL; i++)
		if (strcmp(s->ids[i], id) == 0)
			return true;
	if (s->session == NULL && s->workflow == NULL && s->agent == NULL && s->labels == NULL)
		return false;
	if (!label_matches(labels, "session", s->session) ||
	    !label_matches(labels, "workflow", s->workflow) ||
	    !label_matches(labels, "agent", s->agent))
		return false;
	json_object_foreach(s->labels, key,
			    v) if (!label_matches(labels, key, json_string_value(v))) return false;
	return true;
}

void pdk_ctl_kill(struct pdk_ctl *c, const struct pdk_ctl_selector *s, const char *reason,
		  const char *operator, char *** killed)
{
	_cleanup_json_ json_t *ids = json_array();
	const char *op = operator!= NULL && operator[0] != '\0' ? operator: NULL;
	struct pdk_ctl_sb *next;
	json_t *call;

	*killed = NULL;
	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = next) {
		next = sb->next;
		/* A warm pool's stock is no one's work: "stop everything" leaves it (control.h). */
		if (sb->destroying || (s->all && sb->row.pool) ||
		    !pdk_ctl_selector_match(s, sb->row.id, sb->labels))
			continue;
		pdk_strv_push(killed, sb->row.id);
		json_array_append_new(ids, json_string(sb->row.id));
		pdk_ctl_event(c, sb->row.id, sb->labels, "kill",
			      json_pack("{s:s, s:s*}", "reason", reason ? reason : "kill",
					"operator", op));
		pdk__sb_set_operator(sb, op);
		pdk__sb_destroy(sb, "killed");
	}
	call = json_pack("{s:s?, s:s?, s:s?, s:O?, s:O, s:s, s:s*}", "session", s->session,
			 "workflow", s->workflow, "agent", s->agent, "labels", s->labels, "killed",
			 ids, "reason", reason ? reason : "kill", "operator", op);
	if (s->all)
		pdk_json_set(call, "all", json_true());
	pdk_ctl_event(c, "daemon", NULL, "kill", call);
}
