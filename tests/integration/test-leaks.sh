#!/bin/bash
# Leak check: consecutive `paddock run -- /bin/true` (1,000 as root, 200 as nobody) leave no
# process, mount, cgroup, temp dir or fd behind; the sandboxed command sees only stdio.
set -u
# In pid and mount namespaces of its own, with its own /tmp, /run and /dev/shm (lib-run.sh):
# the processes, mounts and temp dirs counted below are this suite's, whatever else runs on
# the machine.
OWN_NAMESPACES=1
. "$(dirname "$0")/lib-run.sh"
ROOT_RUNS=${PDK_LEAK_RUNS:-1000}
USER_RUNS=$((ROOT_RUNS / 5))
# The root runs' sandboxes are made under a cgroup of this suite's own, as the user runs'
# are under the one delegated to nobody: the cgroups counted are this suite's.
ROOT_CG="/paddock-test-$TEST_ID-root"
make_cgroup "$ROOT_CG"
trap 'undelegate_cgroup; rm_cgroup "$ROOT_CG"; rm -rf "$T"' EXIT

snapshot() {
	ps -e --no-headers -o comm | grep -cE '^paddock' # paddock / paddock-init alive
	wc -l < /proc/self/mountinfo
	find /sys/fs/cgroup -maxdepth 5 -type d -path "*/paddock-test-$TEST_ID*/paddock-*" 2>/dev/null | wc -l
	# RUNTIME/cgroups, the killed runs' cgroup records (docs/internals/cgroup.md), stays: one
	# file of slots, each free again ('#') at its run's end; a slot still holding a record
	# (a digit first) counts as something left.
	{ find /tmp /run /dev/shm -maxdepth 1 -name '*paddock*' ! -path "$T" 2>/dev/null | grep -v '^/tmp/paddock-it-'
		ls -A "$T/run-root" "$T/run-user" | grep -vx cgroups
		cat "$T/run-root/cgroups" "$T/run-user/cgroups" 2>/dev/null |
			python3 -c 'import sys; d = sys.stdin.buffer.read(); [print(k) for k in range(0, len(d), 4096) if d[k:k + 1].isdigit()]'; } | wc -l
	ps -e --no-headers -o ppid=,pid= | awk '$1 != 2 && $2 != 2' | wc -l # kernel threads come and go
}

runs() { # WHO N
	local who=$1 n=$2 i fails=0 t0 t1
	t0=$(date +%s%N)
	for ((i = 1; i <= n; i++)); do
		prun "$who" -- /bin/true 2>/dev/null || fails=$((fails + 1))
		if ((i % 250 == 0)); then echo "# $who: $i/$n runs"; fi
	done
	t1=$(date +%s%N)
	echo "# $who: $n runs in $(( (t1 - t0) / 1000000 )) ms ($(( (t1 - t0) / 1000 / n )) us each, including the shell)"
	is "$fails" 0 "$who: $n consecutive runs all succeeded"
}

compare() { # WHO BEFORE AFTER
	local who=$1
	local -a b a
	mapfile -t b <<< "$2"
	mapfile -t a <<< "$3"
	is "${a[0]}" "${b[0]}" "$who: no paddock or paddock-init process left"
	is "${a[1]}" "${b[1]}" "$who: no mount left (the suite's mountinfo has ${a[1]} lines)"
	is "${a[2]}" "${b[2]}" "$who: no sandbox cgroup left"
	is "${a[3]}" "${b[3]}" "$who: no temp dir left in /tmp, /run, /dev/shm or the runtime directories"
	[ "${a[4]}" -le $((b[4] + 3)) ]; ok $? "$who: no process left (${b[4]} before, ${a[4]} after)"
}

