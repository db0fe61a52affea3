/*
 * exec.c - commands in a sandbox: the exec request to the supervisor, the
 * daemon's ends of the stdio pipes, output capping (head + tail, the full
 * output spilled into a file inside the sandbox), streaming as SSE.
 */
#include "common.h"
#include "base.h"
#include "daemon-internal.h"
#include "supervisor.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define READ_CHUNK      65536
#define PENDING_MAX     (8u << 20) /* output held while the spill file is being opened */
#define EARLY_MAX       (1u << 20) /* output held until the start answer */
#define DRAIN_GRACE_MS  200 /* after the exit, how long a lingering pipe writer is waited for */
#define STDIN_QUEUE_MAX (4u << 20) /* bytes from the stdin route not yet written */

enum exec_mode {
	EXEC_SYNC,   /* one JSON answer with capped text */
	EXEC_STREAM, /* SSE */
	EXEC_RAW,    /* stdout is the answer's body (archive download) */
	EXEC_STATUS, /* {"ok":true} or the stderr as an error (archive upload) */
};

/*
 * What a pending spill-file open knows. When the exec ends first, `x` and `c`
 * are cleared and the output held so far moves to `pending`: the answer has
 * already named the file, so it must still get every byte.
 */
struct spill_ctx {
	struct pdk_exec *x;
	struct capture *c;
	struct evbuffer *pending;
};

struct capture {
	const char *name; /* "stdout" | "stderr" */
	char *head, *tail;
	size_t head_max, head_len, tail_max, tail_pos, tail_len;
	uint64_t total;
	int fd;
	struct event *ev;
	bool eof;
	/* The full output inside the sandbox, opened through the supervisor when the cap is passed.
	 */
	char *file;
	int file_fd;
	bool file_requested, file_failed;
	struct evbuffer *pending;
	struct evbuffer *early; /* read before the start answer */
};

struct pdk_exec {
	struct pdk_exec *next;
	struct pdk_sb *sb;
	struct evhttp_request *req;
	enum exec_mode mode;
	json_t *exec_id; /* the supervisor's */
	json_t *exit;    /* the exit event once it came */
	struct capture out, err;
	int in_fd;
	struct event *in_ev, *grace;
	char *in_data;
	size_t in_len, in_off;
	uint64_t raw_max;
	struct pdk_stream stream; /* EXEC_STREAM */
	bool started, finished, raw_too_big;
	/* pty: out.fd is the terminal's master, in_fd a second descriptor of it. */
	bool pty;
	bool stdin_open;       /* the stdin route may write (in_fd stays open) */
	bool in_eof;           /* close in_fd once inq is written */
	struct evbuffer *inq;  /* bytes from the stdin route */
	struct event *peer_ev; /* the SSE client's socket, watched for its going away */
	uint64_t start_ns;
};

/* ---- helpers ---- */

/* Valid UTF-8 of `p`, with every byte that is not part of a valid sequence as U+FFFD. */
static char *utf8_clean(const char *p, size_t n, size_t *out_len)
{
	char *o = pdk_xmalloc(n * 3 + 1);
	size_t k = 0;

	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)p[i];
		size_t len = c < 0x80         ? 1
			     : (c >> 5) == 6  ? 2
			     : (c >> 4) == 14 ? 3
			     : (c >> 3) == 30 ? 4
					      : 0;
		bool ok = len > 0 && i + len <= n && !(len == 2 && c < 0xc2);

		for (size_t j = 1; ok && j < len; j++)
			ok = ((unsigned char)p[i + j] >> 6) == 2;
		if (ok && len == 3) {
			unsigned cp = (c & 15u) << 12 | ((unsigned char)p[i + 1] & 63u) << 6;

			ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
		}
		if (ok && len == 4) {
			unsigned cp = (c & 7u) << 18 | ((unsigned char)p[i + 1] & 63u) << 12;

			ok = cp >= 0x10000 && cp <= 0x10ffff;
		}
		if (!ok) {
			memcpy(o + k, "\xef\xbf\xbd", 3);
			k += 3;
			i++;
			continue;
		}
		memcpy(o + k, p + i, len);
		k += len;
		i += len;
	}
	o[k] = '\0';
	*out_len = k;
	return o;
}

static json_t *json_text(const char *p, size_t n)
{
	size_t len;
	_cleanup_free_ char *clean = utf8_clean(p, n, &len);
	json_t *s = json_stringn(clean, len);

	if (s == NULL) /* jansson refuses NUL only with checks; a NUL is valid UTF-8 here */
		s = json_string("");
	return s;
}

