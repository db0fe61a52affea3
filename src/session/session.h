/*
 * session.h - the session layer: one sequence from a profile and a
 * caller's overrides to a running sandbox and back, shared by `paddock run`
 * (one command), `paddock supervise` (service mode) and any front end that
 * runs many sessions in one process. Stands on engine/, audit/ and what is
 * below them. Other layers include this header.
 *
 * A session is a list of steps, each named in what it reports when it
 * fails (enum pdk_session_step): pdk_session_open() loads the profile
 * (its diagnostics handed back), applies the overrides, resolves the
 * workspace, composes the environment, opens the event sinks (registering
 * the secrets no event may show), creates or opens the change set and puts
 * the credential placeholders in the environment; pdk_session_start()
 * creates the sandbox; pdk_session_finish() ends it, imports its upper
 * layer, keeps, discards or removes the change set and says which in a
 * struct pdk_session_result, and closes the sinks.
 *
 * A session keeps no global state, handles no signal and prints nothing:
 * the caller runs the loop (pdk_sandbox_wait() for a command, the service
 * calls of sandbox.h otherwise) and gets what the session has to say that
 * is no error through the log it gave (struct pdk_session_opts.log).
 */
#ifndef PDK_SESSION_H
#define PDK_SESSION_H

#include "common.h"
#include "audit.h"
#include "base.h"
#include "engine.h"
#include "image.h"
#include "policy.h"
#include "telemetry.h"
#include "workspace.h"

/*
 * What a session is made of. Every pointer is borrowed and must outlive the
 * session (pdk_session_open() keeps a copy of the struct, not of what it
 * points to).
 */
struct pdk_session_opts {
	/* The policy: a profile and the caller's changes to it. */
	const char *profile; /* built-in name, profile name or file; NULL: "default" */
	struct pdk_overrides overrides;
	char *const *env;     /* "K=V", or "K" (copied from settings->envp); later wins */
	const char *env_name; /* for messages: "--env", "env" */

	/* Where. */
	const char *id;                      /* the sandbox's id (a UUID); NULL: a new one */
	const struct pdk_settings *settings; /* required: directories, init, envp, helpers */
	const char *state_dir;               /* change sets, audit store; NULL: settings' */
	const char *runtime_dir;             /* the sandbox's scratch; NULL: settings' */
	/*
	 * A supervisor's session: the daemon's runtime directory (its socket, every
	 * supervisor's). With the state and runtime directories (the session's and
	 * the settings'), no sandbox sees it: a workspace or bind inside one is
	 * refused (step "workspace"), one that holds one has it hidden. NULL: none.
	 */
	const char *daemon_run_dir;
	/*
	 * No workspace given (overrides.workspace NULL, mode not none): a
	 * private, empty one at STATE/sandboxes/ID/workspace, in overlay mode
	 * unless overrides.ws_mode says otherwise, removed by
	 * pdk_session_finish(). Service mode's default. The sandbox sees it
	 * at PDK_SESSION_PRIVATE_VIEW, never at its host path (which names the
	 * state directory and the sandbox's id).
	 */
	bool private_workspace;
	const struct pdk_log *log; /* what is no error: downgrades, cleanup failures */

	/* The events: no sink at all means no event stream. */
	const char *actor;          /* the events' actor: "paddock-run" */
	const char *label_session;  /* labels of every event; NULL: none */
	const char *label_workflow; /* NULL: none */
	/*
	 * The audit store of state_dir, through the run spool (audit.h): each
	 * event is in STATE/audit-spool/ID.jsonl before it is acted on, and is
	 * chained and signed when an audit command folds it.
	 */
	bool audit;
	const char *events_file;            /* JSON lines appended to it; NULL: none */
	const struct pdk_otlp_config *otlp; /* an exporter (settings->otlp_helper); NULL: none */

	/* The sandbox. */
	/*
	 * The command; NULL: service mode (the caller sends execs). On an image
	 * with an entrypoint, the command is the entrypoint's arguments; an
	 * empty vector (argv[0] NULL) runs the image's own entrypoint and cmd.
	 */
	char *const *argv;
	const char *cwd; /* inside; NULL: the image's working directory, the workspace, else "/" */
	char *const *extra_ro;
	char *const *extra_rw;
	/*
	 * An image being built (build.h): the root's writable layer is this host
	 * directory (holding `upper` and `work`), kept after the sandbox ends,
	 * and nothing of paddock's own is written into the root
	 * (engine/mount.h). NULL: a tmpfs of the sandbox's own.
	 */
	const char *image_rw_dir;
};

/* The steps, in order. A failure names its step. */
enum pdk_session_step {
	PDK_SESSION_PROFILE = 0, /* "policy": the profile cannot be loaded */
	PDK_SESSION_OVERRIDES,   /* "policy": an override is refused */
	PDK_SESSION_IMAGE,       /* "image": the image is not in the store, or cannot be held */
	PDK_SESSION_WORKSPACE,   /* "workspace": the workspace directory */
	PDK_SESSION_ENV,         /* "policy": the environment */
	PDK_SESSION_EVENTS,      /* "events": a sink cannot be opened */
	PDK_SESSION_CHANGE_SET,  /* "workspace": the change set cannot be made or taken */
	PDK_SESSION_SANDBOX,     /* "sandbox": pdk_session_start() */
};

/* "policy", "workspace", "events", "sandbox": how the daemon and the tests know a step. */
const char *pdk_session_step_name(enum pdk_session_step step);

