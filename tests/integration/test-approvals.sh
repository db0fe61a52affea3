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
# A new egress host the same way (mcp-egress.py): a sandbox of `paddock mcp` whose allowlist
# lacks an origin (in a network namespace of the suite's own) is refused; the agent's
# egress_request_allow waits for `paddock approve ID` (or the API's approve), then the same
# curl gets through without a restart; a denial and a timeout leave it refused; a sandbox
# of network none and a bad entry are refused without asking; an admin's POST
# /v1/sandboxes/ID/egress/allow widens a daemon sandbox; the audit store has each record.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
NS_PID=""
NS_IF="apv$TEST_ID"
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors;
	[ -z "$NS_PID" ] || kill "$NS_PID" 2>/dev/null; ip link del "$NS_IF" 2>/dev/null
	sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)

# ---- the origin of the egress cases: in a network namespace of the suite's own ----
# A /30 of 10.214/16 named after the suite's pid: the host end and the origin's end of a
# veth pair. The egress proxy (in the supervisor, on the host's side) reaches it; nothing
# leaves the machine.
NS_IP="10.214.$(((TEST_ID / 64) % 256)).$(((TEST_ID % 64) * 4 + 2))"
HOST_IP="10.214.$(((TEST_ID / 64) % 256)).$(((TEST_ID % 64) * 4 + 1))"
origin_start() {
	unshare --net bash -c 'for i in $(seq 100); do ip link show "$1" >/dev/null 2>&1 && break; sleep 0.05; done
		ip link set lo up && ip addr add "$2/30" dev "$1" && ip link set "$1" up &&
		exec python3 "$3" "$4" "" "$2"' _ "${NS_IF}n" "$NS_IP" "$HERE/egress-origin.py" \
		"$T/origin.port" &
	NS_PID=$!
	# The peer goes into the namespace once unshare has made it (before, it is the host's).
	local i
	for i in $(seq 100); do
		[ "$(readlink "/proc/$NS_PID/ns/net")" != "$(readlink /proc/self/ns/net)" ] && break
		sleep 0.05
	done
	ip link add "$NS_IF" type veth peer name "${NS_IF}n" netns "$NS_PID" &&
		ip addr add "$HOST_IP/30" dev "$NS_IF" && ip link set "$NS_IF" up || return 1
	for i in $(seq 200); do [ -s "$T/origin.port" ] && break; sleep 0.05; done
	[ -s "$T/origin.port" ] || return 1
	ORIGIN="$NS_IP:$(cat "$T/origin.port")"
	# The host itself reaches it (what the sandbox is refused is there).
	curl -sS -m 10 "http://$ORIGIN/hello" | grep -q hello-egress
}
origin_start || { echo "Bail out! the origin in its network namespace did not start"; exit 1; }
# The agent's profile: network.mode allowlist, the origin not listed.
printf 'name: approvals-egress\nextends: default\nnetwork:\n  mode: allowlist\n  allow: [other.test]\n' \
	>"$T/egress.yaml"
chmod 0644 "$T/egress.yaml"

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

