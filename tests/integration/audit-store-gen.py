#!/usr/bin/env python3
"""Make an audit store (STATE/audit.db) of N valid records, fast, for tests and benchmarks.

usage: audit-store-gen.py STATE_DIR N [DENY_EVERY]

The records follow docs/audit.md ("The record format"): each is its canonical line (the
event's keys, "seq", "sandbox_seq" and "prev_hash", compact, keys sorted, ASCII), hashed
with SHA-256 and chained by prev_hash; the query columns hold what the line holds. So
`paddock audit verify` and the daemon's GET /v1/audit find the chain intact, and a daemon
started on the directory appends after it. No checkpoint is signed (the daemon signs its
own later). Every tenth record is a net.connect, one in DENY_EVERY of those (default 50)
with attrs.decision "deny", the others "allow"; the rest are process.exec records of 16
sandboxes. The store must not exist yet.
"""
import hashlib
import json
import os
import sqlite3
import sys

SCHEMA = [
    "CREATE TABLE events (seq INTEGER PRIMARY KEY NOT NULL,"
    " ts TEXT NOT NULL, sandbox TEXT NOT NULL, session TEXT, workflow TEXT,"
    " actor TEXT NOT NULL, kind TEXT NOT NULL, line BLOB NOT NULL, hash BLOB NOT NULL)",
    "CREATE TABLE checkpoints (seq INTEGER PRIMARY KEY NOT NULL,"
    " hash BLOB NOT NULL, key_id TEXT NOT NULL, sig BLOB NOT NULL, ts TEXT NOT NULL)",
    "CREATE TABLE spool_offsets (source TEXT PRIMARY KEY NOT NULL, offset INTEGER NOT NULL)",
]


def record(seq, deny_every):
    sb = "gen-%08d" % (seq % 16)
    ts = "2026-01-01T%02d:%02d:%02d.%06dZ" % (seq // 3600000 % 24, seq // 60000 % 60,
                                               seq // 1000 % 60, seq % 1000 * 1000)
    if seq % 10 == 0:
        deny = (seq // 10) % deny_every == 0
        kind = "net.connect"
        attrs = {"dest": "host-%d.example:443" % (seq % 97),
                 "decision": "deny" if deny else "allow",
                 "rule": "default" if deny else "allow[0]"}
    else:
        kind = "process.exec"
        attrs = {"argv": ["/bin/true", str(seq)], "pid": seq % 30000 + 2}
    return {"ts": ts, "sandbox": sb, "session": "gen", "workflow": None,
            "actor": "paddock-gen", "kind": kind, "attrs": attrs, "sandbox_seq": seq}


def main():
    state, n = sys.argv[1], int(sys.argv[2])
    deny_every = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    os.makedirs(state, mode=0o700, exist_ok=True)
    path = os.path.join(state, "audit.db")
    if os.path.exists(path):
        sys.exit("audit-store-gen: %s exists" % path)
    db = sqlite3.connect(path)
    os.chmod(path, 0o600)
    for s in SCHEMA:
        db.execute(s)
    prev = bytes(32)
    rows = []
    for seq in range(1, n + 1):
        r = record(seq, deny_every)
        r["seq"] = seq
        r["prev_hash"] = prev.hex()
        line = json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
        prev = hashlib.sha256(line).digest()
        rows.append((seq, r["ts"], r["sandbox"], r["session"], r["workflow"], r["actor"],
                     r["kind"], line, prev))
        if len(rows) == 50000:
            db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?)", rows)
            rows = []
    db.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?)", rows)
    db.commit()
    db.execute("PRAGMA journal_mode=WAL")
    db.close()


if __name__ == "__main__":
    main()
