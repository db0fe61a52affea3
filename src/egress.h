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
 * becomes a `net.connect` event; budgets emit `limit.exceeded`.
 * docs/egress.md is the user's manual, docs/internals/egress.md the design.
 *
 * The rule functions are pure and used by the policy parser too.
 */
#ifndef PDK_EGRESS_H
#define PDK_EGRESS_H

#include "common.h"
#include "error.h"
#include "events.h"

struct sockaddr;      /* <sys/socket.h> is left to the users that need it */
struct pdk_egress_ca; /* egress-tls.h */

/* The proxy's port on the sandbox's loopback (documented in docs/egress.md). */
#define PDK_EGRESS_PORT 3128

/* The listening socket's backlog (capped by the namespace's net.core.somaxconn). */
#define PDK_EGRESS_BACKLOG 1024

/* Longest normalized host name (RFC 1035: 253 characters). */
#define PDK_EGRESS_HOST_MAX 253

enum pdk_egress_rule_kind {
	PDK_EGRESS_RULE_HOST = 0, /* exactly this name */
	PDK_EGRESS_RULE_SUFFIX,   /* "*.suffix": any name strictly below suffix */
	PDK_EGRESS_RULE_IP,       /* an IP literal (v4, or v6 written in brackets) */
};

struct pdk_egress_rule {
	enum pdk_egress_rule_kind kind;
	char *host;       /* HOST: the normalized name; SUFFIX: the suffix without "*."; IP: text */
	int family;       /* IP: AF_INET or AF_INET6 */
	uint8_t addr[16]; /* IP: 4 or 16 bytes, network order */
	uint16_t port;    /* 0: the default ports, 80 and 443 */
	char *text;       /* the canonical form, as `paddock profile show` prints it */
};

/*
 * Normalize a host name for matching: lowercase, one trailing dot removed,
 * IDNA (UTS #46, via libidn2) for non-ASCII names; the result is ASCII
 * letters, digits, '-', '_' and '.', labels of 1 to 63 bytes, at most
 * PDK_EGRESS_HOST_MAX bytes, and its last label is not all digits (that is
 * an IP address in another spelling, e.g. "127.1"). `in` need not be
 * NUL-terminated. On success *out is a new string (caller frees); on
 * failure returns -EINVAL and *why (static text) says what is wrong.
 */
PDK_MUST_CHECK int pdk_egress_host_normalize(const char *in, size_t len, char **out,
					     const char **why);

/*
 * Parse one `network.allow` entry: "host", "host:port", "*.suffix[:port]",
 * "1.2.3.4[:port]" or "[v6][:port]". Fills *r (release with
 * pdk_egress_rule_release()). On failure returns -EINVAL and *why is a new
 * message (caller frees).
 */
PDK_MUST_CHECK int pdk_egress_rule_parse(const char *entry, struct pdk_egress_rule *r, char **why);
void pdk_egress_rule_release(struct pdk_egress_rule *r);

/* Does `r` allow `port`? (port 0 in the rule means 80 and 443.) */
bool pdk_egress_rule_port_ok(const struct pdk_egress_rule *r, uint16_t port);

/*
 * The first rule that allows the normalized name `host` on `port`
 * (HOST and SUFFIX rules only), or NULL.
 */
const struct pdk_egress_rule *pdk_egress_match_host(const struct pdk_egress_rule *rules, size_t n,
						    const char *host, uint16_t port);

/* The first IP rule naming exactly this address (v4-mapped v6 = its v4) and port, or NULL. */
const struct pdk_egress_rule *pdk_egress_match_addr(const struct pdk_egress_rule *rules, size_t n,
						    const struct sockaddr *sa, uint16_t port);

