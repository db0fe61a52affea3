/*
 * e2b.h - the E2B-compatible front door (docs/e2b.md, docs/internals/e2b.md):
 * E2B's own SDKs, pointed at `paddock serve` with E2B_API_URL and
 * E2B_SANDBOX_URL, drive paddock sandboxes unchanged.
 *
 * One listener serves three protocols. A request that carries the
 * `E2b-Sandbox-Id` header is for a sandbox's envd (its `E2b-Sandbox-Port`
 * says which port of the sandbox): Connect calls (filesystem.Filesystem,
 * process.Process), GET/POST /files and GET /health. A request under /v1/
 * is the native REST API's (api.h). Any other request is E2B's control
 * plane (/sandboxes, /v2/sandboxes, ...), authenticated by `X-API-KEY`.
 *
 * Like the REST API, this layer translates and decides nothing: every
 * operation is a control call (control.h), and every control error becomes
 * an E2B error body or a Connect error in one place each. It also holds the
 * Connect protocol (HTTP/1.1, JSON codec): unary calls, server streams with
 * enveloped frames and the end-stream frame, Connect-Timeout-Ms, and
 * keepalive messages on idle streams.
 *
 * Stands on control/ and http/. Every call runs on the loop's thread.
 */
#ifndef PDK_E2B_H
#define PDK_E2B_H

#include "common.h"
#include "base.h"
#include "control.h"
#include "http.h"

/* The port E2B's SDKs address envd on (E2b-Sandbox-Port). */
#define PDK_E2B_ENVD_PORT     49983
#define PDK_E2B_ENVD_PORT_STR "49983"
/* The code interpreter's port (`@e2b/code-interpreter`): paddock's own server runs there. */
#define PDK_E2B_INTERP_PORT     49999
#define PDK_E2B_INTERP_PORT_STR "49999"
/*
 * The envd version the control plane announces (envdVersion): the SDKs pick
 * their wire by it. 0.5.7: users by Authorization (0.4.0), CloseStdin
 * (0.5.2), octet-stream and gzip uploads (0.5.7).
 */
#define PDK_E2B_ENVD_VERSION "0.5.7"

struct pdk_e2b;

struct pdk_e2b_opts {
	struct pdk_ctl *ctl;     /* borrowed; outlives the object */
	struct event_base *base; /* the loop (borrowed) */
	uint64_t max_body;       /* the largest request body (files) */
	/*
	 * E2B's sandbox domain (copied; NULL: none): the create and connect
	 * answers carry it as `domain`, and a request whose Host is
	 * PORT-SANDBOXID.DOMAIN is for that port of that sandbox, as if it had
	 * sent E2b-Sandbox-Id and E2b-Sandbox-Port (sbx.getHost(port)).
	 */
	const char *domain;
	const struct pdk_log *log; /* borrowed; NULL: nowhere */
};

/* A new E2B front door (caller frees with pdk_e2b_free()). Never NULL. */
struct pdk_e2b *pdk_e2b_new(const struct pdk_e2b_opts *opts);

/*
 * Whether `req` is this front door's: it carries E2b-Sandbox-Id, its Host
 * is PORT-SANDBOXID.DOMAIN of the door's domain, or its path is not under
 * /v1/ (the native API's).
 */
bool pdk_e2b_wants(const struct pdk_e2b *e, struct evhttp_request *req);

/*
 * Whether `req` is addressed to a sandbox: it carries E2b-Sandbox-Id, or its
 * Host is PORT-SANDBOXID.DOMAIN of the door's domain. Such a request is the
 * sandbox's whatever its path (a path of the daemon's own pages included).
 */
bool pdk_e2b_addressed(const struct pdk_e2b *e, struct evhttp_request *req);

/*
 * Whether `domain` may be the door's: HOST or HOST:PORT, HOST of
 * dot-separated labels of lowercase letters, digits and '-'.
 */
bool pdk_e2b_domain_ok(const char *domain);

/*
 * Answer one request: now, or later from a control callback. The caller has
 * already let the request guard answer its stand-ins.
 */
