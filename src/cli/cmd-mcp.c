/*
 * cmd-mcp.c - `paddock mcp`: an MCP server whose tools run in paddock
 * sandboxes (docs/mcp.md; the server is src/mcp/, its loop src/daemon/).
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "daemon.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *out)
{
	fputs("usage: paddock mcp [OPTIONS]\n"
	      "\n"
	      "Serve the Model Context Protocol on stdin and stdout, one JSON-RPC message per\n"
	      "line (docs/mcp.md). An agent reaches paddock sandboxes through its tools: run a\n"
	      "command or code, read and write files, review the workspace's change set, see\n"
	      "what the network allows. Register it with a client, for example:\n"
	      "\n"
	      "  claude mcp add paddock -- paddock mcp\n"
	      "\n"
	      "It needs nothing else running: it starts a control object of its own on the\n"
	      "state directory (beside a 'paddock serve' there, if any), makes a sandbox at the\n"
	      "first tool call, and when the client closes stdin it destroys every sandbox it\n"
	      "made and waits for them: nothing is left running. Every tool call is recorded in\n"
	      "the audit store ('paddock audit show').\n"
	      "\n"
	      "With --listen, it serves the Streamable HTTP transport at http://HOST:PORT/mcp\n"
	      "instead (both protocol eras on one endpoint), until SIGTERM or SIGINT.\n"
	      "\n"
	      "options:\n"
	      "  --listen HOST:PORT  serve Streamable HTTP on a loopback address (127.0.0.1,\n"
	      "                      [::1]); its clients bring no credentials, so Host and\n"
	      "                      Origin must name loopback. Beyond loopback, use paddock\n"
	      "                      serve --listen: its /mcp takes bearer tokens.\n"
	      "  --profile NAME|FILE the profile of the session's sandbox and of sandbox_create\n"
	      "                      without one (default: default); a client's\n"
	      "                      sandbox_create names a profile, never a file\n"
	      "  --workspace DIR     every sandbox overlays DIR (relative to the current\n"
	      "                      directory; it must exist): it sees DIR's files at its\n"
	      "                      workspace, its changes are a change set a human reviews\n"
	      "                      and commits ('paddock ws commit ID'); DIR is unchanged\n"
	      "                      until then (default: a private, empty workspace). A DIR\n"
	      "                      that is or holds your home directory is refused (122)\n"
	      "  --allow-home        let --workspace be (or hold) your home directory\n"
	      "  --ttl DURATION      the lifetime of a sandbox made without a ttl (default 1h)\n"
	      "  --max-message SIZE  the largest message a client may send (default 4M)\n"
	      "  --approval-timeout DURATION\n"
	      "                      how long workspace_propose_commit waits for a human's\n"
	      "                      decision (paddock approvals, paddock approve ID) before\n"
	      "                      it is refused as timed out (default 5m; 1s to 7d)\n"
	      "  --no-elicit-approvals\n"
	      "                      never ask a client for an approval by elicitation: the\n"
	      "                      approval queue alone decides (docs/approvals.md, IN BAND)\n"
	      "  --state-dir DIR     the state directory (default $PADDOCK_STATE_DIR, else\n"
	      "                      $XDG_STATE_HOME/paddock, ~/.local/state/paddock, or\n"
	      "                      /var/lib/paddock for root)\n"
	      "  --conformance-fixtures\n"
	      "                      also serve the MCP conformance suite's fixture tools,\n"
	      "                      resources and prompts (fixed data, no sandbox): for\n"
	      "                      that suite's tests only\n"
	      "  -q, --quiet         no log lines on stderr\n"
	      "  -h, --help          this help\n"
	      "\n"
	      "exit status: 0 when the client closed stdin (or at SIGTERM, SIGINT), 1 when the\n"
	      "server could not start, 122 for a bad option.\n",
	      out);
}

enum {
	OPT_PROFILE = 256,
	OPT_TTL,
	OPT_MAX_MESSAGE,
	OPT_STATE_DIR,
	OPT_WORKSPACE,
	OPT_LISTEN,
	OPT_FIXTURES,
	OPT_ALLOW_HOME,
	OPT_APPROVAL_TIMEOUT,
	OPT_NO_ELICIT_APPROVALS
};

static const struct option long_opts[] = {
	{"profile", required_argument, NULL, OPT_PROFILE},
	{"ttl", required_argument, NULL, OPT_TTL},
	{"workspace", required_argument, NULL, OPT_WORKSPACE},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"conformance-fixtures", no_argument, NULL, OPT_FIXTURES},
	{"allow-home", no_argument, NULL, OPT_ALLOW_HOME},
	{"max-message", required_argument, NULL, OPT_MAX_MESSAGE},
	{"approval-timeout", required_argument, NULL, OPT_APPROVAL_TIMEOUT},
	{"no-elicit-approvals", no_argument, NULL, OPT_NO_ELICIT_APPROVALS},
	{"state-dir", required_argument, NULL, OPT_STATE_DIR},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

struct mcp_args {
	struct pdk_daemon_mcp_opts o;
	char workspace[PATH_MAX]; /* --workspace resolved against our cwd */
	bool quiet;
	bool allow_home; /* --allow-home */
};

