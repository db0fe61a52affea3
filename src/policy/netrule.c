/*
 * netrule.c - the network-rule syntax: allowlist entries, host name
 * normalization, address classification and credential header templates.
 * Pure functions: the policy parser validates `network.allow` and
 * `network.credentials` with the same code that the egress proxy later
 * matches requests with, so an entry cannot mean two things.
 */
#include "common.h"
#include "base.h"
#include "netrule.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <idn2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *xstrndup_local(const char *s, size_t n)
{
	char *d = pdk_xmalloc(n + 1);

	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

static bool is_host_char(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_';
}

/* Labels of 1..63 host characters, no leading or trailing '-', last label not all digits. */
static const char *check_labels(const char *s)
{
	size_t len = strlen(s);
	const char *last = s;
	bool digits = true;

	if (len == 0)
		return "the host name is empty";
	if (len > PDK_NET_HOST_MAX)
		return "the host name is longer than 253 characters";
	while (*s) {
		size_t l = strcspn(s, ".");

		if (l == 0 || l > 63)
			return "a label of the host name is empty or longer than 63 characters";
		if (s[0] == '-' || s[l - 1] == '-')
			return "a label of the host name starts or ends with '-'";
		last = s;
		for (size_t i = 0; i < l; i++) {
			if (!is_host_char((unsigned char)s[i]))
				return "the host name has a character other than letters, digits, "
				       "'-', '_' and '.'";
		}
		s += l;
		if (*s == '.')
			s++;
	}
	for (; *last && *last != '.'; last++)
		digits = digits && isdigit((unsigned char)*last);
	if (digits)
		return "the host name's last label is a number (write an IP address in dotted "
		       "form)";
	return NULL;
}

static bool all_ascii(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if ((unsigned char)s[i] >= 0x80)
			return false;
	}
	return true;
}

int pdk_net_host_normalize(const char *in, size_t len, char **out, const char **why)
{
	_cleanup_free_ char *s = NULL;
	const char *bad;

	if (memchr(in, '\0', len) != NULL) {
		*why = "the host name has a NUL byte";
		return -EINVAL;
	}
	if (len > 0 && in[len - 1] == '.')
		len--; /* "example.com." is the same name, fully qualified */
	if (len == 0 || len > 4 * PDK_NET_HOST_MAX) {
		*why = len == 0 ? "the host name is empty" : "the host name is too long";
		return -EINVAL;
	}
	s = pdk_xmalloc(len + 1);
	memcpy(s, in, len);
	s[len] = '\0';
	if (!all_ascii(s, len)) {
		char *a = NULL;
		int rc = idn2_lookup_u8((const uint8_t *)s, (uint8_t **)&a,
					IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);

		if (rc != IDN2_OK) {
			*why = "the host name is not a valid internationalized name (IDNA)";
			return -EINVAL;
		}
		free(s);
		s = pdk_xstrdup(a);
		idn2_free(a);
	}
	for (char *c = s; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	bad = check_labels(s);
	if (bad != NULL) {
		*why = bad;
		return -EINVAL;
	}
	*out = steal_ptr(&s);
	return 0;
}

/* ---- allow entries ---- */

/* Split "host[:port]" / "[v6][:port]": *host_len, and *port (0 if absent). */
static int split_port(const char *e, size_t *host_len, uint16_t *port, char **why)
{
	const char *colon;
	uint64_t v;

	if (e[0] == '[') {
		const char *close = strchr(e, ']');

		if (close == NULL) {
			*why = pdk_xstrdup("an IPv6 address in brackets has no ']'");
			return -EINVAL;
		}
		colon = close[1] == ':' ? close + 1 : NULL;
		if (close[1] != '\0' && colon == NULL) {
			*why = pdk_xstrdup("expected ':PORT' after ']'");
			return -EINVAL;
		}
	} else {
		colon = strchr(e, ':');
		if (colon != NULL && strchr(colon + 1, ':') != NULL) {
			*why = pdk_xstrdup("write an IPv6 address in brackets: [2001:db8::1]:443");
			return -EINVAL;
		}
	}
	*host_len = colon ? (size_t)(colon - e) : strlen(e);
	*port = 0;
	if (colon == NULL)
		return 0;
	if (pdk_parse_u64(colon + 1, 65535, &v) < 0 || v == 0) {
		*why = pdk_xasprintf("the port '%.16s' is not a number from 1 to 65535", colon + 1);
		return -EINVAL;
	}
	*port = (uint16_t)v;
	return 0;
}

static int parse_ip(const char *h, size_t len, struct pdk_net_rule *r, char **why)
{
	char buf[INET6_ADDRSTRLEN + 2];
	char canon[INET6_ADDRSTRLEN];
	bool v6 = h[0] == '[';

	if (len >= sizeof(buf) || (v6 && (len < 2 || h[len - 1] != ']'))) {
		*why = pdk_xstrdup("not a valid IP address");
		return -EINVAL;
	}
	memcpy(buf, h + v6, len - 2 * v6);
	buf[len - 2 * v6] = '\0';
	r->family = v6 ? AF_INET6 : AF_INET;
	if (inet_pton(r->family, buf, r->addr) != 1) {
		*why = pdk_xasprintf("'%s' is not a valid IPv%d address", buf, v6 ? 6 : 4);
		return -EINVAL;
	}
	if (inet_ntop(r->family, r->addr, canon, sizeof(canon)) == NULL) {
		*why = pdk_xstrdup("not a valid IP address");
		return -EINVAL;
	}
	r->kind = PDK_NET_RULE_IP;
	r->host = v6 ? pdk_xasprintf("[%s]", canon) : pdk_xstrdup(canon);
	return 0;
}

/* A dotted quad: what inet_pton(AF_INET) would be asked to read. */
static bool looks_v4(const char *h, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)h[i]) && h[i] != '.')
			return false;
	}
	return len > 0;
}

