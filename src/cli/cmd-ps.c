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

static const char help[] =
	"usage: paddock ps [OPTIONS]\n"
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
	"      --state STATE  starting, running, paused, ended, lost or all\n"
	"  -a, --all          also the unclaimed members of warm pools (POOL 'ready'):\n"
	"                     left out by default, so that 'kill $(paddock ps -q)' spares\n"
	"                     the pools\n"
	"      --json         print the daemon's answer, {\"sandboxes\": [...]}\n"
	"  -q, --quiet        print only the ids, one a line\n" PDK_CLI_CONN_HELP "\n"
	"exit status: 0; 122 bad option; 125 the daemon could not be reached or refused.\n";

enum { OPT_SESSION = PDK_CLI_OPT_FIRST_FREE, OPT_WORKFLOW, OPT_AGENT, OPT_LABEL, OPT_STATE };

/* What --state takes: the daemon's states, and "all" (ended ones too). */
static const char *const states[] = {"starting", "running", "paused", "ended", "lost", "all"};

static const struct option long_opts[] = {
	{"session", required_argument, NULL, OPT_SESSION},
	{"workflow", required_argument, NULL, OPT_WORKFLOW},
	{"agent", required_argument, NULL, OPT_AGENT},
	{"label", required_argument, NULL, OPT_LABEL},
	{"state", required_argument, NULL, OPT_STATE},
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{"quiet", no_argument, NULL, 'q'},
	{"all", no_argument, NULL, 'a'},
	{NULL, 0, NULL, 0},
};

struct ps {
	char *q; /* the filters, "&session=S..." */
	bool json, quiet, all;
};

static bool state_ok(const char *s)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(states); i++)
		if (strcmp(s, states[i]) == 0)
			return true;
	return false;
}

/* The filters are query parameters named as their options are. */
static int ps_opt(void *ctx, const struct option *o, const char *arg)
{
	struct ps *p = ctx;

	if (o->val == PDK_CLI_OPT_JSON)
		p->json = true;
	else if (o->val == 'q')
		p->quiet = true;
	else if (o->val == 'a')
		p->all = true;
	else if (o->val == OPT_STATE && !state_ok(arg))
		return pdk_cli_usage_error("ps",
					   "--state '%s' is not a state (starting, running, "
					   "paused, ended, lost or all)",
					   arg);
	else
		pdk_cli_query_add(&p->q, o->name, arg);
	return 0;
}

static const struct pdk_cli_verb verb = {"+qa", long_opts, help, NULL, ps_opt};

static const char *field(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v != NULL ? v : "-";
}

static const char *label(json_t *sb, const char *key)
{
	return field(json_object_get(sb, "labels"), key);
}

/* POOL: "ready" for an unclaimed member, "claimed" for one taken from a pool, else "no". */
static const char *pool_mark(json_t *sb)
{
	if (json_is_true(json_object_get(sb, "pool_member")))
		return "ready";
	return json_is_true(json_object_get(sb, "pool")) ? "claimed" : "no";
}

/* IMAGE: "NAME@sha256:" and 12 digits of its digest, "-" on the host's root. */
static char *image_mark(json_t *sb)
{
	const json_t *img = json_object_get(sb, "image");
	const char *name = json_string_value(json_object_get(img, "name"));
	const char *digest = json_string_value(json_object_get(img, "digest"));

	if (name == NULL || digest == NULL)
		return pdk_xstrdup("-");
	return pdk_xasprintf("%s@%.19s", name, digest);
}

static void print_table(json_t *list)
{
	size_t i;
	json_t *sb;

	printf("%-36s  %-8s  %-10s  %-12s  %-12s  %-20s  %-32s  %s\n", "ID", "STATE", "PROFILE",
	       "SESSION", "AGENT", "CREATED", "IMAGE", "POOL");
	json_array_foreach(list, i, sb)
	{
		_cleanup_free_ char *image = image_mark(sb);

		printf("%-36s  %-8s  %-10s  %-12s  %-12s  %-20.19s  %-32s  %s\n", field(sb, "id"),
		       field(sb, "state"), field(sb, "profile"), label(sb, "session"),
		       label(sb, "agent"), field(sb, "created_at"), image, pool_mark(sb));
	}
}

/*
 * An unclaimed pool member is the daemon's stock, not a sandbox anyone
 * asked for: without --all it is left out of the list (and of -q, so that
 * a kill of what ps printed spares the pools).
 */
static void drop_pool_members(json_t *list)
{
	for (size_t i = json_array_size(list); i-- > 0;)
		if (json_is_true(json_object_get(json_array_get(list, i), "pool_member")))
			json_array_remove(list, i);
}

int pdk_cmd_ps(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct ps p = {.q = pdk_xstrdup("")};
	_cleanup_free_ char *path = NULL;
	struct pdk_client *c;
	json_t *out, *list, *sb;
	size_t i;
	int r = pdk_cli_parse(&verb, argc, argv, &conn, &p);

	if (r == 0 && optind < argc)
		r = pdk_cli_usage_error("ps", "unexpected argument '%s'", argv[optind]);
	path = pdk_xasprintf("/v1/sandboxes%s%s", p.q[0] ? "?" : "", p.q[0] ? p.q + 1 : "");
	free(p.q);
	if (r != 0)
		return r < 0 ? 0 : r;
	c = pdk_cli_connect(&conn);
	if (c == NULL)
		return PDK_CLI_EXIT_USAGE;
	out = pdk_cli_call(c, "GET", path, NULL);
	pdk_client_free(c);
	if (out == NULL)
		return PDK_CLI_EXIT_API;
	list = json_object_get(out, "sandboxes");
	if (!p.all)
		drop_pool_members(list);
	if (p.json)
		pdk_cli_print_json(out);
	else if (p.quiet)
		json_array_foreach(list, i, sb) puts(field(sb, "id"));
	else
		print_table(list);
	json_decref(out);
	return 0;
}
