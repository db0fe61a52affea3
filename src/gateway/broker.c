/*
 * broker.c - the upstreams' tools and every call to them
 * (docs/internals/gateway.md, "The call pipeline").
 *
 * A listed tool is hashed canonically and looked up in the pin store: the
 * pinned hash is served; a new tool is scanned and, clean and trusted on
 * first contact, pinned; anything else (flagged, first contact to approve,
 * a changed definition) goes to the approval queue and is withheld until a
 * human approves it. Its schemas are compiled when it is served.
 *
 * A call goes: policy (first matching rule) -> approval when the rule says
 * so -> budgets -> the arguments against the pinned inputSchema -> secrets
 * redacted out of the arguments -> the upstream -> its structuredContent
 * against the outputSchema -> secrets redacted out of the result -> the
 * client. Every call, however it ends, is one tool.call audit record.
 */
#include "common.h"
#include "broker.h"
#include "telemetry.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The longest tool name an upstream may list (MCP's own bound is 128 for SERVER__TOOL). */
#define TOOL_NAME_MAX 64
/* Where an error result of a tool with an outputSchema carries its error object. */
#define PDK_GW_ERROR_META "io.paddock/error"
/* The arguments shown in an approval's summary. */
#define EXCERPT_MAX 80

/* One call from the client to an upstream. */
struct pdk__gw_call {
	struct pdk__gw_call *next;
	struct pdk_gw *g;
	struct pdk_mcp_call *mc;
	struct pdk__gw_srv *sv;
	struct pdk__gw_tool *t; /* a reference; NULL when the upstream was down */
	char *tool;             /* the upstream's name for it */
	json_t *args;           /* as the client sent them */
	char *principal, *session;
	const char *rule; /* the rule that decided, or "policy.default" */
	const char *rule_action;
	bool approved;
	char approval[37];
	struct pdk_ctl_approval_wait *wait;
	struct pdk_gw_up_call *uc;
	json_t *record;    /* its record's first part, made while the upstream works (or NULL) */
	char *record_text; /* the same serialised (compact), also made then */
	size_t red_args, red_result;
	uint64_t start_ns;
};

/* What an error result says besides its message. */
struct fail {
	const char *code;     /* denied, budget, invalid_arguments, ... */
	const char *decision; /* the tool.call record's */
	const char *field, *approval;
};

/* ---- errors the client sees ---- */

/*
 * An isError result: its text starts with the code; structuredContent is
 * {"error": {...}}, except for a tool with an outputSchema (`structured`
 * false), whose clients check any structuredContent against that schema
 * (the official SDK does, error or not): the object goes in _meta instead.
 */
static json_t *error_result(const char *server, const char *rule, const struct fail *f,
			    const char *msg, bool structured)
{
	_cleanup_free_ char *text = pdk_xasprintf("%s: %s", f->code, msg);
	json_t *e = json_pack("{s:s, s:s, s:s}", "code", f->code, "message", msg, "server", server);
	json_t *r;

	if (e == NULL)
		pdk_oom();
	pdk_json_set(e, "rule", rule ? json_string(rule) : NULL);
	pdk_json_set(e, "field", f->field ? json_string(f->field) : NULL);
	pdk_json_set(e, "approval", f->approval ? json_string(f->approval) : NULL);
	r = json_pack("{s:[{s:s, s:s}], s:{s:o}, s:b}", "content", "type", "text", "text", text,
		      structured ? "structuredContent" : "_meta",
		      structured ? "error" : PDK_GW_ERROR_META, e, "isError", 1);
	if (r == NULL)
		pdk_oom();
	return r;
}

/* ---- tools ---- */

static struct pdk_ctl *ctl_of(const struct pdk__gw_tool *t)
{
	return t->g->ctl;
}

static const char *sandbox_of(const struct pdk__gw_srv *sv)
{
	const char *id = sv != NULL && sv->up != NULL ? pdk__gw_up_sandbox(sv->up) : NULL;

	return id != NULL ? id : "daemon";
}

static void tool_event(struct pdk__gw_tool *t, const char *kind, json_t *attrs)
{
	const char *server = t->full;
	size_t n = strcspn(t->full, "_");

	pdk_json_set(attrs, "server", json_stringn(server, n));
	pdk_json_set(attrs, "tool", json_string(t->name));
	pdk_json_set(attrs, "hash", json_string(t->hash));
	(void)pdk_redact_json(t->g->redact, attrs);
	pdk_ctl_event(ctl_of(t), sandbox_of(t->srv), NULL, kind, attrs);
}

