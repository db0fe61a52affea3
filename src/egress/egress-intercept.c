/*
 * egress-intercept.c - the intercepting states of HTTPS credential
 * injection (docs/internals/egress.md "The TLS path"): a CONNECT to a host
 * a credential rule names is answered by the proxy itself, with TLS
 * towards the sandbox (a leaf of the sandbox's CA) and verified TLS towards
 * the real server; the requests inside then go through the plain HTTP
 * path (egress-forward.c) with their credentials. The OpenSSL pieces are
 * egress-tls.c and egress-ca.c.
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Orderly TLS end (close_notify) towards the sandbox, best effort, before the socket closes. */
void pdk__egress_tls_close_notify(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (ssl != NULL && SSL_is_init_finished(ssl))
		(void)SSL_shutdown(ssl); /* a socket BIO: the alert goes out now, or not at all */
}

/* The sandbox's TLS client gave up (it does not trust the sandbox's CA: a pinning client). */
void pdk__egress_client_tls_failed(struct pdk__egress_conn *c)
{
	SSL *ssl = bufferevent_openssl_get_ssl(c->client);
	_cleanup_free_ char *why = NULL;
	unsigned long e = bufferevent_get_openssl_error(c->client);
	/* NULL when OpenSSL's strings are not loaded (audit.c leaves them out). */
	const char *text = e ? ERR_reason_error_string(e) : NULL;
	char code[64];

	if (ssl == NULL || c->event_done || SSL_is_init_finished(ssl))
		return;
	if (text == NULL && e != 0) {
		ERR_error_string_n(e, code, sizeof(code));
		text = code;
	}
	why = pdk_xasprintf("the client's TLS handshake failed (%s): a client that does not use "
			    "the sandbox's trust bundle, or pins certificates, cannot be given "
			    "credentials",
			    text ? text : "the connection ended");
	(void)pdk__egress_emit_connect(c, true, 0, why); /* the connection ends either way */
}

/*
 * The 200 on the plain socket, then TLS on it towards the sandbox with the
 * host's leaf (`ctx`): c->client becomes the TLS bufferevent. False when
 * the client is gone (and the connection was freed).
 */
static bool client_to_tls(struct pdk__egress_conn *c, SSL_CTX *ctx)
{
	static const char ok[] = PDK__EGRESS_CONNECT_OK;
	SSL *ssl = SSL_new(ctx);
	int fd;

	if (ssl == NULL)
		pdk_oom();
	fd = pdk__egress_take_fd(&c->client);
	/* 39 bytes on a connection that has sent nothing else: the socket buffer takes them. */
	if (fd < 0 || send(fd, ok, sizeof(ok) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(ok) - 1)) {
		SSL_free(ssl);
		if (fd >= 0)
			(void)close(fd);
		(void)pdk__egress_emit_connect(c, true, 0, "the client closed the connection");
		pdk__egress_conn_free(c);
		return false;
	}
	/* On failure libevent has freed ssl and closed fd (BEV_OPT_CLOSE_ON_FREE). */
	c->client = bufferevent_openssl_socket_new(c->e->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
						   BEV_OPT_CLOSE_ON_FREE);
	if (c->client == NULL) {
		pdk__egress_conn_free(c);
		return false;
	}
	return true;
}

/* The real server answered the handshake and passed verification: now the sandbox's side. */
static void intercept_client(struct pdk__egress_conn *c)
{
	struct timeval head = {PDK__EGRESS_HEAD_TIMEOUT_S, 0};
	_cleanup_error_ struct pdk_error *err = NULL;
	SSL_CTX *ctx = pdk_egress_ca_server_ctx(c->e->cfg.ca, c->head.host, &err);

	if (!pdk__egress_recording(c))
		return;
	if (ctx == NULL) {
		pdk__egress_answer(c, true, 502, err->msg);
		return;
	}
	/* The client's TLS hello must come after the 200, or it would be read as plain bytes. */
	if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0) {
		pdk__egress_answer(c, true, 400,
				   "bytes behind the CONNECT request before its answer");
		return;
	}
	if (!client_to_tls(c, ctx))
		return;
	/*
	 * The CONNECT's own event; every request inside gets one of its own.
	 * SECURITY: not recorded, the tunnel goes no further.
	 */
	if (!pdk__egress_emit_connect(c, true, 200, NULL)) {
		pdk__egress_conn_free(c);
		return;
	}
	c->tunnel_host = pdk_xstrdup(c->head.host);
	c->tunnel_port = c->head.port;
	c->event_done = false;
	c->sent = c->received = 0;
	c->state = PDK__EGRESS_ST_HEAD;
	pdk__egress_no_delay(c->client);
	bufferevent_setcb(c->client, pdk__egress_client_read, NULL, pdk__egress_client_event, c);
	bufferevent_set_timeouts(c->client, &head, NULL);
	bufferevent_enable(c->client, EV_READ | EV_WRITE);
}

