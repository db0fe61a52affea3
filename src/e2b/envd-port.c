/*
 * envd-port.c - requests for a port of a sandbox other than envd's
 * (docs/e2b.md, "Ports and the code interpreter"): E2B's SDKs send them to
 * the one URL with E2b-Sandbox-Port, and paddock relays each to that port
 * on the sandbox's own loopback through its port forwarding (control.h,
 * pdk_ctl_port_open()), as `paddock port` does.
 *
 * Port 49999 is the code interpreter's (`@e2b/code-interpreter`: /execute,
 * /contexts). Its server is paddock's own (code-interpreter.py, embedded),
 * run inside the sandbox as a detached process the first time a request
 * names the port; requests wait until it says "ready", then all go through
 * the same forwarding.
 */
#include "common.h"
#include "e2b-internal.h"

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <string.h>
#include <sys/random.h>

#define INTERP_TAG "paddock-code-interpreter"
/*
 * SECURITY: the interpreter answers only requests that carry its secret.
 * Its forwarded port is a listener on the host's loopback, which any local
 * user can reach; the secret, made for each interpreter and handed to it in
 * its environment (never its argv, never the audit chain), keeps them from
 * running code in the sandbox without the sandbox's token.
 */
#define INTERP_SECRET_HEADER "X-Paddock-Interpreter-Secret"
#define INTERP_SECRET_ENV    "PADDOCK_INTERPRETER_SECRET"
/* A relayed answer that is not a 200 stream is held whole: this much at most. */
#define HELD_MAX (1u << 20)
/* How long a relayed request may wait for its answer's head (a long execution). */
#define RELAY_TIMEOUT_S 3600

extern const char pdk_e2b_interp_py[]; /* code-interpreter.py, embedded at build time */

/* One relayed request. */
struct relay {
	struct relay *next; /* waiting for the interpreter */
	struct pdk_e2b *e;
	struct evhttp_request *down; /* the client's (NULL once answered) */
	char *sandbox;
	uint16_t port;
	struct pdk_http_stream stream;
	struct evhttp_connection *conn; /* to the forwarded port (libevent frees it) */
	struct evbuffer *held;          /* a non-200 answer's body */
	int code;
	char secret[65]; /* the interpreter's, sent with the request; "" for another port */
	bool streaming;
	bool gone; /* the client went away before the answer's head */
};

/* The code interpreter of one sandbox, while it starts or runs. */
struct pdk__e2b_interp {
	struct pdk__e2b_interp *next;
	struct pdk_e2b *e;
	char *sandbox;
	struct pdk_ctl_proc_watch *w;
	bool ready;
	struct relay *waiting;
	char secret[65]; /* what the relays prove themselves with (hex) */
	char said[64];   /* what it wrote until "ready" (a failed start's reason) */
	size_t said_len;
};

/* ---- the relay ---- */

static void relay_free(struct relay *r)
{
	if (r->held != NULL)
		evbuffer_free(r->held);
	free(r->sandbox);
	free(r);
}

static void relay_fail(struct relay *r, int code, const char *why)
{
	if (r->down != NULL)
		pdk__e2b_plane_fail(r->down, code, "%s", why);
	r->down = NULL;
	relay_free(r);
}

/* The client took the last chunk (or went away): the port's answer is read on. */
static void relay_sent(void *arg)
{
	struct relay *r = arg;

	(void)bufferevent_enable(evhttp_connection_get_bufferevent(r->conn), EV_READ);
}

static void relay_client_gone(void *arg)
{
	relay_sent(arg); /* what comes is read and dropped until the port's answer ends */
}

