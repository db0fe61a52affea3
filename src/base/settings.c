/*
 * settings.c - the environment variables paddock honours (settings.h).
 */
#include "common.h"
#include "settings.h"
#include "util.h"

#include <stddef.h>

/* Each string setting and the variable it comes from (set and not empty, else NULL). */
static const struct {
	const char *name;
	size_t offset;
} vars[] = {
	{"PADDOCK_INIT", offsetof(struct pdk_settings, init_path)},
	{"PADDOCK_CGROUP_PARENT", offsetof(struct pdk_settings, cgroup_parent)},
	{"PADDOCK_CGROUP_ROOT", offsetof(struct pdk_settings, cgroup_root)},
	{"PADDOCK_EGRESS_CA_FILE", offsetof(struct pdk_settings, egress_ca_file)},
	{"PADDOCK_RESOLV_CONF", offsetof(struct pdk_settings, resolv_conf)},
	{"PADDOCK_HOSTS", offsetof(struct pdk_settings, hosts)},
	{"PADDOCK_OTLP", offsetof(struct pdk_settings, otlp_helper)},
	{"PADDOCK_FULL", offsetof(struct pdk_settings, full_path)},
	{"PADDOCK_IMAGE_QUOTA", offsetof(struct pdk_settings, image_quota)},
};

void pdk_settings_from_env(struct pdk_settings *out, char *const *envp, uid_t euid)
{
	const struct pdk_paths_env pe = {
		.state_dir = pdk_env_get(envp, "PADDOCK_STATE_DIR"),
		.xdg_state_home = pdk_env_get(envp, "XDG_STATE_HOME"),
		.runtime_dir = pdk_env_get(envp, "PADDOCK_RUNTIME_DIR"),
		.xdg_runtime_dir = pdk_env_get(envp, "XDG_RUNTIME_DIR"),
		.xdg_config_home = pdk_env_get(envp, "XDG_CONFIG_HOME"),
		.home = pdk_env_get(envp, "HOME"),
		.euid = euid,
	};

	*out = (struct pdk_settings){.envp = envp};
	for (size_t i = 0; i < PDK_ARRAY_SIZE(vars); i++) {
		const char *v = pdk_env_get(envp, vars[i].name);

		*(const char **)((char *)out + vars[i].offset) =
			v != NULL && v[0] != '\0' ? v : NULL;
	}
	pdk_paths_resolve(&pe, &out->paths);
}

void pdk_settings_release(struct pdk_settings *s)
{
	pdk_paths_release(&s->paths);
	*s = (struct pdk_settings){0};
}
