/*
 * settings.h - what paddock takes from its environment, read in one place.
 *
 * The library reads no environment variable (no getenv() below a front
 * end). A front end (cli/, daemon/) hands its environment to
 * pdk_settings_from_env() once, and passes the result down; each layer
 * takes the fields it needs and gives its own objects typed values. The
 * variables, and what each one does, are listed here and in the README.
 */
#ifndef PDK_SETTINGS_H
#define PDK_SETTINGS_H

#include "common.h"
#include "paths.h"

#include <sys/types.h>

struct pdk_settings {
	/* PADDOCK_STATE_DIR, PADDOCK_RUNTIME_DIR, XDG_*, HOME (paths.h). */
	struct pdk_paths paths;
	/* PADDOCK_INIT: the paddock-init binary (NULL: pdk_paths_helper()'s). */
	const char *init_path;
	/* PADDOCK_CGROUP_PARENT: the delegated cgroup sandboxes are made under. */
	const char *cgroup_parent;
	/*
	 * PADDOCK_CGROUP_ROOT: the cgroup file system's mount point (NULL:
	 * /sys/fs/cgroup); a cgroup2 one picks the v2 backend (engine/cgroup.h).
	 */
	const char *cgroup_root;
	/* PADDOCK_EGRESS_CA_FILE: the trust store of the egress proxy's TLS upstreams. */
	const char *egress_ca_file;
	/* PADDOCK_RESOLV_CONF, PADDOCK_HOSTS: the egress proxy's resolver files. */
	const char *resolv_conf;
	const char *hosts;
	/* PADDOCK_OTLP: the paddock-otlp helper binary (NULL: pdk_paths_helper()'s). */
	const char *otlp_helper;
	/*
	 * PADDOCK_FULL: the whole paddock, which the front binary hands the
	 * verbs it is linked without (NULL: pdk_paths_helper()'s paddock-full;
	 * docs/internals/binaries.md).
	 */
	const char *full_path;
	/*
	 * PADDOCK_IMAGE_QUOTA: the disk the image store's layers may take ("20G";
	 * parsed by the front end with pdk_parse_size(); NULL: image/image.h's default).
	 */
	const char *image_quota;
	/*
	 * The whole environment (borrowed), for what is looked up by a name only
	 * known at run time: `--env NAME` copies, TERM, PADDOCK_SECRET_<NAME>,
	 * OTEL_* (telemetry/otlp.h), PADDOCK_URL/SOCKET/TOKEN (client/client.h),
	 * PADDOCK_AUDIT_FOLD_AT (cli/cmd-run.c: when a run folds the audit spools),
	 * and the test knobs that the tests' own processes set.
	 */
	char *const *envp;
};

/*
 * Fill *out from `envp` (borrowed for the settings' life; NULL: an empty
 * environment) for a process whose effective uid is `euid`. Release with
 * pdk_settings_release().
 */
void pdk_settings_from_env(struct pdk_settings *out, char *const *envp, uid_t euid);

void pdk_settings_release(struct pdk_settings *s);

#endif
