#!/usr/bin/env python3
"""serve-starts.py SOCK: commands started a few at a time (paddock serve --exec-starts 1).

Two sandboxes are made. Sandbox A gets six commands at once and, right after, sandbox B
one, each from its own thread and connection; each command prints the time it started
(`date +%s%N`, nanoseconds) and sleeps 2 s. With one start slot, held by a command until
it exits or for 20 ms, the seven starts spread over six slots (120 ms, less what a loaded
machine's start-up jitter takes from the first and the last); no command waits for another
to end (all answer within 5 s, where one after another would take 14 s); B's command,
waiting behind A's, starts before A's last (the sandboxes take turns). Then sandbox C gets
30 commands at once and is destroyed 150 ms later, while most of them still wait for a
slot: every one is answered, those that had not started with the sandbox's end. Prints
on stdout "ANSWERED SPAN_MS B_BEFORE_A_LAST WALL_S C_ANSWERED C_UNSTARTED", each
failure on stderr; exits 0, or 2 on bad usage.
"""
import http.client
import json
import socket
import sys
import threading
import time


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("paddock", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(self.path)


def call(conn, method, path, body):
    conn.request(method, path, body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    raw = r.read()
    return r.status, json.loads(raw) if raw else None


def main():
    if len(sys.argv) != 2:
        print("usage: serve-starts.py SOCK", file=sys.stderr)
        return 2
    sock = sys.argv[1]
    c = UnixHTTP(sock)
    ids = []
    for _ in range(2):
        st, sb = call(c, "POST", "/v1/sandboxes", {})
        if st != 201:
            print(f"create answered {st}: {sb}", file=sys.stderr)
            print("0 0 0 0")
            return 0
        ids.append(sb["id"])
    starts, lock = {}, threading.Lock()

    def one(name, sid):
        conn = UnixHTTP(sock)
        st, r = call(conn, "POST", f"/v1/sandboxes/{sid}/exec",
                     {"argv": ["sh", "-c", "date +%s%N; sleep 2"]})
        out = (r or {}).get("stdout", {}).get("text", "").strip()
        if st != 200 or r.get("exit_code") != 0 or not out.isdigit():
            print(f"{name}: exec answered {st}: {r}", file=sys.stderr)
            return
        with lock:
            starts[name] = int(out)

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(f"A{i}", ids[0])) for i in range(6)]
    for t in threads:
        t.start()
        time.sleep(0.002)  # in this order
    threads.append(threading.Thread(target=one, args=("B", ids[1])))
    threads[-1].start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    for sid in ids:
        call(c, "DELETE", f"/v1/sandboxes/{sid}", {})
    ordered = sorted(starts.values())
    span = (ordered[-1] - ordered[0]) / 1e6 if ordered else 0
    a_last = max((v for k, v in starts.items() if k.startswith("A")), default=0)
    b_first = int("B" in starts and starts["B"] < a_last)

    st, sb = call(c, "POST", "/v1/sandboxes", {})
    answers = []

    def waiter(sid):
        conn = UnixHTTP(sock)
        try:
            st, r = call(conn, "POST", f"/v1/sandboxes/{sid}/exec",
                         {"argv": ["sleep", "5"]})
        except OSError as e:
            st, r = 0, {"error": repr(e)}
        with lock:
            answers.append((st, r))

    waiters = [threading.Thread(target=waiter, args=(sb["id"],)) for _ in range(30)]
    for t in waiters:
        t.start()
    time.sleep(0.15)
    call(c, "DELETE", f"/v1/sandboxes/{sb['id']}", {})
    for t in waiters:
        t.join(30)
    unstarted = sum(1 for st, r in answers
                    if "ended before the command started" in json.dumps(r))
    print(f"{len(starts)} {int(span)} {b_first} {wall:.1f} {len(answers)} {unstarted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
