#!/usr/bin/env python3
"""Images the images suite makes itself, offline (tests/integration/test-images.sh).

  image-fixtures.py docker-save ROOTFS OUT TAG [ENV]   a `docker save` archive of ROOTFS
  image-fixtures.py hostile KIND OUT                   one hostile layer, as a rootfs tar

docker-save writes what `docker save` writes (the format Docker documents for `docker
load`): manifest.json, repositories, the image config (<hex>.json, with rootfs.diff_ids)
and each layer as <hex>/layer.tar, uncompressed. Every hostile archive is one attack of the
kinds the image store refuses (docs/images.md), with the entry that carries it named
ENTRY below; the suite checks the refusal names it.
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile


def layer_tar(rootfs):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(os.listdir(rootfs)):
            t.add(os.path.join(rootfs, name), arcname=name)
    return buf.getvalue()


def add_bytes(t, name, data, mtime=0):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = mtime
    ti.mode = 0o644
    t.addfile(ti, io.BytesIO(data))


def docker_save(rootfs, out, tag, env=None):
    layer = layer_tar(rootfs)
    diff = hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/bin", "FROM_DOCKER=" + (env or "yes")], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff]},
    }
    cfg = json.dumps(config).encode()
    cfg_hex = hashlib.sha256(cfg).hexdigest()
    manifest = [{"Config": cfg_hex + ".json", "RepoTags": [tag], "Layers": [diff + "/layer.tar"]}]
    repo, _, ver = tag.partition(":")
    with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as t:
        add_bytes(t, diff + "/VERSION", b"1.0")
        add_bytes(t, diff + "/layer.tar", layer)
        add_bytes(t, cfg_hex + ".json", cfg)
        add_bytes(t, "manifest.json", json.dumps(manifest).encode())
        add_bytes(t, "repositories", json.dumps({repo: {ver: diff}}).encode())


def member(name, kind, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = kw.get("mode", 0o755 if kind == tarfile.DIRTYPE else 0o644)
    ti.linkname = kw.get("link", "")
    ti.devmajor, ti.devminor = kw.get("dev", (0, 0))
    ti.size = kw.get("size", 0)
    return ti


def bomb(out):
    """A gzip bomb: 16 files of 64 MiB of zeros, 1 GiB unpacked from about 1 MiB.

    Made of concatenated gzip members (a gzip stream may be several), so the 64 MiB of
    zeros are compressed once and written sixteen times. Prints the first entry's name.
    """
    chunk = 64 << 20
    zeros = gzip.compress(bytes(chunk), compresslevel=9)
    with open(out, "wb") as f:
        for i in range(16):
            ti = member("zeros-%02d" % i, tarfile.REGTYPE, size=chunk)
            f.write(gzip.compress(ti.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")))
            f.write(zeros)
        f.write(gzip.compress(bytes(1024)))
    print("zeros-")


def big_header(out):
    """One member whose header declares 8 GiB: refused before a byte of it is written."""
    ti = member("zeros-8g", tarfile.REGTYPE, size=8 << 30)
    with open(out, "wb") as f:
        f.write(gzip.compress(ti.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape") +
                              bytes(1 << 20)))
    print("zeros-8g")


def hostile(kind, out):
    """Write the archive; print the entry that must be named in the refusal."""
    if kind == "bomb":
        return bomb(out)
    if kind == "big-header":
        return big_header(out)
    buf = io.BytesIO()
    fmt = tarfile.GNU_FORMAT
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        t.addfile(member("bin", tarfile.DIRTYPE))
        if kind == "absolute":
            entry = "/tmp/paddock-hostile-absolute"
            t.addfile(member(entry, tarfile.REGTYPE, size=2), io.BytesIO(b"x\n"))
        elif kind == "dotdot":
            entry = "bin/../../paddock-hostile-dotdot"
            t.addfile(member(entry, tarfile.REGTYPE, size=2), io.BytesIO(b"x\n"))
        elif kind == "symlink-out":
            entry = "bin/escape"
            t.addfile(member(entry, tarfile.SYMTYPE, link="../../../../../../etc/passwd"))
        elif kind == "through-symlink":
            t.addfile(member("etc", tarfile.SYMTYPE, link="/tmp"))
            entry = "etc/paddock-hostile-through"
            t.addfile(member(entry, tarfile.REGTYPE, size=2), io.BytesIO(b"x\n"))
        elif kind == "hardlink-out":
            entry = "bin/passwd"
            t.addfile(member(entry, tarfile.LNKTYPE, link="/etc/passwd"))
        elif kind == "hardlink-dotdot":
            entry = "bin/shadow"
            t.addfile(member(entry, tarfile.LNKTYPE, link="../../etc/shadow"))
        elif kind == "chardev":
            entry = "bin/mem"
            t.addfile(member(entry, tarfile.CHRTYPE, dev=(1, 1)))
        elif kind == "blockdev":
            entry = "bin/sda"
            t.addfile(member(entry, tarfile.BLKTYPE, dev=(8, 0)))
        elif kind == "whiteout-dev":
            entry = "bin/hidden"
            t.addfile(member(entry, tarfile.CHRTYPE, dev=(0, 0)))
        elif kind == "fifo":
            entry = "bin/pipe"
            t.addfile(member(entry, tarfile.FIFOTYPE))
        elif kind == "setuid":
            entry = "bin/su"
            t.addfile(member(entry, tarfile.REGTYPE, mode=0o4755, size=2), io.BytesIO(b"x\n"))
        elif kind == "unknown-type":
            entry = "bin/odd"
            t.addfile(member(entry, b"Z"))
        else:
            raise SystemExit("unknown kind " + kind)
    with open(out, "wb") as f:
        f.write(buf.getvalue())
    print(entry)


if __name__ == "__main__":
    if sys.argv[1] == "docker-save":
        docker_save(*sys.argv[2:])
    elif sys.argv[1] == "hostile":
        hostile(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
