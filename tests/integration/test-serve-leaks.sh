#!/bin/bash
# paddock serve leak test (TAP): PDK_CYCLES create/exec/destroy cycles through the daemon
# (default 200; PDK_CYCLES=10000 for the long run), then nothing may be left behind:
# the daemon's open descriptors, host mounts, cgroups, processes, RUNDIR and STATE entries
# are counted before and after. As root with PDK_CYCLES cycles, and as nobody with a
# quarter of them (each cycle is the same code path; the rootless run proves the paths
# that differ: user namespaces, delegated cgroups).
# In pid and mount namespaces of its own (lib-run.sh): the mounts and processes counted are
# this suite's, whatever else runs on the machine; the root daemon's sandboxes are made
# under a cgroup of the suite's own, the unprivileged one's under the cgroup delegated to
# nobody.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"
ROOT_CG="/paddock-test-$TEST_ID-root"
make_cgroup "$ROOT_CG"
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm_cgroup "$ROOT_CG"; rm -rf "$T"' EXIT

CYCLES=${PDK_CYCLES:-200}

if ! have_supervisor; then
	echo "# skipped: this build has no 'paddock supervise' (the supervisor)"
	[ "${PDK_MUST_WORK:-0}" = 1 ] && ok 1 "the supervisor is built (PDK_MUST_WORK=1)"
	done_testing
	exit $?
fi

fds_of() { ls "/proc/$1/fd" | wc -l; }
state_entries() {
	# The stores' files, and the audit signing key (made at the first checkpoint), are not per sandbox.
	find "$T/serve-$1/state" -mindepth 1 -not -name 'audit.db*' -not -name 'daemon.db*' -not -name 'audit-key*' | wc -l
}

leak_cycles() {
	local who=$1 n=$2 pid sock i fd0 fd1 mnt0 mnt1 st0 st1 fails=0
	serve_start "$who"
	ok $? "$who: the daemon starts"
	pid=$(serve_pid "$who")
	sock=$(sock_of "$who")
	# One warm-up cycle: lazily opened things (the audit store's statements) are counted as base.
	api "$who" POST /v1/sandboxes '{}'
	api "$who" DELETE "/v1/sandboxes/$(jq_get "$BODY" id)"
	sleep 0.3
	fd0=$(fds_of "$pid")
	mnt0=$(wc -l </proc/self/mountinfo)
	st0=$(state_entries "$who")
	: >"$T/ids-$who"
	chmod 0666 "$T/ids-$who"
	# One driver process for every cycle (serve-cycles.py): a shell's curl and jq per step
	# would make a 10,000-cycle run last hours; failures are printed with their cycle.
	install -m 0755 "$(dirname "$0")/serve-cycles.py" "$T/serve-cycles.py"
	fails=$(as "$who" python3 "$T/serve-cycles.py" "$sock" "$n" "$T/ids-$who")
	[ -n "$fails" ] || fails="the driver failed"
	is "$(wc -l <"$T/ids-$who")" "$n" "$who: $n sandboxes were created"
	is "$fails" "0" "$who: $n create/exec/destroy cycles succeed"
	# Destroys finish asynchronously (the supervisor tears down, then closes its socket).
	for i in $(seq 1 50); do
		api "$who" GET /v1/sandboxes
		[ "$(printf '%s' "$BODY" | jq '.sandboxes | length')" = 0 ] && break
		sleep 0.1
	done
	is "$BODY" '{"sandboxes":[]}' "$who: the daemon forgot every sandbox"
	fd1=$(fds_of "$pid")
	is "$fd1" "$fd0" "$who: the daemon's open descriptors: $fd0 before, $fd1 after"
	mnt1=$(wc -l </proc/self/mountinfo)
	is "$mnt1" "$mnt0" "$who: host mounts: $mnt0 before, $mnt1 after"
	# A sandbox's cgroup is named after the random tail of its id (sandbox.c).
	cut -c25- "$T/ids-$who" >"$T/tails-$who"
	is "$(find /sys/fs/cgroup -type d 2>/dev/null | grep -c -F -f "$T/tails-$who")" "0" \
		"$who: no cgroup of any of the $n sandboxes is left"
	is "$(ps -eo args | grep -v grep | grep -c -F -f "$T/ids-$who")" "0" \
		"$who: no process of any of the $n sandboxes is left"
	is "$(ls "$T/serve-$who/run/sb" | wc -l)" "0" "$who: RUNDIR/sb is empty"
	st1=$(state_entries "$who")
	is "$st1" "$st0" "$who: STATE entries: $st0 before, $st1 after"
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: clean stop"
	as "$who" "$T/bin/paddock" audit verify >"$T/verify-$who" 2>&1
	ok $? "$who: paddock audit verify passes over $n cycles of events"
}