/* The relayed answer's head: a 200 is streamed as it comes, anything else held whole. */
static int relay_head(struct evhttp_request *up, void *arg)
{
	struct relay *r = arg;
	const char *ct = evhttp_find_header(evhttp_request_get_input_headers(up), "Content-Type");

	r->code = evhttp_request_get_response_code(up);
	if (r->down != NULL && evhttp_request_get_connection(r->down) == NULL) {
		/*
		 * The client went away while the request waited: evhttp left the
		 * request to us, and a reply is what frees it. What comes is dropped.
		 */
		evhttp_send_reply(r->down, 502, NULL, NULL);
		r->down = NULL;
		r->gone = true;
		return 0;
	}
	if (r->code == 200 && r->down != NULL) {
		r->streaming = true;
		pdk_http_stream_start_raw(&r->stream, r->down,
					  ct ? ct : "application/octet-stream");
		r->stream.on_close = relay_client_gone;
		r->stream.on_close_arg = r;
		r->down = NULL; /* the stream's now */
	} else if (r->down != NULL && ct != NULL) {
		pdk_http_header(r->down, "Content-Type", ct);
	}
	return 0;
}

static void relay_chunk(struct evhttp_request *up, void *arg)
{
	struct relay *r = arg;
	struct evbuffer *in = evhttp_request_get_input_buffer(up);
	size_t n = evbuffer_get_length(in);

	if (r->streaming && n > 0 && !r->stream.dead) {
		/*
		 * SECURITY: what the sandbox's server writes is read no faster than
		 * the client takes it: the daemon holds one chunk per relay, however
		 * slow its client.
		 */
		pdk_http_stream_bytes(&r->stream, evbuffer_pullup(in, (ssize_t)n), n, relay_sent,
				      r);
		(void)bufferevent_disable(evhttp_connection_get_bufferevent(r->conn), EV_READ);
	} else if (r->held != NULL && evbuffer_get_length(r->held) + n <= HELD_MAX) {
		if (evbuffer_add_buffer(r->held, in) < 0)
			pdk_oom();
	}
	(void)evbuffer_drain(in, n);
}

/* The relayed answer's end, or (up NULL) no answer: the port refused or the connection broke. */
static void relay_done(struct evhttp_request *up, void *arg)
{
	struct relay *r = arg;

	if (up != NULL)
		relay_chunk(up, r);
	if (r->streaming) {
		/* A stream the port cut short is cut short for the client too, never made whole. */
		if (up == NULL)
			pdk_http_stream_abort(&r->stream);
		else
			pdk_http_stream_end(&r->stream);
		relay_free(r);
		return;
	}
	if (r->gone) {
		relay_free(r);
		return;
	}
	if (up == NULL || r->code == 0) {
		relay_fail(r, 502,
			   "nothing answered on the sandbox's port: is a server listening on "
			   "127.0.0.1 there?");
		return;
	}
	evhttp_send_reply(r->down, r->code, NULL, r->held);
	r->down = NULL;
	relay_free(r);
}

/* The client's headers worth passing on: not the hop's, not E2B's routing or tokens. */
static void copy_headers(struct evhttp_request *down, struct evhttp_request *up, uint16_t port)
{
	static const char *const keep[] = {"Content-Type", "Accept", "User-Agent"};
	struct evkeyvalq *in = evhttp_request_get_input_headers(down);
	struct evkeyvalq *out = evhttp_request_get_output_headers(up);
	char host[32];

	for (size_t i = 0; i < PDK_ARRAY_SIZE(keep); i++) {
		const char *v = evhttp_find_header(in, keep[i]);

		if (v != NULL && evhttp_add_header(out, keep[i], v) < 0)
			pdk_oom();
	}
	(void)snprintf(host, sizeof(host), "127.0.0.1:%u", port);
	if (evhttp_add_header(out, "Host", host) < 0)
		pdk_oom();
}

/*
 * evhttp resolves even a numeric address; without a DNS base it would ask
 * the C library, whose resolver the static binary leaves out (meson.build).
 * An evdns base with no name server answers numeric addresses at once and
 * nothing else.
 */
static struct evdns_base *numeric_dns(struct pdk_e2b *e)
{
	if (e->dns == NULL)
		e->dns = evdns_base_new(e->base, 0);
	if (e->dns == NULL)
		pdk_oom();
	return e->dns;
}

