#!/usr/bin/env python3
"""Call every route of docs/api.yaml on a live daemon and check each real answer
against the schema the document gives for its status and content type (what a
generated SDK would decode).

   api-conform.py SOCKET API_YAML WORKSPACE [STATE_DIR]

One line per check on stdout: "PASS what" or "FAIL what: why" (test-api-schema.sh
turns them into TAP). Runs as the daemon's user: the unix socket is the credential.
SSE answers are checked event by event (the event's name says which schema).
"""
import http.client
import json
import re
import socket
import sys
import threading

import jsonschema
import yaml

SOCK, SPEC_PATH, WS = sys.argv[1], sys.argv[2], sys.argv[3]
STATE = sys.argv[4] if len(sys.argv) > 4 else None
with open(SPEC_PATH) as f:
    SPEC = yaml.safe_load(f)
# Which event of an exec stream carries which schema.
EXEC_EVENTS = {"start": "ExecStart", "stdout": "ExecOutput", "stderr": "ExecOutput",
               "exit": "ExecExit", "error": "Error"}
covered = set()


class UnixConnection(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("paddock", timeout=120)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(SOCK)


SAY_LOCK = threading.Lock()


def say(good, what, why=""):
    # One write per line: a stream's `during` thread says its lines beside the main thread's,
    # and print() writes the text and its newline apart (two lines could become one).
    line = ("PASS " if good else "FAIL ") + what + ("" if good else ": " + why) + "\n"
    with SAY_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def resolve(node):
    """Follow a local $ref (#/a/b/c) until the node is not one."""
    while isinstance(node, dict) and "$ref" in node:
        target = SPEC
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def validator(schema):
    # The document's components are the schemas' root: local $refs resolve in it.
    full = dict(schema)
    full["components"] = SPEC["components"]
    return jsonschema.Draft202012Validator(full)


def check_value(what, schema, value):
    errs = sorted(validator(schema).iter_errors(value), key=lambda e: list(e.path))
    if errs:
        e = errs[0]
        say(False, what, "%s at %s (%d errors)" % (e.message[:200], "/".join(map(str, e.path)),
                                                  len(errs)))
        return False
    return True


def operation(method, route):
    item = SPEC["paths"].get(route)
    if item is None or method.lower() not in item:
        return None
    return item[method.lower()]


def media_schema(op, status, ctype):
    resp = op.get("responses", {}).get(str(status)) or op.get("responses", {}).get("default")
    if resp is None:
        return None, "status %d is not in the document" % status
    resp = resolve(resp)
    content = resp.get("content")
    if content is None:
        return {}, None  # a description only: any body
    media = content.get(ctype)
    if media is None:
        return None, "content type %s is not in the document for %d (it has %s)" % (
            ctype, status, ", ".join(content))
    return media.get("schema", {}), None


def call(method, route, path, body=None, headers=None, want=None, raw=None):
    """One request; checks the answer against the document and returns (status, parsed)."""
    what = "%s %s -> " % (method, route)
    hdrs = dict(headers or {})
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    conn = UnixConnection()
    if route == "/events":
        conn.timeout = 10  # follow=0 ends the stream after the replay; do not wait forever
    conn.request(method, "/v1" + path, body=data, headers=hdrs)
    resp = conn.getresponse()
    ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip()
    what += "%d %s" % (resp.status, ctype)
    if ctype == "text/event-stream":
        return resp.status, read_sse(what, method, route, resp, conn)
    payload = resp.read()
    conn.close()
    return resp.status, check_answer(what, method, route, resp.status, ctype, payload, want)


def check_answer(what, method, route, status, ctype, payload, want):
    op = operation(method, route)
    if op is None:
        say(False, what, "the route is not in the document")
        return None
    schema, why = media_schema(op, status, ctype)
    if schema is None:
        say(False, what, why)
        return None
    value = payload
    if ctype == "application/json":
        try:
            value = json.loads(payload)
        except ValueError as e:
            say(False, what, "not JSON: %s" % e)
            return None
        if not check_value(what, schema, value):
            return value
    if want is not None and status != want:
        say(False, what, "wanted %d: %s" % (want, payload[:300]))
        return value
    if 200 <= status < 300:
        covered.add((method.lower(), route))
    say(True, what)
    return value


def sse_events(resp):
    """Yield (event, data) of a text/event-stream answer."""
    event, data = "message", []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))


def event_schema(route, event):
    if route == "/events":
        return resolve(SPEC["paths"]["/events"]["get"]["responses"]["200"])["content"][
            "text/event-stream"]["schema"]
    return {"$ref": "#/components/schemas/" + EXEC_EVENTS.get(event, "ExecEvent")}


