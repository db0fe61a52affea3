/*
 * cli-daemon.h - shared by the verbs that talk to the daemon (`paddock serve`):
 * ps, create, exec, attach, cp, pause, resume, snapshot, rollback, diff,
 * kill, events. docs/cli-daemon.md documents them.
 */
#ifndef PDK_CLI_DAEMON_H
#define PDK_CLI_DAEMON_H

#include "common.h"
#include "base.h"
#include "client.h"

#include <jansson.h>
#include <stdio.h>

/* Exit statuses of these verbs (besides a command's own, for exec and attach). */
enum pdk_cli_daemon_exit {
	PDK_CLI_EXIT_USAGE = 2, /* bad options or arguments: nothing was asked of the daemon */
	PDK_CLI_EXIT_API = 125, /* the daemon could not be reached or answered with an error */
};

/* getopt values of the connection options every verb takes. */
enum {
	PDK_CLI_OPT_SOCKET = 1000,
	PDK_CLI_OPT_URL,
	PDK_CLI_OPT_JSON,
	PDK_CLI_OPT_FIRST_FREE, /* verbs number their own long options from here */
};
/* The struct option entries of those, to end each verb's table with. */
/* clang-format off */
#define PDK_CLI_CONN_LONGOPTS                                     \
	{"socket", required_argument, NULL, PDK_CLI_OPT_SOCKET},  \
	{"url", required_argument, NULL, PDK_CLI_OPT_URL},        \
	{"help", no_argument, NULL, 'h'}
/* clang-format on */
#define PDK_CLI_CONN_HELP                                                                     \
	"      --socket PATH  the daemon's unix socket (default: $PADDOCK_SOCKET, else\n"     \
	"                     RUNDIR/paddock.sock; RUNDIR is $PADDOCK_RUNTIME_DIR, else\n"    \
	"                     $XDG_RUNTIME_DIR/paddock, else /run/paddock as root, else\n"    \
	"                     /tmp/paddock-UID)\n"                                            \
	"      --url URL      the daemon over TCP: http://IP:PORT (default: $PADDOCK_URL),\n" \
	"                     with the bearer token in $PADDOCK_TOKEN\n"                      \
	"  -h, --help         show this help\n"

struct pdk_cli_conn {
	const char *socket;
	const char *url;
};

/* Handle a connection option; false when `opt` is not one. */
bool pdk_cli_conn_opt(struct pdk_cli_conn *conn, int opt, const char *arg);

/* A client for `conn`; prints the error and returns NULL on failure. */
struct pdk_client *pdk_cli_connect(const struct pdk_cli_conn *conn);

/*
 * Print an error from the client ("paddock: MESSAGE", with a hint when the
 * daemon is not running) and return PDK_CLI_EXIT_API. Frees *err.
 */
int pdk_cli_api_fail(struct pdk_client *c, struct pdk_error **err);

/*
 * One JSON call; on failure the error is printed and NULL returned.
 * `body` is borrowed. The answer is the caller's.
 */
json_t *pdk_cli_call(struct pdk_client *c, const char *method, const char *path, json_t *body);

/* Print a JSON value, indented, keys sorted, to stdout. */
void pdk_cli_print_json(const json_t *j);

/* "k=v" -> obj[k] = v; false (after printing why) when there is no '='. */
bool pdk_cli_add_kv(json_t *obj, const char *kv, const char *what);

/* Usage error: "paddock VERB: MESSAGE" + a pointer to --help; returns PDK_CLI_EXIT_USAGE. */
int pdk_cli_usage_error(const char *verb, const char *fmt, ...) PDK_PRINTF(2, 3);

/* base64 (RFC 4648) of `len` bytes. Caller frees. */
char *pdk_cli_b64_encode(const void *data, size_t len);
/* Decode base64 into a new buffer (*out, *out_len; caller frees). false when invalid. */
bool pdk_cli_b64_decode(const char *s, size_t len, unsigned char **out, size_t *out_len);

/* Write all of buf to fd; false on failure (EPIPE included). */
bool pdk_cli_write(int fd, const void *buf, size_t len);

int pdk_cmd_ps(int argc, char **argv);
int pdk_cmd_create(int argc, char **argv);
int pdk_cmd_exec(int argc, char **argv);
int pdk_cmd_attach(int argc, char **argv);
int pdk_cmd_cp(int argc, char **argv);
int pdk_cmd_pause(int argc, char **argv);
int pdk_cmd_resume(int argc, char **argv);
int pdk_cmd_snapshot(int argc, char **argv);
int pdk_cmd_rollback(int argc, char **argv);
int pdk_cmd_diff(int argc, char **argv);
int pdk_cmd_kill(int argc, char **argv);
int pdk_cmd_events(int argc, char **argv);

#endif
