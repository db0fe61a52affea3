/*
 * fuzz-gwconfig.c - libFuzzer target for the gateway's config reader
 * (src/gateway/config.c).
 *
 * Every input goes through pdk_gw_config_parse(); a config that loads must
 * give, for each stdio server, a profile the profile reader accepts (the
 * load checked it: a profile that fails here is a bug of profile.c), and a
 * policy that decides a call. An error must say where (FILE:LINE:).
 * Everything is freed so LeakSanitizer sees leaks. Built with replay.c for
 * corpus replay in the normal test run.
 */
#include "common.h"
#include "base.h"
#include "policy.h"
#include "gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_profile(const struct pdk_gw_server *s)
{
	struct pdk_policy_report r = {0};
	struct pdk_error *err = NULL;
	char *yaml = pdk_gw_profile_yaml(s);
	struct pdk_policy *p = pdk_policy_parse("profile.yaml", yaml, strlen(yaml), &r, &err);

	if (p == NULL) {
		fprintf(stderr, "a loaded server's profile is refused (%s):\n%s", err->msg, yaml);
		pdk_policy_report_print(&r, stderr);
		abort();
	}
	pdk_policy_free(p);
	pdk_policy_report_release(&r);
	free(yaml);
}

static void check_policy(const struct pdk_gw_config *c)
{
	json_t *args = json_pack("{s:s,s:[i]}", "path", "/data/x", "n", 1);
	struct pdk_gw_call_info ci = {"agent-a", c->servers[0].id, "read_file", args};
	const struct pdk_gw_rule *r = pdk_gw_policy_match(c, &ci);

	if (r != NULL && (r < c->rules || r >= c->rules + c->n_rules))
		abort();
	json_decref(args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdk_gw_config *c = NULL;
	struct pdk_error *err = NULL;
	int rc = pdk_gw_config_parse("fuzz.yaml", (const char *)data, size, &c, &err);

	if ((rc == 0) != (c != NULL) || (rc < 0) != (err != NULL))
		abort();
	if (rc < 0 && strncmp(err->msg, "fuzz.yaml:", 10) != 0) {
		fprintf(stderr, "an error without its place: %s\n", err->msg);
		abort();
	}
	for (size_t i = 0; c != NULL && i < c->n_servers; i++) {
		if (c->servers[i].command != NULL)
			check_profile(&c->servers[i]);
	}
	if (c != NULL)
		check_policy(c);
	pdk_gw_config_free(c);
	pdk_error_free(&err);
	return 0;
}