# What an engineer once did: a daemon with a warm pool stopped with --kill-on-exit while a
# pool member was still starting. strace holds the member's sandbox child at its first
# prctl(), PR_SET_PDEATHSIG, for 5 s; the daemon is stopped meanwhile and kills the member's
# supervisor. The child must end by itself (it once waited forever on its own traced
# execveat of the init, docs/internals/sandbox.md); the sandbox's cgroups are empty (the
# supervisor died before it wrote where they are, so the daemon cannot remove them: rmdir
# does).
stopped_while_filling() { # WHO
	local who=$1 log="$T/fill-$1.log" daemon="" tracer child="" sup cgs i alive left=0 c g
	mkdir -p "$T/serve-$who"
	: >"$log"
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$T/serve-$who" "$log"
	(as_exec "$who" strace -f -qq -o "$log" -e trace=prctl \
		-e inject=prctl:delay_enter=5000000:when=1 \
		"$T/bin/paddock" serve --pool default=1 --kill-on-exit >"$T/serve-$who.log" 2>&1) &
	tracer=$!
	# The member's sandbox child: the one prctl() caller that is pid 1 of a pid namespace.
	for ((i = 0; i < 600; i++)); do
		for c in $(sed -n 's/^\([0-9]*\) *prctl(PR_SET_PDEATHSIG.*/\1/p' "$log"); do
			grep -qE '^NSpid:.*[[:space:]]1$' "/proc/$c/status" 2>/dev/null && child=$c
		done
		[ -n "$child" ] && break
		sleep 0.1
	done
	sup=$(ps -o ppid= -p "${child:-0}" | tr -d ' ')
	daemon=$(pgrep -P "$tracer" | head -1)
	cgs=$(sed -n 's/^[0-9]*:[^:]*:\(.*paddock-[0-9a-f]*\)$/\1/p' "/proc/${child:-0}/cgroup" 2>/dev/null | sort -u)
	[ -n "$child" ] && [ -n "$daemon" ] && kill -TERM "$daemon"
	ok $? "$who: the daemon was stopped while its pool member's child was held in setup"
	wait_gone "$tracer"
	alive=$((1 - $?))
	is "$alive" 1 "$who: the daemon, the member's supervisor and its sandbox's child all ended"
	if [ "$alive" = 0 ]; then
		echo "# left: $(ps -o pid=,ppid=,stat=,wchan:32=,args= -p "$child")"
		kill -9 "$child" "$daemon" "$tracer" 2>/dev/null
	fi
	wait "$tracer"
	grep -q "^$sup *+++ killed by SIGKILL" "$log" && ! grep -q "^$child *+++ exited with 0" "$log"
	ok $? "$who: the supervisor was killed before the child set its parent-death signal; the init never ran"
	[ -n "$cgs" ]; ok $? "$who: the child was in its sandbox's cgroups ($(echo $cgs))"
	left=$(cgroups_removed $cgs)
	is "$left" 0 "$who: no process is left in the sandbox's cgroups, which rmdir removes"
	rm -rf "$T/serve-$who"
}

