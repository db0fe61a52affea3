#!/bin/bash
# The reference MCP servers nobody here wrote (@modelcontextprotocol/server-everything,
# server-filesystem and server-memory, pinned in tests/clients/package.json) as upstreams of
# `paddock gateway`, each in its own sandbox made from its permission manifest, driven
# downstream by the official SDK clients (tests/clients/drive/gateway-steps.mjs) and the
# inspector's CLI, as root and as nobody:
# - over stdio (v1 SDK, the legacy era; the client starts the gateway): the three servers'
#   tools are listed as SERVER__TOOL; everything's echo, get-sum and a long-running
#   operation whose progress reaches the client; filesystem's write_file then
#   read_text_file inside its root (the file is on the host, the caller's); memory's
#   create_entities then read_graph (its MEMORY_FILE_PATH in its write path, on the host);
#   a call is a tool.call audit record; nothing is left once the client closed;
# - over Streamable HTTP (v2 SDK, the modern era): the same servers list and answer;
# - the inspector's CLI lists the gateway's tools (stdio and HTTP).
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-mcp.sh"
. "$(dirname "$0")/lib-gateway-clients.sh"
mcp_cgroups
NM=$(realpath "$CLIENTS/node_modules")
MCPNM="$NM/@modelcontextprotocol"
INSPECTOR="$MCPNM/inspector/clients/launcher/build/index.js"
for f in server-everything server-filesystem server-memory; do
	[ -f "$MCPNM/$f/dist/index.js" ] || { echo "Bail out! $MCPNM/$f is missing: run make test-setup"; exit 1; }
done
[ -f "$INSPECTOR" ] || { echo "Bail out! $INSPECTOR is missing: run make test-setup"; exit 1; }

# config WHO: a gateway config for WHO's three servers in $CFG; the filesystem server's root
# $FSROOT and the memory server's directory $MEMDIR, both WHO's. The manifests are what a
# user writes: no limits (the defaults leave Node's dozen threads room).
config() {
	local who=$1 d="$T/gw-$1"
	FSROOT="$d/fsroot"
	MEMDIR="$d/memory"
	CFG="$d/gateway.yaml"
	mkdir -p "$FSROOT" "$MEMDIR"
	[ "$who" = root ] || chown -R $UNPRIV_UID:$UNPRIV_UID "$d"
	cat >"$CFG" <<EOF
servers:
  everything:
    command: [/usr/bin/node, $MCPNM/server-everything/dist/index.js, stdio]
    permissions:
      filesystem: {read: [$NM]}
  fs:
    command: [/usr/bin/node, $MCPNM/server-filesystem/dist/index.js, $FSROOT]
    permissions:
      filesystem: {read: [$NM], write: [$FSROOT]}
  memory:
    command: [/usr/bin/node, $MCPNM/server-memory/dist/index.js]
    permissions:
      filesystem: {read: [$NM], write: [$MEMDIR]}
      environment: {MEMORY_FILE_PATH: $MEMDIR/memory.jsonl}
policy:
  default: allow
EOF
	chmod 0644 "$CFG"
}

WANT='["everything__echo", "everything__get-sum", "everything__trigger-long-running-operation",
	"fs__write_file", "fs__read_text_file", "memory__create_entities", "memory__read_graph"]'

