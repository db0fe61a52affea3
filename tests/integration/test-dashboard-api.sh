#!/bin/bash
# paddock serve: the API the operator's dashboard stands on, as root and as an unprivileged
# user (TAP): the Origin rule of mutating routes, POST /v1/kill {"all": true}, the operator
# named in the records of kill, pause, resume and delete, GET /v1/audit (the audit chain's
# state, verified off the event loop), GET /v1/events' tail=N and decision=VALUE, and an
# EventSource (the `eventsource` package) that resumes across a daemon restart by the
# Last-Event-ID it sends.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"
: "${TESTS_DIR:?TESTS_DIR must name the tests directory}"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
for tool in curl jq sqlite3 python3; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed (make setup installs it)"; exit 1; }
done
NODE="$TESTS_DIR/clients/node_modules/.bin/node"
if [ ! -x "$NODE" ] || [ ! -d "$TESTS_DIR/clients/node_modules/eventsource" ]; then
	echo "Bail out! the test clients are missing ($TESTS_DIR/clients/node_modules): run make test-setup"
	exit 1
fi

python3 "$TESTS_DIR/integration/egress-origin.py" "$T/origin.port" &
ORIGIN_PID=$!
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; kill $ORIGIN_PID 2>/dev/null; undelegate_cgroup; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -s "$T/origin.port" ] && break; sleep 0.05; done
OP=$(cat "$T/origin.port")
[ -n "$OP" ] || { echo "Bail out! the origin server did not start"; exit 1; }

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

# ---- 4. The audit chain's state ----

# last_seq WHO: the sequence number of the last stored record (the replay's last id).
last_seq() {
	api "$1" GET "/v1/events?since=0&follow=0"
	printf '%s\n' "$BODY" | sed -n 's/^id: //p' | tail -1
}

audit_tests() {
	local who=$1 port=$2 ops=$3 sbtok head at got
	call "$who" GET "/v1/audit?max_age=0" ""
	head=$(last_seq "$who")
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" head_seq) $(jq_get "$BODY" verified_seq) $(jq_get "$BODY" records)" \
		"200 ok $head $head $head" "$who: GET /v1/audit: state ok, head_seq = verified_seq = records = the last event's seq ($head)"
	is "$(jq -r '[.broken_seq, .detail] | map(tostring) | join(" ")' <<<"$BODY") $(jq_get "$BODY" head_hash | grep -c '^[0-9a-f]\{64\}$') $(jq_get "$BODY" key_id | grep -c '^[0-9a-f]\{64\}$')" \
		"null null 1 1" "$who: ... broken_seq and detail null, head_hash and key_id hex"
	got=$(jq -r '"\(.signed_seq > 0) \(.signed_seq <= .head_seq) \(.checkpoints > 0) \(.unfolded_records)"' <<<"$BODY")
	is "$got" "true true true 0" "$who: ... the daemon signed: 0 < signed_seq ($(jq_get "$BODY" signed_seq)) <= head_seq, no unfolded records"
	at=$(records "$who" "since=$(($(jq_get "$BODY" signed_seq) - 1))" | jq -r '.[0].ts')
	is "$(jq_get "$BODY" signed_at)" "$at" "$who: ... signed_at is the ts of the signed record"
	at=$(jq_get "$BODY" verified_at)
	call "tcp:$port:$ops" GET /v1/audit ""
	is "$CODE $(jq_get "$BODY" verified_at)" "200 $at" "$who: without max_age (5 s) over TCP the same verification answers again"
	call "tcp:$port:pdk_adm_notatoken" GET /v1/health ""
	call "tcp:$port:$ops" GET "/v1/audit?max_age=0" ""
	is "$(jq -r "\"\(.head_seq > $head) \(.verified_seq == .head_seq) \(.verified_at != \"$at\")\"" <<<"$BODY")" "true true true" \
		"$who: a record appended (an auth.failure), then max_age=0: a new verification, head_seq grew ($head -> $(jq_get "$BODY" head_seq))"
	for got in abc -1 3601 1.5; do
		call "$who" GET "/v1/audit?max_age=$got" ""
		is "$CODE $(jq_get "$BODY" error.field)" "400 max_age" "$who: max_age=$got -> 400 naming max_age"
	done
	api "$who" POST /v1/sandboxes '{}'
	sbtok=$(jq_get "$BODY" token)
	call "tcp:$port:$sbtok" GET /v1/audit ""
	is "$CODE $(jq_get "$BODY" error.code)" "403 forbidden" "$who: a sandbox token gets 403"
	api "$who" DELETE "/v1/sandboxes/$(jq_get "$BODY" id)"
}

