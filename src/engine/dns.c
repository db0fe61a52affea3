/*
 * dns.c - the NXDOMAIN answer of the sandbox's name server (dns.h).
 *
 * SECURITY: the query comes from the sandbox. It is read within its n
 * bytes, a name within 255 and labels within 63, compression pointers are
 * refused (a question has none), and nothing of it but the question is
 * copied back.
 */
#include "common.h"
#include "dns.h"

#include <string.h>

#define HDR            12
#define QTYPE_A        1
#define QTYPE_AAAA     28
#define FLAG_QR        0x8000u
#define FLAG_OPCODE    0x7800u
#define FLAG_RD        0x0100u
#define FLAG_RA        0x0080u
#define RCODE_NXDOMAIN 3u

static unsigned get16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static bool host_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/*
 * The question's name from q[HDR..n): its end (past the root label), or 0
 * when malformed. `name` gets its text, or "" when it is not a plain host name.
 */
static size_t read_name(const uint8_t *q, size_t n, char *name)
{
	size_t at = HDR, len = 0;
	bool plain = true;

	while (at < n && q[at] != 0) {
		size_t l = q[at];

		if (l > 63 || at + 1 + l >= n || len + l + 1 > PDK_DNS_NAME_MAX - 1)
			return 0;
		for (size_t i = 0; i < l; i++) {
			uint8_t c = q[at + 1 + i];

			plain = plain && host_char(c);
			name[len + (len ? 1 : 0) + i] =
				(char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
		}
		if (len)
			name[len] = '.';
		len += l + (len ? 1 : 0);
		at += 1 + l;
	}
	if (at >= n)
		return 0;
	name[plain ? len : 0] = '\0';
	return at + 1;
}

ssize_t pdk_dns_answer(const uint8_t *q, size_t n, uint8_t *out, char name[PDK_DNS_NAME_MAX])
{
	unsigned flags;
	size_t end;

	name[0] = '\0';
	if (n < HDR + 5 || n > PDK_DNS_MAX)
		return -1;
	flags = get16(q + 2);
	if ((flags & (FLAG_QR | FLAG_OPCODE)) != 0 || get16(q + 4) != 1)
		return -1;
	end = read_name(q, n, name);
	if (end == 0 || end + 4 > n) {
		name[0] = '\0';
		return -1;
	}
	if (get16(q + end) != QTYPE_A && get16(q + end) != QTYPE_AAAA)
		name[0] = '\0';
	end += 4;
	memcpy(out, q, end);
	put16(out + 2, FLAG_QR | (flags & FLAG_RD) | FLAG_RA | RCODE_NXDOMAIN);
	put16(out + 6, 0);
	put16(out + 8, 0);
	put16(out + 10, 0);
	return (ssize_t)end;
}
