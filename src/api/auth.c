/*
 * auth.c - who is asking, and whether they may: the unix socket's peer
 * (SO_PEERCRED and the peer's namespaces), admin and sandbox bearer tokens
 * (checked by the control layer), and a sandbox token's scope (its sandbox
 * and operations). Every refusal is recorded as an auth.failure event.
 */
#include "common.h"
#include "api-internal.h"
#include "base.h"

#include <event2/bufferevent.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/*
 * Whether the unix socket's peer is the daemon's owner: NULL when it is, else why not
 * (a new string, for the auth.failure event and the 401 answer). *uid gets the peer's uid.
 */
static char *peer_not_owner(struct pdk_api *a, struct evhttp_request *req, uid_t *uid)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = bev ? bufferevent_getfd(bev) : -1;
	int rc;

	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return pdk_xstrdup("a bearer token is needed");
	*uid = cred.uid;
	/* SECURITY: the socket is 0600, and the peer is checked again: the daemon's uid or root. */
	if (cred.uid != a->uid && cred.uid != 0)
		return pdk_xstrdup("a bearer token is needed");
	/*
	 * SECURITY: a sandboxed process has the uid of the sandbox's owner (mapped 1:1), so
	 * the uid makes no admin unless the peer also lives in the daemon's own user and pid
	 * namespaces, which no sandbox does (base/peer.h says how that is read without a race
	 * on the pid). A peer that cannot be placed is treated as a sandbox.
	 */
	rc = pdk_http_peer_in_our_namespaces(a->unix_guards, req, &err);
	if (rc < 0)
		return pdk_xasprintf("a bearer token is needed: the socket's peer cannot be placed "
				     "in the daemon's namespaces (%s)",
				     err->msg);
	if (rc == 0)
		return pdk_xstrdup(
			"a bearer token is needed: the socket's peer is in another user "
			"or pid namespace than the daemon (a sandbox), and its uid makes "
			"no admin");
	return NULL;
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
		uid_t uid = 0;
		_cleanup_free_ char *why = unix_peer ? peer_not_owner(r->a, r->req, &uid)
						     : pdk_xstrdup("a bearer token is needed");

		if (why == NULL) {
			r->auth.admin = true;
			/* The records name the socket's owner so (an approval's approver). */
			(void)snprintf(r->auth.name, sizeof(r->auth.name), "unix:%u",
				       (unsigned)uid);
			return 0;
		}
		pdk__api_auth_failed(r, 401, why);
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

/* Whether `method` may change something (every method but GET and HEAD). */
static bool mutating(enum evhttp_cmd_type method)
{
	return method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD;
}

/* Whether `origin` is "http://" or "https://" followed by `host` (hosts are case-blind). */
static bool same_origin(const char *origin, const char *host)
{
	const char *rest = NULL;

	if (strncmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	return rest != NULL && host != NULL && host[0] != '\0' && strcasecmp(rest, host) == 0;
}

int pdk__api_origin_check(struct pdk_route *r)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(r->req);
	const char *origin = evhttp_find_header(h, "Origin");
	const char *host = evhttp_find_header(h, "Host");
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(r->req));

	/*
	 * SECURITY: a browser sends Origin with every cross-site POST, PUT and
	 * DELETE, and a page of another site could otherwise make a logged-in
	 * operator's browser kill or change sandboxes. Only the API's own page
	 * (an Origin naming the host and port of the request's Host) may change
	 * anything; a client that sends no Origin (CLI, SDKs) is not a browser.
	 */
	if (!mutating(r->method) || origin == NULL || same_origin(origin, host))
		return 0;
	pdk_ctl_event(r->a->ctl, "daemon", NULL, "auth.failure",
		      json_pack("{s:s, s:s, s:s, s:s}", "reason", "foreign origin", "method",
				"other", "path", path ? path : "", "origin", origin));
	pdk_http_error(r->req, 403, "forbidden", "Origin",
		       "origin '%s' may not change anything here: a mutating request's Origin "
		       "must be this API's own, 'http://%s' (or https); send no Origin "
		       "header from a client that is not a browser page",
		       origin, host ? host : "");
	return -1;
}

bool pdk_api_admin(struct pdk_api *a, struct evhttp_request *req, bool unix_peer)
{
	struct pdk_route r = {.a = a, .req = req, .method = evhttp_request_get_command(req)};

	return pdk__api_authenticate(&r, unix_peer) == 0 && pdk__api_allowed(&r, NULL, 0);
}
