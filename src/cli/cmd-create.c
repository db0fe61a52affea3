/*
 * cmd-create.c - `paddock create`: a long-lived sandbox from the daemon
 * (claimed from a warm pool when one fits).
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
	"usage: paddock create [OPTIONS]\n"
	"\n"
	"Ask the daemon ('paddock serve') for a long-lived sandbox and print its id.\n"
	"Commands then run in it with 'paddock exec ID -- CMD', files move with\n"
	"'paddock cp', and 'paddock kill ID' ends it. A create with no workspace,\n"
	"no limits and no environment is served from the profile's warm pool when\n"
	"it has one (a claim of a sandbox built beforehand: milliseconds).\n"
	"\n"
	"options:\n"
	"  -p, --profile NAME     profile (default: default; see 'paddock profile')\n"
	"      --image IMAGE      the root filesystem: an image of the daemon's store\n"
	"                         ('paddock image ls' as the daemon's user), or 'host'\n"
	"                         (default: the profile's image:, else the host's)\n"
	"      --session S        label session=S (also --workflow W, --agent A)\n"
	"      --label K=V        a free-form label (repeatable)\n"
	"      --ttl DURATION     end the sandbox after this long: 30m, 2h\n"
	"      --idle DURATION    end it after this long without a call\n"
	"      --idempotency-key K  a retried create with the same K returns the same\n"
	"                         sandbox instead of making a second one\n"
	"  -w, --workspace DIR    host directory seen at its own path (default: a\n"
	"                         private empty workspace)\n"
	"      --workspace-mode M overlay (default), rw, ro, tmpfs or none\n"
	"  -e, --env K=V          set K in the sandbox's environment (repeatable)\n"
	"  -m, --memory SIZE      memory limit: 512M, 2G\n"
	"  -t, --timeout DURATION wall-clock budget of the sandbox (paused time is\n"
	"                         not charged)\n"
	"      --pids N           limit on processes and threads\n"
	"      --cpus N           CPU bandwidth, e.g. 0.5 or 2\n"
	"      --allow HOST[:PORT] let HTTP(S) to HOST out through the egress proxy\n"
	"                         (repeatable; network mode allowlist)\n"
	"      --json             print the whole sandbox, including its token (a\n"
	"                         short-lived bearer token for this sandbox only, to\n"
	"                         hand to an agent; shown only here)\n" PDK_CLI_CONN_HELP "\n"
	"exit status: 0; 122 bad option; 125 the daemon could not be reached or refused\n"
	"(its error code, message and field are printed).\n";

enum {
	OPT_LABEL = PDK_CLI_OPT_FIRST_FREE,
	OPT_SESSION,
	OPT_WORKFLOW,
	OPT_AGENT,
	OPT_TTL,
	OPT_IDLE,
	OPT_IDEM,
	OPT_WS_MODE,
	OPT_PIDS,
	OPT_CPUS,
	OPT_ALLOW,
	OPT_IMAGE,
};

static const struct option long_opts[] = {
	{"profile", required_argument, NULL, 'p'},
	{"label", required_argument, NULL, OPT_LABEL},
	{"session", required_argument, NULL, OPT_SESSION},
	{"workflow", required_argument, NULL, OPT_WORKFLOW},
	{"agent", required_argument, NULL, OPT_AGENT},
	{"ttl", required_argument, NULL, OPT_TTL},
	{"idle", required_argument, NULL, OPT_IDLE},
	{"idempotency-key", required_argument, NULL, OPT_IDEM},
	{"workspace", required_argument, NULL, 'w'},
	{"workspace-mode", required_argument, NULL, OPT_WS_MODE},
	{"env", required_argument, NULL, 'e'},
	{"memory", required_argument, NULL, 'm'},
	{"timeout", required_argument, NULL, 't'},
	{"pids", required_argument, NULL, OPT_PIDS},
	{"cpus", required_argument, NULL, OPT_CPUS},
	{"allow", required_argument, NULL, OPT_ALLOW},
	{"image", required_argument, NULL, OPT_IMAGE},
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{NULL, 0, NULL, 0},
};

struct create {
	json_t *body, *labels, *env, *limits, *allow;
	const char *ws_path, *ws_mode, *idem;
	bool json;
};

static void create_release(struct create *cr)
{
	json_decref(cr->body);
	json_decref(cr->labels);
	json_decref(cr->env);
	json_decref(cr->limits);
	json_decref(cr->allow);
}

/* One option (pdk_cli_opt_cb); --session, --workflow and --agent are labels of their names. */
static int create_opt(void *ctx, const struct option *o, const char *arg)
{
	struct create *cr = ctx;
	uint64_t n;
	char *end;
	double d;

	switch (o->val) {
	case 'p':
		json_object_set_new(cr->body, "profile", json_string(arg));
		return 0;
	case OPT_IMAGE:
		json_object_set_new(cr->body, "image", json_string(arg));
		return 0;
	case OPT_LABEL:
		return pdk_cli_add_kv(cr->labels, arg, "--label") ? 0 : PDK_CLI_EXIT_USAGE;
	case OPT_SESSION:
	case OPT_WORKFLOW:
	case OPT_AGENT:
		json_object_set_new(cr->labels, o->name, json_string(arg));
		return 0;
	case OPT_TTL:
	case OPT_IDLE:
		json_object_set_new(cr->body, o->val == OPT_TTL ? "ttl" : "idle_timeout",
				    json_string(arg));
		return 0;
	case OPT_IDEM:
		cr->idem = arg;
		return 0;
	case 'w':
		cr->ws_path = arg;
		return 0;
	case OPT_WS_MODE:
		cr->ws_mode = arg;
		return 0;
	case 'e':
		return pdk_cli_add_kv(cr->env, arg, "--env") ? 0 : PDK_CLI_EXIT_USAGE;
	case 'm':
		json_object_set_new(cr->limits, "memory", json_string(arg));
		return 0;
	case 't':
		json_object_set_new(cr->limits, "wall", json_string(arg));
		return 0;
	case OPT_PIDS:
		if (pdk_parse_u64(arg, INT32_MAX, &n) < 0)
			return pdk_cli_usage_error("create", "--pids '%s' is not a number", arg);
		json_object_set_new(cr->limits, "pids", json_integer((json_int_t)n));
		return 0;
	case OPT_CPUS:
		d = strtod(arg, &end);
		if (end == arg || *end != '\0' || !(d > 0))
			return pdk_cli_usage_error("create", "--cpus '%s' is not a positive number",
						   arg);
		json_object_set_new(cr->limits, "cpu", json_real(d));
		return 0;
	case OPT_ALLOW:
		json_array_append_new(cr->allow, json_string(arg));
		return 0;
	case PDK_CLI_OPT_JSON:
		cr->json = true;
		return 0;
	default:
		return -1;
	}
}