# sdk_egress_modern WHO: the SDK v2 client in the 2026-07-28 era, declaring elicitation and
# accepting, asks for the suite's origin: egress_request_allow is answered input_required
# (MRTR), the SDK's retry with its accept widens the allowlist, and the sandbox's curl that was
# refused gets the page, without a restart.
sdk_egress_modern() {
	local who=$1 out curl="curl -sS -f -m 10 http://$ORIGIN/hello; echo rc=\$?"
	# sandbox_create takes a profile by name: the suite's, in a config directory of its own.
	mkdir -p "$T/xdg-egress/paddock/profiles"
	cp "$T/egress.yaml" "$T/xdg-egress/paddock/profiles/approvals-egress.yaml"
	chmod -R a+rX "$T/xdg-egress"
	out=$(GW_ELICIT=accept GW_STEPS='[{"op": "call", "name": "sandbox_create"},
		{"op": "call", "name": "run_command", "args": {"sandbox_id": "@SANDBOX@", "command": "'"$curl"'"}},
		{"op": "call", "name": "egress_request_allow", "args": {"sandbox_id": "@SANDBOX@", "host": "'"$ORIGIN"'", "reason": "the modern client fetches the page"}},
		{"op": "call", "name": "run_command", "args": {"sandbox_id": "@SANDBOX@", "command": "'"$curl"'"}}]' \
		$(as_argv "$who") XDG_CONFIG_HOME="$T/xdg-egress" "$NODE" "$DRIVE/gateway-steps.mjs" v2 \
		stdio "$T/bin/paddock" mcp --profile approvals-egress 2>"$T/sdk-egress.err")
	jq_ok "$(printf '%s\n' "$out" | sed -n 2p)" '.result.structuredContent.stdout.text | contains("rc=22")' \
		"$who: SDK v2 (2026-07-28): the sandbox's curl to the origin is refused first" ||
		printf '%s\n' "$out" | head -c 1200 | sed 's/^/#   /'
	jq_ok "$(printf '%s\n' "$out" | sed -n 5p)" '.got | length == 1 and (.[0].message |
		contains("egress_request_allow") and contains("'"$ORIGIN"'"))' \
		"$who: SDK v2 (2026-07-28) with elicitation: asked by input_required for the host"
	jq_ok "$(printf '%s\n' "$out" | sed -n 3p)" '.result.structuredContent.status == "allowed" and
		(.result.structuredContent.approver | startswith("elicitation:"))' \
		"$who: SDK v2 (2026-07-28): its retry with accept is allowed, approved by elicitation:PRINCIPAL"
	jq_ok "$(printf '%s\n' "$out" | sed -n 4p)" '.result.structuredContent.stdout.text |
		contains("hello-egress") and contains("rc=0")' \
		"$who: SDK v2 (2026-07-28): the same curl now gets the page, without a restart" ||
		head -c 600 "$T/sdk-egress.err" | sed 's/^/#   /'
}

approval_tests() {
	local who=$1 ws sid
	mkdir -p "$T/serve-$who"
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$T/serve-$who"
	ws=$(mkws)
	echo "host file" >"$ws/host.txt"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$ws"
	tap_run python3 "$HERE/mcp-approvals.py" "$who" "$ws" cli -- \
		$(as_argv "$who") "$T/bin/paddock"
	is "$(ls -A "$ws" | sort | tr '\n' ' ')" "approved.txt host.txt inband.txt off.txt " \
		"$who: the host directory has the approved changes alone (the CLI's, in band)"
	sdk_in_band "$who" "$ws"
	sdk_in_band_modern "$who" "$ws"
	sdk_in_band_http "$who" "$ws"
	tap_run python3 "$HERE/mcp-egress.py" "$who" "$T/egress.yaml" "$ORIGIN" cli -- \
		$(as_argv "$who") "$T/bin/paddock"
	sdk_egress_modern "$who"
	serve_start "$who" || return
	tap_run python3 "$HERE/mcp-approvals.py" "$who" "$ws" api "$(sock_of "$who")" -- \
		$(as_argv "$who") "$T/bin/paddock"
	tap_run python3 "$HERE/mcp-egress.py" "$who" "$T/egress.yaml" "$ORIGIN" api \
		"$(sock_of "$who")" -- $(as_argv "$who") "$T/bin/paddock"
	# The daemon dies (SIGKILL) and a new one adopts the widened sandbox: the entry is the
	# supervisor's, so it holds.
	sid=$(cat "$T/widened-$who" 2>/dev/null)
	serve_stop "$who" KILL
	serve_start "$who" || return
	api "$who" GET "/v1/sandboxes/$sid"
	is "$CODE $(printf '%s' "$BODY" | jq -r --arg o "$ORIGIN" '.network.allow | index($o) != null')" \
		"200 true" "$who: the restarted daemon adopts the widened sandbox: network.allow lists the origin"
	api "$who" POST "/v1/sandboxes/$sid/exec" "{\"cmd\":\"curl -sS -f -m 10 http://$ORIGIN/hello\"}"
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "hello-egress" \
		"$who: ... and its curl to the origin still gets through"
	api "$who" DELETE "/v1/sandboxes/$sid"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: paddock serve stops cleanly"
}

approval_tests root
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
approval_tests user
SERVE_ENV=()
done_testing
