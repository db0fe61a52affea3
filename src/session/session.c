/*
 * session.c - the session sequence (session.h): the open steps, the
 * sandbox's start and stop, and the finish that decides what becomes of
 * the change set. The environment and the secrets are session-env.c.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "engine.h"
#include "image.h"
#include "policy.h"
#include "session-internal.h"
#include "session.h"
#include "telemetry.h"
#include "workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The image store (image/: its records hash with OpenSSL) is reached by weak
 * references: the front binary, `paddock`, is linked without it
 * (docs/internals/binaries.md), and there they are NULL. step_linked()
 * hands a session with an image to paddock-full before anything is made;
 * every other call is for a session that holds an image or a store.
 */
#pragma weak pdk_image_store_open
#pragma weak pdk_image_store_free
#pragma weak pdk_image_lookup
#pragma weak pdk_image_hold
#pragma weak pdk_image_layer_paths
#pragma weak pdk_image_config
#pragma weak pdk_image_digest
#pragma weak pdk_image_free

struct pdk_session {
	struct pdk_session_opts o; /* the caller's (what it points to is borrowed) */
	char id[37];
	const char *state_dir;            /* o.state_dir, else the settings' */
	const char *runtime_dir;          /* o.runtime_dir, else the settings' */
	struct pdk_policy_report *report; /* while opening: the caller's, or NULL */
	struct pdk_policy *policy;
	char *workspace;  /* host path, or NULL */
	char *private_ws; /* STATE/sandboxes/<id>: made for a session without a workspace */
	char **env;       /* the sandbox's environment */
	struct pdk_events *events;
	struct pdk_ws *ws;             /* overlay: the change set */
	bool ws_created;               /* made by this session, not one the caller named */
	bool needs_full;               /* step_linked(): this binary lacks what the policy needs */
	struct pdk_sandbox_config cfg; /* the engine may keep pointing at it */
	struct pdk_sandbox *sb;
	bool started;                     /* a sandbox was created at some point */
	struct pdk__session_private priv; /* what no view may show */
	struct pdk_mounts *mounts;        /* the mount table, read once for the checks and the
					     cgroup's; freed once the sandbox is made */
	/* The image of the root (policy->image), held for the session's life. */
	struct pdk_image_store *store;
	struct pdk_image *image;
	int image_hold;      /* pdk_image_hold(); -1: none */
	char **image_layers; /* host paths, topmost first */
	char **argv;         /* the command with the image's entrypoint, or NULL: o.argv */
	const char *cwd;     /* o.cwd, else the image's working directory */
	bool user_set;       /* the image's user: these ids inside */
	uid_t uid;
	gid_t gid;
};

const char *pdk_session_step_name(enum pdk_session_step step)
{
	switch (step) {
	case PDK_SESSION_PROFILE:
	case PDK_SESSION_OVERRIDES:
	case PDK_SESSION_ENV:
		return "policy";
	case PDK_SESSION_WORKSPACE:
	case PDK_SESSION_CHANGE_SET:
		return "workspace";
	case PDK_SESSION_EVENTS:
		return "events";
	case PDK_SESSION_IMAGE:
		return "image";
	case PDK_SESSION_SANDBOX:
		return "sandbox";
	default:
		return "setup";
	}
}

/* ---- the open steps ---- */

static int step_profile(struct pdk_session *s, struct pdk_error **err)
{
	const char *profile = s->o.profile ? s->o.profile : "default";

	s->policy = pdk_policy_load(profile, s->o.settings->paths.profile_dir, s->report, err);
	return s->policy != NULL ? 0 : -EINVAL;
}

static int step_overrides(struct pdk_session *s, struct pdk_error **err)
{
	return pdk_overrides_apply(&s->o.overrides, s->policy, err);
}

/*
 * The command on an image: its entrypoint, then the caller's command or,
 * when the caller gave an empty one, the image's cmd (docker's rule).
 */
static int image_argv(struct pdk_session *s, const struct pdk_image_config *c,
		      struct pdk_error **err)
{
	char *const *args = s->o.argv[0] != NULL ? s->o.argv : c->cmd;

	for (size_t i = 0; c->entrypoint != NULL && c->entrypoint[i] != NULL; i++)
		pdk_strv_push(&s->argv, c->entrypoint[i]);
	for (size_t i = 0; args != NULL && args[i] != NULL; i++)
		pdk_strv_push(&s->argv, args[i]);
	if (s->argv == NULL)
		return pdk_error_set_field(err, EINVAL, "argv",
					   "no command: image '%s' has no entrypoint and no cmd "
					   "(give one)",
					   s->policy->image);
	return 0;
}

