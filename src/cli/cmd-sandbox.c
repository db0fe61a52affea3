/*
 * cmd-sandbox.c - the small verbs on one sandbox of the daemon: pause,
 * resume, snapshot (and `snapshot ls`), rollback, diff, and the kill
 * switch (`paddock kill`).
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

/* kill --wait: how long the sandboxes are given to end. */
#define KILL_WAIT_S 60

enum {
	OPT_SESSION = PDK_CLI_OPT_FIRST_FREE,
	OPT_WORKFLOW,
	OPT_AGENT,
	OPT_LABEL,
	OPT_REASON,
	OPT_RESTART,
	OPT_PATCH,
	OPT_WAIT,
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{"session", required_argument, NULL, OPT_SESSION},
	{"workflow", required_argument, NULL, OPT_WORKFLOW},
	{"agent", required_argument, NULL, OPT_AGENT},
	{"label", required_argument, NULL, OPT_LABEL},
	{"reason", required_argument, NULL, OPT_REASON},
	{"restart", no_argument, NULL, OPT_RESTART},
	{"patch", no_argument, NULL, OPT_PATCH},
	{"wait", no_argument, NULL, OPT_WAIT},
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
	 "ending background processes; so does a sandbox that cannot be frozen.\n"
	 "A name already kept is refused (409, field name). 'paddock snapshot ls\n"
	 "ID' lists the snapshots kept.\n",
	 "POST", "snapshot", "name", false},
	{"snapshot ls", "ID",
	 "List the snapshots of sandbox ID's workspace, oldest first: its number\n"
	 "and its name, one a line. A rollback takes the name.\n",
	 "GET", "snapshots", NULL, false},
	{"rollback", "ID NAME",
	 "Put sandbox ID's workspace back to snapshot NAME (0: as it was at the\n"
	 "start). Later snapshots are dropped. The sandbox's init is restarted\n"
	 "around it (same id, budgets and environment; /tmp is carried over); it\n"
	 "is refused while a command runs, and while processes left by earlier\n"
	 "commands run unless --restart is given (they are then ended).\n",
	 "POST", "rollback", "snapshot", false},
	{"diff", "ID",
	 "List what sandbox ID changed in its workspace, one path a line after\n"
	 "A (added), M (modified) or D (deleted). --patch adds a unified diff of\n"
	 "the text files (as 'paddock ws diff --patch'; it applies with patch -p1\n"
	 "in the workspace).\n",
	 "GET", "diff", NULL, false},
	{"kill", "ID... | --session S | --workflow W | --agent A | --label K=V",
	 "Destroy sandboxes at once: the ones named, or every sandbox whose labels\n"
	 "match all the selectors given. Each is recorded as a 'kill' event, and the\n"
	 "call itself too. Prints the ids killed. The daemon answers once each\n"
	 "destroy is asked, and sees each through even if it stops or dies; with\n"
	 "--wait, kill returns once every sandbox it killed has ended.\n",
	 "POST", NULL, NULL, true},
};

