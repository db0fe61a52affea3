/*
 * mcp-run.c - `paddock mcp`: the MCP server on stdio, with a control object
 * of its own (docs/mcp.md, "What runs").
 *
 * The control object keeps its lock, store and key in a private directory
 * under the runtime directory, and shares the user's state directory (the
 * audit store, change sets) with every other paddock: so it runs beside a
 * `paddock serve` on the same state directory, and beside other `paddock
 * mcp` processes (one per client). When the client closes stdin, every
 * sandbox it made is destroyed and the process waits for their supervisors
 * to end: nothing is left running.
 */
#include "common.h"
#include "base.h"
#include "control.h"
#include "daemon.h"
#include "http.h"
#include "mcp.h"

#include <event2/event.h>
#include <fcntl.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define STOP_WAIT_S 10

struct mcp_run {
	struct event_base *base;
	struct pdk_ctl *ctl;
	struct pdk_mcp *mcp;
	struct pdk_mcp_stdio *stdio;
	struct event *sig_term, *sig_int, *sig_chld, *tick;
	char *own_dir;
	const struct pdk_log *log;
	/* --listen: the Streamable HTTP endpoint on loopback, instead of stdio. */
	struct evhttp *http;
	struct pdk_http_guards *guards;
	struct pdk_http_limits lim;
	struct pdk_mcp_http *mcp_http;
};

/* The guards' hook before an answer is written: the records of its request are stored. */
static void store_records(void *arg)
{
	pdk_ctl_events_store(arg);
}

static void on_eof(void *arg)
{
	struct mcp_run *r = arg;

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
	struct mcp_run *r = arg;

	(void)fd;
	(void)what;
	pdk_ctl_tick(r->ctl);
	if (r->mcp_http != NULL)
		pdk_mcp_http_tick(r->mcp_http);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct mcp_run *r = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

	if (pdk_http_guard_answer(r->guards, req))
		return;
	if (path == NULL || strcmp(path, "/mcp") != 0) {
		pdk_http_error(req, 404, "not_found", NULL, "the MCP endpoint is /mcp");
		return;
	}
	/* Loopback only, without credentials: every client is the same principal. */
	pdk_mcp_http_handle(r->mcp_http, req, "loopback");
}

/*
 * SECURITY: without credentials, the endpoint serves loopback only, and checks
 * Host and Origin against DNS rebinding; beyond loopback, paddock serve's /mcp
 * takes bearer tokens.
 */
static int listen_http(struct mcp_run *r, const struct pdk_daemon_mcp_opts *o,
		       struct pdk_error **err)
{
	bool loopback = false;
	int fd = pdk_http_bind_tcp(o->listen, &loopback, err);

	if (fd < 0)
		return fd;
	if (!loopback) {
		(void)close(fd);
		return pdk_error_setx(
			err, EINVAL,
			"--listen %s: paddock mcp serves loopback only (its clients "
			"bring no credentials); beyond it, use paddock serve --listen, "
			"whose /mcp takes bearer tokens",
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
	/* SECURITY: every answer is written after the audit records made before it are stored. */
	pdk_http_guards_before_write(r->guards, store_records, r->ctl);
	r->mcp_http = pdk_mcp_http_new(r->mcp, &(struct pdk_mcp_http_opts){.check_host = true});
	if (pdk_http_serve_fd(r->base, r->http, r->guards, fd, err) < 0)
		return -EIO;
	pdk_log(o->log, PDK_LOG_INFO, "serving MCP on http://%s/mcp", o->listen);
	return 0;
}

static struct event *add_event(struct mcp_run *r, int sig, event_callback_fn fn)
{
	struct event *ev = sig >= 0 ? evsignal_new(r->base, sig, fn, r)
				    : event_new(r->base, -1, EV_PERSIST, fn, r);

	if (ev == NULL || event_add(ev, sig >= 0 ? NULL : &(struct timeval){1, 0}) < 0)
		pdk_oom();
	return ev;
}

static int start(struct mcp_run *r, const struct pdk_daemon_mcp_opts *o, struct pdk_error **err)
{
	_cleanup_free_ char *identity = NULL;
	char id[37];
	struct pdk_ctl_opts co = {.state_dir = o->state_dir,
				  .run_dir = o->run_dir,
				  .envp = o->envp,
				  .log = o->log,
				  .actor = "paddock-mcp"};

	r->log = o->log;
	pdk_make_id(id);
	r->own_dir = pdk_xasprintf("%s/mcp/%.8s-%d", o->run_dir, id, (int)getpid());
	r->base = event_base_new();
	if (r->base == NULL)
		return pdk_error_setx(err, EIO, "cannot create the event loop");
	co.base = r->base;
	co.own_dir = r->own_dir;
	if (pdk_ctl_new(&co, &r->ctl, err) < 0)
		return -EIO;
	r->mcp = pdk_mcp_new(
		&(struct pdk_mcp_opts){.ctl = r->ctl,
				       .base = r->base,
				       .log = o->log,
				       .max_message = o->max_message,
				       .profile = o->profile,
				       .ttl_s = o->ttl_s,
				       .workspace = o->workspace,
				       .approval_timeout_s = o->approval_timeout_s,
				       .conformance_fixtures = o->conformance_fixtures});
	(void)signal(SIGPIPE, SIG_IGN);
	r->sig_term = add_event(r, SIGTERM, on_stop);
	r->sig_int = add_event(r, SIGINT, on_stop);
	r->sig_chld = add_event(r, SIGCHLD, on_child);
	r->tick = add_event(r, -1, on_tick);
	pdk_ctl_start(r->ctl);
	if (o->listen != NULL)
		return listen_http(r, o, err);
	identity = pdk_xasprintf("stdio:%d", (int)getpid());
	r->stdio = pdk_mcp_stdio_new(r->mcp, STDIN_FILENO, STDOUT_FILENO, identity, on_eof, r);
	return 0;
}

static void stop(struct mcp_run *r)
{
	struct event *evs[] = {r->sig_term, r->sig_int, r->sig_chld, r->tick};

	/* The client is gone: its commands are killed and its sandboxes destroyed, waited for. */
	pdk_mcp_stdio_free(r->stdio);
	pdk_mcp_http_free(r->mcp_http);
	r->mcp_http = NULL; /* the tick still runs while the sandboxes are destroyed */
	pdk_http_guards_stop(r->guards);
	if (r->ctl != NULL)
		pdk_ctl_shutdown(r->ctl, true, STOP_WAIT_S);
	pdk_ctl_free(r->ctl);
	pdk_mcp_free(r->mcp);
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

int pdk_daemon_mcp(const struct pdk_daemon_mcp_opts *o, struct pdk_error **err)
{
	struct mcp_run r = {0};
	int rc = start(&r, o, err);

	if (rc == 0 && event_base_dispatch(r.base) < 0)
		rc = pdk_error_setx(err, EIO, "the event loop failed");
	stop(&r);
	return rc;
}
