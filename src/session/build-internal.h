/*
 * build-internal.h - what the files of the image builder share (build.h):
 * build.c orders the steps and keeps the cache, build-step.c runs a step's
 * command in a sandbox, build-debian.c runs mmdebstrap on the host.
 */
#ifndef PDK_BUILD_INTERNAL_H
#define PDK_BUILD_INTERNAL_H

#include "common.h"
#include "base.h"
#include "build.h"

#define PDK__BUILD_TAIL 2048 /* bytes of a failed step's output kept for its message */

/* A running build: its options, the step it is at, the output's tail. */
struct pdk__build {
	const struct pdk_build_opts *o;
	size_t step;  /* 1-based, the one running */
	size_t steps; /* how many */
	const char *what;
	int line;
	char tail[PDK__BUILD_TAIL]; /* a ring: the last bytes of the step's output */
	size_t tail_len;            /* bytes in it (at most PDK__BUILD_TAIL) */
	size_t tail_pos;            /* where the next byte goes */
	char *scratch;              /* STATE/images/build/tmp: steps' writable layers */
};

/* Hand output to the note callback and keep its tail. */
void pdk__build_output(struct pdk__build *b, const char *text, size_t len);

/* The tail, cut at a line start when it was cut at all. New string. */
char *pdk__build_tail(const struct pdk__build *b);

/* How a step's command ended. */
struct pdk__build_end {
	int exit_code; /* >= 0 when it exited */
	int signal;    /* > 0 when a signal ended it */
	char **denied; /* "HOST:PORT (why); to allow it, ..."; NULL: none (build-step.c) */
};

/*
 * Run `argv` (with `envp`) in "/" of a sandbox on `image` (a digest of the
 * store: the image built so far) whose writable layer is `rw_dir`'s
 * `upper` (with `work` beside it), network: the recipe's entries. Output
 * goes to pdk__build_output(). Fills *end; 0, or negative + *err when the
 * sandbox could not be made (build-step.c).
 */
PDK_MUST_CHECK int pdk__build_run_step(struct pdk__build *b, const char *image, const char *rw_dir,
				       char *const *argv, char *const *envp,
				       struct pdk__build_end *end, struct pdk_error **err);

/*
 * Bootstrap the recipe's Debian suite with mmdebstrap into the tar file
 * `out` (build-debian.c). Output as above; a failure of mmdebstrap fills
 * *end; 0, or negative + *err when it could not be started.
 */
PDK_MUST_CHECK int pdk__build_debootstrap(struct pdk__build *b, const char *out,
					  struct pdk__build_end *end, struct pdk_error **err);

void pdk__build_end_release(struct pdk__build_end *end);

#endif
