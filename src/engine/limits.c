/*
 * limits.c - per-process resource limits (setrlimit) for the sandbox.
 *
 * rlimits complement the cgroup limits: they act on one process (CPU
 * seconds, open files, file size) where the cgroup acts on the whole tree.
 * A limit is only ever lowered: the wanted value is clamped to the hard
 * limit the caller already has, so an unprivileged caller never fails here
 * because a policy asks for more than it was given.
 */
#include "common.h"
#include "limits.h"

#include <sys/resource.h>

/* mlock() is for small secrets (gpg, ssh-agent); the old kernel default. */
#define MEMLOCK_BYTES (64 * 1024)

struct limit {
	int resource;
	const char *name;
	rlim_t soft, hard;
};

static rlim_t min_rlim(rlim_t a, rlim_t b)
{
	return a < b ? a : b;
}

static int lower_limit(const struct limit *l)
{
	struct rlimit cur, want;

	if (getrlimit(l->resource, &cur) < 0)
		return -errno;
	want.rlim_max = min_rlim(l->hard, cur.rlim_max);
	want.rlim_cur = min_rlim(l->soft, want.rlim_max);
	return setrlimit(l->resource, &want) < 0 ? -errno : 0;
}

/* Fill `out` with the limits the policy asks for; returns how many. */
static size_t wanted_limits(const struct pdk_policy_limits *p, struct limit out[static 6])
{
	size_t n = 0;

	/* SECURITY: no core dumps: they would write sandbox memory to disk. */
	out[n++] = (struct limit){RLIMIT_CORE, "RLIMIT_CORE", 0, 0};
	out[n++] = (struct limit){RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK", MEMLOCK_BYTES, MEMLOCK_BYTES};
	/* POSIX message queues are kernel memory charged per user; no sandbox needs them. */
	out[n++] = (struct limit){RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE", 0, 0};
	if (p->cpu_time_ms > 0) {
		/* SIGXCPU at the soft limit, SIGKILL one second later at the hard one. */
		rlim_t s = (p->cpu_time_ms + 999) / 1000;

		out[n++] = (struct limit){RLIMIT_CPU, "RLIMIT_CPU", s, s + 1};
	}
	if (p->nofile > 0)
		out[n++] = (struct limit){RLIMIT_NOFILE, "RLIMIT_NOFILE", p->nofile, p->nofile};
	if (p->fsize > 0)
		out[n++] = (struct limit){RLIMIT_FSIZE, "RLIMIT_FSIZE", p->fsize, p->fsize};
	return n;
}

int pdk_limits_apply_child(const struct pdk_policy_limits *l, struct pdk_child_error *ce)
{
	struct limit todo[6];
	size_t n;

	if (l == NULL)
		return pdk_child_error_setx(ce, EINVAL, "no limits to apply");
	n = wanted_limits(l, todo);
	for (size_t i = 0; i < n; i++) {
		int rc = lower_limit(&todo[i]);

		if (rc < 0)
			return pdk_child_error_set(ce, -rc, "cannot set rlimit %s", todo[i].name);
	}
	return 0;
}
