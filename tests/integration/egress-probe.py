#!/usr/bin/env python3
"""Runs inside the sandbox for the egress tests; each mode prints what happened.

  egress-probe.py connect tcp|tcp6|udp|udp6 HOST PORT
      try to reach HOST:PORT directly (no proxy); prints "connected" or the errno name
  egress-probe.py raw HEX
      send the bytes (hex) to the proxy, print the status line it answers with
  egress-probe.py big-head
      send a request head larger than the proxy's cap, print the status line
  egress-probe.py pipeline URL
      two GETs for URL in one write; print how many responses came back
  egress-probe.py hold-then CMD...
      open a connection to the proxy and send nothing, run CMD, print CMD's exit status
  egress-probe.py tunnel-hold HOST:PORT CMD...
      open a CONNECT tunnel and keep it, run CMD, print CMD's exit status
  egress-probe.py flood N CMD...
      open N connections to the proxy that send nothing, close them, run CMD, print how many
      connected and CMD's exit status
"""
import errno
import socket
import subprocess
import sys

PROXY = ("127.0.0.1", 3128)


def err_name(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__


def connect(kind, host, port):
    fam = socket.AF_INET6 if kind.endswith("6") else socket.AF_INET
    typ = socket.SOCK_DGRAM if kind.startswith("udp") else socket.SOCK_STREAM
    s = socket.socket(fam, typ)
    s.settimeout(3)
    try:
        if typ == socket.SOCK_DGRAM:
            s.sendto(b"\x00" * 12, (host, int(port)))
            s.recv(512)
        else:
            s.connect((host, int(port)))
        print("connected")
        return 0
    except OSError as e:
        print(err_name(e))
        return 1


def status_of(data):
    s = socket.create_connection(PROXY, timeout=5)
    s.sendall(data)
    buf = b""
    while b"\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    print(buf.split(b"\r\n")[0].decode(errors="replace") or "closed")
    return 0


def pipeline(url):
    req = f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    s = socket.create_connection(PROXY, timeout=5)
    s.sendall(req + req)
    buf = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        print("timeout")
        return 1
    print(f"responses={buf.count(b'HTTP/1.1 ')} closed")
    return 0


def hold_then(target, cmd):
    s = socket.create_connection(PROXY, timeout=5)
    if target:
        s.sendall(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
        print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
    rc = subprocess.call(cmd)
    print(f"cmd-exit={rc}")
    s.close()
    return 0


def flood(n, cmd):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(PROXY)
            socks.append(s)
        except OSError:
            s.close()
            break
    print(f"connected={len(socks)}", flush=True)
    for s in socks:
        s.close()
    rc = subprocess.call(cmd)
    print(f"cmd-exit={rc}")
    return 0


mode = sys.argv[1]
if mode == "connect":
    sys.exit(connect(*sys.argv[2:5]))
elif mode == "raw":
    sys.exit(status_of(bytes.fromhex(sys.argv[2])))
elif mode == "big-head":
    sys.exit(status_of(b"GET http://a.test/ HTTP/1.1\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n"))
elif mode == "pipeline":
    sys.exit(pipeline(sys.argv[2]))
elif mode == "hold-then":
    sys.exit(hold_then(None, sys.argv[2:]))
elif mode == "flood":
    sys.exit(flood(int(sys.argv[2]), sys.argv[3:]))
elif mode == "tunnel-hold":
    sys.exit(hold_then(sys.argv[2], sys.argv[3:]))
sys.exit(2)
