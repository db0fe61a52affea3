/*
 * cmd-image-build.c - `paddock image build [--quiet] [--no-cache] RECIPE`:
 * read the recipe (every problem at once, FILE:LINE:COL: FIELD: MESSAGE),
 * build it in the store (session/build.h) and say what happened: a line
 * per step as it starts and ends, the step's output indented under it, and
 * for a failed step its status, the end of its output and the
 * destinations the proxy refused it. docs/images.md, "Building images".
 */
#include "common.h"
#include "base.h"
#include "cli.h"
#include "image.h"
#include "policy.h"
#include "session.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define EXIT_STEP 1 /* a step, its sandbox, the bootstrap or the store failed */

static void usage(FILE *out)
{
	fputs("usage: paddock image build [--quiet] [--no-cache] RECIPE.yaml\n"
	      "\n"
	      "Build the image a recipe describes, one cached layer a step, each step in a\n"
	      "sandbox on the image built so far with the network the recipe declares.\n"
	      "  -q, --quiet     only errors; the image's name and digest at the end\n"
	      "      --no-cache  run every step again\n"
	      "\n"
	      "exit status: 0 built, 1 a step (or its sandbox, the bootstrap, the store)\n"
	      "failed, 122 a usage or recipe error.\n",
	      out);
}

/* Where the output of a step is on its line, so each line is indented once. */
struct progress {
	bool mid_line;
};

static void put_output(struct progress *p, const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (!p->mid_line)
			fputs("    ", stderr);
		fputc(text[i], stderr);
		p->mid_line = text[i] != '\n';
	}
}

static void end_line(struct progress *p)
{
	if (p->mid_line)
		fputc('\n', stderr);
	p->mid_line = false;
}

static void on_note(void *arg, const struct pdk_build_note *n)
{
	struct progress *p = arg;

	if (pdk_cli_quiet)
		return;
	if (n->kind == PDK_BUILD_NOTE_OUTPUT) {
		put_output(p, n->text, n->len);
		return;
	}
	end_line(p);
	if (n->kind == PDK_BUILD_NOTE_STEP)
		fprintf(stderr, "paddock: step %zu/%zu: %s\n", n->step, n->steps, n->what);
	else if (n->digest == NULL)
		fprintf(stderr, "paddock: step %zu/%zu: done\n", n->step, n->steps);
	else
		fprintf(stderr, "paddock: step %zu/%zu: %s (layer %.19s)\n", n->step, n->steps,
			n->cached ? "cached" : "done", n->digest);
	fflush(stderr);
}

static void print_failure(const struct pdk_build_failure *f)
{
	if (f->tail != NULL && f->tail[0] != '\0') {
		struct progress p = {0};

		fprintf(stderr, "paddock: the end of step %zu's output:\n", f->step);
		put_output(&p, f->tail, strlen(f->tail));
		end_line(&p);
	}
	for (size_t i = 0; f->denied != NULL && f->denied[i] != NULL; i++)
		fprintf(stderr, "paddock: network denied to step %zu: %s\n", f->step, f->denied[i]);
}

static struct pdk_recipe *load_recipe(const char *path)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy_report rep = {0};
	struct pdk_recipe *r = pdk_recipe_load(path, &rep, &err);

	if (r == NULL) {
		if (rep.n > 0)
			pdk_policy_report_print(&rep, stderr);
		pdk_cli_error("%s", err->msg);
	}
	pdk_policy_report_release(&rep);
	return r;
}

static int build(const char *path, bool no_cache)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_recipe *r = load_recipe(path);
	struct pdk_settings settings;
	struct pdk_image_store *st = NULL;
	struct pdk_image *img = NULL;
	struct pdk_build_failure why = {0};
	struct progress prog = {0};
	int rc = 0;

	if (r == NULL)
		return PDK_EXIT_POLICY;
	pdk_cli_settings(&settings);
	rc = pdk_cli_image_store(&st);
	if (rc == 0) {
		const struct pdk_build_opts bo = {.recipe = r,
						  .store = st,
						  .settings = &settings,
						  .no_cache = no_cache,
						  .note = on_note,
						  .note_arg = &prog,
						  .log = &pdk_cli_log};

		if (pdk_build_run(&bo, &img, &why, &err) < 0)
			rc = EXIT_STEP;
	}
	end_line(&prog);
	if (rc != 0 && err != NULL) {
		pdk_cli_error("image '%s': %s", r->name, err->msg);
		print_failure(&why);
	} else if (rc == 0) {
		printf("%s %s\n", r->name, pdk_image_digest(img));
	}
	pdk_build_failure_release(&why);
	pdk_image_free(img);
	pdk_image_store_free(st);
	pdk_settings_release(&settings);
	pdk_recipe_free(r);
	return rc;
}

int pdk_cmd_image_build(int argc, char **argv)
{
	static const struct option opts[] = {
		{"quiet", no_argument, NULL, 'q'},
		{"no-cache", no_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool no_cache = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+qh", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			pdk_cli_quiet = true;
			break;
		case 'n':
			no_cache = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return PDK_EXIT_POLICY;
		}
	}
	if (argc - optind != 1) {
		pdk_cli_error("image build: expected one recipe file");
		usage(stderr);
		return PDK_EXIT_POLICY;
	}
	return build(argv[optind], no_cache);
}
