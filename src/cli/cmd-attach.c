/*
 * cmd-attach.c - `paddock attach ID [-- CMD...]`: an interactive shell in a
 * running sandbox of the daemon, on a pty (the human-takeover path; the
 * daemon records the session).
 *
 * Two connections: the exec call streams the terminal's output as
 * Server-Sent Events on the first (this thread); a second thread sends
 * what is typed (POST .../exec/E/stdin) and the window size after each
 * SIGWINCH (POST .../exec/E/resize) on the second.
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

static const char help[] =
	"usage: paddock attach [OPTIONS] ID [-- CMD [ARGS...]]\n"
	"\n"
	"Open an interactive shell (/bin/sh, or CMD) on a terminal in the running\n"
	"sandbox ID of the daemon ('paddock serve'): the human-takeover path. This\n"
	"terminal is put in raw mode for the session, and its size follows this\n"
	"window's. The session ends when the shell exits. The daemon records it as\n"
	"events (the exec with its pty, the commands run in it, the exit).\n"
	"\n"
	"options:\n"
	"  -e, --env K=V      add K to the shell's environment (repeatable)\n"
	"  -C, --cwd DIR      working directory inside the sandbox\n" PDK_CLI_CONN_HELP "\n"
	"exit status: the shell's own (128+N for signal N); 122 bad option; 125 the\n"
	"daemon could not be reached or refused (its error is printed).\n";

static const struct option long_opts[] = {
	{"env", required_argument, NULL, 'e'},
	{"cwd", required_argument, NULL, 'C'},
	{NULL, 0, NULL, 0},
};

struct session {
	struct pdk_cli_conn conn;
	json_t *env;     /* --env */
	const char *cwd; /* --cwd */
	char *eid;       /* the sandbox id, escaped */
	char *exec;      /* the exec id, once started; escaped */
	pthread_mutex_t lock;
	pthread_cond_t started;
	int status;
	bool ended;
	int sigfd;
};

static void send_call(struct pdk_client *c, const char *path, const char *ctype, const void *body,
		      size_t len)
{
	struct pdk_error *err = NULL;
	struct pdk_client_resp resp;
	struct pdk_client_req q = {.method = "POST",
				   .path = path,
				   .content_type = ctype,
				   .body = body,
				   .body_len = len};

	if (pdk_client_request(c, &q, &resp, &err) < 0) {
		pdk_error_free(&err); /* the output stream says how the session ends */
		return;
	}
	pdk_client_resp_release(&resp);
}

static void send_size(struct pdk_client *c, struct session *s)
{
	struct winsize ws;
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *body = NULL;
	_cleanup_json_ json_t *j = NULL;

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0)
		return;
	j = json_pack("{s:i, s:i}", "cols", (int)ws.ws_col, "rows", (int)ws.ws_row);
	body = json_dumps(j, JSON_COMPACT);
	path = pdk_xasprintf("/v1/sandboxes/%s/exec/%s/resize", s->eid, s->exec);
	send_call(c, path, "application/json", body, strlen(body));
}

/* The input thread: keys to the pty, window sizes after SIGWINCH. */
static void *input_thread(void *arg)
{
	struct session *s = arg;
	struct pdk_client *c = pdk_cli_connect(&s->conn);
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *eof_path = NULL;
	char buf[4096];

	pthread_mutex_lock(&s->lock);
	while (s->exec == NULL && !s->ended)
		pthread_cond_wait(&s->started, &s->lock);
	pthread_mutex_unlock(&s->lock);
	if (c == NULL || s->exec == NULL)
		goto out;
	path = pdk_xasprintf("/v1/sandboxes/%s/exec/%s/stdin", s->eid, s->exec);
	eof_path = pdk_xasprintf("%s?eof=1", path);
	for (;;) {
		struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
				      {.fd = s->sigfd, .events = POLLIN}};
		ssize_t n;

		if (TEMP_FAILURE_RETRY(poll(p, 2, -1)) < 0)
			break;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(s->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				send_size(c, s);
		}
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		n = TEMP_FAILURE_RETRY(read(STDIN_FILENO, buf, sizeof(buf)));
		if (n <= 0) {
			send_call(c, eof_path, "application/octet-stream", "", 0);
			break;
		}
		send_call(c, path, "application/octet-stream", buf, (size_t)n);
	}
out:
	pdk_client_free(c);
	return NULL;
}