void pdk__gw_tool_unref(struct pdk__gw_tool *t)
{
	if (t == NULL || --t->refs > 0)
		return;
	pdk_ctl_approval_withdraw(t->wait);
	pdk_jschema_free(t->in);
	pdk_jschema_free(t->out);
	json_decref(t->def);
	json_decref(t->canon);
	free(t->name);
	free(t->full);
	free(t->why);
	free(t);
}

/* Withheld for good (until it is listed again): logged, and a tool.refused record. */
static void tool_refuse(struct pdk__gw_tool *t, const char *msg)
{
	t->state = PDK__GW_TOOL_REFUSED;
	free(t->why);
	t->why = pdk_xstrdup(msg);
	pdk_log(&t->g->log, PDK_LOG_WARN, "tool %s is withheld: %s", t->full, msg);
	tool_event(t, "tool.refused", json_pack("{s:s}", "message", msg));
}

static bool schema_compile(struct pdk__gw_tool *t, const char *member, struct pdk_jschema **out)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *msg = NULL;
	const json_t *schema = json_object_get(t->def, member);

	if (schema == NULL)
		return true;
	if (pdk_jschema_compile(schema, out, &err) == 0)
		return true;
	*out = NULL;
	msg = pdk_xasprintf("its %s is refused: %s%s: %s", member, member,
			    err->field ? err->field : "", err->msg);
	tool_refuse(t, msg);
	return false;
}

/* Served from now on: its schemas compiled (a refused one withholds it). */
static bool tool_serve(struct pdk__gw_tool *t)
{
	if (!schema_compile(t, "inputSchema", &t->in) ||
	    !schema_compile(t, "outputSchema", &t->out))
		return false;
	t->state = PDK__GW_TOOL_SERVED;
	return true;
}

static bool tool_pin(struct pdk__gw_tool *t, const char *approver)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *server = pdk_xasprintf("%.*s", (int)strcspn(t->full, "_"), t->full);

	if (!tool_serve(t))
		return false;
	if (pdk_gw_pin_set(t->g->pins, server, t->name, t->canon, approver, &err) < 0) {
		tool_refuse(t, err->msg);
		return false;
	}
	tool_event(t, "tool.pinned", json_pack("{s:s}", "approver", approver));
	return true;
}

static void on_pin_decided(void *ctx, const struct pdk_ctl_approval *a)
{
	struct pdk__gw_tool *t = ctx;
	_cleanup_free_ char *msg = NULL;

	t->wait = NULL;
	if (strcmp(a->state, "approved") == 0) {
		if (tool_pin(t, a->approver ? a->approver : "approved") && t->srv != NULL)
			pdk_mcp_tools_changed(t->g->mcp);
		return;
	}
	msg = pdk_xasprintf("approval %s was %s%s%s", a->id, a->state, a->approver ? " by " : "",
			    a->approver ? a->approver : "");
	tool_refuse(t, msg);
}

static char *shapes_of(const json_t *findings)
{
	_cleanup_free_ char *all = pdk_xstrdup("");
	size_t i;
	json_t *f;

	json_array_foreach(findings, i, f)
	{
		char *more = pdk_xasprintf("%s%s%s", all, i ? ", " : "",
					   json_string_value(json_object_get(f, "shape")));

		free(all);
		all = more;
	}
	return steal_ptr(&all);
}

/*
 * SECURITY: a new or changed definition is not served until a human
 * approves it: the request carries the definition, the diff and what the
 * scan found.
 */
static void tool_ask(struct pdk__gw_tool *t, json_t *diff, json_t *findings)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *shapes = shapes_of(findings);
	_cleanup_free_ char *summary =
		pdk_xasprintf("%s tool %s", diff ? "changed" : "new", t->full);
	_cleanup_free_ char *reason =
		json_array_size(findings) > 0
			? pdk_xasprintf("its text looks like: %s", shapes)
			: pdk_xstrdup(diff ? "its definition changed since it was pinned"
					   : "pinning.first_contact is approve");
	_cleanup_free_ char *server = pdk_xasprintf("%.*s", (int)strcspn(t->full, "_"), t->full);
	_cleanup_json_ json_t *detail =
		json_pack("{s:s, s:s, s:O, s:O, s:O?}", "server", server, "tool", t->name,
			  "definition", t->canon, "findings", findings, "diff", diff);
	struct pdk_ctl_approval_req r = {.kind = "tool.pin",
					 .principal = "paddock-gateway",
					 .sandbox = sandbox_of(t->srv),
					 .summary = summary,
					 .reason = reason,
					 .detail = detail,
					 .timeout_s = t->g->cfg->approval_timeout_s};

	t->state = PDK__GW_TOOL_PENDING;
	if (pdk_ctl_approval_ask(t->g->ctl, &r, on_pin_decided, t, t->approval, &t->wait, &err) <
	    0) {
		t->wait = NULL;
		tool_refuse(t, err->msg);
	} else if (diff != NULL)
		tool_event(t, "tool.changed",
			   json_pack("{s:s, s:O}", "approval", t->approval, "diff", diff));
	pdk_log(&t->g->log, PDK_LOG_NOTICE, "tool %s waits for approval %s: %s", t->full,
		t->approval, reason);
}

