/*
 * serve.c - `paddock serve`: the loop, the control object, the listeners
 * and the API behind them, signals, the tick, shutdown (docs/daemon.md).
 */
#include "common.h"
#include "api.h"
#include "base.h"
#include "control.h"
#include "daemon.h"
#include "http.h"

#include <arpa/inet.h>
#include <event2/listener.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY (64ULL << 20)
#define SHUTDOWN_WAIT_S  10

/* The daemon's process-wide state: what it runs, and what it listens with. */
struct pdk_daemon {
	struct event_base *base;
	struct pdk_ctl *ctl;
	struct pdk_api *api;
	struct pdk_http_guards *guards;
	struct evhttp *http_unix, *http_tcp;
	struct event *sig_term, *sig_int, *sig_chld, *tick;
	const struct pdk_log *log;
	char *socket_path;
	uint64_t max_body;
	bool kill_on_exit;
	bool stopping; /* shutdown: no tick work */
};

/* ---- listeners ---- */

static void on_request(struct pdk_daemon *d, struct evhttp_request *req, bool unix_peer)
{
	if (pdk_http_guard_answer(d->guards, req))
		return; /* a request the guard refused: answered before authentication */
	pdk_api_handle(d->api, req, unix_peer);
}

static void on_unix_request(struct evhttp_request *req, void *arg)
{
	on_request(arg, req, true);
}

static void on_tcp_request(struct evhttp_request *req, void *arg)
{
	on_request(arg, req, false);
}

static struct evhttp *http_new(struct pdk_daemon *d, void (*cb)(struct evhttp_request *, void *))
{
	struct evhttp *h = evhttp_new(d->base);

	if (h == NULL)
		pdk_oom();
	/*
	 * The guard (http/) refuses oversized and malformed requests with the
	 * JSON error before evhttp sees them; evhttp's own limits stay as a
	 * second line, never reached by what the guard passes on.
	 */
	pdk_http_guard_install(d->guards, h);
	evhttp_set_max_body_size(h, (ev_ssize_t)d->max_body);
	evhttp_set_max_headers_size(h, PDK_HTTP_HEADERS_MAX);
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
					      EVHTTP_REQ_DELETE);
	evhttp_set_gencb(h, cb, d);
	return h;
}

static int bind_fd(struct pdk_daemon *d, struct evhttp *h, int fd, struct pdk_error **err)
{
	struct evconnlistener *l;

	if (listen(fd, 128) < 0) {
		(void)close(fd);
		return pdk_error_set(err, errno, "listen");
	}
	l = evconnlistener_new(d->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
			       -1, fd);
	if (l == NULL) {
		(void)close(fd);
		return pdk_error_setx(err, EIO, "cannot listen on the socket");
	}
	if (evhttp_bind_listener(h, l) == NULL) {
		evconnlistener_free(l);
		return pdk_error_setx(err, EIO, "cannot serve HTTP on the socket");
	}
	return 0;
}

static int listen_unix(struct pdk_daemon *d, struct pdk_error **err)
{
	_cleanup_free_ char *tmp = pdk_xasprintf("%s.new", d->socket_path);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	mode_t old;
	int fd, rc;

	if (strlen(tmp) >= sizeof(sa.sun_path))
		return pdk_error_setx(err, ENAMETOOLONG, "socket path '%s' is too long",
				      d->socket_path);
	memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return pdk_error_set(err, errno, "socket");
	/* We hold the state lock: a socket left at the path is a dead daemon's. */
	(void)unlink(tmp);
	/* SECURITY: the socket is 0600 from its creation (umask), not chmod'ed afterwards. */
	old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0) {
		rc = pdk_error_set(err, errno, "bind '%s'", tmp);
		(void)close(fd);
		return rc;
	}
	d->http_unix = http_new(d, on_unix_request);
	if (bind_fd(d, d->http_unix, fd, err) < 0)
		return -EIO;
	/*
	 * Bound and listening under a temporary name, then renamed: a client that
	 * sees the path can connect (no window between bind and listen).
	 */
	if (rename(tmp, d->socket_path) < 0)
		return pdk_error_set(err, errno, "rename '%s' to '%s'", tmp, d->socket_path);
	return 0;
}

static int listen_tcp(struct pdk_daemon *d, const char *spec, struct pdk_error **err)
{
	_cleanup_free_ char *host = NULL;
	const char *colon = strrchr(spec, ':');
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	uint64_t port;
	int fd, one = 1;
	socklen_t len;

	if (colon == NULL || pdk_parse_u64(colon + 1, 65535, &port) < 0)
		return pdk_error_setx(err, EINVAL, "--listen wants HOST:PORT, not '%s'", spec);
	host = strndup(spec, (size_t)(colon - spec));
	if (host == NULL)
		pdk_oom();
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		len = sizeof(*in4);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		len = sizeof(*in6);
	} else {
		return pdk_error_setx(err, EINVAL, "--listen wants a numeric address, not '%s'",
				      host);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return pdk_error_set(err, errno, "socket");
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		int e = errno;

		(void)close(fd);
		return pdk_error_set(err, e, "bind %s", spec);
	}
	d->http_tcp = http_new(d, on_tcp_request);
	return bind_fd(d, d->http_tcp, fd, err);
}

/* ---- signals and the tick ---- */

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct pdk_daemon *d = arg;

	(void)sig;
	(void)what;
	event_base_loopbreak(d->base);
}

static void on_child(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	(void)arg;
	/* Supervisors this daemon started: reaped whenever they end (they report on their socket).
	 */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_daemon *d = arg;

	(void)fd;
	(void)what;
	if (d->stopping)
		return;
	pdk_ctl_tick(d->ctl);
	pdk_api_tick(d->api);
}

