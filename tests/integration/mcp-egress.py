#!/usr/bin/env python3
"""A new egress host through the approval queue, as a user meets it (TAP lines without
numbers, test-approvals.sh numbers them): an agent's sandbox of `paddock mcp` whose
allowlist lacks the origin is refused; the agent calls egress_request_allow; a human
decides; approved, the same curl gets through without a restart.

   mcp-egress.py WHO PROFILE ORIGIN MODE -- PREFIX...

PROFILE is a profile of network.mode allowlist that does not list ORIGIN ("IP:PORT", an
origin in a network namespace of the suite's own). PREFIX runs a command as WHO with its
state directory (test-approvals.sh's as_argv). MODE: cli (approve, deny, time out, network
none, a bad entry, through `paddock approve/deny`, and the audit records) or api SOCKET
(`paddock serve` on the same state directory: the approval through POST
/v1/approvals/ID/approve, and an admin's POST /v1/sandboxes/ID/egress/allow, whose sandbox
is left running and named in widened-WHO beside PROFILE for the suite's adoption check).
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_client import Stdio, is_error, structured, text  # noqa: E402

WHO, PROFILE, ORIGIN, MODE = sys.argv[1:5]
rest = sys.argv[5:]
SOCK = None
if MODE == "api":
    SOCK, rest = rest[0], rest[1:]
PREFIX = rest[rest.index("--") + 1:]
PADDOCK = [a for a in PREFIX if a.endswith("/paddock")][0]
AS = PREFIX[:PREFIX.index(PADDOCK)]
IP, PORT = ORIGIN.rsplit(":", 1)
URL = "http://%s/hello" % ORIGIN
CURL = "curl -sS -f -m 10 %s; echo rc=$?" % URL


def ok(good, what, detail=None):
    print("%s - %s: %s" % ("ok" if good else "not ok", WHO, what))
    if not good and detail is not None:
        print("#   " + json.dumps(detail)[:800])
    sys.stdout.flush()
    return good


def cli(*args):
    p = subprocess.run(PREFIX + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def pending():
    rc, out, _ = cli("approvals", "--json")
    return json.loads(out) if rc == 0 else []


def wait_pending(before):
    """The new pending request (waits for the server to ask; no timed check)."""
    for _ in range(600):
        new = [a for a in pending() if a["id"] not in before]
        if new:
            return new[0]
        time.sleep(0.05)
    return None


def server(timeout="60s", profile=PROFILE):
    argv = PREFIX + ["mcp", "--approval-timeout", timeout]
    if profile is not None:
        argv += ["--profile", profile]
    c = Stdio(argv)
    c.initialize()
    return c


def close(c, what):
    rc, err = c.close()
    ok(rc == 0, "paddock mcp exits 0 after %s" % what, err[-600:])


def curl(c):
    return text(c.call("run_command", {"command": CURL}))


def refused(out):
    """curl's own exit status (22: the proxy's 403) and the proxy's reason."""
    return "rc=22" in out and "403" in out and "hello-egress" not in out


def ask(c, host, reason="fetch the test origin's page"):
    """egress_request_allow, sent and not waited for: its request id and the pending one."""
    before = {a["id"] for a in pending()}
    c.next_id += 1
    rid = c.next_id
    c.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "egress_request_allow",
                       "arguments": {"host": host, "reason": reason}}})
    return rid, wait_pending(before)


def audit(kind):
    rc, out, _ = cli("audit", "tail", "-n", "500", "--kind", kind, "--json")
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")] if rc == 0 else []


