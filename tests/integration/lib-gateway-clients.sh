# Helpers for the suites where clients drive `paddock gateway` (gateway-servers,
# gateway-attacks), sourced after lib-run.sh and lib-mcp.sh.
#   gw_listen WHO CONFIG [ARGS...]  start `paddock gateway --config CONFIG --listen
#                                   127.0.0.1:PORT ARGS` as WHO; sets GW_URL, GW_PORT, GW_LOG
#                                   (GW_ENV: K=V more in its environment)
#   gw_stop                         stop it (SIGTERM) and wait; $GW_RC is its status
#   steps WHO SDK JSON TARGET...    one SDK client session (tests/clients/drive/
#                                   gateway-steps.mjs) as WHO: TARGET is `stdio CMD...` or
#                                   `http URL`; its JSON lines in $OUT, status in $RC
#   nth N                           the Nth JSON line of $OUT
#   jqok JSON FILTER DESC           JSON passes the jq FILTER, as a subtest ($JQ_DEFS, jq
#                                   definitions, before it)
#   whouid WHO                      0 or nobody's uid
# GW_TOKEN, when set, is the bearer token the client sends over HTTP.
GW_PID=""
GW_RC=""
GW_LOG=""
GW_ENV=()
trap 'gw_stop; mcp_stop; undelegate_cgroup; rm_cgroup "$ROOT_CG"; rm -rf "$T"' EXIT

gw_listen() {
	local who=$1 cfg=$2 i MCP_CMD
	shift 2
	GW_PORT=$(free_port)
	GW_LOG="$T/gateway-$who-$GW_PORT.log"
	mcp_cmd "$who"
	(cd "$T/home" && exec "${MCP_CMD[@]}" "${GW_ENV[@]}" "$T/bin/paddock" gateway --config "$cfg" \
		--listen "127.0.0.1:$GW_PORT" "$@" >"$GW_LOG" 2>&1) &
	GW_PID=$!
	GW_URL="http://127.0.0.1:$GW_PORT/mcp"
	GW_WHO=$who
	# Ready when its port accepts a connection (a bound, not a timing check).
	for i in $(seq 1 600); do
		python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
			"$GW_PORT" 2>/dev/null && return 0
		kill -0 "$GW_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "# paddock gateway --listen did not start:"
	head -20 "$GW_LOG" | sed 's/^/#   /'
	GW_PID=""
	return 1
}

gw_stop() {
	[ -n "$GW_PID" ] || return 0
	kill -TERM "$GW_PID" 2>/dev/null
	wait "$GW_PID"
	GW_RC=$?
	GW_PID=""
	[ "$GW_RC" = 0 ] || { echo "# paddock gateway --listen ended with $GW_RC:"; tail -15 "$GW_LOG" | sed 's/^/#   /'; }
}

steps() {
	local who=$1 sdk=$2 json=$3 MCP_CMD
	shift 3
	mcp_cmd "$who"
	OUT=$(cd "$T/home" && "${MCP_CMD[@]}" GW_STEPS="$json" GW_TOKEN="${GW_TOKEN:-}" \
		"$NODE" "$DRIVE/gateway-steps.mjs" "$sdk" "$@" 2>"$T/steps.err")
	RC=$?
	[ "$RC" = 0 ] || { echo "# the client ended with $RC:"; printf '%s\n' "$OUT" | tail -3 | cut -c1-400 | sed 's/^/#   /'; tail -15 "$T/steps.err" | sed 's/^/#   /'; }
	return 0
}

nth() {
	printf '%s\n' "$OUT" | sed -n "${1}p"
}

jqok() {
	local rc
	[ -n "$1" ] && printf '%s' "$1" | jq -e "${JQ_DEFS:-}$2" >/dev/null 2>&1
	rc=$?
	ok $rc "$3"
	[ $rc = 0 ] || { printf '%s\n' "$1" | head -c 1500 | sed 's/^/#   /'; echo; }
}

whouid() {
	if [ "$1" = root ]; then echo 0; else echo "$UNPRIV_UID"; fi
}
