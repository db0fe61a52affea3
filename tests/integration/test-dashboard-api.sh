#!/bin/bash
# paddock serve: the API the operator's dashboard stands on, as root and as an unprivileged
# user (TAP): the Origin rule of mutating routes, POST /v1/kill {"all": true}, the operator
# named in the records of kill, pause, resume and delete, GET /v1/audit (the audit chain's
# state, verified off the event loop), and GET /v1/events' tail=N and decision=VALUE.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
for tool in curl jq sqlite3; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed (make setup installs it)"; exit 1; }
done

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

# call VIA METHOD PATH BODY [CURL-ARGS...]: one request; VIA is root or user (the unix socket,
# as that identity) or tcp:PORT:TOKEN (TCP with a bearer token). BODY "" sends none. Sets
# $CODE and $BODY.
call() {
	local via=$1 method=$2 path=$3 body=$4 out port token
	shift 4
	out=$(mktemp "$T/api-XXXXXX")
	chmod 0666 "$out"
	local data=()
	[ -n "$body" ] && data=(--data-binary "$body" -H 'Content-Type: application/json')
	case $via in
	tcp:*)
		port=$(echo "$via" | cut -d: -f2)
		token=$(echo "$via" | cut -d: -f3)
		CODE=$(curl -s -o "$out" -w '%{http_code}' -X "$method" "${data[@]}" \
			-H "Authorization: Bearer $token" "$@" "http://127.0.0.1:$port$path")
		;;
	*)
		CODE=$(as "$via" curl -s -o "$out" -w '%{http_code}' -X "$method" "${data[@]}" \
			--unix-socket "$(sock_of "$via")" "$@" "http://paddock$path")
		;;
	esac
	BODY=$(cat "$out")
	rm -f "$out"
}

# records WHO QUERY: the events the replay of GET /v1/events?QUERY&follow=0 sends, one JSON
# array (the data of each SSE event).
records() {
	api "$1" GET "/v1/events?$2&follow=0"
	printf '%s\n' "$BODY" | sed -n 's/^data: //p' | jq -s -c .
}

# ended WHO ID: up to 10 s for sandbox ID to be ended; prints its "state end_reason".
ended() {
	local i
	for i in $(seq 1 100); do
		api "$1" GET "/v1/sandboxes/$2"
		[ "$(jq_get "$BODY" state)" = ended ] && break
		sleep 0.1
	done
	echo "$(jq_get "$BODY" state) $(jq_get "$BODY" end_reason)"
}

new_sandbox() {
	local body=${2:-'{}'}
	api "$1" POST /v1/sandboxes "$body"
	jq_get "$BODY" id
}

# ---- 1. The Origin rule ----