/*
 * What the policy needs that this binary may be linked without: the egress
 * proxy (network.mode allowlist) and the image store (an image). The front
 * binary, `paddock`, is linked without both (docs/internals/binaries.md).
 * Nothing is made before this step (the profile and the overrides are only
 * read): the caller hands the command to paddock-full (why->needs_full).
 */
static int step_linked(struct pdk_session *s, struct pdk_error **err)
{
	const char *what = NULL;

	if (s->policy->network.mode == PDK_NET_ALLOWLIST && !pdk_sandbox_has_egress())
		what = "the egress proxy (network.mode allowlist)";
	else if (s->policy->image != NULL && pdk_image_store_open == NULL)
		what = "the image store (an image)";
	if (what == NULL)
		return 0;
	s->needs_full = true;
	return pdk_error_setx(err, ENOSYS, "this paddock binary is linked without %s", what);
}

/*
 * The image of the root (the profile's `image:` or --image): found in the
 * store of the state directory, held (so that `paddock image rm` leaves it
 * while the session lives), its layers' paths, and its config applied to
 * the command and working directory (the environment: step_env).
 */
static int step_image(struct pdk_session *s, struct pdk_error **err)
{
	struct pdk_image_store_opts so = {.state_dir = s->state_dir, .log = s->o.log};
	const struct pdk_image_config *c;

	s->cwd = s->o.cwd;
	if (s->policy->image == NULL)
		return 0;
	if (pdk_image_store_open(&so, &s->store, err) < 0 ||
	    pdk_image_lookup(s->store, s->policy->image, &s->image, err) < 0 ||
	    pdk_image_hold(s->store, s->image, &s->image_hold, err) < 0 ||
	    pdk_image_layer_paths(s->store, s->image, &s->image_layers, err) < 0)
		return -1;
	c = pdk_image_config(s->image);
	if (s->cwd == NULL)
		s->cwd = c->workdir;
	if (c->user != NULL) {
		if (pdk__session_image_user(s->image_layers, c->user, &s->uid, &s->gid, err) < 0)
			return -1;
		s->user_set = true;
	}
	if (s->o.argv != NULL && (c->entrypoint != NULL || s->o.argv[0] == NULL))
		return image_argv(s, c, err);
	return 0;
}

/*
 * The workspace's host directory: the caller's, the profile's or the
 * current one; or, for a session that asked for it and named none, a
 * private empty one (overlay unless a mode was given, so that snapshot,
 * rollback and diff work).
 */
static int step_workspace(struct pdk_session *s, struct pdk_error **err)
{
	const struct pdk_overrides *ov = &s->o.overrides;

	if (!s->o.private_workspace || ov->workspace != NULL ||
	    s->policy->workspace.mode == PDK_WS_NONE)
		return pdk_overrides_workspace(ov, s->policy, &s->workspace, err);
	s->private_ws = pdk_xasprintf("%s/sandboxes/%s", s->state_dir, s->id);
	s->workspace = pdk_xasprintf("%s/workspace", s->private_ws);
	if (!ov->ws_mode.set)
		s->policy->workspace.mode = PDK_WS_OVERLAY;
	return pdk_mkdir_p(s->workspace, err);
}

static int step_env(struct pdk_session *s, struct pdk_error **err)
{
	char *const *image_env = s->image ? pdk_image_config(s->image)->env : NULL;

	return pdk__session_env(&s->o, s->policy, image_env, &s->env, err);
}

/*
 * The event stream: the audit store (its run spool, folded later: no
 * SQLite nor OpenSSL at a run's start), an events file, an OTLP exporter.
 * An exporter that cannot start only costs the export (a warning), never
 * the session. No sink, no stream: nothing would read the events (nor the
 * exec trace they carry).
 */
