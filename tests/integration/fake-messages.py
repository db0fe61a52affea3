#!/usr/bin/env python3
"""A small stand-in for the Anthropic Messages API on loopback, for Claude Code as a real MCP
client (tests/integration/test-claude.sh). It plays a model that follows a plan of tool calls:

  fake-messages.py PORTFILE LOG PLAN_JSON

PLAN_JSON is a list of {"tool": NAME, "input": {...}}: step N is called once the
conversation holds N tool results; "{{sandbox_id}}" in a step's input strings becomes the
first sandbox handle (sbx_ and 32 hex digits) an earlier tool result named.

- listens on 127.0.0.1, a port the kernel picks, written to PORTFILE once it listens;
- POST /v1/messages: when the request offers the next step's tool, answers with a tool_use
  block calling it; after the last step, with a text that quotes the last tool result
  ("tool said: ..."); a request that offers no tool of the plan (Claude Code's side calls)
  gets "ok". Streamed (server-sent events) when the request asks for a stream, else one
  JSON body;
- POST /v1/messages/count_tokens: a fixed count;
- anything else: 404.
Every request is appended to LOG as one JSON line (method, path, and for messages the tool
names offered and the tool_result texts received), so the test can read what happened.
"""
import http.server
import json
import os
import re
import sys

PORTFILE, LOG, PLAN = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
HANDLE = re.compile(r"sbx_[0-9a-f]{32}")


def tool_results(body):
    msgs = body.get("messages") or []
    if not msgs or msgs[-1].get("role") != "user" or not isinstance(msgs[-1].get("content"), list):
        return []
    out = []
    for block in msgs[-1]["content"]:
        if block.get("type") != "tool_result":
            continue
        c = block.get("content")
        if isinstance(c, list):
            c = "".join(x.get("text", "") for x in c if isinstance(x, dict))
        out.append({"text": c if isinstance(c, str) else json.dumps(c), "is_error": bool(block.get("is_error"))})
    return out


def all_results(body):
    """The texts of every tool result in the conversation, in order."""
    out = []
    for msg in body.get("messages") or []:
        if msg.get("role") != "user" or not isinstance(msg.get("content"), list):
            continue
        for block in msg["content"]:
            if block.get("type") == "tool_result":
                c = block.get("content")
                if isinstance(c, list):
                    c = "".join(x.get("text", "") for x in c if isinstance(x, dict))
                out.append(c if isinstance(c, str) else json.dumps(c))
    return out


def fill(value, handle):
    if isinstance(value, str):
        return value.replace("{{sandbox_id}}", handle or "")
    if isinstance(value, dict):
        return {k: fill(v, handle) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, handle) for v in value]
    return value


def answer(body):
    """The content blocks and stop reason of the model's turn."""
    tools = [t.get("name") for t in body.get("tools") or []]
    results = tool_results(body)
    done = all_results(body)
    if not any(step["tool"] in tools for step in PLAN):
        return [{"type": "text", "text": "ok"}], "end_turn", tools, results
    if len(done) < len(PLAN):
        step = PLAN[len(done)]
        handles = [m.group(0) for m in map(HANDLE.search, done) if m]
        use = {"type": "tool_use", "id": f"toolu_paddock_test_{len(done) + 1}", "name": step["tool"],
               "input": fill(step["input"], handles[0] if handles else None)}
        return [use], "tool_use", tools, results
    text = "tool said: " + (done[-1] if done else "")
    return [{"type": "text", "text": text}], "end_turn", tools, results


def sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def stream(blocks, stop, model):
    out = [sse("message_start", {"type": "message_start", "message": {
        "id": "msg_paddock_test", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            delta = {"type": "text_delta", "text": b["text"]}
        else:
            start = dict(b, input={})
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": start}))
            delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, entry):
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def reply(self, code, ctype, data):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        path = self.path.split("?")[0]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if path == "/v1/messages/count_tokens":
            self.record({"method": "POST", "path": path})
            return self.reply(200, "application/json", b'{"input_tokens": 10}')
        if path != "/v1/messages":
            self.record({"method": "POST", "path": path})
            return self.reply(404, "application/json", b'{"type":"error","error":{"type":"not_found_error","message":"no such route"}}')
        blocks, stop, tools, results = answer(body)
        self.record({"method": "POST", "path": path, "tools": tools, "tool_results": results,
                     "answer": stop, "stream": bool(body.get("stream"))})
        model = body.get("model", "claude-test")
        if body.get("stream"):
            return self.reply(200, "text/event-stream", stream(blocks, stop, model))
        msg = {"id": "msg_paddock_test", "type": "message", "role": "assistant", "model": model,
               "content": blocks, "stop_reason": stop, "stop_sequence": None,
               "usage": {"input_tokens": 10, "output_tokens": 5}}
        self.reply(200, "application/json", json.dumps(msg).encode())

    def do_GET(self):
        self.record({"method": "GET", "path": self.path})
        self.reply(404, "application/json", b"{}")

    do_HEAD = do_GET


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
