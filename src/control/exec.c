/*
 * exec.c - commands in a sandbox: the exec request to the supervisor, the
 * control plane's ends of the stdio pipes (or of the pty), output captured
 * (capture.c) or handed over as it comes, stdin queued from the caller,
 * and tar for the archive operations.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define READ_CHUNK      65536
#define EARLY_MAX       (1u << 20) /* output held until the start answer */
#define DRAIN_GRACE_MS  200 /* after the exit, how long a lingering pipe writer is waited for */
#define STDIN_QUEUE_MAX (4u << 20) /* bytes from pdk_ctl_exec_stdin() not yet written */
#define TAR_STDERR_CAP  8192
/*
 * Archive transfers (tar in the sandbox, either way) a sandbox may have at
 * once: each holds a tar process, and an upload its body, until it ends.
 */
#define TRANSFERS_MAX 4

enum exec_mode {
	EXEC_SYNC,   /* captured, answered at the end */
	EXEC_STREAM, /* handed over as it comes */
	EXEC_RAW,    /* stdout is the result, handed over a chunk at a time (archive download) */
	EXEC_STATUS, /* success, or stderr as the error (archive upload) */
};

struct pdk_ctl_exec {
	struct pdk_ctl_exec *next;
	struct pdk_ctl_sb *sb;
	enum exec_mode mode;
	struct pdk_ctl_exec_cbs cbs;   /* EXEC_SYNC, EXEC_STREAM */
	pdk_ctl_archive_cb archive_cb; /* EXEC_RAW, EXEC_STATUS */
	void *ctx;
	json_t *exec_id; /* the supervisor's */
	json_t *exit;    /* the exit event once it came */
	struct pdk_capture out, err;
	int in_fd;
	struct event *in_ev, *grace;
	char *in_data;
	size_t in_len, in_off;
	uint64_t raw_max;
	bool started, finished, raw_too_big;
	bool raw_wait; /* EXEC_RAW: stdout waits for pdk_ctl_archive_more() */
	bool closed;   /* the streaming caller's client is gone */
	bool cancel;   /* the caller gave it up: killed once started */
	/* pty: out.fd is the terminal's master, in_fd a second descriptor of it. */
	bool pty;
	bool stdin_open;      /* pdk_ctl_exec_stdin() may write (in_fd stays open) */
	bool in_eof;          /* close in_fd once inq is written */
	struct evbuffer *inq; /* bytes from pdk_ctl_exec_stdin() */
	uint64_t start_ns;
	/* Start slots (below): waiting for one with its exec call, or holding one since slot_ns. */
	bool queued, holds_slot;
	json_t *op;
	struct pdk_ctl_exec *wnext; /* the sandbox's next waiting command */
	uint64_t slot_ns;
};

static void started(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx);
static void slot_release(struct pdk_ctl_exec *x);
static void unqueue(struct pdk_ctl_exec *x);

static void call_dropped(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	(void)sb;
	(void)reply;
	(void)ctx;
	pdk__close_fds(fds, nfds);
}

/* Calls still pending for `x` must not reach it once it is freed. */
static void detach_calls(struct pdk_ctl_exec *x)
{
	for (struct pdk_sb_call *c = x->sb->calls; c != NULL; c = c->next)
		if (c->cb == started && c->ctx == x) {
			c->cb = call_dropped;
			c->ctx = NULL;
		}
	pdk__capture_detach(x->sb, &x->out);
	pdk__capture_detach(x->sb, &x->err);
}

static void exec_free(struct pdk_ctl_exec *x)
{
	if (x->mode == EXEC_RAW || x->mode == EXEC_STATUS)
		x->sb->transfers--;
	unqueue(x);
	slot_release(x);
	detach_calls(x);
	pdk__capture_release(&x->out);
	pdk__capture_release(&x->err);
	pdk__ctl_unwatch(&x->in_ev, &x->in_fd);
	if (x->grace != NULL)
		event_free(x->grace);
	if (x->inq != NULL)
		evbuffer_free(x->inq);
	json_decref(x->exec_id);
	json_decref(x->exit);
	json_decref(x->op); /* a command that never got its turn */
	free(x->in_data);
	free(x);
}

static void exec_unlink(struct pdk_ctl_exec *x)
{
	for (struct pdk_ctl_exec **p = &x->sb->execs; *p != NULL; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			return;
		}
}

/* ---- finishing ---- */

