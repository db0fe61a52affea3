/*
 * overrides.c - a caller's changes to a profile (overrides.h): the text of
 * a flag parsed into a typed value, and the typed values applied to a
 * policy. The range of each limit is written once, in `rules`, and checked
 * both when text is parsed (so a flag's error quotes the text) and when a
 * value is applied (a number from the daemon's spec never saw our parser).
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"
#include "policy.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum kind { KIND_SIZE, KIND_DURATION, KIND_COUNT, KIND_CPUS };

struct rule {
	const char *name; /* the policy file's */
	enum kind kind;
	uint64_t min, max;
	unsigned best_effort; /* the flag an override clears */
	const char *want;     /* what messages say is expected */
};

static const struct rule rules[PDK_OVERRIDE_LIMITS] = {
	[PDK_OVERRIDE_WALL] = {"limits.wall", KIND_DURATION, 1, UINT64_MAX, 0,
			       "a duration such as 500ms, 30s, 10m"},
	[PDK_OVERRIDE_MEMORY] = {"limits.memory", KIND_SIZE, 1 << 20, UINT64_MAX, PDK_BE_MEMORY,
				 "a size of at least 1M, such as 512M or 2G"},
	[PDK_OVERRIDE_PIDS] = {"limits.pids", KIND_COUNT, 1, 4194304, PDK_BE_PIDS,
			       "a whole number from 1 to 4194304"},
	[PDK_OVERRIDE_CPUS] = {"limits.cpu", KIND_CPUS, 1, 1024000, PDK_BE_CPU,
			       "a number of CPUs above 0, such as 0.5 or 2"},
	[PDK_OVERRIDE_DISK] = {"limits.disk", KIND_SIZE, 1 << 20, UINT64_MAX, 0,
			       "a size of at least 1M, such as 100M or 2G"},
	[PDK_OVERRIDE_EGRESS_BYTES] = {"limits.egress_bytes", KIND_SIZE, 0, UINT64_MAX, 0,
				       "a size such as 100M"},
};

const char *pdk_override_limit_name(enum pdk_override_limit which)
{
	return which < PDK_OVERRIDE_LIMITS ? rules[which].name : "limits";
}

int pdk_override_cpus_milli(double cpus, uint64_t *milli)
{
	/* The bounds first: a double past them has no uint64_t to convert to. */
	if (!(cpus > 0) || cpus > 1024)
		return -EINVAL;
	*milli = (uint64_t)(cpus * 1000.0 + 0.5);
	return *milli > 0 ? 0 : -EINVAL;
}

/* "1.5" CPUs -> 1500 thousandths. */
static int parse_cpus(const char *s, uint64_t *milli)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0')
		return -EINVAL;
	return pdk_override_cpus_milli(v, milli);
}

static int parse_kind(enum kind kind, const char *s, uint64_t max, uint64_t *out)
{
	switch (kind) {
	case KIND_SIZE:
		return pdk_parse_size(s, out);
	case KIND_DURATION:
		return pdk_parse_duration(s, out);
	case KIND_COUNT:
		return pdk_parse_u64(s, max, out);
	case KIND_CPUS:
		return parse_cpus(s, out);
	default:
		return -EINVAL;
	}
}

int pdk_overrides_parse_limit(struct pdk_overrides *ov, enum pdk_override_limit which,
			      const char *text, const char *name, struct pdk_error **err)
{
	const struct rule *r;
	uint64_t v;

	if (which >= PDK_OVERRIDE_LIMITS)
		return pdk_error_setx(err, EINVAL, "no such limit (%d)", (int)which);
	r = &rules[which];
	name = name ? name : r->name;
	if (parse_kind(r->kind, text, r->max, &v) < 0 || v < r->min || v > r->max)
		return pdk_error_setx(err, EINVAL, "invalid %s '%s': expected %s", name, text,
				      r->want);
	ov->limits[which] = (struct pdk_override){.set = true, .value = v, .name = name};
	return 0;
}

int pdk_overrides_parse_ws_mode(struct pdk_overrides *ov, const char *text, const char *name,
				struct pdk_error **err)
{
	int v;

	if (!pdk__policy_enum_value(&pdk__policy_ws_modes, text, &v))
		return pdk_error_setx(err, EINVAL,
				      "invalid %s '%s': expected overlay, rw, ro, tmpfs or none",
				      name ? name : "workspace.mode", text);
	ov->ws_mode = (struct pdk_override_ws_mode){true, (enum pdk_ws_mode)v, name};
	return 0;
}

int pdk_overrides_parse_net_mode(struct pdk_overrides *ov, const char *text, const char *name,
				 struct pdk_error **err)
{
	int v;

	if (!pdk__policy_enum_value(&pdk__policy_net_modes, text, &v))
		return pdk_error_setx(err, EINVAL,
				      "invalid %s '%s': expected none, allowlist or host",
				      name ? name : "network.mode", text);
	ov->net_mode = (struct pdk_override_net_mode){true, (enum pdk_net_mode)v, name};
	return 0;
}

/* A value as its unit says it, for a message: "524288 bytes", "0 ms", "0.000 CPUs". */
static void describe(enum kind kind, uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = {
		[KIND_SIZE] = " bytes",
		[KIND_DURATION] = " ms",
		[KIND_COUNT] = "",
	};

	if (kind == KIND_CPUS)
		(void)snprintf(buf, len, "%.3f CPUs", (double)v / 1000.0);
	else
		(void)snprintf(buf, len, "%llu%s", (unsigned long long)v, units[kind]);
}

