#!/bin/bash
# Exec tracing (seccomp user notification, observe mode): every execve/execveat in the
# sandbox is a process.exec event with attrs.trace == "seccomp", and each traced process
# gets a process.exit. Every case runs as root and as nobody (setpriv).
set -u
. "$(dirname "$0")/lib-run.sh"

# Runs paddock with --events into $EV; the python checks read it.
EV=""
trun() { # who, run args...
	local who=$1
	shift
	EV="$T/home/ev-$who-$TAP_N.jsonl"
	rm -f "$EV"
	prun "$who" --events "$EV" "$@"
}

# Python checks get: the events file, the workspace path; helpers below.
pycheck() { # desc, python source (stdin)
	local desc=$1
	PROBE_NAME=${PROBE_NAME:-} python3 - "$EV" "$T/home" 2>"$T/pyerr" <<PY
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
ws = sys.argv[2]
traced = [e["attrs"] for e in evs if e["kind"] == "process.exec" and e["attrs"].get("trace") == "seccomp"]
exits = [e["attrs"] for e in evs if e["kind"] == "process.exit" and e["attrs"].get("trace") == "seccomp"]
def find(argv):
    hits = [a for a in traced if a["argv"] == argv]
    assert hits, ("no traced exec of", argv, [a["argv"] for a in traced])
    return hits[-1]
$(cat)
PY
	local rc=$?
	ok $rc "$desc"
	[ $rc = 0 ] || sed 's/^/#   /' "$T/pyerr" | head -20
}

check_pipeline() {
	local who=$1
	trun "$who" -- sh -c 'echo a | tr a b | cat' >"$T/out" 2>/dev/null
	is "$(cat "$T/out")" b "$who: the pipeline runs under tracing"
	pycheck "$who: every exec of a pipeline is seen with its argv, parents link up, cwd is the in-sandbox path" <<'PY'
sh = find(["sh", "-c", "echo a | tr a b | cat"])
tr = find(["tr", "a", "b"])
cat = find(["cat"])
assert sh["pid"] == 2 and sh["ppid"] == 1, sh
assert tr["ppid"] == sh["pid"] and cat["ppid"] == sh["pid"], (tr, cat, sh)
assert tr["pid"] not in (1, 2) and cat["pid"] not in (1, 2, tr["pid"]), (tr, cat)
assert tr["path"] == "/usr/bin/tr" and tr["syscall"] == "execve" and tr["argc"] == 3, tr
for a in (sh, tr, cat):
    assert a["cwd"] == ws, (a["cwd"], ws)
    assert a["host_pid"] != a["pid"], a
# the sandbox's own execveat of paddock-init is not an event
assert not [a for a in traced if a["argv"] and a["argv"][0] == "paddock-init"], traced
# the main command's exec is recorded once: by the tracer (the init's report adds nothing)
main = [e["attrs"] for e in evs if e["kind"] == "process.exec" and e["attrs"].get("pid") == 2]
assert len(main) == 1 and main[0]["argv"] == ["sh", "-c", "echo a | tr a b | cat"], main
create = [e["attrs"] for e in evs if e["kind"] == "sandbox.create"][0]
assert create["exec_trace"] is True, create
PY
	pycheck "$who: each traced process has one process.exit with its exit status" <<'PY'
for argv in (["tr", "a", "b"], ["cat"]):
    a = find(argv)
    ex = [x for x in exits if x["host_pid"] == a["host_pid"]]
    assert len(ex) == 1, (argv, ex)
    assert ex[0]["pid"] == a["pid"] and ex[0]["exit_code"] == 0, ex
    assert ex[0]["status_source"] in ("zombie", "pidfd"), ex
# the main command's exit is the supervisor's own (with the sandbox's accounting), once
main = [e["attrs"] for e in evs if e["kind"] == "process.exit" and e["attrs"].get("pid") == 2]
assert len(main) == 1 and "trace" not in main[0] and main[0]["exit_code"] == 0, main
PY
}

