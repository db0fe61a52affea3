#!/usr/bin/env python3
"""The mcp suite's audit checks (lines of TAP without numbers): after a stdio session, the
tool.call events in the audit store, the session sandbox's timeline and the OTLP export.

  mcp-audit.py WHO -- ARGV...   ARGV: paddock as WHO (with its state directory)
"""
import json
import subprocess
import sys

WHO = sys.argv[1]
PADDOCK = sys.argv[sys.argv.index("--") + 1:]


def ok(cond, desc, detail=None):
    print(("ok" if cond else "not ok") + " - %s: %s" % (WHO, desc))
    if not cond and detail is not None:
        for line in json.dumps(detail, default=str)[:1500].splitlines()[:10]:
            print("#   " + line)
    sys.stdout.flush()


def run(*args):
    p = subprocess.run(PADDOCK + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, check=False)
    return p.returncode, p.stdout, p.stderr


rc, out, err = run("audit", "tail", "-n", "100000", "--kind", "tool.call", "--json")
events = [json.loads(line) for line in out.splitlines() if line.strip()]
ok(rc == 0 and len(events) > 20, "every tools/call is a tool.call event (%d)" % len(events),
   err)
secret = [e for e in events if e["attrs"].get("arguments", {}).get("env", {}).get("API_TOKEN")]
ok(secret and secret[0]["attrs"]["arguments"]["env"]["API_TOKEN"] == "[REDACTED:API_TOKEN]"
   and "supersecretvalue123" not in out,
   "the arguments are redacted: a secret-looking env value never reaches the store", secret)
e = secret[0] if secret else {}
a = e.get("attrs", {})
ok(a.get("tool") == "run_command" and a.get("client", {}).get("name") == "mcp-suite"
   and a.get("session", "").startswith("stdio:") and a.get("decision") == "completed"
   and isinstance(a.get("duration_ms"), int) and a.get("result_bytes", 0) > 0
   and e.get("actor") == "paddock-mcp",
   "a tool.call says tool, client, session, decision, duration, result size; actor paddock-mcp", a)
errors = [x for x in events if x["attrs"].get("decision") == "error" and x["attrs"].get("error")]
ok(errors, "a call answered isError is recorded with its error", len(errors))
sb = e.get("sandbox", "")
rc, out, err = run("audit", "show", sb)
ok(rc == 0 and "tool.call" in out and "run_command" in out,
   "paddock audit show SANDBOX shows the tool calls in its timeline", out[-800:])
rc, out, err = run("audit", "export", "--format", "otlp", "--sandbox", sb)
names = []
for line in out.splitlines():
    for rs in json.loads(line).get("resourceSpans", []):
        for ss in rs["scopeSpans"]:
            names += [(s["name"], {x["key"] for x in s["attributes"]}) for s in ss["spans"]]
tools = [n for n in names if n[0] == "execute_tool run_command"]
ok(tools and {"gen_ai.operation.name", "gen_ai.tool.name"} <= tools[0][1],
   "the OTLP export makes each a GenAI execute_tool span", [n[0] for n in names][:10])
rc, out, err = run("audit", "verify")
ok(rc == 0, "the audit chain verifies", out + err)
