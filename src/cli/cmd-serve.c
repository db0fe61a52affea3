/*
 * cmd-serve.c - `paddock serve`: the daemon (src/daemon/), and
 * `paddock serve token create|ls|revoke` for its admin tokens, and
 * `paddock serve e2b-key create|ls|rm` for the E2B front door's API keys.
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "control.h"
#include "daemon.h"
#include "e2b.h"
#include "policy.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void usage(FILE *out)
{
	fputs("usage: paddock serve [OPTIONS]\n"
	      "       paddock serve token create [--name NAME]\n"
	      "       paddock serve token ls\n"
	      "       paddock serve token revoke NAME\n"
	      "       paddock serve e2b-key create [--name NAME] | ls | rm NAME\n"
	      "\n"
	      "Run the control plane: a daemon with a REST/JSON API (docs/daemon.md, docs/api.yaml)\n"
	      "that creates long-lived sandboxes, runs commands in them, moves files, pauses,\n"
	      "snapshots, kills them, keeps warm pools and streams their events. Each sandbox is\n"
	      "run by its own supervisor process, which outlives the daemon: a restarted daemon\n"
	      "re-adopts every sandbox it finds, and marks 'lost' the ones whose supervisor died.\n"
	      "It also serves MCP at /mcp on the same listeners (docs/mcp.md), for its admins.\n"
	      "\n"
	      "options:\n"
	      "  --socket PATH       the unix socket (mode 0600; default RUNDIR/paddock.sock).\n"
	      "                      Its peers are admins when their uid is the daemon's or 0\n"
	      "                      and they live in the daemon's user and pid namespaces\n"
	      "                      (never a sandbox's process); others need a token.\n"
	      "  --listen HOST:PORT  also serve HTTP on TCP (numeric address). Every TCP request\n"
	      "                      needs 'Authorization: Bearer TOKEN': an admin token (below)\n"
	      "                      or a sandbox token (POST /v1/sandboxes/ID/tokens).\n"
	      "  --pool PROFILE=N    keep N ready sandboxes of PROFILE (repeatable; N <= 64). A\n"
	      "                      create of that profile without workspace, overrides or env\n"
	      "                      claims one at once; the pool refills in the background.\n"
	      "                      PROFILE must load ('paddock profile check PROFILE'): an\n"
	      "                      unknown or invalid one is refused at start (122).\n"
	      "  --max-body BYTES    the largest request body (files, archives; default 64M).\n"
	      "                      JSON bodies are limited to 1 MiB.\n"
	      "  --max-conns N       TCP connections at once (default 1024, lowered to half of\n"
	      "                      the descriptor limit, ulimit -n). One more closes the oldest\n"
	      "                      connection that has sent no complete request, else gets 503.\n"
	      "  --max-conns-per-peer N  TCP connections at once from one address (default 64);\n"
	      "                      one more gets 503 and is closed.\n"
	      "  --header-timeout DURATION  how long a request's line and headers may take, from\n"
	      "                      the connection's start or the previous answer's end\n"
	      "                      (default 10s; TCP and the unix socket); then 408, closed.\n"
	      "  --exec-starts N     commands that may be starting at once over every sandbox\n"
	      "                      (default twice the CPUs online; 0: no bound). A command\n"
	      "                      holds its start slot until it exits or for 20 ms; the\n"
	      "                      others wait, each sandbox's in order, sandboxes in turn, so\n"
	      "                      that a burst answers in the order it came instead of all\n"
	      "                      at its end. A pty session does not wait.\n"
	      "  --state-dir DIR     the state directory (default $PADDOCK_STATE_DIR, else\n"
	      "                      $XDG_STATE_HOME/paddock, ~/.local/state/paddock, or\n"
	      "                      /var/lib/paddock for root). It holds daemon.db, daemon.key,\n"
	      "                      daemon.lock and the audit store; one daemon per directory.\n"
	      "  --retention DURATION  how long an ended sandbox stays visible (GET\n"
	      "                      /v1/sandboxes/ID answers it with state 'ended', its end\n"
	      "                      reason and time; default 1h; 0: forgotten at once).\n"
	      "  --e2b-domain DOMAIN  E2B's sandbox domain (HOST or HOST:PORT, docs/e2b.md): the\n"
	      "                      E2B create answers carry it, so sbx.getHost(PORT) is\n"
	      "                      PORT-ID.DOMAIN, and the TCP listener relays a request with\n"
	      "                      that Host to the sandbox's PORT (a wildcard DNS name for\n"
	      "                      *.DOMAIN must reach the listener).\n"
	      "  --kill-on-exit      destroy every sandbox (pool members too) at SIGTERM/SIGINT;\n"
	      "                      by default they keep running and the next daemon re-adopts them.\n"
	      "  -q, --quiet         no log lines on stderr\n"
	      "  -h, --help          this help\n"
	      "\n"
	      "RUNDIR is $PADDOCK_RUNTIME_DIR, else $XDG_RUNTIME_DIR/paddock, else /run/paddock for\n"
	      "root, else /tmp/paddock-UID (mode 0700). Each sandbox has RUNDIR/sb/ID/ with its\n"
	      "control socket and event spool.\n"
	      "\n"
	      "token commands (run by the daemon's user, with or without a running daemon):\n"
	      "  create [--name N]   print a new admin token once; only its SHA-256 is stored\n"
	      "  ls                  list the admin tokens' names and creation times\n"
	      "  revoke NAME         remove a token; requests with it fail from then on\n"
	      "\n"
	      "e2b-key commands (the same way; docs/e2b.md): the X-API-KEY of E2B's SDKs\n"
	      "(E2B_API_KEY), served on --listen:\n"
	      "  create [--name N]   print a new key (e2b_ and 40 hex digits) once; only its\n"
	      "                      SHA-256 is stored. A key sees only the sandboxes it created.\n"
	      "  ls                  list the keys' names and creation times\n"
	      "  rm NAME             remove a key; requests with it fail from then on\n"
	      "\n"
	      "exit status: 0 after a clean shutdown (SIGTERM, SIGINT), 1 when the daemon could not\n"
	      "start (another daemon holds the state directory, the socket cannot be bound...),\n"
	      "122 for a bad option.\n",
	      out);
}

static int open_store(const char *state_dir, struct pdk_store **s)
{
	_cleanup_free_ char *dir = state_dir ? pdk_xstrdup(state_dir) : pdk_cli_state_dir();
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_store_open(dir, s, &err) < 0) {
		pdk_cli_error("%s", err->msg);
		return 1;
	}
	return 0;
}

static int print_token(void *data, const char *name, uint64_t created_ns)
{
	time_t t = (time_t)(created_ns / 1000000000ULL);
	struct tm tm;
	char buf[32];

	(void)data;
	(void)gmtime_r(&t, &tm);
	(void)strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%-24s %s\n", name, buf);
	return 0;
}

static int token_create(struct pdk_store *s, const char *name)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *token = NULL, *auto_name = NULL;
	char hash[65], id[37];

	if (name == NULL) {
		pdk_make_id(id);
		auto_name = pdk_xasprintf("token-%.8s", id + 28);
		name = auto_name;
	}
	if (pdk_token_admin_new(&token, hash, &err) < 0 ||
	    pdk_store_token_add(s, name, hash, &err) < 0) {
		pdk_cli_error("%s", err->msg);
		return 1;
	}
	printf("%s\n", token);
	fprintf(stderr, "paddock: admin token '%s' created; it is shown only this once\n", name);
	return 0;
}

static int e2b_key_create(struct pdk_store *s, const char *name)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *key = NULL, *auto_name = NULL;
	char hash[65], id[37];

	if (name == NULL) {
		pdk_make_id(id);
		auto_name = pdk_xasprintf("key-%.8s", id + 28);
		name = auto_name;
	}
	if (pdk_token_e2b_key_new(&key, hash, &err) < 0 ||
	    pdk_store_e2b_key_add(s, name, hash, &err) < 0) {
		pdk_cli_error("%s", err->msg);
		return 1;
	}
	printf("%s\n", key);
	fprintf(stderr, "paddock: E2B API key '%s' created; it is shown only this once\n", name);
	return 0;
}

static int cmd_e2b_key(int argc, char **argv, const char *state_dir)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_store *s = NULL;
	const char *name = NULL;
	bool create = argc >= 2 && strcmp(argv[1], "create") == 0;
	int rc = 0;

	if (create && argc == 4 && strcmp(argv[2], "--name") == 0)
		name = argv[3];
	else if (!((create && argc == 2) || (argc == 2 && strcmp(argv[1], "ls") == 0) ||
		   (argc == 3 && strcmp(argv[1], "rm") == 0))) {
		pdk_cli_error("usage: paddock serve e2b-key create [--name N] | ls | rm NAME");
		return PDK_EXIT_POLICY;
	}
	if (name != NULL && !pdk_ctl_name_ok(name)) {
		pdk_cli_error("--name: a key name is 1-64 of [A-Za-z0-9_.-], not '%s'", name);
		return PDK_EXIT_POLICY;
	}
	if (open_store(state_dir, &s) != 0)
		return 1;
	if (create)
		rc = e2b_key_create(s, name);
	else if (strcmp(argv[1], "ls") == 0)
		rc = pdk_store_e2b_key_each(s, print_token, NULL, &err) < 0 ? 1 : 0;
	else
		rc = pdk_store_e2b_key_revoke(s, argv[2], &err) < 0 ? 1 : 0;
	if (err != NULL)
		pdk_cli_error("%s", err->msg);
	pdk_store_free(s);
	return rc;
}

static int cmd_token(int argc, char **argv, const char *state_dir)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_store *s = NULL;
	const char *name = NULL;
	int rc = 0;

	if (argc < 2) {
		usage(stderr);
		return PDK_EXIT_POLICY;
	}
	if (strcmp(argv[1], "create") == 0 && argc == 4 && strcmp(argv[2], "--name") == 0)
		name = argv[3];
	else if (!((strcmp(argv[1], "create") == 0 && argc == 2) ||
		   (strcmp(argv[1], "ls") == 0 && argc == 2) ||
		   (strcmp(argv[1], "revoke") == 0 && argc == 3))) {
		pdk_cli_error("usage: paddock serve token create [--name N] | ls | revoke NAME");
		return PDK_EXIT_POLICY;
	}
	if (name != NULL && !pdk_ctl_name_ok(name)) {
		pdk_cli_error("a token name is 1-64 of [A-Za-z0-9_.-]");
		return PDK_EXIT_POLICY;
	}
	if (open_store(state_dir, &s) != 0)
		return 1;
	if (strcmp(argv[1], "create") == 0)
		rc = token_create(s, name);
	else if (strcmp(argv[1], "ls") == 0)
		rc = pdk_store_token_each(s, print_token, NULL, &err) < 0 ? 1 : 0;
	else
		rc = pdk_store_token_revoke(s, argv[2], &err) < 0 ? 1 : 0;
	if (err != NULL)
		pdk_cli_error("%s", err->msg);
	pdk_store_free(s);
	return rc;
}

enum {
	OPT_SOCKET = 256,
	OPT_LISTEN,
	OPT_POOL,
	OPT_MAX_BODY,
	OPT_STATE_DIR,
	OPT_KILL,
	OPT_RETENTION,
	OPT_MAX_CONNS,
	OPT_MAX_PER_PEER,
	OPT_HEADER_TIMEOUT,
	OPT_E2B_DOMAIN,
	OPT_EXEC_STARTS
};

/*
 * The daemon's messages: "paddock serve: MSG" on stderr. With --quiet only
 * errors that nobody else hears of (an audit record that could not be
 * written) still come through.
 */
