/*
 * ctl.c - the control object: the state directory it takes (lock, store,
 * key, audit store), its start, its once-a-second pass, its end.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "control-internal.h"
#include "image.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PURGE_EVERY_TICKS 10

void pdk__ctl_buf_add(struct evbuffer *buf, const void *data, size_t len)
{
	if (len > 0 && evbuffer_add(buf, data, len) < 0)
		pdk_oom();
}

struct evbuffer *pdk__ctl_buf_new(void)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL)
		pdk_oom();
	return b;
}

void pdk__ctl_unwatch(struct event **ev, int *fd)
{
	if (*ev != NULL)
		event_free(*ev);
	*ev = NULL;
	if (*fd >= 0)
		(void)close(*fd);
	*fd = -1;
}

bool pdk_ctl_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64 || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-')
			return false;
	return true;
}

bool pdk_ctl_image_known(struct pdk_ctl *c, const char *ref)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_image_store *st = NULL;
	struct pdk_image *img = NULL;
	bool known;

	if (pdk_image_store_open(&(struct pdk_image_store_opts){.state_dir = c->state_dir}, &st,
				 &err) < 0)
		return false;
	known = pdk_image_lookup(st, ref, &img, &err) == 0;
	pdk_image_free(img);
	pdk_image_store_free(st);
	return known;
}

const char *pdk_ctl_state_dir(const struct pdk_ctl *c)
{
	return c->state_dir;
}

size_t pdk_ctl_sandbox_count(struct pdk_ctl *c)
{
	size_t n = 0;

	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		n++;
	return n;
}

/* ---- the state directory ---- */

static int take_lock(struct pdk_ctl *c, struct pdk_error **err)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/daemon.lock", c->own_dir);
	char pid[24];

	c->lock_fd =
		TEMP_FAILURE_RETRY(open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
	if (c->lock_fd < 0)
		return pdk_error_set(err, errno, "cannot open '%s'", path);
	if (flock(c->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		_cleanup_free_ char *other = NULL;

		if (pdk_read_file_at(AT_FDCWD, path, 32, &other, NULL) == 0)
			other[strcspn(other, "\n")] = '\0';
		return pdk_error_setx(err, EBUSY,
				      "another paddock serve (pid %s) serves state directory '%s'",
				      other ? other : "?", c->own_dir);
	}
	(void)snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(c->lock_fd, 0) < 0 || pdk_write_all(c->lock_fd, pid, strlen(pid)) < 0)
		return pdk_error_set(err, errno, "cannot write '%s'", path);
	return 0;
}

static int open_state(struct pdk_ctl *c, struct pdk_error **err)
{
	_cleanup_free_ char *sbdir = pdk_xasprintf("%s/sb", c->run_dir);
	_cleanup_free_ char *private = pdk_xasprintf("%s/sandboxes", c->state_dir);
	int rc;

	if (pdk_mkdir_p(c->state_dir, err) < 0 || pdk_mkdir_p(c->own_dir, err) < 0 ||
	    pdk_mkdir_p(sbdir, err) < 0 || pdk_mkdir_p(private, err) < 0)
		return -EIO;
	/* SECURITY: RUNDIR holds the control sockets: only the daemon's user may enter it. */
	if (chmod(c->run_dir, 0700) < 0 || chmod(sbdir, 0700) < 0)
		return pdk_error_set(err, errno, "chmod '%s'", c->run_dir);
	/*
	 * RUNDIR/sb/ID (a supervisor's pid, socket, spool and log) and
	 * STATE/sandboxes/ID (a private workspace) come and go with every
	 * sandbox: each in a block group of its own, so that a daemon's churn
	 * does not slow every file made beside it (a cold create 10-15 ms
	 * instead of 5 right after a few hundred claims here;
	 * docs/internals/performance.md, fourteenth round).
	 */
	(void)pdk_dir_spread(sbdir);
	(void)pdk_dir_spread(private);
	rc = take_lock(c, err);
	if (rc == 0)
		rc = pdk_store_open(c->own_dir, &c->store, err);
	if (rc == 0)
		rc = pdk_token_key_load(c->own_dir, c->key, err);
	if (rc == 0)
		rc = pdk_audit_open(c->state_dir, &c->audit, err);
	return rc;
}

/*
 * The supervisors' binary, opened once at the start: a later upgrade of the
 * file on disk does not change what this control object runs.
 */
static int open_exe(struct pdk_ctl *c, const char *path, struct pdk_error **err)
{
	int fd;

	if (path == NULL)
		path = "/proc/self/exe";
	fd = TEMP_FAILURE_RETRY(open(path, O_RDONLY | O_CLOEXEC));
	if (fd < 0)
		return pdk_error_set(err, errno, "cannot open %s", path);
	/* Above 4: a supervisor's fds 3 and 4 are its spec and ready pipe (launch.c). */
	c->exe_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	(void)close(fd);
	if (c->exe_fd < 0)
		return pdk_error_set(err, errno, "cannot keep %s open", path);
	return 0;
}

