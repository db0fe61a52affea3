/*
 * plane-render.c - paddock's view of a sandbox in E2B's shapes (spec
 * openapi.yml: Sandbox, SandboxDetail, ListedSandbox).
 */
#include "common.h"
#include "e2b-internal.h"

#include <string.h>
#include <unistd.h>

const char *pdk__e2b_state(const char *state)
{
	/* A starting sandbox is answered once it runs; lost and ended ones are gone for E2B. */
	if (strcmp(state, "running") == 0 || strcmp(state, "starting") == 0)
		return "running";
	if (strcmp(state, "paused") == 0)
		return "paused";
	return NULL;
}

static const char *template_of(const struct pdk_ctl_view *v)
{
	const char *t = json_string_value(json_object_get(v->labels, PDK__E2B_LABEL_TEMPLATE));

	return t ? t : v->profile;
}

/*
 * The traffic token is the envd access token too: the SDKs send it alone on
 * some requests for a sandbox's other ports (the code interpreter's
 * /contexts), which paddock serves only with a token (envd-port.c).
 */
json_t *pdk__e2b_sandbox_json(const struct pdk_ctl_view *v, const char *token, const char *domain)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s?, s:s?}", "sandboxID", v->id, "templateID",
			 template_of(v), "clientID", "paddock", "envdVersion", PDK_E2B_ENVD_VERSION,
			 "envdAccessToken", token, "trafficAccessToken", token, "domain", domain);
}

/* The metadata: the labels but the front door's own. */
static json_t *metadata_of(const struct pdk_ctl_view *v)
{
	json_t *m = json_object();
	const char *k;
	json_t *x;

	json_object_foreach(v->labels, k, x)
	{
		if (strncmp(k, PDK__E2B_LABEL_PREFIX, strlen(PDK__E2B_LABEL_PREFIX)) != 0)
			json_object_set(m, k, x);
	}
	return m;
}

static json_int_t memory_mb(const struct pdk_ctl_view *v)
{
	int64_t bytes = 0;

	if (pdk_ctl_figure_get(&v->limits, "memory", &bytes) && bytes > 0)
		return (json_int_t)(bytes >> 20);
	return (json_int_t)((uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) >>
			    20);
}

static json_int_t disk_mb(const struct pdk_ctl_view *v)
{
	int64_t bytes = 0;

	return pdk_ctl_figure_get(&v->limits, "disk", &bytes) && bytes > 0
		       ? (json_int_t)(bytes >> 20)
		       : 0;
}

json_t *pdk__e2b_detail_json(const struct pdk_ctl_view *v)
{
	_cleanup_json_ json_t *pv = pdk_ctl_view_json(v);
	json_t *o = json_pack("{s:s, s:s, s:s, s:O, s:O, s:I, s:I, s:I, s:o, s:s, s:s, s:[]}",
			      "sandboxID", v->id, "templateID", template_of(v), "clientID",
			      "paddock", "startedAt", json_object_get(pv, "created_at"), "endAt",
			      json_object_get(pv, "expires_at"), "cpuCount",
			      (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "memoryMB", memory_mb(v),
			      "diskSizeMB", disk_mb(v), "metadata", metadata_of(v), "state",
			      pdk__e2b_state(v->state) ? pdk__e2b_state(v->state) : "killed",
			      "envdVersion", PDK_E2B_ENVD_VERSION, "volumeMounts");

	if (o == NULL)
		pdk_oom();
	return o;
}
