#!/bin/bash
# paddock serve: what the daemon reports and keeps beyond the basics of test-serve.sh, as
# root and as an unprivileged user (TAP): egress usage and budget, limits.disk at create,
# ended sandboxes kept for a retention period, a lost sandbox's cgroup killed at
# re-adoption, a JSON 413 over --max-body, scoped create tokens, the spool offset
# saved in the audit batch's transaction, a long history's replay in pages, and a kill seen
# through by a daemon stopped or killed right after answering it.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"
: "${TESTS_DIR:?TESTS_DIR must name the tests directory}"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
for tool in curl python3 jq sqlite3; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed (make setup installs it)"; exit 1; }
done

python3 "$TESTS_DIR/integration/egress-origin.py" "$T/origin.port" &
ORIGIN_PID=$!
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; kill $ORIGIN_PID 2>/dev/null; undelegate_cgroup; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -s "$T/origin.port" ] && break; sleep 0.05; done
OP=$(cat "$T/origin.port")
[ -n "$OP" ] || { echo "Bail out! the origin server did not start"; exit 1; }

# poll WHO ID JQ-EXPR: up to 5 s for GET /v1/sandboxes/ID to make EXPR true.
poll() {
	local i
	for i in $(seq 1 50); do
		api "$1" GET "/v1/sandboxes/$2"
		[ "$(printf '%s' "$BODY" | jq -r "$3" 2>/dev/null)" = true ] && return 0
		sleep 0.1
	done
	return 1
}

egress_tests() {
	local who=$1 id before after used0 used1 out
	api "$who" POST /v1/sandboxes "{\"overrides\":{\"network\":{\"mode\":\"allowlist\",\"allow\":[\"127.0.0.1:$OP\"]},\"limits\":{\"egress_bytes\":\"1M\"}}}"
	id=$(jq_get "$BODY" id)
	is "$CODE $(jq_get "$BODY" limits.egress_bytes)" "201 1048576" "$who: create with an egress budget of 1M"
	poll "$who" "$id" '.remaining.egress_bytes != null'
	used0=$(jq_get "$BODY" usage.egress_bytes)
	before=$(jq_get "$BODY" remaining.egress_bytes)
	is "$used0 $before" "0 1048576" "$who: before any request: usage.egress_bytes 0, the whole budget remains"
	api "$who" POST "/v1/sandboxes/$id/exec" "{\"argv\":[\"curl\",\"-sS\",\"-m\",\"10\",\"-o\",\"/dev/null\",\"-w\",\"%{size_download}\",\"http://127.0.0.1:$OP/big\"]}"
	out=$(jq_get "$BODY" stdout.text)
	is "$CODE $(jq_get "$BODY" exit_code) $out" "200 0 65536" "$who: the sandbox fetches 65536 bytes from a loopback origin through the proxy"
	poll "$who" "$id" '.usage.egress_bytes >= 65536'
	ok $? "$who: usage.egress_bytes shows at least the 65536 bytes fetched ($(jq_get "$BODY" usage.egress_bytes))"
	used1=$(jq_get "$BODY" usage.egress_bytes)
	after=$(jq_get "$BODY" remaining.egress_bytes)
	is "$((before - after))" "$((used1 - used0))" "$who: the remaining egress budget dropped by as much ($before -> $after)"
	api "$who" DELETE "/v1/sandboxes/$id"
}

disk_tests() {
	local who=$1 id out
	api "$who" POST /v1/sandboxes '{"overrides":{"limits":{"disk":"2M"}}}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 overrides.limits.disk" \
		"$who: limits.disk with an overlay workspace -> 400 naming it (not silently ignored)"
	api "$who" POST /v1/sandboxes '{"overrides":{"limits":{"disk":"2M"}},"workspace":{"mode":"tmpfs"}}'
	id=$(jq_get "$BODY" id)
	poll "$who" "$id" '.limits.disk != null'
	is "$CODE $(jq_get "$BODY" limits.disk)" "200 2097152" "$who: a tmpfs workspace with limits.disk 2M reports it"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"head -c 1000000 /dev/zero > small && echo small-ok; head -c 4000000 /dev/zero > big; echo rc=$?"}'
	out="$(jq_get "$BODY" stdout.text | tr -d '\n') $(jq_get "$BODY" stderr.text | grep -c 'No space left on device')"
	is "$out" "small-okrc=1 1" "$who: 1 MB fits; writing 4 MB in the workspace past 2M fails with ENOSPC"
	api "$who" POST /v1/sandboxes '{"overrides":{"limits":{"disk":"tiny"}},"workspace":{"mode":"tmpfs"}}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 overrides.limits.disk" "$who: a disk limit that is not a size -> 400 naming it"
	api "$who" DELETE "/v1/sandboxes/$id"
}

