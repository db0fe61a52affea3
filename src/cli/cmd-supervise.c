/*
 * cmd-supervise.c - `paddock supervise --id ID --spec-fd N --ready-fd M`:
 * the per-sandbox supervisor the daemon starts (hidden from the verb list).
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "supervisor.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
	fputs("usage: paddock supervise --id ID --spec-fd N [--ready-fd M]\n"
	      "\n"
	      "Started by 'paddock serve', one per sandbox; not meant to be run by hand.\n"
	      "Reads the sandbox's spec (JSON) from fd N, builds the sandbox with its init\n"
	      "in service mode, writes one JSON line to fd M once it is ready\n"
	      "({\"ok\":true,\"pid\":P,\"init_pid\":Q} or {\"ok\":false,\"error\":{...}}),\n"
	      "then serves the control protocol on RUNDIR/sb/ID/ctl.sock until the sandbox\n"
	      "is destroyed, ends by a budget, or this process gets SIGTERM. Events go to\n"
	      "RUNDIR/sb/ID/events.jsonl. RUNDIR is $PADDOCK_RUNTIME_DIR, else\n"
	      "$XDG_RUNTIME_DIR/paddock, else /run/paddock (root) or /tmp/paddock-UID.\n"
	      "See docs/internals/daemon.md.\n"
	      "\n"
	      "exit status: 0 after a clean end; 122 bad options; 125 the sandbox could\n"
	      "not be built or the supervisor failed.\n",
	      out);
}

static void log_line(void *data, enum pdk_log_level level, const char *msg)
{
	(void)data;
	(void)level;
	fprintf(stderr, "paddock supervise: %s\n", msg);
}

/* What the supervisor says goes to its stderr: RUNDIR/sb/ID/log, which the daemon made. */
static const struct pdk_log supervise_log = {.fn = log_line};

static int parse_fd(const char *s, int *fd)
{
	uint64_t v;

	if (pdk_parse_u64(s, 1 << 20, &v) < 0)
		return -1;
	*fd = (int)v;
	return 0;
}

int pdk_cmd_supervise(int argc, char **argv)
{
	static const struct option opts[] = {
		{"id", required_argument, NULL, 'i'},
		{"spec-fd", required_argument, NULL, 's'},
		{"ready-fd", required_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	_cleanup_error_ struct pdk_error *err = NULL;
	const char *id = NULL;
	struct pdk_settings settings;
	int spec_fd = -1, ready_fd = -1, c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == 'i') {
			id = optarg;
		} else if ((c == 's' && parse_fd(optarg, &spec_fd) < 0) ||
			   (c == 'r' && parse_fd(optarg, &ready_fd) < 0) ||
			   (c != 's' && c != 'r')) {
			usage(stderr);
			return PDK_EXIT_POLICY;
		}
	}
	if (id == NULL || spec_fd < 0 || optind != argc) {
		usage(stderr);
		return PDK_EXIT_POLICY;
	}
	pdk_cli_settings(&settings);
	rc = pdk_supervisor_run(id, spec_fd, ready_fd, &settings, &supervise_log, &err);
	pdk_settings_release(&settings);
	if (rc < 0) {
		pdk_cli_error("supervise: %s", err->msg);
		return PDK_EXIT_SETUP;
	}
	return 0;
}
