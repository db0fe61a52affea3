/*
 * upstream.c - one MCP server spoken to as a JSON-RPC client: a stdio one
 * run in a sandbox of its own, or a remote one over Streamable HTTP
 * (docs/internals/gateway.md, "Upstreams", "Remote upstreams").
 *
 * The life of one: a sandbox is created through control/ with the profile
 * the caller wrote from the server's manifest; the server's command is
 * streamed in it with stdin open; initialize goes in as the command's first
 * stdin, then notifications/initialized and tools/list (every page). From
 * then on tools/call requests go in under ids of our own, and its answers,
 * progress and notifications come out of its stdout, one message a line.
 * Whatever it writes on stderr is kept (the last PDK_GW_UP_STDERR_KEEP
 * bytes) to say why it failed.
 *
 * Everything the server sends is untrusted: a line is capped, a line that
 * is not JSON-RPC ends it, and the requests it makes of us (sampling,
 * elicitation, roots) are refused: the gateway grants none.
 *
 * control/'s callbacks (the create, the command) hold a small link object
 * rather than the upstream itself: the owner may free the upstream before
 * they come, and then they only clean up (destroy a sandbox made too late)
 * and log.
 *
 * A remote server has no sandbox: its messages go through remote.c (a POST
 * each) and come back as whole messages rather than lines. Everything else
 * (the handshake, the listing and its caps, the ids, the progress tokens,
 * the timeouts, the refused requests) is this file's for both, so that the
 * two kinds keep the same rules.
 */
#include "common.h"
#include "gateway-internal.h"
#include "control.h"
#include "mcp.h"

#include <event2/event.h>
#include <inttypes.h>
#include <string.h>

#define CALLS_MAX                64          /* calls in flight to one upstream */
#define LIST_PAGES_MAX           100         /* tools/list pages followed */
#define LIST_TOOLS_MAX           10000       /* tools listed */
#define LIST_BYTES_MAX           (16u << 20) /* every page of one listing together */
#define EXCERPT_MAX              160         /* bytes of a bad message named in an error */
#define STDERR_LINES             4           /* the last stderr lines named in a failure */
#define DENIED_NAMED             3           /* refused destinations named in a failure */
#define OUTPUT_CAP               4096        /* control/'s minimum is 64; streaming keeps nothing */
#define START_TIMEOUT_MS_DEFAULT 30000
#define CALL_TIMEOUT_MS_DEFAULT  60000
#define REINITS_MAX              3 /* sessions a remote server may lose before its tools are listed */

enum up_state {
	UP_CREATING, /* the sandbox is being made */
	UP_STARTING, /* the command runs: initialize and the first tools/list */
	UP_READY,    /* calls may go */
	UP_FAILED,   /* it failed: it waits for its owner to free it */
};

/*
 * What control/'s callbacks are given. It outlives the upstream when they
 * are still to come after pdk__gw_up_free(); the last reference frees it.
 */
struct up_link {
	struct pdk_gw_up *u; /* NULL once the upstream is freed */
	struct pdk_ctl *ctl;
	const struct pdk_log *log;
	char *server;  /* the server's id, for what is logged after the upstream is gone */
	unsigned refs; /* the upstream's, and one per control callback still to come */
};

struct pdk_gw_up_call {
	struct pdk_gw_up *u;
	struct pdk_gw_up_call *prev, *next;
	json_int_t id; /* ours, upstream */
	char *tool;
	json_t *token; /* the caller's progress token (owned), or NULL */
	pdk_gw_up_result_cb done;
	pdk_gw_up_progress_cb progress;
	void *ctx;
	struct event *timer;
	json_t *params; /* a remote call's, kept to send it again in a new session (else NULL) */
	bool resend;    /* its session ended before it was answered: sent again once ready */
	bool resent;
};

struct pdk_gw_up {
	struct pdk_ctl *ctl;
	struct event_base *base;
	const struct pdk_gw_server *s;
	struct pdk_gw_up_cbs cbs;
	void *ctx;
	const struct pdk_log *log;
	struct up_link *link;
	enum up_state state;
	char *sandbox;                        /* its control id, once created */
	bool destroying;                      /* its destroy was asked */
	uint64_t exec_id;                     /* the command's, once started */
	struct pdk_ctl_exec *x;               /* the command, until its end */
	struct pdk_buf line;                  /* the message being read from its stdout */
	char err_tail[PDK_GW_UP_STDERR_KEEP]; /* the last bytes of its stderr */
	size_t err_len;
	json_int_t next_id;
	json_int_t init_id, list_id; /* the initialize and tools/list waited for (0: none) */
	const char *phase;           /* what the start timer waits for */
	struct event *timer;         /* the start and tools/list timer */
	json_t *tools;               /* the pages listed so far */
	unsigned pages;
	size_t list_bytes; /* their size as sent */
	size_t line_len;   /* the size of the message being handled */
	bool relist;       /* a list_changed came while a list was being read */
	struct pdk_gw_up_call *calls;
	size_t n_calls;
	struct pdk__gw_remote *remote; /* a remote server's transport, or NULL */
	unsigned reinits;              /* sessions lost (404) since the last listing */
	unsigned depth;                /* callbacks of ours running: a free waits for the last */
	bool freed;
};

/* ---- the link ---- */

static struct up_link *link_get(struct up_link *l)
{
	l->refs++;
	return l;
}

static void link_put(struct up_link *l)
{
	if (--l->refs > 0)
		return;
	free(l->server);
	free(l);
}

