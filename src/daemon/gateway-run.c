/*
 * gateway-run.c - `paddock gateway`: the MCP gateway on stdio or on
 * Streamable HTTP, with a control object of its own (docs/gateway.md,
 * "Running").
 *
 * Like `paddock mcp`, the control object keeps its lock, store and key in
 * a private directory under the runtime directory (RUNDIR/gateway/ID-PID,
 * where the upstreams' profiles are written too) and shares the user's
 * state directory (the audit store, the pin store, the approval queue).
 * When the client closes stdin, or at SIGTERM, every upstream's sandbox is
 * destroyed and waited for: nothing is left running.
 */
#include "common.h"
#include "base.h"
#include "control.h"
#include "daemon.h"
#include "gateway.h"
#include "http.h"
#include "mcp.h"

#include <event2/event.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STOP_WAIT_S 10

struct gw_run {
	struct event_base *base;
	struct pdk_ctl *ctl;
	struct pdk_gw *gw;
	const struct pdk_gw_config *cfg;
	struct pdk_mcp_stdio *stdio;
	const char *listen, *principal;
	struct event *sig_term, *sig_int, *sig_chld, *tick;
	char *own_dir;
	const struct pdk_log *log;
	struct evhttp *http;
	struct pdk_http_guards *guards;
	struct pdk_http_limits lim;
	struct pdk_mcp_http *mcp_http;
};

static void store_records(void *arg)
{
	pdk_ctl_events_store(arg);
}

static void on_eof(void *arg)
{
	struct gw_run *r = arg;

	event_base_loopbreak(r->base);
}

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	on_eof(arg);
}

static void on_child(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	(void)arg;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct gw_run *r = arg;

	(void)fd;
	(void)what;
	pdk_ctl_tick(r->ctl);
	pdk_gw_tick(r->gw);
	if (r->mcp_http != NULL)
		pdk_mcp_http_tick(r->mcp_http);
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

/* The request's principal, or NULL after answering 401. */
static const char *authenticate(struct gw_run *r, struct evhttp_request *req)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	const char *who;

	if (r->cfg->n_principals == 0)
		return "loopback"; /* loopback only, without credentials */
	if (h == NULL || strncmp(h, "Bearer ", 7) != 0) {
		pdk_ctl_event(r->ctl, "daemon", NULL, "auth.failure",
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
		pdk_ctl_event(r->ctl, "daemon", NULL, "auth.failure",
			      json_pack("{s:s, s:s}", "reason", "unknown token", "path", "/mcp"));
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
				  "Bearer error=\"invalid_token\"");
		pdk_http_error(req, 401, "unauthorized", NULL,
			       "the bearer token is not one of the config's principals'");
	}
	return who;
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct gw_run *r = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	const char *who;

	if (pdk_http_guard_answer(r->guards, req))
		return;
	if (path == NULL || strcmp(path, "/mcp") != 0) {
		pdk_http_error(req, 404, "not_found", NULL, "the MCP endpoint is /mcp");
		return;
	}
	/* SECURITY: the client's Authorization stays here: no upstream ever sees it. */
	if ((who = authenticate(r, req)) != NULL)
		pdk_mcp_http_handle(r->mcp_http, req, who);
}

/*
 * SECURITY: without principals in the config, the endpoint serves loopback
 * only and checks Host and Origin against DNS rebinding; with principals,
 * every request brings a bearer token of one of them.
 */
static int listen_http(struct gw_run *r, const struct pdk_daemon_gateway_opts *o,
		       struct pdk_error **err)
{
	bool loopback = false;
	bool open = r->cfg->n_principals == 0;
	int fd = pdk_http_bind_tcp(o->listen, &loopback, err);

	if (fd < 0)
		return fd;
	if (open && !loopback) {
		(void)close(fd);
		return pdk_error_setx(
			err, EINVAL,
			"--listen %s: without principals in the config the gateway "
			"serves loopback only (its clients bring no credentials); add "
			"principals (paddock gateway token NAME) to listen beyond it",
			o->listen);
	}
	r->lim = (struct pdk_http_limits){.max_body = o->max_message ? o->max_message
								     : PDK_RPC_MESSAGE_MAX,
					  .max_conns = 256,
					  .head_timeout_ms = 10000,
					  .name = o->listen,
					  .log = o->log};
	r->http = evhttp_new(r->base);
	if (r->http == NULL)
		pdk_oom();
	evhttp_set_max_body_size(r->http, (ev_ssize_t)r->lim.max_body);
	evhttp_set_max_headers_size(r->http, PDK_HTTP_HEADERS_MAX);
	evhttp_set_allowed_methods(r->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(r->http, on_request, r);
	r->guards = pdk_http_guards_new(r->base, &r->lim);
	pdk_http_guards_before_write(r->guards, store_records, r->ctl);
	r->mcp_http = pdk_mcp_http_new(pdk_gw_mcp(r->gw),
				       &(struct pdk_mcp_http_opts){.check_host = open});
	if (pdk_http_serve_fd(r->base, r->http, r->guards, fd, err) < 0)
		return -EIO;
	pdk_log(o->log, PDK_LOG_INFO, "serving the MCP gateway on http://%s/mcp", o->listen);
	return 0;
}

static struct event *add_event(struct gw_run *r, int sig, event_callback_fn fn)
{
	struct event *ev = sig >= 0 ? evsignal_new(r->base, sig, fn, r)
				    : event_new(r->base, -1, EV_PERSIST, fn, r);

