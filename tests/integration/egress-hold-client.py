#!/usr/bin/env python3
"""Runs inside the sandbox for the egress hold-bound test (the proxy's bound lowered to
256 KiB with PADDOCK_TEST_EGRESS_HOLD_TOTAL=256K); prints one line per request.

  egress-hold-client.py PORT
Requests go to http://127.0.0.1:PORT/echo (the test origin, which echoes the body):
  A  Content-Length 200000: the head and half the body, then it waits (200000 bytes held)
  B  Content-Length 100000 while A holds its 200000: refused at its head (only the head is
     sent, so the answer is read whole)
  C  chunked, a 70000-byte chunk while A holds its 200000: refused when the bound is reached
  C2 chunked, 10000 bytes: fits, answered
  A  the rest of A's body: answered, the whole body echoed
  D  five POSTs of 200000 bytes one after the other on one connection: each answered (each
     request's charge was returned; two at once would pass the bound)
"""
import http.client
import socket
import sys
import time

PROXY = ("127.0.0.1", 3128)
port = int(sys.argv[1])
url = "http://127.0.0.1:%d/echo" % port


def head(extra):
    return ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (url, port, extra)).encode()


def answer(s):
    """Status and body of the one response on socket s (the proxy's or the origin's)."""
    f = s.makefile("rb")
    status = f.readline().split(b" ", 2)
    length = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = f.read(length)
    return status[1].decode(), body


def show(name, s):
    try:
        status, body = answer(s)
    except OSError as e:
        print(name, "error", type(e).__name__)
        return
    text = body.decode(errors="replace").strip() if status != "200" else str(len(body))
    print(name, status, text)


a = socket.create_connection(PROXY, timeout=20)
a.sendall(head("Content-Length: 200000\r\n") + b"a" * 100000)
time.sleep(1)  # the proxy has A's head: its 200000 bytes are charged

b = socket.create_connection(PROXY, timeout=20)
b.sendall(head("Content-Length: 100000\r\n"))
show("B", b)

c = socket.create_connection(PROXY, timeout=20)
c.sendall(head("Transfer-Encoding: chunked\r\n") + b"%x\r\n" % 70000 + b"c" * 70000 + b"\r\n")
show("C", c)

c2 = socket.create_connection(PROXY, timeout=20)
c2.sendall(head("Transfer-Encoding: chunked\r\n") + b"%x\r\n" % 10000 + b"k" * 10000 + b"\r\n0\r\n\r\n")
show("C2", c2)

a.sendall(b"a" * 100000)
show("A", a)

d = http.client.HTTPConnection(PROXY[0], PROXY[1], timeout=20)
codes = []
for _ in range(5):
    d.request("POST", url, body=b"d" * 200000)
    r = d.getresponse()
    codes.append("%d/%d" % (r.status, len(r.read())))
print("D", " ".join(codes))