static int step_events(struct pdk_session *s, struct pdk_error **err)
{
	const struct pdk_session_opts *o = &s->o;
	_cleanup_error_ struct pdk_error *otlp_err = NULL;

	if (!o->audit && o->events_file == NULL && o->otlp == NULL)
		return 0;
	s->events = pdk_events_new(s->id, o->actor ? o->actor : "paddock");
	if (o->label_session != NULL || o->label_workflow != NULL)
		pdk_events_set_labels(s->events, o->label_session, o->label_workflow);
	pdk__session_add_secrets(s->events, s->env, s->policy, o->settings->envp);
	if (o->audit && pdk_audit_add_spool(s->events, s->state_dir, s->id, err) < 0)
		return -1;
	if (o->events_file != NULL && pdk_events_add_file(s->events, o->events_file, err) < 0)
		return -1;
	if (o->otlp != NULL &&
	    pdk_otlp_add_sink(s->events, o->otlp, o->settings->otlp_helper, &otlp_err) < 0)
		pdk_log(o->log, PDK_LOG_WARN, "OTLP export disabled: %s", otlp_err->msg);
	return 0;
}

static bool empty_dir(const char *path)
{
	_cleanup_closedir_ DIR *d = opendir(path);
	struct dirent *de;

	while (d != NULL && (de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			return false;
	return true;
}

/* The change set the caller named: its workspace, its changes so far, its disk limit. */
static int open_change_set(struct pdk_session *s, struct pdk_error **err)
{
	/*
	 * A set whose last sandbox was killed keeps overlayfs's volatile mark,
	 * which would fail the mount: it goes. One left by a machine that went
	 * down is refused (pdk_ws_check_synced()).
	 */
	if (pdk_ws_open(s->state_dir, s->o.overrides.change_set, &s->ws, err) < 0 ||
	    pdk_ws_lock(s->ws, err) < 0 || pdk_ws_check_synced(s->ws, false, true, err) < 0)
		return -1;
	free(s->workspace);
	s->workspace = pdk_xstrdup(pdk_ws_workspace(s->ws));
	/*
	 * A disk-limited set's upper layer starts as an empty tmpfs: what it
	 * holds so far becomes a snapshot first.
	 */
	if (pdk_ws_disk_limit(s->ws) > 0 && !empty_dir(pdk_ws_upper_path(s->ws)) &&
	    pdk_ws_snapshot(s->ws, err) < 0)
		return -1;
	return 0;
}

/*
 * The mount table, read at the first check that needs it and kept for the
 * others (the change set's and the view's): one read and one parse, which
 * a host with thousands of mounts pays in milliseconds.
 */
static const struct pdk_mounts *session_mounts(struct pdk_session *s, struct pdk_error **err)
{
	/* SECURITY: without the mount table the other places are unknown: nothing is shown. */
	if (s->mounts == NULL && pdk_mounts_read(&s->mounts, err) < 0) {
		(void)pdk_error_wrap(err, "the state and runtime directories cannot be kept out of "
					  "sight: where they are mounted is unknown");
		return NULL;
	}
	return s->mounts;
}

/*
 * An overlay's changes go to a change set in the state directory. In
 * service mode the disk limit is not given to the set: its upper layer
 * would be a tmpfs that only pdk_session_stop() brings into the set, and
 * snapshot, rollback and commit work on the set while the sandbox runs.
 */
static int step_change_set(struct pdk_session *s, struct pdk_error **err)
{
	uint64_t disk = s->o.argv != NULL ? s->policy->limits.disk : 0;
	const struct pdk_mounts *mounts;

	if (s->policy->workspace.mode != PDK_WS_OVERLAY)
		return 0;
	if (s->o.overrides.change_set != NULL)
		return open_change_set(s, err);
	if (s->workspace == NULL)
		return 0;
	if ((mounts = session_mounts(s, err)) == NULL ||
	    pdk_ws_create(s->state_dir, s->workspace, s->id, disk, mounts, &s->ws, err) < 0)
		return -1;
	s->ws_created = true;
	return 0;
}

typedef int (*step_fn)(struct pdk_session *s, struct pdk_error **err);

/*
 * SECURITY: the view may not show the state or runtime directories (session-view.c):
 * checked once the workspace is final (a change set names its own).
 */
static int step_private(struct pdk_session *s, struct pdk_error **err)
{
	enum pdk_ws_mode mode = s->policy->workspace.mode;
	bool shown = s->private_ws == NULL &&
		     (mode == PDK_WS_RO || mode == PDK_WS_RW || mode == PDK_WS_OVERLAY);
	const struct pdk_mounts *mounts = session_mounts(s, err);

	if (mounts == NULL)
		return -1;
	pdk__session_private_dirs(&s->o, s->state_dir, s->runtime_dir, mounts, &s->priv);
	return pdk__session_check_view(&s->priv, shown ? s->workspace : NULL, s->policy,
				       s->o.extra_ro, s->o.extra_rw, err);
}

static const struct {
	enum pdk_session_step step;
	step_fn fn;
} open_steps[] = {
	{PDK_SESSION_PROFILE, step_profile},     {PDK_SESSION_OVERRIDES, step_overrides},
	{PDK_SESSION_OVERRIDES, step_linked},    {PDK_SESSION_IMAGE, step_image},
	{PDK_SESSION_WORKSPACE, step_workspace}, {PDK_SESSION_ENV, step_env},
	{PDK_SESSION_EVENTS, step_events},       {PDK_SESSION_CHANGE_SET, step_change_set},
	{PDK_SESSION_WORKSPACE, step_private},
};

/* ---- undoing ---- */

static int close_events(struct pdk_session *s, struct pdk_error **err)
{
	int rc = pdk_events_close(s->events, err);

	pdk_events_free(s->events);
	s->events = NULL;
	return rc;
}

static void remove_private(struct pdk_session *s)
{
	if (s->private_ws != NULL)
		(void)!pdk_rm_rf_at(AT_FDCWD, s->private_ws); /* what is left is only disk */
}

/* A failed open: what it made goes (a change set it made holds nothing yet). */
static void abandon(struct pdk_session *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (s->ws_created && pdk_ws_remove(s->ws, &err) < 0)
		pdk_log(s->o.log, PDK_LOG_WARN, "cleanup: %s", err->msg);
	remove_private(s);
	pdk_session_free(s);
}

struct pdk_session *pdk_session_open(const struct pdk_session_opts *opts,
				     struct pdk_session_failure *why, struct pdk_error **err)
{
	struct pdk_session *s = pdk_xcalloc(1, sizeof(*s));
	const struct pdk_paths *paths = &opts->settings->paths;

	s->image_hold = -1;
	if (why != NULL)
		*why = (struct pdk_session_failure){.step = PDK_SESSION_PROFILE};
	s->o = *opts;
	s->report = why != NULL ? &why->report : NULL;
	s->state_dir = opts->state_dir ? opts->state_dir : paths->state_dir;
	s->runtime_dir = opts->runtime_dir ? opts->runtime_dir : paths->runtime_dir;
	if (opts->id != NULL)
		(void)snprintf(s->id, sizeof(s->id), "%s", opts->id);
	else
		pdk_make_id(s->id);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(open_steps); i++) {
		if (open_steps[i].fn(s, err) < 0) {
			if (why != NULL) {
				why->step = open_steps[i].step;
				why->needs_full = s->needs_full;
			}
			abandon(s);
			return NULL;
		}
	}
	s->report = NULL;
	pdk__session_credential_env(&s->env, s->policy, s->id);
	return s;
}

/* ---- the sandbox ---- */

int pdk_session_start(struct pdk_session *s, struct pdk_error **err)
{
	const struct pdk_session_opts *o = &s->o;
	int rc;

	if (s->sb != NULL)
		return pdk_error_setx(err, EBUSY, "the session's sandbox runs already");
	s->cfg = (struct pdk_sandbox_config){
		.id = s->id,
		.policy = s->policy,
		.argv = s->argv != NULL ? s->argv : o->argv,
		.envp = s->env,
		.service = o->argv == NULL,
		.cwd = s->cwd,
		.workspace = s->workspace,
		.ws_view = s->private_ws != NULL ? PDK_SESSION_PRIVATE_VIEW : NULL,
		.ws_mode = s->policy->workspace.mode,
		.ws = s->ws,
		.extra_ro = o->extra_ro,
		.extra_rw = o->extra_rw,
		.settings = o->settings,
		.runtime_dir = s->runtime_dir,
		.private_dirs = s->priv.dirs,
		.events = s->events,
		.log = o->log,
		.image_layers = s->image_layers,
		.user_set = s->user_set,
		.uid = s->uid,
		.gid = s->gid,
		.image_root_size = s->policy->limits.disk,
		.image_rw_dir = o->image_rw_dir,
		.image = s->policy->image,
		.image_digest = s->image ? pdk_image_digest(s->image) : NULL,
		.mountinfo = s->mounts ? pdk_mounts_text(s->mounts) : NULL,
	};
	rc = pdk_sandbox_create(&s->cfg, &s->sb, err);
	/* The table was for the checks and the cgroup's: a long-lived session does not keep it. */
	s->cfg.mountinfo = NULL;
	pdk_mounts_free(s->mounts);
	s->mounts = NULL;
	/* The spare's leftovers went beside the start: the supervisor runs alone from here. */
	if (s->ws != NULL)
		pdk_ws_tidy_wait(s->ws);
	if (rc < 0) {
		s->sb = NULL;
		return -1;
	}
	s->started = true;
	return 0;
}

int pdk_session_stop(struct pdk_session *s, struct pdk_error **err)
{
	_cleanup_error_ struct pdk_error *e = NULL;
	_cleanup_close_ int upper = -1;

	if (s->sb == NULL)
		return 0;
	upper = pdk_sandbox_take_upper_fd(s->sb);
	if (pdk_sandbox_destroy(s->sb, &e) < 0)
		pdk_log(s->o.log, PDK_LOG_WARN, "cleanup: %s", e->msg);
	s->sb = NULL;
	/* Every process of the sandbox is gone: the layer is stable now. */
	if (upper >= 0 && s->ws != NULL && pdk_ws_import_upper(s->ws, upper, err) < 0)
		return -1;
	return 0;
}

/* ---- the end ---- */

static void count_changes(const struct pdk_ws_diff *d, struct pdk_session_result *res)
{
	res->changes = d->n;
	for (size_t i = 0; i < d->n; i++) {
		switch (d->v[i].kind) {
		case PDK_WS_ADDED:
			res->added++;
			break;
		case PDK_WS_MODIFIED:
		case PDK_WS_REPLACED:
			res->modified++;
			break;
		case PDK_WS_DELETED:
			res->deleted++;
			break;
		case PDK_WS_MODE:
		default:
			res->mode_changes = true;
			break;
		}
	}
}

/*
 * Keep the changes as a change set, drop them (discard, with an fs.change
 * event each), or, when there are none, remove the set. A set the caller
 * named stays unless discarded; a private workspace's always goes.
 */
static int finish_change_set(struct pdk_session *s, struct pdk_session_result *res,
			     struct pdk_error **err)
{
	const struct pdk_overrides *ov = &s->o.overrides;
	_cleanup_error_ struct pdk_error *e = NULL;
	struct pdk_ws_diff d = {0};
	int rc = 0;

	/* A private workspace goes whatever it holds; no sandbox ran: nothing changed. */
	if (s->private_ws == NULL && s->started) {
		rc = pdk_ws_diff(s->ws, 0, PDK_WS_CURRENT, &d, err);
		if (rc == 0)
			count_changes(&d, res);
	}
	if (rc == 0 && d.n > 0 && ov->discard)
		(void)!pdk_ws_emit_changes(s->events, &d, "discarded", pdk_ws_id(s->ws), &e);
	if (rc == 0 && s->private_ws == NULL && !ov->discard && s->ws_created && d.n == 0) {
		/* A run that changed nothing: its set's directory serves the next run. */
		rc = pdk_ws_recycle(s->ws, err);
		if (rc == 0)
			res->ws = PDK_SESSION_WS_REMOVED;
	} else if (rc == 0 && (s->private_ws != NULL || ov->discard)) {
		rc = pdk_ws_remove(s->ws, err);
		if (rc == 0)
			res->ws = ov->discard && d.n > 0 ? PDK_SESSION_WS_DISCARDED
							 : PDK_SESSION_WS_REMOVED;
	} else if (rc == 0) {
		res->ws = PDK_SESSION_WS_KEPT;
		/* What the host had at each changed path now: a later commit compares. */
		rc = pdk_ws_record_base(s->ws, &d, err);
		/*
		 * A volatile overlay synced nothing: the kept set reaches the
		 * disk now, before the caller is answered (pdk_ws_settle()).
		 */
		if (rc == 0)
			rc = pdk_ws_settle(s->ws, s->policy->workspace.sync == PDK_WS_SYNC_END,
					   err);
	}
	pdk_ws_diff_release(&d);
	return rc;
}

int pdk_session_finish(struct pdk_session *s, struct pdk_session_result *res,
		       struct pdk_error **err)
{
	int rc;

	*res = (struct pdk_session_result){
		.ws = s->ws != NULL ? PDK_SESSION_WS_KEPT : PDK_SESSION_WS_NONE,
		.change_set = s->ws != NULL ? pdk_ws_id(s->ws) : NULL,
	};
	rc = pdk_session_stop(s, err);
	if (rc == 0 && s->ws != NULL)
		rc = finish_change_set(s, res, err);
	remove_private(s);
	(void)!close_events(s, &res->events_err);
	return rc;
}

void pdk_session_result_release(struct pdk_session_result *res)
{
	pdk_error_free(&res->events_err);
}

void pdk_session_free(struct pdk_session *s)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (s == NULL)
		return;
	if (pdk_session_stop(s, &err) < 0)
		pdk_log(s->o.log, PDK_LOG_WARN, "workspace: %s", err->msg);
	pdk_error_free(&err);
	if (close_events(s, &err) < 0)
		pdk_log(s->o.log, PDK_LOG_WARN, "events: %s", err->msg);
	pdk_ws_free(s->ws);
	pdk_policy_free(s->policy);
	pdk_strv_free(s->env);
	free(s->workspace);
	free(s->private_ws);
	pdk__session_private_release(&s->priv);
	pdk_mounts_free(s->mounts);
	pdk_strv_free(s->image_layers);
	pdk_strv_free(s->argv);
	if (s->image != NULL)
		pdk_image_free(s->image);
	if (s->image_hold >= 0)
		(void)close(s->image_hold);
	if (s->store != NULL)
		pdk_image_store_free(s->store);
	free(s);
}

