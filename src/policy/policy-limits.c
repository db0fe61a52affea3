/*
 * policy-limits.c - the schema's limits (docs/policy.md "limits"): sizes
 * (512M, 4G), counts, CPUs (0.5, with up to three decimals) and durations
 * (250ms, 30s, 2h), each with its maximum, the word that means 0 where
 * there is one ("unlimited", "none"), and the text form the dump writes
 * back (the largest unit that divides the value).
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_count(const char *s, uint64_t *out)
{
	return pdk_parse_u64(s, UINT64_MAX, out);
}

/* "1", "0.5", "1.25", "2.125": CPUs with up to three decimals, in thousandths. */
static int parse_cpu(const char *s, uint64_t *milli)
{
	const char *dot = strchr(s, '.');
	uint64_t whole, frac = 0;
	char buf[16];
	size_t ilen = dot ? (size_t)(dot - s) : strlen(s);
	size_t flen = dot ? strlen(dot + 1) : 0;
	int rc;

	if (ilen == 0 || ilen >= sizeof(buf) || (dot && (flen == 0 || flen > 3)))
		return ilen >= sizeof(buf) ? -ERANGE : -EINVAL;
	memcpy(buf, s, ilen);
	buf[ilen] = '\0';
	rc = pdk_parse_u64(buf, UINT64_MAX / 1000 - 1, &whole);
	if (rc == 0 && dot)
		rc = pdk_parse_u64(dot + 1, 999, &frac);
	if (rc < 0)
		return rc;
	for (size_t i = flen; i < 3; i++)
		frac *= 10;
	*milli = whole * 1000 + frac;
	return 0;
}

static void fmt_unit(uint64_t v, char *buf, size_t size, const uint64_t *mul,
		     const char *const *sfx, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v >= mul[i] && v % mul[i] == 0) {
			snprintf(buf, size, "%llu%s", (unsigned long long)(v / mul[i]), sfx[i]);
			return;
		}
	}
	snprintf(buf, size, "%llu", (unsigned long long)v);
}

static void fmt_size(uint64_t v, char *buf, size_t size)
{
	static const uint64_t mul[] = {1ULL << 40, 1ULL << 30, 1ULL << 20, 1ULL << 10};
	static const char *const sfx[] = {"T", "G", "M", "K"};

	fmt_unit(v, buf, size, mul, sfx, PDK_ARRAY_SIZE(mul));
}

static void fmt_duration(uint64_t v, char *buf, size_t size)
{
	static const uint64_t mul[] = {86400000, 3600000, 60000, 1000, 1};
	static const char *const sfx[] = {"d", "h", "m", "s", "ms"};

	fmt_unit(v, buf, size, mul, sfx, PDK_ARRAY_SIZE(mul));
}

static void fmt_count(uint64_t v, char *buf, size_t size)
{
	snprintf(buf, size, "%llu", (unsigned long long)v);
}

static void fmt_cpu(uint64_t v, char *buf, size_t size)
{
	unsigned frac = (unsigned)(v % 1000);
	int digits = 3;

	if (frac == 0) {
		fmt_count(v / 1000, buf, size);
		return;
	}
	for (; frac % 10 == 0; frac /= 10)
		digits--;
	snprintf(buf, size, "%llu.%0*u", (unsigned long long)(v / 1000), digits, frac);
}

static const struct {
	const char *expect;
	int (*parse)(const char *s, uint64_t *out);
	void (*fmt)(uint64_t v, char *buf, size_t size);
} limit_kinds[] = {
	[PDK__POLICY_LIM_SIZE] = {"a size such as 512M or 4G", pdk_parse_size, fmt_size},
	[PDK__POLICY_LIM_COUNT] = {"a whole number", parse_count, fmt_count},
	[PDK__POLICY_LIM_CPU] = {"a number of CPUs such as 0.5 or 2 (at most 3 decimals)",
				 parse_cpu, fmt_cpu},
	[PDK__POLICY_LIM_DURATION] = {"a duration such as 250ms, 30s, 10m or 2h",
				      pdk_parse_duration, fmt_duration},
};

static void limit_diag(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
		       const char *path, const struct pdk__policy_limit_spec *ls, int rc)
{
	_cleanup_free_ char *what = NULL;
	_cleanup_free_ char *found = pdk__policy_describe(n);
	char max[32];

	if (rc == -ERANGE) {
		limit_kinds[ls->kind].fmt(ls->max, max, sizeof(max));
		if (ls->max == UINT64_MAX)
			pdk__policy_bad(w, n, path, "%s is out of range", found);
		else
			pdk__policy_bad(w, n, path, "%s is out of range (at most %s)", found, max);
		return;
	}
	what = ls->zero_word
		       ? pdk_xasprintf("%s, or '%s'", limit_kinds[ls->kind].expect, ls->zero_word)
		       : pdk_xstrdup(limit_kinds[ls->kind].expect);
	pdk__policy_expected(w, n, path, what);
}

void pdk__policy_parse_limit(struct pdk__policy_walk *w, const struct pdk__policy_node *n,
			     const char *path, const struct pdk__policy_field *f)
{
	const struct pdk__policy_limit_spec *ls = f->arg;
	const char *s = pdk__policy_want_string(w, n, path, limit_kinds[ls->kind].expect);
	uint64_t v = 0;
	int rc;

	if (s == NULL)
		return;
	rc = ls->zero_word && strcmp(s, ls->zero_word) == 0 ? 0
							    : limit_kinds[ls->kind].parse(s, &v);
	if (rc == 0 && v > ls->max)
		rc = -ERANGE;
	if (rc < 0) {
		limit_diag(w, n, path, ls, rc);
		return;
	}
	if (v % ls->unit != 0) {
		pdk__policy_bad(w, n, path, "expected a whole number of seconds, found '%s'", s);
		return;
	}
	if (ls->kind == PDK__POLICY_LIM_CPU)
		*PDK__POLICY_MEMBER(f, uint32_t, w->obj) = (uint32_t)v;
	else
		*PDK__POLICY_MEMBER(f, uint64_t, w->obj) = v;
}

void pdk__policy_emit_limit(struct pdk__policy_emitter *e, const struct pdk_policy *p,
			    const struct pdk__policy_field *f)
{
	const struct pdk__policy_limit_spec *ls = f->arg;
	uint64_t v = ls->kind == PDK__POLICY_LIM_CPU ? *PDK__POLICY_CMEMBER(f, uint32_t, p)
						     : *PDK__POLICY_CMEMBER(f, uint64_t, p);
	char buf[32];

	pdk__policy_emit_str(e, f->key);
	if (v == 0 && ls->zero_word != NULL) {
		pdk__policy_emit_str(e, ls->zero_word);
		return;
	}
	limit_kinds[ls->kind].fmt(v, buf, sizeof(buf));
	pdk__policy_emit_str(e, buf);
}
