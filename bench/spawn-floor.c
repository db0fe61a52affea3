/*
 * spawn-floor.c - the machine's own cost of starting a process and waiting
 * for it, without paddock: the floor under an exec round trip.
 *   spawn-floor PROGRAM
 * Reads one byte per sample on stdin: 'v' = vfork + execve + waitpid,
 * 'p' = posix_spawn + waitpid. Times that sample alone (CLOCK_MONOTONIC)
 * and answers one line with the nanoseconds, so the caller can interleave
 * samples with its own measures without timing the pipe. 'w' followed by
 * a count N and a newline is a concurrent wave: N threads released
 * together, each one vfork + execve + waitpid, each timed on its own; the
 * answer is one line of N figures. EOF ends it.
 * Built and run by bench/daemon (no libpaddock: the host's own floor).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int one(int mode, char *prog)
{
	char *argv[] = {prog, NULL};
	int status;
	pid_t pid;

	if (mode == 'p') {
		if (posix_spawn(&pid, prog, NULL, NULL, argv, environ) != 0)
			return -1;
	} else {
		pid = vfork();
		if (pid == 0) {
			execve(prog, argv, environ);
			_exit(127);
		}
		if (pid < 0)
			return -1;
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return 0;
}

struct wave {
	pthread_barrier_t go;
	char *prog;
	uint64_t *ns;
	int failed;
};

struct member {
	struct wave *w;
	int i;
};

static void *wave_member(void *arg)
{
	struct member *m = arg;
	uint64_t t0;

	pthread_barrier_wait(&m->w->go);
	t0 = now_ns();
	if (one('v', m->w->prog) < 0)
		__atomic_store_n(&m->w->failed, 1, __ATOMIC_RELAXED);
	m->w->ns[m->i] = now_ns() - t0;
	return NULL;
}

/* N threads, released together: how long each start of PROGRAM takes when N start at once. */
static int wave(char *prog)
{
	struct wave w = {.prog = prog};
	struct member *m;
	pthread_t *t;
	int n;

	if (scanf("%d", &n) != 1 || n < 1 || n > 4096 || getchar() != '\n')
		return -1;
	w.ns = calloc((size_t)n, sizeof(*w.ns));
	m = calloc((size_t)n, sizeof(*m));
	t = calloc((size_t)n, sizeof(*t));
	if (w.ns == NULL || m == NULL || t == NULL ||
	    pthread_barrier_init(&w.go, NULL, (unsigned)n))
		return -1;
	for (int i = 0; i < n; i++) {
		m[i] = (struct member){&w, i};
		if (pthread_create(&t[i], NULL, wave_member, &m[i]) != 0)
			return -1;
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < n; i++)
		printf("%s%llu", i ? " " : "", (unsigned long long)w.ns[i]);
	printf("\n");
	pthread_barrier_destroy(&w.go);
	free(w.ns);
	free(m);
	free(t);
	return w.failed ? -1 : 0;
}

int main(int argc, char **argv)
{
	int c;

	if (argc != 2) {
		fprintf(stderr, "usage: spawn-floor PROGRAM\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getchar()) != EOF) {
		uint64_t t0 = now_ns(), t1;

		if (c == 'w') {
			if (wave(argv[1]) < 0) {
				fprintf(stderr, "spawn-floor: a wave of %s failed\n", argv[1]);
				return 1;
			}
			continue;
		}

		if (one(c, argv[1]) < 0) {
			fprintf(stderr, "spawn-floor: %s failed\n", argv[1]);
			return 1;
		}
		t1 = now_ns();
		printf("%llu\n", (unsigned long long)(t1 - t0));
	}
	return 0;
}