/* Pinned, first contact or changed: what its pin says is done with it. */
static void tool_decide(struct pdk__gw_srv *sv, struct pdk__gw_tool *t)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *pinned = NULL;
	_cleanup_json_ json_t *findings = NULL;
	_cleanup_json_ json_t *diff = NULL;
	char hash[65];
	int rc = pdk_gw_pin_get(sv->g->pins, sv->s->id, t->name, hash, &pinned, &err);

	if (rc < 0 && rc != -ENOENT) {
		tool_refuse(t, err->msg);
		return;
	}
	if (rc == 0 && strcmp(hash, t->hash) == 0) {
		(void)tool_serve(t);
		return;
	}
	findings = pdk_gw_scan_tool(t->def);
	if (rc == 0)
		diff = pdk_gw_tool_diff(pinned, t->canon);
	else if (json_array_size(findings) == 0 && !sv->g->cfg->approve_first_contact) {
		(void)tool_pin(t, "first-contact");
		return;
	}
	tool_ask(t, diff, findings);
}

static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n > 0 && n <= TOOL_NAME_MAX &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
		       n;
}

static struct pdk__gw_tool *tool_new(struct pdk__gw_srv *sv, const json_t *def, const char *name)
{
	struct pdk__gw_tool *t = pdk_xcalloc(1, sizeof(*t));

	t->refs = 1;
	t->g = sv->g;
	t->srv = sv;
	t->name = pdk_xstrdup(name);
	t->full = pdk_xasprintf("%s" PDK_GW_SEP "%s", sv->s->id, name);
	t->def = json_deep_copy(def);
	if (t->def == NULL)
		pdk_oom();
	pdk_json_set(t->def, "name", json_string(t->full));
	t->canon = pdk_gw_tool_canonical(def);
	pdk_gw_tool_hash(def, t->hash);
	return t;
}

static struct pdk__gw_tool *tool_find(struct pdk__gw_tool **tools, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(tools[i]->name, name) == 0)
			return tools[i];
	return NULL;
}

/* The tool `def` lists: the one already known when its definition is the same, else a new one. */
static struct pdk__gw_tool *tool_of(struct pdk__gw_srv *sv, const json_t *def, const char *name)
{
	struct pdk__gw_tool *old = tool_find(sv->tools, sv->n_tools, name);
	struct pdk__gw_tool *t = tool_new(sv, def, name);

	if (old != NULL && strcmp(old->hash, t->hash) == 0) {
		pdk__gw_tool_unref(t);
		old->refs++;
		return old;
	}
	tool_decide(sv, t);
	return t;
}

/*
 * A tool of the previous listing: one the new listing does not keep is no
 * longer offered, so the approval of its definition is withdrawn even while
 * a call still holds it (approving it would pin what nobody serves).
 */
static void tool_drop(struct pdk__gw_tool *t, struct pdk__gw_tool **kept, size_t n)
{
	bool still = false;

	for (size_t i = 0; i < n; i++)
		still = still || kept[i] == t;
	if (!still) {
		pdk_ctl_approval_withdraw(t->wait);
		t->wait = NULL;
		if (t->state == PDK__GW_TOOL_PENDING)
			t->state = PDK__GW_TOOL_REFUSED;
	}
	t->srv = NULL;
	pdk__gw_tool_unref(t);
}

void pdk__gw_tools_listed(struct pdk__gw_srv *sv, const json_t *tools)
{
	struct pdk__gw_tool **now = pdk_xcalloc(json_array_size(tools) + 1, sizeof(*now));
	size_t n = 0, i;
	json_t *def;

	json_array_foreach(tools, i, def)
	{
		const char *name = json_string_value(json_object_get(def, "name"));

		if (!name_ok(name) || tool_find(now, n, name) != NULL) {
			pdk_log(&sv->g->log, PDK_LOG_WARN,
				"upstream %s lists a tool named '%s': not served (a name is 1 to "
				"%d of [A-Za-z0-9_.-], once)",
				sv->s->id, name ? name : "(none)", TOOL_NAME_MAX);
			continue;
		}
		now[n++] = tool_of(sv, def, name);
	}
	for (i = 0; i < sv->n_tools; i++)
		tool_drop(sv->tools[i], now, n);
	free(sv->tools);
	for (i = 0; i < n; i++)
		now[i]->srv = sv;
	sv->tools = now;
	sv->n_tools = n;
	pdk_mcp_tools_changed(sv->g->mcp);
}

