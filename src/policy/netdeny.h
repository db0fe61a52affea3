/*
 * netdeny.h - the destinations a sandbox was denied, and the option that
 * would allow each (docs/egress.md, "Denied destinations").
 *
 * The egress proxy (a thread of its own) and the sandbox's name server (the
 * supervising thread) record what they refused; the front end reads the
 * list at the end of a run or of an exec and prints it with the `--allow`
 * value that would let it through. The log is bounded: it keeps the first
 * PDK_NET_DENIALS_MAX distinct destinations and counts the rest, so a
 * sandbox that tries a million names costs the supervisor a few KiB.
 * Every function is safe to call from several threads at once.
 */
#ifndef PDK_NETDENY_H
#define PDK_NETDENY_H

#include "common.h"

#define PDK_NET_DENIALS_MAX 32

/* One destination, as the front end prints it. */
struct pdk_net_denial {
	char *dest;     /* "pypi.org:443", or a name that was looked up: "pypi.org" */
	char *why;      /* "no network.allow entry", "name lookup, network.mode none" */
	char *allow;    /* the value of --allow (or of a network.allow entry) that allows it */
	uint64_t seq;   /* the log's counter at its last refusal (pdk_net_denials_seq()) */
	uint64_t count; /* how many times it was refused */
};

struct pdk_net_denials;

struct pdk_net_denials *pdk_net_denials_new(void);
void pdk_net_denials_free(struct pdk_net_denials *d);

/*
 * The value of --allow that allows `host` (a normalized name, or an IPv4 or
 * IPv6 address without brackets) on `port`: "pypi.org" for ports 80 and 443
 * of a name, "host:port" otherwise, "[2001:db8::1]:443" for IPv6. New string.
 */
char *pdk_net_allow_hint(const char *host, uint16_t port);

/*
 * Record a refusal of `host` (port 0: a name lookup, no port) and why.
 * Copies the strings. A destination already in the log has its count and
 * seq updated; a new one past PDK_NET_DENIALS_MAX is only counted. d may be
 * NULL (nothing is kept).
 */
void pdk_net_denials_add(struct pdk_net_denials *d, const char *host, uint16_t port,
			 const char *why);

/* The counter: it grows by one with every refusal recorded. 0 for NULL. */
uint64_t pdk_net_denials_seq(struct pdk_net_denials *d);

/*
 * A copy of the destinations refused since the counter was `since` (0:
 * all), in the order they were first refused; *more counts those refused
 * but not kept. Caller frees with pdk_net_denial_list_free(). Returns the
 * number of entries (and NULL for 0).
 */
size_t pdk_net_denials_since(struct pdk_net_denials *d, uint64_t since, struct pdk_net_denial **out,
			     uint64_t *more);
void pdk_net_denial_list_free(struct pdk_net_denial *v, size_t n);

#endif