static int on_event(void *ud, const char *event, const char *id, const char *data, size_t len)
{
	struct session *s = ud;
	/* Output may hold NUL bytes: "\u0000" is valid JSON. */
	_cleanup_json_ json_t *j = json_loadb(data, len, JSON_ALLOW_NUL, NULL);

	(void)id;
	if (strcmp(event, "stdout") == 0 || strcmp(event, "stderr") == 0) {
		(void)pdk_cli_put_bytes(j, "data", "data_b64", STDOUT_FILENO);
	} else if (strcmp(event, "start") == 0) {
		json_t *e = json_object_get(j, "exec_id");

		pthread_mutex_lock(&s->lock);
		/* The daemon's exec ids are numbers; a string is taken as well. */
		if (json_is_string(e) && s->exec == NULL)
			s->exec = pdk_client_escape(json_string_value(e));
		else if (json_is_integer(e) && s->exec == NULL)
			s->exec = pdk_xasprintf("%lld", (long long)json_integer_value(e));
		pthread_cond_broadcast(&s->started);
		pthread_mutex_unlock(&s->lock);
	} else if (strcmp(event, "exit") == 0) {
		json_int_t sig = json_integer_value(json_object_get(j, "signal"));

		s->status =
			sig > 0 && sig < 128
				? 128 + (int)sig
				: (int)(json_integer_value(json_object_get(j, "exit_code")) & 0xff);
		s->ended = true;
	}
	return 0;
}

static json_t *request_body(char **cmd, json_t *env, const char *cwd)
{
	struct winsize ws = {.ws_col = 80, .ws_row = 24};
	json_t *b;

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0) {
		ws.ws_col = 80;
		ws.ws_row = 24;
	}
	b = json_pack("{s:b, s:b, s:i, s:i}", "pty", 1, "stream", 1, "cols", (int)ws.ws_col, "rows",
		      (int)ws.ws_row);
	if (cmd != NULL && cmd[0] != NULL)
		json_object_set_new(b, "argv", pdk_json_strv(cmd));
	else
		json_object_set_new(b, "argv", json_pack("[s, s]", "/bin/sh", "-i"));
	if (json_object_size(env) > 0)
		json_object_set(b, "env", env);
	if (cwd != NULL)
		json_object_set_new(b, "cwd", json_string(cwd));
	return b;
}

/* 0 when the daemon streamed the session to its end, else an exit status (printed). */
static int stream_session(struct pdk_client *c, struct session *s, json_t *body)
{
	struct pdk_error *err = NULL;
	_cleanup_free_ char *path = pdk_xasprintf("/v1/sandboxes/%s/exec", s->eid);
	_cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
	struct pdk_client_req q = {.method = "POST",
				   .path = path,
				   .content_type = "application/json",
				   .accept = "text/event-stream",
				   .body = text,
				   .body_len = strlen(text),
				   .on_sse = on_event,
				   .ud = s};
	int r = pdk_cli_request(c, &q, &err);

	return r < 0 ? pdk_cli_api_fail(c, &err) : r;
}

static int attach(struct session *s, json_t *body)
{
	struct termios saved, raw;
	bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
	struct pdk_client *c = pdk_cli_connect(&s->conn);
	sigset_t mask;
	pthread_t th;
	int streamed = 0; /* stream_session()'s status */
	int r = 0;

	if (c == NULL)
		return PDK_CLI_EXIT_USAGE;
	/* SIGWINCH goes to the input thread's signalfd, in every thread. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGWINCH);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	s->sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (tty) {
		raw = saved;
		cfmakeraw(&raw);
		(void)tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	if (pthread_create(&th, NULL, input_thread, s) != 0) {
		pdk_cli_error("cannot start the input thread");
		r = PDK_CLI_EXIT_API;
	} else {
		streamed = stream_session(c, s, body);
		pthread_mutex_lock(&s->lock);
		s->ended = true;
		pthread_cond_broadcast(&s->started);
		pthread_mutex_unlock(&s->lock);
		(void)pthread_detach(th); /* it may sit in a read of the terminal */
	}
	if (tty)
		(void)tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	pdk_client_free(c);
	if (streamed != 0)
		return streamed;
	if (!s->ended || s->exec == NULL) {
		pdk_cli_error("the session ended without the shell's exit");
		return PDK_CLI_EXIT_API;
	}
	return r != 0 ? r : s->status;
}

static int attach_opt(void *ctx, const struct option *o, const char *arg)
{
	struct session *s = ctx;

	if (o->val == 'C')
		s->cwd = arg;
	else if (!pdk_cli_add_kv(s->env, arg, "--env"))
		return PDK_CLI_EXIT_USAGE;
	return 0;
}

static const struct pdk_cli_verb verb = {"+e:C:", long_opts, help, NULL, attach_opt};

int pdk_cmd_attach(int argc, char **argv)
{
	static struct session s = {.lock = PTHREAD_MUTEX_INITIALIZER,
				   .started = PTHREAD_COND_INITIALIZER,
				   .sigfd = -1};
	_cleanup_json_ json_t *body = NULL;
	int r;

	s.env = json_object();
	r = pdk_cli_parse(&verb, argc, argv, &s.conn, &s);
	if (r == 0 && optind >= argc)
		r = pdk_cli_usage_error("attach", "which sandbox? give its ID");
	if (r != 0) {
		json_decref(s.env);
		return r < 0 ? 0 : r;
	}
	s.eid = pdk_client_escape(argv[optind++]);
	if (optind < argc && strcmp(argv[optind], "--") == 0)
		optind++;
	body = request_body(argv + optind, s.env, s.cwd);
	json_decref(s.env);
	return attach(&s, body);
}
