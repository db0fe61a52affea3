#!/usr/bin/env python3
"""Write a C file holding a table of files embedded at build time (the dashboard's assets).

  embed-dir.py OUT.c TABLE FILE...

Each file becomes one `struct pdk_dashboard_asset` of TABLE (dashboard-internal.h): its name
(the file's base name), its bytes, their length, its content type (from the extension; an
unknown extension fails the build) and a strong ETag (the first 128 bits of its SHA-256),
all computed here, so the daemon hashes nothing at run time. The table ends with a NULL name.
"""
import hashlib
import os
import sys

TYPES = {
    '.html': 'text/html; charset=utf-8',
    '.css': 'text/css; charset=utf-8',
    '.js': 'text/javascript; charset=utf-8',
    '.mjs': 'text/javascript; charset=utf-8',
    '.json': 'application/json',
    '.svg': 'image/svg+xml',
    '.png': 'image/png',
    '.ico': 'image/x-icon',
    '.txt': 'text/plain; charset=utf-8',
}


def c_bytes(f, data):
    for i in range(0, len(data), 16):
        f.write('\t' + ', '.join('0x%02x' % b for b in data[i:i + 16]) + ',\n')
    f.write('\t0x00\n')


def main():
    out, table, srcs = sys.argv[1], sys.argv[2], sys.argv[3:]
    names = [os.path.basename(s) for s in srcs]
    if len(set(names)) != len(names):
        sys.exit('embed-dir.py: two files share a base name')
    with open(out, 'w') as f:
        f.write('/* Generated at build time by embed-dir.py: do not edit. */\n')
        f.write('#include "dashboard-internal.h"\n\n')
        for i, s in enumerate(srcs):
            data = open(s, 'rb').read()
            f.write('static const char asset_%d[] = {\n' % i)
            c_bytes(f, data)
            f.write('};\n')
        f.write('\nconst struct pdk_dashboard_asset %s[] = {\n' % table)
        for i, s in enumerate(srcs):
            ext = os.path.splitext(s)[1]
            if ext not in TYPES:
                sys.exit('embed-dir.py: no content type for %s' % s)
            data = open(s, 'rb').read()
            etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
            f.write('\t{"%s", asset_%d, %d, "%s", "%s"},\n' %
                    (names[i], i, len(data), TYPES[ext], etag.replace('"', '\\"')))
        f.write('\t{0},\n};\n')


main()
