/*
 * front.c - the front loop of `paddock mcp` and `paddock gateway`
 * (daemon-internal.h): signals, SIGCHLD reaping, the tick, the loopback or
 * authenticated Streamable HTTP listener with its guards, the stdio
 * transport, and the stop that leaves nothing running.
 */
#include "common.h"
#include "base.h"
#include "control.h"
#include "daemon-internal.h"
#include "http.h"
#include "mcp.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STOP_WAIT_S 10

/* The guards' hook before an answer is written: the records of its request are stored. */
static void store_records(void *arg)
{
	pdk_ctl_events_store(arg);
}

static void on_eof(void *arg)
{
	struct pdk_front *f = arg;

	event_base_loopbreak(f->base);
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
	/* The supervisors this process started: reaped whenever they end. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_front *f = arg;

	(void)fd;
	(void)what;
	pdk_ctl_tick(f->ctl);
	if (f->tick != NULL)
		f->tick(f->arg);
	if (f->mcp_http != NULL)
		pdk_mcp_http_tick(f->mcp_http);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct pdk_front *f = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	const char *who = "loopback"; /* without the hook: loopback only, no credentials */

	if (pdk_http_guard_answer(f->guards, req))
		return;
	if (path == NULL || strcmp(path, "/mcp") != 0) {
		pdk_http_error(req, 404, "not_found", NULL, "the MCP endpoint is /mcp");
		return;
	}
	if (f->principal != NULL)
		who = f->principal(f->arg, req);
	if (who != NULL)
		pdk_mcp_http_handle(f->mcp_http, req, who);
}

static struct event *add_event(struct pdk_front *f, int sig, event_callback_fn fn)
{
	struct event *ev = sig >= 0 ? evsignal_new(f->base, sig, fn, f)
				    : event_new(f->base, -1, EV_PERSIST, fn, f);

	if (ev == NULL || event_add(ev, sig >= 0 ? NULL : &(struct timeval){1, 0}) < 0)
		pdk_oom();
	return ev;
}

/*
 * Whether RUNDIR/KIND/NAME was left by a process that is gone: NAME ends
 * in "-PID" and no process has that PID. A live PID (its own, or a reused
 * one) keeps the directory: a front that is still starting has not taken
 * its lock yet.
 */
static bool left_by_dead(const char *name)
{
	const char *dash = strrchr(name, '-');
	char *end;
	long pid;

	if (dash == NULL || dash[1] == '\0')
		return false;
	errno = 0;
	pid = strtol(dash + 1, &end, 10);
	if (errno != 0 || *end != '\0' || pid <= 1 || pid == (long)getpid())
		return false;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/*
 * SECURITY: what a killed predecessor left running is ended. A private
 * directory whose process is gone belongs to a `paddock mcp` or gateway
 * killed before its stop (SIGKILL, the OOM killer): its sandboxes (an
 * agent's, a gateway's upstream servers) would run on with nobody to end
 * them. A control object on that directory takes its lock (a lock still
 * held means the process lives after all: skipped), re-adopts the
 * sandboxes it stored and destroys them; then the directory goes.
 */
static void reap_one(struct pdk_front *f, const struct pdk_front_opts *o, const char *dir)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ctl_opts co = {.state_dir = o->state_dir,
				  .run_dir = o->run_dir,
				  .envp = o->envp,
				  .log = o->log,
				  .actor = o->actor,
				  .base = f->base,
				  .own_dir = dir};
	struct pdk_ctl *c = NULL;
	size_t n;

	if (pdk_ctl_new(&co, &c, &err) < 0) {
		pdk_log(f->log, PDK_LOG_INFO, "left as it is: %s", err->msg);
		return;
	}
	pdk_ctl_start(c);
	n = pdk_ctl_sandbox_count(c);
	pdk_ctl_shutdown(c, true, STOP_WAIT_S);
	if (n > 0)
		pdk_log(f->log, PDK_LOG_WARN,
			"'%s' was left by a paddock %s that did not stop: its %zu sandbox%s "
			"destroyed",
			dir, o->kind, n, n == 1 ? "" : "es");
	pdk_ctl_free(c);
	if (pdk_rm_rf_at(AT_FDCWD, dir) < 0)
		pdk_log(f->log, PDK_LOG_WARN, "cannot remove '%s'", dir);
}

static void reap_stale(struct pdk_front *f, const struct pdk_front_opts *o)
{
	_cleanup_free_ char *parent = pdk_xasprintf("%s/%s", o->run_dir, o->kind);
	DIR *d = opendir(parent);
	struct dirent *de;

	if (d == NULL)
		return; /* nothing was ever started here */
	while ((de = readdir(d)) != NULL) {
		_cleanup_free_ char *dir = NULL;

		if (de->d_name[0] == '.' || !left_by_dead(de->d_name))
			continue;
		dir = pdk_xasprintf("%s/%s", parent, de->d_name);
		reap_one(f, o, dir);
	}
	(void)closedir(d);
}

