# Helpers for the suites where Claude Code is a real MCP client (make test-clients), sourced
# first thing after `set -u`: it re-runs the suite in a network namespace that holds only
# loopback, then sources lib-run.sh and lib-mcp.sh and makes the suite's cgroups.
#   claude_as WHO ARGS...     Claude Code as WHO in WHO's private home and project directory
#                             ($T/home-WHO, $T/proj-WHO), with the fake API, no traffic of its own
#   claude_api_start WHO PLAN start the fake Messages API (fake-messages.py) playing PLAN;
#                             sets API_PORT, checks it listens
#   claude_api_stop WHO       stop it (KEEP_API_LOG=PATH keeps what it saw as PATH.WHO)
#   claude_mcp_envs WHO       sets ENVS to `-e K=V` for WHO's PADDOCK_* environment, for
#                             `claude mcp add` (where paddock keeps its state)
if [ -z "${PDK_NET_NS:-}" ]; then
	# SECURITY: nothing here may reach beyond loopback; a namespace without a route
	# guarantees it whatever Claude Code would try.
	PDK_NET_NS=1 exec unshare --net bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" "$@"
fi
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-mcp.sh"
mcp_cgroups
CLAUDE="$CLIENTS/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
if [ ! -x "$CLAUDE" ] || ! "$CLAUDE" --version >/dev/null 2>&1; then
	echo "Bail out! Claude Code is missing ($CLAUDE): run make test-clients-setup"
	exit 1
fi

claude_as() {
	local who=$1
	shift
	(cd "$T/proj-$who" && mcp_as "$who" env HOME="$T/home-$who" \
		CLAUDE_CONFIG_DIR="$T/home-$who/.claude" PATH="$T/bin:$PATH" \
		ANTHROPIC_BASE_URL="http://127.0.0.1:$API_PORT" ANTHROPIC_API_KEY=sk-ant-test-dummy \
		DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
		DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 ENABLE_TOOL_SEARCH=false \
		timeout 300 "$CLAUDE" "$@")
}

API_PID=""
claude_api_start() {
	local who=$1 plan=$2 i
	rm -f "$T/api-port" "$T/api-$who.log"
	python3 "$TESTS_DIR/integration/fake-messages.py" "$T/api-port" "$T/api-$who.log" "$plan" &
	API_PID=$!
	for i in $(seq 1 200); do [ -f "$T/api-port" ] && break; sleep 0.05; done
	API_PORT=$(cat "$T/api-port" 2>/dev/null)
	ok $? "$who: the fake Messages API listens on loopback"
}

claude_api_stop() {
	[ -z "${KEEP_API_LOG:-}" ] || cp "$T/api-$1.log" "$KEEP_API_LOG.$1"
	kill "$API_PID"
	wait "$API_PID" 2>/dev/null
}

claude_mcp_envs() {
	local kv MCP_CMD
	mcp_cmd "$1"
	ENVS=()
	for kv in "${MCP_CMD[@]}"; do case $kv in PADDOCK_*=*) ENVS+=(-e "$kv") ;; esac; done
}