static void exit_of(struct pdk_ctl_exec *x, struct pdk_ctl_exit *e)
{
	json_t *code = json_object_get(x->exit, "exit_code");
	json_t *sig = json_object_get(x->exit, "signal");
	const char *end = json_string_value(json_object_get(x->exit, "end"));

	memset(e, 0, sizeof(*e));
	e->exec_id = (uint64_t)json_integer_value(x->exec_id);
	e->has_exit_code = json_is_integer(code);
	e->exit_code = (int)json_integer_value(code);
	e->has_signal = json_is_integer(sig);
	e->signal = (int)json_integer_value(sig);
	(void)snprintf(e->end, sizeof(e->end), "%s", end ? end : "killed");
	e->duration_ms = (pdk_now_mono_ns() - x->start_ns) / 1000000;
	e->denied = json_is_array(json_object_get(x->exit, "denied"))
			    ? json_object_get(x->exit, "denied")
			    : NULL;
	e->denied_more = (uint64_t)json_integer_value(json_object_get(x->exit, "denied_more"));
}

/* A pty session's end is recorded: its output went to a terminal, not into an answer. */
static void record_pty_exit(struct pdk_ctl_exec *x, const struct pdk_ctl_exit *e)
{
	json_t *a = json_pack("{s:O, s:o, s:o, s:s, s:I, s:b}", "exec_id", x->exec_id, "exit_code",
			      e->has_exit_code ? json_integer(e->exit_code) : json_null(), "signal",
			      e->has_signal ? json_integer(e->signal) : json_null(), "end", e->end,
			      "duration_ms", (json_int_t)e->duration_ms, "pty", 1);

	pdk_ctl_event(x->sb->c, x->sb->row.id, x->sb->labels, "exec.exit", a);
}

static void finish_command(struct pdk_ctl_exec *x)
{
	struct pdk_ctl_exec_result r;

	exit_of(x, &r.exit);
	pdk__capture_output(&x->out, &r.out);
	pdk__capture_output(&x->err, &r.err);
	if (x->mode == EXEC_STREAM && x->pty)
		record_pty_exit(x, &r.exit);
	x->cbs.done(x->ctx, &r, NULL);
}

static void finish_archive(struct pdk_ctl_exec *x)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *code = json_object_get(x->exit, "exit_code");

	if (x->raw_too_big) {
		(void)pdk_error_set_field(&err, E2BIG, "path",
					  "the archive is larger than %llu bytes",
					  (unsigned long long)x->raw_max);
	} else if (!json_is_integer(code) || json_integer_value(code) != 0) {
		size_t len;
		_cleanup_free_ char *t =
			pdk_utf8_clean(x->err.head, x->err.head_len, false, &len, NULL);

		(void)pdk_error_set_field(&err, EINVAL, "path", "tar failed: %s", t);
	}
	x->archive_cb(x->ctx, NULL, 0, err);
}

static void fail_unstarted(struct pdk_ctl_exec *x, const struct pdk_error *err)
{
	if (x->mode == EXEC_SYNC || x->mode == EXEC_STREAM)
		x->cbs.done(x->ctx, NULL, err);
	else
		x->archive_cb(x->ctx, NULL, 0, err);
}

static void exec_finish(struct pdk_ctl_exec *x)
{
	struct pdk_ctl_sb *sb = x->sb;

	if (x->finished)
		return;
	x->finished = true;
	pdk__sb_charge_exec(sb, x->out.total + x->err.total, 0);
	if (x->exit == NULL)
		x->exit = json_pack("{s:s}", "end", "killed");
	if (!x->started) {
		_cleanup_error_ struct pdk_error *err = NULL;

		/* The sandbox went away before the command started. */
		(void)pdk_error_setx(&err, ENOTCONN,
				     "the sandbox ended before the command started");
		fail_unstarted(x, err);
	} else {
		pdk__sb_first_exec_done(sb);
		pdk__sb_ingest_soon(sb);
		if (x->mode == EXEC_SYNC || x->mode == EXEC_STREAM)
			finish_command(x);
		else
			finish_archive(x);
	}
	exec_unlink(x);
	exec_free(x);
}

/*
 * Both pipes at their end, and no spill file still being opened: the answer
 * names the file, so a caller that reads it at once finds all its bytes.
 */
static bool drained(const struct pdk_ctl_exec *x)
{
	return x->out.eof && x->err.eof && !pdk__capture_spill_pending(&x->out) &&
	       !pdk__capture_spill_pending(&x->err);
}

static void maybe_finish(struct pdk_ctl_exec *x)
{
	if (x->exit != NULL && drained(x))
		exec_finish(x);
}

static void spill_ready(void *arg)
{
	maybe_finish(arg);
}

static void grace_over(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	exec_finish(arg);
}