/* Send `r` to the sandbox's port, forwarded now if it was not. */
static void relay_go(struct relay *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(r->down);
	const char *path = evhttp_uri_get_path(uri), *query = evhttp_uri_get_query(uri);
	_cleanup_free_ char *target = NULL;
	struct pdk_ctl_sb *sb = NULL;
	struct pdk_ctl_port fwd;
	struct evhttp_connection *conn;
	struct evhttp_request *up;

	if (pdk_ctl_find(r->e->ctl, r->sandbox, PDK_CTL_FIND_LIVE, &sb, &err) < 0 ||
	    pdk_ctl_port_open(sb, r->port, 0, "e2b", &fwd, &err) < 0) {
		if (r->down != NULL)
			pdk__e2b_plane_error(r->down, err);
		r->down = NULL;
		relay_free(r);
		return;
	}
	target = query ? pdk_xasprintf("%s?%s", path, query) : pdk_xstrdup(path);
	conn = evhttp_connection_base_new(r->e->base, numeric_dns(r->e), "127.0.0.1",
					  fwd.host_port);
	if (conn == NULL)
		pdk_oom();
	r->conn = conn;
	evhttp_connection_set_timeout(conn, RELAY_TIMEOUT_S);
	up = evhttp_request_new(relay_done, r);
	if (up == NULL)
		pdk_oom();
	evhttp_request_set_header_cb(up, relay_head);
	evhttp_request_set_chunked_cb(up, relay_chunk);
	copy_headers(r->down, up, r->port);
	if (r->secret[0] != '\0' && evhttp_add_header(evhttp_request_get_output_headers(up),
						      INTERP_SECRET_HEADER, r->secret) < 0)
		pdk_oom();
	if (evbuffer_add_buffer(evhttp_request_get_output_buffer(up),
				evhttp_request_get_input_buffer(r->down)) < 0)
		pdk_oom();
	r->held = pdk_http_buf_new();
	/* The connection goes with its one request (libevent frees it once that is done). */
	evhttp_connection_free_on_completion(conn);
	if (evhttp_make_request(conn, up, evhttp_request_get_command(r->down), target) < 0)
		relay_fail(r, 502, "cannot relay the request to the sandbox's port");
}

/* ---- the code interpreter ---- */

static void interp_unlink(struct pdk__e2b_interp *in)
{
	for (struct pdk__e2b_interp **p = &in->e->interps; *p != NULL; p = &(*p)->next)
		if (*p == in) {
			*p = in->next;
			return;
		}
}

static void interp_free(struct pdk__e2b_interp *in)
{
	while (in->waiting != NULL) {
		struct relay *r = in->waiting;

		in->waiting = r->next;
		relay_fail(r, 502, "the sandbox's code interpreter is gone");
	}
	free(in->sandbox);
	free(in);
}

static void interp_ready(struct pdk__e2b_interp *in)
{
	in->ready = true;
	while (in->waiting != NULL) {
		struct relay *r = in->waiting;

		in->waiting = r->next;
		relay_go(r);
	}
}

static void interp_output(void *ctx, int stream, const char *data, size_t len)
{
	struct pdk__e2b_interp *in = ctx;
	size_t room = sizeof(in->said) - 1 - in->said_len;

	if (in->ready || stream != 1)
		return;
	memcpy(in->said + in->said_len, data, len < room ? len : room);
	in->said_len += len < room ? len : room;
	in->said[in->said_len] = '\0';
	if (strstr(in->said, "ready\n") != NULL)
		interp_ready(in);
}

/* The interpreter ended (or never started): whoever waits is told, the next request restarts it. */
static void interp_done(void *ctx, const struct pdk_ctl_exit *exit, const struct pdk_error *err)
{
	struct pdk__e2b_interp *in = ctx;

	(void)exit;
	(void)err;
	interp_unlink(in);
	interp_free(in);
}

static const struct pdk_ctl_proc_cbs interp_cbs = {.output = interp_output, .done = interp_done};

/* 32 random bytes as hex (65 bytes with the NUL). */
static void new_secret(char out[65])
{
	unsigned char raw[32];
	size_t got = 0;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0 && errno != EINTR)
			pdk_bug("getrandom failed");
		if (n > 0)
			got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		(void)snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