/* Why pdk_session_open() failed. */
struct pdk_session_failure {
	enum pdk_session_step step;
	/*
	 * PDK_SESSION_PROFILE: every problem of the profile, each with its
	 * file:line:col (empty when the file could not be read at all). The
	 * caller releases it with pdk_policy_report_release(), also after a
	 * success (then it is empty).
	 */
	struct pdk_policy_report report;
	/*
	 * The policy needs what this binary is linked without (the egress
	 * proxy, the image store): nothing was made, and paddock-full can run
	 * it (docs/internals/binaries.md). Only the front binary sets it.
	 */
	bool needs_full;
};

struct pdk_session;

/*
 * Run the open steps of `opts`. Returns a new session (free with
 * pdk_session_free()), or NULL + *err, the message without the step's name
 * (the caller decides how to show it: pdk_session_step_name()), and *why
 * (may be NULL) saying which step failed. A failed open leaves nothing
 * behind: a change set it made, a private workspace, open sinks are gone
 * (a sink that fails to close is logged).
 */
struct pdk_session *pdk_session_open(const struct pdk_session_opts *opts,
				     struct pdk_session_failure *why, struct pdk_error **err);

/*
 * Create the sandbox (one command, or service mode). Again after
 * pdk_session_stop(): a restart of the same session (same id, environment,
 * change set, event stream). 0, or negative + *err (step "sandbox"; the
 * engine's message names the mechanism).
 */
PDK_MUST_CHECK int pdk_session_start(struct pdk_session *s, struct pdk_error **err);

/*
 * End the sandbox, if one runs: every process of it is killed and the
 * sandbox freed (a failure to clean up is logged as "cleanup: ..."). The
 * layer of a disk-limited overlay (a tmpfs that outlived the sandbox) is
 * then imported into the change set, which is stable from here on. 0, or
 * negative + *err when that import failed.
 */
PDK_MUST_CHECK int pdk_session_stop(struct pdk_session *s, struct pdk_error **err);

/* What became of the change set, and of the event sinks. */
enum pdk_session_ws_end {
	PDK_SESSION_WS_NONE = 0,  /* there was none */
	PDK_SESSION_WS_KEPT,      /* kept, with `changes` in it (one named by the caller: any) */
	PDK_SESSION_WS_DISCARDED, /* removed with its changes (discard; fs.change events) */
	PDK_SESSION_WS_REMOVED,   /* removed: nothing changed, nothing ran, or private */
};

struct pdk_session_result {
	enum pdk_session_ws_end ws;
	const char *change_set; /* its id (borrowed from the session); NULL: none */
	size_t changes;         /* paths changed; counted only when the sandbox ran */
	size_t added;
	size_t modified; /* content or type */
	size_t deleted;
	bool mode_changes;
	struct pdk_error *events_err; /* a sink could not be flushed and closed (caller frees) */
};

/*
 * End the session: pdk_session_stop(), then the change set: removed when
 * private, discarded, or new and unchanged (or when the sandbox never
 * started and the set is new: nothing ran), else kept; a discard emits an
 * fs.change event per change first. Then every sink is flushed and closed
 * (a failure in res->events_err). Fills *res in every case. 0, or negative +
 * *err (the change set stays where pdk_ws_dir() says). Call it once; then
 * pdk_session_free().
 */
PDK_MUST_CHECK int pdk_session_finish(struct pdk_session *s, struct pdk_session_result *res,
				      struct pdk_error **err);

/* Release what res owns. */
void pdk_session_result_release(struct pdk_session_result *res);

/* The path at which a sandbox sees its private workspace. */
#define PDK_SESSION_PRIVATE_VIEW "/workspace"

/*
 * Free the session. One still running is stopped and its sinks closed
 * (failures logged); its change set is left as it is. NULL-safe.
 */
void pdk_session_free(struct pdk_session *s);

/*
 * Widen the running sandbox's network allowlist by one `network.allow`
 * entry, in a profile's grammar (policy/netrule.h: "host[:port]",
 * "*.suffix[:port]", an IP literal): its egress proxy matches it from the
 * next request on, without a restart, and the session's policy lists it,
 * so an init restart (pdk_session_start() again) keeps it. *canonical gets
 * the entry as listed (caller frees) on success, also when it was there.
 * Returns 0 when added, 1 when the allowlist held it already (nothing
 * changed), or negative + *err: -EINVAL (field "host") for an entry the
 * grammar refuses, -ENOTSUP when network.mode is none or host (the message
 * says why there is nothing to widen), -ESRCH when the sandbox is not
 * running. SECURITY: the caller decides who may widen (a human's approval,
 * an admin); the sandbox never reaches this.
 */
PDK_MUST_CHECK int pdk_session_net_allow(struct pdk_session *s, const char *entry, char **canonical,
					 struct pdk_error **err);

/* What the session holds, borrowed until pdk_session_free(). */
const char *pdk_session_id(const struct pdk_session *s);
const struct pdk_policy *pdk_session_policy(const struct pdk_session *s); /* overrides applied */
char *const *pdk_session_env(const struct pdk_session *s);      /* the sandbox's environment */
const char *pdk_session_workspace(const struct pdk_session *s); /* host path; NULL: none */
/* Where the sandbox sees the workspace: PDK_SESSION_PRIVATE_VIEW or its host path; NULL: none. */
const char *pdk_session_workspace_view(const struct pdk_session *s);
bool pdk_session_private_workspace(const struct pdk_session *s);
struct pdk_ws *pdk_session_ws(const struct pdk_session *s);         /* the change set; NULL: none */
struct pdk_events *pdk_session_events(const struct pdk_session *s); /* NULL: no sink */
struct pdk_sandbox *pdk_session_sandbox(const struct pdk_session *s); /* NULL: not running */
/* The image the sandbox runs on (held while the session lives); NULL: the host's root. */
const struct pdk_image *pdk_session_image(const struct pdk_session *s);

/* Last: the image builder (build.h) runs sessions. */
#include "build.h"

#endif
