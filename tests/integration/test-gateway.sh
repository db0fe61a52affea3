#!/bin/bash
# `paddock gateway` as a user runs it, as root and as nobody: the CLI (--help, check of a good
# and a bad config, token, pins, a remote upstream's config checked), then the official SDK clients
# (tests/clients/drive/gateway-steps.mjs) over stdio in both protocol eras and over
# Streamable HTTP with a principal's bearer token, against the fixture upstream
# tests/integration/gw-upstream.py in its sandbox: the tools are listed as SERVER__TOOL, a call
# is forwarded and answered, a deny rule is named, arguments against the pinned inputSchema
# are refused before the upstream sees them (the fixture's --log), an upstream that cannot
# start is named with why, every call is a tool.call record with its principal (stored even
# when the gateway is killed right after answering), a require_approval call is asked in band
# of a client that declared elicitation (accept, decline, no answer; SDK v1 and v2, stdio and
# HTTP), a legacy HTTP session's GET stream (curl: no session 400, an unknown one or another
# principal's 404, a wrong token 401, a second stream 409, DELETE ends it) carries
# notifications/tools/list_changed to an SDK v1 client when a pin is approved, and when the
# client ends nothing is left running in the suite's cgroups.
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-mcp.sh"
. "$(dirname "$0")/lib-gateway-clients.sh"
mcp_cgroups
FIXTURE="$TESTS_DIR/integration/gw-upstream.py"
[ -f "$FIXTURE" ] || { echo "Bail out! $FIXTURE is missing"; exit 1; }
cp "$FIXTURE" "$TESTS_DIR/integration/gw-kill.py" "$T/bin/"
chmod 0755 "$T/bin"/*
TOKEN_A=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
TOKEN_B=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

sha() {
	printf '%s' "$1" | sha256sum | cut -d' ' -f1
}

# config WHO: the suite's config in $CFG (servers fx: ok, dead: exits at start), the
# fixture's log at $D/fx.log; principals agent-a with $TOKEN_A and agent-b with $TOKEN_B.
config() {
	local who=$1
	D="$T/gw-$who"
	CFG="$D/gateway.yaml"
	mkdir -p "$D/log"
	cat >"$CFG" <<EOF
servers:
  fx:
    command: [/usr/bin/python3, $T/bin/gw-upstream.py, --log, $D/log/fx.log]
    permissions:
      filesystem: {read: [$T/bin], write: [$D/log]}
  dead:
    command: [/usr/bin/python3, $T/bin/gw-upstream.py, --mode, exit-at-start]
    permissions:
      filesystem: {read: [$T/bin]}
  rug:
    command: [/usr/bin/python3, $T/bin/gw-upstream.py, --mode, rugpull, --rug-after, "1000000"]
    permissions:
      filesystem: {read: [$T/bin]}
policy:
  default: allow
  rules:
    - name: writes-need-a-human
      server: fx
      tool: write_file
      action: require_approval
      reason: writes need a human
    - name: no-env
      server: fx
      tool: env
      action: deny
      reason: the environment is private
principals:
  - {name: agent-a, token_sha256: $(sha "$TOKEN_A")}
  - {name: agent-b, token_sha256: $(sha "$TOKEN_B")}
EOF
	[ "$who" = root ] || chown -R $UNPRIV_UID:$UNPRIV_UID "$D"
	chmod -R a+rX "$D"
}

# logged FILTER: how many messages the fixture received that pass the jq FILTER.
logged() {
	jq -c "select($1)" "$D/log/fx.log" 2>/dev/null | wc -l
}

# no_process_left LABEL: the suite's cgroups hold no process once the gateway ended.
no_process_left() {
	local cg=$ROOT_CG procs i
	[ "$WHO" = root ] || cg=$DELEGATED
	for i in $(seq 1 600); do
		procs=$(find /sys/fs/cgroup -path "*$cg/*" -name cgroup.procs -exec cat {} + 2>/dev/null | wc -l)
		[ "$procs" = 0 ] && break
		sleep 0.1
	done
	is "$procs" 0 "$1: no process is left in the suite's cgroups (every upstream's sandbox ended)"
}

case_cli() {
	local l="$WHO: cli" out rc
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway --help 2>&1)
	rc=$?
	is "$rc" 0 "$l: paddock gateway --help exits 0"
	printf '%s' "$out" | grep -q -- '--config FILE'
	ok $? "$l: --help names --config FILE"
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway check --config "$CFG" 2>&1)
	rc=$?
	is "$rc" 0 "$l: gateway check of a good config exits 0"
	printf '%s' "$out" | grep -q '^# server fx' && printf '%s' "$out" | grep -q '^extends: strict'
	ok $? "$l: gateway check prints each server and its profile (extends: strict)" ||
		printf '%s\n' "$out" | head -5 | sed 's/^/#   /'
	printf 'servers:\n  fx:\n    command: [/bin/true]\n    colour: blue\n' >"$D/bad.yaml"
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway check --config "$D/bad.yaml" 2>&1)
	rc=$?
	is "$rc" 122 "$l: gateway check of a config with an unknown key exits 122"
	printf '%s' "$out" | grep -q "$D/bad.yaml:4: .*colour"
	ok $? "$l: the error names FILE:LINE and the field" || printf '%s\n' "$out" | sed 's/^/#   /'
	# Remote upstreams run in gateway-remote; here, the config's rules about them.
	printf 'servers:\n  remote:\n    url: http://mcp.example.com/mcp\n' >"$D/remote.yaml"
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway --config "$D/remote.yaml" </dev/null 2>&1)
	rc=$?
	is "$rc" 122 "$l: a remote upstream over plain http to a host not loopback is refused at start (122)"
	printf '%s' "$out" | grep -q "$D/remote.yaml:3: servers.remote.url: .*plain http.*insecure_http"
	ok $? "$l: the refusal names FILE:LINE, servers.remote.url and what to do" || printf '%s\n' "$out" | sed 's/^/#   /'
	printf 'servers:\n  remote:\n    url: https://mcp.example.com/mcp\n' >"$D/remote.yaml"
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway check --config "$D/remote.yaml" 2>&1)
	rc=$?
	is "$rc" 0 "$l: gateway check of an https remote upstream exits 0"
	printf '%s' "$out" | grep -q "^# server remote ($D/remote.yaml:2): remote, Streamable HTTP at https://mcp.example.com/mcp"
	ok $? "$l: naming it, FILE:LINE and its url" || printf '%s\n' "$out" | sed 's/^/#   /'
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway token agent-b 2>&1)
	rc=$?
	is "$rc" 0 "$l: gateway token exits 0"
	is "$(printf '%s\n' "$out" | sed -n 's/.*token_sha256: \([0-9a-f]*\)}.*/\1/p')" \
		"$(sha "$(printf '%s\n' "$out" | head -1)")" "$l: gateway token's principals entry holds the token's SHA-256"
}

