/*
 * paddock-otlp.c - the OTLP export helper that `paddock run` starts (otlp.h).
 *
 * Protocol on fd 0 (a socket from the supervisor), one JSON document a line:
 *   line 1: the configuration (pdk_otlp_config_to_json; holds header values)
 *   then:   one event a line, until the supervisor shuts its side down
 * At end of input the exporter flushes within the deadline the
 * configuration gives (less a margin, so that the report arrives in time),
 * and one line goes back on fd 1: {"received":N, "exported":N, "dropped":N,
 * "failed":N, "unexported":N, "error":"..."}. The supervisor kills this
 * process after reading it (or at its own deadline), so a request still
 * hanging in libcurl never holds anything up.
 */
#include "common.h"
#include "base.h"
#include "otlp-export.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_BYTES (PDK_OTLP_EVENT_MAX + 4096)

struct reader {
	char *buf;
	size_t len;
	bool skipping; /* inside a line longer than LINE_MAX_BYTES */
};

/*
 * Call `fn` for each complete line in the buffer and keep the rest. A line
 * longer than the cap is skipped whole and counted by `on_long`.
 */
static void split_lines(struct reader *r, void (*fn)(void *, char *), void *arg, uint64_t *too_long)
{
	size_t start = 0;
	char *nl;

	while ((nl = memchr(r->buf + start, '\n', r->len - start)) != NULL) {
		*nl = '\0';
		if (!r->skipping)
			fn(arg, r->buf + start);
		r->skipping = false;
		start = (size_t)(nl - r->buf) + 1;
	}
	memmove(r->buf, r->buf + start, r->len - start);
	r->len -= start;
	if (r->len == LINE_MAX_BYTES) {
		if (!r->skipping)
			(*too_long)++;
		r->skipping = true;
		r->len = 0;
	}
}

struct ctx {
	struct pdk_otlp_config cfg;
	struct pdk_otlp *otlp;
	bool have_config;
	bool bad_config;
	uint64_t bad_lines;
};

static void on_line(void *arg, char *line)
{
	struct ctx *c = arg;
	json_error_t jerr;
	_cleanup_json_ json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
	_cleanup_error_ struct pdk_error *err = NULL;

	if (c->have_config) {
		/* The queue counts its own drops; a line that is no event is counted here. */
		if (c->otlp == NULL || !json_is_object(j))
			c->bad_lines++;
		else
			(void)pdk_otlp_enqueue(c->otlp, j);
		return;
	}
	c->have_config = true;
	explicit_bzero(line, strlen(line)); /* header values */
	pdk_otlp_config_init(&c->cfg);
	if (!json_is_object(j) || pdk_otlp_config_from_json(&c->cfg, j, &err) < 0) {
		c->bad_config = true;
		return;
	}
	c->otlp = pdk_otlp_new(&c->cfg, &err);
}

static void report(const struct ctx *c, const struct pdk_otlp_stats *st)
{
	_cleanup_json_ json_t *j = json_object();
	_cleanup_free_ char *line = NULL;

	pdk_json_set(j, "received", json_integer((json_int_t)(st->received + c->bad_lines)));
	pdk_json_set(j, "exported", json_integer((json_int_t)st->exported));
	pdk_json_set(j, "dropped", json_integer((json_int_t)(st->dropped + c->bad_lines)));
	pdk_json_set(j, "failed", json_integer((json_int_t)st->failed));
	pdk_json_set(j, "unexported", json_integer((json_int_t)st->unexported));
	pdk_json_set(j, "error",
		     json_string(c->bad_config     ? "bad configuration"
				 : c->otlp == NULL ? "cannot start the exporter"
						   : st->last_error));
	line = pdk_json_dump_line(j);
	if (line != NULL && pdk_write_all(STDOUT_FILENO, line, strlen(line)) < 0)
		return; /* the supervisor is gone: nobody to tell */
}

int main(void)
{
	struct ctx c = {0};
	struct reader r = {.buf = pdk_xmalloc(LINE_MAX_BYTES)};
	struct pdk_otlp_stats st = {0};
	uint64_t too_long = 0;
	uint64_t deadline;
	bool done = true;

	/* Out of the terminal's process group: Ctrl-C is for the sandbox, not for the export. */
	(void)setsid();
	(void)signal(SIGPIPE, SIG_IGN);
	for (;;) {
		ssize_t n = TEMP_FAILURE_RETRY(
			read(STDIN_FILENO, r.buf + r.len, LINE_MAX_BYTES - r.len));

		if (n <= 0)
			break;
		r.len += (size_t)n;
		split_lines(&r, on_line, &c, &too_long);
	}
	c.bad_lines += too_long;
	/* Leave a margin of the supervisor's deadline to report in. */
	deadline = c.cfg.deadline_ms > 400 ? c.cfg.deadline_ms - 150 : c.cfg.deadline_ms / 2;
	if (c.otlp != NULL)
		done = pdk_otlp_close(c.otlp, deadline, &st);
	report(&c, &st);
	if (done)
		pdk_otlp_free(c.otlp);
	pdk_otlp_config_release(&c.cfg);
	free(r.buf);
	/* When not done, a request may still sit in libcurl: returning ends it with the process. */
	return 0;
}
