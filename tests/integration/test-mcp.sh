#!/bin/bash
# paddock mcp: the MCP server over stdio, driven with raw JSON-RPC as a client would
# (mcp-stdio.py), as root and as an unprivileged user (TAP): the handshake and its revisions,
# tools/list's schemas and annotations, run_command and file_read across calls, run_code,
# the output cap, argument errors as isError results naming the field, malformed messages,
# batches, unknown methods and oversized messages answered with their JSON-RPC errors while
# the server keeps serving, progress, cancellation that kills the command, the file tools,
# the workspace review, the egress tools, handles bound to their client. When the client
# closes stdin, the server exits 0 and leaves nothing running: no supervisor, no sandbox,
# no private directory; the host workspace is unchanged.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)
# The drivers, where the unprivileged user can read them.
cp "$HERE/mcp_client.py" "$HERE/mcp-http.py" "$T/bin/"

# Supervisors still running with this identity's runtime directory.
live_supervisors() {
	local p n=0
	for p in $(pgrep -f 'paddock supervise --id '); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q "^PADDOCK_RUNTIME_DIR=$1" &&
			n=$((n + 1))
	done
	echo "$n"
}

mcp_tests() {
	local who=$1 ws run
	mkdir -p "$T/serve-$who"
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$T/serve-$who"
	ws=$(mkws)
	echo "host file" >"$ws/host.txt"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$ws"
	echo "host secret $RANDOM$RANDOM" >"$T/host-secret"
	chmod 0644 "$T/host-secret"
	tap_run python3 "$HERE/mcp-stdio.py" "$who" "$ws" "$T/host-secret" -- \
		$(as_argv "$who") "$T/bin/paddock" mcp --workspace "$ws" --max-message 16K \
		--approval-timeout 1s
	tap_run python3 "$HERE/mcp-audit.py" "$who" -- $(as_argv "$who") "$T/bin/paddock"
	run="$T/serve-$who/run"
	is "$(live_supervisors "$run")" 0 "$who: after the client closed stdin, no supervisor runs"
	is "$(ls -A "$run/mcp" 2>/dev/null)" "" "$who: the server's private directory is gone"
	is "$(ls -A "$ws")" "host.txt" "$who: the host workspace is unchanged (no commit)"
	as "$who" "$T/bin/paddock" mcp </dev/null >"$T/out" 2>&1
	is "$? $(cat "$T/out")" "0 " "$who: paddock mcp with nothing on stdin exits 0 at once"
	printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' >"$T/in"
	chmod 0644 "$T/in"
	as "$who" "$T/bin/paddock" mcp <"$T/in" >"$T/out" 2>&1
	is "$? $(jq -r .result.resultType "$T/out")" "0 complete" \
		"$who: stdin from a file: its messages answered, then the end"
}

# The docs' own example, `paddock mcp --workspace .` started in the project directory: its
# first call sees the directory's files (the path is resolved against the caller's cwd); a
# DIR that is not there is refused at start (122, naming --workspace), not at a call.
relative_ws_tests() {
	local who=$1 ws
	ws=$(mkws)
	echo "relative $who" >"$ws/here.txt"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$ws"
	is "$(cd "$ws" && python3 -c 'import sys
sys.path.insert(0, sys.argv[1])
from mcp_client import Stdio, structured, is_error, text
c = Stdio(sys.argv[2:])
c.initialize()
r = c.call("run_command", {"command": "cat here.txt; echo changed >new.txt"})
print(structured(r).get("stdout", {}).get("text", "").strip() or text(r), c.close()[0])' \
		"$HERE" $(as_argv "$who") "$T/bin/paddock" mcp --workspace .)" "relative $who 0" \
		"$who: paddock mcp --workspace . (the caller's cwd): the first call sees its files"
	is "$(ls -A "$ws")" "here.txt" "$who: --workspace .: the host directory is unchanged"
	(cd "$ws" && as "$who" "$T/bin/paddock" mcp --workspace no-such-dir </dev/null >"$T/out" 2>&1)
	is "$? $(grep -c "mcp: --workspace 'no-such-dir': No such file or directory" "$T/out")" \
		"122 1" "$who: paddock mcp --workspace with a missing DIR exits 122 at start, naming it"
	# The home as workspace: refused as paddock run refuses it (the sandboxes would read
	# every dotfile); --allow-home is the explicit override.
	echo "//registry/:_authToken=secret" >"$ws/.npmrc"
	(cd "$ws" && as "$who" env HOME="$ws" "$T/bin/paddock" mcp --workspace . </dev/null >"$T/out" 2>&1)
	is "$? $(grep -c "mcp: the workspace would be '$ws', which holds your home directory" "$T/out")" \
		"122 1" "$who: paddock mcp --workspace \$HOME exits 122 at start, naming it"
	(cd "$ws" && as "$who" env HOME="$ws" "$T/bin/paddock" mcp -q --allow-home --workspace . \
		</dev/null >"$T/out" 2>&1)
	is "$?:$(cat "$T/out")" "0:" "$who: --allow-home serves there anyway (and ends at end of input)"
}

