/*
 * procs.c - detached processes: streamed commands that belong to the
 * sandbox instead of to the request that started them, with the output
 * kept since their start for whoever attaches later (control.h).
 *
 * A process owns one streamed exec (exec.c) whose callbacks are this
 * file's; it hands what the exec reports to every watcher attached at the
 * time. Watchers come and go without touching the command. The output kept
 * for a re-attach is a list of chunks bounded by PDK_CTL_PROC_KEEP bytes:
 * past it the oldest chunks go, and `dropped` counts their bytes.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <string.h>

struct chunk {
	struct chunk *next;
	int stream;
	size_t len;
	char data[];
};

struct pdk_ctl_proc_watch {
	struct pdk_ctl_proc_watch *next;
	struct pdk__proc *p;
	struct pdk_ctl_proc_cbs cbs;
	void *ctx;
	bool gone; /* detached while its process was calling watchers: freed after the pass */
};

struct pdk__proc {
	struct pdk__proc *next;
	struct pdk_ctl_sb *sb;
	char *tag;
	char **argv, **env;
	char *cwd;
	bool pty, stdin_open, running, ended;
	uint64_t exec_id;
	int pid;
	struct chunk *head, *tail; /* the output kept, oldest first */
	size_t kept;
	uint64_t dropped;
	struct pdk_ctl_proc_watch *watches;
	unsigned calling; /* watchers are being called: a detach only marks its watch */
	struct pdk_ctl_exit exit;
	bool has_exit;
};

/* ---- the objects ---- */

static void chunks_free(struct pdk__proc *p)
{
	while (p->head != NULL) {
		struct chunk *c = p->head;

		p->head = c->next;
		free(c);
	}
	p->tail = NULL;
	p->kept = 0;
}

static void proc_free(struct pdk__proc *p)
{
	while (p->watches != NULL) {
		struct pdk_ctl_proc_watch *w = p->watches;

		p->watches = w->next;
		free(w);
	}
	chunks_free(p);
	free(p->tag);
	pdk_strv_free(p->argv);
	pdk_strv_free(p->env);
	free(p->cwd);
	free(p);
}

void pdk__sb_procs_free(struct pdk_ctl_sb *sb)
{
	while (sb->procs != NULL) {
		struct pdk__proc *p = sb->procs;

		sb->procs = p->next;
		proc_free(p);
	}
}

static void info_of(const struct pdk__proc *p, struct pdk_ctl_proc_info *out)
{
	static char *const none[] = {NULL};

	memset(out, 0, sizeof(*out));
	out->exec_id = p->exec_id;
	out->pid = p->pid;
	out->tag = p->tag;
	out->argv = p->argv;
	out->env = p->env != NULL ? p->env : none;
	out->cwd = p->cwd;
	out->pty = p->pty;
	out->stdin_open = p->stdin_open;
	out->running = p->running;
	out->dropped = p->dropped;
}

/* Ended processes past PDK_CTL_PROCS_ENDED go, oldest first (the list is newest first). */
static void prune_ended(struct pdk_ctl_sb *sb)
{
	unsigned ended = 0;

	for (struct pdk__proc **pp = &sb->procs; *pp != NULL;) {
		struct pdk__proc *p = *pp;

		if (p->ended && p->calling == 0 && ++ended > PDK_CTL_PROCS_ENDED) {
			*pp = p->next;
			proc_free(p);
			continue;
		}
		pp = &p->next;
	}
}

/* ---- watchers ---- */

/* Watchers detached during a pass are freed after it. */
static void sweep(struct pdk__proc *p)
{
	if (p->calling > 0)
		return;
	for (struct pdk_ctl_proc_watch **pw = &p->watches; *pw != NULL;) {
		struct pdk_ctl_proc_watch *w = *pw;

		if (w->gone) {
			*pw = w->next;
			free(w);
			continue;
		}
		pw = &w->next;
	}
}

void pdk_ctl_proc_detach(struct pdk_ctl_proc_watch *w)
{
	if (w == NULL)
		return;
	w->gone = true;
	sweep(w->p);
}

static void keep(struct pdk__proc *p, int stream, const char *data, size_t len)
{
	struct chunk *c = pdk_xmalloc(sizeof(*c) + len);

	c->next = NULL;
	c->stream = stream;
	c->len = len;
	memcpy(c->data, data, len);
	if (p->tail != NULL)
		p->tail->next = c;
	else
		p->head = c;
	p->tail = c;
	p->kept += len;
	/* SECURITY: what a process keeps for a re-attach is bounded, whatever it writes. */
	while (p->kept > PDK_CTL_PROC_KEEP && p->head != NULL) {
		struct chunk *old = p->head;

		p->head = old->next;
		if (p->head == NULL)
			p->tail = NULL;
		p->kept -= old->len;
		p->dropped += old->len;
		free(old);
	}
}

