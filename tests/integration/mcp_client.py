"""A raw JSON-RPC client of `paddock mcp` for the mcp suite: messages as bytes, answers read
one line at a time, notifications kept apart. Nothing of an MCP SDK: the suite checks the
wire itself."""
import json
import os
import select
import subprocess
import time


class Stdio:
    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        self.buf = b""
        self.notes = []
        self.answers = {}
        self.next_id = 100

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def _line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def pump(self, timeout):
        """Read what comes for `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            m = self._line(deadline)
            if m is None:
                return
            self._keep(m)

    def _keep(self, m):
        if "id" in m and ("result" in m or "error" in m):
            self.answers[json.dumps(m["id"])] = m
        else:
            self.notes.append(m)

    def wait(self, id_, timeout=60):
        key = json.dumps(id_)
        deadline = time.monotonic() + timeout
        while key not in self.answers:
            m = self._line(deadline)
            if m is None:
                return None
            self._keep(m)
        return self.answers.pop(key)

    def request(self, method, params=None, timeout=60, id_=None):
        if id_ is None:
            self.next_id += 1
            id_ = self.next_id
        msg = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait(id_, timeout)

    def call(self, name, args=None, timeout=60, meta=None):
        params = {"name": name, "arguments": args or {}}
        if meta:
            params["_meta"] = meta
        return self.request("tools/call", params, timeout)

    def initialize(self, version="2025-11-25"):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "mcp-suite", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def close(self, timeout=60):
        self.p.stdin.close()
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = None
        return rc, self.p.stderr.read().decode(errors="replace")


def text(r):
    """The first text content of a tools/call answer."""
    try:
        return r["result"]["content"][0].get("text", "")
    except (KeyError, IndexError, TypeError):
        return ""


def structured(r):
    try:
        return r["result"].get("structuredContent") or {}
    except (KeyError, TypeError, AttributeError):
        return {}


def is_error(r):
    try:
        return bool(r["result"].get("isError"))
    except (KeyError, TypeError, AttributeError):
        return False
