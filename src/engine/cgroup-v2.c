/*
 * cgroup-v2.c - the cgroup v2 backend: one directory in the unified
 * hierarchy, with the controllers it needs enabled in its parent.
 */
#include "common.h"
#include "base.h"
#include "cgroup-internal.h"
#include "cgroup.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int apply_memory(const char *dir, const struct pdk_cgroup_limits *lim,
			struct pdk_error **err)
{
	int rc = pdk__cgroup_write_u64(dir, "memory.max", lim->memory, err);

	/* memory.swap.max is absent when the kernel does not account swap. */
	if (rc < 0 || !pdk__cgroup_exists(dir, "memory.swap.max"))
		return rc;
	return pdk__cgroup_write(dir, "memory.swap.max", "0", err);
}

static int apply_pids(const char *dir, const struct pdk_cgroup_limits *lim, struct pdk_error **err)
{
	return pdk__cgroup_write_u64(dir, "pids.max", lim->pids, err);
}

static int apply_cpu(const char *dir, const struct pdk_cgroup_limits *lim, struct pdk_error **err)
{
	uint64_t quota = (uint64_t)lim->cpu_milli * (PDK__CGROUP_CPU_PERIOD / 1000);
	char buf[64];

	(void)snprintf(buf, sizeof(buf), "%" PRIu64 " %d", quota < 1000 ? 1000 : quota,
		       PDK__CGROUP_CPU_PERIOD);
	return pdk__cgroup_write(dir, "cpu.max", buf, err);
}

/*
 * Controllers, in the order they are enabled. Memory is enabled even
 * without its limit: memory.peak and memory.events need it (cpu.stat's
 * usage_usec is there without the cpu controller).
 */
static const struct pdk__cgroup_ctrl v2_ctrls[] = {
	{"memory", PDK_CGROUP_MEMORY, true, apply_memory},
	{"pids", PDK_CGROUP_PIDS, false, apply_pids},
	{"cpu", PDK_CGROUP_CPU, false, apply_cpu},
};

static int unavailable(struct pdk__cgroup_req *req, const char *dir,
		       const struct pdk__cgroup_ctrl *c, unsigned limit, const char *avail,
		       struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *local = NULL;
	size_t n = strcspn(avail, "\n");

	(void)pdk_error_setx(
		&local, ENOTSUP,
		"the %s needs the '%s' controller, which cgroup '%s' does not offer to its children (its cgroup.controllers is '%.*s'): enable it in the cgroup.subtree_control of the cgroups above it, or set PADDOCK_CGROUP_PARENT to a cgroup delegated with it (systemd: Delegate=yes), or mark the limit best_effort in the profile",
		pdk__cgroup_limit_names(limit), c->name, dir, (int)n, avail);
	return pdk__cgroup_soft_fail(req, limit, &local, err);
}

/* Replace the error of a failed cgroup.subtree_control write with one that says how to fix it. */
static void explain_enable(struct pdk_error **local, const char *dir, const char *what,
			   unsigned ctrls)
{
	int e = (*local)->status;

	if (e != EBUSY && e != EACCES && e != EPERM && e != EROFS)
		return;
	pdk_error_free(local);
	if (e == EBUSY) {
		(void)pdk_error_setx(
			local, e,
			"cannot enable '%s' in '%s/cgroup.subtree_control': %s; cgroup v2 hands controllers to child cgroups only from a cgroup without processes of its own (the no-internal-processes rule), and '%s' has some (often paddock itself, when it runs in the cgroup it uses as the parent): set PADDOCK_CGROUP_PARENT to a delegated cgroup that has no processes (e.g. an empty child of a `systemd-run --user --scope -p Delegate=yes paddock run ...` scope; see docs/internals/cgroup.md), or mark the limit best_effort in the profile",
			what, dir, strerror(e), dir);
		return;
	}
	(void)pdk_error_setx(
		local, e,
		"cannot enable '%s' in '%s/cgroup.subtree_control': %s; the %s need%s a delegated cgroup: run as root, or delegate a cgroup to this user and set PADDOCK_CGROUP_PARENT (see docs/internals/cgroup.md), or mark the limit best_effort in the profile",
		what, dir, strerror(e), pdk__cgroup_limit_names(ctrls),
		(ctrls & (ctrls - 1)) ? "" : "s");
}

