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

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

/* Exit statuses of these verbs (besides a command's own, for exec and attach). */
enum pdk_cli_daemon_exit {
	/* Bad options or arguments: nothing was asked of the daemon (PDK_EXIT_POLICY of cli.h). */
	PDK_CLI_EXIT_USAGE = 122,
	PDK_CLI_EXIT_API = 125, /* the daemon could not be reached or answered with an error */
};

/*
 * getopt values of the options every verb takes (--socket, --url, and
 * --help as 'h'), which pdk_cli_parse() adds to a verb's own, and of --json.
 */
enum {
	PDK_CLI_OPT_SOCKET = 1000,
	PDK_CLI_OPT_URL,
	PDK_CLI_OPT_JSON,
	PDK_CLI_OPT_FIRST_FREE, /* verbs number their own long options from here */
};
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

/*
 * One of a verb's own options: `o` is its entry in the verb's table (every
 * short option has a long one), `arg` its argument or NULL. Returns 0 when
 * taken, an exit status after printing why it is refused, or -1 when it is
 * not an option of this verb (the caller says "bad option").
 */
typedef int (*pdk_cli_opt_cb)(void *ctx, const struct option *o, const char *arg);

/* How a verb's command line reads. */
struct pdk_cli_verb {
	const char *shortopts;     /* getopt_long's, for the verb's own options */
	const struct option *opts; /* the verb's own long options, a zero entry last; or NULL */
	const char *help;          /* --help's text; NULL: usage() prints it */
	void (*usage)(void *ctx);  /* for a text that depends on the call (ctx) */
	pdk_cli_opt_cb opt;        /* NULL: no options of its own */
};

/*
 * Read the options of argv (getopt_long from optind 1; argv[0] is the verb
 * as typed, which messages name) with the verb's own and those every verb
 * takes: the connection options go into *conn, --help (-h) prints v->help
 * to stdout (or calls v->usage), every other option goes to v->opt.
 * Returns 0 when all were taken (optind is then at the first argument),
 * -1 after --help (the verb is done: exit 0), or an exit status after a
 * usage error was printed.
 */
int pdk_cli_parse(const struct pdk_cli_verb *v, int argc, char **argv, struct pdk_cli_conn *conn,
		  void *ctx);

/* A client for `conn`; prints the error and returns NULL on failure. */
struct pdk_client *pdk_cli_connect(const struct pdk_cli_conn *conn);

/*
 * The exit status of a daemon's error of errno-style `status` naming
 * `field` (may be NULL): a command that did not start ("argv[0]") is 127
 * when not found, else 126, as a shell says; any other is PDK_CLI_EXIT_API.
 */
int pdk_cli_exit_of(int status, const char *field);

/*
 * Print an error from the client ("paddock: MESSAGE", with a hint when the
 * daemon is not running) and return its exit status (pdk_cli_exit_of():
 * PDK_CLI_EXIT_API but for a command that did not start). Frees *err.
 */
int pdk_cli_api_fail(struct pdk_client *c, struct pdk_error **err);

/*
 * Send `q` (its answer goes to q's callbacks, or is dropped) and check that
 * the daemon took it: 0 for a 2xx answer. A request that could not be
 * completed leaves its error in *err and returns -1, for the caller to
 * judge (a callback that stopped it, a quiet time it asked for) or hand to
 * pdk_cli_api_fail(); an answer with another status is printed as
 * pdk_cli_api_fail() prints it, and PDK_CLI_EXIT_API is returned.
 */
int pdk_cli_request(struct pdk_client *c, const struct pdk_client_req *q, struct pdk_error **err);

/*
 * One JSON call; on failure the error is printed and NULL returned.
 * `body` is borrowed. The answer is the caller's.
 */
json_t *pdk_cli_call(struct pdk_client *c, const char *method, const char *path, json_t *body);

/* Append "&key=VALUE" (VALUE escaped) to the query *q (a string of the caller's, replaced). */
void pdk_cli_query_add(char **q, const char *key, const char *val);

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

/*
 * Write the exact bytes of a daemon's output object `o` to fd: the base64
 * member `b64_key` when present (the bytes were not plain UTF-8 text),
 * else the string `text_key` with its length (a NUL inside is kept).
 * Nothing to write is success; false on invalid base64 or a failed write.
 */
bool pdk_cli_put_bytes(json_t *o, const char *text_key, const char *b64_key, int fd);

/*
 * Read fd to its end into a new buffer (*out, caller frees; *len bytes).
 * 0, -E2BIG once more than `max` bytes came, or -errno.
 */
int pdk_cli_slurp(int fd, size_t max, char **out, size_t *len);

#endif