	if (ev == NULL || event_add(ev, sig >= 0 ? NULL : &(struct timeval){1, 0}) < 0)
		pdk_oom();
	return ev;
}

/*
 * Every upstream has listed its tools or failed once: the stdio client is
 * read from now on (its initialize waits in the pipe meanwhile), so its
 * first tools/list already has every tool that could start.
 */
static void on_started(void *arg, struct pdk_gw *g)
{
	struct gw_run *r = arg;

	if (r->listen != NULL || r->stdio != NULL)
		return;
	r->stdio = pdk_mcp_stdio_new(pdk_gw_mcp(g), STDIN_FILENO, STDOUT_FILENO,
				     r->principal ? r->principal : "local", on_eof, r);
}

static int start_gateway(struct gw_run *r, const struct pdk_daemon_gateway_opts *o,
			 struct pdk_error **err)
{
	struct pdk_gw_opts go = {.ctl = r->ctl,
				 .base = r->base,
				 .cfg = o->cfg,
				 .state_dir = o->state_dir,
				 .run_dir = r->own_dir,
				 .log = o->log,
				 .secrets = o->secrets,
				 .max_message = o->max_message,
				 .started = on_started,
				 .started_arg = r};

	return pdk_gw_new(&go, &r->gw, err);
}

static int start(struct gw_run *r, const struct pdk_daemon_gateway_opts *o, struct pdk_error **err)
{
	char id[37];
	struct pdk_ctl_opts co = {.state_dir = o->state_dir,
				  .run_dir = o->run_dir,
				  .envp = o->envp,
				  .log = o->log,
				  .actor = "paddock-gateway"};

	r->log = o->log;
	r->cfg = o->cfg;
	r->listen = o->listen;
	r->principal = o->principal;
	pdk_make_id(id);
	r->own_dir = pdk_xasprintf("%s/gateway/%.8s-%d", o->run_dir, id, (int)getpid());
	r->base = event_base_new();
	if (r->base == NULL)
		return pdk_error_setx(err, EIO, "cannot create the event loop");
	co.base = r->base;
	co.own_dir = r->own_dir;
	if (pdk_ctl_new(&co, &r->ctl, err) < 0)
		return -EIO;
	(void)signal(SIGPIPE, SIG_IGN);
	r->sig_term = add_event(r, SIGTERM, on_stop);
	r->sig_int = add_event(r, SIGINT, on_stop);
	r->sig_chld = add_event(r, SIGCHLD, on_child);
	r->tick = add_event(r, -1, on_tick);
	pdk_ctl_start(r->ctl);
	if (start_gateway(r, o, err) < 0)
		return -EINVAL;
	if (o->listen != NULL)
		return listen_http(r, o, err);
	return 0; /* stdio: served from on_started() */
}

static void stop(struct gw_run *r)
{
	struct event *evs[] = {r->sig_term, r->sig_int, r->sig_chld, r->tick};

	/* The clients first: their calls end; then every upstream and its sandbox. */
	pdk_mcp_stdio_free(r->stdio);
	pdk_mcp_http_free(r->mcp_http);
	r->mcp_http = NULL;
	pdk_http_guards_stop(r->guards);
	pdk_gw_free(r->gw);
	r->gw = NULL; /* the tick still runs while the sandboxes are destroyed */
	if (r->ctl != NULL)
		pdk_ctl_shutdown(r->ctl, true, STOP_WAIT_S);
	pdk_ctl_free(r->ctl);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(evs); i++)
		if (evs[i] != NULL)
			event_free(evs[i]);
	if (r->http != NULL)
		evhttp_free(r->http);
	if (r->base != NULL)
		event_base_free(r->base);
	pdk_http_guards_free(r->guards);
	if (r->own_dir != NULL && pdk_rm_rf_at(AT_FDCWD, r->own_dir) < 0)
		pdk_log(r->log, PDK_LOG_WARN, "cannot remove '%s'", r->own_dir);
	free(r->own_dir);
}

int pdk_daemon_gateway(const struct pdk_daemon_gateway_opts *o, struct pdk_error **err)
{
	struct gw_run r = {0};
	int rc = start(&r, o, err);

	if (rc == 0 && event_base_dispatch(r.base) < 0)
		rc = pdk_error_setx(err, EIO, "the event loop failed");
	stop(&r);
	return rc;
}
