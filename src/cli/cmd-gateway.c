/*
 * cmd-gateway.c - `paddock gateway`: the MCP gateway (docs/gateway.md; the
 * broker is src/gateway/, its loop src/daemon/gateway-run.c), and its
 * helpers: `check` (the config and each server's generated profile),
 * `pins` (the pinned tool definitions) and `token` (a new bearer token and
 * its principals entry).
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "daemon.h"
#include "gateway.h"

#include <getopt.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define SECRET_PREFIX "PADDOCK_SECRET_"
#define TOKEN_BYTES   32

static const char run_help[] =
	"usage: paddock gateway --config FILE [--listen HOST:PORT] [--principal NAME]\n"
	"       paddock gateway check --config FILE\n"
	"       paddock gateway pins [--json]\n"
	"       paddock gateway token NAME\n"
	"\n"
	"Serve one MCP endpoint in front of the MCP servers FILE lists (docs/gateway.md).\n"
	"Each stdio server runs in a paddock sandbox of its own, under the profile its\n"
	"permission manifest maps to; a remote one (url) is reached over Streamable\n"
	"HTTP. Their tools are offered as SERVER__TOOL once their definitions are\n"
	"pinned (a new or changed one waits for 'paddock approve'); each call goes\n"
	"through the config's policy and budgets, is validated against the tool's\n"
	"pinned inputSchema, has secrets redacted both ways, and is recorded in the\n"
	"audit store as a tool.call event. Register it with a client, for example:\n"
	"\n"
	"  claude mcp add tools -- paddock gateway --config ~/gateway.yaml\n"
	"\n"
	"It serves stdin and stdout until the client closes stdin; with --listen, the\n"
	"Streamable HTTP transport at http://HOST:PORT/mcp until SIGTERM or SIGINT. Then\n"
	"every upstream's sandbox is destroyed and waited for.\n"
	"\n"
	"options:\n"
	"  --config FILE       the gateway's config (required)\n"
	"  --listen HOST:PORT  serve Streamable HTTP; with principals in the config each\n"
	"                      request needs 'Authorization: Bearer TOKEN' of one of them,\n"
	"                      without any the address must be loopback\n"
	"  --principal NAME    who the stdio client is, for the policy and the records\n"
	"                      (default: local)\n"
	"  --max-message SIZE  the largest message a client may send (default 4M)\n"
	"  --state-dir DIR     the state directory (default $PADDOCK_STATE_DIR, ...)\n"
	"  -q, --quiet         no log lines on stderr but errors\n"
	"  -h, --help          this help\n"
	"\n"
	"A secret a credential or a remote server's header names is read from\n"
	"PADDOCK_SECRET_NAME; every such value is redacted out of arguments and results.\n"
	"\n"
	"exit status: 0 when the client closed stdin (or at SIGTERM, SIGINT); 1 when the\n"
	"gateway could not start; 122 for a bad option or a bad config (the message says\n"
	"FILE:LINE: FIELD: what is wrong).\n";

static const char check_help[] =
	"usage: paddock gateway check --config FILE\n"
	"\n"
	"Check the gateway's config FILE and print each server with the paddock profile\n"
	"its permission manifest maps to (YAML). Nothing is started.\n"
	"\n"
	"exit status: 0 the config is good; 122 it is not (FILE:LINE: FIELD: message) or\n"
	"a bad option.\n";

static const char pins_help[] =
	"usage: paddock gateway pins [--json] [--state-dir DIR]\n"
	"\n"
	"List the pinned tool definitions of the state directory: SERVER, TOOL, the\n"
	"definition's SHA-256, who approved it (first-contact, or the approver) and when.\n"
	"\n"
	"exit status: 0; 1 the pin store could not be read; 122 bad option.\n";

static const char token_help[] =
	"usage: paddock gateway token NAME\n"
	"\n"
	"Print a new random bearer token for principal NAME, and the entry to add under\n"
	"'principals:' in the gateway's config (only the token's SHA-256 is kept there).\n"
	"Give the token to the agent; it is not stored anywhere.\n"
	"\n"
	"exit status: 0; 122 bad argument.\n";

enum { OPT_CONFIG = 256, OPT_LISTEN, OPT_PRINCIPAL, OPT_MAX_MESSAGE, OPT_STATE_DIR, OPT_JSON };

static const struct option long_opts[] = {
	{"config", required_argument, NULL, OPT_CONFIG},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"principal", required_argument, NULL, OPT_PRINCIPAL},
	{"max-message", required_argument, NULL, OPT_MAX_MESSAGE},
	{"state-dir", required_argument, NULL, OPT_STATE_DIR},
	{"json", no_argument, NULL, OPT_JSON},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

struct gw_args {
	const char *verb; /* "run", "check", "pins", "token" */
	const char *help;
	struct pdk_daemon_gateway_opts o;
	const char *config;
	bool json, quiet;
};

static void gw_log(void *data, enum pdk_log_level level, const char *msg)
{
	const bool *quiet = data;

	if (*quiet && level != PDK_LOG_ERROR)
		return;
	fprintf(stderr, "paddock gateway: %s\n", msg);
}

