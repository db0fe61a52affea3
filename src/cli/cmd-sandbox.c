/*
 * cmd-sandbox.c - the small verbs on one sandbox of the daemon: pause,
 * resume, snapshot, rollback, diff, and the kill switch (`paddock kill`).
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

enum {
	OPT_SESSION = PDK_CLI_OPT_FIRST_FREE,
	OPT_WORKFLOW,
	OPT_AGENT,
	OPT_LABEL,
	OPT_REASON,
	OPT_RESTART,
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{"session", required_argument, NULL, OPT_SESSION},
	{"workflow", required_argument, NULL, OPT_WORKFLOW},
	{"agent", required_argument, NULL, OPT_AGENT},
	{"label", required_argument, NULL, OPT_LABEL},
	{"reason", required_argument, NULL, OPT_REASON},
	{"restart", no_argument, NULL, OPT_RESTART},
	PDK_CLI_CONN_LONGOPTS,
	{NULL, 0, NULL, 0},
};

/* One verb of this file. */
struct verb {
	const char *name;
	const char *args;   /* usage after the verb */
	const char *text;   /* what it does */
	const char *method; /* HTTP method */
	const char *route;  /* under /v1/sandboxes/ID/ */
	const char *key;    /* body key for the NAME argument, or NULL */
	bool selectors;     /* kill: --session, --workflow, --agent, --label */
};

static const struct verb verbs[] = {
	{"pause", "ID",
	 "Freeze every process of sandbox ID (cgroup freezer). Time paused is not\n"
	 "charged to its wall-clock budget. Prints the new state.\n",
	 "POST", "pause", NULL, false},
	{"resume", "ID", "Thaw sandbox ID after 'paddock pause'. Prints the new state.\n", "POST",
	 "resume", NULL, false},
	{"snapshot", "ID NAME",
	 "Record the state of sandbox ID's workspace as snapshot NAME. The\n"
	 "sandbox is frozen while what it changed in its workspace is copied,\n"
	 "then thawed: running commands, background processes and /tmp go on as\n"
	 "they were. --restart moves the changes aside instead (no copy, whatever\n"
	 "their size) and restarts the sandbox's init as 'paddock rollback' does,\n"
	 "ending background processes; so does a sandbox that cannot be frozen.\n",
	 "POST", "snapshot", "name", false},
	{"rollback", "ID NAME",
	 "Put sandbox ID's workspace back to snapshot NAME (0: as it was at the\n"
	 "start). Later snapshots are dropped. The sandbox's init is restarted\n"
	 "around it (same id, budgets and environment; /tmp is carried over); it\n"
	 "is refused while a command runs, and while processes left by earlier\n"
	 "commands run unless --restart is given (they are then ended).\n",
	 "POST", "rollback", "snapshot", false},
	{"diff", "ID",
	 "List what sandbox ID changed in its workspace, one path a line after\n"
	 "A (added), M (modified) or D (deleted).\n",
	 "GET", "diff", NULL, false},
	{"kill", "ID... | --session S | --workflow W | --agent A | --label K=V",
	 "Destroy sandboxes at once: the ones named, or every sandbox whose labels\n"
	 "match all the selectors given. Each is recorded as a 'kill' event, and the\n"
	 "call itself too. Prints the ids destroyed.\n",
	 "POST", NULL, NULL, true},
};

static void usage(const struct verb *v, FILE *out)
{
	fprintf(out, "usage: paddock %s [OPTIONS] %s\n\n%s\noptions:\n", v->name, v->args, v->text);
	if (v->selectors)
		fputs("      --session S    every sandbox labelled session=S\n"
		      "      --workflow W   every sandbox labelled workflow=W\n"
		      "      --agent A      every sandbox labelled agent=A\n"
		      "      --label K=V    every sandbox with label K=V (repeatable)\n"
		      "      --reason TEXT  recorded with each kill event\n",
		      out);
	if (v->key != NULL && strcmp(v->name, "snapshot") == 0)
		fputs("      --restart      move the changes aside around a restart of the init\n"
		      "                     (no copy; ends the processes left by earlier commands)\n",
		      out);
	else if (v->key != NULL)
		fputs("      --restart      end the processes left running by earlier commands\n"
		      "                     (the init restarts); without it, refused while any run\n",
		      out);
	fputs("      --json         print the daemon's answer as JSON\n" PDK_CLI_CONN_HELP, out);
	fputs("\nexit status: 0; 2 bad option or argument; 125 the daemon could not be\n"
	      "reached or refused (its error code, message and field are printed).\n",
	      out);
}

static void print_diff(json_t *out)
{
	json_t *ch;
	size_t i;

	json_array_foreach(json_object_get(out, "changes"), i, ch)
	{
		const char *kind = json_string_value(json_object_get(ch, "kind"));
		const char *path = json_string_value(json_object_get(ch, "path"));

		printf("%c %s\n", kind ? (char)(kind[0] - 'a' + 'A') : '?', path ? path : "?");
	}
}