int pdk_net_rule_parse(const char *entry, struct pdk_net_rule *r, char **why)
{
	const char *msg = NULL;
	size_t hlen = 0;
	const char *h = entry;
	bool wild = strncmp(entry, "*.", 2) == 0;

	memset(r, 0, sizeof(*r));
	*why = NULL;
	if (split_port(entry, &hlen, &r->port, why) < 0)
		return -EINVAL;
	if (entry[0] == '[' || looks_v4(entry, hlen)) {
		if (parse_ip(entry, hlen, r, why) < 0)
			return -EINVAL;
	} else {
		if (wild) {
			h += 2;
			hlen -= 2;
		} else if (memchr(h, '*', hlen) != NULL) {
			*why = pdk_xstrdup("a wildcard is only allowed as a whole first label: "
					   "'*.example.com'");
			return -EINVAL;
		}
		if (pdk_net_host_normalize(h, hlen, &r->host, &msg) < 0) {
			*why = pdk_xstrdup(msg);
			return -EINVAL;
		}
		r->kind = wild ? PDK_NET_RULE_SUFFIX : PDK_NET_RULE_HOST;
	}
	r->text = r->port ? pdk_xasprintf("%s%s:%u", wild ? "*." : "", r->host, r->port)
			  : pdk_xasprintf("%s%s", wild ? "*." : "", r->host);
	return 0;
}

void pdk_net_rule_release(struct pdk_net_rule *r)
{
	if (r == NULL)
		return;
	free(r->host);
	free(r->text);
	memset(r, 0, sizeof(*r));
}

bool pdk_net_rule_port_ok(const struct pdk_net_rule *r, uint16_t port)
{
	return r->port ? r->port == port : port == 80 || port == 443;
}

static bool host_matches(const struct pdk_net_rule *r, const char *host)
{
	size_t hl = strlen(host), sl;

	if (r->kind == PDK_NET_RULE_HOST)
		return strcmp(r->host, host) == 0;
	if (r->kind != PDK_NET_RULE_SUFFIX)
		return false;
	/* "*.example.com" matches "a.example.com", not "example.com" nor "badexample.com". */
	sl = strlen(r->host);
	return hl > sl + 1 && host[hl - sl - 1] == '.' && strcmp(host + hl - sl, r->host) == 0;
}

const struct pdk_net_rule *pdk_net_match_host(const struct pdk_net_rule *rules, size_t n,
					      const char *host, uint16_t port)
{
	for (size_t i = 0; i < n; i++) {
		if (host_matches(&rules[i], host) && pdk_net_rule_port_ok(&rules[i], port))
			return &rules[i];
	}
	return NULL;
}

