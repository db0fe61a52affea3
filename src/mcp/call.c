/*
 * call.c - one tools/call: its sandbox (a handle, or the connection's own,
 * made at its first call), its result or error, its cancellation and its
 * progress notifications.
 */
#include "common.h"
#include "mcp-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void unlink_from(struct pdk_mcp_call **list, struct pdk_mcp_call *call)
{
	for (struct pdk_mcp_call **p = list; *p != NULL; p = &(*p)->next)
		if (*p == call) {
			*p = call->next;
			return;
		}
}

static void call_free(struct pdk_mcp_call *call)
{
	struct pdk_mcp_conn *c = call->conn;

	unlink_from(&c->calls, call);
	unlink_from(&c->waiting, call);
	if (call->ticker != NULL)
		event_free(call->ticker);
	json_decref(call->id);
	json_decref(call->args);
	json_decref(call->progress);
	json_decref(call->caps);
	json_decref(call->params);
	free(call->sandbox);
	free(call->name);
	json_decref(call->refusal);
	free(call);
	pdk__mcp_conn_unref(c);
}

void pdk__mcp_call_finish(struct pdk_mcp_call *call, json_t *result)
{
	/* A question to the client about the call is moot once it ends (before its answer). */
	pdk_mcp_call_elicit_end(call);
	/* A cancelled request gets nothing more (2025-06-18 basic/utilities/cancellation). */
	if (!call->cancelled && call->modern)
		result = pdk__mcp_modern_result(result);
	pdk__mcp_audit(call, result);
	/* A refusal is sent at the end: over HTTP the answer may end the connection. */
	if (!call->cancelled && call->refusal != NULL) {
		pdk__mcp_send(call->conn, call->id, steal_ptr(&call->refusal));
		json_decref(result);
	} else if (!call->cancelled && !call->answered)
		pdk__mcp_send(call->conn, call->id, pdk_rpc_result(call->id, result));
	else
		json_decref(result);
	/* A cancelled request's channel (an HTTP answer) ends without an answer. */
	if (call->cancelled && !call->conn->closed)
		call->conn->send(call->conn->send_ctx, call->id, NULL);
	call_free(call);
}

json_t *pdk__mcp_result(const char *text, json_t *structured)
{
	json_t *r = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);

	if (r == NULL)
		pdk_oom();
	pdk_json_set(r, "structuredContent", structured);
	return r;
}

json_t *pdk_mcp_tool_error(const struct pdk_error *err)
{
	_cleanup_free_ char *text = NULL;
	json_t *r;

	text = err->field != NULL ? pdk_xasprintf("%s: %s", err->field, err->msg)
				  : pdk_xstrdup(err->msg);
	r = pdk__mcp_result(text, NULL);
	pdk_json_set(r, "isError", json_true());
	return r;
}

void pdk__mcp_call_fail(struct pdk_mcp_call *call, const struct pdk_error *err)
{
	pdk__mcp_call_finish(call, pdk_mcp_tool_error(err));
}

void pdk__mcp_call_doc(void *ctx, json_t *doc, const struct pdk_error *err)
{
	struct pdk_mcp_call *call = ctx;
	_cleanup_free_ char *text = NULL;

	if (err != NULL) {
		pdk__mcp_call_fail(call, err);
		return;
	}
	text = pdk_json_dump_line(doc);
	pdk__mcp_call_finish(call, pdk__mcp_result(text, json_incref(doc)));
}

void pdk__mcp_call_bad(struct pdk_mcp_call *call, const char *field, const char *fmt, ...)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = pdk_xvasprintf(fmt, ap);
	va_end(ap);
	(void)pdk_error_set_field(&err, EINVAL, field, "%s", msg);
	pdk__mcp_call_fail(call, err);
}

/* ---- arguments ---- */

const char *pdk__mcp_arg_str(const struct pdk_mcp_call *call, const char *key)
{
	return json_string_value(json_object_get(call->args, key));
}

uint64_t pdk__mcp_arg_u64(const struct pdk_mcp_call *call, const char *key, uint64_t dflt)
{
	json_t *v = json_object_get(call->args, key);

	/* The schema's minimum is never below 0: the value fits. */
	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : dflt;
}

