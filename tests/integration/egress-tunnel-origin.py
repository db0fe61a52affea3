#!/usr/bin/env python3
"""Origins for test-egress-tunnel.sh and bench/egress, on 127.0.0.1 outside the sandbox.

  egress-tunnel-origin.py DIR
Binds two ephemeral ports and writes "TCP HTTP" to DIR/ports; serves until killed (bounded
to 15 minutes).

TCP port: one command line per connection, then
  SEND N SEED   N bytes of the stream of SEED (see stream()), then close
  RECV          read to the end of stream (the client's shutdown), answer "COUNT SHA256\\n",
                close: the answer can only arrive if the half-close passed the proxy
  RESET         close at once with a reset (SO_LINGER 0)
  ECHO          send back every byte read, as it comes, until the end of stream; then close
HTTP port: HTTP/1.1 with keep-alive; GET /hello -> "hello-tunnel\\n". Every accepted
connection increments the count in DIR/http-accepts.
"""
import hashlib
import http.server
import os
import random
import socket
import socketserver
import struct
import sys
import threading
import time

CHUNK = 1 << 16


def stream(seed, n):
    """The deterministic bytes both ends generate: a seeded PRNG, 64 KiB at a time."""
    rng = random.Random(seed)
    while n > 0:
        k = min(n, CHUNK)
        yield rng.randbytes(k)
        n -= k


class Tcp(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline().split()
        s = self.connection
        if line[:1] == [b"SEND"]:
            for block in stream(int(line[2]), int(line[1])):
                s.sendall(block)
        elif line[:1] == [b"RECV"]:
            h, n = hashlib.sha256(), 0
            while True:
                b = self.rfile.read1(CHUNK)
                if not b:
                    break
                h.update(b)
                n += len(b)
            s.sendall(f"{n} {h.hexdigest()}\n".encode())
        elif line[:1] == [b"ECHO"]:
            while True:
                b = self.rfile.read1(CHUNK)
                if not b:
                    break
                s.sendall(b)
        elif line[:1] == [b"RESET"]:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            os.close(s.detach())  # now, before socketserver's shutdown(SHUT_WR) sends a FIN


class Http(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"hello-tunnel\n" if self.path == "/hello" else b"not found\n"
        self.send_response(200 if self.path == "/hello" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512


class HttpServer(Server, http.server.HTTPServer):
    accepts = 0
    lock = threading.Lock()

    def get_request(self):
        r = super().get_request()
        with self.lock:
            HttpServer.accepts += 1
            with open(os.path.join(DIR, "http-accepts.tmp"), "w") as f:
                f.write(str(HttpServer.accepts))
            os.rename(os.path.join(DIR, "http-accepts.tmp"), os.path.join(DIR, "http-accepts"))
        return r


DIR = sys.argv[1]
tcp = Server(("127.0.0.1", 0), Tcp)
web = HttpServer(("127.0.0.1", 0), Http)
with open(os.path.join(DIR, "http-accepts"), "w") as f:
    f.write("0")
for srv in (tcp, web):
    threading.Thread(target=srv.serve_forever, daemon=True).start()
with open(os.path.join(DIR, "ports.tmp"), "w") as f:
    f.write(f"{tcp.server_address[1]} {web.server_address[1]}")
os.rename(os.path.join(DIR, "ports.tmp"), os.path.join(DIR, "ports"))
time.sleep(900)
