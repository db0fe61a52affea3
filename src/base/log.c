/*
 * log.c - formatting a message for the sink its caller was given (log.h).
 */
#include "common.h"
#include "log.h"

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
