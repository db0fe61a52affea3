#!/usr/bin/env python3
"""An HTTPS origin server for the egress TLS tests, on 127.0.0.1 outside the sandbox.

  egress-tls-origin.py PORTFILE CERT KEY LOG
Binds an ephemeral port, writes it to PORTFILE, serves HTTPS (HTTP/1.1) with CERT and KEY
until killed (bounded to 15 minutes):
  GET /hello      -> "hello-tls\n"
  GET /headers    -> "seen\n"; the request line and header lines, as received, are appended
                     to LOG (outside the sandbox: what reached the server, which the client
                     never sees)
  GET /chunked    -> "chunk-one chunk-two\n" in two chunks (Transfer-Encoding: chunked)
  GET /close      -> "closed-body\n" delimited by the end of the connection
  GET /bye        -> "bye\n" (Content-Length, no "Connection: close"), then the connection
                     is closed: a server whose kept connection ends while the client idles
  POST /echo      -> the request body (Content-Length or chunked)
Each /headers entry in LOG starts with "peer PORT", the proxy's port of the TLS connection
the request came over: two requests logged with one port came over one connection.
"""
import http.server
import os
import socketserver
import ssl
import sys
import threading
import time

from origin_body import read_body


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def reply(self, body, status=200):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        if self.path == "/hello":
            self.reply(b"hello-tls\n")
        elif self.path == "/headers":
            with open(sys.argv[4], "a") as log:
                log.write("peer %d\n" % self.client_address[1])
                log.write(self.requestline + "\n" + str(self.headers) + "--\n")
            self.reply(b"seen\n")
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"chunk-one ", b"chunk-two\n"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/bye":
            self.reply(b"bye\n")
            self.close_connection = True
        elif self.path == "/close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"closed-body\n")
            self.close_connection = True
        else:
            self.reply(b"not found\n", 404)

    do_HEAD = do_GET

    def do_POST(self):
        body = read_body(self)
        self.reply(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def get_request(self):
        sock, addr = super().get_request()
        # The handshake in the handler's thread: a client that fails it stops nobody else.
        return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        pass  # failed handshakes are part of the tests


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
srv = Server(("127.0.0.1", 0), Handler)
threading.Thread(target=lambda: (time.sleep(900), srv.shutdown()), daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
