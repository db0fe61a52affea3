/*
 * auth.c - who is asking, and whether they may: the unix socket's peer
 * (SO_PEERCRED), admin and sandbox bearer tokens (checked by the control
 * layer), and a sandbox token's scope (its sandbox and operations). Every
 * refusal is recorded as an auth.failure event.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"

#include <event2/bufferevent.h>
#include <string.h>
#include <sys/socket.h>

static bool peer_is_owner(struct pdk_api *a, struct evhttp_request *req)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (bev == NULL ||
	    getsockopt(bufferevent_getfd(bev), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return false;
	/* SECURITY: the socket is 0600, and the peer is checked again: the daemon's uid or root. */
	return cred.uid == a->uid || cred.uid == 0;
}

void pdk__api_auth_failed(struct pdk_route *r, int code, const char *why)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(r->req));

	pdk_ctl_event(r->a->ctl, "daemon", NULL, "auth.failure",
		      json_pack("{s:s, s:s, s:s}", "reason", why, "method",
				r->method == EVHTTP_REQ_GET ? "GET" : "other", "path",
				path ? path : ""));
	pdk_http_error(r->req, code, code == 401 ? "unauthorized" : "forbidden", NULL, "%s", why);
}

int pdk__api_authenticate(struct pdk_route *r, bool unix_peer)
{
	const char *h =
		evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
	_cleanup_error_ struct pdk_error *err = NULL;

	memset(&r->auth, 0, sizeof(r->auth));
	if (h == NULL) {
		if (unix_peer && peer_is_owner(r->a, r->req)) {
			r->auth.admin = true;
			return 0;
		}
		pdk__api_auth_failed(r, 401, "a bearer token is needed");
		return -1;
	}
	if (strncmp(h, "Bearer ", 7) != 0 || strlen(h + 7) > PDK_TOKEN_MAX_LEN) {
		pdk__api_auth_failed(r, 401, "the Authorization header must be 'Bearer TOKEN'");
		return -1;
	}
	if (pdk_ctl_authenticate(r->a->ctl, h + 7, &r->auth, &err) < 0) {
		pdk__api_auth_failed(r, 401, err->msg);
		return -1;
	}
	return 0;
}

bool pdk__api_allowed(struct pdk_route *r, const char *id, unsigned op)
{
	if (r->auth.admin)
		return true;
	if (id == NULL) {
		pdk__api_auth_failed(r, 403, "this route needs an admin token");
		return false;
	}
	if (strcmp(r->auth.sb.sb, id) != 0) {
		pdk__api_auth_failed(r, 403, "the token belongs to another sandbox");
		return false;
	}
	if ((r->auth.sb.ops & op) == 0) {
		_cleanup_json_ json_t *names = pdk_token_ops_json(op);
		const char *name = json_string_value(json_array_get(names, 0));
		_cleanup_free_ char *why = pdk_xasprintf(
			"the token does not allow the '%s' operation", name ? name : "?");

		pdk__api_auth_failed(r, 403, why);
		return false;
	}
	return true;
}
