/*
 * egress.c - the allowlist proxy: a libevent loop in a thread of its own,
 * outside the sandbox, accepting on the listening socket the sandbox's
 * child opened in the sandbox's network namespace.
 *
 * This file holds the proxy itself: its start and stop, the loop's thread,
 * accepting connections and freeing them, the answers that end them, the
 * budgets, and the events, which fail closed. What happens to a request
 * after it was accepted is in the other files (egress-internal.h lists
 * them). Only the loop's thread touches a connection; pdk_egress_stop()
 * wakes the loop through a pipe. docs/internals/egress.md explains the
 * choices.
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MAX_CLIENTS     256 /* connections from the sandbox at once; more wait in the backlog */
#define ACCEPT_PAUSE_MS 100 /* after an accept() error (EMFILE): wait, do not spin */

/* ---- events ---- */

/*
 * SECURITY: fail closed. Everywhere else in paddock an event that cannot
 * be recorded stops the sandbox (engine/sandbox.c, emit()); the proxy runs
 * in a thread of its own, so it cannot stop the sandbox itself. It keeps
 * the first failure, wakes its owner through failed_fd (who stops the
 * sandbox), and tells the caller, who refuses what the event was about.
 */
bool pdk__egress_emit(struct pdk_egress *e, const char *kind, json_t *attrs)
{
	struct pdk_error *err = NULL;
	uint64_t one = 1;

	if (pdk_events_emit(e->cfg.events, kind, 0, attrs, &err) == 0)
		return true;
	if (!__atomic_load_n(&e->events_failed, __ATOMIC_ACQUIRE)) {
		e->events_err = steal_ptr(&err);
		__atomic_store_n(&e->events_failed, true, __ATOMIC_RELEASE);
		/* An eventfd written once cannot overflow: this write does not fail. */
		(void)!write(e->failed_fd, &one, sizeof(one));
	}
	pdk_error_free(&err);
	return false;
}

bool pdk__egress_emit_limit(struct pdk_egress *e, const char *limit, uint64_t value)
{
	json_t *a = json_object();

	pdk_json_set(a, "limit", json_string(limit));
	pdk_json_set(a, "value", json_integer((json_int_t)value));
	return pdk__egress_emit(e, "limit.exceeded", a);
}

bool pdk__egress_emit_connect(struct pdk__egress_conn *c, bool allow, int status,
			      const char *reason)
{
	const struct pdk__egress_head *h = &c->head;
	json_t *a;

	if (c->event_done)
		return true;
	c->event_done = true;
	a = json_object();
	pdk_json_set(a, "method", json_string(http_method_str((enum http_method)h->p.method)));
	pdk_json_set(a, "host", h->host ? json_string(h->host) : json_null());
	pdk_json_set(a, "port", json_integer(h->port));
	pdk_json_set(a, "address", c->addr[0] ? json_string(c->addr) : json_null());
	pdk_json_set(a, "decision", json_string(allow ? "allow" : "deny"));
	pdk_json_set(a, "rule", c->rule ? json_string(c->rule->text) : json_null());
	if (c->intercept)
		pdk_json_set(a, "intercepted", json_true());
	if (reason != NULL)
		pdk_json_set(a, "reason", json_string(reason));
	if (status)
		pdk_json_set(a, "status", json_integer(status));
	if (allow && !h->connect && c->addr[0])
		pdk_json_set(a, "upstream_reused", json_boolean(c->reused));
	if (c->retried)
		pdk_json_set(a, "retried", json_true());
	pdk_json_set(a, "bytes_sent", json_integer((json_int_t)c->sent));
	pdk_json_set(a, "bytes_received", json_integer((json_int_t)c->received));
	pdk_json_set(a, "duration_ms", json_real((double)(pdk_now_mono_ns() - c->t_start) / 1e6));
	return pdk__egress_emit(c->e, "net.connect", a);
}

void pdk__egress_unrecorded(struct pdk__egress_conn *c)
{
	pdk__egress_answer(c, false, 503,
			   "events cannot be recorded: the request is refused and the sandbox "
			   "is being stopped");
}

/* SECURITY: after an event could not be recorded, nothing more goes out. */
bool pdk__egress_recording(struct pdk__egress_conn *c)
{
	if (!c->e->events_failed)
		return true;
	pdk__egress_unrecorded(c);
	return false;
}

/* ---- the rules, and those added live ---- */

/*
 * The configuration's rules are read without a lock: they do not change
 * while the proxy runs. The live ones are few (a human approved each), so
 * they are matched one by one under the lock.
 */
