/*
 * redact.h - secrets out of events before any sink sees them.
 *
 * A struct pdk_redact holds the secret values one event stream must never
 * carry (the values of secret-looking `-e NAME=VALUE` variables, the
 * credentials the egress proxy injects). pdk_redact_json() rewrites, in
 * every string of a JSON value (object keys are left alone):
 *   - each registered secret value      -> [REDACTED:NAME]
 *   - NAME=VALUE whose NAME looks secret -> NAME=[REDACTED]
 *   - well-known token shapes            -> [REDACTED]
 *     gh[pousr]_ + 20 or more [A-Za-z0-9_], github_pat_ + 20 or more,
 *     sk- + 20 or more [A-Za-z0-9_-], AKIA + 16 [0-9A-Z],
 *     xox[bapsr]- + 10 or more [A-Za-z0-9-], "Bearer " + token
 *   - bytes that are not UTF-8           -> \xNN (so every event serialises)
 * The rules and their limits are documented in docs/audit.md.
 */
#ifndef PDK_REDACT_H
#define PDK_REDACT_H

#include "common.h"
#include "base.h"

struct pdk_redact;

/* Values shorter than this are not searched for (they would match everywhere). */
#define PDK_REDACT_MIN_SECRET 4

struct pdk_redact *pdk_redact_new(void);
void pdk_redact_free(struct pdk_redact *r);

/*
 * Register `value` as a secret named `name` (both copied). Returns true if
 * the value is long enough to be searched for (>= PDK_REDACT_MIN_SECRET).
 */
bool pdk_redact_add_secret(struct pdk_redact *r, const char *name, const char *value);

/*
 * True when an environment or argument name looks like it holds a secret:
 * it contains, in any case, TOKEN, SECRET, PASSWORD, PASSWD, API_KEY, KEY,
 * CREDENTIAL or AUTH. `len` bytes of `name` are looked at.
 */
bool pdk_redact_name_is_secret(const char *name, size_t len);

/*
 * The redacted copy of `s` (`len` bytes, may hold any bytes), or NULL when
 * nothing had to change. Caller frees. `r` may be NULL (shapes only).
 */
char *pdk_redact_string(const struct pdk_redact *r, const char *s, size_t len);

/*
 * pdk_redact_string() without its fast path: every step taken from the
 * first byte. The fuzz target and the unit tests compare the two.
 */
char *pdk__redact_string_each_step(const struct pdk_redact *r, const char *s, size_t len);

/*
 * Redact every string inside `v` in place (objects and arrays are walked;
 * keys are not changed). Returns how many strings were rewritten.
 */
size_t pdk_redact_json(const struct pdk_redact *r, json_t *v);

/*
 * Whether pdk_redact_json() would rewrite any string inside `v`: a caller
 * that must not change `v` copies it only then.
 */
bool pdk_redact_json_needed(const struct pdk_redact *r, const json_t *v);

#endif