static struct event *add_signal(struct pdk_daemon *d, int sig, event_callback_fn fn)
{
	struct event *ev = evsignal_new(d->base, sig, fn, d);

	if (ev == NULL || event_add(ev, NULL) < 0)
		pdk_oom();
	return ev;
}

/* ---- start ---- */

static int start_pools(struct pdk_daemon *d, char **pools, struct pdk_error **err)
{
	for (size_t i = 0; pools != NULL && pools[i] != NULL; i++) {
		_cleanup_free_ char *profile = pdk_xstrdup(pools[i]);
		char *eq = strchr(profile, '=');
		uint64_t n;

		if (eq == NULL || (*eq = '\0', !pdk_ctl_name_ok(profile)) ||
		    pdk_parse_u64(eq + 1, PDK_CTL_POOL_MAX, &n) < 0)
			return pdk_error_setx(err, EINVAL,
					      "--pool wants PROFILE=N (N up to %d), not '%s'",
					      PDK_CTL_POOL_MAX, pools[i]);
		if (pdk_ctl_pool_set(d->ctl, profile, n, err) < 0)
			return -EIO;
	}
	return 0;
}

static int open_ctl(struct pdk_daemon *d, const struct pdk_daemon_opts *o, struct pdk_error **err)
{
	struct pdk_ctl_opts co = {.base = d->base,
				  .state_dir = o->state_dir,
				  .run_dir = o->run_dir,
				  .retention_s = o->retention_s,
				  .envp = o->envp,
				  .log = o->log};

	if (pdk_ctl_new(&co, &d->ctl, err) < 0 || start_pools(d, o->pools, err) < 0)
		return -EIO;
	d->api = pdk_api_new(&(struct pdk_api_opts){
		.ctl = d->ctl, .base = d->base, .max_body = d->max_body, .uid = geteuid()});
	d->guards = pdk_http_guards_new(d->max_body);
	return 0;
}

static int start(struct pdk_daemon *d, const struct pdk_daemon_opts *o, struct pdk_error **err)
{
	d->base = event_base_new();
	if (d->base == NULL)
		return pdk_error_setx(err, EIO, "cannot create the event loop");
	d->socket_path = o->socket_path ? pdk_xstrdup(o->socket_path)
					: pdk_xasprintf("%s/paddock.sock", o->run_dir);
	if (open_ctl(d, o, err) < 0)
		return -EIO;
	if (listen_unix(d, err) < 0 || (o->listen != NULL && listen_tcp(d, o->listen, err) < 0))
		return -EIO;
	(void)signal(SIGPIPE, SIG_IGN);
	d->sig_term = add_signal(d, SIGTERM, on_stop);
	d->sig_int = add_signal(d, SIGINT, on_stop);
	d->sig_chld = add_signal(d, SIGCHLD, on_child);
	d->tick = event_new(d->base, -1, EV_PERSIST, on_tick, d);
	if (d->tick == NULL || event_add(d->tick, &(struct timeval){1, 0}) < 0)
		pdk_oom();
	pdk_ctl_start(d->ctl);
	pdk_ctl_event(d->ctl, "daemon", NULL, "daemon.start",
		      json_pack("{s:i, s:s, s:s?}", "pid", (int)getpid(), "socket", d->socket_path,
				"listen", o->listen));
	return 0;
}

/* ---- stop ---- */

static void free_listeners(struct pdk_daemon *d)
{
	struct event *evs[] = {d->sig_term, d->sig_int, d->sig_chld, d->tick};

	if (d->http_unix != NULL)
		evhttp_free(d->http_unix);
	if (d->http_tcp != NULL)
		evhttp_free(d->http_tcp);
	if (d->socket_path != NULL && d->http_unix != NULL)
		(void)unlink(d->socket_path);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(evs); i++)
		if (evs[i] != NULL)
			event_free(evs[i]);
}

static void stop(struct pdk_daemon *d)
{
	d->stopping = true;
	if (d->ctl != NULL) {
		/* --kill-on-exit: destroy every sandbox and wait (bounded) for the supervisors. */
		pdk_ctl_shutdown(d->ctl, d->kill_on_exit, SHUTDOWN_WAIT_S);
		pdk_ctl_event(d->ctl, "daemon", NULL, "daemon.stop",
			      json_pack("{s:b}", "kill_on_exit", d->kill_on_exit));
	}
	if (d->api != NULL)
		pdk_api_close(d->api);
	/* Supervisors keep running: only our ends of their sockets close. */
	pdk_ctl_free(d->ctl);
	free_listeners(d);
	pdk_api_free(d->api);
	/* A connection's filter may be finalised only with the loop: the guards outlive it. */
	if (d->base != NULL)
		event_base_free(d->base);
	if (d->guards != NULL)
		pdk_http_guards_free(d->guards);
	free(d->socket_path);
}

int pdk_daemon_serve(const struct pdk_daemon_opts *o, struct pdk_error **err)
{
	struct pdk_daemon d = {.log = o->log,
			       .max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY,
			       .kill_on_exit = o->kill_on_exit};
	int rc = start(&d, o, err);

	if (rc == 0) {
		pdk_log(d.log, PDK_LOG_INFO, "listening on %s%s%s (state %s)", d.socket_path,
			o->listen ? " and tcp " : "", o->listen ? o->listen : "", o->state_dir);
		if (event_base_dispatch(d.base) < 0)
			rc = pdk_error_setx(err, EIO, "the event loop failed");
	}
	stop(&d);
	return rc;
}
