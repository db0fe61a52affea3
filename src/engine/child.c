/*
 * child.c - the failure record of a sandbox's child (child.h).
 *
 * Runs in the child: vsnprintf() into the record's own buffer, no
 * allocation.
 */
#include "common.h"
#include "child.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int record(struct pdk_child_error *ce, int e, bool with_errno, const char *fmt, va_list ap)
	PDK_PRINTF(4, 0);

static int record(struct pdk_child_error *ce, int e, bool with_errno, const char *fmt, va_list ap)
{
	size_t used;

	if (e <= 0)
		e = EIO;
	if (ce == NULL || ce->err != 0)
		return -e;
	ce->err = e;
	(void)vsnprintf(ce->msg, sizeof(ce->msg), fmt, ap); /* cut when longer: still a message */
	used = strlen(ce->msg);
	if (with_errno)
		(void)snprintf(ce->msg + used, sizeof(ce->msg) - used, ": %s", strerror(e));
	return -e;
}

int pdk_child_error_set(struct pdk_child_error *ce, int e, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = record(ce, e, true, fmt, ap);
	va_end(ap);
	return rc;
}

int pdk_child_error_setx(struct pdk_child_error *ce, int e, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = record(ce, e, false, fmt, ap);
	va_end(ap);
	return rc;
}

int pdk_child_error_wrap(struct pdk_child_error *ce, const char *prefix)
{
	size_t plen, mlen;

	if (ce == NULL || ce->err == 0)
		return -EIO;
	plen = strlen(prefix) + 2;
	if (plen >= sizeof(ce->msg))
		return -ce->err;
	mlen = strnlen(ce->msg, sizeof(ce->msg) - 1);
	if (mlen > sizeof(ce->msg) - 1 - plen)
		mlen = sizeof(ce->msg) - 1 - plen;
	memmove(ce->msg + plen, ce->msg, mlen);
	memcpy(ce->msg, prefix, plen - 2);
	memcpy(ce->msg + plen - 2, ": ", 2);
	ce->msg[plen + mlen] = '\0';
	return -ce->err;
}
