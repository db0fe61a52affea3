/*
 * cmd-exec.c - `paddock exec ID [OPTIONS] -- CMD...`: run a command in a
 * running sandbox of the daemon; the exit status is the command's.
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char help[] =
	"usage: paddock exec ID [OPTIONS] -- CMD [ARGS...]\n"
	"       paddock exec ID [OPTIONS] -c 'SHELL COMMAND'\n"
	"\n"
	"Run CMD in the running sandbox ID of the daemon ('paddock serve') and exit\n"
	"with its status. CMD is looked up in the sandbox's PATH; its working\n"
	"directory is the workspace unless --cwd says otherwise.\n"
	"\n"
	"By default the call returns when CMD has ended, and its output is kept to\n"
	"--output-cap bytes per stream (the daemon's default is 16 KiB): the whole\n"
	"lines of the first and last halves, with a line saying how many lines and\n"
	"bytes were dropped and which file inside the sandbox holds all of it (a\n"
	"line longer than half the cap is cut, and that line says so). With\n"
	"--stream, output is printed as it comes, all of it.\n"
	"\n"
	"options:\n"
	"      --stream          print stdout and stderr as CMD writes them\n"
	"  -t, --timeout DURATION  kill CMD after this long: 500ms, 30s, 10m\n"
	"  -e, --env K=V         add K to CMD's environment (repeatable)\n"
	"  -C, --cwd DIR         working directory inside the sandbox\n"
	"  -i, --stdin           send this process's stdin (read to its end first) to\n"
	"                        CMD; without it CMD's stdin is empty\n"
	"  -c, --shell STRING    run STRING with /bin/sh -c instead of CMD\n"
	"      --output-cap N    bytes of each stream kept in the answer\n"
	"      --json            print the daemon's whole answer (exit code, end,\n"
	"                        duration, output with byte counts) instead of the\n"
	"                        output; not with --stream\n"
	"  -q, --quiet           do not print the summary of network destinations\n"
	"                        denied while CMD ran (printed on stderr at its end,\n"
	"                        each with the --allow that would let it through)\n" PDK_CLI_CONN_HELP
	"\n"
	"exit status: CMD's own; 128+N when it died of signal N; 124 when --timeout\n"
	"ended it; 123 when the sandbox's memory limit did (\"memory limit reached\");\n"
	"122 bad option; 125 the daemon could not be reached or refused\n"
	"(its error code, message and field are printed).\n";

enum { OPT_STREAM = PDK_CLI_OPT_FIRST_FREE, OPT_OUTPUT_CAP };

/* Input sent with --stdin: the same cap as the daemon's default request body. */
#define STDIN_MAX ((size_t)48 << 20)

static const struct option long_opts[] = {
	{"stream", no_argument, NULL, OPT_STREAM},
	{"timeout", required_argument, NULL, 't'},
	{"env", required_argument, NULL, 'e'},
	{"cwd", required_argument, NULL, 'C'},
	{"stdin", no_argument, NULL, 'i'},
	{"shell", required_argument, NULL, 'c'},
	{"output-cap", required_argument, NULL, OPT_OUTPUT_CAP},
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{"quiet", no_argument, NULL, 'q'},
	{NULL, 0, NULL, 0},
};

struct exec_opts {
	const char *id;
	json_t *body;
	json_t *env;
	bool stream, json, send_stdin;
};

static int exec_opt(void *ctx, const struct option *opt, const char *arg)
{
	struct exec_opts *o = ctx;
	uint64_t n;

	switch (opt->val) {
	case OPT_STREAM:
		o->stream = true;
		return 0;
	case 't':
		json_object_set_new(o->body, "timeout", json_string(arg));
		return 0;
	case 'e':
		return pdk_cli_add_kv(o->env, arg, "--env") ? 0 : PDK_CLI_EXIT_USAGE;
	case 'C':
		json_object_set_new(o->body, "cwd", json_string(arg));
		return 0;
	case 'i':
		o->send_stdin = true;
		return 0;
	case 'c':
		json_object_set_new(o->body, "cmd", json_string(arg));
		return 0;
	case OPT_OUTPUT_CAP:
		if (pdk_parse_u64(arg, INT32_MAX, &n) < 0)
			return pdk_cli_usage_error("exec", "--output-cap '%s' is not a number",
						   arg);
		json_object_set_new(o->body, "output_cap", json_integer((json_int_t)n));
		return 0;
	case PDK_CLI_OPT_JSON:
		o->json = true;
		return 0;
	case 'q':
		pdk_cli_quiet = true;
		return 0;
	default:
		return -1;
	}
}

static const struct pdk_cli_verb verb = {"t:e:C:ic:q", long_opts, help, NULL, exec_opt};

static int read_stdin(json_t *body)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_free_ char *b64 = NULL;
	size_t len = 0;
	int r = pdk_cli_slurp(STDIN_FILENO, STDIN_MAX, &buf, &len);

	if (r == -E2BIG) {
		pdk_cli_error("stdin is larger than %zu MiB: copy it with 'paddock cp'",
			      STDIN_MAX >> 20);
		return PDK_CLI_EXIT_USAGE;
	}
	if (r < 0) {
		pdk_cli_error("read stdin: %s", strerror(-r));
		return PDK_CLI_EXIT_USAGE;
	}
	b64 = pdk_cli_b64_encode(buf, len);
	json_object_set_new(body, "stdin_b64", json_string(b64));
	return 0;
}

