#!/usr/bin/env python3
"""Slow-header connections against the daemon's TCP port, for test-serve-flood.sh.

  flood-client.py flood HOST PORT N SOURCES READY_FILE STOP_FILE
  flood-client.py burst HOST PORT N SOURCE_IP

burst: opens N connections from SOURCE_IP at once, each sending the start of a request
head and nothing more, and waits (at most 60 s) until the daemon closed them all; prints
ANSWERS (as below) and OPEN n, the connections still open at the end.

flood:
Opens N connections to HOST:PORT, spread over the source addresses 127.0.0.2 ..
127.0.0.(SOURCES+1), each sending the start of a request head and then one header line
every 2 seconds, never the blank line that ends the head. A connection the daemon closes
is opened again (the attack goes on) until STOP_FILE exists. When all N were tried once it
writes READY_FILE. At the end it prints:

  OPENED n        connections the kernel let it open (attempts that connected)
  CLOSED n        connections the daemon closed
  ANSWERS s:n ... the status codes of what the daemon answered before closing (503, 408)
  LONGEST s       the longest any connection stayed open, in whole seconds
"""
import os
import selectors
import socket
import sys
import time

MODE, HOST, PORT, N = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
SOURCES = int(sys.argv[5]) if MODE == "flood" else 1
SOURCE_IP = sys.argv[5] if MODE == "burst" else None
READY, STOP = (sys.argv[6], sys.argv[7]) if MODE == "flood" else (None, None)
sel = selectors.DefaultSelector()
conns = {}  # sock -> [opened_at, last_line_at, received bytes]
stats = {"opened": 0, "closed": 0, "answers": {}, "longest": 0.0}


def open_one(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((SOURCE_IP or "127.0.0.%d" % (2 + i % SOURCES), 0))
    s.setblocking(False)
    try:
        s.connect((HOST, PORT))
    except BlockingIOError:
        pass
    except OSError:
        s.close()
        return
    conns[s] = [time.monotonic(), time.monotonic(), b"", True]
    sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)


def closed(s):
    c = conns.pop(s)
    sel.unregister(s)
    s.close()
    stats["closed"] += 1
    stats["longest"] = max(stats["longest"], time.monotonic() - c[0])
    head = c[2].split(b"\r\n", 1)[0].split()
    if len(head) >= 2:
        stats["answers"][head[1].decode()] = stats["answers"].get(head[1].decode(), 0) + 1


def step(s, mask):
    c = conns[s]
    if mask & selectors.EVENT_WRITE and c[3]:
        c[3] = False
        sel.modify(s, selectors.EVENT_READ)
        try:
            s.send(b"GET /v1/health HTTP/1.1\r\nHost: flood\r\n")
            stats["opened"] += 1
        except OSError:
            closed(s)
            return
    if mask & selectors.EVENT_READ:
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:
            closed(s)
            return
        c[2] += data


def trickle():
    now = time.monotonic()
    for s, c in list(conns.items()):
        if not c[3] and now - c[1] >= 2:
            c[1] = now
            try:
                s.send(b"X-Slow: 1\r\n")
            except OSError:
                closed(s)


def show():
    print("ANSWERS", " ".join("%s:%d" % kv for kv in sorted(stats["answers"].items())))


def burst():
    for i in range(N):
        open_one(i)
    deadline = time.monotonic() + 60
    while conns and time.monotonic() < deadline:
        for key, mask in sel.select(0.2):
            if key.fileobj in conns:
                step(key.fileobj, mask)
    show()
    print("OPEN", len(conns))


def flood():
    for i in range(N):
        open_one(i)
        for key, mask in sel.select(0):
            step(key.fileobj, mask)
    open(READY, "w").close()
    i = N
    while not os.path.exists(STOP):
        for key, mask in sel.select(0.2):
            if key.fileobj in conns:
                step(key.fileobj, mask)
        trickle()
        for _ in range(N - len(conns)):
            i += 1
            open_one(i)
    now = time.monotonic()
    for c in conns.values():
        stats["longest"] = max(stats["longest"], now - c[0])
    print("OPENED", stats["opened"])
    print("CLOSED", stats["closed"])
    show()
    print("LONGEST", int(stats["longest"]))


if MODE == "burst":
    burst()
else:
    flood()