# Step 2 asks the pidfd and the namespace for an exec's pids; a thread other than the leader
# gets no pidfd (the kernel gives one for a leader only), so /proc/PID/status says: the exec
# is recorded with the leader's pid, which the exec makes it.
check_thread_exec() {
	local who=$1
	trun "$who" -- python3 -c 'import os, threading
print(os.getpid(), os.getppid(), flush=True)
t = threading.Thread(target=os.execv, args=("/bin/echo", ["/bin/echo", "from-thread"]))
t.start(); t.join()' >"$T/out" 2>/dev/null
	is "$(sed -n 2p "$T/out")" from-thread "$who: a thread other than the leader execs (output: $(tr '\n' ' ' <"$T/out"))"
	head -1 "$T/out" >"$T/home/thread-pids"
	pycheck "$who: ... its exec is recorded with the leader's pid and parent" <<'PY'
pid, ppid = (int(x) for x in open(ws + "/thread-pids").read().split())
a = find(["/bin/echo", "from-thread"])
assert a["pid"] == pid and a["ppid"] == ppid, (a, pid, ppid)
PY
}

check_daemon() {
	local who=$1
	# The daemon: a subshell starts it in the background and exits; it is re-parented to
	# init, waits until its first parent is gone, then execs.
	trun "$who" -- sh -c '(setsid sh -c "sleep 0.2; exec /bin/echo daemon-marker" </dev/null >/dev/null 2>&1 &); sleep 0.6' 2>/dev/null
	is $? 0 "$who: the double-forking command ran"
	pycheck "$who: a double-forked daemon's execs are seen, re-parented to init" <<'PY'
s = find(["setsid", "sh", "-c", "sleep 0.2; exec /bin/echo daemon-marker"])
d = find(["sh", "-c", "sleep 0.2; exec /bin/echo daemon-marker"])
m = find(["/bin/echo", "daemon-marker"])
assert d["host_pid"] == s["host_pid"] and m["host_pid"] == d["host_pid"], (s, d, m)
assert m["ppid"] == 1, m
assert find(["sleep", "0.2"])["ppid"] == d["pid"]
PY
}

check_execveat_and_failures() {
	local who=$1
	trun "$who" -- sh -c '/nonexistent/prog arg1 2>/dev/null; python3 -c "import os; fd = os.open(\"/bin/echo\", os.O_RDONLY); os.execve(fd, [\"echo\", \"via-execveat\"], {})"' >/dev/null 2>&1
	is $? 0 "$who: execveat and a failed exec ran"
	pycheck "$who: a failed exec (ENOENT) is recorded as asked" <<'PY'
a = find(["/nonexistent/prog", "arg1"])
assert a["path"] == "/nonexistent/prog" and a["syscall"] == "execve", a
PY
	pycheck "$who: execveat is recorded with its dirfd, flags and argv" <<'PY'
a = find(["echo", "via-execveat"])
assert a["syscall"] == "execveat" and a["path"] == "" and a["flags"] == 0x1000, a
assert a["dirfd"] >= 3, a
PY
}

check_hostile_argv() {
	local who=$1
	trun "$who" -- sh -c 'exec /bin/true "a
b" "$(printf "\377\376ok")" "$(head -c 70000 /dev/zero | tr "\0" x)"' 2>/dev/null
	is $? 0 "$who: an exec with hostile arguments ran"
	pycheck "$who: newlines kept, invalid UTF-8 replaced and given in hex, long argv cut and marked" <<'PY'
a = [x for x in traced if x["argv"][:2] == ["/bin/true", "a\nb"]][0]
assert a["argv"][2] == "\ufffd\ufffdok", a["argv"][2]
assert a["argv_hex"] == [None, None, "fffe6f6b"] + [None] * (len(a["argv"]) - 3), a["argv_hex"]
assert a["argv_truncated"] is True and "argc" not in a, {k: v for k, v in a.items() if k != "argv"}
assert 60000 < len(a["argv"][3]) < 65536 and set(a["argv"][3]) == {"x"}, len(a["argv"][3])
PY
	trun "$who" -- sh -c 'exec /bin/true $(seq 300)' 2>/dev/null
	pycheck "$who: more than 256 arguments: the first 256 are kept, marked truncated" <<'PY'
a = [x for x in traced if x["argv"][:2] == ["/bin/true", "1"]][0]
assert len(a["argv"]) == 256 and a["argv"][-1] == "255" and a["argv_truncated"] is True, len(a["argv"])
PY
}

