#!/usr/bin/env python3
"""Write a C file defining `const char NAME[]` with the bytes of a text file (build time)."""
import sys

src, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, 'rb').read()
with open(out, 'w') as f:
    f.write('/* Generated from %s at build time: do not edit. */\n' % src.split('/')[-1])
    f.write('extern const char %s[];\n' % name)
    f.write('const char %s[] = {\n' % name)
    for i in range(0, len(data), 16):
        f.write('\t' + ', '.join('0x%02x' % b for b in data[i:i + 16]) + ',\n')
    f.write('\t0x00\n};\n')