static bool srv_ready(const struct pdk__gw_srv *sv)
{
	return sv->up != NULL && !sv->failed && pdk__gw_up_ready(sv->up);
}

/* A tool a principal can never call is not shown to it: the model is not offered it. */
json_t *pdk__gw_list(struct pdk_gw *g, const char *principal)
{
	json_t *all = json_array();

	for (size_t i = 0; i < g->n_srvs; i++) {
		const struct pdk__gw_srv *sv = &g->srvs[i];

		for (size_t k = 0; srv_ready(sv) && k < sv->n_tools; k++) {
			const struct pdk__gw_tool *t = sv->tools[k];

			if (t->state == PDK__GW_TOOL_SERVED &&
			    !pdk_gw_policy_denies_all(g->cfg, principal, sv->s->id, t->name))
				(void)json_array_append(all, t->def);
		}
	}
	return all;
}

/* ---- a call's record ---- */

static void args_sha256(const json_t *args, char hex[65])
{
	_cleanup_free_ char *s = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
	unsigned char h[32];
	unsigned int len = 0;
	static const char digits[] = "0123456789abcdef";

	if (s == NULL || EVP_Digest(s, strlen(s), h, &len, EVP_sha256(), NULL) != 1)
		pdk_oom();
	/* By hand, not 32 snprintf() calls: this runs for every call. */
	for (unsigned i = 0; i < 32; i++) {
		hex[2 * i] = digits[h[i] >> 4];
		hex[2 * i + 1] = digits[h[i] & 0xf];
	}
	hex[64] = '\0';
}

static json_t *pin_of(const struct pdk__gw_call *gc)
{
	static const char *const states[] = {"pinned", "pending", "refused"};

	if (gc->t == NULL)
		return json_pack("{s:s}", "state", "unknown");
	return json_pack("{s:s, s:s}", "state", states[gc->t->state], "hash", gc->t->hash);
}

/* An error result's error object (in structuredContent, or in _meta), or NULL. */
static const json_t *error_of(const json_t *result)
{
	const json_t *e = json_object_get(json_object_get(result, "structuredContent"), "error");

	return e ? e : json_object_get(json_object_get(result, "_meta"), PDK_GW_ERROR_META);
}

/* The client's request id as a string. */
static json_t *call_id(const struct pdk_mcp_call *mc)
{
	const json_t *id = pdk_mcp_call_id(mc);

	if (json_is_string(id))
		return json_incref((json_t *)id);
	return json_sprintf("%lld", (long long)json_integer_value(id));
}

/*
 * The size of the result's line as the client gets it (compact, ASCII, a
 * newline), counted without building it (the order of the keys changes no
 * size).
 */
static size_t result_size(const json_t *result)
{
	return result ? pdk_json_wire_size(result) : 0;
}

/* `o` serialised compact, without a newline (NULL when it cannot be). */
static char *compact(const json_t *o)
{
	char *s = pdk_json_dump_wire(o);

	if (s != NULL)
		s[strlen(s) - 1] = '\0';
	return s;
}

/*
 * The part of a call's record known once its request is on its way (who,
 * what, the arguments' hash and their redacted copy, the rule, the pin):
 * built while the upstream works, off the answer's path (record_start()
 * from call_forward()), or at the end for a call that never went upstream.
 */
static json_t *record_start(const struct pdk__gw_call *gc)
{
	const char *client = pdk_mcp_conn_client(pdk_mcp_call_conn(gc->mc));
	char hash[65];
	json_t *attrs;

	args_sha256(gc->args, hash);
	attrs = json_pack("{s:s, s:s, s:s?, s:s, s:s, s:s, s:s, s:s?, s:s*, s:o, s:s}", "principal",
			  gc->principal, "session", gc->session, "client", client, "server",
			  gc->sv->s->id, "tool", gc->tool, "mcp_transport", "gateway",
			  "args_sha256", hash, "rule", gc->rule, "approval",
			  gc->approval[0] ? gc->approval : NULL, "pin", pin_of(gc), "mcp_method",
			  "tools/call");
	if (attrs == NULL)
		pdk_oom();
	pdk_json_set(attrs, "call_id", call_id(gc->mc));
	/*
	 * The strings a client chose (its name, the call's id) redacted; the
	 * arguments after, redacted on their own (pdk_mcp_audit_args): one
	 * walk over them, not two.
	 */
	(void)pdk_redact_json(gc->g->redact, attrs);
	pdk_json_set(attrs, "args", pdk_mcp_audit_args(gc->g->redact, gc->args));
	return attrs;
}