static void print_answer(const struct verb *v, json_t *out)
{
	json_t *x;
	size_t i;

	if (strcmp(v->name, "diff") == 0) {
		print_diff(out);
	} else if (v->selectors) {
		json_array_foreach(json_object_get(out, "killed"), i, x) puts(json_string_value(x));
	} else if ((x = json_object_get(out, "state")) != NULL) {
		puts(json_string_value(x));
	} else if ((x = json_object_get(out, "snapshot")) != NULL) {
		puts(json_string_value(x));
	}
}

struct kill_sel {
	json_t *body;
	json_t *labels;
};

static int sel_opt(struct kill_sel *k, int opt, const char *arg)
{
	switch (opt) {
	case OPT_SESSION:
		json_object_set_new(k->body, "session", json_string(arg));
		return 0;
	case OPT_WORKFLOW:
		json_object_set_new(k->body, "workflow", json_string(arg));
		return 0;
	case OPT_AGENT:
		json_object_set_new(k->body, "agent", json_string(arg));
		return 0;
	case OPT_LABEL:
		return pdk_cli_add_kv(k->labels, arg, "--label") ? 0 : PDK_CLI_EXIT_USAGE;
	case OPT_REASON:
		json_object_set_new(k->body, "reason", json_string(arg));
		return 0;
	default:
		return -1;
	}
}

/* The method, path and body of the call; an exit status on a usage error. */
static int build_call(const struct verb *v, int argc, char **argv, struct kill_sel *k, char **path)
{
	size_t want = v->key ? 2 : 1;
	_cleanup_free_ char *eid = NULL;

	if (v->selectors) {
		json_t *ids = json_array();

		for (int i = optind; i < argc; i++)
			json_array_append_new(ids, json_string(argv[i]));
		json_object_set_new(k->body, "ids", ids);
		if (json_object_size(k->labels) > 0)
			json_object_set(k->body, "labels", k->labels);
		if (json_array_size(ids) == 0 && json_object_size(k->labels) == 0 &&
		    !json_object_get(k->body, "session") && !json_object_get(k->body, "workflow") &&
		    !json_object_get(k->body, "agent"))
			return pdk_cli_usage_error(v->name, "name sandboxes or give a selector");
		*path = pdk_xstrdup("/v1/kill");
		return 0;
	}
	if ((size_t)(argc - optind) != want)
		return pdk_cli_usage_error(v->name, "expected %s", v->args);
	eid = pdk_client_escape(argv[optind]);
	*path = pdk_xasprintf("/v1/sandboxes/%s/%s", eid, v->route);
	if (v->key != NULL)
		json_object_set_new(k->body, v->key, json_string(argv[optind + 1]));
	return 0;
}

static int run_verb(const struct verb *v, int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct kill_sel k = {.body = json_object(), .labels = json_object()};
	_cleanup_free_ char *path = NULL;
	struct pdk_client *c = NULL;
	json_t *out = NULL;
	bool json = false;
	int opt, r = 0;

	optind = 1;
	while (r == 0 && (opt = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		if (pdk_cli_conn_opt(&conn, opt, optarg))
			continue;
		if (opt == 'h') {
			usage(v, stdout);
			r = -1;
		} else if (opt == PDK_CLI_OPT_JSON) {
			json = true;
		} else if (opt == OPT_RESTART && v->key != NULL) {
			json_object_set_new(k.body, "restart", json_true());
		} else if (!v->selectors || (r = sel_opt(&k, opt, optarg)) < 0) {
			r = pdk_cli_usage_error(v->name, "bad option");
		}
	}
	if (r == 0)
		r = build_call(v, argc, argv, &k, &path);
	if (r == 0 && (c = pdk_cli_connect(&conn)) == NULL)
		r = PDK_CLI_EXIT_USAGE;
	if (r == 0) {
		bool body = v->key != NULL || v->selectors;

		out = pdk_cli_call(c, v->method, path, body ? k.body : NULL);
		r = out == NULL ? PDK_CLI_EXIT_API : 0;
	}
	if (out != NULL && json)
		pdk_cli_print_json(out);
	else if (out != NULL)
		print_answer(v, out);
	json_decref(out);
	json_decref(k.body);
	json_decref(k.labels);
	pdk_client_free(c);
	return r < 0 ? 0 : r;
}

enum { V_PAUSE, V_RESUME, V_SNAPSHOT, V_ROLLBACK, V_DIFF, V_KILL };

int pdk_cmd_pause(int argc, char **argv)
{
	return run_verb(&verbs[V_PAUSE], argc, argv);
}

int pdk_cmd_resume(int argc, char **argv)
{
	return run_verb(&verbs[V_RESUME], argc, argv);
}

int pdk_cmd_snapshot(int argc, char **argv)
{
	return run_verb(&verbs[V_SNAPSHOT], argc, argv);
}

int pdk_cmd_rollback(int argc, char **argv)
{
	return run_verb(&verbs[V_ROLLBACK], argc, argv);
}

int pdk_cmd_diff(int argc, char **argv)
{
	return run_verb(&verbs[V_DIFF], argc, argv);
}

int pdk_cmd_kill(int argc, char **argv)
{
	return run_verb(&verbs[V_KILL], argc, argv);
}
