/*
 * otlp-sink.c - the events-hub sink that feeds the paddock-otlp helper.
 *
 * The supervisor must never wait for a collector, so it never waits for
 * the helper either while the sandbox runs: events go out with
 * MSG_DONTWAIT on a socket whose buffer is the first bounded queue (the
 * helper's is the second); an event that does not fit is dropped from the
 * export and counted (the other sinks, such as the audit store, still have
 * it). A line the socket took only in part is kept and finished before the
 * next one, so the helper never sees a torn line. Only close() waits, and
 * at most the configured deadline, for the helper's report.
 */
#include "common.h"
#include "base.h"
#include "otlp.h"

#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPORT_MAX    4096
#define PDK_MIN(a, b) ((a) < (b) ? (a) : (b))

struct otlp_sink {
	int sock;
	int pidfd;
	pid_t pid;
	char *endpoint;
	uint64_t deadline_ms;
	char *rest; /* the unsent tail of a line */
	size_t rest_len, rest_off;
	uint64_t sent, dropped;
	bool broken; /* the helper is gone */
};

struct spawn_arg {
	int sock;
	const char *path;
	char *const *argv;
	char *const *envp;
};

/* In the child (shares our memory until exec, see pdk_proc_clone): no allocation. */
static int helper_child(void *arg)
{
	const struct spawn_arg *a = arg;

	if (dup2(a->sock, STDIN_FILENO) < 0 || dup2(a->sock, STDOUT_FILENO) < 0)
		_exit(127);
	execve(a->path, a->argv, a->envp);
	/*
	 * Tell the parent on the socket: it resumes once we exit (CLONE_VFORK),
	 * but may do so before our exit status is visible to waitid().
	 */
	if (write(STDOUT_FILENO, "E", 1) < 0)
		_exit(126);
	_exit(127);
}

static char *helper_path(const char *helper)
{
	if (helper != NULL && *helper != '\0')
		return pdk_xstrdup(helper);
	return pdk_paths_helper("paddock-otlp");
}

/* Send what remains of a partly sent line. 0 when all is out, -EAGAIN, or -errno. */
static int flush_rest(struct otlp_sink *s)
{
	while (s->rest != NULL) {
		ssize_t n = TEMP_FAILURE_RETRY(send(s->sock, s->rest + s->rest_off,
						    s->rest_len - s->rest_off,
						    MSG_DONTWAIT | MSG_NOSIGNAL));

		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		s->rest_off += (size_t)n;
		if (s->rest_off == s->rest_len) {
			free(s->rest);
			s->rest = NULL;
		}
	}
	return 0;
}

static int sink_emit(void *data, const json_t *event, struct pdk_error **err)
{
	struct otlp_sink *s = data;
	_cleanup_json_ json_t *clean = NULL;
	_cleanup_free_ char *line = NULL;
	size_t len;
	ssize_t n;
	int rc;

	(void)err;
	rc = s->broken ? -EPIPE : flush_rest(s);
	if (rc < 0) {
		s->broken |= rc != -EAGAIN;
		s->dropped++;
		return 0;
	}
	/* SECURITY: the helper gets valid UTF-8 only, so no event can fail to serialise. */
	clean = pdk_otlp_sanitize(event);
	line = pdk_json_dump_line(clean);
	len = line ? strlen(line) : 0;
	if (line == NULL || len > PDK_OTLP_EVENT_MAX) {
		s->dropped++;
		return 0;
	}
	n = TEMP_FAILURE_RETRY(send(s->sock, line, len, MSG_DONTWAIT | MSG_NOSIGNAL));
	if (n < 0) {
		s->broken |= errno != EWOULDBLOCK;
		s->dropped++;
		return 0;
	}
	s->sent++;
	if ((size_t)n < len) {
		s->rest = steal_ptr(&line);
		s->rest_len = len;
		s->rest_off = (size_t)n;
	}
	return 0;
}

static uint64_t ms_left(uint64_t deadline_ns)
{
	uint64_t now = pdk_now_mono_ns();

	return deadline_ns > now ? (deadline_ns - now + 999999) / 1000000 : 0;
}

/* Wait for `events` on the socket until the deadline. True when ready. */
static bool wait_sock(const struct otlp_sink *s, short events, uint64_t deadline_ns)
{
	struct pollfd p = {.fd = s->sock, .events = events};
	int r;

	do
		r = ms_left(deadline_ns) ? poll(&p, 1, (int)ms_left(deadline_ns)) : 0;
	while (r < 0 && errno == EINTR);
	return r > 0;
}

/* Finish the partial line, then tell the helper the stream is over. */
static void finish_stream(struct otlp_sink *s, uint64_t deadline_ns)
{
	while (!s->broken && s->rest != NULL) {
		int rc = flush_rest(s);

		if (rc == 0)
			break;
		if (rc != -EAGAIN || !wait_sock(s, POLLOUT, deadline_ns)) {
			s->broken = true;
			s->dropped++; /* that line never arrived whole */
			s->sent--;
		}
	}
	(void)shutdown(s->sock, SHUT_WR);
}

/* Read the helper's one-line report, until the deadline. NULL if none came. */
static json_t *read_report(struct otlp_sink *s, uint64_t deadline_ns)
{
	char buf[REPORT_MAX];
	size_t len = 0;

	while (len < sizeof(buf) - 1) {
		ssize_t n;

		if (!wait_sock(s, POLLIN, deadline_ns))
			return NULL;
		n = TEMP_FAILURE_RETRY(recv(s->sock, buf + len, sizeof(buf) - 1 - len, 0));
		if (n <= 0)
			return NULL;
		len += (size_t)n;
		if (memchr(buf, '\n', len) != NULL)
			break;
	}
	buf[len] = '\0';
	return json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
}