ended_tests() {
	local who=$1 port=$2 id id2 id3 id4 n
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sE"},"ttl":1,"idempotency_key":"k-end"}'
	id=$(jq_get "$BODY" id)
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sE"}}'
	id2=$(jq_get "$BODY" id)
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sF"}}'
	id3=$(jq_get "$BODY" id)
	for n in $(seq 1 50); do
		api "$who" GET "/v1/sandboxes/$id"
		[ "$(jq_get "$BODY" state)" = ended ] && break
		sleep 0.1
	done
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" end_reason) $(jq_get "$BODY" labels.session)" \
		"200 ended ttl sE" "$who: a sandbox past its ttl stays visible: state ended, end_reason ttl"
	ok $([[ "$(jq_get "$BODY" ended_at)" == 20*Z ]] && echo 0 || echo 1) "$who: ... with its end time ($(jq_get "$BODY" ended_at))"
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sE"},"idempotency_key":"k-end"}'
	is "$CODE $(jq_get "$BODY" error.code) $(jq_get "$BODY" error.field) $(jq_get "$BODY" error.message | grep -c "$id")" \
		"409 conflict idempotency_key 1" "$who: a retried create with the ended sandbox's key -> 409 naming it, no new sandbox"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["true"]}'
	is "$CODE $(jq_get "$BODY" error.code)" "409 conflict" "$who: exec in an ended sandbox -> 409"
	api "$who" DELETE "/v1/sandboxes/$id2"
	is "$CODE $(jq_get "$BODY" state)" "200 ended" "$who: DELETE"
	api "$who" GET "/v1/sandboxes/$id2"
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" end_reason)" "200 ended deleted" "$who: a deleted sandbox: end_reason deleted"
	api "$who" DELETE "/v1/sandboxes/$id2"
	is "$CODE $(jq_get "$BODY" state)" "200 ended" "$who: DELETE of an ended sandbox answers as the first did"
	api "$who" POST /v1/kill '{"session":"sF","reason":"gap test"}'
	for n in $(seq 1 50); do
		api "$who" GET "/v1/sandboxes/$id3"
		[ "$(jq_get "$BODY" state)" = ended ] && break
		sleep 0.1
	done
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" end_reason)" "200 ended killed" "$who: killed by a selector: end_reason killed"
	api "$who" GET "/v1/sandboxes"
	is "$(printf '%s' "$BODY" | jq -c '[.sandboxes[] | select(.state == "ended")] | length')" "0" \
		"$who: the list hides ended sandboxes"
	api "$who" GET "/v1/sandboxes?state=ended&session=sE"
	is "$(printf '%s' "$BODY" | jq -r '[.sandboxes[].id] | sort | join(" ")')" "$(printf '%s\n' "$id" "$id2" | sort | tr '\n' ' ' | sed 's/ $//')" \
		"$who: ?state=ended&session=sE lists the two ended ones of the session"
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sE"}}'
	id4=$(jq_get "$BODY" id)
	api "$who" GET "/v1/sandboxes?state=all&session=sE"
	is "$(printf '%s' "$BODY" | jq -r '[.sandboxes[].state] | sort | join(" ")')" "ended ended running" \
		"$who: ?state=all lists live and ended ones"
	# Kept across a restart (daemon.db); purged once the retention period has passed.
	serve_stop "$who"
	serve_start "$who" --listen "127.0.0.1:$port"
	api "$who" GET "/v1/sandboxes/$id"
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" end_reason)" "200 ended ttl" "$who: an ended sandbox is still visible after a restart"
	serve_stop "$who"
	sleep 1.1
	serve_start "$who" --listen "127.0.0.1:$port" --retention 1s
	for n in $(seq 1 40); do
		api "$who" GET "/v1/sandboxes/$id"
		[ "$CODE" = 404 ] && break
		sleep 0.1
	done
	is "$CODE" "404" "$who: with --retention 1s, a sandbox ended over 1 s ago is purged"
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sE"},"idempotency_key":"k-end"}'
	is "$CODE" "201" "$who: once purged, the idempotency key makes a new sandbox"
	# Supervisors outlive their daemon: the live ones this test made are destroyed here.
	api "$who" DELETE "/v1/sandboxes/$(jq_get "$BODY" id)"
	api "$who" DELETE "/v1/sandboxes/$id4"
	is "$CODE" "200" "$who: the session's live sandboxes are destroyed"
	as "$who" "$T/bin/paddock" serve --retention forever >"$T/ret.log" 2>&1
	is "$? $(grep -c -- "--retention wants a duration" "$T/ret.log")" "122 1" "$who: a bad --retention is refused"
}

