#!/usr/bin/env python3
"""events-replay.py SOCK: GET /v1/events replays a long history in pages, at the client's pace.

A sandbox of the daemon behind SOCK runs 700 short commands (exec tracing records each
process's start and end: about 1,400 records, several pages of the replay), then:
- a replay with follow=0 gives every record of the sandbox once, in order, and ends;
- tail=10 gives exactly the last 10 of them;
- a replay with follow=1 read slowly (a few KiB at a time) while another command runs:
  every record of the history, then the new command's records, each once, in order;
- a client that goes away in the middle of a replay leaves the daemon serving (a second
  full replay gives the whole history again).
Prints a line per check ('ok - ...' or 'not ok - ...', for lib-run.sh's tap_run).
"""
import http.client
import json
import socket
import sys
import time

SOCK = sys.argv[1]
N = 0


def ok(cond, desc, detail=""):
    global N
    N += 1
    print(("ok" if cond else "not ok") + f" - {desc}", flush=True)
    if not cond and detail:
        for line in str(detail)[:2000].splitlines():
            print(f"#   {line}", flush=True)


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("paddock", timeout=120)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(SOCK)


def call(method, path, body=None):
    c = UnixHTTP()
    c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    return r.status, (json.loads(raw) if raw else None)


def ids_of(text):
    return [int(l[4:]) for l in text.splitlines() if l.startswith("id: ")]


def replay(query):
    c = UnixHTTP()
    c.request("GET", "/v1/events?" + query)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text


def slow_stream(query, until, run_meanwhile):
    """Read a follow=1 stream a few KiB at a time; run_meanwhile() once after the first
    bytes; stop once `until(text)` holds (or after 120 s)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(SOCK)
    s.sendall(f"GET /v1/events?{query} HTTP/1.1\r\nHost: paddock\r\n\r\n".encode())
    buf, started, deadline = b"", False, time.monotonic() + 120
    while time.monotonic() < deadline:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
        if not started:
            started = True
            run_meanwhile()
        if until(buf.decode(errors="replace")):
            break
        time.sleep(0.002)
    s.close()
    return buf.decode(errors="replace")


def main():
    st, sb = call("POST", "/v1/sandboxes", {})
    ok(st == 201, "a sandbox is created", sb)
    sid = sb["id"]
    st, res = call("POST", f"/v1/sandboxes/{sid}/exec",
                   {"cmd": "i=0; while [ $i -lt 700 ]; do /bin/true; i=$((i+1)); done",
                    "timeout": "120s"})
    ok(st == 200 and res.get("exit_code") == 0, "700 short commands ran", res)
    # The supervisor's records reach the store within about a second; the last commands'
    # process.exit records can come after the 700th process.exec: the history is complete
    # once two replays half a second apart give the same records.
    deadline, ids, last = time.monotonic() + 60, [], None
    while time.monotonic() < deadline:
        _, text = replay(f"sandbox={sid}&since=0&follow=0")
        ids = ids_of(text)
        if sum(1 for l in text.splitlines() if l == "event: process.exec") >= 700 and ids == last:
            break
        last = ids
        time.sleep(0.5)
    st, text = replay(f"sandbox={sid}&since=0&follow=0")
    ids = ids_of(text)
    execs = sum(1 for l in text.splitlines() if l == "event: process.exec")
    ok(st == 200 and execs >= 700 and len(ids) > 3 * 256,
       f"follow=0 replays the whole history and ends ({len(ids)} records, {execs} process.exec)",
       text[-500:])
    ok(ids == sorted(set(ids)), "each record once, in order", ids[:20])
    _, text = replay(f"sandbox={sid}&tail=10&follow=0")
    ok(ids_of(text) == ids[-10:], "tail=10 gives exactly the last 10 records", ids_of(text))

    def another():
        st2, res2 = call("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "echo live"})
        ok(st2 == 200 and (res2.get("stdout") or {}).get("text") == "live\n",
           "a command runs while the replay is being read", res2)

    text = slow_stream(f"sandbox={sid}&since=0", lambda t: "live" in t and
                       "event: process.exit" in t.split("live", 1)[1], another)
    got = ids_of(text)
    ok(got[:len(ids)] == ids, "follow=1 read slowly: the whole history first, in order",
       (len(got), len(ids)))
    ok(len(got) > len(ids) and got == sorted(set(got)),
       f"then the new command's records, each once, in order ({len(got) - len(ids)} more)",
       got[len(ids):])
    # A client that goes away in the middle of a replay.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(SOCK)
    s.sendall(f"GET /v1/events?sandbox={sid}&since=0 HTTP/1.1\r\nHost: paddock\r\n\r\n".encode())
    first = s.recv(1024)
    s.close()
    st, health = call("GET", "/v1/health")
    ok(first.startswith(b"HTTP/1.1 200") and st == 200,
       "a client gone in the middle of a replay: the daemon serves on", (first[:80], health))
    _, text = replay(f"sandbox={sid}&since=0&follow=0")
    ok(ids_of(text)[:len(ids)] == ids, "and a second full replay gives the whole history again")
    call("DELETE", f"/v1/sandboxes/{sid}")


main()