/* The server's messages: "paddock mcp: MSG" on stderr (stdout is the protocol's). */
static void mcp_log(void *data, enum pdk_log_level level, const char *msg)
{
	const bool *quiet = data;

	if (*quiet && level != PDK_LOG_ERROR)
		return;
	fprintf(stderr, "paddock mcp: %s\n", msg);
}

static int parse_ttl(const char *arg, uint64_t *out_s)
{
	uint64_t ms;

	if (pdk_parse_duration(arg, &ms) < 0 || ms < 1000 || ms / 1000 > 7 * 24 * 3600) {
		pdk_cli_error("mcp: --ttl wants a duration from 1s to 7d (30m, 1h), not '%s'", arg);
		return -1;
	}
	*out_s = ms / 1000;
	return 0;
}

static int parse_approval_timeout(const char *arg, uint64_t *out_s)
{
	uint64_t ms;

	if (pdk_parse_duration(arg, &ms) < 0 || ms < 1000 || ms / 1000 > 7 * 24 * 3600) {
		pdk_cli_error("mcp: --approval-timeout wants a duration from 1s to 7d (30s, 5m), "
			      "not '%s'",
			      arg);
		return -1;
	}
	*out_s = ms / 1000;
	return 0;
}

static int parse_size(const char *arg, size_t *out)
{
	uint64_t n;

	if (pdk_parse_size(arg, &n) < 0 || n < 1024 || n > (64ULL << 20)) {
		pdk_cli_error("mcp: --max-message wants a size from 1K to 64M, not '%s'", arg);
		return -1;
	}
	*out = (size_t)n;
	return 0;
}

/*
 * --workspace DIR as an absolute path: DIR resolved against the caller's
 * working directory now, as 'paddock run' does, since the sandboxes are made
 * later by a control object that has no cwd of the caller. A DIR that does
 * not exist or is not a directory is refused here, at start, rather than at
 * the first tool call.
 */
static int parse_workspace(const char *arg, struct mcp_args *a)
{
	struct stat st;

	if (realpath(arg, a->workspace) == NULL || stat(a->workspace, &st) < 0) {
		pdk_cli_error("mcp: --workspace '%s': %s; name an existing directory", arg,
			      strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		pdk_cli_error("mcp: --workspace '%s' is not a directory; name a directory", arg);
		return -1;
	}
	a->o.workspace = a->workspace;
	return 0;
}

/* One flag: 0, 1 after --help, or -1 after an error was printed. */
static int mcp_opt(int c, struct mcp_args *a)
{
	switch (c) {
	case OPT_PROFILE:
		a->o.profile = optarg;
		return 0;
	case OPT_TTL:
		return parse_ttl(optarg, &a->o.ttl_s);
	case OPT_MAX_MESSAGE:
		return parse_size(optarg, &a->o.max_message);
	case OPT_APPROVAL_TIMEOUT:
		return parse_approval_timeout(optarg, &a->o.approval_timeout_s);
	case OPT_NO_ELICIT_APPROVALS:
		a->o.no_elicit_approvals = true;
		return 0;
	case OPT_STATE_DIR:
		a->o.state_dir = optarg;
		return 0;
	case OPT_WORKSPACE:
		return parse_workspace(optarg, a);
	case OPT_LISTEN:
		a->o.listen = optarg;
		return 0;
	case OPT_FIXTURES:
		a->o.conformance_fixtures = true;
		return 0;
	case OPT_ALLOW_HOME:
		a->allow_home = true;
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

static int parse_mcp(int argc, char **argv, struct mcp_args *a)
{
	int c, rc;

	while ((c = getopt_long(argc, argv, "qh", long_opts, NULL)) != -1)
		if ((rc = mcp_opt(c, a)) != 0)
			return rc;
	if (optind < argc) {
		pdk_cli_error("mcp takes no arguments ('%s'); see paddock mcp --help",
			      argv[optind]);
		return -1;
	}
	return 0;
}

int pdk_cmd_mcp(int argc, char **argv)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct mcp_args a = {0};
	struct pdk_log log = {.fn = mcp_log, .data = &a.quiet};
	struct pdk_settings settings;
	int rc = parse_mcp(argc, argv, &a);

	if (rc != 0)
		return rc > 0 ? 0 : PDK_EXIT_POLICY;
	pdk_cli_settings(&settings);
	/* SECURITY: the sandboxes would read every dotfile of the home, as paddock run's would. */
	if (a.o.workspace != NULL && !a.allow_home &&
	    (rc = pdk_cli_refuse_home("mcp", a.o.workspace, settings.envp)) != 0) {
		pdk_settings_release(&settings);
		return rc;
	}
	if (a.o.state_dir == NULL)
		a.o.state_dir = settings.paths.state_dir;
	a.o.run_dir = settings.paths.runtime_dir;
	a.o.envp = settings.envp;
	a.o.log = &log;
	rc = pdk_daemon_mcp(&a.o, &err);
	pdk_settings_release(&settings);
	if (rc < 0) {
		pdk_cli_error("mcp: %s", err->msg);
		return 1;
	}
	return 0;
}
