#!/bin/bash
# Resource bombs are contained and the host is unharmed: fork bomb, memory bomb, filling
# /tmp, fd exhaustion, CPU spin past the time limit, CPU bandwidth. As root (real cgroups)
# and as nobody (with a cgroup delegated to it, as an administrator would set up).
set -u
# In a pid namespace of its own (lib-run.sh): the processes counted are this suite's.
. "$(dirname "$0")/lib-run.sh"

host_procs() { ps -e --no-headers | wc -l; }
event_limit() { # FILE LIMIT -> 0 if a limit.exceeded event for LIMIT is in FILE
	python3 -c 'import json,sys; sys.exit(0 if any(e["kind"]=="limit.exceeded" and e["attrs"]["limit"]==sys.argv[2] for e in map(json.loads, open(sys.argv[1]))) else 1)' "$1" "$2"
}

bombs() {
	local who=$1 ws ev before after rc out t0 t1
	ws=$(mkws)
	before=$(host_procs)

	# Fork bomb: the pids limit holds, the timeout ends it, the host can still fork.
	ev="$ws/fork.jsonl"
	t0=$(date +%s%N)
	prun "$who" -w "$ws" --pids 64 --timeout 3s --events "$ev" -- python3 -c '
import os
while True:
    try:
        os.fork()
    except OSError:
        pass' >/dev/null 2>&1
	rc=$?
	t1=$(date +%s%N)
	is "$rc" 124 "$who: fork bomb under --pids 64 ends at the time limit (124)"
	event_limit "$ev" pids; ok $? "$who: fork bomb: limit.exceeded pids recorded"
	[ $(( (t1 - t0) / 1000000 )) -lt 10000 ]; ok $? "$who: fork bomb: run returned in $(( (t1 - t0) / 1000000 )) ms"
	/bin/true; ok $? "$who: fork bomb: the host can still fork"
	after=$(host_procs)
	[ "$after" -le $((before + 5)) ]; ok $? "$who: fork bomb: no process left on the host ($before before, $after after)"

	# Memory bomb: the OOM killer acts inside the sandbox only.
	ev="$ws/mem.jsonl"
	prun "$who" -w "$ws" --memory 64M --events "$ev" -- python3 -c 'b = bytearray(1 << 30); b[::4096] = b"x" * len(b[::4096])' >/dev/null 2>&1
	is $? 123 "$who: memory bomb under --memory 64M gives 123"
	event_limit "$ev" memory; ok $? "$who: memory bomb: limit.exceeded memory recorded"

	# Filling /tmp: the tmpfs size limit holds.
	cat > "$ws/small.yaml" <<YAML
extends: default
name: small
limits:
  tmp_size: 16M
  nofile: 64
YAML
	out=$(prun "$who" -w "$ws" --profile "$ws/small.yaml" -- sh -c 'dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1 | grep -o "No space left on device"; du -m /tmp/fill | cut -f1' 2>/dev/null | tr '\n' ' ')
	case "$out" in *"No space left"*) r=0 ;; *) r=1 ;; esac
	ok $r "$who: filling /tmp stops at the tmpfs limit ($out)"
	[ "$(echo "$out" | awk '{print $NF}')" -le 16 ]; ok $? "$who: /tmp holds at most 16 MiB"

	# fd exhaustion: RLIMIT_NOFILE holds.
	out=$(prun "$who" -w "$ws" --profile "$ws/small.yaml" -- python3 -c '
import os
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(len(fds), e.strerror)' 2>/dev/null)
	case "$out" in *"Too many open files"*) r=0 ;; *) r=1 ;; esac
	ok $r "$who: fd exhaustion stops at limits.nofile ($out)"
	[ "${out%% *}" -lt 64 ]; ok $? "$who: fewer than 64 fds could be opened"

	# CPU spin past the time limit: killed on time, nothing left running.
	t0=$(date +%s%N)
	# Named by this suite's pid (the shell's $0), so another suite's spin is not counted.
	prun "$who" -w "$ws" --timeout 1s -- sh -c 'while :; do :; done' "bombs-spin-$$" 2>/dev/null
	rc=$?
	t1=$(date +%s%N)
	is "$rc" 124 "$who: a CPU spin past --timeout 1s gives 124"
	[ $(( (t1 - t0) / 1000000 )) -lt 3000 ]; ok $? "$who: ...and run returned in $(( (t1 - t0) / 1000000 )) ms"
	pgrep -f "bombs-spin-$$" >/dev/null; is $? 1 "$who: ...and the spinning process is gone"

	# CPU bandwidth: two seconds of spinning under --cpus 0.25 get about half a second of CPU.
	out=$(prun "$who" -w "$ws" --cpus 0.25 --timeout 2s --stats -- sh -c 'while :; do :; done' 2>&1 | grep -o 'cpu [0-9.]* ms' | grep -o '[0-9.]*')
	awk -v c="${out:-99999}" 'BEGIN { exit !(c < 900) }'; ok $? "$who: --cpus 0.25 caps a 2 s spin at ${out:-?} ms of CPU (< 900)"
}

bombs root
delegate_cgroup
PRUN_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
bombs user
PRUN_ENV=()
undelegate_cgroup
done_testing
