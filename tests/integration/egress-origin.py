#!/usr/bin/env python3
"""An origin server for the egress tests, on 127.0.0.1 outside the sandbox.

  egress-origin.py PORTFILE [LOG [ADDRESS]]
Binds an ephemeral port on ADDRESS (default 127.0.0.1; LOG "" for none), writes it to
PORTFILE, serves HTTP/1.1 (keep-alive) until killed
(bounded to 15 minutes):
  GET /hello      -> "hello-egress\n"
  GET /big        -> 65536 bytes of 'x'
  GET /huge       -> 8 MiB of 'y'
  POST /echo      -> the request body (with LOG: "echo LENGTH" appended to LOG, outside the
                     sandbox: what reached the server)
  GET /headers    -> the request's header lines, as received
"""
import http.server
import socketserver
import sys
import threading
import time

from origin_body import read_body


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the head and the body are two writes

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
            self.reply(b"hello-egress\n")
        elif self.path == "/big":
            self.reply(b"x" * 65536)
        elif self.path == "/huge":
            self.reply(b"y" * (8 << 20))
        elif self.path == "/headers":
            self.reply(str(self.headers).encode())
        else:
            self.reply(b"not found\n", 404)

    do_HEAD = do_GET

    def do_POST(self):
        body = read_body(self)
        if len(sys.argv) > 2 and sys.argv[2]:
            with open(sys.argv[2], "a") as log:
                log.write("echo %d\n" % len(body))
        self.reply(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = Server((sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1", 0), Handler)
threading.Thread(target=lambda: (time.sleep(900), srv.shutdown()), daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