case_stdio() {
	local l="$WHO: stdio"
	steps "$WHO" v1 '[{"op": "list", "want": ["fx__echo", "fx__add", "rug__echo"]},
		{"op": "call", "name": "fx__echo", "args": {"text": "hello through the gateway"}},
		{"op": "call", "name": "fx__env", "args": {}},
		{"op": "call", "name": "fx__add", "args": {"a": 1, "b": "two"}},
		{"op": "call", "name": "fx__add", "args": {"a": 2, "b": 3}},
		{"op": "call", "name": "fx__nope", "args": {}},
		{"op": "call", "name": "dead__echo", "args": {"text": "x"}}]' \
		stdio "$T/bin/paddock" gateway --config "$CFG" --principal agent-s
	is "$RC" 0 "$l: the SDK client's session ends 0"
	jqok "$(nth 1)" '[.tools[].name] | (index("fx__echo") != null and index("fx__add") != null
		and index("rug__echo") != null and all(startswith("dead__") | not))' \
		"$l: tools/list names the tools SERVER__TOOL (none of dead: it is down)"
	jqok "$(nth 1)" '[.tools[].name] | index("fx__env") == null' \
		"$l: a tool every call of which the policy denies (fx env, rule no-env) is not listed"
	jqok "$(nth 2)" '.result.isError != true and .result.content[0].text == "hello through the gateway"' \
		"$l: a call is forwarded and answered"
	jqok "$(nth 3)" '.result.isError == true and .result.structuredContent.error.code == "denied" and
		.result.structuredContent.error.rule == "no-env" and (.result.content[0].text | startswith("denied")
		and contains("no-env"))' "$l: a deny rule refuses the call, naming the rule"
	# add has an outputSchema: the SDK checks any structuredContent against it, so the error
	# object is in _meta (docs/gateway.md, ERRORS).
	jqok "$(nth 4)" '.result.isError == true and .result._meta["io.paddock/error"].code == "invalid_arguments" and
		.result._meta["io.paddock/error"].field == "/b" and (.result.content[0].text |
		startswith("invalid_arguments") and contains("/b") and contains("type"))' \
		"$l: arguments against the inputSchema are refused, naming the pointer and keyword"
	jqok "$(nth 5)" '.result.structuredContent.sum == 5' "$l: valid arguments are forwarded (2 + 3 = 5)"
	jqok "$(nth 6)" '.throw != null and .code == -32602' "$l: an unknown tool is the protocol's unknown-tool error"
	jqok "$(nth 7)" '.result.isError == true and .result.structuredContent.error.code == "upstream_failed" and
		.result.structuredContent.error.server == "dead" and (.result.content[0].text | contains("dead"))' \
		"$l: a call to an upstream that cannot start names it and why"
	grep -q "upstream dead failed: .*dead.*exit" "$T/steps.err"
	ok $? "$l: the upstream that cannot start is logged, naming it and why" ||
		head -5 "$T/steps.err" | sed 's/^/#   /'
	is "$(logged '.method == "tools/call" and .params.name == "add" and .params.arguments.b == "two"')" 0 \
		"$l: the invalid arguments never reached the upstream (its log)"
	is "$(logged '.method == "tools/call" and .params.name == "env"')" 0 \
		"$l: the denied call never reached the upstream (its log)"
	is "$(logged '.method == "tools/call" and .params.name == "echo" and .params.arguments.text == "hello through the gateway"')" 1 \
		"$l: the allowed call reached the upstream once (its log)"
	no_process_left "$l"
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 500 --kind tool.call --json >"$T/audit.json" 2>&1
	jqok "$(jq -s . "$T/audit.json")" '[.. | objects | select(.kind? == "tool.call") | .attrs | select(.principal == "agent-s")] |
		(any(.server == "fx" and .tool == "echo" and .decision == "allowed" and (.args_sha256 | length) == 64
		     and .pin.state == "pinned")
		and any(.tool == "env" and .decision == "denied" and .rule == "no-env")
		and any(.tool == "add" and .decision == "invalid_arguments"))' \
		"$l: each call is a tool.call record (principal, server, tool, decision, rule, args hash, pin)"
	mcp_as "$WHO" "$T/bin/paddock" gateway pins --json >"$T/pins.json" 2>&1
	jqok "$(cat "$T/pins.json")" 'any(.[]; .server == "fx" and .tool == "echo" and .approver == "first-contact")' \
		"$l: paddock gateway pins lists fx's echo, pinned at first contact"
}