/* The address's bytes as the rules store them: a v4-mapped v6 address is its v4. */
static int addr_bytes(const struct sockaddr *sa, uint8_t out[16])
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return AF_INET;
	}
	if (sa->sa_family != AF_INET6)
		return AF_UNSPEC;
	memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	if (memcmp(out, mapped, 12) == 0) {
		memmove(out, out + 12, 4);
		return AF_INET;
	}
	return AF_INET6;
}

const struct pdk_net_rule *pdk_net_match_addr(const struct pdk_net_rule *rules, size_t n,
					      const struct sockaddr *sa, uint16_t port)
{
	uint8_t a[16];
	int fam = addr_bytes(sa, a);

	for (size_t i = 0; i < n; i++) {
		const struct pdk_net_rule *r = &rules[i];

		if (r->kind != PDK_NET_RULE_IP || r->family != fam ||
		    !pdk_net_rule_port_ok(r, port))
			continue;
		if (memcmp(r->addr, a, fam == AF_INET ? 4 : 16) == 0)
			return r;
	}
	return NULL;
}

/* ---- address classes ---- */

static enum pdk_net_addr_class classify_v4(const uint8_t a[4])
{
	uint32_t v = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
	static const struct {
		uint32_t net, mask;
		enum pdk_net_addr_class c;
	} nets[] = {
		{0x00000000, 0xff000000, PDK_NET_ADDR_UNSPECIFIED}, /* 0/8 */
		{0x7f000000, 0xff000000, PDK_NET_ADDR_LOOPBACK},    /* 127/8 */
		{0x0a000000, 0xff000000, PDK_NET_ADDR_PRIVATE},     /* 10/8 */
		{0xac100000, 0xfff00000, PDK_NET_ADDR_PRIVATE},     /* 172.16/12 */
		{0xc0a80000, 0xffff0000, PDK_NET_ADDR_PRIVATE},     /* 192.168/16 */
		{0x64400000, 0xffc00000, PDK_NET_ADDR_CGNAT},       /* 100.64/10 */
		{0xa9fe0000, 0xffff0000, PDK_NET_ADDR_LINK_LOCAL},  /* 169.254/16 */
		{0xc0000000, 0xffffff00, PDK_NET_ADDR_RESERVED},    /* 192.0.0/24 IETF */
		{0xc0000200, 0xffffff00, PDK_NET_ADDR_RESERVED},    /* 192.0.2/24 TEST-NET-1 */
		{0xc6120000, 0xfffe0000, PDK_NET_ADDR_RESERVED},    /* 198.18/15 benchmarking */
		{0xc6336400, 0xffffff00, PDK_NET_ADDR_RESERVED},    /* 198.51.100/24 */
		{0xcb007100, 0xffffff00, PDK_NET_ADDR_RESERVED},    /* 203.0.113/24 */
		{0xe0000000, 0xf0000000, PDK_NET_ADDR_MULTICAST},   /* 224/4 */
		{0xf0000000, 0xf0000000, PDK_NET_ADDR_RESERVED},    /* 240/4, broadcast */
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(nets); i++) {
		if ((v & nets[i].mask) == nets[i].net)
			return nets[i].c;
	}
	return PDK_NET_ADDR_PUBLIC;
}

static enum pdk_net_addr_class classify_v6(const uint8_t a[16])
{
	static const uint8_t zero[16] = {0};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
	uint8_t v4[4];

