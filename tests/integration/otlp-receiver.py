#!/usr/bin/env python3
"""A loopback OTLP/HTTP receiver for test-otlp.sh: records every POST.

  otlp-receiver.py MODE DIR
MODE: ok     answer 200 {} to everything
      flaky  answer the first request 503 with "Retry-After: 1", then 200
      hang   read the request and never answer
      bad    answer 400 to everything
Listens on 127.0.0.1, an ephemeral port written to DIR/port once ready;
appends one JSON line per request to DIR/requests.jsonl:
  {"t": seconds since start, "path": ..., "headers": {lowercased: value},
   "body": the parsed JSON body (or null), "status": what was answered}
Runs until killed (bounded to 120 s).
"""
import http.server
import json
import os
import sys
import threading
import time

mode, out = sys.argv[1], sys.argv[2]
start = time.time()
lock = threading.Lock()
count = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as collectors do: no 40 ms delayed-ACK stall per answer

    def log_message(self, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with lock:
            count[0] += 1
            first = count[0] == 1
        status = {"ok": 200, "flaky": 503 if first else 200, "bad": 400}.get(mode, 0)
        rec = {"t": time.time() - start, "path": self.path,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "body": body, "status": status}
        with lock, open(os.path.join(out, "requests.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
        if mode == "hang":
            time.sleep(100)
            return
        reply = b"{}"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        if status == 503:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(reply)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
with open(os.path.join(out, "port.tmp"), "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(os.path.join(out, "port.tmp"), os.path.join(out, "port"))
threading.Timer(120, lambda: os._exit(0)).start()
srv.serve_forever()
