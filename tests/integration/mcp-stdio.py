#!/usr/bin/env python3
"""The mcp suite's stdio checks: `paddock mcp` driven with raw JSON-RPC, as a client would
(lines of TAP without numbers: test-mcp.sh numbers them).

  mcp-stdio.py WHO WORKSPACE SECRET -- ARGV...   ARGV starts `paddock mcp` as WHO; SECRET is
                                                a host file outside every sandbox
"""
import base64
import json
import os
import sys
import time

from mcp_client import Stdio, is_error, structured, text

WHO = sys.argv[1]
WS = sys.argv[2]
SECRET = sys.argv[3]
ARGV = sys.argv[sys.argv.index("--") + 1:]


def ok(cond, desc, detail=None):
    print(("ok" if cond else "not ok") + " - %s: %s" % (WHO, desc))
    if not cond and detail is not None:
        for line in str(detail).splitlines()[:15]:
            print("#   " + line)
    sys.stdout.flush()
    return cond


def err_code(r):
    return (r or {}).get("error", {}).get("code")


def handshake(c):
    ping = c.request("ping")
    ok(ping is not None and ping.get("result") == {}, "ping before initialize -> {}", ping)
    early = c.request("tools/list")
    ok(err_code(early) == -32600, "tools/list before initialize -> -32600", early)
    r = c.request("initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                 "clientInfo": {"name": "x", "version": "1"}})
    ok(r and r["result"]["protocolVersion"] == "2025-11-25",
       "initialize with an unknown revision -> the latest legacy one, 2025-11-25", r)
    r = c.initialize("2025-06-18")
    res = (r or {}).get("result", {})
    ok(res.get("protocolVersion") == "2025-06-18" and "tools" in res.get("capabilities", {})
       and res.get("serverInfo", {}).get("name") == "paddock",
       "initialize 2025-06-18 -> that revision, the tools capability, serverInfo paddock", r)


def tools_list(c):
    r = c.request("tools/list")
    tools = {t["name"]: t for t in (r or {}).get("result", {}).get("tools", [])}
    want = {"run_command", "run_code", "file_read", "file_write", "file_list", "file_stat",
            "file_delete", "file_move", "file_mkdir", "sandbox_create", "sandbox_list",
            "sandbox_destroy", "workspace_diff", "workspace_snapshot", "workspace_rollback",
            "workspace_propose_commit", "egress_rules", "egress_denials",
            "egress_request_allow"}
    ok(want <= set(tools), "tools/list names every tool", sorted(set(want) - set(tools)))
    strict = [n for n, t in tools.items()
              if t["inputSchema"].get("additionalProperties") is not False
              or t["inputSchema"].get("type") != "object"]
    ok(not strict, "every inputSchema is an object with additionalProperties false", strict)
    hints = [n for n, t in tools.items()
             if set(t.get("annotations", {})) < {"readOnlyHint", "destructiveHint",
                                                 "openWorldHint"}]
    ok(not hints, "every tool says readOnlyHint, destructiveHint and openWorldHint", hints)
    ro = tools["file_read"]["annotations"]
    rc = tools["run_command"]["annotations"]
    ok(ro["readOnlyHint"] and not ro["destructiveHint"] and not rc["readOnlyHint"]
       and rc["destructiveHint"] and not rc["openWorldHint"],
       "file_read is read-only, run_command destructive, neither open-world", (ro, rc))
    ok("outputSchema" in tools["run_command"], "run_command has an outputSchema")


def run_and_read(c):
    r = c.call("run_command", {"command": "echo hello-mcp > made.txt && echo done"})
    s = structured(r)
    ok(s.get("exit_code") == 0 and s.get("stdout", {}).get("text") == "done\n",
       "run_command writes a file: exit 0, its output in structuredContent", r)
    r = c.call("file_read", {"path": "made.txt"})
    ok(text(r) == "hello-mcp\n", "file_read in a second call reads the file back", r)
    r = c.call("run_code", {"language": "python", "code": "print(open('made.txt').read().upper())"})
    ok(structured(r).get("stdout", {}).get("text", "").startswith("HELLO-MCP"),
       "run_code python runs in the same workspace", r)
    r = c.call("run_code", {"language": "bash", "code": "echo $((6*7))"})
    ok(structured(r).get("stdout", {}).get("text") == "42\n", "run_code bash", r)
    r = c.call("run_command", {"argv": ["sh", "-c", "echo err >&2; exit 3"]})
    s = structured(r)
    ok(s.get("exit_code") == 3 and s.get("stderr", {}).get("text") == "err\n"
       and not is_error(r), "a command that fails is a result (exit 3, stderr), not isError", r)


def audited(c):
    r = c.call("run_command", {"command": "true", "env": {"API_TOKEN": "supersecretvalue123"}})
    ok(structured(r).get("exit_code") == 0, "a call with a secret in its env runs", r)


def output_cap(c):
    r = c.call("run_command", {"command": "seq 1 40000", "max_output_bytes": 1024})
    out = structured(r).get("stdout", {})
    ok(out.get("bytes") == 228894 and out.get("dropped_bytes", 0) > 200000
       and out.get("text", "").startswith("1\n2\n") and out.get("text", "").endswith("40000\n")
       and "dropped" in text(r) and out.get("full_output_file"),
       "long output: head and tail kept, the bytes dropped said, the whole kept as a file",
       json.dumps(out)[:400])
    if out.get("full_output_file"):
        r = c.call("file_read", {"path": out["full_output_file"]})
        ok(len(text(r)) == 228894 and text(r).endswith("39999\n40000\n"),
           "file_read of the kept file gives all of it", len(text(r)))


def bad_arguments(c):
    cases = [
        ({"command": "true", "bogus": 1}, "bogus"),
        ({"command": 7}, "command"),
        ({"command": "true", "timeout_s": 0}, "timeout_s"),
        ({}, "command"),
        ({"command": "true", "argv": ["true"]}, "argv"),
    ]
    for args, field in cases:
        r = c.call("run_command", args)
        ok(is_error(r) and text(r).startswith(field + ":"),
           "run_command %s -> isError naming '%s'" % (json.dumps(args), field), r)
    r = c.call("file_read", {})
    ok(is_error(r) and text(r).startswith("path:"), "file_read without path -> isError naming path", r)
    r = c.call("no_such_tool", {})
    ok(err_code(r) == -32602, "an unknown tool -> -32602", r)


def bad_messages(c):
    def still_serving(desc):
        p = c.request("ping")
        ok(p is not None and p.get("result") == {}, desc + ", and the server keeps serving", p)

    c.send_raw(b'{"jsonrpc":"2.0","id":1,"meth\n')
    r = c.wait(None, 10)
    ok(err_code(r) == -32700 and r.get("id") is None, "malformed JSON -> -32700 with id null", r)
    still_serving("after malformed JSON")
    c.send_raw(b'[{"jsonrpc":"2.0","id":5,"method":"ping"}]\n')
    r = c.wait(None, 10)
    ok(err_code(r) == -32600, "a batch -> -32600 (no era of this server takes batches)", r)
    r = c.request("resources/list")
    ok(err_code(r) == -32601, "an unknown method -> -32601", r)
    c.send({"jsonrpc": "2.0", "id": 77, "method": "ping", "extra": 1})
    r = c.wait(77, 10)
    ok(err_code(r) == -32600 and r.get("id") == 77, "an unknown member -> -32600 with its id", r)
    c.send_raw(b'{"jsonrpc":"2.0","id":78,"method":"ping","params":{"x":"' + b"a" * 20000 + b'"}}\n')
    r = c.wait(None, 10)
    ok(err_code(r) == -32700 and "larger" in r["error"]["message"],
       "a message over --max-message -> -32700 'larger than'", r)
    still_serving("after an oversized message")


def progress_and_cancel(c):
    r = c.call("run_command", {"command": "sleep 2.5; echo slept"}, meta={"progressToken": "tok-1"})
    notes = [n for n in c.notes if n.get("method") == "notifications/progress"
             and n["params"].get("progressToken") == "tok-1"]
    ok(structured(r).get("stdout", {}).get("text") == "slept" + "\n" and len(notes) >= 1,
       "a long command with a progress token sends notifications/progress", (r, c.notes))
    c.next_id += 1
    cid = c.next_id
    c.send({"jsonrpc": "2.0", "id": cid, "method": "tools/call",
            "params": {"name": "run_command",
                       "arguments": {"command": "echo $$ > sleep.pid; exec sleep 300"}}})
    time.sleep(1.5)
    c.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": cid, "reason": "the user gave up"}})
    c.pump(2)
    ok(json.dumps(cid) not in c.answers, "after notifications/cancelled nothing is sent for it")
    r = c.call("run_command", {"command": "kill -0 $(cat sleep.pid) 2>/dev/null; echo $?"})
    ok(structured(r).get("stdout", {}).get("text") == "1\n",
       "the cancelled command's process is gone (kill -0 fails in the sandbox)", r)


def files(c):
    r = c.call("file_write", {"path": "d/e/f.txt", "content": "abc"})
    ok(structured(r).get("bytes") == 3, "file_write makes the file and its parents", r)
    r = c.call("file_stat", {"path": "d/e/f.txt"})
    ok(structured(r).get("type") == "file" and structured(r).get("size") == 3, "file_stat", r)
    r = c.call("file_mkdir", {"path": "d/g"})
    ok(not is_error(r), "file_mkdir", r)
    r = c.call("file_move", {"from": "d/e/f.txt", "to": "d/g/h.txt"})
    ok(not is_error(r), "file_move", r)
    r = c.call("file_list", {"path": "d/g"})
    names = [e.get("name") for e in structured(r).get("entries", [])]
    ok(names == ["h.txt"], "file_list shows the moved file", r)
    blob = bytes(range(256))
    r = c.call("file_write", {"path": "bin.dat", "content": base64.b64encode(blob).decode(),
                              "encoding": "base64"})
    ok(structured(r).get("bytes") == 256, "file_write of base64 content", r)
    r = c.call("file_read", {"path": "bin.dat"})
    res = (r or {}).get("result", {}).get("content", [{}])[0]
    ok(res.get("type") == "resource"
       and base64.b64decode(res.get("resource", {}).get("blob", "")) == blob,
       "file_read of a binary file -> a base64 resource", r)
    r = c.call("file_read", {"path": "bin.dat", "encoding": "text"})
    ok(is_error(r) and text(r).startswith("encoding:"), "binary read as text -> isError naming encoding", r)
    r = c.call("file_delete", {"path": "d", "recursive": True})
    ok(not is_error(r), "file_delete recursive", r)
    r = c.call("file_read", {"path": "/no/such/file"})
    ok(is_error(r) and text(r).startswith("path:"), "a missing file -> isError naming path", r)


def confined(c):
    secret = open(SECRET).read()
    r = c.call("file_read", {"path": SECRET})
    ok(is_error(r) and text(r).startswith("path:") and secret not in json.dumps(r),
       "file_read of a host path outside the sandbox -> isError naming path, nothing read", r)
    r = c.call("run_command", {"argv": ["ln", "-sf", SECRET, "link"]})
    r = c.call("file_read", {"path": "link"})
    ok(secret not in json.dumps(r), "a symlink to the host file reads nothing of it", r)
    r = c.call("file_read", {"path": "../../../../../../" + SECRET})
    ok(is_error(r) and secret not in json.dumps(r), "a path climbing out with .. reads nothing", r)
    r = c.call("file_write", {"path": SECRET + ".new", "content": "x"})
    ok(not os.path.exists(SECRET + ".new"), "file_write of a host path never reaches the host", r)
    c.call("file_delete", {"path": "link"})


def modern_stdio(c):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    r = c.request("server/discover", {"_meta": meta})
    res = (r or {}).get("result", {})
    ok("2026-07-28" in res.get("supportedVersions", []) and res.get("resultType") == "complete",
       "server/discover on stdio (the dual-era probe) answers the versions", r)
    r = c.request("tools/list", {"_meta": dict(meta, **{
        "io.modelcontextprotocol/protocolVersion": "2030-01-01"})})
    ok(err_code(r) == -32022, "an unsupported revision on stdio -> -32022", r)


def review(c):
    r = c.call("workspace_diff", {"patch": True})
    s = structured(r)
    paths = [x.get("path") for x in s.get("changes", [])]
    ok("made.txt" in paths and "hello-mcp" in s.get("patch", ""),
       "workspace_diff lists the change set and its patch", r)
    r = c.call("workspace_snapshot", {"name": "before"})
    ok(not is_error(r), "workspace_snapshot", r)
    c.call("run_command", {"command": "echo later > later.txt"})
    r = c.call("workspace_rollback", {"snapshot": "before"})
    ok(not is_error(r), "workspace_rollback", r)
    r = c.call("file_stat", {"path": "later.txt"})
    ok(is_error(r), "after the rollback the later file is gone", r)
    # Nobody decides here (the server waits --approval-timeout 1s): nothing is applied.
    r = c.call("workspace_propose_commit", {})
    ok(is_error(r) and "paddock approve " in text(r)
       and structured(r).get("status") == "timed_out",
       "workspace_propose_commit waits for a human: undecided, it is refused as timed out, "
       "naming paddock approve ID", r)
    r = c.call("egress_rules", {})
    ok(not is_error(r) and "mode" in structured(r), "egress_rules says the network mode", r)
    r = c.call("egress_denials", {})
    ok(not is_error(r) and "denied" in structured(r), "egress_denials answers a list", r)
    r = c.call("egress_request_allow", {"host": "example.com", "reason": "docs"})
    ok(is_error(r) and structured(r).get("reason") == "no_allowlist"
       and "network.mode is none" in text(r),
       "egress_request_allow on a sandbox of network.mode none is refused, saying why", r)


def handles(c, other):
    r = c.call("sandbox_create", {"labels": {"purpose": "suite"}, "ttl_s": 600})
    h = structured(r).get("sandbox_id", "")
    ok(h.startswith("sbx_") and len(h) == 36 and structured(r).get("expires_at"),
       "sandbox_create answers a random handle that expires", r)
    r = c.call("run_command", {"sandbox_id": h, "command": "test -e made.txt; echo $?"})
    ok(structured(r).get("stdout", {}).get("text") == "1\n",
       "a call with the handle runs in that sandbox, not the session's", r)
    r = c.call("sandbox_list", {})
    ids = [x.get("sandbox_id") for x in structured(r).get("sandboxes", [])]
    ok(h in ids and None in ids, "sandbox_list shows the session's sandbox and the handle's", r)
    r = other.call("run_command", {"sandbox_id": h, "command": "true"})
    ok(is_error(r) and text(r).startswith("sandbox_id:"),
       "another client's handle -> isError naming sandbox_id", r)
    r = c.call("sandbox_destroy", {"sandbox_id": h})
    ok(structured(r).get("state") == "ended", "sandbox_destroy", r)
    r = c.call("run_command", {"sandbox_id": h, "command": "true"})
    ok(is_error(r) and text(r).startswith("sandbox_id:"), "a destroyed handle -> isError", r)


def main():
    c = Stdio(ARGV)
    handshake(c)
    tools_list(c)
    run_and_read(c)
    audited(c)
    output_cap(c)
    bad_arguments(c)
    bad_messages(c)
    progress_and_cancel(c)
    files(c)
    confined(c)
    modern_stdio(c)
    review(c)
    other = Stdio(ARGV)
    other.initialize()
    handles(c, other)
    rc, errs = other.close()
    ok(rc == 0, "the second client's server exits 0 when its stdin closes", errs)
    rc, errs = c.close()
    ok(rc == 0, "paddock mcp exits 0 when the client closes stdin", errs)


main()
