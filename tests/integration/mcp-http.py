#!/usr/bin/env python3
"""The mcp suite's Streamable HTTP checks, both eras on one endpoint (lines of TAP without
numbers: test-mcp.sh numbers them).

  mcp-http.py WHO KIND ENDPOINT   KIND: listen (paddock mcp --listen, ENDPOINT a URL) or
                                  serve (paddock serve's /mcp, ENDPOINT its unix socket)
"""
import base64
import json
import sys
import threading
import time

from mcp_client import Http, is_error, last, structured, text

WHO, KIND, ENDPOINT = sys.argv[1:4]
TAG = "%s: %s" % (WHO, "mcp --listen" if KIND == "listen" else "serve /mcp")


def ok(cond, desc, detail=None):
    print(("ok" if cond else "not ok") + " - %s: %s" % (TAG, desc))
    if not cond and detail is not None:
        for line in json.dumps(detail, default=str)[:1500].splitlines()[:15]:
            print("#   " + line)
    sys.stdout.flush()
    return cond


def client():
    return Http(url=ENDPOINT) if KIND == "listen" else Http(unix=ENDPOINT)


def code(msgs):
    return last(msgs).get("error", {}).get("code")


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "mcp-suite", "version": "1"}}}


def legacy_session():
    c = client()
    st, h, msgs = c.post(INIT)
    c.session = h.get("mcp-session-id")
    return c, st, msgs


_n = [10]


def call(c, name, args, meta=None, **kw):
    _n[0] += 1
    p = {"name": name, "arguments": args}
    if meta:
        p["_meta"] = meta
    return c.post({"jsonrpc": "2.0", "id": _n[0], "method": "tools/call", "params": p}, **kw)


def legacy():
    c, st, msgs = legacy_session()
    ok(st == 200 and c.session and len(c.session) == 32
       and last(msgs).get("result", {}).get("protocolVersion") == "2025-11-25",
       "legacy initialize -> 200 with an Mcp-Session-Id", (st, msgs))
    st, _, msgs = c.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    ok(st == 202 and not msgs, "a notification -> 202 without a body", (st, msgs))
    st, _, msgs = c.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                         {"MCP-Protocol-Version": "2025-11-25"})
    ok(st == 200 and len(last(msgs).get("result", {}).get("tools", [])) >= 19,
       "tools/list in the session", (st, msgs))
    bare = client()
    st, _, msgs = bare.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    ok(st == 400 and code(msgs) == -32600, "a request without Mcp-Session-Id -> 400", (st, msgs))
    bare.session = "0" * 32
    st, _, msgs = bare.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    ok(st == 404, "an unknown Mcp-Session-Id -> 404", (st, msgs))
    st, _, msgs = call(c, "run_command", {"command": "echo over-http > h.txt; echo ok"})
    ok(st == 200 and structured(last(msgs)).get("exit_code") == 0,
       "run_command writes a file", (st, msgs))
    st, _, msgs = call(c, "file_read", {"path": "h.txt"})
    ok(text(last(msgs)) == "over-http\n", "file_read in a second request reads it back", msgs)
    st, h, msgs = call(c, "run_command", {"command": "sleep 1.5; echo done"},
                       meta={"progressToken": "p1"})
    kinds = [m.get("method", "result") for m in msgs]
    ok(h.get("content-type", "").startswith("text/event-stream") and
       kinds[0] == "notifications/progress" and kinds[-1] == "result",
       "a call with a progress token streams progress, then its result", (h, msgs))
    cancel_in_session(c)
    return c


def cancel_in_session(c):
    """Legacy: notifications/cancelled in the session kills the call; its POST ends unanswered."""
    _n[0] += 1
    cid = _n[0]
    got = {}

    def slow():
        got["r"] = c.post({"jsonrpc": "2.0", "id": cid, "method": "tools/call", "params": {
            "name": "run_command", "arguments": {"command": "echo $$ > c.pid; exec sleep 300"}}})

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(1.5)
    st, _, _ = c.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": cid, "reason": "suite"}})
    t.join(30)
    st2, _, msgs = got.get("r", (None, None, None))
    ok(st == 202 and not t.is_alive() and not any("result" in m for m in msgs or []),
       "notifications/cancelled in the session: 202, and the call's POST ends unanswered",
       (st, st2, msgs))
    st, _, msgs = call(c, "run_command", {"command": "kill -0 $(cat c.pid) 2>/dev/null; echo $?"})
    ok(structured(last(msgs)).get("stdout", {}).get("text") == "1\n",
       "the cancelled command's process is gone", msgs)


