/*
 * plane-list.c - GET /v2/sandboxes (and /sandboxes): the caller's key's
 * sandboxes, filtered by metadata, state and template, newest first (or
 * oldest with order=asc), a page at a time (limit, nextToken; the
 * X-Next-Token header says where the next page starts).
 */
#include "common.h"
#include "e2b-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_DEFAULT 100
#define PAGE_MAX     100

struct list_q {
	struct evkeyvalq meta; /* metadata pairs to match */
	bool running, paused;  /* the states asked for */
	const char *template;
	bool asc;
	uint64_t limit;
	uint64_t after_ns; /* nextToken: the page starts after (after_ns, after_id) */
	char after_id[PDK_TOKEN_ID_MAX + 1];
	bool has_after;
};

static int states_of(const char *s, struct list_q *q)
{
	_cleanup_free_ char *copy = NULL;
	char *p, *save = NULL, *tok;

	if (s == NULL) {
		q->running = q->paused = true;
		return 0;
	}
	copy = pdk_xstrdup(s);
	for (p = copy; (tok = strtok_r(p, ",", &save)) != NULL; p = NULL) {
		if (strcmp(tok, "running") == 0)
			q->running = true;
		else if (strcmp(tok, "paused") == 0)
			q->paused = true;
		else
			return -1;
	}
	return 0;
}

/* nextToken: "NS-ID", as this route wrote it. */
static int token_of(const char *t, struct list_q *q)
{
	const char *dash = t ? strchr(t, '-') : NULL;
	_cleanup_free_ char *ns = NULL;

	if (t == NULL)
		return 0;
	if (dash == NULL || !pdk_ctl_name_ok(dash + 1) || strlen(dash + 1) > PDK_TOKEN_ID_MAX)
		return -1;
	ns = strndup(t, (size_t)(dash - t));
	if (ns == NULL)
		pdk_oom();
	if (pdk_parse_u64(ns, UINT64_MAX, &q->after_ns) < 0)
		return -1;
	memcpy(q->after_id, dash + 1, strlen(dash + 1) + 1);
	q->has_after = true;
	return 0;
}

static int query_of(struct pdk__e2b_req *r, struct list_q *q)
{
	const char *meta = pdk__e2b_query(r, "metadata");
	const char *order = pdk__e2b_query(r, "order");
	const char *limit = pdk__e2b_query(r, "limit");
	const char *why = NULL;

	q->limit = PAGE_DEFAULT;
	q->template = pdk__e2b_query(r, "template");
	if (meta != NULL && evhttp_parse_query_str(meta, &q->meta) < 0)
		why = "metadata must be KEY=VALUE pairs joined by '&', each URL-encoded";
	else if (states_of(pdk__e2b_query(r, "state"), q) < 0)
		why = "state must be running, paused, or both joined by ','";
	else if (order != NULL && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0)
		why = "order must be asc or desc";
	else if (limit != NULL && (pdk_parse_u64(limit, PAGE_MAX, &q->limit) < 0 || q->limit == 0))
		why = "limit must be 1 to 100";
	else if (token_of(pdk__e2b_query(r, "nextToken"), q) < 0)
		why = "nextToken is not one this server gave (X-Next-Token)";
	else if (pdk__e2b_query(r, "startedAfter") != NULL)
		why = "startedAfter is not served: filter on metadata instead";
	if (why != NULL) {
		pdk__e2b_plane_fail(r->req, 400, "%s", why);
		return -1;
	}
	q->asc = order != NULL && strcmp(order, "asc") == 0;
	return 0;
}

/* Whether `v` is the caller's and matches the query. */
static bool selected(struct pdk__e2b_req *r, const struct list_q *q, const struct pdk_ctl_view *v)
{
	const char *owner = json_string_value(json_object_get(v->labels, PDK__E2B_LABEL_KEY));
	const char *tpl = json_string_value(json_object_get(v->labels, PDK__E2B_LABEL_TEMPLATE));
	const char *state = pdk__e2b_state(v->state);
	struct evkeyval *kv;

	if (owner == NULL || strcmp(owner, r->key) != 0 || state == NULL)
		return false;
	if ((strcmp(state, "running") == 0 && !q->running) ||
	    (strcmp(state, "paused") == 0 && !q->paused))
		return false;
	if (q->template != NULL && (tpl == NULL || strcmp(tpl, q->template) != 0))
		return false;
	TAILQ_FOREACH(kv, &q->meta, next)
	{
		const char *have = json_string_value(json_object_get(v->labels, kv->key));

		if (have == NULL || strcmp(have, kv->value) != 0)
			return false;
	}
	return true;
}

/* Newest first: by creation time, then id, both descending. */
static int newest_first(const void *a, const void *b)
{
	const struct pdk_ctl_view *x = *(const struct pdk_ctl_view *const *)a;
	const struct pdk_ctl_view *y = *(const struct pdk_ctl_view *const *)b;

	if (x->created_ns != y->created_ns)
		return x->created_ns > y->created_ns ? -1 : 1;
	return -strcmp(x->id, y->id);
}

/* Whether `v` comes after the nextToken's sandbox in the page order. */
static bool after(const struct list_q *q, const struct pdk_ctl_view *v)
{
	int c;

	if (!q->has_after)
		return true;
	c = v->created_ns != q->after_ns ? (v->created_ns < q->after_ns ? -1 : 1)
					 : strcmp(v->id, q->after_id);
	return q->asc ? c > 0 : c < 0;
}

static void answer_page(struct pdk__e2b_req *r, const struct list_q *q, struct pdk_ctl_view **sel,
			size_t n)
{
	json_t *a = json_array();
	size_t taken = 0;
	const struct pdk_ctl_view *last = NULL;
	bool more = false;

	for (size_t k = 0; k < n; k++) {
		const struct pdk_ctl_view *v = sel[q->asc ? n - 1 - k : k];

		if (!after(q, v))
			continue;
		if (taken == q->limit) {
			more = true;
			break;
		}
		json_array_append_new(a, pdk__e2b_detail_json(v));
		last = v;
		taken++;
	}
	if (more && last != NULL) {
		char tok[PDK_TOKEN_ID_MAX + 32];

		(void)snprintf(tok, sizeof(tok), "%llu-%s", (unsigned long long)last->created_ns,
			       last->id);
		pdk_http_header(r->req, "X-Next-Token", tok);
	}
	pdk_http_json(r->req, 200, a);
}

void pdk__e2b_route_list(struct pdk__e2b_req *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ struct pdk_ctl_view **sel = NULL;
	struct list_q q = {0};
	struct pdk_ctl_view *views = NULL;
	size_t n = 0, ns = 0;

	TAILQ_INIT(&q.meta);
	if (query_of(r, &q) < 0) {
		evhttp_clear_headers(&q.meta);
		return;
	}
	if (pdk_ctl_list(r->e->ctl, &(struct pdk_ctl_filter){0}, &views, &n, &err) < 0) {
		evhttp_clear_headers(&q.meta);
		pdk__e2b_plane_error(r->req, err);
		return;
	}
	sel = pdk_xcalloc(n + 1, sizeof(*sel));
	for (size_t i = 0; i < n; i++)
		if (selected(r, &q, &views[i]))
			sel[ns++] = &views[i];
	qsort(sel, ns, sizeof(*sel), newest_first);
	answer_page(r, &q, sel, ns);
	pdk_ctl_views_free(views, n);
	evhttp_clear_headers(&q.meta);
}