static void capture_init(struct capture *c, const char *name, uint64_t cap, int fd)
{
	c->name = name;
	c->head_max = cap / 2;
	c->tail_max = cap - c->head_max;
	c->head = pdk_xmalloc(c->head_max + 1);
	c->tail = pdk_xmalloc(c->tail_max + 1);
	c->fd = fd;
	c->file_fd = -1;
}

static void capture_release(struct capture *c)
{
	if (c->ev != NULL)
		event_free(c->ev);
	if (c->fd >= 0)
		(void)close(c->fd);
	if (c->file_fd >= 0)
		(void)close(c->file_fd);
	if (c->pending != NULL)
		evbuffer_free(c->pending);
	if (c->early != NULL)
		evbuffer_free(c->early);
	free(c->head);
	free(c->tail);
	free(c->file);
	memset(c, 0, sizeof(*c));
	c->fd = c->file_fd = -1;
}

static void tail_add(struct capture *c, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		c->tail[c->tail_pos] = p[i];
		c->tail_pos = (c->tail_pos + 1) % c->tail_max;
		if (c->tail_len < c->tail_max)
			c->tail_len++;
	}
}

/* The tail in order (caller frees). */
static char *tail_linear(struct capture *c)
{
	char *o = pdk_xmalloc(c->tail_len + 1);
	size_t start = (c->tail_pos + c->tail_max - c->tail_len) % c->tail_max;

	for (size_t i = 0; i < c->tail_len; i++)
		o[i] = c->tail[(start + i) % c->tail_max];
	return o;
}

static void started(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx);
static void spill_opened(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx);
static void call_dropped(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx);

/* Calls still pending for `x` must not reach it once it is freed. */
static void detach_calls(struct pdk_exec *x)
{
	for (struct pdk_sb_call *c = x->sb->calls; c != NULL; c = c->next) {
		if (c->cb == started && c->ctx == x) {
			c->cb = call_dropped;
			c->ctx = NULL;
		} else if (c->cb == spill_opened && ((struct spill_ctx *)c->ctx)->x == x) {
			struct spill_ctx *s = c->ctx;

			if (s->c != NULL && !s->c->file_failed)
				s->pending = steal_ptr(&s->c->pending);
			s->c = NULL;
			s->x = NULL;
		}
	}
}

static void exec_free(struct pdk_exec *x)
{
	detach_calls(x);
	if (x->peer_ev != NULL)
		event_free(x->peer_ev);
	x->peer_ev = NULL;
	pdk__stream_end(&x->stream); /* no-op unless a stream is still open */
	capture_release(&x->out);
	capture_release(&x->err);
	if (x->in_ev != NULL)
		event_free(x->in_ev);
	if (x->grace != NULL)
		event_free(x->grace);
	if (x->in_fd >= 0)
		(void)close(x->in_fd);
	if (x->inq != NULL)
		evbuffer_free(x->inq);
	json_decref(x->exec_id);
	json_decref(x->exit);
	free(x->in_data);
	free(x);
}

static void exec_unlink(struct pdk_exec *x)
{
	for (struct pdk_exec **p = &x->sb->execs; *p != NULL; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			return;
		}
}

/* ---- the spill file ---- */

static void call_dropped(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	(void)sb;
	(void)reply;
	(void)ctx;
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
}

static void spill_write(struct capture *c, const char *p, size_t n)
{
	if (c->file_failed)
		return;
	if (c->file_fd >= 0) {
		if (pdk_write_all(c->file_fd, p, n) < 0)
			c->file_failed = true;
		return;
	}
	if (evbuffer_get_length(c->pending) + n > PENDING_MAX) {
		c->file_failed = true;
		return;
	}
	evbuffer_add(c->pending, p, n);
}

static void spill_opened(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct spill_ctx *s = ctx;
	struct capture *c = s->c;
	struct evbuffer *held = c != NULL ? c->pending : s->pending;
	size_t n = held != NULL ? evbuffer_get_length(held) : 0;
	bool ok = reply != NULL && nfds == 1 && json_object_get(reply, "error") == NULL;
	bool wrote =
		ok && (n == 0 || pdk_write_all(fds[0], evbuffer_pullup(held, (ssize_t)n), n) == 0);

	(void)sb;
	if (s->pending != NULL) /* the exec ended before: the file gets what it held, then closes */
		evbuffer_free(s->pending);
	else if (held != NULL)
		evbuffer_drain(held, n);
	free(s);
	if (c != NULL && wrote) {
		c->file_fd = fds[0];
		return;
	}
	if (c != NULL)
		c->file_failed = true;
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
}

