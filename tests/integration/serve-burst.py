#!/usr/bin/env python3
"""serve-burst.py SOCK STATE_DIR N: N clients claim a sandbox at once, each with a first exec.

Each client runs in its own thread over its own connection to the daemon's unix socket
(HTTP/1.1 keep-alive, as an agent's SDK does); a barrier lets them all go at once. As soon as
an answer arrives the client reads the audit store (STATE_DIR/audit.db, read-only) and
looks for the record of its request: `sandbox.claim` after the create, `exec.request` after
the exec. The daemon stores the records of a loop turn together; each must still be stored
before its answer is written. Prints one line per failed step on stderr, and on stdout
"CLAIMED POOLED EXECS CLAIM_RECORDS EXEC_RECORDS" (counts out of N); exits 0, or 2 on bad
usage.
"""
import http.client
import json
import socket
import sqlite3
import sys
import threading


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("paddock", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(self.path)


def call(conn, method, path, body):
    data = json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    raw = r.read()
    try:
        return r.status, json.loads(raw) if raw else None, raw
    except ValueError:
        return r.status, None, raw


def stored(db, sandbox, kind):
    """Whether the audit store holds a record of `kind` about `sandbox` now."""
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        row = c.execute("SELECT count(*) FROM events WHERE sandbox = ? AND kind = ?",
                        (sandbox, kind)).fetchone()
        return row[0] > 0
    finally:
        c.close()


def client(i, sock, db, barrier, res, lock):
    conn = UnixHTTP(sock)
    got = {"claimed": 0, "pooled": 0, "execs": 0, "claim_rec": 0, "exec_rec": 0}
    try:
        barrier.wait()
        code, body, raw = call(conn, "POST", "/v1/sandboxes", {"labels": {"session": "burst"}})
        sid = body.get("id") if isinstance(body, dict) else None
        if code != 201 or not sid:
            print(f"# client {i}: create {code} {raw[:300]!r}", file=sys.stderr)
            return
        got["claimed"] = 1
        got["pooled"] = 1 if body.get("pool") is True else 0
        got["claim_rec"] = 1 if stored(db, sid, "sandbox.claim") else 0
        if not got["claim_rec"]:
            print(f"# client {i}: {sid} answered, sandbox.claim not stored", file=sys.stderr)
        code, body, raw = call(conn, "POST", f"/v1/sandboxes/{sid}/exec",
                               {"argv": ["echo", f"burst{i}"]})
        text = (body or {}).get("stdout", {}).get("text") if isinstance(body, dict) else None
        if code == 200 and text is not None and text.strip() == f"burst{i}":
            got["execs"] = 1
        else:
            print(f"# client {i}: exec {code} {raw[:300]!r}", file=sys.stderr)
        got["exec_rec"] = 1 if stored(db, sid, "exec.request") else 0
        if not got["exec_rec"]:
            print(f"# client {i}: {sid} exec answered, exec.request not stored", file=sys.stderr)
    except Exception as e:  # a client's failure is counted, the others go on
        print(f"# client {i}: {e!r}", file=sys.stderr)
    finally:
        conn.close()
        with lock:
            for k, v in got.items():
                res[k] += v


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    sock, state, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    db = f"{state}/audit.db"
    res = {"claimed": 0, "pooled": 0, "execs": 0, "claim_rec": 0, "exec_rec": 0}
    lock = threading.Lock()
    barrier = threading.Barrier(n)
    threads = [threading.Thread(target=client, args=(i, sock, db, barrier, res, lock))
               for i in range(1, n + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(res["claimed"], res["pooled"], res["execs"], res["claim_rec"], res["exec_rec"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
