#!/usr/bin/env python3
"""man.py - the manual pages of paddock, made from its --help texts.

    python3 src/tools/man.py --out DIR PADDOCK

writes DIR/paddock.1 (from `PADDOCK --help`) and DIR/paddock-VERB.1 for each
verb that `PADDOCK --help` lists (from `PADDOCK VERB --help`), so the pages
say what the binary says and a new verb gets its page without a list to keep.
`make install` runs it. The help texts follow one layout, which is all this
reads:

    usage: paddock VERB ...          the synopsis (indented lines continue it)
    (blank line)
    Paragraphs of prose.             DESCRIPTION
    options:                         a section (a line ending in ':')
      -x, --flag ARG   text          an item: the term, two spaces, the text;
                       more text     deeper lines continue the text
    exit status: ...                 EXIT STATUS

A block that does not fit the item layout is kept as it is (no fill).
"""
import argparse
import os
import re
import subprocess
import sys

ITEM = re.compile(r"^( +)(\S(?:.*?\S)?)( {2,})(\S.*)$")


def roff(text):
    """Text escaped for roff: backslashes, dashes, a leading dot or quote."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def run_help(paddock, verb):
    argv = [paddock] + ([verb] if verb else []) + ["--help"]
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, check=False)
    if res.returncode != 0 or not res.stdout.startswith("usage:"):
        sys.exit("man.py: '%s' exited %d without a usage text: %s"
                 % (" ".join(argv), res.returncode, res.stderr.strip()))
    return res.stdout


def verbs_of(main_help):
    """The verbs `paddock --help` lists, with their summaries, in its order."""
    verbs, inside = [], False
    for line in main_help.splitlines():
        if line == "commands:":
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            name, _, summary = line.strip().partition(" ")
            if name != "help":
                verbs.append((name, summary.strip()))
    if not verbs:
        sys.exit("man.py: 'paddock --help' lists no commands")
    return verbs


def blocks(text):
    """The text in blocks of lines separated by blank lines."""
    out, cur = [], []
    for line in text.rstrip("\n").splitlines():
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def items(block):
    """[(term, [text lines])] when every line of `block` fits the item layout, else None."""
    first = ITEM.match(block[0])
    if first is None:
        return None
    col = len(first.group(1)) + len(first.group(2)) + len(first.group(3))
    out = []
    for line in block:
        indent = len(line) - len(line.lstrip(" "))
        if indent >= col and out:
            out[-1][1].append(line.strip())
        elif indent < col < len(line) and line[col - 1] == " " and line[col] != " ":
            # The text starts at the column even where a long term leaves one space.
            out.append((line[:col].strip(), [line[col:]]))
        else:
            return None
    return out


def render_block(block, out):
    parsed = items(block) if block[0].startswith(" ") else None
    if parsed is not None:
        for term, text in parsed:
            out += [".TP", "\\fB%s\\fR" % roff(term), roff(" ".join(text))]
    elif block[0].startswith(" "):
        out += [".PP", ".nf", ".RS 4"] + [roff(line) for line in block] + [".RE", ".fi"]
    else:
        out += [".PP", roff(" ".join(line.strip() for line in block))]


def page(name, summary, version, help_text, see_also, docdir):
    """The roff source of one page."""
    bl = blocks(help_text)
    usage = bl.pop(0)
    out = ['.TH "%s" "1" "" "paddock %s" "paddock manual"' % (name.upper(), version),
           ".nh", ".SH NAME", "%s \\- %s" % (roff(name), roff(summary)), ".SH SYNOPSIS", ".nf"]
    out += [roff(re.sub(r"^(usage: | {7})", "", line)) for line in usage] + [".fi"]
    section = "DESCRIPTION"
    out.append(".SH DESCRIPTION")
    for b in bl:
        head = b[0]
        if head.startswith("exit status:"):
            out.append('.SH "EXIT STATUS"')
            section = "EXIT STATUS"
            b = [head[len("exit status:"):].strip()] + b[1:]
        elif re.match(r"^[a-z][a-z ]*:$", head):
            section = head[:-1].upper()
            out.append('.SH "%s"' % section)
            b = b[1:]
        if b:
            render_block(b, out)
    out += [".SH \"SEE ALSO\"", ", ".join("\\fB%s\\fR(1)" % roff(s) for s in see_also),
            ".PP", "The documentation, installed in %s: cli\\-contract.md, policy.md, "
            "workspace.md, rootless.md and the others." % roff(docdir)]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description="make paddock's manual pages")
    ap.add_argument("--out", required=True, help="directory for the .1 files")
    ap.add_argument("--docdir", default="PREFIX/share/doc/paddock",
                    help="where the documentation is installed, for SEE ALSO")
    ap.add_argument("paddock", help="the paddock binary")
    args = ap.parse_args()
    version = subprocess.run([args.paddock, "version"], stdout=subprocess.PIPE, text=True,
                             check=True).stdout.split()[1]
    main_help = run_help(args.paddock, None)
    verbs = verbs_of(main_help)
    os.makedirs(args.out, exist_ok=True)
    pages = {"paddock": ("run untrusted code in a sandbox built from kernel mechanisms",
                         main_help, ["paddock-" + v for v, _ in verbs])}
    for verb, summary in verbs:
        pages["paddock-" + verb] = (summary, run_help(args.paddock, verb), ["paddock"])
    for name, (summary, text, see) in pages.items():
        with open(os.path.join(args.out, name + ".1"), "w", encoding="utf-8") as f:
            f.write(page(name, summary, version, text, see, args.docdir))


if __name__ == "__main__":
    main()
