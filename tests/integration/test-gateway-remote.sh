#!/bin/bash
# `paddock gateway` with remote Streamable HTTP upstreams (url:), as root and as nobody, over
# --listen and over stdio, driven by the official SDK client (tests/clients/drive/
# gateway-steps.mjs). The upstreams are on loopback: @modelcontextprotocol/server-everything in
# its streamableHttp mode, `paddock mcp --listen` itself, and the suite's own server
# (gw-remote-server.mjs), which logs every request it gets (headers too), answers in SSE or
# JSON, serves https with a throw-away CA made here with openssl, loses its sessions, hangs,
# floods, answers what is not JSON-RPC or HTTP 500. Checked: the tools are listed as
# SERVER__TOOL and calls are forwarded with progress and cancellation; policy, schema
# validation and redaction apply as for stdio; list_changed propagates; a lost session is
# initialized again and the call goes through; the configured secret header reaches the
# upstream and never the client, the gateway's log or the audit store; the client's bearer
# token never reaches the upstream; a dead, hanging, TLS-failing, flooding or malformed
# upstream is named with why while the others keep serving; config errors name the field.
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-mcp.sh"
. "$(dirname "$0")/lib-gateway-clients.sh"
mcp_cgroups
SERVER="$TESTS_DIR/integration/gw-remote-server.mjs"
EVERYTHING="$CLIENTS/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$SERVER" ] || { echo "Bail out! $SERVER is missing"; exit 1; }
[ -f "$EVERYTHING" ] || { echo "Bail out! $EVERYTHING is missing: run make test-setup"; exit 1; }
command -v openssl >/dev/null || { echo "Bail out! openssl is missing"; exit 1; }
cp "$SERVER" "$T/bin/"
chmod 0755 "$T/bin"/*
SECRET="rt-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
TOKEN_A=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
RT_PID=""
EV_PID=""
trap 'gw_stop; mcp_stop; stop_upstreams; undelegate_cgroup; rm_cgroup "$ROOT_CG"; rm -rf "$T"' EXIT

sha() {
	printf '%s' "$1" | sha256sum | cut -d' ' -f1
}

# A throw-away CA and a certificate for 127.0.0.1 it signs, in $T/tls.
make_ca() {
	local d="$T/tls"
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=paddock-test-ca -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
			-keyout "$d/srv.key" -out "$d/srv.csr" 2>/dev/null &&
		printf 'subjectAltName=IP:127.0.0.1\n' >"$d/ext.cnf" &&
		openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
			-days 2 -extfile "$d/ext.cnf" -out "$d/srv.pem" 2>/dev/null ||
		{ echo "Bail out! openssl cannot make the test CA"; exit 1; }
	printf 'not a certificate\n' >"$d/junk.pem"
	chmod -R a+rX "$d"
}

# wait_port PORT PID: the port accepts a connection (a bound, not a timing check).
wait_port() {
	local i
	for i in $(seq 1 600); do
		python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
			"$1" 2>/dev/null && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# start_upstreams WHO: the suite's server (RT_PORT http, TLS_PORT https; its log $D/rt.log),
# server-everything (EV_PORT) and `paddock mcp --listen` as WHO ($MCP_URL); DEAD_PORT listens
# nowhere.
start_upstreams() {
	RT_PORT=$(free_port)
	TLS_PORT=$(free_port)
	EV_PORT=$(free_port)
	DEAD_PORT=$(free_port)
	"$NODE" "$T/bin/gw-remote-server.mjs" --port "$RT_PORT" --log "$D/rt.log" --tls-port "$TLS_PORT" \
		--cert "$T/tls/srv.pem" --key "$T/tls/srv.key" >"$D/rt.out" 2>&1 &
	RT_PID=$!
	(PORT=$EV_PORT exec "$NODE" "$EVERYTHING" streamableHttp >"$D/ev.out" 2>&1) &
	EV_PID=$!
	wait_port "$RT_PORT" "$RT_PID" && wait_port "$TLS_PORT" "$RT_PID" && wait_port "$EV_PORT" "$EV_PID" &&
		mcp_listen "$WHO" ||
		{ echo "Bail out! the remote upstreams did not start"; cat "$D/rt.out" "$D/ev.out"; exit 1; }
}

stop_upstreams() {
	local p
	for p in $RT_PID $EV_PID; do
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	RT_PID=""
	EV_PID=""
}

# config WHO: the suite's config in $CFG.
config() {
	D="$T/gw-$WHO"
	CFG="$D/gateway.yaml"
	mkdir -p "$D"
	start_upstreams
	cat >"$CFG" <<EOF
servers:
  rt:
    url: http://127.0.0.1:$RT_PORT/mcp
    headers: ["Authorization: Bearer \${secret:rt_token}", "X-Team: blue"]
    timeout: 30s
  js:
    url: http://127.0.0.1:$RT_PORT/json
  tls:
    url: https://127.0.0.1:$TLS_PORT/mcp
    ca_file: $T/tls/ca.pem
  untrusted:
    url: https://127.0.0.1:$TLS_PORT/mcp
  ev:
    url: http://127.0.0.1:$EV_PORT/mcp
  pm:
    url: $MCP_URL
  hang:
    url: http://127.0.0.1:$RT_PORT/hang
    start_timeout: 2s
  bad: {url: "http://127.0.0.1:$RT_PORT/malformed"}
  flood: {url: "http://127.0.0.1:$RT_PORT/flood"}
  e500:
    url: http://127.0.0.1:$RT_PORT/err500
    headers: ["Authorization: Bearer \${secret:rt_token}"]
  dead: {url: "http://127.0.0.1:$DEAD_PORT/mcp"}
policy:
  default: allow
  rules:
    - {name: no-env, server: ev, tool: get-env, action: deny, reason: the environment is private}
principals:
  - {name: agent-a, token_sha256: $(sha "$TOKEN_A")}
EOF
	[ "$WHO" = root ] || chown -R $UNPRIV_UID:$UNPRIV_UID "$D"
	chmod -R a+rX "$D"
}

# rtlog FILTER: how many requests the suite's server got over http (server rt and js; tls's
# come over https) that pass the jq FILTER.
rtlog() {
	jq -c "select(.tls == false) | select($1)" "$D/rt.log" 2>/dev/null | wc -l
}

# check_bad NAME YAML CODE FIELD TEXT: `paddock gateway` refuses the config, naming the field.
check_bad() {
	local l="$WHO: config" out rc
	printf '%s' "$2" >"$D/$1.yaml"
	chmod a+r "$D/$1.yaml"
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway --config "$D/$1.yaml" </dev/null 2>&1)
	rc=$?
	is "$rc" "$3" "$l: $1: paddock gateway exits $3"
	printf '%s' "$out" | grep -q -- "$D/$1.yaml:[0-9]*: $4: .*$5"
	ok $? "$l: $1: the error names FILE:LINE, $4 and what to do" || printf '%s\n' "$out" | sed 's/^/#   /'
}

case_config() {
	local l="$WHO: config" out rc
	out=$(mcp_as "$WHO" "$T/bin/paddock" gateway check --config "$CFG" 2>&1)
	rc=$?
	is "$rc" 0 "$l: gateway check of a config with remote servers exits 0" ||
		printf '%s\n' "$out" | head -5 | sed 's/^/#   /'
	check_bad clear-text $'servers:\n  r: {url: "http://mcp.example.com/mcp"}\n' 122 servers.r.url \
		'plain http to a host that is not loopback.*insecure_http: true'
	check_bad no-secret "servers:
  r:
    url: http://127.0.0.1:$RT_PORT/mcp
    headers: [\"Authorization: Bearer \${secret:nowhere}\"]
" 122 'servers.r.headers\[0\]' "secret 'NOWHERE' is not set: set PADDOCK_SECRET_NOWHERE"
	check_bad junk-ca "servers:
  r:
    url: https://127.0.0.1:$TLS_PORT/mcp
    ca_file: $T/tls/junk.pem
" 122 servers.r.ca_file 'cannot load the trust store'
	check_bad our-header "servers:
  r:
    url: http://127.0.0.1:$RT_PORT/mcp
    headers: [\"Mcp-Session-Id: mine\"]
" 122 'servers.r.headers\[0\]' 'set by the gateway itself'
}

# The steps of the main session, over --listen or stdio.
STEPS='[{"op": "list", "want": ["rt__echo", "js__echo", "tls__echo", "ev__echo", "pm__sandbox_list"]},
	{"op": "call", "name": "rt__echo", "args": {"text": "over the remote"}},
	{"op": "call", "name": "rt__slow", "args": {"ms": 400}, "progress": true},
	{"op": "call", "name": "rt__hang", "args": {}, "timeout": 1500},
	{"op": "call", "name": "rt__echo", "args": {"text": "after the cancel"}},
	{"op": "call", "name": "js__add", "args": {"a": 2, "b": 3}},
	{"op": "call", "name": "js__add", "args": {"a": 2, "b": "three"}},
	{"op": "call", "name": "tls__echo", "args": {"text": "over tls"}},
	{"op": "call", "name": "rt__whoami", "args": {}},
	{"op": "call", "name": "ev__echo", "args": {"message": "everything"}},
	{"op": "call", "name": "ev__trigger-long-running-operation", "args": {"duration": 1, "steps": 2}, "progress": true},
	{"op": "call", "name": "ev__get-env", "args": {}},
	{"op": "call", "name": "pm__sandbox_list", "args": {}},
	{"op": "call", "name": "rt__ask", "args": {}},
	{"op": "call", "name": "rt__drop", "args": {}},
	{"op": "list", "gone": ["rt__extra"]},
	{"op": "call", "name": "rt__forget", "args": {}},
	{"op": "call", "name": "rt__echo", "args": {"text": "in a new session"}},
	{"op": "call", "name": "untrusted__echo", "args": {"text": "x"}},
	{"op": "call", "name": "dead__echo", "args": {"text": "x"}},
	{"op": "call", "name": "rt__forget_quietly", "args": {}}]'

# check_steps LABEL: what the client got, step by step.
check_steps() {
	local l=$1
	is "$RC" 0 "$l: the SDK client's session ends 0"
	jqok "$(nth 1)" '[.tools[].name] | (index("rt__echo") != null and index("js__add") != null and
		index("tls__echo") != null and index("ev__echo") != null and index("pm__sandbox_list") != null
		and all(startswith("untrusted__") or startswith("dead__") or startswith("hang__") | not))' \
		"$l: tools/list names every remote server's tools SERVER__TOOL (none of the failing ones)"
	jqok "$(nth 2)" '.result.content[0].text == "echo: over the remote"' "$l: a call is forwarded and answered (SSE)"
	jqok "$(nth 3)" '.result.content[0].text == "slept 400 ms" and (.progress | length) > 0' \
		"$l: the upstream's progress reaches the client's token"
	jqok "$(nth 4)" '.throw != null' "$l: the client gives up on a call that hangs (its timeout)"
	jqok "$(nth 5)" '.result.content[0].text == "echo: after the cancel"' "$l: the next call is served"
	jqok "$(nth 6)" '.result.content[0].text == "5"' "$l: a call answered in one JSON body"
	jqok "$(nth 7)" '.result.isError == true and .result.structuredContent.error.code == "invalid_arguments" and
		.result.structuredContent.error.field == "/b"' \
		"$l: arguments against the inputSchema are refused before the upstream"
	jqok "$(nth 8)" '.result.content[0].text == "echo: over tls"' \
		"$l: a call over https verified against ca_file"
	jqok "$(nth 9)" '.result.content[0].text | (contains("team=blue") and contains("authorization=") and
		(contains("'"$SECRET"'") | not))' "$l: a result that carries the secret header's value reaches the client redacted"
	jqok "$(nth 10)" '.result.content[0].text == "Echo: everything"' "$l: server-everything's echo over Streamable HTTP"
	jqok "$(nth 11)" '(.result.content[0].text | contains("completed")) and (.progress | length) > 0' \
		"$l: server-everything's long operation, with its progress"
	jqok "$(nth 12)" '.result.isError == true and .result.structuredContent.error.rule == "no-env"' \
		"$l: a deny rule refuses a remote tool, naming the rule"
	jqok "$(nth 13)" '.result.isError != true' "$l: paddock mcp --listen as an upstream answers sandbox_list"
	jqok "$(nth 14)" '.result.content[0].text == "asked"' "$l: a call whose server asks the client for sampling is answered"
	jqok "$(nth 16)" '[.tools[].name] | index("rt__extra") == null and index("rt__echo") != null' \
		"$l: list_changed from the server's GET stream propagates (rt__extra is gone)"
	jqok "$(nth 18)" '.result.content[0].text == "echo: in a new session"' \
		"$l: after the server lost the session (404), the call goes through a new one"
	jqok "$(nth 19)" '.result.isError == true and .result.structuredContent.error.code == "upstream_failed" and
		(.result.content[0].text | contains("certificate verify failed"))' \
		"$l: an upstream whose certificate does not verify is named with why"
	jqok "$(nth 20)" '.result.isError == true and .result.structuredContent.error.server == "dead" and
		(.result.content[0].text | contains("Connection refused"))' \
		"$l: an upstream that refuses connections is named with why"
	jqok "$(nth 21)" '.result.content[0].text == "forgotten"' "$l: the server forgets its sessions and ends its GET streams"
	is "$(printf '%s\n' "$OUT" | grep -c -- "$SECRET")" 0 "$l: the secret never reaches the client"
}

# check_upstream_log LABEL: what the suite's server got.
check_upstream_log() {
	local l=$1 sid
	is "$(rtlog '.path == "/mcp" and .body.method == "tools/call" and .headers.authorization != "Bearer '"$SECRET"'"')" 0 \
		"$l: every call carries the configured secret header (its log)"
	ok "$([ "$(rtlog '.path == "/mcp" and .headers["x-team"] == "blue"')" -gt 0 ]; echo $?)" \
		"$l: and the configured plain header"
	is "$(grep -c -- "$TOKEN_A" "$D/rt.log")" 0 "$l: the client's bearer token never reaches the upstream"
	is "$(rtlog '.body.method == "initialize" and .body.params.clientInfo.name != "paddock-gateway"')" 0 \
		"$l: the upstream is initialized by the gateway, not by the client"
	is "$(rtlog '.http == "POST" and .path == "/mcp" and .body.method != "initialize" and
		(.headers["mcp-session-id"] == null or .headers["mcp-protocol-version"] != "2025-06-18")')" 0 \
		"$l: every request after initialize carries Mcp-Session-Id and MCP-Protocol-Version"
	is "$(rtlog '.http == "POST" and .headers.accept != "application/json, text/event-stream"')" 0 \
		"$l: every POST accepts application/json and text/event-stream"
	is "$(rtlog '.body.method == "notifications/cancelled" and .path == "/mcp"')" 1 \
		"$l: the cancellation reached the upstream as notifications/cancelled"
	is "$(rtlog '.body.id == "ask-1" and .body.error.code == -32601')" 1 \
		"$l: the server's sampling request was refused (a JSON-RPC error POSTed back)"
	is "$(rtlog '.http == "GET" and .path == "/mcp" and .headers.accept == "text/event-stream"')" 4 \
		"$l: a GET stream per session (3), and once more after the server ended one"
	is "$(rtlog '.http == "GET" and .path == "/json"')" 1 \
		"$l: a server without a GET stream (405) is not asked again, and serves (js__add)"
	is "$(rtlog '.body.method == "tools/call" and .body.params.name == "add" and .body.params.arguments.b == "three"')" 0 \
		"$l: the invalid arguments never reached the upstream"
	is "$(rtlog '.path == "/mcp" and .body.method == "initialize"')" 3 \
		"$l: each lost session was initialized again, once (a call's 404, then the GET stream's)"
	is "$(rtlog '.body.params.arguments.text? == "in a new session"')" 2 \
		"$l: the call that met the 404 (the old session) was sent again"
	is "$(jq -r 'select(.tls == false and .body.params.arguments.text? == "in a new session") |
		.headers["mcp-session-id"]' "$D/rt.log" | sort -u | wc -l)" 2 "$l: in the new session"
	sid=$(jq -r 'select(.tls == false and .path == "/mcp" and .http == "GET") | .headers["mcp-session-id"]' \
		"$D/rt.log" | tail -1)
	is "$(rtlog '.http == "DELETE" and .path == "/mcp" and .headers["mcp-session-id"] == "'"$sid"'"')" 1 \
		"$l: the gateway's end DELETEs the session"
}

# check_failures LOG LABEL: each failing upstream is named with why.
check_failures() {
	local log=$1 l=$2 pat
	for pat in "upstream untrusted failed: server untrusted: TLS with 127.0.0.1:$TLS_PORT failed: certificate verify failed" \
		"upstream dead failed: server dead: cannot connect to 127.0.0.1:$DEAD_PORT: Connection refused" \
		"upstream hang failed: server hang: did not answer initialize within 2 s" \
		"upstream bad failed: server bad: sent something that is not JSON-RPC" \
		"upstream flood failed: server flood: sent a message longer than 4 MiB" \
		"upstream e500 failed: server e500: POST http://127.0.0.1:$RT_PORT/err500 answered HTTP 500: 'internal trouble at the remote end (you sent \[REDACTED\])'"; do
		grep -q -- "$pat" "$log"
		ok $? "$l: the gateway's log names ${pat%% failed*} and why" ||
			grep 'failed' "$log" | head -3 | sed 's/^/#   /'
	done
	is "$(grep -c -- "$SECRET" "$log")" 0 "$l: the secret is not in the gateway's log"
}

# check_audit LABEL PRINCIPAL: tool.call records for the remote calls, and no secret in them.
check_audit() {
	local l=$1
	mcp_as "$WHO" "$T/bin/paddock" audit tail -n 1000 --json >"$T/audit.json" 2>&1
	jqok "$(jq -s . "$T/audit.json")" '[.. | objects | select(.kind? == "tool.call") | .attrs |
		select(.principal == "'"$2"'")] | (any(.server == "rt" and .tool == "echo" and .decision == "allowed")
		and any(.server == "ev" and .tool == "get-env" and .decision == "denied" and .rule == "no-env")
		and any(.server == "rt" and .tool == "hang" and .decision == "cancelled"))' \
		"$l: the remote calls are tool.call records (principal, server, tool, decision)"
	is "$(grep -c -- "$SECRET" "$T/audit.json")" 0 "$l: the secret is in no audit record"
	is "$(grep -rl -- "$SECRET" "$T/state-$WHO" | wc -l)" 0 "$l: nor anywhere in the state directory"
}

case_http() {
	local l="$WHO: http" i
	GW_ENV=(PADDOCK_SECRET_RT_TOKEN="$SECRET")
	if ! gw_listen "$WHO" "$CFG"; then
		ok 1 "$l: paddock gateway --listen starts"
		return
	fi
	GW_TOKEN=$TOKEN_A steps "$WHO" v1 "$STEPS" http "$GW_URL"
	check_steps "$l"
	# The GET stream ended by forget_quietly is opened again, meets the 404 and the gateway
	# makes a third session: waited for (a bound, not a timing check).
	for i in $(seq 1 600); do
		[ "$(rtlog '.http == "GET" and .path == "/mcp"')" -ge 4 ] && break
		sleep 0.1
	done
	gw_stop
	is "$GW_RC" 0 "$l: SIGTERM ends the gateway with 0"
	check_upstream_log "$l"
	check_failures "$GW_LOG" "$l"
	check_audit "$l" agent-a
}

case_stdio() {
	local l="$WHO: stdio" sessions deleted
	# A new server log: the counts above are per session.
	: >"$D/rt.log"
	GW_ENV=()
	mcp_cmd "$WHO"
	OUT=$(cd "$T/home" && "${MCP_CMD[@]}" PADDOCK_SECRET_RT_TOKEN="$SECRET" GW_STEPS='[
		{"op": "list", "want": ["rt__echo", "ev__echo"]},
		{"op": "call", "name": "rt__echo", "args": {"text": "over stdio"}},
		{"op": "call", "name": "ev__get-sum", "args": {"a": 2, "b": 3}},
		{"op": "call", "name": "rt__whoami", "args": {}},
		{"op": "call", "name": "dead__echo", "args": {"text": "x"}}]' \
		"$NODE" "$DRIVE/gateway-steps.mjs" v2 stdio "$T/bin/paddock" gateway --config "$CFG" \
		--principal agent-s 2>"$T/steps.err")
	RC=$?
	is "$RC" 0 "$l: the SDK client's session ends 0"
	jqok "$(nth 2)" '.result.content[0].text == "echo: over stdio"' "$l: a call is forwarded and answered"
	jqok "$(nth 3)" '.result.content[0].text | contains("5")' "$l: server-everything's get-sum answers 2 + 3"
	jqok "$(nth 4)" '.result.content[0].text | contains("team=blue") and (contains("'"$SECRET"'") | not)' \
		"$l: the secret header's value reaches the client redacted"
	jqok "$(nth 5)" '.result.isError == true and .result.structuredContent.error.server == "dead"' \
		"$l: a dead upstream is named"
	grep -q "upstream dead failed: server dead: cannot connect to .*Connection refused" "$T/steps.err"
	ok $? "$l: and logged with why" || head -5 "$T/steps.err" | sed 's/^/#   /'
	is "$(rtlog '.body.method == "tools/call" and .headers.authorization == "Bearer '"$SECRET"'"')" 2 \
		"$l: the calls carried the secret header (its log)"
	is "$(grep -c -- "$SECRET" "$T/steps.err")" 0 "$l: the secret is not in the gateway's log"
	# The v2 client may start the gateway more than once (one session each).
	sessions=$(jq -r 'select(.tls == false and .path == "/mcp" and .http != "DELETE") |
		.headers["mcp-session-id"] // empty' "$D/rt.log" | sort -u)
	deleted=$(jq -r 'select(.tls == false and .path == "/mcp" and .http == "DELETE") |
		.headers["mcp-session-id"]' "$D/rt.log" | sort -u)
	ok "$([ -n "$sessions" ] && [ "$sessions" = "$deleted" ]; echo $?)" \
		"$l: every session of server rt is DELETEd when the client closes" ||
		jq -c 'select(.tls == false) | [.http, .path, .headers["mcp-session-id"], .body.method]' "$D/rt.log" | sed 's/^/#   /'
}

make_ca
for WHO in root user; do
	config
	case_config
	case_http
	case_stdio
	mcp_stop
	stop_upstreams
done
done_testing