origin_tests() {
	local who=$1 port=$2 ops=$3 id own n
	own="http://127.0.0.1:$port"
	id=$(new_sandbox "$who")
	call "tcp:$port:$ops" POST /v1/kill "{\"ids\":[\"$id\"]}" -H 'Origin: http://evil.example'
	is "$CODE $(jq_get "$BODY" error.code) $(jq_get "$BODY" error.field)" "403 forbidden Origin" \
		"$who: a kill over TCP with a foreign Origin -> 403, field Origin"
	is "$(jq_get "$BODY" error.message | grep -c "http://evil.example.*$own")" 1 \
		"$who: ... its message names the origin received and the one expected"
	api "$who" GET "/v1/sandboxes/$id"
	is "$(jq_get "$BODY" state)" running "$who: ... and nothing was done: the sandbox still runs"
	n=$(records "$who" "since=0&kind=auth.failure" | jq '[.[] | select(.attrs.origin == "http://evil.example")] | length')
	is "$n" 1 "$who: ... an auth.failure event naming the origin is stored"
	call "$who" DELETE "/v1/sandboxes/$id" "" -H 'Origin: null'
	is "$CODE $(jq_get "$BODY" error.field)" "403 Origin" \
		"$who: DELETE over the unix socket with Origin: null -> 403 (the socket's owner too)"
	call "$who" PUT /v1/pools/none '{"size":0}' -H 'Origin: http://paddock.evil.example'
	is "$CODE $(jq_get "$BODY" error.field)" "403 Origin" "$who: PUT with a foreign Origin -> 403"
	call "tcp:$port:$ops" GET "/v1/sandboxes/$id" "" -H 'Origin: http://evil.example'
	is "$CODE $(jq_get "$BODY" state)" "200 running" "$who: GET with a foreign Origin is unchanged (200)"
	call "tcp:$port:$ops" POST "/v1/sandboxes/$id/pause" "" -H "Origin: $own"
	is "$CODE $(jq_get "$BODY" state)" "200 paused" "$who: POST pause with the request's own Origin ($own) works"
	call "tcp:$port:$ops" POST "/v1/sandboxes/$id/resume" "" -H "Origin: https://127.0.0.1:$port"
	is "$CODE $(jq_get "$BODY" state)" "200 running" "$who: ... and with https:// and the Host"
	call "$who" POST "/v1/sandboxes/$id/pause" "" -H "Origin: http://paddock"
	is "$CODE $(jq_get "$BODY" state)" "200 paused" "$who: over the unix socket, Origin http://paddock (its Host) works"
	call "$who" POST "/v1/sandboxes/$id/resume" ""
	is "$CODE $(jq_get "$BODY" state)" "200 running" "$who: no Origin (CLI, SDKs) -> unchanged"
	call "tcp:$port:$ops" DELETE "/v1/sandboxes/$id" "" -H "Origin: $own"
	is "$CODE $(jq_get "$BODY" state)" "200 ended" "$who: DELETE with the own Origin ends the sandbox"
}

# ---- 2. Kill everything, and the operator in the records ----

kill_tests() {
	local who=$1 port=$2 ops=$3 a b c d want got uid
	uid=$([ "$who" = root ] && echo 0 || echo $UNPRIV_UID)
	a=$(new_sandbox "$who" '{"labels":{"session":"ka"}}')
	b=$(new_sandbox "$who" '{"labels":{"session":"kb"}}')
	c=$(new_sandbox "$who" '{"labels":{"agent":"kc"}}')
	call "tcp:$port:$ops" POST /v1/kill '{"all":true,"session":"ka"}'
	is "$CODE $(jq_get "$BODY" error.code) $(jq_get "$BODY" error.field)" "400 bad_request all" \
		"$who: kill {all, session} -> 400 naming all"
	call "tcp:$port:$ops" POST /v1/kill '{"all":true,"ids":[]}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 all" "$who: kill {all, ids: []} -> 400 naming all"
	call "tcp:$port:$ops" POST /v1/kill '{"all":"yes"}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 all" "$who: kill {all: \"yes\"} -> 400 naming all"
	call "tcp:$port:$ops" POST /v1/kill '{"all":false}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 session" "$who: kill {all: false} is an empty selector -> 400"
	call "tcp:$port:$ops" POST /v1/kill '{"all":false,"session":"nobody"}'
	is "$CODE $BODY" '200 {"killed":[]}' "$who: kill {all: false, session} is a kill by session"
	call "tcp:$port:$ops" POST /v1/kill '{"all":true,"reason":"stop everything"}'
	want=$(printf '%s\n' "$a" "$b" "$c" | sort | tr '\n' ' ')
	got=$(printf '%s' "$BODY" | jq -r '.killed[]' | sort | tr '\n' ' ')
	is "$CODE $got" "200 $want" "$who: kill {all: true} over TCP answers the three sandboxes' ids"
	is "$(ended "$who" "$a"), $(ended "$who" "$b"), $(ended "$who" "$c")" \
		"ended killed, ended killed, ended killed" "$who: ... all three are ended, end_reason killed"
	api "$who" GET /v1/sandboxes
	is "$(jq_get "$BODY" sandboxes | jq length)" 0 "$who: ... and none is listed live"
	got=$(records "$who" "since=0&kind=kill" | jq -r --arg a "$a" --arg b "$b" --arg c "$c" \
		'[.[] | select(.sandbox == $a or .sandbox == $b or .sandbox == $c) | .attrs.operator] | join(" ")')
	is "$got" "ops ops ops" "$who: each sandbox's kill record carries attrs.operator, the admin token's name"
	got=$(records "$who" "since=0&kind=kill&sandbox=daemon" | jq -c '[.[] | select(.attrs.all == true) | [.attrs.operator, .attrs.reason, (.attrs.killed | length)]]')
	is "$got" '[["ops","stop everything",3]]' "$who: the call's own kill record: operator, reason, all, the 3 killed"
	got=$(records "$who" "since=0&kind=sandbox.destroy" | jq -r --arg a "$a" '[.[] | select(.sandbox == $a and .actor == "paddock-serve") | .attrs.operator] | join(" ")')
	is "$got" ops "$who: ... and the sandbox.destroy record of a killed one names the operator too"
	d=$(new_sandbox "$who" '{"labels":{"session":"kd"}}')
	api "$who" POST /v1/kill '{"session":"kd"}'
	is "$CODE $(jq_get "$BODY" killed.0)" "200 $d" "$who: kill by session over the unix socket"
	got=$(records "$who" "since=0&kind=kill&sandbox=$d" | jq -r '[.[].attrs.operator] | join(" ")')
	is "$got" "unix:$uid" "$who: ... its kill record's operator is unix:$uid, the socket's owner"
	ended "$who" "$d" >/dev/null
}