/* ---- the network, widened while it runs ---- */

static bool listed(char *const *v, const char *entry)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		if (strcmp(v[i], entry) == 0)
			return true;
	return false;
}

/* Why a sandbox of this network mode has no allowlist to widen. */
static int no_allowlist(enum pdk_net_mode mode, struct pdk_error **err)
{
	if (mode == PDK_NET_HOST)
		return pdk_error_setx(err, ENOTSUP,
				      "the sandbox's network.mode is host: it reaches every "
				      "destination already, there is no allowlist to widen");
	return pdk_error_setx(err, ENOTSUP,
			      "the sandbox's network.mode is none: it has no egress proxy whose "
			      "allowlist could be widened; create a sandbox with network.mode "
			      "allowlist (--allow HOST) to reach chosen hosts");
}

int pdk_session_net_allow(struct pdk_session *s, const char *entry, char **canonical,
			  struct pdk_error **err)
{
	_cleanup_free_ char *why = NULL, *text = NULL;
	struct pdk_net_rule r = {0};
	int rc;

	if (s->policy->network.mode != PDK_NET_ALLOWLIST)
		return no_allowlist(s->policy->network.mode, err);
	/* SECURITY: one grammar: an entry means what it means in a profile's network.allow. */
	if (pdk_net_rule_parse(entry, &r, &why) < 0)
		return pdk_error_set_field(err, EINVAL, "host", "network.allow entry '%s': %s",
					   entry, why);
	text = pdk_xstrdup(r.text);
	if (listed(s->policy->network.allow, text)) {
		pdk_net_rule_release(&r);
		*canonical = steal_ptr(&text);
		return 1;
	}
	rc = pdk_sandbox_egress_allow(pdk_session_sandbox(s), &r, err);
	pdk_net_rule_release(&r);
	if (rc < 0)
		return rc;
	/* In the policy too: an init restart starts the new proxy with it. */
	pdk_strv_push(&s->policy->network.allow, text);
	*canonical = steal_ptr(&text);
	return 0;
}

/* ---- what it holds ---- */

const char *pdk_session_id(const struct pdk_session *s)
{
	return s->id;
}

const struct pdk_policy *pdk_session_policy(const struct pdk_session *s)
{
	return s->policy;
}

char *const *pdk_session_env(const struct pdk_session *s)
{
	return s->env;
}

const char *pdk_session_workspace(const struct pdk_session *s)
{
	return s->workspace;
}

const char *pdk_session_workspace_view(const struct pdk_session *s)
{
	return s->private_ws != NULL && s->workspace != NULL ? PDK_SESSION_PRIVATE_VIEW
							     : s->workspace;
}

bool pdk_session_private_workspace(const struct pdk_session *s)
{
	return s->private_ws != NULL;
}

struct pdk_ws *pdk_session_ws(const struct pdk_session *s)
{
	return s->ws;
}

struct pdk_events *pdk_session_events(const struct pdk_session *s)
{
	return s->events;
}

struct pdk_sandbox *pdk_session_sandbox(const struct pdk_session *s)
{
	return s->sb;
}

const struct pdk_image *pdk_session_image(const struct pdk_session *s)
{
	return s->image;
}
