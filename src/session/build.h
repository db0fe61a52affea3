/*
 * build.h - `paddock image build`: an image made from a recipe
 * (policy/recipe.h) in the image store (image/image.h), one layer a step.
 *
 * The steps are the base (an image of the store, or a Debian suite
 * bootstrapped by mmdebstrap on the host and stored as one layer), the
 * recipe's packages (one step) and each of its run: commands. Every step
 * but the base runs in a sandbox made the way `paddock run` makes one (a
 * session): the image built so far is its root filesystem, a writable
 * layer of the build's own receives the step's changes, and the network is
 * the egress proxy with exactly the recipe's `network:` entries. When the
 * command exits with 0 that layer is stored; the image is recorded under
 * the recipe's name when every step succeeded.
 *
 * The cache: each step has a key, the sha256 of the key of the step below
 * it (a chain from the base image's digest or the bootstrap's suite, mirror
 * and variant), the step's text and the network entries. A key maps to the
 * layer the step made (STATE/images/build/cache/HEX); a step whose key maps
 * to a layer still in the store is not run again.
 *
 * Nothing here prints: the caller sees the steps, their output and their
 * ends through the note callback. The library reads no environment: the
 * settings' envp is mmdebstrap's environment.
 */
#ifndef PDK_BUILD_H
#define PDK_BUILD_H

#include "common.h"
#include "base.h"
#include "image.h"
#include "policy.h"

#include <stdint.h>

enum pdk_build_note_kind {
	PDK_BUILD_NOTE_STEP = 1, /* a step starts: step, steps, what, line */
	PDK_BUILD_NOTE_OUTPUT,   /* bytes the step wrote (its output and errors): text, len */
	PDK_BUILD_NOTE_DONE,     /* a step ended well: cached, digest, elapsed_ns */
};

/* What a build has to say as it goes; every pointer is borrowed for the call. */
struct pdk_build_note {
	enum pdk_build_note_kind kind;
	size_t step;      /* 1-based */
	size_t steps;     /* how many the recipe has */
	const char *what; /* "FROM busybox", "DEBIAN bookworm", "PACKAGES a b", "RUN echo hi" */
	int line;         /* the recipe's line of the step; 0: none */
	bool cached;
	const char *digest; /* the step's layer ("sha256:HEX"); NULL for a FROM step */
	uint64_t elapsed_ns;
	const char *text;
	size_t len;
};

typedef void (*pdk_build_note_cb)(void *arg, const struct pdk_build_note *note);

struct pdk_build_opts {
	const struct pdk_recipe *recipe;     /* borrowed */
	struct pdk_image_store *store;       /* borrowed */
	const struct pdk_settings *settings; /* required (session.h) */
	bool no_cache;                       /* run every step, even when its key is known */
	pdk_build_note_cb note;              /* may be NULL */
	void *note_arg;
	const struct pdk_log *log; /* notices (borrowed); may be NULL */
};

/* Why a build stopped at a step (pdk_build_run() returned -ECHILD). */
struct pdk_build_failure {
	size_t step;   /* 1-based; 0: no step failed */
	int line;      /* the recipe's line; 0: none */
	char *what;    /* as in the notes */
	int exit_code; /* >= 0 when it exited */
	int signal;    /* > 0 when a signal ended it */
	char *tail;    /* the last lines of its output (at most 2 KiB) */
	/*
	 * Destinations the proxy refused while it ran, each "HOST:PORT (why); to
	 * allow it, add 'ENTRY' to the recipe's network"; NULL: none.
	 */
	char **denied;
};

void pdk_build_failure_release(struct pdk_build_failure *f);

/*
 * Build opts->recipe. On success *out (may be NULL) receives the image,
 * named, and 0 is returned. A step whose command failed returns -ECHILD
 * with *why filled (the caller releases it) and *err naming the step and
 * its status; any other failure (the bootstrap, the store, the sandbox's
 * set-up) is negative + *err naming what failed. Layers of the steps
 * that succeeded stay in the store and in the cache.
 */
PDK_MUST_CHECK int pdk_build_run(const struct pdk_build_opts *opts, struct pdk_image **out,
				 struct pdk_build_failure *why, struct pdk_error **err);

#endif
