/*
 * fdpass.h - one message with file descriptors (SCM_RIGHTS) on a unix socket.
 *
 * Every place that hands descriptors to another process goes through these
 * two calls: the daemon and a supervisor (svc-proto), the sandbox's child
 * and its parent (the sync socket), the supervisor and the sandbox's init
 * (the control channel). They keep the rules in one place: a vanished peer
 * is EPIPE, never SIGPIPE; received descriptors are close-on-exec from the
 * start; a message cut short is refused, never half-read; and on any error
 * no received descriptor stays open.
 *
 * fdpass.c uses libc only (it is built into paddock-init, which links
 * nothing else): errors are -errno, and callers add their own context.
 */
#ifndef PDK_FDPASS_H
#define PDK_FDPASS_H

#include "common.h"

#include <sys/types.h>

/*
 * The most descriptors one message carries. A message with more is refused
 * whole by the receiver (-EMSGSIZE), and never sent (-EINVAL).
 */
#define PDK_FDPASS_MAX 4

/*
 * Send `len` bytes of `data` as one message on `sock`, with `nfds`
 * descriptors (borrowed: the caller still owns and closes them; nfds <=
 * PDK_FDPASS_MAX, none sent when 0). MSG_NOSIGNAL, EINTR retried. Returns
 * the bytes sent (all of them on a SOCK_SEQPACKET socket; the caller
 * decides what a short count means), or -errno: -EINVAL for too many
 * descriptors, -EPIPE/-ECONNRESET when the peer is gone, -EAGAIN on a full
 * non-blocking socket.
 */
PDK_MUST_CHECK ssize_t pdk_fdpass_send(int sock, const void *data, size_t len, const int *fds,
				       size_t nfds);

/*
 * Receive one message into data[0..cap) and its descriptors into fds[].
 * *nfds is the room in fds on entry (more than PDK_FDPASS_MAX is taken as
 * PDK_FDPASS_MAX) and how many were stored on return; the caller owns them,
 * and they are close-on-exec (MSG_CMSG_CLOEXEC). Descriptors beyond the
 * room are closed. `flags` adds recvmsg() flags (MSG_DONTWAIT). EINTR is
 * retried.
 * Returns the bytes received: 0 with *nfds 0 is end of file (or an empty
 * message without descriptors). Or -errno, with *nfds 0 and every received
 * descriptor closed: -EMSGSIZE when the message was longer than `cap`
 * (MSG_TRUNC) or carried more than PDK_FDPASS_MAX descriptors (MSG_CTRUNC),
 * -EAGAIN on an empty non-blocking socket, the socket's own errors.
 */
PDK_MUST_CHECK ssize_t pdk_fdpass_recv(int sock, void *data, size_t cap, int *fds, size_t *nfds,
				       int flags);

#endif
