/*
 * e2b.c - the E2B front door's object and its first decision: which of
 * envd, the native API or E2B's control plane a request is for.
 */
#include "common.h"
#include "e2b-internal.h"

#include <string.h>

struct pdk_e2b *pdk_e2b_new(const struct pdk_e2b_opts *o)
{
	struct pdk_e2b *e = pdk_xcalloc(1, sizeof(*e));

	e->ctl = o->ctl;
	e->base = o->base;
	e->max_body = o->max_body;
	e->log = o->log;
	LIST_INIT(&e->calls);
	return e;
}

bool pdk_e2b_wants(struct evhttp_request *req)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

	if (evhttp_find_header(evhttp_request_get_input_headers(req), "E2b-Sandbox-Id") != NULL)
		return true;
	/* E2B's control plane has no route under /v1/: that prefix is the native API's. */
	return path == NULL || strncmp(path, "/v1/", 4) != 0;
}

void pdk_e2b_handle(struct pdk_e2b *e, struct evhttp_request *req)
{
	if (e->closing) {
		pdk__e2b_plane_fail(req, 503, "the daemon is shutting down");
		return;
	}
	if (evhttp_find_header(evhttp_request_get_input_headers(req), "E2b-Sandbox-Id") != NULL)
		pdk__e2b_envd(e, req);
	else
		pdk__e2b_plane(e, req);
}

void pdk_e2b_tick(struct pdk_e2b *e)
{
	pdk__e2b_connect_tick(e);
}

void pdk_e2b_close(struct pdk_e2b *e)
{
	e->closing = true;
	pdk__e2b_connect_close_all(e);
}

void pdk_e2b_free(struct pdk_e2b *e)
{
	if (e == NULL)
		return;
	pdk_e2b_close(e);
	/*
	 * A handler whose control call never came back (the control object was
	 * freed first, and its callbacks ran with ENOTCONN) has finished its
	 * call by now; any left are dropped with the object.
	 */
	while (!LIST_EMPTY(&e->calls)) {
		struct pdk__e2b_call *c = LIST_FIRST(&e->calls);

		c->finished = true;
		pdk__e2b_end(c, NULL);
	}
	pdk__e2b_interps_free(e);
	free(e);
}
