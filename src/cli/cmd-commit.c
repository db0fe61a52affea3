/*
 * cmd-commit.c - `paddock commit ID`: apply a daemon sandbox's change set
 * to its workspace (POST /v1/sandboxes/ID/commit), listing what it refuses.
 */
#include "common.h"
#include "base.h"
#include "cli-daemon.h"
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

enum {
	OPT_DRY_RUN = PDK_CLI_OPT_FIRST_FREE,
	OPT_FORCE,
	OPT_RESTART,
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, PDK_CLI_OPT_JSON},
	{"dry-run", no_argument, NULL, OPT_DRY_RUN},
	{"force", no_argument, NULL, OPT_FORCE},
	{"restart", no_argument, NULL, OPT_RESTART},
	{NULL, 0, NULL, 0},
};

static const char help[] =
	"usage: paddock commit [OPTIONS] ID\n"
	"\n"
	"Apply what sandbox ID changed in its workspace to the host directory, all\n"
	"or nothing, and start the sandbox again from the directory. The sandbox's\n"
	"init is restarted around it (as 'paddock rollback' does). Entries that must\n"
	"not land (device nodes, symlinks leading out) are refused, and so is a path\n"
	"changed on the host since the sandbox started (a conflict): nothing is\n"
	"applied, each is listed, and the sandbox is left as it was.\n"
	"\n"
	"options:\n"
	"      --dry-run      check only: say how many changes would be applied\n"
	"      --force        overwrite the paths changed on the host meanwhile\n"
	"      --restart      end the processes left running by earlier commands\n"
	"      --json         print the daemon's answer (or error) as JSON\n" PDK_CLI_CONN_HELP
	"\nexit status: 0 committed (or would be); 1 refused: conflicts or entries\n"
	"(listed); 122 bad option or argument; 125 the daemon could not be reached or\n"
	"failed.\n";

struct commit_call {
	json_t *body;
	bool json;
};

static int commit_opt(void *ctx, const struct option *o, const char *arg)
{
	struct commit_call *k = ctx;
	static const char *const keys[] = {"dry_run", "force", "restart"};

	(void)arg;
	if (o->val == PDK_CLI_OPT_JSON) {
		k->json = true;
		return 0;
	}
	if (o->val < OPT_DRY_RUN || o->val > OPT_RESTART)
		return -1;
	json_object_set_new(k->body, keys[o->val - OPT_DRY_RUN], json_true());
	return 0;
}

static const struct pdk_cli_verb verb = {"", long_opts, help, NULL, commit_opt};

/* Each conflict or refused entry of a refusal, one line on stderr. */
static void print_list(const json_t *e, const char *key, const char *what)
{
	json_t *x;
	size_t i;

	json_array_foreach(json_object_get(e, key), i, x)
	{
		const char *path = json_string_value(json_object_get(x, "path"));

		fprintf(stderr, "paddock: commit: %s: %s: %s\n", what, path ? path : "(not UTF-8)",
			json_string_value(json_object_get(x, "reason")));
	}
}

/* A 409 or 403 with its list: printed, exit 1; anything else the daemon's error, 125. */
static int refused(struct pdk_client *c, const struct pdk_client_resp *resp, bool json)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *doc =
		json_loadb(resp->body ? resp->body : "", resp->body_len, 0, NULL);
	json_t *e = json_object_get(doc, "error");

	if ((resp->status != 409 && resp->status != 403) || !json_is_object(e) ||
	    (!json_object_get(e, "conflicts") && !json_object_get(e, "refused"))) {
		(void)pdk_client_error_from(resp, &err);
		return pdk_cli_api_fail(c, &err);
	}
	if (json)
		pdk_cli_print_json(doc);
	print_list(e, "conflicts", "conflict");
	print_list(e, "refused", "refused");
	pdk_cli_error("commit: %s; the workspace is unchanged",
		      json_string_value(json_object_get(e, "message")));
	return 1;
}

static void print_done(const json_t *out, bool json)
{
	if (json)
		pdk_cli_print_json(out);
	else if (json_object_get(out, "dry_run") != NULL)
		printf("%lld change(s) would be committed\n",
		       (long long)json_integer_value(json_object_get(out, "would_commit")));
	else
		printf("committed %lld change(s)\n",
		       (long long)json_integer_value(json_object_get(out, "committed")));
}

static int call(struct pdk_client *c, const char *id, struct commit_call *k)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *eid = pdk_client_escape(id);
	_cleanup_free_ char *path = pdk_xasprintf("/v1/sandboxes/%s/commit", eid);
	_cleanup_free_ char *body = json_dumps(k->body, JSON_COMPACT);
	struct pdk_client_req q = {.method = "POST",
				   .path = path,
				   .content_type = "application/json",
				   .body = body,
				   .body_len = strlen(body)};
	struct pdk_client_resp resp = {0};
	_cleanup_json_ json_t *out = NULL;
	int r = 0;

	if (pdk_client_request(c, &q, &resp, &err) < 0)
		return pdk_cli_api_fail(c, &err);
	if (resp.status < 200 || resp.status > 299)
		r = refused(c, &resp, k->json);
	else if ((out = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL)) == NULL)
		r = pdk_cli_api_fail(c, (pdk_error_setx(&err, EPROTO,
							"the daemon's answer is "
							"not JSON"),
					 &err));
	else
		print_done(out, k->json);
	pdk_client_resp_release(&resp);
	return r;
}

int pdk_cmd_commit(int argc, char **argv)
{
	struct pdk_cli_conn conn = {0};
	struct commit_call k = {.body = json_object()};
	struct pdk_client *c = NULL;
	int r = pdk_cli_parse(&verb, argc, argv, &conn, &k);

	if (r == 0 && argc - optind != 1)
		r = pdk_cli_usage_error("commit", "expected one sandbox id");
	if (r == 0 && (c = pdk_cli_connect(&conn)) == NULL)
		r = PDK_CLI_EXIT_USAGE;
	if (r == 0)
		r = call(c, argv[optind], &k);
	json_decref(k.body);
	pdk_client_free(c);
	return r < 0 ? 0 : r;
}
