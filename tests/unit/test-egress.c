/*
 * test-egress.c - the egress proxy's pure parts: host normalization,
 * allowlist entries and matching, address classification (every SSRF
 * class), the request-head parser, and the policy fields; and the proxy
 * itself on loopback, for its events that fail closed.
 */
#include "common.h"
#include "egress-internal.h"
#include "policy.h"
#include "util.h"
#include "test-helpers.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- host names ---- */

static void norm_ok(const char *in, const char *want)
{
	_cleanup_free_ char *out = NULL;
	const char *why = NULL;
	int rc = pdk_net_host_normalize(in, strlen(in), &out, &why);

	cr_assert_eq(rc, 0, "'%s': %s", in, why ? why : "");
	cr_assert_str_eq(out, want, "'%s'", in);
}

static void norm_bad(const char *in, const char *reason)
{
	char *out = NULL;
	const char *why = NULL;
	int rc = pdk_net_host_normalize(in, strlen(in), &out, &why);

	cr_assert_eq(rc, -EINVAL, "'%s' accepted as '%s'", in, out ? out : "");
	cr_assert_null(out);
	cr_assert_not_null(strstr(why, reason), "'%s': %s", in, why);
}

Test(egress, normalize_case_and_trailing_dot)
{
	norm_ok("Example.COM", "example.com");
	norm_ok("example.com.", "example.com");
	norm_ok("API.GitHub.com.", "api.github.com");
	norm_ok("_dmarc.example.com", "_dmarc.example.com");
	norm_ok("a-b.c", "a-b.c");
}

Test(egress, normalize_idn)
{
	norm_ok("bücher.example", "xn--bcher-kva.example");
	norm_ok("BÜCHER.example", "xn--bcher-kva.example");
	norm_ok("xn--bcher-kva.example", "xn--bcher-kva.example");
	norm_ok("XN--BCHER-KVA.EXAMPLE.", "xn--bcher-kva.example");
	norm_ok("例え.テスト", "xn--r8jz45g.xn--zckzah");
}