/* Read the parent's cgroup.controllers and cgroup.subtree_control. */
static int read_parent(const char *dir, char **avail, char **enabled, struct pdk_error **err)
{
	int rc = pdk__cgroup_read(dir, "cgroup.controllers", avail, err);

	if (rc < 0)
		return rc;
	return pdk__cgroup_read(dir, "cgroup.subtree_control", enabled, err);
}

/*
 * Enable in the parent's cgroup.subtree_control the controllers the limits
 * and accounting need, in one write. *usable gets the controllers whose
 * files the new cgroup will have.
 */
static int enable_controllers(struct pdk__cgroup_req *req, const char *dir, unsigned *usable,
			      struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *local = NULL;
	_cleanup_free_ char *avail = NULL;
	_cleanup_free_ char *enabled = NULL;
	char buf[64] = "";
	unsigned pending = 0;
	int rc;

	if (read_parent(dir, &avail, &enabled, &local) < 0)
		return pdk__cgroup_soft_fail(req, req->wanted, &local, err);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(v2_ctrls); i++) {
		const struct pdk__cgroup_ctrl *c = &v2_ctrls[i];
		unsigned limit = c->limit & req->wanted;

		if (limit == 0 && !c->always)
			continue;
		if (!pdk__cgroup_has_word(avail, c->name)) {
			rc = limit != 0 ? unavailable(req, dir, c, limit, avail, err) : 0;
			if (rc < 0)
				return rc;
			continue;
		}
		*usable |= c->limit;
		if (pdk__cgroup_has_word(enabled, c->name))
			continue;
		pending |= c->limit;
		(void)snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s+%s",
			       buf[0] != '\0' ? " " : "", c->name);
	}
	if (pending == 0 || pdk__cgroup_write(dir, "cgroup.subtree_control", buf, &local) == 0)
		return 0;
	explain_enable(&local, dir, buf, pending & req->required);
	*usable &= ~pending;
	return pdk__cgroup_soft_fail(req, pending, &local, err);
}

static int resolve_parent_dir(struct pdk__cgroup_req *req, char **out, struct pdk_error **err)
{
	_cleanup_free_ char *mnt_root = pdk__cgroup_v2_mount_root(req);
	_cleanup_free_ char *parent = NULL;
	_cleanup_free_ char *dir = NULL;
	int rc = pdk__cgroup_parent(req, NULL, mnt_root, &parent, err);

	if (rc < 0)
		return rc;
	dir = pdk_xasprintf("%s%s", req->root, strcmp(parent, "/") == 0 ? "" : parent);
	if (access(dir, F_OK) < 0)
		return pdk_error_setx(
			err, ENOENT,
			"the parent cgroup '%s' (from %s) does not exist; create it, or set PADDOCK_CGROUP_PARENT to an existing cgroup",
			dir, req->parent_from != NULL ? req->parent_from : req->self_file);
	*out = steal_ptr(&dir);
	return 0;
}

static int make_leaf(struct pdk_cgroup *cg, struct pdk__cgroup_req *req, const char *parent_dir,
		     struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk__cgroup_join(parent_dir, cg->leaf);
	int rc = pdk__cgroup_mkdir(path, req->required != 0 ? req->required : req->wanted, err);

	if (rc < 0)
		return rc;
	rc = pdk__cgroup_add_dir(cg, steal_ptr(&path));
	return rc < 0 ? pdk_error_setx(err, -rc, "too many cgroup directories") : 0;
}