check_exit_status() {
	local who=$1
	trun "$who" -- sh -c 'sh -c "exit 5"; python3 -c "import subprocess, time; p = subprocess.Popen([\"sh\", \"-c\", \"exit 7\"]); time.sleep(0.4); p.wait()"; sh -c "kill -KILL \$\$"; exit 0' 2>/dev/null
	is $? 0 "$who: commands with known exit statuses ran"
	pycheck "$who: process.exit carries the exit status, or the signal" <<'PY'
def exit_of(argv):
    a = find(argv)
    ex = [x for x in exits if x["host_pid"] == a["host_pid"]]
    assert len(ex) == 1, (argv, ex)
    return ex[0]
e5 = exit_of(["sh", "-c", "exit 5"])
assert e5["exit_code"] == 5 and e5["status_source"] in ("zombie", "pidfd"), e5
e7 = exit_of(["sh", "-c", "exit 7"])
# its parent does not reap it for 0.4 s: read from the zombie, CPU time included
assert e7["exit_code"] == 7 and e7["status_source"] == "zombie" and e7["cpu_ms"] >= 0, e7
k = exit_of(["sh", "-c", "kill -KILL $$"])
assert k["signal"] == "KILL" and "exit_code" not in k, k
PY
}

# Execs in a burst, and many at once from parallel processes: the notifications queue on one
# listener (answered with synchronous wake-ups where the kernel has them); each is recorded once
# with its exit, none lost or doubled.
check_burst() {
	local who=$1
	trun "$who" -- sh -c 'for i in $(seq 30); do /bin/true seq-$i; done; for i in $(seq 16); do /bin/true par-$i & done; wait; echo burst-done' >"$T/out" 2>/dev/null
	is "$?:$(cat "$T/out")" "0:burst-done" "$who: 30 execs in a row and 16 at once ran under tracing"
	pycheck "$who: each of the 46 execs is recorded once, with one process.exit each" <<'PY'
want = [["/bin/true", "seq-%d" % i] for i in range(1, 31)] + [["/bin/true", "par-%d" % i] for i in range(1, 17)]
got = [a for a in traced if a["argv"][:1] == ["/bin/true"]]
assert sorted(map(tuple, (a["argv"] for a in got))) == sorted(map(tuple, want)), [a["argv"] for a in got]
for a in got:
    ex = [x for x in exits if x["host_pid"] == a["host_pid"]]
    assert len(ex) == 1 and ex[0]["exit_code"] == 0, (a["argv"], ex)
PY
}

check_off() {
	local who=$1 prof="$T/home/notrace.yaml"
	trun "$who" --no-exec-trace -- sh -c 'echo a | tr a b | cat' >/dev/null 2>&1
	pycheck "$who: --no-exec-trace: no traced event, the main command's events stay" <<'PY'
assert traced == [] and exits == [], (traced, exits)
kinds = [e["kind"] for e in evs]
assert kinds == ["sandbox.create", "process.exec", "process.exit", "sandbox.destroy"], kinds
assert evs[0]["attrs"]["exec_trace"] is False
PY
	printf 'extends: default\naudit:\n  exec_trace: false\n' >"$prof"
	chmod 0644 "$prof"
	trun "$who" --profile "$prof" -- sh -c 'echo a | tr a b | cat' >/dev/null 2>&1
	pycheck "$who: a profile with audit.exec_trace false: no traced event" <<'PY'
assert traced == [] and exits == [], (traced, exits)
PY
}