Test(egress, normalize_refusals)
{
	norm_bad("", "empty");
	norm_bad(".", "empty");
	norm_bad("a..b", "label");
	norm_bad("-a.com", "'-'");
	norm_bad("a-.com", "'-'");
	norm_bad("a b.com", "character");
	norm_bad("a/b.com", "character");
	norm_bad("a:b", "character");
	norm_bad("127.1", "number");
	norm_bad("0x7f.1", "number");
	norm_bad("2130706433", "number");
	norm_bad("10.0.0.1", "number");
	norm_bad("\xff\xfe.com", "IDNA");
	{
		char big[300];

		memset(big, 'a', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		norm_bad(big, "253");
	}
	{
		const char nul[] = "a\0b.com";
		char *out = NULL;
		const char *why = NULL;

		cr_assert_eq(pdk_net_host_normalize(nul, sizeof(nul) - 1, &out, &why), -EINVAL);
		cr_assert_not_null(strstr(why, "NUL"));
	}
}

/* ---- allow entries ---- */

static void rule_ok(const char *entry, enum pdk_net_rule_kind kind, const char *text, uint16_t port)
{
	struct pdk_net_rule r;
	_cleanup_free_ char *why = NULL;

	cr_assert_eq(pdk_net_rule_parse(entry, &r, &why), 0, "'%s': %s", entry, why);
	cr_assert_eq(r.kind, kind, "'%s'", entry);
	cr_assert_str_eq(r.text, text, "'%s'", entry);
	cr_assert_eq(r.port, port, "'%s'", entry);
	pdk_net_rule_release(&r);
}

static void rule_bad(const char *entry, const char *reason)
{
	struct pdk_net_rule r;
	_cleanup_free_ char *why = NULL;

	cr_assert_eq(pdk_net_rule_parse(entry, &r, &why), -EINVAL, "'%s' accepted", entry);
	cr_assert_not_null(strstr(why, reason), "'%s': %s", entry, why);
}

Test(egress, rule_forms)
{
	rule_ok("Example.com", PDK_NET_RULE_HOST, "example.com", 0);
	rule_ok("example.com.:8443", PDK_NET_RULE_HOST, "example.com:8443", 8443);
	rule_ok("*.GitHub.com", PDK_NET_RULE_SUFFIX, "*.github.com", 0);
	rule_ok("*.github.com:443", PDK_NET_RULE_SUFFIX, "*.github.com:443", 443);
	rule_ok("*.bücher.example", PDK_NET_RULE_SUFFIX, "*.xn--bcher-kva.example", 0);
	rule_ok("127.0.0.1:8080", PDK_NET_RULE_IP, "127.0.0.1:8080", 8080);
	rule_ok("10.1.2.3", PDK_NET_RULE_IP, "10.1.2.3", 0);
	rule_ok("[::1]:8080", PDK_NET_RULE_IP, "[::1]:8080", 8080);
	rule_ok("[2001:DB8:0:0::1]", PDK_NET_RULE_IP, "[2001:db8::1]", 0);
}

Test(egress, rule_refusals)
{
	rule_bad("*", "wildcard");
	rule_bad("a.*.com", "wildcard");
	rule_bad("*example.com", "wildcard");
	rule_bad("example.com:0", "1 to 65535");
	rule_bad("example.com:65536", "1 to 65535");
	rule_bad("example.com:http", "1 to 65535");
	rule_bad("example.com:", "1 to 65535");
	rule_bad("::1", "brackets");
	rule_bad("[::1", "']'");
	rule_bad("[::1]x", "':PORT'");
	rule_bad("[example.com]", "IPv6");
	rule_bad("1.2.3", "IPv4");
	rule_bad("256.1.1.1", "IPv4");
	rule_bad("127.1", "IPv4");
	rule_bad("exa mple.com", "character");
}

struct rules {
	struct pdk_net_rule r[8];
	size_t n;
};

static void rules_add(struct rules *rs, const char *entry)
{
	_cleanup_free_ char *why = NULL;

	cr_assert_eq(pdk_net_rule_parse(entry, &rs->r[rs->n], &why), 0, "%s", entry);
	rs->n++;
}

static void rules_release(struct rules *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		pdk_net_rule_release(&rs->r[i]);
}

static const char *match(struct rules *rs, const char *host, uint16_t port)
{
	const struct pdk_net_rule *r = pdk_net_match_host(rs->r, rs->n, host, port);

	return r ? r->text : NULL;
}

Test(egress, match_exact_wildcard_port)
{
	struct rules rs = {0};

	rules_add(&rs, "example.com");
	rules_add(&rs, "*.github.com:443");
	rules_add(&rs, "api.example.org:8443");
	cr_assert_str_eq(match(&rs, "example.com", 443), "example.com");
	cr_assert_str_eq(match(&rs, "example.com", 80), "example.com");
	cr_assert_null(match(&rs, "example.com", 8080), "default ports are 80 and 443 only");
	cr_assert_null(match(&rs, "www.example.com", 443), "an exact rule has no subdomains");
	cr_assert_null(match(&rs, "badexample.com", 443));
	cr_assert_str_eq(match(&rs, "api.github.com", 443), "*.github.com:443");
	cr_assert_str_eq(match(&rs, "a.b.github.com", 443), "*.github.com:443");
	cr_assert_null(match(&rs, "github.com", 443),
		       "a wildcard does not match its suffix itself");
	cr_assert_null(match(&rs, "evilgithub.com", 443));
	cr_assert_null(match(&rs, "api.github.com", 80), "an explicit port is the only one");
	cr_assert_null(match(&rs, "github.com.evil.net", 443));
	cr_assert_str_eq(match(&rs, "api.example.org", 8443), "api.example.org:8443");
	cr_assert_null(match(&rs, "api.example.org", 443));
	rules_release(&rs);
}

Test(egress, match_after_normalization)
{
	struct rules rs = {0};
	_cleanup_free_ char *h1 = NULL;
	_cleanup_free_ char *h2 = NULL;
	const char *why;

	rules_add(&rs, "bücher.example");
	cr_assert_eq(pdk_net_host_normalize("BÜCHER.Example.", 16, &h1, &why), 0);
	cr_assert_str_eq(match(&rs, h1, 443), "xn--bcher-kva.example");
	cr_assert_eq(pdk_net_host_normalize("XN--BCHER-KVA.EXAMPLE", 21, &h2, &why), 0);
	cr_assert_str_eq(match(&rs, h2, 80), "xn--bcher-kva.example");
	rules_release(&rs);
}

static struct sockaddr_storage sa_of(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, text, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	else
		cr_assert_fail("bad test address '%s'", text);
	return ss;
}

Test(egress, match_ip_literals)
{
	struct rules rs = {0};
	struct sockaddr_storage a;

	rules_add(&rs, "127.0.0.1:8080");
	rules_add(&rs, "[::1]:9090");
	rules_add(&rs, "example.com");
	a = sa_of("127.0.0.1");
	cr_assert_not_null(pdk_net_match_addr(rs.r, rs.n, (struct sockaddr *)&a, 8080));
	cr_assert_null(pdk_net_match_addr(rs.r, rs.n, (struct sockaddr *)&a, 8081));
	a = sa_of("::ffff:127.0.0.1");
	cr_assert_not_null(pdk_net_match_addr(rs.r, rs.n, (struct sockaddr *)&a, 8080),
			   "a v4-mapped address is its v4 address");
	a = sa_of("127.0.0.2");
	cr_assert_null(pdk_net_match_addr(rs.r, rs.n, (struct sockaddr *)&a, 8080));
	a = sa_of("::1");
	cr_assert_not_null(pdk_net_match_addr(rs.r, rs.n, (struct sockaddr *)&a, 9090));
	cr_assert_null(pdk_net_match_addr(rs.r, rs.n, (struct sockaddr *)&a, 8080));
	cr_assert_null(match(&rs, "127.0.0.1", 8080), "an IP rule is not a name rule");
	rules_release(&rs);
}

/* ---- rules added while the proxy runs (pdk_egress_allow) ---- */

/* A proxy that was never started: only its rules, as pdk_egress_start() would set them. */
static struct pdk_egress *rules_only(const struct rules *rs)
{
	struct pdk_egress *e = pdk_xcalloc(1, sizeof(*e));

	e->cfg.rules = rs->r;
	e->cfg.n_rules = rs->n;
	e->wake_fd[0] = e->wake_fd[1] = e->failed_fd = -1;
	cr_assert_eq(pthread_mutex_init(&e->live_lock, NULL), 0);
	return e;
}

static void allow_live(struct pdk_egress *e, const char *entry)
{
	_cleanup_free_ char *why = NULL;
	struct pdk_net_rule r;

	cr_assert_eq(pdk_net_rule_parse(entry, &r, &why), 0, "%s: %s", entry, why);
	pdk_egress_allow(e, &r);
	cr_assert_null(r.text, "the rule's contents are taken");
}

Test(egress, live_rules_match_after_the_configured)
{
	struct rules rs = {0};
	struct pdk_egress *e;
	const struct pdk_net_rule *kept;
	struct sockaddr_storage a = sa_of("10.1.2.3");

	rules_add(&rs, "a.test");
	e = rules_only(&rs);
	cr_assert_null(pdk__egress_match_host(e, "b.test", 443));
	allow_live(e, "b.test");
	kept = pdk__egress_match_host(e, "b.test", 443);
	cr_assert_not_null(kept, "an added rule allows at once");
	cr_assert_str_eq(kept->text, "b.test");
	cr_assert_eq(pdk__egress_match_host(e, "a.test", 80), &rs.r[0], "the configured first");
	cr_assert_null(pdk__egress_match_host(e, "b.test", 8080), "default ports only");
	cr_assert_null(pdk__egress_match_addr(e, (struct sockaddr *)&a, 8080));
	allow_live(e, "10.1.2.3:8080");
	cr_assert_not_null(pdk__egress_match_addr(e, (struct sockaddr *)&a, 8080));
	cr_assert_null(pdk__egress_match_addr(e, (struct sockaddr *)&a, 80));
	cr_assert_null(pdk__egress_match_host(e, "10.1.2.3", 8080), "an IP rule is no name rule");
	for (int i = 0; i < 40; i++) {
		_cleanup_free_ char *name = pdk_xasprintf("n%d.test", i);

		allow_live(e, name);
	}
	/* A connection keeps the rule that allowed it: the array grew, the rule did not move. */
	cr_assert_eq(pdk__egress_match_host(e, "b.test", 443), kept);
	cr_assert_not_null(pdk__egress_match_host(e, "n39.test", 443));
	pdk_egress_stop(e);
	rules_release(&rs);
}

/* ---- address classes ---- */

static void cls(const char *text, enum pdk_net_addr_class want)
{
	struct sockaddr_storage a = sa_of(text);
	enum pdk_net_addr_class got = pdk_net_classify((struct sockaddr *)&a);

	cr_assert_eq(got, want, "%s: got %s, want %s", text, pdk_net_addr_class_name(got),
		     pdk_net_addr_class_name(want));
}

Test(egress, classify_v4)
{
	cls("127.0.0.1", PDK_NET_ADDR_LOOPBACK);
	cls("127.255.255.254", PDK_NET_ADDR_LOOPBACK);
	cls("10.0.0.1", PDK_NET_ADDR_PRIVATE);
	cls("172.16.0.1", PDK_NET_ADDR_PRIVATE);
	cls("172.31.255.255", PDK_NET_ADDR_PRIVATE);
	cls("172.32.0.1", PDK_NET_ADDR_PUBLIC);
	cls("192.168.1.1", PDK_NET_ADDR_PRIVATE);
	cls("100.64.0.1", PDK_NET_ADDR_CGNAT);
	cls("100.127.255.255", PDK_NET_ADDR_CGNAT);
	cls("100.128.0.1", PDK_NET_ADDR_PUBLIC);
	cls("169.254.169.254", PDK_NET_ADDR_LINK_LOCAL);
	cls("0.0.0.0", PDK_NET_ADDR_UNSPECIFIED);
	cls("0.1.2.3", PDK_NET_ADDR_UNSPECIFIED);
	cls("224.0.0.1", PDK_NET_ADDR_MULTICAST);
	cls("239.255.255.250", PDK_NET_ADDR_MULTICAST);
	cls("255.255.255.255", PDK_NET_ADDR_RESERVED);
	cls("240.0.0.1", PDK_NET_ADDR_RESERVED);
	cls("192.0.2.1", PDK_NET_ADDR_RESERVED);
	cls("198.18.0.1", PDK_NET_ADDR_RESERVED);
	cls("8.8.8.8", PDK_NET_ADDR_PUBLIC);
	cls("93.184.216.34", PDK_NET_ADDR_PUBLIC);
}

Test(egress, classify_v6)
{
	cls("::1", PDK_NET_ADDR_LOOPBACK);
	cls("::", PDK_NET_ADDR_UNSPECIFIED);
	cls("fe80::1", PDK_NET_ADDR_LINK_LOCAL);
	cls("febf::1", PDK_NET_ADDR_LINK_LOCAL);
	cls("fc00::1", PDK_NET_ADDR_PRIVATE);
	cls("fd12:3456::1", PDK_NET_ADDR_PRIVATE);
	cls("fec0::1", PDK_NET_ADDR_PRIVATE);
	cls("ff02::1", PDK_NET_ADDR_MULTICAST);
	cls("2001:db8::1", PDK_NET_ADDR_RESERVED);
	cls("2606:4700::1111", PDK_NET_ADDR_PUBLIC);
}

Test(egress, classify_v6_embedding_v4)
{
	cls("::ffff:127.0.0.1", PDK_NET_ADDR_LOOPBACK);
	cls("::ffff:169.254.169.254", PDK_NET_ADDR_LINK_LOCAL);
	cls("::ffff:10.0.0.1", PDK_NET_ADDR_PRIVATE);
	cls("::ffff:8.8.8.8", PDK_NET_ADDR_PUBLIC);
	cls("::127.0.0.1", PDK_NET_ADDR_LOOPBACK);
	cls("64:ff9b::a9fe:a9fe", PDK_NET_ADDR_LINK_LOCAL);
	cls("64:ff9b::808:808", PDK_NET_ADDR_PUBLIC);
	cls("2002:7f00:1::", PDK_NET_ADDR_LOOPBACK);
	cls("2002:c0a8:101::1", PDK_NET_ADDR_PRIVATE);
}

Test(egress, classify_other_family)
{
	struct sockaddr sa = {.sa_family = AF_UNIX};

	cr_assert_eq(pdk_net_classify(&sa), PDK_NET_ADDR_RESERVED);
}

/* ---- request heads ---- */

static int head(struct pdk__egress_head *h, const char *s)
{
	return pdk__egress_head_parse(h, s, strlen(s));
}

Test(egress, head_connect)
{
	struct pdk__egress_head h = {0};
	const char *req = "CONNECT Example.COM:443 HTTP/1.1\r\nHost: x\r\n\r\nTLS";

	cr_assert_eq(head(&h, req), (int)strlen(req) - 3);
	cr_assert(h.connect);
	cr_assert_str_eq(h.host, "example.com");
	cr_assert_eq(h.port, 443);
	cr_assert_not(h.host_is_ip);
	pdk__egress_head_release(&h);
}

Test(egress, head_absolute_get_and_rebuild)
{
	struct pdk__egress_head h = {0};
	const char *req = "GET http://Origin.Test:8080/a/b?q=1#frag HTTP/1.1\r\n"
			  "Host: evil.example\r\nUser-Agent: t\r\nProxy-Authorization: x\r\n"
			  "Connection: keep-alive, X-Secret\r\nX-Secret: s\r\nAccept: */*\r\n\r\n";
	_cleanup_free_ char *up = NULL;
	size_t len = 0;

	cr_assert_eq(head(&h, req), (int)strlen(req));
	cr_assert_not(h.connect);
	cr_assert(h.msg_done, "a GET without a body is complete");
	cr_assert(h.keep_alive);
	cr_assert_str_eq(h.host, "origin.test");
	cr_assert_eq(h.port, 8080);
	up = pdk__egress_head_upstream(&h, req, NULL, &len);
	cr_assert_str_eq(up, "GET /a/b?q=1 HTTP/1.1\r\nHost: origin.test:8080\r\nUser-Agent: t\r\n"
			     "Accept: */*\r\nConnection: close\r\n\r\n");
	cr_assert_eq(len, strlen(up));
	pdk__egress_head_release(&h);
}

Test(egress, head_upstream_keep_alive)
{
	struct pdk__egress_head h = {0};
	const char *req = "GET http://origin.test/x HTTP/1.1\r\nConnection: keep-alive\r\n"
			  "Keep-Alive: timeout=5\r\nAccept: */*\r\n\r\n";
	_cleanup_free_ char *up = NULL;
	size_t len = 0;

	cr_assert_eq(head(&h, req), (int)strlen(req));
	cr_assert(h.keep_alive);
	/* The proxy keeps the upstream connection: no Connection field, HTTP/1.1 persists. */
	h.upstream_keep_alive = true;
	up = pdk__egress_head_upstream(&h, req, NULL, &len);
	cr_assert_str_eq(up, "GET /x HTTP/1.1\r\nHost: origin.test\r\nAccept: */*\r\n\r\n");
	cr_assert_eq(len, strlen(up));
	pdk__egress_head_release(&h);
	cr_assert_not(h.upstream_keep_alive, "a released head asks for close again");
}

Test(egress, head_http10_no_keep_alive)
{
	struct pdk__egress_head h = {0};
	const char *req = "GET http://origin.test/ HTTP/1.0\r\n\r\n";

	cr_assert_eq(head(&h, req), (int)strlen(req));
	cr_assert_not(h.keep_alive,
		      "HTTP/1.0 without keep-alive closes, so the upstream is not kept");
	pdk__egress_head_release(&h);
}

Test(egress, head_ip_hosts)
{
	struct pdk__egress_head h = {0};

	cr_assert_gt(head(&h, "GET http://127.0.0.1:8080/ HTTP/1.1\r\n\r\n"), 0);
	cr_assert(h.host_is_ip);
	cr_assert_eq(h.ip.ss_family, AF_INET);
	cr_assert_str_eq(h.host, "127.0.0.1");
	cr_assert_gt(head(&h, "CONNECT [::1]:443 HTTP/1.1\r\n\r\n"), 0);
	cr_assert(h.host_is_ip);
	cr_assert_eq(h.ip.ss_family, AF_INET6);
	cr_assert_str_eq(h.host, "::1");
	cr_assert_eq(head(&h, "GET http://127.1/ HTTP/1.1\r\n\r\n"), -1,
		     "a short IPv4 spelling is neither an address nor a name");
	cr_assert_eq(h.status, 400);
	pdk__egress_head_release(&h);
}

Test(egress, head_incomplete_then_complete)
{
	struct pdk__egress_head h = {0};
	const char *req = "GET http://a.test/ HTTP/1.1\r\nAccept: */*\r\n\r\n";

	for (size_t i = 0; i < strlen(req); i++)
		cr_assert_eq(pdk__egress_head_parse(&h, req, i), 0, "%zu bytes", i);
	cr_assert_eq(head(&h, req), (int)strlen(req));
	pdk__egress_head_release(&h);
}

static void head_err(const char *req, int status, const char *reason)
{
	struct pdk__egress_head h = {0};

	cr_assert_eq(head(&h, req), -1, "%s", req);
	cr_assert_eq(h.status, status, "%s: %d", req, h.status);
	cr_assert_not_null(strstr(h.reason, reason), "%s: %s", req, h.reason);
	pdk__egress_head_release(&h);
}

Test(egress, head_errors)
{
	head_err("GET /relative HTTP/1.1\r\nHost: a\r\n\r\n", 400, "no host");
	head_err("GET https://a.test/ HTTP/1.1\r\n\r\n", 400, "CONNECT");
	head_err("GET ftp://a.test/ HTTP/1.1\r\n\r\n", 400, "http://");
	head_err("GET http://u:p@a.test/ HTTP/1.1\r\n\r\n", 400, "credentials");
	head_err("CONNECT a.test HTTP/1.1\r\n\r\n", 400, "");
	head_err("TRACE http://a.test/ HTTP/1.1\r\n\r\n", 405, "method");
	head_err("BREW http://a.test/ HTTP/1.1\r\n\r\n", 405, "method");
	head_err("GET http://a.test/ HTTP/1.1\r\nBad Header\r\n\r\n", 400, "malformed");
	head_err("\x16\x03\x01\x02\x00\x01", 405, "method");
	head_err("GET http://a b/ HTTP/1.1\r\n\r\n", 400, "");
	head_err("GET http://a.test:0/ HTTP/1.1\r\n\r\n", 400, "");
}

Test(egress, head_size_caps)
{
	struct pdk__egress_head h = {0};
	char *big = pdk_xmalloc(PDK__EGRESS_HEAD_MAX + 64);
	char *many = NULL;
	size_t len = 0;
	FILE *f;

	memset(big, 'a', PDK__EGRESS_HEAD_MAX + 63);
	memcpy(big, "GET http://a.test/ HTTP/1.1\r\nX: ", 32);
	big[PDK__EGRESS_HEAD_MAX + 63] = '\0';
	cr_assert_eq(head(&h, big), -1);
	cr_assert_eq(h.status, 431);
	f = open_memstream(&many, &len);
	fputs("GET http://a.test/ HTTP/1.1\r\n", f);
	for (int i = 0; i < PDK__EGRESS_HEADERS_MAX + 1; i++)
		fprintf(f, "X-%d: v\r\n", i);
	fputs("\r\n", f);
	fclose(f);
	cr_assert_eq(head(&h, many), -1);
	cr_assert_eq(h.status, 431);
	cr_assert_not_null(strstr(h.reason, "too many"));
	free(many);
	free(big);
	pdk__egress_head_release(&h);
}

Test(egress, body_content_length_and_pipelining)
{
	struct pdk__egress_head h = {0};
	const char *req = "POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
	int n = head(&h, req);

	cr_assert_eq(n, (int)strlen(req));
	cr_assert_not(h.msg_done);
	cr_assert_eq(pdk__egress_body_feed(&h, "ab", 2), 2);
	cr_assert_not(h.msg_done);
	cr_assert_eq(pdk__egress_body_feed(&h, "cdeGET http://b/", 16), 3,
		     "the next request's bytes are not body");
	cr_assert(h.msg_done);
	pdk__egress_head_release(&h);
}

Test(egress, body_chunked)
{
	struct pdk__egress_head h = {0};
	const char *req = "PUT http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
	const char *body = "3\r\nabc\r\n0\r\n\r\nNEXT";

	cr_assert_eq(head(&h, req), (int)strlen(req));
	cr_assert_eq(pdk__egress_body_feed(&h, body, strlen(body)), (ssize_t)strlen(body) - 4);
	cr_assert(h.msg_done);
	pdk__egress_head_release(&h);
}

/* Feed `text` to a fresh scanner in pieces of `step` bytes; the index found or -1. */
static ssize_t scan_in_steps(const char *const *needles, size_t n, const char *text, size_t step)
{
	struct pdk__egress_scan s;
	size_t len = strlen(text);

	cr_assert_eq(pdk__egress_scan_init(&s, needles, n), 0);
	for (size_t off = 0; off < len; off += step)
		(void)pdk__egress_scan_feed(&s, text + off, len - off < step ? len - off : step);
	return s.found;
}

Test(egress, scan_finds_needles_split_anywhere)
{
	static const char *const needles[] = {"paddock-secret-a-1234", "paddock-secret-bb-1234"};
	const char *text = "xxxxxxxxxxxxxxxxxxxxpaddock-secret-bb-1234yyyyyyyyyyy";

	/* Every piece size, from one byte (the needle in 22 pieces) to the whole text. */
	for (size_t step = 1; step <= strlen(text); step++)
		cr_assert_eq(scan_in_steps(needles, 2, text, step), 1, "step %zu", step);
	cr_assert_eq(scan_in_steps(needles, 2, "paddock-secret-a-123", 3), -1,
		     "a prefix is not it");
	cr_assert_eq(scan_in_steps(needles, 2, "paddock-secret-a-12x4paddock-secret-a-1234", 7), 0);
	cr_assert_eq(scan_in_steps(needles, 2, "", 1), -1);
}

Test(egress, scan_tail_spans_many_short_pieces)
{
	static const char *const needles[] = {"0123456789abcdef"};
	struct pdk__egress_scan s;

	cr_assert_eq(pdk__egress_scan_init(&s, needles, 1), 0);
	/* Pieces shorter than the kept tail: it must hold bytes of several of them. */
	cr_assert_not(pdk__egress_scan_feed(&s, "zz0123", 6));
	cr_assert_not(pdk__egress_scan_feed(&s, "45", 2));
	cr_assert_not(pdk__egress_scan_feed(&s, "6789a", 5));
	cr_assert_not(pdk__egress_scan_feed(&s, "", 0));
	cr_assert(pdk__egress_scan_feed(&s, "bcdefzz", 7));
	cr_assert_eq(s.found, 0);
	cr_assert(pdk__egress_scan_feed(&s, "more", 4), "a find stays found");
}

Test(egress, scan_limits)
{
	char long_needle[PDK__EGRESS_SCAN_MAX + 2];
	const char *one[] = {long_needle};
	const char *empty[] = {""};
	const char *many[PDK__EGRESS_SCAN_NEEDLES + 1];
	struct pdk__egress_scan s;

	memset(long_needle, 'a', sizeof(long_needle) - 1);
	long_needle[sizeof(long_needle) - 1] = '\0';
	cr_assert_eq(pdk__egress_scan_init(&s, one, 1), -1);
	cr_assert_eq(pdk__egress_scan_init(&s, empty, 1), -1);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(many); i++)
		many[i] = "x";
	cr_assert_eq(pdk__egress_scan_init(&s, many, PDK_ARRAY_SIZE(many)), -1);
	cr_assert_eq(pdk__egress_scan_init(&s, many, PDK__EGRESS_SCAN_NEEDLES), 0);
}