supervisors_of() { pgrep -f "paddock supervise --id $1" | tr '\n' ' '; }

# lost_sandbox WHO SESSION WHAT: a sandbox (labels.session SESSION) with a setsid background
# process; sets ID, CG (its cgroup, as its supervisor recorded it) and PROCS (its processes).
lost_sandbox() {
	local who=$1 what=$3
	api "$who" POST /v1/sandboxes "{\"labels\":{\"session\":\"$2\"}}"
	ID=$(jq_get "$BODY" id)
	api "$who" POST "/v1/sandboxes/$ID/exec" '{"cmd":"setsid sh -c \"sleep 300\" </dev/null >/dev/null 2>&1 & echo started"}'
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "started" "$who: ${what}a setsid background process runs in the sandbox"
	CG=$(awk 'NR == 1 {print $3}' "$T/serve-$who/run/sb/$ID/cgroup" 2>/dev/null)
	PROCS=$(cat "$CG/cgroup.procs" 2>/dev/null | tr '\n' ' ')
	ok $([ -d "$CG" ] && [ "$(wc -w <<<"$PROCS")" -ge 2 ] && echo 0 || echo 1) \
		"$who: ${what}the supervisor recorded the sandbox's cgroup ($CG: pids $PROCS)"
}

# lost_reaped WHO WHAT: the lost sandbox ID's cgroup CG is gone, with every process of PROCS,
# and a sandbox.reap event naming the cgroup says so.
lost_reaped() {
	local who=$1 what=$2 left n
	is "$([ -d "$CG" ] && echo kept || echo removed)" "removed" "$who: ${what}the lost sandbox's cgroup is removed"
	left=""
	# A zombie waiting for its new parent to reap it is not a process that runs.
	for n in $PROCS; do
		[ -r "/proc/$n/stat" ] && [ "$(awk '{print $3}' "/proc/$n/stat" 2>/dev/null)" != Z ] &&
			left="$left $n:$(tr '\0' ' ' <"/proc/$n/cmdline" 2>/dev/null)"
	done
	is "$left" "" "$who: ${what}no process of the sandbox remains (the background sleep included)"
	as "$who" curl -s -N --max-time 2 --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/events?since=0&sandbox=$ID&kind=sandbox.reap" >"$T/reap-$who"
	is "$(grep -c '"removed":true' "$T/reap-$who") $(grep -c "\"cgroup\":\"$CG\"" "$T/reap-$who")" "1 1" \
		"$who: ${what}the reaping is recorded (sandbox.reap naming the cgroup)"
}

# A supervisor SIGKILLed while no daemon runs: the next daemon kills its sandbox's cgroup.
lost_tests() {
	local who=$1 port=$2 n
	lost_sandbox "$who" sL ""
	serve_stop "$who" KILL
	kill -9 $(supervisors_of "$ID") 2>/dev/null
	serve_start "$who" --listen "127.0.0.1:$port"
	api "$who" GET "/v1/sandboxes/$ID"
	is "$CODE $(jq_get "$BODY" state)" "200 lost" "$who: the restarted daemon finds the sandbox lost"
	for n in $(seq 1 30); do [ -d "$CG" ] || break; sleep 0.1; done
	lost_reaped "$who" ""
	api "$who" DELETE "/v1/sandboxes/$ID"
	api "$who" GET "/v1/sandboxes/$ID"
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" end_reason)" "200 ended supervisor_lost" \
		"$who: the deleted lost sandbox is kept as ended (reason supervisor_lost)"
}

