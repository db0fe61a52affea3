"""A small client of the supervisor's control protocol (docs/internals/daemon.md),
for tests/integration/test-supervise.sh and bench/supervise.

Supervisor(paddock, spec, env=..., preexec=...) starts `paddock supervise` the
way the daemon does (spec on fd 3, readiness on fd 4), Conn speaks to its
ctl.sock: one JSON object per SOCK_SEQPACKET packet, fds in SCM_RIGHTS.
"""
import array
import fcntl
import json
import os
import socket
import subprocess
import uuid


def new_id():
    # A time-ordered id is the daemon's business; any UUID text is accepted.
    return str(uuid.uuid4())


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(path)
        self.req = 0
        self.pending = []  # unsolicited messages seen while waiting for a reply

    def close(self):
        self.s.close()

    def send(self, msg, fds=()):
        data = json.dumps(msg).encode()
        if fds:
            self.s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            self.s.sendmsg([data])

    def recv(self, timeout=30):
        self.s.settimeout(timeout)
        fds = array.array("i")
        data, anc, flags, _ = self.s.recvmsg(65536, socket.CMSG_SPACE(4 * fds.itemsize))
        if not data:
            raise EOFError("supervisor closed the connection")
        for level, typ, cdata in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
        return json.loads(data), list(fds)

    def call(self, op, fds=(), timeout=30, **kw):
        """Send a request; return (reply, fds). Unsolicited messages are kept in .pending."""
        self.req += 1
        msg = dict(kw, op=op, req=self.req)
        self.send(msg, fds)
        while True:
            m, rfds = self.recv(timeout)
            if m.get("req") == self.req:
                return m, rfds
            self.pending.append(m)

    def wait_event(self, pred, timeout=30):
        for i, m in enumerate(self.pending):
            if pred(m):
                return self.pending.pop(i)
        while True:
            m, _ = self.recv(timeout)
            if pred(m):
                return m
            self.pending.append(m)

    def run(self, argv, stdin=b"", env=None, cwd=None, timeout_ms=0):
        """exec with pipes; returns (start reply, exit event, stdout, stderr)."""
        i_r, i_w = os.pipe()
        o_r, o_w = os.pipe()
        e_r, e_w = os.pipe()
        kw = {"argv": argv}
        if env is not None:
            kw["env"] = env
        if cwd is not None:
            kw["cwd"] = cwd
        if timeout_ms:
            kw["timeout_ms"] = timeout_ms
        try:
            rep, _ = self.call("exec", fds=[i_r, o_w, e_w], **kw)
        finally:
            for fd in (i_r, o_w, e_w):
                os.close(fd)
        if stdin:
            os.write(i_w, stdin)
        os.close(i_w)
        out = _read_all(o_r)
        err = _read_all(e_r)
        if "error" in rep:
            return rep, None, out, err
        ev = self.wait_event(lambda m: m.get("ev") == "exit" and m.get("exec") == rep["exec"])
        return rep, ev, out, err


def _read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks)


class Supervisor:
    def __init__(self, paddock, spec, env=None, preexec_fn=None, log=None):
        self.id = spec.setdefault("id", new_id())
        self.run_dir = spec["run_dir"]
        self.dir = os.path.join(self.run_dir, "sb", self.id)
        spec_r, spec_w = os.pipe()
        ready_r, ready_w = os.pipe()
        os.write(spec_w, json.dumps(spec).encode())
        os.close(spec_w)

        def child():
            # Above 4 first, so that neither dup2() below is a no-op that keeps O_CLOEXEC.
            a = fcntl.fcntl(spec_r, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(ready_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.setsid()
            if preexec_fn:
                preexec_fn()

        logf = open(log, "ab") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [paddock, "supervise", "--id", self.id, "--spec-fd", "3", "--ready-fd", "4"],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env,
            preexec_fn=child, close_fds=False)
        if log:
            logf.close()
        os.close(spec_r)
        os.close(ready_w)
        line = _read_all(ready_r)
        self.ready = json.loads(line) if line else {"ok": False, "error": {"message": "no readiness line"}}

    def connect(self):
        return Conn(os.path.join(self.dir, "ctl.sock"))

    def wait(self, timeout=30):
        return self.proc.wait(timeout)