static void serve_log(void *data, enum pdk_log_level level, const char *msg)
{
	const bool *quiet = data;

	if (*quiet && level != PDK_LOG_ERROR)
		return;
	fprintf(stderr, "paddock serve: %s\n", msg);
}

#define DEFAULT_RETENTION_S 3600
#define MAX_RETENTION_S     (366ULL * 24 * 3600)

static const struct option long_opts[] = {
	{"socket", required_argument, NULL, OPT_SOCKET},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"pool", required_argument, NULL, OPT_POOL},
	{"max-body", required_argument, NULL, OPT_MAX_BODY},
	{"state-dir", required_argument, NULL, OPT_STATE_DIR},
	{"kill-on-exit", no_argument, NULL, OPT_KILL},
	{"retention", required_argument, NULL, OPT_RETENTION},
	{"max-conns", required_argument, NULL, OPT_MAX_CONNS},
	{"max-conns-per-peer", required_argument, NULL, OPT_MAX_PER_PEER},
	{"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
	{"e2b-domain", required_argument, NULL, OPT_E2B_DOMAIN},
	{"exec-starts", required_argument, NULL, OPT_EXEC_STARTS},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* What the flags of `paddock serve` give. */
struct serve_args {
	struct pdk_daemon_opts o;
	char **pools;
	bool quiet;
};

static int parse_retention(const char *arg, uint64_t *out_s)
{
	uint64_t ms = 0;

	if (strcmp(arg, "0") != 0 &&
	    (pdk_parse_duration(arg, &ms) < 0 || ms / 1000 > MAX_RETENTION_S)) {
		pdk_cli_error("--retention wants a duration (30m, 1h, 0) of at most 366 days, not "
			      "'%s'",
			      arg);
		return -1;
	}
	*out_s = ms / 1000;
	return 0;
}

/* A count flag of 1..max. */
static int parse_count(const char *name, const char *arg, uint64_t max, unsigned *out)
{
	uint64_t n;

	if (pdk_parse_u64(arg, max, &n) < 0 || n == 0) {
		pdk_cli_error("%s wants a number from 1 to %llu, not '%s'", name,
			      (unsigned long long)max, arg);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

static int parse_header_timeout(const char *arg, uint64_t *out_ms)
{
	if (pdk_parse_duration(arg, out_ms) < 0 || *out_ms < 100 || *out_ms > 3600 * 1000) {
		pdk_cli_error(
			"--header-timeout wants a duration from 100ms to 1h (10s, 500ms), not "
			"'%s'",
			arg);
		return -1;
	}
	return 0;
}

/* One flag: 0, 1 after --help, or -1 after an error was printed. */
static int serve_opt(int c, struct serve_args *a)
{
	switch (c) {
	case OPT_SOCKET:
		a->o.socket_path = optarg;
		return 0;
	case OPT_LISTEN:
		a->o.listen = optarg;
		return 0;
	case OPT_POOL:
		pdk_strv_push(&a->pools, optarg);
		return 0;
	case OPT_MAX_BODY:
		if (pdk_parse_size(optarg, &a->o.max_body) < 0 || a->o.max_body < 1024) {
			pdk_cli_error("--max-body wants a size of at least 1K, not '%s'", optarg);
			return -1;
		}
		return 0;
	case OPT_STATE_DIR:
		a->o.state_dir = optarg;
		return 0;
	case OPT_KILL:
		a->o.kill_on_exit = true;
		return 0;
	case OPT_RETENTION:
		return parse_retention(optarg, &a->o.retention_s);
	case OPT_MAX_CONNS:
		return parse_count("--max-conns", optarg, 1000000, &a->o.max_conns);
	case OPT_MAX_PER_PEER:
		return parse_count("--max-conns-per-peer", optarg, 1000000, &a->o.max_per_peer);
	case OPT_HEADER_TIMEOUT:
		return parse_header_timeout(optarg, &a->o.head_timeout_ms);
	case OPT_EXEC_STARTS: {
		uint64_t n;

		if (pdk_parse_u64(optarg, 4096, &n) < 0) {
			pdk_cli_error("--exec-starts wants a number from 0 (no bound) to 4096, not "
				      "'%s'",
				      optarg);
			return -1;
		}
		a->o.exec_starts = n == 0 ? UINT_MAX : (unsigned)n;
		return 0;
	}
	case OPT_E2B_DOMAIN:
		if (!pdk_e2b_domain_ok(optarg)) {
			pdk_cli_error("--e2b-domain wants HOST or HOST:PORT (lowercase letters, "
				      "digits, '-' and '.'), not '%s'",
				      optarg);
			return -1;
		}
		a->o.e2b_domain = optarg;
		return 0;
	case 'q':
		a->quiet = true;
		return 0;
	case 'h':
		usage(stdout);
		return 1;
	default:
		usage(stderr);
		return -1;
	}
}

static int parse_serve(int argc, char **argv, struct serve_args *a)
{
	int c, rc;

	while ((c = getopt_long(argc, argv, "qh", long_opts, NULL)) != -1)
		if ((rc = serve_opt(c, a)) != 0)
			return rc;
	if (optind < argc) {
		pdk_cli_error("serve takes no arguments ('%s')", argv[optind]);
		return -1;
	}
	return 0;
}

/*
 * One --pool entry, checked before the daemon starts: PROFILE=N with N up to
 * the pool's bound, and a PROFILE that loads as the daemon's sandboxes will
 * load it. A pool of a profile that cannot load would be persisted and never
 * fill; refusing it here names the entry and the fix.
 */
static int check_pool(const char *entry, const char *profile_dir)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *profile = pdk_xstrdup(entry);
	struct pdk_policy_report rep = {0};
	struct pdk_policy *p;
	char *eq = strchr(profile, '=');
	uint64_t n;

	if (eq == NULL || (*eq = '\0', !pdk_ctl_name_ok(profile)) ||
	    pdk_parse_u64(eq + 1, PDK_CTL_POOL_MAX, &n) < 0) {
		pdk_cli_error(
			"serve: --pool wants PROFILE=N (a profile name, N up to %d), not '%s'",
			PDK_CTL_POOL_MAX, entry);
		return -1;
	}
	p = pdk_policy_load(profile, profile_dir, &rep, &err);
	pdk_policy_report_release(&rep);
	if (p == NULL) {
		pdk_cli_error("serve: --pool %s: %s; give a profile that 'paddock profile check' "
			      "accepts",
			      entry, err != NULL ? err->msg : "the profile is not valid");
		return -1;
	}
	pdk_policy_free(p);
	return 0;
}

static int check_pools(char **pools, const char *profile_dir)
{
	for (size_t i = 0; pools != NULL && pools[i] != NULL; i++)
		if (check_pool(pools[i], profile_dir) < 0)
			return -1;
	return 0;
}

int pdk_cmd_serve(int argc, char **argv)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct serve_args a = {.o = {.retention_s = DEFAULT_RETENTION_S}};
	struct pdk_log log = {.fn = serve_log, .data = &a.quiet};
	struct pdk_settings settings;
	const char *state_dir = NULL;
	int rc;

	/* The token verbs come before any option parsing: their own grammar. */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "token") == 0)
			return cmd_token(argc - i, argv + i, state_dir);
		if (strcmp(argv[i], "e2b-key") == 0)
			return cmd_e2b_key(argc - i, argv + i, state_dir);
		if (strcmp(argv[i], "--state-dir") == 0 && i + 1 < argc)
			state_dir = argv[++i];
		else
			break;
	}
	optind = 1;
	rc = parse_serve(argc, argv, &a);
	if (rc != 0) {
		pdk_strv_free(a.pools);
		return rc > 0 ? 0 : PDK_EXIT_POLICY;
	}
	a.o.pools = a.pools;
	a.o.log = &log;
	pdk_cli_settings(&settings);
	if (check_pools(a.pools, settings.paths.profile_dir) < 0) {
		pdk_settings_release(&settings);
		pdk_strv_free(a.pools);
		return PDK_EXIT_POLICY;
	}
	if (a.o.state_dir == NULL)
		a.o.state_dir = settings.paths.state_dir;
	a.o.run_dir = settings.paths.runtime_dir;
	a.o.envp = settings.envp; /* the supervisors' environment */
	rc = pdk_daemon_serve(&a.o, &err);
	pdk_settings_release(&settings);
	pdk_strv_free(a.pools);
	if (rc < 0) {
		pdk_cli_error("serve: %s", err->msg);
		return 1;
	}
	return 0;
}
