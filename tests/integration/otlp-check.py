#!/usr/bin/env python3
"""Facts about what otlp-receiver.py recorded, one "name=value" a line, for test-otlp.sh.

  otlp-check.py REQUESTS.jsonl [EVENTS.jsonl]
EVENTS is the --events file of the same run: the sandbox id is taken from it.
"""
import json
import re
import sys

reqs = [json.loads(line) for line in open(sys.argv[1])]
events = [json.loads(line) for line in open(sys.argv[2])] if len(sys.argv) > 2 else []
sandbox = events[0]["sandbox"] if events else None


def attrs(lst):
    out = {}
    for a in lst:
        v = a["value"]
        (k, x), = v.items() if len(v) == 1 else [("?", None)]
        out[a["key"]] = (k, x)
    return out


def fact(name, value):
    print(f"{name}={value}")


fact("paths", ",".join(r["path"] for r in reqs))
fact("statuses", ",".join(str(r["status"]) for r in reqs))
fact("content_type", ",".join(sorted({r["headers"].get("content-type", "") for r in reqs})))
fact("api_key", ",".join(sorted({r["headers"].get("x-api-key", "-") for r in reqs})))
logs = [r for r in reqs if r["path"] == "/v1/logs" and r["status"] == 200]
traces = [r for r in reqs if r["path"] == "/v1/traces" and r["status"] == 200]
first = [r for r in reqs if r["path"] == "/v1/logs"]
if len(first) >= 2:
    fact("logs_retry_after_s", "%.1f" % (first[1]["t"] - first[0]["t"]))

records, rattrs = [], []
for r in logs:
    for rl in r["body"]["resourceLogs"]:
        rattrs.append(attrs(rl["resource"]["attributes"]))
        for sl in rl["scopeLogs"]:
            records += sl["logRecords"]
fact("kinds", ",".join(x["eventName"] for x in records))
fact("severities", ",".join(x["severityText"] for x in records))
digits = re.compile(r"^[0-9]+$")
fact("int64_as_strings", all(digits.match(x["timeUnixNano"]) for x in records)
     and all(v[0] != "intValue" or isinstance(v[1], str)
             for x in records for v in attrs(x["attributes"]).values()))
if rattrs:
    ra = rattrs[0]
    fact("service", ra.get("service.name", ("", ""))[1])
    fact("service_version_set", bool(ra.get("service.version", ("", ""))[1]))
    fact("resource_sandbox_is_run", ra.get("paddock.sandbox.id", ("", ""))[1] == sandbox)
exec_rec = [x for x in records if x["eventName"] == "process.exec"]
if exec_rec:
    a = attrs(exec_rec[0]["attributes"])
    fact("exec_args", " ".join(v["stringValue"] for v in a["process.command_args"][1]["values"]))
    fact("exec_pid_type", a["process.pid"][0])

spans = []
for r in traces:
    for rs in r["body"]["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            spans += ss["spans"]
root = [s for s in spans if s["name"] == "sandbox"]
procs = [s for s in spans if s["name"].startswith("exec ")]
fact("span_names", ",".join(sorted(s["name"] for s in spans)))
if root:
    r = root[0]
    fact("root_has_parent", "parentSpanId" in r)
    fact("trace_id_is_sandbox", sandbox is not None and r["traceId"] == sandbox.replace("-", ""))
    fact("root_span_id_hex", bool(re.match(r"^[0-9a-f]{16}$", r["spanId"])))
if root and procs:
    p = procs[0]
    fact("process_parent_is_root", p.get("parentSpanId") == root[0]["spanId"])
    fact("process_same_trace", p["traceId"] == root[0]["traceId"])
    fact("process_exit_code", attrs(p["attributes"]).get("process.exit.code", ("", "none"))[1])
    fact("process_status", p["status"]["code"])
    fact("process_logs_in_process_span", [x["spanId"] for x in records
          if x["eventName"] in ("process.exec", "process.exit")] == [p["spanId"]] * 2)
    fact("process_within_sandbox", int(root[0]["startTimeUnixNano"]) <= int(p["startTimeUnixNano"])
         <= int(p["endTimeUnixNano"]) <= int(root[0]["endTimeUnixNano"]))
