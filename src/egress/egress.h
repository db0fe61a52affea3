/*
 * egress.h - network.mode allowlist: the domain allowlist proxy.
 *
 * In allowlist mode the sandbox has its own network namespace with only
 * lo. Its child opens a listening TCP socket on 127.0.0.1:PDK_EGRESS_PORT
 * inside that namespace and hands it to the supervisor, whose proxy
 * (this module) accepts from it in a thread of its own: HTTP/1.1 CONNECT
 * tunnels and absolute-form plain HTTP requests, judged against the
 * policy's `network.allow` rules, with DNS resolved outside the sandbox
 * and every resolved address checked (SSRF, DNS rebinding). Each decision
 * becomes a `net.connect` event; budgets emit `limit.exceeded`; an event
 * that cannot be recorded stops the sandbox (pdk_egress_failed()).
 * docs/egress.md is the user's manual, docs/internals/egress.md the design.
 *
 * The rule syntax it matches with is policy/netrule.h. HTTPS credential
 * injection (the per-sandbox CA) is egress-tls.h, included here: the egress
 * layer's public header is this one.
 *
 * Layer contract: stands on policy/ (the rules), telemetry/ (its events)
 * and base/. Denied unless a rule allows; a secret never enters the
 * sandbox (the proxy injects it on the way out); the proxy reads no
 * environment (resolver files, trust store and secrets come in its config).
 */
#ifndef PDK_EGRESS_H
#define PDK_EGRESS_H

#include "common.h"
#include "base.h"
#include "egress-tls.h"
#include "policy.h"
#include "telemetry.h"

struct sockaddr;      /* <sys/socket.h> is left to the users that need it */
struct pdk_egress_ca; /* egress-tls.h */

/* The proxy's port on the sandbox's loopback (documented in docs/egress.md). */
#define PDK_EGRESS_PORT 3128

/* The listening socket's backlog (capped by the namespace's net.core.somaxconn). */
#define PDK_EGRESS_BACKLOG 1024

/* Append HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, their lowercase twins and NO_PROXY= to *env. */
void pdk_egress_env_add(char ***env);

/* ---- credentials (plain HTTP) ---- */

/* paddock's own environment variable that holds secret NAME: "PADDOCK_SECRET_" + NAME in upper
 * case. */
#define PDK_EGRESS_SECRET_PREFIX "PADDOCK_SECRET_"

/* The placeholder the sandbox sees for secret NAME: "paddock-secret-NAME-SANDBOX_ID". New string.
 */
char *pdk_egress_placeholder(const char *secret, const char *sandbox_id);

/*
 * For each secret named in `credentials` (pairs: host entry, header
 * template; NULL-terminated), set PADDOCK_SECRET_<NAME>=<placeholder> in
 * *env, replacing any value already there.
 */
void pdk_egress_secret_env_set(char ***env, char *const *credentials, const char *sandbox_id);

/* ---- the proxy ---- */

struct pdk_egress_config {
	const struct pdk_net_rule *rules; /* borrowed for the proxy's life */
	size_t n_rules;
	uint64_t max_bytes;        /* bytes both ways, all connections; 0 = unlimited */
	uint64_t max_requests;     /* requests and tunnels allowed upstream; 0 = unlimited */
	uint64_t max_connections;  /* upstream connections open at once; 0 = unlimited */
	struct pdk_events *events; /* borrowed; may be NULL */
	const char *resolv_conf;   /* NULL: /etc/resolv.conf */
	const char *hosts;         /* NULL: /etc/hosts */
	const char *ca_file;       /* the TLS upstreams' trust store; NULL: the system's */
	/* Where PADDOCK_SECRET_<NAME> is looked up (a front end's environment; borrowed). */
	char *const *secrets_env;
	const char *hold_total;   /* tests only: a lower bound on held request bodies ("256K") */
	char *const *credentials; /* pairs host, header template (policy network.credentials) */
	const char *sandbox_id;   /* for the placeholders */
	/*
	 * The sandbox's CA (egress-tls.h; borrowed), or NULL. When set, a CONNECT
	 * to a host that a credential rule names is intercepted: TLS towards the
	 * sandbox with a leaf of this CA, verified TLS towards the real server,
	 * and the requests inside get the credentials.
	 */
	struct pdk_egress_ca *ca;
	/*
	 * Where each destination the proxy refuses (403) is recorded with the
	 * --allow value that would allow it (policy/netdeny.h; borrowed, may
	 * be NULL): the front end's summary at the end of a run or an exec.
	 */
	struct pdk_net_denials *denials;
};

struct pdk_egress;

/*
 * Start the proxy on `listen_fd` (a listening TCP socket; ownership taken,
 * also on failure) in a thread of its own. Returns NULL + *err when the
 * resolver configuration, a credential's secret (PADDOCK_SECRET_<NAME> in
 * cfg->secrets_env), the event loop or the thread cannot be set up.
 */
struct pdk_egress *pdk_egress_start(const struct pdk_egress_config *cfg, int listen_fd,
				    struct pdk_error **err);

/*
 * Allow one more destination while the proxy runs: the rule `r` (parsed
 * with pdk_net_rule_parse(); its contents are taken and *r is zeroed)
 * joins cfg->rules, and every request judged after this returns may match
 * it, without a restart. Safe from any thread while the proxy runs; the
 * rule stays until pdk_egress_stop() (nothing removes one). The caller
 * decides who may widen the network (SECURITY: control/, on an approval
 * or an admin's request; never the sandbox).
 */
void pdk_egress_allow(struct pdk_egress *e, struct pdk_net_rule *r);

/*
 * Does a rule of the running proxy (configured or added) allow the
 * normalized name `host` on `port`? Safe from any thread. NULL: false.
 */
bool pdk_egress_allows_host(struct pdk_egress *e, const char *host, uint16_t port);

/*
 * Stop the loop, close every connection (each open one gets its
 * net.connect event), join the thread and free. NULL-safe.
 */
void pdk_egress_stop(struct pdk_egress *e);

/*
 * Bytes moved so far through the proxy, both ways, all connections (what
 * limits.egress_bytes is charged with). Safe to call from any thread while
 * the proxy runs. NULL: 0.
 */
uint64_t pdk_egress_bytes(const struct pdk_egress *e);

/*
 * The proxy's events fail closed, like every other event of a sandbox.
 * When one of them (net.connect, net.credential, limit.exceeded) cannot be
 * recorded (cfg->events returned an error), the proxy refuses what the
 * event was about (the request, the credential's injection, the kept
 * connection or the tunnel), answers 503 to every request after it, and
 * tells its owner, who must stop the sandbox: pdk_egress_fd() becomes
 * readable, and pdk_egress_failed() says why.
 */

/*
 * A descriptor for the owner's poll (POLLIN): readable once an event could
 * not be recorded, until pdk_egress_failed() takes the notification.
 * Borrowed: it stays open until pdk_egress_stop(). NULL: -1.
 */
int pdk_egress_fd(const struct pdk_egress *e);

/*
 * 0 while every event of the proxy was recorded. Once one was not: a
 * negative errno-style status and *err, a copy of the events hub's error
 * for the first event that failed (the owner logs it and stops the
 * sandbox); the readiness of pdk_egress_fd() is taken, so a poll loop
 * wakes once for it. Call it from the owner's thread. NULL: 0.
 */
PDK_MUST_CHECK int pdk_egress_failed(struct pdk_egress *e, struct pdk_error **err);

#endif
