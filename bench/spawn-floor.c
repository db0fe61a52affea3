/*
 * spawn-floor.c - the machine's own cost of starting a process and waiting
 * for it, without paddock: the floor under an exec round trip.
 *   spawn-floor PROGRAM
 * Reads one byte per sample on stdin: 'v' = vfork + execve + waitpid,
 * 'p' = posix_spawn + waitpid. Times that sample alone (CLOCK_MONOTONIC)
 * and answers one line with the nanoseconds, so the caller can interleave
 * samples with its own measures without timing the pipe. EOF ends it.
 * Built and run by bench/daemon (no libpaddock: the host's own floor).
 */
#define _GNU_SOURCE
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

		if (one(c, argv[1]) < 0) {
			fprintf(stderr, "spawn-floor: %s failed\n", argv[1]);
			return 1;
		}
		t1 = now_ns();
		printf("%llu\n", (unsigned long long)(t1 - t0));
	}
	return 0;
}
