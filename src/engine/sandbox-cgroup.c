/*
 * sandbox-cgroup.c - the cgroups of runs that were killed.
 *
 * A supervisor killed with SIGKILL cannot remove its sandbox's cgroup: the
 * sandbox dies with it (its init has a parent-death signal, the pid
 * namespace takes the rest), but the empty directories stay, one per
 * hierarchy. A daemon's supervisors write where theirs is
 * (RUNDIR/sb/ID/cgroup) and the daemon removes it (control/adopt.c). A
 * `paddock run` has no daemon, so it keeps a record of its own:
 * RUNTIME/cgroups/paddock-NAME, pdk_cgroup_describe()'s text, locked
 * (flock) for as long as the run lives. The next run started on the same
 * runtime directory sweeps them: a record whose lock it can take belongs to
 * a run that is gone, so its cgroup is adopted (pdk_cgroup_adopt() checks
 * every path) and destroyed, then the record removed. Without those
 * records, a day of killed runs left thousands of directories, and every
 * cgroup operation on the host slowed with them
 * (docs/internals/performance.md).
 *
 * Both ends run on the creation's cgroup thread (sandbox.c), beside the
 * other steps; nothing here fails a start: a record that cannot be written
 * only means a cgroup left behind if this run is killed.
 */
#include "common.h"
#include "base.h"
#include "sandbox-internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORDS  "cgroups"
#define NAME_LEN 12 /* the sandbox id's random tail, which names its cgroup (sandbox.c) */

static char *records_dir(const struct pdk_sandbox *sb)
{
	return pdk_xasprintf("%s/" RECORDS, sb->cfg->runtime_dir);
}

/* A record's name: the cgroup's, NAME_LEN lower-case hex digits (not NAME.new). */
static bool record_name(const char *name)
{
	if (strlen(name) != NAME_LEN)
		return false;
	for (size_t i = 0; i < NAME_LEN; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return true;
}

/*
 * The record `name` in the open directory `dfd`, when no run holds it: its
 * cgroup destroyed, then the record removed. One that is locked, or whose
 * cgroup cannot be removed yet, stays for a later sweep.
 */
static void sweep_one(int dfd, const char *name)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *text = NULL;
	struct pdk_cgroup *cg = NULL;

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
		return; /* gone, or its run lives */
	if (pdk_read_file_at(dfd, name, 64 * 1024, &text, &err) < 0)
		return;
	if (pdk_cgroup_adopt(text, name, NULL, &cg, &err) == 0 && pdk_cgroup_destroy(cg, &err) < 0)
		return;
	/* Removed, or a record no cgroup can be adopted from: nothing to keep it for. */
	(void)unlinkat(dfd, name, 0);
}

void pdk__sandbox_sweep_cgroups(const struct pdk_sandbox *sb)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_closedir_ DIR *d = NULL;
	struct dirent *de;

	if (sb->cfg->service || sb->cfg->runtime_dir == NULL)
		return;
	dir = records_dir(sb);
	d = opendir(dir);
	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (record_name(de->d_name))
			sweep_one(dirfd(d), de->d_name);
}

/*
 * The record of this run's cgroup: written under NAME.new, locked, then
 * renamed into place, so a sweep never finds a record in place that no one
 * holds while its run lives.
 */
void pdk__sandbox_record_cgroup(struct pdk_sandbox *sb, const char *name)
{
	_cleanup_free_ char *dir = NULL, *text = NULL, *tmp = NULL, *path = NULL;
	int fd;

	if (sb->cfg->service || sb->cfg->runtime_dir == NULL ||
	    pdk_cgroup_path(sb->cgroup) == NULL || !record_name(name) ||
	    pdk_paths_private_dir(sb->cfg->runtime_dir, NULL) < 0)
		return;
	dir = records_dir(sb);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return;
	text = pdk_cgroup_describe(sb->cgroup);
	path = pdk_xasprintf("%s/%s", dir, name);
	tmp = pdk_xasprintf("%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX) < 0 || pdk_write_all(fd, text, strlen(text)) < 0 ||
	    rename(tmp, path) < 0) {
		(void)unlink(tmp);
		(void)close(fd);
		return;
	}
	sb->cg_record_fd = fd;
	sb->cg_record = steal_ptr(&path);
}

void pdk__sandbox_forget_cgroup(struct pdk_sandbox *sb, bool removed)
{
	if (sb->cg_record != NULL && removed)
		(void)unlink(sb->cg_record);
	free(sb->cg_record);
	sb->cg_record = NULL;
	if (sb->cg_record_fd >= 0)
		(void)close(sb->cg_record_fd);
	sb->cg_record_fd = -1;
}