/* What kind of address a resolved one is; everything but PUBLIC is denied unless listed. */
enum pdk_egress_addr_class {
	PDK_EGRESS_ADDR_PUBLIC = 0,
	PDK_EGRESS_ADDR_LOOPBACK,    /* 127/8, ::1 */
	PDK_EGRESS_ADDR_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10 */
	PDK_EGRESS_ADDR_CGNAT,       /* 100.64/10 */
	PDK_EGRESS_ADDR_LINK_LOCAL,  /* 169.254/16 (cloud metadata), fe80::/10 */
	PDK_EGRESS_ADDR_UNSPECIFIED, /* 0/8, :: */
	PDK_EGRESS_ADDR_MULTICAST,   /* 224/4, ff00::/8 */
	PDK_EGRESS_ADDR_RESERVED,    /* 240/4 and broadcast, benchmarking, documentation */
	PDK_EGRESS_ADDR_HOST,        /* one of this machine's own addresses */
};

/*
 * Classify an AF_INET or AF_INET6 address. IPv6 forms that embed an IPv4
 * address (v4-mapped ::ffff:a.b.c.d, v4-compatible ::a.b.c.d, NAT64
 * 64:ff9b::/96, 6to4 2002::/16) are classified by the embedded address.
 * Never returns PDK_EGRESS_ADDR_HOST (see pdk_egress_is_local()).
 * Anything else than AF_INET/AF_INET6 is RESERVED.
 */
enum pdk_egress_addr_class pdk_egress_classify(const struct sockaddr *sa);

/* "loopback", "private", ...: for 403 bodies and events. */
const char *pdk_egress_addr_class_name(enum pdk_egress_addr_class c);

/* Append HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, their lowercase twins and NO_PROXY= to *env. */
void pdk_egress_env_add(char ***env);

/* ---- credentials (plain HTTP) ---- */

/* paddock's own environment variable that holds secret NAME: "PADDOCK_SECRET_" + NAME in upper
 * case. */
#define PDK_EGRESS_SECRET_PREFIX "PADDOCK_SECRET_"

/*
 * Parse a `network.credentials` header template, "Name: text ${secret:NAME}
 * text": a field name of letters, digits and '-' (not a hop-by-hop or Host
 * field), printable ASCII text, exactly one ${secret:NAME} with NAME of 1 to
 * 32 characters of [a-z0-9_]. On success *field and *secret are new strings
 * (caller frees); on failure -EINVAL and *why (new string).
 */
PDK_MUST_CHECK int pdk_egress_cred_parse(const char *header, char **field, char **secret,
					 char **why);

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
	const struct pdk_egress_rule *rules; /* borrowed for the proxy's life */
	size_t n_rules;
	uint64_t max_bytes;        /* bytes both ways, all connections; 0 = unlimited */
	uint64_t max_requests;     /* requests and tunnels allowed upstream; 0 = unlimited */
	uint64_t max_connections;  /* upstream connections open at once; 0 = unlimited */
	struct pdk_events *events; /* borrowed; may be NULL */
	const char *resolv_conf;   /* NULL: $PADDOCK_RESOLV_CONF, else /etc/resolv.conf */
	const char *hosts;         /* NULL: $PADDOCK_HOSTS, else /etc/hosts */
	char *const *credentials;  /* pairs host, header template (policy network.credentials) */
	const char *sandbox_id;    /* for the placeholders */
	/*
	 * The sandbox's CA (egress-tls.h; borrowed), or NULL. When set, a CONNECT
	 * to a host that a credential rule names is intercepted: TLS towards the
	 * sandbox with a leaf of this CA, verified TLS towards the real server,
	 * and the requests inside get the credentials.
	 */
	struct pdk_egress_ca *ca;
};

struct pdk_egress;

/*
 * Start the proxy on `listen_fd` (a listening TCP socket; ownership taken,
 * also on failure) in a thread of its own. Returns NULL + *err when the
 * resolver configuration, a credential's secret (PADDOCK_SECRET_<NAME> in
 * this process's environment), the event loop or the thread cannot be set up.
 */
struct pdk_egress *pdk_egress_start(const struct pdk_egress_config *cfg, int listen_fd,
				    struct pdk_error **err);

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

#endif
