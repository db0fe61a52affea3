/*
 * ports.c - ports forwarded into a sandbox: a listener on the host's
 * loopback per forwarded port, and for each connection it accepts, a
 * connection to the sandbox's own 127.0.0.1:PORT that the supervisor's
 * helper makes inside the sandbox's network namespace (op "connect"), the
 * bytes relayed both ways by the daemon's loop. Every open and close is
 * recorded (sandbox.port.open, sandbox.port.close); all of a sandbox's
 * listeners and connections go when it ends.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_CHUNK 65536

/* One direction of a connection: bytes read from `from` wait in `buf` for `to`. */
struct pump {
	struct relay *r;
	int from, to;
	struct evbuffer *buf;
	struct event *rd, *wr;
	bool done; /* `from` ended and all it sent was written: `to` was shut for writing */
};

/* One forwarded connection: the host side's client and the sandbox side's socket. */
struct relay {
	struct relay *next;
	struct pdk__port *port;
	int fd[2]; /* [0] the client on the host, [1] the sandbox's server */
	struct pump pump[2];
};

struct pdk__port {
	struct pdk__port *next;
	struct pdk_ctl_sb *sb;
	uint16_t port;      /* inside the sandbox */
	uint16_t host_port; /* of the listener on 127.0.0.1 */
	int listen_fd;
	struct event *listen_ev;
	struct relay *relays;
	unsigned n_relays;
};

/* A connect asked of the supervisor: the accepted client waits for it. */
struct pending {
	uint16_t port;
	int client;
};

static void relay_free(struct relay *r)
{
	for (struct relay **p = &r->port->relays; *p != NULL; p = &(*p)->next) {
		if (*p == r) {
			*p = r->next;
			break;
		}
	}
	r->port->n_relays--;
	for (int i = 0; i < 2; i++) {
		if (r->pump[i].rd != NULL)
			event_free(r->pump[i].rd);
		if (r->pump[i].wr != NULL)
			event_free(r->pump[i].wr);
		if (r->pump[i].buf != NULL)
			evbuffer_free(r->pump[i].buf);
		(void)close(r->fd[i]);
	}
	free(r);
}

/* The pump's buffer is empty and its source ended: pass the end on. */
static void pump_finish(struct pump *p)
{
	p->done = true;
	(void)shutdown(p->to, SHUT_WR);
	if (p->r->pump[0].done && p->r->pump[1].done)
		relay_free(p->r);
}

/* Write what waits; wait for room when some is left. False when the relay is gone. */
static bool pump_flush(struct pump *p, bool eof)
{
	if (evbuffer_get_length(p->buf) > 0 && evbuffer_write(p->buf, p->to) < 0 &&
	    errno != EAGAIN && errno != EINTR) {
		relay_free(p->r);
		return false;
	}
	if (evbuffer_get_length(p->buf) > 0) {
		/* Backpressure: read no more until the peer took what waits. */
		(void)event_del(p->rd);
		(void)event_add(p->wr, NULL);
		return true;
	}
	(void)event_del(p->wr);
	if (eof) {
		(void)event_del(p->rd);
		pump_finish(p);
		return false;
	}
	(void)event_add(p->rd, NULL);
	return true;
}

static void pump_read(evutil_socket_t fd, short what, void *arg)
{
	struct pump *p = arg;
	int n = evbuffer_read(p->buf, fd, RELAY_CHUNK);

	(void)what;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		relay_free(p->r);
		return;
	}
	(void)pump_flush(p, n == 0);
}

static void pump_write(evutil_socket_t fd, short what, void *arg)
{
	struct pump *p = arg;

	(void)fd;
	(void)what;
	/* Writable again: what waits goes; the end came when reading was stopped at EOF only. */
	(void)pump_flush(p, false);
}

static void pump_init(struct relay *r, int i)
{
	struct event_base *base = r->port->sb->c->base;
	struct pump *p = &r->pump[i];

	p->r = r;
	p->from = r->fd[i];
	p->to = r->fd[1 - i];
	p->buf = pdk__ctl_buf_new();
	p->rd = event_new(base, p->from, EV_READ | EV_PERSIST, pump_read, p);
	p->wr = event_new(base, p->to, EV_WRITE | EV_PERSIST, pump_write, p);
	if (p->rd == NULL || p->wr == NULL)
		pdk_oom();
	(void)event_add(p->rd, NULL);
}

static struct pdk__port *port_find(struct pdk_ctl_sb *sb, uint16_t port)
{
	for (struct pdk__port *p = sb->ports; p != NULL; p = p->next)
		if (p->port == port)
			return p;
	return NULL;
}

static void relay_start(struct pdk__port *port, int client, int server)
{
	struct relay *r = pdk_xcalloc(1, sizeof(*r));

	r->port = port;
	r->fd[0] = client;
	r->fd[1] = server;
	(void)evutil_make_socket_nonblocking(client);
	(void)evutil_make_socket_nonblocking(server);
	r->next = port->relays;
	port->relays = r;
	port->n_relays++;
	pump_init(r, 0);
	pump_init(r, 1);
}

