/*
 * policy.h - profiles (YAML) resolved into a validated struct pdk_policy.
 *
 * A policy says what the sandbox may see and use. It is built from a
 * built-in profile ("default", "strict") or a YAML file, then command-line
 * overrides are applied on top. docs/policy.md documents the schema.
 * The network-rule syntax (network.allow, network.credentials) is
 * netrule.h, and what a caller changes of a profile for one sandbox is
 * overrides.h, and a build recipe (`paddock image build`, read with the
 * same machinery) is recipe.h; all are included here: the policy layer's
 * public header is this one.
 *
 * Layer contract: stands on base/ alone. Pure but for reading profile
 * files (never the environment: the user's profile directory is given);
 * every problem of a profile is reported at once, as file:line:col, field
 * and message, and a policy that comes back is whole and checked.
 */
#ifndef PDK_POLICY_H
#define PDK_POLICY_H

#include "common.h"
#include "base.h"
#include "netrule.h"
#include "netdeny.h"

#include <stdio.h>

enum pdk_ws_mode {
	PDK_WS_RW = 0,  /* the host directory, bound read-write (explicit: changes are real) */
	PDK_WS_RO,      /* bound read-only */
	PDK_WS_NONE,    /* no workspace at all */
	PDK_WS_OVERLAY, /* an overlay: changes go to a change set (workspace.h) */
	PDK_WS_TMPFS,   /* an empty tmpfs at the workspace's path */
};

/* When a workspace overlay's changes reach the disk (filesystem.workspace.sync). */
enum pdk_ws_sync {
	/* At the sandbox's end, and a set with changes only: the overlay is volatile. */
	PDK_WS_SYNC_END = 0,
	/* As the sandbox asks (fsync, copy-up), and the whole upper file system at the end. */
	PDK_WS_SYNC_ALWAYS,
};

enum pdk_net_mode {
	PDK_NET_NONE = 0,  /* own network namespace with loopback only */
	PDK_NET_HOST,      /* the host's network (explicit; recorded as a risk) */
	PDK_NET_ALLOWLIST, /* own namespace; HTTP(S) through the egress proxy (egress.h) */
};

/*
 * Limits that may be declared best-effort: when the machine cannot apply
 * them the sandbox still starts and the downgrade is reported.
 */
enum pdk_best_effort_flags {
	PDK_BE_MEMORY = 1 << 0,
	PDK_BE_PIDS = 1 << 1,
	PDK_BE_CPU = 1 << 2,
	PDK_BE_LANDLOCK = 1 << 3,
	PDK_BE_EXEC_TRACE = 1 << 4, /* exec tracing (seccomp user notification) */
};

struct pdk_policy_limits {
	uint64_t memory;      /* bytes; 0 = unlimited (cgroup memory limit, swap 0) */
	uint64_t pids;        /* tasks in the sandbox; 0 = unlimited (cgroup pids) */
	uint32_t cpu_milli;   /* CPU bandwidth in thousandths of a CPU; 0 = unlimited */
	uint64_t wall_ms;     /* wall-clock limit; 0 = none */
	uint64_t cpu_time_ms; /* CPU time per process (RLIMIT_CPU); 0 = none */
	uint64_t nofile;      /* RLIMIT_NOFILE; 0 = inherit */
	uint64_t fsize;       /* RLIMIT_FSIZE bytes; 0 = unlimited */
	uint64_t tmp_size;    /* size of each tmpfs (/tmp ...) in bytes; 0 = kernel default */
	uint64_t disk;        /* bytes the workspace may add (overlay upper, tmpfs); 0 = no limit */
	uint64_t egress_bytes;       /* bytes through the egress proxy, both ways; 0 = no limit */
	uint64_t egress_requests;    /* requests and tunnels the proxy lets out; 0 = no limit */
	uint64_t egress_connections; /* upstream connections open at once; 0 = no limit */
};

struct pdk_policy {
	char *name;   /* profile name */
	char *source; /* "builtin:NAME" or the file path it came from */
	char *description;