static void set_limit(struct pdk_policy_limits *l, enum pdk_override_limit which, uint64_t v)
{
	switch (which) {
	case PDK_OVERRIDE_WALL:
		l->wall_ms = v;
		break;
	case PDK_OVERRIDE_MEMORY:
		l->memory = v;
		break;
	case PDK_OVERRIDE_PIDS:
		l->pids = v;
		break;
	case PDK_OVERRIDE_CPUS:
		l->cpu_milli = (uint32_t)v; /* at most 1024000: the rule's range */
		break;
	case PDK_OVERRIDE_DISK:
		l->disk = v;
		break;
	case PDK_OVERRIDE_EGRESS_BYTES:
		l->egress_bytes = v;
		break;
	case PDK_OVERRIDE_LIMITS: /* a count, not a limit: apply_limits never gives it */
	default:
		break;
	}
}

/* Overridden limits replace the profile's; an explicit limit is never best-effort. */
static int apply_limits(const struct pdk_overrides *ov, struct pdk_policy *p,
			struct pdk_error **err)
{
	for (int i = 0; i < PDK_OVERRIDE_LIMITS; i++) {
		const struct pdk_override *o = &ov->limits[i];
		const struct rule *r = &rules[i];
		char v[64];

		if (!o->set)
			continue;
		if (o->value < r->min || o->value > r->max) {
			describe(r->kind, o->value, v, sizeof(v));
			return pdk_error_setx(err, EINVAL, "invalid %s (%s): expected %s",
					      o->name ? o->name : r->name, v, r->want);
		}
		set_limit(&p->limits, (enum pdk_override_limit)i, o->value);
		p->best_effort &= ~r->best_effort;
	}
	return 0;
}

static bool strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
		if (strcmp(v[i], s) == 0)
			return true;
	}
	return false;
}

/*
 * More allow entries add to the profile's network.allow and turn network
 * mode none into allowlist; with mode host they would mean nothing, so
 * they are refused.
 */
static int apply_allow(const struct pdk_overrides *ov, struct pdk_policy *p, struct pdk_error **err)
{
	const char *name = ov->allow_name ? ov->allow_name : "network.allow";

	for (size_t i = 0; ov->allow != NULL && ov->allow[i] != NULL; i++) {
		struct pdk_net_rule r;
		_cleanup_free_ char *why = NULL;

		if (pdk_net_rule_parse(ov->allow[i], &r, &why) < 0)
			return pdk_error_setx(err, EINVAL, "invalid %s '%s': %s", name,
					      ov->allow[i], why);
		if (!strv_contains(p->network.allow, r.text))
			pdk_strv_push(&p->network.allow, r.text);
		pdk_net_rule_release(&r);
	}
	if (ov->allow == NULL || ov->allow[0] == NULL)
		return 0;
	if (p->network.mode == PDK_NET_HOST)
		return pdk_error_setx(err, EINVAL,
				      "%s needs network mode none or allowlist (the profile "
				      "has host)",
				      name);
	p->network.mode = PDK_NET_ALLOWLIST;
	return 0;
}

static int apply_ws_mode(const struct pdk_overrides *ov, struct pdk_policy *p,
			 struct pdk_error **err)
{
	if (ov->change_set != NULL) {
		if (ov->workspace != NULL ||
		    (ov->ws_mode.set && ov->ws_mode.value != PDK_WS_OVERLAY))
			return pdk_error_setx(
				err, EINVAL,
				"invalid --change-set '%s': expected no -w and no other "
				"--workspace-mode (the change set names its workspace)",
				ov->change_set);
		p->workspace.mode = PDK_WS_OVERLAY;
		return 0;
	}
	if (ov->ws_mode.set)
		p->workspace.mode = ov->ws_mode.value;
	if (ov->discard && p->workspace.mode != PDK_WS_OVERLAY)
		return pdk_error_setx(err, EINVAL,
				      "--discard needs the overlay workspace mode (it is '%s')",
				      pdk_policy_ws_mode_name(p->workspace.mode));
	return 0;
}

int pdk_overrides_apply(const struct pdk_overrides *ov, struct pdk_policy *p,
			struct pdk_error **err)
{
	if (ov->net_mode.set)
		p->network.mode = ov->net_mode.value;
	if (ov->no_exec_trace)
		p->audit.exec_trace = false;
	if (ov->image != NULL) {
		free(p->image);
		p->image = strcmp(ov->image, "host") == 0 ? NULL : pdk_xstrdup(ov->image);
	}
	if (apply_limits(ov, p, err) < 0 || apply_allow(ov, p, err) < 0 ||
	    apply_ws_mode(ov, p, err) < 0)
		return -EINVAL;
	return 0;
}

int pdk_overrides_workspace(const struct pdk_overrides *ov, const struct pdk_policy *p, char **out,
			    struct pdk_error **err)
{
	const char *ws = ov->workspace       ? ov->workspace
			 : p->workspace.path ? p->workspace.path
					     : ".";
	char real[PATH_MAX];
	struct stat st;

	*out = NULL;
	if (ov->change_set != NULL || p->workspace.mode == PDK_WS_NONE)
		return 0;
	if (realpath(ws, real) == NULL || stat(real, &st) < 0)
		return pdk_error_setx(err, errno, "workspace '%s': %s", ws, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return pdk_error_setx(err, ENOTDIR, "workspace '%s' is not a directory", ws);
	if (strcmp(real, "/") == 0)
		return pdk_error_setx(err, EINVAL, "the workspace cannot be '/'");
	*out = pdk_xstrdup(real);
	return 0;
}
