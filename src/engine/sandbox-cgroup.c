/*
 * sandbox-cgroup.c - the cgroups of runs that were killed.
 *
 * A supervisor killed with SIGKILL cannot remove its sandbox's cgroup: the
 * sandbox dies with it (its init has a parent-death signal, the pid
 * namespace takes the rest), but the empty directories stay, one per
 * hierarchy. A daemon's supervisors write where theirs is
 * (RUNDIR/sb/ID/cgroup) and the daemon removes it (control/adopt.c). A
 * `paddock run` has no daemon, so it keeps a record of its own in
 * RUNTIME/cgroups: one file of SLOT-byte slots, each a run's
 * pdk_cgroup_describe() text, held by an open-file-description lock on that
 * slot's bytes (F_OFD_SETLK) for as long as the run lives, and marked free
 * ('#' as its first byte) at its end. A slot that holds a description and
 * that no one holds belongs to a run that is gone: the next run started on
 * the same runtime directory adopts that cgroup (pdk_cgroup_adopt() checks
 * every path), destroys it and frees the slot. Without these records, a day
 * of killed runs left thousands of directories, and every cgroup operation
 * of the host slowed with them (docs/internals/performance.md).
 *
 * One file whose slots are written in place, not a file per run: a file
 * made and removed at every run was an inode allocated and freed on the
 * runtime directory's filesystem, 0.15-0.3 ms on ext4. A run claims its slot
 * on the cgroup thread right after making the cgroup (sandbox.c), so only a
 * run killed between the two leaves its cgroup; the gone runs' slots are
 * reaped once the child is cloned, while the command starts. Nothing here
 * fails a start: a record that cannot be written only means a cgroup left
 * behind if this run is killed.
 */
#include "common.h"
#include "base.h"
#include "sandbox-internal.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORDS   "cgroups"
#define SLOT      4096 /* bytes per run: its description, NUL-padded */
#define MAX_SLOTS 1024 /* runs at once that can be recorded */
#define FREE_MARK '#'

static bool lock_slot(int fd, unsigned k, short type)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = (off_t)k * SLOT,
		.l_len = SLOT,
	};

	return fcntl(fd, F_OFD_SETLK, &fl) == 0;
}

/* A slot's text that names a cgroup (a description starts with its version digit). */
static bool holds_record(const char *slot)
{
	return slot[0] >= '1' && slot[0] <= '9';
}

/*
 * A slot's text (locked by us, held by no one else): the cgroup it names, a
 * gone run's, destroyed. Its name is the first line's tail ("paddock-NAME"),
 * checked again by pdk_cgroup_adopt() with every path.
 */
static void reap(const char *slot)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *text = pdk_xcalloc(1, SLOT + 1);
	struct pdk_cgroup *cg = NULL;
	const char *nl, *leaf;
	char name[13];

	memcpy(text, slot, SLOT);
	nl = strchr(text, '\n');
	if (nl == NULL)
		return;
	leaf = memrchr(text, '-', (size_t)(nl - text));
	if (leaf == NULL || nl - (leaf + 1) != 12)
		return;
	memcpy(name, leaf + 1, 12);
	name[12] = '\0';
	if (pdk_cgroup_adopt(text, name, NULL, &cg, &err) == 0)
		(void)!pdk_cgroup_destroy(cg, &err);
}

/* Slot `k` marked free and unlocked. */
static void release(int fd, unsigned k)
{
	(void)!pwrite(fd, (char[]){FREE_MARK}, 1, (off_t)k * SLOT);
	(void)lock_slot(fd, k, F_UNLCK);
}

/* The records file's slots as they are now: a buffer of *used slots (and one more, zeroed). */
static char *read_slots(int fd, unsigned *used)
{
	struct stat st;
	char *slots;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	*used = (unsigned)((st.st_size + SLOT - 1) / SLOT);
	if (*used > MAX_SLOTS)
		*used = MAX_SLOTS;
	slots = pdk_xcalloc((size_t)*used + 1, SLOT);
	if (pread(fd, slots, (size_t)*used * SLOT, 0) < 0) {
		free(slots);
		return NULL;
	}
	return slots;
}

void pdk__sandbox_record_cgroup(struct pdk_sandbox *sb)
{
	_cleanup_free_ char *path = NULL, *text = NULL, *slots = NULL;
	_cleanup_close_ int fd = -1;
	unsigned used = 0, k;
	size_t len;

	if (sb->cfg->service || sb->cfg->runtime_dir == NULL || sb->cgroup == NULL ||
	    pdk_cgroup_path(sb->cgroup) == NULL ||
	    pdk_paths_private_dir(sb->cfg->runtime_dir, NULL) < 0)
		return;
	text = pdk_cgroup_describe(sb->cgroup);
	len = strlen(text);
	if (len == 0 || len >= SLOT)
		return;
	path = pdk_xasprintf("%s/" RECORDS, sb->cfg->runtime_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || (slots = read_slots(fd, &used)) == NULL)
		return;
	/*
	 * The first free slot we can lock, else the first new one past the last. A slot
	 * that holds a record is never taken here: a gone run's is reaped first
	 * (pdk__sandbox_reap_cgroups()), then free for a later run.
	 */
	for (k = 0; k < used; k++)
		if (!holds_record(slots + (size_t)k * SLOT) && lock_slot(fd, k, F_WRLCK))
			break;
	/* Runs that start together may all want the first new one: the next ones then. */
	while (k >= used && k < MAX_SLOTS && !lock_slot(fd, k, F_WRLCK))
		k++;
	if (k == MAX_SLOTS)
		return;
	memset(slots, 0, SLOT);
	memcpy(slots, text, len);
	if (pwrite(fd, slots, SLOT, (off_t)k * SLOT) != SLOT) {
		release(fd, k);
		return;
	}
	sb->cg_record_fd = steal_fd(&fd);
	sb->cg_record_slot = (long)k;
}

void pdk__sandbox_reap_cgroups(const struct pdk_sandbox *sb)
{
	_cleanup_free_ char *path = NULL, *slots = NULL;
	_cleanup_close_ int own = -1;
	int fd = sb->cg_record_fd;
	unsigned used = 0;

	if (sb->cfg->service || sb->cfg->runtime_dir == NULL)
		return;
	if (fd < 0) {
		path = pdk_xasprintf("%s/" RECORDS, sb->cfg->runtime_dir);
		fd = own = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	}
	if (fd < 0 || (slots = read_slots(fd, &used)) == NULL)
		return;
	/* Each record that no one holds: a gone run's, its cgroup destroyed, the slot freed. */
	for (unsigned k = 0; k < used; k++) {
		const char *slot = slots + (size_t)k * SLOT;

		if ((long)k == sb->cg_record_slot || !holds_record(slot) ||
		    !lock_slot(fd, k, F_WRLCK))
			continue;
		reap(slot);
		release(fd, k);
	}
}

void pdk__sandbox_forget_cgroup(struct pdk_sandbox *sb, bool removed)
{
	if (sb->cg_record_fd < 0)
		return;
	/* Still there: the slot stays a record, unlocked, for the next run to reap. */
	if (removed)
		(void)!pwrite(sb->cg_record_fd, (char[]){FREE_MARK}, 1,
			      (off_t)sb->cg_record_slot * SLOT);
	(void)close(sb->cg_record_fd); /* the lock goes with the last descriptor */
	sb->cg_record_fd = -1;
}