case_modern() {
	local l="$WHO: stdio, 2026-07-28"
	# The first tools/list, not asked again: the gateway reads its client once every upstream
	# has started or failed.
	steps "$WHO" v2 '[{"op": "list"},
		{"op": "call", "name": "fx__echo", "args": {"text": "modern era"}},
		{"op": "call", "name": "fx__env", "args": {}}]' stdio "$T/bin/paddock" gateway --config "$CFG"
	jqok "$(nth 1)" '[.tools[].name] | index("fx__echo") != null and index("rug__echo") != null' \
		"$l: the client's first tools/list already names every upstream's tools"
	jqok "$(nth 2)" '.result.content[0].text == "modern era"' "$l: a call is forwarded and answered"
	jqok "$(nth 3)" '.result.structuredContent.error.rule == "no-env"' "$l: the deny rule is named"
	no_process_left "$l"
}

# get_code ARGS...: the HTTP status of a GET of the endpoint that takes an event stream.
get_code() {
	curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H 'Accept: text/event-stream' "$@" "$GW_URL"
}

# http_stream LABEL: a legacy session's GET stream with curl: the refusals (no session, an
# unknown one, a wrong token, a second stream), and a DELETE of the session ends it.
http_stream() {
	local l="$1: GET stream" sid auth="Authorization: Bearer $TOKEN_A" pid i rc
	sid=$(curl -s -D - -o /dev/null -X POST -H "$auth" -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' --data '{"jsonrpc":"2.0","id":1,
		"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},
		"clientInfo":{"name":"curl","version":"1"}}}' "$GW_URL" |
		tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
	ok "$([ -n "$sid" ]; echo $?)" "$l: initialize with curl opens a session"
	is "$(get_code -H "$auth")" 400 "$l: a GET without Mcp-Session-Id is refused 400"
	is "$(get_code -H "$auth" -H "Mcp-Session-Id: 0123456789abcdef0123456789abcdef")" 404 \
		"$l: a GET of an unknown session is refused 404"
	is "$(get_code -H "Authorization: Bearer x$TOKEN_A" -H "Mcp-Session-Id: $sid")" 401 \
		"$l: a GET of the session with a wrong token is refused 401"
	is "$(get_code -H "Authorization: Bearer $TOKEN_B" -H "Mcp-Session-Id: $sid")" 404 \
		"$l: a GET of agent-a's session with agent-b's token is refused 404"
	# The answer's head in its output as it comes (-i, -N: unbuffered), in a file of this run.
	rm -f "$T/get-$WHO.out"
	curl -siN --max-time 60 -o "$T/get-$WHO.out" -H "$auth" -H "Mcp-Session-Id: $sid" \
		-H 'Accept: text/event-stream' "$GW_URL" &
	pid=$!
	for i in $(seq 1 300); do
		grep -qi '^content-type: text/event-stream' "$T/get-$WHO.out" 2>/dev/null && break
		sleep 0.1
	done
	ok "$(grep -qi '^content-type: text/event-stream' "$T/get-$WHO.out"; echo $?)" \
		"$l: a GET with the session's id and token opens a text/event-stream"
	is "$(get_code -H "$auth" -H "Mcp-Session-Id: $sid")" 409 "$l: a second GET stream of the session is refused 409"
	is "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "$auth" -H "Mcp-Session-Id: $sid" "$GW_URL")" \
		204 "$l: DELETE of the session answers 204"
	wait "$pid"
	rc=$?
	is "$rc" 0 "$l: and the DELETE ends the GET stream (curl ends with 0, not at its 60 s bound)"
	is "$(get_code -H "$auth" -H "Mcp-Session-Id: $sid")" 404 "$l: a GET of the ended session is refused 404"
}

case_http() {
	local l="$WHO: http" code
	if ! gw_listen "$WHO" "$CFG"; then
		ok 1 "$l: paddock gateway --listen starts"
		return
	fi
	GW_TOKEN=$TOKEN_A steps "$WHO" v1 '[{"op": "list", "want": ["fx__echo"]},
		{"op": "call", "name": "fx__echo", "args": {"text": "over http"}}]' http "$GW_URL"
	jqok "$(nth 1)" '[.tools[].name] | index("fx__echo") != null' "$l: tools/list names fx__echo"
	jqok "$(nth 2)" '.result.content[0].text == "over http"' "$l: a call with agent-a's token is answered"
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' --data '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$GW_URL")
	is "$code" 401 "$l: a request without a token is refused 401"
	is "$(logged '.method == "initialize" and .params.clientInfo.name != "paddock-gateway"')" 0 \
		"$l: the upstream is initialized by the gateway, not by the client (its log)"
	is "$(grep -c "$TOKEN_A" "$D/log/fx.log")" 0 "$l: the client's bearer token never reaches the upstream"
	http_stream "$l"
	gw_stop
	is "$GW_RC" 0 "$l: SIGTERM ends the gateway with 0"
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 500 --kind tool.call --json >"$T/audit.json" 2>&1
	jqok "$(jq -s . "$T/audit.json")" '[.. | objects | select(.kind? == "tool.call") | .attrs] |
		any(.principal == "agent-a" and .tool == "echo" and .decision == "allowed")' \
		"$l: the call's record names principal agent-a"
	no_process_left "$l"
}

