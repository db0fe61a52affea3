/*
 * egress-internal.h - what the files of the egress proxy share; nothing
 * outside src/egress/ includes it but the unit tests and the fuzz target.
 *
 * Two parts:
 *  - the request-head parser (egress-http.c), used by the proxy, its unit
 *    tests and the fuzz target. Every byte it reads comes from the sandbox;
 *  - the proxy's own state (struct pdk_egress, one struct pdk__egress_conn
 *    per accepted connection) and the functions its files call in each
 *    other, file by file (docs/internals/egress.md "Files").
 */
#ifndef PDK_EGRESS_INTERNAL_H
#define PDK_EGRESS_INTERNAL_H

#include "common.h"
#include "egress.h"

#include <http_parser.h>
#include <netinet/in.h>
#include <pthread.h>
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

/* Free what parsing allocated (the host) and zero the head, ready for the next request. */
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

/* Start on one response (nothing to free afterwards). */
void pdk__egress_resp_init(struct pdk__egress_resp *r, bool head_request);
/*
 * Feed upstream bytes (len 0 = upstream EOF). Returns how many belong to
 * this response (forward them), r->done when it ended; -1 when malformed.
 */
ssize_t pdk__egress_resp_feed(struct pdk__egress_resp *r, const char *data, size_t len);

/* ---- the proxy: its limits ---- */

#define PDK__EGRESS_HEAD_TIMEOUT_S  30  /* a client that sends no complete head is dropped */
#define PDK__EGRESS_IDLE_TIMEOUT_S  600 /* a tunnel or response with no traffic */
#define PDK__EGRESS_MAX_LOCAL_ADDRS 64
#define PDK__EGRESS_MAX_CANDIDATES  8 /* checked addresses of one name tried in turn */
/* Plain HTTP: bytes queued to one side before reading from the other pauses. */
#define PDK__EGRESS_FORWARD_HIGH (256 * 1024)
/* Request body bytes held (and scanned) before the request goes up. */
#define PDK__EGRESS_HOLD_MAX (1024 * 1024)
/* The answer to a CONNECT that is let through (a tunnel, or an interception). */
#define PDK__EGRESS_CONNECT_OK "HTTP/1.1 200 Connection established\r\n\r\n"

/* ---- the proxy: its state ---- */

/*
 * A connection's state:
 *   HEAD      reading a request head (pdk__egress_head_parse)
 *   BODY      holding a request body (up to PDK__EGRESS_HOLD_MAX) before it goes up
 *   RESOLVE   asynchronous DNS (evdns) for an allowed name
 *   CONNECT   connecting upstream to the one address that was checked
 *   TUNNEL    CONNECT: bytes both ways until either side ends
 *   FORWARD   plain HTTP: the body goes up, one response comes back
 *   CLOSING   the last bytes (an error answer) drain to the client
 */
enum pdk__egress_state {
	PDK__EGRESS_ST_HEAD,
	PDK__EGRESS_ST_BODY,
	PDK__EGRESS_ST_RESOLVE,
	PDK__EGRESS_ST_CONNECT,
	PDK__EGRESS_ST_TUNNEL,
	PDK__EGRESS_ST_FORWARD,
	PDK__EGRESS_ST_CLOSING,
};

/* libevent's types, without its headers. */
struct bufferevent;
struct evbuffer;
struct event;
struct event_base;
struct evconnlistener;
struct evdns_base;
struct evdns_getaddrinfo_request;
struct ssl_ctx_st;

struct pdk__egress_tunnel; /* egress-tunnel.c */
struct pdk__egress_secret; /* egress-cred.c */
struct pdk__egress_cred;   /* egress-cred.c */

/*
 * One accepted connection from the sandbox. Only the loop's thread touches
 * it; it is freed by pdk__egress_conn_free() alone.
 */
