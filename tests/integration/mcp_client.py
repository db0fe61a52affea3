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

    def initialize(self, version="2025-11-25", caps=None):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": caps or {},
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


class Http:
    """Streamable HTTP: one POST per message, over TCP or a unix socket; answers are JSON
    or an event stream, read whole (or `stop_after` seconds, then the connection dropped)."""

    def __init__(self, url=None, unix=None):
        self.url = url
        self.unix = unix
        if url:
            rest = url.split("://", 1)[1]
            self.hostport, self.path = rest.split("/", 1)
            self.path = "/" + self.path
        else:
            self.hostport, self.path = "paddock", "/mcp"
        self.session = None

    def _conn(self, timeout):
        import http.client
        import socket
        if self.unix:
            c = http.client.HTTPConnection("paddock", timeout=timeout)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(self.unix)
            c.sock = s
            return c
        host, port = self.hostport.rsplit(":", 1)
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def oversized(self, length, timeout=60):
        """The status of a POST that announces a body of `length` bytes and sends none of it:
        a server that enforces its bound answers from the headers (sending the body too would
        race its close: the client's write fails and its answer may be lost to the reset)."""
        c = self._conn(timeout)
        c.putrequest("POST", self.path)
        for k, v in (("Content-Type", "application/json"),
                     ("Accept", "application/json, text/event-stream"),
                     ("Content-Length", str(length)), ("Mcp-Session-Id", self.session)):
            if v is not None:
                c.putheader(k, v)
        c.endheaders()
        try:
            return c.getresponse().status
        finally:
            c.close()

    def post(self, body, headers=None, method="POST", timeout=60, stop_after=None):
        """(status, headers dict lowercased, [messages]) of one request."""
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            h["Mcp-Session-Id"] = self.session
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        c = self._conn(timeout)
        c.request(method, self.path, body=body, headers=h)
        r = c.getresponse()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        msgs = []
        if hdrs.get("content-type", "").startswith("text/event-stream"):
            deadline = time.monotonic() + stop_after if stop_after else None
            while True:
                if deadline:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    c.sock.settimeout(left)
                try:
                    line = r.fp.readline()
                except OSError:  # the time to listen is over: the stream is dropped
                    break
                if not line:
                    break
                if line.startswith(b"data: "):
                    msgs.append(json.loads(line[6:]))
                    if stop_after is None and "id" in msgs[-1] and (
                            "result" in msgs[-1] or "error" in msgs[-1]):
                        break
        else:
            data = r.read()
            if data.strip():
                msgs.append(json.loads(data))
        if c.sock is not None:
            c.sock.close()
        c.close()
        return r.status, hdrs, msgs

    def modern(self, method, params=None, id_=1, caps=None, headers=None, version="2026-07-28",
               **kw):
        p = dict(params or {})
        meta = {"io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": caps or {},
                "io.modelcontextprotocol/clientInfo": {"name": "mcp-suite", "version": "1"}}
        meta.update(p.pop("_meta", {}))
        p["_meta"] = meta
        h = {"MCP-Protocol-Version": version, "Mcp-Method": method}
        if method == "tools/call":
            h["Mcp-Name"] = p.get("name")
        h.update(headers or {})
        return self.post({"jsonrpc": "2.0", "id": id_, "method": method, "params": p}, h, **kw)


def last(msgs):
    return msgs[-1] if msgs else {}