/* The cap is passed: everything so far goes to the pending buffer, and the file is asked for. */
static void spill_start(struct pdk_exec *x, struct capture *c)
{
	_cleanup_free_ char *t = tail_linear(c);
	struct spill_ctx *s = pdk_xcalloc(1, sizeof(*s));
	_cleanup_free_ char *eid = json_dumps(x->exec_id, JSON_ENCODE_ANY);

	c->file_requested = true;
	c->pending = evbuffer_new();
	if (c->pending == NULL)
		pdk_oom();
	evbuffer_add(c->pending, c->head, c->head_len);
	evbuffer_add(c->pending, t, c->tail_len); /* the ring has not wrapped yet */
	/* Quotes of a string id are dropped: the name is the id's text. */
	c->file = pdk_xasprintf("/tmp/.paddock/exec/%s.%s", eid[0] == '"' ? eid + 1 : eid, c->name);
	if (c->file[strlen(c->file) - strlen(c->name) - 2] == '"')
		memmove(c->file + strlen(c->file) - strlen(c->name) - 2,
			c->file + strlen(c->file) - strlen(c->name) - 1, strlen(c->name) + 2);
	s->x = x;
	s->c = c;
	if (pdk__sb_call(x->sb,
			 json_pack("{s:s, s:s, s:s, s:i, s:b}", "op", "open", "path", c->file,
				   "flags", "w", "mode", 0600, "mkdir", 1),
			 NULL, 0, spill_opened, s) < 0) {
		free(s);
		c->file_failed = true;
	}
}

static void capture_add(struct pdk_exec *x, struct capture *c, const char *p, size_t n)
{
	size_t h = 0;

	if (c->total + n > c->head_max + c->tail_max && !c->file_requested)
		spill_start(x, c);
	c->total += n;
	if (c->file_requested) {
		spill_write(c, p, n);
	}
	if (c->head_len < c->head_max) {
		h = n < c->head_max - c->head_len ? n : c->head_max - c->head_len;
		memcpy(c->head + c->head_len, p, h);
		c->head_len += h;
	}
	tail_add(c, p + h, n - h);
}

static json_t *capture_json(struct capture *c)
{
	uint64_t kept = c->head_len + c->tail_len;
	uint64_t dropped = c->total - kept;
	_cleanup_free_ char *t = tail_linear(c), *marker = NULL;
	struct evbuffer *b = evbuffer_new();
	json_t *o;
	size_t n;

	if (b == NULL)
		pdk_oom();
	evbuffer_add(b, c->head, c->head_len);
	if (dropped > 0) {
		marker = pdk_xasprintf("\n[... %llu bytes dropped; full output in %s ...]\n",
				       (unsigned long long)dropped,
				       c->file && !c->file_failed ? c->file : "(not kept)");
		evbuffer_add(b, marker, strlen(marker));
	}
	evbuffer_add(b, t, c->tail_len);
	n = evbuffer_get_length(b);
	o = json_pack("{s:o, s:I, s:I, s:b, s:o}", "text",
		      json_text((const char *)evbuffer_pullup(b, (ssize_t)n), n), "bytes",
		      (json_int_t)c->total, "dropped", (json_int_t)dropped, "truncated",
		      dropped > 0, "file",
		      dropped > 0 && c->file && !c->file_failed ? json_string(c->file)
								: json_null());
	evbuffer_free(b);
	return o;
}

/* ---- finishing ---- */

static json_t *exit_json(struct pdk_exec *x)
{
	json_t *e = x->exit;
	json_t *o = json_object();

	pdk_json_set(o, "exec_id", json_incref(x->exec_id));
	pdk_json_set(o, "exit_code", json_incref(json_object_get(e, "exit_code")) ?: json_null());
	pdk_json_set(o, "signal", json_incref(json_object_get(e, "signal")) ?: json_null());
	pdk_json_set(o, "end", json_incref(json_object_get(e, "end")) ?: json_string("killed"));
	pdk_json_set(o, "duration_ms",
		     json_integer((json_int_t)((pdk_now_mono_ns() - x->start_ns) / 1000000)));
	return o;
}

