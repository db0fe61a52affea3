/*
 * log.c - formatting a message for the sink its caller was given (log.h).
 */
#include "common.h"
#include "log.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>

/* Longer messages are cut: a log line is for a human, the data goes into events. */
#define LOG_LINE_MAX 2048

void pdk_log(const struct pdk_log *log, enum pdk_log_level level, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	va_list ap;

	if (log == NULL || log->fn == NULL)
		return;
	va_start(ap, fmt);
	(void)vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log->fn(log->data, level, line);
}

const char *pdk_log_level_name(enum pdk_log_level level)
{
	switch (level) {
	case PDK_LOG_ERROR:
		return "error";
	case PDK_LOG_WARN:
		return "warning";
	case PDK_LOG_NOTICE:
		return "notice";
	case PDK_LOG_INFO:
		return "info";
	default:
		return "message";
	}
}

/* ---- the rate-limited sink ---- */

/* Adds what the time since the last call earned, up to the burst. */
static void refill(struct pdk_log_limit *l)
{
	uint64_t now = pdk_now_mono_ns();
	uint64_t cap = l->burst * 1000;
	uint64_t earned = (now - l->last_ns) / 1000000 * l->per_s; /* ms * lines/s = milli-lines */

	if (earned == 0)
		return;
	l->last_ns = now;
	l->tokens_milli = cap - l->tokens_milli < earned ? cap : l->tokens_milli + earned;
}

/* Takes one line's token: false when the rate is spent. */
static bool take(struct pdk_log_limit *l)
{
	refill(l);
	if (l->tokens_milli < 1000)
		return false;
	l->tokens_milli -= 1000;
	return true;
}

static void report(struct pdk_log_limit *l)
{
	uint64_t n = l->suppressed;

	l->suppressed = 0;
	pdk_log(l->inner, PDK_LOG_WARN,
		"%llu log lines suppressed (more than %llu at once or %llu a second)",
		(unsigned long long)n, (unsigned long long)l->burst, (unsigned long long)l->per_s);
}

static void limited(void *data, enum pdk_log_level level, const char *msg)
{
	struct pdk_log_limit *l = data;

	if (!take(l)) {
		l->suppressed++;
		return;
	}
	/* The count goes first, at the price of the line's own token: it says what is missing. */
	if (l->suppressed > 0) {
		report(l);
		if (!take(l)) {
			l->suppressed++;
			return;
		}
	}
	if (l->inner != NULL && l->inner->fn != NULL)
		l->inner->fn(l->inner->data, level, msg);
}

void pdk_log_limit_init(struct pdk_log_limit *l, const struct pdk_log *inner, unsigned burst,
			unsigned per_s)
{
	*l = (struct pdk_log_limit){.log = {.fn = limited, .data = l},
				    .inner = inner,
				    .burst = burst,
				    .per_s = per_s,
				    .tokens_milli = (uint64_t)burst * 1000,
				    .last_ns = pdk_now_mono_ns()};
}

void pdk_log_limit_flush(struct pdk_log_limit *l)
{
	if (l->suppressed > 0 && take(l))
		report(l);
}