/* SECURITY: every call, however it ended, is one tool.call record with its arguments redacted. */
static void call_record(struct pdk__gw_call *gc, const char *decision, const json_t *result)
{
	const json_t *code = json_object_get(error_of(result), "code");
	json_int_t ms = (json_int_t)((pdk_now_mono_ns() - gc->start_ns) / 1000000);
	json_t *attrs = gc->record != NULL ? steal_ptr(&gc->record) : record_start(gc);
	json_t *error = json_is_string(code) ? json_copy((json_t *)code) : NULL;
	_cleanup_json_ json_t *end = json_object();
	_cleanup_free_ char *end_text = NULL, *text = NULL;
	const char *k;
	json_t *v;

	/* The end: how it ended (an error code of an upstream's result redacted like it). */
	(void)pdk_redact_json(gc->g->redact, error);
	pdk_json_set(end, "decision", json_string(decision));
	pdk_json_set(end, "error", error);
	/* The OTLP export's span lasts duration_ms; mcp_method and session are MCP's conventions.
	 */
	pdk_json_set(end, "latency_ms", json_integer(ms));
	pdk_json_set(end, "duration_ms", json_integer(ms));
	pdk_json_set(end, "result_bytes", json_integer((json_int_t)result_size(result)));
	pdk_json_set(end, "redactions",
		     json_pack("{s:I, s:I}", "args", (json_int_t)gc->red_args, "result",
			       (json_int_t)gc->red_result));
	/* The end's members are new ones: a text holding a member twice is never written. */
	json_object_foreach(end, k, v)
	{
		(void)v;
		if (json_object_get(attrs, k) != NULL) {
			free(steal_ptr(&gc->record_text));
			break;
		}
	}
	if (json_object_update(attrs, end) < 0)
		pdk_oom();
	/* SECURITY: on disk (the control object's spool) before call_end() answers. */
	if (gc->record_text == NULL) {
		pdk_ctl_event_spooled(gc->g->ctl, sandbox_of(gc->sv), NULL, "tool.call", attrs);
		return;
	}
	/* The first part was serialised while the upstream worked: only the end is, now. */
	end_text = compact(end);
	if (end_text == NULL)
		pdk_oom();
	text = pdk_json_splice(gc->record_text, end_text);
	pdk_ctl_event_spooled_text(gc->g->ctl, sandbox_of(gc->sv), "tool.call", attrs, text);
}

/* ---- a call ---- */

static void call_unlink(struct pdk__gw_call *gc)
{
	for (struct pdk__gw_call **p = &gc->g->calls; *p != NULL; p = &(*p)->next)
		if (*p == gc) {
			*p = gc->next;
			return;
		}
}

/* The call's answer (taken) and its record; the call is freed. */
static void call_end(struct pdk__gw_call *gc, const char *decision, json_t *result)
{
	call_record(gc, decision, result);
	call_unlink(gc);
	pdk_mcp_call_set_data(gc->mc, NULL);
	pdk_mcp_call_reply(gc->mc, result);
	pdk__gw_tool_unref(gc->t);
	json_decref(gc->args);
	json_decref(gc->record); /* NULL: call_record() took it */
	free(gc->record_text);
	free(gc->tool);
	free(gc->principal);
	free(gc->session);
	free(gc);
}

static void call_fail(struct pdk__gw_call *gc, const struct fail *f, const char *fmt, ...)
	PDK_PRINTF(3, 4);
static void call_fail(struct pdk__gw_call *gc, const struct fail *f, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = pdk_xvasprintf(fmt, ap);
	va_end(ap);
	call_end(
		gc, f->decision,
		error_result(gc->sv->s->id, gc->rule, f, msg, gc->t == NULL || gc->t->out == NULL));
}

static void on_progress(void *ctx, const json_t *params)
{
	struct pdk__gw_call *gc = ctx;
	_cleanup_json_ json_t *p = json_deep_copy(params);

	/* SECURITY: a progress message is text the upstream wrote: redacted like its result. */
	(void)pdk_redact_json(gc->g->redact, p);
	pdk_mcp_call_progress(gc->mc, p);
}