/* The body parser feeds the scanner the content: chunk framing does not hide a needle. */
Test(egress, body_scan_through_chunks)
{
	static const char *const needles[] = {"SECRETPH"};
	struct pdk__egress_head h = {0};
	struct pdk__egress_scan s;
	const char *req = "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
	const char *body = "4\r\nSECR\r\n4\r\nETPH\r\n5\r\nafter\r\n0\r\n\r\n";
	ssize_t n;

	cr_assert_eq(head(&h, req), (int)strlen(req));
	cr_assert_eq(pdk__egress_scan_init(&s, needles, 1), 0);
	h.scan = &s;
	n = pdk__egress_body_feed(&h, body, strlen(body));
	cr_assert_eq(s.found, 0);
	cr_assert(n > 0 && n < (ssize_t)strlen(body), "the parser stops at the piece (%zd)", n);
	cr_assert_not(h.msg_done);
	cr_assert_eq(pdk__egress_body_feed(&h, body + n, strlen(body) - (size_t)n), 0,
		     "nothing more is consumed once a needle was found");
	pdk__egress_head_release(&h);
}

/* The body's declared length, which the proxy's hold bound reserves at the head. */
Test(egress, head_body_len)
{
	struct pdk__egress_head h = {0};
	const char *cl = "POST http://a.test/ HTTP/1.1\r\nContent-Length: 70000\r\n\r\n";
	const char *zero = "POST http://a.test/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
	const char *none = "GET http://a.test/ HTTP/1.1\r\n\r\n";
	const char *chunked = "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";

	cr_assert_eq(head(&h, cl), (int)strlen(cl));
	cr_assert_eq(h.body_len, 70000);
	cr_assert_not(h.msg_done);
	cr_assert_eq(pdk__egress_body_feed(&h, "abc", 3), 3);
	cr_assert_eq(h.body_len, 70000, "the declared length, not what is left");
	cr_assert_eq(head(&h, zero), (int)strlen(zero));
	cr_assert_eq(h.body_len, 0);
	cr_assert(h.msg_done);
	cr_assert_eq(head(&h, none), (int)strlen(none));
	cr_assert_eq(h.body_len, 0);
	cr_assert(h.msg_done);
	cr_assert_eq(head(&h, chunked), (int)strlen(chunked));
	cr_assert_eq(h.body_len, UINT64_MAX);
	cr_assert_not(h.msg_done);
	pdk__egress_head_release(&h);
}

