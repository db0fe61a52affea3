/*
 * test-dns.c - the sandbox's name server's answer (engine/dns.c) and the log
 * of denied destinations (policy/netdeny.c).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common.h"
#include "base.h"
#include "dns.h"
#include "policy.h"

/* A query for `name` (dotted) of type `qtype`, id 0x1234, RD set. Its length. */
static size_t query(uint8_t *q, const char *name, unsigned qtype)
{
	size_t n = 12;
	const char *p = name;

	memset(q, 0, 12);
	q[0] = 0x12, q[1] = 0x34, q[2] = 0x01, q[5] = 1;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);

		q[n++] = (uint8_t)l;
		memcpy(q + n, p, l);
		n += l;
		p += l + (dot ? 1 : 0);
	}
	q[n++] = 0;
	q[n++] = 0, q[n++] = (uint8_t)qtype, q[n++] = 0, q[n++] = 1;
	return n;
}

Test(dns, nxdomain_echoes_the_question)
{
	uint8_t q[PDK_DNS_MAX], a[PDK_DNS_MAX];
	char name[PDK_DNS_NAME_MAX];
	size_t n = query(q, "PyPI.org", 28);
	ssize_t m = pdk_dns_answer(q, n, a, name);

	cr_assert_eq(m, (ssize_t)n);
	cr_assert_eq(a[0], 0x12);
	cr_assert_eq(a[1], 0x34);
	cr_assert_eq(a[2], 0x81); /* QR, RD */
	cr_assert_eq(a[3], 0x83); /* RA, NXDOMAIN */
	cr_assert_eq(a[5], 1);
	cr_assert_eq(a[7] | a[9] | a[11], 0);
	cr_assert(memcmp(a + 12, q + 12, n - 12) == 0);
	cr_assert_str_eq(name, "pypi.org");
}

Test(dns, names_recorded_only_for_plain_address_questions)
{
	uint8_t q[PDK_DNS_MAX], a[PDK_DNS_MAX];
	char name[PDK_DNS_NAME_MAX];

	cr_assert_gt(pdk_dns_answer(q, query(q, "1.0.0.127.in-addr.arpa", 12), a, name), 0);
	cr_assert_str_eq(name, "");
	cr_assert_gt(pdk_dns_answer(q, query(q, "a\033b.example", 1), a, name), 0);
	cr_assert_str_eq(name, "", "a control byte in a label is never recorded");
}

Test(dns, malformed_queries_are_dropped)
{
	uint8_t q[PDK_DNS_MAX], a[PDK_DNS_MAX];
	char name[PDK_DNS_NAME_MAX];
	size_t n = query(q, "example.com", 1);

	cr_assert_eq(pdk_dns_answer(q, n - 1, a, name), -1, "cut short");
	cr_assert_eq(pdk_dns_answer(q, 11, a, name), -1, "no header");
	q[12] = 0xc0; /* a compression pointer */
	cr_assert_eq(pdk_dns_answer(q, n, a, name), -1);
	n = query(q, "example.com", 1);
	q[2] |= 0x80; /* a response */
	cr_assert_eq(pdk_dns_answer(q, n, a, name), -1);
	n = query(q, "example.com", 1);
	q[5] = 2; /* two questions */
	cr_assert_eq(pdk_dns_answer(q, n, a, name), -1);
	cr_assert_eq(pdk_dns_answer(q, PDK_DNS_MAX + 1, a, name), -1, "longer than a datagram");
}

Test(netdeny, hints_and_windows)
{
	struct pdk_net_denials *d = pdk_net_denials_new();
	struct pdk_net_denial *v = NULL;
	uint64_t more = 0, seq;
	size_t n;
	_cleanup_free_ char *h1 = pdk_net_allow_hint("pypi.org", 443);
	_cleanup_free_ char *h2 = pdk_net_allow_hint("example.com", 8080);
	_cleanup_free_ char *h3 = pdk_net_allow_hint("10.0.0.1", 443);
	_cleanup_free_ char *h4 = pdk_net_allow_hint("2001:db8::1", 443);

	cr_assert_str_eq(h1, "pypi.org");
	cr_assert_str_eq(h2, "example.com:8080");
	cr_assert_str_eq(h3, "10.0.0.1:443");
	cr_assert_str_eq(h4, "[2001:db8::1]:443");
	pdk_net_denials_add(d, "pypi.org", 0, "name lookup, network.mode none");
	pdk_net_denials_add(d, "pypi.org", 443, "no network.allow entry");
	pdk_net_denials_add(d, "pypi.org", 443, "no network.allow entry");
	seq = pdk_net_denials_seq(d);
	cr_assert_eq(seq, 3);
	pdk_net_denials_add(d, "npmjs.org", 443, "no network.allow entry");
	n = pdk_net_denials_since(d, 0, &v, &more);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[1].dest, "pypi.org:443");
	cr_assert_eq(v[1].count, 2);
	pdk_net_denial_list_free(v, n);
	n = pdk_net_denials_since(d, seq, &v, &more);
	cr_assert_eq(n, 1, "only what was refused after seq");
	cr_assert_str_eq(v[0].allow, "npmjs.org");
	pdk_net_denial_list_free(v, n);
	for (int i = 0; i < 40; i++) {
		_cleanup_free_ char *h = pdk_xasprintf("h%d.test", i);

		pdk_net_denials_add(d, h, 80, "no network.allow entry");
	}
	n = pdk_net_denials_since(d, 0, &v, &more);
	cr_assert_eq(n, PDK_NET_DENIALS_MAX);
	cr_assert_eq(more, 40 - (PDK_NET_DENIALS_MAX - 3));
	pdk_net_denial_list_free(v, n);
	pdk_net_denials_free(d);
}