def bad_input(c):
    for body, want_st, want_code, desc in [
            (b'{"jsonrpc":"2.0","id":1,', 400, -32700, "malformed JSON -> 400 -32700"),
            (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 400, -32600, "a batch -> 400 -32600"),
            (b'{"jsonrpc":"2.0","id":9,"method":"nope/nope"}', 200, -32601,
             "an unknown legacy method -> -32601")]:
        st, _, msgs = c.post(body)
        ok(st == want_st and code(msgs) == want_code, desc, (st, msgs))
    if KIND == "listen":
        # Its connection guard answers from the headers and closes: sending the body would
        # race that close (the client's write fails, and its answer may be lost to the reset).
        st = c.oversized(5 << 20)
    else:
        # paddock serve reads bodies up to the API's bound; /mcp's is checked on the message.
        st, _, _ = c.post(b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"'
                          + b"a" * (5 << 20) + b'"}}')
    ok(st == 413, "a body over the message bound -> 413", st)
    st, _, msgs = c.post({"jsonrpc": "2.0", "id": 10, "method": "ping"})
    ok(st == 200 and last(msgs).get("result") == {}, "the endpoint keeps serving (ping)", msgs)
    st, _, msgs = c.post(b"", method="GET")
    ok(st == 405, "GET -> 405 (no server stream)", st)
    st, _, msgs = c.post({"jsonrpc": "2.0", "id": 11, "method": "ping"},
                         {"Origin": "http://evil.example"})
    ok(st == 403, "a foreign Origin -> 403 (DNS rebinding)", (st, msgs))
    if KIND == "listen":
        st, _, msgs = c.post({"jsonrpc": "2.0", "id": 12, "method": "ping"},
                             {"Host": "evil.example"})
        ok(st == 403, "a foreign Host -> 403 (DNS rebinding)", (st, msgs))


def modern_protocol():
    c = client()
    st, h, msgs = c.modern("server/discover")
    r = last(msgs).get("result", {})
    ok(st == 200 and "2026-07-28" in r.get("supportedVersions", []) and
       r.get("resultType") == "complete" and r.get("ttlMs", -1) >= 0 and
       r.get("cacheScope") in ("public", "private") and
       r.get("_meta", {}).get("io.modelcontextprotocol/serverInfo", {}).get("name") == "paddock"
       and "mcp-session-id" not in h,
       "server/discover: versions, resultType, ttlMs, cacheScope, serverInfo, no session",
       (st, h, msgs))
    st, _, msgs = c.modern("tools/list")
    r = last(msgs).get("result", {})
    ok(st == 200 and r.get("resultType") == "complete" and "ttlMs" in r and "cacheScope" in r
       and len(r.get("tools", [])) >= 19, "tools/list with ttlMs and cacheScope", (st, msgs))
    st, _, msgs = c.modern("tools/list", version="1999-01-01")
    e = last(msgs).get("error", {})
    ok(st == 400 and e.get("code") == -32022 and "2026-07-28" in e.get("data", {}).get(
        "supported", []), "an unsupported version -> 400 -32022 listing the supported", (st, msgs))
    st, _, msgs = c.post({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}},
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
    ok(st == 400 and code(msgs) == -32602, "no clientCapabilities -> 400 -32602", (st, msgs))
    # The 2026-07-28 header without the _meta that revision requires: invalid params, with
    # the request's id, not a legacy request told to initialize (conformance server-stateless).
    h26 = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
    st, h, msgs = c.post({"jsonrpc": "2.0", "id": 101, "method": "server/discover",
                          "params": {}}, h26)
    ok(st == 400 and code(msgs) == -32602 and last(msgs).get("id") == 101 and
       "_meta" in last(msgs).get("error", {}).get("message", "") and "mcp-session-id" not in h,
       "the 2026-07-28 header, params without _meta -> 400 -32602 naming _meta", (st, msgs))
    st, _, msgs = c.post({"jsonrpc": "2.0", "id": 102, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}}, h26)
    ok(st == 400 and code(msgs) == -32602 and last(msgs).get("id") == 102,
       "the 2026-07-28 header, _meta without its protocolVersion -> 400 -32602", (st, msgs))
    st, _, msgs = c.post({"jsonrpc": "2.0", "id": 103, "method": "tools/list"}, h26)
    ok(st == 400 and code(msgs) == -32602 and last(msgs).get("id") == 103,
       "the 2026-07-28 header, no params at all -> 400 -32602", (st, msgs))
    st, _, msgs = c.modern("server/discover")
    ok(st == 200 and "result" in last(msgs), "after them the endpoint keeps serving", (st, msgs))
    st, _, msgs = c.modern("tools/list", headers={"Mcp-Method": "tools/call"})
    ok(st == 400 and code(msgs) == -32020, "Mcp-Method unlike the body -> 400 -32020", (st, msgs))
    st, _, msgs = c.modern("tools/list", headers={"MCP-Protocol-Version": None})
    ok(st == 400 and code(msgs) == -32020, "no MCP-Protocol-Version -> 400 -32020", (st, msgs))
    st, _, msgs = c.modern("tools/call", {"name": "sandbox_list", "arguments": {}},
                           headers={"Mcp-Name": "run_command"})
    ok(st == 400 and code(msgs) == -32020, "Mcp-Name unlike params.name -> 400 -32020", (st, msgs))
    enc = "=?base64?" + base64.b64encode(b"sandbox_list").decode() + "?="
    st, _, msgs = c.modern("tools/call", {"name": "sandbox_list", "arguments": {}},
                           headers={"Mcp-Name": enc})
    ok(st == 200 and "result" in last(msgs), "a base64-sentinel Mcp-Name is decoded", (st, msgs))
    st, _, msgs = c.modern("ping")
    ok(st == 404 and code(msgs) == -32601, "ping (removed in 2026-07-28) -> 404 -32601", (st, msgs))
    st, _, msgs = c.modern("tools/call", {"name": "run_command", "arguments": {"command": "true"}})
    r = last(msgs)
    ok(is_error(r) and text(r).startswith("sandbox_id:") and
       r["result"].get("resultType") == "complete",
       "a 2026-07-28 call without sandbox_id -> isError naming sandbox_id", msgs)