/* The result's structuredContent against the tool's outputSchema (MCP: a result conforms). */
static bool result_ok(struct pdk__gw_call *gc, const json_t *result)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const json_t *sc = json_object_get(result, "structuredContent");
	const struct fail f = {.code = "invalid_result", .decision = "upstream_error"};

	if (gc->t->out == NULL || json_is_true(json_object_get(result, "isError")))
		return true;
	if (sc == NULL) {
		call_fail(gc, &f,
			  "upstream result invalid: no structuredContent, and tool %s__%s has an "
			  "outputSchema",
			  gc->sv->s->id, gc->tool);
		return false;
	}
	if (pdk_jschema_validate(gc->t->out, sc, &err) == 0)
		return true;
	call_fail(gc, &(struct fail){.code = f.code, .decision = f.decision, .field = err->field},
		  "upstream result invalid: structuredContent%s: %s", err->field ? err->field : "",
		  err->msg);
	return false;
}

static void on_result(void *ctx, const json_t *result, const struct pdk_error *err)
{
	struct pdk__gw_call *gc = ctx;
	json_t *r;

	gc->uc = NULL;
	if (err != NULL) {
		call_fail(gc,
			  &(struct fail){.code = "upstream_failed", .decision = "upstream_error"},
			  "upstream %s: %s", gc->sv->s->id, err->msg);
		return;
	}
	if (!json_is_object(result)) {
		call_fail(gc,
			  &(struct fail){.code = "invalid_result", .decision = "upstream_error"},
			  "upstream result invalid: not an object");
		return;
	}
	if (!result_ok(gc, result))
		return;
	/*
	 * SECURITY: secrets and token shapes never reach the client (the
	 * model). The result is the upstream's answer, freed once this returns:
	 * it is answered as it is when nothing in it is to be redacted.
	 */
	if (pdk_redact_json_needed(gc->g->redact, result)) {
		r = json_deep_copy(result);
		gc->red_result = pdk_redact_json(gc->g->redact, r);
	} else
		r = json_incref((json_t *)result);
	call_end(gc, gc->approved ? "approved" : "allowed", r);
}

static void call_forward(struct pdk__gw_call *gc)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *sent = NULL;

	/*
	 * SECURITY: an upstream never gets a secret it has no business with.
	 * The client's arguments are never changed: a copy is redacted.
	 */
	if (pdk_redact_json_needed(gc->g->redact, gc->args)) {
		sent = json_deep_copy(gc->args);
		gc->red_args = pdk_redact_json(gc->g->redact, sent);
	} else
		sent = json_incref(gc->args);
	if (!srv_ready(gc->sv)) {
		call_fail(gc,
			  &(struct fail){.code = "upstream_failed", .decision = "upstream_error"},
			  "upstream %s is not running: %s", gc->sv->s->id,
			  gc->sv->last_error ? gc->sv->last_error : "it is starting");
		return;
	}
	if (pdk__gw_up_call(gc->sv->up, gc->tool, sent, pdk_mcp_call_progress_token(gc->mc),
			    on_result, on_progress, gc, &gc->uc, &err) < 0) {
		gc->uc = NULL;
		call_fail(gc,
			  &(struct fail){.code = "upstream_failed", .decision = "upstream_error"},
			  "upstream %s: %s", gc->sv->s->id, err->msg);
		return;
	}
	/*
	 * The request is written: the record's first part is made, and
	 * serialised, while the upstream answers (off the answer's path).
	 */
	gc->record = record_start(gc);
	gc->record_text = compact(gc->record);
}

/* Budgets, then the arguments against the pinned inputSchema. */
static void call_check(struct pdk__gw_call *gc)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_gw_budget_charge(gc->g->budget, gc->principal, gc->session, gc->sv->s->id,
				 pdk_now_mono_ns(), &err) < 0) {
		call_fail(
			gc,
			&(struct fail){.code = "budget", .decision = "budget", .field = err->field},
			"%s: %s", err->field ? err->field : "budgets", err->msg);
		return;
	}
	/* SECURITY: arguments that do not fit the pinned schema never reach the upstream. */
	if (gc->t->in != NULL && pdk_jschema_validate(gc->t->in, gc->args, &err) < 0) {
		call_fail(gc,
			  &(struct fail){.code = "invalid_arguments",
					 .decision = "invalid_arguments",
					 .field = err->field},
			  "arguments%s: %s", err->field ? err->field : "", err->msg);
		return;
	}
	call_forward(gc);
}