static void usage_of(const struct verb *v, FILE *out)
{
	fprintf(out, "usage: paddock %s [OPTIONS] %s\n\n%s\noptions:\n", v->name, v->args, v->text);
	if (v->selectors)
		fputs("      --session S    every sandbox labelled session=S\n"
		      "      --workflow W   every sandbox labelled workflow=W\n"
		      "      --agent A      every sandbox labelled agent=A\n"
		      "      --label K=V    every sandbox with label K=V (repeatable)\n"
		      "      --reason TEXT  recorded with each kill event\n"
		      "      --wait         return once every sandbox killed has ended (its\n"
		      "                     processes gone, its workspace removed), at most 60 s\n",
		      out);
	if (v->key != NULL && strcmp(v->name, "snapshot") == 0)
		fputs("      --restart      move the changes aside around a restart of the init\n"
		      "                     (no copy; ends the processes left by earlier commands)\n",
		      out);
	else if (v->key != NULL)
		fputs("      --restart      end the processes left running by earlier commands\n"
		      "                     (the init restarts); without it, refused while any run\n",
		      out);
	if (strcmp(v->name, "diff") == 0)
		fputs("      --patch        add the unified diff of the changed text files\n", out);
	fputs("      --json         print the daemon's answer as JSON\n" PDK_CLI_CONN_HELP, out);
	if (v->selectors)
		fputs("\nexit status: 0; 122 bad option or argument; 124 with --wait, a sandbox\n"
		      "killed had not ended after 60 s (it is named); 125 the daemon could not be\n"
		      "reached or refused (its error code, message and field are printed).\n",
		      out);
	else
		fputs("\nexit status: 0; 122 bad option or argument; 125 the daemon could not be\n"
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

/* The patch after the list; a cut patch is said on stderr. */
static void print_patch(json_t *out)
{
	const char *patch = json_string_value(json_object_get(out, "patch"));

	if (patch != NULL)
		fputs(patch, stdout);
	if (json_is_true(json_object_get(out, "patch_truncated")))
		pdk_cli_note("diff: the patch stops after %lld bytes; 'paddock cp' fetches whole "
			     "files",
			     (long long)json_integer_value(json_object_get(out, "patch_bytes")));
}

static void print_snapshots(json_t *out)
{
	json_t *x;
	size_t i;

	json_array_foreach(json_object_get(out, "snapshots"), i, x)
		printf("%lld %s\n", (long long)json_integer_value(json_object_get(x, "number")),
		       json_string_value(json_object_get(x, "name")));
}

static void print_answer(const struct verb *v, json_t *out)
{
	json_t *x;
	size_t i;

	if (strcmp(v->name, "diff") == 0) {
		print_diff(out);
		print_patch(out);
	} else if (strcmp(v->name, "snapshot ls") == 0) {
		print_snapshots(out);
	} else if (v->selectors) {
		json_array_foreach(json_object_get(out, "killed"), i, x) puts(json_string_value(x));
	} else if ((x = json_object_get(out, "state")) != NULL) {
		puts(json_string_value(x));
	} else if ((x = json_object_get(out, "snapshot")) != NULL) {
		puts(json_string_value(x));
	}
}

/*
 * kill ID...: an id the daemon did not kill (unknown, or ended already) is an
 * error, so that a script that kills what it started learns of a typo.
 * Returns 0 when each was killed, else PDK_CLI_EXIT_API after naming them.
 */
static int check_killed(json_t *ids, json_t *out)
{
	json_t *killed = json_object_get(out, "killed"), *id, *x;
	size_t i, j;
	int r = 0;

	json_array_foreach(ids, i, id)
	{
		bool found = false;

		json_array_foreach(killed, j, x) found = found || json_equal(x, id);
		if (found)
			continue;
		pdk_cli_error("kill: not_found: no running sandbox '%s' (see 'paddock ps --all "
			      "--state all')",
			      json_string_value(id));
		r = PDK_CLI_EXIT_API;
	}
	return r;
}

/*
 * kill --wait: each sandbox killed, waited for with DELETE
 * /v1/sandboxes/ID, which the daemon answers once the destroy under way has
 * ended (or at once when it has: ended, or 404 when no ended sandbox is
 * kept). KILL_WAIT_S in all; PDK_EXIT_TIMEOUT after naming the sandbox
 * still ending.
 */
static int wait_ended(struct pdk_client *c, json_t *killed)
{
	const uint64_t deadline = pdk_now_mono_ns() + KILL_WAIT_S * 1000000000ULL;
	json_t *x;
	size_t i;

	json_array_foreach(killed, i, x)
	{
		const char *id = json_string_value(x);
		_cleanup_free_ char *eid = pdk_client_escape(id);
		_cleanup_free_ char *path = pdk_xasprintf("/v1/sandboxes/%s", eid);
		_cleanup_error_ struct pdk_error *err = NULL;
		struct pdk_client_resp resp = {0};
		uint64_t now = pdk_now_mono_ns();
		struct pdk_client_req q = {
			.method = "DELETE",
			.path = path,
			.idle_ms = now < deadline ? (int)((deadline - now) / 1000000) + 1 : 1};

		if (pdk_client_request(c, &q, &resp, &err) < 0) {
			if (err->status != ETIMEDOUT)
				return pdk_cli_api_fail(c, &err);
			pdk_cli_error("kill: sandbox '%s' has not ended after %d s", id,
				      KILL_WAIT_S);
			return PDK_EXIT_TIMEOUT;
		}
		if ((resp.status < 200 || resp.status > 299) && resp.status != 404) {
			(void)pdk_client_error_from(&resp, &err);
			pdk_client_resp_release(&resp);
			return pdk_cli_api_fail(c, &err);
		}
		pdk_client_resp_release(&resp);
	}
	return 0;
}

/* One call: its verb, and the body its options fill. */
struct call {
	const struct verb *v;
	json_t *body;
	json_t *labels;
	bool json;
	bool patch; /* diff --patch */
	bool wait;  /* kill --wait */
};

static void usage(void *ctx)
{
	const struct call *k = ctx;

	usage_of(k->v, stdout);
}

/*
 * --restart for the verbs that take a name; kill's selectors and reason go
 * into the body under their options' names, --label into its labels.
 */
static int call_opt(void *ctx, const struct option *o, const char *arg)
{
	struct call *k = ctx;

	if (o->val == PDK_CLI_OPT_JSON) {
		k->json = true;
		return 0;
	}
	if (o->val == OPT_PATCH && strcmp(k->v->name, "diff") == 0) {
		k->patch = true;
		return 0;
	}
	if (o->val == OPT_RESTART && k->v->key != NULL) {
		json_object_set_new(k->body, "restart", json_true());
		return 0;
	}
	if (o->val == OPT_WAIT && k->v->selectors) {
		k->wait = true;
		return 0;
	}
	if (!k->v->selectors || o->val == OPT_RESTART || o->val == OPT_PATCH || o->val == OPT_WAIT)
		return -1;
	if (o->val == OPT_LABEL)
		return pdk_cli_add_kv(k->labels, arg, "--label") ? 0 : PDK_CLI_EXIT_USAGE;
	json_object_set_new(k->body, o->name, json_string(arg));
	return 0;
}

static const struct pdk_cli_verb verb = {"", long_opts, NULL, usage, call_opt};

/* The method, path and body of the call; an exit status on a usage error. */
static int build_call(const struct verb *v, int argc, char **argv, struct call *k, char **path)
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
	*path = pdk_xasprintf("/v1/sandboxes/%s/%s%s", eid, v->route, k->patch ? "?patch=1" : "");
	if (v->key != NULL)
		json_object_set_new(k->body, v->key, json_string(argv[optind + 1]));
	return 0;
}

static const struct verb *find_verb(const char *name)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(verbs); i++)
		if (strcmp(name, verbs[i].name) == 0)
			return &verbs[i];
	pdk_bug("paddock's command table names a verb cmd-sandbox.c does not have");
}

