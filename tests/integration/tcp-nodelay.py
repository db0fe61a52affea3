#!/usr/bin/env python3
"""Whether a daemon's end of a TCP connection has TCP_NODELAY.

  tcp-nodelay.py HOST:PORT PID

Opens a connection to HOST:PORT, sends one request and reads its answer (the daemon has
accepted and admitted the connection by then), then finds the daemon's end of that very
connection among the descriptors of PID and its descendants, duplicates it (pidfd_getfd,
which needs the right to ptrace PID: root, or the daemon's own user) and prints its
TCP_NODELAY: "True" or "False"; "not found" when no process of the tree holds it.

Without TCP_NODELAY, a streamed answer's second write (a Connect stream's start event after
its head) waits in the kernel for the client's delayed ACK of the first, up to 40 ms; a
test cannot time that without a timed assertion, so it reads the option itself.
"""
import ctypes
import os
import socket
import sys

SYS_PIDFD_GETFD = 438  # the same number on every architecture (the unified table)


def tree(pid):
    """PID and its descendants, parents first."""
    kids = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        kids.setdefault(ppid, []).append(int(p))
    todo, out = [pid], []
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo += kids.get(p, [])
    return out


def sockets(pid):
    """The descriptor numbers of PID's sockets."""
    out = []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for name in names:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                out.append(int(name))
        except OSError:
            pass
    return out


def nodelay_of(pidfd, num, peer, libc):
    """TCP_NODELAY of the process's descriptor NUM when its peer is PEER; else None."""
    fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, num, 0)
    if fd < 0:
        return None
    s = socket.socket(fileno=fd)
    try:
        if s.family in (socket.AF_INET, socket.AF_INET6) and s.getpeername() == peer:
            return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    except OSError:
        pass
    finally:
        s.close()
    return None


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    c = socket.create_connection((host, int(port)), timeout=30)
    c.sendall(b"GET /health HTTP/1.1\r\nHost: " + sys.argv[1].encode() + b"\r\n\r\n")
    if not c.recv(65536).startswith(b"HTTP/1.1 "):
        sys.exit("tcp-nodelay: no HTTP answer")
    me = c.getsockname()
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in tree(int(sys.argv[2])):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            for num in sockets(pid):
                v = nodelay_of(pidfd, num, me, libc)
                if v is not None:
                    print(v)
                    return
        finally:
            os.close(pidfd)
    print("not found")


if __name__ == "__main__":
    main()
