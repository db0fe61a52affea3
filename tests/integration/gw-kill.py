#!/usr/bin/env python3
"""gw-kill.py [--calls N] [--pause-at K] [--in-flight M] MARKER PADDOCK ARGS...: start `PADDOCK
ARGS` (a gateway over stdio), call fx__echo N times (default 1) with texts MARKER-1 .. MARKER-N
(MARKER itself when N is 1) once the tool is listed, one at a time, and SIGKILL the gateway the
moment the last answer is read. With --pause-at K, it waits 0.3 s after the K-th answer (the
gateway folds its spool meanwhile: the kill then finds records folded and records not). With
--in-flight M, M more calls (MARKER-inflight-1 ..) are written before the kill and their answers
not awaited. Prints {"answer": the last answer, "answered": [texts answered], "signal": N} as
one JSON line."""
import json
import os
import subprocess
import sys
import time

opts = {"--calls": 1, "--pause-at": 0, "--in-flight": 0}
args = sys.argv[1:]
while args and args[0] in opts:
    opts[args[0]] = int(args[1])
    args = args[2:]
marker, argv = args[0], args[1:]
p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
buf = b""


def send(msg):
    p.stdin.write(json.dumps(msg).encode() + b"\n")


def answer(i):
    global buf
    while True:
        while b"\n" not in buf:
            data = os.read(p.stdout.fileno(), 65536)
            if not data:
                sys.exit("gw-kill: the gateway closed its stdout")
            buf += data
        line, buf = buf.split(b"\n", 1)
        msg = json.loads(line)
        if msg.get("id") == i and "method" not in msg:
            return msg


def echo(i, text):
    send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
          "params": {"name": "fx__echo", "arguments": {"text": text}}})


send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "gw-kill", "version": "1"}}})
answer(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
n = 1
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    n += 1
    send({"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {}})
    if any(t["name"] == "fx__echo" for t in answer(n)["result"]["tools"]):
        break
    time.sleep(0.1)
answered, got = [], None
for k in range(1, opts["--calls"] + 1):
    text = marker if opts["--calls"] == 1 else "%s-%d" % (marker, k)
    n += 1
    echo(n, text)
    got = answer(n)
    if got.get("result", {}).get("isError") is not True:
        answered.append(got["result"]["content"][0]["text"])
    if k == opts["--pause-at"]:
        time.sleep(0.3)
for k in range(1, opts["--in-flight"] + 1):
    n += 1
    echo(n, "%s-inflight-%d" % (marker, k))
p.kill()  # SIGKILL: no chance to store anything after the answer
p.wait()
print(json.dumps({"answer": got, "answered": answered, "signal": -p.returncode}))
