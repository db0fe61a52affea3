/*
 * policy.c - the per-call policy and budgets (docs/gateway.md, POLICY and
 * BUDGETS): the first rule whose every condition holds decides, and the
 * call counters are checked before any is charged.
 *
 * Counters live in small hash tables with a bound on their entries: a
 * principal or a server past the bound is refused (there are as many as the
 * config names), and the oldest session's counter goes to make room for a
 * new session's (sessions come and go with connections).
 */
#include "common.h"
#include "base.h"
#include "gateway.h"

#include <fnmatch.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* ---- rules ---- */

static bool pattern_holds(const char *pattern, const char *value)
{
	return pattern == NULL || fnmatch(pattern, value ? value : "", 0) == 0;
}

/* An RFC 6901 JSON pointer's target in `doc`, or NULL. */
static const json_t *pointer_get(const json_t *doc, const char *ptr)
{
	const json_t *cur = doc;

	while (cur != NULL && *ptr == '/') {
		size_t n = strcspn(ptr + 1, "/");
		_cleanup_free_ char *tok = pdk_xmalloc(n + 1);
		size_t k = 0;

		for (size_t i = 1; i <= n; i++) {
			char c = ptr[i];

			if (c == '~' && i < n && (ptr[i + 1] == '0' || ptr[i + 1] == '1'))
				c = ptr[++i] == '0' ? '~' : '/';
			tok[k++] = c;
		}
		tok[k] = '\0';
		ptr += n + 1;
		if (json_is_object(cur)) {
			cur = json_object_get(cur, tok);
		} else if (json_is_array(cur)) {
			uint64_t idx = 0;

			cur = pdk_parse_u64(tok, SIZE_MAX, &idx) == 0 ? json_array_get(cur, idx)
								      : NULL;
		} else {
			cur = NULL;
		}
	}
	return *ptr == '\0' ? cur : NULL;
}

/*
 * The text a condition looks at: a string as it is; anything else as its
 * compact JSON with sorted keys, so that a value put inside a list or an
 * object is still seen by "contains" and "regex".
 */