bool pdk__mcp_arg_bool(const struct pdk_mcp_call *call, const char *key, bool dflt)
{
	json_t *v = json_object_get(call->args, key);

	return json_is_boolean(v) ? json_is_true(v) : dflt;
}

char *pdk__mcp_arg_path(struct pdk_mcp_call *call, struct pdk_ctl_sb *sb, const char *key)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	char *p = pdk_ctl_sb_path(sb, pdk__mcp_arg_str(call, key), &err);

	if (p == NULL) {
		(void)pdk_error_field(&err, key);
		pdk__mcp_call_fail(call, err);
	}
	return p;
}

/* ---- cancellation and progress ---- */

void pdk__mcp_call_cancel(struct pdk_mcp_call *call)
{
	const struct pdk_mcp_provider *p = call->conn->m->provider;

	if (call->cancelled)
		return; /* told once: a provider answers it once */
	call->cancelled = true;
	if (call->ticker != NULL)
		event_del(call->ticker);
	/* SECURITY: the command's process group is killed, not only left unanswered. */
	if (call->x != NULL)
		pdk_ctl_exec_cancel(call->x);
	/* A request for a human's approval is withdrawn: nobody can grant it any more. */
	pdk_mcp_call_elicit_end(call);
	if (call->approval != NULL)
		pdk__tool_ws_withdraw(call);
	/* Last: the provider may answer, and so free, the call. */
	if (call->provided && p->cancel != NULL)
		p->cancel(p->ctx, call);
}

/* ---- a provider's calls (mcp.h) ---- */

void pdk_mcp_call_reply(struct pdk_mcp_call *call, json_t *result)
{
	pdk__mcp_call_finish(call, result);
}

void pdk_mcp_call_progress(struct pdk_mcp_call *call, const json_t *params)
{
	json_t *p;

	if (call->progress == NULL || call->cancelled)
		return;
	p = json_is_object(params) ? json_deep_copy(params) : json_object();
	pdk_json_set(p, "progressToken", json_incref(call->progress));
	pdk__mcp_send(call->conn, call->id, pdk_rpc_notification("notifications/progress", p));
}

const json_t *pdk_mcp_call_progress_token(const struct pdk_mcp_call *call)
{
	return call->progress;
}

const json_t *pdk_mcp_call_id(const struct pdk_mcp_call *call)
{
	return call->id;
}

bool pdk_mcp_call_cancelled(const struct pdk_mcp_call *call)
{
	return call->cancelled;
}

struct pdk_mcp_conn *pdk_mcp_call_conn(const struct pdk_mcp_call *call)
{
	return call->conn;
}

void pdk_mcp_call_set_data(struct pdk_mcp_call *call, void *data)
{
	call->data = data;
}

void *pdk_mcp_call_data(const struct pdk_mcp_call *call)
{
	return call->data;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_mcp_call *call = arg;
	_cleanup_free_ char *msg = NULL;

	(void)fd;
	(void)what;
	if (call->cancelled)
		return;
	call->ticks++;
	msg = pdk_xasprintf("running for %llus", (unsigned long long)call->ticks);
	pdk__mcp_send(call->conn, call->id,
		      pdk_rpc_notification("notifications/progress",
					   json_pack("{s:O, s:I, s:s}", "progressToken",
						     call->progress, "progress",
						     (json_int_t)call->ticks, "message", msg)));
}

void pdk__mcp_call_ticker(struct pdk_mcp_call *call)
{
	struct timeval every = {.tv_sec = 1};

	if (call->progress == NULL || call->ticker != NULL)
		return;
	call->ticker = event_new(call->conn->m->base, -1, EV_PERSIST, tick, call);
	if (call->ticker == NULL || event_add(call->ticker, &every) < 0)
		pdk_oom();
}

/* ---- the call's sandbox ---- */

