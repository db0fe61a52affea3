"""Binaries compared by a bench, put in the same page-cache state before it runs; and a
directory spread as paddock spreads its change sets (topdir()).

A binary the linker has just written stays in the page cache as it was written: a paddock
build's, so held, started 0.1 to 0.2 ms slower than the same bytes read back from disk
(docs/internals/performance.md, eleventh round), while bwrap and true were read from disk
as any installed program is. So every binary a bench compares is dropped from the page
cache first (written back, then POSIX_FADV_DONTNEED) and the warm-up runs read it back, as
the first start after a reboot or an install does.
"""
import array
import fcntl
import os


def settle(paths):
    """Drop each existing file of `paths` from the page cache; return the ones dropped."""
    done = []
    for path in sorted(set(p for p in paths if p)):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            done.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return done


def with_helpers(paddock):
    """A paddock binary and the helpers it execs from its own directory (settle() skips the
    ones a build does not have)."""
    d = os.path.dirname(os.path.abspath(paddock))
    return [paddock] + [os.path.join(d, h)
                        for h in ("paddock-full", "paddock-init", "paddock-otlp")]


FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_TOPDIR_FL = 0x00020000


def topdir(path):
    """ext4's top-directory flag on `path` (chattr +T), as paddock sets it on STATE/ws: each
    directory made in it is placed in a block group of its own, away from the inodes others
    free (docs/internals/workspace.md). False where the file system has no such flag."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
        flags[0] |= FS_TOPDIR_FL
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags, True)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
