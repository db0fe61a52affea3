/*
 * serve.c - `paddock serve`: the loop, the control object, the listeners
 * and the API behind them, signals, the tick, shutdown (docs/daemon.md).
 */
#include "common.h"
#include "api.h"
#include "base.h"
#include "control.h"
#include "daemon.h"
#include "dashboard.h"
#include "e2b.h"
#include "http.h"
#include "mcp.h"

#include <arpa/inet.h>
#include <event2/listener.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY (64ULL << 20)
#define SHUTDOWN_WAIT_S  10
/* Log lines at once, and a second after that (base/log.h, the rate-limited sink). */
#define LOG_BURST 100
#define LOG_PER_S 5

/* The daemon's process-wide state: what it runs, and what it listens with. */
struct pdk_daemon {
	struct event_base *base;
	struct pdk_ctl *ctl;
	struct pdk_api *api;
	struct pdk_mcp *mcp;           /* the MCP server on /mcp (docs/mcp.md) */
	struct pdk_mcp_http *mcp_http; /* its Streamable HTTP endpoint */
	struct pdk_e2b *e2b;           /* E2B's SDKs, on the TCP listener */
	const char *e2b_domain;        /* its sandbox domain, or NULL (borrowed) */
	struct pdk_http_guards *guards_unix, *guards_tcp;
	struct evhttp *http_unix, *http_tcp;
	struct event *sig_term, *sig_int, *sig_chld, *tick;
	/* SECURITY: every line the daemon writes goes through the rate limit (base/log.h). */
	struct pdk_log_limit log_limit;
	const struct pdk_log *log; /* &log_limit.log */
	char *socket_path;
	uint64_t max_body;
	struct pdk_http_limits lim_unix, lim_tcp;
	bool kill_on_exit;
	bool stopping; /* shutdown: no tick work */
};

/* ---- listeners ---- */

static void on_request(struct pdk_daemon *d, struct evhttp_request *req, bool unix_peer)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	bool to_sandbox;

	if (pdk_http_guard_answer(unix_peer ? d->guards_unix : d->guards_tcp, req))
		return; /* a request the guard refused: answered before authentication */
	/* A request addressed to a sandbox (E2B's envd, or a port by its host) is its own. */
	to_sandbox = !unix_peer && pdk_e2b_addressed(d->e2b, req);
	/*
	 * The dashboard's files, on both listeners, before E2B's control plane
	 * (which takes every path outside /v1/) and unauthenticated: they hold no
	 * data (dashboard.h). A request addressed to a sandbox (its envd, or a
	 * port by its PORT-ID.DOMAIN host) stays E2B's, whatever its path.
	 */
	if (!to_sandbox && pdk_dashboard_wants(req)) {
		pdk_dashboard_handle(req);
		return;
	}
	/* The MCP endpoint: the API's admins, as the API authenticates them. */
	if (!to_sandbox && path != NULL && strcmp(path, "/mcp") == 0) {
		if (pdk_api_admin(d->api, req, unix_peer))
			pdk_mcp_http_handle(d->mcp_http, req, "admin");
		return;
	}
	/*
	 * One TCP listener serves both front doors: E2B's SDKs address envd with
	 * E2b-Sandbox-Id and its control plane outside /v1/ (e2b.h).
	 */
	if (!unix_peer && pdk_e2b_wants(d->e2b, req))
		pdk_e2b_handle(d->e2b, req);
	else
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
	 * The guard (http/, installed with the listener) refuses oversized and
	 * malformed requests with the JSON error before evhttp sees them;
	 * evhttp's own limits stay as a second line, never reached by what the
	 * guard passes on.
	 */
	evhttp_set_max_body_size(h, (ev_ssize_t)d->max_body);
	evhttp_set_max_headers_size(h, PDK_HTTP_HEADERS_MAX);
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
					      EVHTTP_REQ_DELETE);
	evhttp_set_gencb(h, cb, d);
	return h;
}

/* The guards' hook before an answer is written: the records of its request are stored. */
static void store_records(void *arg)
{
	pdk_ctl_events_store(arg);
}

/* Serve `h` on the socket `fd` (taken), through the guards `gs` (their own budget). */
static int bind_fd(struct pdk_daemon *d, struct evhttp *h, struct pdk_http_guards *gs, int fd,
		   struct pdk_error **err)
{
	/* SECURITY: every answer is written after the audit records made before it are stored. */
	pdk_http_guards_before_write(gs, store_records, d->ctl);
	return pdk_http_serve_fd(d->base, h, gs, fd, err);
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
	if (bind_fd(d, d->http_unix, d->guards_unix, fd, err) < 0)
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
	int fd = pdk_http_bind_tcp(spec, NULL, err);