static int apply_limits(struct pdk__cgroup_req *req, const char *dir, unsigned usable,
			struct pdk_error **err)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(v2_ctrls); i++) {
		_cleanup_error_ struct pdk_error *local = NULL;
		unsigned limit = v2_ctrls[i].limit & req->wanted & usable;
		int rc;

		if (limit == 0)
			continue;
		rc = v2_ctrls[i].apply(dir, req->limits, &local);
		if (rc < 0 && pdk__cgroup_soft_fail(req, limit, &local, err) < 0)
			return rc;
	}
	return 0;
}

/*
 * Order: resolve the parent, enable controllers in it, create the leaf,
 * write the limits. A failure to get any cgroup at all downgrades every
 * limit (or fails, when one is required).
 */
static int v2_create(struct pdk_cgroup *cg, struct pdk__cgroup_req *req, struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *local = NULL;
	_cleanup_free_ char *parent_dir = NULL;
	unsigned usable = 0;
	int rc = resolve_parent_dir(req, &parent_dir, &local);

	if (rc < 0)
		return pdk__cgroup_soft_fail(req, req->wanted, &local, err);
	rc = enable_controllers(req, parent_dir, &usable, err);
	if (rc < 0)
		return rc;
	if (make_leaf(cg, req, parent_dir, &local) < 0)
		return pdk__cgroup_soft_fail(req, req->wanted, &local, err);
	return apply_limits(req, cg->dirs[0].path, usable, err);
}

static uint64_t v2_oom_kills(struct pdk_cgroup *cg)
{
	return pdk__cgroup_oom_read(cg, cg->dirs[0].path, "memory.events");
}

static void v2_stats(struct pdk_cgroup *cg, struct pdk_cgroup_stats *st, bool live)
{
	const char *dir = cg->dirs[0].path;
	uint64_t usec = 0;

	pdk__cgroup_stat_single(dir, "memory.peak", &st->memory_peak);
	st->oom_kills = v2_oom_kills(cg);
	pdk__cgroup_stat_keyed(dir, "pids.events", "max", &st->pids_denied);
	pdk__cgroup_stat_keyed(dir, "cpu.stat", "usage_usec", &usec);
	st->cpu_usage_ns = usec * 1000;
	if (!live)
		return;
	pdk__cgroup_stat_single(dir, "memory.current", &st->memory_current);
	pdk__cgroup_stat_single(dir, "pids.current", &st->pids_current);
}

/* cgroup.kill (Linux 5.14) kills every task atomically, with no pid reuse race. */
static int v2_kill_all(struct pdk_cgroup *cg, struct pdk_error **err)
{
	const char *dir = cg->dirs[0].path;

	if (!pdk__cgroup_exists(dir, "cgroup.kill"))
		return -ENOTSUP;
	return pdk__cgroup_write(dir, "cgroup.kill", "1", err);
}

static bool v2_is_frozen(const char *dir)
{
	uint64_t frozen = 1;

	pdk__cgroup_stat_keyed(dir, "cgroup.events", "frozen", &frozen);
	return frozen == 1;
}

/* cgroup.freeze (Linux 5.2). */
static int v2_freeze(struct pdk_cgroup *cg, bool frozen, struct pdk_error **err)
{
	const char *dir = cg->dirs[0].path;

	if (!pdk__cgroup_exists(dir, "cgroup.freeze"))
		return -ENOTSUP;
	return pdk__cgroup_freeze_file(dir, "cgroup.freeze", frozen ? "1" : "0", frozen,
				       v2_is_frozen, err);
}

static bool v2_frozen(struct pdk_cgroup *cg)
{
	uint64_t frozen = 0;

	pdk__cgroup_stat_keyed(cg->dirs[0].path, "cgroup.events", "frozen", &frozen);
	return frozen == 1;
}

const struct pdk__cgroup_ops pdk__cgroup_v2_ops = {
	.version = PDK_CGROUP_V2,
	.create = v2_create,
	.stats = v2_stats,
	.oom_kills = v2_oom_kills,
	.kill_all = v2_kill_all,
	.freeze = v2_freeze,
	.is_frozen = v2_frozen,
};