static void destroyed(void *ctx, const char *id, const char *state, const struct pdk_error *err)
{
	struct up_link *l = ctx;

	if (err != NULL)
		pdk_log(l->log, PDK_LOG_WARN, "gateway: server %s: sandbox %s: %s", l->server, id,
			err->msg);
	else
		pdk_log(l->log, PDK_LOG_INFO, "gateway: server %s: sandbox %s %s", l->server, id,
			state);
	link_put(l);
}

/* Destroy sandbox `id` (the callback only logs). */
static void destroy_sandbox(struct up_link *l, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_ctl_destroy(l->ctl, id, "gateway", NULL, destroyed, link_get(l), &err) < 0) {
		pdk_log(l->log, PDK_LOG_WARN, "gateway: server %s: cannot destroy sandbox %s: %s",
			l->server, id, err->msg);
		link_put(l);
	}
}

/* ---- texts for errors ---- */

/*
 * The `n` bytes at `p` as one line of UTF-8 to quote in an error: invalid
 * bytes as U+FFFD, control characters as spaces, at most `max` bytes
 * taken ("..." says more was there). Caller frees.
 */
static char *excerpt(const char *p, size_t n, size_t max)
{
	size_t len = 0;
	char *s = pdk_utf8_clean(p, n < max ? n : max, true, &len, NULL);
	char *out;

	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			s[i] = ' ';
	if (n <= max)
		return s;
	out = pdk_xasprintf("%s...", s);
	free(s);
	return out;
}

/* The last STDERR_LINES non-empty lines of its stderr, joined by " | " (NULL: none). */
static char *stderr_lines(const struct pdk_gw_up *u)
{
	const char *lines[STDERR_LINES] = {0};
	size_t lens[STDERR_LINES] = {0};
	const char *p = u->err_tail, *end = u->err_tail + u->err_len;
	char *out = NULL;
	size_t n = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t k = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (k > 0 && !(k == 1 && *p == '\r')) {
			lines[n % STDERR_LINES] = p;
			lens[n++ % STDERR_LINES] = k;
		}
		p += k + (nl != NULL);
	}
	for (size_t i = n > STDERR_LINES ? n - STDERR_LINES : 0; i < n; i++) {
		_cleanup_free_ char *one =
			excerpt(lines[i % STDERR_LINES], lens[i % STDERR_LINES], 512);
		char *joined = pdk_xasprintf("%s%s%s", out ? out : "", out ? " | " : "", one);

		free(out);
		out = joined;
	}
	return out;
}

/* "N s" for whole seconds, else "N ms". */
static char *duration(uint64_t ms)
{
	if (ms % 1000 == 0)
		return pdk_xasprintf("%" PRIu64 " s", ms / 1000);
	return pdk_xasprintf("%" PRIu64 " ms", ms);
}

static uint64_t start_timeout_ms(const struct pdk_gw_up *u)
{
	return u->s->start_timeout_ms ? u->s->start_timeout_ms : START_TIMEOUT_MS_DEFAULT;
}

static uint64_t call_timeout_ms(const struct pdk_gw_up *u)
{
	return u->s->timeout_ms ? u->s->timeout_ms : CALL_TIMEOUT_MS_DEFAULT;
}

static void timer_arm(struct event *ev, uint64_t ms)
{
	struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
			     .tv_usec = (suseconds_t)((ms % 1000) * 1000)};

	if (evtimer_add(ev, &tv) < 0)
		pdk_oom();
}

/* ---- keeping the upstream alive across the owner's callbacks ---- */

static void up_release(struct pdk_gw_up *u);

static void hold(struct pdk_gw_up *u)
{
	u->depth++;
}

/* The end of a callback of ours: a free asked during it happens now. */
static void unhold(struct pdk_gw_up *u)
{
	if (--u->depth == 0 && u->freed)
		up_release(u);
}

/* Whether the upstream still listens to its server. */
static bool alive(const struct pdk_gw_up *u)
{
	return !u->freed && u->state != UP_FAILED;
}

/* ---- calls ---- */

static void call_unlink(struct pdk_gw_up_call *c)
{
	struct pdk_gw_up *u = c->u;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		u->calls = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	u->n_calls--;
}

static void call_free(struct pdk_gw_up_call *c)
{
	event_free(c->timer);
	json_decref(c->params);
	json_decref(c->token);
	free(c->tool);
	free(c);
}

