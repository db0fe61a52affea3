#!/bin/bash
# The command line as a new user meets it (TAP), as root and as an unprivileged user: one
# exit-code convention for every verb (docs/cli-contract.md "Exit status of every verb"), one
# "paddock: " prefix on every error, and the daemon verbs' answers to what a user typed:
# ps --state, ps of a warm pool, kill of an unknown id, cp to standard output, events --kind
# with a prefix, serve --pool with an unknown profile.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

# A doubled prefix is a message that says where it comes from twice.
doubled() {
	grep -E '(^|: )([a-z][a-z ]*): \2: ' "$1"
}

# no_doubled WHO WHAT FILE: the stderr of an error path has no doubled prefix.
no_doubled() {
	sed -n '1,3s/^/#   /p' "$3"
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

# What the caller got wrong through the daemon is a 4xx naming the field, never a 500; the
# CLI says it once ("paddock: CODE: MESSAGE (field F)") and exits 125.
create_errors() {
	local who=$1 out
	pc "$who" create -p nosuchprofile >/dev/null 2>"$T/err"
	is "$?:$(grep -c "not_found: .*unknown profile 'nosuchprofile'.*(field profile)" "$T/err")" \
		"125:1" "$who: create -p nosuchprofile exits 125: not_found naming the profile"
	no_doubled "$who" "create -p nosuchprofile" "$T/err"
	api "$who" POST /v1/sandboxes '{"profile": "nosuchprofile"}'
	is "$CODE:$(jq_get "$BODY" error.field)" "404:profile" \
		"$who: POST /v1/sandboxes of an unknown profile: 404, field profile"
	pc "$who" create -p ./my.yaml >/dev/null 2>"$T/err"
	is "$?:$(grep -c "bad_request: 'profile' takes a profile name, not a path.*profile directory.*(field profile)" "$T/err")" \
		"125:1" "$who: create -p ./my.yaml: bad_request saying the daemon takes names and where files go"
	api "$who" POST /v1/sandboxes '{"profile": "/etc/passwd"}'
	is "$CODE:$(jq_get "$BODY" error.field)" "400:profile" \
		"$who: POST /v1/sandboxes of a profile path: 400, field profile"
	api "$who" POST /v1/sandboxes '{"profile": "my.yaml"}'
	is "$CODE:$(jq_get "$BODY" error.field)" "400:profile" "$who: ... and of a file name ending in .yaml"
	pc "$who" create -p needs-secret >/dev/null 2>"$T/err"
	is "$?:$(grep -c "bad_request: .*secret 'errtok'.*PADDOCK_SECRET_ERRTOK.*the daemon's environment.*(field network.credentials)" "$T/err")" \
		"125:1" "$who: create of a profile whose secret the daemon lacks: bad_request naming it and the daemon's environment"
	no_doubled "$who" "create of a missing secret" "$T/err"
	api "$who" POST /v1/sandboxes '{"profile": "needs-secret"}'
	is "$CODE:$(jq_get "$BODY" error.field)" "400:network.credentials" \
		"$who: POST /v1/sandboxes of a missing secret: 400, field network.credentials"
	# Directories that are there, as a user's would be.
	mkdir -p "$T/serve-$who/state/ws" "$T/serve-$who/run/ws"
	[ "$who" = user ] && chown $UNPRIV_UID "$T/serve-$who/state/ws" "$T/serve-$who/run/ws"
	pc "$who" create -w "$T/serve-$who/state/ws" >/dev/null 2>"$T/err"
	is "$?:$(grep -c "bad_request: .*workspace '.*' holds the state directory.*(field workspace)" "$T/err")" "125:1" \
		"$who: create -w inside the daemon's state directory: bad_request naming the workspace"
	no_doubled "$who" "create -w in the state directory" "$T/err"
	out=$(printf '{"workspace": {"path": "%s"}}' "$T/serve-$who/run/ws")
	api "$who" POST /v1/sandboxes "$out"
	is "$CODE:$(jq_get "$BODY" error.field)" "400:workspace" \
		"$who: POST /v1/sandboxes with a workspace in the runtime directory: 400, field workspace"
}

# exec of what is not there says so as a shell does: 127 "command not found", and a missing
# --cwd names the cwd; a write to a read-only path is forbidden (403).
exec_errors() {
	local who=$1 id=$2 f
	pc "$who" exec "$id" -- no-such-command-x >/dev/null 2>"$T/err"
	is "$?:$(grep -c "cannot execute 'no-such-command-x': command not found" "$T/err")" "127:1" \
		"$who: exec of a missing command exits 127: command not found"
	no_doubled "$who" "exec of a missing command" "$T/err"
	pc "$who" exec --stream "$id" -- no-such-command-x >/dev/null 2>"$T/err"
	is "$?:$(grep -c "cannot execute 'no-such-command-x': command not found" "$T/err")" "127:1" \
		"$who: exec --stream of a missing command exits 127: command not found"
	pc "$who" exec "$id" -- /etc/hostname >/dev/null 2>"$T/err"
	is "$?:$(grep -c "cannot execute '/etc/hostname': Permission denied" "$T/err")" "126:1" \
		"$who: exec of a file that is not executable exits 126"
	pc "$who" exec -C /nope "$id" -- true >/dev/null 2>"$T/err"
	is "$?:$(grep -c "cwd '/nope': No such file or directory.*(field cwd)" "$T/err"):$(grep -c 'argv' "$T/err")" \
		"125:1:0" "$who: exec --cwd /nope names the cwd, not argv[0]"
	no_doubled "$who" "exec --cwd /nope" "$T/err"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv": ["no-such-command-x"]}'
	is "$CODE:$(jq_get "$BODY" error.field)" "404:argv[0]" \
		"$who: POST exec of a missing command: 404, field argv[0]"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv": ["true"], "cwd": "/nope"}'
	is "$CODE:$(jq_get "$BODY" error.field)" "404:cwd" "$who: POST exec with a missing cwd: 404, field cwd"
	f=$(mkws)/f
	echo hi >"$f"
	chmod 0644 "$f"
	pc "$who" cp "$f" "$id:/usr/paddock-ro" >/dev/null 2>"$T/err"
	is "$?:$(grep -c "forbidden: .*(field path)" "$T/err")" "125:1" \
		"$who: cp to a read-only path exits 125: forbidden naming the path"
	no_doubled "$who" "cp to a read-only path" "$T/err"
	api "$who" PUT "/v1/sandboxes/$id/files?path=/usr/paddock-ro" 'hi'
	is "$CODE" 403 "$who: PUT of a file at a read-only path: 403"
}

# paddock run says the same: 127 for a missing command, and no doubled prefix on its errors.
run_errors() {
	local who=$1
	prun "$who" --workspace-mode none -- no-such-command-x >/dev/null 2>"$T/err"
	is "$?:$(grep -c "cannot execute 'no-such-command-x': command not found" "$T/err")" "127:1" \
		"$who: run of a missing command exits 127: command not found"
	no_doubled "$who" "run of a missing command" "$T/err"
	prun "$who" --workspace-mode none -C /nope -- true >/dev/null 2>"$T/err"
	is "$?:$(grep -c "working directory '/nope'" "$T/err"):$(grep -c "cannot execute" "$T/err")" "125:1:0" \
		"$who: run -C /nope names the cwd, not the command"
	no_doubled "$who" "run -C /nope" "$T/err"
	mkdir -p "$T/state-$who/ws"
	[ "$who" = user ] && chown $UNPRIV_UID "$T/state-$who/ws"
	prun "$who" --workspace "$T/state-$who/ws" -- true >/dev/null 2>"$T/err"
	is "$?:$(grep -c "workspace '.*' holds the state directory" "$T/err")" "125:1" \
		"$who: run with a workspace inside the state directory exits 125 naming it"
	no_doubled "$who" "run with a workspace in the state directory" "$T/err"
}

# The daemon's profile directory: a profile that needs a secret nobody set.
mkdir -p "$T/cfg/paddock/profiles"
cat >"$T/cfg/paddock/profiles/needs-secret.yaml" <<'EOF'
extends: default
network:
  mode: allowlist
  allow: ['127.0.0.1:9']
  credentials:
    - {host: '127.0.0.1:9', header: 'Authorization: Bearer ${secret:errtok}'}
EOF
chmod -R a+rX "$T/cfg"

if ! have_supervisor; then
	echo "# skipped the daemon part: this build has no 'paddock supervise'"
fi
for who in root user; do
	if [ "$who" = user ]; then
		delegate_cgroup
		SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
	fi
	SERVE_ENV+=(XDG_CONFIG_HOME="$T/cfg")
	bad_flags "$who"
	run_errors "$who"
	pool_refused "$who"
	have_supervisor || continue
	serve_start "$who" --pool default=1 --kill-on-exit
	ok $? "$who: the daemon starts with --pool default=1"
	daemon_tests "$who"
	create_errors "$who"
	id=$(pc "$who" create --session err-$who)
	exec_errors "$who" "$id"
	pc "$who" kill "$id" >/dev/null
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: the daemon stops cleanly"
	reap_supervisors
done
done_testing