static void exec_finish(struct pdk_exec *x)
{
	struct pdk_sb *sb = x->sb;
	json_t *o;

	if (x->finished)
		return;
	x->finished = true;
	if (x->peer_ev != NULL) { /* before the answer's end may close the socket */
		event_free(x->peer_ev);
		x->peer_ev = NULL;
	}
	pdk__sb_charge_exec(sb, x->out.total + x->err.total, 0);
	if (x->exit == NULL)
		x->exit = json_pack("{s:s}", "end", "killed");
	if (!x->started) {
		/* The sandbox went away before the command started: no stream was opened. */
		pdk__http_error(x->req, 503, "unavailable", NULL,
				"the sandbox ended before the command started");
		exec_unlink(x);
		exec_free(x);
		return;
	}
	pdk__sb_first_exec_done(sb);
	pdk__sb_ingest_soon(sb);
	switch (x->mode) {
	case EXEC_SYNC:
		o = exit_json(x);
		pdk_json_set(o, "stdout", capture_json(&x->out));
		pdk_json_set(o, "stderr", capture_json(&x->err));
		pdk__http_json(x->req, 200, o);
		break;
	case EXEC_STREAM:
		o = exit_json(x);
		if (x->pty) {
			json_t *a = exit_json(x);

			pdk_json_set(a, "pty", json_true());
			pdk__daemon_event(sb->d, sb->row.id, sb->labels, "exec.exit", a);
		}
		pdk_json_set(o, "stdout_bytes", json_integer((json_int_t)x->out.total));
		pdk_json_set(o, "stderr_bytes", json_integer((json_int_t)x->err.total));
		pdk__stream_send(&x->stream, NULL, "exit", o);
		pdk__stream_end(&x->stream);
		break;
	case EXEC_RAW:
	case EXEC_STATUS:
		if (x->raw_too_big) {
			pdk__http_error(x->req, 413, "too_large", "path",
					"the archive is larger than %llu bytes",
					(unsigned long long)x->raw_max);
		} else if (json_integer_value(json_object_get(x->exit, "exit_code")) != 0 ||
			   !json_is_integer(json_object_get(x->exit, "exit_code"))) {
			_cleanup_json_ json_t *t = json_text(x->err.head, x->err.head_len);

			pdk__http_error(x->req, 400, "bad_request", "path", "tar failed: %s",
					json_string_value(t));
		} else if (x->mode == EXEC_STATUS) {
			pdk__http_json(x->req, 200, json_pack("{s:b}", "ok", 1));
		} else {
			struct evbuffer *b = evbuffer_new();

			if (b == NULL)
				pdk_oom();
			evbuffer_add(b, x->out.head, x->out.head_len);
			evhttp_add_header(evhttp_request_get_output_headers(x->req), "Content-Type",
					  "application/x-tar");
			evhttp_send_reply(x->req, 200, "OK", b);
			evbuffer_free(b);
		}
		break;
	default:
		break;
	}
	exec_unlink(x);
	exec_free(x);
}

static void maybe_finish(struct pdk_exec *x)
{
	if (x->exit != NULL && x->out.eof && x->err.eof)
		exec_finish(x);
}

static void grace_over(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	exec_finish(arg);
}

void pdk__exec_exited(struct pdk_sb *sb, json_t *ev)
{
	json_t *id = json_object_get(ev, "exec");

	for (struct pdk_exec *x = sb->execs; x != NULL; x = x->next) {
		struct timeval tv = {0, DRAIN_GRACE_MS * 1000};

		if (x->exec_id == NULL || !json_equal(x->exec_id, id))
			continue;
		x->exit = json_incref(ev);
		if (x->out.eof && x->err.eof) {
			exec_finish(x);
			return;
		}
		/* A background process may hold the pipes: the answer does not wait for it long. */
		x->grace = evtimer_new(sb->d->base, grace_over, x);
		if (x->grace == NULL || evtimer_add(x->grace, &tv) < 0)
			pdk_oom();
		return;
	}
}

void pdk__exec_abort_all(struct pdk_sb *sb)
{
	while (sb->execs != NULL)
		exec_finish(sb->execs);
}

/* ---- pipes ---- */

/* Standard base64 with padding (caller frees). */
static char *b64_std(const unsigned char *p, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *o = pdk_xmalloc((n + 2) / 3 * 4 + 1);
	size_t k = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);

		o[k++] = tab[v >> 18 & 63];
		o[k++] = tab[v >> 12 & 63];
		o[k++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		o[k++] = i + 2 < n ? tab[v & 63] : '=';
	}
	o[k] = '\0';
	return o;
}

