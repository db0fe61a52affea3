/*
 * api.h - the REST API (docs/daemon.md, docs/api.yaml): one front door of
 * the control layer, over HTTP/1.1 with JSON bodies.
 *
 * The API translates: it authenticates the caller (the unix socket's peer,
 * admin tokens, sandbox tokens and their scopes), validates the request
 * (request.c: every body strictly, every field named in its error), calls
 * the control layer and renders what comes back. It decides nothing about
 * sandboxes. Every control error becomes an HTTP status and error body in
 * one place (pdk_api_http_status()). It also serves the embedded OpenAPI
 * document (GET /v1/openapi.yaml).
 *
 * Stands on control/ and http/. Every call runs on the loop's thread.
 */
#ifndef PDK_API_H
#define PDK_API_H

#include "common.h"
#include "base.h"
#include "control.h"
#include "http.h"

#include <sys/types.h>

struct pdk_api;

struct pdk_api_opts {
	struct pdk_ctl *ctl;     /* borrowed; outlives the API object */
	struct event_base *base; /* the loop (borrowed) */
	uint64_t max_body;       /* the largest request body (files, archives) */
	uid_t uid;               /* the unix socket's peers with this uid (or root) are admins */
	/* The unix socket's request guards (borrowed; NULL: none): its peers' checks keep there. */
	struct pdk_http_guards *unix_guards;
};

/* A new API object (caller frees with pdk_api_free()). Never NULL. */
struct pdk_api *pdk_api_new(const struct pdk_api_opts *opts);

/*
 * Answer one request: now, or later from a control callback. `unix_peer`:
 * it came over the unix socket (whose peer may be an admin without a token).
 * The caller has already let the request guard answer its stand-ins.
 */
void pdk_api_handle(struct pdk_api *a, struct evhttp_request *req, bool unix_peer);

/*
 * Whether `req` comes from an admin: the unix socket's owner (`unix_peer`),
 * or an admin bearer token. True, or false after answering 401 or 403
 * (recorded as auth.failure). For the endpoints a listener serves beside
 * the API (the MCP endpoint, /mcp), whose callers are the API's admins.
 */
bool pdk_api_admin(struct pdk_api *a, struct evhttp_request *req, bool unix_peer);

/* Once a second: every 15th call writes a keepalive to each event stream. */
void pdk_api_tick(struct pdk_api *a);

/* End every event stream (shutdown). */
void pdk_api_close(struct pdk_api *a);

/* Free the object (after pdk_api_close() and the control object's end). NULL-safe. */
void pdk_api_free(struct pdk_api *a);

/*
 * The one mapping from a control error's status (control.h) to the HTTP
 * status and the error body's code: ENOENT 404 not_found, EINVAL and
 * ENOEXEC 400 bad_request, EEXIST and EALREADY 409 conflict, EBUSY 409 busy,
 * E2BIG 413 too_large, EACCES and EPERM 403 forbidden, EDQUOT 429 limit,
 * ENOTCONN 503 unavailable, anything else 500 internal.
 */
int pdk_api_http_status(int status, const char **code);

/* Answer `req` with the error body of `err` (its message and field). */
void pdk_api_error(struct evhttp_request *req, const struct pdk_error *err);

#endif