/*
 * Start the interpreter in the sandbox: python3 reads the program from its
 * stdin, serves on the sandbox's loopback, and keeps its state under
 * /tmp/.paddock (a sandbox's home may be read-only).
 */
static int interp_start(struct pdk__e2b_interp *in, struct pdk_ctl_sb *sb, struct pdk_error **err)
{
	char *const argv[] = {(char *)"/usr/bin/python3", (char *)"-",
			      (char *)PDK_E2B_INTERP_PORT_STR, NULL};
	_cleanup_free_ char *secret_env = pdk_xasprintf("%s=%s", INTERP_SECRET_ENV, in->secret);
	char *const env[] = {secret_env,
			     (char *)"JUPYTER_RUNTIME_DIR=/tmp/.paddock/jupyter",
			     (char *)"IPYTHONDIR=/tmp/.paddock/ipython",
			     (char *)"MPLCONFIGDIR=/tmp/.paddock/matplotlib",
			     (char *)"PYTHONDONTWRITEBYTECODE=1",
			     NULL};
	struct pdk_ctl_exec_req r = {
		.argv = argv,
		.env = env,
		.stdin_data = pdk_e2b_interp_py,
		.stdin_len = strlen(pdk_e2b_interp_py),
		.tag = INTERP_TAG,
	};

	return pdk_ctl_proc_start(sb, &r, &interp_cbs, in, &in->w, err);
}

static struct pdk__e2b_interp *interp_of(struct pdk_e2b *e, const char *sandbox)
{
	for (struct pdk__e2b_interp *in = e->interps; in != NULL; in = in->next)
		if (strcmp(in->sandbox, sandbox) == 0)
			return in;
	return NULL;
}

/* Relay `r` once the sandbox's interpreter is ready, starting it when none runs. */
static void via_interp(struct relay *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk__e2b_interp *in = interp_of(r->e, r->sandbox);
	struct pdk_ctl_sb *sb = NULL;
	struct relay **tail;

	if (in != NULL && in->ready) {
		memcpy(r->secret, in->secret, sizeof(r->secret));
		relay_go(r);
		return;
	}
	if (in == NULL) {
		if (pdk_ctl_find(r->e->ctl, r->sandbox, PDK_CTL_FIND_LIVE, &sb, &err) < 0) {
			pdk__e2b_plane_error(r->down, err);
			r->down = NULL;
			relay_free(r);
			return;
		}
		in = pdk_xcalloc(1, sizeof(*in));
		in->e = r->e;
		in->sandbox = pdk_xstrdup(r->sandbox);
		new_secret(in->secret);
		if (interp_start(in, sb, &err) < 0) {
			free(in->sandbox);
			free(in);
			pdk__e2b_plane_error(r->down, err);
			r->down = NULL;
			relay_free(r);
			return;
		}
		in->next = r->e->interps;
		r->e->interps = in;
	}
	memcpy(r->secret, in->secret, sizeof(r->secret));
	/* Answered in the order they came. */
	for (tail = &in->waiting; *tail != NULL; tail = &(*tail)->next)
		;
	*tail = r;
}

void pdk__e2b_interps_free(struct pdk_e2b *e)
{
	if (e->dns != NULL)
		evdns_base_free(e->dns, 0);
	e->dns = NULL;
	/* The control object ended first: every interpreter's watch is gone with it. */
	while (e->interps != NULL) {
		struct pdk__e2b_interp *in = e->interps;

		e->interps = in->next;
		interp_free(in);
	}
}

void pdk__e2b_port(struct pdk_e2b *e, struct evhttp_request *req, const char *sandbox,
		   uint16_t port)
{
	struct relay *r = pdk_xcalloc(1, sizeof(*r));

	r->e = e;
	r->down = req;
	r->sandbox = pdk_xstrdup(sandbox);
	r->port = port;
	if (port == PDK_E2B_INTERP_PORT)
		via_interp(r);
	else
		relay_go(r);
}
