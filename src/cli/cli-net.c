/*
 * cli-net.c - the summary of denied destinations at the end of `paddock
 * run` and of `paddock exec` (docs/egress.md, "Denied destinations"): run
 * reads its sandbox's log, exec the daemon's "denied" list of the command.
 *
 * A program that was refused the network says so in its own words, which
 * an agent may read as a temporary failure. The summary says it in ours,
 * once a destination, with the option that would allow it, on stderr
 * after the command's own output.
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "policy.h"

#include <stdio.h>

void pdk_cli_net_denied(const char *dest, const char *why, uint64_t count, const char *allow,
			const char *how)
{
	(void)count; /* a lookup asks twice (A, AAAA): a count would say more than it knows */
	fprintf(stderr, "paddock: network denied: %s (%s); to allow it: %s --allow %s\n", dest, why,
		how, allow);
}

void pdk_cli_net_denied_more(uint64_t more)
{
	if (more > 0)
		fprintf(stderr,
			"paddock: network denied: %llu more refusal(s) of destinations not listed\n",
			(unsigned long long)more);
}

void pdk_cli_net_denials(struct pdk_net_denials *d)
{
	struct pdk_net_denial *v = NULL;
	uint64_t more = 0;
	size_t n;

	if (pdk_cli_quiet) /* --quiet: the program's own error is all that is printed */
		return;
	n = pdk_net_denials_since(d, 0, &v, &more);

	for (size_t i = 0; i < n; i++)
		pdk_cli_net_denied(v[i].dest, v[i].why, v[i].count, v[i].allow, "run again with");
	pdk_cli_net_denied_more(more);
	pdk_net_denial_list_free(v, n);
}

void pdk_cli_net_denied_json(const json_t *r)
{
	const json_t *a = json_object_get(r, "denied");
	size_t i;
	json_t *d;

	if (pdk_cli_quiet) /* --quiet: the program's own error is all that is printed */
		return;
	json_array_foreach(a, i, d)
	{
		const char *dest = json_string_value(json_object_get(d, "dest"));
		const char *why = json_string_value(json_object_get(d, "why"));
		const char *allow = json_string_value(json_object_get(d, "allow"));

		if (dest != NULL && why != NULL && allow != NULL)
			pdk_cli_net_denied(dest, why, 0, allow, "create a sandbox with");
	}
	pdk_cli_net_denied_more((uint64_t)json_integer_value(json_object_get(r, "denied_more")));
}
