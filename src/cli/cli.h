/*
 * cli.h - shared by the verbs of the paddock command.
 *
 * cli/ is a front end: flags, output and exit codes (docs/cli-contract.md).
 * With daemon/ it is the only place that prints or reads the environment
 * (pdk_cli_settings()); it may use every layer, and decides nothing a
 * library layer should: a verb parses its flags, calls the layer that
 * does the work, and says what happened.
 */
#ifndef PDK_CLI_H
#define PDK_CLI_H

#include "common.h"
#include "base.h"

/* Exit statuses paddock itself uses (docs/cli-contract.md). */
enum pdk_exit {
	PDK_EXIT_POLICY = 122,  /* bad option or profile: nothing was started */
	PDK_EXIT_OOM = 123,     /* memory limit */
	PDK_EXIT_TIMEOUT = 124, /* wall-clock limit */
	PDK_EXIT_SETUP = 125,   /* the sandbox could not be created */
	PDK_EXIT_NOEXEC = 126,
	PDK_EXIT_NOTFOUND = 127,
};

struct pdk_command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

/*
 * The verbs, each in its own file: argv[0] is the verb as typed; the
 * result is the exit status. The ones that talk to the daemon share
 * cli-daemon.h.
 */
int pdk_cmd_run(int argc, char **argv);
int pdk_cmd_audit(int argc, char **argv);
int pdk_cmd_profile(int argc, char **argv);
int pdk_cmd_ws(int argc, char **argv);
int pdk_cmd_version(int argc, char **argv);
int pdk_cmd_serve(int argc, char **argv);
int pdk_cmd_supervise(int argc, char **argv);
int pdk_cmd_ps(int argc, char **argv);
int pdk_cmd_create(int argc, char **argv);
int pdk_cmd_exec(int argc, char **argv);
int pdk_cmd_attach(int argc, char **argv);
int pdk_cmd_cp(int argc, char **argv);
/* pause, resume, snapshot, rollback, diff and kill: argv[0] says which. */
int pdk_cmd_sandbox(int argc, char **argv);
int pdk_cmd_commit(int argc, char **argv);
int pdk_cmd_port(int argc, char **argv);
int pdk_cmd_mcp(int argc, char **argv);
/* gateway, and its check, pins and token subcommands (cmd-gateway.c). */
int pdk_cmd_gateway(int argc, char **argv);
int pdk_cmd_events(int argc, char **argv);
int pdk_cmd_image(int argc, char **argv);
/* approvals, approve and deny: argv[0] says which (cmd-approvals.c). */
int pdk_cmd_approvals(int argc, char **argv);
/* `paddock image build` (argv[0] is "build"; cmd-image-build.c). */
int pdk_cmd_image_build(int argc, char **argv);
struct pdk_image_store;
/*
 * Open the state directory's image store with PADDOCK_IMAGE_QUOTA (cmd-image.c). 0, or the
 * exit status after the error was printed.
 */
int pdk_cli_image_store(struct pdk_image_store **st);

/* 1536 -> "1.5 KiB", 12 -> "12 B" (binary units). */
void pdk_cli_human_size(uint64_t bytes, char *buf, size_t len);

struct pdk_events;

/* Flush and close an event stream's sinks (a failure is printed), then free it. NULL-safe. */
void pdk_cli_events_finish(struct pdk_events *ev);

/* The log of the library objects a verb creates: "paddock: [warning: ]MSG" on stderr. */
extern const struct pdk_log pdk_cli_log;

struct pdk_paths;
struct pdk_settings;

/* What this process's environment says (base/settings.h); release with pdk_settings_release(). */
void pdk_cli_settings(struct pdk_settings *out);
/* Its directories alone (base/paths.h); release with pdk_paths_release(). */
void pdk_cli_paths(struct pdk_paths *out);
/* Its state directory alone (caller frees). */
char *pdk_cli_state_dir(void);

/*
 * Whether the directory `ws` (a path, resolved here) is the home directory
 * named by HOME in `envp`, or a directory holding it (/home; not /, whose
 * view is the system's), by name or by identity (a bind mount of either is
 * another name for it): a workspace there would show the sandbox every
 * dotfile (.npmrc, .gitconfig, .ssh, agent configs). *where gets the
 * resolved directory (caller frees) when true. A mount below `ws` that
 * shows the home is not looked for: this is a guard against a mistake; the
 * boundary's own checks (the state directory, the keys) read the mount table.
 */
bool pdk_cli_holds_home(const char *ws, char *const *envp, char **where);

/*
 * Refuse such a workspace for VERB: the message names it and says how to
 * choose another (`--allow-home` runs there anyway). PDK_EXIT_POLICY, or 0.
 */
int pdk_cli_refuse_home(const char *verb, const char *ws, char *const *envp);

/* Print a JSON value, indented, keys sorted, to stdout. */
void pdk_cli_print_json(const json_t *j);

/* "paddock: " + message on stderr. */
/*
 * paddock is two binaries (docs/internals/binaries.md): the front,
 * `paddock`, runs `run`, `version` and `help` and is linked without the
 * egress proxy, the image store and the audit store; paddock-full has every
 * verb. pdk_cli_exec_full() replaces the front by paddock-full, with the
 * same argv: it returns only when that cannot be done (an exit status, the
 * error said, naming `why`: what needs it, or NULL for a verb). In
 * paddock-full it is never called.
 */
int pdk_cli_exec_full(const char *why);

/* paddock-full's path (PADDOCK_FULL, else pdk_paths_helper()'s); a new string. */
char *pdk_cli_full_path(void);

/*
 * `paddock-full audit fold`, waited for, its output dropped: how the front
 * binary folds the run spools (a warning says when it could not).
 */
void pdk_cli_fold_by_full(void);

void pdk_cli_error(const char *fmt, ...) PDK_PRINTF(1, 2);
void pdk_cli_warn(const char *fmt, ...) PDK_PRINTF(1, 2);

/*
 * A verb's --quiet (false by default): pdk_cli_note() and pdk_cli_log's
 * notices and progress lines are then not printed. Errors and warnings (a
 * failure, a protection weaker than asked) always are.
 */
extern bool pdk_cli_quiet;
/* "paddock: " + a note that is no failure (what became of the changes), unless quiet. */
void pdk_cli_note(const char *fmt, ...) PDK_PRINTF(1, 2);

/*
 * The summary of denied destinations (cli-net.c), on stderr: one line a
 * destination, "paddock: network denied: DEST (WHY[, N times]); to allow it:
 * HOW --allow ALLOW". pdk_cli_net_denials() prints a sandbox's whole log
 * (policy/netdeny.h) for `paddock run`.
 */
struct pdk_net_denials;
void pdk_cli_net_denied(const char *dest, const char *why, uint64_t count, const char *allow,
			const char *how);
void pdk_cli_net_denied_more(uint64_t more);
void pdk_cli_net_denials(struct pdk_net_denials *d);
/*
 * The same summary from an exec result or exit event of the daemon (its
 * "denied" array and "denied_more"; docs/api.yaml), for `paddock exec`.
 * Nothing with --quiet.
 */
void pdk_cli_net_denied_json(const json_t *r);

#endif