	if (fd < 0)
		return fd;
	d->http_tcp = http_new(d, on_tcp_request);
	d->guards_tcp = pdk_http_guards_new(d->base, &d->lim_tcp);
	return bind_fd(d, d->http_tcp, d->guards_tcp, fd, err);
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
	pdk_log_limit_flush(&d->log_limit);
	if (d->stopping)
		return;
	pdk_ctl_tick(d->ctl);
	pdk_api_tick(d->api);
	pdk_mcp_http_tick(d->mcp_http);
	pdk_e2b_tick(d->e2b);
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
				  .exec_starts = o->exec_starts,
				  .envp = o->envp,
				  .log = d->log};

	if (pdk_ctl_new(&co, &d->ctl, err) < 0 || start_pools(d, o->pools, err) < 0)
		return -EIO;
	/* Made before the API, which keeps its peers' checks on their connections there. */
	d->guards_unix = pdk_http_guards_new(d->base, &d->lim_unix);
	d->api = pdk_api_new(&(struct pdk_api_opts){.ctl = d->ctl,
						    .base = d->base,
						    .max_body = d->max_body,
						    .uid = geteuid(),
						    .unix_guards = d->guards_unix});
	d->mcp = pdk_mcp_new(&(struct pdk_mcp_opts){.ctl = d->ctl, .base = d->base, .log = d->log});
	/* Every caller of /mcp brings credentials (the API's): Origin is checked, Host not. */
	d->mcp_http = pdk_mcp_http_new(d->mcp, &(struct pdk_mcp_http_opts){.check_host = false});
	d->e2b = pdk_e2b_new(&(struct pdk_e2b_opts){.ctl = d->ctl,
						    .base = d->base,
						    .max_body = d->max_body,
						    .domain = d->e2b_domain,
						    .log = d->log});
	return 0;
}

/* ---- the connection budget ---- */

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/*
 * SECURITY: a listener holds at most its cap + PDK_HTTP_CONN_SLACK
 * descriptors. The TCP listener gets at most half of RLIMIT_NOFILE and the
 * unix socket an eighth, so that a flood of TCP connections leaves the
 * unix socket (local admins), the supervisors' sockets and the stores
 * descriptors of their own. A unix connection holds two: its socket, and
 * its peer's pidfd, kept from its first request (base/peer.h).
 */
static int plan_tcp(struct pdk_daemon *d, const struct pdk_daemon_opts *o, uint64_t nofile,
		    struct pdk_error **err)
{
	uint64_t room = nofile / 2 > PDK_HTTP_CONN_SLACK ? nofile / 2 - PDK_HTTP_CONN_SLACK : 0;
	uint64_t want = o->max_conns ? o->max_conns : PDK_DAEMON_MAX_CONNS;

	if (o->max_conns > room)
		return pdk_error_setx(
			err, EMFILE,
			"--max-conns %u needs more descriptors than half of the "
			"descriptor limit (RLIMIT_NOFILE %llu) allows: at most %llu; lower "
			"it, or raise the limit (ulimit -n, systemd LimitNOFILE=)",
			o->max_conns, (unsigned long long)nofile, (unsigned long long)room);
	if (room < 8)
		return pdk_error_setx(
			err, EMFILE,
			"the descriptor limit (RLIMIT_NOFILE %llu) is too small to serve "
			"--listen: raise it (ulimit -n) to at least %d",
			(unsigned long long)nofile, 2 * (PDK_HTTP_CONN_SLACK + 8));
	if (want > room)
		pdk_log(d->log, PDK_LOG_INFO,
			"at most %llu TCP connections at once (half of RLIMIT_NOFILE %llu; "
			"--max-conns, ulimit -n)",
			(unsigned long long)room, (unsigned long long)nofile);
	d->lim_tcp = (struct pdk_http_limits){
		.max_body = d->max_body,
		.max_conns = (unsigned)min_u64(want, room),
		.max_per_peer = o->max_per_peer ? o->max_per_peer : PDK_DAEMON_MAX_PER_PEER,
		.head_timeout_ms =
			o->head_timeout_ms ? o->head_timeout_ms : PDK_DAEMON_HEAD_TIMEOUT_MS,
		.max_conns_flag = "--max-conns",
		.max_per_peer_flag = "--max-conns-per-peer",
		.head_timeout_flag = "--header-timeout",
		.name = o->listen,
		.log = d->log};
	return 0;
}

