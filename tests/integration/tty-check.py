#!/usr/bin/env python3
"""Run a command with a fresh pty as its controlling terminal, then check the terminal.

    tty-check.py CMD [ARGS...]

The pty stands for the terminal a user hands to `paddock run`. CMD's output (read from the
master) is printed as it came, then one line about the terminal after CMD exited:
"terminal: ldisc=N excl=N input=ok|lost output=ok|lost". The exit status is 0 when the
terminal still works (line discipline N_TTY, not exclusive, a line typed on the master reaches
the slave and a line written on the slave reaches the master), 1 when it does not.
Every wait is bounded (10 s), so a wrecked terminal ends the check instead of hanging it.
"""
import fcntl
import os
import select
import struct
import subprocess
import sys
import termios

TIOCGEXCL = 0x80045440
LIMIT = 10.0


def read_until(fd, want, limit=LIMIT):
    """Bytes read from fd until `want` is among them, EOF, or the limit passes."""
    got = b""
    while want not in got:
        r, _, _ = select.select([fd], [], [], limit)
        if not r:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    return got


def write(fd, data):
    """Whether the terminal took data (a discarding line discipline refuses writes)."""
    try:
        return os.write(fd, data) == len(data)
    except OSError:
        return False


def run(argv, master, slave):
    def ctty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, preexec_fn=ctty)
    out = b""
    while proc.poll() is None:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            out += os.read(master, 4096)
    while select.select([master], [], [], 0)[0]:
        chunk = os.read(master, 4096)
        if not chunk:
            break
        out += chunk
    return proc.returncode, out


def main():
    master, slave = os.openpty()
    rc, out = run(sys.argv[1:], master, slave)
    sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
    ldisc = struct.unpack("i", fcntl.ioctl(slave, termios.TIOCGETD, b"\0" * 4))[0]
    excl = struct.unpack("i", fcntl.ioctl(slave, TIOCGEXCL, b"\0" * 4))[0]
    inp = write(master, b"ping\n") and b"ping" in read_until(slave, b"\n")
    outp = write(slave, b"pong\n") and b"pong" in read_until(master, b"pong")
    ok = ldisc == 0 and excl == 0 and inp and outp
    print("terminal: ldisc=%d excl=%d input=%s output=%s" % (
        ldisc, excl, "ok" if inp else "lost", "ok" if outp else "lost"))
    print("command exit: %d" % rc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