static struct pdk_gw_up_call *call_find(struct pdk_gw_up *u, json_int_t id)
{
	for (struct pdk_gw_up_call *c = u->calls; c != NULL; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/* Call `c`'s `done` once, after it left the upstream (the callback may free the upstream). */
static void call_finish(struct pdk_gw_up_call *c, const json_t *result, const struct pdk_error *err)
{
	pdk_gw_up_result_cb done = c->done;
	void *ctx = c->ctx;

	call_unlink(c);
	call_free(c);
	done(ctx, result, err);
}

/* ---- sending ---- */

/* Send `msg` (taken) to the server's stdin. */
static int send_msg(struct pdk_gw_up *u, json_t *msg, struct pdk_error **err)
{
	_cleanup_json_ json_t *m = msg;
	_cleanup_free_ char *line = pdk_json_dump_line(m);
	struct pdk_ctl_sb *sb = NULL;
	int rc;

	if (line == NULL)
		pdk_oom();
	if (u->remote != NULL)
		return pdk__gw_remote_send(u->remote, m, err);
	if (u->exec_id == 0)
		return pdk_error_setx(err, ENOTCONN, "server %s: its command has not started",
				      u->s->id);
	rc = pdk_ctl_find(u->ctl, u->sandbox, PDK_CTL_FIND_LIVE, &sb, err);
	if (rc == 0)
		rc = pdk_ctl_exec_stdin(sb, u->exec_id, line, strlen(line), false, err);
	if (rc < 0 && err != NULL && *err != NULL)
		(void)pdk_error_wrap(err, "server %s", u->s->id);
	return rc;
}

/* A message of ours nobody waits an answer for: a failure to send it is only logged. */
static void send_quiet(struct pdk_gw_up *u, json_t *msg)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (send_msg(u, msg, &err) < 0)
		pdk_log(u->log, PDK_LOG_WARN, "gateway: %s", err->msg);
}

static void send_cancelled(struct pdk_gw_up *u, json_int_t id, const char *reason)
{
	send_quiet(u, pdk_rpc_notification(
			      "notifications/cancelled",
			      json_pack("{s:I, s:s}", "requestId", id, "reason", reason)));
}

/* ---- failure ---- */

/*
 * The end of the upstream's work: its command killed and its sandbox
 * destroyed (neither waited for), every call in flight answered ENOTCONN,
 * then the owner told. Once.
 */
static void fail(struct pdk_gw_up *u, const struct pdk_error *why)
{
	if (!alive(u))
		return;
	u->state = UP_FAILED;
	event_del(u->timer);
	json_decref(steal_ptr(&u->tools));
	if (u->remote != NULL)
		pdk__gw_remote_stop(u->remote);
	if (u->x != NULL)
		pdk_ctl_exec_cancel(u->x);
	if (u->sandbox != NULL && !u->destroying) {
		u->destroying = true;
		destroy_sandbox(u->link, u->sandbox);
	}
	hold(u);
	while (u->calls != NULL && !u->freed) {
		struct pdk_error gone = {.status = ENOTCONN, .msg = why->msg};

		call_finish(u->calls, NULL, &gone);
	}
	if (!u->freed)
		u->cbs.failed(u->ctx, u, why);
	unhold(u);
}

static void failf(struct pdk_gw_up *u, int status, const char *fmt, ...) PDK_PRINTF(3, 4);

static void failf(struct pdk_gw_up *u, int status, const char *fmt, ...)
{
	struct pdk_error e = {.status = status};
	va_list ap;

	va_start(ap, fmt);
	e.msg = pdk_xvasprintf(fmt, ap);
	va_end(ap);
	fail(u, &e);
	free(e.msg);
}

/* ---- the tools list ---- */

/* Ask for the page after `cursor` (NULL: the first), within the start timeout. */
static void list_page(struct pdk_gw_up *u, const json_t *cursor)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_int_t id = ++u->next_id;
	_cleanup_json_ json_t *jid = json_integer(id);
	json_t *params = json_object();

	if (params == NULL)
		pdk_oom();
	if (cursor != NULL)
		pdk_json_set(params, "cursor", json_incref((json_t *)cursor));
	if (u->tools == NULL) {
		u->tools = json_array();
		u->pages = 0;
		u->list_bytes = 0;
		if (u->tools == NULL)
			pdk_oom();
	}
	if (send_msg(u, pdk_rpc_request(jid, "tools/list", params), &err) < 0) {
		fail(u, err);
		return;
	}
	u->list_id = id;
	u->phase = "tools/list";
	timer_arm(u->timer, start_timeout_ms(u));
}

/* Every tool of a page is an object with a string name: 0, or -1 when one is not. */
static int page_check(struct pdk_gw_up *u, const json_t *tools)
{
	size_t i;
	json_t *t;

	if (!json_is_array(tools)) {
		failf(u, EPROTO, "server %s: answered tools/list without a tools array", u->s->id);
		return -1;
	}
	json_array_foreach(tools, i, t)
	{
		if (!json_is_string(json_object_get(t, "name"))) {
			failf(u, EPROTO, "server %s: tools/list: tool %zu has no string name",
			      u->s->id, json_array_size(u->tools) + i);
			return -1;
		}
	}
	return 0;
}

static struct pdk_gw_up_call *first_resend(struct pdk_gw_up *u)
{
	for (struct pdk_gw_up_call *c = u->calls; c != NULL; c = c->next)
		if (c->resend)
			return c;
	return NULL;
}

/*
 * The calls whose session ended before they were answered go again, in
 * the session that is now the server's (a 404 says the server did not
 * take them). One at a time from the start: a result callback may end
 * others.
 */
static void resend_calls(struct pdk_gw_up *u)
{
	struct pdk_gw_up_call *c;

	hold(u);
	while (alive(u) && (c = first_resend(u)) != NULL) {
		_cleanup_error_ struct pdk_error *err = NULL;
		_cleanup_json_ json_t *id = json_integer(c->id);

		c->resend = false;
		c->resent = true;
		if (send_msg(u, pdk_rpc_request(id, "tools/call", json_incref(c->params)), &err) <
		    0)
			call_finish(c, NULL, err);
	}
	unhold(u);
}

/* The whole list is read: the owner gets it, and a list_changed that came meanwhile lists again. */
static void list_done(struct pdk_gw_up *u)
{
	_cleanup_json_ json_t *tools = steal_ptr(&u->tools);

	u->list_id = 0;
	u->phase = NULL;
	event_del(u->timer);
	u->state = UP_READY;
	u->reinits = 0;
	hold(u);
	u->cbs.tools(u->ctx, u, tools);
	if (alive(u))
		resend_calls(u);
	if (alive(u) && u->relist) {
		u->relist = false;
		list_page(u, NULL);
	}
	unhold(u);
}