Test(egress, head_expect_continue)
{
	struct pdk__egress_head h = {0};
	const char *a = "POST http://a.test/ HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: "
			"3\r\n\r\n";
	const char *b = "POST http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\n\r\n";

	cr_assert_eq(head(&h, a), (int)strlen(a));
	cr_assert(h.expect_continue);
	cr_assert_eq(head(&h, b), (int)strlen(b));
	cr_assert_not(h.expect_continue);
	pdk__egress_head_release(&h);
}

Test(egress, response_boundaries)
{
	struct pdk__egress_resp r;
	const char *a = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiEXTRA";
	const char *b = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
	const char *c = "HTTP/1.0 200 OK\r\n\r\nuntil eof";
	const char *d = "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";

	pdk__egress_resp_init(&r, false);
	cr_assert_eq(pdk__egress_resp_feed(&r, a, strlen(a)), (ssize_t)strlen(a) - 5);
	cr_assert(r.done);
	cr_assert(r.keep_alive);
	pdk__egress_resp_init(&r, false);
	cr_assert_eq(pdk__egress_resp_feed(&r, b, strlen(b)), (ssize_t)strlen(b));
	cr_assert(r.done, "an interim 100 is followed by the final answer");
	cr_assert_eq(r.p.status_code, 204);
	pdk__egress_resp_init(&r, false);
	cr_assert_eq(pdk__egress_resp_feed(&r, c, strlen(c)), (ssize_t)strlen(c));
	cr_assert_not(r.done);
	cr_assert_eq(pdk__egress_resp_feed(&r, NULL, 0), 0);
	cr_assert(r.done, "EOF ends a response without a length");
	cr_assert_not(r.keep_alive);
	pdk__egress_resp_init(&r, true);
	cr_assert_eq(pdk__egress_resp_feed(&r, d, strlen(d)), (ssize_t)strlen(d));
	cr_assert(r.done, "the answer to HEAD has no body");
	pdk__egress_resp_init(&r, false);
	cr_assert_eq(pdk__egress_resp_feed(&r, "NOT HTTP\r\n", 10), -1);
}