def approve_with_cli():
    c = server()
    out = curl(c)
    ok(refused(out), "the sandbox's curl to %s is refused: exit 22, the proxy's 403" % ORIGIN,
       out)
    # The supervisor's records reach the audit store a moment later (its spool, ingested):
    # wait for the denial there, a bound on the wait and not a check.
    for _ in range(200):
        r = c.call("egress_denials", {})
        if any(d.get("host") == IP and str(d.get("port")) == PORT
               and "no network.allow rule" in (d.get("reason") or "")
               for d in structured(r).get("denied", [])):
            break
        time.sleep(0.05)
    ok(any(d.get("host") == IP and str(d.get("port")) == PORT
           and "no network.allow rule" in (d.get("reason") or "")
           for d in structured(r).get("denied", [])),
       "the proxy recorded the denial (egress_denials names the host, port and reason)", r)
    rid, a = ask(c, ORIGIN)
    if not ok(a is not None, "egress_request_allow waits in the queue (paddock approvals)"):
        return c.close()
    d = a.get("detail") or {}
    ok(a["kind"] == "egress.host" and a["state"] == "pending" and ORIGIN in a["summary"]
       and d.get("host") == ORIGIN and str(d.get("port")) == PORT
       and d.get("sandbox") == a["sandbox"] and d.get("reason") == "fetch the test origin's page",
       "the request says what: kind egress.host, the host, its port, the sandbox, the "
       "agent's reason", a)
    ok(refused(curl(c)), "while it waits the allowlist is as it was")
    rc, _, err = cli("approve", a["id"], "--note", "the test origin")
    ok(rc == 0, "paddock approve ID exits 0", err)
    r = c.wait(rid, 60)
    s = structured(r)
    ok(r is not None and not is_error(r) and s.get("status") == "allowed"
       and s.get("host") == ORIGIN and s.get("approver", "").startswith("uid:"),
       "the waiting call answers {status: allowed, host}, approved by uid:NAME", r)
    out = curl(c)
    ok("hello-egress" in out and "rc=0" in out,
       "the same curl now gets the origin's page, without a restart", out)
    r = c.call("egress_rules", {})
    ok(ORIGIN in (structured(r).get("allow") or []), "egress_rules lists the new entry", r)
    records(a, "uid:")
    close(c, "an approved egress host")


def records(a, approver):
    """The audit store: approval.requested, approval.granted, net.allow.added."""
    req = [e for e in audit("approval.requested") if e["attrs"].get("id") == a["id"]]
    ok(len(req) == 1 and req[0]["attrs"].get("kind") == "egress.host"
       and req[0]["attrs"].get("detail", {}).get("host") == ORIGIN,
       "the audit store records approval.requested (egress.host, the host)", req)
    got = [e for e in audit("approval.granted") if e["attrs"].get("id") == a["id"]]
    ok(len(got) == 1 and got[0]["attrs"].get("approver", "").startswith(approver),
       "... and approval.granted with the approver", got)
    add = [e for e in audit("net.allow.added") if e["attrs"].get("approval_id") == a["id"]]
    ok(len(add) == 1 and add[0]["attrs"].get("allow") == ORIGIN
       and add[0]["attrs"].get("actor") == got[0]["attrs"].get("approver") if got else False,
       "... and net.allow.added: the entry, the approver as actor, the approval's id", add)


def deny_with_cli():
    c = server()
    rid, a = ask(c, ORIGIN)
    if not ok(a is not None, "a second request is pending"):
        return c.close()
    rc, _, err = cli("deny", a["id"], "--note", "not this one")
    ok(rc == 0, "paddock deny ID exits 0", err)
    r = c.wait(rid, 60)
    ok(r is not None and is_error(r) and structured(r).get("status") == "denied"
       and "denied by uid:" in text(r) and "not this one" in text(r),
       "the client gets the denial: 'denied by uid:NAME: not this one'", r)
    out = curl(c)
    ok(refused(out), "the same curl stays refused", out)
    ok(not [e for e in audit("net.allow.added") if e["attrs"].get("approval_id") == a["id"]],
       "no net.allow.added for a denied request")
    close(c, "a denied egress host")