int pdk_cmd_sandbox(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct call k = {.body = json_object(), .labels = json_object()};
	_cleanup_free_ char *path = NULL;
	struct pdk_client *c = NULL;
	json_t *out = NULL;
	int r;

	/* `paddock snapshot ls ID`: a word after the verb, as `paddock ws ls`. */
	if (strcmp(argv[0], "snapshot") == 0 && argc > 1 && strcmp(argv[1], "ls") == 0) {
		k.v = find_verb("snapshot ls");
		argc--;
		argv++;
	} else {
		k.v = find_verb(argv[0]);
	}
	r = pdk_cli_parse(&verb, argc, argv, &conn, &k);
	/* Options before the word: `paddock snapshot --socket S ls ID`. */
	if (r == 0 && strcmp(k.v->name, "snapshot") == 0 && argc - optind == 2 &&
	    strcmp(argv[optind], "ls") == 0) {
		k.v = find_verb("snapshot ls");
		optind++;
	}
	if (r == 0)
		r = build_call(k.v, argc, argv, &k, &path);
	if (r == 0 && (c = pdk_cli_connect(&conn)) == NULL)
		r = PDK_CLI_EXIT_USAGE;
	if (r == 0) {
		bool body = k.v->key != NULL || k.v->selectors;

		out = pdk_cli_call(c, k.v->method, path, body ? k.body : NULL);
		r = out == NULL ? PDK_CLI_EXIT_API : 0;
	}
	if (out != NULL && k.v->selectors)
		r = check_killed(json_object_get(k.body, "ids"), out);
	if (out != NULL && k.json)
		pdk_cli_print_json(out);
	else if (out != NULL)
		print_answer(k.v, out);
	if (out != NULL && k.wait) {
		int w;

		(void)fflush(stdout); /* the ids first: a script sees what it waits for */
		w = wait_ended(c, json_object_get(out, "killed"));
		r = r != 0 ? r : w;
	}
	json_decref(out);
	json_decref(k.body);
	json_decref(k.labels);
	pdk_client_free(c);
	return r < 0 ? 0 : r;
}