operator_tests() {
	local who=$1 port=$2 ops=$3 id sbtok got uid
	uid=$([ "$who" = root ] && echo 0 || echo $UNPRIV_UID)
	api "$who" POST /v1/sandboxes '{}'
	id=$(jq_get "$BODY" id)
	sbtok=$(jq_get "$BODY" token)
	call "tcp:$port:$ops" POST "/v1/sandboxes/$id/pause" ""
	call "tcp:$port:$sbtok" POST "/v1/sandboxes/$id/resume" ""
	is "$CODE $(jq_get "$BODY" state)" "200 running" "$who: pause (admin token), resume (the sandbox's token)"
	api "$who" POST "/v1/sandboxes/$id/pause"
	api "$who" POST "/v1/sandboxes/$id/resume"
	got=$(records "$who" "since=0&kind=sandbox.control&sandbox=$id" | jq -r '[.[] | "\(.attrs.op)=\(.attrs.operator)"] | join(" ")')
	is "$got" "pause=ops resume=sandbox:$id pause=unix:$uid resume=unix:$uid" \
		"$who: the pause and resume records name the operator: the token's name, sandbox:ID, unix:UID"
	call "tcp:$port:$ops" DELETE "/v1/sandboxes/$id" ""
	is "$CODE $(jq_get "$BODY" state)" "200 ended" "$who: DELETE over TCP with the admin token"
	got=$(records "$who" "since=0&kind=sandbox.destroy&sandbox=$id" | jq -r '[.[] | select(.actor == "paddock-serve") | "\(.attrs.reason)=\(.attrs.operator)"] | join(" ")')
	is "$got" "deleted=ops" "$who: ... its sandbox.destroy record names the operator"
}

dashboard_api_tests() {
	local who=$1 port=$2 ops
	serve_start "$who" --listen "127.0.0.1:$port"
	ok $? "$who: the daemon starts"
	ops=$(as "$who" "$T/bin/paddock" serve token create --name ops 2>/dev/null)
	is "${ops:0:8}" "pdk_adm_" "$who: an admin token named ops"
	origin_tests "$who" "$port" "$ops"
	kill_tests "$who" "$port" "$ops"
	operator_tests "$who" "$port" "$ops"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: clean stop"
}

dashboard_api_tests root "$(free_port)"
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
dashboard_api_tests user "$(free_port)"
SERVE_ENV=()
done_testing
