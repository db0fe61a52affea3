/*
 * supervisor-spec.c - the daemon's spec (docs/internals/daemon.md), read
 * and taken apart into the session's options and the supervisor's own
 * budgets. The spec holds typed values: the API's validators parsed the
 * caller's text ("512M", "30s") and wrote numbers in its place, so nothing
 * here parses text into numbers again.
 */
#include "common.h"
#include "base.h"
#include "policy.h"
#include "supervisor-internal.h"

#include <string.h>
#include <unistd.h>

#define SPEC_MAX (1 << 20)

int pdk__sv_spec_load(int fd, json_t **out, struct pdk_error **err)
{
	_cleanup_free_ char *buf = pdk_xmalloc(SPEC_MAX + 1);
	json_error_t jerr;
	size_t len = 0;

	for (;;) {
		ssize_t n = TEMP_FAILURE_RETRY(read(fd, buf + len, SPEC_MAX + 1 - len));

		if (n < 0)
			return pdk_error_set(err, errno, "spec: cannot read the spec fd");
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > SPEC_MAX)
			return pdk_error_setx(err, E2BIG, "spec: larger than %d bytes", SPEC_MAX);
	}
	*out = pdk_json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (*out == NULL || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return pdk_error_setx(err, EINVAL, "spec: not a JSON object (%s, line %d)",
				      jerr.text, jerr.line);
	}
	return 0;
}

bool pdk__sv_valid_id(const char *id)
{
	size_t n = strlen(id);

	return n == 36 && strspn(id, "0123456789abcdef-") == n;
}

static const char *spec_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/* The limits of overrides.limits the session applies, and what each one's number means. */
static const struct {
	const char *key;
	enum pdk_override_limit which;
	const char *want;
} limit_keys[] = {
	{"wall", PDK_OVERRIDE_WALL, "a number of milliseconds"},
	{"memory", PDK_OVERRIDE_MEMORY, "a number of bytes"},
	{"pids", PDK_OVERRIDE_PIDS, "a count"},
	{"cpu", PDK_OVERRIDE_CPUS, "a number of CPUs"},
	{"egress_bytes", PDK_OVERRIDE_EGRESS_BYTES, "a number of bytes"},
	{"disk", PDK_OVERRIDE_DISK, "a number of bytes"},
};

static int not_a_number(const char *name, const char *want, struct pdk_error **err)
{
	return pdk_error_setx(err, EPROTO,
			      "policy: invalid %s: expected %s (the spec holds numbers)", name,
			      want);
}

/* A whole number of limits.KEY (absent: 0, not *set). */
static int spec_uint(json_t *lim, const char *key, const char *want, uint64_t *out, bool *set,
		     struct pdk_error **err)
{
	json_t *v = json_object_get(lim, key);
	_cleanup_free_ char *name = pdk_xasprintf("limits.%s", key);

