/*
 * cmd-approvals.c - `paddock approvals`, `paddock approve ID` and `paddock
 * deny ID`: the approval queue of the state directory (control.h,
 * "approvals"; docs/approvals.md), read and decided without a daemon.
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "control.h"

#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OPT_JSON = 256, OPT_ALL, OPT_NOTE };

static const struct option long_opts[] = {
	{"json", no_argument, NULL, OPT_JSON},
	{"all", no_argument, NULL, OPT_ALL},
	{"note", required_argument, NULL, OPT_NOTE},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static const char list_help[] =
	"usage: paddock approvals [--all] [--json]\n"
	"\n"
	"List the requests waiting for a human's approval in the state directory:\n"
	"commits to the host asked by 'paddock mcp', tool calls and tool definitions\n"
	"held by 'paddock gateway' (docs/approvals.md). Oldest first. A request whose\n"
	"asker has ended is shown as withdrawn, one past its timeout as timed_out.\n"
	"\n"
	"options:\n"
	"      --all    also the decided, timed-out and withdrawn requests (with STATE)\n"
	"      --json   print the Approval objects, [{\"id\", \"kind\", \"state\", ...}]\n"
	"  -h, --help\n"
	"\n"
	"exit status: 0; 1 the queue could not be read; 122 bad option.\n";

static const char approve_help[] =
	"usage: paddock approve ID [--note TEXT]\n"
	"\n"
	"Approve the pending request ID (see 'paddock approvals'): the process that\n"
	"asked goes on within a fraction of a second. The approver recorded is\n"
	"uid:NAME, this user's name.\n"
	"\n"
	"options:\n"
	"      --note TEXT   recorded with the decision, and told to the asker\n"
	"  -h, --help\n"
	"\n"
	"exit status: 0 approved; 1 refused (no such request, or it is no longer\n"
	"pending: the message names its state); 122 bad option or argument.\n";

static const char deny_help[] =
	"usage: paddock deny ID [--note TEXT]\n"
	"\n"
	"Deny the pending request ID (see 'paddock approvals'): the process that\n"
	"asked is told 'denied by uid:NAME' with the note. The approver recorded is\n"
	"uid:NAME, this user's name.\n"
	"\n"
	"options:\n"
	"      --note TEXT   recorded with the decision, and told to the asker\n"
	"  -h, --help\n"
	"\n"
	"exit status: 0 denied; 1 refused (no such request, or it is no longer\n"
	"pending: the message names its state); 122 bad option or argument.\n";

struct approvals_opts {
	bool json, all;
	const char *note;
};

static const char *help_of(const char *verb)
{
	if (strcmp(verb, "approve") == 0)
		return approve_help;
	return strcmp(verb, "deny") == 0 ? deny_help : list_help;
}

/* The options: 0 to go on, -1 after --help, else the exit status. */
static int parse(int argc, char **argv, struct approvals_opts *o)
{
	bool list = strcmp(argv[0], "approvals") == 0;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(help_of(argv[0]), stdout);
			return -1;
		}
		if ((c == OPT_JSON || c == OPT_ALL) && list)
			*(c == OPT_JSON ? &o->json : &o->all) = true;
		else if (c == OPT_NOTE && !list)
			o->note = optarg;
		else {
			if (c != '?')
				pdk_cli_error("%s: option --%s is not one of this verb's "
					      "(paddock %s --help)",
					      argv[0], long_opts[c - OPT_JSON].name, argv[0]);
			return PDK_EXIT_POLICY;
		}
	}
	return 0;
}

/* "4m12s" until `ts` (RFC 3339, UTC), "expired" past it. */
static void time_left(const char *ts, char *buf, size_t len)
{
	struct tm tm = {0};
	int64_t left;

	if (ts == NULL || strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm) == NULL) {
		snprintf(buf, len, "-");
		return;
	}
	left = (int64_t)timegm(&tm) - (int64_t)time(NULL);
	if (left <= 0)
		snprintf(buf, len, "expired");
	else if (left >= 3600)
		snprintf(buf, len, "%lldh%02lldm", (long long)(left / 3600),
			 (long long)(left % 3600 / 60));
	else
		snprintf(buf, len, "%lldm%02llds", (long long)(left / 60), (long long)(left % 60));
}

static const char *str(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v != NULL ? v : "-";
}

static void print_table(json_t *list, bool all)
{
	size_t i;
	json_t *a;

	printf("%-36s  %-11s  %-16s  %-40s  %-24s  %s%s\n", "ID", "KIND", "PRINCIPAL", "SUMMARY",
	       "REASON", "TIMEOUT-IN", all ? "  STATE" : "");
	json_array_foreach(list, i, a)
	{
		char left[32];
		bool pending = strcmp(str(a, "state"), "pending") == 0;

		time_left(pending ? json_string_value(json_object_get(a, "timeout_at")) : NULL,
			  left, sizeof(left));
		printf("%-36s  %-11s  %-16.16s  %-40.40s  %-24.24s  %-10s%s%s\n", str(a, "id"),
		       str(a, "kind"), str(a, "principal"), str(a, "summary"), str(a, "reason"),
		       left, all ? "  " : "", all ? str(a, "state") : "");
	}
}

static int list(const char *state, const struct approvals_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *out = NULL;

	if (pdk_ctl_approvals_list(state, o->all, &out, &err) < 0) {
		pdk_cli_error("approvals: %s", err->msg);
		return 1;
	}
	if (o->json)
		pdk_cli_print_json(out);
	else
		print_table(out, o->all);
	return 0;
}

/* "uid:NAME": this user, as the queue records who decided. Caller frees. */
static char *approver(void)
{
	struct passwd *pw = getpwuid(getuid());

	if (pw != NULL && pw->pw_name != NULL)
		return pdk_xasprintf("uid:%s", pw->pw_name);
	return pdk_xasprintf("uid:%u", (unsigned)getuid());
}

static int decide(const char *state, const char *verb, const char *id,
		  const struct approvals_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *who = approver();
	bool approve = strcmp(verb, "approve") == 0;

	if (pdk_ctl_approval_decide(state, id, approve, who, o->note, NULL, &err) < 0) {
		pdk_cli_error("%s: %s", verb, err->msg);
		return 1;
	}
	pdk_cli_note("%s %s (approver %s)", approve ? "approved" : "denied", id, who);
	return 0;
}

int pdk_cmd_approvals(int argc, char **argv)
{
	_cleanup_free_ char *state = NULL;
	struct approvals_opts o = {0};
	bool is_list = strcmp(argv[0], "approvals") == 0;
	int rc = parse(argc, argv, &o);

	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if (is_list && optind != argc)
		return pdk_cli_error("approvals: takes no arguments ('%s'); see paddock approvals "
				     "--help",
				     argv[optind]),
		       PDK_EXIT_POLICY;
	if (!is_list && optind + 1 != argc)
		return pdk_cli_error("%s: one request ID is needed (paddock approvals lists them)",
				     argv[0]),
		       PDK_EXIT_POLICY;
	state = pdk_cli_state_dir();
	return is_list ? list(state, &o) : decide(state, argv[0], argv[optind], &o);
}
