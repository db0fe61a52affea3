"""Drive `paddock supervise` over its control socket and check what it does.

Run by test-supervise.sh once per identity (root, then nobody). Prints one
line per check: "ok - DESC" or "not ok - DESC" (the shell numbers them),
with "# ..." diagnostics.
usage: supervise-check.py PADDOCK WORKDIR
"""
import errno
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svclient  # noqa: E402

PADDOCK, WORK = sys.argv[1], sys.argv[2]
RUN = os.path.join(WORK, "run")
STATE = os.path.join(WORK, "state")
FAILED = 0


def check(cond, desc, diag=None):
    global FAILED
    print(("ok - " if cond else "not ok - ") + desc)
    if not cond:
        FAILED += 1
        if diag is not None:
            for line in str(diag).splitlines()[:20]:
                print("#   " + line)
    sys.stdout.flush()
    return cond


def start(**spec):
    spec.setdefault("run_dir", RUN)
    spec.setdefault("state_dir", STATE)
    return svclient.Supervisor(PADDOCK, spec, log=os.path.join(WORK, "supervise.log"))


def events(sv):
    with open(os.path.join(sv.dir, "events.jsonl")) as f:
        return [json.loads(line) for line in f]


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


sv = start(labels={"session": "sess-1"})
check(sv.ready.get("ok") is True, "the supervisor reports ready", sv.ready)
if not sv.ready.get("ok"):
    print(open(os.path.join(WORK, "supervise.log")).read())
    sys.exit(1)
c = sv.connect()
st, _ = c.call("status")
check(st.get("state") == "running" and st.get("init_pid") == sv.ready["init_pid"],
      "status: running, with the init's pid", st)

devnull0 = os.open("/dev/null", os.O_RDWR)

# 100 execs in one sandbox, each with its own exit code and output.
bad = []
for i in range(100):
    rep, ev, out, err = c.run(["sh", "-c", 'echo "out $0"; echo "err $0" >&2; exit $(($0 % 7))', str(i)])
    if ev is None or ev["exit_code"] != i % 7 or ev["end"] != "exited" or \
            out != b"out %d\n" % i or err != b"err %d\n" % i:
        bad.append((i, rep, ev, out, err))
check(not bad, "100 execs: every exit code, stdout and stderr is right", bad[:3])
st, _ = c.call("status")
check(st["usage"]["commands"] == 100 and st["execs"] == [], "status counts 100 commands, none running", st)

rep, ev, out, _ = c.run(["sh", "-c", 'echo "$FOO"; pwd'], env=["FOO=bar baz"], cwd="/tmp")
check(out == b"bar baz\n/tmp\n", "exec env and cwd are applied", out)
rep, ev, out, _ = c.run(["sh", "-c", 'echo "$HOME"'])
check(out == b"/tmp\n", "the sandbox's own environment is the base", out)

# A request over the 64 KiB packet limit is answered (req 0: it could not be read), and the
# connection stays usable.
c.send({"op": "exec", "req": 999, "argv": ["echo", "x" * 70000]}, [devnull0] * 3)
rep = c.wait_event(lambda m: m.get("req") == 0)
check(rep.get("error", {}).get("code") == "bad_request" and
      "truncated" in rep["error"]["message"], "a request over 64 KiB: bad_request, req 0", rep)
rep, _ = c.call("status")
check(rep.get("state") == "running", "and the connection goes on", rep)
rep, ev, out, _ = c.run(["no-such-command-xyz"])
check(ev is None and rep.get("error", {}).get("code") == "not_found" and
      rep["error"].get("field") == "argv[0]" and rep["error"].get("errno") == errno.ENOENT and
      "command not found" in rep["error"]["message"],
      "a command that does not exist: not_found, argv[0], ENOENT, command not found", rep)
rep, ev, out, _ = c.run(["/etc/passwd"])
check(ev is None and rep.get("error", {}).get("code") == "forbidden" and
      rep["error"].get("field") == "argv[0]" and "EACCES" in rep["error"]["message"],
      "a file that is not executable: forbidden, argv[0], EACCES", rep)
rep, ev, out, _ = c.run(["true"], cwd="/nope")
check(ev is None and rep.get("error", {}).get("code") == "not_found" and
      rep["error"].get("field") == "cwd" and "cwd '/nope'" in rep["error"]["message"],
      "a working directory that does not exist: not_found naming the cwd", rep)

