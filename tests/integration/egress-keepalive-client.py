#!/usr/bin/env python3
"""Keep-alive inside an intercepted TLS tunnel, from inside the sandbox.

  egress-keepalive-client.py HOST PORT
Through the proxy (127.0.0.1:3128, CONNECT) to https://HOST:PORT, one http.client connection
carries: GET /headers, GET /chunked (a chunked answer), POST /echo with a chunked body, POST
/echo with a Content-Length body, GET /headers again, GET /bye (the server then closes its
connection to the proxy) and GET /headers once more. Prints one line per answer, then
"one-connection" when http.client never had to reconnect. Then GET /close (an answer ended by
the connection's end), and two requests written at once on a fresh tunnel (pipelining): prints
how many answers came back before the connection ended.
"""
import http.client
import os
import socket
import ssl
import sys

host, port = sys.argv[1], int(sys.argv[2])
tok = os.environ["PADDOCK_SECRET_TOK"]
ctx = ssl.create_default_context()  # SSL_CERT_FILE: the sandbox's bundle
c = http.client.HTTPSConnection("127.0.0.1", 3128, context=ctx, timeout=10)
c.set_tunnel(host, port)


def ask(method, path, body=None, headers=None, chunked=False):
    c.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
    r = c.getresponse()
    print(r.status, r.read().decode().strip())


ask("GET", "/headers", headers={"X-Tok": tok})
sock = c.sock
ask("GET", "/chunked")
ask("POST", "/echo", body=iter([b"part-one ", b"part-two"]),
    headers={"Transfer-Encoding": "chunked"}, chunked=True)
ask("POST", "/echo", body=b"with-length")
ask("GET", "/headers", headers={"X-Tok": tok})
ask("GET", "/bye")  # the server ends its side: the proxy opens another TLS connection to it
ask("GET", "/headers", headers={"X-Tok": tok})
print("one-connection" if c.sock is sock else "reconnected")
ask("GET", "/close")
c.close()

raw = socket.create_connection(("127.0.0.1", 3128), timeout=10)
raw.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
assert raw.recv(1024).startswith(b"HTTP/1.1 200")
t = ctx.wrap_socket(raw, server_hostname=host)
req = b"GET /hello HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode()
t.sendall(req + req)
got = b""
while True:
    try:
        b = t.recv(65536)
    except (ssl.SSLError, OSError):
        break
    if not b:
        break
    got += b
print("pipelined answers:", got.count(b"HTTP/1.1 200"))
