/*
 * cgroup-v1.c - the cgroup v1 backend: one directory per controller
 * hierarchy (memory, pids, cpu, cpuacct, freezer), or fewer when
 * controllers are co-mounted ("cpu,cpuacct").
 */
#include "common.h"
#include "base.h"
#include "cgroup-internal.h"
#include "cgroup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *v1_dir(const struct pdk_cgroup *cg, enum pdk__cgroup_v1_ctrl c)
{
	for (size_t i = 0; i < cg->n_dirs; i++)
		if (cg->dirs[i].v1_ctrls & (1U << c))
			return cg->dirs[i].path;
	return NULL;
}

static int apply_memory(const char *dir, const struct pdk_cgroup_limits *lim,
			struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *ignored = NULL;
	int rc = pdk__cgroup_write_u64(dir, "memory.limit_in_bytes", lim->memory, err);

	if (rc < 0 || !pdk__cgroup_exists(dir, "memory.memsw.limit_in_bytes"))
		return rc;
	/*
	 * memsw (memory + swap) equal to the memory limit forbids swap. It
	 * must be written after memory.limit_in_bytes (memsw >= memory). The
	 * file is absent, or refuses writes, when the kernel does not account
	 * swap (swapaccount=0); the sandbox may then swap beyond the limit,
	 * which the memory limit alone cannot prevent.
	 */
	(void)pdk__cgroup_write_u64(dir, "memory.memsw.limit_in_bytes", lim->memory, &ignored);
	return 0;
}

static int apply_pids(const char *dir, const struct pdk_cgroup_limits *lim, struct pdk_error **err)
{
	return pdk__cgroup_write_u64(dir, "pids.max", lim->pids, err);
}

static int apply_cpu(const char *dir, const struct pdk_cgroup_limits *lim, struct pdk_error **err)
{
	uint64_t quota = (uint64_t)lim->cpu_milli * (PDK__CGROUP_CPU_PERIOD / 1000);
	int rc = pdk__cgroup_write_u64(dir, "cpu.cfs_period_us", PDK__CGROUP_CPU_PERIOD, err);

	if (rc < 0)
		return rc;
	return pdk__cgroup_write_u64(dir, "cpu.cfs_quota_us", quota < 1000 ? 1000 : quota, err);
}

/*
 * The hierarchies, in creation order: cpuacct and the freezer are joined
 * whatever the limits, for accounting and for pause and kill.
 */
static const struct pdk__cgroup_ctrl v1_ctrls[PDK__V1_COUNT] = {
	[PDK__V1_MEMORY] = {"memory", PDK_CGROUP_MEMORY, true, apply_memory},
	[PDK__V1_PIDS] = {"pids", PDK_CGROUP_PIDS, false, apply_pids},
	[PDK__V1_CPU] = {"cpu", PDK_CGROUP_CPU, false, apply_cpu},
	[PDK__V1_CPUACCT] = {"cpuacct", 0, true, NULL},
	[PDK__V1_FREEZER] = {"freezer", 0, true, NULL},
};

static int not_mounted(const struct pdk__cgroup_req *req, const char *name, unsigned limit,
		       struct pdk_error **err)
{
	return pdk_error_setx(
		err, ENOENT,
		"the %s needs the cgroup v1 '%s' controller, which is not mounted under '%s': mount it (mount -t cgroup -o %s %s %s/%s), or mark the limit best_effort in the profile",
		pdk__cgroup_limit_names(limit), name, req->root, name, name, req->root, name);
}

/* Create (or, co-mounted, reuse) the directory for one controller and apply its limit. */
static int setup_one(struct pdk_cgroup *cg, struct pdk__cgroup_req *req, enum pdk__cgroup_v1_ctrl c,
		     unsigned limit, struct pdk_error **err)
{
	const struct pdk__cgroup_ctrl *ctrl = &v1_ctrls[c];
	_cleanup_free_ char *mnt_dir = NULL;
	_cleanup_free_ char *mnt_root = NULL;
	_cleanup_free_ char *parent = NULL;
	_cleanup_free_ char *path = NULL;
	int idx, rc;

	if (pdk__cgroup_v1_find(req, ctrl->name, &mnt_dir, &mnt_root) < 0)
		return not_mounted(req, ctrl->name, limit, err);
	rc = pdk__cgroup_parent(req, ctrl->name, mnt_root, &parent, err);
	if (rc < 0)
		return rc;
	path = pdk_xasprintf("%s%s/%s", mnt_dir, strcmp(parent, "/") == 0 ? "" : parent, cg->leaf);
	idx = pdk__cgroup_find_dir(cg, path);
	if (idx < 0) {
		rc = pdk__cgroup_mkdir(path, limit, err);
		if (rc < 0)
			return rc;
		idx = pdk__cgroup_add_dir(cg, steal_ptr(&path));
		if (idx < 0)
			return pdk_error_setx(err, -idx, "too many cgroup v1 hierarchies");
	}
	cg->dirs[idx].v1_ctrls |= 1U << c;
	if (limit == 0 || ctrl->apply == NULL)
		return 0;
	return ctrl->apply(cg->dirs[idx].path, req->limits, err);
}

