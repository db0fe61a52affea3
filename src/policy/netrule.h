/*
 * netrule.h - the network-rule syntax of a policy: `network.allow` entries
 * (host, *.suffix, IP literal, optional port), host name normalization,
 * the classes of addresses the egress proxy refuses unless listed, and
 * `network.credentials` header templates. Pure functions, shared by the
 * policy parser (validation) and the egress proxy (matching).
 */
#ifndef PDK_NETRULE_H
#define PDK_NETRULE_H

#include "common.h"

struct sockaddr; /* <sys/socket.h> is left to the users that need it */

/* Longest normalized host name (RFC 1035: 253 characters). */
#define PDK_NET_HOST_MAX 253

enum pdk_net_rule_kind {
	PDK_NET_RULE_HOST = 0, /* exactly this name */
	PDK_NET_RULE_SUFFIX,   /* "*.suffix": any name strictly below suffix */
	PDK_NET_RULE_IP,       /* an IP literal (v4, or v6 written in brackets) */
};

struct pdk_net_rule {
	enum pdk_net_rule_kind kind;
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
 * PDK_NET_HOST_MAX bytes, and its last label is not all digits (that is
 * an IP address in another spelling, e.g. "127.1"). `in` need not be
 * NUL-terminated. On success *out is a new string (caller frees); on
 * failure returns -EINVAL and *why (static text) says what is wrong.
 */
PDK_MUST_CHECK int pdk_net_host_normalize(const char *in, size_t len, char **out, const char **why);

/*
 * Parse one `network.allow` entry: "host", "host:port", "*.suffix[:port]",
 * "1.2.3.4[:port]" or "[v6][:port]". Fills *r (release with
 * pdk_net_rule_release()). On failure returns -EINVAL and *why is a new
 * message (caller frees).
 */
PDK_MUST_CHECK int pdk_net_rule_parse(const char *entry, struct pdk_net_rule *r, char **why);
void pdk_net_rule_release(struct pdk_net_rule *r);

/* Does `r` allow `port`? (port 0 in the rule means 80 and 443.) */
bool pdk_net_rule_port_ok(const struct pdk_net_rule *r, uint16_t port);

/*
 * The first rule that allows the normalized name `host` on `port`
 * (HOST and SUFFIX rules only), or NULL.
 */
const struct pdk_net_rule *pdk_net_match_host(const struct pdk_net_rule *rules, size_t n,
					      const char *host, uint16_t port);

/* The first IP rule naming exactly this address (v4-mapped v6 = its v4) and port, or NULL. */
const struct pdk_net_rule *pdk_net_match_addr(const struct pdk_net_rule *rules, size_t n,
					      const struct sockaddr *sa, uint16_t port);

/* What kind of address a resolved one is; everything but PUBLIC is denied unless listed. */
enum pdk_net_addr_class {
	PDK_NET_ADDR_PUBLIC = 0,
	PDK_NET_ADDR_LOOPBACK,    /* 127/8, ::1 */
	PDK_NET_ADDR_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10 */
	PDK_NET_ADDR_CGNAT,       /* 100.64/10 */
	PDK_NET_ADDR_LINK_LOCAL,  /* 169.254/16 (cloud metadata), fe80::/10 */
	PDK_NET_ADDR_UNSPECIFIED, /* 0/8, :: */
	PDK_NET_ADDR_MULTICAST,   /* 224/4, ff00::/8 */
	PDK_NET_ADDR_RESERVED,    /* 240/4 and broadcast, benchmarking, documentation */
	PDK_NET_ADDR_HOST,        /* one of this machine's own addresses */
};

/*
 * Classify an AF_INET or AF_INET6 address. IPv6 forms that embed an IPv4
 * address (v4-mapped ::ffff:a.b.c.d, v4-compatible ::a.b.c.d, NAT64
 * 64:ff9b::/96, 6to4 2002::/16) are classified by the embedded address.
 * Never returns PDK_NET_ADDR_HOST: the egress proxy compares an address with
 * the host's own ones itself (judge_addr() in egress/egress-upstream.c).
 * Anything else than AF_INET/AF_INET6 is RESERVED.
 */
enum pdk_net_addr_class pdk_net_classify(const struct sockaddr *sa);

/* "loopback", "private", ...: for 403 bodies and events. */
const char *pdk_net_addr_class_name(enum pdk_net_addr_class c);

/*
 * Parse a `network.credentials` header template, "Name: text ${secret:NAME}
 * text": a field name of letters, digits and '-' (not a hop-by-hop or Host
 * field), printable ASCII text, exactly one ${secret:NAME} with NAME of 1 to
 * 32 characters of [a-z0-9_]. On success *field and *secret are new strings
 * (caller frees); on failure -EINVAL and *why (new string).
 */
PDK_MUST_CHECK int pdk_net_cred_parse(const char *header, char **field, char **secret, char **why);

#endif
