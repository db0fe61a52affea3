#!/usr/bin/env python3
"""TAP check of docs/api.yaml: it loads, is OpenAPI 3.1, has every route of the issue 6
contract (docs/internals/daemon.md) with its method, and every $ref resolves.
   check-api.py [API_YAML]"""
import os
import re
import sys

import yaml

# (method, path under /v1) of every route the contract names.
CONTRACT = [
    ("get", "/health"), ("get", "/openapi.yaml"),
    ("post", "/sandboxes"), ("get", "/sandboxes"),
    ("get", "/sandboxes/{id}"), ("delete", "/sandboxes/{id}"),
    ("post", "/sandboxes/{id}/exec"),
    ("post", "/sandboxes/{id}/exec/{exec_id}/stdin"),
    ("post", "/sandboxes/{id}/exec/{exec_id}/signal"),
    ("get", "/sandboxes/{id}/files"), ("put", "/sandboxes/{id}/files"),
    ("delete", "/sandboxes/{id}/files"),
    ("get", "/sandboxes/{id}/stat"), ("get", "/sandboxes/{id}/ls"),
    ("get", "/sandboxes/{id}/archive"), ("put", "/sandboxes/{id}/archive"),
    ("post", "/sandboxes/{id}/pause"), ("post", "/sandboxes/{id}/resume"),
    ("post", "/sandboxes/{id}/snapshot"), ("post", "/sandboxes/{id}/rollback"),
    ("get", "/sandboxes/{id}/diff"), ("post", "/sandboxes/{id}/commit"),
    ("post", "/sandboxes/{id}/tokens"), ("post", "/sandboxes/{id}/egress/allow"),
    ("post", "/kill"), ("get", "/events"),
    ("get", "/pools"), ("put", "/pools/{profile}"),
]
SCHEMAS = ["Sandbox", "ExecRequest", "ExecResult", "Error", "FileStat", "DirList", "Pool",
           "KillRequest", "KillResult", "TokenRequest", "Token", "Event"]
METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}

n = 0
failed = 0


def ok(cond, desc, diag=None):
    global n, failed
    n += 1
    print(("ok" if cond else "not ok") + f" {n} - {desc}")
    if not cond:
        failed += 1
        for line in (diag or []):
            print(f"#   {line}")


def refs(node, where="#"):
    """Every $ref in the document, with where it was found."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield where, v
            else:
                yield from refs(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from refs(v, f"{where}/{i}")


def resolve(doc, ref):
    if not ref.startswith("#/"):
        return None
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def main():
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(top, "docs", "api.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        loaded = isinstance(doc, dict)
        ok(loaded, f"{os.path.basename(path)} loads as a YAML mapping")
    except (OSError, yaml.YAMLError) as e:
        ok(False, f"{path} loads", [str(e)])
        doc, loaded = {}, False
    if not loaded:
        print(f"1..{n}")
        return 1
    ok(str(doc.get("openapi", "")).startswith("3.1."), "openapi is 3.1.x", [doc.get("openapi")])
    paths = doc.get("paths") or {}
    missing = [f"{m.upper()} {p}" for m, p in CONTRACT if m not in (paths.get(p) or {})]
    ok(not missing, f"all {len(CONTRACT)} routes of the contract are described", missing)
    schemas = (doc.get("components") or {}).get("schemas") or {}
    absent = [s for s in SCHEMAS if s not in schemas]
    ok(not absent, "the contract's schemas are there", absent)
    bad = [f"{w}: {r}" for w, r in refs(doc) if resolve(doc, r) is None]
    count = sum(1 for _ in refs(doc))
    ok(count > 50 and not bad, f"every $ref resolves ({count} refs)", bad)
    no_resp, ids, dup, undeclared = [], set(), [], []
    for p, item in paths.items():
        params = set(re.findall(r"{([^}]+)}", p))
        declared = {x.get("name") for x in item.get("parameters", []) if isinstance(x, dict)}
        declared |= {resolve(doc, x["$ref"]).get("name") for x in item.get("parameters", [])
                     if "$ref" in x and resolve(doc, x["$ref"])}
        for m, op in item.items():
            if m not in METHODS:
                continue
            if not op.get("responses"):
                no_resp.append(f"{m.upper()} {p}")
            oid = op.get("operationId")
            if oid in ids:
                dup.append(oid)
            ids.add(oid)
            if params - declared:
                undeclared.append(f"{m.upper()} {p}: {sorted(params - declared)}")
    ok(not no_resp, "every operation has responses", no_resp)
    ok(not dup and None not in ids, "operationIds are present and unique", dup)
    ok(not undeclared, "every path template parameter is declared", undeclared)
    err = schemas.get("Error", {}).get("properties", {}).get("error", {})
    codes = set(err.get("properties", {}).get("code", {}).get("enum", []))
    want = {"bad_request", "unauthorized", "forbidden", "not_found", "conflict", "too_large",
            "limit", "unavailable", "internal"}
    ok(codes == want, "Error.code lists the contract's codes", [sorted(codes ^ want)])
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
