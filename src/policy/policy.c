/*
 * policy.c - struct pdk_policy itself: copies, freeing, the words of its
 * modes. Reading a profile into one is policy-load.c (with the tree,
 * schema and report files it uses), writing one back is policy-dump.c;
 * policy-internal.h says how they fit.
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"
#include "policy.h"

#include <stdlib.h>
#include <string.h>

static char *str_copy(const char *s)
{
	return s != NULL ? pdk_xstrdup(s) : NULL;
}

static char **strv_copy(char *const *v)
{
	return v != NULL && v[0] != NULL ? pdk_strv_dup(v) : NULL;
}

struct pdk_policy *pdk_policy_dup(const struct pdk_policy *p)
{
	struct pdk_policy *d;

	if (p == NULL)
		return NULL;
	d = pdk_xmalloc(sizeof(*d));
	*d = *p; /* the scalars; every pointer is replaced below */
	d->name = str_copy(p->name);
	d->source = str_copy(p->source);
	d->description = str_copy(p->description);
	d->workspace.path = str_copy(p->workspace.path);
	d->read_only = strv_copy(p->read_only);
	d->read_write = strv_copy(p->read_write);
	d->tmpfs = strv_copy(p->tmpfs);
	d->hidden = strv_copy(p->hidden);
	d->etc = strv_copy(p->etc);
	d->hostname = str_copy(p->hostname);
	d->image = str_copy(p->image);
	d->env = strv_copy(p->env);
	d->network.allow = strv_copy(p->network.allow);
	d->network.credentials = strv_copy(p->network.credentials);
	return d;
}

void pdk_policy_free(struct pdk_policy *p)
{
	if (p == NULL)
		return;
	free(p->name);
	free(p->source);
	free(p->description);
	free(p->workspace.path);
	pdk_strv_free(p->read_only);
	pdk_strv_free(p->read_write);
	pdk_strv_free(p->tmpfs);
	pdk_strv_free(p->hidden);
	pdk_strv_free(p->etc);
	free(p->hostname);
	free(p->image);
	pdk_strv_free(p->env);
	pdk_strv_free(p->network.allow);
	pdk_strv_free(p->network.credentials);
	free(p);
}

_Static_assert(sizeof(enum pdk_ws_mode) == sizeof(int), "enum members are stored as int");
_Static_assert(sizeof(enum pdk_net_mode) == sizeof(int), "enum members are stored as int");
_Static_assert(sizeof(enum pdk_ws_sync) == sizeof(int), "enum members are stored as int");

static const struct pdk__policy_word ws_mode_words[] = {
	{"overlay", PDK_WS_OVERLAY}, {"rw", PDK_WS_RW},     {"ro", PDK_WS_RO},
	{"tmpfs", PDK_WS_TMPFS},     {"none", PDK_WS_NONE},
};
static const struct pdk__policy_word ws_sync_words[] = {
	{"end", PDK_WS_SYNC_END},
	{"always", PDK_WS_SYNC_ALWAYS},
};
static const struct pdk__policy_word net_mode_words[] = {
	{"none", PDK_NET_NONE},
	{"host", PDK_NET_HOST},
	{"allowlist", PDK_NET_ALLOWLIST},
};
const struct pdk__policy_enum pdk__policy_ws_modes = {ws_mode_words, PDK_ARRAY_SIZE(ws_mode_words)};
const struct pdk__policy_enum pdk__policy_ws_syncs = {ws_sync_words, PDK_ARRAY_SIZE(ws_sync_words)};
const struct pdk__policy_enum pdk__policy_net_modes = {net_mode_words,
						       PDK_ARRAY_SIZE(net_mode_words)};

const char *pdk__policy_enum_name(const struct pdk__policy_enum *e, int value)
{
	for (size_t i = 0; i < e->n; i++)
		if (e->words[i].value == value)
			return e->words[i].name;
	return NULL;
}

bool pdk__policy_enum_value(const struct pdk__policy_enum *e, const char *name, int *value)
{
	for (size_t i = 0; i < e->n; i++) {
		if (strcmp(e->words[i].name, name) == 0) {
			*value = e->words[i].value;
			return true;
		}
	}
	return false;
}

const char *pdk_policy_ws_mode_name(enum pdk_ws_mode m)
{
	const char *name = pdk__policy_enum_name(&pdk__policy_ws_modes, (int)m);

	return name != NULL ? name : "unknown";
}

const char *pdk_policy_net_mode_name(enum pdk_net_mode m)
{
	const char *name = pdk__policy_enum_name(&pdk__policy_net_modes, (int)m);

	return name != NULL ? name : "unknown";
}