const struct pdk_net_rule *pdk__egress_match_host(struct pdk_egress *e, const char *host,
						  uint16_t port)
{
	const struct pdk_net_rule *r = pdk_net_match_host(e->cfg.rules, e->cfg.n_rules, host, port);

	(void)pthread_mutex_lock(&e->live_lock);
	for (size_t i = 0; r == NULL && i < e->n_live; i++)
		r = pdk_net_match_host(e->live[i], 1, host, port);
	(void)pthread_mutex_unlock(&e->live_lock);
	return r;
}

const struct pdk_net_rule *pdk__egress_match_addr(struct pdk_egress *e, const struct sockaddr *sa,
						  uint16_t port)
{
	const struct pdk_net_rule *r = pdk_net_match_addr(e->cfg.rules, e->cfg.n_rules, sa, port);

	(void)pthread_mutex_lock(&e->live_lock);
	for (size_t i = 0; r == NULL && i < e->n_live; i++)
		r = pdk_net_match_addr(e->live[i], 1, sa, port);
	(void)pthread_mutex_unlock(&e->live_lock);
	return r;
}

bool pdk_egress_allows_host(struct pdk_egress *e, const char *host, uint16_t port)
{
	return e != NULL && pdk__egress_match_host(e, host, port) != NULL;
}

void pdk_egress_allow(struct pdk_egress *e, struct pdk_net_rule *r)
{
	struct pdk_net_rule *mine = pdk_xmalloc(sizeof(*mine));

	*mine = *r;
	memset(r, 0, sizeof(*r));
	(void)pthread_mutex_lock(&e->live_lock);
	e->live = pdk_xrealloc(e->live, (e->n_live + 1) * sizeof(*e->live));
	e->live[e->n_live++] = mine;
	(void)pthread_mutex_unlock(&e->live_lock);
}

static void live_free(struct pdk_egress *e)
{
	for (size_t i = 0; i < e->n_live; i++) {
		pdk_net_rule_release(e->live[i]);
		free(e->live[i]);
	}
	free(e->live);
	(void)pthread_mutex_destroy(&e->live_lock);
}

/* ---- answers and closing ---- */

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 405:
		return "Method Not Allowed";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	default:
		return "Error";
	}
}

void pdk__egress_close_up(struct pdk__egress_conn *c)
{
	if (c->up != NULL)
		bufferevent_free(c->up);
	c->up = NULL;
	free(steal_ptr(&c->up_host));
	if (c->counted)
		c->e->open_upstream--;
	c->counted = false;
}

static void drained(struct bufferevent *bev, void *arg)
{
	(void)bev;
	pdk__egress_conn_free(arg);
}

static void drain_failed(struct bufferevent *bev, short what, void *arg)
{
	(void)what;
	drained(bev, arg);
}

void pdk__egress_finish(struct pdk__egress_conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->client);

	c->state = PDK__EGRESS_ST_CLOSING;
	pdk__egress_close_up(c);
	bufferevent_disable(c->client, EV_READ);
	bufferevent_setwatermark(c->client, EV_WRITE, 0, 0); /* `drained` means empty */
	if (evbuffer_get_length(out) == 0) {
		pdk__egress_conn_free(c);
		return;
	}
	bufferevent_setcb(c->client, NULL, drained, drain_failed, c);
	bufferevent_enable(c->client, EV_WRITE);
}

/*
 * The reason as a status line's reason phrase (RFC 9112: tabs, spaces and
 * visible characters): what a client shows when it shows no body. Python's
 * "Tunnel connection failed: 403 ..." and pip print the phrase of a refused
 * CONNECT, never its body. Anything else becomes '?'; cut to fit `phrase`.
 */
