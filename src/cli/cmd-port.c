/*
 * cmd-port.c - `paddock port ID [PORT]`: forward a port of a daemon
 * sandbox to the host's loopback (POST /v1/sandboxes/ID/ports), list the
 * forwarded ones (GET), or close one (--close: DELETE .../ports/PORT).
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

enum {
	OPT_CLOSE = PDK_CLI_OPT_FIRST_FREE,
	OPT_HOST_PORT,
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{"close", no_argument, NULL, OPT_CLOSE},
	{"host-port", required_argument, NULL, OPT_HOST_PORT},
	{NULL, 0, NULL, 0},
};

static const char help[] =
	"usage: paddock port [OPTIONS] ID [PORT]\n"
	"\n"
	"Forward port PORT of sandbox ID to the host: a server listening on\n"
	"127.0.0.1:PORT inside the sandbox is reached at the address printed\n"
	"(127.0.0.1:HOST_PORT on the daemon's host). Each connection is made\n"
	"inside the sandbox as its user, under its network rules. The port stays\n"
	"forwarded until --close or until the sandbox ends (its connections are\n"
	"cut then). Without PORT, list the forwarded ports.\n"
	"\n"
	"options:\n"
	"      --close        stop forwarding PORT and cut its connections\n"
	"      --host-port N  listen on 127.0.0.1:N (default: a free port)\n"
	"      --json         print the daemon's answer as JSON\n" PDK_CLI_CONN_HELP
	"\nexit status: 0 done; 122 bad option or argument; 125 the daemon could not\n"
	"be reached or refused (the sandbox is unknown, the port is not forwarded).\n";

struct port_call {
	bool json, close;
	const char *host_port;
};

static int port_opt(void *ctx, const struct option *o, const char *arg)
{
	struct port_call *k = ctx;

	if (o->val == PDK_CLI_OPT_JSON)
		k->json = true;
	else if (o->val == OPT_CLOSE)
		k->close = true;
	else if (o->val == OPT_HOST_PORT)
		k->host_port = arg;
	else
		return -1;
	return 0;
}

static const struct pdk_cli_verb verb = {"", long_opts, help, NULL, port_opt};

static void print_port(const json_t *p)
{
	printf("%lld\t%s\n", (long long)json_integer_value(json_object_get(p, "port")),
	       json_string_value(json_object_get(p, "address")));
}

static void print_answer(const json_t *out, const struct port_call *k, bool list)
{
	size_t i;
	json_t *p;

	if (k->json)
		pdk_cli_print_json(out);
	else if (!list && k->close)
		printf("closed port %lld\n",
		       (long long)json_integer_value(json_object_get(out, "port")));
	else if (!list)
		printf("%s\n", json_string_value(json_object_get(out, "address")));
	else
		json_array_foreach(json_object_get(out, "ports"), i, p) print_port(p);
}

/* PORT and --host-port: numbers from 1 to 65535. */
static int parse_port(const char *s, const char *what, uint64_t *out)
{
	if (pdk_parse_u64(s, 65535, out) < 0 || *out == 0)
		return pdk_cli_usage_error("port", "%s '%s' is not a port (1 to 65535)", what, s);
	return 0;
}

static json_t *call(struct pdk_client *c, const char *id, const char *port, struct port_call *k)
{
	_cleanup_free_ char *eid = pdk_client_escape(id);
	_cleanup_free_ char *path = NULL;
	_cleanup_json_ json_t *body = NULL;
	uint64_t n = 0, h = 0;

	if (port == NULL) {
		path = pdk_xasprintf("/v1/sandboxes/%s/ports", eid);
		return pdk_cli_call(c, "GET", path, NULL);
	}
	if (k->close) {
		path = pdk_xasprintf("/v1/sandboxes/%s/ports/%s", eid, port);
		return pdk_cli_call(c, "DELETE", path, NULL);
	}
	(void)parse_port(port, "PORT", &n);
	if (k->host_port != NULL)
		(void)parse_port(k->host_port, "--host-port", &h);
	body = json_pack("{s:I}", "port", (json_int_t)n);
	if (h != 0)
		json_object_set_new(body, "host_port", json_integer((json_int_t)h));
	path = pdk_xasprintf("/v1/sandboxes/%s/ports", eid);
	return pdk_cli_call(c, "POST", path, body);
}

/* The arguments: ID, PORT (a number), --close only with a PORT. */
static int check_args(int argc, char **argv, const struct port_call *k)
{
	uint64_t n;
	int left = argc - optind;

	if (left < 1 || left > 2)
		return pdk_cli_usage_error("port", "expected a sandbox id and a port");
	if (left == 1 && (k->close || k->host_port != NULL))
		return pdk_cli_usage_error("port", "--close and --host-port need a PORT");
	if (left == 2 && parse_port(argv[optind + 1], "PORT", &n) != 0)
		return PDK_CLI_EXIT_USAGE;
	if (k->host_port != NULL && parse_port(k->host_port, "--host-port", &n) != 0)
		return PDK_CLI_EXIT_USAGE;
	return 0;
}

int pdk_cmd_port(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct port_call k = {0};
	struct pdk_client *c = NULL;
	json_t *out = NULL;
	const char *port;
	int r = pdk_cli_parse(&verb, argc, argv, &conn, &k);

	if (r == 0)
		r = check_args(argc, argv, &k);
	if (r == 0 && (c = pdk_cli_connect(&conn)) == NULL)
		r = PDK_CLI_EXIT_USAGE;
	if (r == 0) {
		port = argc - optind == 2 ? argv[optind + 1] : NULL;
		out = call(c, argv[optind], port, &k);
		r = out == NULL ? PDK_CLI_EXIT_API : 0;
		if (out != NULL)
			print_answer(out, &k, port == NULL);
	}
	json_decref(out);
	pdk_client_free(c);
	return r < 0 ? 0 : r;
}
