#!/bin/bash
# The command line as a new user meets it (TAP), as root and as an unprivileged user: one
# exit-code convention for every verb (docs/cli-contract.md "Exit status of every verb"), one
# "paddock: " prefix on every error, and the daemon verbs' answers to what a user typed:
# ps --state, ps of a warm pool, kill of an unknown id, cp to standard output, events --kind
# with a prefix, serve --pool with an unknown profile.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

pc() {
	local who=$1
	shift
	(cd "$T/home" && as "$who" "$T/bin/paddock" "$@")
}

# A doubled prefix is a message that says where it comes from twice.
doubled() {
	grep -E '(^|: )([a-z][a-z ]*): \2: ' "$1"
}

# no_doubled WHO WHAT FILE: the stderr of an error path has no doubled prefix.
no_doubled() {
	if doubled "$3" >/dev/null; then
		ok 1 "$1: $2: no doubled prefix ($(doubled "$3" | head -1))"
	else
		ok 0 "$1: $2: no doubled prefix"
	fi
}

VERBS="run ws profile audit serve ps create exec attach cp pause resume snapshot rollback diff
commit kill events supervise"

bad_flags() {
	local who=$1 v rc
	for v in $VERBS; do
		pc "$who" $v --no-such-flag >/dev/null 2>"$T/err"
		rc=$?
		is "$rc:$(grep -c -- "--no-such-flag" "$T/err" | sed 's/^0$/unnamed/;s/^[0-9]*$/named/')" \
			"122:named" "$who: paddock $v --no-such-flag exits 122 and names the flag"
		no_doubled "$who" "$v --no-such-flag" "$T/err"
	done
	pc "$who" no-such-verb >/dev/null 2>"$T/err"
	is "$?" 122 "$who: an unknown verb exits 122"
	pc "$who" ws diff >/dev/null 2>"$T/err"
	is "$?" 122 "$who: ws diff without an id exits 122"
	pc "$who" audit show >/dev/null 2>"$T/err"
	is "$?" 122 "$who: audit show without an id exits 122"
	pc "$who" ps --state bogus >/dev/null 2>"$T/err"
	is "$?:$(grep -c "state 'bogus'" "$T/err")" "122:1" "$who: ps --state bogus is refused (122) and named"
	pc "$who" run --workspace-mode none -p nosuchprofile -- true >/dev/null 2>"$T/err"
	is "$?:$(grep -c "unknown profile 'nosuchprofile'" "$T/err")" "122:1" \
		"$who: run -p nosuchprofile exits 122 naming the profile"
	no_doubled "$who" "run -p nosuchprofile" "$T/err"
}

pool_refused() {
	local who=$1
	mkdir -p "$T/serve-$who"
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$T/serve-$who"
	pc "$who" serve --pool nosuchprofile=1 >/dev/null 2>"$T/err"
	is "$?:$(grep -c "nosuchprofile" "$T/err")" "122:1" \
		"$who: serve --pool nosuchprofile=1 is refused at start (122), naming the profile"
	is "$(ls "$T/serve-$who/run" 2>/dev/null | grep -c paddock.sock)" 0 "$who: ... and no daemon started"
	pc "$who" serve --pool default=x >/dev/null 2>"$T/err"
	is "$?:$(grep -c "PROFILE=N" "$T/err")" "122:1" "$who: serve --pool default=x says PROFILE=N (122)"
	no_doubled "$who" "serve --pool" "$T/err"
}

# Wait until the pool's member is running (the pool fills in the background).
pool_ready() {
	local who=$1 i
	for i in $(seq 1 200); do
		pc "$who" ps --all --json | grep -q '"pool_member": true' &&
			pc "$who" ps --all --json --state running | grep -q '"pool_member": true' && return 0
		sleep 0.1
	done
	return 1
}

daemon_tests() {
	local who=$1 id out n
	pool_ready "$who"
	ok $? "$who: the warm pool has a ready member"
	is "$(pc "$who" ps -q | wc -l)" 0 "$who: ps -q does not list the unclaimed pool member"
	is "$(pc "$who" ps --all | grep -c ' ready *$')" 1 "$who: ps --all lists it, marked 'ready'"
	id=$(pc "$who" create -w "$(mkws)" --session cli-$who)
	is "$(pc "$who" ps -q)" "$id" "$who: ps -q lists the sandbox that was asked for"
	pc "$who" kill $(pc "$who" ps -q) >/dev/null
	is "$?:$(pc "$who" ps --all | grep -c ' ready *$')" "0:1" "$who: kill \$(ps -q) leaves the pool alone"
	id=$(pc "$who" create --session cli2-$who)
	pc "$who" kill 01a20000-0000-7000-8000-000000000000 >"$T/out" 2>"$T/err"
	is "$?:$(grep -c "no running sandbox '01a20000-0000-7000-8000-000000000000'" "$T/err")" "125:1" \
		"$who: kill of an unknown id exits 125 and names it"
	no_doubled "$who" "kill of an unknown id" "$T/err"
	pc "$who" exec "$id" -- sh -c 'printf "hello\nworld\n" > /tmp/x' >/dev/null
	(cd "$T/home" && as "$who" "$T/bin/paddock" cp "$id:/tmp/x" - >"$T/cpout" 2>"$T/err")
	is "$?:$(cat "$T/cpout" | tr '\n' ' '):$(ls "$T/home" | grep -cx -- -)" "0:hello world :0" \
		"$who: cp ID:/x - writes the file to standard output, no file named '-'"
	pc "$who" cp "$id:/tmp/nothing" - >"$T/cpout" 2>"$T/err"
	is "$?" 125 "$who: cp of a missing remote file to - exits 125"
	pc "$who" ps --state bogus >/dev/null 2>"$T/err"
	is "$?" 122 "$who: ps --state bogus against a running daemon: 122"
	api "$who" GET "/v1/sandboxes?state=bogus"
	is "$CODE" 400 "$who: GET /v1/sandboxes?state=bogus answers 400"
	n=$(pc "$who" events --kind sandbox. --sandbox "$id" | grep -c ' sandbox\.')
	ok "$([ "$n" -ge 1 ] && echo 0 || echo 1)" "$who: events --kind sandbox. matches the sandbox.* events ($n)"
	is "$(pc "$who" events --kind sandbox. --sandbox "$id" | grep -vc ' sandbox\.')" 0 \
		"$who: ... and only those"
	is "$(pc "$who" events --kind sandbox --sandbox "$id" | wc -l)" 0 \
		"$who: events --kind sandbox (no dot) is an exact kind: none"
	pc "$who" kill "$id" >/dev/null
}

if ! have_supervisor; then
	echo "# skipped the daemon part: this build has no 'paddock supervise'"
fi
for who in root user; do
	if [ "$who" = user ]; then
		delegate_cgroup
		SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
	fi
	bad_flags "$who"
	pool_refused "$who"
	have_supervisor || continue
	serve_start "$who" --pool default=1 --kill-on-exit
	ok $? "$who: the daemon starts with --pool default=1"
	daemon_tests "$who"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: the daemon stops cleanly"
	reap_supervisors
done
done_testing
