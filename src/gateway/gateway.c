/*
 * gateway.c - the gateway object (docs/gateway.md, "Running";
 * docs/internals/gateway.md): the pin store, the budgets, the redaction
 * of secrets, the downstream MCP server whose tool provider is the broker,
 * and the life of each upstream: a stdio one's profile written, a remote
 * one's headers given their secrets, its start, a failure logged naming it
 * and why, and a new start after a backoff (1 s, 2 s, 4 s ... 30 s).
 */
#include "common.h"
#include "broker.h"
#include "egress.h"
#include "telemetry.h"

#include <ctype.h>
#include <event2/event.h>
#include <string.h>
#include <strings.h>

#define BACKOFF_MAX_S        30
#define END_SESSIONS_WAIT_NS (2500ull * 1000000) /* a little past remote.c's DELETE limit */

static const char instructions[] =
	"Tools of MCP servers, each run in a paddock sandbox or reached over HTTP, named "
	"SERVER__TOOL. Every call goes through the gateway's policy and budgets, its arguments "
	"are checked against the tool's pinned schema, secrets are redacted both ways, and it is "
	"audited. An error result's structuredContent.error.code says why a call was refused.";

static void srv_start(struct pdk__gw_srv *sv);

/* SECURITY: resolved headers hold secret values: wiped before they are freed. NULL-safe. */
static void headers_free(char **h)
{
	for (size_t i = 0; h != NULL && h[i] != NULL; i++)
		explicit_bzero(h[i], strlen(h[i]));
	pdk_strv_free(h);
}

struct pdk__gw_srv *pdk__gw_srv_find(struct pdk_gw *g, const char *id, size_t len)
{
	for (size_t i = 0; i < g->n_srvs; i++)
		if (strlen(g->srvs[i].s->id) == len && memcmp(g->srvs[i].s->id, id, len) == 0)
			return &g->srvs[i];
	return NULL;
}

/* ---- an upstream's life ---- */

void pdk__gw_settled(struct pdk__gw_srv *sv)
{
	struct pdk_gw *g = sv->g;
	void (*cb)(void *arg, struct pdk_gw *gw) = g->started;

	sv->settled = true;
	for (size_t i = 0; i < g->n_srvs; i++)
		if (!g->srvs[i].settled)
			return;
	if (cb == NULL || g->starting)
		return;
	g->started = NULL;
	cb(g->started_arg, g);
}

static void on_tools(void *ctx, struct pdk_gw_up *u, const json_t *tools)
{
	struct pdk__gw_srv *sv = ctx;

	(void)u;
	if (sv->last_error != NULL)
		pdk_log(&sv->g->log, PDK_LOG_INFO, "upstream %s is running again", sv->s->id);
	sv->backoff_s = 0;
	pdk__gw_tools_listed(sv, tools);
	pdk__gw_settled(sv);
}

/* Failed: logged, its tools unlisted; tick frees it and starts it again after the backoff. */
static void srv_failed(struct pdk__gw_srv *sv, const char *msg)
{
	sv->backoff_s = sv->backoff_s == 0 ? 1 : sv->backoff_s * 2;
	if (sv->backoff_s > BACKOFF_MAX_S)
		sv->backoff_s = BACKOFF_MAX_S;
	sv->retry_ns = pdk_now_mono_ns() + (uint64_t)sv->backoff_s * 1000000000ull;
	free(sv->last_error);
	sv->last_error = pdk_xstrdup(msg);
	sv->failed = true;
	pdk_log(&sv->g->log, PDK_LOG_WARN, "upstream %s failed: %s (starting it again in %us)",
		sv->s->id, msg, sv->backoff_s);
	/* Its tools are not listed while it is down. */
	if (sv->n_tools > 0)
		pdk_mcp_tools_changed(sv->g->mcp);
	pdk__gw_settled(sv);
}

static void on_failed(void *ctx, struct pdk_gw_up *u, const struct pdk_error *err)
{
	(void)u;
	srv_failed(ctx, err != NULL ? err->msg : "it failed");
}

static const struct pdk_gw_up_cbs up_cbs = {.tools = on_tools, .failed = on_failed};

static int write_profile(struct pdk__gw_srv *sv, const char *dir, struct pdk_error **err)
{
	_cleanup_free_ char *yaml = pdk_gw_profile_yaml(sv->s);

	sv->profile = pdk_xasprintf("%s/%s.yaml", dir, sv->s->id);
	if (yaml == NULL)
		return pdk_error_set_field(err, EINVAL, sv->s->id,
					   "servers.%s: cannot make its profile", sv->s->id);
	return pdk_write_file_at(AT_FDCWD, sv->profile, yaml, true, err);
}

static void srv_start(struct pdk__gw_srv *sv)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	sv->failed = false;
	if (pdk__gw_up_start(sv->g->ctl, sv->g->base, sv->s, sv->profile, sv->headers, &up_cbs, sv,
			     &sv->up, &err) < 0) {
		sv->up = NULL;
		srv_failed(sv, err->msg);
	}
}

