/*
 * recipe.h - a build recipe (YAML) read into a checked struct pdk_recipe:
 * what `paddock image build FILE` makes an image from (docs/images.md,
 * "Building images").
 *
 * A recipe names the image, where its first layer comes from (an image
 * already in the store, `from:`, or a Debian suite bootstrapped by
 * mmdebstrap, `debian:`), the packages to install and the commands to
 * run, each a step and a layer of its own, the destinations those steps
 * may reach (`network:`, the syntax of network.allow, netrule.h), and the
 * image's configuration (`config:` env, workdir, user, entrypoint).
 *
 * The reader is the profile reader's (policy-internal.h): the same tree
 * with lines and columns, the same diagnostics "file:line:col: field:
 * message" in a struct pdk_policy_report, every problem of a file at once.
 * Pure but for reading the file.
 */
#ifndef PDK_RECIPE_H
#define PDK_RECIPE_H

#include "common.h"
#include "base.h"

#define PDK_RECIPE_MAX_STEPS 128 /* run: commands */
#define PDK_RECIPE_MAX_NAME  128 /* bytes in an image name */

/* One command of `run:`, with the line it was written on (for messages). */
struct pdk_recipe_step {
	char *run; /* a shell command: /bin/sh -c RUN inside the image built so far */
	int line;  /* 1-based line of the recipe */
};

struct pdk_recipe {
	char *name;        /* the image's name: NAME or NAME:TAG */
	char *source;      /* the recipe's path, as given */
	char *description; /* NULL: none */

	/* Exactly one of `from` and `debian.suite` is set. */
	char *from; /* an image in the store (a name, NAME:TAG or sha256:DIGEST) */
	struct {
		char *suite;   /* "bookworm" */
		char *mirror;  /* NULL: http://deb.debian.org/debian */
		char *variant; /* mmdebstrap's --variant; NULL: "apt" */
	} debian;

	char **packages; /* Debian packages (NAME or NAME=VERSION), one step; NULL: none */
	struct pdk_recipe_step *steps;
	size_t n_steps;
	char **network; /* network.allow entries (canonical) every step may reach; NULL: none */

	struct {
		char **env;        /* "K=V" */
		char *workdir;     /* absolute; NULL: "/" */
		char *user;        /* NAME, UID or UID:GID; NULL: root */
		char **entrypoint; /* argv; NULL: none */
	} config;
};

/*
 * Read the recipe at `path` (a regular file of at most 1 MiB). On success
 * returns a new recipe (free with pdk_recipe_free()). On failure returns
 * NULL, fills `report` (may be NULL; starts zeroed, the caller releases it
 * with pdk_policy_report_release(), on success too) with every problem
 * found, and sets *err to a summary naming the file.
 */
struct pdk_recipe *pdk_recipe_load(const char *path, struct pdk_policy_report *report,
				   struct pdk_error **err);

/* The same, for a document held in memory; `file` names it in diagnostics. */
struct pdk_recipe *pdk_recipe_parse(const char *file, const char *data, size_t len,
				    struct pdk_policy_report *report, struct pdk_error **err);

void pdk_recipe_free(struct pdk_recipe *r);

#endif