struct pdk__egress_conn {
	struct pdk_egress *e;
	struct pdk__egress_conn *prev, *next;
	struct bufferevent *client;
	struct bufferevent *up;
	enum pdk__egress_state state;
	struct pdk__egress_head head;
	char *up_head; /* plain HTTP: the rebuilt head, until it is sent */
	size_t up_head_len;
	struct pdk__egress_resp resp;
	struct evdns_getaddrinfo_request *dns;
	struct pdk__egress_tunnel *tun; /* PDK__EGRESS_ST_TUNNEL */
	const struct pdk_net_rule *rule;
	char addr[INET6_ADDRSTRLEN]; /* the address connected to */
	/* Addresses that passed the checks. */
	struct sockaddr_storage cand[PDK__EGRESS_MAX_CANDIDATES];
	size_t n_cand, next_cand;
	uint64_t t_start;
	uint64_t sent, received; /* bytes towards upstream / towards the client */
	bool answered;           /* bytes of a response reached the client */
	bool close_after;        /* no further request on this connection */
	bool counted;            /* holds one of max_connections */
	bool event_done;         /* net.connect emitted for the current request */
	bool intercept;          /* CONNECT to a host with a credential rule: TLS is terminated */
	char *tunnel_host;       /* intercept: the CONNECT's host, for the requests inside */
	uint16_t tunnel_port;
	/* Plain HTTP keep-alive: the upstream connection `up` kept for the next request. */
	char *up_host;                  /* the host it was opened for; NULL: not reusable */
	uint16_t up_port;               /* and the port */
	char up_addr[INET6_ADDRSTRLEN]; /* the address it is connected to */
	bool reused;                    /* the current request went over a kept connection */
	/* The request's body, held before the request goes up (PDK__EGRESS_ST_BODY). */
	struct evbuffer *held;
	struct pdk__egress_scan scan; /* placeholders that may not go to this host (head.scan) */
	/* A request on a kept connection: head and whole body, to send once more on a fresh one. */
	char *replay;
	size_t replay_len;
	bool retried; /* the current request was sent again after its kept connection failed */
	/*
	 * Bytes of the proxy-wide hold (e->held) this request's body is charged with: its
	 * declared length (up to PDK__EGRESS_HOLD_MAX) from the head on, or what was held of a
	 * chunked one. Returned by pdk__egress_unhold() once the body went up, or when the
	 * request ends.
	 */
	size_t charged;
};

struct pdk_egress {
	struct pdk_egress_config cfg;
	struct pdk__egress_secret *secrets;
	size_t n_secrets;
	struct pdk__egress_cred *creds;
	size_t n_creds;
	struct event_base *base;
	struct evdns_base *dns;
	struct evconnlistener *listener;
	struct event *resume; /* re-enables the listener after an accept() error */
	size_t n_clients;
	bool listening;
	struct event *wake;
	int wake_fd[2];
	pthread_t thread;
	bool running;
	struct pdk__egress_conn *conns;
	struct sockaddr_storage local[PDK__EGRESS_MAX_LOCAL_ADDRS];
	size_t n_local;
	uint64_t bytes, requests, open_upstream;
	bool bytes_exceeded; /* limit.exceeded sent for egress_bytes */
	size_t held;         /* request body bytes charged by all connections (conn.charged) */
	size_t hold_cap;     /* at most this many: the proxy-wide bound, or lower in tests */
	struct ssl_ctx_st *tls_client; /* cfg.ca set: verifies the real servers (egress-tls.c) */
	char *tls_error;               /* why tls_client could not be made, or NULL */
	/*
	 * Events that cannot be recorded (pdk__egress_emit()): failed_fd is an
	 * eventfd written once, at the first failure; events_err is that
	 * failure, published before events_failed is set (both read by the
	 * owner's thread through pdk_egress_failed()).
	 */
	int failed_fd;
	bool events_failed;
	struct pdk_error *events_err;
	/*
	 * The rules added while the proxy runs (pdk_egress_allow()), each its own
	 * allocation, so a connection's c->rule stays valid while the array grows;
	 * live_lock guards the array and its count (the owner's thread adds, the
	 * loop's thread matches). Freed by pdk_egress_stop() alone.
	 */
	pthread_mutex_t live_lock;
	struct pdk_net_rule **live;
	size_t n_live;
};

/* ---- egress.c: events, answers, budgets, connections, the loop ---- */

/*
 * The rule that allows the normalized name `host` (or, for _addr, the
 * address `sa`) on `port`: the configuration's rules first, then those
 * pdk_egress_allow() added; NULL when none does. The loop's thread only.
 */
const struct pdk_net_rule *pdk__egress_match_host(struct pdk_egress *e, const char *host,
						  uint16_t port);
const struct pdk_net_rule *pdk__egress_match_addr(struct pdk_egress *e, const struct sockaddr *sa,
						  uint16_t port);

/*
 * Emit an event of the proxy (ownership of `attrs` taken). SECURITY: an
 * event that cannot be recorded fails closed: false is returned, and the
 * caller refuses what the event was about; the first failure is kept for
 * the owner and makes e->failed_fd readable (docs/internals/egress.md
 * "Events fail closed").
 */