	struct {
		char *path; /* host directory; NULL = the current directory */
		enum pdk_ws_mode mode;
		enum pdk_ws_sync sync; /* overlay only */
	} workspace;
	char **read_only;  /* host paths bound read-only at the same path (NULL-terminated) */
	char **read_write; /* host paths bound read-write at the same path */
	char **tmpfs;      /* sandbox paths that get a fresh tmpfs (always includes /tmp) */
	char **hidden;     /* paths masked inside the view (tmpfs / empty file over them) */
	char **etc;        /* entries of the host /etc bound read-only into the filtered /etc */

	struct {
		enum pdk_net_mode mode;
		char **allow; /* allowlist entries in canonical form (egress.h rules) */
		/* Credential rules, as pairs: host entry (canonical), header template. */
		char **credentials;
	} network;

	struct pdk_policy_limits limits;
	unsigned best_effort; /* enum pdk_best_effort_flags */

	struct {
		bool exec_trace; /* process.exec/exit for every exec (default true) */
	} audit;

	bool allow_ptrace; /* seccomp: allow ptrace/process_vm_* within the sandbox's pid ns */
	char *hostname;    /* default "paddock" */
	/*
	 * The sandbox's root: an image of the image store (a name or digest,
	 * image/image.h) stacked under a writable layer of its own; NULL: the
	 * host's root as read_only and etc show it.
	 */
	char *image;
	char **env; /* "K=V" entries added to the sandbox environment */
};

/* One problem found in a profile file. */
struct pdk_policy_diag {
	char *file;  /* borrowed from the report */
	int line;    /* 1-based; 0 when unknown */
	int column;  /* 1-based; 0 when unknown */
	char *field; /* dotted path, e.g. "limits.memory"; may be "" */
	char *msg;
};

struct pdk_policy_report {
	struct pdk_policy_diag *diags;
	size_t n;
	char *file;
	char **files; /* other files named by diags (profiles reached through `extends`) */
};

void pdk_policy_report_release(struct pdk_policy_report *r);
/* Print every diagnostic as "FILE:LINE:COL: FIELD: MSG\n". */
void pdk_policy_report_print(const struct pdk_policy_report *r, FILE *out);

/* Names of the built-in profiles, NULL-terminated. */
extern const char *const pdk_policy_builtin_names[];

/*
 * Load a profile. `name_or_path` is a built-in name, the name of a file
 * PROFILE_DIR/NAME.yaml (the user's profiles, base/paths.h; NULL: none) or
 * /etc/paddock/profiles/NAME.yaml, or a path (anything containing '/' or
 * ending in .yaml/.yml); `extends` is resolved the same way.
 * On success returns a new policy (caller frees with pdk_policy_free()).
 * On failure returns NULL, fills `report` with every problem found (when the
 * file could be parsed at all) and sets *err to a summary.
 * `report` may be NULL; otherwise it starts zeroed (or released) and the
 * caller releases it with pdk_policy_report_release(), on success too.
 */
struct pdk_policy *pdk_policy_load(const char *name_or_path, const char *profile_dir,
				   struct pdk_policy_report *report, struct pdk_error **err);

/* Parse a YAML document held in memory; `file` names it in diagnostics. */
struct pdk_policy *pdk_policy_parse(const char *file, const char *data, size_t len,
				    struct pdk_policy_report *report, struct pdk_error **err);

/* A deep copy. */
struct pdk_policy *pdk_policy_dup(const struct pdk_policy *p);
void pdk_policy_free(struct pdk_policy *p);

/* Write the resolved policy as YAML that pdk_policy_parse() accepts again. */
PDK_MUST_CHECK int pdk_policy_dump(const struct pdk_policy *p, FILE *out, struct pdk_error **err);

/* Text names, for output and events. */
const char *pdk_policy_ws_mode_name(enum pdk_ws_mode m);
const char *pdk_policy_net_mode_name(enum pdk_net_mode m);

/* Last: overrides.h and recipe.h use the types above. */
#include "overrides.h"
#include "recipe.h"

#endif