static void on_list_answer(struct pdk_gw_up *u, const struct pdk_rpc_msg *m)
{
	const json_t *tools = json_object_get(m->result, "tools");
	const json_t *cursor = json_object_get(m->result, "nextCursor");

	if (m->error != NULL) {
		failf(u, EPROTO, "server %s: refused tools/list: %.200s", u->s->id,
		      json_string_value(json_object_get(m->error, "message")));
		return;
	}
	if (page_check(u, tools) < 0)
		return;
	if (json_array_extend(u->tools, (json_t *)tools) < 0)
		pdk_oom();
	/* SECURITY: pages of 4 MiB each would add up without bound: the whole list has one. */
	u->list_bytes += u->line_len;
	if (++u->pages > LIST_PAGES_MAX || json_array_size(u->tools) > LIST_TOOLS_MAX ||
	    u->list_bytes > LIST_BYTES_MAX) {
		failf(u, E2BIG, "server %s: listed more than %u pages, %u tools or %u MiB of them",
		      u->s->id, LIST_PAGES_MAX, LIST_TOOLS_MAX, LIST_BYTES_MAX >> 20);
		return;
	}
	if (json_is_string(cursor))
		list_page(u, cursor);
	else
		list_done(u);
}

/* ---- the handshake ---- */

static json_t *initialize_request(json_int_t id)
{
	_cleanup_json_ json_t *jid = json_integer(id);

	return pdk_rpc_request(jid, "initialize",
			       json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion",
					 PDK_MCP_VERSION_PREV, "capabilities", "clientInfo", "name",
					 "paddock-gateway", "version", PDK_VERSION));
}

static void on_init_answer(struct pdk_gw_up *u, const struct pdk_rpc_msg *m)
{
	const char *version = json_string_value(json_object_get(m->result, "protocolVersion"));

	u->init_id = 0;
	if (m->error != NULL) {
		failf(u, EPROTO, "server %s: refused initialize: %.200s", u->s->id,
		      json_string_value(json_object_get(m->error, "message")));
		return;
	}
	if (version == NULL || strlen(version) > 32 ||
	    strspn(version, "0123456789-") != strlen(version)) {
		failf(u, EPROTO, "server %s: answered initialize without a protocolVersion",
		      u->s->id);
		return;
	}
	/* A remote server is told the version on every request after this one. */
	if (u->remote != NULL)
		pdk__gw_remote_initialized(u->remote, version);
	send_quiet(u, pdk_rpc_notification("notifications/initialized", NULL));
	if (alive(u))
		list_page(u, NULL);
}

/* ---- what the server sends ---- */

static void on_call_answer(struct pdk_gw_up *u, struct pdk_gw_up_call *c,
			   const struct pdk_rpc_msg *m)
{
	_cleanup_free_ char *text = NULL;
	struct pdk_error e = {.status = EPROTO};

	(void)u;
	if (m->error == NULL) {
		call_finish(c, m->result, NULL);
		return;
	}
	/* The upstream's own message, as it said it (made printable). */
	text = json_string_value(json_object_get(m->error, "message"))
		       ? pdk_xstrdup(json_string_value(json_object_get(m->error, "message")))
		       : pdk_xstrdup("(no message)");
	e.msg = text;
	call_finish(c, NULL, &e);
}

static void on_response(struct pdk_gw_up *u, const struct pdk_rpc_msg *m)
{
	json_int_t id = json_integer_value(m->id);
	struct pdk_gw_up_call *c;

	if (!json_is_integer(m->id) || id <= 0) {
		pdk_log(u->log, PDK_LOG_INFO, "gateway: server %s: an answer to no request of ours",
			u->s->id);
		return;
	}
	if (id == u->init_id) {
		on_init_answer(u, m);
		return;
	}
	if (id == u->list_id) {
		on_list_answer(u, m);
		return;
	}
	c = call_find(u, id);
	if (c != NULL)
		on_call_answer(u, c, m);
	else /* a call cancelled or timed out: its late answer goes nowhere */
		pdk_log(u->log, PDK_LOG_INFO, "gateway: server %s: a late answer to request %lld",
			u->s->id, (long long)id);
}

/*
 * SECURITY: a server asks nothing of the gateway's clients. Sampling,
 * elicitation and roots would reach the model or the user's files on a
 * server's behalf: each is refused; ping is answered.
 */
static void on_request(struct pdk_gw_up *u, const struct pdk_rpc_msg *m)
{
	_cleanup_free_ char *text = NULL;

	if (strcmp(m->method, "ping") == 0) {
		send_quiet(u, pdk_rpc_result(m->id, json_object()));
		return;
	}
	pdk_log(u->log, PDK_LOG_INFO, "gateway: server %s asked for %.100s: refused", u->s->id,
		m->method);
	text = pdk_xasprintf("the gateway grants no %.100s to its servers", m->method);
	send_quiet(u, pdk_rpc_error(m->id, PDK_RPC_METHOD_NOT_FOUND, text, NULL));
}