bool pdk__egress_emit(struct pdk_egress *e, const char *kind, json_t *attrs);

/* limit.exceeded for `limit` (the name of the policy's limit) at `value`; false: not recorded. */
bool pdk__egress_emit_limit(struct pdk_egress *e, const char *limit, uint64_t value);

/*
 * The one net.connect of the current request or tunnel: the decision, and
 * for allowed ones the traffic. Once per request (c->event_done); true when
 * it was recorded now or before, false when it could not be.
 */
bool pdk__egress_emit_connect(struct pdk__egress_conn *c, bool allow, int status,
			      const char *reason);

/*
 * Whether the proxy still takes decisions: false, after answering 503,
 * once an event could not be recorded. Called before anything goes up.
 */
bool pdk__egress_recording(struct pdk__egress_conn *c);

/* An event about this request could not be recorded: refuse it (503). */
void pdk__egress_unrecorded(struct pdk__egress_conn *c);

/* Answer an error (the connection then closes: pdk__egress_finish()) and record it. */
void pdk__egress_answer(struct pdk__egress_conn *c, bool allow, int status, const char *reason);

/* Stop reading, let what is queued for the client drain, then free the connection. */
void pdk__egress_finish(struct pdk__egress_conn *c);

/* Close the upstream connection, if any, and give back its place in max_connections. */
void pdk__egress_close_up(struct pdk__egress_conn *c);

/*
 * Free a connection: cancel its resolution, record its net.connect if it
 * got that far, close both sides. The only way a connection ends.
 */
void pdk__egress_conn_free(struct pdk__egress_conn *c);

/* Count bytes moved; false (and limit.exceeded once) when the byte budget is spent. */
bool pdk__egress_account(struct pdk__egress_conn *c, size_t n, bool up);

/* The byte budget is spent: limit.exceeded, once for the proxy's life. */
void pdk__egress_bytes_spent(struct pdk_egress *e);

/* Bytes the byte budget still allows (SIZE_MAX: no budget). */
size_t pdk__egress_budget_left(const struct pdk_egress *e);

/*
 * Before a request goes upstream: the reason a budget refuses it, or NULL;
 * then *limit and *value name the limit. `reuse`: it goes over a kept
 * connection, which opens none.
 */
const char *pdk__egress_budget_refusal(struct pdk_egress *e, bool reuse, const char **limit,
				       uint64_t *value);

/*
 * Take a socket from its bufferevent: the bufferevent lets go of it (no dup,
 * no close) and is freed; *bev becomes NULL. The fd, or -1 (then it was
 * closed with the bufferevent).
 */
int pdk__egress_take_fd(struct bufferevent **bev);

/* TCP_NODELAY on a relay's socket (best effort). */
void pdk__egress_no_delay(struct bufferevent *bev);

/*
 * libevent's buffer calls, checked. libevent answers -1 (or NULL, or a
 * short count) both when it cannot allocate and when the end of a buffer
 * it works on is frozen. A bufferevent freezes only the ends the proxy
 * never touches (the end of its input, the start of its output), and the
 * proxy's own buffers (c->held) are never frozen, so a failure here is an
 * allocation failure: pdk_oom(). A peer that is gone is not a failure of
 * these calls: the bufferevent reports it to its event callback.
 */
void pdk__egress_buf_add(struct evbuffer *buf, const void *data, size_t len);
void pdk__egress_buf_move(struct evbuffer *dst, struct evbuffer *src, size_t len);
void pdk__egress_buf_drain(struct evbuffer *buf, size_t len);
/* Copy the first `len` bytes out (len <= the buffer's length); remove also drains them. */
void pdk__egress_buf_copyout(struct evbuffer *buf, void *out, size_t len);
void pdk__egress_buf_remove(struct evbuffer *buf, void *out, size_t len);
/* The first `len` bytes of `buf`, made contiguous (len <= the buffer's length). */
const char *pdk__egress_buf_pullup(struct evbuffer *buf, size_t len);

/* ---- egress-request.c: reading a request, the hold bound, the allowlist decision ---- */

/* The client's bytes while reading a request (head, then held body). */
void pdk__egress_client_read(struct bufferevent *bev, void *arg);

/* The client ended, failed or timed out while a request was being read. */
void pdk__egress_client_event(struct bufferevent *bev, short what, void *arg);

