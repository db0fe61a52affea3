/*
 * api-internal.h - what the API's files share: the API object, one
 * request's routing context, and the functions one file offers the others.
 */
#ifndef PDK_API_INTERNAL_H
#define PDK_API_INTERNAL_H

#include "common.h"
#include "api.h"
#include "base.h"
#include "control.h"
#include "http.h"
#include "request.h"

#include <event2/keyvalq_struct.h>

struct pdk_api_sse;

struct pdk_api {
	struct pdk_ctl *ctl;
	struct event_base *base;
	uint64_t max_body;
	uid_t uid;
	struct pdk_http_guards *unix_guards; /* pdk_api_opts.unix_guards */
	unsigned ticks;                      /* pdk_api_tick() calls so far */
	struct pdk_api_sse *subscribers;     /* GET /v1/events streams */
};

/* One request while its handler runs (freed when it returns). */
struct pdk_route {
	struct pdk_api *a;
	struct evhttp_request *req;
	struct pdk_ctl_auth auth;
	enum evhttp_cmd_type method;
	char *segs[6]; /* path segments after /v1 */
	size_t nsegs;
	struct evkeyvalq query;
	char *body;
	size_t body_len;
};

/* ---- errors.c ---- */
/* 400 bad_request from a body validator's refusal. */
void pdk__api_bad_request(struct evhttp_request *req, const struct pdk_req_error *e);
/*
 * The status and error body of `err`, plus the lists of `details` (the
 * supervisor's error object, borrowed): "conflicts" and "refused".
 */
void pdk__api_error_details(struct evhttp_request *req, const struct pdk_error *err,
			    const json_t *details);

/* ---- auth.c ---- */
/* 0 and r->auth filled, or -1 after answering 401. */
int pdk__api_authenticate(struct pdk_route *r, bool unix_peer);
/* Admin, or a sandbox token for `id` (NULL: admins only) that carries `op`. Answers 403 otherwise.
 */
bool pdk__api_allowed(struct pdk_route *r, const char *id, unsigned op);
/*
 * The Origin rule of mutating requests (docs/daemon.md, Security): 0 when
 * the request is a GET or HEAD, carries no Origin, or one equal to
 * "http://" or "https://" and its Host; else -1 after recording an
 * auth.failure and answering 403 (field Origin).
 */
int pdk__api_origin_check(struct pdk_route *r);
/* Record an auth.failure and answer `code` (401 or 403) with `why`. */
void pdk__api_auth_failed(struct pdk_route *r, int code, const char *why);

/* ---- render.c ---- */
/* The Sandbox object of a create, with its token. */
json_t *pdk__api_created_json(const struct pdk_ctl_created *c);
/* A command's end: exec_id, exit_code, signal, end, duration_ms. */
json_t *pdk__api_exit_json(const struct pdk_ctl_exit *e);
/* A captured stream: text (head, marker, tail), bytes, dropped, truncated, file. */
json_t *pdk__api_output_json(const struct pdk_ctl_output *o);
/* A streamed chunk: {"data": text} and "data_b64" when the bytes are not exact text. */
json_t *pdk__api_chunk_json(const char *buf, size_t n);

/* ---- routes.c ---- */
/* docs/api.yaml, embedded at build time (meson.build: src/tools/embed.py). */
extern const char pdk_openapi_yaml[];

/* The whole body (NUL-terminated), at most `max` bytes; -1 after answering 413. */
int pdk__route_body(struct pdk_route *r, size_t max);
/* A JSON body (at most 1 MiB); -1 after answering 413. */
int pdk__route_json_body(struct pdk_route *r);
/*
 * Whether a body validator (request.h) took the body: `rc` is what it
 * returned; a refusal is answered 400 with its error `e`, and false returned.
 */
bool pdk__route_valid(struct pdk_route *r, int rc, const struct pdk_req_error *e);
const char *pdk__route_query(struct pdk_route *r, const char *key);

/* ---- route-sandbox.c ---- */
/* /v1/sandboxes/{id}/... */
void pdk__route_sandbox_sub(struct pdk_route *r, const char *id);
/* GET and DELETE /v1/sandboxes/{id} */
void pdk__route_get(struct pdk_route *r, const char *id);
void pdk__route_delete(struct pdk_route *r, const char *id);

/* ---- route-exec.c ---- */
/* POST /v1/sandboxes/{id}/exec */
void pdk__route_exec(struct pdk_route *r, struct pdk_ctl_sb *sb);

/* ---- route-files.c ---- */
/* The files and archive routes of `sb` on `path`. */
void pdk__route_files(struct pdk_route *r, struct pdk_ctl_sb *sb, const char *what,
		      const char *path);

/* ---- route-events.c ---- */
/* GET /v1/events */
void pdk__route_events(struct pdk_route *r);
void pdk__sse_keepalive(struct pdk_api *a);
void pdk__sse_close_all(struct pdk_api *a);

/* ---- route-approvals.c ---- */
/* /v1/approvals[/{id}[/approve|/deny]]: admins only. */
void pdk__route_approvals(struct pdk_route *r);

/* ---- route-ports.c ---- */
/* /v1/sandboxes/{id}/ports[/{port}]: open, list, close a forwarded port. */
void pdk__route_ports(struct pdk_route *r, const char *id);

#endif