# The escape battery runs without an event sink (tracing off); these attempts run with tracing
# on: still refused, and the attempt's own exec is recorded.
check_escapes_traced() {
	local who=$1 name out rc
	for name in seccomp-listener mount-tmpfs unshare-user ptrace-init; do
		# LeakSanitizer (ASan builds of the probe) cannot work where ptrace is denied.
		trun "$who" --ro "$PROBE" -e ASAN_OPTIONS=detect_leaks=0 -- "$PROBE" "$name" \
			>"$T/out" 2>/dev/null; rc=$?
		out=$(cat "$T/out")
		[ "$rc" = 1 ] && printf '%s' "$out" | grep -qE "^$name: blocked \((EPERM|EBUSY)\)$"
		ok $? "$who: with tracing on, $name is refused (exit $rc: $out)"
		PROBE_NAME=$name pycheck "$who: the $name attempt's exec is recorded" <<'PY'
import os
find([os.environ["PROBE"], os.environ["PROBE_NAME"]])
PY
	done
}

# The exec's path and argv are copied with process_vm_readv (src/engine/exectrace.c): the
# path once, the pointer array once, and argv[0], at the path's own address, not again. A
# string that ends near the end of its page (the stack's strings do) ends the copy there:
# no read of the next page, which is the stack's end and fails with EFAULT.
check_reads() {
	local who=$1 rc n bad
	local PRUN
	# LeakSanitizer cannot run under ptrace: a sanitizer build's leak check is off for this run.
	PRUN_ENV=(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
	prun_cmd "$who"
	PRUN_ENV=()
	EV="$T/home/ev-$who-reads.jsonl"
	rm -f "$EV"
	(cd "$T/home" && strace -qq -e trace=process_vm_readv -o "$T/reads-$who" "${PRUN[@]}" run \
		--workspace-mode none --events "$EV" -- /bin/true)
	rc=$?
	n=$(grep -c '^process_vm_readv(' "$T/reads-$who")
	bad=$(grep -c 'EFAULT' "$T/reads-$who")
	is "$rc:$n:$bad" "0:2:0" \
		"$who: one exec of /bin/true: 2 reads of its memory, none failed ($n reads, $bad EFAULT)"
	[ "$rc:$n:$bad" = "0:2:0" ] || sed 's/^/#   /' "$T/reads-$who" | head -n 8
	pycheck "$who: ... and the exec is recorded whole (path and argv)" <<'PY'
a = find(["/bin/true"])
assert a["path"] == "/bin/true", a
assert a["argc"] == 1 and "read_error" not in a, a
PY
}

check_profile_field() {
	local out
	out=$("$PADDOCK" profile show default 2>&1 | grep -A1 '^audit:' | tr -d ' \n')
	is "$out" "audit:exec_trace:true" "profile show: audit.exec_trace is on by default"
	printf 'audit:\n  exec_trace: maybe\n' >"$T/bad.yaml"
	out=$("$PADDOCK" profile check "$T/bad.yaml" 2>&1)
	case "$out" in *audit.exec_trace*) true ;; *) false ;; esac
	ok $? "profile check: a bad audit.exec_trace is named (got: $out)"
}

: "${ESCAPE_PROBE:?ESCAPE_PROBE must name the escape-probe binary}"
cp "$ESCAPE_PROBE" "$T/bin/escape-probe" && chmod 0755 "$T/bin/escape-probe"
export PROBE="$T/bin/escape-probe"

check_profile_field
for who in root user; do
	check_escapes_traced "$who"
	check_pipeline "$who"
	check_daemon "$who"
	check_execveat_and_failures "$who"
	check_hostile_argv "$who"
	check_exit_status "$who"
	check_burst "$who"
	check_off "$who"
	check_reads "$who"
	check_thread_exec "$who"
done
done_testing
