/*
 * policy-report.c - diagnostics: every problem found in a profile becomes
 * "file:line:col: field: message", and the reading goes on, so a file's
 * problems are all reported at once. Text taken from the profile is
 * quoted through excerpts that a terminal cannot be driven with.
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIAGS 64 /* diagnostics kept; later ones are only counted */
#define EXCERPT   48 /* bytes of a value quoted in a message */

char *pdk__policy_report_file(struct pdk_policy_report *r, const char *file)
{
	if (r->file == NULL)
		r->file = pdk_xstrdup(file);
	if (strcmp(r->file, file) == 0)
		return r->file;
	for (size_t i = 0; r->files != NULL && r->files[i] != NULL; i++) {
		if (strcmp(r->files[i], file) == 0)
			return r->files[i];
	}
	pdk_strv_push(&r->files, file);
	return r->files[pdk_strv_len(r->files) - 1];
}

void pdk__policy_diag(struct pdk__policy_sink *s, const char *file, int line, int col,
		      const char *field, const char *fmt, ...)
{
	struct pdk_policy_report *r = s->r;
	struct pdk_policy_diag *d;
	va_list ap;

	s->errors++;
	if (r->n > MAX_DIAGS)
		return;
	r->diags = pdk_xrealloc(r->diags, (r->n + 1) * sizeof(*r->diags));
	d = &r->diags[r->n++];
	*d = (struct pdk_policy_diag){.file = pdk__policy_report_file(r, file)};
	if (r->n > MAX_DIAGS) {
		d->field = pdk_xstrdup("");
		d->msg = pdk_xstrdup("too many problems; the rest are not shown");
		return;
	}
	d->line = line;
	d->column = col;
	d->field = pdk_xstrdup(field);
	va_start(ap, fmt);
	d->msg = pdk_xvasprintf(fmt, ap);
	va_end(ap);
}

/*
 * A printable excerpt of untrusted text for a message.
 * SECURITY: keys and values of a profile end up on a terminal. C0 and C1
 * control characters (ESC, CSI) are replaced so a profile cannot drive the
 * terminal, and long text is cut at a UTF-8 boundary.
 */
char *pdk__policy_excerpt(const char *s, size_t len)
{
	size_t max = len > EXCERPT ? EXCERPT : len;
	char *out = pdk_xmalloc(max + 4);
	size_t o = 0;

	while (max > 0 && max < len && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	for (size_t i = 0; i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == 0xc2 && i + 1 < max && (unsigned char)s[i + 1] < 0xa0) {
			out[o++] = '?';
			i++;
			continue;
		}
		out[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	if (max < len) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

char *pdk__policy_excerpt_str(const char *s)
{
	return pdk__policy_excerpt(s, strlen(s));
}

/* A long path keeps its end: the file's own name says more than the directories above it. */
char *pdk__policy_excerpt_path(const char *s)
{
	size_t len = strlen(s), start;

	if (len <= EXCERPT)
		return pdk__policy_excerpt(s, len);
	start = len - EXCERPT;
	while (start < len && ((unsigned char)s[start] & 0xc0) == 0x80)
		start++;
	_cleanup_free_ char *tail = pdk__policy_excerpt(s + start, len - start);
	return pdk_xasprintf("...%s", tail);
}

char *pdk__policy_words_add(char *list, const char *word)
{
	char *s = list != NULL ? pdk_xasprintf("%s, %s", list, word) : pdk_xstrdup(word);

	free(list);
	return s;
}

void pdk_policy_report_release(struct pdk_policy_report *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->n; i++) {
		free(r->diags[i].field);
		free(r->diags[i].msg);
	}
	free(r->diags);
	free(r->file);
	pdk_strv_free(r->files);
	*r = (struct pdk_policy_report){0};
}

void pdk_policy_report_print(const struct pdk_policy_report *r, FILE *out)
{
	for (size_t i = 0; r != NULL && i < r->n; i++) {
		const struct pdk_policy_diag *d = &r->diags[i];

		fputs(d->file != NULL ? d->file : "<input>", out);
		if (d->line > 0)
			fprintf(out, ":%d:%d", d->line, d->column);
		fputs(": ", out);
		if (d->field != NULL && d->field[0] != '\0')
			fprintf(out, "%s: ", d->field);
		fprintf(out, "%s\n", d->msg);
	}
}