static void srv_free(struct pdk__gw_srv *sv)
{
	pdk__gw_up_free(sv->up);
	sv->up = NULL;
	for (size_t i = 0; i < sv->n_tools; i++) {
		sv->tools[i]->srv = NULL;
		pdk__gw_tool_unref(sv->tools[i]);
	}
	free(sv->tools);
	free(sv->profile);
	free(sv->last_error);
	headers_free(sv->headers);
}

void pdk_gw_tick(struct pdk_gw *g)
{
	uint64_t now = pdk_now_mono_ns();

	for (size_t i = 0; g != NULL && !g->stopping && i < g->n_srvs; i++) {
		struct pdk__gw_srv *sv = &g->srvs[i];

		if (!sv->failed || now < sv->retry_ns)
			continue;
		/* Freed here, not in its failed callback: the upstream is on the stack there. */
		pdk__gw_up_free(sv->up);
		sv->up = NULL;
		srv_start(sv);
	}
}

/* ---- the object ---- */

static void on_conn_end(void *ctx, struct pdk_mcp_conn *c)
{
	struct pdk_gw *g = ctx;

	pdk_gw_budget_session_end(g->budget, pdk_mcp_conn_session(c));
}

static json_t *on_list(void *ctx, struct pdk_mcp_conn *c)
{
	return pdk__gw_list(ctx, pdk_mcp_conn_principal(c));
}

static struct pdk_redact *redact_of(char *const *secrets)
{
	struct pdk_redact *r = pdk_redact_new();

	for (size_t i = 0; secrets != NULL && secrets[i] != NULL && secrets[i + 1] != NULL; i += 2)
		(void)pdk_redact_add_secret(r, secrets[i], secrets[i + 1]);
	return r;
}

/* The value of secret `name` (as in ${secret:name}) among NAME, VALUE... pairs, or NULL. */
static const char *secret_value(char *const *secrets, const char *name, size_t len)
{
	for (size_t i = 0; secrets != NULL && secrets[i] != NULL && secrets[i + 1] != NULL; i += 2)
		if (strlen(secrets[i]) == len && strncasecmp(secrets[i], name, len) == 0)
			return secrets[i + 1];
	return NULL;
}

/*
 * Header `h` with its ${secret:NAME} replaced by the secret's value (new
 * string), or NULL when the secret is not set (or could end the line).
 */
static char *header_resolve(const char *h, char *const *secrets, char **missing)
{
	const char *ref = strstr(h, "${secret:"), *end = ref ? strchr(ref, '}') : NULL;
	const char *v;

	if (ref == NULL || end == NULL)
		return pdk_xstrdup(h);
	v = secret_value(secrets, ref + 9, (size_t)(end - ref - 9));
	/* SECURITY: fail closed; a value that could end the header line is refused. */
	if (v == NULL || *v == '\0' || strpbrk(v, "\r\n") != NULL) {
		*missing = pdk_xasprintf("%.*s", (int)(end - ref - 9), ref + 9);
		for (char *p = *missing; *p; p++)
			*p = (char)toupper((unsigned char)*p);
		return NULL;
	}
	return pdk_xasprintf("%.*s%s%s", (int)(ref - h), h, v, end + 1);
}

/* Server `s`'s headers with their secrets (new strv), or NULL + *err naming the one not set. */
static char **headers_resolve(const struct pdk_gw_config *cfg, const struct pdk_gw_server *s,
			      char *const *secrets, struct pdk_error **err)
{
	char **out = pdk_xcalloc(1, sizeof(*out));

	for (size_t i = 0; s->headers != NULL && s->headers[i] != NULL; i++) {
		_cleanup_free_ char *missing = NULL, *f = NULL;
		char *h = header_resolve(s->headers[i], secrets, &missing);

		if (h != NULL) {
			pdk_strv_push_take(&out, h);
			continue;
		}
		f = pdk_xasprintf("servers.%s.headers[%zu]", s->id, i);
		(void)pdk_error_set_field(err, EINVAL, f,
					  "%s:%d: %s: secret '%s' is not set: set "
					  "PADDOCK_SECRET_%s (one line, not empty) in the "
					  "environment the gateway runs in",
					  cfg->path, s->line, f, missing, missing);
		headers_free(out);
		return NULL;
	}
	return out;
}

/* Every remote server of the config: its secrets are set, its trust store can be read. */
static int servers_check(const struct pdk_gw_config *cfg, char *const *secrets,
			 struct pdk_error **err)
{
	for (size_t i = 0; i < cfg->n_servers; i++) {
		const struct pdk_gw_server *s = &cfg->servers[i];
		char **h;
		_cleanup_error_ struct pdk_error *why = NULL;
		struct ssl_ctx_st *tls;
		_cleanup_free_ char *f = NULL;

		if (s->url == NULL)
			continue;
		h = headers_resolve(cfg, s, secrets, err);
		if (h == NULL)
			return -EINVAL;
		headers_free(h);
		if (s->ca_file == NULL)
			continue;
		tls = pdk_egress_tls_client_ctx(s->ca_file, &why);
		pdk_egress_tls_ctx_free(tls);
		if (tls != NULL)
			continue;
		f = pdk_xasprintf("servers.%s.ca_file", s->id);
		return pdk_error_set_field(err, EINVAL, f,
					   "%s:%d: %s: %s: give a PEM file of CA certificates",
					   cfg->path, s->line, f, why->msg);
	}
	return 0;
}

