/*
 * e2b.c - the E2B front door's object and its first decision: which of
 * envd, the native API or E2B's control plane a request is for.
 */
#include "common.h"
#include "e2b-internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct pdk_e2b *pdk_e2b_new(const struct pdk_e2b_opts *o)
{
	struct pdk_e2b *e = pdk_xcalloc(1, sizeof(*e));

	e->ctl = o->ctl;
	e->base = o->base;
	e->max_body = o->max_body;
	e->log = o->log;
	e->domain = o->domain != NULL ? pdk_xstrdup(o->domain) : NULL;
	LIST_INIT(&e->calls);
	return e;
}

/* The host part of HOST[:PORT]: its length. */
static size_t host_len(const char *s)
{
	const char *colon = strchr(s, ':');

	return colon != NULL ? (size_t)(colon - s) : strlen(s);
}

bool pdk_e2b_domain_ok(const char *domain)
{
	size_t n = host_len(domain);
	uint64_t port;

	if (n == 0 || n > 253 || domain[0] == '.' || domain[n - 1] == '.' ||
	    strstr(domain, "..") != NULL)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)domain[i]) && !isdigit((unsigned char)domain[i]) &&
		    domain[i] != '-' && domain[i] != '.')
			return false;
	return domain[n] == '\0' || (pdk_parse_u64(domain + n + 1, 65535, &port) == 0 && port > 0);
}

/*
 * The port and sandbox a Host of PORT-SANDBOXID.DOMAIN names (the door's
 * domain; the ports after ':' are not compared: a proxy in front may
 * change them). -1 when the Host is not one of those.
 */
static int host_target(const struct pdk_e2b *e, struct evhttp_request *req, char *sandbox,
		       size_t size, uint64_t *port)
{
	const char *host = evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
	const char *dash, *dot;
	char num[8];

	if (e->domain == NULL || host == NULL)
		return -1;
	dash = strchr(host, '-');
	dot = strchr(host, '.');
	if (dash == NULL || dot == NULL || dash > dot || (size_t)(dash - host) >= sizeof(num) ||
	    (size_t)(dot - dash - 1) >= size)
		return -1;
	if (host_len(dot + 1) != host_len(e->domain) ||
	    strncasecmp(dot + 1, e->domain, host_len(e->domain)) != 0)
		return -1;
	memcpy(num, host, (size_t)(dash - host));
	num[dash - host] = '\0';
	memcpy(sandbox, dash + 1, (size_t)(dot - dash - 1));
	sandbox[dot - dash - 1] = '\0';
	if (pdk_parse_u64(num, 65535, port) < 0 || *port == 0 || !pdk_ctl_name_ok(sandbox))
		return -1;
	return 0;
}

/*
 * A request for PORT-SANDBOXID.DOMAIN gets the two headers that name the
 * same (unless it sent E2b-Sandbox-Id itself): from there on, it is served
 * and authenticated as every other request for that sandbox's port.
 */
static void host_to_headers(const struct pdk_e2b *e, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	char sandbox[128], port[8];
	uint64_t p;

	if (evhttp_find_header(h, "E2b-Sandbox-Id") != NULL ||
	    host_target(e, req, sandbox, sizeof(sandbox), &p) < 0)
		return;
	(void)snprintf(port, sizeof(port), "%u", (unsigned)p);
	evhttp_remove_header(h, "E2b-Sandbox-Port");
	evhttp_add_header(h, "E2b-Sandbox-Id", sandbox);
	evhttp_add_header(h, "E2b-Sandbox-Port", port);
}

bool pdk_e2b_addressed(const struct pdk_e2b *e, struct evhttp_request *req)
{
	char sandbox[128];
	uint64_t port;

	return evhttp_find_header(evhttp_request_get_input_headers(req), "E2b-Sandbox-Id") !=
		       NULL ||
	       host_target(e, req, sandbox, sizeof(sandbox), &port) == 0;
}

bool pdk_e2b_wants(const struct pdk_e2b *e, struct evhttp_request *req)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

	if (pdk_e2b_addressed(e, req))
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
	host_to_headers(e, req);
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
	free(e->domain);
	free(e);
}
