/*
 * svc-proto.h - one message of the control protocol between the daemon and
 * a sandbox's supervisor (docs/internals/daemon.md).
 *
 * The channel is a SOCK_SEQPACKET unix socket: every message is one packet
 * holding one UTF-8 JSON object of at most PDK_SVC_MAX_MSG bytes, with at
 * most PDK_SVC_MAX_FDS file descriptors in SCM_RIGHTS. Both ends use these
 * two functions, so the framing rules live in one place.
 */
#ifndef PDK_SVC_PROTO_H
#define PDK_SVC_PROTO_H

#include "common.h"
#include "base.h"

#include <jansson.h>

#define PDK_SVC_MAX_MSG 65536
#define PDK_SVC_MAX_FDS 4

/*
 * Send `msg` (borrowed; must be a JSON object) with `nfds` descriptors
 * (borrowed: the caller still owns and closes them; nfds <= PDK_SVC_MAX_FDS).
 * MSG_NOSIGNAL: a peer that went away is EPIPE, never SIGPIPE.
 * Returns 0, or negative + *err (-E2BIG when the JSON exceeds PDK_SVC_MAX_MSG,
 * -EPIPE/-ECONNRESET when the peer is gone, -EAGAIN on a full non-blocking
 * socket).
 */
PDK_MUST_CHECK int pdk_svc_send(int sock, const json_t *msg, const int *fds, size_t nfds,
				struct pdk_error **err);

/*
 * Receive one message. *msg gets a new JSON object (caller owns); fds[] gets
 * up to *nfds descriptors (in: the room in fds, at most PDK_SVC_MAX_FDS;
 * out: how many arrived; caller owns them; they are close-on-exec).
 * Descriptors beyond the room are closed. Returns 1 on a message, 0 on
 * end of file (the peer closed: *msg is NULL), or negative + *err: a
 * truncated packet (-EMSGSIZE), bytes that are not a JSON object (-EBADMSG),
 * -EAGAIN on an empty non-blocking socket. On error no fd is left open.
 */
PDK_MUST_CHECK int pdk_svc_recv(int sock, json_t **msg, int *fds, size_t *nfds,
				struct pdk_error **err);

/*
 * The code an error answer carries for an errno-style `status` ("not_found",
 * "conflict", "forbidden", "busy", "limit", "bad_request", "internal"), the
 * one mapping both ends agree on: pdk_svc_status_of() reads it back.
 */
const char *pdk_svc_code_of(int status);

/* The errno-style status of an error answer's `code`; EIO for "internal" and the unknown. */
int pdk_svc_status_of(const char *code);

#endif