# The process of a client session run in the background, and its output file.
BG=""
case_progress_cancel() {
	local l="$WHO: progress, cancel"
	steps "$WHO" v1 '[{"op": "list", "want": ["fx__slow"]},
		{"op": "call", "name": "fx__slow", "args": {"ms": 500}, "progress": true},
		{"op": "call", "name": "fx__slow", "args": {"ms": 600000}, "timeout": 1500},
		{"op": "call", "name": "fx__echo", "args": {"text": "after the cancel"}}]' \
		stdio "$T/bin/paddock" gateway --config "$CFG"
	jqok "$(nth 2)" '.result.content[0].text == "slept 500 ms" and (.progress | length) > 0' \
		"$l: the upstream's progress notifications reach the client's token"
	jqok "$(nth 3)" '.throw != null' "$l: the client gives up on a slow call (its timeout)"
	# The upstream reads its input in order: once it answered the next call, it had the
	# cancellation sent before it.
	jqok "$(nth 4)" '.result.content[0].text == "after the cancel"' "$l: the next call is served"
	is "$(logged '.method == "notifications/cancelled"')" 1 \
		"$l: the client's cancellation reached the upstream as notifications/cancelled"
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 500 --kind tool.call --json >"$T/audit.json" 2>&1
	jqok "$(jq -s . "$T/audit.json")" 'any(.[]; .attrs.tool == "slow" and .attrs.decision == "cancelled")' \
		"$l: the cancelled call is a tool.call record, decision cancelled"
	no_process_left "$l"
}

# approval_of KIND JQ: the id of the pending approval of KIND whose object passes JQ, in $AID.
approval_of() {
	local i
	AID=""
	for i in $(seq 1 300); do
		AID=$(mcp_as "$WHO" "$T/bin/paddock" approvals --json 2>/dev/null |
			jq -r '[.[] | select(.kind == "'"$1"'" and .state == "pending") | select('"$2"')] | last | .id // empty' 2>/dev/null)
		[ -n "$AID" ] && return 0
		sleep 0.1
	done
	return 1
}

case_approvals() {
	local l="$WHO: approvals"
	if ! gw_listen "$WHO" "$CFG"; then
		ok 1 "$l: paddock gateway --listen starts"
		return
	fi
	# A call the policy sends to a human: it waits until `paddock approve`.
	(GW_TOKEN=$TOKEN_A steps "$WHO" v1 '[{"op": "list", "want": ["fx__write_file"]},
		{"op": "call", "name": "fx__write_file", "args": {"path": "'"$D/log/approved.txt"'", "text": "yes"}}]' \
		http "$GW_URL"; printf '%s\n' "$OUT" >"$T/bg.out") &
	BG=$!
	approval_of tool.call '.summary | contains("fx__write_file")'
	ok $? "$l: a require_approval call is in paddock approvals (kind tool.call, summary naming the tool)"
	is "$(logged '.method == "tools/call" and .params.name == "write_file"')" 0 \
		"$l: while it waits, the call has not reached the upstream"
	mcp_as "$WHO" "$T/bin/paddock" approve "$AID" >/dev/null 2>&1
	is "$?" 0 "$l: paddock approve ID exits 0"
	wait "$BG"
	jqok "$(sed -n 2p "$T/bg.out")" '.result.content[0].text | startswith("wrote 3 bytes")' \
		"$l: approved, the call is forwarded and answered"
	is "$(cat "$D/log/approved.txt" 2>/dev/null)" yes "$l: and its write is done"
	jqok "$(sed -n 3p "$T/bg.out")" '.got == []' \
		"$l: a client that declared no elicitation was sent no elicitation/create"
	# A client asked in band that does not answer: the queue's decision first, its question moot.
	(GW_TOKEN=$TOKEN_A in_band_call v1 wait agent-a "$D/log/approved-2.txt" http "$GW_URL"
		printf '%s\n' "$OUT" >"$T/bg.out") &
	BG=$!
	approval_of tool.call '.detail.path // "" | contains("approved-2")'
	mcp_as "$WHO" "$T/bin/paddock" approve "$AID" >/dev/null 2>&1
	wait "$BG"
	jqok "$(sed -n 2p "$T/bg.out")" '.result.isError != true' \
		"$l: a client asked in band that does not answer: paddock approve lets the call complete"
	jqok "$(sed -n 3p "$T/bg.out")" '.got | length == 1 and .[0].cancelled == true' \
		"$l: and the server cancelled its question (notifications/cancelled)"
	is "$(cat "$D/log/approved-2.txt" 2>/dev/null)" yes "$l: and its write is done"
	# A rug pull: echo's definition changes after it was pinned: withheld until approved.
	GW_TOKEN=$TOKEN_A steps "$WHO" v1 '[{"op": "list", "want": ["rug__echo"]},
		{"op": "call", "name": "rug__mutate", "args": {}},
		{"op": "list", "gone": ["rug__echo"]},
		{"op": "call", "name": "rug__echo", "args": {"text": "x"}}]' http "$GW_URL"
	jqok "$(nth 3)" '[.tools[].name] | index("rug__echo") == null' "$l: a changed definition is no longer listed"
	approval_of tool.pin '.detail.tool == "echo" and .detail.diff.description != null'
	ok $? "$l: the change is a tool.pin approval with the diff"
	jqok "$(nth 4)" '.result.isError == true and .result.structuredContent.error.code == "tool_pending_approval" and
		.result.structuredContent.error.approval == "'"$AID"'"' "$l: a call to it is refused naming the approval"
	# A legacy HTTP client, listening on its session's GET stream, is told of the change.
	GW_TOKEN=$TOKEN_A steps "$WHO" v1 '[{"op": "listening"},
		{"op": "exec", "argv": ["'"$T/bin/paddock"'", "approve", "'"$AID"'"]},
		{"op": "changed"}, {"op": "list", "want": ["rug__echo"]}]' http "$GW_URL"
	jqok "$(nth 1)" '.status == 200' "$l: an SDK v1 client over HTTP opens its session's GET stream (200)"
	jqok "$(nth 2)" '.status == 0' "$l: paddock approve ID (the pin) exits 0"
	jqok "$(nth 3)" '.count >= 1' \
		"$l: the client gets notifications/tools/list_changed on its GET stream when the pin is approved"
	jqok "$(nth 4)" 'any(.tools[]; .name == "rug__echo" and (.description | contains("id_rsa")))' \
		"$l: approved, the new definition is served"
	gw_stop
	no_process_left "$l"
}