/* {"data": text} and, when the bytes are not valid UTF-8 (text has U+FFFD), "data_b64". */
static json_t *output_event(const char *buf, size_t n)
{
	size_t len;
	_cleanup_free_ char *clean = utf8_clean(buf, n, &len);
	bool exact = len == n && memcmp(clean, buf, n) == 0 && memchr(buf, '\0', n) == NULL;
	json_t *o = json_pack("{s:o}", "data", json_text(buf, n));

	if (!exact) {
		_cleanup_free_ char *b = b64_std((const unsigned char *)buf, n);

		pdk_json_set(o, "data_b64", json_string(b));
	}
	return o;
}

/* Bytes of one stream: to the SSE stream, the raw answer, or the capture. */
static void handle_output(struct pdk_exec *x, struct capture *c, const char *buf, size_t n)
{
	if (x->mode == EXEC_STREAM) {
		c->total += n;
		pdk__stream_send(&x->stream, NULL, c->name, output_event(buf, n));
		return;
	}
	if (x->mode == EXEC_RAW && c == &x->out) {
		c->total += n;
		if (c->head_len + n > c->head_max) {
			x->raw_too_big = true;
			return;
		}
		memcpy(c->head + c->head_len, buf, n);
		c->head_len += n;
		return;
	}
	capture_add(x, c, buf, n);
}

/*
 * The pipes and the control socket are watched by the same loop: output can
 * be read before the start answer (which gives the exec id the spill file and
 * the stream need). It waits in c->early until then.
 */
static void replay_early(struct pdk_exec *x, struct capture *c)
{
	size_t n = c->early ? evbuffer_get_length(c->early) : 0;

	if (n > 0)
		handle_output(x, c, (const char *)evbuffer_pullup(c->early, (ssize_t)n), n);
	if (c->early != NULL) {
		evbuffer_free(c->early);
		if (c->ev != NULL && event_add(c->ev, NULL) < 0)
			pdk_oom();
	}
	c->early = NULL;
}

static void output_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_exec *x = arg;
	struct capture *c = fd == x->out.fd ? &x->out : &x->err;
	char buf[READ_CHUNK];
	ssize_t n;

	(void)what;
	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		event_free(c->ev);
		c->ev = NULL;
		(void)close(c->fd);
		c->fd = -1;
		c->eof = true;
		maybe_finish(x);
		return;
	}
	if (!x->started) {
		if (c->early == NULL && (c->early = evbuffer_new()) == NULL)
			pdk_oom();
		evbuffer_add(c->early, buf, (size_t)n);
		/* Bounded: past EARLY_MAX the pipe is left to fill (the command waits). */
		if (evbuffer_get_length(c->early) >= EARLY_MAX)
			(void)event_del(c->ev);
		return;
	}
	handle_output(x, c, buf, (size_t)n);
}

static void input_close(struct pdk_exec *x)
{
	if (x->in_ev != NULL)
		event_free(x->in_ev);
	x->in_ev = NULL;
	if (x->in_fd >= 0)
		(void)close(x->in_fd);
	x->in_fd = -1;
}

/* The initial stdin, then what the stdin route queued; EOF when all is written (unless open). */
static void input_writable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_exec *x = arg;
	ssize_t n = 0;

	(void)what;
	if (x->in_off < x->in_len) {
		n = write(fd, x->in_data + x->in_off, x->in_len - x->in_off);
		if (n > 0)
			x->in_off += (size_t)n;
	} else if (x->inq != NULL && evbuffer_get_length(x->inq) > 0) {
		n = evbuffer_write(x->inq, fd);
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) { /* the command stopped reading */
		input_close(x);
		return;
	}
	if (x->in_off < x->in_len || (x->inq != NULL && evbuffer_get_length(x->inq) > 0))
		return;
	if (x->pty || (x->stdin_open && !x->in_eof))
		(void)event_del(x->in_ev); /* until the stdin route queues more */
	else
		input_close(x); /* EOF for the command */
}

/* The SSE client went away: its command loses stdin; a pty session its terminal (SIGHUP). */
static void stream_gone(void *arg)
{
	struct pdk_exec *x = arg;

	if (x->peer_ev != NULL) /* before libevent closes the socket */
		event_free(x->peer_ev);
	x->peer_ev = NULL;
	input_close(x);
	if (x->pty && x->out.fd >= 0) {
		if (x->out.ev != NULL)
			event_free(x->out.ev);
		x->out.ev = NULL;
		(void)close(x->out.fd);
		x->out.fd = -1;
		x->out.eof = true;
	}
}

