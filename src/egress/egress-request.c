/*
 * egress-request.c - reading a request from the sandbox: its head, then
 * its body, held (and scanned) before anything goes up, within the bound
 * on what all connections may hold together; then the allowlist decision
 * and the budgets, which send it upstream or refuse it.
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

/*
 * Request body bytes held by all connections together (docs/egress.md "The proxy"): without
 * it, 256 connections (the most at once) could make the supervisor hold 256 * HOLD_MAX bytes.
 */
#define HOLD_TOTAL (32 * 1024 * 1024)
/* Tests only: a lower HOLD_TOTAL for this proxy (1 byte to HOLD_TOTAL; docs/egress.md). */
#define HOLD_TOTAL_TEST_ENV "PADDOCK_TEST_EGRESS_HOLD_TOTAL" /* struct pdk_egress_config */

/* ---- the proxy-wide bound on held request bodies (HOLD_TOTAL) ---- */

/* Raise c's charge to `to` bytes; the caller checked that the bound has room (hold_room()). */
static void charge(struct pdk__egress_conn *c, size_t to)
{
	if (to <= c->charged)
		return;
	c->e->held += to - c->charged;
	c->charged = to;
}

void pdk__egress_unhold(struct pdk__egress_conn *c)
{
	c->e->held -= c->charged;
	c->charged = 0;
}

/* How many more body bytes c may hold now: within HOLD_MAX, its own charge and the bound. */
static size_t hold_room(const struct pdk__egress_conn *c)
{
	size_t held = evbuffer_get_length(c->held);
	size_t own = c->charged > held ? c->charged - held : 0;
	size_t room = own + (c->e->hold_cap - c->e->held);

	return room < PDK__EGRESS_HOLD_MAX - held ? room : PDK__EGRESS_HOLD_MAX - held;
}

/*
 * SECURITY: the sandbox cannot make the supervisor hold more than hold_cap
 * bytes of request bodies. A request that would take the total over it is
 * refused (503, Retry-After: 1), not made to wait: a waiting request would
 * keep what it already holds, and requests that wait for each other's bytes
 * would never end.
 */
static void hold_refuse(struct pdk__egress_conn *c, size_t want)
{
	_cleanup_free_ char *more = want ? pdk_xasprintf("%zu more wanted, ", want) : NULL;
	_cleanup_free_ char *why = pdk_xasprintf(
		"the request bodies the proxy holds would pass their bound (%zu bytes held, %sat "
		"most %zu): try again later",
		c->e->held, more ? more : "", c->e->hold_cap);

	pdk__egress_answer(c, false, 503, why);
}

/*
 * At a complete head: charge a body of known length with what it will hold
 * (up to HOLD_MAX) at once, so that a request that cannot be held whole is
 * refused before any of its body is read. A chunked body is charged as it
 * comes (read_body()); one that waits for "100 Continue" is not held. False
 * when the request was refused.
 */
static bool hold_reserve(struct pdk__egress_conn *c)
{
	const struct pdk__egress_head *h = &c->head;
	size_t want;

	if (h->msg_done || h->expect_continue || h->body_len == UINT64_MAX)
		return true;
	want = h->body_len < PDK__EGRESS_HOLD_MAX ? (size_t)h->body_len : PDK__EGRESS_HOLD_MAX;
	if (want > c->e->hold_cap - c->e->held) {
		hold_refuse(c, want);
		return false;
	}
	charge(c, want);
	return true;
}

/* The test-only lower bound (HOLD_TOTAL_TEST_ENV in the config), else HOLD_TOTAL. */
int pdk__egress_hold_setup(struct pdk_egress *e, struct pdk_error **err)
{
	const char *v = e->cfg.hold_total;
	uint64_t n = 0;

	e->hold_cap = HOLD_TOTAL;
	if (v == NULL)
		return 0;
	if (pdk_parse_size(v, &n) < 0 || n == 0 || n > HOLD_TOTAL)
		return pdk_error_setx(err, EINVAL, "%s '%s': a size from 1 byte to %d (tests only)",
				      HOLD_TOTAL_TEST_ENV, v, HOLD_TOTAL);
	e->hold_cap = (size_t)n;
	return 0;
}

/* ---- the decision ---- */

/*
 * Is the kept upstream connection one for this request? The same host (as
 * normalized, or the same IP text) and port, so the same rule and the
 * address that was checked for it; and the server has not closed it in the
 * meantime (a peek sees neither an end nor stray bytes).
 */
