#!/bin/bash
# Claude Code (tests/clients/claude, `make test-clients-setup`) as a real MCP client of
# `paddock mcp`, as root and as nobody, in a network namespace that holds only loopback:
# - `claude mcp add paddock -- paddock mcp` in a private HOME and config directory, then
#   `claude mcp list` reports paddock connected;
# - `claude -p` against a small fake Messages API on loopback (fake-messages.py; a dummy
#   key) that plays a model calling mcp__paddock__sandbox_create, then
#   mcp__paddock__run_command with the handle it got (Claude Code speaks the 2026-07-28
#   revision to paddock mcp, where a call names its sandbox): the call's effect is checked
#   in the sandbox (what the command printed from inside it: its token, its uid, its pid 1
#   being paddock's init), the answer Claude Code prints quotes it, and nothing of paddock is
#   left running once Claude Code exits.
# Run by `make test-clients` (Claude Code is large, so it is not part of make test).
set -u
. "$(dirname "$0")/lib-claude.sh"
TOOL=mcp__paddock__run_command
CREATE=mcp__paddock__sandbox_create

for who in root user; do
	mkdir -p "$T/home-$who" "$T/proj-$who"
	[ $who = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$T/home-$who" "$T/proj-$who"
	chmod 0777 "$T/proj-$who"
	token=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	input=$(printf '{"command": "echo claude-%s > claude.txt && cat claude.txt && id -u && tr %s %s </proc/1/cmdline", "sandbox_id": "{{sandbox_id}}"}' \
		"$token" "'\\\\0'" "' '")
	plan=$(printf '[{"tool": "%s", "input": {}}, {"tool": "%s", "input": %s}]' "$CREATE" "$TOOL" "$input")
	claude_api_start "$who" "$plan"

	# The user's own words: claude mcp add paddock -- paddock mcp (with where its state is).
	claude_mcp_envs "$who"
	claude_as "$who" mcp add paddock "${ENVS[@]}" -- paddock mcp >"$T/add.out" 2>&1
	ok $? "$who: claude mcp add paddock -- paddock mcp ($(head -c 120 "$T/add.out"))"
	claude_as "$who" mcp list >"$T/list.out" 2>&1
	grep -E '^paddock: .*Connected' "$T/list.out" >/dev/null
	ok $? "$who: claude mcp list reports paddock connected"
	grep -q '^paddock' "$T/list.out" || sed 's/^/#   /' "$T/list.out"

	claude_as "$who" -p "Write the file with paddock." --allowedTools "$CREATE" "$TOOL" \
		--output-format json >"$T/p.out" 2>"$T/p.err"
	rc=$?
	is "$rc" 0 "$who: claude -p exits 0" || tail -5 "$T/p.err" | sed 's/^/#   /'
	calls=$(jq -s '[.[] | select(.answer == "tool_use")] | length' "$T/api-$who.log" 2>/dev/null)
	is "$calls" 2 "$who: the model was offered paddock's tools and called $CREATE, then $TOOL"
	res=$(jq -rs '[.[] | .tool_results[]?] | .[0].text // ""' "$T/api-$who.log" 2>/dev/null)
	printf '%s' "$res" | grep -qE '"sandbox_id": ?"sbx_[0-9a-f]{32}"'
	ok $? "$who: sandbox_create answered a handle through Claude Code"
	# The run_command result: the last tool result the model was handed.
	res=$(jq -rs '[.[] | .tool_results[]?] | last | .text // ""' "$T/api-$who.log" 2>/dev/null)
	# Claude Code hands the model the structured result when there is one, else the text.
	out=$(printf '%s' "$res" | jq -r '.stdout | if type == "object" then .text else . end // empty' \
		2>/dev/null)
	[ -n "$out" ] || out=$res
	uid=0; [ $who = user ] && uid=$UNPRIV_UID
	first=$(printf '%s\n' "$out" | sed -n 1p)
	is "$first" "claude-$token" "$who: the command ran and wrote its file in the sandbox (read back: $first)"
	is "$(printf '%s\n' "$out" | sed -n 2p)" "$uid" "$who: it ran as $uid"
	printf '%s\n' "$out" | sed -n 3p | grep -q 'paddock-init'
	ok $? "$who: its pid 1 is paddock's init: it ran in a paddock sandbox"
	jq -e --arg t "claude-$token" '.result | contains($t)' "$T/p.out" >/dev/null 2>&1
	ok $? "$who: claude -p's answer quotes the tool's result"
	[ -e "$T/proj-$who/claude.txt" ]
	is $? 1 "$who: the sandbox's write is not in the project directory (its workspace is its own)"
	no_paddock_left "$who: claude -p"
	claude_api_stop "$who"
done
done_testing