# granted_by APPROVER: whether the audit store records approval.granted by APPROVER.
granted_by() {
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 500 --kind approval.granted --json >"$T/granted.json" 2>&1
	jq -e -s 'any(.[]; .attrs.approver == "'"$1"'")' "$T/granted.json" >/dev/null 2>&1
}

# granted_for FILE APPROVER: whether the call that wrote FILE ran on an approval the audit
# store records approval.granted by APPROVER (its tool.call names the approval).
granted_for() {
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 1000 --json >"$T/granted.json" 2>&1
	jq -e -s '([.[] | select(.kind == "tool.call" and .attrs.decision == "approved" and
		.attrs.args.path == "'"$1"'") | .attrs.approval] | last) as $a | $a != null and
		any(.[]; .kind == "approval.granted" and .attrs.id == $a and .attrs.approver == "'"$2"'")' \
		"$T/granted.json" >/dev/null 2>&1
}

# in_band_call SDK ANSWER PRINCIPAL FILE TARGET...: a client that declared elicitation (it
# answers ANSWER: accept, decline, wait) calls fx__write_file of FILE, which the policy sends
# to a human; its lines in $OUT.
in_band_call() {
	local sdk=$1 answer=$2 file=$4
	shift 4
	GW_ELICIT=$answer steps "$WHO" "$sdk" '[{"op": "list", "want": ["fx__write_file"]},
		{"op": "call", "name": "fx__write_file", "args": {"path": "'"$file"'", "text": "yes"}}]' "$@"
}

# approvals.in_band false: a client that declared elicitation is not asked, the queue decides;
# a value other than a boolean is refused naming the field.
in_band_off() {
	local l="$WHO: in band off" out rc
	{ cat "$CFG"; printf 'approvals:\n  in_band: false\n'; } >"$D/off.yaml"
	(in_band_call v1 accept agent-s "$D/log/inband-off.txt" stdio "$T/bin/paddock" gateway \
		--config "$D/off.yaml" --principal agent-s; printf '%s\n' "$OUT" >"$T/bg.out") &
	BG=$!
	approval_of tool.call '.detail.path // "" | contains("inband-off")'
	ok $? "$l: the call waits in the queue"
	mcp_as "$WHO" "$T/bin/paddock" approve "$AID" >/dev/null 2>&1
	wait "$BG"
	jqok "$(sed -n 2p "$T/bg.out")" '.result.isError != true' "$l: paddock approve lets it complete"
	jqok "$(sed -n 3p "$T/bg.out")" '.got == []' "$l: the client that declared elicitation was not asked"
	(in_band_call v2 accept agent-s "$D/log/inband-off-2.txt" stdio "$T/bin/paddock" gateway \
		--config "$D/off.yaml" --principal agent-s; printf '%s\n' "$OUT" >"$T/bg.out") &
	BG=$!
	approval_of tool.call '.detail.path // "" | contains("inband-off-2")'
	ok $? "$l: SDK v2 (2026-07-28): the call waits in the queue"
	mcp_as "$WHO" "$T/bin/paddock" approve "$AID" >/dev/null 2>&1
	wait "$BG"
	jqok "$(sed -n 2p "$T/bg.out")" '.result.isError != true' "$l: SDK v2 (2026-07-28): paddock approve lets it complete"
	jqok "$(sed -n 3p "$T/bg.out")" '.got == []' "$l: SDK v2 (2026-07-28): no input_required asked the client"
	printf 'servers:\n  fx:\n    command: [/bin/true]\napprovals:\n  in_band: maybe\n' >"$D/bad-in-band.yaml"
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway check --config "$D/bad-in-band.yaml" 2>&1)
	rc=$?
	is "$rc" 122 "$l: gateway check refuses approvals.in_band: maybe (122)"
	printf '%s' "$out" | grep -q "$D/bad-in-band.yaml:5: approvals.in_band: expected true or false"
	ok $? "$l: naming FILE:LINE, approvals.in_band and what it expects" || printf '%s\n' "$out" | sed 's/^/#   /'
}

