/*
 * peer.h - where the process at the other end of a unix socket lives.
 *
 * SO_PEERCRED says which uid connected, not from where: a process in a
 * sandbox has the uid of the user who made the sandbox (mapped 1:1), so a
 * uid alone cannot tell the daemon's user at a shell from a sandboxed
 * command that reached the socket. This module answers the other half: is
 * the peer in the caller's own user namespace and pid namespace?
 */
#ifndef PDK_PEER_H
#define PDK_PEER_H

#include "common.h"

struct pdk_error;

/*
 * Whether the process that connected the unix stream or seqpacket socket
 * `fd` (an accepted connection, borrowed) is in this process's user
 * namespace and in its pid namespace: 1 yes, 0 no (a sandbox, a
 * container). Negative + *err when it cannot be told (a kernel before
 * Linux 6.5 has no SO_PEERPIDFD: -ENOPROTOOPT; the peer has ended: -ESRCH);
 * a caller gives such a peer no more than it gives one that answered no.
 *
 * Race-free: the answer is about the process that connected, never about
 * another that later got its pid. The peer is named by the pidfd the
 * kernel took at connect() (SO_PEERPIDFD), and its namespaces are read
 * through that pidfd (PIDFD_GET_USER_NAMESPACE, PIDFD_GET_PID_NAMESPACE,
 * Linux 6.11); before 6.11, through /proc/PID/ns, trusted only when the
 * pidfd's process is still alive after the read (then PID was its pid
 * all along).
 *
 * The peer's namespaces are read on every call; the caller's own are read
 * once per process and kept, so a caller must not change its own user
 * namespace (unshare(), setns()) after its first call: the daemon and the
 * supervisor never do.
 */
PDK_MUST_CHECK int pdk_peer_in_our_namespaces(int fd, struct pdk_error **err);

/*
 * The same question asked again and again of one connection (every request
 * on it): the peer's pidfd and whether its pid namespace is ours are kept
 * from the first call, since a process cannot change its own pid namespace
 * for its life (setns() and unshare() change its children's only). Its user
 * namespace, which it can change (unshare(CLONE_NEWUSER), setns()), is read
 * again through the kept pidfd on every call. That saves the pidfd's making
 * and a second namespace lookup per request: 4 system calls of 9. Before
 * Linux 6.11 (no namespace ioctl on a pidfd) each call asks afresh.
 */
struct pdk_peer_kept {
	int pidfd;    /* the peer's, from SO_PEERPIDFD at the first call; -1: not yet */
	int pid_same; /* its pid namespace is ours: 1, 0; -1: not known yet */
};

#define PDK_PEER_KEPT_INIT ((struct pdk_peer_kept){.pidfd = -1, .pid_same = -1})

/* pdk_peer_in_our_namespaces() of connection `fd`, whose kept state is `k`. */
PDK_MUST_CHECK int pdk_peer_in_our_namespaces_kept(struct pdk_peer_kept *k, int fd,
						   struct pdk_error **err);

/* Close what `k` keeps (the connection's end). */
void pdk_peer_kept_release(struct pdk_peer_kept *k);

#endif