# `paddock mcp --profile FILE`: the session's sandbox and a sandbox_create without a profile
# both run under that file (a client's own profile is still a name only).
profile_file_tests() {
	local who=$1 p
	p="$T/prof-$who.yaml"
	printf 'extends: default\nlimits: {pids: 77}\n' >"$p"
	chmod 0644 "$p"
	is "$(python3 -c 'import sys
sys.path.insert(0, sys.argv[1])
from mcp_client import Stdio, structured, is_error, text
c = Stdio(sys.argv[3:])
c.initialize()
r = c.call("run_command", {"command": "echo session"})
s = structured(r).get("stdout", {}).get("text", "").strip() or text(r)
r = c.call("sandbox_create", {"ttl_s": 600})
h = structured(r).get("sandbox_id") or text(r)
l = [x for x in structured(c.call("sandbox_list", {})).get("sandboxes", [])
     if x.get("sandbox_id") == h]
made = l[0].get("profile") == sys.argv[2] if l else "not listed"
r = c.call("sandbox_create", {"profile": "/etc/passwd"})
bad = is_error(r) and text(r).startswith("profile:")
print(s, h.startswith("sbx_"), made, bad, c.close()[0])' \
		"$HERE" "$p" $(as_argv "$who") "$T/bin/paddock" mcp --profile "$p")" \
		"session True True True 0" \
		"$who: mcp --profile FILE: sandbox_create without a profile uses FILE; a client's path is refused"
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

# Streamable HTTP: paddock mcp --listen (loopback, no credentials), then paddock serve's /mcp
# (its admins: the unix socket's owner), each driven in both eras by mcp-http.py.
http_tests() {
	local who=$1 port pid i rc
	port=$(free_port)
	(as_exec "$who" "$T/bin/paddock" mcp --listen "127.0.0.1:$port" >"$T/mcp-$who.log" 2>&1) &
	pid=$!
	for i in $(seq 1 100); do
		curl -s -o /dev/null "http://127.0.0.1:$port/" && break
		sleep 0.05
	done
	tap_run python3 "$HERE/mcp-http.py" "$who" listen "http://127.0.0.1:$port/mcp"
	# Its SSE events are not held for the client's delayed ACK (http/conns.c).
	is "$(python3 "$HERE/tcp-nodelay.py" "127.0.0.1:$port" "$pid" 2>&1)" True \
		"$who: mcp --listen's end of an accepted TCP connection has TCP_NODELAY"
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	is "$rc" 0 "$who: paddock mcp --listen exits 0 at SIGTERM"
	is "$(live_supervisors "$T/serve-$who/run")" 0 "$who: mcp --listen left no supervisor running"
	is "$(grep -c 'serving MCP on http://127.0.0.1' "$T/mcp-$who.log")" 1 \
		"$who: mcp --listen says where it serves"
	serve_start "$who" || return
	# A stdio server beside the daemon on the same state directory: both serve.
	is "$(python3 -c 'import sys
sys.path.insert(0, sys.argv[1])
from mcp_client import Stdio, structured
c = Stdio(sys.argv[2:])
c.initialize()
r = c.call("run_command", {"command": "echo beside"})
print(structured(r).get("stdout", {}).get("text", "").strip(), c.close()[0])' \
		"$HERE" $(as_argv "$who") "$T/bin/paddock" mcp)" "beside 0" \
		"$who: paddock mcp over stdio runs beside paddock serve on the same state directory"
	# The unix socket's owner is the daemon's admin: the driver runs as the daemon's user.
	tap_run as "$who" python3 "$T/bin/mcp-http.py" "$who" serve "$(sock_of "$who")"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: paddock serve with /mcp stops cleanly"
}

mcp_tests root
relative_ws_tests root
profile_file_tests root
http_tests root
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
mcp_tests user
relative_ws_tests user
profile_file_tests user
http_tests user
SERVE_ENV=()
done_testing