int pdk_ctl_new(const struct pdk_ctl_opts *o, struct pdk_ctl **out, struct pdk_error **err)
{
	struct pdk_ctl *c = pdk_xcalloc(1, sizeof(*c));

	c->base = o->base;
	if (o->log != NULL)
		c->log = *o->log;
	c->envp = o->envp;
	c->exe_fd = c->lock_fd = -1;
	c->retention_ns = o->retention_s * 1000000000ULL;
	c->state_dir = pdk_xstrdup(o->state_dir);
	c->own_dir = pdk_xstrdup(o->own_dir != NULL ? o->own_dir : o->state_dir);
	c->actor = pdk_xstrdup(o->actor != NULL ? o->actor : "paddock-serve");
	c->end_with_us = o->end_with_us;
	c->exec_starts = o->exec_starts;
	if (c->exec_starts == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		c->exec_starts = cpus > 0 ? 2 * (unsigned)cpus : 2;
	}
	c->run_dir = pdk_xstrdup(o->run_dir);
	if (open_exe(c, o->supervisor_exe, err) < 0 || open_state(c, err) < 0) {
		pdk_ctl_free(c);
		return -EIO;
	}
	*out = c;
	return 0;
}

void pdk_ctl_start(struct pdk_ctl *c)
{
	pdk__ctl_fanout(c);
	pdk__sb_adopt_all(c);
	c->started = true;
}

/* ---- once a second ---- */

static void purge_ended(struct pdk_ctl *c, uint64_t now)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_store_ended_purge(c->store, now > c->retention_ns ? now - c->retention_ns : 0,
				  &err) < 0)
		pdk__ctl_log(c, PDK_LOG_WARN, "%s", err->msg);
}

static void sandboxes_tick(struct pdk_ctl *c, uint64_t now, uint64_t mono)
{
	struct pdk_ctl_sb *next;

	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = next) {
		next = sb->next;
		if (sb->destroying || strcmp(sb->row.state, "starting") == 0 ||
		    strcmp(sb->row.state, "lost") == 0)
			continue;
		if (sb->row.expires_ns != 0 && now >= sb->row.expires_ns) {
			pdk__sb_destroy(sb, "ttl");
			continue;
		}
		if (sb->row.idle_timeout_s != 0 && sb->execs == NULL &&
		    mono - sb->last_active_ns >= sb->row.idle_timeout_s * 1000000000ULL) {
			pdk__sb_destroy(sb, "idle");
			continue;
		}
		pdk__sb_ask_status(sb);
		pdk__sb_ingest(sb);
	}
}

void pdk_ctl_tick(struct pdk_ctl *c)
{
	if (c->stopping)
		return;
	/* Ended sandboxes past the retention period are forgotten (checked every 10 s). */
	if (c->ticks++ % PURGE_EVERY_TICKS == 0)
		purge_ended(c, pdk_now_real_ns());
	sandboxes_tick(c, pdk_now_real_ns(), pdk_now_mono_ns());
	pdk__pools_tick(c);
	pdk__ctl_fanout(c); /* records other writers (paddock run) appended */
	pdk__ctl_fold_runs(c);
}

/* ---- the end ---- */

static bool destroys_pending(const struct pdk_ctl *c)
{
	for (const struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL; sb = sb->next)
		if (sb->destroying)
			return true;
	return false;
}

void pdk_ctl_shutdown(struct pdk_ctl *c, bool destroy, uint64_t wait_s)
{
	uint64_t deadline = pdk_now_mono_ns() + wait_s * 1000000000ULL;
	struct pdk_ctl_sb *next;

	c->stopping = true;
	/* With `destroy`, every sandbox is destroyed. */
	for (struct pdk_ctl_sb *sb = c->sandboxes; sb != NULL && destroy; sb = next) {
		next = sb->next;
		pdk__sb_destroy(sb, "daemon_exit");
	}
	/*
	 * Wait (bounded) for the destroys under way to be seen through: a kill
	 * is answered once it is asked, and a supervisor not yet told (its spill
	 * files go first) would otherwise keep its sandbox running.
	 */
	while (destroys_pending(c) && pdk_now_mono_ns() < deadline)
		(void)event_base_loop(c->base, EVLOOP_ONCE);
}

void pdk_ctl_free(struct pdk_ctl *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (c == NULL)
		return;
	c->stopping = true;
	pdk__audit_state_free(c);
	pdk__subs_free_all(c);
	/* Supervisors keep running: only our ends of their sockets close. */
	pdk__sb_free_all(c);
	if (c->refill != NULL)
		event_free(c->refill);
	if (c->slot_ev != NULL)
		event_free(c->slot_ev);
	if (c->fold_ev != NULL)
		event_free(c->fold_ev);
	free(c->fold_err);
	/* Before the held events are stored: the withdrawals are recorded with them. */
	pdk__approvals_free(c);
	pdk__ctl_held_free(c);
	if (c->audit != NULL && pdk_audit_checkpoint(c->audit, &err) < 0)
		pdk__ctl_log(c, PDK_LOG_ERROR, "audit checkpoint: %s", err->msg);
	pdk_audit_free(c->audit);
	pdk_store_free(c->store);
	if (c->lock_fd >= 0)
		(void)close(c->lock_fd);
	if (c->exe_fd >= 0)
		(void)close(c->exe_fd);
	pdk__handles_free_all(c);
	free(c->state_dir);
	free(c->own_dir);
	free(c->actor);
	free(c->run_dir);
	free(c);
}
