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

dashboard_api_tests() {
	local who=$1 port=$2 ops
	serve_start "$who" --listen "127.0.0.1:$port"
	ok $? "$who: the daemon starts"
	ops=$(as "$who" "$T/bin/paddock" serve token create --name ops 2>/dev/null)
	is "${ops:0:8}" "pdk_adm_" "$who: an admin token named ops"
	origin_tests "$who" "$port" "$ops"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: clean stop"
}

dashboard_api_tests root "$(free_port)"
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
dashboard_api_tests user "$(free_port)"
SERVE_ENV=()
done_testing