/* A progress notification of one of our calls goes to its caller with the caller's token. */
static void on_progress(struct pdk_gw_up *u, const json_t *params)
{
	const char *token = json_string_value(json_object_get(params, "progressToken"));
	_cleanup_json_ json_t *out = NULL;
	struct pdk_gw_up_call *c;
	char *end = NULL;
	long long id;

	if (token == NULL || strncmp(token, "p-", 2) != 0)
		return;
	errno = 0;
	id = strtoll(token + 2, &end, 10);
	if (errno != 0 || end == token + 2 || *end != '\0')
		return;
	c = call_find(u, (json_int_t)id);
	if (c == NULL || c->progress == NULL || c->token == NULL)
		return;
	out = json_deep_copy(params);
	if (out == NULL)
		pdk_oom();
	pdk_json_set(out, "progressToken", json_incref(c->token));
	hold(u);
	c->progress(c->ctx, out);
	unhold(u);
}

static void on_notification(struct pdk_gw_up *u, const struct pdk_rpc_msg *m)
{
	_cleanup_free_ char *text = NULL;

	if (strcmp(m->method, "notifications/progress") == 0) {
		on_progress(u, m->params);
		return;
	}
	if (strcmp(m->method, "notifications/tools/list_changed") == 0) {
		if (u->state == UP_READY && u->list_id == 0)
			list_page(u, NULL);
		else if (u->list_id != 0)
			u->relist = true;
		return;
	}
	/* logging/message and the rest: logged, nothing passes on. */
	text = m->params ? json_dumps(m->params, JSON_COMPACT) : NULL;
	pdk_log(u->log, PDK_LOG_INFO, "gateway: server %s: %.100s %.512s", u->s->id, m->method,
		text ? text : "");
}

/* One message it sent: a JSON-RPC message, or the end of it. */
static void one_message(struct pdk_gw_up *u, const char *p, size_t n)
{
	struct pdk_rpc_msg m;
	struct pdk_rpc_refusal why;

	if (pdk_rpc_parse(p, n, PDK_GW_UP_MESSAGE_MAX, &m, &why) < 0) {
		_cleanup_free_ char *ex = excerpt(p, n, EXCERPT_MAX);

		failf(u, EPROTO, "server %s: sent something that is not JSON-RPC (%s): '%s'",
		      u->s->id, why.msg, ex);
		pdk_rpc_refusal_release(&why);
		return;
	}
	u->line_len = n;
	switch (m.kind) {
	case PDK_RPC_REQUEST:
		on_request(u, &m);
		break;
	case PDK_RPC_NOTIFICATION:
		on_notification(u, &m);
		break;
	case PDK_RPC_RESPONSE:
	case PDK_RPC_ERROR:
		on_response(u, &m);
		break;
	default:
		break;
	}
	pdk_rpc_msg_release(&m);
}

/* One line of its stdout. */
static void one_line(struct pdk_gw_up *u, const char *p, size_t n)
{
	if (n > 0 && p[n - 1] == '\r')
		n--;
	if (n > 0)
		one_message(u, p, n);
}

/* Take in `n` bytes of its stdout: every complete line is a message. */
static void take(struct pdk_gw_up *u, const char *p, size_t n)
{
	while (n > 0 && alive(u)) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (pdk_buf_add(&u->line, p, k) < 0) {
			_cleanup_free_ char *ex = excerpt(pdk_buf_str(&u->line), u->line.len, 60);

			/* SECURITY: a line without end would grow without bound: it ends the
			 * server. */
			failf(u, E2BIG,
			      "server %s: sent a line longer than %u MiB (it floods its output): "
			      "'%s'",
			      u->s->id, PDK_GW_UP_MESSAGE_MAX >> 20, ex);
			return;
		}
		if (nl == NULL)
			return;
		one_line(u, pdk_buf_str(&u->line), u->line.len);
		pdk_buf_reset(&u->line);
		p += k + 1;
		n -= k + 1;
	}
}

/* Keep the last PDK_GW_UP_STDERR_KEEP bytes of its stderr. */
static void keep_stderr(struct pdk_gw_up *u, const char *p, size_t n)
{
	size_t keep = sizeof(u->err_tail);

	if (n >= keep) {
		memcpy(u->err_tail, p + n - keep, keep);
		u->err_len = keep;
		return;
	}
	if (u->err_len + n > keep) {
		size_t drop = u->err_len + n - keep;

		memmove(u->err_tail, u->err_tail + drop, u->err_len - drop);
		u->err_len -= drop;
	}
	memcpy(u->err_tail + u->err_len, p, n);
	u->err_len += n;
}

/* ---- the command's callbacks ---- */

static void cmd_started(void *ctx, uint64_t exec_id, int pid, bool pty)
{
	struct up_link *l = ctx;

	(void)pid;
	(void)pty;
	if (l->u != NULL)
		l->u->exec_id = exec_id;
}

static void cmd_output(void *ctx, int stream, const char *data, size_t len)
{
	struct pdk_gw_up *u = ((struct up_link *)ctx)->u;

	if (u == NULL || !alive(u))
		return;
	if (stream == 2) {
		keep_stderr(u, data, len);
		return;
	}
	hold(u);
	take(u, data, len);
	unhold(u);
}

/* "the egress proxy refused DEST: ..." for the first DENIED_NAMED refusals (NULL: none). */
static char *denied_text(const struct pdk_ctl_exit *e)
{
	char *out = NULL;
	size_t i;
	json_t *d;

	json_array_foreach(e->denied, i, d)
	{
		const char *dest = json_string_value(json_object_get(d, "dest"));
		const char *why = json_string_value(json_object_get(d, "why"));
		char *more;

		if (i >= DENIED_NAMED || dest == NULL)
			break;
		more = pdk_xasprintf("%s%sthe egress proxy refused %s: not in "
				     "permissions.network.client (%s)",
				     out ? out : "", out ? "; " : "", dest, why ? why : "refused");
		free(out);
		out = more;
	}
	return out;
}