static uint64_t count_of(const json_t *r, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(r, key));

	return v > 0 ? (uint64_t)v : 0;
}

static void stop_helper(struct otlp_sink *s)
{
	siginfo_t si;

	if (s->pidfd < 0)
		return;
	/* Reported, or out of time: whatever is still in libcurl is abandoned. */
	(void)syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
	(void)TEMP_FAILURE_RETRY(waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED));
	(void)close(s->pidfd);
	s->pidfd = -1;
}

static int sink_close(void *data, struct pdk_error **err)
{
	struct otlp_sink *s = data;
	uint64_t deadline_ns = pdk_now_mono_ns() + s->deadline_ms * 1000000ULL;
	_cleanup_json_ json_t *r = NULL;
	uint64_t sent_lost, helper_dropped, dropped, undelivered;
	const char *why;

	finish_stream(s, deadline_ns);
	r = s->broken && s->sent == 0 ? NULL : read_report(s, deadline_ns);
	stop_helper(s);
	sent_lost = r == NULL ? s->sent : s->sent - PDK_MIN(s->sent, count_of(r, "exported"));
	helper_dropped = r == NULL ? 0 : PDK_MIN(sent_lost, count_of(r, "dropped"));
	dropped = s->dropped + helper_dropped;
	undelivered = sent_lost - helper_dropped;
	if (dropped + undelivered == 0)
		return 0;
	why = json_string_value(json_object_get(r, "error"));
	if (r == NULL)
		why = "no report from the exporter before the deadline";
	else if (why == NULL || *why == '\0')
		why = "close deadline reached";
	return pdk_error_setx(err, EIO,
			      "%" PRIu64 " of %" PRIu64
			      " event(s) not exported to '%s' within the %" PRIu64
			      " ms deadline: %" PRIu64 " dropped from a full queue, %" PRIu64
			      " not delivered (%s)",
			      dropped + undelivered, s->sent + s->dropped, s->endpoint,
			      s->deadline_ms, dropped, undelivered, undelivered ? why : "none");
}

static void sink_free(void *data)
{
	struct otlp_sink *s = data;

	stop_helper(s);
	if (s->sock >= 0)
		(void)close(s->sock);
	free(s->rest);
	free(s->endpoint);
	free(s);
}

static const struct pdk_events_sink otlp_sink_ops = {
	.name = "OTLP exporter",
	.emit = sink_emit,
	.close = sink_close,
	.free = sink_free,
};

/* Start the helper on one end of a socket pair; returns our end. */
static int spawn_helper(const char *path, char *const *envp, int *pidfd, pid_t *pid,
			struct pdk_error **err)
{
	int sv[2];
	char *const argv[] = {(char *)"paddock-otlp", NULL};
	static char *const empty[] = {NULL};
	struct spawn_arg a = {.path = path, .argv = argv, .envp = envp ? envp : empty};
	char mark = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return pdk_error_set(err, errno, "cannot create the OTLP exporter's socket");
	a.sock = sv[1];
	*pid = pdk_proc_clone(0, helper_child, &a, pidfd, err);
	(void)close(sv[1]);
	if (*pid < 0) {
		(void)close(sv[0]);
		return pdk_error_wrap(err, "cannot start the OTLP exporter '%s'", path);
	}
	/*
	 * CLONE_VFORK: the child has exec'd, or failed and said so. The helper
	 * itself writes nothing before its report, at the end.
	 */
	if (TEMP_FAILURE_RETRY(recv(sv[0], &mark, 1, MSG_DONTWAIT)) == 1 && mark == 'E') {
		siginfo_t si;

		(void)close(sv[0]);
		(void)TEMP_FAILURE_RETRY(waitid(P_PIDFD, (id_t)*pidfd, &si, WEXITED));
		(void)close(*pidfd);
		return pdk_error_setx(err, ENOENT,
				      "cannot run the OTLP exporter '%s' (set PADDOCK_OTLP to its "
				      "path)",
				      path);
	}
	return sv[0];
}

int pdk_otlp_add_sink(struct pdk_events *ev, const struct pdk_otlp_config *cfg, const char *helper,
		      struct pdk_error **err)
{
	_cleanup_free_ char *path = helper_path(helper);
	_cleanup_json_ json_t *conf = pdk_otlp_config_to_json(cfg);
	_cleanup_free_ char *line = pdk_json_dump_line(conf);
	struct otlp_sink *s;
	int pidfd = -1;
	pid_t pid = -1;
	int sock;

	if (line == NULL)
		return pdk_error_setx(err, EINVAL, "cannot serialise the OTLP configuration");
	sock = spawn_helper(path, cfg->envp, &pidfd, &pid, err);
	if (sock < 0)
		return sock;
	s = pdk_xcalloc(1, sizeof(*s));
	*s = (struct otlp_sink){.sock = sock,
				.pidfd = pidfd,
				.pid = pid,
				.endpoint = pdk_xstrdup(cfg->endpoint),
				.deadline_ms = cfg->deadline_ms};
	/* The socket is empty: the configuration line fits (it is far below its buffer). */
	if (TEMP_FAILURE_RETRY(send(sock, line, strlen(line), MSG_DONTWAIT | MSG_NOSIGNAL)) !=
	    (ssize_t)strlen(line)) {
		explicit_bzero(line, strlen(line));
		sink_free(s);
		return pdk_error_set(err, errno ? errno : EIO,
				     "cannot configure the OTLP exporter");
	}
	explicit_bzero(line, strlen(line));
	pdk_events_add_sink(ev, &otlp_sink_ops, s);
	return 0;
}
