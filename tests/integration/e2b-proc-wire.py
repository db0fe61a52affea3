"""envd's process.Process on the wire as E2B's Python SDK sends it (it cannot be installed
here: no PyPI), from its source (e2b-dev/E2B packages/python-sdk: connectrpc with the JSON
codec, protobuf's JSON mapping, enums by name, Connect-Timeout-Ms from the command's
`timeout`, the Keepalive-Ping-Interval header), and what the JavaScript SDK never sends.

    e2b-proc-wire.py ADDR API_KEY

Creates its own sandbox through the control plane and prints one JSON line per check
({"d", "g", "w"}) for test-e2b-proc.sh to turn into subtests.
"""
import base64
import http.client
import json
import struct
import sys
import urllib.error
import urllib.request

ADDR, KEY = sys.argv[1], sys.argv[2]


def check(d, g, w):
    print(json.dumps({"d": d, "g": str(g), "w": str(w)}), flush=True)


def call(method, path, body=None, headers=None):
    req = urllib.request.Request("http://%s%s" % (ADDR, path), data=body, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


SB = json.loads(call("POST", "/sandboxes", json.dumps({"templateID": "base", "timeout": 300}).encode(),
                     {"X-API-KEY": KEY, "Content-Type": "application/json"})[1])
ENVD = {"E2b-Sandbox-Id": SB["sandboxID"], "E2b-Sandbox-Port": "49983",
        "X-Access-Token": SB["envdAccessToken"], "Connect-Protocol-Version": "1",
        "User-Agent": "e2b-python-sdk/2.0.0"}


def unary(method, msg):
    code, body = call("POST", "/process.Process/" + method, json.dumps(msg).encode(),
                      dict(ENVD, **{"Content-Type": "application/json"}))
    return code, json.loads(body or b"{}")


def stream(method, msg, timeout_ms=None, detach=False):
    """The events of a server stream and its end-stream frame's error (None: success).
    With `detach`, the caller leaves after the start event, as a background command's does."""
    data = json.dumps(msg).encode()
    headers = dict(ENVD, **{"Content-Type": "application/connect+json",
                            "Connect-Accept-Encoding": "identity",
                            "Keepalive-Ping-Interval": "50"})
    if timeout_ms is not None:
        headers["Connect-Timeout-Ms"] = str(timeout_ms)
    conn = http.client.HTTPConnection(ADDR, timeout=120)
    conn.request("POST", "/process.Process/" + method,
                 struct.pack(">BI", 0, len(data)) + data, headers)
    r = conn.getresponse()
    events, end = [], None
    while True:
        head = r.read(5)
        if len(head) < 5:
            break
        flags, n = struct.unpack(">BI", head)
        frame = json.loads(r.read(n))
        if flags & 2:
            end = frame.get("error")
            break
        events.append(frame["event"])
        if detach and "start" in frame["event"]:
            break
    conn.close()
    return r.status, events, end


def output(events, kind="stdout"):
    return b"".join(base64.b64decode(e["data"][kind]) for e in events if kind in e.get("data", {}))


# commands.run as the Python SDK sends it: stdin false, envs, a 60 s Connect-Timeout-Ms.
code, ev, end = stream("Start", {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo $PY; exit 7"],
                                             "envs": {"PY": "wire"}}, "stdin": False}, 60000)
check("Start as the Python SDK sends it: 200, start, stdout, end with exitCode 7",
      (code, list(ev[0]), output(ev), ev[-1].get("end")),
      (200, ["start"], b"wire\n", {"exitCode": 7, "exited": True, "status": "exit status 7"}))

# commands.kill: SendSignal with the enum's name, then the end of the killed command.
code, ev, end = stream("Start", {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "sleep 600"]},
                                 "stdin": False, "tag": "py-bg"}, None, detach=True)
check("a Start whose caller left still runs (List by tag)",
      [p.get("tag") for p in unary("List", {})[1].get("processes", [])], ["py-bg"])
pid = next(p["pid"] for p in unary("List", {})[1]["processes"] if p.get("tag") == "py-bg")
check("SendSignal with SIGNAL_SIGKILL (the Python SDK's enum name) answers {}",
      unary("SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}), (200, {}))
code, ev, end = stream("Connect", {"process": {"tag": "py-bg"}})
check("Connect by tag after the kill answers its start and its end: signal: killed",
      (list(ev[0]), ev[-1].get("end", {}).get("status"), ev[-1].get("end", {}).get("exited")),
      (["start"], "signal: killed", False))
check("SendSignal to a command that is gone: not_found (the SDK's kill() answers False)",
      unary("SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGTERM"})[1].get("code"),
      "not_found")

# Connect-Timeout-Ms is the command's timeout: it is killed, not left running.
code, ev, end = stream("Start", {"process": {"cmd": "/bin/sh", "args": ["-c", "sleep 600"]},
                                 "stdin": False, "tag": "py-timeout"}, 500)
check("a Start past its Connect-Timeout-Ms ends with deadline_exceeded or a killed end",
      (end or {}).get("code") == "deadline_exceeded" or "end" in ev[-1], True)
code, ev, end = stream("Connect", {"process": {"tag": "py-timeout"}})
check("the command it started was killed at its timeout (its end: not exited)",
      ev[-1].get("end", {}).get("exited") if ev else ev, False)

# What no SDK sends, refused by name.
check("StreamInput (a client stream) is unimplemented",
      unary("StreamInput", {})[1].get("code"), "unimplemented")
check("a Start without process.cmd is invalid_argument naming it",
      stream("Start", {"process": {"args": []}})[2], {"code": "invalid_argument",
                                                    "message": "'process.cmd' must name the command to run"})
check("SendInput to no such pid is not_found",
      unary("SendInput", {"process": {"pid": 99999}, "input": {"stdin": "eA=="}})[1].get("code"),
      "not_found")
check("a signal other than SIGTERM and SIGKILL is invalid_argument",
      unary("SendSignal", {"process": {"pid": 1}, "signal": "SIGNAL_SIGHUP"})[1].get("code"),
      "invalid_argument")
check("a second background Start answers 200",
      stream("Start", {"process": {"cmd": "/bin/sh", "args": ["-c", "sleep 600"]}, "stdin": False,
                       "tag": "py-nopty"}, None, detach=True)[0], 200)
pid = next(p["pid"] for p in unary("List", {})[1]["processes"] if p.get("tag") == "py-nopty")
check("Update of a command without a terminal is failed_precondition",
      unary("Update", {"process": {"pid": pid}, "pty": {"size": {"cols": 10, "rows": 10}}})[1].get("code"),
      "failed_precondition")
call("DELETE", "/sandboxes/" + SB["sandboxID"], headers={"X-API-KEY": KEY})