static int parse_size(const char *arg, size_t *out)
{
	uint64_t n;

	if (pdk_parse_size(arg, &n) < 0 || n < 1024 || n > (64ULL << 20)) {
		pdk_cli_error("gateway: --max-message wants a size from 1K to 64M, not '%s'", arg);
		return -1;
	}
	*out = (size_t)n;
	return 0;
}

/* One flag: 0, 1 after --help, or -1 after an error was printed. */
static int gw_opt(int c, struct gw_args *a)
{
	switch (c) {
	case OPT_CONFIG:
		a->config = optarg;
		return 0;
	case OPT_LISTEN:
		a->o.listen = optarg;
		return 0;
	case OPT_PRINCIPAL:
		a->o.principal = optarg;
		return 0;
	case OPT_MAX_MESSAGE:
		return parse_size(optarg, &a->o.max_message);
	case OPT_STATE_DIR:
		a->o.state_dir = optarg;
		return 0;
	case OPT_JSON:
		a->json = true;
		return 0;
	case 'q':
		a->quiet = true;
		return 0;
	case 'h':
		fputs(a->help, stdout);
		return 1;
	default:
		fputs(a->help, stderr);
		return -1;
	}
}

static const char *help_of(const char *verb)
{
	if (strcmp(verb, "check") == 0)
		return check_help;
	if (strcmp(verb, "pins") == 0)
		return pins_help;
	return strcmp(verb, "token") == 0 ? token_help : run_help;
}

/* The subcommand, then the flags: 0, 1 after --help, or -1 after an error was printed. */
static int parse_gw(int argc, char **argv, struct gw_args *a)
{
	int c, rc;

	a->verb = "run";
	if (argc > 1 && argv[1][0] != '-') {
		a->verb = argv[1];
		argc--;
		argv++;
	}
	if (strcmp(a->verb, "run") != 0 && strcmp(a->verb, "check") != 0 &&
	    strcmp(a->verb, "pins") != 0 && strcmp(a->verb, "token") != 0) {
		pdk_cli_error("gateway: unknown subcommand '%s': check, pins or token (see "
			      "paddock gateway --help)",
			      a->verb);
		return -1;
	}
	a->help = help_of(a->verb);
	optind = 1;
	while ((c = getopt_long(argc, argv, "qh", long_opts, NULL)) != -1)
		if ((rc = gw_opt(c, a)) != 0)
			return rc;
	if (strcmp(a->verb, "token") == 0)
		return optind + 1 == argc ? 0 : (pdk_cli_error("gateway token takes one NAME"), -1);
	if (optind < argc) {
		pdk_cli_error("gateway %s takes no arguments ('%s'); see paddock gateway --help",
			      a->verb, argv[optind]);
		return -1;
	}
	return 0;
}

/* The config, loaded and checked; NULL after printing why. */
static struct pdk_gw_config *load_config(const struct gw_args *a)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_gw_config *cfg = NULL;

	if (a->config == NULL) {
		pdk_cli_error("gateway: --config FILE is required (docs/gateway.md)");
		return NULL;
	}
	if (pdk_gw_config_load(a->config, &cfg, &err) < 0) {
		pdk_cli_error("gateway: %s", err->msg);
		return NULL;
	}
	return cfg;
}

/* A remote server as `gateway check` shows it: its url, trust and the names of its headers. */
static void check_remote(const struct pdk_gw_config *cfg, const struct pdk_gw_server *s)
{
	printf("# server %s (%s:%d): remote, Streamable HTTP at %s\n", s->id, cfg->path, s->line,
	       s->url);
	if (strncmp(s->url, "https://", 8) == 0)
		printf("#   trusts: %s\n", s->ca_file ? s->ca_file : "the system's CA store");
	else
		printf("#   plain http%s\n",
		       s->insecure_http ? " (insecure_http: true)" : ", loopback");
	/* The names only: a value may be a literal token. */
	for (size_t i = 0; s->headers != NULL && s->headers[i] != NULL; i++)
		printf("#   header: %.*s%s\n", (int)strcspn(s->headers[i], ":"), s->headers[i],
		       strstr(s->headers[i], "${secret:") ? " (a secret)" : "");
}

static int do_check(const struct gw_args *a)
{
	struct pdk_gw_config *cfg = load_config(a);

	if (cfg == NULL)
		return PDK_EXIT_POLICY;
	for (size_t i = 0; i < cfg->n_servers; i++) {
		const struct pdk_gw_server *s = &cfg->servers[i];
		_cleanup_free_ char *yaml = s->command ? pdk_gw_profile_yaml(s) : NULL;

		if (s->command == NULL) {
			check_remote(cfg, s);
			continue;
		}
		printf("# server %s (%s:%d): stdio, in a sandbox of its own\n", s->id, cfg->path,
		       s->line);
		if (yaml != NULL)
			printf("%s%s", yaml, yaml[0] && yaml[strlen(yaml) - 1] == '\n' ? "" : "\n");
	}
	printf("# %s: %zu server(s), %zu rule(s), default %s\n", cfg->path, cfg->n_servers,
	       cfg->n_rules, pdk_gw_action_name(cfg->dflt));
	pdk_gw_config_free(cfg);
	return 0;
}

