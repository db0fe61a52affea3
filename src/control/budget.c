/*
 * budget.c - a sandbox's budgets: the limits a create asked for, what the
 * daemon counts itself (output bytes, commands), the checks before a
 * command or a download, and the usage, limits and remaining amounts of the
 * Sandbox view.
 */
#include "common.h"
#include "base.h"
#include "control-internal.h"

#include <string.h>

/*
 * A limit of overrides.limits. The request validators store a canonical
 * number (bytes, milliseconds, a count); a sandbox stored before they did
 * may still hold the text it was asked with ("100M"), read the same way.
 */
static uint64_t limit_of(const json_t *limits, const char *key)
{
	json_t *v = json_object_get(limits, key);
	uint64_t n = 0;

	if (json_is_integer(v))
		return (uint64_t)json_integer_value(v);
	if (json_is_string(v) && pdk_parse_size(json_string_value(v), &n) == 0)
		return n;
	return 0;
}

/* The output budget: "output_bytes", or its older name "output". */
static uint64_t output_limit(const json_t *limits)
{
	uint64_t n = limit_of(limits, "output_bytes");

	return n ? n : limit_of(limits, "output");
}

uint64_t pdk__sb_limit(const struct pdk_ctl_sb *sb, const char *key)
{
	return strcmp(key, "output_bytes") == 0 ? output_limit(sb->limits)
						: limit_of(sb->limits, key);
}

bool pdk__sb_budget_ok(const struct pdk_ctl_sb *sb, const char **what)
{
	uint64_t out = output_limit(sb->limits), cmds = limit_of(sb->limits, "commands");

	if (out > 0 && sb->row.output_bytes >= out) {
		*what = "output_bytes";
		return false;
	}
	if (cmds > 0 && sb->row.commands >= cmds) {
		*what = "commands";
		return false;
	}
	return true;
}

uint64_t pdk__sb_budget_left(const struct pdk_ctl_sb *sb)
{
	const char *what;

	return pdk__sb_budget_ok(sb, &what) ? UINT64_MAX : 0;
}

int pdk_ctl_budget_check(struct pdk_ctl_sb *sb, const char *request, struct pdk_error **err)
{
	const char *what = NULL;

	if (pdk__sb_budget_ok(sb, &what))
		return 0;
	pdk_ctl_event(sb->c, sb->row.id, sb->labels, "limit.exceeded",
		      json_pack("{s:s, s:s}", "limit", what, "request", request));
	return pdk_error_set_field(err, EDQUOT, what, "the sandbox's %s budget is spent", what);
}

void pdk__sb_charge(struct pdk_ctl_sb *sb, uint64_t output_bytes, uint64_t commands)
{
	sb->row.output_bytes += output_bytes;
	sb->row.commands += commands;
	sb->last_active_ns = pdk_now_mono_ns();
	pdk__sb_save(sb);
}

void pdk__sb_charge_exec(struct pdk_ctl_sb *sb, uint64_t output_bytes, uint64_t commands)
{
	sb->row.output_bytes += output_bytes;
	sb->row.commands += commands;
	sb->last_active_ns = pdk_now_mono_ns();
	if (output_bytes != 0 || commands != 0)
		sb->dirty = true;
}

/* ---- the view's figures ---- */

void pdk__figures_add(struct pdk_ctl_figures *f, const char *name, int64_t value)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->v[i].name, name) == 0) {
			f->v[i].value = value;
			return;
		}
	f->v = pdk_xrealloc(f->v, (f->n + 1) * sizeof(*f->v));
	f->v[f->n].name = pdk_xstrdup(name);
	f->v[f->n].value = value;
	f->n++;
}

void pdk__figures_release(struct pdk_ctl_figures *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->v[i].name);
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

bool pdk_ctl_figure_get(const struct pdk_ctl_figures *f, const char *name, int64_t *value)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->v[i].name, name) == 0) {
			*value = f->v[i].value;
			return true;
		}
	return false;
}

/* The integer members of a status object's `key` ("usage", "limits"). */
static void status_figures(const json_t *status, const char *key, struct pdk_ctl_figures *f)
{
	const char *k;
	json_t *v;

	json_object_foreach(json_object_get(status, key), k, v) if (json_is_integer(v))
		pdk__figures_add(f, k, (int64_t)json_integer_value(v));
}

void pdk__budgets(const json_t *status, const json_t *limits, uint64_t output_bytes,
		  uint64_t commands, struct pdk_ctl_figures *usage, struct pdk_ctl_figures *lim,
		  struct pdk_ctl_figures *remaining)
{
	/* Before the supervisor's first status (the create answer): the request's own. */
	static const char *const asked[] = {"commands", "egress_bytes", "disk"};
	int64_t have;

	status_figures(status, "usage", usage);
	status_figures(status, "limits", lim);
	pdk__figures_add(usage, "output_bytes", (int64_t)output_bytes);
	pdk__figures_add(usage, "commands", (int64_t)commands);
	pdk__figures_add(lim, "output_bytes", (int64_t)output_limit(limits));
	for (size_t i = 0; i < PDK_ARRAY_SIZE(asked); i++)
		if ((!pdk_ctl_figure_get(lim, asked[i], &have) || have == 0) &&
		    limit_of(limits, asked[i]) > 0)
			pdk__figures_add(lim, asked[i], (int64_t)limit_of(limits, asked[i]));
	for (size_t i = 0; i < lim->n; i++) {
		int64_t max = lim->v[i].value, used;

		/* Only what is both counted and bounded (memory, pids: no running total). */
		if (max > 0 && pdk_ctl_figure_get(usage, lim->v[i].name, &used))
			pdk__figures_add(remaining, lim->v[i].name, used >= max ? 0 : max - used);
	}
}