int pdk__front_open(struct pdk_front *f, const struct pdk_front_opts *o, struct pdk_error **err)
{
	char id[37];
	/* Nothing re-adopts a front end's sandboxes: they end with it, however it ends. */
	struct pdk_ctl_opts co = {.state_dir = o->state_dir,
				  .run_dir = o->run_dir,
				  .envp = o->envp,
				  .log = o->log,
				  .actor = o->actor,
				  .end_with_us = true};

	f->log = o->log;
	pdk_make_id(id);
	f->own_dir = pdk_xasprintf("%s/%s/%.8s-%d", o->run_dir, o->kind, id, (int)getpid());
	f->base = event_base_new();
	if (f->base == NULL)
		return pdk_error_setx(err, EIO, "cannot create the event loop");
	reap_stale(f, o);
	co.base = f->base;
	co.own_dir = f->own_dir;
	if (pdk_ctl_new(&co, &f->ctl, err) < 0)
		return -EIO;
	return 0;
}

void pdk__front_start(struct pdk_front *f)
{
	(void)signal(SIGPIPE, SIG_IGN);
	f->sig_term = add_event(f, SIGTERM, on_stop);
	f->sig_int = add_event(f, SIGINT, on_stop);
	f->sig_chld = add_event(f, SIGCHLD, on_child);
	f->tick_ev = add_event(f, -1, on_tick);
	pdk_ctl_start(f->ctl);
}

/* The evhttp with its limits, its guards and the MCP endpoint; `fd` is bound. */
static int serve_http(struct pdk_front *f, const struct pdk_front_listen *l, int fd,
		      struct pdk_error **err)
{
	f->lim = (struct pdk_http_limits){.max_body = l->max_message ? l->max_message
								     : PDK_RPC_MESSAGE_MAX,
					  .max_conns = 256,
					  .head_timeout_ms = 10000,
					  .name = l->listen,
					  .log = f->log};
	f->http = evhttp_new(f->base);
	if (f->http == NULL)
		pdk_oom();
	evhttp_set_max_body_size(f->http, (ev_ssize_t)f->lim.max_body);
	evhttp_set_max_headers_size(f->http, PDK_HTTP_HEADERS_MAX);
	evhttp_set_allowed_methods(f->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(f->http, on_request, f);
	f->guards = pdk_http_guards_new(f->base, &f->lim);
	/* SECURITY: every answer is written after the audit records made before it are stored. */
	pdk_http_guards_before_write(f->guards, store_records, f->ctl);
	f->mcp_http = pdk_mcp_http_new(
		l->mcp, &(struct pdk_mcp_http_opts){.check_host = l->loopback_only != NULL});
	if (pdk_http_serve_fd(f->base, f->http, f->guards, fd, err) < 0)
		return -EIO;
	return 0;
}

int pdk__front_listen(struct pdk_front *f, const struct pdk_front_listen *l, struct pdk_error **err)
{
	bool loopback = false;
	int fd = pdk_http_bind_tcp(l->listen, &loopback, err);

	if (fd < 0)
		return fd;
	/* SECURITY: clients without credentials are served on loopback only. */
	if (l->loopback_only != NULL && !loopback) {
		(void)close(fd);
		return pdk_error_setx(err, EINVAL, "--listen %s: %s", l->listen, l->loopback_only);
	}
	if (serve_http(f, l, fd, err) < 0)
		return -EIO;
	pdk_log(f->log, PDK_LOG_INFO, "serving %s on http://%s/mcp", l->what, l->listen);
	return 0;
}

void pdk__front_stdio(struct pdk_front *f, struct pdk_mcp *m, const char *identity)
{
	f->stdio = pdk_mcp_stdio_new(m, STDIN_FILENO, STDOUT_FILENO, identity, on_eof, f);
}

int pdk__front_run(struct pdk_front *f, struct pdk_error **err)
{
	if (event_base_dispatch(f->base) < 0)
		return pdk_error_setx(err, EIO, "the event loop failed");
	return 0;
}

void pdk__front_stop(struct pdk_front *f)
{
	struct event *evs[] = {f->sig_term, f->sig_int, f->sig_chld, f->tick_ev};

	/* The clients first: their calls end; then what the run file owns, then the sandboxes. */
	pdk_mcp_stdio_free(f->stdio);
	f->stdio = NULL;
	pdk_mcp_http_free(f->mcp_http);
	f->mcp_http = NULL; /* the tick still runs while the sandboxes are destroyed */
	pdk_http_guards_stop(f->guards);
	if (f->release != NULL)
		f->release(f->arg);
	if (f->ctl != NULL)
		pdk_ctl_shutdown(f->ctl, true, STOP_WAIT_S);
	pdk_ctl_free(f->ctl);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(evs); i++)
		if (evs[i] != NULL)
			event_free(evs[i]);
	if (f->http != NULL)
		evhttp_free(f->http);
	if (f->base != NULL)
		event_base_free(f->base);
	pdk_http_guards_free(f->guards);
	if (f->own_dir != NULL && pdk_rm_rf_at(AT_FDCWD, f->own_dir) < 0)
		pdk_log(f->log, PDK_LOG_WARN, "cannot remove '%s'", f->own_dir);
	free(f->own_dir);
}