/*
 * Hierarchies that are not needed for a required limit and fail are
 * skipped: accounting is best effort, limits are not.
 */
static int v1_create(struct pdk_cgroup *cg, struct pdk__cgroup_req *req, struct pdk_error **err)
{
	for (int c = 0; c < PDK__V1_COUNT; c++) {
		_cleanup_error_ struct pdk_error *local = NULL;
		unsigned limit = v1_ctrls[c].limit & req->wanted;
		int rc;

		if (limit == 0 && !v1_ctrls[c].always)
			continue;
		rc = setup_one(cg, req, (enum pdk__cgroup_v1_ctrl)c, limit, &local);
		if (rc < 0 && pdk__cgroup_soft_fail(req, limit, &local, err) < 0)
			return rc;
	}
	return 0;
}

static uint64_t v1_oom_kills(struct pdk_cgroup *cg)
{
	return pdk__cgroup_oom_read(cg, v1_dir(cg, PDK__V1_MEMORY), "memory.oom_control");
}

static void v1_stats(struct pdk_cgroup *cg, struct pdk_cgroup_stats *st, bool live)
{
	const char *mem = v1_dir(cg, PDK__V1_MEMORY);

	pdk__cgroup_stat_single(mem, "memory.max_usage_in_bytes", &st->memory_peak);
	st->oom_kills = v1_oom_kills(cg);
	pdk__cgroup_stat_keyed(v1_dir(cg, PDK__V1_PIDS), "pids.events", "max", &st->pids_denied);
	pdk__cgroup_stat_single(v1_dir(cg, PDK__V1_CPUACCT), "cpuacct.usage", &st->cpu_usage_ns);
	if (!live)
		return;
	pdk__cgroup_stat_single(mem, "memory.usage_in_bytes", &st->memory_current);
	pdk__cgroup_stat_single(v1_dir(cg, PDK__V1_PIDS), "pids.current", &st->pids_current);
}

/* FREEZING becomes FROZEN once every task stopped; one in D state may delay it. */
static bool v1_is_frozen(const char *dir)
{
	_cleanup_error_ struct pdk_error *ignored = NULL;
	_cleanup_free_ char *state = NULL;

	return pdk__cgroup_read(dir, "freezer.state", &state, &ignored) < 0 ||
	       strncmp(state, "FROZEN", 6) == 0;
}

static int v1_freeze(struct pdk_cgroup *cg, bool frozen, struct pdk_error **err)
{
	const char *dir = v1_dir(cg, PDK__V1_FREEZER);

	if (dir == NULL)
		return -ENOTSUP;
	return pdk__cgroup_freeze_file(dir, "freezer.state", frozen ? "FROZEN" : "THAWED", frozen,
				       v1_is_frozen, err);
}

static bool v1_frozen(struct pdk_cgroup *cg)
{
	_cleanup_error_ struct pdk_error *ignored = NULL;
	_cleanup_free_ char *state = NULL;
	const char *dir = v1_dir(cg, PDK__V1_FREEZER);

	return dir != NULL && pdk__cgroup_read(dir, "freezer.state", &state, &ignored) == 0 &&
	       strncmp(state, "FROZEN", 6) == 0;
}

const struct pdk__cgroup_ops pdk__cgroup_v1_ops = {
	.version = PDK_CGROUP_V1,
	.create = v1_create,
	.stats = v1_stats,
	.oom_kills = v1_oom_kills,
	.kill_all = NULL, /* v1 has no cgroup.kill: the front's freeze-and-kill loop it is */
	.freeze = v1_freeze,
	.is_frozen = v1_frozen,
};