/* How the command ended, as the failure names it. */
static char *exit_text(const struct pdk_gw_up *u, const struct pdk_ctl_exec_result *r)
{
	_cleanup_free_ char *lines = stderr_lines(u), *denied = denied_text(&r->exit);
	_cleanup_free_ char *how = NULL;

	if (r->exit.has_signal && r->exit.signal > 0)
		how = pdk_xasprintf("killed by signal %d (%s)", r->exit.signal,
				    sigabbrev_np(r->exit.signal) ? sigabbrev_np(r->exit.signal)
								 : "?");
	else if (r->exit.has_exit_code)
		how = pdk_xasprintf("exited with status %d", r->exit.exit_code);
	else
		how = pdk_xstrdup("ended with its sandbox");
	return pdk_xasprintf("server %s: %s%s%s%s%s", u->s->id, how, lines ? ": " : "",
			     lines ? lines : "", denied ? "; " : "", denied ? denied : "");
}

static void cmd_done(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err)
{
	struct up_link *l = ctx;
	struct pdk_gw_up *u = l->u;
	_cleanup_free_ char *text = NULL;

	if (u != NULL)
		u->x = NULL;
	if (u != NULL && alive(u)) {
		hold(u);
		if (err != NULL) {
			failf(u, err->status, "server %s: its command did not start: %s", u->s->id,
			      err->msg);
		} else {
			text = exit_text(u, r);
			failf(u, ENOTCONN, "%s", text);
		}
		unhold(u);
	}
	link_put(l);
}

/* ---- the sandbox ---- */

static void start_command(struct pdk_gw_up *u)
{
	static const struct pdk_ctl_exec_cbs cbs = {
		.started = cmd_started, .output = cmd_output, .done = cmd_done};
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *init = NULL;
	_cleanup_free_ char *line = NULL;
	struct pdk_ctl_sb *sb = NULL;
	struct pdk_ctl_exec_req req = {.argv = u->s->command,
				       .cwd = u->s->cwd,
				       .output_cap = OUTPUT_CAP,
				       .stdin_open = true};

	u->init_id = ++u->next_id;
	init = initialize_request(u->init_id);
	line = pdk_json_dump_line(init);
	if (line == NULL)
		pdk_oom();
	/* initialize is the command's first stdin: it waits for no start report. */
	req.stdin_data = line;
	req.stdin_len = strlen(line);
	if (pdk_ctl_find(u->ctl, u->sandbox, PDK_CTL_FIND_LIVE, &sb, &err) < 0 ||
	    pdk_ctl_exec(sb, &req, true, &cbs, link_get(u->link), &u->x, &err) < 0) {
		link_put(u->link);
		failf(u, err->status, "server %s: cannot run its command: %s", u->s->id, err->msg);
		return;
	}
	u->state = UP_STARTING;
	u->phase = "initialize";
	timer_arm(u->timer, start_timeout_ms(u));
}

static void created(void *ctx, const struct pdk_ctl_created *c, const struct pdk_error *err)
{
	struct up_link *l = ctx;
	struct pdk_gw_up *u = l->u;

	/* Freed or failed (its start timed out) meanwhile: what was made is not wanted. */
	if (u == NULL || !alive(u)) {
		if (err == NULL)
			destroy_sandbox(l, c->view.id);
		link_put(l);
		return;
	}
	hold(u);
	if (err != NULL) {
		failf(u, err->status, "server %s: %s", u->s->id, err->msg);
	} else {
		u->sandbox = pdk_xstrdup(c->view.id);
		start_command(u);
	}
	unhold(u);
	link_put(l);
}

static void on_start_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_gw_up *u = arg;
	_cleanup_free_ char *limit = duration(start_timeout_ms(u));

	(void)fd;
	(void)what;
	hold(u);
	if (u->phase != NULL)
		failf(u, ETIMEDOUT, "server %s: did not answer %s within %s", u->s->id, u->phase,
		      limit);
	else
		failf(u, ETIMEDOUT, "server %s: its sandbox did not start within %s", u->s->id,
		      limit);
	unhold(u);
}

static struct pdk_gw_up *up_new(struct pdk_ctl *ctl, struct event_base *base,
				const struct pdk_gw_server *s, const struct pdk_gw_up_cbs *cbs,
				void *ctx)
{
	struct pdk_gw_up *u = pdk_xcalloc(1, sizeof(*u));

	u->ctl = ctl;
	u->base = base;
	u->s = s;
	u->cbs = *cbs;
	u->ctx = ctx;
	u->link = pdk_xcalloc(1, sizeof(*u->link));
	*u->link = (struct up_link){.u = u, .ctl = ctl, .server = pdk_xstrdup(s->id), .refs = 1};
	pdk_buf_init(&u->line, PDK_GW_UP_MESSAGE_MAX);
	u->timer = evtimer_new(base, on_start_timeout, u);
	if (u->timer == NULL)
		pdk_oom();
	return u;
}

/* ---- a remote server ---- */

static void remote_message(void *ctx, const char *p, size_t n)
{
	struct pdk_gw_up *u = ctx;

	if (!alive(u))
		return;
	hold(u);
	one_message(u, p, n);
	unhold(u);
}