def mcall(c, name, args, caps=None, extra=None, **kw):
    p = {"name": name, "arguments": args}
    p.update(extra or {})
    return c.modern("tools/call", p, caps=caps, **kw)


def modern_tools():
    c = client()
    st, _, msgs = mcall(c, "sandbox_create", {"ttl_s": 600})
    h = structured(last(msgs)).get("sandbox_id", "")
    ok(h.startswith("sbx_"), "sandbox_create answers a handle", msgs)
    st, _, msgs = mcall(c, "run_command", {"sandbox_id": h, "command": "echo modern > m.txt"})
    ok(structured(last(msgs)).get("exit_code") == 0, "run_command with the handle", msgs)
    st, _, msgs = mcall(c, "file_read", {"sandbox_id": h, "path": "m.txt"})
    ok(text(last(msgs)) == "modern\n", "file_read with the handle, a request later", msgs)
    st, _, msgs = mcall(c, "run_code", {"sandbox_id": h, "language": "python",
                                        "code": "print(6*7)"})
    ok(structured(last(msgs)).get("stdout", {}).get("text") == "42\n", "run_code python", msgs)
    # Cancellation: the stream closed is the request cancelled; its process goes.
    st, _, msgs = mcall(c, "run_command", {"sandbox_id": h,
                                           "command": "echo $$ > s.pid; exec sleep 300"},
                        stop_after=1.5)
    ok(not any("result" in m for m in msgs), "a call whose stream is closed gets no answer", msgs)
    time.sleep(1)
    st, _, msgs = mcall(c, "run_command", {"sandbox_id": h,
                                           "command": "kill -0 $(cat s.pid) 2>/dev/null; echo $?"})
    ok(structured(last(msgs)).get("stdout", {}).get("text") == "1\n",
       "closing the stream killed the command (kill -0 fails in the sandbox)", msgs)
    # subscriptions/listen: acknowledged first, with the subscription's id.
    st, hd, msgs = c.modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}},
                            id_="sub-1", stop_after=1)
    a = msgs[0] if msgs else {}
    ok(hd.get("content-type", "").startswith("text/event-stream") and
       a.get("method") == "notifications/subscriptions/acknowledged" and
       a["params"]["_meta"].get("io.modelcontextprotocol/subscriptionId") == "sub-1",
       "subscriptions/listen: a stream acknowledged with its subscriptionId", msgs)
    mrtr(c, h)


def mrtr(c, h):
    caps = {"elicitation": {}}
    st, _, msgs = mcall(c, "sandbox_destroy", {"sandbox_id": h}, caps=caps)
    r = last(msgs).get("result", {})
    state = r.get("requestState", "")
    ok(r.get("resultType") == "input_required" and
       r.get("inputRequests", {}).get("confirm", {}).get("method") == "elicitation/create"
       and state, "sandbox_destroy asks to confirm (input_required, requestState)", msgs)
    yes = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    bad = state[:-1] + ("0" if state[-1] != "0" else "1")
    st, _, msgs = mcall(c, "sandbox_destroy", {"sandbox_id": h}, caps=caps,
                        extra={"inputResponses": yes, "requestState": bad}, id_=2)
    ok(st == 400 and code(msgs) == -32602, "a tampered requestState -> 400 -32602", (st, msgs))
    st, _, msgs = mcall(c, "sandbox_destroy", {"sandbox_id": h}, caps=caps,
                        extra={"inputResponses": yes, "requestState": state}, id_=3)
    ok(structured(last(msgs)).get("state") == "ended",
       "the retry with the signed state and a yes destroys it", msgs)


def handles_are_bound():
    a, _, _ = legacy_session()
    b, _, _ = legacy_session()
    st, _, msgs = call(a, "sandbox_create", {})
    h = structured(last(msgs)).get("sandbox_id", "")
    st, _, msgs = call(b, "run_command", {"sandbox_id": h, "command": "true"})
    ok(h and is_error(last(msgs)) and text(last(msgs)).startswith("sandbox_id:"),
       "another session's handle -> isError naming sandbox_id", msgs)
    st, _, msgs = call(a, "sandbox_destroy", {"sandbox_id": h})
    for s in (a, b):
        st, _, _ = s.post(b"", method="DELETE")
    ok(st == 204, "DELETE ends a session -> 204", st)
    st, _, msgs = b.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    ok(st == 404, "the ended session -> 404", (st, msgs))


def main():
    c = legacy()
    bad_input(c)
    st, _, _ = c.post(b"", method="DELETE")
    ok(st == 204, "DELETE of the first session", st)
    modern_protocol()
    modern_tools()
    handles_are_bound()


main()
