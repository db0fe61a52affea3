#!/bin/bash
# paddock serve: agents claiming at once (issue 18), as root and as an unprivileged user
# (TAP). A warm pool of BURST_N sandboxes (default 50, the issue's figure); BURST_N clients,
# each on its own connection, claim together and each runs a first exec. The daemon stores the
# audit records of one turn of its event loop in one transaction: every client, as soon as
# its answer arrives, finds its request's record (sandbox.claim, exec.request) already in
# audit.db; the chain and its signatures verify once the daemon has stopped.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

N=${BURST_N:-50}

if ! have_supervisor; then
	echo "# skipped: this build has no 'paddock supervise' (the supervisor)"
	[ "${PDK_MUST_WORK:-0}" = 1 ] && ok 1 "the supervisor is built (PDK_MUST_WORK=1)"
	done_testing
	exit $?
fi

burst_tests() {
	local who=$1 n ready out
	serve_start "$who" --pool "default=$N" --kill-on-exit
	ok $? "$who: the daemon starts with a pool of $N"
	# The pool fills at most 4 at a time; the wait is bounded, not timed.
	for n in $(seq 1 1200); do
		api "$who" GET /v1/pools
		ready=$(jq_get "$BODY" pools.0.ready)
		[ "$ready" = "$N" ] && break
		sleep 0.1
	done
	is "$ready" "$N" "$who: the pool holds $N ready sandboxes"
	install -m 0755 "$(dirname "$0")/serve-burst.py" "$T/serve-burst.py"
	out=$(as "$who" python3 "$T/serve-burst.py" "$(sock_of "$who")" "$T/serve-$who/state" "$N" \
		2>"$T/burst-$who.err")
	sed 's/^/# /' "$T/burst-$who.err" | head -20
	read -r claimed pooled execs claim_rec exec_rec <<<"$out"
	is "${claimed:-none} ${pooled:-none}" "$N $N" "$who: $N clients claim at once, each from the pool"
	is "${execs:-none}" "$N" "$who: each claimed sandbox's first exec answers with its output"
	is "${claim_rec:-none}" "$N" \
		"$who: each claim's sandbox.claim is in audit.db when its answer arrives"
	is "${exec_rec:-none}" "$N" \
		"$who: each exec's exec.request is in audit.db when its answer arrives"
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: clean stop"
	as "$who" "$T/bin/paddock" audit verify >"$T/verify-$who" 2>&1
	ok $? "$who: paddock audit verify passes after the burst (chain and signatures)"
	is "$(as "$who" "$T/bin/paddock" audit tail -n 1000 --kind sandbox.claim 2>/dev/null | grep -c 'sandbox.claim')" \
		"$N" "$who: paddock audit lists the $N claims"
}

# Commands started a few at a time (--exec-starts): with one slot, held until a command exits
# or for 20 ms, seven commands of two sandboxes start in turn, none waits for another's end;
# a sandbox destroyed while its commands wait answers each of them.
starts_tests() {
	local who=$1 out answered span b_first wall c_answered c_unstarted
	serve_start "$who" --exec-starts 1 --kill-on-exit
	ok $? "$who: the daemon starts with --exec-starts 1"
	install -m 0755 "$(dirname "$0")/serve-starts.py" "$T/serve-starts.py"
	out=$(as "$who" python3 "$T/serve-starts.py" "$(sock_of "$who")" 2>"$T/starts-$who.err")
	sed 's/^/# /' "$T/starts-$who.err" | head -20
	read -r answered span b_first wall c_answered c_unstarted <<<"$out"
	is "${answered:-none}" 7 "$who: starts: seven commands at once in two sandboxes all answer"
	[ "${span:-0}" -ge 90 ]
	ok $? "$who: starts: one slot held 20 ms: seven starts spread over at least 90 ms (${span:-none} ms; 120 without jitter)"
	awk -v w="${wall:-99}" 'BEGIN { exit !(w < 5) }'
	ok $? "$who: starts: a slot is held 20 ms, not to the end: seven 2 s commands took ${wall:-none} s, not 14"
	is "${b_first:-none}" 1 "$who: starts: the sandboxes take turns: B's command starts before A's last"
	is "${c_answered:-none}" 30 "$who: starts: a sandbox destroyed while 30 commands wait answers every one"
	[ "${c_unstarted:-0}" -ge 1 ]
	ok $? "$who: starts: ... those still waiting with the sandbox's end (${c_unstarted:-none} of 30)"
	api "$who" GET /v1/health
	is "$CODE" 200 "$who: starts: the daemon still answers"
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: starts: clean stop"
	as "$who" "$T/bin/paddock" serve --exec-starts x >"$T/starts-bad" 2>&1
	is "$?:$(grep -c 'exec-starts wants a number' "$T/starts-bad")" "122:1" \
		"$who: starts: --exec-starts x is refused, naming the flag"
}

burst_tests root
starts_tests root
# The unprivileged daemon gets a delegated cgroup, as an administrator would give it.
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
burst_tests user
starts_tests user
SERVE_ENV=()
done_testing
