/*
 * mrtr.c - the requestState of multi round-trip requests (2026-07-28
 * basic/patterns/mrtr): what the server needs to finish a call on the
 * client's retry travels with the client, so it is signed. The state names
 * the principal it was given to, the tool, a digest of the call's arguments
 * and an expiry, and for an approval asked in band the approval queue's
 * request id; a retry whose state does not verify, or verifies for another
 * principal, call, approval or time, is refused.
 *
 *   requestState = base64url(payload) "." hex(HMAC-SHA256(key, payload))
 *   payload      = {"a": approval id (only when one is asked),
 *                   "d": sha256(args), "e": expiry (UNIX s), "n": tool, "p": principal}
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

/* The tool's name: paddock's own, or the one a provider serves. */
static const char *tool_name(const struct pdk_mcp_call *call)
{
	return call->tool != NULL ? call->tool->name : call->name;
}

static char *payload_of(const struct pdk_mcp_call *call, uint64_t exp, const char *approval)
{
	char digest[65];
	_cleanup_json_ json_t *p = NULL;

	args_digest(call, digest);
	p = json_pack("{s:s?, s:s, s:I, s:s, s:s}", "a", approval, "d", digest, "e",
		      (json_int_t)exp, "n", tool_name(call), "p", call->conn->identity);
	if (p == NULL)
		pdk_oom();
	return pdk_json_dump_line(p);
}

char *pdk__mrtr_state(const struct pdk_mcp_call *call)
{
	return pdk__mrtr_state_approval(call, NULL, 0);
}

char *pdk__mrtr_state_approval(const struct pdk_mcp_call *call, const char *approval,
			       uint64_t wait_s)
{
	_cleanup_free_ char *payload = payload_of(
		call, pdk_now_real_ns() / 1000000000ULL + wait_s + STATE_TTL_S, approval);
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

/*
 * Whether `state` verifies for `call`; `approval` (37 bytes, or NULL: a
 * state without one) gets the approval id it names, which must be one.
 */
static bool verify(const struct pdk_mcp_call *call, const char *state, char *approval)
{
	_cleanup_free_ char *payload = verified_payload(call, state);
	_cleanup_free_ char *want = NULL;
	_cleanup_json_ json_t *p = NULL;
	const char *a;
	uint64_t exp;

	if (payload == NULL || (p = json_loads(payload, 0, NULL)) == NULL)
		return false;
	exp = (uint64_t)json_integer_value(json_object_get(p, "e"));
	a = json_string_value(json_object_get(p, "a"));
	if (exp < pdk_now_real_ns() / 1000000000ULL)
		return false;
	/* SECURITY: a state of an approval fits only the retry of that approval, and back. */
	if ((approval != NULL) != (a != NULL) || (a != NULL && strlen(a) != 36))
		return false;
	if (approval != NULL)
		memcpy(approval, a, 37);
	/* The same principal, tool and arguments: the state of one call fits no other. */
	want = payload_of(call, exp, a);
	want[strcspn(want, "\n")] = '\0';
	payload[strcspn(payload, "\n")] = '\0';
	return strcmp(want, payload) == 0;
}

bool pdk__mrtr_verify(const struct pdk_mcp_call *call, const char *state)
{
	return verify(call, state, NULL);
}

bool pdk__mrtr_verify_approval(const struct pdk_mcp_call *call, const char *state,
			       char approval[37])
{
	return verify(call, state, approval);
}