/* The supervisor's answer to a connect: relay, or drop the client (its port may be gone). */
static void connected(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct pending *w = ctx;
	struct pdk__port *port = port_find(sb, w->port);

	if (port == NULL || pdk__svc_failed(reply) || nfds != 1) {
		pdk__close_fds(fds, nfds);
		(void)close(w->client);
	} else {
		relay_start(port, w->client, fds[0]);
	}
	free(w);
}

static void port_accept(evutil_socket_t fd, short what, void *arg)
{
	struct pdk__port *port = arg;
	struct pending *w;
	int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	(void)what;
	if (client < 0)
		return;
	if (port->n_relays >= PDK_CTL_PORT_CONNS_MAX) {
		(void)close(client);
		return;
	}
	w = pdk_xcalloc(1, sizeof(*w));
	w->port = port->port;
	w->client = client;
	if (pdk__sb_call(port->sb,
			 json_pack("{s:s, s:i}", "op", "connect", "port", (int)port->port), NULL, 0,
			 connected, w) < 0) {
		(void)close(client);
		free(w);
	}
}

/* A listener on 127.0.0.1, on `want` (0: a port the kernel picks). */
static int listen_loopback(uint16_t want, uint16_t *got, struct pdk_error **err)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(want)};
	socklen_t len = sizeof(sa);
	_cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot make a listening socket");
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return pdk_error_set_field(err, errno == EADDRINUSE ? EALREADY : errno, "host_port",
					   "cannot listen on 127.0.0.1:%u: %s", (unsigned)want,
					   strerror(errno));
	if (listen(fd, 64) < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return pdk_error_set(err, errno, "cannot listen on 127.0.0.1");
	*got = ntohs(sa.sin_port);
	return steal_fd(&fd);
}

static void port_free(struct pdk__port *p)
{
	while (p->relays != NULL)
		relay_free(p->relays);
	pdk__ctl_unwatch(&p->listen_ev, &p->listen_fd);
	free(p);
}

static void record(struct pdk__port *p, const char *kind, const char *by, const char *reason)
{
	json_t *attrs = json_pack("{s:i, s:i, s:s}", "port", (int)p->port, "host_port",
				  (int)p->host_port, "by", by);

	if (reason != NULL)
		json_object_set_new(attrs, "reason", json_string(reason));
	pdk_ctl_event(p->sb->c, p->sb->row.id, p->sb->labels, kind, attrs);
}

static unsigned count_ports(const struct pdk_ctl_sb *sb)
{
	unsigned n = 0;

	for (const struct pdk__port *p = sb->ports; p != NULL; p = p->next)
		n++;
	return n;
}

int pdk_ctl_port_open(struct pdk_ctl_sb *sb, uint16_t port, uint16_t host_port, const char *by,
		      struct pdk_ctl_port *out, struct pdk_error **err)
{
	struct pdk__port *p = port_find(sb, port);
	uint16_t got = 0;
	int fd;

	if (port == 0)
		return pdk_error_set_field(err, EINVAL, "port",
					   "'port' must be a number from 1 to 65535");
	if (p == NULL && count_ports(sb) >= PDK_CTL_PORTS_MAX)
		return pdk_error_set_field(err, EDQUOT, "port",
					   "the sandbox has %u ports open, the most allowed; "
					   "close one first",
					   (unsigned)PDK_CTL_PORTS_MAX);
	if (p == NULL) {
		fd = listen_loopback(host_port, &got, err);
		if (fd < 0)
			return fd;
		p = pdk_xcalloc(1, sizeof(*p));
		p->sb = sb;
		p->port = port;
		p->host_port = got;
		p->listen_fd = fd;
		p->listen_ev = event_new(sb->c->base, fd, EV_READ | EV_PERSIST, port_accept, p);
		if (p->listen_ev == NULL)
			pdk_oom();
		(void)event_add(p->listen_ev, NULL);
		p->next = sb->ports;
		sb->ports = p;
		record(p, "sandbox.port.open", by, NULL);
	}
	*out = (struct pdk_ctl_port){
		.port = p->port, .host_port = p->host_port, .connections = p->n_relays};
	return 0;
}

int pdk_ctl_port_close(struct pdk_ctl_sb *sb, uint16_t port, const char *by, struct pdk_error **err)
{
	for (struct pdk__port **pp = &sb->ports; *pp != NULL; pp = &(*pp)->next) {
		struct pdk__port *p = *pp;

		if (p->port != port)
			continue;
		*pp = p->next;
		record(p, "sandbox.port.close", by, NULL);
		port_free(p);
		return 0;
	}
	return pdk_error_set_field(err, ENOENT, "port",
				   "port %u of sandbox '%s' is not open; GET .../ports lists them",
				   (unsigned)port, sb->row.id);
}

size_t pdk_ctl_ports(struct pdk_ctl_sb *sb, struct pdk_ctl_port *out, size_t room)
{
	size_t n = 0;

	for (struct pdk__port *p = sb->ports; p != NULL && n < room; p = p->next)
		out[n++] = (struct pdk_ctl_port){
			.port = p->port, .host_port = p->host_port, .connections = p->n_relays};
	return n;
}

void pdk__sb_ports_close(struct pdk_ctl_sb *sb, const char *reason)
{
	while (sb->ports != NULL) {
		struct pdk__port *p = sb->ports;

		sb->ports = p->next;
		if (reason != NULL)
			record(p, "sandbox.port.close", "daemon", reason);
		port_free(p);
	}
}