/* The exchange of request `id` ended: a request it did not answer fails as the server would. */
static void remote_request_end(void *ctx, json_int_t id, const struct pdk_error *err)
{
	struct pdk_gw_up *u = ctx;
	struct pdk_gw_up_call *c = call_find(u, id);
	_cleanup_free_ char *text = NULL;
	struct pdk_error e = {.status = EPROTO};

	if (!alive(u) || (c == NULL && id != u->init_id && id != u->list_id))
		return;
	text = err != NULL ? pdk_xstrdup(err->msg)
			   : pdk_xasprintf("server %s: ended its answer to %s without a JSON-RPC "
					   "response",
					   u->s->id, c != NULL ? "tools/call" : u->phase);
	e.msg = text;
	hold(u);
	if (c != NULL)
		call_finish(c, NULL, &e);
	else
		fail(u, &e);
	unhold(u);
}

/* A remote server's session ended: initialize again (bounded), then list, then resend. */
static void reinit(struct pdk_gw_up *u)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (++u->reinits > REINITS_MAX) {
		failf(u, ENOTCONN,
		      "server %s: its session ended (HTTP 404) %u times before its tools could be "
		      "listed",
		      u->s->id, REINITS_MAX);
		return;
	}
	pdk_log(u->log, PDK_LOG_INFO,
		"gateway: server %s: its session ended (HTTP 404): initializing again", u->s->id);
	pdk__gw_remote_reset(u->remote);
	json_decref(steal_ptr(&u->tools));
	u->list_id = 0;
	u->relist = false;
	u->state = UP_STARTING;
	u->init_id = ++u->next_id;
	if (send_msg(u, initialize_request(u->init_id), &err) < 0) {
		fail(u, err);
		return;
	}
	u->phase = "initialize";
	timer_arm(u->timer, start_timeout_ms(u));
}

/*
 * A POST that carried request `id` was answered 404 in a session:
 * `current` when that is still the session we hold (else a new one was
 * made meanwhile). A call goes again once, in the new session.
 */
static void remote_session_lost(void *ctx, json_int_t id, bool current)
{
	struct pdk_gw_up *u = ctx;
	struct pdk_gw_up_call *c = call_find(u, id);

	if (!alive(u))
		return;
	hold(u);
	if (c != NULL && c->resent) {
		_cleanup_free_ char *text = pdk_xasprintf(
			"server %s: lost its session twice while tool %s was called (HTTP 404)",
			u->s->id, c->tool);
		struct pdk_error e = {.status = ENOTCONN, .msg = text};

		call_finish(c, NULL, &e);
	} else if (c != NULL) {
		c->resend = true;
	}
	if (alive(u) && current)
		reinit(u);
	else if (alive(u) && u->state == UP_READY)
		resend_calls(u);
	unhold(u);
}

static void remote_failed(void *ctx, const struct pdk_error *err)
{
	struct pdk_gw_up *u = ctx;

	hold(u);
	fail(u, err);
	unhold(u);
}

/* A remote server: no sandbox; initialize is its first POST. */
static int remote_start(struct pdk_gw_up *u, char *const *headers, struct pdk_error **err)
{
	static const struct pdk__gw_remote_cbs cbs = {.message = remote_message,
						      .request_end = remote_request_end,
						      .session_lost = remote_session_lost,
						      .failed = remote_failed};

	u->remote = pdk__gw_remote_new(u->base, u->s, headers, &cbs, u, err);
	if (u->remote == NULL)
		return -EINVAL;
	u->init_id = ++u->next_id;
	if (send_msg(u, initialize_request(u->init_id), err) < 0)
		return -ENOTCONN;
	u->state = UP_STARTING;
	u->phase = "initialize";
	timer_arm(u->timer, start_timeout_ms(u));
	return 0;
}

int pdk__gw_up_start(struct pdk_ctl *ctl, struct event_base *base, const struct pdk_gw_server *s,
		     const char *profile_path, char *const *headers,
		     const struct pdk_gw_up_cbs *cbs, void *ctx, struct pdk_gw_up **out,
		     struct pdk_error **err)
{
	_cleanup_json_ json_t *labels = NULL, *ws = NULL;
	struct pdk_ctl_create r = {.profile = profile_path, .image = s->image};
	struct pdk_gw_up *u;
	int rc;

	if (s->url != NULL) {
		u = up_new(ctl, base, s, cbs, ctx);
		rc = remote_start(u, headers, err);
		if (rc < 0) {
			pdk__gw_up_free(u);
			u = NULL;
		}
		*out = u;
		return rc;
	}
	if (s->command == NULL || s->command[0] == NULL)
		return pdk_error_set_field(err, EINVAL, "command",
					   "server %s: only a stdio server (command) runs in a "
					   "sandbox",
					   s->id);
	labels = json_pack("{s:s, s:s}", "gateway", "1", "gateway_server", s->id);
	ws = json_pack("{s:s}", "mode", "none");
	if (labels == NULL || ws == NULL)
		pdk_oom();
	r.labels = labels;
	/*
	 * SECURITY: no workspace, whatever the profile says: a create without
	 * one would overlay the gateway's own working directory. The server
	 * sees the paths its manifest grants, nothing else; and a request with
	 * a workspace is never given a warm-pool member made for someone else.
	 */
	r.workspace = ws;
	u = up_new(ctl, base, s, cbs, ctx);
	timer_arm(u->timer, start_timeout_ms(u));
	*out = u;
	hold(u);
	rc = pdk_ctl_create(ctl, &r, created, link_get(u->link), err);
	if (rc < 0) {
		link_put(u->link);
		pdk__gw_up_free(u);
		*out = NULL;
	}
	unhold(u);
	if (rc < 0 && err != NULL && *err != NULL)
		(void)pdk_error_wrap(err, "server %s", s->id);
	return rc < 0 ? rc : 0;
}

