/*
 * policy-dump.c - a policy written back as YAML (`paddock profile show`),
 * through libyaml's emitter, which does all the quoting; the null words
 * are forced into double quotes, since the parser gives null a meaning of
 * its own. The schema's tables say what is written (each field's emitter
 * sits next to its parser), so the dump reads back as the same policy: the
 * unit tests and the fuzz target check that it is a fixed point.
 */
#include "common.h"
#include "base.h"
#include "policy-internal.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

static void send(struct pdk__policy_emitter *e, yaml_event_t *ev, int init_ok)
{
	if (!init_ok) {
		e->failed = true;
		e->problem = "a string is not valid UTF-8";
		return;
	}
	/* yaml_emitter_emit() takes ownership of the event, also on failure. */
	if (!yaml_emitter_emit(&e->y, ev))
		e->failed = true;
}

static void emit_scalar(struct pdk__policy_emitter *e, const char *s, yaml_scalar_style_t style)
{
	yaml_event_t ev;
	size_t len = strlen(s);

	if (e->failed)
		return;
	if (len > INT_MAX) {
		e->failed = true;
		e->problem = "a string is too long";
		return;
	}
	send(e, &ev,
	     yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)len, 1, 1,
					  style));
}

/*
 * A string, plain when that reads back as the same string. libyaml quotes
 * what cannot be plain; the words that plain YAML reads as null are quoted
 * here, since the parser gives null its own meaning.
 */
void pdk__policy_emit_str(struct pdk__policy_emitter *e, const char *s)
{
	emit_scalar(e, s,
		    pdk__policy_null_word(s) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE
					     : YAML_PLAIN_SCALAR_STYLE);
}

void pdk__policy_emit_start(struct pdk__policy_emitter *e, bool map, bool flow)
{
	yaml_event_t ev;

	if (e->failed)
		return;
	if (map)
		send(e, &ev,
		     yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
							 flow ? YAML_FLOW_MAPPING_STYLE
							      : YAML_BLOCK_MAPPING_STYLE));
	else
		send(e, &ev,
		     yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
							  flow ? YAML_FLOW_SEQUENCE_STYLE
							       : YAML_BLOCK_SEQUENCE_STYLE));
}

void pdk__policy_emit_end(struct pdk__policy_emitter *e, bool map)
{
	yaml_event_t ev;

	if (e->failed)
		return;
	if (map)
		send(e, &ev, yaml_mapping_end_event_initialize(&ev));
	else
		send(e, &ev, yaml_sequence_end_event_initialize(&ev));
}

void pdk__policy_emit_table(struct pdk__policy_emitter *e, const struct pdk_policy *p,
			    const struct pdk__policy_table *t)
{
	pdk__policy_emit_start(e, true, false);
	for (size_t i = 0; i < t->n; i++) {
		if (t->fields[i].emit != NULL)
			t->fields[i].emit(e, p, &t->fields[i]);
	}
	pdk__policy_emit_end(e, true);
}

static void emit_document(struct pdk__policy_emitter *e, const struct pdk_policy *p)
{
	yaml_event_t ev;

	send(e, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
	if (!e->failed)
		send(e, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
	pdk__policy_emit_table(e, p, &pdk__policy_top);
	if (!e->failed)
		send(e, &ev, yaml_document_end_event_initialize(&ev, 1));
	if (!e->failed)
		send(e, &ev, yaml_stream_end_event_initialize(&ev));
}

int pdk_policy_dump(const struct pdk_policy *p, FILE *out, struct pdk_error **err)
{
	struct pdk__policy_emitter e = {.failed = false};
	int rc = 0;

	if (!yaml_emitter_initialize(&e.y))
		pdk_oom();
	yaml_emitter_set_output_file(&e.y, out);
	yaml_emitter_set_unicode(&e.y, 1);
	yaml_emitter_set_width(&e.y, -1);
	yaml_emitter_set_indent(&e.y, 2);
	emit_document(&e, p);
	if (e.failed)
		rc = pdk_error_setx(err, EINVAL, "cannot write the policy as YAML: %s",
				    e.y.problem != NULL ? e.y.problem
				    : e.problem != NULL ? e.problem
							: "write error");
	yaml_emitter_delete(&e.y);
	if (rc == 0 && fflush(out) != 0)
		rc = pdk_error_set(err, errno, "cannot write the policy");
	return rc;
}
