/*
 * overrides.h - what a caller changes of a profile for one sandbox: limits,
 * network mode and allow list, workspace mode and directory, exec tracing.
 * Part of the policy layer's public header (policy.h includes it).
 *
 * Values are typed: sizes in bytes, durations in milliseconds, counts, CPUs
 * in thousandths, modes as their enums. Text is parsed only at a front
 * end's edge: `paddock run`'s flags through pdk_overrides_parse_*() below,
 * the API's JSON by its validators (so the spec the daemon hands a
 * supervisor holds numbers). Each value keeps the name its caller knows it
 * by ("--memory", "limits.memory"), which error messages quote; a value
 * given without a name is known by the policy file's name.
 */
#ifndef PDK_OVERRIDES_H
#define PDK_OVERRIDES_H

#include "common.h"
#include "base.h"
#include "policy.h"

/* The limits a caller may override, and the unit of each one's value. */
enum pdk_override_limit {
	PDK_OVERRIDE_WALL = 0,     /* limits.wall: ms, at least 1 */
	PDK_OVERRIDE_MEMORY,       /* limits.memory: bytes, at least 1M; never best-effort */
	PDK_OVERRIDE_PIDS,         /* limits.pids: a count, 1 to 4194304; never best-effort */
	PDK_OVERRIDE_CPUS,         /* limits.cpu: thousandths of a CPU, 1 to 1024000; never b-e */
	PDK_OVERRIDE_DISK,         /* limits.disk: bytes, at least 1M */
	PDK_OVERRIDE_EGRESS_BYTES, /* limits.egress_bytes: bytes */
	PDK_OVERRIDE_LIMITS,       /* how many there are */
};

/* One overridden number. */
struct pdk_override {
	bool set;         /* false: the profile's value stays */
	uint64_t value;   /* in the unit enum pdk_override_limit gives */
	const char *name; /* for messages (borrowed); NULL: the policy file's name */
};

/* One overridden mode. */
struct pdk_override_ws_mode {
	bool set;
	enum pdk_ws_mode value;
	const char *name; /* for messages (borrowed); NULL: "workspace.mode" */
};

struct pdk_override_net_mode {
	bool set;
	enum pdk_net_mode value;
	const char *name; /* for messages (borrowed); NULL: "network.mode" */
};

/* Everything a caller may change; zeroed: nothing. Every pointer is borrowed. */
struct pdk_overrides {
	struct pdk_override limits[PDK_OVERRIDE_LIMITS];
	struct pdk_override_net_mode net_mode;
	char *const *allow;     /* more network.allow entries; they turn mode none into allowlist */
	const char *allow_name; /* for messages: "--allow", "overrides.network.allow" */
	struct pdk_override_ws_mode ws_mode;
	const char *workspace;  /* host directory; NULL: the profile's, else "." */
	const char *change_set; /* overlay on this existing change set (`paddock run` only) */
	bool discard;           /* overlay changes are dropped at the end (`paddock run` only) */
	const char *image;      /* the root's image (policy.h); "host": none; NULL: the profile's */
	bool no_exec_trace;
};

/*
 * Parse the text of limit `which` as a flag gives it ("30s", "512M", "256",
 * "0.5") into ov->limits[which], named `name` (borrowed). 0, or -EINVAL +
 * *err "invalid NAME 'TEXT': expected ..." when the text is no such value or
 * out of the limit's range.
 */
PDK_MUST_CHECK int pdk_overrides_parse_limit(struct pdk_overrides *ov,
					     enum pdk_override_limit which, const char *text,
					     const char *name, struct pdk_error **err);

/* "overlay", "rw", "ro", "tmpfs", "none" into ov->ws_mode. 0 or -EINVAL + *err. */
PDK_MUST_CHECK int pdk_overrides_parse_ws_mode(struct pdk_overrides *ov, const char *text,
					       const char *name, struct pdk_error **err);

/* "none", "allowlist", "host" into ov->net_mode. 0 or -EINVAL + *err. */
PDK_MUST_CHECK int pdk_overrides_parse_net_mode(struct pdk_overrides *ov, const char *text,
						const char *name, struct pdk_error **err);

/*
 * `cpus` CPUs (a JSON number, say) in thousandths in *milli. 0, or -EINVAL
 * unless it is above 0 once rounded and at most 1024.
 */
PDK_MUST_CHECK int pdk_override_cpus_milli(double cpus, uint64_t *milli);

/* The policy file's name of limit `which` ("limits.memory"). */
const char *pdk_override_limit_name(enum pdk_override_limit which);

/*
 * Apply `ov` to `p` (loaded with pdk_policy_load()): the network mode, exec
 * tracing, the limits (each checked against its range again: a caller may
 * fill the struct itself), the allow list, the workspace mode and the rules
 * of --change-set and --discard. An overridden memory, pids or cpu limit is
 * never best-effort. 0, or -EINVAL + *err naming the value; `p` may then be
 * changed in part.
 */
PDK_MUST_CHECK int pdk_overrides_apply(const struct pdk_overrides *ov, struct pdk_policy *p,
				       struct pdk_error **err);

/*
 * The workspace's absolute host path in *out (caller frees; NULL with mode
 * none or a change set, which names its own): ov->workspace, else the
 * profile's, else the current directory. Refuses '/', a missing directory, a
 * file. 0 or negative + *err.
 */
PDK_MUST_CHECK int pdk_overrides_workspace(const struct pdk_overrides *ov,
					   const struct pdk_policy *p, char **out,
					   struct pdk_error **err);

#endif