static char *arg_text(const json_t *v)
{
	if (json_is_string(v))
		return pdk_xstrdup(json_string_value(v));
	return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

/* One compiled `regex` condition: its text is the string in the rule's args. */
struct pdk_gw_rule_regex {
	const char *text; /* borrowed from r->args */
	regex_t re;
};

int pdk_gw_rules_compile(struct pdk_gw_config *c, struct pdk_error **err)
{
	for (size_t i = 0; i < c->n_rules; i++) {
		struct pdk_gw_rule *r = &c->rules[i];
		const char *arg, *op;
		json_t *cond, *want;

		json_object_foreach(r->args, arg, cond)
		{
			json_object_foreach(cond, op, want)
			{
				struct pdk_gw_rule_regex *x;

				if (strcmp(op, "regex") != 0 || !json_is_string(want))
					continue;
				r->regex = pdk_xrealloc(r->regex,
							(r->n_regex + 1) * sizeof(*r->regex));
				x = &r->regex[r->n_regex];
				x->text = json_string_value(want);
				if (regcomp(&x->re, x->text, REG_EXTENDED | REG_NOSUB) != 0)
					return pdk_error_setx(err, EINVAL,
							      "policy rule '%s': '%s' is not a "
							      "POSIX extended regex",
							      r->name, x->text);
				r->n_regex++;
			}
		}
	}
	return 0;
}

void pdk_gw_rule_release(struct pdk_gw_rule *r)
{
	for (size_t i = 0; i < r->n_regex; i++)
		regfree(&r->regex[i].re);
	free(r->regex);
	r->regex = NULL;
	r->n_regex = 0;
}

/* The condition's compiled form is found by its text's address: one rule, one string. */
static bool regex_holds(const struct pdk_gw_rule *r, const char *re_text, const char *s)
{
	for (size_t i = 0; i < r->n_regex; i++) {
		if (r->regex[i].text == re_text)
			return regexec(&r->regex[i].re, s, 0, NULL, 0) == 0;
	}
	return false; /* not compiled: fail closed */
}

static bool op_holds(const struct pdk_gw_rule *r, const char *op, const char *want, const char *s)
{
	if (strcmp(op, "equals") == 0)
		return strcmp(s, want) == 0;
	if (strcmp(op, "prefix") == 0)
		return strncmp(s, want, strlen(want)) == 0;
	if (strcmp(op, "glob") == 0)
		return fnmatch(want, s, 0) == 0;
	if (strcmp(op, "contains") == 0)
		return strstr(s, want) != NULL;
	if (strcmp(op, "regex") == 0)
		return regex_holds(r, want, s);
	return false;
}

static bool cond_holds(const struct pdk_gw_rule *r, const char *arg, const json_t *cond,
		       const json_t *args)
{
	const json_t *v = arg[0] == '/' ? pointer_get(args, arg) : json_object_get(args, arg);
	_cleanup_free_ char *s = NULL;
	const char *op;
	json_t *want;

	if (v == NULL || !json_is_object(cond))
		return false;
	s = arg_text(v);
	if (s == NULL)
		return false;
	json_object_foreach((json_t *)cond, op, want)
	{
		if (!json_is_string(want) || !op_holds(r, op, json_string_value(want), s))
			return false;
	}
	return json_object_size(cond) > 0;
}

static bool rule_holds(const struct pdk_gw_rule *r, const struct pdk_gw_call_info *ci)
{
	const char *arg;
	json_t *cond;

	if (!pattern_holds(r->principal, ci->principal) || !pattern_holds(r->server, ci->server) ||
	    !pattern_holds(r->tool, ci->tool))
		return false;
	json_object_foreach(r->args, arg, cond)
	{
		if (!cond_holds(r, arg, cond, ci->args))
			return false;
	}
	return true;
}

const struct pdk_gw_rule *pdk_gw_policy_match(const struct pdk_gw_config *c,
					      const struct pdk_gw_call_info *ci)
{
	for (size_t i = 0; i < c->n_rules; i++) {
		if (rule_holds(&c->rules[i], ci))
			return &c->rules[i];
	}
	return NULL;
}

bool pdk_gw_policy_denies_all(const struct pdk_gw_config *c, const char *principal,
			      const char *server, const char *tool)
{
	for (size_t i = 0; i < c->n_rules; i++) {
		const struct pdk_gw_rule *r = &c->rules[i];

		if (!pattern_holds(r->principal, principal) || !pattern_holds(r->server, server) ||
		    !pattern_holds(r->tool, tool))
			continue;
		if (json_object_size(r->args) == 0)
			return r->action == PDK_GW_DENY;
		/* It decides for some arguments: only a deny leaves the others to what follows. */
		if (r->action != PDK_GW_DENY)
			return false;
	}
	return c->dflt == PDK_GW_DENY;
}

/* ---- counters ---- */

#define MAX_TRACKED 10000
#define N_BUCKETS   4096
#define MINUTE_NS   (60ull * 1000000000ull)

struct counter {
	char *key;
	uint64_t calls;
	uint64_t *ring; /* rate: the times of the calls of the last minute, oldest at head */
	size_t ring_cap, head, n_ring;
	struct counter *hnext;       /* the bucket's chain */
	struct counter *prev, *next; /* the table's entries, oldest first */
};

struct table {
	struct counter *buckets[N_BUCKETS];
	struct counter *oldest, *newest;
	size_t n;
};

struct pdk_gw_budget {
	struct pdk_gw_budgets b;
	struct table principals, sessions, servers;
};

static size_t hash_key(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (size_t)(h % N_BUCKETS);
}

static struct counter *table_get(struct table *t, const char *key)
{
	for (struct counter *c = t->buckets[hash_key(key)]; c != NULL; c = c->hnext) {
		if (strcmp(c->key, key) == 0)
			return c;
	}
	return NULL;
}

static void counter_free(struct counter *c)
{
	free(c->key);
	free(c->ring);
	free(c);
}

static void table_remove(struct table *t, struct counter *c)
{
	struct counter **pp = &t->buckets[hash_key(c->key)];

	while (*pp != c)
		pp = &(*pp)->hnext;
	*pp = c->hnext;
	if (c->prev)
		c->prev->next = c->next;
	else
		t->oldest = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		t->newest = c->prev;
	t->n--;
	counter_free(c);
}

static struct counter *table_add(struct table *t, const char *key)
{
	struct counter *c = pdk_xcalloc(1, sizeof(*c));
	size_t h = hash_key(key);

	c->key = pdk_xstrdup(key);
	c->hnext = t->buckets[h];
	t->buckets[h] = c;
	c->prev = t->newest;
	if (t->newest)
		t->newest->next = c;
	else
		t->oldest = c;
	t->newest = c;
	t->n++;
	return c;
}

static void table_release(struct table *t)
{
	while (t->oldest)
		table_remove(t, t->oldest);
}

struct pdk_gw_budget *pdk_gw_budget_new(const struct pdk_gw_budgets *b)
{
	struct pdk_gw_budget *g = pdk_xcalloc(1, sizeof(*g));

	g->b = *b;
	return g;
}

void pdk_gw_budget_free(struct pdk_gw_budget *b)
{
	if (b == NULL)
		return;
	table_release(&b->principals);
	table_release(&b->sessions);
	table_release(&b->servers);
	free(b);
}

/* Drop the ring's times older than a minute before `now_ns`. */
static void ring_expire(struct counter *c, uint64_t now_ns)
{
	while (c->n_ring > 0 && now_ns - c->ring[c->head] >= MINUTE_NS) {
		c->head = (c->head + 1) % c->ring_cap;
		c->n_ring--;
	}
}

/* Append `now_ns`; the ring grows up to `max` (rate_per_minute) entries. */
static void ring_push(struct counter *c, uint64_t now_ns, uint64_t max)
{
	if (c->n_ring == c->ring_cap) {
		size_t cap = c->ring_cap ? c->ring_cap * 2 : 8;
		uint64_t *ring;

		cap = cap > max ? (size_t)max : cap;
		ring = pdk_xcalloc(cap, sizeof(*ring));
		for (size_t i = 0; i < c->n_ring; i++)
			ring[i] = c->ring[(c->head + i) % c->ring_cap];
		free(c->ring);
		c->ring = ring;
		c->ring_cap = cap;
		c->head = 0;
	}
	c->ring[(c->head + c->n_ring) % c->ring_cap] = now_ns;
	c->n_ring++;
}

/*
 * The counter of `key`, made if need be: a table at its bound refuses a
 * new principal or server (NULL), and makes room for a new session.
 */
static struct counter *counter_of(struct table *t, const char *key, bool evict)
{
	struct counter *c = table_get(t, key);

	if (c != NULL)
		return c;
	if (t->n >= MAX_TRACKED && !evict)
		return NULL;
	if (t->n >= MAX_TRACKED)
		table_remove(t, t->oldest);
	return table_add(t, key);
}

static int spent(const char *which, struct pdk_error **err)
{
	return pdk_error_set_field(err, EDQUOT, which, "the budget %s is spent", which);
}

int pdk_gw_budget_charge(struct pdk_gw_budget *b, const char *principal, const char *session,
			 const char *server, uint64_t now_ns, struct pdk_error **err)
{
	struct counter *p = counter_of(&b->principals, principal ? principal : "", false);
	struct counter *sv = counter_of(&b->servers, server ? server : "", false);
	struct counter *se = NULL;

	if (p == NULL)
		return spent("calls_per_principal", err);
	if (sv == NULL)
		return spent("calls_per_server", err);
	if (b->b.calls_per_principal && p->calls >= b->b.calls_per_principal)
		return spent("calls_per_principal", err);
	if (b->b.calls_per_server && sv->calls >= b->b.calls_per_server)
		return spent("calls_per_server", err);
	se = counter_of(&b->sessions, session ? session : "", true);
	if (b->b.calls_per_session && se->calls >= b->b.calls_per_session)
		return spent("calls_per_session", err);
	ring_expire(p, now_ns);
	if (b->b.rate_per_minute && p->n_ring >= b->b.rate_per_minute)
		return spent("rate_per_minute", err);
	p->calls++;
	sv->calls++;
	se->calls++;
	if (b->b.rate_per_minute)
		ring_push(p, now_ns, b->b.rate_per_minute);
	return 0;
}

void pdk_gw_budget_session_end(struct pdk_gw_budget *b, const char *session)
{
	struct counter *c = table_get(&b->sessions, session ? session : "");

	if (c != NULL)
		table_remove(&b->sessions, c);
}