static int do_pins(const struct gw_args *a)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *list = NULL;
	struct pdk_gw_pins *p = NULL;
	size_t i;
	json_t *x;

	if (pdk_gw_pins_open(a->o.state_dir, &p, &err) < 0 ||
	    pdk_gw_pin_list(p, NULL, &list, &err) < 0) {
		pdk_gw_pins_free(p);
		pdk_cli_error("gateway pins: %s", err->msg);
		return 1;
	}
	pdk_gw_pins_free(p);
	if (a->json) {
		pdk_cli_print_json(list);
		return 0;
	}
	printf("%-16s  %-32s  %-16s  %-24s  %s\n", "SERVER", "TOOL", "HASH", "APPROVER", "PINNED");
	json_array_foreach(list, i, x)
	{
		const json_t *at = json_object_get(x, "pinned_at");
		_cleanup_free_ char *when =
			json_is_string(at)
				? pdk_xstrdup(json_string_value(at))
				: pdk_xasprintf("%lld", (long long)json_integer_value(at));

		printf("%-16s  %-32s  %-16.16s  %-24s  %s\n",
		       json_string_value(json_object_get(x, "server")),
		       json_string_value(json_object_get(x, "tool")),
		       json_string_value(json_object_get(x, "hash")),
		       json_string_value(json_object_get(x, "approver")), when);
	}
	return 0;
}

static int do_token(const char *name)
{
	unsigned char raw[TOKEN_BYTES], h[32];
	char tok[2 * TOKEN_BYTES + 1], hex[65];
	unsigned int len = 0;

	if (name[0] == '\0' || strlen(name) > 64 || strchr(name, '\n') || strchr(name, '}')) {
		pdk_cli_error("gateway token: NAME must be 1 to 64 characters, one line");
		return PDK_EXIT_POLICY;
	}
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		pdk_cli_error("gateway token: cannot read random bytes");
		return 1;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		(void)snprintf(tok + 2 * i, 3, "%02x", raw[i]);
	if (EVP_Digest(tok, strlen(tok), h, &len, EVP_sha256(), NULL) != 1)
		pdk_oom();
	for (size_t i = 0; i < sizeof(h); i++)
		(void)snprintf(hex + 2 * i, 3, "%02x", h[i]);
	printf("%s\n# add to the config's principals:\n  - {name: %s, token_sha256: %s}\n", tok,
	       name, hex);
	return 0;
}

/* PADDOCK_SECRET_NAME=VALUE of the environment: NAME, VALUE, ... (pdk_strv_free()). */
static char **secrets_of(char *const *envp)
{
	size_t n = 0;
	char **out = pdk_xcalloc(1, sizeof(*out));

	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
		const char *kv = envp[i];
		const char *eq = strchr(kv, '=');

		if (strncmp(kv, SECRET_PREFIX, strlen(SECRET_PREFIX)) != 0 || eq == NULL)
			continue;
		out = pdk_xrealloc(out, (n + 3) * sizeof(*out));
		out[n++] = pdk_xasprintf("%.*s", (int)(eq - kv - strlen(SECRET_PREFIX)),
					 kv + strlen(SECRET_PREFIX));
		out[n++] = pdk_xstrdup(eq + 1);
		out[n] = NULL;
	}
	return out;
}

static int do_run(struct gw_args *a, const struct pdk_settings *settings)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_log log = {.fn = gw_log, .data = &a->quiet};
	struct pdk_gw_config *cfg = load_config(a);
	char **secrets;
	int rc;

	if (cfg == NULL)
		return PDK_EXIT_POLICY;
	secrets = secrets_of(settings->envp);
	a->o.cfg = cfg;
	a->o.run_dir = settings->paths.runtime_dir;
	a->o.envp = settings->envp;
	a->o.secrets = secrets;
	a->o.log = &log;
	rc = pdk_daemon_gateway(&a->o, &err);
	pdk_strv_free(secrets);
	pdk_gw_config_free(cfg);
	if (rc == -EINVAL && err != NULL && err->field != NULL) {
		pdk_cli_error("gateway: %s", err->msg);
		return PDK_EXIT_POLICY;
	}
	if (rc < 0) {
		pdk_cli_error("gateway: %s", err->msg);
		return 1;
	}
	return 0;
}

int pdk_cmd_gateway(int argc, char **argv)
{
	struct gw_args a = {0};
	struct pdk_settings settings;
	int rc = parse_gw(argc, argv, &a);

	if (rc != 0)
		return rc > 0 ? 0 : PDK_EXIT_POLICY;
	if (strcmp(a.verb, "token") == 0)
		return do_token(argv[argc - 1]);
	if (strcmp(a.verb, "check") == 0)
		return do_check(&a);
	pdk_cli_settings(&settings);
	if (a.o.state_dir == NULL)
		a.o.state_dir = settings.paths.state_dir;
	rc = strcmp(a.verb, "pins") == 0 ? do_pins(&a) : do_run(&a, &settings);
	pdk_settings_release(&settings);
	return rc;
}