# tamper_tests WHO PORT: a record's line changed while the daemon is stopped is found.
tamper_tests() {
	local who=$1 port=$2 st k
	st="$T/serve-$who/state"
	serve_stop "$who"
	# The call's own record of the kill of everything, in the middle of the chain: a record
	# that says less was done than was.
	k=$(as "$who" sqlite3 "$st/audit.db" "SELECT seq FROM events WHERE kind = 'kill' AND sandbox = 'daemon' AND CAST(line AS TEXT) LIKE '%stop everything%'")
	as "$who" sqlite3 "$st/audit.db" "UPDATE events SET line = CAST(replace(CAST(line AS TEXT), 'stop everything', 'stop one thing') AS BLOB) WHERE seq = $k"
	serve_start "$who" --listen "127.0.0.1:$port"
	api "$who" GET /v1/audit
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" broken_seq) $(jq_get "$BODY" verified_seq)" "200 altered $k $((k - 1))" \
		"$who: record $k's line changed while the daemon was stopped: state altered, broken_seq $k, verified_seq $((k - 1))"
	is "$(jq_get "$BODY" detail | grep -c "record $k")" 1 "$who: ... the detail names the record ($(jq_get "$BODY" detail))"
}

# big_store_tests WHO: 20 requests at once on a store of 200000 records share one verification;
# a daemon stopped while one runs stops it and ends cleanly.
big_store_tests() {
	local who=$1 st i n d pids=()
	st="$T/serve-$who/state"
	serve_stop "$who"
	rm -rf "$st"
	as "$who" python3 "$TESTS_DIR/integration/audit-store-gen.py" "$st" 200000
	serve_start "$who"
	d="$T/audit-$who"
	mkdir -m 0777 "$d"
	for i in $(seq 1 20); do
		as "$who" curl -s -o "$d/$i.json" -w '%{http_code}\n' --unix-socket "$(sock_of "$who")" \
			"http://paddock/v1/audit?max_age=0" >"$d/$i.code" &
		pids+=($!)
	done
	wait "${pids[@]}"
	is "$(cat "$d"/*.code | sort | uniq -c | awk '{print $1, $2}')" "20 200" "$who: 20 requests at once on a store of 200000 records: all answered 200"
	is "$(cat "$d"/*.json | jq -r '"\(.state) \(.records >= 200000)"' | sort -u)" "ok true" "$who: ... each says ok over the 200000 records"
	n=$(cat "$d"/*.json | jq -r .verified_at | sort -u | wc -l)
	ok $([ "$n" -ge 1 ] && [ "$n" -lt 20 ] && echo 0 || echo 1) "$who: ... answered by $n verification(s), not one per request (requests wait for the running one)"
	(as "$who" curl -s -o /dev/null --unix-socket "$(sock_of "$who")" "http://paddock/v1/audit?max_age=0") &
	i=$!
	sleep 0.2 # likely mid-verification; the checks below hold either way
	serve_stop "$who"
	wait "$i"
	is "$SERVE_RC" 0 "$who: a daemon stopped (SIGTERM) while a verification may run stops it and ends cleanly"
	is "$(grep -c 'Sanitizer\|runtime error' "$T/serve-$who.log")" 0 "$who: ... without a sanitizer report in its log"
}

# ---- 5. GET /v1/events: tail=N and decision=VALUE ----

# ids FILE: the SSE ids in FILE, space-separated.
ids() { sed -n 's/^id: //p' "$1" | tr '\n' ' ' | sed 's/ $//'; }

tail_tests() {
	local who=$1 port=$2 d i want pid
	d="$T/events-$who"
	mkdir -m 0777 "$d"
	for i in 1 2 3 4 5; do call "tcp:$port:pdk_adm_tail$i" GET /v1/health ""; done
	want=$(records "$who" "since=0&kind=auth.failure" | jq -r '.[-3:] | map(.seq) | join(" ")')
	(as "$who" curl -s -N --max-time 30 --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/events?kind=auth.failure&tail=3" >"$d/stream") &
	pid=$!
	for i in $(seq 1 100); do [ "$(grep -c '^id: ' "$d/stream")" -ge 3 ] && break; sleep 0.05; done
	is "$(ids "$d/stream")" "$want" "$who: events?kind=auth.failure&tail=3 replays exactly the last 3 auth failures ($want)"
	call "tcp:$port:pdk_adm_tail6" GET /v1/health ""
	for i in $(seq 1 100); do [ "$(grep -c '^id: ' "$d/stream")" -ge 4 ] && break; sleep 0.05; done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	want="$want $(records "$who" "since=0&kind=auth.failure" | jq -r '.[-1].seq')"
	is "$(ids "$d/stream")" "$want" "$who: ... then follows: the next auth failure comes live"
	api "$who" GET "/v1/events?since=0&tail=2&follow=0"
	is "$(printf '%s\n' "$BODY" | grep -c '^id: ') $(printf '%s\n' "$BODY" | sed -n 's/^id: //p' | tail -1)" \
		"2 $(last_seq "$who")" "$who: since=0&tail=2: the store's last 2 records, the head last"
	api "$who" GET "/v1/events?since=$(($(last_seq "$who") - 1))&tail=5&follow=0"
	is "$(printf '%s\n' "$BODY" | grep -c '^id: ')" 1 "$who: tail after since: only what since leaves (1 record)"
	for i in 0 100001 -1 x; do
		api "$who" GET "/v1/events?tail=$i&follow=0"
		is "$CODE $(jq_get "$BODY" error.field)" "400 tail" "$who: tail=$i -> 400 naming tail"
	done
	api "$who" GET "/v1/events?decision=&follow=0"
	is "$CODE $(jq_get "$BODY" error.field)" "400 decision" "$who: an empty decision -> 400 naming decision"
}

decision_tests() {
	local who=$1 id i got
	api "$who" POST /v1/sandboxes "{\"overrides\":{\"network\":{\"mode\":\"allowlist\",\"allow\":[\"127.0.0.1:$OP\"]}}}"
	id=$(jq_get "$BODY" id)
	api "$who" POST "/v1/sandboxes/$id/exec" "{\"argv\":[\"curl\",\"-s\",\"-o\",\"/dev/null\",\"-w\",\"%{http_code}\",\"http://127.0.0.1:$OP/hello\"]}"
	is "$(jq_get "$BODY" stdout.text)" 200 "$who: an allowlist sandbox reaches its allowed host"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["curl","-s","-o","/dev/null","-w","%{http_code}","http://denied.example/"]}'
	is "$(jq_get "$BODY" stdout.text)" 403 "$who: ... and is refused another (403 from the proxy)"
	for i in $(seq 1 100); do
		[ "$(records "$who" "since=0&sandbox=$id&kind=net.connect" | jq length)" -ge 2 ] && break
		sleep 0.05
	done
	got=$(records "$who" "since=0&sandbox=$id&kind=net.connect&decision=deny" | jq -c '[.[] | [.attrs.decision, .attrs.host]]')
	is "$got" '[["deny","denied.example"]]' "$who: events?sandbox=ID&kind=net.connect&decision=deny: only the denial"
	got=$(records "$who" "since=0&sandbox=$id&kind=net.connect&decision=allow" | jq -c '[.[] | [.attrs.decision, .attrs.host]]')
	is "$got" '[["allow","127.0.0.1"]]' "$who: ... decision=allow: only the allowed connection"
	got=$(records "$who" "kind=net.connect&decision=deny&tail=50" | jq -c --arg id "$id" '[(map(.attrs.decision) | unique), (map(select(.sandbox == $id)) | length)]')
	is "$got" '[["deny"],1]' "$who: kind=net.connect&decision=deny&tail=50 (the last denials, no since): denials only, this one among them"
	api "$who" DELETE "/v1/sandboxes/$id"
}

# wait_for FILE PATTERN: up to 15 s for a line of FILE to match PATTERN (grep -E).
wait_for() {
	local i
	for i in $(seq 300); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# An EventSource on GET /v1/events?kind=sandbox. over TCP. The daemon is restarted under it
# (SIGTERM: its sandboxes live on, the next daemon adopts them, a sandbox.adopt record
# each, made while no stream is open). The EventSource reconnects by itself with the
# Last-Event-ID header: it gets the adopt record, then the next create, and the ids it got
# are exactly the store's sandbox.* records from its first to its last, once each, in order.
resume_tests() {
	local who=$1 port=$2 ops=$3 out log a b first last got want npid
	out="$T/resume-$who.txt"
	log="$T/resume-$who.log"
	: >"$out"
	: >"$log"
	rm -f "$T/resume-stop"
	"$NODE" "$TESTS_DIR/integration/events-resume.mjs" "http://127.0.0.1:$port" "$ops" "$out" \
		"$T/resume-stop" >"$log" 2>&1 &
	npid=$!
	wait_for "$log" '^open$'
	ok $? "$who: resume: the EventSource opens the stream" || sed 's/^/#   /' "$log"
	api "$who" POST /v1/sandboxes '{"labels":{"session":"resume"}}'
	a=$(jq_get "$BODY" id)
	wait_for "$out" " sandbox.create $a\$"
	ok $? "$who: resume: it gets sandbox A's create" || sed 's/^/#   /' "$out"
	serve_stop "$who"
	serve_start "$who" --listen "127.0.0.1:$port"
	ok $? "$who: resume: the daemon is restarted (SIGTERM, then the same listener)"
	api "$who" POST /v1/sandboxes '{"labels":{"session":"resume"}}'
	b=$(jq_get "$BODY" id)
	wait_for "$out" " sandbox.create $b\$"
	ok $? "$who: resume: after the restart it gets sandbox B's create" || sed 's/^/#   /' "$out" "$log"
	touch "$T/resume-stop"
	wait "$npid"
	is "$(grep -c '^open$' "$log")" 2 "$who: resume: it reconnected by itself, once"
	grep -q " sandbox.adopt $a\$" "$out"
	ok $? "$who: resume: A's adopt record, stored while no stream was open, came on the reconnect" ||
		sed 's/^/#   /' "$out"
	first=$(head -n 1 "$out" | cut -d' ' -f1)
	last=$(tail -n 1 "$out" | cut -d' ' -f1)
	got=$(cut -d' ' -f1 "$out" | tr '\n' ' ')
	want=$(records "$who" "since=$((first - 1))&kind=sandbox." |
		jq -r --argjson last "$last" '.[] | select(.seq <= $last) | .seq' | tr '\n' ' ')
	[ -n "$want" ]
	is "$?:$got" "0:$want" "$who: resume: every stored sandbox.* record from its first to its last, once each, in order"
	api "$who" DELETE "/v1/sandboxes/$a"
	api "$who" DELETE "/v1/sandboxes/$b"
	# A Last-Event-ID that is no sequence number is refused, naming the header.
	call "tcp:$port:$ops" GET "/v1/events?follow=0" "" -H 'Last-Event-ID: abc'
	is "$CODE:$(jq_get "$BODY" error.field)" "400:Last-Event-ID" \
		"$who: resume: a Last-Event-ID that is not a sequence number is a 400 naming it"
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
	tail_tests "$who" "$port"
	decision_tests "$who"
	audit_tests "$who" "$port" "$ops"
	resume_tests "$who" "$port" "$ops"
	tamper_tests "$who" "$port"
	big_store_tests "$who"
}

dashboard_api_tests root "$(free_port)"
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
dashboard_api_tests user "$(free_port)"
SERVE_ENV=()
done_testing