static int plan_budget(struct pdk_daemon *d, const struct pdk_daemon_opts *o,
		       struct pdk_error **err)
{
	struct rlimit rl;
	uint64_t nofile;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return pdk_error_set(err, errno, "getrlimit RLIMIT_NOFILE");
	nofile = rl.rlim_cur == RLIM_INFINITY ? (1ULL << 20) : (uint64_t)rl.rlim_cur;
	d->lim_unix = (struct pdk_http_limits){
		.max_body = d->max_body,
		.max_conns =
			(unsigned)(nofile / 16 < 4 ? 4
						   : min_u64(PDK_DAEMON_UNIX_CONNS, nofile / 16)),
		.head_timeout_ms =
			o->head_timeout_ms ? o->head_timeout_ms : PDK_DAEMON_HEAD_TIMEOUT_MS,
		.head_timeout_flag = "--header-timeout",
		.name = d->socket_path,
		.log = d->log};
	return o->listen != NULL ? plan_tcp(d, o, nofile, err) : 0;
}

/*
 * libevent's own messages come through one process-wide callback that takes
 * no argument: the sink it writes to is kept here while a daemon runs. A
 * mutable file-scope variable, against the rule, because libevent leaves no
 * other way; it is set before the loop runs and cleared after it ends.
 */
static const struct pdk_log *libevent_sink;

static void libevent_log(int severity, const char *msg)
{
	/* SECURITY: through the daemon's rate limit, like every other line. */
	pdk_log(libevent_sink,
		severity >= EVENT_LOG_ERR    ? PDK_LOG_ERROR
		: severity >= EVENT_LOG_WARN ? PDK_LOG_WARN
					     : PDK_LOG_INFO,
		"libevent: %s", msg);
}

static int start(struct pdk_daemon *d, const struct pdk_daemon_opts *o, struct pdk_error **err)
{
	libevent_sink = d->log;
	event_set_log_callback(libevent_log);
	d->base = event_base_new();
	if (d->base == NULL)
		return pdk_error_setx(err, EIO, "cannot create the event loop");
	d->socket_path = o->socket_path ? pdk_xstrdup(o->socket_path)
					: pdk_xasprintf("%s/paddock.sock", o->run_dir);
	if (plan_budget(d, o, err) < 0 || open_ctl(d, o, err) < 0)
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
	/* MCP sessions end: their commands are killed; their sandboxes' fate is the daemon's. */
	pdk_mcp_http_free(d->mcp_http);
	d->mcp_http = NULL;
	if (d->e2b != NULL)
		pdk_e2b_close(d->e2b);
	/* Before the listeners and the loop: the guards' timers and lingering sockets go first. */
	pdk_http_guards_stop(d->guards_unix);
	pdk_http_guards_stop(d->guards_tcp);
	/* Supervisors keep running: only our ends of their sockets close. */
	pdk_ctl_free(d->ctl);
	free_listeners(d);
	pdk_api_free(d->api);
	pdk_mcp_free(d->mcp);
	/* After the control object: its last callbacks (ENOTCONN) finish the E2B calls. */
	pdk_e2b_free(d->e2b);
	/* A connection's filter may be finalised only with the loop: the guards outlive it. */
	if (d->base != NULL)
		event_base_free(d->base);
	pdk_http_guards_free(d->guards_unix);
	pdk_http_guards_free(d->guards_tcp);
	free(d->socket_path);
	libevent_sink = NULL;
}

int pdk_daemon_serve(const struct pdk_daemon_opts *o, struct pdk_error **err)
{
	struct pdk_daemon d = {.max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY,
			       .kill_on_exit = o->kill_on_exit,
			       .e2b_domain = o->e2b_domain};
	int rc;

	pdk_log_limit_init(&d.log_limit, o->log, LOG_BURST, LOG_PER_S);
	d.log = &d.log_limit.log;
	rc = start(&d, o, err);
	if (rc == 0) {
		pdk_log(d.log, PDK_LOG_INFO, "listening on %s%s%s (state %s)", d.socket_path,
			o->listen ? " and tcp " : "", o->listen ? o->listen : "", o->state_dir);
		if (o->listen != NULL)
			pdk_log(d.log, PDK_LOG_INFO, "dashboard: http://%s/ui/", o->listen);
		if (event_base_dispatch(d.base) < 0)
			rc = pdk_error_setx(err, EIO, "the event loop failed");
	}
	stop(&d);
	return rc;
}