static int nonblock(int fd)
{
	return fcntl(fd, F_SETFL, O_NONBLOCK);
}

/*
 * A session that prints nothing writes nothing to its client: libevent would
 * not notice the client's going away. Its socket is watched (a peek: the bytes
 * stay libevent's); EOF or an error ends the session's input and terminal.
 */
static void peer_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_exec *x = arg;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	(void)what;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	event_free(x->peer_ev);
	x->peer_ev = NULL;
	if (n <= 0)
		stream_gone(x);
	/* n > 0: the client sent more (not for us); no longer watched. */
}

static void peer_watch(struct pdk_exec *x)
{
	struct evhttp_connection *con = evhttp_request_get_connection(x->req);
	struct bufferevent *bev = con ? evhttp_connection_get_bufferevent(con) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;

	if (fd < 0)
		return;
	x->peer_ev = event_new(x->sb->d->base, fd, EV_READ | EV_PERSIST, peer_readable, x);
	if (x->peer_ev == NULL || event_add(x->peer_ev, NULL) < 0)
		pdk_oom();
}

/* The pty master from the start answer: output from it, stdin to a second descriptor of it. */
static void pty_attach(struct pdk_exec *x, int master)
{
	struct event_base *base = x->sb->d->base;

	x->out.fd = master;
	x->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 0);
	if (x->in_fd < 0 || nonblock(master) < 0) {
		/* No terminal to serve: the session is closed, the command gets SIGHUP. */
		input_close(x);
		(void)close(master);
		x->out.fd = -1;
		x->out.eof = true;
		return;
	}
	x->out.ev = event_new(base, x->out.fd, EV_READ | EV_PERSIST, output_readable, x);
	x->in_ev = event_new(base, x->in_fd, EV_WRITE | EV_PERSIST, input_writable, x);
	if (x->out.ev == NULL || x->in_ev == NULL || event_add(x->out.ev, NULL) < 0)
		pdk_oom();
}

static void started(struct pdk_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct pdk_exec *x = ctx;
	int master = -1;

	if (x->pty && nfds == 1 && reply != NULL && json_object_get(reply, "error") == NULL) {
		master = fds[0];
		nfds = 0;
	}
	for (size_t i = 0; i < nfds; i++)
		(void)close(fds[i]);
	if (reply == NULL || json_object_get(reply, "error") != NULL) {
		pdk__http_svc_error(x->req, reply);
		x->finished = true;
		exec_unlink(x);
		exec_free(x);
		return;
	}
	x->exec_id = json_incref(json_object_get(reply, "exec"));
	x->started = true;
	pdk__sb_charge_exec(sb, 0, 1);
	if (x->mode == EXEC_STREAM) {
		pdk__stream_start(&x->stream, x->req);
		x->stream.on_close = stream_gone;
		x->stream.on_close_arg = x;
		if (x->stdin_open)
			peer_watch(x);
		pdk__stream_send(&x->stream, NULL, "start",
				 json_pack("{s:O, s:O, s:b}", "exec_id", x->exec_id, "pid",
					   json_object_get(reply, "pid") ?: json_null(), "pty",
					   x->pty));
	}
	if (x->pty) {
		x->err.eof = true; /* one stream: the terminal */
		if (master >= 0)
			pty_attach(x, master);
		else
			x->out.eof = true;
	}
	replay_early(x, &x->out);
	replay_early(x, &x->err);
}

static struct pdk_exec *exec_new(struct pdk_sb *sb, struct evhttp_request *req, enum exec_mode mode,
				 uint64_t cap)
{
	struct pdk_exec *x = pdk_xcalloc(1, sizeof(*x));

	x->sb = sb;
	x->req = req;
	x->mode = mode;
	x->in_fd = -1;
	x->start_ns = pdk_now_mono_ns();
	x->stream.dead = true; /* until a stream is started */
	capture_init(&x->out, "stdout", cap, -1);
	capture_init(&x->err, "stderr", mode == EXEC_SYNC ? cap : 8192, -1);
	return x;
}