static const char *phrase_text(const char *reason, char *phrase, size_t cap)
{
	size_t i = 0;

	for (; reason[i] != '\0' && i < cap - 1; i++) {
		unsigned char ch = (unsigned char)reason[i];

		phrase[i] = ch == '\t' || (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	phrase[i] = '\0';
	return phrase;
}

void pdk__egress_answer(struct pdk__egress_conn *c, bool allow, int status, const char *reason)
{
	_cleanup_free_ char *body = pdk_xasprintf("paddock egress: %s\n", reason);
	_cleanup_free_ char *msg = NULL;
	char phrase[401];

	/* An answer refuses or ends the request: recorded or not, it goes out. */
	(void)pdk__egress_emit_connect(c, allow, status, reason);
	msg = pdk_xasprintf("HTTP/1.1 %d %s%s%s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			    "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s",
			    status, status_text(status), status == 403 ? " by paddock: " : "",
			    status == 403 ? phrase_text(reason, phrase, sizeof(phrase)) : "",
			    strlen(body), status == 503 ? "Retry-After: 1\r\n" : "", body);
	pdk__egress_buf_add(bufferevent_get_output(c->client), msg, strlen(msg));
	pdk__egress_finish(c);
}

/* ---- budgets ---- */

bool pdk__egress_account(struct pdk__egress_conn *c, size_t n, bool up)
{
	struct pdk_egress *e = c->e;

	/* Only this thread writes it; pdk_egress_bytes() reads it from others. */
	__atomic_store_n(&e->bytes, e->bytes + n, __ATOMIC_RELAXED);
	if (up)
		c->sent += n;
	else
		c->received += n;
	if (e->cfg.max_bytes == 0 || e->bytes <= e->cfg.max_bytes)
		return true;
	pdk__egress_bytes_spent(e);
	return false;
}

void pdk__egress_bytes_spent(struct pdk_egress *e)
{
	/* The traffic is cut whether or not the event is recorded. */
	if (!e->bytes_exceeded)
		(void)pdk__egress_emit_limit(e, "egress_bytes", e->cfg.max_bytes);
	e->bytes_exceeded = true;
}

uint64_t pdk_egress_bytes(const struct pdk_egress *e)
{
	return e != NULL ? __atomic_load_n(&e->bytes, __ATOMIC_RELAXED) : 0;
}

size_t pdk__egress_budget_left(const struct pdk_egress *e)
{
	if (e->cfg.max_bytes == 0)
		return SIZE_MAX;
	if (e->bytes >= e->cfg.max_bytes)
		return 0;
	return e->cfg.max_bytes - e->bytes < SIZE_MAX ? (size_t)(e->cfg.max_bytes - e->bytes)
						      : SIZE_MAX;
}

const char *pdk__egress_budget_refusal(struct pdk_egress *e, bool reuse, const char **limit,
				       uint64_t *value)
{
	if (e->cfg.max_bytes && e->bytes >= e->cfg.max_bytes) {
		*limit = "egress_bytes";
		*value = e->cfg.max_bytes;
		return "the egress byte budget (limits.egress_bytes) is spent";
	}
	if (e->cfg.max_requests && e->requests >= e->cfg.max_requests) {
		*limit = "egress_requests";
		*value = e->cfg.max_requests;
		return "the request budget (limits.egress_requests) is spent";
	}
	if (!reuse && e->cfg.max_connections && e->open_upstream >= e->cfg.max_connections) {
		*limit = "egress_connections";
		*value = e->cfg.max_connections;
		return "too many connections at once (limits.egress_connections)";
	}
	return NULL;
}

/* ---- buffers and sockets ---- */

void pdk__egress_buf_add(struct evbuffer *buf, const void *data, size_t len)
{
	if (evbuffer_add(buf, data, len) < 0)
		pdk_oom();
}

void pdk__egress_buf_move(struct evbuffer *dst, struct evbuffer *src, size_t len)
{
	if (len > 0 && evbuffer_remove_buffer(src, dst, len) != (int)len)
		pdk_oom();
}

void pdk__egress_buf_drain(struct evbuffer *buf, size_t len)
{
	if (evbuffer_drain(buf, len) < 0)
		pdk_oom();
}

void pdk__egress_buf_copyout(struct evbuffer *buf, void *out, size_t len)
{
	if (len > 0 && evbuffer_copyout(buf, out, len) != (ev_ssize_t)len)
		pdk_oom();
}

void pdk__egress_buf_remove(struct evbuffer *buf, void *out, size_t len)
{
	if (len > 0 && evbuffer_remove(buf, out, len) != (int)len)
		pdk_oom();
}

const char *pdk__egress_buf_pullup(struct evbuffer *buf, size_t len)
{
	const unsigned char *p = evbuffer_pullup(buf, (ev_ssize_t)len);

	if (p == NULL && len > 0)
		pdk_oom();
	return (const char *)p;
}

int pdk__egress_take_fd(struct bufferevent **bev)
{
	int fd = bufferevent_getfd(*bev);

	if (bufferevent_setfd(*bev, -1) < 0)
		fd = -1; /* the bufferevent still owns it and closes it */
	bufferevent_free(*bev);
	*bev = NULL;
	return fd;
}

/*
 * A relay writes what it just read: Nagle's algorithm would hold a short
 * write (an answer's head) back until the peer's delayed ACK, 40 ms later.
 */
void pdk__egress_no_delay(struct bufferevent *bev)
{
	int one = 1;

	/* Best effort: without it the relay is slower, not less safe. */
	(void)setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- connections ---- */

static void unlink_conn(struct pdk__egress_conn *c)
{
	struct pdk_egress *e = c->e;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		e->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
}

void pdk__egress_conn_free(struct pdk__egress_conn *c)
{
	struct pdk_egress *e = c->e;

	if (c->dns != NULL)
		evdns_getaddrinfo_cancel(c->dns); /* calls resolved() with EAI_CANCEL */
	if (c->head.host != NULL && c->state != PDK__EGRESS_ST_HEAD &&
	    c->state != PDK__EGRESS_ST_BODY && c->state != PDK__EGRESS_ST_CLOSING)
		(void)pdk__egress_emit_connect(c, true, 0, "closed"); /* it ends either way */
	pdk__egress_close_up(c);
	if (c->tun != NULL)
		pdk__egress_tunnel_free(c->tun);
	if (c->client != NULL && c->intercept)
		pdk__egress_tls_close_notify(c->client);
	if (c->client != NULL)
		bufferevent_free(c->client);
	/* SECURITY: the sandbox cannot make the supervisor hold more than MAX_CLIENTS. */
	if (e->n_clients-- == MAX_CLIENTS && !e->listening && e->listener != NULL) {
		evconnlistener_enable(e->listener);
		e->listening = true;
	}
	unlink_conn(c);
	pdk__egress_head_release(&c->head);
	free(c->up_head);
	free(c->replay);
	pdk__egress_unhold(c);
	if (c->held != NULL)
		evbuffer_free(c->held);
	free(c->tunnel_host);
	free(c);
}

static void accepted(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		     void *arg)
{
	struct pdk_egress *e = arg;
	struct pdk__egress_conn *c = pdk_xcalloc(1, sizeof(*c));
	struct timeval head = {PDK__EGRESS_HEAD_TIMEOUT_S, 0};

	(void)l;
	(void)sa;
	(void)len;
	c->e = e;
	c->state = PDK__EGRESS_ST_HEAD;
	c->t_start = pdk_now_mono_ns();
	c->client = bufferevent_socket_new(e->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->held = evbuffer_new();
	if (c->client == NULL || c->held == NULL) {
		if (c->client != NULL)
			bufferevent_free(c->client);
		else
			(void)close(fd);
		if (c->held != NULL)
			evbuffer_free(c->held);
		free(c);
		return;
	}
	c->next = e->conns;
	if (e->conns != NULL)
		e->conns->prev = c;
	e->conns = c;
	if (++e->n_clients == MAX_CLIENTS) {
		evconnlistener_disable(e->listener);
		e->listening = false;
	}
	pdk__egress_no_delay(c->client);
	bufferevent_setcb(c->client, pdk__egress_client_read, NULL, pdk__egress_client_event, c);
	bufferevent_set_timeouts(c->client, &head, NULL);
	/*
	 * Reading only: enabling EV_WRITE with nothing to write costs two
	 * epoll_ctl() calls and a wakeup. Whatever writes to the client
	 * enables it (pdk__egress_finish(), pdk__egress_forward_start()); a
	 * tunnel writes itself.
	 */
	bufferevent_enable(c->client, EV_READ);
}

/* An accept() error (EMFILE, ENOBUFS): pause instead of spinning on a readable socket. */
static void accept_failed(struct evconnlistener *l, void *arg)
{
	struct pdk_egress *e = arg;
	struct timeval t = {0, ACCEPT_PAUSE_MS * 1000};

	evconnlistener_disable(l);
	e->listening = false;
	(void)event_add(e->resume, &t);
}

static void accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_egress *e = arg;

	(void)fd;
	(void)what;
	if (e->n_clients < MAX_CLIENTS && !e->listening) {
		evconnlistener_enable(e->listener);
		e->listening = true;
	}
}

/* ---- lifecycle ---- */

static void woken(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_egress *e = arg;

	(void)fd;
	(void)what;
	while (e->conns != NULL)
		pdk__egress_conn_free(e->conns);
	event_base_loopbreak(e->base);
}

static void *loop_main(void *arg)
{
	struct pdk_egress *e = arg;

	(void)event_base_dispatch(e->base);
	return NULL;
}

static void quiet_log(int severity, const char *msg)
{
	(void)severity;
	(void)msg; /* libevent's own warnings would go to the sandboxed command's stderr */
}

static int start_thread(struct pdk_egress *e, struct pdk_error **err)
{
	/* The loop's thread takes no signal: the supervisor's signalfd gets them all. */
	int rc = pdk_thread_start_quiet(&e->thread, NULL, loop_main, e);

	if (rc != 0)
		return pdk_error_set(err, rc, "cannot start the egress proxy thread");
	e->running = true;
	return 0;
}

/* The event loop, the listener on `listen_fd` (ownership taken), the wake-up pipe. */
static int setup_loop(struct pdk_egress *e, int listen_fd, struct pdk_error **err)
{
	_cleanup_close_ int fd = listen_fd;

	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		return pdk_error_set(err, errno, "egress listening socket");
	e->base = event_base_new();
	if (e->base == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot create the egress event loop");
	e->listener = evconnlistener_new(e->base, accepted, e, LEV_OPT_CLOSE_ON_FREE, -1, fd);
	if (e->listener == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot listen for the sandbox's connections");
	fd = -1; /* the listener owns it now */
	e->listening = true;
	evconnlistener_set_error_cb(e->listener, accept_failed);
	e->resume = evtimer_new(e->base, accept_resume, e);
	if (e->resume == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot create the egress accept timer");
	if (pipe2(e->wake_fd, O_CLOEXEC | O_NONBLOCK) < 0)
		return pdk_error_set(err, errno, "pipe");
	e->wake = event_new(e->base, e->wake_fd[0], EV_READ, woken, e);
	if (e->wake == NULL || event_add(e->wake, NULL) < 0)
		return pdk_error_setx(err, ENOMEM, "cannot create the egress wake-up event");
	e->failed_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->failed_fd < 0)
		return pdk_error_set(err, errno, "eventfd");
	return 0;
}

/* Interception needs a trust store for the proxy's own TLS clients. */
static int check_trust_store(struct pdk_egress *e, struct pdk_error **err)
{
	return e->cfg.ca != NULL ? pdk__egress_trust_store_check(e->cfg.ca_file, err) : 0;
}

/* The steps after the loop is made, in their order. */
static int (*const setup_steps[])(struct pdk_egress *e, struct pdk_error **err) = {
	pdk__egress_local_addrs_load, pdk__egress_hold_setup, pdk__egress_cred_setup,
	pdk__egress_dns_setup,        check_trust_store,      start_thread,
};

static int setup(struct pdk_egress *e, int listen_fd, struct pdk_error **err)
{
	int rc = setup_loop(e, listen_fd, err);

	for (size_t i = 0; rc == 0 && i < PDK_ARRAY_SIZE(setup_steps); i++)
		rc = setup_steps[i](e, err);
	return rc;
}

struct pdk_egress *pdk_egress_start(const struct pdk_egress_config *cfg, int listen_fd,
				    struct pdk_error **err)
{
	struct pdk_egress *e = pdk_xcalloc(1, sizeof(*e));

	event_set_log_callback(quiet_log);
	e->cfg = *cfg;
	e->wake_fd[0] = e->wake_fd[1] = e->failed_fd = -1;
	(void)pthread_mutex_init(&e->live_lock, NULL);
	if (setup(e, listen_fd, err) < 0) {
		pdk_egress_stop(e);
		(void)pdk_error_wrap(err, "egress proxy");
		return NULL;
	}
	return e;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
	*fd = -1;
}

void pdk_egress_stop(struct pdk_egress *e)
{
	if (e == NULL)
		return;
	if (e->running) {
		/* The loop frees every connection (each gets its event) and returns. */
		(void)!write(e->wake_fd[1], "x", 1);
		(void)pthread_join(e->thread, NULL);
	}
	while (e->conns != NULL)
		pdk__egress_conn_free(e->conns);
	if (e->wake != NULL)
		event_free(e->wake);
	if (e->resume != NULL)
		event_free(e->resume);
	if (e->listener != NULL)
		evconnlistener_free(e->listener);
	if (e->dns != NULL)
		evdns_base_free(e->dns, 1);
	if (e->base != NULL)
		event_base_free(e->base);
	close_fd(&e->wake_fd[0]);
	close_fd(&e->wake_fd[1]);
	close_fd(&e->failed_fd);
	pdk__egress_cred_free(e);
	pdk_egress_tls_ctx_free(e->tls_client);
	free(e->tls_error);
	pdk_error_free(&e->events_err);
	live_free(e);
	free(e);
}

int pdk_egress_fd(const struct pdk_egress *e)
{
	return e != NULL ? e->failed_fd : -1;
}

int pdk_egress_failed(struct pdk_egress *e, struct pdk_error **err)
{
	uint64_t n;

	if (e == NULL || !__atomic_load_n(&e->events_failed, __ATOMIC_ACQUIRE))
		return 0;
	/* Taken: the owner's poll wakes once for it (nothing is lost: the error stays). */
	(void)!read(e->failed_fd, &n, sizeof(n));
	return pdk_error_setx(err, e->events_err->status, "%s", e->events_err->msg);
}