static const struct pdk_cli_verb verb = {"+p:w:e:m:t:", long_opts, help, NULL, create_opt};

/* Assemble the request body from what the options gathered. */
static int finish_body(struct create *cr)
{
	json_t *overrides = json_object();

	if (json_object_size(cr->labels) > 0)
		json_object_set(cr->body, "labels", cr->labels);
	if (json_object_size(cr->env) > 0)
		json_object_set(cr->body, "env", cr->env);
	if (json_object_size(cr->limits) > 0)
		json_object_set(overrides, "limits", cr->limits);
	if (json_array_size(cr->allow) > 0)
		json_object_set_new(
			overrides, "network",
			json_pack("{s:s, s:O}", "mode", "allowlist", "allow", cr->allow));
	if (json_object_size(overrides) > 0)
		json_object_set(cr->body, "overrides", overrides);
	json_decref(overrides);
	if (cr->ws_path != NULL || cr->ws_mode != NULL) {
		json_t *ws = json_object();

		if (cr->ws_path != NULL) {
			_cleanup_free_ char *abs = realpath(cr->ws_path, NULL);

			if (abs == NULL) {
				json_decref(ws);
				pdk_cli_error("workspace '%s': %s", cr->ws_path, strerror(errno));
				return PDK_CLI_EXIT_USAGE;
			}
			json_object_set_new(ws, "path", json_string(abs));
		}
		if (cr->ws_mode != NULL)
			json_object_set_new(ws, "mode", json_string(cr->ws_mode));
		json_object_set_new(cr->body, "workspace", ws);
	}
	if (cr->idem != NULL)
		json_object_set_new(cr->body, "idempotency_key", json_string(cr->idem));
	return 0;
}

static int do_create(struct pdk_client *c, struct create *cr)
{
	json_t *out = pdk_cli_call(c, "POST", "/v1/sandboxes", cr->body);
	const char *id;

	if (out == NULL)
		return PDK_CLI_EXIT_API;
	id = json_string_value(json_object_get(out, "id"));
	if (cr->json)
		pdk_cli_print_json(out);
	else if (id != NULL)
		puts(id);
	json_decref(out);
	if (id == NULL && !cr->json) {
		pdk_cli_error("the daemon's answer holds no sandbox id");
		return PDK_CLI_EXIT_API;
	}
	return 0;
}

int pdk_cmd_create(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct create cr = {.body = json_object(),
			    .labels = json_object(),
			    .env = json_object(),
			    .limits = json_object(),
			    .allow = json_array()};
	struct pdk_client *c;
	int r = pdk_cli_parse(&verb, argc, argv, &conn, &cr);

	if (r == 0 && optind < argc)
		r = pdk_cli_usage_error("create", "unexpected argument '%s'", argv[optind]);
	if (r == 0)
		r = finish_body(&cr);
	if (r != 0) {
		create_release(&cr);
		return r < 0 ? 0 : r;
	}
	c = pdk_cli_connect(&conn);
	r = c != NULL ? do_create(c, &cr) : PDK_CLI_EXIT_USAGE;
	pdk_client_free(c);
	create_release(&cr);
	return r;
}
