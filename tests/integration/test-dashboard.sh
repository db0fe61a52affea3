#!/bin/bash
# The operator's dashboard (docs/dashboard.md) as an operator uses it, as root and as an
# unprivileged user (TAP): `paddock serve --listen` logs the page's address and serves it at
# /ui/ on both listeners with its security headers (CSP, nosniff, no referrer, DENY framing,
# no-cache, ETag and 304, 301 from /ui, JSON 404, 405); then in real Chromium (Debian's,
# driven by playwright-core from tests/clients; dashboard.mjs): a wrong token sees the login
# prompt and nothing else; the sandboxes created through the API are listed with a bar per
# budget and a session filter, a label holding markup is text and never runs; a command run
# through the API is in the sandbox's timeline with its exit, beside the audit chain's state,
# and the workspace diff shows its file; two gateway calls a require_approval rule holds are
# approved and denied from the page, and the MCP client gets the result and the denial; Pause
# and Resume; a page of another origin kills nothing and a request with another Origin is
# refused 403; Kill ends a sandbox and the kill event names the operator; the egress denial
# is in "Denials and drift", and so is a tool whose description changed after its pin (a rug
# pull), with its diff; a session's kill switch and the guarded "stop everything" end
# what they match. DASHBOARD_SHOTS=DIR keeps a screenshot of each view (make dashboard-shots).
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
NODE="$TESTS_DIR/clients/node_modules/.bin/node"
DRIVE="$TESTS_DIR/clients/drive"
if [ ! -x "$NODE" ] || [ ! -d "$TESTS_DIR/clients/node_modules/playwright-core" ]; then
	echo "Bail out! the test clients are missing ($TESTS_DIR/clients/node_modules): run make test-setup"
	exit 1
fi
if [ ! -x /usr/bin/chromium ]; then
	echo "Bail out! /usr/bin/chromium is missing: run make test-deps (Debian's chromium)"
	exit 1
fi
GW_PID=""
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} $GW_PID 2>/dev/null; reap_supervisors;
	sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT
cp "$TESTS_DIR/integration/gw-upstream.py" "$T/bin/"
chmod 0755 "$T/bin/gw-upstream.py"
GW_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

# headers WHO: the page's answers over TCP (and the unix socket), and the log line.
headers() {
	local who=$1 h etag csp
	csp="default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	grep -q "dashboard: http://127.0.0.1:$PORT/ui/" "$T/serve-$who.log"
	ok $? "$who: paddock serve logs the page's address (dashboard: http://127.0.0.1:$PORT/ui/)"
	h=$(curl -s -D - -o "$T/index.html" "$URL/ui/" | tr -d '\r')
	printf '%s\n' "$h" | grep -qx 'HTTP/1.1 200 OK' && grep -q '<script type="module" src="app.js">' "$T/index.html"
	ok $? "$who: GET /ui/ is the page"
	printf '%s\n' "$h" | grep -qxF "Content-Security-Policy: $csp"
	ok $? "$who: its Content-Security-Policy is the strict one"
	printf '%s\n' "$h" | grep -qx 'X-Content-Type-Options: nosniff' &&
		printf '%s\n' "$h" | grep -qx 'Referrer-Policy: no-referrer' &&
		printf '%s\n' "$h" | grep -qx 'X-Frame-Options: DENY' &&
		printf '%s\n' "$h" | grep -qx 'Cache-Control: no-cache' &&
		printf '%s\n' "$h" | grep -qx 'Content-Type: text/html; charset=utf-8'
	ok $? "$who: nosniff, no referrer, DENY framing, no-cache, text/html; charset=utf-8"
	! grep -qiE '<script>|\sstyle=|\son[a-z]+=' "$T/index.html"
	ok $? "$who: the page has no inline script, style or handler (the CSP allows none)"
	etag=$(printf '%s\n' "$h" | sed -n 's/^ETag: //p')
	is "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$URL/ui/")" 304 \
		"$who: If-None-Match with its strong ETag ($etag) is 304"
	h=$(curl -s -D - -o /dev/null "$URL/ui/app.js" | tr -d '\r')
	printf '%s\n' "$h" | grep -qx 'Content-Type: text/javascript; charset=utf-8' &&
		printf '%s\n' "$h" | grep -qxF "Content-Security-Policy: $csp"
	ok $? "$who: a module is text/javascript with the same CSP"
	h=$(curl -s -D - -o /dev/null "$URL/ui" | tr -d '\r')
	printf '%s\n' "$h" | grep -qx 'HTTP/1.1 301 Moved Permanently' && printf '%s\n' "$h" | grep -qx 'Location: /ui/'
	ok $? "$who: GET /ui is 301 to /ui/"
	tcp GET "$URL/ui/nope.js" ""
	is "$CODE $(jq_get "$BODY" error.code)" "404 not_found" "$who: an unknown file is a JSON 404"
	tcp POST "$URL/ui/" "" '{}'
	is "$CODE" 405 "$who: POST /ui/ is 405"
	is "$(as "$who" curl -s -o /dev/null -w '%{http_code}' --unix-socket "$(sock_of "$who")" \
		http://paddock/ui/app.js)" 200 "$who: the unix socket serves the page too"
}

