/*
 * stdio.c - the stdio transport: one client on a pair of pipes, a JSON-RPC
 * message per line (2025-06-18 basic/transports, "stdio").
 */
#include "common.h"
#include "mcp-internal.h"

#include <event2/buffer.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define READ_CHUNK 65536

struct pdk_mcp_stdio {
	struct pdk_mcp *m;
	struct pdk_mcp_conn *conn;
	int in_fd, out_fd;
	struct event *in_ev, *out_ev;
	struct pdk_buf line; /* the message being read */
	bool skipping;       /* a message too large: dropped up to its newline */
	bool eof;
	struct evbuffer *out;
	void (*on_eof)(void *arg);
	void *arg;
};

static void end(struct pdk_mcp_stdio *s)
{
	if (s->eof)
		return;
	s->eof = true;
	event_del(s->in_ev);
	s->on_eof(s->arg);
}

static void flush_some(struct pdk_mcp_stdio *s)
{
	while (evbuffer_get_length(s->out) > 0) {
		int n = evbuffer_write(s->out, s->out_fd);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			/* The client's end of our output is gone: it is gone too. */
			evbuffer_drain(s->out, evbuffer_get_length(s->out));
			end(s);
			return;
		}
	}
	if (evbuffer_get_length(s->out) > 0 && event_add(s->out_ev, NULL) < 0)
		pdk_oom();
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_some(arg);
}

static void send_msg(void *ctx, const json_t *related, const json_t *msg)
{
	struct pdk_mcp_stdio *s = ctx;
	_cleanup_free_ char *line = msg ? pdk_json_dump_wire(msg) : NULL;

	(void)related; /* one channel for every request */
	if (msg == NULL)
		return; /* a cancelled request: nothing is said */
	if (line == NULL)
		pdk_oom();
	/* SECURITY: jansson escapes every control character: a message is exactly one line. */
	if (evbuffer_add(s->out, line, strlen(line)) < 0)
		pdk_oom();
	/*
	 * SECURITY: the answer is written at once, not on a later turn of the
	 * loop: the records of its request are stored first (control.h).
	 */
	pdk_ctl_events_store(s->m->ctl);
	flush_some(s);
}

static void one_line(struct pdk_mcp_stdio *s, const char *p, size_t n)
{
	if (n > 0 && p[n - 1] == '\r')
		n--;
	if (n == 0)
		return; /* a blank line is no message */
	pdk_mcp_conn_message(s->conn, p, n);
}

static void too_large(struct pdk_mcp_stdio *s)
{
	json_t *e = pdk_rpc_error(NULL, PDK_RPC_PARSE_ERROR,
				  "the message is larger than the server's limit", NULL);

	pdk__mcp_send(s->conn, NULL, e);
	s->skipping = true;
	pdk_buf_reset(&s->line);
}

/* Take in `n` bytes: every complete line is a message. */
static void take(struct pdk_mcp_stdio *s, const char *p, size_t n)
{
	while (n > 0 && !s->eof) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (!s->skipping && pdk_buf_add(&s->line, p, k) < 0)
			too_large(s);
		if (nl != NULL) {
			if (!s->skipping)
				one_line(s, pdk_buf_str(&s->line), s->line.len);
			s->skipping = false;
			pdk_buf_reset(&s->line);
			k++;
		}
		p += k;
		n -= k;
	}
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_mcp_stdio *s = arg;
	char buf[READ_CHUNK];
	ssize_t n;

	(void)what;
	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		end(s);
		return;
	}
	take(s, buf, (size_t)n);
}

/* Whether epoll takes `fd` (a pipe, a socket, a terminal; not a file or /dev/null). */
static bool pollable(int fd)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int ep = epoll_create1(EPOLL_CLOEXEC);
	bool ok = ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0;

	if (ep >= 0)
		(void)close(ep);
	return ok;
}

/* stdin that cannot be polled (a file): everything in it, then its end. */
static void read_file(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_mcp_stdio *s = arg;

	(void)fd;
	(void)what;
	while (!s->eof)
		on_readable(s->in_fd, EV_READ, s);
}

struct pdk_mcp_stdio *pdk_mcp_stdio_new(struct pdk_mcp *m, int in_fd, int out_fd,
					const char *identity, void (*on_eof)(void *arg), void *arg)
{
	struct pdk_mcp_stdio *s = pdk_xcalloc(1, sizeof(*s));

	s->m = m;
	s->in_fd = in_fd;
	s->out_fd = out_fd;
	s->on_eof = on_eof;
	s->arg = arg;
	pdk_buf_init(&s->line, m->max_message);
	s->out = evbuffer_new();
	(void)fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
	(void)fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) | O_NONBLOCK);
	s->in_ev = event_new(m->base, in_fd, EV_READ | EV_PERSIST, on_readable, s);
	s->out_ev = event_new(m->base, out_fd, EV_WRITE, on_writable, s);
	if (s->out == NULL || s->in_ev == NULL || s->out_ev == NULL)
		pdk_oom();
	/*
	 * A file or /dev/null as stdin cannot be polled (EPERM): it never blocks
	 * either, so it is read to its end from the loop's first pass instead.
	 */
	if (!pollable(in_fd)) {
		event_free(s->in_ev);
		s->in_ev = event_new(m->base, -1, 0, read_file, s);
		if (s->in_ev == NULL || event_add(s->in_ev, &(struct timeval){0, 0}) < 0)
			pdk_oom();
	} else if (event_add(s->in_ev, NULL) < 0) {
		pdk_oom();
	}
	s->conn = pdk_mcp_conn_new(m, identity, "stdio", send_msg, s);
	return s;
}

struct pdk_mcp_conn *pdk_mcp_stdio_conn(struct pdk_mcp_stdio *s)
{
	return s->conn;
}

void pdk_mcp_stdio_free(struct pdk_mcp_stdio *s)
{
	if (s == NULL)
		return;
	pdk_mcp_conn_close(s->conn);
	pdk_ctl_events_store(s->m->ctl); /* SECURITY: records before answers, as in send_msg */
	/* What is queued goes out before the end: the client may still read it. */
	(void)fcntl(s->out_fd, F_SETFL, fcntl(s->out_fd, F_GETFL) & ~O_NONBLOCK);
	while (evbuffer_get_length(s->out) > 0 && evbuffer_write(s->out, s->out_fd) > 0)
		;
	event_free(s->in_ev);
	event_free(s->out_ev);
	evbuffer_free(s->out);
	pdk_buf_release(&s->line);
	free(s);
}