# The stdio session: every server listed and called once or twice.
stdio_session() {
	local who=$1 l="$1: v1 stdio" text="gateway-$1-$RANDOM" uid
	uid=$(whouid "$who")
	steps "$who" v1 '[
		{"op": "list", "want": '"$WANT"'},
		{"op": "call", "name": "everything__echo", "args": {"message": "'"$text"'"}},
		{"op": "call", "name": "everything__get-sum", "args": {"a": 2, "b": 40}},
		{"op": "call", "name": "everything__trigger-long-running-operation",
		 "args": {"duration": 1, "steps": 3}, "progress": true},
		{"op": "call", "name": "fs__write_file", "args": {"path": "'"$FSROOT"'/note.txt", "content": "'"$text"'"}},
		{"op": "call", "name": "fs__read_text_file", "args": {"path": "'"$FSROOT"'/note.txt"}},
		{"op": "call", "name": "memory__create_entities", "args": {"entities": [
			{"name": "paddock", "entityType": "project", "observations": ["'"$text"'"]}]}},
		{"op": "call", "name": "memory__read_graph", "args": {}}
	]' stdio "$T/bin/paddock" gateway --config "$CFG"
	is "$RC" 0 "$l: the client ran its session to the end"
	jqok "$(nth 1)" '[.tools[].name] as $n | '"$WANT"' | all(. as $w | $n | index($w) != null)' \
		"$l: tools/list names each server's tools SERVER__TOOL"
	jqok "$(nth 1)" '[.tools[].name] | all(test("^(everything|fs|memory)__"))' \
		"$l: every tool listed is namespaced by its server"
	jqok "$(nth 2)" '.result.isError != true and (.result.content[0].text | contains("'"$text"'"))' \
		"$l: everything__echo answers the message"
	jqok "$(nth 3)" '.result.isError != true and (.result.content[0].text | test("\\b42\\b"))' \
		"$l: everything__get-sum 2 + 40 answers 42"
	# The SDK's client handles a notification a turn after the response that follows it: the
	# last step's, written just before the result, may find its call over (bare too).
	jqok "$(nth 4)" '.result.isError != true and (.progress | length) >= 2 and
		(.progress | map(.progress)) == ([range(1; (.progress | length) + 1)]) and all(.progress[]; .total == 3)' \
		"$l: a long-running operation's progress reaches the client (steps 1, 2, ... of 3)"
	jqok "$(nth 5)" '.result.isError != true' "$l: fs__write_file inside its root succeeds"
	is "$(cat "$FSROOT/note.txt" 2>/dev/null)" "$text" "$l: the file is on the host, in the server's root"
	is "$(stat -c %u "$FSROOT/note.txt" 2>/dev/null)" "$uid" "$l: the file belongs to the gateway's caller ($uid)"
	jqok "$(nth 6)" '.result.isError != true and (.result.content[0].text == "'"$text"'")' \
		"$l: fs__read_text_file reads it back"
	jqok "$(nth 7)" '.result.isError != true' "$l: memory__create_entities succeeds"
	jqok "$(nth 8)" '.result.isError != true and (.result.content[0].text | contains("'"$text"'"))' \
		"$l: memory__read_graph returns the entity"
	grep -q "$text" "$MEMDIR/memory.jsonl" 2>/dev/null
	ok $? "$l: the memory server's file is in its write path on the host"
	no_paddock_left "$l"
	# Every call is a tool.call record, attributed to the stdio principal.
	mcp_as "$who" "$T/bin/paddock" audit tail -n 200 --kind tool.call --json >"$T/audit.json" 2>&1
	jqok "$(jq -cs . "$T/audit.json" 2>/dev/null)" '[.. | objects | select(.kind? == "tool.call") | .attrs] |
		any(.server == "fs" and .tool == "write_file" and .principal == "local" and .decision == "allowed")' \
		"$l: fs__write_file is a tool.call audit record (principal local, allowed)"
}

# The HTTP session, modern era: the servers list and answer through --listen.
http_session() {
	local who=$1 l="$1: v2 http"
	if ! gw_listen "$who" "$CFG"; then
		ok 1 "$l: paddock gateway --listen starts"
		return
	fi
	steps "$who" v2 '[
		{"op": "list", "want": '"$WANT"'},
		{"op": "call", "name": "everything__echo", "args": {"message": "modern"}},
		{"op": "call", "name": "fs__read_text_file", "args": {"path": "'"$FSROOT"'/note.txt"}}
	]' http "$GW_URL"
	is "$RC" 0 "$l: the client ran its session to the end"
	jqok "$(nth 1)" '[.tools[].name] as $n | '"$WANT"' | all(. as $w | $n | index($w) != null)' \
		"$l: tools/list names each server's tools SERVER__TOOL"
	jqok "$(nth 2)" '.result.content[0].text | contains("modern")' "$l: everything__echo answers"
	jqok "$(nth 3)" '.result.isError != true and (.result.content[0].text | startswith("gateway-'"$who"'-"))' \
		"$l: fs__read_text_file reads the file the stdio session wrote"
	inspect_list "$who" "$l: inspector --cli" "$GW_URL"
	gw_stop
	is "$GW_RC" 0 "$l: paddock gateway --listen ends with 0 on SIGTERM"
}

# inspect_list WHO LABEL URL | -- COMMAND...: the inspector's CLI lists the gateway's tools
# (a command after --: the inspector's own options end there).
inspect_list() {
	local who=$1 l=$2 MCP_CMD kv
	local -a envs=()
	shift 2
	mcp_cmd "$who"
	if [ "$1" = -- ]; then
		for kv in "${MCP_CMD[@]}"; do
			case $kv in PADDOCK_*=* | HOME=*) envs+=(-e "$kv") ;; esac
		done
	fi
	OUT=$(cd "$T/home" && "${MCP_CMD[@]}" "$NODE" "$INSPECTOR" --cli --format json --connect-timeout 60000 \
		"${envs[@]}" --method tools/list "$@" 2>"$T/inspect.err")
	RC=$?
	is "$RC" 0 "$l: tools/list exits 0" || tail -10 "$T/inspect.err" | sed 's/^/#   /'
	jqok "$OUT" '[.result.tools[].name] | index("everything__echo") != null and index("fs__read_text_file") != null' \
		"$l: tools/list offers everything__echo and fs__read_text_file"
}

for who in root user; do
	config "$who"
	stdio_session "$who"
	http_session "$who"
	# The inspector's CLI asks once, at once: over stdio the gateway reads its client once
	# every upstream has listed its tools (or failed its first start).
	inspect_list "$who" "$who: inspector --cli over stdio" -- "$T/bin/paddock" gateway --config "$CFG"
	no_paddock_left "$who: inspector over stdio"
done
done_testing
