#!/usr/bin/env python3
"""The client of bench/egress; runs inside the sandbox, or outside (direct, or through
another proxy named by HTTP_PROXY, user:password@ included).

  egress-client.py http|http-new PORT N [proxy]  N GETs of /hello (one connection, or a new
                                                 one each); prints the times in ms
  egress-client.py tunnel PORT                   read everything PORT sends; "BYTES SECONDS"
  egress-client.py tls PORT N CAFILE             N HTTPS GETs of /hello, each on a new
                                                 connection (TCP, CONNECT, TLS handshake,
                                                 request, answer); prints the times in ms
  egress-client.py conc PORT N CAFILE            N such requests at once (one thread each,
                                                 started together); prints START and END
                                                 around them, then "OK FAILED" and the times
Through a proxy when HTTP_PROXY is set and PADDOCK_DIRECT is not.
"""
import base64
import http.client
import os
import socket
import ssl
import sys
import threading
import time
import urllib.parse


def proxy():
    if os.environ.get("PADDOCK_DIRECT") or not os.environ.get("HTTP_PROXY"):
        return None
    return urllib.parse.urlsplit(os.environ["HTTP_PROXY"])


def open_tunnel(port):
    """A TCP connection to 127.0.0.1:port, through a CONNECT tunnel when proxied."""
    p = proxy()
    if p is None:
        return socket.create_connection(("127.0.0.1", port), timeout=120), b""
    s = socket.create_connection((p.hostname, p.port), timeout=120)
    auth = ""
    if p.username:
        cred = base64.b64encode(f"{p.username}:{p.password}".encode()).decode()
        auth = f"Proxy-Authorization: Basic {cred}\r\n"
    s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n"
              .encode())
    # Reads of 4 KiB, not of one byte: tunnelled bytes that follow the answer in the same
    # read are handed back to the caller.
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(4096)
        if not b:
            raise OSError(f"no answer to CONNECT: {head!r}")
        head += b
    if not head.startswith(b"HTTP/1.1 200"):
        raise OSError(f"CONNECT refused: {head.splitlines()[0].decode()}")
    return s, head.split(b"\r\n\r\n", 1)[1]


def https_get(port, ctx):
    t0 = time.perf_counter_ns()
    raw, early = open_tunnel(port)
    if early:  # a TLS server says nothing before the client's hello
        raise OSError(f"bytes before the TLS handshake: {early[:40]!r}")
    s = ctx.wrap_socket(raw, server_hostname="origin.test")
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n")
    got = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
    s.close()
    if not got.startswith(b"HTTP/1.1 200") or not got.endswith(b"hello-egress\n"):
        raise OSError(f"bad answer {got[:40]!r}")
    return (time.perf_counter_ns() - t0) / 1e6


def plain(mode, port, n):
    proxied = proxy() is not None
    c = http.client.HTTPConnection("127.0.0.1", proxy().port if proxied else port)
    url = f"http://127.0.0.1:{port}/hello" if proxied else "/hello"
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        if mode == "http-new":
            c.close()
            c = http.client.HTTPConnection("127.0.0.1", port)
        c.request("GET", url)
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"status {r.status}")
        times.append((time.perf_counter_ns() - t0) / 1e6)
    print(" ".join(f"{t:.4f}" for t in times))


def tunnel(port):
    s, early = open_tunnel(port)
    buf = bytearray(1 << 20)
    got, t0 = len(early), time.perf_counter()
    while True:
        k = s.recv_into(buf)
        if k == 0:
            break
        got += k
    print(f"{got} {time.perf_counter() - t0:.6f}")


def concurrent(port, n, ctx):
    start = threading.Barrier(n + 1)
    times, errors = [], []

    def one():
        start.wait()
        try:
            times.append(https_get(port, ctx))
        except OSError as e:
            errors.append(str(e))
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    print("START", flush=True)
    time.sleep(0.3)
    start.wait()
    for t in threads:
        t.join()
    print("END", flush=True)
    time.sleep(0.3)
    print(len(times), len(errors), errors[0] if errors else "")
    print(" ".join(f"{t:.4f}" for t in times))


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode in ("http", "http-new"):
        plain(mode, port, int(sys.argv[3]))
    elif mode == "tunnel":
        tunnel(port)
    else:
        ctx = ssl.create_default_context(cafile=sys.argv[4])
        if mode == "tls":
            times = [https_get(port, ctx) for _ in range(int(sys.argv[3]))]
            print(" ".join(f"{t:.4f}" for t in times))
        else:
            concurrent(port, int(sys.argv[3]), ctx)


if __name__ == "__main__":
    main()
