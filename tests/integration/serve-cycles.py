#!/usr/bin/env python3
"""serve-cycles.py SOCK N IDS [LABEL]: N create/exec/destroy cycles through paddock serve.

One process drives every cycle over the daemon's unix socket (HTTP/1.1, a connection per
request, as a client would), so a long run (N = 10,000) costs the daemon's time, not a shell's
process spawns. Each created id is appended to IDS. A failed step is printed to stderr with
the cycle number, the status and the body; progress goes to stderr every 500 cycles. Prints
"FAILS" on stdout and exits 0 (the caller compares the count), or 2 on bad usage.
"""
import http.client
import json
import socket
import sys
import time


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("paddock", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(self.path)


def call(sock, method, path, body=None):
    c = UnixHTTP(sock)
    try:
        data = None if body is None else json.dumps(body).encode()
        hdr = {} if data is None else {"Content-Type": "application/json"}
        c.request(method, path, body=data, headers=hdr)
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw) if raw else None, raw
        except ValueError:
            return r.status, None, raw
    finally:
        c.close()


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    sock, n, ids = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    label = sys.argv[4] if len(sys.argv) == 5 else "leak"
    fails = 0
    t0 = time.monotonic()
    with open(ids, "a") as out:
        for i in range(1, n + 1):
            code, body, raw = call(sock, "POST", "/v1/sandboxes",
                                   {"labels": {"session": label, "cycle": str(i)}})
            sid = body.get("id") if isinstance(body, dict) else None
            if code != 201 or not sid:
                fails += 1
                print(f"# cycle {i}: create {code} {raw[:300]!r}", file=sys.stderr)
                continue
            out.write(sid + "\n")
            out.flush()
            code, body, raw = call(sock, "POST", f"/v1/sandboxes/{sid}/exec",
                                   {"argv": ["sh", "-c", "echo cycle; ls / >/dev/null"]})
            text = (body or {}).get("stdout", {}).get("text") if isinstance(body, dict) else None
            if code != 200 or text != "cycle\n" and text != "cycle":
                fails += 1
                print(f"# cycle {i}: exec {code} {raw[:300]!r}", file=sys.stderr)
            code, body, raw = call(sock, "DELETE", f"/v1/sandboxes/{sid}")
            if code != 200:
                fails += 1
                print(f"# cycle {i}: delete {code} {raw[:300]!r}", file=sys.stderr)
            if i % 500 == 0:
                dt = time.monotonic() - t0
                print(f"# {i}/{n} cycles, {fails} failed, {dt:.0f} s, {dt / i * 1000:.1f} ms "
                      f"per cycle", file=sys.stderr, flush=True)
    print(fails)
    return 0


if __name__ == "__main__":
    sys.exit(main())
