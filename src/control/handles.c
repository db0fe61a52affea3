/*
 * handles.c - handles a front door gives its clients for sandboxes, each
 * bound to one client's identity and expiring (control.h, "handles").
 */
#include "common.h"
#include "control-internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

struct pdk_ctl_handle {
	struct pdk_ctl_handle *next;
	char name[PDK_CTL_HANDLE_LEN + 1];
	char *id, *owner;
	uint64_t expires_ns; /* 0: with the control object */
};

static void handle_free(struct pdk_ctl_handle *h)
{
	free(h->id);
	free(h->owner);
	free(h);
}

/* Drop every expired handle: they are checked at each use, so none outlives its time. */
static void expire(struct pdk_ctl *c)
{
	uint64_t now = pdk_now_real_ns();

	for (struct pdk_ctl_handle **p = &c->handles; *p != NULL;) {
		struct pdk_ctl_handle *h = *p;

		if (h->expires_ns != 0 && now >= h->expires_ns) {
			*p = h->next;
			handle_free(h);
		} else {
			p = &h->next;
		}
	}
}

char *pdk_ctl_handle_new(struct pdk_ctl *c, const char *id, const char *owner, uint64_t expires_ns)
{
	struct pdk_ctl_handle *h = pdk_xcalloc(1, sizeof(*h));
	unsigned char r[16];

	/* SECURITY: a handle is a capability for its owner: 128 bits from the kernel's CSPRNG. */
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		pdk_bug("getrandom failed for a sandbox handle");
	memcpy(h->name, "sbx_", 4);
	for (size_t i = 0; i < sizeof(r); i++)
		(void)snprintf(h->name + 4 + 2 * i, 3, "%02x", r[i]);
	h->id = pdk_xstrdup(id);
	h->owner = pdk_xstrdup(owner);
	h->expires_ns = expires_ns;
	expire(c);
	h->next = c->handles;
	c->handles = h;
	return pdk_xstrdup(h->name);
}

static struct pdk_ctl_handle *find(struct pdk_ctl *c, const char *handle, const char *owner)
{
	expire(c);
	for (struct pdk_ctl_handle *h = c->handles; h != NULL; h = h->next)
		if (strcmp(h->name, handle) == 0 && strcmp(h->owner, owner) == 0)
			return h;
	return NULL;
}

int pdk_ctl_handle_resolve(struct pdk_ctl *c, const char *handle, const char *owner,
			   const char **id, struct pdk_error **err)
{
	struct pdk_ctl_handle *h = find(c, handle, owner);

	if (h == NULL)
		return pdk_error_set_field(err, ENOENT, "sandbox_id",
					   "no sandbox '%s' for this client (unknown, expired, "
					   "or destroyed): create one with sandbox_create",
					   handle);
	*id = h->id;
	return 0;
}

void pdk_ctl_handle_drop(struct pdk_ctl *c, const char *handle, const char *owner)
{
	for (struct pdk_ctl_handle **p = &c->handles; *p != NULL; p = &(*p)->next) {
		struct pdk_ctl_handle *h = *p;

		if (strcmp(h->name, handle) == 0 && strcmp(h->owner, owner) == 0) {
			*p = h->next;
			handle_free(h);
			return;
		}
	}
}

char **pdk_ctl_handles(struct pdk_ctl *c, const char *owner)
{
	char **v = NULL;

	expire(c);
	for (struct pdk_ctl_handle *h = c->handles; h != NULL; h = h->next)
		if (strcmp(h->owner, owner) == 0)
			pdk_strv_push_take(&v, pdk_xasprintf("%s=%s", h->name, h->id));
	return v;
}

void pdk__handles_free_all(struct pdk_ctl *c)
{
	while (c->handles != NULL) {
		struct pdk_ctl_handle *h = c->handles;

		c->handles = h->next;
		handle_free(h);
	}
}
