/*
 * gw-profile - the test suites' way to the profile a gateway server runs
 * under: `gw-profile CONFIG SERVER` loads the gateway config CONFIG and
 * prints the profile (YAML) its stdio server SERVER maps to; a config that
 * does not load prints its error and exits 1.
 */
#include "common.h"
#include "base.h"
#include "gateway.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	struct pdk_gw_config *c = NULL;
	struct pdk_error *err = NULL;
	const struct pdk_gw_server *s;
	char *yaml;

	if (argc != 3) {
		fprintf(stderr, "usage: gw-profile CONFIG SERVER\n");
		return 2;
	}
	if (pdk_gw_config_load(argv[1], &c, &err) < 0) {
		fprintf(stderr, "%s\n", err->msg);
		pdk_error_free(&err);
		return 1;
	}
	s = pdk_gw_config_server(c, argv[2]);
	if (s == NULL || s->command == NULL) {
		fprintf(stderr, "no stdio server '%s' in '%s'\n", argv[2], argv[1]);
		pdk_gw_config_free(c);
		return 1;
	}
	yaml = pdk_gw_profile_yaml(s);
	fputs(yaml, stdout);
	free(yaml);
	pdk_gw_config_free(c);
	return 0;
}