static void run_in(struct pdk_mcp_call *call, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_sb *sb;

	if (pdk_ctl_find(call->conn->m->ctl, id, PDK_CTL_FIND_LIVE, &sb, &err) < 0) {
		(void)pdk_error_field(&err, "sandbox_id");
		pdk__mcp_call_fail(call, err);
		return;
	}
	call->sandbox = pdk_xstrdup(id);
	call->tool->run(call, sb);
}

/* The connection's sandbox is there (or could not be made): its waiting calls go on. */
static void own_created(void *ctx, const struct pdk_ctl_created *created,
			const struct pdk_error *err)
{
	struct pdk_mcp_conn *c = ctx;
	struct pdk_mcp_call *call;

	c->own_creating = false;
	if (err == NULL && c->own_sb == NULL)
		c->own_sb = pdk_xstrdup(created->view.id);
	while ((call = c->waiting) != NULL) {
		c->waiting = call->next;
		call->next = c->calls;
		c->calls = call;
		if (call->cancelled)
			pdk__mcp_call_finish(call, NULL);
		else if (err != NULL)
			pdk__mcp_call_fail(call, err);
		else
			run_in(call, c->own_sb);
	}
	pdk__mcp_conn_unref(c);
}

json_t *pdk__mcp_labels(const struct pdk_mcp_conn *c)
{
	const char *client = json_string_value(json_object_get(c->client, "name"));
	json_t *l = json_pack("{s:s, s:s}", "mcp_client", client ? client : "unknown",
			      "mcp_transport", c->transport);

	if (l == NULL)
		pdk_oom();
	return l;
}

json_t *pdk__mcp_workspace(const struct pdk_mcp *m)
{
	return m->workspace ? json_pack("{s:s, s:s}", "path", m->workspace, "mode", "overlay")
			    : NULL;
}

static void make_own(struct pdk_mcp_conn *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *labels = pdk__mcp_labels(c);
	_cleanup_json_ json_t *ws = pdk__mcp_workspace(c->m);
	struct pdk_ctl_create r = {
		.profile = c->m->profile, .labels = labels, .workspace = ws, .ttl_s = c->m->ttl_s};

	c->own_creating = true;
	c->refs++;
	if (pdk_ctl_create(c->m->ctl, &r, own_created, c, &err) < 0)
		own_created(c, NULL, err);
}

static void wait_for_own(struct pdk_mcp_call *call)
{
	struct pdk_mcp_conn *c = call->conn;

	struct pdk_mcp_call **tail = &c->waiting;

	/* In the order they came: a client that sent a write and then a read sees it so. */
	unlink_from(&c->calls, call);
	while (*tail != NULL)
		tail = &(*tail)->next;
	call->next = NULL;
	*tail = call;
	if (!c->own_creating)
		make_own(c);
}

void pdk__mcp_call_start(struct pdk_mcp_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_mcp_conn *c = call->conn;
	const char *handle = pdk__mcp_arg_str(call, "sandbox_id");
	const char *id = NULL;

	if (!(call->tool->flags & PDK_MCP_TOOL_SANDBOX)) {
		call->tool->run(call, NULL);
		return;
	}
	if (handle != NULL) {
		if (pdk_ctl_handle_resolve(c->m->ctl, handle, c->identity, &id, &err) < 0)
			pdk__mcp_call_fail(call, err);
		else
			run_in(call, id);
		return;
	}
	/*
	 * The 2026-07-28 revision has no session to hang a sandbox on: a call names its
	 * sandbox by a handle (docs/mcp.md, "Eras").
	 */
	if (call->modern) {
		pdk__mcp_call_bad(call, "sandbox_id",
				  "'sandbox_id' is required in the 2026-07-28 revision: create a "
				  "sandbox with sandbox_create and pass the handle it answers");
		return;
	}
	/* The connection's sandbox: made at the first call, again if it ended (its TTL). */
	if (c->own_sb != NULL &&
	    pdk_ctl_find(c->m->ctl, c->own_sb, 0, &(struct pdk_ctl_sb *){0}, &err) < 0) {
		free(c->own_sb);
		c->own_sb = NULL;
	}
	if (c->own_sb != NULL)
		run_in(call, c->own_sb);
	else
		wait_for_own(call);
}