void pdk__exec_exited(struct pdk_ctl_sb *sb, json_t *ev)
{
	json_t *id = json_object_get(ev, "exec");

	for (struct pdk_ctl_exec *x = sb->execs; x != NULL; x = x->next) {
		struct timeval tv = {0, DRAIN_GRACE_MS * 1000};

		if (x->exec_id == NULL || !json_equal(x->exec_id, id))
			continue;
		slot_release(x);
		x->exit = json_incref(ev);
		if (drained(x)) {
			exec_finish(x);
			return;
		}
		/* The output is all read; the spill file's open finishes it (spill_ready). */
		if (x->out.eof && x->err.eof)
			return;
		/* An archive's stdout is read to its end, however slowly its client takes it. */
		if (x->mode == EXEC_RAW)
			return;
		/* A background process may hold the pipes: the answer does not wait for it long. */
		x->grace = evtimer_new(sb->c->base, grace_over, x);
		if (x->grace == NULL || evtimer_add(x->grace, &tv) < 0)
			pdk_oom();
		return;
	}
}

void pdk__exec_abort_all(struct pdk_ctl_sb *sb)
{
	while (sb->execs != NULL)
		exec_finish(sb->execs);
}

/* ---- output ---- */

static void output_eof(struct pdk_capture *c);

/*
 * An archive's bytes go to the caller as they come, one chunk at a time:
 * stdout is not read again until the caller has sent them on
 * (pdk_ctl_archive_more()), so a slow client slows tar down instead of
 * filling the daemon's memory. Past raw_max, stdout is closed (tar ends on
 * EPIPE) and the end is an error.
 */
static void raw_output(struct pdk_ctl_exec *x, const char *buf, size_t n)
{
	struct pdk_capture *c = &x->out;

	c->total += n;
	if (c->total > x->raw_max) {
		x->raw_too_big = true;
		output_eof(c);
		return;
	}
	if (x->closed)
		return;
	x->raw_wait = true;
	if (c->ev != NULL)
		(void)event_del(c->ev);
	x->archive_cb(x->ctx, buf, n, NULL);
}

/* Bytes of one stream: to the streaming caller, the raw result, or the capture. */
static void handle_output(struct pdk_ctl_exec *x, struct pdk_capture *c, const char *buf, size_t n)
{
	if (x->mode == EXEC_STREAM) {
		c->total += n;
		if (!x->closed)
			x->cbs.output(x->ctx, c == &x->out ? 1 : 2, buf, n);
		return;
	}
	if (x->mode == EXEC_RAW && c == &x->out) {
		raw_output(x, buf, n);
		return;
	}
	pdk__capture_add(x->sb, x->exec_id, c, buf, n);
}

/*
 * The pipes and the control socket are watched by the same loop: output can
 * be read before the start answer (which gives the exec id the spill file and
 * the streaming caller need). It waits in c->early until then.
 */
static void replay_early(struct pdk_ctl_exec *x, struct pdk_capture *c)
{
	size_t n = c->early ? evbuffer_get_length(c->early) : 0;

	if (n > 0)
		handle_output(x, c, (const char *)evbuffer_pullup(c->early, (ssize_t)n), n);
	if (c->early != NULL) {
		evbuffer_free(c->early);
		if (c->ev != NULL && !(x->raw_wait && c == &x->out) && event_add(c->ev, NULL) < 0)
			pdk_oom();
	}
	c->early = NULL;
}

static void output_eof(struct pdk_capture *c)
{
	pdk__ctl_unwatch(&c->ev, &c->fd);
	c->eof = true;
}

static void output_readable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl_exec *x = arg;
	struct pdk_capture *c = fd == x->out.fd ? &x->out : &x->err;
	char buf[READ_CHUNK];
	ssize_t n;

	(void)what;
	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		output_eof(c);
		maybe_finish(x);
		return;
	}
	if (!x->started) {
		if (c->early == NULL)
			c->early = pdk__ctl_buf_new();
		pdk__ctl_buf_add(c->early, buf, (size_t)n);
		/* Bounded: past EARLY_MAX the pipe is left to fill (the command waits). */
		if (evbuffer_get_length(c->early) >= EARLY_MAX)
			(void)event_del(c->ev);
		return;
	}
	handle_output(x, c, buf, (size_t)n);
	/* An archive past its cap had its stdout closed: its end may be all that is left. */
	if (x->mode == EXEC_RAW && c->eof)
		maybe_finish(x);
}

/* ---- input ---- */

static void input_close(struct pdk_ctl_exec *x)
{
	pdk__ctl_unwatch(&x->in_ev, &x->in_fd);
}

static bool inq_empty(const struct pdk_ctl_exec *x)
{
	return x->inq == NULL || evbuffer_get_length(x->inq) == 0;
}

