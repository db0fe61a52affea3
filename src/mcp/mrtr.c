/*
 * mrtr.c - the requestState of multi round-trip requests (2026-07-28
 * basic/patterns/mrtr): what the server needs to finish a call on the
 * client's retry travels with the client, so it is signed. The state names
 * the principal it was given to, the tool, a digest of the call's arguments
 * and an expiry; a retry whose state does not verify, or verifies for
 * another principal, call or time, is refused.
 *
 *   requestState = base64url(payload) "." hex(HMAC-SHA256(key, payload))
 *   payload      = {"d": sha256(args), "e": expiry (UNIX s), "n": tool, "p": principal}
 */
#include "common.h"
#include "mcp-internal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define STATE_TTL_S 600
#define STATE_MAX   4096

void pdk__mrtr_key(unsigned char key[32])
{
	/* SECURITY: the key never leaves the process; a restart voids every state given out. */
	if (getrandom(key, 32, 0) != 32)
		pdk_bug("getrandom failed for the requestState key");
}

static void hex(const unsigned char *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		(void)snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* The digest of the call's arguments as hex (65 bytes with the NUL). */
static void args_digest(const struct pdk_mcp_call *call, char out[65])
{
	_cleanup_free_ char *line = pdk_json_dump_line(call->args);
	unsigned char d[SHA256_DIGEST_LENGTH];

	SHA256((const unsigned char *)line, strlen(line), d);
	hex(d, sizeof(d), out);
}

static void mac(const struct pdk_mcp_call *call, const char *payload, size_t n, char out[65])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (HMAC(EVP_sha256(), call->conn->m->key, 32, (const unsigned char *)payload, n, d,
		 &len) == NULL)
		pdk_oom();
	hex(d, 32, out);
}

static char *b64url(const char *p, size_t n)
{
	char *out = pdk_xmalloc(4 * ((n + 2) / 3) + 1);

	(void)EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)p, (int)n);
	for (char *c = out; *c; c++)
		*c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
	return out;
}

static char *payload_of(const struct pdk_mcp_call *call, uint64_t exp)
{
	char digest[65];
	_cleanup_json_ json_t *p = NULL;

	args_digest(call, digest);
	p = json_pack("{s:s, s:I, s:s, s:s}", "d", digest, "e", (json_int_t)exp, "n",
		      call->tool->name, "p", call->conn->identity);
	if (p == NULL)
		pdk_oom();
	return pdk_json_dump_line(p);
}

char *pdk__mrtr_state(const struct pdk_mcp_call *call)
{
	_cleanup_free_ char *payload =
		payload_of(call, pdk_now_real_ns() / 1000000000ULL + STATE_TTL_S);
	_cleanup_free_ char *enc = b64url(payload, strlen(payload));
	char sig[65];

	mac(call, payload, strlen(payload), sig);
	return pdk_xasprintf("%s.%s", enc, sig);
}

/* The payload of `state` (caller frees) when its signature verifies, else NULL. */
static char *verified_payload(const struct pdk_mcp_call *call, const char *state)
{
	const char *dot = strrchr(state, '.');
	_cleanup_free_ char *enc = NULL;
	char *payload;
	char sig[65];
	int n;

	if (strlen(state) > STATE_MAX || dot == NULL || strlen(dot + 1) != 64)
		return NULL;
	enc = strndup(state, (size_t)(dot - state));
	if (enc == NULL)
		pdk_oom();
	if (strlen(enc) % 4 != 0)
		return NULL;
	for (char *c = enc; *c; c++)
		*c = *c == '-' ? '+' : *c == '_' ? '/' : *c;
	payload = pdk_xmalloc(strlen(enc) / 4 * 3 + 1);
	n = EVP_DecodeBlock((unsigned char *)payload, (const unsigned char *)enc, (int)strlen(enc));
	for (size_t i = strlen(enc); n > 0 && i > 0 && enc[i - 1] == '='; i--)
		n--;
	if (n < 0) {
		free(payload);
		return NULL;
	}
	payload[n] = '\0';
	mac(call, payload, (size_t)n, sig);
	/* SECURITY: the signature is compared in constant time. */
	if (CRYPTO_memcmp(sig, dot + 1, 64) != 0) {
		free(payload);
		return NULL;
	}
	return payload;
}

bool pdk__mrtr_verify(const struct pdk_mcp_call *call, const char *state)
{
	_cleanup_free_ char *payload = verified_payload(call, state);
	_cleanup_free_ char *want = NULL;
	_cleanup_json_ json_t *p = NULL;
	uint64_t exp;

	if (payload == NULL || (p = json_loads(payload, 0, NULL)) == NULL)
		return false;
	exp = (uint64_t)json_integer_value(json_object_get(p, "e"));
	if (exp < pdk_now_real_ns() / 1000000000ULL)
		return false;
	/* The same principal, tool and arguments: the state of one call fits no other. */
	want = payload_of(call, exp);
	want[strcspn(want, "\n")] = '\0';
	payload[strcspn(payload, "\n")] = '\0';
	return strcmp(want, payload) == 0;
}