/*
 * The allowlist decision for a complete request (or CONNECT), with the
 * budgets: refused (answered), or on its way upstream.
 */
void pdk__egress_decide(struct pdk__egress_conn *c);

/* Return c's share of the hold bound: its held body went up, or its request ended. */
void pdk__egress_unhold(struct pdk__egress_conn *c);

/* The proxy-wide bound on held request bodies (cfg.hold_total in tests). 0 or -1 + *err. */
PDK_MUST_CHECK int pdk__egress_hold_setup(struct pdk_egress *e, struct pdk_error **err);

/* ---- egress-tunnel.c: CONNECT tunnels ---- */

/* Upstream is connected: answer 200 and move bytes both ways until both ends closed. */
void pdk__egress_tunnel_start(struct pdk__egress_conn *c);

/* Close both sockets and free the buffers and events (pdk__egress_conn_free() calls it). */
void pdk__egress_tunnel_free(struct pdk__egress_tunnel *t);

/* ---- egress-forward.c: plain HTTP, one request up and its response down ---- */

/* Upstream is ready: send the rebuilt head and the held body, relay the rest both ways. */
void pdk__egress_forward_start(struct pdk__egress_conn *c);

/* ---- egress-upstream.c: resolution, the address checks, connecting ---- */

/* Resolve the request's host (or take its IP literal) and connect to a checked address. */
void pdk__egress_open_upstream(struct pdk__egress_conn *c);

/*
 * A kept connection ended before any byte of the answer: send the request
 * (its replay copy) once more on a fresh connection.
 */
void pdk__egress_retry(struct pdk__egress_conn *c);

/* The resolver: cfg.resolv_conf and cfg.hosts. 0 or -1 + *err. */
PDK_MUST_CHECK int pdk__egress_dns_setup(struct pdk_egress *e, struct pdk_error **err);

/* The host's own addresses, which no name may resolve to unless listed. 0 or -1 + *err. */
PDK_MUST_CHECK int pdk__egress_local_addrs_load(struct pdk_egress *e, struct pdk_error **err);

/*
 * SECURITY: the static binary is linked with --wrap for these (meson.build),
 * so that libevent's path to the C library's blocking resolver fails
 * instead of loading NSS modules (egress-upstream.c).
 */
struct addrinfo;
struct servent;
struct protoent;
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);
struct servent *__wrap_getservbyname(const char *name, const char *proto);
struct protoent *__wrap_getprotobynumber(int proto);

/* ---- egress-cred.c: credentials (the secrets, the rules, the head and body checks) ---- */

/* network.credentials -> the rules and secrets; every secret must have its value. */
PDK_MUST_CHECK int pdk__egress_cred_setup(struct pdk_egress *e, struct pdk_error **err);

/* Wipe the secrets' values and free the rules. */
void pdk__egress_cred_free(struct pdk_egress *e);

/*
 * A complete plain HTTP head (or one inside an intercepted tunnel), parsed
 * from `data`: apply the credentials and build c->up_head. 0, or -1 after
 * the request was answered (refused).
 */
int pdk__egress_cred_head(struct pdk__egress_conn *c, const char *data);

/* Does the sandbox have a CA and a credential rule name this CONNECT's host and port? */
bool pdk__egress_wants_interception(const struct pdk__egress_conn *c);

/*
 * The body scanner found a placeholder that may not go to this host: the
 * request is refused (and the upstream connection cut). True when so.
 */
bool pdk__egress_body_refused(struct pdk__egress_conn *c);

/* ---- egress-intercept.c: the intercepting states of HTTPS credential injection ---- */

/* The upstream TCP connection is up: start TLS on it, verifying the real server. */
void pdk__egress_intercept_up(struct pdk__egress_conn *c);

/* A request inside an intercepted tunnel, its credentials applied: up it goes. */
void pdk__egress_intercepted_request(struct pdk__egress_conn *c);

/* The sandbox's TLS client gave up: record why (a client that pins certificates). */
void pdk__egress_client_tls_failed(struct pdk__egress_conn *c);

/* Orderly TLS end (close_notify) towards the sandbox, best effort, before the socket closes. */
void pdk__egress_tls_close_notify(struct bufferevent *bev);

/* A trust store named by cfg.ca_file must be readable: fail the start, not later. */
PDK_MUST_CHECK int pdk__egress_trust_store_check(const char *file, struct pdk_error **err);

#endif