/* Pipes, the exec call, the loop's watchers. -errno after replying to req. */
static int exec_launch(struct pdk_exec *x, char **argv, char **env, const char *cwd,
		       uint64_t timeout_ms)
{
	struct pdk_sb *sb = x->sb;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int fds[3];
	json_t *op;
	int rc;

	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	op = json_pack("{s:s, s:o, s:o, s:I, s:b}", "op", "exec", "argv", pdk_json_strv(argv),
		       "env", env ? pdk_json_strv(env) : json_array(), "timeout_ms",
		       (json_int_t)timeout_ms, "pty", 0);
	if (cwd != NULL)
		pdk_json_set(op, "cwd", json_string(cwd));
	fds[0] = in[0];
	fds[1] = out[1];
	fds[2] = err[1];
	rc = pdk__sb_call(sb, op, fds, 3, started, x);
	if (rc < 0)
		goto fail;
	/* The command's ends went to the supervisor; ours stay. */
	(void)close(in[0]);
	(void)close(out[1]);
	(void)close(err[1]);
	x->in_fd = in[1];
	x->out.fd = out[0];
	x->err.fd = err[0];
	if (nonblock(x->in_fd) < 0 || nonblock(x->out.fd) < 0 || nonblock(x->err.fd) < 0)
		return -errno; /* the exec is started; its exit finishes it */
	x->out.ev = event_new(sb->d->base, x->out.fd, EV_READ | EV_PERSIST, output_readable, x);
	x->err.ev = event_new(sb->d->base, x->err.fd, EV_READ | EV_PERSIST, output_readable, x);
	if (x->out.ev == NULL || x->err.ev == NULL || event_add(x->out.ev, NULL) < 0 ||
	    event_add(x->err.ev, NULL) < 0)
		pdk_oom();
	if (x->in_len == 0 && !x->stdin_open) {
		(void)close(x->in_fd);
		x->in_fd = -1;
	} else {
		x->in_ev =
			event_new(sb->d->base, x->in_fd, EV_WRITE | EV_PERSIST, input_writable, x);
		if (x->in_ev == NULL || (x->in_len > 0 && event_add(x->in_ev, NULL) < 0))
			pdk_oom();
	}
	x->next = sb->execs;
	sb->execs = x;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			(void)close(in[i]);
		if (out[i] >= 0)
			(void)close(out[i]);
		if (err[i] >= 0)
			(void)close(err[i]);
	}
	pdk__http_status_error(x->req, -rc == ENOTCONN ? ENOTCONN : EIO,
			       "cannot start the command in the sandbox");
	exec_free(x);
	return rc;
}

/* A pty exec: the supervisor answers with the terminal's master (started()). */
static void exec_launch_pty(struct pdk_exec *x, struct pdk_req_exec *er)
{
	json_t *op = json_pack("{s:s, s:o, s:o, s:I, s:b, s:I, s:I}", "op", "exec", "argv",
			       pdk_json_strv(er->argv), "env",
			       er->env ? pdk_json_strv(er->env) : json_array(), "timeout_ms",
			       (json_int_t)er->timeout_ms, "pty", 1, "cols", (json_int_t)er->cols,
			       "rows", (json_int_t)er->rows);

	if (er->cwd != NULL)
		pdk_json_set(op, "cwd", json_string(er->cwd));
	if (pdk__sb_call(x->sb, op, NULL, 0, started, x) < 0) {
		pdk__http_status_error(x->req, EIO, "cannot start the command in the sandbox");
		exec_free(x);
		return;
	}
	x->next = x->sb->execs;
	x->sb->execs = x;
}

void pdk__exec_start(struct pdk_sb *sb, struct evhttp_request *req, struct pdk_req_exec *er,
		     bool stream)
{
	struct pdk_exec *x;

	if ((er->pty || er->stdin_open) && !stream) {
		pdk__http_error(req, 400, "bad_request", er->pty ? "pty" : "stdin_open",
				"'%s' needs a streamed answer: give \"stream\": true or "
				"Accept: text/event-stream",
				er->pty ? "pty" : "stdin_open");
		return;
	}
	x = exec_new(sb, req, stream ? EXEC_STREAM : EXEC_SYNC, er->output_cap);
	x->pty = er->pty;
	x->stdin_open = er->stdin_open || er->pty;
	if (x->stdin_open && (x->inq = evbuffer_new()) == NULL)
		pdk_oom();
	x->in_data = steal_ptr(&er->stdin_data);
	x->in_len = er->stdin_len;
	/*
	 * The request goes to the supervisor first, then into the audit store:
	 * the audit transaction runs while the supervisor and the init start
	 * the command, not before. The record is written either way, before
	 * the answer (which needs the loop's next turns) and before the spool's
	 * process.exec is ingested (a later turn too): the order in the audit
	 * chain stays request, then exec.
	 */
	if (er->pty)
		exec_launch_pty(x, er);
	else
		(void)exec_launch(x, er->argv, er->env, er->cwd, er->timeout_ms);
	pdk__daemon_event(sb->d, sb->row.id, sb->labels, "exec.request",
			  json_pack("{s:o, s:b, s:b}", "argv", pdk_json_strv(er->argv), "stream",
				    stream, "pty", er->pty));
}

