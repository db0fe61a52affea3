#!/bin/bash
# The MCP inspector's CLI (@modelcontextprotocol/inspector 2.12.0, `inspector --cli`) lists
# and calls paddock's tools in both protocol eras (--protocol-era legacy and modern), over
# stdio (it starts `paddock mcp` itself) and over Streamable HTTP (`paddock mcp --listen`),
# as root and as nobody.
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-mcp.sh"
mcp_cgroups
INSPECTOR="$CLIENTS/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
[ -f "$INSPECTOR" ] || { echo "Bail out! $INSPECTOR is missing: run make test-setup"; exit 1; }

# inspect WHO ERA TARGET... -- INSPECTOR-ARGS...: one inspector run as WHO; its JSON answer
# in $OUT, its status in $RC. A stdio target is started with WHO's paddock environment
# (the inspector hands a server only a few variables of its own, and those of -e).
inspect() {
	local who=$1 era=$2 MCP_CMD
	shift 2
	local -a target=() envs=()
	while [ "$1" != -- ]; do target+=("$1"); shift; done
	shift
	mcp_cmd "$who"
	if [ "${target[0]}" != "${target[0]#http}" ]; then
		envs=()
	else
		for kv in "${MCP_CMD[@]}"; do
			case $kv in PADDOCK_*=*) envs+=(-e "$kv") ;; esac
		done
	fi
	OUT=$(cd "$WS" && "${MCP_CMD[@]}" "$NODE" "$INSPECTOR" --cli --protocol-era "$era" --format json \
		--connect-timeout 60000 "${envs[@]}" "$@" "${target[@]}" 2>"$T/inspect.err")
	RC=$?
	[ "$RC" = 0 ] || sed 's/^/#   /' "$T/inspect.err" | tail -10
}

# jqok FILTER DESC: the last answer passes the jq FILTER (true), as a subtest.
jqok() {
	[ -n "$OUT" ] && printf '%s' "$OUT" | jq -e "$1" >/dev/null 2>&1
	if ! ok $? "$2"; then printf '%s\n' "$OUT" | head -c 1500 | sed 's/^/#   /'; echo; fi
}

for who in root user; do
	for era in legacy modern; do
		WS=$(mkws)
		for transport in stdio http; do
			l="$who: inspector --protocol-era $era over $transport"
			if [ $transport = stdio ]; then
				target=("$T/bin/paddock" mcp)
			else
				mcp_listen "$who" || { ok 1 "$l: paddock mcp --listen starts"; continue; }
				target=("$MCP_URL")
			fi
			inspect "$who" "$era" "${target[@]}" -- --method tools/list
			is "$RC" 0 "$l: tools/list exits 0"
			jqok '[.result.tools[].name] | index("run_command") != null' "$l: tools/list offers run_command"
			jqok '[.result.tools[] | .inputSchema.additionalProperties == false] | all' \
				"$l: every tool's inputSchema is strict (additionalProperties false)"
			jqok '[.result.tools[] | .annotations.readOnlyHint != null] | all' \
				"$l: every tool says whether it is read-only"

			# The modern era has no session: a call names its sandbox by a handle.
			# Over HTTP a handle outlives the inspector run that made it (it is bound
			# to the client, not the connection); over stdio each run is a server of
			# its own, so a handle-less call is refused, naming sandbox_id.
			handle=""
			if [ $era = modern ]; then
				inspect "$who" "$era" "${target[@]}" -- --method tools/call \
					--tool-name sandbox_create --tool-args-json '{}'
				handle=$(printf '%s' "$OUT" | jq -r '.result.structuredContent.sandbox_id // empty' 2>/dev/null)
				printf '%s' "$handle" | grep -qE '^sbx_[0-9a-f]{32}$'
				ok $? "$l: sandbox_create answers a handle ($handle)"
			fi
			if [ $era = modern ] && [ $transport = stdio ]; then
				rm -f "$T/home/res.json"
				inspect "$who" "$era" "${target[@]}" -- --method tools/call --tool-name run_command \
					--tool-args-json '{"command": "true"}' --output "$T/home/res.json"
				is "$RC" 5 "$l: run_command without a handle is a tool error (5)"
				OUT=$(cat "$T/home/res.json" 2>/dev/null)
				jqok '.isError == true and (.content[0].text | startswith("sandbox_id:"))' \
					"$l: the refusal names sandbox_id"
			else
				args='{"command": "echo inspector-'$era' > ins.txt && cat ins.txt && id -u"'
				[ -z "$handle" ] || args="$args, \"sandbox_id\": \"$handle\""
				inspect "$who" "$era" "${target[@]}" -- --method tools/call \
					--tool-name run_command --tool-args-json "$args}"
				is "$RC" 0 "$l: tools/call run_command${handle:+ with the handle} exits 0"
				uid=0; [ $who = user ] && uid=$UNPRIV_UID
				jqok '.result.isError != true and .result.structuredContent.exit_code == 0' \
					"$l: run_command's result is exit_code 0"
				jqok '.result.structuredContent.stdout | (if type == "object" then .text else . end) |
					test("^inspector-'$era'\n'$uid'\n$")' \
					"$l: run_command's stdout is the command's (uid $uid)"
			fi

			# An isError result: the inspector exits 5 (tool_is_error) and writes the result
			# itself to --output.
			rm -f "$T/home/res.json"
			inspect "$who" "$era" "${target[@]}" -- --method tools/call --tool-name run_command \
				--tool-args-json '{"command": "true", "colour": "red"}' --output "$T/home/res.json"
			is "$RC" 5 "$l: an unknown argument: the inspector reports a tool error (5)"
			OUT=$(cat "$T/home/res.json" 2>/dev/null)
			jqok '.isError == true and (.content[0].text | test("colour"))' \
				"$l: an unknown argument is an isError result that names it"
			[ $transport = http ] && { mcp_stop; is "$MCP_RC" 0 "$l: the server ends with 0 on SIGTERM"; }
		done
	done
done
done_testing