def time_out():
    c = server("1s")
    rid, a = ask(c, ORIGIN)
    r = c.wait(rid, 60)
    ok(r is not None and is_error(r) and structured(r).get("status") == "timed_out"
       and "within 1s" in text(r) and "paddock approve" in text(r),
       "nobody deciding within --approval-timeout 1s: a clear refusal naming the timeout", r)
    ok(refused(curl(c)), "the same curl stays refused")
    if a is not None:
        rc, _, err = cli("approve", a["id"])
        ok(rc == 1 and "timed_out" in err, "approving it later exits 1: timed_out", err)
        tout = [e for e in audit("approval.timeout") if e["attrs"].get("id") == a["id"]]
        ok(len(tout) == 1 and tout[0]["attrs"].get("kind") == "egress.host",
           "the audit store records approval.timeout", tout)
    close(c, "a timed-out egress host")


def unfit():
    # The default profile: network.mode none. No human is asked: nothing could be widened.
    c = server(profile=None)
    before = {a["id"] for a in pending()}
    r = c.call("egress_request_allow", {"host": ORIGIN, "reason": "try"})
    ok(is_error(r) and structured(r).get("reason") == "no_allowlist"
       and "network.mode is none" in text(r) and "no egress proxy" in text(r),
       "network.mode none: refused at once, saying there is no egress proxy to widen", r)
    ok(not [a for a in pending() if a["id"] not in before], "... and nobody is asked")
    close(c, "a sandbox of network none")
    c = server()
    for bad in ("*", "http://%s/" % ORIGIN, "*.%s" % IP):
        r = c.call("egress_request_allow", {"host": bad, "reason": "try"})
        ok(is_error(r) and structured(r).get("reason") == "invalid_host"
           and "network.allow entry" in text(r),
           "'%s' is no network.allow entry: refused naming it, nobody asked" % bad, r)
    ok(not [a for a in pending() if a["id"] not in before], "no request was queued for them")
    close(c, "entries the grammar refuses")


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


def api_exec(sid):
    """The command's stderr and stdout, as one text."""
    code, body = api("POST", "/sandboxes/%s/exec" % sid, {"cmd": CURL})
    if code != 200:
        return body
    res = json.loads(body)
    return "".join(res.get(k, {}).get("text", "") for k in ("stderr", "stdout"))


def field(body):
    try:
        return json.loads(body).get("error", {}).get("field")
    except ValueError:
        return None


def approve_with_api():
    c = server()
    rid, a = ask(c, ORIGIN)
    if not ok(a is not None, "egress_request_allow is pending beside paddock serve"):
        return c.close()
    code, body = api("POST", "/approvals/%s/approve" % a["id"], {"note": "via the API"})
    ok(code == 200 and json.loads(body).get("approver", "").startswith("unix:"),
       "POST /v1/approvals/ID/approve: approved by unix:UID", body)
    r = c.wait(rid, 60)
    ok(r is not None and structured(r).get("status") == "allowed"
       and structured(r).get("approver", "").startswith("unix:"),
       "the waiting call answers allowed, the API's principal the approver", r)
    out = curl(c)
    ok("hello-egress" in out and "rc=0" in out, "the sandbox's curl gets through", out)
    records(a, "unix:")
    close(c, "an egress host approved through the API")