# A supervisor SIGKILLed while its daemon runs: the daemon sees its connection end with no end
# said, finds the supervisor gone, and reaps the sandbox's cgroup at once (before its run
# directory, which holds the file naming the cgroup, goes).
lost_live_tests() {
	local who=$1 n
	lost_sandbox "$who" sK "live: "
	kill -9 $(supervisors_of "$ID") 2>/dev/null
	ok $? "$who: live: the supervisor is killed with SIGKILL while the daemon runs"
	for n in $(seq 1 50); do
		api "$who" GET "/v1/sandboxes/$ID"
		[ "$(jq_get "$BODY" state)" = lost ] && [ ! -d "$CG" ] && break
		sleep 0.1
	done
	is "$CODE $(jq_get "$BODY" state)" "200 lost" "$who: live: the daemon finds the sandbox lost"
	lost_reaped "$who" "live, no restart: "
	api "$who" DELETE "/v1/sandboxes/$ID"
}

# A kill is answered once it is asked. The daemon stopped (SIGTERM) or killed (SIGKILL) at
# once after: the kill is still seen through, by this daemon before it exits or by the next
# when it adopts the sandbox (RUNDIR/sb/ID/ending), never left running. The window is made
# wide: the supervisor is told to destroy only after it has removed the spill files of the
# sandbox's commands, here 50000 of them. DEAD: SIGKILL, and the supervisor dies too before
# the restart: the sandbox is reaped and ends as killed, not lost.
ending_tests() {
	local who=$1 port=$2 how sig n left
	for how in TERM KILL DEAD; do
		sig=${how/DEAD/KILL}
		api "$who" POST /v1/sandboxes "{\"labels\":{\"session\":\"sE-$how\"}}"
		ID=$(jq_get "$BODY" id)
		api "$who" POST "/v1/sandboxes/$ID/exec" '{"argv":["seq","1","1000"],"output_cap":64}'
		api "$who" POST "/v1/sandboxes/$ID/exec" \
			'{"cmd":"cd /tmp/.paddock/exec && seq 50000 | xargs touch && ls | wc -l"}'
		is "$CODE $(jq_get "$BODY" stdout.text | tr -d '\n')" "200 50001" \
			"$who: $how: the sandbox has 50001 spill files to remove before its end"
		CG=$(awk 'NR == 1 {print $3}' "$T/serve-$who/run/sb/$ID/cgroup" 2>/dev/null)
		api "$who" POST /v1/kill "{\"ids\":[\"$ID\"],\"reason\":\"ending-$how\"}"
		serve_stop "$who" "$sig"
		is "$CODE $(jq_get "$BODY" killed.0)" "200 $ID" \
			"$who: $how: the kill is answered; the daemon gets SIG$sig at once"
		if [ "$how" = DEAD ]; then
			kill -9 $(supervisors_of "$ID") 2>/dev/null
			ok $? "$who: DEAD: its supervisor is killed too (SIGKILL) before the restart"
		fi
		if [ "$how" = TERM ]; then
			for n in $(seq 1 100); do [ -z "$(supervisors_of "$ID")" ] && break; sleep 0.1; done
			left=$(supervisors_of "$ID")
			is "$SERVE_RC:$left" "0:" \
				"$who: TERM: the daemon saw the kill through before it exited (no supervisor left)"
		fi
		serve_start "$who" --listen "127.0.0.1:$port"
		for n in $(seq 1 100); do [ -z "$(supervisors_of "$ID")" ] && break; sleep 0.1; done
		api "$who" GET "/v1/sandboxes/$ID"
		is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" end_reason) $(supervisors_of "$ID")" \
			"200 ended killed " "$who: $how: after a restart the sandbox has ended (killed), its supervisor gone"
		as "$who" curl -s -N --max-time 2 --unix-socket "$(sock_of "$who")" \
			"http://paddock/v1/events?since=0&follow=0&sandbox=$ID&kind=sandbox.destroy" >"$T/end-$who"
		is "$(grep -c '"reason":"killed"' "$T/end-$who") $(grep -c '"operator":"unix:' "$T/end-$who")" "1 1" \
			"$who: $how: one sandbox.destroy, reason killed, naming who asked for the kill"
		api "$who" GET "/v1/sandboxes?session=sE-$how"
		is "$(printf '%s' "$BODY" | jq '.sandboxes | length')" "0" "$who: $how: it is not listed as live"
		if [ "$how" = DEAD ]; then
			is "$([ -n "$CG" ] && [ ! -d "$CG" ] && echo removed)" "removed" \
				"$who: DEAD: its cgroup ($CG) is reaped"
		fi
	done
}