/* ---- policy ---- */

static struct pdk_policy *parse_yaml(const char *yaml, struct pdk_policy_report *r)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	return pdk_policy_parse("t.yaml", yaml, strlen(yaml), r, &err);
}

Test(egress, policy_fields)
{
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = parse_yaml("network:\n  mode: allowlist\n  allow: [Example.COM, "
					  "'*.github.com:443', '[::1]:8080', bücher.example]\n"
					  "limits: {egress_bytes: 10M, egress_requests: 100, "
					  "egress_connections: 4}\n",
					  &r);
	struct pdk_test_text t;
	_cleanup_error_ struct pdk_error *err = NULL;
	char *out;

	cr_assert_not_null(p);
	cr_assert_eq(p->network.mode, PDK_NET_ALLOWLIST);
	cr_assert_str_eq(p->network.allow[0], "example.com");
	cr_assert_str_eq(p->network.allow[1], "*.github.com:443");
	cr_assert_str_eq(p->network.allow[2], "[::1]:8080");
	cr_assert_str_eq(p->network.allow[3], "xn--bcher-kva.example");
	cr_assert_null(p->network.allow[4]);
	cr_assert_eq(p->limits.egress_bytes, 10 << 20);
	cr_assert_eq(p->limits.egress_requests, 100);
	cr_assert_eq(p->limits.egress_connections, 4);
	cr_assert_eq(pdk_policy_dump(p, pdk_test_text_open(&t), &err), 0);
	out = pdk_test_text_take(&t);
	cr_assert_not_null(strstr(out, "mode: allowlist"), "%s", out);
	cr_assert_not_null(strstr(out, "egress_bytes: 10M"), "%s", out);
	cr_assert_not_null(strstr(out, "'*.github.com:443'"), "%s", out);
	{
		struct pdk_policy *back = parse_yaml(out, NULL);

		cr_assert_not_null(back, "the dump reads back: %s", out);
		cr_assert_str_eq(back->network.allow[1], "*.github.com:443");
		cr_assert_str_eq(back->network.allow[3], "xn--bcher-kva.example");
		pdk_policy_free(back);
	}
	free(out);
	pdk_policy_free(p);
	pdk_policy_report_release(&r);
}