void pdk_e2b_handle(struct pdk_e2b *e, struct evhttp_request *req);

/* Once a second: keepalives on idle Connect streams. */
void pdk_e2b_tick(struct pdk_e2b *e);

/* End every Connect stream (shutdown): each gets an "unavailable" end-stream frame. */
void pdk_e2b_close(struct pdk_e2b *e);

/* Free the object (after pdk_e2b_close() and the control object's end). NULL-safe. */
void pdk_e2b_free(struct pdk_e2b *e);

/* ---- the Connect protocol's framing (connect.c), exposed for the fuzz target and tests ---- */

/* The largest Connect message accepted (a request; an envelope's length past it is refused). */
#define PDK_E2B_CONNECT_MSG_MAX (4u << 20)
/* Envelope flags: a compressed message (refused), the end-stream frame. */
#define PDK_E2B_CONNECT_FLAG_COMPRESSED 0x01
#define PDK_E2B_CONNECT_FLAG_END        0x02

/*
 * The one message of a server-streaming request body: exactly one envelope
 * (flags 0, a 4-byte big-endian length, that many bytes of a JSON object)
 * and nothing after it. *msg gets the object (caller decrefs). -EINVAL
 * (field "body") for a short or trailing frame, a flag set, or a message
 * that is not a JSON object; -E2BIG past `max` bytes.
 */
PDK_MUST_CHECK int pdk_e2b_connect_unframe(const char *data, size_t len, size_t max, json_t **msg,
					   struct pdk_error **err);

/*
 * A unary request body: a JSON object (an empty body is {}). *msg as above;
 * -EINVAL (field "body") when it is not an object.
 */
PDK_MUST_CHECK int pdk_e2b_connect_unary_msg(const char *data, size_t len, json_t **msg,
					     struct pdk_error **err);

/*
 * One envelope with `flags` holding `msg` (borrowed), serialised compact:
 * a new buffer (caller frees) of *len bytes.
 */
char *pdk_e2b_connect_frame(unsigned flags, const json_t *msg, size_t *len);

/*
 * The Connect-Timeout-Ms header's value: 1 to 10 ASCII digits, more than
 * 0. -EINVAL (field "Connect-Timeout-Ms") otherwise.
 */
PDK_MUST_CHECK int pdk_e2b_connect_timeout(const char *value, uint64_t *ms, struct pdk_error **err);

/*
 * The one mapping from a control error's status (control.h) to a Connect
 * code and the HTTP status of a unary error: ENOENT not_found 404, EINVAL
 * and ENOEXEC invalid_argument 400, EEXIST already_exists 409, EALREADY
 * failed_precondition 400, EBUSY aborted 409, EDQUOT and E2BIG
 * resource_exhausted 429, EACCES and EPERM permission_denied 403,
 * ENOTCONN unavailable 503, ETIMEDOUT deadline_exceeded 504, ECANCELED
 * canceled 499, ENOSYS unimplemented 501, EKEYREJECTED unauthenticated 401,
 * anything else internal 500.
 */
const char *pdk_e2b_connect_code(int status, int *http_status);

/* ---- multipart/form-data (multipart.c), exposed for the fuzz target and tests ---- */

/* One part of a multipart body: every pointer is into the body (borrowed), not terminated. */
struct pdk_e2b_part {
	const char *name, *filename; /* filename NULL: none */
	size_t name_len, filename_len;
	const char *data;
	size_t len;
};

/*
 * The parts of `body` (`len` bytes) under `content_type`'s boundary, at most
 * `max_parts` of them into parts[] (*n how many). -EINVAL (field
 * "Content-Type" or "body") for no boundary, a malformed delimiter or part,
 * a part without a name or that does not end; -E2BIG past `max_parts`.
 */
PDK_MUST_CHECK int pdk_e2b_multipart_parse(const char *content_type, const char *body, size_t len,
					   struct pdk_e2b_part *parts, size_t max_parts, size_t *n,
					   struct pdk_error **err);

#endif
