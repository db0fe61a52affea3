#!/bin/bash
# The official TypeScript SDK clients drive `paddock mcp` the way an agent does
# (tests/clients/drive/sdk-session.mjs): @modelcontextprotocol/sdk (v1, the legacy era) and
# @modelcontextprotocol/client (v2, pinned to the modern era 2026-07-28), each over stdio
# (the client starts `paddock mcp` itself) and over Streamable HTTP (`paddock mcp --listen`),
# as root and as nobody. Each session creates a sandbox, writes a file with run_command,
# reads it back with file_read, runs python, diffs, cancels a long sleep and proves its
# process gone by pid and cgroup, and destroys the sandbox.
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-mcp.sh"
mcp_cgroups

for who in root user; do
	for sdk in v1 v2; do
		# stdio: the client starts the server in the workspace and closes its stdin at the end.
		ws=$(mkws)
		mcp_cmd "$who"
		drive "$who" bash -c 'cd "$1" && shift && exec "$@"' _ "$ws" "${MCP_CMD[@]}" \
			MCP_TEST_WORKSPACE="$ws" "$NODE" "$DRIVE/sdk-session.mjs" "$sdk" stdio \
			"$T/bin/paddock" mcp --workspace "$ws"
		# Nothing of the session outlives the client.
		no_paddock_left "$who: $sdk stdio"

		if mcp_listen "$who" --workspace @WS; then
			drive "$who" "${MCP_CMD[@]}" MCP_TEST_WORKSPACE="$MCP_WS" "$NODE" \
				"$DRIVE/sdk-session.mjs" "$sdk" http "$MCP_URL"
			mcp_stop
			is "$MCP_RC" 0 "$who: $sdk http: paddock mcp --listen ends with 0 on SIGTERM"
		else
			ok 1 "$who: $sdk http: paddock mcp --listen starts"
		fi
	done
done
done_testing