/* The initial stdin, then what pdk_ctl_exec_stdin() queued; EOF when all is written. */
static void input_writable(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl_exec *x = arg;
	ssize_t n = 0;

	(void)what;
	if (x->in_off < x->in_len) {
		n = write(fd, x->in_data + x->in_off, x->in_len - x->in_off);
		if (n > 0)
			x->in_off += (size_t)n;
	} else if (!inq_empty(x)) {
		n = evbuffer_write(x->inq, fd);
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) { /* the command stopped reading */
		input_close(x);
		return;
	}
	if (x->in_off < x->in_len || !inq_empty(x))
		return;
	if (x->pty || (x->stdin_open && !x->in_eof))
		(void)event_del(x->in_ev); /* until more is queued */
	else
		input_close(x); /* EOF for the command */
}

/*
 * What pdk_ctl_exec_stdin() queued, written at once when nothing is waiting
 * for the descriptor: a streaming command fed one message at a time (an MCP
 * upstream, one request per call) then costs one write per message, not an
 * epoll_ctl to watch the descriptor, a turn of the loop, and another
 * epoll_ctl to stop watching it. What the pipe does not take now is written
 * when it is writable, as before; the order of the bytes is the queue's.
 */
static void input_push(struct pdk_ctl_exec *x)
{
	if (x->in_off >= x->in_len && !event_pending(x->in_ev, EV_WRITE, NULL)) {
		input_writable(x->in_fd, EV_WRITE, x);
		if (x->in_ev == NULL || inq_empty(x))
			return; /* all written (or stdin closed: the command stopped reading) */
	}
	if (event_add(x->in_ev, NULL) < 0)
		pdk_oom();
}

static void kill_sent(void *ctx, json_t *doc, const struct pdk_error *err)
{
	(void)ctx;
	(void)doc;
	(void)err; /* the command's end comes as its exit, whatever the signal's answer */
}

/* SECURITY: a cancelled command's whole process group goes, not only its first process. */
static void kill_group(struct pdk_ctl_exec *x)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_ctl_signal(x->sb, (uint64_t)json_integer_value(x->exec_id), SIGKILL, kill_sent,
			   NULL, &err) < 0)
		pdk__ctl_log(x->sb->c, PDK_LOG_WARN, "cancel of command %lld: %s",
			     (long long)json_integer_value(x->exec_id), err->msg);
}

void pdk_ctl_exec_cancel(struct pdk_ctl_exec *x)
{
	if (x->cancel || x->finished)
		return;
	x->cancel = true;
	if (x->started && json_is_integer(x->exec_id))
		kill_group(x);
}

void pdk_ctl_exec_close(struct pdk_ctl_exec *x)
{
	x->closed = true;
	input_close(x);
	/* A pty session loses its terminal (SIGHUP); tar making an archive, its stdout (EPIPE). */
	if (x->pty && x->out.fd >= 0)
		output_eof(&x->out);
	if (x->mode == EXEC_RAW && x->out.fd >= 0) {
		output_eof(&x->out);
		maybe_finish(x); /* x may be gone now */
	}
}

void pdk_ctl_archive_more(struct pdk_ctl_exec *x)
{
	if (!x->raw_wait)
		return;
	x->raw_wait = false;
	if (x->out.ev != NULL && x->out.early == NULL && event_add(x->out.ev, NULL) < 0)
		pdk_oom();
}

/* ---- starting ---- */

static int nonblock(int fd)
{
	return fcntl(fd, F_SETFL, O_NONBLOCK);
}

static void watch(struct pdk_ctl_exec *x, struct event **ev, int fd, short what,
		  event_callback_fn fn, bool now)
{
	*ev = event_new(x->sb->c->base, fd, what | EV_PERSIST, fn, x);
	if (*ev == NULL || (now && event_add(*ev, NULL) < 0))
		pdk_oom();
}

/* The pty master from the start answer: output from it, stdin to a second descriptor of it. */
static void pty_attach(struct pdk_ctl_exec *x, int master)
{
	x->out.fd = master;
	x->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 0);
	if (x->in_fd < 0 || nonblock(master) < 0) {
		/* No terminal to serve: the session is closed, the command gets SIGHUP. */
		input_close(x);
		output_eof(&x->out);
		return;
	}
	watch(x, &x->out.ev, x->out.fd, EV_READ, output_readable, true);
	watch(x, &x->in_ev, x->in_fd, EV_WRITE, input_writable, false);
}