# Pause stops CPU use; resume continues.
devnull = os.open("/dev/null", os.O_RDWR)
rep, _ = c.call("exec", fds=[devnull, devnull, devnull], argv=["sh", "-c", "while :; do :; done"])
busy = rep.get("exec")


def cpu_grows(base, want_ns=50_000_000, within=10.0):
    """Wait until the sandbox's CPU time passed base + want_ns (a loaded machine is slow)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        now = c.call("status")[0]["usage"]["cpu_ns"]
        if now - base >= want_ns:
            return now
        time.sleep(0.05)
    return None


cpu0 = c.call("status")[0]["usage"]["cpu_ns"]
check(cpu_grows(cpu0) is not None, "a busy loop uses CPU")
rep, _ = c.call("pause")
check(rep.get("state") == "paused", "pause", rep)
p0 = c.call("status")[0]
time.sleep(0.5)
p1 = c.call("status")[0]
check(p1["state"] == "paused" and p1["usage"]["cpu_ns"] - p0["usage"]["cpu_ns"] < 1_000_000,
      "paused: cpu_ns does not grow (%d ns in 500 ms)" % (p1["usage"]["cpu_ns"] - p0["usage"]["cpu_ns"]))
check(p1["usage"]["wall_ns"] == p0["usage"]["wall_ns"] and p1["usage"]["paused_ns"] >= 500_000_000,
      "paused: wall time is not charged, paused time is counted", (p0["usage"], p1["usage"]))
rep, _ = c.call("exec", fds=[devnull] * 3, argv=["true"])
check(rep.get("error", {}).get("code") == "conflict", "no exec while paused", rep)
rep, _ = c.call("resume")
check(rep.get("state") == "running", "resume", rep)
check(cpu_grows(p1["usage"]["cpu_ns"]) is not None, "resumed: the loop runs again")
rep, _ = c.call("signal", exec=busy, sig=9)
ev = c.wait_event(lambda m: m.get("ev") == "exit" and m.get("exec") == busy)
check(rep.get("ok") and ev["end"] == "killed" and ev["signal"] == 9, "signal SIGKILL ends the exec: killed", ev)
rep, _ = c.call("exec", fds=[devnull] * 3, argv=["sleep", "10"])
time.sleep(0.2)
c.call("signal", exec=rep["exec"], sig=15)
ev = c.wait_event(lambda m: m.get("ev") == "exit" and m.get("exec") == rep["exec"])
check(ev["end"] == "signaled" and ev["signal"] == 15, "signal SIGTERM reaches the exec (not blocked)", ev)
rep, _ = c.call("signal", exec=12345, sig=15)
check(rep.get("error", {}).get("code") == "not_found", "signal to an unknown exec: not_found", rep)
rep, ev, _, _ = c.run(["sleep", "10"], timeout_ms=200)
check(ev is not None and ev["end"] == "timeout" and ev["duration_ns"] < 5_000_000_000,
      "an exec over its timeout_ms is killed: timeout", ev)

# Files: written through the control socket, seen inside, owned by the sandbox's user.
rep, fds = c.call("open", path="/tmp/sub/dir/f.txt", flags="w", mode=0o640, mkdir=True)
check("error" not in rep and len(fds) == 1, "open w (with mkdir) gives one fd", rep)
if fds:
    os.write(fds[0], b"hello from outside\n")
    os.close(fds[0])
rep, ev, out, _ = c.run(["sh", "-c", "cat /tmp/sub/dir/f.txt; stat -c '%u:%g %a' /tmp/sub/dir/f.txt; id -u; id -g"])
lines = out.decode().splitlines()
check(lines[:1] == ["hello from outside"], "the sandbox reads the file written from outside", out)
check(len(lines) == 4 and lines[1] == "%s:%s 640" % (lines[2], lines[3]),
      "the file belongs to the sandbox's user, mode as asked", out)
rep, fds = c.call("open", path="/tmp/sub/dir/f.txt", flags="r")
data = os.read(fds[0], 100) if fds else b""
for fd in fds:
    os.close(fd)
check(rep.get("size") == 19 and data == b"hello from outside\n", "open r reads it back, with its size", rep)
rep, _ = c.call("stat", path="/tmp/sub/dir/f.txt")
check(rep.get("type") == "file" and rep.get("size") == 19 and rep.get("mode") == 0o640, "stat", rep)
rep, _ = c.call("list", path="/tmp/sub/dir")
check([e["name"] for e in rep.get("entries", [])] == ["f.txt"], "list", rep)
rep, _ = c.call("mkdir", path="/tmp/a/b/c")
rep2, _ = c.call("stat", path="/tmp/a/b/c")
check(rep.get("ok") and rep2.get("type") == "dir", "mkdir with parents", (rep, rep2))
rep, _ = c.call("delete", path="/tmp/a")
check(rep.get("error", {}).get("code") == "conflict", "delete of a non-empty directory is refused", rep)
rep, _ = c.call("delete", path="/tmp/a", recursive=True)
rep2, _ = c.call("stat", path="/tmp/a")
check(rep.get("ok") and rep2.get("error", {}).get("code") == "not_found", "delete recursive", (rep, rep2))

# Confinement: nothing outside the sandbox's root is reachable.
secret = os.path.join(WORK, "host-secret")
with open(secret, "w") as f:
    f.write("HOST\n")
outside = os.path.join(WORK, "planted")
for path in ["/../../../../.." + secret, "/tmp/../../.." + secret]:
    rep, fds = c.call("open", path=path, flags="r")
    got = os.read(fds[0], 100) if fds else b""
    for fd in fds:
        os.close(fd)
    check(got != b"HOST\n" and rep.get("error", {}).get("code") == "not_found",
          "open r '%s' does not reach the host file" % path, rep)
rep, fds = c.call("open", path="/tmp/../../.." + outside, flags="w", mkdir=True)
for fd in fds:
    os.write(fd, b"PWNED\n")
    os.close(fd)
check(not os.path.exists(outside), "open w through '..' does not create a file on the host", rep)
# Symlinks planted by the sandbox: absolute, relative and /proc magic links.
rep, ev, out, err = c.run(["sh", "-c", "ln -s %s /tmp/abs && ln -s ../../../../../..%s /tmp/rel && "
                           "ln -s /proc/1/root%s /tmp/magic && ln -s /proc/self/cwd /tmp/self" %
                           (secret, secret, secret)])
check(ev and ev["exit_code"] == 0, "the sandbox plants symlinks pointing out", err)
for link in ["/tmp/abs", "/tmp/rel", "/tmp/magic"]:
    rep, fds = c.call("open", path=link, flags="r")
    got = os.read(fds[0], 100) if fds else b""
    for fd in fds:
        os.close(fd)
    check(got != b"HOST\n" and "error" in rep, "open r of symlink %s does not reach the host file" % link, rep)
    rep, fds = c.call("open", path=link, flags="w")
    for fd in fds:
        os.write(fd, b"PWNED\n")
        os.close(fd)
    with open(secret) as f:
        check(f.read() == "HOST\n", "open w of symlink %s leaves the host file untouched" % link, rep)
rep, fds = c.call("open", path="/tmp/magic", flags="r")
check(rep.get("error") is not None, "a /proc magic link is refused", rep)
rep, _ = c.call("list", path="/tmp/self/")
check("error" in rep or all(e["name"] != "host-secret" for e in rep.get("entries", [])),
      "list through /proc/self stays inside", rep)
rep, fds = c.call("open", path="/dev/null", flags="r")
for fd in fds:
    os.close(fd)
check(rep.get("error", {}).get("code") == "bad_request", "only regular files are handed out", rep)

# An interactive exec: a pty whose master comes with the reply.
rep, fds = c.call("exec", argv=["sh", "-c", "tty; stty size; echo done"], pty=True, cols=100, rows=30)
out = b""
if fds:
    while True:
        try:
            b = os.read(fds[0], 4096)
        except OSError:  # EIO: the slave side is closed
            break
        if not b:
            break
        out += b
    os.close(fds[0])
ev = c.wait_event(lambda m: m.get("ev") == "exit" and m.get("exec") == rep.get("exec"))
lines = out.decode(errors="replace").replace("\r", "").splitlines()
check(len(fds) == 1 and ev["exit_code"] == 0 and lines[:1] and lines[0].startswith("/dev/pts/") and
      lines[1:3] == ["30 100", "done"], "pty exec: a terminal of the asked size, master fd in the reply",
      (rep, out))

# The client goes away while an exec runs: its exit finds no one; nothing breaks.
rep, _ = c.call("exec", fds=[devnull] * 3, argv=["sleep", "0.3"])
c.close()
time.sleep(0.8)

# Disconnect and reconnect: the supervisor and the sandbox go on.
c.close()
time.sleep(0.1)
c = sv.connect()
st, _ = c.call("status")
rep, ev, out, _ = c.run(["echo", "still here"])
check(st.get("state") == "running" and st.get("execs") == [] and out == b"still here\n",
      "survives its client disconnecting (mid-exec too)", st)
c2 = sv.connect()
rep, ev, out, _ = c2.run(["echo", "new conn"])
check(out == b"new conn\n", "a new connection replaces the old one")
c.close()
c = c2

# Diff of the private overlay workspace.
rep, ev, out, _ = c.run(["sh", "-c", "echo data > newfile"])
rep, _ = c.call("diff")
check({"path": "newfile", "kind": "added"} in rep.get("changes", []), "diff lists a file added in the workspace", rep)

# Snapshot and rollback of the overlay workspace.
c.run(["sh", "-c", "echo v1 > state.txt"])
rep, _ = c.call("snapshot", name="first")
check(rep.get("snapshot") == "first", "snapshot 'first'", rep)
rep, ev, out, _ = c.run(["sh", "-c", "cat state.txt; echo v2 > state.txt; rm newfile; echo x > extra"])
check(out == b"v1\n", "the workspace is intact after a snapshot", out)
rep, _ = c.call("rollback", snapshot="first")
check(rep.get("snapshot") == "first", "rollback to 'first'", rep)
rep, ev, out, _ = c.run(["sh", "-c", "cat state.txt newfile; ls"])
check(out == b"v1\ndata\nnewfile\nstate.txt\n", "rollback restores the file, the deleted one, drops the added one", out)
rep, _ = c.call("rollback", snapshot="nope")
check(rep.get("error", {}).get("code") == "not_found", "rollback to an unknown snapshot: not_found", rep)
rep, _ = c.call("exec", fds=[devnull] * 3, argv=["sleep", "5"])
st0, _ = c.call("status")
rep2, _ = c.call("snapshot", name="busy")
check(rep2.get("snapshot") == "busy" and isinstance(rep2.get("frozen_ms"), int),
      "a snapshot while an exec runs: taken with the sandbox frozen", rep2)
st, _ = c.call("status")
check(st.get("state") == "running" and rep["exec"] in st.get("execs", [])
      and st.get("init_pid") == st0.get("init_pid"),
      "... then thawed: the same init, the exec still running", (st0, st))
rep2, _ = c.call("rollback", snapshot="busy")
check(rep2.get("error", {}).get("code") == "conflict", "no rollback while an exec runs", rep2)
c.call("signal", exec=rep["exec"], sig=9)
c.wait_event(lambda m: m.get("ev") == "exit" and m.get("exec") == rep["exec"])
rep, _ = c.call("rollback", snapshot="0")
rep2, ev, out, _ = c.run(["ls"])
check(rep.get("snapshot") == "0" and out == b"", "rollback to 0: the empty workspace again", (rep, out))
c.run(["sh", "-c", "echo data > newfile"])

nudges = [m for m in c.pending if m.get("ev") == "events"]
check(len(nudges) > 0, "the daemon is nudged when the spool grows", c.pending[-5:])
c.pending = [m for m in c.pending if m.get("ev") != "events"]

# Events of the exec trace land in the spool.
evs = events(sv)
kinds = [e["kind"] for e in evs]
execs = [e for e in evs if e["kind"] == "process.exec" and e["attrs"].get("argv", [])[:1] == ["echo"]]
check(kinds[0] == "sandbox.create" and len(execs) >= 2 and evs[0]["session"] == "sess-1",
      "process.exec events (exec trace) land in the spool, with the session label", kinds[:5])

# Destroy: no process, cgroup, mount or run directory is left.
init_pid = sv.ready["init_pid"]
cgroup = evs[0]["attrs"].get("cgroup")
ws_dir = evs[0]["attrs"].get("workspace")
rep, _ = c.call("destroy", reason="test")
check(rep.get("ok") is True, "destroy replies ok", rep)
rc = sv.wait()
check(rc == 0, "the supervisor exits 0 after destroy", rc)
check(not alive(init_pid), "no process of the sandbox is left")
check(cgroup is None or not os.path.exists(cgroup), "its cgroup is removed", cgroup)
with open("/proc/self/mountinfo") as f:
    mi = f.read()
check(sv.id not in mi, "no mount of it is left")
check(sorted(os.listdir(sv.dir)) == ["events.jsonl"], "only the event spool is left in its run directory",
      os.listdir(sv.dir))
check(ws_dir is not None and not os.path.exists(os.path.dirname(ws_dir)), "its private workspace is removed", ws_dir)
kinds = [e["kind"] for e in events(sv)]
check(kinds[-1] == "sandbox.destroy", "the spool ends with sandbox.destroy", kinds[-3:])

# The wall budget ends the sandbox by itself; paused time is not charged.
sv = start(overrides={"limits": {"wall": 1500}})
c = sv.connect()
t0 = time.monotonic()
c.call("pause")
time.sleep(1.0)
c.call("resume")
ev = c.wait_event(lambda m: m.get("ev") == "ended", timeout=10)
took = time.monotonic() - t0
check(ev.get("reason") == "wall" and took >= 2.3, "the wall budget ends the sandbox (after %.1f s, 1 s paused)" % took, ev)
rc = sv.wait()
check(rc == 0 and not alive(sv.ready["init_pid"]), "the supervisor cleans up and exits 0", rc)
kinds = [e["kind"] for e in events(sv)]
check("limit.exceeded" in kinds, "a limit.exceeded event is spooled", kinds)

# The commands budget refuses what is over it; cpu_time ends the sandbox.
sv = start(overrides={"limits": {"commands": 2, "cpu_time": 300}})
c = sv.connect()
r1 = c.run(["true"])[1]
r2 = c.run(["true"])[1]
rep, ev, _, _ = c.run(["true"])
check(r1 and r2 and rep.get("error", {}).get("code") == "limit", "the commands budget refuses the third exec", rep)
sv2 = sv
c.close()
sv = start(overrides={"limits": {"cpu_time": 300}})
c = sv.connect()
rep, _ = c.call("exec", fds=[devnull] * 3, argv=["sh", "-c", "while :; do :; done"])
ev = c.wait_event(lambda m: m.get("ev") == "ended", timeout=10)
check(ev.get("reason") == "cpu_time", "the cpu_time budget ends the sandbox", ev)
check(sv.wait() == 0, "and the supervisor exits 0")

# SIGTERM: a clean end.
os.kill(sv2.proc.pid, signal.SIGTERM)
check(sv2.wait() == 0 and not alive(sv2.ready["init_pid"]), "SIGTERM destroys the sandbox, exit 0")
check(sorted(os.listdir(sv2.dir)) == ["events.jsonl"], "and cleans its run directory", os.listdir(sv2.dir))

# A bad spec fails with the step named.
sv = start(overrides={"limits": {"memory": "lots"}})
check(sv.ready.get("ok") is False and sv.ready["error"]["step"] == "policy" and
      "limits.memory" in sv.ready["error"]["message"], "a bad spec: readiness names the step", sv.ready)
check(sv.wait() != 0, "and the supervisor exits non-zero")

# Commit: an overlay over a host directory; the host sees the changes only at commit.
hostws = os.path.join(WORK, "hostws")
os.makedirs(hostws, exist_ok=True)
with open(os.path.join(hostws, "orig.txt"), "w") as f:
    f.write("orig\n")
sv = start(workspace={"path": hostws, "mode": "overlay"})
c = sv.connect()
rep, ev, out, _ = c.run(["sh", "-c", "pwd; cat orig.txt; echo new > made.txt; echo changed > orig.txt"])
check(out == (hostws + "\norig\n").encode() and not os.path.exists(os.path.join(hostws, "made.txt")),
      "an overlay over a host directory: changes stay in the sandbox", out)
rep, _ = c.call("commit")
with open(os.path.join(hostws, "orig.txt")) as f:
    orig = f.read()
check(rep.get("committed") == 2 and os.path.exists(os.path.join(hostws, "made.txt")) and orig == "changed\n",
      "commit applies them to the host directory", rep)
rep, ev, out, _ = c.run(["cat", "made.txt", "orig.txt"])
check(out == b"new\nchanged\n", "and the sandbox goes on with them", out)
c.call("destroy")
check(sv.wait() == 0 and os.path.exists(os.path.join(hostws, "made.txt")),
      "destroy keeps the host directory")
sys.exit(1 if FAILED else 0)