# The 2026-07-28 era (SDK v2, MRTR) over the running gateway --listen: the call is answered
# input_required (elicitation/create and a signed requestState naming the approval) and the
# retry's answer decides it. Driven by hand (the SDK's manual multi round-trip path): an
# operator's `paddock deny` between the rounds stands against the retry's accept; a forged
# state and another call's state are refused (invalid params); a granted state runs once.
in_band_mrtr() {
	local l=$1 f="$D/log/inband-6.txt" g="$D/log/inband-7.txt" h="$D/log/inband-8.txt" fa ga ha
	fa='{"path": "'"$f"'", "text": "yes"}'
	ga='{"path": "'"$g"'", "text": "yes"}'
	ha='{"path": "'"$h"'", "text": "yes"}'
	GW_TOKEN=$TOKEN_A GW_ELICIT=accept steps "$WHO" v2 '[{"op": "list", "want": ["fx__write_file"]},
		{"op": "ask", "name": "fx__write_file", "args": '"$fa"'},
		{"op": "exec", "argv": ["'"$T/bin/paddock"'", "deny", "@APPROVAL@"]},
		{"op": "retry", "name": "fx__write_file", "args": '"$fa"', "answer": "accept"},
		{"op": "ask", "name": "fx__write_file", "args": '"$ha"'},
		{"op": "ask", "name": "fx__write_file", "args": '"$ga"'},
		{"op": "retry", "name": "fx__write_file", "args": '"$ga"', "answer": "accept", "state": "forged"},
		{"op": "retry", "name": "fx__write_file", "args": '"$ga"', "answer": "accept", "state": "other"},
		{"op": "retry", "name": "fx__write_file", "args": '"$ga"', "answer": "accept"},
		{"op": "retry", "name": "fx__write_file", "args": '"$ga"', "answer": "accept"}]' http "$GW_URL"
	jqok "$(nth 2)" '.result.resultType == "input_required" and
		.result.inputRequests.approve.method == "elicitation/create" and
		.result.inputRequests.approve.params.requestedSchema.properties.approve.type == "boolean" and
		(.result.inputRequests.approve.params.message | contains("agent-a") and contains("writes need a human")) and
		(.result.requestState | type == "string") and (.approval | length == 36)' \
		"$l: http, SDK v2 (2026-07-28): the call is answered input_required: elicitation/create {approve: boolean} and a requestState"
	jqok "$(nth 3)" '.status == 0' "$l: http, SDK v2: paddock deny decides the pending approval between the rounds"
	jqok "$(nth 4)" '.result.isError == true and (.result.content[0].text | startswith("approval_denied") and
		contains("denied by uid:"))' "$l: http, SDK v2: the retry's accept after the operator's deny is refused, naming the operator"
	is "$(logged '.method == "tools/call" and .params.arguments.path == "'"$f"'"')" 0 \
		"$l: http, SDK v2: the denied call never reached the upstream (its log)"
	jqok "$(nth 7)" '.code == -32602 and (.throw | contains("requestState does not verify"))' \
		"$l: http, SDK v2: a forged requestState is refused (invalid params)"
	jqok "$(nth 8)" '.code == -32602' "$l: http, SDK v2: another call's requestState is refused (invalid params)"
	jqok "$(nth 9)" '.result.isError != true and (.result.content[0].text | startswith("wrote 3 bytes"))' \
		"$l: http, SDK v2: the retry with its own state and accept runs the call"
	is "$(cat "$g" 2>/dev/null)" yes "$l: http, SDK v2: and its write is done"
	granted_for "$g" elicitation:agent-a
	ok $? "$l: http, SDK v2: the record names approval.granted by elicitation:agent-a"
	jqok "$(nth 10)" '.result.isError == true and (.result.content[0].text | contains("used by an earlier retry"))' \
		"$l: http, SDK v2: the same granted state again does not run the call twice"
	is "$(logged '.method == "tools/call" and .params.arguments.path == "'"$g"'"')" 1 \
		"$l: http, SDK v2: the upstream saw that call once"
	is "$(logged '.method == "tools/call" and .params.arguments.path == "'"$h"'"')" 0 \
		"$l: http, SDK v2: a call asked and never retried never reaches the upstream"
}

# The 2026-07-28 era: the SDK v2 client answers input_required by itself (its elicitation
# handler, then the retry): accept runs the call, decline denies it; then in_band_mrtr.
in_band_modern() {
	local l=$1 f="$D/log/inband-5.txt"
	GW_TOKEN=$TOKEN_A in_band_call v2 accept agent-a "$f" http "$GW_URL"
	jqok "$(nth 3)" '.got | length == 1 and (.[0].message | contains("agent-a") and contains("fx__write_file"))' \
		"$l: http, SDK v2 (2026-07-28): the client is asked by input_required (elicitation/create)"
	jqok "$(nth 2)" '.result.isError != true' "$l: http, SDK v2 (2026-07-28): accepted, its retry is answered"
	is "$(cat "$f" 2>/dev/null)" yes "$l: http, SDK v2 (2026-07-28): and its write is done"
	granted_for "$f" elicitation:agent-a
	ok $? "$l: http, SDK v2 (2026-07-28): the record names approval.granted by elicitation:agent-a"
	f="$D/log/inband-5d.txt"
	GW_TOKEN=$TOKEN_A in_band_call v2 decline agent-a "$f" http "$GW_URL"
	jqok "$(nth 2)" '.result.isError == true and (.result.content[0].text | contains("denied by elicitation:agent-a"))' \
		"$l: http, SDK v2 (2026-07-28): declined, the retry gets the denial"
	is "$(logged '.method == "tools/call" and .params.arguments.path == "'"$f"'"')" 0 \
		"$l: http, SDK v2 (2026-07-28): the declined call never reached the upstream (its log)"
	in_band_mrtr "$l"
}