static void on_call_decided(void *ctx, const struct pdk_ctl_approval *a)
{
	struct pdk__gw_call *gc = ctx;
	struct fail f = {.approval = gc->approval};

	gc->wait = NULL;
	/* The queue decided (perhaps through the client's own answer): its question is moot. */
	pdk_mcp_call_elicit_end(gc->mc);
	if (strcmp(a->state, "approved") == 0) {
		gc->approved = true;
		call_check(gc);
		return;
	}
	f.code = f.decision =
		strcmp(a->state, "timed_out") == 0 ? "approval_timeout" : "approval_denied";
	if (strcmp(f.code, "approval_timeout") == 0)
		call_fail(gc, &f, "approval %s: nobody decided within %llus", gc->approval,
			  (unsigned long long)gc->g->cfg->approval_timeout_s);
	else
		call_fail(gc, &f, "approval %s was %s%s%s%s%s", gc->approval, a->state,
			  a->approver ? " by " : "", a->approver ? a->approver : "",
			  a->note ? ": " : "", a->note ? a->note : "");
}

static char *args_excerpt(const json_t *redacted)
{
	_cleanup_free_ char *s = pdk_json_dump_line(redacted);

	if (strlen(s) <= EXCERPT_MAX)
		return steal_ptr(&s);
	return pdk_xasprintf("%.*s...", EXCERPT_MAX, s);
}

/*
 * A 2026-07-28 retry of a call asked in band (MRTR): its signed state names
 * the approval; the decision, the client's answer or an operator's first,
 * goes to on_call_decided() as in the 2025 era.
 */
static void call_retry(struct pdk__gw_call *gc, const json_t *detail)
{
	int rc = pdk_mcp_call_approval_retry(gc->mc, detail, on_call_decided, gc, gc->approval);

	if (rc == 0)
		return;
	if (rc == -EINVAL) {
		/* The client was answered invalid params: this ends the call and records it. */
		gc->approval[0] = '\0';
		call_fail(gc,
			  &(struct fail){.code = "invalid_request_state", .decision = "refused"},
			  "requestState does not verify for this call");
		return;
	}
	call_fail(gc,
		  &(struct fail){.code = "approval_denied",
				 .decision = "approval_denied",
				 .approval = gc->approval},
		  "approval %s was used by an earlier retry or is no longer known: call the tool "
		  "again to be asked anew",
		  gc->approval);
}

/*
 * SECURITY: the rule says a human decides: the call waits, holding only its
 * own request; a 2026-07-28 client that declared elicitation is answered
 * input_required at once instead, and its retry waits for the decision.
 */
static void call_ask(struct pdk__gw_call *gc, const struct pdk_gw_rule *rule)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *detail = pdk_mcp_audit_args(gc->g->redact, gc->args);
	_cleanup_free_ char *excerpt = args_excerpt(detail);
	_cleanup_free_ char *summary =
		pdk_xasprintf("%s" PDK_GW_SEP "%s %s", gc->sv->s->id, gc->tool, excerpt);
	_cleanup_free_ char *reason = rule && rule->reason
					      ? pdk_xstrdup(rule->reason)
					      : pdk_xasprintf("%s %s requires approval",
							      rule ? "rule" : "policy", gc->rule);
	struct pdk_ctl_approval_req r = {.kind = "tool.call",
					 .principal = gc->principal,
					 .sandbox = sandbox_of(gc->sv),
					 .summary = summary,
					 .reason = reason,
					 .detail = detail,
					 .timeout_s = gc->g->cfg->approval_timeout_s};
	json_t *input = NULL;
	int rc;

	if (pdk_mcp_call_is_retry(gc->mc)) {
		call_retry(gc, detail);
		return;
	}
	if (pdk_mcp_call_can_input(gc->mc))
		rc = pdk_mcp_call_approval_input(gc->mc, &r, gc->approval, &input, &err);
	else
		rc = pdk_ctl_approval_ask(gc->g->ctl, &r, on_call_decided, gc, gc->approval,
					  &gc->wait, &err);
	if (rc < 0) {
		gc->wait = NULL;
		gc->approval[0] = '\0';
		call_fail(gc,
			  &(struct fail){.code = "approval_denied", .decision = "approval_denied"},
			  "the approval cannot be asked: %s", err->msg);
		return;
	}
	/* MRTR: round 1 ends here; the queue's own waiter records what is decided. */
	if (input != NULL) {
		call_end(gc, "input_required", input);
		return;
	}
	/* In band too, when the client can be asked: the first decision wins (elicit.c). */
	(void)pdk_mcp_call_elicit_approval(
		gc->mc, &(struct pdk_mcp_approval_elicit){.id = gc->approval,
							  .summary = summary,
							  .reason = reason,
							  .detail = detail,
							  .timeout_s = r.timeout_s});
}