	if (memcmp(a, zero, 15) == 0 && a[15] <= 1)
		return a[15] ? PDK_NET_ADDR_LOOPBACK : PDK_NET_ADDR_UNSPECIFIED;
	/* v4-compatible ::a.b.c.d and NAT64 64:ff9b::a.b.c.d carry an IPv4 address. */
	if (memcmp(a, zero, 12) == 0 || memcmp(a, nat64, 12) == 0)
		return classify_v4(a + 12);
	if (a[0] == 0x20 && a[1] == 0x02) { /* 6to4: 2002:AABB:CCDD::/48 */
		memcpy(v4, a + 2, 4);
		return classify_v4(v4);
	}
	if ((a[0] & 0xfe) == 0xfc)
		return PDK_NET_ADDR_PRIVATE; /* fc00::/7 unique local */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return PDK_NET_ADDR_LINK_LOCAL; /* fe80::/10 */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
		return PDK_NET_ADDR_PRIVATE; /* fec0::/10 site-local (deprecated) */
	if (a[0] == 0xff)
		return PDK_NET_ADDR_MULTICAST;
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8)
		return PDK_NET_ADDR_RESERVED; /* 2001:db8::/32 documentation */
	if (a[0] == 0x01 && a[1] == 0 && memcmp(a + 2, zero, 6) == 0)
		return PDK_NET_ADDR_RESERVED; /* 100::/64 discard */
	return PDK_NET_ADDR_PUBLIC;
}

enum pdk_net_addr_class pdk_net_classify(const struct sockaddr *sa)
{
	uint8_t a[16];

	switch (addr_bytes(sa, a)) {
	case AF_INET:
		return classify_v4(a); /* v4-mapped addresses land here too */
	case AF_INET6:
		return classify_v6(a);
	default:
		return PDK_NET_ADDR_RESERVED;
	}
}

const char *pdk_net_addr_class_name(enum pdk_net_addr_class c)
{
	switch (c) {
	case PDK_NET_ADDR_PUBLIC:
		return "public";
	case PDK_NET_ADDR_LOOPBACK:
		return "loopback";
	case PDK_NET_ADDR_PRIVATE:
		return "private";
	case PDK_NET_ADDR_CGNAT:
		return "shared (CGNAT)";
	case PDK_NET_ADDR_LINK_LOCAL:
		return "link-local";
	case PDK_NET_ADDR_UNSPECIFIED:
		return "unspecified";
	case PDK_NET_ADDR_MULTICAST:
		return "multicast";
	case PDK_NET_ADDR_RESERVED:
		return "reserved";
	case PDK_NET_ADDR_HOST:
		return "this host's own";
	default:
		return "unknown";
	}
}

/* ---- credentials ---- */

static bool valid_field_name(const char *s, size_t len)
{
	static const char *const refused[] = {
		"host",    "connection",        "keep-alive",     "upgrade",         "te",
		"trailer", "transfer-encoding", "content-length", "proxy-connection"};

	if (len == 0 || len > 64)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!isalnum((unsigned char)s[i]) && s[i] != '-')
			return false;
	}
	for (size_t i = 0; i < PDK_ARRAY_SIZE(refused); i++) {
		if (strlen(refused[i]) == len && strncasecmp(refused[i], s, len) == 0)
			return false;
	}
	return true;
}

static bool valid_secret_name(const char *s, size_t len)
{
	if (len == 0 || len > 32)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '_')
			return false;
	}
	return true;
}

int pdk_net_cred_parse(const char *header, char **field, char **secret, char **why)
{
	const char *colon = strchr(header, ':');
	const char *ref, *end;

	*why = NULL;
	for (const char *p = header; *p; p++) {
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) {
			*why = pdk_xstrdup("the header may hold printable ASCII only");
			return -EINVAL;
		}
	}
	if (colon == NULL || !valid_field_name(header, (size_t)(colon - header))) {
		*why = pdk_xstrdup(
			"expected 'Name: value' with a field name of letters, digits and "
			"'-' (not Host, Content-Length or a hop-by-hop field)");
		return -EINVAL;
	}
	ref = strstr(colon, "${secret:");
	end = ref ? strchr(ref, '}') : NULL;
	if (ref == NULL || end == NULL || !valid_secret_name(ref + 9, (size_t)(end - ref - 9))) {
		*why = pdk_xstrdup("the value must hold one ${secret:NAME}, NAME of 1 to 32 of "
				   "a-z, 0-9 and _");
		return -EINVAL;
	}
	if (strstr(end, "${") != NULL || memmem(colon, (size_t)(ref - colon), "${", 2) != NULL) {
		*why = pdk_xstrdup("the value may hold only one ${...}");
		return -EINVAL;
	}
	*field = xstrndup_local(header, (size_t)(colon - header));
	*secret = xstrndup_local(ref + 9, (size_t)(end - ref - 9));
	return 0;
}
