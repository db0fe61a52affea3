#!/usr/bin/env python3
"""An HTTP origin whose kept connections end as they are reused, for the egress retry tests.

  egress-flaky-origin.py PORTFILE LOG
Binds an ephemeral port on 127.0.0.1, writes it to PORTFILE and serves until killed (bounded to
15 minutes). On each connection it answers the first request (keep-alive: no "Connection:
close", a Content-Length) and, when a second request arrives on it, closes the connection
without answering: a server whose idle timeout fired just as its kept connection was reused.
A request for /bye is answered (still without "Connection: close") and the connection is
closed right after the answer.
Every request is appended to LOG as "conn N req M METHOD PATH answered|closed" (N counts
connections, M requests on that connection), outside the sandbox.
"""
import itertools
import os
import socket
import sys
import threading
import time

lock = threading.Lock()
conns = itertools.count(1)


def log(line):
    with lock, open(sys.argv[2], "a") as f:
        f.write(line + "\n")


def read_request(f):
    line = f.readline()
    if not line:
        return None
    length = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = f.read(length) if length else b""
    method, path = line.split()[:2]
    return method.decode(), path.decode(), body


def serve(sock, n):
    f = sock.makefile("rb")
    for m in itertools.count(1):
        req = read_request(f)
        if req is None:
            break
        method, path, body = req
        if m > 1:
            log("conn %d req %d %s %s closed" % (n, m, method, path))
            break
        log("conn %d req %d %s %s answered" % (n, m, method, path))
        out = b"%s %s %d\n" % (method.encode(), path.encode(), len(body))
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(out), out))
        if path == "/bye":
            break
    f.close()
    sock.close()


srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
threading.Thread(target=lambda: (time.sleep(900), os._exit(0)), daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    s, _ = srv.accept()
    threading.Thread(target=serve, args=(s, next(conns)), daemon=True).start()