def read_sse(what, method, route, resp, conn, on_event=None):
    events, good = [], True
    try:
        for event, data in sse_events(resp):
            value = json.loads(data)
            events.append((event, value))
            if not check_value("%s event %s" % (what, event), event_schema(route, event), value):
                good = False
            if on_event is not None:
                on_event(event, value)
    except socket.timeout:
        say(False, what, "the stream did not end (follow=0 should end it after the replay)")
        good = False
    conn.close()
    if good:
        covered.add((method.lower(), route))
        say(True, "%s (%d events)" % (what, len(events)))
    return events


def stream_exec(sid, req, during):
    """A streaming exec; `during(exec_id)` runs once the start event came."""
    conn = UnixConnection()
    conn.request("POST", "/v1/sandboxes/%s/exec" % sid, body=json.dumps(dict(req, stream=True)),
                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    resp = conn.getresponse()
    what = "POST /sandboxes/{id}/exec (stream) -> %d" % resp.status
    done = []

    def on_event(event, value):
        if event == "start" and not done:
            done.append(1)
            threading.Thread(target=during, args=(value["exec_id"],)).start()

    return read_sse(what, "POST", "/sandboxes/{id}/exec", resp, conn, on_event)


def own_start_time():
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def ask_raw(summary):
    """A pending request of the daemon's queue, asked by this (live) process, as a
    `paddock mcp` or `paddock gateway` of the same state directory would ask one."""
    import os
    import sqlite3
    import time
    import uuid
    rid = str(uuid.uuid4())
    now = time.time_ns()
    db = sqlite3.connect(os.path.join(STATE, "approvals.db"), timeout=10)
    db.execute("INSERT INTO approvals (id, kind, state, principal, sandbox, summary, reason,"
               " detail, created_ns, timeout_ns, asker_pid, asker_start, asker_ns)"
               " VALUES (?, 'commit', 'pending', 'conform', NULL, ?, 'a test', '{\"n\":1}',"
               " ?, ?, ?, ?, ?)",
               (rid, summary, now, now + 600 * 10**9, os.getpid(), own_start_time(),
                os.stat("/proc/self/ns/pid").st_ino))
    db.commit()
    db.close()
    return rid


def approvals():
    call("GET", "/approvals", "/approvals", want=200)  # makes the queue
    if STATE is None:
        return
    a1, a2 = ask_raw("one"), ask_raw("two")
    call("GET", "/approvals/{approval_id}", "/approvals/" + a1, want=200)
    call("POST", "/approvals/{approval_id}/approve", "/approvals/%s/approve" % a1,
         {"note": "conform"}, want=200)
    call("POST", "/approvals/{approval_id}/deny", "/approvals/%s/deny" % a2, want=200)
    call("POST", "/approvals/{approval_id}/approve", "/approvals/%s/approve" % a1, want=409)
    call("POST", "/approvals/{approval_id}/deny", "/approvals/%s/deny" % a2, {"nope": 1},
         want=400)
    call("GET", "/approvals/{approval_id}", "/approvals/" + str(uuid_like()), want=404)
    call("GET", "/approvals", "/approvals?all=true", want=200)


def uuid_like():
    import uuid
    return uuid.uuid4()


def main():
    call("GET", "/health", "/health", want=200)
    call("GET", "/openapi.yaml", "/openapi.yaml", want=200)
    _, sb = call("POST", "/sandboxes", "/sandboxes",
                 {"workspace": {"path": WS}, "labels": {"session": "conform"}}, want=201)
    if not isinstance(sb, dict) or "id" not in sb:
        _, sb = call("POST", "/sandboxes", "/sandboxes", {"labels": {"session": "conform"}})
    sid = sb["id"]
    sbp = "/sandboxes/" + sid
    call("GET", "/sandboxes", "/sandboxes", want=200)
    call("GET", "/sandboxes/{id}", sbp, want=200)
    # Exec answers, text and bytes (NUL, not UTF-8) alike.
    for cmd in ["echo hi; echo err >&2; exit 3", "printf 'a\\0b\\377'", "seq 1 20000"]:
        call("POST", "/sandboxes/{id}/exec", sbp + "/exec", {"cmd": cmd, "output_cap": 64},
             want=200)
    stream_exec(sid, {"cmd": "printf 'x\\0y\\377'; echo e >&2"}, lambda eid: None)
    stream_exec(sid, {"argv": ["cat"], "stdin_open": True},
                lambda eid: call("POST", "/sandboxes/{id}/exec/{exec_id}/stdin",
                                 "%s/exec/%d/stdin?eof=1" % (sbp, eid), raw=b"typed\n",
                                 headers={"Content-Type": "application/octet-stream"},
                                 want=200))
    stream_exec(sid, {"argv": ["sleep", "60"]},
                lambda eid: call("POST", "/sandboxes/{id}/exec/{exec_id}/signal",
                                 "%s/exec/%d/signal" % (sbp, eid), {"signal": "KILL"},
                                 want=200))

    def resize_then_end(eid):
        call("POST", "/sandboxes/{id}/exec/{exec_id}/resize", "%s/exec/%d/resize" % (sbp, eid),
             {"cols": 100, "rows": 30}, want=200)
        call("POST", "/sandboxes/{id}/exec/{exec_id}/stdin",
             "%s/exec/%d/stdin?eof=1" % (sbp, eid), raw=b"exit 0\n",
             headers={"Content-Type": "application/octet-stream"})

    stream_exec(sid, {"argv": ["sh"], "pty": True}, resize_then_end)
    call("PUT", "/sandboxes/{id}/files", sbp + "/files?path=/tmp/conform.txt", raw=b"hello\n",
         headers={"Content-Type": "application/octet-stream"}, want=201)
    call("GET", "/sandboxes/{id}/files", sbp + "/files?path=/tmp/conform.txt", want=200)
    call("GET", "/sandboxes/{id}/stat", sbp + "/stat?path=/tmp/conform.txt", want=200)
    call("GET", "/sandboxes/{id}/ls", sbp + "/ls?path=/tmp", want=200)
    call("DELETE", "/sandboxes/{id}/files", sbp + "/files?path=/tmp/conform.txt", want=200)
    tar = tar_of({"a.txt": b"archived\n"})
    call("PUT", "/sandboxes/{id}/archive", sbp + "/archive?path=/tmp/arch", raw=tar,
         headers={"Content-Type": "application/x-tar"}, want=200)
    call("GET", "/sandboxes/{id}/archive", sbp + "/archive?path=/tmp/arch", want=200)
    call("POST", "/sandboxes/{id}/pause", sbp + "/pause", want=200)
    call("POST", "/sandboxes/{id}/resume", sbp + "/resume", want=200)
    call("POST", "/sandboxes/{id}/exec", sbp + "/exec", {"cmd": "echo changed > conform-new"},
         want=200)
    call("POST", "/sandboxes/{id}/snapshot", sbp + "/snapshot", {"name": "s1"}, want=200)
    call("POST", "/sandboxes/{id}/rollback", sbp + "/rollback", {"snapshot": "s1"}, want=200)
    call("GET", "/sandboxes/{id}/snapshots", sbp + "/snapshots", want=200)
    call("POST", "/sandboxes/{id}/snapshot", sbp + "/snapshot", {"name": "s1"}, want=409)
    call("GET", "/sandboxes/{id}/diff", sbp + "/diff", want=200)
    call("GET", "/sandboxes/{id}/diff", sbp + "/diff?patch=1", want=200)
    call("POST", "/sandboxes/{id}/commit", sbp + "/commit", {"dry_run": True}, want=200)
    call("POST", "/sandboxes/{id}/tokens", sbp + "/tokens", {"ops": ["exec"]})
    call("POST", "/sandboxes/{id}/ports", sbp + "/ports", {"port": 8000}, want=200)
    call("GET", "/sandboxes/{id}/ports", sbp + "/ports", want=200)
    call("DELETE", "/sandboxes/{id}/ports/{port}", sbp + "/ports/8000", want=200)
    call("GET", "/events", "/events?follow=0&sandbox=" + sid, want=200)
    call("GET", "/pools", "/pools", want=200)
    call("GET", "/audit", "/audit?max_age=0", want=200)
    call("GET", "/audit", "/audit?max_age=soon", want=400)
    call("PUT", "/pools/{profile}", "/pools/default", {"size": 0})
    approvals()
    # Errors are answers too: a refusal's body is an Error.
    call("GET", "/sandboxes/{id}", "/sandboxes/01a20000-0000-7000-8000-000000000000", want=404)
    call("POST", "/sandboxes/{id}/exec", sbp + "/exec", {"argv": ["true"], "output_cap": 1},
         want=400)
    # The allowlist widened live: 200 on a sandbox of network allowlist, 409 on one of none.
    _, sb3 = call("POST", "/sandboxes", "/sandboxes",
                  {"labels": {"session": "conform"},
                   "overrides": {"network": {"mode": "allowlist", "allow": ["a.test"]}}},
                  want=201)
    call("POST", "/sandboxes/{id}/egress/allow", "/sandboxes/%s/egress/allow" % sb3["id"],
         {"host": "b.test:8443"}, want=200)
    call("POST", "/sandboxes/{id}/egress/allow", sbp + "/egress/allow", {"host": "b.test"},
         want=409)
    call("POST", "/kill", "/kill", {"session": "conform", "reason": "conform"}, want=200)
    _, sb2 = call("POST", "/sandboxes", "/sandboxes", {"labels": {"session": "conform2"}},
                  want=201)
    call("DELETE", "/sandboxes/{id}", "/sandboxes/" + sb2["id"], want=200)
    for route, item in SPEC["paths"].items():
        for method in item:
            if method in ("get", "put", "post", "delete", "patch"):
                say((method, route) in covered, "%s %s: a 2xx answer was checked" %
                    (method.upper(), route), "no call of this route succeeded here "
                    "(add one to tests/integration/api-conform.py)")


def tar_of(files):
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


if __name__ == "__main__":
    main()
