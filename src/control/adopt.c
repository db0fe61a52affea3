/*
 * adopt.c - re-adoption at start: every stored sandbox is connected to its
 * supervisor again, or, when nobody answers, what its supervisor left is
 * cleaned and the sandbox is marked lost.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "control-internal.h"
#include "engine.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>

static void adopt_status(struct pdk_ctl_sb *sb, json_t *reply, int *fds, size_t nfds, void *ctx)
{
	pdk__sb_status_answer(sb, reply, fds, nfds, ctx);
	if (reply != NULL)
		pdk_ctl_event(sb->c, sb->row.id, sb->labels, "sandbox.adopt",
			      json_pack("{s:i}", "supervisor_pid", (int)sb->row.supervisor_pid));
}

/*
 * A lost sandbox's cgroup, from RUNDIR/sb/ID/cgroup (the supervisor wrote it): every process in
 * it killed (cgroup.kill on v2, else SIGKILL of each pid of cgroup.procs until empty), the
 * directories removed, and a sandbox.reap event saying so.
 */
void pdk__sb_reap_cgroup_text(struct pdk_ctl_sb *sb, const char *text)
{
	_cleanup_free_ char *where = NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_cgroup *cg = NULL;
	char name[13];
	int rc;

	if (text[0] == '\0')
		return;                    /* the sandbox had no cgroup */
	memcpy(name, sb->row.id + 24, 12); /* the id's random tail names the cgroup */
	name[12] = '\0';
	rc = pdk_cgroup_adopt(text, name, NULL, &cg, &err);
	if (rc == 0) {
		where = pdk_xstrdup(pdk_cgroup_path(cg) ? pdk_cgroup_path(cg) : "");
		rc = pdk_cgroup_destroy(cg, &err);
	}
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "sandbox.reap",
		      json_pack("{s:s?, s:b, s:s?}", "cgroup", where, "removed", rc == 0, "error",
				rc < 0 && err ? err->msg : NULL));
	if (rc < 0)
		pdk__ctl_log(sb->c, PDK_LOG_WARN, "%s: lost sandbox's cgroup: %s", sb->row.id,
			     err ? err->msg : "failed");
}

/* RUNDIR/sb/ID/cgroup's text, or NULL (a read error other than ENOENT as a sandbox.reap event). */
char *pdk__sb_cgroup_text(struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *path = pdk_xasprintf("%s/sb/%s/cgroup", sb->c->run_dir, sb->row.id);
	_cleanup_error_ struct pdk_error *err = NULL;
	char *text = NULL;

	if (pdk_read_file_at(AT_FDCWD, path, 64 * 1024, &text, &err) < 0) {
		if (err->status != ENOENT)
			pdk_ctl_event(sb->c, sb->row.id, sb->labels, "sandbox.reap",
				      json_pack("{s:s}", "error", err->msg));
		return NULL;
	}
	return text;
}

void pdk__sb_reap_cgroup_file(struct pdk_ctl_sb *sb)
{
	_cleanup_free_ char *text = pdk__sb_cgroup_text(sb);

	if (text != NULL)
		pdk__sb_reap_cgroup_text(sb, text);
}

/* The in-memory sandbox of a stored row (copied), with what its spec says. */
static struct pdk_ctl_sb *adopt_row(struct pdk_ctl *c, const struct pdk_store_sandbox *row)
{
	struct pdk_ctl_sb *sb = pdk__sb_new(c);
	_cleanup_json_ json_t *spec = json_loads(row->spec, 0, NULL);
	json_t *token = json_object_get(spec, "create_token");
	uint64_t spool = 0;

	sb->row = *row;
	/* Its commands before the daemon's restart may have left spill files: removed at its end.
	 */
	sb->spilled = true;
	sb->row.id = pdk_xstrdup(row->id);
	sb->row.state = pdk_xstrdup(row->state);
	sb->row.profile = pdk_xstrdup(row->profile);
	sb->row.labels = pdk_xstrdup(row->labels);
	sb->row.spec = pdk_xstrdup(row->spec);
	sb->row.idempotency_key = row->idempotency_key ? pdk_xstrdup(row->idempotency_key) : NULL;
	sb->labels = json_loads(row->labels, 0, NULL);
	if (!json_is_object(sb->labels))
		sb->labels = (json_decref(sb->labels), json_object());
	/*
	 * audit.db's offset moves in the same transaction as the events: it wins over daemon.db's
	 * copy, which a crash may have left behind (the batch would be appended twice).
	 */
	if (pdk_audit_spool_offset(c->audit, row->id, &spool, NULL) == 0 &&
	    spool > sb->row.spool_offset)
		sb->row.spool_offset = spool;
	sb->limits = json_deep_copy(json_object_get(json_object_get(spec, "overrides"), "limits"));
	if (sb->limits == NULL)
		sb->limits = json_object();
	sb->token_ops = (unsigned)json_integer_value(json_object_get(token, "ops"));
	sb->token_ttl_s = (uint64_t)json_integer_value(json_object_get(token, "ttl_s"));
	return sb;
}

static int adopt_one(void *data, const struct pdk_store_sandbox *row)
{
	struct pdk_ctl *c = data;
	struct pdk_ctl_sb *sb = adopt_row(c, row);
	_cleanup_json_ json_t *ending = NULL;
	const char *reason;

	if (strcmp(row->state, "lost") == 0)
		return 0;
	/* A destroy the daemon before us began and did not see through is finished now. */
	ending = pdk__sb_ending(sb);
	reason = json_string_value(json_object_get(ending, "reason"));
	if (ending != NULL)
		pdk__sb_set_operator(sb, json_string_value(json_object_get(ending, "operator")));
	if (pdk__sb_connect(sb) == 0 && pdk__sb_call(sb, json_pack("{s:s}", "op", "status"), NULL,
						     0, adopt_status, NULL) == 0) {
		if (ending != NULL)
			pdk__sb_destroy(sb, reason);
		return 0;
	}
	/*
	 * Nobody answers: the supervisor is gone. What it left is cleaned: its
	 * process group (in case it hangs without its socket), every process of
	 * the sandbox's cgroup and the cgroup, its run directory; the spool is
	 * ingested first.
	 */
	if (row->supervisor_pid > 1)
		(void)kill(-row->supervisor_pid, SIGKILL);
	pdk__sb_reap_cgroup_file(sb);
	pdk__sb_disconnect(sb);
	free(sb->end_reason);
	sb->end_reason = pdk_xstrdup(ending != NULL ? reason : "supervisor_lost");
	/* One being destroyed has ended: it is not kept listed as lost. */
	pdk__sb_forget(sb, ending != NULL ? "ended" : "lost");
	return 0;
}

void pdk__sb_adopt_all(struct pdk_ctl *c)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_store_sandbox_each(c->store, adopt_one, c, &err) < 0)
		pdk__ctl_log(c, PDK_LOG_WARN, "re-adoption: %s", err->msg);
}