# Approval in band (docs/approvals.md, IN BAND): a client that declared elicitation is asked
# beside the queue, and its answer decides (the record names elicitation:PRINCIPAL); a
# decline is the denial; a modern (2026-07-28) client is asked by input_required (MRTR).
case_elicit() {
	local l="$WHO: in band" f="$D/log/inband-1.txt"
	in_band_call v1 accept agent-s "$f" stdio "$T/bin/paddock" gateway --config "$CFG" --principal agent-s
	jqok "$(nth 3)" '.got | length == 1 and (.[0].message | contains("agent-s") and
		contains("fx__write_file") and contains("writes need a human")) and
		.[0].requestedSchema.properties.approve.type == "boolean"' 		"$l: stdio: the client is asked elicitation/create naming who, what and why, {approve: boolean}"
	jqok "$(nth 2)" '.result.isError != true and (.result.content[0].text | startswith("wrote 3 bytes"))' 		"$l: stdio: accepted, the call is forwarded and answered"
	is "$(cat "$f" 2>/dev/null)" yes "$l: stdio: and its write is done"
	granted_by elicitation:agent-s
	ok $? "$l: stdio: the audit store records approval.granted by elicitation:agent-s"
	f="$D/log/inband-2.txt"
	in_band_call v1 decline agent-s "$f" stdio "$T/bin/paddock" gateway --config "$CFG" --principal agent-s
	jqok "$(nth 2)" '.result.isError == true and (.result.content[0].text | startswith("approval_denied")
		and contains("denied by elicitation:agent-s") and contains("declined"))' 		"$l: stdio: declined, the client gets the denial naming the approver"
	is "$(logged '.method == "tools/call" and .params.arguments.path == "'"$f"'"')" 0 		"$l: stdio: the declined call never reached the upstream (its log)"
	in_band_off
	if ! gw_listen "$WHO" "$CFG"; then
		ok 1 "$l: paddock gateway --listen starts"
		return
	fi
	f="$D/log/inband-3.txt"
	GW_TOKEN=$TOKEN_A in_band_call v1 accept agent-a "$f" http "$GW_URL"
	jqok "$(nth 2)" '.result.isError != true' "$l: http, SDK v1: accepted in the POST's stream, the call is answered"
	is "$(cat "$f" 2>/dev/null)" yes "$l: http, SDK v1: and its write is done"
	granted_by elicitation:agent-a
	ok $? "$l: http: the audit store records approval.granted by elicitation:agent-a (the token's principal)"
	f="$D/log/inband-4.txt"
	GW_TOKEN=$TOKEN_A in_band_call v2-legacy decline agent-a "$f" http "$GW_URL"
	jqok "$(nth 3)" '.got | length == 1' "$l: http, SDK v2 (2025 era): the client is asked"
	jqok "$(nth 2)" '.result.isError == true and (.result.content[0].text | contains("denied by elicitation:agent-a"))' 		"$l: http, SDK v2 (2025 era): declined, the client gets the denial"
	in_band_modern "$l"
	gw_stop
	no_process_left "$l"
}

# A gateway killed (SIGKILL) the moment its client has read an answer: that call's tool.call
# record is in the audit store all the same and the chain verifies (docs/gateway.md, AUDIT: a
# record is stored before the answer of its call is written).
case_kill() {
	local l="$WHO: killed after an answer" marker out
	marker="kill-$WHO-$$-$RANDOM"
	out=$(mcp_as "$WHO" timeout 120 python3 "$T/bin/gw-kill.py" "$marker" "$T/bin/paddock" \
		gateway --config "$CFG" --principal agent-k 2>"$T/kill.err")
	jqok "$out" '.signal == 9 and .answer.result.isError != true and
		.answer.result.content[0].text == "'"$marker"'"' \
		"$l: the call is answered, then the gateway is killed with SIGKILL" ||
		head -5 "$T/kill.err" | sed 's/^/#   /'
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 500 --kind tool.call --json >"$T/audit.json" 2>&1
	jqok "$(jq -s . "$T/audit.json")" 'any(.. | objects | select(.kind? == "tool.call") | .attrs;
		.principal == "agent-k" and .server == "fx" and .tool == "echo" and .decision == "allowed"
		and .args.text == "'"$marker"'")' "$l: the answered call's tool.call record is stored"
	mcp_as "$WHO" "$T/bin/paddock" audit verify >"$T/verify.out" 2>&1
	ok $? "$l: paddock audit verify passes after the kill" || head -5 "$T/verify.out" | sed 's/^/#   /'
	# The supervisors get SIGTERM as the killed gateway dies, and end the sandboxes
	# (case_reap); any still here is stopped.
	stop_supervisors
	no_process_left "$l"
}

# texts_of FILE MARKER: {text: count} of the tool.call records in FILE (`audit tail --json`) whose
# arguments' text starts with MARKER.
texts_of() {
	jq -s --arg m "$2" '[.[] | select(.kind == "tool.call") | .attrs.args.text // empty
		| select(startswith($m))] | group_by(.) | map({key: .[0], value: length}) | from_entries' "$1"
}