static void policy_err(const char *yaml, const char *field, int line, int col, const char *msg)
{
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = parse_yaml(yaml, &r);

	cr_assert_null(p, "%s", yaml);
	cr_assert_eq(r.n, 1, "%s: %zu problems", yaml, r.n);
	cr_assert_str_eq(r.diags[0].field, field);
	cr_assert_eq(r.diags[0].line, line, "%s: line %d", yaml, r.diags[0].line);
	cr_assert_eq(r.diags[0].column, col, "%s: column %d", yaml, r.diags[0].column);
	cr_assert_not_null(strstr(r.diags[0].msg, msg), "%s", r.diags[0].msg);
	pdk_policy_report_release(&r);
}

Test(egress, policy_errors)
{
	policy_err("network:\n  allow:\n    - example.com\n    - 'a.*.com'\n", "network.allow[1]",
		   4, 7, "wildcard");
	policy_err("network:\n  allow: [example.com:99999]\n", "network.allow[0]", 2, 11,
		   "1 to 65535");
	policy_err("network:\n  allow: [Example.com, example.com.]\n", "network.allow[1]", 2, 24,
		   "listed twice");
	policy_err("network:\n  allow: example.com\n", "network.allow", 2, 10, "expected a list");
	policy_err("network:\n  allow: ['127.1']\n", "network.allow[0]", 2, 11, "IPv4");
	policy_err("limits:\n  egress_bytes: lots\n", "limits.egress_bytes", 2, 17, "a size");
	policy_err("limits:\n  egress_requests: -1\n", "limits.egress_requests", 2, 20,
		   "a whole number");
}

/* ---- credentials ---- */

Test(egress, credential_templates)
{
	char *field = NULL, *secret = NULL, *why = NULL;

	cr_assert_eq(
		pdk_net_cred_parse("Authorization: Bearer ${secret:github}", &field, &secret, &why),
		0);
	cr_assert_str_eq(field, "Authorization");
	cr_assert_str_eq(secret, "github");
	free(field);
	free(secret);
	cr_assert_eq(pdk_net_cred_parse("X-Api-Key: ${secret:k_2}", &field, &secret, &why), 0);
	cr_assert_str_eq(secret, "k_2");
	free(field);
	free(secret);
	{
		static const struct {
			const char *hdr, *why;
		} bad[] = {
			{"Authorization Bearer ${secret:a}", "Name: value"},
			{"Host: ${secret:a}", "Name: value"},
			{"Content-Length: ${secret:a}", "Name: value"},
			{"X-A: no secret", "${secret:NAME}"},
			{"X-A: ${secret:Upper}", "${secret:NAME}"},
			{"X-A: ${secret:}", "${secret:NAME}"},
			{"X-A: ${secret:a} ${secret:b}", "only one"},
			{"X-A: ${env:HOME} ${secret:a}", "only one"},
			{"X-A: ${secret:a}\r\nX-B: b", "printable"},
			{"X: a\x7f ${secret:a}", "printable"},
		};

		for (size_t i = 0; i < PDK_ARRAY_SIZE(bad); i++) {
			why = NULL;
			cr_assert_eq(pdk_net_cred_parse(bad[i].hdr, &field, &secret, &why), -EINVAL,
				     "%s", bad[i].hdr);
			cr_assert_not_null(strstr(why, bad[i].why), "%s: %s", bad[i].hdr, why);
			free(why);
		}
	}
}

