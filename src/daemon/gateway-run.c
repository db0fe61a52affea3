/*
 * gateway-run.c - `paddock gateway`: the MCP gateway on stdio or on
 * Streamable HTTP, with a control object of its own (docs/gateway.md,
 * "Running").
 *
 * Like `paddock mcp` (and on its loop, front.c), the control object keeps its lock, store and key
 * in a private directory under the runtime directory (RUNDIR/gateway/ID-PID, where the upstreams'
 * profiles are written too) and shares the user's state directory (the audit store, the pin store,
 * the approval queue). When the client closes stdin, or at SIGTERM, every upstream's sandbox is
 * destroyed and waited for: nothing is left running.
 */
#include "common.h"
#include "base.h"
#include "control.h"
#include "daemon.h"
#include "daemon-internal.h"
#include "gateway.h"
#include "http.h"
#include "mcp.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

struct gw_run {
	struct pdk_front f;
	struct pdk_gw *gw;
	const struct pdk_gw_config *cfg;
	const char *listen, *principal;
};

static void tick(void *arg)
{
	struct gw_run *r = arg;

	pdk_gw_tick(r->gw);
}

/* The clients are gone: every upstream and its sandbox, before the control object's end. */
static void release(void *arg)
{
	struct gw_run *r = arg;

	pdk_gw_free(r->gw);
	r->gw = NULL; /* the tick still runs while the sandboxes are destroyed */
}

/*
 * SECURITY: the principal whose token the request presents: its SHA-256
 * compared with every configured one in constant time. NULL: none.
 */
static const char *principal_of(const struct pdk_gw_config *cfg, const char *token)
{
	unsigned char h[32];
	unsigned int len = 0;
	const char *found = NULL;

	if (EVP_Digest(token, strlen(token), h, &len, EVP_sha256(), NULL) != 1)
		return NULL;
	for (size_t i = 0; i < cfg->n_principals; i++)
		if (CRYPTO_memcmp(h, cfg->principals[i].token_sha256, sizeof(h)) == 0)
			found = cfg->principals[i].name;
	OPENSSL_cleanse(h, sizeof(h));
	return found;
}

/*
 * The request's principal, or NULL after answering 401. SECURITY: the
 * client's Authorization stays here: no upstream ever sees it.
 */
static const char *authenticate(void *arg, struct evhttp_request *req)
{
	struct gw_run *r = arg;
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	const char *who;

	if (r->cfg->n_principals == 0)
		return "loopback"; /* loopback only, without credentials */
	if (h == NULL || strncmp(h, "Bearer ", 7) != 0) {
		pdk_ctl_event(r->f.ctl, "daemon", NULL, "auth.failure",
			      json_pack("{s:s, s:s}", "reason", "no bearer token", "path", "/mcp"));
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
				  "Bearer");
		pdk_http_error(req, 401, "unauthorized", NULL,
			       "the gateway needs 'Authorization: Bearer TOKEN' with the token of "
			       "one of the config's principals (paddock gateway token NAME)");
		return NULL;
	}
	who = principal_of(r->cfg, h + 7);
	if (who == NULL) {
		pdk_ctl_event(r->f.ctl, "daemon", NULL, "auth.failure",
			      json_pack("{s:s, s:s}", "reason", "unknown token", "path", "/mcp"));
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
				  "Bearer error=\"invalid_token\"");
		pdk_http_error(req, 401, "unauthorized", NULL,
			       "the bearer token is not one of the config's principals'");
	}
	return who;
}

/*
 * SECURITY: without principals in the config, the endpoint serves loopback
 * only and checks Host and Origin against DNS rebinding; with principals,
 * every request brings a bearer token of one of them (authenticate()).
 */
static int listen_http(struct gw_run *r, const struct pdk_daemon_gateway_opts *o,
		       struct pdk_error **err)
{
	struct pdk_front_listen l = {.listen = o->listen,
				     .mcp = pdk_gw_mcp(r->gw),
				     .max_message = o->max_message,
				     .what = "the MCP gateway"};

	if (r->cfg->n_principals == 0)
		l.loopback_only = "without principals in the config the gateway serves loopback "
				  "only (its clients bring no credentials); add principals "
				  "(paddock gateway token NAME) to listen beyond it";
	return pdk__front_listen(&r->f, &l, err);
}

/*
 * Every upstream has listed its tools or failed once: the stdio client is
 * read from now on (its initialize waits in the pipe meanwhile), so its
 * first tools/list already has every tool that could start.
 */
static void on_started(void *arg, struct pdk_gw *g)
{
	struct gw_run *r = arg;

	if (r->listen != NULL || r->f.stdio != NULL)
		return;
	pdk__front_stdio(&r->f, pdk_gw_mcp(g), r->principal ? r->principal : "local");
}

static int start_gateway(struct gw_run *r, const struct pdk_daemon_gateway_opts *o,
			 struct pdk_error **err)
{
	struct pdk_gw_opts go = {.ctl = r->f.ctl,
				 .base = r->f.base,
				 .cfg = o->cfg,
				 .state_dir = o->state_dir,
				 .run_dir = r->f.own_dir,
				 .log = o->log,
				 .secrets = o->secrets,
				 .max_message = o->max_message,
				 .started = on_started,
				 .started_arg = r};

	return pdk_gw_new(&go, &r->gw, err);
}

static int start(struct gw_run *r, const struct pdk_daemon_gateway_opts *o, struct pdk_error **err)
{
	struct pdk_front_opts fo = {.kind = "gateway",
				    .actor = "paddock-gateway",
				    .state_dir = o->state_dir,
				    .run_dir = o->run_dir,
				    .envp = o->envp,
				    .log = o->log};

	r->cfg = o->cfg;
	r->listen = o->listen;
	r->principal = o->principal;
	r->f.arg = r;
	r->f.tick = tick;
	r->f.release = release;
	r->f.principal = authenticate;
	if (pdk__front_open(&r->f, &fo, err) < 0)
		return -EIO;
	pdk__front_start(&r->f);
	if (start_gateway(r, o, err) < 0)
		return -EINVAL;
	if (o->listen != NULL)
		return listen_http(r, o, err);
	return 0; /* stdio: served from on_started() */
}

int pdk_daemon_gateway(const struct pdk_daemon_gateway_opts *o, struct pdk_error **err)
{
	struct gw_run r = {0};
	int rc = start(&r, o, err);

	if (rc == 0)
		rc = pdk__front_run(&r.f, err);
	/* The clients first: their calls end; then every upstream and its sandbox. */
	pdk__front_stop(&r.f);
	return rc;
}