static void started(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	struct pdk_ctl_exec *x = ctx;
	int master = -1;

	if (x->pty && nfds == 1 && !pdk__svc_failed(reply)) {
		master = fds[0];
		nfds = 0;
	}
	pdk__close_fds(fds, nfds);
	if (pdk__svc_failed(reply)) {
		_cleanup_error_ struct pdk_error *err = NULL;

		(void)pdk_ctl_svc_error(reply, &err);
		x->finished = true;
		exec_unlink(x);
		fail_unstarted(x, err);
		exec_free(x);
		return;
	}
	x->exec_id = json_incref(json_object_get(reply, "exec"));
	x->started = true;
	pdk__sb_charge_exec(sb, 0, 1);
	if (x->cancel && json_is_integer(x->exec_id))
		kill_group(x);
	if (x->mode == EXEC_STREAM)
		x->cbs.started(x->ctx, (uint64_t)json_integer_value(x->exec_id),
			       (int)json_integer_value(json_object_get(reply, "pid")), x->pty);
	if (x->pty) {
		x->err.eof = true; /* one stream: the terminal */
		if (master >= 0 && !x->closed)
			pty_attach(x, master);
		else if (master >= 0)
			(void)close(master);
		if (x->out.fd < 0)
			x->out.eof = true;
	}
	replay_early(x, &x->out);
	replay_early(x, &x->err);
}

static struct pdk_ctl_exec *exec_new(struct pdk_ctl_sb *sb, enum exec_mode mode, uint64_t cap,
				     void *ctx)
{
	struct pdk_ctl_exec *x = pdk_xcalloc(1, sizeof(*x));

	x->sb = sb;
	x->mode = mode;
	x->ctx = ctx;
	x->in_fd = -1;
	x->start_ns = pdk_now_mono_ns();
	pdk__capture_init(&x->out, "stdout", cap);
	pdk__capture_init(&x->err, "stderr", mode == EXEC_SYNC ? cap : TAR_STDERR_CAP);
	x->out.spill_ready = x->err.spill_ready = spill_ready;
	x->out.spill_ready_arg = x->err.spill_ready_arg = x;
	return x;
}

static void close_pipes(int p[3][2])
{
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 2; j++)
			if (p[i][j] >= 0)
				(void)close(p[i][j]);
}

/* Our ends of the pipes, watched by the loop; the command's went to the supervisor. */
static void attach_pipes(struct pdk_ctl_exec *x, int p[3][2])
{
	x->in_fd = p[0][1];
	x->out.fd = p[1][0];
	x->err.fd = p[2][0];
	(void)close(p[0][0]);
	(void)close(p[1][1]);
	(void)close(p[2][1]);
	/*
	 * A read after the loop said readable does not block even on a blocking
	 * pipe; a write could, so a stdin that cannot be made non-blocking is
	 * closed instead (the command reads EOF).
	 */
	(void)nonblock(x->out.fd);
	(void)nonblock(x->err.fd);
	watch(x, &x->out.ev, x->out.fd, EV_READ, output_readable, true);
	watch(x, &x->err.ev, x->err.fd, EV_READ, output_readable, true);
	if ((x->in_len == 0 && !x->stdin_open) || nonblock(x->in_fd) < 0) {
		(void)close(x->in_fd);
		x->in_fd = -1;
	} else {
		watch(x, &x->in_ev, x->in_fd, EV_WRITE, input_writable, x->in_len > 0);
	}
}

static json_t *exec_op(char *const *argv, char *const *env, const char *cwd, uint64_t timeout_ms)
{
	json_t *op = json_pack("{s:s, s:o, s:o, s:I, s:b}", "op", "exec", "argv",
			       pdk_json_strv(argv), "env", env ? pdk_json_strv(env) : json_array(),
			       "timeout_ms", (json_int_t)timeout_ms, "pty", 0);

	if (op == NULL)
		pdk_oom();
	if (cwd != NULL)
		pdk_json_set(op, "cwd", json_string(cwd));
	return op;
}

/*
 * Start slots. A burst of commands all started at once (50 clients, each
 * claiming a sandbox and running its first command) share the CPUs evenly:
 * every supervisor, init, exec trace and program progresses together, and
 * nearly all of them answer at the end of the burst's work. Started a few
 * at a time (pdk_ctl_opts.exec_starts), the same work answers in the order
 * it came, and the median answer comes at half the work instead of at its
 * end (docs/internals/performance.md, fourteenth round). A command holds
 * its slot until it exits or for START_HOLD_MS, whichever is first, so a
 * long-running one delays those behind it by START_HOLD_MS at most. The
 * waiting commands of one sandbox start in order; the sandboxes take turns,
 * the one served longest ago first, so that a burst in one sandbox does not
 * hold another's command back for long. A pty session does not wait (a
 * terminal is a person), nor does a pool member's warm-up.
 */
#define START_HOLD_MS 20
#define START_HOLD_NS (START_HOLD_MS * 1000000ULL)

static void slots_due(evutil_socket_t fd, short what, void *arg);