Test(egress, secret_placeholders_in_env)
{
	_cleanup_strv_ char **env = NULL;
	char *creds[] = {"api.test", "Authorization: Bearer ${secret:tok}", "b.test",
			 "X-Key: ${secret:tok}", NULL};
	_cleanup_free_ char *ph = pdk_egress_placeholder("tok", "ID");

	cr_assert_str_eq(ph, "paddock-secret-tok-ID");
	pdk_strv_push(&env, "PADDOCK_SECRET_TOK=the-real-value");
	pdk_strv_push(&env, "PATH=/bin");
	pdk_egress_secret_env_set(&env, creds, "ID");
	cr_assert_str_eq(env[0], "PADDOCK_SECRET_TOK=paddock-secret-tok-ID",
			 "a value copied in with -e is replaced by the placeholder");
	cr_assert_str_eq(env[1], "PATH=/bin");
	cr_assert_null(env[2], "one variable per secret");
}

Test(egress, head_rewrite_for_credentials)
{
	struct pdk__egress_head h = {0};
	const char *req = "GET http://api.test/v1?t=PH HTTP/1.1\r\nAuthorization: token x\r\n"
			  "X-Tok: a PH b PH\r\nAccept: */*\r\n\r\n";
	const char *drop[] = {"authorization"};
	const char *from[] = {"PH"};
	const char *to[] = {"VALUE"};
	const char *extra[] = {"Authorization: Bearer VALUE"};
	struct pdk__egress_rewrite rw = {drop, 1, from, to, 1, extra, 1};
	_cleanup_free_ char *up = NULL;
	size_t len = 0;

	cr_assert_eq(head(&h, req), (int)strlen(req));
	up = pdk__egress_head_upstream(&h, req, &rw, &len);
	cr_assert_str_eq(up, "GET /v1?t=VALUE HTTP/1.1\r\nHost: api.test\r\n"
			     "X-Tok: a VALUE b VALUE\r\nAccept: */*\r\n"
			     "Authorization: Bearer VALUE\r\nConnection: close\r\n\r\n");
	pdk__egress_head_release(&h);
}

Test(egress, policy_credentials)
{
	struct pdk_policy_report r = {0};
	struct pdk_policy *p = parse_yaml(
		"network:\n  mode: allowlist\n  credentials:\n"
		"    - {host: API.Test, header: 'Authorization: Bearer ${secret:tok}'}\n",
		&r);
	struct pdk_test_text t;
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_policy *back;
	char *out;

	cr_assert_not_null(p);
	cr_assert_str_eq(p->network.credentials[0], "api.test");
	cr_assert_str_eq(p->network.credentials[1], "Authorization: Bearer ${secret:tok}");
	cr_assert_null(p->network.credentials[2]);
	cr_assert_eq(pdk_policy_dump(p, pdk_test_text_open(&t), &err), 0);
	out = pdk_test_text_take(&t);
	back = parse_yaml(out, NULL);
	cr_assert_not_null(back, "%s", out);
	cr_assert_str_eq(back->network.credentials[1], "Authorization: Bearer ${secret:tok}");
	pdk_policy_free(back);
	free(out);
	pdk_policy_free(p);
	pdk_policy_report_release(&r);
	policy_err("network:\n  credentials:\n    - {host: a.test}\n", "network.credentials[0]", 3,
		   7, "needs 'header'");
	policy_err("network:\n  credentials:\n    - {host: a.test, header: 'X: y', z: 1}\n",
		   "network.credentials[0]", 3, 38, "unknown key 'z'");
	policy_err("network:\n  credentials:\n    - {host: 'a.*', header: 'X: ${secret:a}'}\n",
		   "network.credentials[0].host", 3, 14, "wildcard");
	policy_err("network:\n  credentials:\n    - {host: a.test, header: 'X: plain'}\n",
		   "network.credentials[0].header", 3, 30, "${secret:NAME}");
	policy_err("network:\n  credentials: {host: a.test}\n", "network.credentials", 2, 16,
		   "expected a list");
}

Test(egress, env_names_the_proxy)
{
	_cleanup_strv_ char **env = NULL;
	const char *want[] = {"HTTP_PROXY=http://127.0.0.1:3128",
			      "https_proxy=http://127.0.0.1:3128",
			      "ALL_PROXY=http://127.0.0.1:3128", "NO_PROXY="};

	pdk_egress_env_add(&env);
	for (size_t i = 0; i < PDK_ARRAY_SIZE(want); i++) {
		bool found = false;

		for (size_t j = 0; env[j] != NULL; j++)
			found = found || strcmp(env[j], want[i]) == 0;
		cr_assert(found, "%s", want[i]);
	}
}

/* ---- the proxy's events fail closed ---- */

/* A sink that fails every event of one kind (and every event after it). */
struct failing_sink {
	const char *kind;
	bool broken;
	int seen;
};

static int failing_emit(void *data, const json_t *event, struct pdk_error **err)
{
	struct failing_sink *s = data;

	s->seen++;
	if (strcmp(json_string_value(json_object_get(event, "kind")), s->kind) == 0)
		s->broken = true;
	return s->broken ? pdk_error_setx(err, ENOSPC, "the test's sink is full") : 0;
}

static const struct pdk_events_sink failing_ops = {.name = "test sink", .emit = failing_emit};

/* A TCP socket listening on 127.0.0.1, an ephemeral port (*port). */
static int listen_local(uint16_t *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 16), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Send `req` to the proxy on a new connection and read its answer until it closes. */
static char *ask(uint16_t proxy, const char *req)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(proxy),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval t = {10, 0};
	char *out = pdk_xcalloc(1, 4096);
	size_t len = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof(t)), 0);
	cr_assert_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while (len < 4095 && (n = read(fd, out + len, 4095 - len)) > 0)
		len += (size_t)n;
	cr_assert_eq(n, 0, "the proxy closes the connection after its answer");
	close(fd);
	return out;
}