	*set = v != NULL;
	*out = 0;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return not_a_number(name, want, err);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* limits.cpu: a number of CPUs (a JSON real, or a whole number), in thousandths. */
static int spec_cpus(json_t *lim, struct pdk_override *o, struct pdk_error **err)
{
	json_t *v = json_object_get(lim, "cpu");
	uint64_t milli;

	if (v == NULL)
		return 0;
	if (!json_is_number(v))
		return not_a_number("limits.cpu", "a number of CPUs", err);
	if (pdk_override_cpus_milli(json_number_value(v), &milli) < 0)
		return pdk_error_setx(err, EINVAL,
				      "policy: invalid limits.cpu (%g): expected a number of CPUs "
				      "above 0, at most 1024",
				      json_number_value(v));
	*o = (struct pdk_override){.set = true, .value = milli, .name = "limits.cpu"};
	return 0;
}

static int spec_limits(json_t *lim, struct pdk_sv_spec *out, struct pdk_error **err)
{
	struct pdk_override *ov = out->session.overrides.limits;
	bool set;

	for (size_t i = 0; i < PDK_ARRAY_SIZE(limit_keys); i++) {
		enum pdk_override_limit w = limit_keys[i].which;

		if (w == PDK_OVERRIDE_CPUS) {
			if (spec_cpus(lim, &ov[w], err) < 0)
				return -1;
			continue;
		}
		if (spec_uint(lim, limit_keys[i].key, limit_keys[i].want, &ov[w].value, &set, err) <
		    0)
			return -1;
		ov[w].set = set;
		ov[w].name = pdk_override_limit_name(w);
	}
	return 0;
}

/* The budgets the supervisor keeps itself: cpu_time (ms of the whole sandbox), commands. */
static int spec_budgets(json_t *lim, struct pdk_sv_spec *out, struct pdk_error **err)
{
	bool set;

	if (spec_uint(lim, "cpu_time", "a number of milliseconds", &out->cpu_time_ms, &set, err) <
	    0)
		return -1;
	if (set && out->cpu_time_ms == 0)
		return pdk_error_setx(
			err, EINVAL, "policy: invalid limits.cpu_time (0 ms): expected a duration");
	if (spec_uint(lim, "commands", "a count", &out->commands, &set, err) < 0)
		return -1;
	if (set && (out->commands == 0 || out->commands > UINT32_MAX))
		return pdk_error_setx(
			err, EINVAL,
			"policy: invalid limits.commands (%llu): expected a count from "
			"1 to %u",
			(unsigned long long)out->commands, UINT32_MAX);
	return 0;
}

static int spec_network(json_t *net, struct pdk_sv_spec *out, struct pdk_error **err)
{
	struct pdk_overrides *ov = &out->session.overrides;
	const char *mode = spec_str(net, "mode");
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(net, "allow"), i, v)
	{
		if (!json_is_string(v))
			return pdk_error_setx(err, EINVAL,
					      "spec: network.allow[%zu] is not a string", i);
		pdk_strv_push(&out->allow, json_string_value(v));
	}
	ov->allow = out->allow;
	ov->allow_name = "overrides.network.allow";
	if (mode != NULL &&
	    pdk_overrides_parse_net_mode(ov, mode, "overrides.network.mode", err) < 0)
		return pdk_error_wrap(err, "policy");
	return 0;
}

static int spec_workspace(json_t *ws, struct pdk_sv_spec *out, struct pdk_error **err)
{
	struct pdk_overrides *ov = &out->session.overrides;
	const char *mode = spec_str(ws, "mode");

	ov->workspace = spec_str(ws, "path");
	if (ov->workspace != NULL && ov->workspace[0] != '/')
		return pdk_error_setx(err, EINVAL, "spec: workspace.path must be absolute");
	if (mode != NULL && pdk_overrides_parse_ws_mode(ov, mode, "workspace.mode", err) < 0)
		return pdk_error_wrap(err, "policy");
	return 0;
}

static int spec_env(json_t *env, struct pdk_sv_spec *out, struct pdk_error **err)
{
	const char *k;
	json_t *v;

	json_object_foreach(env, k, v)
	{
		if (!json_is_string(v))
			return pdk_error_setx(err, EINVAL, "spec: env '%s' is not a string", k);
		pdk_strv_push_take(&out->env, pdk_xasprintf("%s=%s", k, json_string_value(v)));
	}
	out->session.env = out->env;
	out->session.env_name = "env";
	return 0;
}

int pdk__sv_spec_parse(json_t *spec, struct pdk_sv_spec *out, struct pdk_error **err)
{
	json_t *overrides = json_object_get(spec, "overrides");
	json_t *lim = json_object_get(overrides, "limits");
	json_t *labels = json_object_get(spec, "labels");
	struct pdk_session_opts *o = &out->session;

	*out = (struct pdk_sv_spec){0};
	o->profile = spec_str(spec, "policy_file") ? spec_str(spec, "policy_file")
						   : spec_str(spec, "profile");
	o->overrides.image = spec_str(spec, "image");
	o->label_session = spec_str(labels, "session");
	o->label_workflow = spec_str(labels, "workflow");
	o->overrides.no_exec_trace =
		json_is_false(json_object_get(json_object_get(spec, "audit"), "exec_trace"));
	out->run_dir = spec_str(spec, "run_dir");
	out->state_dir = spec_str(spec, "state_dir");
	if (spec_env(json_object_get(spec, "env"), out, err) < 0 ||
	    spec_network(json_object_get(overrides, "network"), out, err) < 0 ||
	    spec_workspace(json_object_get(spec, "workspace"), out, err) < 0 ||
	    spec_limits(lim, out, err) < 0 || spec_budgets(lim, out, err) < 0)
		return -1;
	return 0;
}

void pdk__sv_spec_release(struct pdk_sv_spec *spec)
{
	pdk_strv_free(spec->env);
	pdk_strv_free(spec->allow);
	spec->env = spec->allow = NULL;
}