static bool can_reuse(const struct pdk__egress_conn *c)
{
	char b;

	if (c->up == NULL || c->up_host == NULL || c->head.connect || c->up_port != c->head.port ||
	    strcmp(c->up_host, c->head.host) != 0)
		return false;
	return recv(bufferevent_getfd(c->up), &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
	       (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* c->rule: the rule that allows the request's host (or IP) and port; false after a 403. */
static bool allowed(struct pdk__egress_conn *c)
{
	const struct pdk_egress_config *cfg = &c->e->cfg;
	struct pdk__egress_head *h = &c->head;
	_cleanup_free_ char *why = NULL, *hint = NULL;

	if (h->host_is_ip)
		c->rule = pdk__egress_match_addr(c->e, (struct sockaddr *)&h->ip, h->port);
	else
		c->rule = pdk__egress_match_host(c->e, h->host, h->port);
	if (c->rule != NULL)
		return true;
	hint = pdk_net_allow_hint(h->host, h->port);
	why = pdk_xasprintf("no network.allow rule allows %s%s%s port %u (network.mode "
			    "allowlist); to allow it, run with --allow %s or add '%s' to the "
			    "profile's network.allow",
			    h->ip.ss_family == AF_INET6 ? "[" : "", h->host,
			    h->ip.ss_family == AF_INET6 ? "]" : "", h->port, hint, hint);
	pdk_net_denials_add(cfg->denials, h->host, h->port, "no network.allow entry");
	pdk__egress_answer(c, false, 403, why);
	return false;
}

void pdk__egress_decide(struct pdk__egress_conn *c)
{
	const char *limit = NULL;
	const char *refusal;
	uint64_t value = 0;
	bool reuse;

	if (!pdk__egress_recording(c))
		return;
	if (!allowed(c))
		return;
	reuse = can_reuse(c);
	if (!reuse)
		pdk__egress_close_up(c); /* before the budget check: it frees a connection */
	refusal = pdk__egress_budget_refusal(c->e, reuse, &limit, &value);
	if (refusal != NULL) {
		(void)pdk__egress_emit_limit(c->e, limit, value); /* refused either way */
		pdk__egress_answer(c, false, 429, refusal);
		return;
	}
	if (c->tunnel_host == NULL)
		c->intercept = c->head.connect && pdk__egress_wants_interception(c);
	bufferevent_disable(c->client, EV_READ);
	bufferevent_set_timeouts(c->client, NULL, NULL);
	if (reuse) {
		c->e->requests++;
		c->reused = true;
		memcpy(c->addr, c->up_addr, sizeof(c->addr));
		pdk__egress_forward_start(c);
		return;
	}
	pdk__egress_open_upstream(c);
}

static void go_upstream(struct pdk__egress_conn *c)
{
	if (c->intercept)
		pdk__egress_intercepted_request(c);
	else
		pdk__egress_decide(c);
}

/* ---- reading ---- */

/*
 * PDK__EGRESS_ST_BODY: the request's body is held (HOLD_MAX at most) and
 * scanned before anything of the request goes up, so that a refused one
 * sends nothing, and a request on a kept connection can be sent again
 * (pdk__egress_retry()). A longer body goes up as it comes once HOLD_MAX is
 * held, scanned on its way; so does one whose client waits for "100
 * Continue".
 */
static void read_body(struct pdk__egress_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->client);

	while (!c->head.msg_done && !c->head.expect_continue && evbuffer_get_length(in) > 0 &&
	       evbuffer_get_length(c->held) < PDK__EGRESS_HOLD_MAX) {
		size_t room = hold_room(c);
		size_t len = evbuffer_get_contiguous_space(in);
		ssize_t n;

		if (room == 0) {
			/* A chunked body (its length unknown), and the bound is reached. */
			hold_refuse(c, 0);
			return;
		}
		len = len < room ? len : room;
		n = pdk__egress_body_feed(&c->head, pdk__egress_buf_pullup(in, len), len);
		if (pdk__egress_body_refused(c))
			return;
		if (n < 0) {
			pdk__egress_answer(c, false, 400, "the request body is malformed");
			return;
		}
		pdk__egress_buf_move(c->held, in, (size_t)n);
		charge(c, evbuffer_get_length(c->held));
		if ((size_t)n < len && !c->head.msg_done)
			return; /* the parser wants more */
	}
	if (c->head.msg_done || c->head.expect_continue ||
	    evbuffer_get_length(c->held) >= PDK__EGRESS_HOLD_MAX)
		go_upstream(c);
}

void pdk__egress_client_read(struct bufferevent *bev, void *arg)
{
	struct pdk__egress_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	size_t scan = len < PDK__EGRESS_HEAD_MAX ? len : PDK__EGRESS_HEAD_MAX;
	const char *data;
	int n;

	if (c->state == PDK__EGRESS_ST_BODY) {
		read_body(c);
		return;
	}
	data = pdk__egress_buf_pullup(in, scan);
	n = c->intercept ? pdk__egress_head_parse_origin(&c->head, data, scan, c->tunnel_host,
							 c->tunnel_port)
			 : pdk__egress_head_parse(&c->head, data, scan);
	if (n == 0)
		return;
	if (n < 0) {
		pdk__egress_answer(c, false, c->head.status, c->head.reason);
		return;
	}
	c->t_start = pdk_now_mono_ns();
	if (!c->head.connect && pdk__egress_cred_head(c, data) < 0)
		return;
	pdk__egress_buf_drain(in, (size_t)n);
	if (c->head.connect) {
		pdk__egress_decide(c);
		return;
	}
	if (!hold_reserve(c))
		return;
	c->state = PDK__EGRESS_ST_BODY;
	read_body(c);
}

void pdk__egress_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct pdk__egress_conn *c = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return; /* an intercepted tunnel: the sandbox's TLS handshake is done */
	if ((what & BEV_EVENT_TIMEOUT) && c->state == PDK__EGRESS_ST_BODY) {
		pdk__egress_answer(c, false, 400, "the request body did not arrive in time");
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
		pdk__egress_answer(c, false, 400, "the request head did not arrive in time");
		return;
	}
	if (c->intercept && (what & BEV_EVENT_ERROR))
		pdk__egress_client_tls_failed(c);
	pdk__egress_conn_free(c); /* EOF, error, or an idle keep-alive connection */
}
