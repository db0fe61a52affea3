/*
 * stream.c - text/event-stream answers (http.h): started once, written one
 * event at a time, ended by their owner or by the client's going away.
 */
#include "common.h"
#include "base.h"
#include "http.h"

#include <event2/bufferevent.h>
#include <sys/socket.h>

static void unwatch(struct pdk_http_stream *s)
{
	if (s->peer_ev != NULL)
		event_free(s->peer_ev);
	s->peer_ev = NULL;
}

static void stream_closed(struct evhttp_connection *evcon, void *arg)
{
	struct pdk_http_stream *s = arg;

	(void)evcon;
	unwatch(s); /* before libevent closes the socket */
	s->dead = true;
	/*
	 * On a clean EOF libevent has detached the request (it is ours to free);
	 * on a write error it frees the request with the connection itself.
	 */
	if (s->req != NULL && evhttp_request_get_connection(s->req) == NULL)
		evhttp_request_free(s->req);
	s->req = NULL;
	if (s->on_close != NULL)
		s->on_close(s->on_close_arg);
}

void pdk_http_stream_start(struct pdk_http_stream *s, struct evhttp_request *req)
{
	s->req = req;
	s->dead = false;
	pdk_http_header(req, "Content-Type", "text/event-stream");
	pdk_http_header(req, "Cache-Control", "no-store");
	evhttp_send_reply_start(req, 200, "OK");
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, s);
}

/*
 * A client that went away is noticed by libevent only when it writes to it.
 * The socket is watched with a peek (the bytes, if any, stay libevent's): EOF
 * or an error ends the stream as the close callback would; more bytes from
 * the client (not for us) just end the watch.
 */
static void peer_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_http_stream *s = arg;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	void (*on_close)(void *) = s->on_close;

	(void)what;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	unwatch(s);
	if (n > 0)
		return;
	/*
	 * The request stays libevent's: it is freed with the connection, whose
	 * close callback then finds the stream already gone.
	 */
	s->on_close = NULL;
	if (on_close != NULL)
		on_close(s->on_close_arg);
}

void pdk_http_stream_watch(struct pdk_http_stream *s, struct event_base *base)
{
	struct evhttp_connection *con = s->req ? evhttp_request_get_connection(s->req) : NULL;
	struct bufferevent *bev = con ? evhttp_connection_get_bufferevent(con) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;

	if (fd < 0 || s->peer_ev != NULL)
		return;
	s->peer_ev = event_new(base, fd, EV_READ | EV_PERSIST, peer_readable, s);
	if (s->peer_ev == NULL || event_add(s->peer_ev, NULL) < 0)
		pdk_oom();
}

static void send_chunk(struct pdk_http_stream *s, struct evbuffer *buf)
{
	evhttp_send_reply_chunk(s->req, buf);
	evbuffer_free(buf);
}

void pdk_http_stream_send(struct pdk_http_stream *s, const char *id, const char *event,
			  json_t *data)
{
	_cleanup_json_ json_t *d = data;
	_cleanup_free_ char *text = NULL;
	struct evbuffer *buf;

	if (s->dead || s->req == NULL)
		return;
	/* Compact, one line (every control character escaped), by the wire's serialiser. */
	text = pdk_json_dump_wire(d);
	if (text == NULL)
		pdk_oom();
	text[strlen(text) - 1] = '\0';
	buf = pdk_http_buf_new();
	if (id != NULL)
		pdk_http_buf_printf(buf, "id: %s\n", id);
	pdk_http_buf_printf(buf, "event: %s\ndata: %s\n\n", event, text);
	send_chunk(s, buf);
}

void pdk_http_stream_comment(struct pdk_http_stream *s, const char *text)
{
	struct evbuffer *buf;

	if (s->dead || s->req == NULL)
		return;
	buf = pdk_http_buf_new();
	pdk_http_buf_printf(buf, ": %s\n\n", text);
	send_chunk(s, buf);
}

void pdk_http_stream_end(struct pdk_http_stream *s)
{
	struct evhttp_connection *c;

	unwatch(s);
	if (s->dead || s->req == NULL)
		return;
	c = evhttp_request_get_connection(s->req);
	if (c != NULL)
		evhttp_connection_set_closecb(c, NULL, NULL);
	evhttp_send_reply_end(s->req);
	s->req = NULL;
	s->dead = true;
}

size_t pdk_http_stream_backlog(const struct pdk_http_stream *s)
{
	struct evhttp_connection *c =
		s->req != NULL && !s->dead ? evhttp_request_get_connection(s->req) : NULL;
	struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;

	/* The guard's filter keeps every byte there until the socket took it (guard-conn.c). */
	return bev != NULL ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

void pdk_http_stream_start_raw(struct pdk_http_stream *s, struct evhttp_request *req,
			       const char *content_type)
{
	s->req = req;
	s->dead = false;
	pdk_http_header(req, "Content-Type", content_type);
	evhttp_send_reply_start(req, 200, "OK");
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, s);
}

static void chunk_written(struct evhttp_connection *evcon, void *arg)
{
	struct pdk_http_stream *s = arg;

	(void)evcon;
	if (s->sent != NULL && !s->dead)
		s->sent(s->sent_arg);
}

void pdk_http_stream_bytes(struct pdk_http_stream *s, const void *data, size_t len,
			   void (*sent)(void *arg), void *arg)
{
	struct evbuffer *buf;

	if (s->dead || s->req == NULL)
		return;
	buf = pdk_http_buf_new();
	pdk_http_buf_add(buf, data, len);
	s->sent = sent;
	s->sent_arg = arg;
	/*
	 * evhttp calls chunk_written once its output buffer is empty; the guard
	 * keeps the bytes there until the socket took them (guard-conn.c).
	 */
	evhttp_send_reply_chunk_with_cb(s->req, buf, chunk_written, s);
	evbuffer_free(buf);
}

void pdk_http_stream_abort(struct pdk_http_stream *s)
{
	struct evhttp_connection *c = s->req ? evhttp_request_get_connection(s->req) : NULL;
	struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;

	/*
	 * Shut down first: the last chunk evhttp then writes fails, and evhttp
	 * frees the connection as for any client that went away.
	 */
	if (fd >= 0)
		(void)shutdown(fd, SHUT_RDWR);
	pdk_http_stream_end(s);
}