/* ---- the exec's callbacks ---- */

static void on_started(void *ctx, uint64_t exec_id, int pid, bool pty)
{
	struct pdk__proc *p = ctx;
	struct pdk_ctl_proc_info info;

	(void)pty;
	p->exec_id = exec_id;
	p->pid = pid;
	p->running = true;
	info_of(p, &info);
	p->calling++;
	for (struct pdk_ctl_proc_watch *w = p->watches; w != NULL; w = w->next)
		if (!w->gone && w->cbs.started != NULL)
			w->cbs.started(w->ctx, &info);
	p->calling--;
	sweep(p);
}

static void on_output(void *ctx, int stream, const char *data, size_t len)
{
	struct pdk__proc *p = ctx;

	keep(p, stream, data, len);
	p->calling++;
	for (struct pdk_ctl_proc_watch *w = p->watches; w != NULL; w = w->next)
		if (!w->gone && w->cbs.output != NULL)
			w->cbs.output(w->ctx, stream, data, len);
	p->calling--;
	sweep(p);
}

/* Every watcher's last call: each is gone after it. */
static void tell_done(struct pdk__proc *p, const struct pdk_ctl_exit *exit,
		      const struct pdk_error *err)
{
	p->calling++;
	for (struct pdk_ctl_proc_watch *w = p->watches; w != NULL; w = w->next) {
		if (w->gone)
			continue;
		w->gone = true;
		if (w->cbs.done != NULL)
			w->cbs.done(w->ctx, exit, err);
	}
	p->calling--;
	sweep(p);
}

static void on_done(void *ctx, const struct pdk_ctl_exec_result *r, const struct pdk_error *err)
{
	struct pdk__proc *p = ctx;

	p->running = false;
	p->ended = true;
	if (r != NULL) {
		p->exit = r->exit;
		/* The denied list is borrowed for the call: a later re-attach does not get it. */
		p->exit.denied = NULL;
		p->has_exit = true;
	}
	tell_done(p, r != NULL ? &r->exit : NULL, err);
	prune_ended(p->sb);
}

static const struct pdk_ctl_exec_cbs proc_exec_cbs = {
	.started = on_started, .output = on_output, .done = on_done};

/* ---- the calls ---- */

static struct pdk_ctl_proc_watch *watch_add(struct pdk__proc *p, const struct pdk_ctl_proc_cbs *cbs,
					    void *ctx)
{
	struct pdk_ctl_proc_watch *w = pdk_xcalloc(1, sizeof(*w));

	w->p = p;
	w->cbs = *cbs;
	w->ctx = ctx;
	w->next = p->watches;
	p->watches = w;
	return w;
}

static bool tag_is(const struct pdk__proc *p, const char *tag)
{
	return p->tag != NULL && strcmp(p->tag, tag) == 0;
}

static int start_check(struct pdk_ctl_sb *sb, const char *tag, struct pdk_error **err)
{
	unsigned running = 0;

	if (tag != NULL && strlen(tag) > PDK_CTL_PROC_TAG_MAX)
		return pdk_error_set_field(err, EINVAL, "tag", "a tag is at most %u bytes",
					   PDK_CTL_PROC_TAG_MAX);
	for (struct pdk__proc *p = sb->procs; p != NULL; p = p->next) {
		if (p->ended)
			continue;
		running++;
		if (tag != NULL && tag_is(p, tag))
			return pdk_error_set_field(err, EEXIST, "tag",
						   "a process tagged '%s' runs already", tag);
	}
	/* SECURITY: the processes a sandbox keeps for later callers are bounded. */
	if (running >= PDK_CTL_PROCS_MAX)
		return pdk_error_setx(err, EBUSY,
				      "%u detached processes run in this sandbox, the most it may "
				      "have: end one first",
				      PDK_CTL_PROCS_MAX);
	return 0;
}

static struct pdk__proc *proc_new(struct pdk_ctl_sb *sb, const struct pdk_ctl_exec_req *r,
				  const char *tag)
{
	struct pdk__proc *p = pdk_xcalloc(1, sizeof(*p));

	p->sb = sb;
	p->tag = tag != NULL ? pdk_xstrdup(tag) : NULL;
	p->argv = pdk_strv_dup(r->argv);
	p->env = r->env != NULL ? pdk_strv_dup(r->env) : NULL;
	p->cwd = r->cwd != NULL ? pdk_xstrdup(r->cwd) : NULL;
	p->pty = r->pty;
	p->stdin_open = r->stdin_open || r->pty;
	return p;
}

