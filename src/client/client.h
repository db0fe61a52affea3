/*
 * client.h - a small blocking HTTP/1.1 client for the daemon's API
 * (`paddock serve`, docs/api.yaml): over its unix socket or over TCP with a
 * bearer token. Responses are parsed with libhttp-parser (fixed-length,
 * chunked and close-delimited bodies), JSON goes through jansson, and
 * Server-Sent Events are split by a small incremental parser.
 *
 * One struct pdk_client holds one connection at a time and keeps it open
 * between requests when the daemon allows (keep-alive). It is not
 * thread-safe; use one per thread, or two when a stream must stay open
 * while other requests are made (paddock attach).
 *
 * Errors: transport failures carry the errno of the failed call; a 4xx or
 * 5xx answer with the daemon's error object becomes a pdk_error whose
 * message is "CODE: MESSAGE (field FIELD)" and whose status is mapped from
 * the code (pdk_client_status_of_code()).
 *
 * Layer contract: stands on base/ alone; it knows the API's wire, not the
 * daemon's code. It reads no environment: pdk_client_opts_from_env() takes
 * the one a front end hands it.
 */
#ifndef PDK_CLIENT_H
#define PDK_CLIENT_H

#include "common.h"
#include "base.h"

#include <jansson.h>
#include <sys/types.h>

/* Where to reach the daemon (pdk_client_opts_from_env() fills what the caller left NULL). */
struct pdk_client_opts {
	const char *socket;      /* unix socket path (NULL: RUNDIR/paddock.sock) */
	const char *url;         /* http://HOST:PORT[/PREFIX]; wins over socket */
	const char *token;       /* bearer token, or NULL */
	const char *runtime_dir; /* RUNDIR, for the default socket */
};

/*
 * Fill the fields the caller left NULL or empty from `envp` (a front end's
 * environment): url from PADDOCK_URL (only when no socket was given),
 * socket from PADDOCK_SOCKET, token from PADDOCK_TOKEN. The strings are
 * borrowed from envp.
 */
void pdk_client_opts_from_env(struct pdk_client_opts *o, char *const *envp);

/* Largest response body collected in memory (a streamed body has no cap). */
#define PDK_CLIENT_BODY_MAX ((size_t)64 << 20)
/* Largest SSE event (its data lines together). */
#define PDK_CLIENT_SSE_MAX ((size_t)16 << 20)

/* RUNDIR/paddock.sock. Caller frees. */
char *pdk_client_default_socket(const char *runtime_dir);

/*
 * A client for `o`. Nothing is connected yet. NULL + *err (EINVAL) when
 * the URL is not http://IP-or-localhost:PORT, the token holds control
 * characters, or neither a URL, a socket nor a runtime directory is given.
 */
struct pdk_client *pdk_client_new(const struct pdk_client_opts *o, struct pdk_error **err);
/* Close the connection and free. NULL-safe. */
void pdk_client_free(struct pdk_client *c);

/* "unix:PATH" or "http://HOST:PORT": for messages. Borrowed. */
const char *pdk_client_endpoint(const struct pdk_client *c);

/* Called with each piece of a streamed response body (de-chunked). Nonzero stops the request. */
typedef int (*pdk_client_data_cb)(void *ud, const char *data, size_t len);
/*
 * Called with each complete Server-Sent Event: its type ("message" when
 * none was given), its id (NULL when none), and its data (the data lines
 * joined by "\n", NUL-terminated, len bytes). Nonzero stops the request.
 */
typedef pdk_sse_cb pdk_client_sse_cb; /* base/sse.h parses the stream */

struct pdk_client_req {
	const char *method;       /* "GET", "POST", ... */
	const char *path;         /* "/v1/..." with an escaped query; the URL's prefix is added */
	const char *content_type; /* of the body; NULL when there is none */
	const void *body;         /* borrowed */
	size_t body_len;
	const char *accept;          /* Accept field, or NULL */
	const char *idempotency_key; /* Idempotency-Key field, or NULL */
	/*
	 * A 2xx body goes to on_data, or is split into events for on_sse when
	 * that is set, instead of being collected. Error bodies are always
	 * collected (to name the daemon's error).
	 */
	pdk_client_data_cb on_data;
	pdk_client_sse_cb on_sse;
	void *ud;
	/*
	 * > 0: give up with -ETIMEDOUT when the daemon sends nothing for this
	 * many milliseconds (0: wait as long as it takes).
	 */
	int idle_ms;
};

struct pdk_client_resp {
	int status;         /* HTTP status */
	char *content_type; /* or NULL; owned */
	char *body;         /* collected body, NUL-terminated; owned (NULL when streamed) */
	size_t body_len;
};

/* Free the contents of a response. */
void pdk_client_resp_release(struct pdk_client_resp *r);

/*
 * Send `req` and read the whole response (streaming its body to the
 * callbacks when set). Any HTTP status is a success here: resp->status says
 * which. A connection kept from an earlier request that turns out closed
 * is replaced once, when not a byte of the answer came. 0 or negative +
 * *err (transport or protocol error, or a callback stopped it: -ECANCELED).
 */
PDK_MUST_CHECK int pdk_client_request(struct pdk_client *c, const struct pdk_client_req *req,
				      struct pdk_client_resp *resp, struct pdk_error **err);

/*
 * A JSON call: `body` (borrowed; NULL for none) is sent as
 * application/json, a 2xx answer's JSON object is returned in *out (caller
 * owns; may be NULL when out is NULL) and its status in *status (may be
 * NULL). A non-2xx answer is an error naming the daemon's code, message
 * and field. 0 or negative + *err.
 */
PDK_MUST_CHECK int pdk_client_json(struct pdk_client *c, const char *method, const char *path,
				   json_t *body, json_t **out, int *status, struct pdk_error **err);

/*
 * Turn a non-2xx response into *err: "CODE: MESSAGE (field FIELD)" from the
 * daemon's error object, else "HTTP STATUS" and the start of the body.
 * Returns the negative status.
 */
int pdk_client_error_from(const struct pdk_client_resp *r, struct pdk_error **err);

/* The errno a daemon error code stands for (not_found -> ENOENT, ...); EIO if unknown. */
int pdk_client_status_of_code(const char *code);

/* Percent-escape `s` for a query value (RFC 3986 unreserved kept). Caller frees. */
char *pdk_client_escape(const char *s);

/* ---- internals, exposed for the unit tests and the fuzz target ---- */

/* An incremental HTTP/1.1 response parser (libhttp-parser underneath). */
struct pdk__client_parser;
/* head_request: the answer has no body whatever its fields say. */
struct pdk__client_parser *pdk__client_parser_new(bool head_request);
void pdk__client_parser_free(struct pdk__client_parser *p);
/*
 * Stream a 2xx body to on_data or on_sse (either may be NULL: collected).
 * Must be called before the first feed.
 */
void pdk__client_parser_set_sink(struct pdk__client_parser *p, pdk_client_data_cb on_data,
				 pdk_client_sse_cb on_sse, void *ud);
/*
 * Feed received bytes; len 0 means the peer closed. Returns 1 when the
 * response is complete, 0 when more is needed, or negative + *err
 * (malformed, too large, or -ECANCELED when a callback stopped it).
 */
PDK_MUST_CHECK int pdk__client_parser_feed(struct pdk__client_parser *p, const char *data,
					   size_t len, struct pdk_error **err);
/* After completion: move the response into *r; *keep_alive says if the connection may be reused. */
void pdk__client_parser_take(struct pdk__client_parser *p, struct pdk_client_resp *r,
			     bool *keep_alive);

#endif