PRUN_ENV=(PADDOCK_CGROUP_PARENT="$ROOT_CG")
before=$(snapshot)
runs root "$ROOT_RUNS"
compare root "$before" "$(snapshot)"
left=$(find /sys/fs/cgroup/*"$ROOT_CG" -mindepth 1 -type d 2>/dev/null | wc -l)
is "$left" 0 "root: nothing left under the suite's cgroup"
PRUN_ENV=()

delegate_cgroup
PRUN_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
before=$(snapshot)
runs user "$USER_RUNS"
compare user "$before" "$(snapshot)"
left=$(find /sys/fs/cgroup/*"$DELEGATED" -mindepth 1 -type d 2>/dev/null | wc -l)
is "$left" 0 "user: nothing left under the delegated cgroup"
PRUN_ENV=()
undelegate_cgroup

# A supervisor killed while its sandbox's child is still setting up, between the clone and the
# child's parent-death signal (a loaded machine once held a child there, under a daemon
# stopped with --kill-on-exit): strace holds the child's first prctl(), PR_SET_PDEATHSIG, for
# 5 s and the supervisor is SIGKILLed meanwhile. The child must end by itself (it once waited
# forever on its own traced execveat of the init); its cgroups, which nobody is left to remove
# after a `paddock run` killed by SIGKILL, are empty: rmdir removes them.
killed_in_setup() { # WHO
	local who=$1 log="$T/setup-kill-$1.log" n=0 tracer child="" sup cgs i alive left c g
	local PRUN
	prun_cmd "$who"
	[ "$who" = root ] || n=5 # setpriv and its 4 options: strace runs as the user too
	: >"$log"
	[ "$who" = root ] || chown "$UNPRIV_UID:$UNPRIV_UID" "$log"
	(cd "$T/home" && exec "${PRUN[@]:0:n}" strace -f -qq -o "$log" -e trace=prctl \
		-e inject=prctl:delay_enter=5000000:when=1 "${PRUN[@]:n}" run -- /bin/true) \
		>/dev/null 2>&1 &
	tracer=$!
	for ((i = 0; i < 300; i++)); do
		child=$(sed -n 's/^\([0-9]*\) *prctl(PR_SET_PDEATHSIG.*/\1/p' "$log" 2>/dev/null | head -1)
		[ -n "$child" ] && break
		sleep 0.1
	done
	sup=$(ps -o ppid= -p "${child:-0}" | tr -d ' ')
	[ -n "$child" ] || sed "s/^/# strace: /" "$log" | head -5
	cgs=$(sed -n 's/^[0-9]*:[^:]*:\(.*paddock-[0-9a-f]*\)$/\1/p' "/proc/${child:-0}/cgroup" 2>/dev/null | sort -u)
	[ -n "$child" ] && [ -n "$sup" ] && kill -9 "$sup"
	ok $? "$who: the supervisor was killed while its child's parent-death signal was held"
	wait_gone "$tracer"
	alive=$((1 - $?))
	is "$alive" 1 "$who: the sandbox's child ended by itself after its supervisor died during setup"
	if [ "$alive" = 0 ]; then
		echo "# left: $(ps -o pid=,ppid=,stat=,wchan:32=,args= -p "$child")"
		kill -9 "$child" "$tracer" 2>/dev/null
	fi
	wait "$tracer"
	grep -q "^$sup *+++ killed by SIGKILL" "$log" && ! grep -q "^$child *+++ exited with 0" "$log"
	ok $? "$who: the supervisor died before the child set its parent-death signal; the init never ran"
	[ -n "$cgs" ]; ok $? "$who: the child was in its sandbox's cgroups ($(echo $cgs))"
	left=$(cgroups_removed $cgs)
	is "$left" 0 "$who: no process is left in the sandbox's cgroups, which rmdir removes"
}
PRUN_ENV=(PADDOCK_CGROUP_PARENT="$ROOT_CG")
killed_in_setup root
delegate_cgroup
PRUN_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
killed_in_setup user
PRUN_ENV=()
undelegate_cgroup

# fds: the command sees exactly stdio (ls adds the one it reads /proc/self/fd with).
for who in root user; do
	out=$(prun "$who" -- ls /proc/self/fd 3</dev/null 4</dev/null 2>/dev/null | tr '\n' ' ')
	is "$out" "0 1 2 3 " "$who: the command inherits only stdio, not the caller's fds 3 and 4"
done
# The supervisor's own fds while a sandbox runs: signalfd, pidfd, the control socket, the
# exec-tracing listener and the name server's socket (docs/egress.md), and the run's audit
# spool (docs/audit.md: no connection to the audit store, which the next audit command folds
# the spool into);
# the run's slot of RUNTIME/cgroups, locked while it lives (docs/internals/cgroup.md);
# nothing from setup (cgroup.procs, the init binary, the sync socket) stays open. Fds the
# caller passed down are not paddock's and are not counted.
# The supervisor is this run's own process (its argv ends with the command, named by this
# suite's pid), read once the command runs; not the newest paddock of the machine, which may
# be another suite's.
mark=$$
prun root -- sleep "60.$mark" 2>/dev/null &
for _ in $(seq 1 300); do
	pgrep -f "^sleep 60\.$mark\$" >/dev/null && break
	sleep 0.1
done
sup=$(pgrep -f -n "paddock run .*-- sleep 60\.$mark\$")
fds=$(ls -l "/proc/$sup/fd" 2>/dev/null)
pkill -f "^sleep 60\.$mark\$"
wait
own=$(printf '%s\n' "$fds" | grep -cE 'anon_inode|socket:')
is "$own" 5 "root: the supervisor holds 5 fds of its own while a sandbox runs (signalfd, pidfd, control, exec-tracing listener, name server)"
files=$(printf '%s\n' "$fds" | grep -oE '[^/ ]+/(audit\.db(-wal|-shm)?|audit-spool/[0-9a-f-]{36}\.jsonl)$' | sed -E 's/[0-9a-f-]{36}/ID/' | sort | tr '\n' ' ')
is "$files" "state-root/audit-spool/ID.jsonl " \
	"root: and its audit spool, no audit store file (no SQLite in a run)"
printf '%s\n' "$fds" | grep -qE '/sys/fs/cgroup|cgroup\.procs|paddock-init'; is $? 1 "root: no setup fd (cgroup.procs, init binary) stays open"
is "$(printf '%s\n' "$fds" | grep -cE '/run-root/cgroups$')" 1 "root: and the lock of its cgroup's record"
done_testing