int pdk_ctl_proc_start(struct pdk_ctl_sb *sb, const struct pdk_ctl_exec_req *r,
		       const struct pdk_ctl_proc_cbs *cbs, void *ctx,
		       struct pdk_ctl_proc_watch **out, struct pdk_error **err)
{
	struct pdk_ctl_exec_req req = *r;
	const char *tag = r->tag;
	struct pdk__proc *p;
	struct pdk_ctl_proc_watch *w = NULL;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = start_check(sb, tag, err);
	if (rc < 0)
		return rc;
	p = proc_new(sb, r, tag);
	if (cbs != NULL)
		w = watch_add(p, cbs, ctx);
	/* Streamed output is never captured: the cap only has to pass the exec's check. */
	req.output_cap = 64;
	rc = pdk_ctl_exec(sb, &req, true, &proc_exec_cbs, p, NULL, err);
	if (rc < 0) {
		proc_free(p);
		return rc;
	}
	p->next = sb->procs;
	sb->procs = p;
	if (out != NULL)
		*out = w;
	return 0;
}

/* The process `pid` (tag NULL) or `tag`: a running one first, else the newest ended one. */
static struct pdk__proc *proc_lookup(struct pdk_ctl_sb *sb, int pid, const char *tag,
				     bool running_only, struct pdk_error **err)
{
	struct pdk__proc *ended = NULL;

	for (struct pdk__proc *p = sb->procs; p != NULL; p = p->next) {
		bool match = tag != NULL ? tag_is(p, tag) : (p->pid == pid && pid > 0);

		if (match && !p->ended)
			return p;
		if (match && ended == NULL)
			ended = p;
	}
	if (ended != NULL && !running_only)
		return ended;
	if (tag != NULL)
		(void)pdk_error_set_field(err, ENOENT, "tag", "no process tagged '%s' %s", tag,
					  running_only ? "runs" : "in this sandbox");
	else
		(void)pdk_error_set_field(err, ENOENT, "pid", "no process %d %s", pid,
					  running_only ? "runs" : "in this sandbox");
	return NULL;
}

/* What an attach gets before what comes: the start, the kept output, for an ended one its end. */
static void replay(struct pdk__proc *p, struct pdk_ctl_proc_watch *w)
{
	struct pdk_ctl_proc_info info;

	info_of(p, &info);
	p->calling++;
	if (p->exec_id != 0 && w->cbs.started != NULL)
		w->cbs.started(w->ctx, &info);
	for (struct chunk *c = p->head; c != NULL && !w->gone; c = c->next)
		if (w->cbs.output != NULL)
			w->cbs.output(w->ctx, c->stream, c->data, c->len);
	p->calling--;
	if (p->ended && !w->gone) {
		w->gone = true;
		if (w->cbs.done != NULL)
			w->cbs.done(w->ctx, p->has_exit ? &p->exit : NULL, NULL);
	}
	sweep(p);
}

int pdk_ctl_proc_attach(struct pdk_ctl_sb *sb, int pid, const char *tag,
			const struct pdk_ctl_proc_cbs *cbs, void *ctx,
			struct pdk_ctl_proc_watch **out, struct pdk_error **err)
{
	struct pdk__proc *p = proc_lookup(sb, pid, tag, false, err);
	struct pdk_ctl_proc_watch *w;

	if (out != NULL)
		*out = NULL;
	if (p == NULL)
		return -ENOENT;
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "exec.attach",
		      json_pack("{s:I, s:i, s:o}", "exec_id", (json_int_t)p->exec_id, "pid", p->pid,
				"tag", p->tag ? json_string(p->tag) : json_null()));
	w = watch_add(p, cbs, ctx);
	/* The caller learns of the watch before the replay: a callback of it may detach it. */
	if (out != NULL && !p->ended)
		*out = w;
	replay(p, w);
	return 0;
}

int pdk_ctl_proc_find(struct pdk_ctl_sb *sb, int pid, const char *tag,
		      struct pdk_ctl_proc_info *out, struct pdk_error **err)
{
	struct pdk__proc *p = proc_lookup(sb, pid, tag, true, err);

	if (p == NULL)
		return -ENOENT;
	if (p->exec_id == 0)
		return pdk_error_set_field(err, EALREADY, tag ? "tag" : "pid",
					   "the process has not started yet");
	info_of(p, out);
	return 0;
}

size_t pdk_ctl_procs(struct pdk_ctl_sb *sb, struct pdk_ctl_proc_info *out, size_t room)
{
	size_t n = 0, i;

	for (struct pdk__proc *p = sb->procs; p != NULL; p = p->next)
		if (!p->ended && p->exec_id != 0)
			n++;
	/* The list is newest first: filled from the end, out[] is oldest first. */
	i = n;
	for (struct pdk__proc *p = sb->procs; p != NULL; p = p->next) {
		if (p->ended || p->exec_id == 0)
			continue;
		i--;
		if (i < room)
			info_of(p, &out[i]);
	}
	return n < room ? n : room;
}
