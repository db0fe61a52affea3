/*
 * serve.c - `paddock serve`: set up the loop, the listeners, the store,
 * re-adopt the sandboxes, run, shut down (docs/daemon.md).
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "daemon-internal.h"
#include "guard.h"

#include <arpa/inet.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY (64ULL << 20)
#define KEEPALIVE_TICKS  15
#define SHUTDOWN_WAIT_S  10

void pdk__sse_keepalive(struct pdk_daemon *d);

/* ---- listeners ---- */

static void on_unix_request(struct evhttp_request *req, void *arg)
{
	pdk__http_handle(arg, req, true);
}

static void on_tcp_request(struct evhttp_request *req, void *arg)
{
	pdk__http_handle(arg, req, false);
}

static struct evhttp *http_new(struct pdk_daemon *d, void (*cb)(struct evhttp_request *, void *))
{
	struct evhttp *h = evhttp_new(d->base);

	if (h == NULL)
		pdk_oom();
	/*
	 * The guard (guard.c) refuses oversized and malformed requests with the
	 * JSON error before evhttp sees them; evhttp's own limits stay as a
	 * second line, never reached by what the guard passes on.
	 */
	pdk__guard_install(h, d);
	evhttp_set_max_body_size(h, (ev_ssize_t)d->max_body);
	evhttp_set_max_headers_size(h, PDK_GUARD_HEADERS_MAX);
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
	static unsigned ticks;

	(void)fd;
	(void)what;
	if (d->stopping)
		return;
	pdk__sb_tick(d);
	pdk__pools_tick(d);
	pdk__daemon_fanout(d); /* records other writers (paddock run) appended */
	if (++ticks % KEEPALIVE_TICKS == 0)
		pdk__sse_keepalive(d);
}

static struct event *add_signal(struct pdk_daemon *d, int sig, event_callback_fn fn)
{
	struct event *ev = evsignal_new(d->base, sig, fn, d);

	if (ev == NULL || event_add(ev, NULL) < 0)
		pdk_oom();
	return ev;
}

/* ---- start ---- */

static int take_lock(struct pdk_daemon *d, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/daemon.lock", d->state_dir);
	char pid[24];

	d->lock_fd =
		TEMP_FAILURE_RETRY(open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
	if (d->lock_fd < 0)
		return pdk_error_set(err, errno, "cannot open '%s'", path);
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		_cleanup_free_ char *other = NULL;

		if (pdk_read_file_at(AT_FDCWD, path, 32, &other, NULL) == 0)
			other[strcspn(other, "\n")] = '\0';
		return pdk_error_setx(err, EBUSY,
				      "another paddock serve (pid %s) serves state directory '%s'",
				      other ? other : "?", d->state_dir);
	}
	(void)snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(d->lock_fd, 0) < 0 || pdk_write_all(d->lock_fd, pid, strlen(pid)) < 0)
		return pdk_error_set(err, errno, "cannot write '%s'", path);
	return 0;
}

static int open_state(struct pdk_daemon *d, const struct pdk_daemon_opts *o, struct pdk_error **err)
{
	_cleanup_free_ char *sbdir = NULL;
	int rc;

	d->state_dir = pdk_xstrdup(o->state_dir);
	d->run_dir = pdk_xstrdup(o->run_dir);
	d->socket_path = o->socket_path ? pdk_xstrdup(o->socket_path)
					: pdk_xasprintf("%s/paddock.sock", d->run_dir);
	sbdir = pdk_xasprintf("%s/sb", d->run_dir);
	if (pdk_mkdir_p(d->state_dir, err) < 0 || pdk_mkdir_p(sbdir, err) < 0)
		return -EIO;
	/* SECURITY: RUNDIR holds the control sockets: only the daemon's user may enter it. */
	if (chmod(d->run_dir, 0700) < 0 || chmod(sbdir, 0700) < 0)
		return pdk_error_set(err, errno, "chmod '%s'", d->run_dir);
	rc = take_lock(d, err);
	if (rc == 0)
		rc = pdk_store_open(d->state_dir, &d->store, err);
	if (rc == 0)
		rc = pdk_token_key_load(d->state_dir, d->key, err);
	if (rc == 0)
		rc = pdk_audit_open(d->state_dir, &d->audit, err);
	return rc;
}

static int start_pools(struct pdk_daemon *d, char **pools, struct pdk_error **err)
{
	for (size_t i = 0; pools != NULL && pools[i] != NULL; i++) {
		_cleanup_free_ char *profile = pdk_xstrdup(pools[i]);
		char *eq = strchr(profile, '=');
		uint64_t n;

		if (eq == NULL || (*eq = '\0', !pdk_req_name_ok(profile)) ||
		    pdk_parse_u64(eq + 1, PDK_REQ_POOL_MAX, &n) < 0)
			return pdk_error_setx(err, EINVAL,
					      "--pool wants PROFILE=N (N up to %d), not '%s'",
					      PDK_REQ_POOL_MAX, pools[i]);
		if (pdk_store_pool_set(d->store, profile, n, err) < 0)
			return -EIO;
	}
	return 0;
}