/* Policy: the first rule that matches decides; none: policy.default. Fail closed. */
static void call_policy(struct pdk__gw_call *gc)
{
	const struct pdk_gw_config *cfg = gc->g->cfg;
	struct pdk_gw_call_info ci = {.principal = gc->principal,
				      .server = gc->sv->s->id,
				      .tool = gc->tool,
				      .args = gc->args};
	const struct pdk_gw_rule *rule = pdk_gw_policy_match(cfg, &ci);
	enum pdk_gw_action action = rule ? rule->action : cfg->dflt;

	gc->rule = rule ? rule->name : "policy.default";
	if (action == PDK_GW_ALLOW)
		call_check(gc);
	else if (action == PDK_GW_APPROVE)
		call_ask(gc, rule);
	else
		call_fail(gc, &(struct fail){.code = "denied", .decision = "denied"},
			  "%s %s denies %s" PDK_GW_SEP "%s%s%s", rule ? "rule" : "the", gc->rule,
			  gc->sv->s->id, gc->tool, rule && rule->reason ? ": " : "",
			  rule && rule->reason ? rule->reason : "");
}

static struct pdk__gw_call *call_new(struct pdk_gw *g, struct pdk_mcp_call *mc,
				     struct pdk__gw_srv *sv, const char *tool, const json_t *args)
{
	struct pdk__gw_call *gc = pdk_xcalloc(1, sizeof(*gc));
	struct pdk_mcp_conn *c = pdk_mcp_call_conn(mc);

	gc->g = g;
	gc->mc = mc;
	gc->sv = sv;
	gc->tool = pdk_xstrdup(tool);
	/* Borrowed from the client's request, never changed (copies are made to redact). */
	gc->args = json_incref((json_t *)args);
	gc->principal = pdk_xstrdup(pdk_mcp_conn_principal(c));
	gc->session = pdk_xstrdup(pdk_mcp_conn_session(c));
	gc->start_ns = pdk_now_mono_ns();
	gc->next = g->calls;
	g->calls = gc;
	pdk_mcp_call_set_data(mc, gc);
	return gc;
}

/* A withheld tool: named, with the approval that holds it. */
static void call_withheld(struct pdk__gw_call *gc)
{
	struct pdk__gw_tool *t = gc->t;
	struct fail f = {.decision = "denied", .approval = t->approval[0] ? t->approval : NULL};

	gc->rule = "pinning";
	if (t->state == PDK__GW_TOOL_PENDING) {
		f.code = "tool_pending_approval";
		call_fail(gc, &f,
			  "tool %s is new or changed and waits for approval %s (paddock approvals)",
			  t->full, t->approval);
	} else {
		f.code = "tool_refused";
		call_fail(gc, &f, "tool %s is withheld: %s", t->full, t->why ? t->why : "refused");
	}
}

bool pdk__gw_call(void *ctx, struct pdk_mcp_call *mc, const char *name, const json_t *args)
{
	struct pdk_gw *g = ctx;
	const char *sep = strstr(name, PDK_GW_SEP);
	struct pdk__gw_srv *sv = sep ? pdk__gw_srv_find(g, name, (size_t)(sep - name)) : NULL;
	struct pdk__gw_tool *t;
	struct pdk__gw_call *gc;

	if (sv == NULL || g->stopping)
		return false;
	t = tool_find(sv->tools, sv->n_tools, sep + strlen(PDK_GW_SEP));
	if (srv_ready(sv) && t == NULL)
		return false; /* the mcp server's unknown-tool error */
	gc = call_new(g, mc, sv, sep + strlen(PDK_GW_SEP), args);
	if (!srv_ready(sv)) {
		call_forward(gc); /* answered: the upstream is down, and why */
		return true;
	}
	gc->t = t;
	t->refs++;
	if (t->state != PDK__GW_TOOL_SERVED)
		call_withheld(gc);
	else
		call_policy(gc);
	return true;
}

static void call_stop(struct pdk__gw_call *gc)
{
	pdk_ctl_approval_withdraw(gc->wait);
	gc->wait = NULL;
	if (gc->uc != NULL)
		pdk__gw_up_cancel(gc->uc);
	gc->uc = NULL;
	call_fail(gc, &(struct fail){.code = "cancelled", .decision = "cancelled"},
		  "the call was cancelled");
}

void pdk__gw_cancel(void *ctx, struct pdk_mcp_call *mc)
{
	struct pdk__gw_call *gc = pdk_mcp_call_data(mc);

	(void)ctx;
	if (gc != NULL)
		call_stop(gc);
}

void pdk__gw_calls_end(struct pdk_gw *g)
{
	while (g->calls != NULL)
		call_stop(g->calls);
}