void pdk__gw_up_set_log(struct pdk_gw_up *u, const struct pdk_log *log)
{
	u->log = log;
	u->link->log = log;
	if (u->remote != NULL)
		pdk__gw_remote_set_log(u->remote, log);
}

const struct pdk_gw_server *pdk__gw_up_server(const struct pdk_gw_up *u)
{
	return u->s;
}

const char *pdk__gw_up_sandbox(const struct pdk_gw_up *u)
{
	return u->sandbox;
}

bool pdk__gw_up_ready(const struct pdk_gw_up *u)
{
	return !u->freed && u->state == UP_READY;
}

/* ---- calls ---- */

static void on_call_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_gw_up_call *c = arg;
	struct pdk_gw_up *u = c->u;
	_cleanup_free_ char *limit = duration(call_timeout_ms(u));
	_cleanup_free_ char *reason = pdk_xasprintf("no answer within %s", limit);
	_cleanup_free_ char *text = pdk_xasprintf("server %s: tool %s did not answer within %s",
						  u->s->id, c->tool, limit);
	struct pdk_error e = {.status = ETIMEDOUT, .msg = text};

	(void)fd;
	(void)what;
	hold(u);
	if (u->remote != NULL)
		pdk__gw_remote_abort(u->remote, c->id);
	send_cancelled(u, c->id, reason);
	if (alive(u))
		call_finish(c, NULL, &e);
	unhold(u);
}

static json_t *call_params(const char *tool, const json_t *args, const json_t *token, json_int_t id)
{
	json_t *params = json_pack("{s:s, s:O}", "name", tool, "arguments", (json_t *)args);
	_cleanup_free_ char *own = NULL;

	if (params == NULL)
		pdk_oom();
	if (token == NULL)
		return params;
	/* SECURITY: the caller's token never goes upstream; one of ours stands for it. */
	own = pdk_xasprintf("p-%lld", (long long)id);
	pdk_json_set(params, "_meta", json_pack("{s:s}", "progressToken", own));
	return params;
}

int pdk__gw_up_call(struct pdk_gw_up *u, const char *tool, const json_t *args,
		    const json_t *progress_token, pdk_gw_up_result_cb done,
		    pdk_gw_up_progress_cb progress, void *ctx, struct pdk_gw_up_call **out,
		    struct pdk_error **err)
{
	_cleanup_json_ json_t *id = NULL;
	struct pdk_gw_up_call *c;
	json_t *params, *keep;
	json_int_t n;
	int rc;

	if (!pdk__gw_up_ready(u))
		return pdk_error_setx(err, ENOTCONN, "server %s is not ready: %s", u->s->id,
				      u->state == UP_FAILED ? "it failed" : "it is starting");
	if (u->n_calls >= CALLS_MAX)
		return pdk_error_setx(err, EBUSY,
				      "server %s has %u calls in flight, the most it may have: "
				      "retry when one has ended",
				      u->s->id, CALLS_MAX);
	n = ++u->next_id;
	id = json_integer(n);
	params = call_params(tool, args, progress_token, n);
	keep = u->remote != NULL ? json_incref(params) : NULL;
	rc = send_msg(u, pdk_rpc_request(id, "tools/call", params), err);
	if (rc < 0) {
		json_decref(keep);
		return rc;
	}
	c = pdk_xcalloc(1, sizeof(*c));
	*c = (struct pdk_gw_up_call){.u = u,
				     .next = u->calls,
				     .id = n,
				     .tool = pdk_xstrdup(tool),
				     .token =
					     progress_token ? json_deep_copy(progress_token) : NULL,
				     .done = done,
				     .progress = progress,
				     .ctx = ctx,
				     .params = keep};
	if (u->calls != NULL)
		u->calls->prev = c;
	u->calls = c;
	u->n_calls++;
	c->timer = evtimer_new(u->base, on_call_timeout, c);
	if (c->timer == NULL)
		pdk_oom();
	timer_arm(c->timer, call_timeout_ms(u));
	if (out != NULL)
		*out = c;
	return 0;
}

void pdk__gw_up_cancel(struct pdk_gw_up_call *c)
{
	struct pdk_gw_up *u = c->u;

	call_unlink(c);
	if (alive(u) && u->remote != NULL)
		pdk__gw_remote_abort(u->remote, c->id);
	if (alive(u))
		send_cancelled(u, c->id, "the client cancelled the call");
	call_free(c);
}

/* ---- the end ---- */

static void up_release(struct pdk_gw_up *u)
{
	event_free(u->timer);
	json_decref(u->tools);
	pdk_buf_release(&u->line);
	free(u->sandbox);
	free(u);
}

void pdk__gw_up_free(struct pdk_gw_up *u)
{
	if (u == NULL || u->freed)
		return;
	u->freed = true;
	event_del(u->timer);
	while (u->calls != NULL) { /* dropped without their callbacks */
		struct pdk_gw_up_call *c = u->calls;

		call_unlink(c);
		call_free(c);
	}
	if (u->x != NULL)
		pdk_ctl_exec_cancel(u->x);
	u->x = NULL;
	pdk__gw_remote_free(steal_ptr(&u->remote));
	if (u->sandbox != NULL && !u->destroying) {
		u->destroying = true;
		destroy_sandbox(u->link, u->sandbox);
	}
	u->link->u = NULL;
	link_put(steal_ptr(&u->link));
	if (u->depth == 0)
		up_release(u);
}
