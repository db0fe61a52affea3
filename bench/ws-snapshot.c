/*
 * ws-snapshot.c - time pdk_ws_snapshot() itself (no process start-up):
 *   ws-snapshot STATE_DIR CHANGE_SET_ID ROUNDS
 * Each round writes 100 files into the upper layer (not timed: the changes
 * since the last snapshot) and snapshots; at the end it rolls back to where
 * the set was. Prints the median snapshot time in microseconds.
 * Built and run by bench/workspace.
 */
#include "common.h"
#include "util.h"
#include "workspace.h"

#include <stdio.h>
#include <stdlib.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct pdk_error *err = NULL;
	struct pdk_ws *ws = NULL;
	uint64_t *t;
	unsigned start;
	int rounds;

	if (argc != 4 || (rounds = atoi(argv[3])) < 1 || rounds > 100) {
		fputs("usage: ws-snapshot STATE_DIR ID ROUNDS (1-100)\n", stderr);
		return 2;
	}
	if (pdk_ws_open(argv[1], argv[2], &ws, &err) < 0 || pdk_ws_lock(ws, &err) < 0) {
		fprintf(stderr, "ws-snapshot: %s\n", err->msg);
		return 1;
	}
	t = calloc((size_t)rounds, sizeof(*t));
	start = pdk_ws_snapshots(ws);
	for (int i = 0; i < rounds; i++) {
		uint64_t t0;
		int n;

		for (int f = 0; f < 100; f++) {
			char *p = pdk_xasprintf("%s/change-%d-%d", pdk_ws_upper_path(ws), i, f);

			if (pdk_write_file_at(AT_FDCWD, p, "changed\n", true, &err) < 0)
				return 1;
			free(p);
		}
		t0 = pdk_now_mono_ns();
		n = pdk_ws_snapshot(ws, &err);
		t[i] = pdk_now_mono_ns() - t0;
		if (n < 0) {
			fprintf(stderr, "ws-snapshot: %s\n", err->msg);
			return 1;
		}
	}
	if (pdk_ws_rollback(ws, start, &err) < 0) {
		fprintf(stderr, "ws-snapshot: %s\n", err->msg);
		return 1;
	}
	qsort(t, (size_t)rounds, sizeof(*t), cmp_u64);
	printf("%.1f\n", (double)t[rounds / 2] / 1000.0);
	free(t);
	pdk_ws_free(ws);
	return 0;
}
