/*
 * svc-proto.c - framing of the daemon <-> supervisor control protocol:
 * one JSON object per SOCK_SEQPACKET packet, descriptors in SCM_RIGHTS.
 */
#include "common.h"
#include "base.h"
#include "svc-proto.h"

#include <string.h>
#include <unistd.h>

_Static_assert(PDK_SVC_MAX_FDS <= PDK_FDPASS_MAX, "a control message's fds fit one fdpass message");

int pdk_svc_send(int sock, const json_t *msg, const int *fds, size_t nfds, struct pdk_error **err)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	ssize_t n;

	if (!json_is_object(msg))
		return pdk_error_setx(err, EINVAL, "control message: not a JSON object");
	if (nfds > PDK_SVC_MAX_FDS)
		return pdk_error_setx(err, EINVAL, "control message: %zu fds (at most %d)", nfds,
				      PDK_SVC_MAX_FDS);
	text = json_dumps(msg, JSON_COMPACT);
	if (text == NULL)
		pdk_oom();
	len = strlen(text);
	if (len > PDK_SVC_MAX_MSG)
		return pdk_error_setx(err, E2BIG, "control message: %zu bytes (at most %d)", len,
				      PDK_SVC_MAX_MSG);
	n = pdk_fdpass_send(sock, text, len, fds, nfds);
	if (n < 0)
		return pdk_error_set(err, (int)-n, "cannot send a control message");
	if ((size_t)n != len)
		return pdk_error_setx(err, EPROTO, "control message: short send");
	return 0;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		(void)close(fds[i]);
		fds[i] = -1;
	}
}

int pdk_svc_recv(int sock, json_t **msg, int *fds, size_t *nfds, struct pdk_error **err)
{
	_cleanup_free_ char *buf = pdk_xmalloc(PDK_SVC_MAX_MSG + 1);
	size_t got = nfds != NULL ? *nfds : 0; /* in: the room; out: how many came */
	json_error_t jerr;
	ssize_t n;

	*msg = NULL;
	if (nfds != NULL)
		*nfds = 0;
	if (got > PDK_SVC_MAX_FDS)
		got = PDK_SVC_MAX_FDS;
	n = pdk_fdpass_recv(sock, buf, PDK_SVC_MAX_MSG + 1, fds, &got, 0);
	/* SECURITY: a packet cut short is never parsed: its end may be another request. */
	if (n == -EMSGSIZE)
		return pdk_error_setx(err, EMSGSIZE, "control message: truncated (limit %d bytes)",
				      PDK_SVC_MAX_MSG);
	if (n < 0)
		return pdk_error_set(err, (int)-n, "cannot receive a control message");
	if (n == 0 && got == 0)
		return 0;
	if ((size_t)n > PDK_SVC_MAX_MSG) {
		close_all(fds, got);
		return pdk_error_setx(err, EMSGSIZE, "control message: truncated (limit %d bytes)",
				      PDK_SVC_MAX_MSG);
	}
	*msg = pdk_json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
	if (*msg == NULL || !json_is_object(*msg)) {
		json_decref(*msg);
		*msg = NULL;
		close_all(fds, got);
		return pdk_error_setx(err, EBADMSG, "control message: not a JSON object");
	}
	if (nfds != NULL)
		*nfds = got;
	return 1;
}

const char *pdk_svc_code_of(int status)
{
	switch (status) {
	case ENOENT:
		return "not_found";
	case EEXIST:
	case ENOTEMPTY:
		return "conflict";
	case EACCES:
	case EPERM:
	case EROFS:
		return "forbidden";
	case EBUSY:
		return "busy";
	case ENOSPC:
	case EDQUOT:
		return "limit";
	case EIO:
	case ENOMEM:
		return "internal";
	default:
		return "bad_request";
	}
}

int pdk_svc_status_of(const char *code)
{
	static const struct {
		const char *code;
		int status;
	} map[] = {
		{"not_found", ENOENT},  {"bad_request", EINVAL}, {"exec_failed", ENOEXEC},
		{"conflict", EALREADY}, {"busy", EBUSY},         {"limit", EDQUOT},
		{"forbidden", EPERM},
	};

	for (size_t i = 0; code != NULL && i < PDK_ARRAY_SIZE(map); i++)
		if (strcmp(code, map[i].code) == 0)
			return map[i].status;
	return EIO;
}
