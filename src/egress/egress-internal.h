/*
 * egress-internal.h - the request-head parser of the egress proxy
 * (egress-http.c), shared by the proxy (egress.c), its unit tests and
 * the fuzz target. Every byte it reads comes from the sandbox.
 */
#ifndef PDK_EGRESS_INTERNAL_H
#define PDK_EGRESS_INTERNAL_H

#include "common.h"
#include "egress.h"

#include <http_parser.h>
#include <sys/socket.h>

#define PDK__EGRESS_HEAD_MAX    16384 /* bytes of one request or response head */
#define PDK__EGRESS_HEADERS_MAX 64    /* header fields in one request */

/*
 * A scanner for placeholders in a request body: it is fed the body's
 * decoded bytes (chunk framing removed) in pieces of any size and finds a
 * needle even when it is split across pieces, keeping only the last
 * PDK__EGRESS_SCAN_MAX - 1 bytes seen. Needles are borrowed, 1 to
 * PDK__EGRESS_SCAN_MAX bytes each.
 */
#define PDK__EGRESS_SCAN_MAX     256
#define PDK__EGRESS_SCAN_NEEDLES 64

struct pdk__egress_scan {
	const char *needles[PDK__EGRESS_SCAN_NEEDLES];
	size_t lens[PDK__EGRESS_SCAN_NEEDLES];
	size_t n;
	size_t maxlen;                   /* the longest needle */
	char tail[PDK__EGRESS_SCAN_MAX]; /* the last maxlen - 1 bytes fed */
	size_t tail_len;
	ssize_t found; /* the index of the first needle found, or -1 */
};

/* Start a scan; needles longer than PDK__EGRESS_SCAN_MAX or beyond the count are an error (-1). */
int pdk__egress_scan_init(struct pdk__egress_scan *s, const char *const *needles, size_t n);

/* Feed bytes; true once a needle was found (s->found says which). */
bool pdk__egress_scan_feed(struct pdk__egress_scan *s, const char *data, size_t len);

struct pdk__egress_span {
	size_t off, len; /* into the buffer given to pdk__egress_head_parse() */
};

struct pdk__egress_head {
	http_parser p;
	const char *base; /* the buffer being parsed: spans are offsets into it */
	/* Set on error: the HTTP status to answer (400, 405, 431) and why (static text). */
	int status;
	const char *reason;
	/* Set when the head is complete. */
	bool connect;               /* CONNECT host:port (a tunnel) */
	bool msg_done;              /* no body follows (or it already ended) */
	bool keep_alive;            /* the client may send another request afterwards */
	char *host;                 /* normalized name, or the IP address's text (no brackets) */
	bool host_is_ip;            /* host is an IP literal: only IP rules can allow it */
	struct sockaddr_storage ip; /* host_is_ip: the address (port unset) */
	uint16_t port;
	struct pdk__egress_span url;
	struct pdk__egress_span path; /* path and query, or empty for "/" */
	struct pdk__egress_span names[PDK__EGRESS_HEADERS_MAX];
	struct pdk__egress_span values[PDK__EGRESS_HEADERS_MAX];
	size_t n_headers;
	const char *origin_host; /* origin form (an intercepted tunnel): its host; borrowed */
	uint16_t origin_port;
	/*
	 * Set by the caller before pdk__egress_head_upstream(): ask the upstream
	 * server to keep the connection open (no "Connection: close").
	 */
	bool upstream_keep_alive;
	/*
	 * Set by the caller after the head is complete: the body's decoded bytes
	 * are fed to this scanner by pdk__egress_body_feed() (borrowed; may be NULL).
	 */
	struct pdk__egress_scan *scan;
	bool expect_continue; /* the head has "Expect: 100-continue" */
	/*
	 * Set when the head is complete: the body's length from Content-Length
	 * (0 when there is no body), or UINT64_MAX when it is not known in
	 * advance (chunked).
	 */
	uint64_t body_len;
	bool in_value; /* parser state: the last callback was a header value */
	bool headers_done;
	bool too_many;
};

/*
 * Parse the request head at the start of data[0..len) from scratch (call
 * again with more bytes when it returns 0; the buffer must start at the
 * request). Returns the head's length (> 0) when complete, 0 when more
 * bytes are needed, -1 on an error (h->status and h->reason say which).
 * A head longer than PDK__EGRESS_HEAD_MAX is an error (431) as soon as that
 * many bytes arrived without its end. Release with pdk__egress_head_release().
 */
int pdk__egress_head_parse(struct pdk__egress_head *h, const char *data, size_t len);

/*
 * The same for a request inside an intercepted TLS tunnel to host:port
 * (borrowed for the head's life): the target must be in origin form
 * ("/path?query", a fragment is dropped), CONNECT is refused (405), and
 * h->host and h->port are the tunnel's, so a request cannot name another
 * host. The rebuilt head omits the port from Host when it is 443.
 */
int pdk__egress_head_parse_origin(struct pdk__egress_head *h, const char *data, size_t len,
				  const char *host, uint16_t port);

/*
 * Forward-parse request body bytes after a complete head: returns how many
 * of data[0..len) belong to this request's body (they are forwarded as
 * they are, chunk framing included), sets h->msg_done when the body ended,
 * or -1 on a malformed body. When h->scan is set, the body's content is fed
 * to it and the call stops right after the piece in which a needle was found.
 */
ssize_t pdk__egress_body_feed(struct pdk__egress_head *h, const char *data, size_t len);

/*
 * Changes to a head on its way upstream (credential injection): fields
 * named in `drop` are left out, every `from[i]` in the target and in field
 * values becomes `to[i]`, and each `extra` line ("Name: value", no CRLF) is
 * added. All borrowed.
 */
struct pdk__egress_rewrite {
	const char *const *drop;
	size_t n_drop;
	const char *const *from;
	const char *const *to;
	size_t n_swap;
	const char *const *extra;
	size_t n_extra;
};

/*
 * The head to send upstream for a plain HTTP request: origin-form target,
 * Host from the URL, hop-by-hop and Proxy-* fields removed, `rw` applied
 * (may be NULL), "Connection: close" unless h->upstream_keep_alive. `data` is the buffer the head
 * was parsed from. New string (caller frees), *len set; NULL (and h->status/reason set) when a
 * field holds bytes that must not be forwarded.
 */
char *pdk__egress_head_upstream(struct pdk__egress_head *h, const char *data,
				const struct pdk__egress_rewrite *rw, size_t *len);

void pdk__egress_head_release(struct pdk__egress_head *h);

/*
 * Response side: a parser that tells where one upstream response ends.
 * `head_request` is true for HEAD (no body in the response).
 */
struct pdk__egress_resp {
	http_parser p;
	bool head_request;
	bool done;
	bool keep_alive; /* the response lets the client send another request */
};

void pdk__egress_resp_init(struct pdk__egress_resp *r, bool head_request);
/*
 * Feed upstream bytes (len 0 = upstream EOF). Returns how many belong to
 * this response (forward them), r->done when it ended; -1 when malformed.
 */
ssize_t pdk__egress_resp_feed(struct pdk__egress_resp *r, const char *data, size_t len);

#endif
