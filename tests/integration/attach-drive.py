#!/usr/bin/env python3
"""Drive `paddock attach` on a terminal, as a person would (test-cli-daemon.sh).

usage: attach-drive.py CMD [ARGS...]

CMD runs on a new pty of 80x24. Typed: echo "x$((6*7))x", tty, stty size; then the
window becomes 100x30 (SIGWINCH to CMD), stty size again; then exit 3. Prints one
line of key=value results (each check's outcome) and the transcript on stderr.
"""
import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

out = b""


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def read_until(fd, pattern, timeout=15.0):
    """Read the terminal until `pattern` (a bytes regex) matches what came after the
    mark; return the match or None (timeout or EOF)."""
    global out
    mark = len(out)
    end = time.monotonic() + timeout
    while True:
        m = re.search(pattern, out[mark:])
        if m:
            return m
        left = end - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            return None
        out += data


def type_line(fd, line):
    os.write(fd, line.encode() + b"\r")


def main():
    pid, fd = pty.fork()
    if pid == 0:
        set_size(0, 24, 80)
        os.execvp(sys.argv[1], sys.argv[1:])
    res = {}
    read_until(fd, rb"[$#] ", timeout=20)  # the shell's prompt
    type_line(fd, 'echo "x$((6*7))x"')
    res["product"] = int(read_until(fd, rb"x42x") is not None)
    type_line(fd, "tty")
    m = read_until(fd, rb"/dev/pts/[0-9]+")
    res["tty"] = m.group(0).decode() if m else "none"
    type_line(fd, "stty size")
    # Typed ahead of the shell, a line's echo can come before the prompt that
    # precedes its output ("stty size\r\n$ 24 80", "# " as root): the prompt may sit in between.
    res["size"] = int(read_until(fd, rb"(?:\n|[$#] )24 80\r?\n") is not None)
    set_size(fd, 30, 100)  # SIGWINCH to attach: it sends the new size
    ok = 0
    for _ in range(10):
        type_line(fd, "stty size")
        if read_until(fd, rb"(?:\n|[$#] )30 100\r?\n", timeout=1.5) is not None:
            ok = 1
            break
    res["resized"] = ok
    type_line(fd, "exit 3")
    read_until(fd, rb"\Z\n", timeout=15)  # until EOF
    status = None
    end = time.monotonic() + 15
    while time.monotonic() < end:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            status = os.waitstatus_to_exitcode(st)
            break
        time.sleep(0.05)
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        status = "hung"
    res["status"] = status
    sys.stderr.write(out.decode(errors="replace"))
    print(" ".join(f"{k}={v}" for k, v in res.items()))


main()
