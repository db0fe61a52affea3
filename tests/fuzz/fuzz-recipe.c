/*
 * fuzz-recipe.c - libFuzzer target for the build recipe's reader
 * (policy/recipe.c, `paddock image build`).
 *
 * Every input goes through pdk_recipe_parse(). A recipe that comes back
 * must be whole (a name, exactly one base, every step a command with its
 * line); one that does not must come with at least one diagnostic and an
 * error. Everything is freed so LeakSanitizer sees leaks. Built with
 * replay.c for corpus replay in the normal test run.
 */
#include "common.h"
#include "error.h"
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_whole(const struct pdk_recipe *r)
{
	if (r->name == NULL || r->source == NULL)
		abort();
	if ((r->from == NULL) == (r->debian.suite == NULL))
		abort(); /* exactly one base */
	if (r->n_steps > PDK_RECIPE_MAX_STEPS)
		abort();
	for (size_t i = 0; i < r->n_steps; i++) {
		if (r->steps[i].run == NULL || r->steps[i].run[0] == '\0' || r->steps[i].line < 1)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pdk_policy_report rep = {0};
	struct pdk_error *err = NULL;
	struct pdk_recipe *r = pdk_recipe_parse("fuzz.yaml", (const char *)data, size, &rep, &err);

	if (r != NULL) {
		if (err != NULL || rep.n != 0)
			abort();
		check_whole(r);
	} else if (err == NULL || rep.n == 0) {
		abort(); /* a refusal always says why */
	}
	pdk_recipe_free(r);
	pdk_error_free(&err);
	pdk_policy_report_release(&rep);
	return 0;
}