/* Did anything connect to the origin? (It never accepts: a connection would wait there.) */
static bool origin_reached(int origin)
{
	int fd = accept4(origin, NULL, NULL, SOCK_CLOEXEC);

	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

struct proxy_fixture {
	struct pdk_net_rule rule;
	struct pdk_events *ev;
	struct failing_sink sink;
	struct pdk_egress *e;
	int origin;
	uint16_t origin_port, proxy_port;
	char *allow, *cred_host;
};

/* A proxy allowing the origin (which has a credential rule), its events going to `sink`. */
static void proxy_start(struct proxy_fixture *f, const char *failing_kind)
{
	static char *secrets[] = {"PADDOCK_SECRET_TOK=the-value", NULL};
	char *creds[] = {NULL, "Authorization: Bearer ${secret:tok}", NULL};
	_cleanup_error_ struct pdk_error *err = NULL;
	char *why = NULL;
	int lfd;

	f->origin = listen_local(&f->origin_port);
	lfd = listen_local(&f->proxy_port);
	f->allow = pdk_xasprintf("127.0.0.1:%u", f->origin_port);
	cr_assert_eq(pdk_net_rule_parse(f->allow, &f->rule, &why), 0);
	creds[0] = f->allow;
	f->sink.kind = failing_kind;
	f->ev = pdk_events_new("id", "test");
	pdk_events_add_sink(f->ev, &failing_ops, &f->sink);
	f->e = pdk_egress_start(&(struct pdk_egress_config){.rules = &f->rule,
							    .n_rules = 1,
							    .events = f->ev,
							    .hosts = "/dev/null",
							    .resolv_conf = "/dev/null",
							    .secrets_env = secrets,
							    .credentials = creds,
							    .sandbox_id = "id"},
				lfd, &err);
	cr_assert_not_null(f->e, "%s", err ? err->msg : "");
}

static void proxy_stop(struct proxy_fixture *f)
{
	pdk_egress_stop(f->e);
	pdk_events_free(f->ev);
	pdk_net_rule_release(&f->rule);
	close(f->origin);
	free(f->allow);
}

/* The owner's side: the descriptor is readable once, and the error stays. */
static void assert_owner_told(struct pdk_egress *e)
{
	struct pollfd p = {.fd = pdk_egress_fd(e), .events = POLLIN};
	struct pdk_error *err = NULL;

	cr_assert_eq(poll(&p, 1, 5000), 1, "the owner's poll wakes");
	cr_assert_eq(pdk_egress_failed(e, &err), -ENOSPC);
	cr_assert_str_eq(err->msg, "test sink: the test's sink is full");
	cr_assert_eq(err->status, ENOSPC);
	pdk_error_free(&err);
	cr_assert_eq(poll(&p, 1, 0), 0, "it wakes once");
	cr_assert_eq(pdk_egress_failed(e, &err), -ENOSPC, "the failure stays");
	pdk_error_free(&err);
}

Test(egress, unrecorded_injection_is_refused)
{
	struct proxy_fixture f = {0};
	_cleanup_free_ char *req = NULL;
	_cleanup_free_ char *out = NULL;
	struct pdk_error *err = NULL;

	proxy_start(&f, "net.credential");
	cr_assert_eq(pdk_egress_failed(f.e, &err), 0, "nothing failed yet");
	req = pdk_xasprintf("GET http://%s/x HTTP/1.1\r\nHost: a\r\n\r\n", f.allow);
	out = ask(f.proxy_port, req);
	cr_assert(strncmp(out, "HTTP/1.1 503 ", 13) == 0, "%s", out);
	cr_assert_not_null(strstr(out, "\r\n\r\npaddock egress: events cannot be recorded: the "
				       "request is refused"),
			   "%s", out);
	cr_assert_not(origin_reached(f.origin), "the request never went up");
	assert_owner_told(f.e);
	proxy_stop(&f);
}

Test(egress, unrecorded_event_refuses_every_later_request)
{
	struct proxy_fixture f = {0};
	_cleanup_free_ char *get = NULL;
	_cleanup_free_ char *connect = NULL;
	_cleanup_free_ char *out = NULL;

	proxy_start(&f, "net.connect");
	/* A denial is refused whether or not it is recorded; its event is the first failure. */
	out = ask(f.proxy_port, "GET http://denied.test/ HTTP/1.1\r\nHost: a\r\n\r\n");
	cr_assert(strncmp(out, "HTTP/1.1 403 ", 13) == 0, "%s", out);
	assert_owner_told(f.e);
	free(steal_ptr(&out));
	/* Allowed requests after it go nowhere: plain HTTP (with its credential) and CONNECT. */
	get = pdk_xasprintf("GET http://%s/x HTTP/1.1\r\nHost: a\r\n\r\n", f.allow);
	connect = pdk_xasprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", f.allow, f.allow);
	out = ask(f.proxy_port, get);
	cr_assert(strncmp(out, "HTTP/1.1 503 ", 13) == 0, "%s", out);
	free(steal_ptr(&out));
	out = ask(f.proxy_port, connect);
	cr_assert(strncmp(out, "HTTP/1.1 503 ", 13) == 0, "%s", out);
	cr_assert_not(origin_reached(f.origin), "nothing went up");
	proxy_stop(&f);
}

/* The origin: answers one request on one connection, keeps it open until the proxy closes it. */
static void *origin_answer(void *arg)
{
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct pollfd p = {.fd = *(int *)arg, .events = POLLIN};
	char buf[4096];
	int fd;

	if (poll(&p, 1, 10000) != 1)
		return NULL;
	fd = accept4(p.fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (read(fd, buf, sizeof(buf)) > 0 &&
	    write(fd, answer, sizeof(answer) - 1) == (ssize_t)sizeof(answer) - 1)
		(void)!read(fd, buf, sizeof(buf));
	close(fd);
	return NULL;
}

Test(egress, unrecorded_answer_ends_the_kept_connection)
{
	struct proxy_fixture f = {0};
	_cleanup_free_ char *req = NULL;
	_cleanup_free_ char *out = NULL;
	pthread_t origin;

	proxy_start(&f, "net.connect");
	cr_assert_eq(pthread_create(&origin, NULL, origin_answer, &f.origin), 0);
	/* Keep-alive on both sides: without the failure, the connection would stay open. */
	req = pdk_xasprintf("GET http://%s/x HTTP/1.1\r\nHost: a\r\n\r\n", f.allow);
	out = ask(f.proxy_port, req);
	cr_assert(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", out);
	cr_assert_str_eq(out + strlen(out) - 4, "\r\nok", "the whole answer, then the end");
	assert_owner_told(f.e);
	cr_assert_eq(pthread_join(origin, NULL), 0);
	proxy_stop(&f);
}
