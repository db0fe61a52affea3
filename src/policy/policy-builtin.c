/*
 * policy-builtin.c - the built-in profiles, as YAML text.
 *
 * They are compiled in as text and read by the same parser as user files,
 * so every rule that applies to a user profile applies to them too (the unit
 * tests check that each parses without a diagnostic). `paddock profile show
 * NAME` prints the resolved result.
 */
#include "common.h"
#include "policy-internal.h"

#include <string.h>

/*
 * default: enough of the host to run real tools (compilers, interpreters,
 * package caches in the workspace), nothing personal and no network.
 * Missing host paths (/lib32 on most machines) are skipped by the mount
 * code. Cgroup limits are best-effort so that a rootless user without
 * cgroup delegation can still run; the downgrade is reported.
 * /etc/ssl is bound for the CA store, so /etc/ssl/private is hidden.
 * Debian's matplotlib reads its defaults from /etc/matplotlibrc (and fails
 * to import without it), and fontconfig its configuration from /etc/fonts:
 * bound so that Python plotting works, as the E2B front door's code
 * interpreter needs.
 */
static const char default_yaml[] =
	"name: default\n"
	"description: \"Read-only system directories, the workspace as an overlay, no network\"\n"
	"filesystem:\n"
	"  workspace: { mode: overlay }\n"
	"  read_only: [/usr, /bin, /sbin, /lib, /lib32, /lib64, /libx32]\n"
	"  read_write: []\n"
	"  tmpfs: [/tmp]\n"
	"  hidden: [/etc/ssl/private]\n"
	"  etc:\n"
	"    - alternatives\n"
	"    - ld.so.cache\n"
	"    - ld.so.conf\n"
	"    - ld.so.conf.d\n"
	"    - ssl\n"
	"    - ca-certificates\n"
	"    - ca-certificates.conf\n"
	"    - localtime\n"
	"    - timezone\n"
	"    - nsswitch.conf\n"
	"    - mime.types\n"
	"    - os-release\n"
	"    - debian_version\n"
	"    - protocols\n"
	"    - services\n"
	"    - bash.bashrc\n"
	"    - profile\n"
	"    - profile.d\n"
	"    - inputrc\n"
	"    - terminfo\n"
	"    - python3\n"
	"    - perl\n"
	"    - matplotlibrc\n"
	"    - fonts\n"
	"network:\n"
	"  mode: none\n"
	"limits:\n"
	"  memory: 4G\n"
	"  pids: 1024\n"
	"  cpu: 0\n"
	"  wall: 0\n"
	"  cpu_time: 0\n"
	"  nofile: 4096\n"
	"  fsize: 0\n"
	"  tmp_size: 1G\n"
	"best_effort: [memory, pids, cpu]\n"
	"process:\n"
	"  allow_ptrace: false\n"
	"hostname: paddock\n"
	"env: {}\n";

/*
 * strict: default with a read-only workspace, tight limits that must be
 * enforced (no best-effort), and a smaller /etc.
 */
static const char strict_yaml[] =
	"extends: default\n"
	"name: strict\n"
	"description: \"Read-only workspace, tight limits that must be enforced, no network\"\n"
	"filesystem:\n"
	"  workspace: { mode: ro }\n"
	"  etc: [ld.so.cache, ld.so.conf, ld.so.conf.d, alternatives, localtime, nsswitch.conf,\n"
	"        ssl, ca-certificates]\n"
	"limits:\n"
	"  memory: 512M\n"
	"  pids: 128\n"
	"  cpu: 1\n"
	"  wall: 5m\n"
	"  cpu_time: 2m\n"
	"  nofile: 256\n"
	"  fsize: 256M\n"
	"  tmp_size: 128M\n"
	"best_effort: []\n";

static const struct {
	const char *name;
	const char *yaml;
} builtins[] = {
	{"default", default_yaml},
	{"strict", strict_yaml},
};

const char *const pdk_policy_builtin_names[] = {"default", "strict", NULL};

_Static_assert(PDK_ARRAY_SIZE(builtins) + 1 == PDK_ARRAY_SIZE(pdk_policy_builtin_names),
	       "every built-in has a name");

const char *pdk__policy_builtin_yaml(const char *name)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(builtins); i++) {
		if (strcmp(builtins[i].name, name) == 0)
			return builtins[i].yaml;
	}
	return NULL;
}