# gateway WHO: `paddock gateway --listen` on the daemon's state directory, with a
# require_approval rule on write_file, and a server that changes a tool's description once it
# was pinned (a rug pull: the changed tool waits for re-approval); GW_URL its endpoint.
gateway() {
	local who=$1 port i
	D="$T/gw-$who"
	mkdir -p "$D"
	cat >"$D/gateway.yaml" <<EOF2
servers:
  fx:
    command: [/usr/bin/python3, $T/bin/gw-upstream.py, --log, $D/fx.log]
    permissions:
      filesystem: {read: [$T/bin], write: [$D]}
  rug:
    command: [/usr/bin/python3, $T/bin/gw-upstream.py, --mode, rugpull, --rug-after, "1"]
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
principals:
  - {name: agent-a, token_sha256: $(printf '%s' "$GW_TOKEN" | sha256sum | cut -d' ' -f1)}
EOF2
	[ "$who" = root ] || chown -R $UNPRIV_UID:$UNPRIV_UID "$D"
	chmod -R a+rX "$D"
	port=$(free_port)
	(cd "$T/home" && as_exec "$who" "$T/bin/paddock" gateway --config "$D/gateway.yaml" \
		--listen "127.0.0.1:$port" >"$T/gateway-$who.log" 2>&1) &
	GW_PID=$!
	GW_URL="http://127.0.0.1:$port/mcp"
	for i in $(seq 1 600); do
		python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
			"$port" 2>/dev/null && return 0
		sleep 0.05
	done
	sed 's/^/#   /' "$T/gateway-$who.log" | head -20
	return 1
}

# call WHO FILE: an MCP client (the official SDK) calls fx__write_file FILE in the background.
call() {
	local who=$1 file=$2
	(cd "$T/home" && as "$who" env GW_TOKEN="$GW_TOKEN" GW_STEPS='[{"op": "list", "want": ["fx__write_file"]},
		{"op": "call", "name": "fx__write_file", "args": {"path": "'"$D/$file"'", "text": "yes"}}]' \
		"$NODE" "$DRIVE/gateway-steps.mjs" v1 http "$GW_URL" >"$T/$file.out" 2>"$T/$file.err") &
}

# approval_for NEEDLE: the id of the pending tool.call whose arguments name NEEDLE.
approval_for() {
	local i id
	for i in $(seq 1 600); do
		tcp GET "$URL/v1/approvals" "$TOKEN"
		id=$(printf '%s' "$BODY" | jq -r '[.approvals[] | select(.kind == "tool.call" and .state == "pending"
			and ((.detail | tostring) | contains("'"$1"'")))] | last | .id // empty' 2>/dev/null)
		[ -n "$id" ] && { echo "$id"; return 0; }
		sleep 0.1
	done
	return 1
}

run_as() {
	local who=$1 pa pd aid did
	PORT=$(free_port)
	URL="http://127.0.0.1:$PORT"
	if ! serve_start "$who" --listen "127.0.0.1:$PORT"; then
		ok 1 "$who: paddock serve --listen starts"
		return
	fi
	TOKEN=$(as "$who" "$T/bin/paddock" serve token create --name "ops-$who" 2>/dev/null | tail -1)
	headers "$who"
	if ! gateway "$who"; then
		ok 1 "$who: paddock gateway --listen starts on the daemon's state directory"
		serve_stop "$who"
		return
	fi
	call "$who" approve-me.txt
	pa=$!
	call "$who" deny-me.txt
	pd=$!
	aid=$(approval_for approve-me.txt)
	did=$(approval_for deny-me.txt)
	[ -n "$aid" ] && [ -n "$did" ]
	ok $? "$who: the two gateway calls wait for approval (GET /v1/approvals)"
	DASH_URL=$URL DASH_TOKEN=$TOKEN DASH_TOKEN_NAME="ops-$who" DASH_WHO=$who DASH_APPROVE=$aid \
		DASH_DENY=$did DASH_SHOTS=$([ "$who" = root ] && echo "${DASHBOARD_SHOTS:-}") \
		tap_run "$NODE" "$TESTS_DIR/integration/dashboard.mjs"
	wait "$pa"
	wait "$pd"
	printf '%s' "$(sed -n 2p "$T/approve-me.txt.out")" | jq -e '.result.content[0].text | startswith("wrote")' >/dev/null 2>&1 &&
		[ "$(cat "$D/approve-me.txt" 2>/dev/null)" = yes ]
	ok $? "$who: approved from the page, the MCP client gets the call's result and the file is written" ||
		sed 's/^/#   /' "$T/approve-me.txt.out" "$T/approve-me.txt.err" | head -10
	printf '%s' "$(sed -n 2p "$T/deny-me.txt.out")" | jq -e '.result.isError == true and
		(.result.content[0].text | contains("denied"))' >/dev/null 2>&1 && [ ! -e "$D/deny-me.txt" ]
	ok $? "$who: denied from the page, the MCP client gets the denial and nothing is written" ||
		sed 's/^/#   /' "$T/deny-me.txt.out" "$T/deny-me.txt.err" | head -10
	kill -TERM "$GW_PID" 2>/dev/null
	wait "$GW_PID"
	GW_PID=""
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: paddock serve stops cleanly"
	reap_supervisors
}

run_as root
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
run_as user
SERVE_ENV=()
done_testing
