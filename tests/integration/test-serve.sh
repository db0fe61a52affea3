#!/bin/bash
# paddock serve: the daemon's sockets, authentication, request validation, events and
# lifecycle, as root and as an unprivileged user (TAP). With the supervisor built
# (`paddock supervise`), also sandboxes end to end: create, exec, files, tokens,
# idempotency, kill by session, SIGKILL of the daemon and re-adoption.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

daemon_tests() {
	local who=$1 port=$2 sock token sbtok
	serve_start "$who" --listen "127.0.0.1:$port"
	ok $? "$who: the daemon starts"
	sock=$(sock_of "$who")
	is "$(stat -c %a "$sock"):$(stat -c %a "$(dirname "$sock")")" "600:700" \
		"$who: socket 0600 in a 0700 run dir"
	is "$(stat -c %u "$sock")" "$([ "$who" = root ] && echo 0 || echo $UNPRIV_UID)" \
		"$who: the socket belongs to the daemon's user"
	# RUNDIR/sb and STATE/sandboxes, which get a child per sandbox, carry ext4's top-directory
	# flag (chattr +T): each sandbox's files are made in a block group of their own, and the
	# churn of hundreds of sandboxes does not slow every file made beside them
	# (docs/internals/performance.md, fourteenth round).
	if [ "$(stat -f -c %T "$T")" = ext2/ext3 ]; then
		is "$(lsattr -d "$T/serve-$who/run/sb" "$T/serve-$who/state/sandboxes" | cut -d' ' -f1 | tr -cd 'T\n' | tr '\n' ' ')" \
			"T T " "$who: RUNDIR/sb and STATE/sandboxes carry the top-directory flag"
	else
		echo "ok $((TAP_N += 1)) - $who: spread # SKIP $T is on $(stat -f -c %T "$T"), not ext4: the flag is ext4's"
	fi

	api "$who" GET /v1/health
	is "$CODE $(jq_get "$BODY" status)" "200 ok" "$who: GET /v1/health over the unix socket"

	as "$who" "$T/bin/paddock" serve --socket "$T/serve-$who/other.sock" >"$T/second.log" 2>&1
	rc=$?
	is "$rc $(grep -c 'another paddock serve' "$T/second.log")" "1 1" \
		"$who: a second daemon on the same state dir is refused (exit $rc)"

	api "$who" GET /v1/openapi.yaml
	is "$CODE $(printf '%s' "$BODY" | grep -c '^openapi: 3')" "200 1" "$who: /v1/openapi.yaml is served"

	# Strict validation: every refusal is a 4xx JSON error naming the field.
	local body want
	while IFS='|' read -r body want; do
		api "$who" POST /v1/sandboxes "$body"
		is "$CODE $(jq_get "$BODY" error.code) $(jq_get "$BODY" error.field)" "$want" \
			"$who: create $body -> $want"
	done <<'CASES'
{"ttl":"soon"}|400 bad_request ttl
{"ttl":[1]}|400 bad_request ttl
{"idle_timeout":-5}|400 bad_request idle_timeout
{"labels":{"session":7}}|400 bad_request labels.session
{"profile":"../../etc/passwd"}|400 bad_request profile
{"overrides":{"limits":{"memory":"lots"}}}|400 bad_request overrides.limits.memory
{"overrides":{"limits":{"swap":"1G"}}}|400 bad_request overrides.limits.swap
{"workspace":{"path":"relative/dir"}}|400 bad_request workspace.path
{"bogus":true}|400 bad_request bogus
CASES
	api "$who" POST /v1/sandboxes '{"ttl":'
	is "$CODE $(jq_get "$BODY" error.code)" "400 bad_request" "$who: truncated JSON -> 400"
	api "$who" POST /v1/sandboxes '"just a string"'
	is "$CODE $(jq_get "$BODY" error.code)" "400 bad_request" "$who: a body that is not an object -> 400"
	api "$who" POST /v1/sandboxes "{\"labels\":{\"x\":\"$(head -c 2000000 /dev/zero | tr '\0' a)\"}}"
	is "$CODE $(jq_get "$BODY" error.code)" "413 too_large" "$who: a 2 MB JSON body -> 413 too_large"
	api "$who" POST /v1/kill '{}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 session" "$who: kill with an empty selector -> 400"
	api "$who" POST /v1/kill '{"session":"nobody-has-this","reason":"test"}'
	is "$CODE $BODY" '200 {"killed":[]}' "$who: kill by a session without sandboxes kills nothing"
	api "$who" GET /v1/nowhere
	is "$CODE $(jq_get "$BODY" error.code)" "404 not_found" "$who: unknown route -> 404 JSON"
	api "$who" GET /v1/sandboxes/0000-nope
	is "$CODE $(jq_get "$BODY" error.code)" "404 not_found" "$who: unknown sandbox -> 404"
	api "$who" PUT /v1/pools/default '{"size":"four"}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 size" "$who: pool size of the wrong type -> 400 naming size"
	api "$who" PUT /v1/pools/nopool '{"size":0}'
	is "$CODE" "200" "$who: PUT /v1/pools/{profile} with size 0"
	api "$who" GET /v1/pools
	is "$CODE $BODY" '200 {"pools":[]}' "$who: GET /v1/pools"

	# TCP: bearer tokens only.
	tcp GET "http://127.0.0.1:$port/v1/health" ""
	is "$CODE $(jq_get "$BODY" error.code)" "401 unauthorized" "$who: TCP without a token -> 401"
	tcp GET "http://127.0.0.1:$port/v1/health" "pdk_adm_notatoken"
	is "$CODE" "401" "$who: TCP with an unknown admin token -> 401"
	token=$(as "$who" "$T/bin/paddock" serve token create --name "ci-$who" 2>/dev/null)
	is "${token:0:8}" "pdk_adm_" "$who: serve token create prints an admin token"
	is "$(as "$who" "$T/bin/paddock" serve token ls | awk '{print $1}')" "ci-$who" "$who: serve token ls"
	tcp GET "http://127.0.0.1:$port/v1/sandboxes" "$token"
	is "$CODE $BODY" '200 {"sandboxes":[]}' "$who: TCP with the admin token -> 200"
	sqlite3 "$T/serve-$who/state/daemon.db" 'select sha256 from tokens' >"$T/hashes"
	is "$(grep -c "$token" "$T/hashes") $(sha256sum <<<"" >/dev/null; printf '%s' "$token" | sha256sum | cut -c1-64 | grep -c -f - "$T/hashes")" \
		"0 1" "$who: the store holds the token's SHA-256, not the token"
	# A sandbox token signed with another key (a forged one) is refused.
	sbtok="pdk_sb_$(printf '{"exp":9999999999,"ops":["exec"],"sb":"x"}' | base64 -w0 | tr '+/' '-_' | tr -d =).AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/x/exec" "$sbtok" '{"argv":["id"]}'
	is "$CODE" "401" "$who: a forged sandbox token -> 401"
	tcp POST "http://127.0.0.1:$port/v1/sandboxes" "$sbtok" '{}'
	is "$CODE" "401" "$who: a forged sandbox token cannot create"
	as "$who" "$T/bin/paddock" serve token revoke "ci-$who"
	tcp GET "http://127.0.0.1:$port/v1/sandboxes" "$token"
	is "$CODE" "401" "$who: a revoked admin token -> 401"

	# Events: the audit store replayed as SSE, with the daemon's own events.
	as "$who" curl -s -N --max-time 2 --unix-socket "$sock" "http://paddock/v1/events?since=0" \
		>"$T/events-$who" 2>/dev/null
	is "$(grep -c '^event: daemon.start' "$T/events-$who") $(grep -c '^event: auth.failure' "$T/events-$who")" \
		"1 5" "$who: GET /v1/events?since=0 replays daemon.start and the 5 auth failures"
	is "$(grep -c '^id: [0-9]' "$T/events-$who")" "$(grep -c '^event: ' "$T/events-$who")" \
		"$who: every SSE event carries its audit sequence number"
	as "$who" curl -s -N --max-time 2 --unix-socket "$sock" \
		"http://paddock/v1/events?since=0&kind=auth.failure" >"$T/events-$who"
	is "$(grep -c '^event: ' "$T/events-$who")" "5" "$who: events filtered by kind"

	serve_stop "$who"
	is "$SERVE_RC $([ -e "$sock" ] && echo left || echo gone)" "0 gone" \
		"$who: SIGTERM stops the daemon cleanly and removes its socket"
	as "$who" "$T/bin/paddock" audit verify >"$T/verify-$who" 2>&1
	ok $? "$who: paddock audit verify passes after the daemon's events"
}

daemon_tests root "$(free_port)"
daemon_tests user "$(free_port)"

if ! have_supervisor; then
	echo "# sandbox tests skipped: this build has no 'paddock supervise' (the supervisor, issue 6 part 1)"
	[ "${PDK_MUST_WORK:-0}" = 1 ] && ok 1 "the supervisor is built (PDK_MUST_WORK=1)"
	done_testing
	exit $?
fi

. "$(dirname "$0")/serve-sandboxes.sh"
done_testing
