#!/bin/bash
# paddock serve: ports forwarded into a sandbox (docs/daemon.md, "Forwarded ports"), as root
# and as an unprivileged user (TAP). A server started in the sandbox (python3 -m http.server)
# is forwarded with `paddock port ID PORT` and with POST .../ports, and reached from the host
# with curl; GET lists it, --close / DELETE closes it; another sandbox's token is refused; the
# audit chain has sandbox.port.open and sandbox.port.close with who asked; when the sandbox
# ends, the listener is gone and a connection that was open is cut.
# The sandbox's own loopback (network.mode none) needs loopback bind inside the sandbox; where
# Landlock still denies it, those subtests are skipped and network.mode host is used.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
for tool in curl jq python3; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed"; exit 1; }
done
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

# inside WHO ID CMD: CMD run by sh in sandbox ID; prints its exit code.
inside() {
	api "$1" POST "/v1/sandboxes/$2/exec" "$(jq -nc --arg c "$3" '{cmd: $c}')"
	jq_get "$BODY" exit_code
}

# serve_in WHO ID PORT: an http.server on the sandbox's 127.0.0.1:PORT serving hello.txt;
# returns once it accepts connections (the server's own readiness, not a delay).
serve_in() {
	inside "$1" "$2" "mkdir -p /tmp/www && echo hello-from-$2 > /tmp/www/hello.txt &&
		(setsid python3 -m http.server $3 --bind 127.0.0.1 --directory /tmp/www \
			</dev/null >/dev/null 2>&1 &) &&
		for i in \$(seq 1 200); do python3 -c 'import socket,sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1])))' $3 2>/dev/null && exit 0; sleep 0.05; done; exit 1"
}

# get ADDR: the body of http://ADDR/hello.txt (curl from the host), or "curl exit N".
get() {
	curl -s --max-time 20 "http://$1/hello.txt" || echo "curl exit $?"
}

# Loopback bind inside a network.mode none sandbox (needs the loopback change).
loopback_inside() {
	local who=$1 id
	api "$who" POST /v1/sandboxes '{}'
	id=$(jq_get "$BODY" id)
	[ "$(inside "$who" "$id" "python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 0))'")" = 0 ]
	local rc=$?
	api "$who" DELETE "/v1/sandboxes/$id"
	return $rc
}

