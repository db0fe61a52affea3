/*
 * cmd-ps.c - `paddock ps`: the daemon's sandboxes, filtered by labels.
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

enum { OPT_SESSION = PDK_CLI_OPT_FIRST_FREE, OPT_WORKFLOW, OPT_AGENT, OPT_LABEL, OPT_STATE };

static const struct option long_opts[] = {
	{"session", required_argument, NULL, OPT_SESSION},
	{"workflow", required_argument, NULL, OPT_WORKFLOW},
	{"agent", required_argument, NULL, OPT_AGENT},
	{"label", required_argument, NULL, OPT_LABEL},
	{"state", required_argument, NULL, OPT_STATE},
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{"quiet", no_argument, NULL, 'q'},
	PDK_CLI_CONN_LONGOPTS,
	{NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
	fputs("usage: paddock ps [OPTIONS]\n"
	      "\n"
	      "List the sandboxes of the daemon ('paddock serve'): id, state, profile,\n"
	      "session and agent labels, creation time, and whether it came from a warm pool.\n"
	      "Filters combine (all must match).\n"
	      "\n"
	      "options:\n"
	      "      --session S    only sandboxes labelled session=S\n"
	      "      --workflow W   only sandboxes labelled workflow=W\n"
	      "      --agent A      only sandboxes labelled agent=A\n"
	      "      --label K=V    only sandboxes with label K=V (repeatable)\n"
	      "      --state STATE  starting, running, paused, ended or lost\n"
	      "      --json         print the daemon's answer, {\"sandboxes\": [...]}\n"
	      "  -q, --quiet        print only the ids, one a line\n" PDK_CLI_CONN_HELP "\n"
	      "exit status: 0; 2 bad option; 125 the daemon could not be reached or refused.\n",
	      out);
}

static void add_query(char **q, const char *key, const char *val)
{
	_cleanup_free_ char *e = pdk_client_escape(val);
	char *n = pdk_xasprintf("%s%s%s=%s", *q, (*q)[0] ? "&" : "?", key, e);

	free(*q);
	*q = n;
}

static const char *field(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v != NULL ? v : "-";
}

static const char *label(json_t *sb, const char *key)
{
	return field(json_object_get(sb, "labels"), key);
}

static void print_table(json_t *list)
{
	size_t i;
	json_t *sb;

	printf("%-36s  %-8s  %-10s  %-12s  %-12s  %-20s  %s\n", "ID", "STATE", "PROFILE", "SESSION",
	       "AGENT", "CREATED", "POOL");
	json_array_foreach(list, i, sb)
	{
		printf("%-36s  %-8s  %-10s  %-12s  %-12s  %-20.19s  %s\n", field(sb, "id"),
		       field(sb, "state"), field(sb, "profile"), label(sb, "session"),
		       label(sb, "agent"), field(sb, "created_at"),
		       json_is_true(json_object_get(sb, "pool")) ? "yes" : "no");
	}
}

int pdk_cmd_ps(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	_cleanup_free_ char *q = pdk_xstrdup("");
	_cleanup_free_ char *path = NULL;
	bool json = false, quiet = false;
	struct pdk_client *c;
	json_t *out, *list, *sb;
	size_t i;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+qh", long_opts, NULL)) != -1) {
		if (pdk_cli_conn_opt(&conn, opt, optarg))
			continue;
		switch (opt) {
		case OPT_SESSION:
			add_query(&q, "session", optarg);
			break;
		case OPT_WORKFLOW:
			add_query(&q, "workflow", optarg);
			break;
		case OPT_AGENT:
			add_query(&q, "agent", optarg);
			break;
		case OPT_LABEL:
			add_query(&q, "label", optarg);
			break;
		case OPT_STATE:
			add_query(&q, "state", optarg);
			break;
		case PDK_CLI_OPT_JSON:
			json = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return pdk_cli_usage_error("ps", "bad option");
		}
	}
	if (optind < argc)
		return pdk_cli_usage_error("ps", "unexpected argument '%s'", argv[optind]);
	c = pdk_cli_connect(&conn);
	if (c == NULL)
		return PDK_CLI_EXIT_USAGE;
	path = pdk_xasprintf("/v1/sandboxes%s", q);
	out = pdk_cli_call(c, "GET", path, NULL);
	pdk_client_free(c);
	if (out == NULL)
		return PDK_CLI_EXIT_API;
	list = json_object_get(out, "sandboxes");
	if (json)
		pdk_cli_print_json(out);
	else if (quiet)
		json_array_foreach(list, i, sb) puts(field(sb, "id"));
	else
		print_table(list);
	json_decref(out);
	return 0;
}
