/*
 * egress-upstream.c - the upstream side of an allowed request: the name
 * resolved with evdns (never the C library's resolver), every address it
 * resolves to judged (SSRF, DNS rebinding: docs/internals/egress.md), and
 * a connection to one that passed, tried in turn.
 */
#include "common.h"
#include "base.h"
#include "egress-internal.h"

#include <arpa/inet.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <ifaddrs.h>
#include <string.h>

static void connect_next(struct pdk__egress_conn *c);

static void addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *a =
		sa->sa_family == AF_INET
			? (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr
			: (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

	if (inet_ntop(sa->sa_family, a, buf, (socklen_t)len) == NULL)
		buf[0] = '\0';
}

static void up_connect_event(struct bufferevent *bev, short what, void *arg)
{
	struct pdk__egress_conn *c = arg;
	_cleanup_free_ char *why = NULL;

	if (what & BEV_EVENT_CONNECTED) {
		pdk__egress_no_delay(bev);
		/* Interception: a CONNECT, or a request in a tunnel whose TLS upstream ended. */
		if (c->intercept)
			pdk__egress_intercept_up(c);
		else if (c->head.connect)
			pdk__egress_tunnel_start(c);
		else
			pdk__egress_forward_start(c);
		return;
	}
	why = pdk_xasprintf("cannot connect to %s port %u: %s", c->addr, c->head.port,
			    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	if (c->next_cand < c->n_cand) {
		/* Another checked address of the same answer (an IPv6 one without a route). */
		bufferevent_free(c->up);
		c->up = NULL;
		connect_next(c);
		return;
	}
	pdk__egress_answer(c, true, 502, why);
}

/* Connect to the next candidate address: one that passed judge_addr() (or a listed IP). */
static void connect_next(struct pdk__egress_conn *c)
{
	struct sockaddr_storage ss = c->cand[c->next_cand++];
	socklen_t len =
		ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	struct timeval t = {PDK__EGRESS_HEAD_TIMEOUT_S, 0};

	((struct sockaddr_in *)&ss)->sin_port = htons(c->head.port); /* same offset in v6 */
	addr_text((const struct sockaddr *)&ss, c->addr, sizeof(c->addr));
	c->state = PDK__EGRESS_ST_CONNECT;
	if (!c->counted) {
		c->e->requests++;
		c->e->open_upstream++;
		c->counted = true;
	}
	c->up = bufferevent_socket_new(c->e->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL) {
		pdk__egress_answer(c, true, 502, "cannot create a socket");
		return;
	}
	bufferevent_setcb(c->up, NULL, NULL, up_connect_event, c);
	bufferevent_set_timeouts(c->up, &t, &t);
	/* SECURITY: connect to the address that was checked; never resolve again. */
	if (bufferevent_socket_connect(c->up, (struct sockaddr *)&ss, len) < 0)
		pdk__egress_answer(c, true, 502, "cannot connect upstream");
}

static bool is_local(const struct pdk_egress *e, const struct sockaddr *sa)
{
	for (size_t i = 0; i < e->n_local; i++) {
		const struct sockaddr_storage *l = &e->local[i];

		if (l->ss_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET &&
		    memcmp(&((const struct sockaddr_in *)l)->sin_addr,
			   &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4) == 0)
			return true;
		if (sa->sa_family == AF_INET6 &&
		    memcmp(&((const struct sockaddr_in6 *)l)->sin6_addr,
			   &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16) == 0)
			return true;
	}
	return false;
}

/*
 * SECURITY: every resolved address is judged. A special-purpose or local
 * address is refused unless the policy lists that very address (SSRF to
 * metadata services and host loopback services; DNS rebinding).
 */
static const char *judge_addr(const struct pdk__egress_conn *c, const struct sockaddr *sa)
{
	enum pdk_net_addr_class cls = pdk_net_classify(sa);

	if (pdk__egress_match_addr(c->e, sa, c->head.port) != NULL)
		return NULL;
	if (cls == PDK_NET_ADDR_PUBLIC && is_local(c->e, sa))
		cls = PDK_NET_ADDR_HOST;
	return cls == PDK_NET_ADDR_PUBLIC ? NULL : pdk_net_addr_class_name(cls);
}

/*
 * A name that resolves to a refused address: the reason names the address
 * and its class, and the refusal is recorded with the entry that would
 * allow it (the address itself, with the port). New string.
 */
static char *refused_addr(struct pdk__egress_conn *c, const char *addr, const char *cls)
{
	_cleanup_free_ char *hint = pdk_net_allow_hint(addr, c->head.port);
	_cleanup_free_ char *why = pdk_xasprintf("resolves to %s, a %s address", addr, cls);

	pdk_net_denials_add(c->e->cfg.denials, c->head.host, c->head.port, why);
	return pdk_xasprintf("'%s' resolves to %s, a %s address (list the address itself to "
			     "allow it: --allow %s)",
			     c->head.host, addr, cls, hint);
}

static void resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	struct pdk__egress_conn *c = arg;
	_cleanup_free_ char *why = NULL;

	if (result == EVUTIL_EAI_CANCEL)
		return; /* the conn is being freed */
	c->dns = NULL;
	if (result != 0) {
		why = pdk_xasprintf("cannot resolve '%s': %s", c->head.host,
				    evutil_gai_strerror(result));
		pdk__egress_answer(c, true, 502, why);
		return;
	}
	c->n_cand = c->next_cand = 0;
	for (const struct evutil_addrinfo *ai = res;
	     ai != NULL && c->n_cand < PDK__EGRESS_MAX_CANDIDATES; ai = ai->ai_next) {
		const char *bad = judge_addr(c, ai->ai_addr);

		if (bad == NULL && ai->ai_addrlen <= sizeof(c->cand[0])) {
			memset(&c->cand[c->n_cand], 0, sizeof(c->cand[0]));
			memcpy(&c->cand[c->n_cand++], ai->ai_addr, ai->ai_addrlen);
		} else if (bad != NULL && why == NULL) {
			char a[INET6_ADDRSTRLEN];

			addr_text(ai->ai_addr, a, sizeof(a));
			why = refused_addr(c, a, bad);
		}
	}
	if (c->n_cand > 0)
		connect_next(c);
	else
		pdk__egress_answer(c, false, 403, why ? why : "the name has no address");
	evutil_freeaddrinfo(res);
}

void pdk__egress_open_upstream(struct pdk__egress_conn *c)
{
	struct pdk__egress_head *h = &c->head;
	struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};

	if (h->host_is_ip) {
		c->cand[0] = h->ip;
		c->n_cand = 1;
		c->next_cand = 0;
		connect_next(c);
		return;
	}
	c->state = PDK__EGRESS_ST_RESOLVE;
	/* May call resolved() at once (a hosts-file entry); then it returns NULL. */
	c->dns = evdns_getaddrinfo(c->e->dns, h->host, NULL, &hints, resolved, c);
}

