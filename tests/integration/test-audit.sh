#!/usr/bin/env bash
# The audit store: `paddock run` and `paddock ws` fill it; `paddock audit
# ls/show/tail/verify/export` read it; tampering with the database is caught
# with the right reason; concurrent runs keep one chain; secrets never reach
# the database file; the views show the hashed records, never the table's
# query columns, whatever a forger writes there, through `paddock audit` and
# the daemon's /v1/events; an anchored head catches a tail cut with its
# checkpoint; a daemon sandbox's end is signed. Each case runs as root and as
# nobody (rootless).
set -u
. "$TESTS_DIR/integration/lib-run.sh"
. "$TESTS_DIR/integration/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

for tool in sqlite3 openssl python3 jq curl; do
	if ! command -v $tool >/dev/null; then
		echo "1..0 # SKIP $tool is not installed (make setup installs it)"
		[ "${PDK_MUST_WORK:-0}" = 1 ] && exit 1
		exit 0
	fi
done

# paddock audit ARGS as root or nobody, on that identity's state directory
# (AUDIT_STATE overrides it).
paudit() {
	local PRUN who=$1
	prun_cmd "$who"
	shift
	if [ -n "${AUDIT_STATE:-}" ]; then
		(cd "$T/home" && exec "${PRUN[@]:0:${#PRUN[@]}-1}" PADDOCK_STATE_DIR="$AUDIT_STATE" \
			"$T/bin/paddock" audit "$@")
	else
		(cd "$T/home" && exec "${PRUN[@]}" audit "$@")
	fi
}
state_of() { echo "$T/state-$1"; }
# The records in the store itself (what no spool holds any more).
stored() { sqlite3 "$(state_of "$1")/audit.db" 'SELECT COUNT(*) FROM events'; }
# The records of every run that is over: its spool folded first (paddock audit fold).
records() { paudit "$1" fold >/dev/null && stored "$1"; }
spools() { find "$(state_of "$1")/audit-spool" -name '*.jsonl' 2>/dev/null | wc -l; }

# The exported lines checked by an independent verifier (python's hashlib): each
# line's prev_hash is the SHA-256 of the line before, and seq counts from 1.
# Prints the number of lines and the last hash.
check_export_chain() {
	python3 -c '
import hashlib, json, sys
prev, n = "0" * 64, 0
for raw in sys.stdin.buffer:
    line = raw.rstrip(b"\n")
    rec = json.loads(line)
    n += 1
    assert rec["seq"] == n, (rec["seq"], n)
    assert rec["prev_hash"] == prev, (n, rec["prev_hash"], prev)
    prev = hashlib.sha256(line).hexdigest()
print(n, prev)'
}

# The last checkpoint's signature checked with the openssl command (third party).
check_last_checkpoint_with_openssl() {
	local st=$1 d seq hash key sig
	d=$(mktemp -d "$T/sig-XXXXXX")
	IFS='|' read -r seq hash key sig < <(sqlite3 "$st/audit.db" \
		"SELECT seq, lower(hex(hash)), key_id, hex(sig) FROM checkpoints ORDER BY seq DESC LIMIT 1")
	printf '{"hash":"%s","key_id":"%s","seq":%s}' "$hash" "$key" "$seq" > "$d/msg"
	echo "$sig" | python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.stdin.read().strip()))' > "$d/sig"
	openssl pkeyutl -verify -pubin -inkey "$st/audit-key.pub.pem" -rawin -in "$d/msg" \
		-sigfile "$d/sig" >/dev/null 2>&1
}