/* The exit status that stands for an exec result or exit event. */
static int status_of(json_t *r)
{
	const char *end = json_string_value(json_object_get(r, "end"));
	json_int_t sig = json_integer_value(json_object_get(r, "signal"));

	if (end != NULL && strcmp(end, "timeout") == 0)
		return PDK_EXIT_TIMEOUT;
	if (end != NULL && strcmp(end, "oom") == 0) {
		/* The words and status of `paddock run` for the same end. */
		pdk_cli_error("memory limit reached: the command was killed by the OOM killer");
		return PDK_EXIT_OOM;
	}
	if (sig > 0 && sig < 128)
		return 128 + (int)sig;
	if (!json_is_integer(json_object_get(r, "exit_code")))
		return PDK_CLI_EXIT_API;
	return (int)(json_integer_value(json_object_get(r, "exit_code")) & 0xff);
}

/*
 * Write one Output object's bytes: "text_b64" holds them exactly when
 * "text" does not (bytes that are not UTF-8, or NUL).
 */
static void put_output(json_t *r, const char *name, int fd)
{
	json_t *o = json_object_get(r, name);

	(void)pdk_cli_put_bytes(o, "text", "text_b64", fd);
}

static int exec_sync(struct pdk_client *c, const char *path, struct exec_opts *o)
{
	struct pdk_error *err = NULL;
	json_t *r = NULL;
	int st;

	if (pdk_client_json(c, "POST", path, o->body, &r, NULL, &err) < 0)
		return pdk_cli_api_fail(c, &err);
	if (o->json) {
		pdk_cli_print_json(r);
	} else {
		put_output(r, "stdout", STDOUT_FILENO);
		put_output(r, "stderr", STDERR_FILENO);
		pdk_cli_net_denied_json(r);
	}
	st = status_of(r);
	json_decref(r);
	return st;
}

struct stream_state {
	int status;
	bool ended;
	bool bad;
};

static int on_exec_event(void *ud, const char *event, const char *id, const char *data, size_t len)
{
	struct stream_state *st = ud;
	/* Output may hold NUL bytes: "\u0000" is valid JSON. */
	_cleanup_json_ json_t *j = json_loadb(data, len, JSON_ALLOW_NUL, NULL);

	(void)id;
	if (j == NULL) {
		st->bad = true;
		return 1;
	}
	if (strcmp(event, "stdout") == 0 || strcmp(event, "stderr") == 0)
		return !pdk_cli_put_bytes(j, "data", "data_b64",
					  event[3] == 'o' ? STDOUT_FILENO : STDERR_FILENO);
	if (strcmp(event, "exit") == 0) {
		pdk_cli_net_denied_json(j);
		st->status = status_of(j);
		st->ended = true;
	} else if (strcmp(event, "error") == 0) {
		json_t *e = json_object_get(j, "error");
		const char *code = json_string_value(json_object_get(e, "code"));

		pdk_cli_error("%s: %s", code, json_string_value(json_object_get(e, "message")));
		st->status = pdk_cli_exit_of(pdk_client_status_of_code(code),
					     json_string_value(json_object_get(e, "field")));
		st->ended = true;
	}
	return 0;
}

static int exec_stream(struct pdk_client *c, const char *path, struct exec_opts *o)
{
	struct pdk_error *err = NULL;
	struct stream_state st = {.status = PDK_CLI_EXIT_API};
	_cleanup_free_ char *text = NULL;
	struct pdk_client_req q = {.method = "POST",
				   .path = path,
				   .content_type = "application/json",
				   .accept = "text/event-stream",
				   .on_sse = on_exec_event,
				   .ud = &st};
	int r;

	json_object_set_new(o->body, "stream", json_true());
	text = json_dumps(o->body, JSON_COMPACT);
	q.body = text;
	q.body_len = strlen(text);
	r = pdk_cli_request(c, &q, &err);
	if (r < 0 && st.bad)
		pdk_cli_error("the daemon sent an event that is not JSON");
	if (r < 0)
		return pdk_cli_api_fail(c, &err);
	if (r > 0)
		return r;
	if (!st.ended) {
		pdk_cli_error("the event stream ended without the command's exit");
		return PDK_CLI_EXIT_API;
	}
	return st.status;
}

static int run(struct pdk_cli_conn *conn, struct exec_opts *o)
{
	_cleanup_free_ char *eid = pdk_client_escape(o->id);
	_cleanup_free_ char *path = pdk_xasprintf("/v1/sandboxes/%s/exec", eid);
	struct pdk_client *c;
	int r;

	if (o->send_stdin && (r = read_stdin(o->body)) != 0)
		return r;
	c = pdk_cli_connect(conn);
	if (c == NULL)
		return PDK_CLI_EXIT_USAGE;
	r = o->stream ? exec_stream(c, path, o) : exec_sync(c, path, o);
	pdk_client_free(c);
	return r;
}

int pdk_cmd_exec(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct exec_opts o = {.body = json_object(), .env = json_object()};
	/*
	 * Options may come before or after ID (getopt permutes them to the
	 * front); everything after "--" is CMD.
	 */
	int r = pdk_cli_parse(&verb, argc, argv, &conn, &o);

	if (r == 0 && optind >= argc)
		r = pdk_cli_usage_error("exec", "which sandbox? give its ID");
	if (r == 0) {
		o.id = argv[optind++];
		if (optind < argc)
			json_object_set_new(o.body, "argv", pdk_json_strv(argv + optind));
		if ((optind < argc) == (json_object_get(o.body, "cmd") != NULL))
			r = pdk_cli_usage_error("exec",
						"give either -- CMD [ARGS...] or -c STRING");
		else if (o.json && o.stream)
			r = pdk_cli_usage_error("exec", "--json and --stream do not go together");
	}
	if (r == 0 && json_object_size(o.env) > 0)
		json_object_set(o.body, "env", o.env);
	if (r == 0)
		r = run(&conn, &o);
	else if (r < 0)
		r = 0;
	json_decref(o.body);
	json_decref(o.env);
	return r;
}
