#include "common.h"
#include "error.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PDK_PRINTF(4, 0)
static int set_v(struct pdk_error **err, int status, bool with_str, const char *fmt, va_list ap)
{
	char *msg = NULL;
	struct pdk_error *e;

	if (status <= 0)
		status = status < 0 ? -status : EINVAL;
	if (err == NULL || *err != NULL)
		return -status;
	msg = pdk_xvasprintf(fmt, ap);
	if (with_str) {
		char *full = pdk_xasprintf("%s: %s", msg, strerror(status));
		free(msg);
		msg = full;
	}
	e = pdk_xmalloc(sizeof(*e));
	e->status = status;
	e->msg = msg;
	e->field = NULL;
	*err = e;
	return -status;
}

int pdk_error_set(struct pdk_error **err, int status, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = set_v(err, status, true, fmt, ap);
	va_end(ap);
	return rc;
}

int pdk_error_setx(struct pdk_error **err, int status, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = set_v(err, status, false, fmt, ap);
	va_end(ap);
	return rc;
}

int pdk_error_wrap(struct pdk_error **err, const char *fmt, ...)
{
	char *ctx = NULL;
	char *full;
	va_list ap;

	if (err == NULL || *err == NULL)
		return -EINVAL;
	va_start(ap, fmt);
	ctx = pdk_xvasprintf(fmt, ap);
	va_end(ap);
	/* A context the message already starts with is not said twice ("policy: policy: ..."). */
	if (pdk_error_has_context((*err)->msg, ctx)) {
		free(ctx);
		return -(*err)->status;
	}
	full = pdk_xasprintf("%s: %s", ctx, (*err)->msg);
	free(ctx);
	free((*err)->msg);
	(*err)->msg = full;
	return -(*err)->status;
}

bool pdk_error_has_context(const char *msg, const char *ctx)
{
	size_t n = strlen(ctx);

	return n > 0 && strncmp(msg, ctx, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ';
}

int pdk_error_set_field(struct pdk_error **err, int status, const char *field, const char *fmt, ...)
{
	bool fresh = err != NULL && *err == NULL;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = set_v(err, status, false, fmt, ap);
	va_end(ap);
	if (fresh)
		(void)pdk_error_field(err, field);
	return rc;
}

int pdk_error_field(struct pdk_error **err, const char *field)
{
	if (err == NULL || *err == NULL)
		return -EINVAL;
	free((*err)->field);
	(*err)->field = field != NULL ? pdk_xstrdup(field) : NULL;
	return -(*err)->status;
}

void pdk_error_free(struct pdk_error **err)
{
	if (err == NULL || *err == NULL)
		return;
	free((*err)->field);
	free((*err)->msg);
	free(*err);
	*err = NULL;
}
