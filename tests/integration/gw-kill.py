#!/usr/bin/env python3
"""gw-kill.py MARKER PADDOCK ARGS...: start `PADDOCK ARGS` (a gateway over stdio), call fx__echo
with text MARKER once the tool is listed, and SIGKILL the gateway the moment its answer is read.
Prints {"answer": ..., "signal": N} as one JSON line."""
import json
import os
import signal
import subprocess
import sys
import time

marker, argv = sys.argv[1], sys.argv[2:]
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
n += 1
send({"jsonrpc": "2.0", "id": n, "method": "tools/call",
      "params": {"name": "fx__echo", "arguments": {"text": marker}}})
got = answer(n)
p.kill()  # SIGKILL: no chance to store anything after the answer
p.wait()
print(json.dumps({"answer": got, "signal": -p.returncode}))