# The gateway killed with SIGKILL at several points: after 20 answered calls and a pause (its
# spool folded meanwhile), after 20 more (not folded yet), with 5 calls written and not
# answered. Every answered call's record is stored once, none twice after a second fold, and
# the chain verifies before and after; the killed gateway's spool is left to, and taken by,
# the next fold.
case_kill_many() {
	local l="$WHO: killed between and after folds" marker out tails
	marker="many-$WHO-$$-$RANDOM"
	out=$(mcp_as "$WHO" timeout 120 python3 "$T/bin/gw-kill.py" --calls 40 --pause-at 20 \
		--in-flight 5 "$marker" "$T/bin/paddock" gateway --config "$CFG" --principal agent-k \
		2>"$T/kill.err")
	jqok "$out" '.signal == 9 and (.answered | length) == 40' \
		"$l: 40 calls are answered, then the gateway is killed with SIGKILL" ||
		head -5 "$T/kill.err" | sed 's/^/#   /'
	mcp_as "$WHO" "$T/bin/paddock" audit verify --json >"$T/verify.json" 2>&1
	ok $? "$l: paddock audit verify passes before anything folds the killed gateway's spool"
	jqok "$(cat "$T/verify.json")" '.unfolded | all(.running == false)' \
		"$l: no spool is held any more (the killed gateway's lock went with it)"
	echo "# $l: $(jq '.unfolded_records' "$T/verify.json") record(s) not folded at the kill"
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 2000 --kind tool.call --json >"$T/audit.json" 2>&1
	tails=$(texts_of "$T/audit.json" "$marker")
	jqok "$tails" '. as $t | ([range(1; 41)] | all(. as $k | $t["'"$marker"'-\($k)"] == 1))' \
		"$l: each of the 40 answered calls has exactly one tool.call record"
	jqok "$tails" 'to_entries | all(.value == 1)' \
		"$l: no record is there twice (the calls in flight have one record at most)"
	mcp_as "$WHO" "$T/bin/paddock" audit fold >/dev/null 2>&1
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 2000 --kind tool.call --json >"$T/audit.json" 2>&1
	is "$(texts_of "$T/audit.json" "$marker")" "$tails" "$l: a second fold appends none of them again"
	mcp_as "$WHO" "$T/bin/paddock" audit verify --json >"$T/verify.json" 2>&1
	ok $? "$l: paddock audit verify passes after the folds"
	jqok "$(cat "$T/verify.json")" '.unfolded_records == 0' "$l: nothing is left to fold"
	is "$(find "$T/state-$WHO/audit-spool" -name 'paddock-gateway-*.jsonl' | wc -l)" 0 \
		"$l: the killed gateway's spool files are folded and gone"
	stop_supervisors
	no_process_left "$l"
}

# stop_supervisors: SIGTERM to the sandbox supervisors of this round's state directory (only
# what the suite started: their environment names it).
stop_supervisors() {
	local p
	for p in $(pgrep -f 'supervise --id'); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PADDOCK_STATE_DIR=$T/state-$WHO" &&
			kill -TERM "$p" 2>/dev/null
	done
}

# supervisors: how many sandbox supervisors of this round's state directory run.
supervisors() {
	local p n=0
	for p in $(pgrep -f 'supervise --id'); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PADDOCK_STATE_DIR=$T/state-$WHO" &&
			n=$((n + 1))
	done
	echo $n
}

# sandbox_cgroups: the sandboxes' cgroup directories under the suite's cgroups (a sandbox's
# cgroup is made under the cgroup of the process that starts it).
sandbox_cgroups() {
	local cg=$ROOT_CG
	[ "$WHO" = root ] || cg=$DELEGATED
	find /sys/fs/cgroup -path "*$cg/*" -type d -name 'paddock-*' 2>/dev/null | wc -l
}

# A gateway killed with SIGKILL: its upstreams' supervisors are its children, started with
# PR_SET_PDEATHSIG, so the kernel sends them SIGTERM as it dies and they end the sandboxes
# themselves (processes and cgroups). The private directory the gateway could not remove is
# removed by the next gateway on the same runtime directory.
case_reap() {
	local l="$WHO: the sandboxes of a killed gateway" out dirs i before
	before=$(sandbox_cgroups)
	out=$(mcp_as "$WHO" timeout 120 python3 "$T/bin/gw-kill.py" "reap-$WHO-$RANDOM" "$T/bin/paddock" \
		gateway --config "$CFG" --principal agent-k 2>"$T/reap.err")
	jqok "$out" '.signal == 9' "$l: a gateway answered a call and was killed with SIGKILL"
	for i in $(seq 1 150); do
		[ "$(supervisors)" = 0 ] && [ "$(sandbox_cgroups)" = "$before" ] && break
		sleep 0.2
	done
	is "$(supervisors)" 0 "$l: its upstreams' supervisors end with it (SIGTERM as it dies)"
	is "$(sandbox_cgroups)" "$before" "$l: and so do its upstreams' sandboxes' cgroups"
	no_process_left "$l"
	dirs=$(find "$T/run-$WHO/gateway" -mindepth 1 -maxdepth 1 -type d | wc -l)
	[ "$dirs" -ge 1 ]; ok $? "$l: its private directory is left ($dirs)"
	out=$(mcp_as "$WHO" timeout 120 "$T/bin/paddock" gateway --config "$CFG" </dev/null 2>&1)
	is "$?" 0 "$l: the next gateway starts and stops (stdin closed)" ||
		printf '%s\n' "$out" | head -5 | sed 's/^/#   /'
	is "$(supervisors)" 0 "$l: no supervisor of the killed gateway is left"
	is "$(find "$T/run-$WHO/gateway" -mindepth 1 -maxdepth 1 | wc -l)" 0 \
		"$l: the next gateway removed the private directory"
	no_process_left "$l"
}

for WHO in root user; do
	config "$WHO"
	case_cli
	case_stdio
	case_modern
	case_http
	case_progress_cancel
	case_approvals
	case_elicit
	case_kill
	case_kill_many
	case_reap
done
done_testing