/*
 * The kept connection ended before any byte of the answer: the server
 * closed it as it was reused (RFC 9112 9.3.1 lets a client retry an
 * idempotent request then). Once, on a fresh connection; the name is
 * resolved and judged again.
 */
void pdk__egress_retry(struct pdk__egress_conn *c)
{
	c->retried = true;
	c->reused = false;
	c->up_head = steal_ptr(&c->replay);
	c->up_head_len = c->replay_len;
	pdk__egress_close_up(c);
	c->e->requests--; /* the same request: connect_next() counts it again */
	c->addr[0] = '\0';
	pdk__egress_open_upstream(c);
}

int pdk__egress_local_addrs_load(struct pdk_egress *e, struct pdk_error **err)
{
	struct ifaddrs *ifa = NULL;

	if (getifaddrs(&ifa) < 0)
		return pdk_error_set(err, errno, "cannot list the host's addresses");
	for (struct ifaddrs *i = ifa; i != NULL && e->n_local < PDK__EGRESS_MAX_LOCAL_ADDRS;
	     i = i->ifa_next) {
		if (i->ifa_addr == NULL ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		memcpy(&e->local[e->n_local++], i->ifa_addr,
		       i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
							 : sizeof(struct sockaddr_in6));
	}
	freeifaddrs(ifa);
	return 0;
}

int pdk__egress_dns_setup(struct pdk_egress *e, struct pdk_error **err)
{
	const char *resolv = e->cfg.resolv_conf;
	const char *hosts = e->cfg.hosts;
	int rc;

	e->dns = evdns_base_new(e->base, 0);
	if (e->dns == NULL)
		return pdk_error_setx(err, ENOMEM, "cannot create the DNS resolver");
	rc = evdns_base_resolv_conf_parse(e->dns, DNS_OPTIONS_ALL & ~DNS_OPTION_HOSTSFILE,
					  resolv ? resolv : "/etc/resolv.conf");
	/* 6: no nameserver listed (evdns then asks 127.0.0.1); 1: the default file is missing. */
	if (rc != 0 && rc != 6 && !(rc == 1 && resolv == NULL))
		return pdk_error_setx(err, EINVAL, "cannot read the resolver configuration '%s'",
				      resolv ? resolv : "/etc/resolv.conf");
	if (evdns_base_load_hosts(e->dns, hosts) != 0 && hosts != NULL)
		return pdk_error_setx(err, EINVAL, "cannot read the hosts file '%s'", hosts);
	return 0;
}

/*
 * SECURITY: the proxy resolves with evdns only (the resolver configuration
 * and hosts file named in docs/egress.md). libevent's evutil also holds a
 * path to the C library's blocking resolver, which in a static binary would
 * load NSS modules at run time; the static paddock binary is linked with
 * --wrap for these three (meson.build), so that path fails instead.
 * Their prototypes are in egress-internal.h.
 */
int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	(void)node;
	(void)service;
	(void)hints;
	*res = NULL;
	return -4; /* EAI_FAIL */
}

struct servent *__wrap_getservbyname(const char *name, const char *proto)
{
	(void)name;
	(void)proto;
	return NULL;
}

struct protoent *__wrap_getprotobynumber(int proto)
{
	(void)proto;
	return NULL;
}
