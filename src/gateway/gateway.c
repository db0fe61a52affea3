/*
 * gateway.c - the gateway object (docs/gateway.md, "Running";
 * docs/internals/gateway.md): the pin store, the budgets, the redaction
 * of secrets, the downstream MCP server whose tool provider is the broker,
 * and the life of each stdio upstream: its profile written, its sandbox
 * started, a failure logged naming it and why, and a new start after a
 * backoff (1 s, 2 s, 4 s ... 30 s).
 */
#include "common.h"
#include "broker.h"
#include "telemetry.h"

#include <string.h>

#define BACKOFF_MAX_S 30

static const char instructions[] =
	"Tools of MCP servers that each run in a paddock sandbox, named SERVER__TOOL. Every "
	"call goes through the gateway's policy and budgets, its arguments are checked against "
	"the tool's pinned schema, secrets are redacted both ways, and it is audited. An error "
	"result's structuredContent.error.code says why a call was refused.";

static void srv_start(struct pdk__gw_srv *sv);

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
	if (pdk__gw_up_start(sv->g->ctl, sv->g->base, sv->s, sv->profile, &up_cbs, sv, &sv->up,
			     &err) < 0) {
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

/* Every server of the config: remote ones are refused (not in this release). */
static int servers_check(const struct pdk_gw_config *cfg, struct pdk_error **err)
{
	for (size_t i = 0; i < cfg->n_servers; i++)
		if (cfg->servers[i].url != NULL) {
			_cleanup_free_ char *f =
				pdk_xasprintf("servers.%s.url", cfg->servers[i].id);

			return pdk_error_set_field(
				err, EINVAL, f,
				"%s:%d: %s: remote upstreams are not supported yet: run the "
				"server as a stdio command (command:) instead",
				cfg->path, cfg->servers[i].line, f);
		}
	return 0;
}

static int servers_start(struct pdk_gw *g, const char *dir, struct pdk_error **err)
{
	if (pdk_mkdir_p(dir, err) < 0)
		return -EIO;
	g->srvs = pdk_xcalloc(g->cfg->n_servers ? g->cfg->n_servers : 1, sizeof(*g->srvs));
	for (size_t i = 0; i < g->cfg->n_servers; i++) {
		struct pdk__gw_srv *sv = &g->srvs[g->n_srvs++];

		sv->g = g;
		sv->s = &g->cfg->servers[i];
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
	if (servers_check(o->cfg, err) < 0)
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
	if (servers_start(g, dir, err) < 0) {
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
	pdk_mcp_free(g->mcp);
	pdk_gw_budget_free(g->budget);
	pdk_gw_pins_free(g->pins);
	pdk_redact_free(g->redact);
	free(g);
}
