#!/usr/bin/env python3
"""A host-side listener for the escape battery: logs anything that reaches it.

  listener.py tcp|udp PORT LOGFILE      (on 127.0.0.1)
  listener.py tcp-any PORT LOGFILE      (TCP on every address, IPv4 and IPv6)
  listener.py abstract NAME LOGFILE     (abstract unix socket)
Runs until killed (bounded to 60 s); writes one line per connection or datagram.
"""
import socket
import sys
import time

kind, where, log = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", int(where)))
elif kind == "tcp":
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(where)))
    s.listen(8)
elif kind == "tcp-any":
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", int(where)))
    s.listen(8)
else:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + where)
    s.listen(8)
s.settimeout(0.5)
open(log + ".ready", "w").close()  # the test waits for this before attacking
deadline = time.time() + 60
with open(log, "w") as out:
    while time.time() < deadline:
        try:
            if kind == "udp":
                data, peer = s.recvfrom(2048)
                out.write(f"datagram from {peer}: {data!r}\n")
            else:
                conn, peer = s.accept()
                out.write(f"connection from {peer}\n")
                conn.close()
            out.flush()
        except socket.timeout:
            continue