# Two DELETEs of one sandbox at once: the second is not refused while the first's destroy runs
# (50000 spill files make it last); both are answered when it ends, and it is recorded once.
two_deletes_tests() {
	local who=$1 id a b
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sD"}}'
	id=$(jq_get "$BODY" id)
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["seq","1","1000"],"output_cap":64}'
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"cd /tmp/.paddock/exec && seq 50000 | xargs touch"}'
	: >"$T/del1-$who"
	: >"$T/del2-$who"
	chmod 0666 "$T/del1-$who" "$T/del2-$who" # the answers, written by curl as WHO
	as "$who" curl -s -o "$T/del1-$who" -w '%{http_code}' --unix-socket "$(sock_of "$who")" \
		-X DELETE "http://paddock/v1/sandboxes/$id" >"$T/code1-$who" &
	a=$!
	sleep 0.05
	as "$who" curl -s -o "$T/del2-$who" -w '%{http_code}' --unix-socket "$(sock_of "$who")" \
		-X DELETE "http://paddock/v1/sandboxes/$id" >"$T/code2-$who" &
	b=$!
	wait "$a" "$b"
	is "$(cat "$T/code1-$who") $(jq -r .state "$T/del1-$who") $(cat "$T/code2-$who") $(jq -r .state "$T/del2-$who" 2>&1)" \
		"200 ended 200 ended" "$who: two DELETEs at once: both are answered ended (the second is not refused 409)"
	as "$who" curl -s -N --max-time 2 --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/events?since=0&follow=0&sandbox=$id&kind=sandbox.destroy" >"$T/del-$who"
	is "$(grep -c '"reason":"deleted"' "$T/del-$who")" "1" "$who: ... and the sandbox is destroyed once (one sandbox.destroy)"
}

# The create token's scope and lifetime.
token_tests() {
	local who=$1 port=$2 id tok body want
	api "$who" POST /v1/sandboxes '{"token":{"ops":["read","files"],"ttl_s":600}}'
	id=$(jq_get "$BODY" id)
	tok=$(jq_get "$BODY" token)
	is "$CODE $(jq_get "$BODY" token_ops | tr -d '"')" "201 [read,files]" "$who: create with a token scoped to read and files"
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id/exec" "$tok" '{"argv":["id"]}'
	is "$CODE $(jq_get "$BODY" error.code) $(jq_get "$BODY" error.message | grep -c "'exec'")" "403 forbidden 1" \
		"$who: the scoped create token is refused exec (403 naming the exec operation)"
	tcp PUT "http://127.0.0.1:$port/v1/sandboxes/$id/files?path=/tmp/t.txt" "$tok" 'scoped'
	is "$CODE" "201" "$who: ... and may write files"
	tcp GET "http://127.0.0.1:$port/v1/sandboxes/$id" "$tok"
	is "$CODE $(jq_get "$BODY" id)" "200 $id" "$who: ... and read the sandbox"
	api "$who" DELETE "/v1/sandboxes/$id"
	api "$who" POST /v1/sandboxes '{"token":{"ttl_s":4}}'
	id=$(jq_get "$BODY" id)
	tok=$(jq_get "$BODY" token)
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id/exec" "$tok" '{"argv":["echo","in-time"]}'
	is "$CODE $(jq_get "$BODY" stdout.text | tr -d '\n')" "200 in-time" "$who: a create token with ttl_s 4 works at first"
	sleep 4.5
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id/exec" "$tok" '{"argv":["echo","late"]}'
	is "$CODE $(jq_get "$BODY" error.code)" "401 unauthorized" "$who: ... and is refused once expired (401)"
	api "$who" DELETE "/v1/sandboxes/$id"
	while IFS='|' read -r body want; do
		api "$who" POST /v1/sandboxes "$body"
		is "$CODE $(jq_get "$BODY" error.field)" "$want" "$who: create $body -> $want"
	done <<'CASES'
{"token":{"ttl_s":86401}}|400 token.ttl_s
{"token":{"ttl_s":0}}|400 token.ttl_s
{"ttl":"1m","token":{"ttl_s":120}}|400 token.ttl_s
{"token":{"ops":["root"]}}|400 token.ops[0]
{"token":{"ops":[]}}|400 token.ops
{"token":{"scope":"all"}}|400 token.scope
{"token":"all"}|400 token
CASES
}