static int start(struct pdk_daemon *d, const struct pdk_daemon_opts *o, struct pdk_error **err)
{
	int fd = TEMP_FAILURE_RETRY(open("/proc/self/exe", O_RDONLY | O_CLOEXEC));

	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open /proc/self/exe");
	/* Above 4: a supervisor's fds 3 and 4 are its spec and ready pipe (spawn in sandboxes.c).
	 */
	d->exe_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	(void)close(fd);
	if (d->exe_fd < 0)
		return pdk_error_set(err, errno, "cannot keep /proc/self/exe open");
	if (open_state(d, o, err) < 0 || start_pools(d, o->pools, err) < 0)
		return -EIO;
	d->base = event_base_new();
	if (d->base == NULL)
		return pdk_error_setx(err, EIO, "cannot create the event loop");
	if (listen_unix(d, err) < 0 || (o->listen != NULL && listen_tcp(d, o->listen, err) < 0))
		return -EIO;
	(void)signal(SIGPIPE, SIG_IGN);
	d->sig_term = add_signal(d, SIGTERM, on_stop);
	d->sig_int = add_signal(d, SIGINT, on_stop);
	d->sig_chld = add_signal(d, SIGCHLD, on_child);
	d->tick = event_new(d->base, -1, EV_PERSIST, on_tick, d);
	if (d->tick == NULL || event_add(d->tick, &(struct timeval){1, 0}) < 0)
		pdk_oom();
	pdk__daemon_fanout(d);
	pdk__sb_adopt_all(d);
	pdk__daemon_event(d, "daemon", NULL, "daemon.start",
			  json_pack("{s:i, s:s, s:s?}", "pid", (int)getpid(), "socket",
				    d->socket_path, "listen", o->listen));
	return 0;
}

/* ---- stop ---- */

static void stop(struct pdk_daemon *d)
{
	d->stopping = true;
	if (d->base != NULL && d->kill_on_exit) {
		/* Destroy every sandbox and wait (bounded) for the supervisors to answer. */
		uint64_t deadline = pdk_now_mono_ns() + SHUTDOWN_WAIT_S * 1000000000ULL;
		struct pdk_sb *next;

		for (struct pdk_sb *sb = d->sandboxes; sb != NULL; sb = next) {
			next = sb->next;
			pdk__sb_destroy(sb, "daemon_exit", NULL);
		}
		while (d->sandboxes != NULL && pdk_now_mono_ns() < deadline)
			(void)event_base_loop(d->base, EVLOOP_ONCE);
	}
	if (d->base != NULL && d->audit != NULL)
		pdk__daemon_event(d, "daemon", NULL, "daemon.stop",
				  json_pack("{s:b}", "kill_on_exit", d->kill_on_exit));
	pdk__sse_close_all(d);
	/* Supervisors keep running: only our ends of their sockets close. */
	pdk__sb_free_all(d);
	if (d->http_unix != NULL)
		evhttp_free(d->http_unix);
	if (d->http_tcp != NULL)
		evhttp_free(d->http_tcp);
	if (d->socket_path != NULL && d->http_unix != NULL)
		(void)unlink(d->socket_path);
	{
		struct event *evs[] = {d->sig_term, d->sig_int, d->sig_chld, d->tick, d->refill};

		for (size_t i = 0; i < PDK_ARRAY_SIZE(evs); i++)
			if (evs[i] != NULL)
				event_free(evs[i]);
	}
	if (d->base != NULL)
		event_base_free(d->base);
	if (d->audit != NULL) {
		_cleanup_error_ struct pdk_error *err = NULL;

		if (pdk_audit_checkpoint(d->audit, &err) < 0)
			fprintf(stderr, "paddock serve: audit checkpoint: %s\n", err->msg);
		pdk_audit_free(d->audit);
	}
	pdk_store_free(d->store);
	if (d->lock_fd >= 0)
		(void)close(d->lock_fd);
	if (d->exe_fd >= 0)
		(void)close(d->exe_fd);
	free(d->state_dir);
	free(d->run_dir);
	free(d->socket_path);
}

int pdk_daemon_serve(const struct pdk_daemon_opts *o, struct pdk_error **err)
{
	struct pdk_daemon d = {.exe_fd = -1,
			       .lock_fd = -1,
			       .uid = geteuid(),
			       .max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY,
			       .retention_ns = o->retention_s * 1000000000ULL,
			       .kill_on_exit = o->kill_on_exit,
			       .quiet = o->quiet};
	int rc = start(&d, o, err);

	if (rc == 0) {
		if (!d.quiet)
			fprintf(stderr, "paddock serve: listening on %s%s%s (state %s)\n",
				d.socket_path, o->listen ? " and tcp " : "",
				o->listen ? o->listen : "", d.state_dir);
		if (event_base_dispatch(d.base) < 0)
			rc = pdk_error_setx(err, EIO, "the event loop failed");
	}
	stop(&d);
	return rc;
}
