#!/bin/bash
# The gateway's attack battery (issue 20, "Tests"), as root and as nobody. Each case shows the
# attack was TRIED (the attempt reached the gateway, or the upstream: its own output) and
# STOPPED (what the client got, what the upstream fixture's --log says reached it, the audit
# record). The upstreams are tests/integration/gw-upstream.py in its modes, each in its own
# sandbox; the client is the official SDK's (tests/clients/drive/gateway-steps.mjs) against
# `paddock gateway --listen` with a principal's bearer token, or over stdio.
#   poison      a description hiding instructions: withheld, an approval lists the findings,
#               `paddock approve ID` serves it
#   denied      the same, denied by `paddock deny ID`: it stays withheld (tool_refused)
#   rug pull    a description changed after first contact: withheld (not listed, a call gets
#               tool_pending_approval naming the approval), the approval carries the diff;
#               approved -> served again
#   ~/.ssh      a key planted in the gateway user's HOME: the upstream's read fails in its
#               sandbox (the fixture's own error)
#   write       into its read path: fails (the fixture's error); beside its write paths (the
#               sandbox's own tmpfs /tmp): nothing on the host
#   network     a listener on the host's loopback and an origin in a network namespace the
#               suite makes: no connection reaches either (their logs), from a server with
#               no network and from one with an allowlist (the egress proxy refuses; a
#               server that exits on the refusal is reported naming the refused destination)
#   secrets     a planted ghp_ token in one server's result: the client sees [REDACTED]; sent
#               as an argument to another server (and a PADDOCK_SECRET_* value), it reaches
#               that server redacted (its --log)
#   schema      arguments against the pinned inputSchema: refused, naming the pointer and
#               keyword, never forwarded (the --log)
#   policy      a deny rule: refused naming the rule, never forwarded
#   budget      calls_per_session 2: the third call is refused naming calls_per_session
#   approval    require_approval with approvals.timeout 2s: approval_timeout, state timed_out
#   tokens      a forged token, none, and a revoked one (its principal removed from the
#               config): 401; a config principal's valid token works
#   survival    upstreams that crash, hang, flood, speak malformed JSON-RPC or exit at
#               start: each failure names its upstream, and the others are still served
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-mcp.sh"
. "$(dirname "$0")/lib-gateway-clients.sh"
mcp_cgroups
# A gateway error's object: structuredContent.error, or _meta's io.paddock/error for a tool
# with an outputSchema (its structuredContent must match that schema).
JQ_DEFS='def err: (.result.structuredContent.error // .result._meta["io.paddock/error"]); '
FIXTURE="$TESTS_DIR/integration/gw-upstream.py"
[ -f "$FIXTURE" ] || { echo "Bail out! $FIXTURE is missing"; exit 1; }
cp "$FIXTURE" "$TESTS_DIR/integration/listener.py" "$T/bin/"
chmod 0755 "$T/bin"/*
# The token the plant-secret fixture puts in its results (its SECRET).
PLANTED=$(sed -n 's/^SECRET = "ghp_" + "\(.*\)"$/ghp_\1/p' "$FIXTURE")
[ ${#PLANTED} = 40 ] || { echo "Bail out! cannot read the fixture's planted secret"; exit 1; }
# A secret of the gateway's own (PADDOCK_SECRET_*): redacted wherever it appears.
CONF_SECRET="conf-secret-$RANDOM$RANDOM$RANDOM"

# ---- an origin in a network namespace of the suite's own, reachable from the host ----
NS_PID=""
NS_IF="gwt$TEST_ID"
NS_IP="10.213.$(((TEST_ID / 64) % 256)).$(((TEST_ID % 64) * 4 + 2))"
HOST_IP="10.213.$(((TEST_ID / 64) % 256)).$(((TEST_ID % 64) * 4 + 1))"
trap 'gw_stop; mcp_stop; [ -z "$NS_PID" ] || kill "$NS_PID" 2>/dev/null; ip link del "$NS_IF" 2>/dev/null;
	undelegate_cgroup; rm_cgroup "$ROOT_CG"; rm -rf "$T"' EXIT
# origin_start PORT LOG: a TCP listener in a fresh network namespace at $NS_IP:PORT (60 s).
origin_start() {
	unshare --net bash -c 'for i in $(seq 100); do ip link show "$1" >/dev/null 2>&1 && break; sleep 0.05; done
		ip link set lo up && ip addr add "$2/30" dev "$1" && ip link set "$1" up &&
		exec python3 "$3" tcp-any "$4" "$5"' _ "${NS_IF}n" "$NS_IP" "$T/bin/listener.py" "$1" "$2" &
	NS_PID=$!
	# The peer goes into the namespace once unshare has made it (before, it is the host's).
	local i
	for i in $(seq 100); do
		[ "$(readlink "/proc/$NS_PID/ns/net")" != "$(readlink /proc/self/ns/net)" ] && break
		sleep 0.05
	done
	ip link add "$NS_IF" type veth peer name "${NS_IF}n" netns "$NS_PID" &&
		ip addr add "$HOST_IP/30" dev "$NS_IF" && ip link set "$NS_IF" up
}
# reach HOST PORT: the host itself connects (the origin is there; what the sandbox did not
# reach was reachable).
reach() {
	local i
	for i in $(seq 100); do
		python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1).close()' \
			"$1" "$2" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# ---- tokens ----
TOKEN_A=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
TOKEN_OLD=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

# fixture NAME MODE [ARGS...]: the YAML of a server running the fixture in MODE, its log in
# $D/log/NAME.log.
fixture() {
	local name=$1 mode=$2 extra=""
	shift 2
	[ $# = 0 ] || extra=$(printf ', %s' "$@")
	mkdir -p "$D/data-$name"
	cat <<EOF
  $name:
    command: [/usr/bin/python3, $T/bin/gw-upstream.py, --mode, $mode, --log, $D/log/$name.log$extra]
    permissions:
      filesystem: {read: [$T/bin], write: [$D/log, $D/data-$name]}
EOF
}

# config WHO [PRINCIPALS...]: the battery's gateway config, $CFG; $D is WHO's directory.
config() {
	local who=$1 p
	shift
	D="$T/gw-$who"
	CFG="$D/gateway.yaml"
	mkdir -p "$D/log" "$D/data-fx" "$D/data-egress"
	{
		echo "servers:"
		fixture fx ok
		fixture secret plant-secret
		fixture poison poison
		fixture poison2 poison
		fixture rug rugpull --rug-after 1000000
		fixture egress ok
		echo "      network: {client: [allowed.example.org]}"
		fixture crash crash
		fixture hang hang
		echo "    timeout: 3s"
		fixture flood flood
		fixture malformed malformed
		fixture dead exit-at-start
		cat <<EOF
policy:
  default: allow
  rules:
    - name: no-env
      server: fx
      tool: env
      action: deny
      reason: the environment is private
principals:
EOF
		for p in "$@"; do echo "  - {name: ${p%%=*}, token_sha256: $(sha "${p#*=}")}"; done
	} >"$CFG"
	[ "$who" = root ] || chown -R $UNPRIV_UID:$UNPRIV_UID "$D"
	chmod -R a+rX "$D"
}

# pending_approval SERVER TOOL: the pending tool.pin approval's JSON for SERVER's TOOL (as
# `paddock approvals --json` shows it), in $APPROVAL; its id in $AID.
pending_approval() {
	mcp_as "$WHO" "$T/bin/paddock" approvals --json >"$T/approvals.json" 2>"$T/approvals.err"
	APPROVAL=$(jq -cs '[.. | objects | select(.kind? == "tool.pin" and .state? == "pending" and
		.detail.server? == "'"$1"'" and .detail.tool? == "'"$2"'")] | last // empty' "$T/approvals.json" 2>/dev/null)
	AID=$(printf '%s' "$APPROVAL" | jq -r '.id // empty' 2>/dev/null)
	[ -n "$AID" ] || { echo "# paddock approvals --json:"; head -c 2000 "$T/approvals.json" "$T/approvals.err" | sed 's/^/#   /'; }
}

# diag STATUS DESC FILE: a subtest; when it failed, FILE's last lines as diagnostics.
diag() {
	ok "$1" "$2"
	[ "$1" = 0 ] || tail -8 "$3" | sed 's/^/#   /'
}

# logged NAME JQ-FILTER: how many messages in NAME's fixture log pass the filter.
logged() {
	jq -c "select($2)" "$D/log/$1.log" 2>/dev/null | wc -l
}
# is_call TOOL: the jq filter of a tools/call of TOOL in a fixture's log.
is_call() {
	echo '.method == "tools/call" and .params.name == "'"$1"'"'
}

# gw_error JSON CODE DESC: an isError result whose error object's code is CODE and whose
# text starts with it.
gw_error() {
	jqok "$1" '.result.isError == true and err.code == "'"$2"'" and
		(.result.content[0].text | startswith("'"$2"'"))' "$3"
}

# http WHO JSON: one client session over HTTP with agent-a's token.
http() {
	GW_TOKEN=$TOKEN_A steps "$1" v1 "$2" http "$GW_URL"
}

ALL='["fx__echo", "secret__echo", "poison__echo", "rug__echo", "rug__mutate", "egress__connect",
	"crash__echo", "hang__echo", "flood__echo", "malformed__echo"]'

case_poison() {
	local l="$WHO: poison"
	http "$WHO" '[{"op": "list", "want": '"$ALL"'},
		{"op": "call", "name": "poison__notes", "args": {"note": "hello"}}]'
	jqok "$(nth 1)" '[.tools[].name] | index("poison__notes") == null and index("poison__echo") != null' \
		"$l: the poisoned tool is withheld from tools/list (its clean neighbour is served)"
	pending_approval poison notes
	[ -n "$AID" ]
	ok $? "$l: a pending tool.pin approval asks about poison__notes ($AID)"
	jqok "$APPROVAL" '[.detail.findings[].shape] | (index("invisible") != null and index("credentials") != null and index("conceal") != null)' \
		"$l: the approval lists the findings (invisible, credentials, conceal)"
	mcp_as "$WHO" "$T/bin/paddock" approvals >"$T/approvals.txt" 2>&1
	grep -q "$AID" "$T/approvals.txt" && grep -q "poison__notes" "$T/approvals.txt"
	diag $? "$l: paddock approvals lists it (id and tool)" "$T/approvals.txt"
	gw_error "$(nth 2)" tool_pending_approval "$l: a call of the withheld tool is refused tool_pending_approval"
	jqok "$(nth 2)" 'err.approval == "'"$AID"'" and
		(.result.content[0].text | contains("'"$AID"'"))' "$l: the refusal names the approval id"
	is "$(logged poison "$(is_call notes)")" 0 "$l: no call of notes reached the upstream (its log)"
	mcp_as "$WHO" "$T/bin/paddock" approve "$AID" >"$T/approve.out" 2>&1
	is "$?" 0 "$l: paddock approve $AID exits 0" || sed 's/^/#   /' "$T/approve.out"
	http "$WHO" '[{"op": "list", "want": ["poison__notes"], "within": 30000},
		{"op": "call", "name": "poison__notes", "args": {"note": "after"}}]'
	jqok "$(nth 1)" '[.tools[].name] | index("poison__notes") != null' "$l: approved, poison__notes is listed"
	jqok "$(nth 2)" '(err.code? // "") != "tool_pending_approval"' \
		"$l: approved, a call of poison__notes is no longer refused"
	is "$(logged poison "$(is_call notes)")" 1 "$l: the approved call reached the upstream"
}

# A poisoned tool a human denies stays withheld: a call gets tool_refused naming the approval.
case_denied() {
	local l="$WHO: denied"
	http "$WHO" '[{"op": "list", "want": ["poison2__echo"]}]'
	pending_approval poison2 notes
	[ -n "$AID" ]
	ok $? "$l: a pending tool.pin approval asks about poison2__notes ($AID)"
	mcp_as "$WHO" "$T/bin/paddock" deny "$AID" --note "it asks for my keys" >"$T/deny.out" 2>&1
	is "$?" 0 "$l: paddock deny $AID exits 0" || sed 's/^/#   /' "$T/deny.out"
	# The gateway has taken the decision in once it recorded it (approval.denied).
	local i
	for i in $(seq 600); do
		mcp_as "$WHO" "$T/bin/paddock" audit tail -n 50 --kind approval.denied --json 2>/dev/null |
			grep -q "$AID" && break
		sleep 0.1
	done
	http "$WHO" '[{"op": "list"}, {"op": "call", "name": "poison2__notes", "args": {"note": "x"}}]'
	jqok "$(nth 1)" '[.tools[].name] | index("poison2__notes") == null and index("poison2__echo") != null' \
		"$l: denied, poison2__notes stays withheld from tools/list"
	gw_error "$(nth 2)" tool_refused "$l: a call of it is refused tool_refused"
	jqok "$(nth 2)" 'err.approval == "'"$AID"'"' "$l: the refusal names the denied approval"
	is "$(logged poison2 "$(is_call notes)")" 0 "$l: no call of notes reached the upstream (its log)"
	mcp_as "$WHO" "$T/bin/paddock" approvals --all --json >"$T/approvals.json" 2>&1
	jqok "$(jq -cs . "$T/approvals.json" 2>/dev/null)" '[.. | objects | select(.id? == "'"$AID"'")] |
		any(.state == "denied" and (.note | contains("my keys")))' "$l: paddock approvals --all shows it denied, with the note"
}

case_rugpull() {
	local l="$WHO: rug pull"
	http "$WHO" '[{"op": "list", "want": ["rug__echo", "rug__mutate"]},
		{"op": "call", "name": "rug__echo", "args": {"text": "before"}},
		{"op": "call", "name": "rug__mutate", "args": {}},
		{"op": "list", "gone": ["rug__echo"], "within": 30000},
		{"op": "call", "name": "rug__echo", "args": {"text": "after the pull"}}]'
	jqok "$(nth 2)" '.result.content[0].text == "before"' "$l: before the pull, rug__echo is served"
	jqok "$(nth 3)" '.result.content[0].text == "mutated"' "$l: the upstream changed echo's description"
	jqok "$(nth 4)" '[.tools[].name] | index("rug__echo") == null and index("rug__mutate") != null' \
		"$l: the changed rug__echo disappears from tools/list (the old pin is not served either)"
	pending_approval rug echo
	[ -n "$AID" ]
	ok $? "$l: a pending tool.pin approval asks about rug__echo ($AID)"
	gw_error "$(nth 5)" tool_pending_approval "$l: a call of rug__echo is refused tool_pending_approval"
	jqok "$(nth 5)" 'err.approval == "'"$AID"'"' "$l: the refusal names the approval id"
	jqok "$APPROVAL" '[.. | objects | select(has("before") and has("after"))] | any(
		(.before | tostring | contains("Echoes text.")) and (.after | tostring | contains("id_rsa")))' \
		"$l: the approval carries the diff (the description before and after)"
	jqok "$APPROVAL" '[.detail.findings[]?.shape] | index("credentials") != null' \
		"$l: the new description's finding is listed (credentials)"
	is "$(logged rug "$(is_call echo) and .params.arguments.text == \"after the pull\"")" 0 \
		"$l: the call after the pull never reached the upstream (its log)"
	mcp_as "$WHO" "$T/bin/paddock" approve "$AID" >"$T/approve.out" 2>&1
	is "$?" 0 "$l: paddock approve $AID exits 0" || sed 's/^/#   /' "$T/approve.out"
	http "$WHO" '[{"op": "list", "want": ["rug__echo"], "within": 30000},
		{"op": "call", "name": "rug__echo", "args": {"text": "approved"}}]'
	jqok "$(nth 2)" '.result.isError != true and .result.content[0].text == "approved"' \
		"$l: approved, rug__echo is served again"
}

case_files() {
	local l="$WHO: files" key="$HOMEDIR/.ssh/id_rsa" secret="PADDOCK-TEST-KEY-$RANDOM$RANDOM"
	mkdir -p "$HOMEDIR/.ssh"
	echo "$secret" >"$key"
	[ "$WHO" = root ] || chown -R $UNPRIV_UID:$UNPRIV_UID "$HOMEDIR/.ssh"
	http "$WHO" '[{"op": "list", "want": ["fx__read_file", "fx__write_file"]},
		{"op": "call", "name": "fx__read_file", "args": {"path": "'"$key"'"}},
		{"op": "call", "name": "fx__read_file", "args": {"path": "'"$T/bin/gw-upstream.py"'"}},
		{"op": "call", "name": "fx__write_file", "args": {"path": "'"$T/bin/planted.py"'", "text": "escaped"}},
		{"op": "call", "name": "fx__write_file", "args": {"path": "'"$HOMEDIR/.ssh/authorized_keys"'", "text": "escaped"}},
		{"op": "call", "name": "fx__write_file", "args": {"path": "'"$D/data-fx/inside.txt"'", "text": "inside"}},
		{"op": "call", "name": "fx__write_file", "args": {"path": "'"$D/outside.txt"'", "text": "escaped"}}]'
	is "$(logged fx "$(is_call read_file) and .params.arguments.path == \"$key\"")" 1 \
		"$l: the read of ~/.ssh/id_rsa was tried (it reached the upstream)"
	jqok "$(nth 2)" '.result.isError == true and (.result.content[0].text | startswith("cannot read '"$key"'"))' \
		"$l: the upstream's read of ~/.ssh/id_rsa fails in its sandbox (its own error)"
	jqok "$(nth 2)" '(tostring | contains("'"$secret"'")) | not' "$l: the key's text is nowhere in the answer"
	jqok "$(nth 3)" '.result.isError != true and (.result.content[0].text | contains("A stdio MCP server"))' \
		"$l: a file in its read path is read (the read itself works)"
	jqok "$(nth 4)" '.result.isError == true and (.result.content[0].text | startswith("cannot write '"$T"'/bin/planted.py"))' \
		"$l: a write into its read path fails (its own error)"
	jqok "$(nth 5)" '.result.isError == true and (.result.content[0].text | startswith("cannot write"))' \
		"$l: a write to ~/.ssh/authorized_keys fails (its own error)"
	# Elsewhere under the host's /tmp it writes into its sandbox's own /tmp (strict's tmpfs).
	[ ! -e "$T/bin/planted.py" ] && [ ! -e "$HOMEDIR/.ssh/authorized_keys" ]
	ok $? \
		"$l: neither file exists on the host"
	jqok "$(nth 6)" '.result.isError != true' "$l: a write inside its write path succeeds"
	is "$(cat "$D/data-fx/inside.txt" 2>/dev/null)" "inside" "$l: that file is on the host"
	is "$(logged fx "$(is_call write_file) and .params.arguments.path == \"$D/outside.txt\"")" 1 \
		"$l: a write beside its write paths was tried (it reached the upstream)"
	[ ! -e "$D/outside.txt" ]
	ok $? "$l: that file is not on the host (it went to the sandbox's own /tmp)"
}

case_network() {
	local l="$WHO: network" lport nport
	lport=$(free_port)
	nport=$(free_port)
	python3 "$T/bin/listener.py" tcp "$lport" "$T/lo-$WHO.log" &
	local lpid=$!
	origin_start "$nport" "$T/ns-$WHO.log"
	ok $? "$l: an origin in the suite's own network namespace ($NS_IP:$nport)"
	http "$WHO" '[{"op": "list", "want": ["fx__connect", "egress__connect"]},
		{"op": "call", "name": "fx__connect", "args": {"host": "127.0.0.1", "port": '"$lport"'}},
		{"op": "call", "name": "fx__connect", "args": {"host": "'"$NS_IP"'", "port": '"$nport"'}},
		{"op": "call", "name": "egress__connect", "args": {"host": "127.0.0.1", "port": '"$lport"'}},
		{"op": "call", "name": "egress__connect", "args": {"host": "'"$NS_IP"'", "port": '"$nport"'}},
		{"op": "call", "name": "egress__connect", "args": {"host": "'"$NS_IP"'", "port": '"$nport"', "exit": true}}]'
	jqok "$(nth 2)" '.result.isError == true and (.result.content[0].text | startswith("cannot connect to 127.0.0.1:'"$lport"'"))' \
		"$l: no network: the host's loopback is out of reach (the fixture's error)"
	jqok "$(nth 3)" '.result.isError == true and (.result.content[0].text | startswith("cannot connect to '"$NS_IP:$nport"'"))' \
		"$l: no network: the origin is out of reach (the fixture's error)"
	jqok "$(nth 4)" '.result.isError == true and (.result.content[0].text | test("^cannot connect to 127.0.0.1:'"$lport"': proxy answered [^2]"))' \
		"$l: an allowlist without it: the egress proxy refuses the host's loopback"
	jqok "$(nth 5)" '.result.isError == true and (.result.content[0].text | test("^cannot connect to '"$NS_IP:$nport"': proxy answered [^2]"))' \
		"$l: an allowlist without it: the egress proxy refuses the origin"
	gw_error "$(nth 6)" upstream_failed "$l: the upstream that exits on the refusal fails the call upstream_failed"
	jqok "$(nth 6)" 'err.server == "egress"' "$l: the failure names the upstream (egress)"
	local i
	for i in $(seq 100); do grep -q "$NS_IP:$nport" "$GW_LOG" && break; sleep 0.1; done
	grep -q "egress.*refused.*$NS_IP:$nport\|refused.*$NS_IP:$nport.*egress" "$GW_LOG"
	diag $? "$l: the gateway names the upstream and the refused destination" "$GW_LOG"
	# The host reaches both: what the sandboxes did not reach was there.
	reach 127.0.0.1 "$lport"
	ok $? "$l: the host itself reaches its loopback listener"
	reach "$NS_IP" "$nport"
	ok $? "$l: the host itself reaches the origin"
	# Each listener logs a connection once it accepted it: wait for the host's (a bound).
	for i in $(seq 100); do
		[ "$(cat "$T/lo-$WHO.log" "$T/ns-$WHO.log" 2>/dev/null | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	is "$(wc -l <"$T/lo-$WHO.log" 2>/dev/null)" 1 "$l: the loopback listener saw only the host's connection"
	is "$(wc -l <"$T/ns-$WHO.log" 2>/dev/null)" 1 "$l: the origin saw only the host's connection"
	kill "$lpid" "$NS_PID" 2>/dev/null
	wait "$lpid" "$NS_PID" 2>/dev/null
	NS_PID=""
	ip link del "$NS_IF" 2>/dev/null
}

case_secrets() {
	local l="$WHO: secrets"
	http "$WHO" '[{"op": "list", "want": ["secret__echo", "fx__echo"]},
		{"op": "call", "name": "secret__echo", "args": {"text": "hello"}},
		{"op": "call", "name": "fx__echo", "args": {"text": "forward '"$PLANTED"' please"}},
		{"op": "call", "name": "fx__echo", "args": {"text": "and '"$CONF_SECRET"' too"}}]'
	is "$(logged secret "$(is_call echo)")" 1 "$l: the planted secret's server answered (its log)"
	jqok "$(nth 2)" '.result.content[0].text | (contains("hello") and contains("[REDACTED]"))' \
		"$l: the client sees [REDACTED] in the result"
	jqok "$(nth 2)" '(tostring | contains("'"$PLANTED"'")) | not' "$l: the planted token is nowhere in the result"
	is "$(logged fx "$(is_call echo) and ((.params.arguments.text // \"\") | startswith(\"forward \"))")" 1 \
		"$l: sent as an argument to another server, the call reached it"
	is "$(logged fx "$(is_call echo) and ((.params.arguments.text // \"\") | contains(\"ghp_\"))")" 0 \
		"$l: the token reached that server redacted (its log has no ghp_)"
	is "$(logged fx "$(is_call echo) and ((.params.arguments.text // \"\") | contains(\"[REDACTED\"))")" 2 \
		"$l: both secrets arrived redacted, [REDACTED...] in their place (its log)"
	is "$(grep -c "$CONF_SECRET" "$D/log/fx.log")" 0 "$l: the PADDOCK_SECRET_ value never reached it"
	jqok "$(nth 3)$(nth 4)" '(tostring | contains("ghp_") or contains("'"$CONF_SECRET"'")) | not' \
		"$l: nor came back to the client"
}

case_schema() {
	local l="$WHO: schema"
	http "$WHO" '[{"op": "list", "want": ["fx__add"]},
		{"op": "call", "name": "fx__add", "args": {"a": 1, "b": 2}},
		{"op": "call", "name": "fx__add", "args": {"a": "one", "b": 2}},
		{"op": "call", "name": "fx__add", "args": {"a": 1, "b": 2, "c": 3}},
		{"op": "call", "name": "fx__add", "args": {"a": 1}},
		{"op": "call", "name": "fx__env", "args": {}}]'
	jqok "$(nth 2)" '.result.isError != true and .result.structuredContent.sum == 3' "$l: valid arguments are forwarded (1 + 2 = 3)"
	gw_error "$(nth 3)" invalid_arguments "$l: a string for an integer is refused invalid_arguments"
	jqok "$(nth 3)" '.result.content[0].text | (contains("/a") and contains("type"))' "$l: the refusal names /a and the keyword type"
	gw_error "$(nth 4)" invalid_arguments "$l: an argument the schema does not allow is refused"
	jqok "$(nth 4)" '.result.content[0].text | (contains("additionalProperties") or contains("\"c\"") or contains("/c"))' \
		"$l: the refusal names additionalProperties"
	gw_error "$(nth 5)" invalid_arguments "$l: a missing required argument is refused"
	jqok "$(nth 5)" '.result.content[0].text | contains("required")' "$l: the refusal names the keyword required"
	is "$(logged fx "$(is_call add)")" 1 "$l: only the valid call reached the upstream (its log)"
	gw_error "$(nth 6)" denied "$l: a call a deny rule matches is refused denied"
	jqok "$(nth 6)" 'err.rule == "no-env" and (.result.content[0].text | contains("no-env"))' \
		"$l: the denial names the rule (no-env)"
	is "$(logged fx "$(is_call env)")" 0 "$l: the denied call never reached the upstream"
}

case_survival() {
	local l="$WHO: survival"
	http "$WHO" '[{"op": "list", "want": '"$ALL"'},
		{"op": "call", "name": "crash__echo", "args": {"text": "x"}},
		{"op": "call", "name": "fx__echo", "args": {"text": "after crash"}},
		{"op": "call", "name": "hang__echo", "args": {"text": "x"}},
		{"op": "call", "name": "fx__echo", "args": {"text": "after hang"}},
		{"op": "call", "name": "flood__echo", "args": {"text": "x"}},
		{"op": "call", "name": "fx__echo", "args": {"text": "after flood"}},
		{"op": "call", "name": "malformed__echo", "args": {"text": "x"}},
		{"op": "call", "name": "fx__echo", "args": {"text": "after malformed"}},
		{"op": "call", "name": "dead__echo", "args": {"text": "x"}},
		{"op": "list", "want": ["fx__echo"]}]'
	local n up
	n=2
	for up in crash hang flood malformed; do
		gw_error "$(nth $n)" upstream_failed "$l: $up: the call fails upstream_failed"
		jqok "$(nth $n)" 'err.server == "'"$up"'" and (.result.content[0].text | contains("'"$up"'"))' \
			"$l: $up: the failure names the upstream"
		jqok "$(nth $((n + 1)))" '.result.isError != true and .result.content[0].text == "after '"$up"'"' \
			"$l: $up: the gateway still serves the other upstreams"
		n=$((n + 2))
	done
	jqok "$(nth 2)" '.result.content[0].text | test("status 3|crashing on purpose")' "$l: crash: the failure says it exited (status 3)"
	jqok "$(nth 4)" '.result.content[0].text | test("time|3 s|3s")' "$l: hang: the failure says it timed out"
	jqok "$(nth 10)" '.result.isError == true and (tostring | contains("dead"))' \
		"$l: a call to an upstream that exits at start names it"
	jqok "$(nth 11)" '[.tools[].name] | (index("fx__echo") != null and (map(select(startswith("dead__"))) | length) == 0)' \
		"$l: the upstream that exits at start lists no tools; the others stay listed"
	grep -q "dead.*exiting at start\|dead.*status 2" "$GW_LOG"
	diag $? "$l: the gateway's log names the upstream that exits at start and why" "$GW_LOG"
}

case_tokens() {
	local l="$WHO: tokens" body
	body='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
	code() {
		curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
			-H 'Accept: application/json, text/event-stream' "$@" --data "$body" "$GW_URL"
	}
	is "$(code -H "Authorization: Bearer $(sha forged)")" 401 "$l: a forged token is refused 401"
	is "$(code)" 401 "$l: no token is refused 401"
	is "$(code -H "Authorization: Bearer $TOKEN_A")" 200 "$l: agent-a's token is accepted"
	is "$(code -H "Authorization: Bearer $TOKEN_OLD")" 200 "$l: agent-old's token is accepted while it is configured"
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 500 --kind tool.call --json >"$T/audit.json" 2>&1
	jqok "$(jq -cs . "$T/audit.json" 2>/dev/null)" '[.. | objects | select(.kind? == "tool.call") | .attrs] |
		(any(.principal == "agent-a" and .server == "fx" and .tool == "add" and .decision == "allowed")
		and any(.tool == "add" and .decision == "invalid_arguments")
		and any(.tool == "env" and .decision == "denied" and .rule == "no-env"))' \
		"$l: the calls are tool.call audit records of principal agent-a (allowed, invalid_arguments, denied by no-env)"
	jqok "$(jq -cs . "$T/audit.json" 2>/dev/null)" '[.. | objects | select(.kind? == "tool.call") | .attrs |
		select(.server == "fx" and .tool == "echo")] | (tostring | contains("ghp_") | not) and any((.redactions | if type == "object" then .args else . end) > 0)' \
		"$l: the audit records hold the arguments redacted, and count the redactions"
	# Revoked: the gateway restarted without agent-old.
	gw_stop
	GW_ENV=()
	config "$WHO" "agent-a=$TOKEN_A"
	gw_listen "$WHO" "$CFG" || { ok 1 "$l: the gateway restarts"; return; }
	is "$(code -H "Authorization: Bearer $TOKEN_OLD")" 401 "$l: a revoked token (its principal removed) is refused 401"
	is "$(code -H "Authorization: Bearer $TOKEN_A")" 200 "$l: agent-a's token still works"
	gw_stop
	is "$GW_RC" 0 "$l: the gateway ends with 0 on SIGTERM"
}

# ---- the stdio gateway: a budget and an approval that times out ----
case_budget() {
	local l="$WHO: budget" cfg="$D/budget.yaml"
	D="$T/gw-$WHO"
	cat >"$cfg" <<EOF
servers:
$(fixture fx ok)
policy:
  default: allow
  rules:
    - name: ask-a-human
      server: fx
      tool: echo
      args: {text: {prefix: approve-me}}
      action: require_approval
      reason: a human reads this first
budgets: {calls_per_session: 2}
approvals: {timeout: 2s}
EOF
	chmod 0644 "$cfg"
	: >"$D/log/fx.log"
	steps "$WHO" v1 '[{"op": "list", "want": ["fx__add"]},
		{"op": "call", "name": "fx__add", "args": {"a": 1, "b": 1}},
		{"op": "call", "name": "fx__add", "args": {"a": 2, "b": 2}},
		{"op": "call", "name": "fx__add", "args": {"a": 3, "b": 3}}]' stdio "$T/bin/paddock" gateway --config "$cfg"
	jqok "$(nth 3)" '.result.structuredContent.sum == 4' "$l: the second call of the session is served"
	gw_error "$(nth 4)" budget "$l: the third is refused budget"
	jqok "$(nth 4)" '(err.field == "calls_per_session") and (.result.content[0].text | contains("calls_per_session"))' \
		"$l: the refusal names calls_per_session"
	is "$(logged fx "$(is_call add)")" 2 "$l: two calls reached the upstream (its log)"
	no_paddock_left "$l"

	l="$WHO: approval timeout"
	steps "$WHO" v1 '[{"op": "list", "want": ["fx__echo"]},
		{"op": "call", "name": "fx__echo", "args": {"text": "approve-me please"}},
		{"op": "call", "name": "fx__echo", "args": {"text": "no approval needed"}}]' stdio "$T/bin/paddock" gateway --config "$cfg"
	gw_error "$(nth 2)" approval_timeout "$l: unanswered, the call is refused approval_timeout"
	jqok "$(nth 3)" '.result.content[0].text == "no approval needed"' "$l: a call the rule does not match is served (a new session, a new budget)"
	is "$(logged fx "$(is_call echo) and ((.params.arguments.text // \"\") | startswith(\"approve-me\"))")" 0 \
		"$l: the call never reached the upstream (its log)"
	mcp_as "$WHO" "$T/bin/paddock" approvals --all --json >"$T/approvals.json" 2>&1
	jqok "$(jq -cs . "$T/approvals.json" 2>/dev/null)" '[.. | objects | select(.kind? == "tool.call")] | any(.state == "timed_out" and (.summary | contains("fx__echo")))' \
		"$l: paddock approvals --all shows the request timed_out"
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 500 --kind approval.timeout --json >"$T/audit.json" 2>&1
	jqok "$(jq -cs . "$T/audit.json" 2>/dev/null)" '[.. | objects | select(.kind? == "approval.timeout")] | length >= 1' \
		"$l: an approval.timeout audit record"
	no_paddock_left "$l"
}

for WHO in root user; do
	HOMEDIR="$T/home-$WHO"
	config "$WHO" "agent-a=$TOKEN_A" "agent-old=$TOKEN_OLD"
	GW_ENV=(PADDOCK_SECRET_GWTEST="$CONF_SECRET")
	if ! gw_listen "$WHO" "$CFG"; then
		ok 1 "$WHO: paddock gateway --listen starts"
		continue
	fi
	case_poison
	case_denied
	case_rugpull
	case_files
	case_network
	case_secrets
	case_schema
	case_survival
	case_tokens
	no_paddock_left "$WHO: --listen"
	case_budget
done
done_testing
