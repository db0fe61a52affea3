/*
 * fuzz-egress-request.c - libFuzzer target for the egress proxy's request
 * head parser (bytes sent by the sandboxed code): pdk__egress_head_parse(),
 * the rebuilt upstream head, and the body framing that follows; and the
 * same bytes as a request inside an intercepted TLS tunnel
 * (pdk__egress_head_parse_origin()).
 *
 * Properties: the parser never reads past the bytes given; a complete head
 * has a normalized host (or an IP literal) and a port; the rebuilt head
 * is one request line, field lines without a bare CR, LF or NUL inside,
 * and ends with the one blank line; errors carry a 400, 405 or 431 and a
 * reason; a body is consumed within the bytes given.
 *
 * The body scanner (pdk__egress_scan_*) too: fed the bytes in pieces of a
 * size the input chooses, it finds a needle exactly when memmem() finds it
 * in the whole (the reference); and attached to a head, it never makes the
 * body parser consume more than it was given.
 */
#include "common.h"
#include "egress-internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_upstream(const char *up, size_t len)
{
	const char *end;
	size_t lines = 0;

	if (up == NULL || strlen(up) != len || len < 4)
		abort();
	end = strstr(up, "\r\n\r\n");
	if (end == NULL || (size_t)(end - up) + 4 != len)
		abort(); /* the blank line is the end, and there is exactly one */
	for (const char *p = up; p < end + 2; p++) {
		if (*p == '\n' && (p == up || p[-1] != '\r'))
			abort(); /* a bare LF would smuggle a line */
		if (*p == '\r' && p[1] != '\n')
			abort();
		lines += *p == '\n';
	}
	if (lines < 3 || strncmp(end - 17, "Connection: close", 17) != 0)
		abort();
}

static void check_head(struct pdk__egress_head *h, const char *buf, size_t size, int n)
{
	if ((size_t)n > size || h->host == NULL || h->port == 0)
		abort();
	if (!h->connect) {
		/* The credential rewrite too: a drop, a swap and an extra line. */
		static const char *const drop[] = {"authorization"};
		static const char *const from[] = {"PH"};
		static const char *const to[] = {"secret-value"};
		static const char *const extra[] = {"Authorization: Bearer secret-value"};
		const struct pdk__egress_rewrite rw = {drop, 1, from, to, 1, extra, 1};

		for (int i = 0; i < 2; i++) {
			size_t len = 0;
			char *up = pdk__egress_head_upstream(h, buf, i ? &rw : NULL, &len);

			if (up != NULL)
				check_upstream(up, len);
			else if (h->status != 400)
				abort();
			free(up);
		}
	}
	if (!h->msg_done) {
		static const char *const needles[] = {"PH", "paddock-secret-tok-0"};
		struct pdk__egress_scan s;
		ssize_t b;

		if (pdk__egress_scan_init(&s, needles, 2) != 0)
			abort();
		h->scan = &s;
		b = pdk__egress_body_feed(h, buf + n, size - (size_t)n);
		if (s.found >= 2)
			abort();

		if (b > (ssize_t)(size - (size_t)n))
			abort();
	}
}

/* One parse: `origin` true is the origin form of an intercepted TLS tunnel to api.test:443. */
static void parse_one(char *buf, size_t size, bool origin)
{
	struct pdk__egress_head h = {0};
	int n = origin ? pdk__egress_head_parse_origin(&h, buf, size, "api.test", 443)
		       : pdk__egress_head_parse(&h, buf, size);

	if (n < 0 && h.status != 400 && h.status != 405 && h.status != 431)
		abort();
	if (n < 0 && (h.reason == NULL || h.reason[0] == '\0'))
		abort();
	/* Inside a tunnel the host is the tunnel's, whatever the request says. */
	if (n > 0 && origin && (strcmp(h.host, "api.test") != 0 || h.port != 443 || h.connect))
		abort();
	if (n > 0)
		check_head(&h, buf, size, n);
	pdk__egress_head_release(&h);
}

/* The scanner against memmem() over the whole input, in pieces of 1 to 64 bytes. */
static void scan_reference(const char *buf, size_t size)
{
	static const char *const needles[] = {"ab", "xyzxyzxyzq", "paddock-secret-tok-0"};
	struct pdk__egress_scan s;
	size_t step = size > 0 ? (size_t)(unsigned char)buf[0] % 64 + 1 : 1;
	bool want = false;

	if (pdk__egress_scan_init(&s, needles, 3) != 0)
		abort();
	for (size_t off = 0; off < size; off += step)
		(void)pdk__egress_scan_feed(&s, buf + off, size - off < step ? size - off : step);
	for (size_t i = 0; i < 3; i++)
		want = want || memmem(buf, size, needles[i], strlen(needles[i])) != NULL;
	if (want != (s.found >= 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly `size` bytes: ASan catches a read past the end. */
	char *buf = malloc(size ? size : 1);

	memcpy(buf, data, size);
	parse_one(buf, size, false);
	parse_one(buf, size, true);
	scan_reference(buf, size);
	free(buf);
	return 0;
}
