/*
 * dns.h - the sandbox's name server: every question answered at once with
 * "no such name" (NXDOMAIN).
 *
 * A sandbox in a network namespace of its own (modes none and allowlist)
 * has no route to any name server. Without one, a resolver reports
 * "Temporary failure in name resolution" (EAI_AGAIN), or waits for its
 * timeouts (musl, Go, c-ares send unconnected datagrams that no error
 * answers), and a program or an agent retries. The child binds a UDP
 * socket on 127.0.0.1:53 in the sandbox's namespace and hands it to the
 * supervisor, whose loop answers from it; the view's /etc/resolv.conf
 * names it. NXDOMAIN is the one answer that every resolver turns into a
 * failure that is final ("Name or service not known", ENOTFOUND), and the
 * name is recorded for the summary of denied destinations (netdeny.h).
 * In allowlist mode the proxy resolves names itself, outside the sandbox.
 */
#ifndef PDK_DNS_H
#define PDK_DNS_H

#include "common.h"

/* The port on 127.0.0.1 inside the sandbox, and the view's resolver file. */
#define PDK_DNS_PORT        53
#define PDK_DNS_RESOLV_CONF "nameserver 127.0.0.1\noptions attempts:1\n"

/* The longest datagram read or written (RFC 1035 4.2.1). */
#define PDK_DNS_MAX 512

/* A question's name as text ("pypi.org"), with room for the longest. */
#define PDK_DNS_NAME_MAX 256

/*
 * The answer to the query q[0..n): its header and its one question, with
 * QR, RA and RCODE NXDOMAIN set and no record, written to out (at least
 * PDK_DNS_MAX bytes). The question's name goes to `name` in lower case
 * when it is an ordinary host name (letters, digits, '-', '_', dots) asked
 * for an address (A or AAAA), else name[0] is 0. Returns the answer's
 * length, or -1 when q is no query to answer (a response, another opcode,
 * more or fewer than one question, a malformed name): it is dropped.
 */
PDK_MUST_CHECK ssize_t pdk_dns_answer(const uint8_t *q, size_t n, uint8_t *out,
				      char name[PDK_DNS_NAME_MAX]);

#endif