static int servers_start(struct pdk_gw *g, char *const *secrets, const char *dir,
			 struct pdk_error **err)
{
	if (pdk_mkdir_p(dir, err) < 0)
		return -EIO;
	g->srvs = pdk_xcalloc(g->cfg->n_servers ? g->cfg->n_servers : 1, sizeof(*g->srvs));
	for (size_t i = 0; i < g->cfg->n_servers; i++) {
		struct pdk__gw_srv *sv = &g->srvs[g->n_srvs++];

		sv->g = g;
		sv->s = &g->cfg->servers[i];
		if (sv->s->url != NULL) {
			sv->headers = headers_resolve(g->cfg, sv->s, secrets, err);
			if (sv->headers == NULL)
				return -EINVAL;
			continue;
		}
		if (write_profile(sv, dir, err) < 0)
			return -EIO;
	}
	g->starting = true;
	for (size_t i = 0; i < g->n_srvs; i++)
		srv_start(&g->srvs[i]);
	g->starting = false;
	return 0;
}

/* Every upstream settled while they were being started (or there is none). */
static void announce(struct pdk_gw *g)
{
	void (*cb)(void *arg, struct pdk_gw *gw) = g->started;

	for (size_t i = 0; i < g->n_srvs; i++)
		if (!g->srvs[i].settled)
			return;
	if (cb != NULL) {
		g->started = NULL;
		cb(g->started_arg, g);
	}
}

int pdk_gw_new(const struct pdk_gw_opts *o, struct pdk_gw **out, struct pdk_error **err)
{
	struct pdk_gw *g;
	_cleanup_free_ char *dir = NULL;

	*out = NULL;
	if (servers_check(o->cfg, o->secrets, err) < 0)
		return -EINVAL;
	g = pdk_xcalloc(1, sizeof(*g));
	g->ctl = o->ctl;
	g->base = o->base;
	g->cfg = o->cfg;
	if (o->log != NULL)
		g->log = *o->log;
	g->provider = (struct pdk_mcp_provider){.ctx = g,
						.list = on_list,
						.call = pdk__gw_call,
						.cancel = pdk__gw_cancel,
						.conn_end = on_conn_end};
	if (pdk_gw_pins_open(o->state_dir, &g->pins, err) < 0) {
		pdk_gw_free(g);
		return -EIO;
	}
	g->budget = pdk_gw_budget_new(&o->cfg->budgets);
	g->redact = redact_of(o->secrets);
	g->mcp = pdk_mcp_new(
		&(struct pdk_mcp_opts){.ctl = o->ctl,
				       .base = o->base,
				       .log = o->log,
				       .max_message = o->max_message,
				       .provider = &g->provider,
				       .no_elicit_approvals = !o->cfg->approvals_in_band,
				       .instructions = instructions});
	g->started = o->started;
	g->started_arg = o->started_arg;
	dir = pdk_xasprintf("%s/profiles", o->run_dir);
	if (servers_start(g, o->secrets, dir, err) < 0) {
		pdk_gw_free(g);
		return -EIO;
	}
	*out = g;
	announce(g);
	return 0;
}

struct pdk_mcp *pdk_gw_mcp(struct pdk_gw *g)
{
	return g->mcp;
}

/*
 * The remote upstreams' sessions are ended (a DELETE each, bounded): the
 * loop runs a little longer for them. Outside the loop only: inside it, a
 * nested run returns at once, and the DELETEs go when the loop goes on.
 */
static void end_sessions(struct event_base *base)
{
	uint64_t deadline = pdk_now_mono_ns() + END_SESSIONS_WAIT_NS;

	while (pdk__gw_remote_ending() > 0 && pdk_now_mono_ns() < deadline)
		if (event_base_loop(base, EVLOOP_ONCE) < 0)
			return;
}

void pdk_gw_free(struct pdk_gw *g)
{
	if (g == NULL)
		return;
	g->stopping = true;
	pdk__gw_calls_end(g);
	/* SECURITY: every upstream's command is killed and its sandbox destroyed. */
	for (size_t i = 0; i < g->n_srvs; i++)
		srv_free(&g->srvs[i]);
	free(g->srvs);
	end_sessions(g->base);
	pdk_mcp_free(g->mcp);
	pdk_gw_budget_free(g->budget);
	pdk_gw_pins_free(g->pins);
	pdk_redact_free(g->redact);
	free(g);
}