# The spool offset moves in the audit batch's transaction: a daemon.db left behind by a crash
# (the append committed, daemon.db's offset not yet saved) doubles nothing.
spool_tests() {
	local who=$1 port=$2 id n before after dups st
	st=$T/serve-$who/state
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sS"}}'
	id=$(jq_get "$BODY" id)
	for n in 1 2 3; do api "$who" POST "/v1/sandboxes/$id/exec" "{\"argv\":[\"echo\",\"spool-$n\"]}"; done
	sleep 1.5 # the tick ingests the spool
	before=$(as "$who" sqlite3 "$st/audit.db" "select count(*) from events where sandbox = '$id' and kind like 'process.%'")
	n=$(as "$who" sqlite3 "$st/audit.db" "select offset from spool_offsets where source = '$id'")
	is "$n" "$(as "$who" sqlite3 "$st/daemon.db" "select spool_offset from sandboxes where id = '$id'")" \
		"$who: audit.db holds the spool offset ($n), as daemon.db does"
	ok $([ "${before:-0}" -ge 6 ] && [ "${n:-0}" -gt 0 ] && echo 0 || echo 1) "$who: the 3 execs' events are ingested ($before)"
	serve_stop "$who" KILL
	# What a crash between the append and daemon.db's offset save left before: daemon.db behind.
	as "$who" sqlite3 "$st/daemon.db" "update sandboxes set spool_offset = 0 where id = '$id'"
	serve_start "$who" --listen "127.0.0.1:$port"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["echo","spool-4"]}'
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "spool-4" "$who: the re-adopted sandbox runs a command"
	sleep 1.5
	after=$(as "$who" sqlite3 "$st/audit.db" "select count(*) from events where sandbox = '$id' and kind like 'process.%'")
	dups=$(as "$who" sqlite3 "$st/audit.db" "select count(*) from (select line from events where sandbox = '$id' group by line having count(*) > 1)")
	is "$dups $((after - before))" "0 2" "$who: after the restart no event is stored twice; the new exec adds its 2"
	is "$(as "$who" sqlite3 "$st/daemon.db" "select spool_offset from sandboxes where id = '$id'")" \
		"$(as "$who" sqlite3 "$st/audit.db" "select offset from spool_offsets where source = '$id'")" \
		"$who: daemon.db's offset follows audit.db's again"
	api "$who" DELETE "/v1/sandboxes/$id"
	is "$(as "$who" sqlite3 "$st/audit.db" "select count(*) from spool_offsets where source = '$id'")" "0" \
		"$who: the offset is forgotten with the spool"
}

# A long history replayed by GET /v1/events in pages, at the client's pace (events-replay.py).
replay_tests() {
	local who=$1
	cp "$TESTS_DIR/integration/events-replay.py" "$T/bin/"
	tap_run as "$who" python3 "$T/bin/events-replay.py" "$(sock_of "$who")"
}

gap_tests() {
	local who=$1 port=$2
	serve_start "$who" --listen "127.0.0.1:$port"
	ok $? "$who: the daemon starts"
	egress_tests "$who"
	disk_tests "$who"
	ended_tests "$who" "$port"
	lost_tests "$who" "$port"
	lost_live_tests "$who"
	ending_tests "$who" "$port"
	two_deletes_tests "$who"
	token_tests "$who" "$port"
	spool_tests "$who" "$port"
	replay_tests "$who"
	api "$who" GET /v1/sandboxes
	is "$(printf '%s' "$BODY" | jq '.sandboxes | length')" "0" "$who: no live sandbox is left for the next test"
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: clean stop"
}

gap_tests root "$(free_port)"
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
gap_tests user "$(free_port)"
SERVE_ENV=()
done_testing
