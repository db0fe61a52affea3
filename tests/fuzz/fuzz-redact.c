/*
 * fuzz-redact.c - libFuzzer target for the event redactor (redact.h).
 *
 * The first input byte sets the length of a secret (4 to 19 bytes) taken
 * from the bytes after it, mapped to letters g-w, y, z: an alphabet that the
 * replacement texts ("[REDACTED...]", "\xNN") cannot produce. The rest is
 * an event string of any bytes. The redacted string must hold no NUL, be
 * valid UTF-8 (jansson must accept it), never contain the secret, and be
 * the same as the step-by-step redaction's without the fast path.
 */
#include "common.h"
#include "redact.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool valid_utf8(const unsigned char *p, size_t n)
{
	json_t *s = json_stringn((const char *)p, n);
	bool ok = s != NULL;

	json_decref(s);
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char alphabet[] = "ghijklmnopqrstuvwyz";
	struct pdk_redact *r;
	char secret[32];
	size_t k;
	char *out, *ref;
	const char *res;
	size_t res_len;

	if (size < 1)
		return 0;
	k = 4 + data[0] % 16;
	if (size < 1 + k)
		return 0;
	r = pdk_redact_new();
	for (size_t i = 0; i < k; i++)
		secret[i] = alphabet[data[1 + i] % (sizeof(alphabet) - 1)];
	secret[k] = '\0';
	if (!pdk_redact_add_secret(r, "S", secret))
		abort();
	data += 1 + k;
	size -= 1 + k;
	out = pdk_redact_string(r, (const char *)data, size);
	ref = pdk__redact_string_each_step(r, (const char *)data, size);
	if ((out == NULL) != (ref == NULL) || (out != NULL && strcmp(out, ref) != 0))
		abort(); /* the fast path and the steps from the first byte differ */
	free(ref);
	res = out ? out : (const char *)data;
	res_len = out ? strlen(out) : size;
	if (memchr(res, '\0', res_len) != NULL && out != NULL)
		abort();
	if (out == NULL && (memchr(data, '\0', size) != NULL || !valid_utf8(data, size)))
		abort(); /* unchanged input must have been clean already */
	if (!valid_utf8((const unsigned char *)res, res_len))
		abort();
	if (memmem(res, res_len, secret, k) != NULL)
		abort();
	free(out);
	pdk_redact_free(r);
	return 0;
}
