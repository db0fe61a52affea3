/*
 * cmd-events.c - `paddock events`: the daemon's audit events, stored and
 * live (Server-Sent Events from GET /v1/events).
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char help[] =
	"usage: paddock events [OPTIONS]\n"
	"\n"
	"Print the daemon's audit events: sandboxes created, claimed and destroyed,\n"
	"commands executed and their exits, network connections, kills, pauses,\n"
	"terminal sessions. Without --follow, the stored events are printed and\n"
	"the command ends; with it, new events follow as they happen until\n"
	"interrupted. Each line is: SEQ TIME KIND SANDBOX ATTRIBUTES.\n"
	"\n"
	"options:\n"
	"      --sandbox ID   only the events of sandbox ID\n"
	"      --session S    only the events of sandboxes labelled session=S\n"
	"      --kind K       only events of kind K (e.g. process.exec); a kind\n"
	"                     ending in '.' is a prefix (sandbox.)\n"
	"      --since SEQ    only events after audit sequence number SEQ\n"
	"  -f, --follow       keep printing new events as they happen\n"
	"      --json         print each event as one line of JSON\n" PDK_CLI_CONN_HELP "\n"
	"exit status: 0; 122 bad option; 125 the daemon could not be reached or refused.\n";

enum { OPT_SANDBOX = PDK_CLI_OPT_FIRST_FREE, OPT_SESSION, OPT_KIND, OPT_SINCE };

/*
 * Without --follow the stream is asked to end after the stored events
 * (follow=0); a daemon that ignores that is read until it has been quiet
 * this long after its replay.
 */
#define REPLAY_QUIET_MS 1000

static const struct option long_opts[] = {
	{"sandbox", required_argument, NULL, OPT_SANDBOX},
	{"session", required_argument, NULL, OPT_SESSION},
	{"kind", required_argument, NULL, OPT_KIND},
	{"since", required_argument, NULL, OPT_SINCE},
	{"follow", no_argument, NULL, 'f'},
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{NULL, 0, NULL, 0},
};

struct ev_state {
	bool json;
	unsigned long count;
	bool follow;
	const char *since;
	char *q; /* the filters, "&sandbox=ID..." */
};

/* The filters are query parameters named as their options are. */
static int ev_opt(void *ctx, const struct option *o, const char *arg)
{
	struct ev_state *st = ctx;
	uint64_t n;

	switch (o->val) {
	case OPT_SINCE:
		if (pdk_parse_u64(arg, UINT64_MAX - 1, &n) < 0)
			return pdk_cli_usage_error("events", "--since '%s' is not a number", arg);
		st->since = arg;
		return 0;
	case 'f':
		st->follow = true;
		return 0;
	case PDK_CLI_OPT_JSON:
		st->json = true;
		return 0;
	default:
		pdk_cli_query_add(&st->q, o->name, arg);
		return 0;
	}
}

static const struct pdk_cli_verb verb = {"f", long_opts, help, NULL, ev_opt};

static const char *str(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v != NULL ? v : "-";
}

static int on_event(void *ud, const char *event, const char *id, const char *data, size_t len)
{
	struct ev_state *st = ud;
	_cleanup_json_ json_t *j = json_loadb(data, len, 0, NULL);
	_cleanup_free_ char *attrs = NULL;

	(void)event;
	st->count++;
	if (st->json || j == NULL) {
		printf("%.*s\n", (int)len, data);
	} else {
		attrs = json_dumps(json_object_get(j, "attrs"), JSON_COMPACT | JSON_SORT_KEYS);
		printf("%s %s %s %s %s\n", id ? id : "-", str(j, "ts"), str(j, "kind"),
		       str(j, "sandbox"), attrs ? attrs : "{}");
	}
	return fflush(stdout) != 0; /* stop when stdout is gone (a closed pipe) */
}

static int stream(struct pdk_client *c, const char *path, bool follow, struct ev_state *st)
{
	struct pdk_error *err = NULL;
	struct pdk_client_req q = {.method = "GET",
				   .path = path,
				   .accept = "text/event-stream",
				   .on_sse = on_event,
				   .ud = st,
				   .idle_ms = follow ? 0 : REPLAY_QUIET_MS};
	int r = pdk_cli_request(c, &q, &err);

	if (r >= 0)
		return r;
	/* The replay is over (the quiet time), or stdout is gone. */
	if ((!follow && err->status == ETIMEDOUT) || err->status == ECANCELED) {
		pdk_error_free(&err);
		return 0;
	}
	return pdk_cli_api_fail(c, &err);
}

int pdk_cmd_events(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct ev_state st = {.q = pdk_xstrdup("")};
	_cleanup_free_ char *path = NULL;
	struct pdk_client *c;
	int r = pdk_cli_parse(&verb, argc, argv, &conn, &st);

	if (r == 0 && optind < argc)
		r = pdk_cli_usage_error("events", "unexpected argument '%s'", argv[optind]);
	/* Stored events are replayed from `since` (all of them by default without --follow). */
	path = pdk_xasprintf("/v1/events?follow=%d%s%s%s", st.follow ? 1 : 0,
			     st.since || !st.follow ? "&since=" : "",
			     st.since ? st.since : (!st.follow ? "0" : ""), st.q);
	free(st.q);
	if (r != 0)
		return r < 0 ? 0 : r;
	c = pdk_cli_connect(&conn);
	if (c == NULL)
		return PDK_CLI_EXIT_USAGE;
	r = stream(c, path, st.follow, &st);
	pdk_client_free(c);
	return r;
}
