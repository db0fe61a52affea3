/*
 * cmd-profile.c - `paddock profile show NAME|FILE`, `paddock profile check FILE...`,
 * `paddock profile list`.
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "policy.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
	fputs("usage: paddock profile show NAME|FILE   print the resolved policy as YAML\n"
	      "       paddock profile check FILE...    report every error (FILE:LINE:COL: FIELD: MSG)\n"
	      "       paddock profile list             list the built-in profiles\n"
	      "\n"
	      "exit status: 0 valid, 122 invalid or not found.\n",
	      out);
}

static struct pdk_policy *load(const char *name, bool quiet_ok)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report rep = {0};
	struct pdk_paths paths;
	struct pdk_policy *p;

	pdk_cli_paths(&paths);
	p = pdk_policy_load(name, paths.profile_dir, &rep, &err);
	pdk_paths_release(&paths);

	if (p == NULL) {
		if (rep.n > 0)
			pdk_policy_report_print(&rep, stderr);
		else
			pdk_cli_error("%s", err->msg);
	} else if (!quiet_ok) {
		printf("%s: ok\n", name);
	}
	pdk_policy_report_release(&rep);
	return p;
}

static int show(const char *name)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy *p = load(name, true);
	int rc = 0;

	if (p == NULL)
		return PDK_EXIT_POLICY;
	if (pdk_policy_dump(p, stdout, &err) < 0) {
		pdk_cli_error("%s", err->msg);
		rc = PDK_EXIT_POLICY;
	}
	pdk_policy_free(p);
	return rc;
}

static int check(int n, char **files)
{
	int bad = 0;

	for (int i = 0; i < n; i++) {
		struct pdk_policy *p = load(files[i], false);

		bad += p == NULL;
		pdk_policy_free(p);
	}
	return bad ? PDK_EXIT_POLICY : 0;
}

int pdk_cmd_profile(int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "show") == 0)
		return show(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "check") == 0)
		return check(argc - 2, argv + 2);
	if (argc == 2 && strcmp(argv[1], "list") == 0) {
		for (size_t i = 0; pdk_policy_builtin_names[i] != NULL; i++)
			printf("%s\n", pdk_policy_builtin_names[i]);
		return 0;
	}
	if (argc >= 2)
		pdk_cli_error("profile: '%s' is not a subcommand, or takes other arguments (see "
			      "'paddock profile --help')",
			      argv[1]);
	usage(stderr);
	return PDK_EXIT_POLICY;
}