ports_tests() {
	local who=$1 tport=$2 mode body A B TA TB port addr addr2 out rc
	serve_start "$who" --listen "127.0.0.1:$tport"
	ok $? "$who: the daemon starts"
	if loopback_inside "$who"; then mode=none; else mode=host; fi
	echo "# $who: network.mode $mode for the sandboxes (none needs loopback inside the sandbox)"
	body="{\"overrides\":{\"network\":{\"mode\":\"$mode\"}}}"
	api "$who" POST /v1/sandboxes "$body"
	A=$(jq_get "$BODY" id)
	TA=$(jq_get "$BODY" token)
	is "$CODE" 201 "$who: sandbox A (network.mode $mode)"
	api "$who" POST /v1/sandboxes "$body"
	B=$(jq_get "$BODY" id)
	TB=$(jq_get "$BODY" token)
	is "$CODE" 201 "$who: sandbox B"

	port=$(free_port)
	is "$(serve_in "$who" "$A" "$port")" 0 "$who: python3 -m http.server $port runs in sandbox A"

	# The CLI: paddock port ID PORT prints the address on the host.
	addr=$(as "$who" "$T/bin/paddock" port "$A" "$port" 2>"$T/port.err")
	rc=$?
	is "$rc $(grep -c '^127\.0\.0\.1:[0-9]*$' <<<"$addr")" "0 1" "$who: paddock port A $port -> exit 0, prints 127.0.0.1:HOST_PORT ($addr)"
	is "$(get "$addr")" "hello-from-$A" "$who: curl http://$addr/hello.txt reaches the server in the sandbox"
	is "$(get "$addr")$(get "$addr")" "hello-from-${A}hello-from-$A" "$who: the port stays open for later connections"
	out=$(as "$who" "$T/bin/paddock" port "$A")
	is "$out" "$port	$addr" "$who: paddock port A lists it"
	out=$(as "$who" "$T/bin/paddock" port "$A" "$port" --close)
	is "$? $out" "0 closed port $port" "$who: paddock port A $port --close"
	is "$(get "$addr")" "curl exit 7" "$who: after --close, the host port refuses connections"
	as "$who" "$T/bin/paddock" port "$A" "$port" --close >/dev/null 2>"$T/port.err"
	is "$? $(grep -c 'is not open' "$T/port.err")" "125 1" "$who: closing it again -> exit 125, 'is not open'"
	as "$who" "$T/bin/paddock" port "$A" 0 >/dev/null 2>&1
	is "$?" 122 "$who: paddock port A 0 -> exit 122 (usage, docs/cli-contract.md)"

	# The API, over TCP with A's own token.
	tcp POST "http://127.0.0.1:$tport/v1/sandboxes/$A/ports" "$TA" "{\"port\":$port}"
	addr2=$(jq_get "$BODY" address)
	is "$CODE $(jq_get "$BODY" port) $(jq_get "$BODY" host)" "200 $port 127.0.0.1" "$who: POST .../ports with A's token -> 200"
	is "$(get "$addr2")" "hello-from-$A" "$who: curl http://$addr2/hello.txt (opened through the API)"
	tcp GET "http://127.0.0.1:$tport/v1/sandboxes/$A/ports" "$TA"
	is "$CODE $(jq_get "$BODY" ports.0.address)" "200 $addr2" "$who: GET .../ports lists it"
	tcp POST "http://127.0.0.1:$tport/v1/sandboxes/$A/ports" "$TA" '{"port":0}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 port" "$who: port 0 -> 400 naming 'port'"
	# Token scope: B's token reaches none of A's ports.
	tcp POST "http://127.0.0.1:$tport/v1/sandboxes/$A/ports" "$TB" "{\"port\":$port}"
	is "$CODE" 403 "$who: POST A's ports with B's token -> 403"
	tcp GET "http://127.0.0.1:$tport/v1/sandboxes/$A/ports" "$TB"
	is "$CODE" 403 "$who: GET A's ports with B's token -> 403"
	tcp DELETE "http://127.0.0.1:$tport/v1/sandboxes/$A/ports/$port" "$TB"
	is "$CODE" 403 "$who: DELETE A's port with B's token -> 403"
	is "$(get "$addr2")" "hello-from-$A" "$who: the port is still open after B's refused DELETE"
	# Nothing listening in the sandbox: the connection is closed, the daemon carries on.
	tcp POST "http://127.0.0.1:$tport/v1/sandboxes/$B/ports" "$TB" "{\"port\":$(free_port)}"
	out=$(curl -s --max-time 20 "http://$(jq_get "$BODY" address)/" >/dev/null 2>&1; echo $?)
	is "$CODE $([ "$out" != 0 ] && echo failed)" "200 failed" "$who: a forwarded port nothing listens on: the connection fails (curl exit $out)"

	# Audit: an open and a close with who asked.
	# Exact kinds: the prefix filter (--kind sandbox.port.) is another item of the issue.
	{ as "$who" "$T/bin/paddock" events --sandbox "$A" --kind sandbox.port.open --json
	  as "$who" "$T/bin/paddock" events --sandbox "$A" --kind sandbox.port.close --json; } >"$T/ev-$who" 2>&1
	is "$(jq -r 'select(.kind=="sandbox.port.open") | .attrs.by // .by' "$T/ev-$who" | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')" \
		"1 admin;1 sandbox token;" "$who: sandbox.port.open recorded twice, by admin (CLI) and by the sandbox token"
	is "$(jq -r 'select(.kind=="sandbox.port.close") | .attrs.by // .by' "$T/ev-$who" | tr '\n' ';')" \
		"admin;" "$who: sandbox.port.close recorded for the --close, by admin"

	# The sandbox ends: a connection that was open is cut, the listener is gone.
	python3 - "${addr2#*:}" >"$T/cut-$who" 2>&1 <<'PY' &
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(60)
first = s.recv(65536)
print("connected", len(first) > 0, flush=True)
while True:
    try:
        b = s.recv(65536)
    except (ConnectionResetError, socket.timeout) as e:
        print("cut", type(e).__name__); break
    if not b:
        print("cut eof"); break
PY
	local py=$!
	for i in $(seq 1 400); do grep -q connected "$T/cut-$who" && break; sleep 0.05; done
	api "$who" DELETE "/v1/sandboxes/$A"
	is "$CODE" 200 "$who: sandbox A destroyed"
	wait $py
	is "$(head -1 "$T/cut-$who") $(sed -n 2p "$T/cut-$who" | cut -d' ' -f1)" "connected True cut" \
		"$who: an open connection is cut when the sandbox ends ($(sed -n 2p "$T/cut-$who"))"
	is "$(get "$addr2")" "curl exit 7" "$who: the host port refuses connections after the sandbox ended"
	as "$who" "$T/bin/paddock" events --sandbox "$A" --kind sandbox.port.close --json >"$T/ev-$who" 2>&1
	is "$(jq -r 'select(.attrs.reason != null) | .attrs.by + ": " + .attrs.reason' "$T/ev-$who")" \
		"daemon: the sandbox ended" "$who: sandbox.port.close recorded when the sandbox ended"
	api "$who" DELETE "/v1/sandboxes/$B"
	serve_stop "$who"
}

ports_tests root "$(free_port)"
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
ports_tests user "$(free_port)"
SERVE_ENV=()
done_testing
