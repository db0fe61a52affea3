#!/bin/bash
# The approval queue (docs/approvals.md) as a user meets it, as root and as an unprivileged
# user (TAP): an MCP client calls workspace_propose_commit on `paddock mcp --workspace` with
# a change; `paddock approvals` lists it; `paddock approve ID` lets the call complete and the
# host directory gets the change; `paddock deny ID` gives the client the denial and leaves
# the host directory as it was; nobody deciding within `--approval-timeout` is a clear
# refusal; a cancelled call and the server's end withdraw the request. Then beside `paddock
# serve` on the same state directory: /v1/events carries the approval.requested that paddock
# mcp recorded, POST /v1/approvals/ID/approve lets the call complete, and the audit store
# records the API's principal as the approver (mcp-approvals.py). In band: a client that declared
# elicitation is asked too (the raw client and the official SDK's): its accept commits, its
# decline denies, and its answer after the CLI's decision changes nothing; a 2026-07-28 client
# (SDK v2) is asked by input_required and its retry decides, unless an operator did first.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)

# TAP lines without numbers from a driver, numbered here.
tap_of() {
	local line
	while IFS= read -r line; do
		case $line in
		"ok - "*) ok 0 "${line#ok - }" ;;
		"not ok - "*) ok 1 "${line#not ok - }" ;;
		*) echo "$line" ;;
		esac
	done
}

# as_argv WHO: the argv prefix `as` runs a command with (for a driver that starts it).
as_argv() {
	if [ "$1" = root ]; then
		echo env PADDOCK_INIT="$T/bin/paddock-init" PADDOCK_STATE_DIR="$T/serve-root/state" \
			PADDOCK_RUNTIME_DIR="$T/serve-root/run" "${SERVE_ENV[@]}"
	else
		echo setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all \
			env HOME="$T/home" PADDOCK_INIT="$T/bin/paddock-init" \
			PADDOCK_STATE_DIR="$T/serve-user/state" PADDOCK_RUNTIME_DIR="$T/serve-user/run" \
			"${SERVE_ENV[@]}"
	fi
}

# The official SDK client (tests/clients), for approval in band; missing, the suite fails.
NODE="$TESTS_DIR/clients/node_modules/.bin/node"
DRIVE="$TESTS_DIR/clients/drive"
if [ ! -x "$NODE" ] || [ ! -d "$TESTS_DIR/clients/node_modules/@modelcontextprotocol/sdk" ]; then
	echo "Bail out! the test clients are missing ($TESTS_DIR/clients/node_modules): run make test-setup"
	exit 1
fi

# jq_ok JSON FILTER DESC: JSON passes the jq FILTER, as a subtest.
jq_ok() {
	printf '%s' "$1" | jq -e "$2" >/dev/null 2>&1
	ok $? "$3" || printf '%s\n' "$1" | head -c 1500 | sed 's/^/#   /'
}

# sdk_in_band WHO WS: the SDK v1 client, declaring elicitation and accepting, makes a change
# and proposes its commit to `paddock mcp --workspace WS` over stdio: asked in band, its
# accept commits.
sdk_in_band() {
	local who=$1 ws=$2 out
	out=$(cd "$ws" && GW_ELICIT=accept GW_STEPS='[{"op": "call", "name": "run_command",
		"args": {"command": "echo sdk > sdk.txt"}}, {"op": "call", "name": "workspace_propose_commit"}]' \
		$(as_argv "$who") "$NODE" "$DRIVE/gateway-steps.mjs" v1 stdio "$T/bin/paddock" mcp \
		--workspace "$ws" 2>"$T/sdk.err")
	jq_ok "$(printf '%s\n' "$out" | sed -n 3p)" '.got | length == 1 and (.[0].message |
		contains("workspace_propose_commit") and contains("sdk.txt"))' \
		"$who: SDK v1 with elicitation: asked in band what the commit changes"
	jq_ok "$(printf '%s\n' "$out" | sed -n 2p)" '.result.structuredContent.status == "committed" and
		(.result.structuredContent.approver | startswith("elicitation:"))' \
		"$who: SDK v1 with elicitation: accepted, the commit is done, approved by elicitation:PRINCIPAL"
	is "$(cat "$ws/sdk.txt" 2>/dev/null)" sdk "$who: SDK v1 with elicitation: the host directory has the change"
}