static struct pdk_exec *exec_find(struct pdk_sb *sb, uint64_t id)
{
	for (struct pdk_exec *x = sb->execs; x != NULL; x = x->next)
		if (!x->finished && json_is_integer(x->exec_id) &&
		    (uint64_t)json_integer_value(x->exec_id) == id)
			return x;
	return NULL;
}

static void ok_answer(struct evhttp_request *req)
{
	pdk__http_json(req, 200, json_pack("{s:b}", "ok", 1));
}

void pdk__exec_stdin(struct pdk_sb *sb, struct evhttp_request *req, uint64_t exec_id,
		     const char *data, size_t len, bool eof)
{
	struct pdk_exec *x = exec_find(sb, exec_id);

	if (x == NULL) {
		pdk__http_error(req, 404, "not_found", "exec_id",
				"no running command %llu in this sandbox",
				(unsigned long long)exec_id);
		return;
	}
	if (!x->stdin_open) {
		pdk__http_error(req, 409, "conflict", "stdin_open",
				"the command's stdin is not open: start it with \"stdin_open\": "
				"true (streaming) or \"pty\": true");
		return;
	}
	if (x->in_fd < 0 || x->in_ev == NULL || x->in_eof) {
		pdk__http_error(req, 409, "conflict", "stdin", "the command's stdin is closed");
		return;
	}
	if (evbuffer_get_length(x->inq) + len + 1 > STDIN_QUEUE_MAX) {
		pdk__http_error(req, 429, "limit", "stdin",
				"more than %u bytes wait for the command to read them",
				STDIN_QUEUE_MAX);
		return;
	}
	evbuffer_add(x->inq, data, len);
	if (eof && x->pty)
		evbuffer_add(x->inq, "\x04", 1); /* ^D: end of input for the terminal's reader */
	else if (eof)
		x->in_eof = true;
	if (event_add(x->in_ev, NULL) < 0)
		pdk_oom();
	ok_answer(req);
}

void pdk__exec_resize(struct pdk_sb *sb, struct evhttp_request *req, uint64_t exec_id,
		      uint64_t cols, uint64_t rows)
{
	struct pdk_exec *x = exec_find(sb, exec_id);
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	int fd;

	if (x == NULL) {
		pdk__http_error(req, 404, "not_found", "exec_id",
				"no running command %llu in this sandbox",
				(unsigned long long)exec_id);
		return;
	}
	if (!x->pty) {
		pdk__http_error(req, 409, "conflict", "pty", "the command has no terminal");
		return;
	}
	fd = x->in_fd >= 0 ? x->in_fd : x->out.fd;
	if (fd < 0) {
		pdk__http_error(req, 409, "conflict", "pty", "the session's terminal is closed");
		return;
	}
	if (ioctl(fd, TIOCSWINSZ, &ws) < 0) {
		pdk__http_status_error(req, errno, "cannot set the terminal's size");
		return;
	}
	ok_answer(req);
}

/* Archive routes: tar inside the sandbox (files.c). */
void pdk__exec_tar(struct pdk_sb *sb, struct evhttp_request *req, const char *dir, bool create,
		   char *body, size_t body_len, uint64_t max);
void pdk__exec_tar(struct pdk_sb *sb, struct evhttp_request *req, const char *dir, bool create,
		   char *body, size_t body_len, uint64_t max)
{
	char *argv[] = {(char *)"tar",
			create ? (char *)"-c" : (char *)"-x",
			(char *)"-f",
			(char *)"-",
			(char *)"-C",
			(char *)dir,
			create ? (char *)"." : NULL,
			NULL};
	struct pdk_exec *x = exec_new(sb, req, create ? EXEC_RAW : EXEC_STATUS, 8192);

	x->raw_max = max;
	x->out.head_max = max; /* EXEC_RAW keeps the whole archive, up to max */
	free(x->out.head);
	x->out.head = pdk_xmalloc(create ? max + 1 : 1);
	x->in_data = body;
	x->in_len = body_len;
	(void)exec_launch(x, argv, NULL, "/", 0);
}
