/*
 * settings.c - the environment variables paddock honours (settings.h).
 */
#include "common.h"
#include "settings.h"
#include "util.h"

/* A variable that is set and not empty, else NULL. */
static const char *var(char *const *envp, const char *name)
{
	const char *v = pdk_env_get(envp, name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

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

	*out = (struct pdk_settings){
		.init_path = var(envp, "PADDOCK_INIT"),
		.cgroup_parent = var(envp, "PADDOCK_CGROUP_PARENT"),
		.egress_ca_file = var(envp, "PADDOCK_EGRESS_CA_FILE"),
		.resolv_conf = var(envp, "PADDOCK_RESOLV_CONF"),
		.hosts = var(envp, "PADDOCK_HOSTS"),
		.otlp_helper = var(envp, "PADDOCK_OTLP"),
		.envp = envp,
	};
	pdk_paths_resolve(&pe, &out->paths);
}

void pdk_settings_release(struct pdk_settings *s)
{
	pdk_paths_release(&s->paths);
	*s = (struct pdk_settings){0};
}