def admin_route():
    """An operator widens a daemon sandbox: POST /v1/sandboxes/ID/egress/allow."""
    code, body = api("POST", "/sandboxes",
                     {"labels": {"suite": "approvals-egress"},
                      "overrides": {"network": {"mode": "allowlist", "allow": ["other.test"]}}})
    sb = json.loads(body) if code == 201 else {}
    if not ok(code == 201, "a daemon sandbox of network allowlist is created", body):
        return
    sid = sb["id"]
    out = api_exec(sid)
    ok(refused(out), "its curl to %s is refused (exit 22, 403)" % ORIGIN, out)
    code, body = api("POST", "/sandboxes/%s/egress/allow" % sid, {"host": ORIGIN},
                     token=sb.get("token"))
    ok(code == 403, "the sandbox's own token cannot widen it: 403", body)
    code, body = api("POST", "/sandboxes/%s/egress/allow" % sid, {"host": "http://x/"})
    ok(code == 400 and field(body) == "host",
       "an entry the grammar refuses: 400, field host", body)
    code, body = api("POST", "/sandboxes/%s/egress/allow" % sid, {"host": ORIGIN})
    doc = json.loads(body) if code == 200 else {}
    ok(code == 200 and doc.get("allow") == ORIGIN and doc.get("added") is True
       and ORIGIN in doc.get("network", {}).get("allow", []),
       "an admin's POST /v1/sandboxes/ID/egress/allow: 200, the entry added", body)
    code, body = api("GET", "/sandboxes/%s" % sid)
    ok(code == 200 and ORIGIN in json.dumps(json.loads(body).get("network")),
       "GET /v1/sandboxes/ID shows it in network.allow", body)
    out = api_exec(sid)
    ok("hello-egress" in out and "rc=0" in out, "the same curl now gets through", out)
    # A snapshot with restart starts a new init and a new proxy: from the sandbox's policy.
    code, body = api("POST", "/sandboxes/%s/snapshot" % sid, {"name": "s1", "restart": True})
    ok(code == 200, "a snapshot with restart (a new init, a new egress proxy)", body)
    out = api_exec(sid)
    ok("hello-egress" in out and "rc=0" in out,
       "after the restart the entry holds: the curl still gets through", out)
    code, body = api("POST", "/sandboxes/%s/egress/allow" % sid, {"host": ORIGIN})
    ok(code == 200 and json.loads(body).get("added") is False,
       "asking again changes nothing: added false", body)
    add = [e for e in audit("net.allow.added") if e.get("sandbox") == sid]
    ok(len(add) == 1 and add[0]["attrs"].get("actor", "").startswith("unix:")
       and add[0]["attrs"].get("approval_id") is None,
       "net.allow.added records the admin (unix:UID) as actor, once", add)
    # Left running for the suite, which restarts the daemon and looks again (adoption).
    with open(os.path.join(os.path.dirname(PROFILE), "widened-" + WHO), "w") as f:
        f.write(sid)
    code, body = api("POST", "/sandboxes", {"labels": {"suite": "approvals-egress"}})
    none = json.loads(body).get("id") if code == 201 else None
    code, body = api("POST", "/sandboxes/%s/egress/allow" % none, {"host": ORIGIN})
    ok(code == 409 and field(body) == "network.mode"
       and "network.mode is none" in body,
       "a sandbox of network none: 409 naming network.mode and why", body)
    if none:
        api("DELETE", "/sandboxes/" + none)


def in_band():
    """A client that declared elicitation is asked too; its accept widens the allowlist."""
    c = Stdio(PREFIX + ["mcp", "--approval-timeout", "60s", "--profile", PROFILE])
    c.initialize(caps={"elicitation": {}})
    ok(refused(curl(c)), "in band: the sandbox's curl is refused first")
    rid, a = ask(c, ORIGIN)
    q = None
    for _ in range(600):
        found = [n for n in c.notes if n.get("method") == "elicitation/create"]
        if found:
            q = found[0]
            break
        c.pump(0.1)
    if not ok(a is not None and q is not None,
              "in band: the request is queued and the client is sent elicitation/create", q):
        return c.close()
    p = q.get("params", {})
    ok(a["id"] in p.get("message", "") and ORIGIN in p.get("message", ""),
       "in band: the question names the request and the host", q)
    c.send({"jsonrpc": "2.0", "id": q["id"],
            "result": {"action": "accept", "content": {"approve": True}}})
    r = c.wait(rid, 60)
    s = structured(r)
    ok(r is not None and not is_error(r) and s.get("status") == "allowed"
       and s.get("approver", "").startswith("elicitation:"),
       "in band: accepted, the call answers allowed, approved by elicitation:PRINCIPAL", r)
    out = curl(c)
    ok("hello-egress" in out and "rc=0" in out, "in band: the same curl now gets the page", out)
    close(c, "an egress host approved in band")


if MODE == "cli":
    approve_with_cli()
    in_band()
    deny_with_cli()
    time_out()
    unfit()
else:
    approve_with_api()
    admin_route()
