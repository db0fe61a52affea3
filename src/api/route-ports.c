/*
 * route-ports.c - ports forwarded into a sandbox:
 *   POST   /v1/sandboxes/{id}/ports         {"port":N[,"host_port":M]}
 *   GET    /v1/sandboxes/{id}/ports
 *   DELETE /v1/sandboxes/{id}/ports/{port}
 * Opening and closing need the exec scope (reaching a server the
 * sandbox's processes run is acting with them), listing the read scope; a
 * sandbox token reaches only its own sandbox's ports.
 */
#include "common.h"
#include "base.h"
#include "api-internal.h"

#include <string.h>

/* Who asked, for the audit record. */
static const char *who(const struct pdk_route *r)
{
	return r->auth.admin ? "admin" : "sandbox token";
}

static json_t *port_json(const struct pdk_ctl_port *p)
{
	_cleanup_free_ char *addr = pdk_xasprintf("127.0.0.1:%u", (unsigned)p->host_port);

	return json_pack("{s:i, s:s, s:i, s:s, s:i}", "port", (int)p->port, "host", "127.0.0.1",
			 "host_port", (int)p->host_port, "address", addr, "connections",
			 (int)p->connections);
}

/* A member that is absent (0 in *out) or a number from `min` to 65535. */
static bool port_member(json_t *body, const char *key, unsigned min, uint16_t *out)
{
	json_t *v = json_object_get(body, key);

	*out = 0;
	if (v == NULL)
		return min == 0;
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
	    json_integer_value(v) > 65535)
		return false;
	*out = (uint16_t)json_integer_value(v);
	return true;
}

static void ports_open(struct pdk_route *r, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *body = NULL;
	struct pdk_ctl_port p;
	uint16_t port, host_port;

	if (pdk__route_json_body(r) < 0)
		return;
	body = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(body) || !port_member(body, "port", 1, &port)) {
		pdk_http_error(r->req, 400, "bad_request", "port",
			       "'port' must be a number from 1 to 65535: the sandbox's port");
		return;
	}
	if (!port_member(body, "host_port", 0, &host_port)) {
		pdk_http_error(r->req, 400, "bad_request", "host_port",
			       "'host_port' must be a number from 1 to 65535, or left out");
		return;
	}
	if (pdk_ctl_port_open(sb, port, host_port, who(r), &p, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	pdk_http_json(r->req, 200, port_json(&p));
}

static void ports_list(struct pdk_route *r, struct pdk_ctl_sb *sb)
{
	struct pdk_ctl_port ports[PDK_CTL_PORTS_MAX];
	size_t n = pdk_ctl_ports(sb, ports, PDK_ARRAY_SIZE(ports));
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, port_json(&ports[i]));
	pdk_http_json(r->req, 200, json_pack("{s:o}", "ports", a));
}

static void ports_close(struct pdk_route *r, struct pdk_ctl_sb *sb)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	uint64_t port;

	if (pdk_parse_u64(r->segs[3], 65535, &port) < 0 || port == 0) {
		pdk_http_error(r->req, 404, "not_found", "port",
			       "no port '%s' in this sandbox: a port is a number from 1 to 65535",
			       r->segs[3]);
		return;
	}
	if (pdk_ctl_port_close(sb, (uint16_t)port, who(r), &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	pdk_http_json(r->req, 200, json_pack("{s:i, s:b}", "port", (int)port, "closed", 1));
}

void pdk__route_ports(struct pdk_route *r, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	bool get = r->method == EVHTTP_REQ_GET;
	bool post = r->method == EVHTTP_REQ_POST;
	bool del = r->method == EVHTTP_REQ_DELETE;
	struct pdk_ctl_sb *sb;

	if (!((r->nsegs == 3 && (get || post)) || (r->nsegs == 4 && del))) {
		pdk_http_error(r->req, 404, "not_found", NULL, "no such route");
		return;
	}
	/* SECURITY: a sandbox token opens, closes and lists its own sandbox's ports only. */
	if (!pdk__api_allowed(r, id, get ? PDK_TOKEN_OP_READ : PDK_TOKEN_OP_EXEC))
		return;
	if (pdk_ctl_find(r->a->ctl, id, PDK_CTL_FIND_LIVE, &sb, &err) < 0) {
		pdk_api_error(r->req, err);
		return;
	}
	if (post)
		ports_open(r, sb);
	else if (get)
		ports_list(r, sb);
	else
		ports_close(r, sb);
}