/* The slot timer, `ns` from now (0: a pass at the loop's next turn). */
static void slots_timer(struct pdk_ctl *c, uint64_t ns)
{
	struct timeval tv = {(time_t)(ns / 1000000000ULL),
			     (suseconds_t)(ns % 1000000000ULL / 1000)};

	if (c->slot_ev == NULL && (c->slot_ev = evtimer_new(c->base, slots_due, c)) == NULL)
		pdk_oom();
	if (evtimer_add(c->slot_ev, &tv) < 0)
		pdk_oom();
}

static bool slots_timer_set(const struct pdk_ctl *c)
{
	return c->slot_ev != NULL && evtimer_pending(c->slot_ev, NULL);
}

/* The slot timer at the earliest end of a held slot; none without one. */
static void slots_arm(struct pdk_ctl *c)
{
	uint64_t t = pdk_now_mono_ns(), first = UINT64_MAX;

	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		for (struct pdk_ctl_exec *x = sb->execs; x != NULL; x = x->next)
			if (x->holds_slot && x->slot_ns + START_HOLD_NS < first)
				first = x->slot_ns + START_HOLD_NS;
	if (first != UINT64_MAX)
		slots_timer(c, first > t ? first - t : 0);
	else if (c->slot_ev != NULL)
		evtimer_del(c->slot_ev);
}

static void slot_release(struct pdk_ctl_exec *x)
{
	struct pdk_ctl *c = x->sb->c;

	if (!x->holds_slot)
		return;
	x->holds_slot = false;
	c->starting--;
	if (c->waiting > 0)
		slots_timer(c, 0); /* not here: the caller may be in the middle of its own work */
	else if (c->starting == 0 && c->slot_ev != NULL)
		evtimer_del(c->slot_ev);
}

static void unqueue(struct pdk_ctl_exec *x)
{
	if (!x->queued)
		return;
	for (struct pdk_ctl_exec **p = &x->sb->waiting; *p != NULL; p = &(*p)->wnext)
		if (*p == x) {
			*p = x->wnext;
			break;
		}
	x->queued = false;
	x->sb->c->waiting--;
}

/* Pipes, the exec call in a start slot, the loop's watchers. On error, x is left to the caller. */
static int exec_send(struct pdk_ctl_exec *x, json_t *op, struct pdk_error **err)
{
	struct pdk_ctl *c = x->sb->c;
	int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	int fds[3];
	int rc = 0;

	for (int i = 0; i < 3 && rc == 0; i++)
		if (pipe2(p[i], O_CLOEXEC) < 0)
			rc = -errno;
	fds[0] = p[0][0];
	fds[1] = p[1][1];
	fds[2] = p[2][1];
	if (rc == 0)
		rc = pdk__sb_call(x->sb, op, fds, 3, started, x);
	else
		json_decref(op);
	if (rc < 0) {
		close_pipes(p);
		return pdk_error_setx(err, rc == -ENOTCONN ? ENOTCONN : EIO,
				      "cannot start the command in the sandbox");
	}
	attach_pipes(x, p);
	x->holds_slot = true;
	x->slot_ns = pdk_now_mono_ns();
	x->sb->start_seq = ++c->start_seq;
	c->starting++;
	/* A timer already set goes off no later: an earlier slot's end, or a pass at once. */
	if (!slots_timer_set(c))
		slots_timer(c, START_HOLD_NS);
	return 0;
}

/* A waiting command's turn: it starts, or fails as one that never started. */
static void send_waiting(struct pdk_ctl_exec *x)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	json_t *op = x->op;

	x->op = NULL;
	if (x->cancel) {
		json_decref(op);
		(void)pdk_error_setx(&err, ECANCELED,
				     "the command was cancelled before it started");
	} else if ((x->mode == EXEC_SYNC || x->mode == EXEC_STREAM) &&
		   pdk_ctl_budget_check(x->sb, "exec", &err) < 0) {
		json_decref(op); /* the budget was spent while it waited */
	} else if (exec_send(x, op, &err) == 0) {
		return;
	}
	x->finished = true;
	exec_unlink(x);
	fail_unstarted(x, err);
	exec_free(x);
}

/* The slots that are over, then the waiting commands into the free ones, sandboxes in turn. */
static void slots_due(evutil_socket_t fd, short what, void *arg)
{
	struct pdk_ctl *c = arg;
	uint64_t t = pdk_now_mono_ns();

	(void)fd;
	(void)what;
	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		for (struct pdk_ctl_exec *x = sb->execs; x != NULL; x = x->next)
			if (x->holds_slot && x->slot_ns + START_HOLD_NS <= t) {
				x->holds_slot = false;
				c->starting--;
			}
	while (c->waiting > 0 && c->starting < c->exec_starts) {
		struct pdk_ctl_sb *turn = NULL;
		struct pdk_ctl_exec *x;

		for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
			if (sb->waiting != NULL &&
			    (turn == NULL || sb->start_seq < turn->start_seq))
				turn = sb;
		if (turn == NULL)
			break;
		x = turn->waiting;
		unqueue(x);
		send_waiting(x);
	}
	slots_arm(c);
}