static void intercept_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct pdk__egress_conn *c = arg;
	_cleanup_free_ char *tls = NULL;
	_cleanup_free_ char *why = NULL;

	if (what & BEV_EVENT_CONNECTED) {
		bufferevent_set_timeouts(bev, NULL, NULL);
		if (c->tunnel_host != NULL) {
			/* A fresh TLS upstream for a request in the tunnel. */
			pdk__egress_forward_start(c);
			return;
		}
		bufferevent_disable(bev, EV_READ); /* until a request goes up */
		intercept_client(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT)
		tls = pdk_xstrdup("no TLS handshake in time");
	else
		tls = pdk_egress_tls_failure(bufferevent_openssl_get_ssl(bev),
					     bufferevent_get_openssl_error(bev));
	/* SECURITY: an upstream that cannot prove its name never gets the secret. */
	why = pdk_xasprintf("TLS to %s port %u: %s", c->head.host, c->head.port, tls);
	pdk__egress_answer(c, false, 502, why);
}

/*
 * The upstream side's context, made at the first interception: loading the
 * trust store parses the host's whole bundle (tens of milliseconds), which
 * neither the sandbox's start nor a sandbox that never intercepts should pay.
 * 0, or -1 with e->tls_error set (then every interception fails).
 */
static int trust_store(struct pdk_egress *e)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (e->tls_client == NULL && e->tls_error == NULL) {
		e->tls_client = pdk_egress_tls_client_ctx(e->cfg.ca_file, &err);
		if (e->tls_client == NULL)
			e->tls_error = pdk_xstrdup(err->msg);
	}
	return e->tls_client != NULL ? 0 : -1;
}

/* The upstream TCP connection is up: start TLS on it, verifying the real server. */
void pdk__egress_intercept_up(struct pdk__egress_conn *c)
{
	struct timeval t = {PDK__EGRESS_HEAD_TIMEOUT_S, 0};
	SSL *ssl;
	int fd;

	/* SECURITY: fail closed: no interception without a trust store to verify with. */
	if (trust_store(c->e) < 0) {
		pdk__egress_answer(c, false, 502, c->e->tls_error);
		return;
	}
	ssl = pdk_egress_tls_client_ssl(c->e->tls_client, c->head.host, c->head.host_is_ip);
	if (ssl == NULL) {
		pdk__egress_answer(c, true, 502, "cannot set up TLS towards the upstream server");
		return;
	}
	fd = pdk__egress_take_fd(&c->up);
	if (fd < 0) {
		SSL_free(ssl);
		pdk__egress_answer(c, true, 502, "cannot set up TLS towards the upstream server");
		return;
	}
	/* On failure libevent has freed ssl and closed fd (BEV_OPT_CLOSE_ON_FREE). */
	c->up = bufferevent_openssl_socket_new(c->e->base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
					       BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL) {
		pdk__egress_answer(c, true, 502, "cannot set up TLS towards the upstream server");
		return;
	}
	/* Many servers close without close_notify; the response parser finds the end itself. */
	bufferevent_openssl_set_allow_dirty_shutdown(c->up, 1);
	bufferevent_setcb(c->up, NULL, NULL, intercept_up_event, c);
	bufferevent_set_timeouts(c->up, &t, &t);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
}

/*
 * A request inside an intercepted tunnel, its credentials applied: up it
 * goes, over the tunnel's TLS connection to the server. When the server
 * closed that one while the tunnel was idle, pdk__egress_decide() opens another
 * (allowlist, budgets and the address checks as for the CONNECT).
 */
void pdk__egress_intercepted_request(struct pdk__egress_conn *c)
{
	struct pdk_egress *e = c->e;
	const char *limit = NULL;
	const char *refusal;
	uint64_t value = 0;

	if (c->up == NULL) {
		pdk__egress_decide(c);
		return;
	}
	if (!pdk__egress_recording(c))
		return;
	refusal = pdk__egress_budget_refusal(e, true, &limit, &value);
	if (refusal != NULL) {
		(void)pdk__egress_emit_limit(e, limit, value); /* refused either way */
		pdk__egress_answer(c, false, 429, refusal);
		return;
	}
	e->requests++;
	c->reused = c->up_host != NULL; /* it carried a request before */
	if (c->reused)
		memcpy(c->addr, c->up_addr, sizeof(c->addr));
	bufferevent_disable(c->client, EV_READ);
	bufferevent_set_timeouts(c->client, NULL, NULL);
	pdk__egress_forward_start(c);
}

/* A trust store named by PADDOCK_EGRESS_CA_FILE must be readable: fail the start, not later. */
int pdk__egress_trust_store_check(const char *file, struct pdk_error **err)
{
	int fd;

	if (file == NULL || *file == '\0')
		return 0;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pdk_error_set(err, errno, "PADDOCK_EGRESS_CA_FILE '%s'", file);
	(void)close(fd);
	return 0;
}
