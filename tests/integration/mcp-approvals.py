#!/usr/bin/env python3
"""The approval queue as a user meets it (TAP lines without numbers, test-approvals.sh
numbers them): an MCP client calls workspace_propose_commit on a `paddock mcp` whose
workspace has a change, and a human decides with the CLI of the same state directory, or, for
a client that declared elicitation, in band (accept, decline, an answer after the CLI's).

   mcp-approvals.py WHO WS MODE -- PREFIX...

PREFIX runs a command as WHO with its state directory (test-approvals.sh's as_argv).
MODE: cli (approve, deny, time out, cancel, through `paddock approvals/approve/deny`) or
api SOCKET (approve through the daemon's API on SOCKET: the approver recorded is its
principal, and /v1/events carried approval.requested live, as another process wrote it).
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_client import Stdio, is_error, structured, text  # noqa: E402

WHO, WS, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
rest = sys.argv[4:]
SOCK = None
if MODE == "api":
    SOCK, rest = rest[0], rest[1:]
PREFIX = rest[rest.index("--") + 1:]
PADDOCK = [a for a in PREFIX if a.endswith("/paddock")][0]
AS = PREFIX[:PREFIX.index(PADDOCK)]


def ok(good, what, detail=None):
    print("%s - %s: %s" % ("ok" if good else "not ok", WHO, what))
    if not good and detail is not None:
        print("#   " + json.dumps(detail)[:600])
    sys.stdout.flush()
    return good


def cli(*args):
    p = subprocess.run(PREFIX + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def pending():
    rc, out, _ = cli("approvals", "--json")
    return json.loads(out) if rc == 0 else []


def wait_pending(before):
    """The id of the new pending request (waits for the server to ask; no timed check)."""
    for _ in range(600):
        new = [a for a in pending() if a["id"] not in before]
        if new:
            return new[0]
        time.sleep(0.05)
    return None


def server(timeout="60s", caps=None):
    c = Stdio(PREFIX + ["mcp", "--workspace", WS, "--approval-timeout", timeout])
    c.initialize(caps=caps)
    return c


def asked(c, method="elicitation/create"):
    """The first request (or notification) `method` the server sent (waits for it, bounded)."""
    for _ in range(600):
        found = [n for n in c.notes if n.get("method") == method]
        if found:
            return found[0]
        c.pump(0.1)
    return None


def close(c, what):
    rc, err = c.close()
    ok(rc == 0, "paddock mcp exits 0 after %s" % what, err[-600:])


def propose(c, change):
    """Make a change in the sandbox, send workspace_propose_commit (not waited for)."""
    r = c.call("run_command", {"command": "echo %s > %s.txt" % (change, change)})
    ok(not is_error(r), "the sandbox changed %s.txt" % change, r)
    before = {a["id"] for a in pending()}
    c.next_id += 1
    rid = c.next_id
    c.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "workspace_propose_commit", "arguments": {}}})
    return rid, wait_pending(before)


def host_has(name):
    return os.path.exists(os.path.join(WS, name))


def approve_with_cli():
    c = server()
    rid, a = propose(c, "approved")
    if not ok(a is not None, "paddock approvals --json lists the proposed commit"):
        return c.close()
    ok(a["kind"] == "commit" and a["state"] == "pending" and a["sandbox"] in a["summary"]
       and "1 change" in a["summary"] and a["detail"]["changes"][0]["path"] == "approved.txt",
       "the request says what: a commit of the sandbox's 1 change, approved.txt", a)
    rc, out, _ = cli("approvals")
    ok(rc == 0 and a["id"] in out and "TIMEOUT-IN" in out and "commit" in out,
       "paddock approvals prints a table naming the request", out)
    ok(not host_has("approved.txt"), "the host directory is unchanged while it waits")
    rc, _, err = cli("approve", a["id"], "--note", "looks right")
    ok(rc == 0, "paddock approve ID exits 0", err)
    r = c.wait(rid, 60)
    ok(not [n for n in c.notes if n.get("method") == "elicitation/create"],
       "a client that declared no elicitation is sent no elicitation/create", c.notes)
    s = structured(r)
    ok(r is not None and not is_error(r) and s.get("status") == "committed"
       and s.get("approver", "").startswith("uid:"),
       "the waiting call completes: committed, approved by uid:NAME", r)
    ok(host_has("approved.txt"), "the host directory has the change")
    rc, _, err = cli("approve", a["id"])
    ok(rc == 1 and "approved" in err and a["id"] in err,
       "approving it again exits 1 naming its state", err)
    rc, _, err = cli("deny", "no-such-id")
    ok(rc == 1 and "'no-such-id'" in err, "deny of an unknown id exits 1 naming it", err)
    rc, _, err = cli("approve")
    ok(rc == 122, "approve without an ID is a usage error (122)", err)
    close(c, "an approved commit")


def deny_with_cli():
    c = server()
    rid, a = propose(c, "denied")
    if not ok(a is not None, "the second proposal is pending"):
        return c.close()
    rc, _, err = cli("deny", a["id"], "--note", "not now")
    ok(rc == 0, "paddock deny ID exits 0", err)
    r = c.wait(rid, 60)
    ok(r is not None and is_error(r) and "denied by uid:" in text(r) and "not now" in text(r),
       "the client gets the denial: 'denied by uid:NAME: not now'", r)
    ok(not host_has("denied.txt"), "the host directory is unchanged")
    rc, out, _ = cli("approvals", "--all", "--json")
    states = {x["id"]: x["state"] for x in json.loads(out)} if rc == 0 else {}
    ok(states.get(a["id"]) == "denied", "paddock approvals --all shows it denied", out)
    close(c, "a denied commit")


def time_out():
    c = server("1s")
    rid, a = propose(c, "late")
    r = c.wait(rid, 60)
    ok(r is not None and is_error(r) and structured(r).get("status") == "timed_out"
       and "within 1s" in text(r) and "paddock approve" in text(r),
       "nobody deciding within --approval-timeout 1s: a clear refusal naming the timeout", r)
    ok(not host_has("late.txt"), "the host directory is unchanged")
    if a is not None:
        rc, _, err = cli("approve", a["id"])
        ok(rc == 1 and "timed_out" in err, "approving it later exits 1: timed_out", err)
    close(c, "a timed-out request")


def cancel():
    c = server()
    rid, a = propose(c, "cancelled")
    if not ok(a is not None, "a proposal to cancel is pending"):
        return c.close()
    c.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": rid, "reason": "the user pressed escape"}})
    state = None
    for _ in range(600):
        rc, out, _ = cli("approvals", "--all", "--json")
        state = {x["id"]: x["state"] for x in json.loads(out)}.get(a["id"]) if rc == 0 else None
        if state != "pending":
            break
        time.sleep(0.05)
    ok(state == "withdrawn", "a cancelled call withdraws its request", state)
    rc, _, err = cli("approve", a["id"])
    ok(rc == 1 and "withdrawn" in err, "a withdrawn request cannot be approved", err)
    ok(not host_has("cancelled.txt"), "the host directory is unchanged")
    close(c, "a cancelled call")
    # The asker's end withdraws too: the server ends with a request pending.
    c = server()
    rid, a = propose(c, "ended")
    close(c, "its client left with a request pending")
    rc, out, _ = cli("approvals", "--all", "--json")
    states = {x["id"]: x["state"] for x in json.loads(out)} if rc == 0 else {}
    ok(a is not None and states.get(a["id"]) == "withdrawn",
       "the server's end withdraws the request it was waiting for", states)


ELICIT = {"elicitation": {}}


def state_of(aid):
    rc, out, _ = cli("approvals", "--all", "--json")
    return {x["id"]: x for x in json.loads(out)}.get(aid, {}) if rc == 0 else {}


def in_band_accept():
    """A client that declared elicitation is asked too; its accept approves (docs/approvals.md)."""
    c = server(caps=ELICIT)
    rid, a = propose(c, "inband")
    q = asked(c)
    if not ok(a is not None and q is not None,
              "in band: the request is queued and the client is sent elicitation/create"):
        return c.close()
    p = q.get("params", {})
    ok(str(q.get("id", "")).startswith("paddock-") and a["id"] in p.get("message", "")
       and "workspace_propose_commit" in p.get("message", "") and "inband.txt" in p["message"]
       and p.get("requestedSchema", {}).get("properties", {}).get("approve", {}).get("type")
       == "boolean", "in band: it names the request, why, what changes; {approve: boolean}", q)
    c.send({"jsonrpc": "2.0", "id": q["id"],
            "result": {"action": "accept", "content": {"approve": True}}})
    r = c.wait(rid, 60)
    s = structured(r)
    ok(r is not None and not is_error(r) and s.get("status") == "committed"
       and s.get("approver", "").startswith("elicitation:stdio:"),
       "in band: accepted, the call completes, approved by elicitation:PRINCIPAL", r)
    ok(host_has("inband.txt"), "in band: the host directory has the change")
    row = state_of(a["id"])
    ok(row.get("state") == "approved" and row.get("approver", "").startswith("elicitation:")
       and "in band by MCP client mcp-suite" in (row.get("note") or ""),
       "in band: the queue records it approved by elicitation:PRINCIPAL, the client named", row)
    close(c, "a commit approved in band")


def in_band_decline():
    c = server(caps=ELICIT)
    rid, a = propose(c, "declined")
    q = asked(c)
    if not ok(q is not None, "in band: a second proposal is asked"):
        return c.close()
    c.send({"jsonrpc": "2.0", "id": q["id"], "result": {"action": "decline"}})
    r = c.wait(rid, 60)
    ok(r is not None and is_error(r) and "denied by elicitation:" in text(r)
       and "declined" in text(r), "in band: declined, the client gets the denial", r)
    ok(not host_has("declined.txt"), "in band: the host directory is unchanged")
    close(c, "a commit declined in band")


def in_band_late():
    """The queue decides first: the question is cancelled and a late answer changes nothing."""
    c = server(caps=ELICIT)
    rid, a = propose(c, "late-answer")
    q = asked(c)
    if not ok(a is not None and q is not None, "in band: a third proposal is asked"):
        return c.close()
    rc, _, err = cli("deny", a["id"], "--note", "no")
    r = c.wait(rid, 60)
    ok(r is not None and is_error(r) and "denied by uid:" in text(r),
       "in band: paddock deny before the client answered: the call is denied", r)
    gone = asked(c, "notifications/cancelled")
    ok(gone is not None and gone["params"].get("requestId") == q["id"],
       "in band: the server cancels its question (notifications/cancelled, its id)", c.notes)
    c.send({"jsonrpc": "2.0", "id": q["id"],
            "result": {"action": "accept", "content": {"approve": True}}})
    c.pump(0.5)
    row = state_of(a["id"])
    ok(row.get("state") == "denied" and row.get("approver", "").startswith("uid:"),
       "in band: the late accept changes nothing: still denied by uid:NAME", row)
    ok(not host_has("late-answer.txt"), "in band: the host directory is unchanged")
    rc, err = c.close()
    ok(rc == 0 and "is ignored" in err and q["id"] in err,
       "in band: the late answer is logged as ignored, naming its id", err[-600:])


def in_band_off():
    """--no-elicit-approvals: a client that could be asked is not; the queue alone decides."""
    c = Stdio(PREFIX + ["mcp", "--workspace", WS, "--no-elicit-approvals"])
    c.initialize(caps=ELICIT)
    rid, a = propose(c, "off")
    if not ok(a is not None, "in band off: the proposal is pending"):
        return c.close()
    rc, _, err = cli("approve", a["id"])
    r = c.wait(rid, 60)
    ok(r is not None and not is_error(r) and structured(r).get("approver", "").startswith("uid:"),
       "in band off: paddock approve lets the call complete, approved by uid:NAME", r)
    ok(not [n for n in c.notes if n.get("method") == "elicitation/create"],
       "in band off: the client that declared elicitation was sent no elicitation/create",
       c.notes)
    close(c, "a commit with in-band approvals off")


def api(method, path, body=None, token=None):
    args = AS + ["curl", "-s", "--unix-socket", SOCK, "-X", method,
                 "-w", "\n%{http_code}", "http://paddock/v1" + path]
    if token is not None:
        args += ["-H", "Authorization: Bearer " + token]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    out, _, code = p.stdout.rpartition("\n")
    return int(code or 0), out


def sse_read(sse, until, wait_s=60):
    """Read the stream until `until(buf)` says what it wanted is there (None at the
    stream's end, or when nothing came for `wait_s`: a bound on the wait, not a check)."""
    import select
    buf = b""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        r, _, _ = select.select([sse.stdout], [], [], 1)
        if not r:
            continue
        chunk = os.read(sse.stdout.fileno(), 65536)
        if not chunk:
            return None
        buf += chunk
        found = until(buf)
        if found is not None:
            return found
    return None


def data_naming(needle):
    def find(buf):
        for line in buf.split(b"\n"):
            if line.startswith(b"data:") and needle.encode() in line:
                return json.loads(line[5:])
        return None
    return find


def approve_with_api():
    # The event stream, followed from before the request: the daemon hands it the record
    # another process (paddock mcp) appended to the audit store.
    sse = subprocess.Popen(AS + ["curl", "-siN", "--unix-socket", SOCK,
                                 "http://paddock/v1/events?kind=approval.requested"],
                           stdout=subprocess.PIPE)
    # The answer's head is written once the daemon subscribed it: no record is missed after.
    ok(sse_read(sse, lambda b: True if b"\r\n\r\n" in b else None) is True,
       "GET /v1/events (follow) is answered")
    c = server()
    rid, a = propose(c, "viaapi")
    if not ok(a is not None, "the proposal is pending (paddock mcp beside paddock serve)"):
        sse.kill()
        return c.close()
    code, body = api("GET", "/approvals")
    ok(code == 200 and a["id"] in body, "GET /v1/approvals lists it", body)
    # A sandbox's own token decides nothing: the routes are an admin's.
    code, body = api("POST", "/sandboxes", {"labels": {"session": "approvals"}})
    sb = json.loads(body) if code == 201 else {}
    code, body = api("POST", "/approvals/%s/approve" % a["id"], token=sb.get("token", "x"))
    ok(code == 403, "a sandbox token's approve is refused 403", body)
    code, body = api("GET", "/approvals", token=sb.get("token", "x"))
    ok(code == 403, "a sandbox token's GET /v1/approvals is refused 403", body)
    if sb.get("id"):
        api("DELETE", "/sandboxes/" + sb["id"])
    code, body = api("POST", "/approvals/%s/approve" % a["id"], {"note": "via the API"})
    uid = "0" if WHO == "root" else str(os.stat(WS).st_uid)
    ok(code == 200 and json.loads(body).get("approver") == "unix:" + uid,
       "POST /v1/approvals/ID/approve: approved, approver unix:%s" % uid, body)
    code, body = api("POST", "/approvals/%s/deny" % a["id"])
    ok(code == 409 and "approved" in body, "deny after it: 409 naming its state", body)
    r = c.wait(rid, 60)
    ok(r is not None and not is_error(r) and structured(r).get("approver") == "unix:" + uid,
       "the waiting call completes, committed", r)
    ok(host_has("viaapi.txt"), "the host directory has the change")
    close(c, "a commit approved through the API")
    seen = sse_read(sse, data_naming(a["id"]))
    sse.kill()
    ok(seen is not None and seen["kind"] == "approval.requested"
       and seen["attrs"]["summary"] == a["summary"],
       "/v1/events carried approval.requested as it happened", seen)
    code, body = api("GET", "/events?since=0&follow=0&kind=approval.granted")
    granted = [json.loads(x[5:]) for x in body.splitlines() if x.startswith("data:")]
    granted = [g for g in granted if g["attrs"].get("id") == a["id"]]
    ok(len(granted) == 1 and granted[0]["attrs"].get("approver") == "unix:" + uid
       and granted[0]["attrs"].get("note") == "via the API",
       "the audit store records approval.granted with the API's principal", granted)


if MODE == "cli":
    approve_with_cli()
    deny_with_cli()
    time_out()
    cancel()
    in_band_accept()
    in_band_decline()
    in_band_late()
    in_band_off()
else:
    approve_with_api()
