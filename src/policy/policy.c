/*
 * policy.c - struct pdk_policy itself: copies, freeing, the names of its
 * modes. Reading a profile into one is policy-load.c (with the tree,
 * schema and report files it uses), writing one back is policy-dump.c;
 * policy-internal.h says how they fit.
 */
#include "common.h"
#include "base.h"
#include "policy.h"

#include <stdlib.h>

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
	pdk_strv_free(p->env);
	pdk_strv_free(p->network.allow);
	pdk_strv_free(p->network.credentials);
	free(p);
}

const char *pdk_policy_ws_mode_name(enum pdk_ws_mode m)
{
	switch (m) {
	case PDK_WS_RW:
		return "rw";
	case PDK_WS_RO:
		return "ro";
	case PDK_WS_NONE:
		return "none";
	case PDK_WS_OVERLAY:
		return "overlay";
	case PDK_WS_TMPFS:
		return "tmpfs";
	default:
		return "unknown";
	}
}

const char *pdk_policy_net_mode_name(enum pdk_net_mode m)
{
	switch (m) {
	case PDK_NET_NONE:
		return "none";
	case PDK_NET_HOST:
		return "host";
	case PDK_NET_ALLOWLIST:
		return "allowlist";
	default:
		return "unknown";
	}
}