/*
 * The exec call now, or in its turn when every start slot is taken or other
 * commands wait (in which case it waits behind them). On error, `x` is freed.
 */
static int exec_launch(struct pdk_ctl_exec *x, json_t *op, struct pdk_error **err)
{
	struct pdk_ctl *c = x->sb->c;

	if (c->starting >= c->exec_starts || c->waiting > 0) {
		struct pdk_ctl_exec **p = &x->sb->waiting;

		while (*p != NULL)
			p = &(*p)->wnext;
		*p = x;
		x->queued = true;
		x->op = op;
		c->waiting++;
		/* A timer already set (a slot's end, or a pass) takes it in its turn. */
		if (!slots_timer_set(c) && c->starting < c->exec_starts)
			slots_timer(c, 0);
		else if (!slots_timer_set(c))
			slots_arm(c);
	} else {
		int rc = exec_send(x, op, err);

		if (rc < 0) {
			exec_free(x);
			return rc;
		}
	}
	x->next = x->sb->execs;
	x->sb->execs = x;
	return 0;
}

/* A pty exec: the supervisor answers with the terminal's master (started()). */
static int exec_launch_pty(struct pdk_ctl_exec *x, const struct pdk_ctl_exec_req *r,
			   struct pdk_error **err)
{
	json_t *op = exec_op(r->argv, r->env, r->cwd, r->timeout_ms);

	pdk_json_set(op, "pty", json_true());
	pdk_json_set(op, "cols", json_integer((json_int_t)r->cols));
	pdk_json_set(op, "rows", json_integer((json_int_t)r->rows));
	if (pdk__sb_call(x->sb, op, NULL, 0, started, x) < 0) {
		exec_free(x);
		return pdk_error_setx(err, EIO, "cannot start the command in the sandbox");
	}
	x->next = x->sb->execs;
	x->sb->execs = x;
	return 0;
}

static int exec_check(struct pdk_ctl_sb *sb, const struct pdk_ctl_exec_req *r, bool stream,
		      struct pdk_error **err)
{
	if (pdk_ctl_budget_check(sb, "exec", err) < 0)
		return -EDQUOT;
	if ((r->pty || r->stdin_open) && !stream)
		return pdk_error_set_field(err, EINVAL, r->pty ? "pty" : "stdin_open",
					   "'%s' needs a streamed command",
					   r->pty ? "pty" : "stdin_open");
	if (r->output_cap < 64)
		return pdk_error_set_field(err, EINVAL, "output_cap",
					   "'output_cap' must be at least 64");
	return 0;
}

static json_t *request_attrs(const struct pdk_ctl_exec_req *r, bool stream)
{
	json_t *a = json_pack("{s:o, s:b, s:b}", "argv", pdk_json_strv(r->argv), "stream", stream,
			      "pty", r->pty);

	if (a == NULL)
		pdk_oom();
	if (r->tag != NULL)
		pdk_json_set(a, "tag", json_string(r->tag));
	return a;
}

int pdk_ctl_exec(struct pdk_ctl_sb *sb, const struct pdk_ctl_exec_req *r, bool stream,
		 const struct pdk_ctl_exec_cbs *cbs, void *ctx, struct pdk_ctl_exec **out,
		 struct pdk_error **err)
{
	struct pdk_ctl_exec *x;
	int rc;

	rc = exec_check(sb, r, stream, err);
	if (rc < 0)
		return rc;
	x = exec_new(sb, stream ? EXEC_STREAM : EXEC_SYNC, r->output_cap, ctx);
	x->cbs = *cbs;
	x->pty = r->pty;
	x->stdin_open = r->stdin_open || r->pty;
	if (x->stdin_open)
		x->inq = pdk__ctl_buf_new();
	if (r->stdin_len > 0) {
		x->in_data = pdk_xmalloc(r->stdin_len);
		memcpy(x->in_data, r->stdin_data, r->stdin_len);
		x->in_len = r->stdin_len;
	}
	if (out != NULL)
		*out = x;
	/*
	 * The request goes to the supervisor first, then into the audit store:
	 * the audit transaction runs while the supervisor and the init start
	 * the command, not before. The record is written either way, before
	 * the answer (which needs the loop's next turns) and before the spool's
	 * process.exec is ingested (a later turn too): the order in the audit
	 * chain stays request, then exec.
	 */
	if (r->pty)
		rc = exec_launch_pty(x, r, err);
	else
		rc = exec_launch(x, exec_op(r->argv, r->env, r->cwd, r->timeout_ms), err);
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "exec.request", request_attrs(r, stream));
	if (rc < 0 && out != NULL)
		*out = NULL;
	return rc;
}