# A daemon stopped (--kill-on-exit) while pool members start: each member's start is let
# finish and its supervisor ends the sandbox, removing its cgroups. It was once killed at
# once, before it had written where its cgroups are: every stop like this left one to four
# members' directories. ROUNDS stops; the stop is counted as hitting a start when a
# member's run directory has no control socket yet (the supervisor's last setup step).
stopped_while_starting() { # WHO ROUNDS CGROUP
	local who=$1 rounds=$2 cg=$3 r i d hit=0 rcs=""
	for ((r = 0; r < rounds; r++)); do
		rm -rf "$T/serve-$who"
		serve_start "$who" --pool default=6 --kill-on-exit || break
		for ((i = 0; i < 500; i++)); do
			for d in "$T/serve-$who/run/sb"/*/; do
				[ -d "$d" ] && [ ! -e "$d/ctl.sock" ] && break 2
			done
			sleep 0.002
		done
		for d in "$T/serve-$who/run/sb"/*/; do
			[ -d "$d" ] && [ ! -e "$d/ctl.sock" ] && hit=$((hit + 1))
		done
		serve_stop "$who"
		rcs="$rcs$SERVE_RC"
	done
	is "$rcs" "$(printf '0%.0s' $(seq 1 "$rounds"))" "$who: $rounds daemons stopped while their pools filled, each cleanly"
	ok $((hit == 0)) "$who: $hit members were still starting when their daemon was stopped"
	sleep 0.3
	is "$(find /sys/fs/cgroup/*"$cg" -mindepth 1 -type d 2>/dev/null | wc -l)" 0 \
		"$who: no member's cgroup is left"
	rm -rf "$T/serve-$who"
}

# A DELETE of a sandbox that is still starting (a cold create, seen in the list as
# "starting") waits for the start, then ends it the usual way: answered "ended", its
# create answered too, and its cgroups gone. A start takes milliseconds, so strace holds
# each process's first prctl() for 1 s (the supervisor's and its sandbox child's
# PR_SET_PDEATHSIG): the start lasts about 2 s, within the daemon's 3 s bound.
deleted_while_starting() { # WHO
	local who=$1 i id="" state="" creator tracer daemon
	mkdir -p "$T/serve-$who"
	(as_exec "$who" strace -f -qq -o /dev/null -e trace=prctl \
		-e inject=prctl:delay_enter=1000000:when=1 \
		"$T/bin/paddock" serve >"$T/serve-$who.log" 2>&1) &
	tracer=$!
	for ((i = 0; i < 300; i++)); do
		api "$who" GET /v1/health
		[ "$CODE" = 200 ] && break
		sleep 0.05
	done
	is "$CODE" 200 "$who: the daemon starts (under strace)"
	daemon=$(pgrep -P "$tracer" | head -1)
	(as "$who" curl -s --unix-socket "$(sock_of "$who")" -X POST -d '{"env":{"A":"1"}}' \
		-o "$T/create-$who.out" -w '%{http_code}' http://paddock/v1/sandboxes \
		>"$T/create-$who.code") &
	creator=$!
	for ((i = 0; i < 200; i++)); do
		api "$who" GET /v1/sandboxes
		id=$(printf '%s' "$BODY" | jq -r '.sandboxes[0].id // empty')
		state=$(printf '%s' "$BODY" | jq -r '.sandboxes[0].state // empty')
		[ -n "$id" ] && break
		sleep 0.01
	done
	is "$state" starting "$who: the cold create's sandbox is listed while it starts"
	api "$who" DELETE "/v1/sandboxes/$id"
	is "$CODE $(jq_get "$BODY" state)" "200 ended" "$who: its DELETE waited for the start and ended it"
	wait "$creator"
	is "$(cat "$T/create-$who.code")" 201 "$who: the create was answered"
	sleep 0.2
	is "$(find /sys/fs/cgroup -type d -name "paddock-$(printf '%s' "$id" | cut -c25-)" | wc -l)" 0 \
		"$who: its cgroups are gone"
	[ -n "$daemon" ] && kill -TERM "$daemon"
	wait "$tracer"
	rm -rf "$T/serve-$who"
}

SERVE_ENV=(PADDOCK_CGROUP_PARENT="$ROOT_CG")
stopped_while_starting root 6 "$ROOT_CG"
deleted_while_starting root
stopped_while_filling root
leak_cycles root "$CYCLES"
is "$(find /sys/fs/cgroup/*"$ROOT_CG" -mindepth 1 -type d 2>/dev/null | wc -l)" 0 \
	"root: nothing left under the suite's cgroup"
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
stopped_while_starting user 3 "$DELEGATED"
stopped_while_filling user
leak_cycles user "$(( (CYCLES + 3) / 4 ))"
is "$(find /sys/fs/cgroup/*"$DELEGATED" -mindepth 1 -type d 2>/dev/null | wc -l)" 0 \
	"user: nothing left under the delegated cgroup"
SERVE_ENV=()
done_testing
