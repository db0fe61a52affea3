#!/bin/bash
# The E2B front door's commands and code interpreter (docs/e2b.md, "process.Process", "Ports
# and the code interpreter"), as root and as an unprivileged user (TAP). E2B's own SDKs
# (`e2b`, `@e2b/code-interpreter`, pinned in tests/clients) drive `paddock serve --listen`
# with E2B_API_URL = E2B_SANDBOX_URL = the listener, as a user's program does
# (integration/e2b-proc.mjs): commands.run (exit code, stdout, stderr, CommandExitError), a
# background command re-attached by pid, stdin and its end, kill, a pty with resize, and
# runCode keeping state and returning a matplotlib PNG. This script also checks what the SDK
# cannot see: the audit chain's records of the detached commands and the interpreter's port,
# and (integration/e2b-proc-wire.py) the Python SDK's wire choices, which differ from the
# JavaScript SDK's, with what no SDK sends.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

NODE=$TESTS_DIR/clients/node_modules/.bin/node
if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
for tool in curl jq python3; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed"; exit 1; }
done
if [ ! -x "$NODE" ] || [ ! -d "$TESTS_DIR/clients/node_modules/@e2b/code-interpreter" ]; then
	echo "Bail out! the pinned test clients are missing: run 'make test-setup'"
	exit 1
fi
if ! /usr/bin/python3 -c 'import ipykernel, jupyter_client, matplotlib' 2>/dev/null; then
	echo "Bail out! python3-ipykernel, python3-jupyter-client or python3-matplotlib is missing: run 'make test-setup'"
	exit 1
fi
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

# sdk WHO: run integration/e2b-proc.mjs against WHO's daemon, as WHO; each check it prints
# becomes one subtest, and the program's own end one more.
sdk() {
	local who=$1 out=$T/e2b-proc.$1.out rc line
	as "$who" env E2B_API_URL="http://$ADDR" E2B_SANDBOX_URL="http://$ADDR" E2B_API_KEY="$KEY" \
		HOME="$T/home" "$NODE" "$TESTS_DIR/integration/e2b-proc.mjs" "$TESTS_DIR/clients" \
		>"$out" 2>"$out.err"
	rc=$?
	while IFS= read -r line; do
		is "$(jq -r .g <<<"$line")" "$(jq -r .w <<<"$line")" "$who: $(jq -r .d <<<"$line")"
	done <"$out"
	ok $rc "$who: the SDK program ran to its end"
	[ $rc = 0 ] || sed 's/^/#   /' "$out.err" | tail -20
}

# wire WHO: integration/e2b-proc-wire.py (the Python SDK's wire choices), one subtest a check.
wire() {
	local who=$1 out=$T/e2b-proc-wire.$1.out rc line
	python3 "$TESTS_DIR/integration/e2b-proc-wire.py" "$ADDR" "$KEY" >"$out" 2>"$out.err"
	rc=$?
	while IFS= read -r line; do
		is "$(jq -r .g <<<"$line")" "$(jq -r .w <<<"$line")" "$who: wire: $(jq -r .d <<<"$line")"
	done <"$out"
	ok $rc "$who: the wire checks ran to their end"
	[ $rc = 0 ] || sed 's/^/#   /' "$out.err" | tail -20
}

# kinds WHO KIND: how many KIND records the audit chain holds.
kinds() {
	pc "$1" events --kind "$2" --json 2>/dev/null | grep -c .
}

proc_tests() {
	local who=$1 port=$2
	ADDR=127.0.0.1:$port
	serve_start "$who" --listen "$ADDR"
	ok $? "$who: the daemon starts"
	KEY=$(as "$who" "$T/bin/paddock" serve e2b-key create --name proc 2>/dev/null)
	is "$(grep -cE '^e2b_[0-9a-f]{40}$' <<<"$KEY")" 1 "$who: an E2B API key is issued"

	sdk "$who"
	wire "$who"

	# What the SDK cannot see: each detached command and re-attach is in the audit chain.
	is "$(pc "$who" events --kind exec.request --json | jq -r 'select((.attrs.tag // .tag) == "paddock-code-interpreter") | .kind' | sort -u)" \
		"exec.request" "$who: the code interpreter's start is recorded with its tag"
	is "$([ "$(kinds "$who" exec.attach)" -ge 1 ] && echo yes)" yes \
		"$who: the re-attach by pid is recorded (exec.attach)"
	is "$(pc "$who" events --kind sandbox.port.open --json | jq -r 'select((.attrs.port // .port) == 49999) | .attrs.by // .by' | sort -u)" \
		"e2b" "$who: the interpreter's port was forwarded by the E2B front door"
	is "$(pc "$who" events --kind e2b.request --json | jq -r 'select((.attrs.front // .front) == "port") | .attrs.route // .route' | sed 's|/contexts/[0-9a-f-]*|/contexts/ID|' | sort -u | tr '\n' ' ')" \
		"DELETE /contexts/ID GET / GET /contexts POST /contexts POST /execute " \
		"$who: each request for the interpreter's port is recorded (e2b.request, front port)"

	# The forwarded port is a listener on the host's loopback: without the daemon's secret the
	# interpreter runs nothing for whoever connects to it there.
	local sb tok hp out
	sb=$(curl -s -X POST -H "X-API-KEY: $KEY" -H 'Content-Type: application/json' \
		-d '{"templateID":"code-interpreter-v1","timeout":600}' "http://$ADDR/sandboxes")
	tok=$(jq -r .envdAccessToken <<<"$sb")
	sb=$(jq -r .sandboxID <<<"$sb")
	out=$(curl -s -X POST -H "E2b-Sandbox-Id: $sb" -H 'E2b-Sandbox-Port: 49999' \
		-H "X-Access-Token: $tok" -d '{"code":"6*7"}' "http://$ADDR/execute" | jq -rs 'map(select(.type == "result"))[0].text')
	is "$out" 42 "$who: /execute through the daemon runs code"
	hp=$(pc "$who" events --sandbox "$sb" --kind sandbox.port.open --json | jq -r '.attrs.host_port // .host_port' | head -1)
	out=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"code":"open(\"/tmp/pwned\", \"w\")"}' "http://127.0.0.1:$hp/execute")
	is "$out" 403 "$who: /execute straight to the forwarded port, without the daemon, is refused (403)"
	curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "http://$ADDR/sandboxes/$sb"
	serve_stop "$who"
}

proc_tests root "$(free_port)"
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
proc_tests user "$(free_port)"
SERVE_ENV=()
done_testing