/* ---- stdin and the terminal ---- */

static struct pdk_ctl_exec *exec_find(struct pdk_ctl_sb *sb, uint64_t id, struct pdk_error **err)
{
	for (struct pdk_ctl_exec *x = sb->execs; x != NULL; x = x->next)
		if (!x->finished && json_is_integer(x->exec_id) &&
		    (uint64_t)json_integer_value(x->exec_id) == id)
			return x;
	(void)pdk_error_set_field(err, ENOENT, "exec_id", "no running command %llu in this sandbox",
				  (unsigned long long)id);
	return NULL;
}

int pdk_ctl_exec_stdin(struct pdk_ctl_sb *sb, uint64_t exec_id, const char *data, size_t len,
		       bool eof, struct pdk_error **err)
{
	struct pdk_ctl_exec *x = exec_find(sb, exec_id, err);

	if (x == NULL)
		return -ENOENT;
	if (!x->stdin_open)
		return pdk_error_set_field(err, EALREADY, "stdin_open",
					   "the command's stdin is not open: start it with "
					   "\"stdin_open\": true (streaming) or \"pty\": true");
	if (x->in_fd < 0 || x->in_ev == NULL || x->in_eof)
		return pdk_error_set_field(err, EALREADY, "stdin", "the command's stdin is closed");
	if (evbuffer_get_length(x->inq) + len + 1 > STDIN_QUEUE_MAX)
		return pdk_error_set_field(err, EDQUOT, "stdin",
					   "more than %u bytes wait for the command to read them",
					   STDIN_QUEUE_MAX);
	pdk__ctl_buf_add(x->inq, data, len);
	/* A terminal's reader sees the end of input as ^D; a pipe is closed once the queue is
	 * written. */
	if (eof && x->pty)
		pdk__ctl_buf_add(x->inq, "\x04", 1);
	else if (eof)
		x->in_eof = true;
	input_push(x);
	return 0;
}

int pdk_ctl_exec_resize(struct pdk_ctl_sb *sb, uint64_t exec_id, uint64_t cols, uint64_t rows,
			struct pdk_error **err)
{
	struct pdk_ctl_exec *x = exec_find(sb, exec_id, err);
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	int fd;

	if (x == NULL)
		return -ENOENT;
	if (!x->pty)
		return pdk_error_set_field(err, EALREADY, "pty", "the command has no terminal");
	fd = x->in_fd >= 0 ? x->in_fd : x->out.fd;
	if (fd < 0)
		return pdk_error_set_field(err, EALREADY, "pty",
					   "the session's terminal is closed");
	if (ioctl(fd, TIOCSWINSZ, &ws) < 0)
		return pdk_error_setx(err, errno, "cannot set the terminal's size");
	return 0;
}

/* ---- tar for the archive operations ---- */

int pdk__transfer_check(struct pdk_ctl_sb *sb, struct pdk_error **err)
{
	if (sb->transfers < TRANSFERS_MAX)
		return 0;
	return pdk_error_setx(err, EAGAIN,
			      "%u archive transfers of this sandbox are running, the most it may "
			      "have at once: retry when one has ended",
			      TRANSFERS_MAX);
}

int pdk__exec_tar(struct pdk_ctl_sb *sb, const char *dir, bool create, char *body, size_t body_len,
		  uint64_t max, pdk_ctl_archive_cb cb, void *ctx, struct pdk_ctl_exec **out,
		  struct pdk_error **err)
{
	char *argv[] = {(char *)"tar",
			create ? (char *)"-c" : (char *)"-x",
			(char *)"-f",
			(char *)"-",
			(char *)"-C",
			(char *)dir,
			create ? (char *)"." : NULL,
			NULL};
	struct pdk_ctl_exec *x;
	int rc;

	/* SECURITY: a sandbox's transfers are capped (each holds a tar, an upload its body). */
	if (pdk__transfer_check(sb, err) < 0) {
		free(body);
		return -EAGAIN;
	}
	x = exec_new(sb, create ? EXEC_RAW : EXEC_STATUS, TAR_STDERR_CAP, ctx);
	sb->transfers++;
	x->archive_cb = cb;
	x->raw_max = max;
	x->in_data = body;
	x->in_len = body_len;
	rc = exec_launch(x, exec_op(argv, NULL, "/", 0), err);
	if (out != NULL)
		*out = rc < 0 ? NULL : x;
	return rc;
}