# sdk_in_band_modern WHO WS: the SDK v2 client in the 2026-07-28 era, declaring elicitation,
# over stdio: workspace_propose_commit is answered input_required (MRTR) and the SDK's retry
# with its accept commits; then by hand, an operator's `paddock deny` between the rounds stands
# against the retry's accept, and a forged requestState is refused (invalid params).
sdk_in_band_modern() {
	local who=$1 ws=$2 out
	out=$(cd "$ws" && GW_ELICIT=accept GW_STEPS='[{"op": "call", "name": "sandbox_create"},
		{"op": "call", "name": "run_command", "args": {"sandbox_id": "@SANDBOX@", "command": "echo modern > modern.txt"}},
		{"op": "call", "name": "workspace_propose_commit", "args": {"sandbox_id": "@SANDBOX@"}}]' \
		$(as_argv "$who") "$NODE" "$DRIVE/gateway-steps.mjs" v2 stdio "$T/bin/paddock" mcp \
		--workspace "$ws" 2>"$T/sdk-modern.err")
	jq_ok "$(printf '%s\n' "$out" | sed -n 4p)" '.got | length == 1 and (.[0].message |
		contains("workspace_propose_commit") and contains("modern.txt"))' \
		"$who: SDK v2 (2026-07-28) with elicitation: asked by input_required what the commit changes"
	jq_ok "$(printf '%s\n' "$out" | sed -n 3p)" '.result.structuredContent.status == "committed" and
		(.result.structuredContent.approver | startswith("elicitation:"))' \
		"$who: SDK v2 (2026-07-28): its retry with accept commits, approved by elicitation:PRINCIPAL"
	is "$(cat "$ws/modern.txt" 2>/dev/null)" modern "$who: SDK v2 (2026-07-28): the host directory has the change"
	out=$(cd "$ws" && GW_ELICIT=accept GW_STEPS='[{"op": "call", "name": "sandbox_create"},
		{"op": "call", "name": "run_command", "args": {"sandbox_id": "@SANDBOX@", "command": "echo no > modern-denied.txt"}},
		{"op": "ask", "name": "workspace_propose_commit", "args": {"sandbox_id": "@SANDBOX@"}},
		{"op": "exec", "argv": ["'"$T/bin/paddock"'", "deny", "@APPROVAL@"]},
		{"op": "retry", "name": "workspace_propose_commit", "args": {"sandbox_id": "@SANDBOX@"}, "answer": "accept", "state": "forged"},
		{"op": "retry", "name": "workspace_propose_commit", "args": {"sandbox_id": "@SANDBOX@"}, "answer": "accept"}]' \
		$(as_argv "$who") "$NODE" "$DRIVE/gateway-steps.mjs" v2 stdio "$T/bin/paddock" mcp \
		--workspace "$ws" 2>"$T/sdk-modern.err")
	jq_ok "$(printf '%s\n' "$out" | sed -n 3p)" '.result.resultType == "input_required" and
		.result.inputRequests.approve.method == "elicitation/create" and (.approval | length == 36)' \
		"$who: SDK v2 (2026-07-28), by hand: the proposal is answered input_required naming its approval"
	jq_ok "$(printf '%s\n' "$out" | sed -n 5p)" '.code == -32602' \
		"$who: SDK v2 (2026-07-28): a forged requestState is refused (invalid params)"
	jq_ok "$(printf '%s\n' "$out" | sed -n 6p)" '.result.isError == true and .result.structuredContent.status == "denied" and
		(.result.structuredContent.approver | startswith("uid:"))' \
		"$who: SDK v2 (2026-07-28): after paddock deny, the retry's accept is refused, naming the operator"
	[ ! -e "$ws/modern-denied.txt" ]
	ok $? "$who: SDK v2 (2026-07-28): the denied change is not in the host directory"
}

# sdk_in_band_http WHO WS: the same over Streamable HTTP (`paddock mcp --listen`): the question
# comes on the call's event stream, the SDK POSTs its accept in the session.
sdk_in_band_http() {
	local who=$1 ws=$2 port out pid i rc
	port=$(free_port)
	(cd "$ws" && exec $(as_argv "$who") "$T/bin/paddock" mcp --listen "127.0.0.1:$port" \
		--workspace "$ws" >"$T/listen-$who.log" 2>&1) &
	pid=$!
	for i in $(seq 1 400); do
		python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
			"$port" 2>/dev/null && break
		sleep 0.05
	done
	out=$(cd "$ws" && GW_ELICIT=accept GW_STEPS='[{"op": "call", "name": "run_command",
		"args": {"command": "echo sdkhttp > sdkhttp.txt"}}, {"op": "call", "name": "workspace_propose_commit"}]' \
		$(as_argv "$who") "$NODE" "$DRIVE/gateway-steps.mjs" v1 http "http://127.0.0.1:$port/mcp" \
		2>"$T/sdk-http.err")
	jq_ok "$(printf '%s\n' "$out" | sed -n 3p)" '.got | length == 1 and (.[0].message | contains("sdkhttp.txt"))' \
		"$who: SDK v1 over HTTP with elicitation: asked in band, on the call's stream"
	jq_ok "$(printf '%s\n' "$out" | sed -n 2p)" '.result.structuredContent.status == "committed" and
		(.result.structuredContent.approver | startswith("elicitation:"))' \
		"$who: SDK v1 over HTTP with elicitation: accepted, the commit is done"
	is "$(cat "$ws/sdkhttp.txt" 2>/dev/null)" sdkhttp "$who: SDK v1 over HTTP: the host directory has the change"
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
	is "$rc" 0 "$who: paddock mcp --listen stops cleanly" || tail -5 "$T/listen-$who.log" | sed 's/^/#   /'
}

approval_tests() {
	local who=$1 ws
	mkdir -p "$T/serve-$who"
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$T/serve-$who"
	ws=$(mkws)
	echo "host file" >"$ws/host.txt"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$ws"
	tap_of < <(python3 "$HERE/mcp-approvals.py" "$who" "$ws" cli -- \
		$(as_argv "$who") "$T/bin/paddock")
	is "$(ls -A "$ws" | sort | tr '\n' ' ')" "approved.txt host.txt inband.txt off.txt " \
		"$who: the host directory has the approved changes alone (the CLI's, in band)"
	sdk_in_band "$who" "$ws"
	sdk_in_band_modern "$who" "$ws"
	sdk_in_band_http "$who" "$ws"
	serve_start "$who" || return
	tap_of < <(python3 "$HERE/mcp-approvals.py" "$who" "$ws" api "$(sock_of "$who")" -- \
		$(as_argv "$who") "$T/bin/paddock")
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: paddock serve stops cleanly"
}

approval_tests root
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
approval_tests user
SERVE_ENV=()
done_testing
