#!/usr/bin/env python3
"""The layers of src/ hold, checked three ways (TAP on stdout).

  tests/layers.py BUILD_DIR

1. Includes: for every pair of layers where the upper one is not visible
   from the lower one, a probe that includes the upper layer's public
   header is compiled with the lower layer's own command line (from
   BUILD_DIR/compile_commands.json) and must fail to compile, on that very
   header; the same probe compiled with the upper layer's command line must
   build (so the failure is the direction, not a broken probe).
2. Symbols: no library of a layer needs (nm: U) a symbol that only a layer
   above it, or beside it, defines: a prototype written into a .c file
   cannot call upwards either.
3. Public headers: a file outside a folder includes only that folder's
   public header, FOLDER/FOLDER.h (tests and build-time tools may look
   inside every layer).
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(TOP, "src")
# Folders that are not layers of the library: binaries and build-time tools.
NOT_LAYERS = {"cli", "tools", "exporter"}
n = 0
failed = 0


def ok(cond, desc, detail=""):
    global n, failed
    n += 1
    if not cond:
        failed += 1
        for line in detail.strip().splitlines()[:20]:
            print("# " + line)
    print(("ok" if cond else "not ok") + " %d - %s" % (n, desc))


def layer_commands(build):
    """layer -> (argv of one of its compiles, the folders it sees)."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        cmds = json.load(f)
    out = {}
    for c in cmds:
        m = re.search(r"libpdk-([a-z][a-z0-9]*)\.a\.p/", c.get("output", "") or c["command"])
        if not m or m.group(1) in out:
            continue
        argv = shlex.split(c["command"])
        seen = []
        for i, a in enumerate(argv):
            if a == "-iquote" and i + 1 < len(argv) and argv[i + 1].startswith(SRC + "/"):
                seen.append(os.path.basename(argv[i + 1]))
        out[m.group(1)] = (argv, c["directory"], seen)
    return out


def public_header(layer):
    return layer + ".h"


def probe_argv(argv, source, obj):
    """The compile command with its input and output replaced by the probe's."""
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MQ", "-c"):
            skip = True
            continue
        if a in ("-MD",):
            continue
        out.append(a)
    return out + ["-fsyntax-only", source]


def compile_probe(argv, cwd, header, tmp):
    src = os.path.join(tmp, "probe.c")
    with open(src, "w") as f:
        f.write('#include "common.h"\n#include "%s"\n' % header)
    r = subprocess.run(probe_argv(argv, src, None), cwd=cwd, capture_output=True, text=True)
    return r.returncode, r.stderr


def check_includes(layers):
    names = sorted(layers)
    with tempfile.TemporaryDirectory() as tmp:
        for upper in names:
            header = public_header(upper)
            if not os.path.exists(os.path.join(SRC, upper, header)):
                ok(False, "layer %s has its public header %s" % (upper, header))
                continue
            rc, err = compile_probe(layers[upper][0], layers[upper][1], header, tmp)
            ok(rc == 0, "%s/%s builds with %s's own command line" % (upper, header, upper), err)
            for lower in names:
                if lower == upper or upper in layers[lower][2]:
                    continue
                rc, err = compile_probe(layers[lower][0], layers[lower][1], header, tmp)
                refused = rc != 0 and ("%s: No such file" % header) in err
                ok(refused, "%s cannot include %s/%s (the compile fails on it)" %
                   (lower, upper, header), err if not refused else "")


def nm_symbols(lib):
    r = subprocess.run(["nm", "-A", "--defined-only", lib], capture_output=True, text=True)
    defined = {l.split()[-1] for l in r.stdout.splitlines()
               if len(l.split()) >= 3 and l.split()[-2] in "TDBRVW"}
    r = subprocess.run(["nm", "-A", "--undefined-only", lib], capture_output=True, text=True)
    undefined = {l.split()[-1] for l in r.stdout.splitlines()}
    return defined, undefined


def check_symbols(build, layers):
    libs = {}
    for name in layers:
        path = os.path.join(build, "src", "libpdk-%s.a" % name)
        if os.path.exists(path):
            libs[name] = nm_symbols(path)
    owner = {}
    for name, (defined, _) in libs.items():
        for s in defined:
            owner.setdefault(s, set()).add(name)
    for name in sorted(libs):
        bad = []
        for s in sorted(libs[name][1]):
            where = owner.get(s, set())
            if where and name not in where and not (where & set(layers[name][2])):
                bad.append("%s needs %s, defined in %s" % (name, s, ", ".join(sorted(where))))
        ok(not bad, "libpdk-%s.a needs no symbol of a layer it cannot see" % name,
           "\n".join(bad))


# paddock-init is built from libc-only files against musl (the top
# meson.build): it cannot include base.h (jansson, OpenSSL...), so it names
# base's libc-only headers one by one.
INIT_BASE_HEADERS = {"fdpass.h"}


def check_public_headers():
    files = subprocess.run(["git", "ls-files", "src/*.c", "src/*.h"], cwd=TOP,
                           capture_output=True, text=True).stdout.split()
    folders = {f.split("/")[1] for f in files}
    where = {}
    for f in files:
        if f.endswith(".h"):
            where.setdefault(os.path.basename(f), f.split("/")[1])
    bad = []
    for f in files:
        own = f.split("/")[1]
        if own in ("tools",):
            continue
        with open(os.path.join(TOP, f), encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh, 1):
                m = re.match(r'#include "([^"]+)"', line)
                if not m or m.group(1) == "common.h":
                    continue
                if own == "init" and m.group(1) in INIT_BASE_HEADERS:
                    continue
                folder = where.get(m.group(1))
                if folder is None or folder == own or folder not in folders:
                    continue
                if m.group(1) != public_header(folder):
                    bad.append("%s:%d: includes %s/%s, not %s/%s" %
                               (f, i, folder, m.group(1), folder, public_header(folder)))
    ok(not bad, "files include other folders' public headers only", "\n".join(bad))


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    layers = {k: v for k, v in layer_commands(build).items() if k not in NOT_LAYERS}
    ok(len(layers) >= 10, "the build has a library per layer (%s)" % ", ".join(sorted(layers)))
    # The dashboard's files hold no data: its layer sees http/ and base/, no sandbox.
    ok("dashboard" in layers and sorted(layers["dashboard"][2]) == ["base", "dashboard", "http"],
       "dashboard/ sees only http/ and base/ (%s)" % ", ".join(sorted(layers.get("dashboard", (0, 0, []))[2])))
    check_includes(layers)
    check_symbols(build, layers)
    check_public_headers()
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
