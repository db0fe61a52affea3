#!/usr/bin/env python3
"""Sum meson testlog JSON files and TAP files into one "N passed, N failed" line,
with a "FAILED suite: line" above it for each failure (CI shows only the end).

A TAP test counts each of its "ok"/"not ok" lines (a crashed TAP test that
printed none counts as one failure); any other test counts once.
"""
import json
import re
import sys

TAP = re.compile(r"^(not ok|ok)\b(.*)$")


def count_tap(text, where=None, failures=None):
    passed = failed = skipped = 0
    for line in text.splitlines():
        m = TAP.match(line.strip())
        if not m:
            continue
        rest = m.group(2)
        if "# SKIP" in rest.upper():
            skipped += 1
        elif m.group(1) == "ok" or "# TODO" in rest.upper():
            passed += 1
        else:
            failed += 1
            if failures is not None:
                failures.append(f"{where}: {line.strip()}")
    return passed, failed, skipped


def main(paths):
    passed = failed = skipped = 0
    failures = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                data = f.read()
        except OSError as e:
            print(f"summary: {path}: {e}", file=sys.stderr)
            failed += 1
            continue
        if path.endswith(".tap"):
            p, fl, s = count_tap(data, path.rsplit("/", 1)[-1], failures)
            passed, failed, skipped = passed + p, failed + fl, skipped + s
            continue
        for line in data.splitlines():
            if not line.strip():
                continue
            t = json.loads(line)
            res = t.get("result", "")
            name = t.get("name", "?")
            p, fl, s = count_tap(t.get("stdout", "") or t.get("stdo", ""), name, failures)
            if p + fl + s == 0:
                p, fl, s = (res in ("OK", "EXPECTEDFAIL"), res not in ("OK", "EXPECTEDFAIL", "SKIP"), res == "SKIP")
                if fl:
                    failures.append(f"{name}: {res} after {t.get('duration', 0):.0f} s")
            elif res not in ("OK", "SKIP") and fl == 0:
                fl = 1  # the runner failed (crash, timeout, bad plan) after passing lines
                failures.append(f"{name}: {res} after {p + s} lines, {t.get('duration', 0):.0f} s")
            passed, failed, skipped = passed + p, failed + fl, skipped + s
    # CI shows only the end of the output: what failed is named just above the totals.
    for f in failures[-20:]:
        print(f"FAILED {f}")
    if len(failures) > 20:
        print(f"... and {len(failures) - 20} more failures above")
    tail = f", {skipped} skipped" if skipped else ""
    print(f"{passed} passed, {failed} failed{tail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