check_run_fills_store() {
	local who=$1 out st rc id n
	st=$(state_of "$who")
	prun "$who" --workspace-mode none -- sh -c 'exit 3'
	is "$?" 3 "$who: the command's status comes through with the audit store on"
	is "$(records "$who")" 4 "$who: one run stores 4 events (create, exec, exit, destroy)"
	is "$(stat -c %a "$st/audit.db")" 600 "$who: the store is 0600"
	is "$(stat -c %a "$st/audit-key")" 600 "$who: the signing key is 0600"
	[ "$who" = user ] && is "$(stat -c %u "$st/audit.db")" $UNPRIV_UID "user: the store is nobody's own"

	out=$(paudit "$who" ls)
	is "$?" 0 "$who: audit ls exits 0"
	id=$(echo "$out" | awk 'NR == 2 { print $1 }')
	[ ${#id} = 36 ]
	ok $? "$who: audit ls lists the sandbox ($id)"
	echo "$out" | awk 'NR == 2 { exit !($4 == 4) }'
	ok $? "$who: audit ls counts its 4 events"
	is "$(paudit "$who" ls --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d), d[0]["events"], d[0]["sandbox"])')" \
		"1 4 $id" "$who: audit ls --json"

	out=$(paudit "$who" show "${id:0:13}")
	is "$?" 0 "$who: audit show PREFIX exits 0"
	is "$(echo "$out" | awk 'NR > 1 { print $3 }' | tr '\n' ' ')" \
		"sandbox.create process.exec process.exit sandbox.destroy " "$who: audit show is the timeline"
	echo "$out" | grep -q 'process.exit.*exit_code=3'
	ok $? "$who: audit show shows the exit code"
	is "$(paudit "$who" show "$id" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" \
		4 "$who: audit show --json"
	paudit "$who" show nosuchsandbox >/dev/null 2>&1
	is "$?" 1 "$who: audit show of an unknown id exits 1"

	out=$(paudit "$who" tail -n 2)
	is "$(echo "$out" | awk '{ print $4 }' | tr '\n' ' ')" "process.exit sandbox.destroy " \
		"$who: audit tail -n 2 prints the last two events"
	out=$(paudit "$who" tail --kind process.exec)
	is "$(echo "$out" | awk '{ print $4 }' | sort -u)" "process.exec" "$who: audit tail --kind filters"

	out=$(paudit "$who" verify)
	rc=$?
	is "$rc" 0 "$who: audit verify of an intact store exits 0"
	echo "$out" | grep -qE '^head: 4 [0-9a-f]{64}$'
	ok $? "$who: audit verify prints the head seq and hash"

	out=$(paudit "$who" export --format jsonl)
	is "$(echo "$out" | check_export_chain | cut -d' ' -f1)" 4 \
		"$who: export gives the canonical lines and an independent verifier accepts the chain"
	n=$(echo "$out" | check_export_chain | cut -d' ' -f2)
	paudit "$who" verify | grep -q "^head: 4 $n$"
	ok $? "$who: the head hash is the SHA-256 of the last exported line"
	is "$(paudit "$who" export --since 3 | wc -l)" 1 "$who: export --since 3 gives record 4 only"
	out=$(paudit "$who" export --format otlp | python3 -c '
import json, sys
docs = [json.loads(l) for l in sys.stdin]
logs = [r for d in docs for rl in d.get("resourceLogs", []) for sl in rl["scopeLogs"] for r in sl["logRecords"]]
spans = [s for d in docs for rs in d.get("resourceSpans", []) for ss in rs["scopeSpans"] for s in ss["spans"]]
names = sorted(s["name"] for s in spans)
print(len(logs), ",".join(r["eventName"] for r in logs), len(spans), "sandbox" in names)')
	is "$out" "4 sandbox.create,process.exec,process.exit,sandbox.destroy 2 True" \
		"$who: export --format otlp: a log record per stored event, the sandbox and process spans"
	check_last_checkpoint_with_openssl "$st"
	ok $? "$who: the last checkpoint's signature verifies with 'openssl pkeyutl' and the public key file"
	prun "$who" --no-audit --workspace-mode none -- true
	is "$(records "$who")" 4 "$who: --no-audit stores nothing"
}

check_follow() {
	local who=$1 log pid
	log=$(mktemp "$T/tail-XXXXXX")
	chmod 0666 "$log"
	paudit "$who" tail -f -n 0 > "$log" 2>&1 &
	pid=$!
	sleep 0.5
	prun "$who" --workspace-mode none -- true
	sleep 0.8
	# $! is the shell running paudit, not paddock itself: stop this test's tail by name.
	pkill -f "^$T/bin/paddock audit tail -f" 2>/dev/null
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	is "$(awk '$4 ~ /^[a-z]+\.[a-z]+$/ { print $4 }' "$log" | tr '\n' ' ')" \
		"sandbox.create process.exec process.exit sandbox.destroy " \
		"$who: audit tail -f follows the events of a new run, and only those"
}

# A store removed under `tail -f` ends the follow with an error instead of
# waiting forever for a chain that will not grow.
check_follow_gone() {
	local who=$1 copy log pid rc=timeout i
	copy="$T/gone-$who"
	cp -a "$(state_of "$who")" "$copy"
	log=$(mktemp "$T/tail-gone-XXXXXX")
	chmod 0666 "$log"
	AUDIT_STATE=$copy paudit "$who" tail -f -n 0 > "$log" 2>&1 &
	pid=$!
	sleep 0.5
	rm -f "$copy/audit.db" "$copy/audit.db-wal" "$copy/audit.db-shm"
	for i in $(seq 50); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			rc=$?
			break
		fi
		sleep 0.1
	done
	[ "$rc" = timeout ] && { kill "$pid"; pkill -f "^$T/bin/paddock audit tail -f" 2>/dev/null; }
	is "$rc" 1 "$who: audit tail -f exits 1 when the store it follows is removed"
	grep -q "was removed or replaced" "$log"
	ok $? "$who: ... and says so ($(head -c 160 "$log"))"
	rm -rf "$copy"
}

check_secrets() {
	local who=$1 st found=0 f ev
	st=$(state_of "$who")
	ev="$T/home/events-$who.jsonl"
	prun "$who" --workspace-mode none --events "$ev" -e API_TOKEN=tok-9f8e7d6c5b4a-$who \
		-- sh -c 'test -n "$API_TOKEN"' tok-9f8e7d6c5b4a-$who DB_PASSWORD=pw-0a1b2c3d-$who \
		ghp_0123456789abcdefghijABCDEFGHIJ012345
	is "$?" 0 "$who: the secret reaches the command's environment"
	for f in "$st"/audit.db*; do
		grep -aqE "tok-9f8e7d6c5b4a|pw-0a1b2c3d|ghp_0123456789abcdef" "$f" && found=1 && echo "# in $f"
	done
	is "$found" 0 "$who: no secret (-e value, NAME=VALUE in argv, token shape) in the db, -wal or -shm files"
	paudit "$who" export | grep -qE "tok-9f8e7d6c5b4a|pw-0a1b2c3d|ghp_0123456789abcdef"
	is "$?" 1 "$who: no secret in the export"
	grep -qE "tok-9f8e7d6c5b4a|pw-0a1b2c3d|ghp_0123456789abcdef" "$ev"
	is "$?" 1 "$who: no secret in the --events file"
	paudit "$who" export | grep -q '"argv":\["sh","-c","test -n \\"$API_TOKEN\\"","\[REDACTED:API_TOKEN\]","DB_PASSWORD=\[REDACTED\]","\[REDACTED\]"\]'
	ok $? "$who: the argv shows where each secret was, redacted"
}

check_concurrent() {
	local who=$1 before i pids=() out
	before=$(records "$who")
	for i in $(seq 1 20); do
		prun "$who" --workspace-mode none -- sh -c "exit $((i % 3))" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	is "$(( $(records "$who") - before ))" 80 "$who: 20 concurrent runs store all 80 events"
	out=$(paudit "$who" verify)
	is "$?" 0 "$who: and the chain they built together verifies ($(echo "$out" | head -1))"
	is "$(paudit "$who" export | check_export_chain | cut -d' ' -f1)" "$(records "$who")" \
		"$who: the independent verifier accepts the whole chain"
}

check_ws_events() {
	local who=$1 ws id out
	ws=$(mktemp -d "$T/ws-XXXXXX")
	[ "$who" = user ] && chown "$UNPRIV_UID:$UNPRIV_UID" "$ws"
	prun "$who" -w "$ws" -- sh -c 'echo new > made.txt' 2>/dev/null
	id=$(ls "$(state_of "$who")/ws" | grep -E '^[0-9a-f-]{36}$' | tail -n 1)
	pws "$who" discard "$id" >/dev/null
	is "$?" 0 "$who: ws discard of the run's change set"
	out=$(paudit "$who" tail --kind fs.change --json)
	echo "$out" | grep -q '"action":"discarded"' && echo "$out" | grep -q 'made.txt'
	ok $? "$who: ws discard's fs.change events reach the store"
}

# Each tampering on a copy of the store; verify exits 1 and names the reason and seq.
tamper() {
	local who=$1 what=$2 want=$3 sql=$4 copy out rc
	copy=$(mktemp -d "$T/tamper-XXXXXX")
	cp -a "$(state_of "$who")/." "$copy/"
	[ -n "$sql" ] && sqlite3 "$copy/audit.db" "$sql"
	if [ "$what" = "replaced key" ]; then
		rm -f "$copy/audit-key" "$copy/audit-key.pub.pem"
		openssl genpkey -algorithm ed25519 -out "$copy/new.pem" 2>/dev/null
		openssl pkey -in "$copy/new.pem" -outform DER | tail -c 32 > "$copy/audit-key"
		openssl pkey -in "$copy/new.pem" -pubout -out "$copy/audit-key.pub.pem" 2>/dev/null
	fi
	[ "$who" = user ] && chown -R "$UNPRIV_UID:$UNPRIV_UID" "$copy"
	out=$(AUDIT_STATE="$copy" paudit "$who" verify)
	rc=$?
	is "$rc" 1 "$who: $what: audit verify exits 1"
	echo "$out" | grep -q "^broken at $want" || { echo "$out" | sed 's/^/#   /'; false; }
	ok $? "$who: $what: reported as 'broken at $want'"
}

check_tampering() {
	local who=$1 n
	n=$(records "$who")
	tamper "$who" "edited field" "3: altered" \
		"UPDATE events SET line = CAST(replace(CAST(line AS TEXT), '\"exit_code\":3', '\"exit_code\":0') AS BLOB) WHERE seq = 3"
	tamper "$who" "deleted row" "2: missing" "DELETE FROM events WHERE seq = 2"
	tamper "$who" "swapped rows" "5: reordered" \
		"UPDATE events SET seq = -1 WHERE seq = 5; UPDATE events SET seq = 5 WHERE seq = 6; UPDATE events SET seq = 6 WHERE seq = -1"
	tamper "$who" "cut tail" "$((n - 1)): truncated" "DELETE FROM events WHERE seq >= $((n - 1))"
	tamper "$who" "corrupted signature" "4: bad signature" \
		"UPDATE checkpoints SET sig = zeroblob(64) WHERE seq = 4"
	tamper "$who" "replaced key" "4: bad signature" ""
}

# The forger's edit of every query column of one record: moved into another sandbox, renamed,
# re-dated, relabelled. ROW is its seq, TO the other sandbox.
forge_columns_sql() {
	echo "UPDATE events SET sandbox = '$2', kind = 'process.nothing',
		ts = '2001-01-01T00:00:00.000000Z', session = 'forged-session',
		workflow = 'forged-workflow', actor = 'forged-actor' WHERE seq = $1"
}
FORGED='process.nothing|2001-01-01|forged-session|forged-workflow|forged-actor'

# The attack on the views of `paddock audit`: record ROW (sandbox A's process.exec) forged into
# sandbox B. Every view still shows it as its hashed line says, under A and never under B; verify
# exits 1 naming the record and the column.
check_forged_columns() {
	local who=$1 copy a b row out
	copy=$(mktemp -d "$T/forge-XXXXXX")
	cp -a "$(state_of "$who")/." "$copy/"
	a=$(sqlite3 "$copy/audit.db" "SELECT sandbox FROM events WHERE seq = 1")
	b=$(sqlite3 "$copy/audit.db" "SELECT sandbox FROM events WHERE sandbox != '$a' LIMIT 1")
	row=$(sqlite3 "$copy/audit.db" "SELECT seq FROM events WHERE sandbox = '$a' AND kind = 'process.exec'")
	sqlite3 "$copy/audit.db" "$(forge_columns_sql "$row" "$b")"
	[ "$who" = user ] && chown -R "$UNPRIV_UID:$UNPRIV_UID" "$copy"
	out=$(AUDIT_STATE=$copy paudit "$who" ls; AUDIT_STATE=$copy paudit "$who" ls --json)
	! echo "$out" | grep -qE "$FORGED" &&
		[ "$(echo "$out" | awk -v a="$a" '$1 == a { print $4 }')" = 4 ]
	ok $? "$who: forged columns: audit ls shows none of the forged values, and sandbox A's 4 events"
	out=$(AUDIT_STATE=$copy paudit "$who" show "$a")
	echo "$out" | awk -v r="$row" '$2 == r { print $3 }' | grep -qx process.exec &&
		! echo "$out" | grep -qE "$FORGED"
	ok $? "$who: forged columns: audit show A still shows record $row as A's process.exec, re-dated by nothing"
	is "$(AUDIT_STATE=$copy paudit "$who" show "$b" | awk -v r="$row" '$2 == r' | wc -l)" 0 		"$who: forged columns: audit show B does not get A's record"
	is "$(AUDIT_STATE=$copy paudit "$who" show "$a" --json | jq -r ".[] | select(.seq == $row) | .kind + \" \" + .sandbox")" \
		"process.exec $a" "$who: forged columns: audit show --json gives the record as hashed"
	out=$(AUDIT_STATE=$copy paudit "$who" tail -n 1000; AUDIT_STATE=$copy paudit "$who" tail -n 1000 --json)
	! echo "$out" | grep -qE "$FORGED"
	ok $? "$who: forged columns: audit tail shows none of the forged values"
	is "$(AUDIT_STATE=$copy paudit "$who" tail --kind process.nothing | wc -l)" 0 \
		"$who: forged columns: audit tail --kind of the forged kind finds nothing"
	is "$(AUDIT_STATE=$copy paudit "$who" tail -n 1000 --sandbox "$b" | awk -v r="$row" '$2 == r' | wc -l)" 0 \
		"$who: forged columns: audit tail --sandbox B does not get A's record"
	is "$(AUDIT_STATE=$copy paudit "$who" tail -n 1000 --sandbox "$a" --kind process.exec | awk '{ print $2 }')" \
		"$row" "$who: forged columns: audit tail --sandbox A --kind process.exec still finds it"
	is "$(AUDIT_STATE=$copy paudit "$who" export --sandbox "$b" | jq -r "select(.seq == $row) | .seq")" "" \
		"$who: forged columns: audit export --sandbox B does not get A's record"
	is "$(AUDIT_STATE=$copy paudit "$who" export --sandbox "$a" | jq -r "select(.seq == $row) | .kind")" \
		"process.exec" "$who: forged columns: audit export --sandbox A does"
	! AUDIT_STATE=$copy paudit "$who" export --format otlp | grep -qE "$FORGED"
	ok $? "$who: forged columns: audit export --format otlp shows none of the forged values"
	out=$(AUDIT_STATE=$copy paudit "$who" verify)
	is "$?" 1 "$who: forged columns: audit verify exits 1"
	echo "$out" | grep -q "^broken at $row: column: the 'ts' column of record $row is '2001-01-01T00:00:00.000000Z'" ||
		{ echo "$out" | sed 's/^/#   /'; false; }
	ok $? "$who: forged columns: audit verify names the record and the column"
	rm -rf "$copy"
}

# One column edited at a time: verify names each (record 2 is the first run's process.exec).
check_column_verify() {
	local who=$1 col
	for col in ts sandbox session workflow actor kind; do
		tamper "$who" "edited $col column" "2: column: the '$col' column of record 2 is 'x'" \
			"UPDATE events SET $col = 'x' WHERE seq = 2"
	done
	tamper "$who" "emptied session column" "2: column: the 'session' column of record 2 is ''" \
		"UPDATE events SET session = '' WHERE seq = 2"
}

# The tail of the chain cut together with its checkpoints: verify cannot see it, verify
# --expect-head with the head `audit head` printed before does.
check_anchor() {
	local who=$1 copy head out n
	head=$(paudit "$who" head)
	is "$?" 0 "$who: audit head exits 0"
	echo "$head" | grep -qE '^[0-9]+:[0-9a-f]{64}$'
	ok $? "$who: audit head prints SEQ:HASH ($head)"
	n=${head%%:*}
	is "$(paudit "$who" verify | awk '/^head:/ { print $2 ":" $3 }')" "$head" \
		"$who: the head is the one verify prints"
	paudit "$who" verify --expect-head "$head" >/dev/null
	is "$?" 0 "$who: verify --expect-head of the current head exits 0"
	prun "$who" --workspace-mode none -- true
	paudit "$who" verify --expect-head "$head" >/dev/null
	is "$?" 0 "$who: ... and still after the chain grew"
	copy=$(mktemp -d "$T/cut-XXXXXX")
	cp -a "$(state_of "$who")/." "$copy/"
	sqlite3 "$copy/audit.db" "DELETE FROM events WHERE seq > $((n - 4)); DELETE FROM checkpoints WHERE seq > $((n - 4))"
	[ "$who" = user ] && chown -R "$UNPRIV_UID:$UNPRIV_UID" "$copy"
	AUDIT_STATE=$copy paudit "$who" verify >/dev/null
	is "$?" 0 "$who: a tail cut with its checkpoints passes a plain verify (the documented gap)"
	out=$(AUDIT_STATE=$copy paudit "$who" verify --expect-head "$head")
	is "$?" 1 "$who: verify --expect-head exits 1 on the cut store"
	echo "$out" | grep -q "^broken at $((n - 3)): truncated: the chain ends at $((n - 4)) but the anchored head is record $n"
	ok $? "$who: ... reported as truncated at $((n - 3)) ($(echo "$out" | head -1))"
	out=$(AUDIT_STATE=$copy paudit "$who" verify --expect-head "$((n - 4)):$(printf '%064d' 0)")
	is "$?" 1 "$who: verify --expect-head with another hash at the head exits 1"
	echo "$out" | grep -q "^broken at $((n - 4)): altered"
	ok $? "$who: ... reported as altered at $((n - 4))"
	paudit "$who" verify --expect-head "12:nothex" >/dev/null 2>&1
	is "$?" 122 "$who: a malformed --expect-head is a usage error (122)"
	sqlite3 "$copy/audit.db" "UPDATE events SET kind = 'x' WHERE seq = 2"
	out=$(AUDIT_STATE=$copy paudit "$who" head 2>&1)
	is "$?:$(echo "$out" | grep -c 'broken at 2: column')" "1:1" "$who: audit head of a broken store exits 1, printing no head"
	rm -rf "$copy"
}

# The attack on the daemon's /v1/events: sandbox A's exec forged into sandbox B while the
# daemon runs. B's token must not receive it; A's token and the admin still see it as hashed;
# no forged value is streamed; verify names the column. Then A's end leaves a signed checkpoint
# over all of A's records.
check_serve_forged() {
	local who=$1 port st a b tokb toka row n ev
	port=$(free_port)
	st="$T/serve-$who/state"
	serve_start "$who" --listen "127.0.0.1:$port" || { ok 1 "$who: the daemon starts"; return; }
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sa"}}'
	a=$(jq_get "$BODY" id)
	toka=$(jq_get "$BODY" token)
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sb"}}'
	b=$(jq_get "$BODY" id)
	tokb=$(jq_get "$BODY" token)
	[ -n "$a" ] && [ -n "$b" ]
	ok $? "$who: serve: two sandboxes, A and B" || { echo "# $BODY"; sed 's/^/# /' "$T/serve-$who.log"; }
	api "$who" POST "/v1/sandboxes/$a/exec" '{"argv":["echo","exec-of-a"]}'
	for n in $(seq 1 100); do
		row=$(as "$who" sqlite3 "$st/audit.db" "SELECT seq FROM events WHERE sandbox = '$a'
			AND kind = 'process.exec' AND CAST(line AS TEXT) LIKE '%exec-of-a%'" 2>/dev/null)
		[ -n "$row" ] && break
		sleep 0.1
	done
	[ -n "$row" ]
	ok $? "$who: serve: A's exec is stored (record $row)"
	as "$who" sqlite3 -cmd '.timeout 10000' "$st/audit.db" "$(forge_columns_sql "$row" "$b")"
	ev=$(curl -s -N --max-time 2 -H "Authorization: Bearer $tokb" \
		"http://127.0.0.1:$port/v1/events?since=0&sandbox=$b")
	echo "$ev" | grep -q "^event: sandbox.create" && ! echo "$ev" | grep -qE "exec-of-a|^id: $row\$|$FORGED"
	ok $? "$who: serve: B's token does not receive A's forged exec over /v1/events"
	ev=$(curl -s -N --max-time 2 -H "Authorization: Bearer $toka" \
		"http://127.0.0.1:$port/v1/events?since=0&sandbox=$a&kind=process.exec")
	is "$(echo "$ev" | grep -A1 "^id: $row\$" | sed -n 's/^event: //p')" "process.exec" \
		"$who: serve: A's token still receives it, with its own kind as the event field"
	echo "$ev" | grep -q exec-of-a && ! echo "$ev" | grep -qE "$FORGED"
	ok $? "$who: serve: ... as hashed, none of the forged values"
	ev=$(as "$who" curl -s -N --max-time 2 --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/events?since=0")
	echo "$ev" | grep -q exec-of-a && ! echo "$ev" | grep -qE "$FORGED"
	ok $? "$who: serve: the admin's stream shows none of the forged values"
	ev=$(as "$who" curl -s -N --max-time 2 --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/events?since=0&kind=process.nothing")
	is "$(echo "$ev" | grep -c '^event:')" 0 "$who: serve: kind= of the forged kind finds nothing"
	as "$who" "$T/bin/paddock" audit verify >"$T/sv-$who" 2>&1
	is "$?" 1 "$who: serve: audit verify of the daemon's store exits 1"
	grep -q "^broken at $row: column: the 'ts' column of record $row" "$T/sv-$who"
	ok $? "$who: serve: ... naming the record and the column ($(head -1 "$T/sv-$who"))"
	as "$who" sqlite3 -cmd '.timeout 10000' "$st/audit.db" "UPDATE events SET
		ts = CAST(line AS TEXT) ->> '\$.ts', sandbox = CAST(line AS TEXT) ->> '\$.sandbox',
		session = CAST(line AS TEXT) ->> '\$.session', workflow = CAST(line AS TEXT) ->> '\$.workflow',
		actor = CAST(line AS TEXT) ->> '\$.actor', kind = CAST(line AS TEXT) ->> '\$.kind' WHERE seq = $row"
	as "$who" "$T/bin/paddock" audit verify >/dev/null 2>&1
	is "$?" 0 "$who: serve: with the columns put back, verify exits 0"
	# A's end: its last record is signed at once, while the daemon goes on.
	api "$who" DELETE "/v1/sandboxes/$a"
	is "$CODE" 200 "$who: serve: DELETE sandbox A"
	n=$(as "$who" sqlite3 -cmd '.timeout 10000' "$st/audit.db" "SELECT MAX(seq) FROM events
		WHERE CAST(line AS TEXT) ->> '\$.sandbox' = '$a'")
	is "$(as "$who" sqlite3 -cmd '.timeout 10000' "$st/audit.db" "SELECT
		(SELECT CAST(line AS TEXT) ->> '\$.kind' FROM events WHERE seq = $n) || ' ' ||
		(SELECT COUNT(*) FROM checkpoints WHERE seq = $n)")" "sandbox.destroy 1" \
		"$who: serve: A's last record ($n, sandbox.destroy) has a checkpoint of its own"
	as "$who" "$T/bin/paddock" audit verify >"$T/sv-$who" 2>&1
	grep -qE "^ok: .* \(last signed at ([0-9]+)\)" "$T/sv-$who" &&
		[ "$(sed -n 's/^ok: .*last signed at \([0-9]*\)).*/\1/p' "$T/sv-$who")" -ge "$n" ]
	ok $? "$who: serve: verify: the checkpoint covering A's records verifies ($(head -1 "$T/sv-$who"))"
	check_last_checkpoint_with_openssl "$st"
	ok $? "$who: serve: ... and with 'openssl pkeyutl'"
	api "$who" DELETE "/v1/sandboxes/$b"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: serve: clean stop"
}

# Fail closed: a store that cannot be written stops the sandbox before its command goes on.
check_fail_closed() {
	local who=$1 bad out rc
	bad="$T/home/not-a-dir-$who"
	: > "$bad"
	out=$(PRUN_ENV=(PADDOCK_STATE_DIR="$bad"); prun "$who" --workspace-mode none -- sh -c 'sleep 2; echo ran' 2>&1)
	rc=$?
	[ "$rc" != 0 ] && ! echo "$out" | grep -q '^ran$' && echo "$out" | grep -q "cannot create the audit spool directory '$bad/audit-spool'"
	ok $? "$who: an unwritable store stops the sandbox (status $rc, the command's output never came, the spool named)"
	out=$(PRUN_ENV=(PADDOCK_STATE_DIR="$bad"); prun "$who" --no-audit --workspace-mode none -- sh -c 'echo ran' 2>/dev/null)
	is "$?:$out" "0:ran" "$who: --no-audit runs without a store"
}

# The run spool (docs/audit.md, "When a record is stored"): a run writes its records to
# STATE/audit-spool/ID.jsonl as they happen; the next audit command folds them into the
# chain and signs it. A finished run never folded, a run killed with SIGKILL while its
# command runs, a killed run's unfinished last line, and runs killed at any point of their
# start: nothing of a finished run is lost, the chain stays intact, and verify says what
# is not folded yet.
check_spool_finished() {
	local who=$1 n0 out
	n0=$(records "$who")
	prun "$who" --workspace-mode none -- true
	is "$?:$(stored "$who"):$(spools "$who")" "0:$n0:1" \
		"$who: spool: a finished run leaves its 4 records in its spool, the store untouched"
	out=$(paudit "$who" verify)
	is "$?" 0 "$who: spool: verify with a spool not folded exits 0"
	echo "$out" | grep -qx "not folded yet: 4 record(s) in 1 run spool(s) (any other 'paddock audit' command folds them)"
	ok $? "$who: spool: verify says which records are not folded yet ($(echo "$out" | tail -1))"
	is "$(paudit "$who" verify --json | jq -c '[.unfolded_records, (.unfolded | length), .unfolded[0].running]')" \
		"[4,1,false]" "$who: spool: verify --json lists the spool and its records"
	is "$(stored "$who")" "$n0" "$who: spool: verify folds nothing"
	is "$(paudit "$who" fold)" "folded 4 record(s) from 1 run spool(s)" "$who: spool: audit fold folds them"
	is "$(stored "$who"):$(spools "$who")" "$((n0 + 4)):0" "$who: spool: the 4 records are in the store, the spool gone"
	out=$(paudit "$who" verify --json)
	is "$(echo "$out" | jq -c '[.ok, .head_seq == .signed_seq, .unfolded_records]')" "[true,true,0]" \
		"$who: spool: the folded run is chained and its end signed"
}

check_spool_killed() {
	local who=$1 n0 pid st id i out
	st=$(state_of "$who")
	n0=$(records "$who")
	prun "$who" --workspace-mode none -- sleep 60 &
	pid=$!
	for i in $(seq 100); do
		[ "$(cat "$st"/audit-spool/*.jsonl 2>/dev/null | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	out=$(paudit "$who" verify)
	echo "$out" | grep -qx "not folded yet: 2 record(s) in 1 run spool(s), 1 of them still running (any other 'paddock audit' command folds them)"
	ok $? "$who: spool: verify says a running run's records are not folded yet ($(echo "$out" | tail -1))"
	is "$(paudit "$who" fold)" "folded 0 record(s) from 0 run spool(s); 1 spool(s) of running runs left" \
		"$who: spool: fold leaves a running run's spool"
	# SIGKILL the run's paddock (the supervisor), not the shell around it.
	kill -9 "$(pgrep -f -n "^$T/bin/paddock run --workspace-mode none -- sleep 60$")" 2>/dev/null
	wait "$pid"
	is "$?" 137 "$who: spool: the run was killed with SIGKILL"
	is "$(paudit "$who" fold)" "folded 2 record(s) from 1 run spool(s)" \
		"$who: spool: the killed run's spool is folded once its lock is gone"
	id=$(sqlite3 "$st/audit.db" "SELECT sandbox FROM events ORDER BY seq DESC LIMIT 1")
	is "$(paudit "$who" show "$id" | awk 'NR > 1 { print $3 }' | tr '\n' ' ')" "sandbox.create process.exec " \
		"$who: spool: what the killed run did is in the store (create, exec)"
	is "$(stored "$who")" "$((n0 + 2))" "$who: spool: nothing twice"
	paudit "$who" verify >/dev/null
	is "$?" 0 "$who: spool: the chain is intact after a killed run's fold"
}

check_spool_torn() {
	local who=$1 n0 st f
	st=$(state_of "$who")
	n0=$(records "$who")
	prun "$who" --workspace-mode none -- true
	f=$(ls "$st"/audit-spool/*.jsonl)
	# What a write cut short by SIGKILL leaves: the start of a line, no newline.
	printf '{"actor":"paddock-run","kind":"process.ex' >>"$f"
	is "$(paudit "$who" fold)" "folded 4 record(s) from 1 run spool(s); 41 byte(s) of unfinished lines of killed runs dropped" \
		"$who: spool: an unfinished last line is dropped and counted, every whole record folded"
	is "$(stored "$who")" "$((n0 + 4))" "$who: spool: the 4 records of the run are stored"
	paudit "$who" verify >/dev/null
	is "$?" 0 "$who: spool: the chain is intact"
	prun "$who" --workspace-mode none -- true
	f=$(ls "$st"/audit-spool/*.jsonl)
	printf 'not an event\n' >>"$f"
	paudit "$who" ls >"$T/bad-$who" 2>&1
	is "$?" 1 "$who: spool: a complete line that is not an event stops the fold (exit 1)"
	grep -q "audit spool '$(basename "$f")': the line at byte [0-9]* is not an event (the spool is kept)" "$T/bad-$who"
	ok $? "$who: spool: ... naming the spool and the byte ($(head -1 "$T/bad-$who"))"
	is "$(stored "$who"):$(spools "$who")" "$((n0 + 4)):1" "$who: spool: nothing of it folded, the spool kept"
	rm -f "$f"
}

# Runs killed with SIGKILL at points spread over their start and end: whatever was cut,
# every run that finished has its 4 records, the chain is intact and no spool is left.
check_spool_kill_anywhere() {
	local who=$1 d pid finished=0 whole before rc kcg="/paddock-test-$TEST_ID-killed"
	# Root's runs in a cgroup of this suite's own: a run killed before it recorded its cgroup
	# leaves it there, removed with the suite's at the end (the user's have none, or the
	# delegated one).
	[ "$who" = root ] && make_cgroup "$kcg" && PRUN_ENV=(PADDOCK_CGROUP_PARENT="$kcg")
	records "$who" >/dev/null
	before=$(paudit "$who" ls --json | jq '[.[] | select(.events == 4)] | length')
	for d in 0 0.002 0.005 0.01 0.02 0.04 0.08 0.15 0.3 0.5; do
		prun "$who" --workspace-mode none -- true &
		pid=$!
		sleep "$d"
		pkill -9 -f "^$T/bin/paddock run --workspace-mode none -- true$" 2>/dev/null
		wait "$pid"
		rc=$?
		[ "$rc" = 0 ] && finished=$((finished + 1))
	done
	PRUN_ENV=()
	[ "$who" = root ] && rm_cgroup "$kcg"
	paudit "$who" fold >/dev/null
	is "$?:$(spools "$who")" "0:0" "$who: spool: every killed run's spool is folded"
	paudit "$who" verify >/dev/null
	is "$?" 0 "$who: spool: the chain is intact after runs killed at any point"
	whole=$(( $(paudit "$who" ls --json | jq '[.[] | select(.events == 4)] | length') - before ))
	[ "$whole" -ge "$finished" ]
	ok $? "$who: spool: every finished run ($finished of 10) has its 4 records (runs with 4: $whole)"
}

# A run that finds PADDOCK_AUDIT_FOLD_AT spools waiting (its own included, once its command
# ended) folds them itself: spools do not pile up where nobody runs an audit command.
check_spool_fold_at() {
	local who=$1 n0
	n0=$(records "$who")
	PRUN_ENV=(PADDOCK_AUDIT_FOLD_AT=3)
	prun "$who" --workspace-mode none -- true
	prun "$who" --workspace-mode none -- true
	is "$(stored "$who"):$(spools "$who")" "$n0:2" "$who: spool: two runs below the threshold fold nothing"
	prun "$who" --workspace-mode none -- true
	is "$?:$(stored "$who"):$(spools "$who")" "0:$((n0 + 12)):0" \
		"$who: spool: the run that finds 3 spools waiting folds them all, its own included"
	PRUN_ENV=()
	paudit "$who" verify >/dev/null
	is "$?" 0 "$who: spool: the chain a run folded is intact"

	# The run below the threshold does not read the spool directory: .waiting, one byte per
	# spool made and set by every fold, says how many wait (docs/audit.md).
	local st w rc
	st=$(state_of "$who")
	is "$(stat -c %s "$st/audit-spool/.waiting" 2>&1)" 0 "$who: spool: the fold left .waiting at 0 spools"
	# LeakSanitizer cannot run under ptrace: a sanitizer build's leak check is off for this run.
	PRUN_ENV=(PADDOCK_AUDIT_FOLD_AT=3 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
	prun_cmd "$who"
	PRUN_ENV=(PADDOCK_AUDIT_FOLD_AT=3)
	(cd "$T/home" && strace -qq -e trace=openat -o "$T/spool-trace-$who" "${PRUN[@]}" run \
		--workspace-mode none -- true)
	rc=$?
	[ "$rc" = 0 ] || sed 's/^/#   /' "$T/spool-trace-$who" | tail -n 5
	w=$(grep -c 'audit-spool", O_RDONLY.*O_DIRECTORY' "$T/spool-trace-$who")
	is "$rc:$w:$(stat -c %s "$st/audit-spool/.waiting"):$(spools "$who")" "0:0:1:1" \
		"$who: spool: a run below the threshold reads .waiting (1), not the directory (opened $w times)"
	# .waiting that says too many: the directory is counted and .waiting set right, nothing folded.
	truncate -s 100 "$st/audit-spool/.waiting"
	prun "$who" --workspace-mode none -- true
	is "$(stat -c %s "$st/audit-spool/.waiting"):$(spools "$who")" "2:2" \
		"$who: spool: a .waiting that says too many is set right from the directory"
	# No .waiting (a state directory of an older paddock): the next spool made counts the
	# directory, its own included, and that third run folds.
	rm -f "$st/audit-spool/.waiting"
	prun "$who" --workspace-mode none -- true
	is "$(stat -c %s "$st/audit-spool/.waiting" 2>&1):$(spools "$who")" "0:0" \
		"$who: spool: without .waiting the spools are counted once: 3, folded"
	PRUN_ENV=()
	paudit "$who" verify >/dev/null
	is "$?" 0 "$who: spool: the chain is intact"
}

# A fold keeps the spools it folded, emptied, as spares (audit-spool/.spare-N) that later runs
# rename to their own name, so that a run allocates no inode (docs/audit.md). A spare is never
# a record: a run that takes one still holding bytes starts it empty; every record is folded
# once and the chain stays intact.
check_spool_spares() {
	local who=$1 st n0 f pid i ino
	st=$(state_of "$who")
	n0=$(records "$who")
	rm -f "$st"/audit-spool/.spare-*
	prun "$who" --workspace-mode none -- true
	prun "$who" --workspace-mode none -- true
	is "$(paudit "$who" fold)" "folded 8 record(s) from 2 run spool(s)" "$who: spares: two runs folded"
	is "$(find "$st/audit-spool" -name '.spare-*' -size 0 -perm 0600 | wc -l):$(spools "$who")" "2:0" \
		"$who: spares: the folded spools are kept as spares, empty, mode 0600"
	# .waiting names the spare to take: the next two runs take the two in turn, none misses
	# them and makes a file (random names alone would find one of 2 in 128 only now and then).
	ino=$(stat -c %i "$st/audit-spool/.spare-0" "$st/audit-spool/.spare-1" 2>&1 | sort -n | tr '\n' ' ')
	prun "$who" --workspace-mode none -- true
	prun "$who" --workspace-mode none -- true
	is "$(stat -c %i "$st"/audit-spool/*.jsonl | sort -n | tr '\n' ' '):$(find "$st/audit-spool" -name '.spare-*' | wc -l)" \
		"$ino:0" "$who: spares: the next two runs took the two spares (their inodes), no file made"
	is "$(paudit "$who" fold)" "folded 8 record(s) from 2 run spool(s)" "$who: spares: and are folded"
	# Every spare name taken (what a fold of 128 runs leaves), each with bytes in it.
	as "$who" sh -c "cd '$st/audit-spool' && umask 077 && for i in \$(seq 0 127); do
		printf 'stale\\n' >.spare-\$i; done"
	prun "$who" --workspace-mode none -- true
	is "$?:$(find "$st/audit-spool" -name '.spare-*' | wc -l):$(spools "$who")" "0:127:1" \
		"$who: spares: the next run took a spare as its spool"
	f=$(ls "$st"/audit-spool/*.jsonl)
	is "$(grep -c '"sandbox"' "$f"):$(grep -c stale "$f")" "4:0" \
		"$who: spares: its spool holds its 4 records, none of the spare's bytes"
	is "$(paudit "$who" fold)" "folded 4 record(s) from 1 run spool(s)" "$who: spares: the run is folded"
	is "$(stored "$who")" "$((n0 + 20))" "$who: spares: every record of the 5 runs stored, once"
	paudit "$who" verify >/dev/null
	is "$?" 0 "$who: spares: the chain is intact"
	# A run killed with SIGKILL in a spool it took from a spare: what it did is not lost.
	as "$who" sh -c "cd '$st/audit-spool' && umask 077 && for i in \$(seq 0 127); do
		: >.spare-\$i; done"
	prun "$who" --workspace-mode none -- sleep 60 &
	pid=$!
	for i in $(seq 100); do
		[ "$(cat "$st"/audit-spool/*.jsonl 2>/dev/null | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	kill -9 "$(pgrep -f -n "^$T/bin/paddock run --workspace-mode none -- sleep 60$")" 2>/dev/null
	wait "$pid"
	is "$?:$(find "$st/audit-spool" -name '.spare-*' | wc -l)" "137:127" \
		"$who: spares: a run that took a spare was killed with SIGKILL"
	paudit "$who" verify | grep -qx "not folded yet: 2 record(s) in 1 run spool(s) (any other 'paddock audit' command folds them)"
	ok $? "$who: spares: verify says the killed run's 2 records are not folded yet"
	is "$(paudit "$who" fold)" "folded 2 record(s) from 1 run spool(s)" \
		"$who: spares: the killed run's records (create, exec) are folded"
	is "$(stored "$who")" "$((n0 + 22))" "$who: spares: nothing lost, nothing twice"
	rm -f "$st"/audit-spool/.spare-*
}

# While a daemon serves the state directory, a `paddock run`'s records reach the chain with no
# audit command in between: the daemon folds the run spools on its tick (docs/audit.md). A
# live run's spool is left to its run, and folded by the daemon once the run is killed.
sfold_sql() { as "$1" sqlite3 -cmd '.timeout 10000' "$T/serve-$1/state/audit.db" "$2"; }
# The kinds of the records of the run whose process.exec names MARK, in order.
sfold_kinds() {
	sfold_sql "$1" "SELECT kind FROM events WHERE sandbox = (SELECT sandbox FROM events
		WHERE kind = 'process.exec' AND CAST(line AS TEXT) LIKE '%$2%') ORDER BY seq" | tr '\n' ' '
}
# Waits (at most 20 s) until the run marked MARK has N records in the daemon's store.
sfold_wait() {
	local i
	for i in $(seq 1 200); do
		[ "$(sfold_kinds "$1" "$2" | wc -w)" -ge "$3" ] && return 0
		sleep 0.1
	done
	return 1
}
# paddock run as WHO on the daemon's state directory (a runtime directory of its own).
sfold_run() {
	local who=$1
	shift
	(cd "$T/home" && as "$who" env PADDOCK_RUNTIME_DIR="$T/serve-$who/run-cli" \
		"$T/bin/paddock" run --workspace-mode none -- "$@")
}
check_serve_folds_runs() {
	local who=$1 st out live pid ev
	st="$T/serve-$who/state"
	serve_start "$who" || { ok 1 "$who: serve fold: the daemon starts"; return; }
	sfold_run "$who" sh -c 'echo live-run-marker; sleep 60' >/dev/null &
	pid=$!
	sfold_run "$who" true 2>/dev/null
	for i in $(seq 1 100); do
		# Its records so far: sandbox.create, the exec of sh and the exec of sleep.
		live=$(grep -l live-run-marker "$st"/audit-spool/*.jsonl 2>/dev/null)
		[ -n "$live" ] && [ "$(wc -l <"$live")" -ge 3 ] && break
		sleep 0.1
	done
	[ -n "$live" ]
	ok $? "$who: serve fold: a live run's spool is there ($(basename "$live"))"
	out=$(sfold_run "$who" sh -c 'echo folded-by-daemon; exit 5')
	is "$?:$out" "5:folded-by-daemon" "$who: serve fold: paddock run's answer while a daemon serves its state directory"
	sfold_wait "$who" folded-by-daemon 4
	is "$(sfold_kinds "$who" folded-by-daemon)" "sandbox.create process.exec process.exit sandbox.destroy " \
		"$who: serve fold: the run's 4 records reach the daemon's store with no audit command"
	is "$(find "$st/audit-spool" -name '*.jsonl' | wc -l)" 1 \
		"$who: serve fold: the finished runs' spools are gone, the live run's is left"
	is "$(sfold_kinds "$who" live-run-marker)" "" "$who: serve fold: nothing of the live run is folded while it runs"
	out=$(as "$who" "$T/bin/paddock" audit verify --json)
	is "$(echo "$out" | jq -c '[.ok, .head_seq == .signed_seq, .unfolded_records, .unfolded[0].running]')" \
		"[true,true,3,true]" "$who: serve fold: the chain verifies, its head signed; verify names the live run's 3 records"
	kill -9 "$(pgrep -f -n "^$T/bin/paddock run --workspace-mode none -- sh -c echo live-run-marker; sleep 60$")" 2>/dev/null
	wait "$pid"
	is "$?" 137 "$who: serve fold: the live run killed with SIGKILL"
	sfold_wait "$who" live-run-marker 3
	is "$(sfold_kinds "$who" live-run-marker):$(find "$st/audit-spool" -name '*.jsonl' | wc -l)" \
		"sandbox.create process.exec process.exec :0" "$who: serve fold: the daemon folds the killed run's records, no spool left"
	ev=$(as "$who" curl -s -N --max-time 2 --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/events?since=0&kind=process.exit")
	echo "$ev" | grep -q '"exit_code": *5'
	ok $? "$who: serve fold: /v1/events streams the folded run's process.exit"
	as "$who" "$T/bin/paddock" audit verify >/dev/null
	is "$?" 0 "$who: serve fold: audit verify exits 0"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: serve fold: clean stop"
	# 20 runs while no daemon serves (more than one tick's 16): a daemon started later folds
	# them all, over its first ticks.
	for i in $(seq 1 20); do sfold_run "$who" true || break; done
	is "$(find "$st/audit-spool" -name '*.jsonl' | wc -l)" 20 "$who: serve fold: 20 runs without a daemon leave 20 spools"
	serve_start "$who" || { ok 1 "$who: serve fold: the daemon starts again"; return; }
	for i in $(seq 1 200); do
		[ "$(find "$st/audit-spool" -name '*.jsonl' | wc -l)" = 0 ] && break
		sleep 0.1
	done
	is "$(find "$st/audit-spool" -name '*.jsonl' | wc -l)" 0 "$who: serve fold: the restarted daemon folds all 20"
	is "$(sfold_sql "$who" "SELECT COUNT(DISTINCT sandbox) FROM events WHERE kind = 'process.exec'
		AND CAST(line AS TEXT) LIKE '%\"true\"%'")" 21 "$who: serve fold: each of the 21 runs of true is in the store"
	out=$(as "$who" "$T/bin/paddock" audit verify --json)
	is "$(echo "$out" | jq -c '[.ok, .head_seq == .signed_seq, .unfolded_records]')" "[true,true,0]" \
		"$who: serve fold: the chain verifies, its head signed, nothing left unfolded"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: serve fold: clean stop after the second start"
}

check_usage() {
	paudit root bogus >/dev/null 2>&1
	is "$?" 122 "audit with an unknown command exits 122"
	paudit root show >/dev/null 2>&1
	is "$?" 122 "audit show without an id exits 122"
	paudit root ls --kind x >/dev/null 2>&1
	is "$?" 122 "an option of another subcommand exits 122"
	paudit root export --format nosuch >/dev/null 2>&1
	is "$?" 122 "export with an unknown format exits 122"
	paudit root tail -n x >/dev/null 2>&1
	is "$?" 122 "tail -n with a non-number exits 122"
	prun root --workspace-mode none --audit-queue-full sometimes -- true 2>/dev/null
	is "$?" 122 "run --audit-queue-full with an unknown policy exits 122"
	AUDIT_N=$(records root)
	prun root --workspace-mode none --audit-queue-full stop -- true
	is "$?:$(( $(records root) - AUDIT_N ))" "0:4" "run --audit-queue-full stop records a normal run whole"
	paudit root verify --help | grep -q "bad signature"
	ok $? "audit verify --help documents the reasons"
}

for who in root user; do
	check_run_fills_store "$who"
	check_follow "$who"
	check_follow_gone "$who"
	check_secrets "$who"
	check_ws_events "$who"
	check_concurrent "$who"
	check_tampering "$who"
	check_column_verify "$who"
	check_forged_columns "$who"
	check_anchor "$who"
	check_fail_closed "$who"
	check_spool_finished "$who"
	check_spool_killed "$who"
	check_spool_torn "$who"
	check_spool_kill_anywhere "$who"
	check_spool_fold_at "$who"
	check_spool_spares "$who"
done
if have_supervisor; then
	check_serve_folds_runs root
	check_serve_folds_runs user
	check_serve_forged root
	check_serve_forged user
else
	echo "# serve checks skipped: this build has no 'paddock supervise'"
	[ "${PDK_MUST_WORK:-0}" = 1 ] && ok 1 "the supervisor is built (PDK_MUST_WORK=1)"
fi
check_usage
done_testing
