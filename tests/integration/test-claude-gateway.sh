#!/bin/bash
# Claude Code (tests/clients/claude, `make test-clients-setup`) as a real MCP client of
# `paddock gateway`, as root and as nobody, in a network namespace that holds only loopback:
# - `claude mcp add tools -- paddock gateway --config FILE` in a private HOME, then
#   `claude mcp list` reports it connected;
# - `claude -p` against the fake Messages API (fake-messages.py) that plays a model calling
#   mcp__tools__fx__echo, then mcp__tools__fx__add with an argument its pinned inputSchema
#   refuses: the upstream (tests/integration/gw-upstream.py in its sandbox) received the echo
#   (its --log) and not the add; the model was handed the echo's text and the refusal
#   (invalid_arguments naming /b); the answer quotes the last result; both calls are
#   tool.call audit records; nothing of paddock is left once Claude Code exits.
# - approval in band (docs/approvals.md, IN BAND): a second gateway, `gated`, whose policy
#   sends fx__write_file to a human: Claude Code (2026-07-28) is answered input_required and
#   asks its user; `claude -p` has none and cancels: the call is denied by
#   elicitation:agent-c and the upstream never sees it; with the project's Elicitation hook
#   answering accept {approve: true} (.claude/settings.json, the user's own way to answer in
#   -p), the retry is granted by elicitation:agent-c and the write is done.
# Run by `make test-clients` (Claude Code is large, so it is not part of make test).
set -u
. "$(dirname "$0")/lib-claude.sh"
cp "$TESTS_DIR/integration/gw-upstream.py" "$T/bin/"
chmod 0755 "$T/bin/gw-upstream.py"
ECHO=mcp__tools__fx__echo
ADD=mcp__tools__fx__add

GATED=mcp__gated__fx__write_file

# in_band_run WHO D FILE: claude -p plays a model that calls $GATED to write FILE.
in_band_run() {
	local who=$1 d=$2 file=$3
	claude_api_start "$who" "$(printf '[{"tool": "%s", "input": {"path": "%s", "text": "yes"}}]' "$GATED" "$file")"
	claude_as "$who" -p "Write with the tools." --allowedTools "$GATED" --output-format json \
		>"$T/p.out" 2>"$T/p.err"
	is "$?" 0 "$who: in band: claude -p exits 0" || tail -5 "$T/p.err" | sed 's/^/#   /'
	RES=$(jq -rs '[.[] | .tool_results[]?] | last | .text // ""' "$T/api-$who.log" 2>/dev/null)
	claude_api_stop "$who"
	mcp_as "$who" "$T/bin/paddock" audit tail -n 200 --json >"$T/audit.json" 2>&1
}

# in_band WHO D: the `gated` gateway (fx__write_file needs a human), asked by input_required.
in_band() {
	local who=$1 d=$2 hooks="$T/proj-$1/.claude"
	sed '/^policy:/,$d' "$d/gateway.yaml" >"$d/gated.yaml"
	printf '%s\n' 'policy:' '  default: allow' '  rules:' \
		'    - {name: writes-need-a-human, server: fx, tool: write_file, action: require_approval, reason: writes need a human}' \
		>>"$d/gated.yaml"
	chmod a+r "$d/gated.yaml"
	claude_as "$who" mcp add gated "${ENVS[@]}" -- paddock gateway --config "$d/gated.yaml" \
		--principal agent-c >"$T/add.out" 2>&1
	ok $? "$who: in band: claude mcp add gated -- paddock gateway (a require_approval rule)"
	in_band_run "$who" "$d" "$d/log/cancel.txt"
	printf '%s' "$RES" | grep -q 'approval_denied.*denied by elicitation:agent-c: cancelled in band by MCP client claude-code'
	ok $? "$who: in band: claude -p, asked by input_required with nobody to ask, cancels: the model is handed the denial" ||
		printf '%s\n' "$RES" | head -3 | sed 's/^/#   /'
	jq -se 'any(.[]; .kind == "tool.call" and .attrs.decision == "input_required" and
		.attrs.client == "claude-code" and .attrs.args.path == "'"$d/log/cancel.txt"'")' "$T/audit.json" >/dev/null 2>&1
	ok $? "$who: in band: the first round is a tool.call record, decision input_required, client claude-code"
	n=$(jq -c 'select(.method == "tools/call" and .params.name == "write_file")' "$d/log/fx.log" 2>/dev/null | wc -l)
	is "$n" 0 "$who: in band: the cancelled call never reached the upstream"
	# The user's own answer in -p: an Elicitation hook of the project that accepts.
	mkdir -p "$hooks"
	printf '#!/bin/sh\ncat >/dev/null\necho %s\n' \
		"'{\"hookSpecificOutput\": {\"hookEventName\": \"Elicitation\", \"action\": \"accept\", \"content\": {\"approve\": true}}}'" \
		>"$T/bin/elicit-accept.sh"
	chmod 0755 "$T/bin/elicit-accept.sh"
	printf '{"hooks": {"Elicitation": [{"matcher": "", "hooks": [{"type": "command", "command": "%s"}]}]}}\n' \
		"$T/bin/elicit-accept.sh" >"$hooks/settings.json"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$hooks"
	in_band_run "$who" "$d" "$d/log/accept.txt"
	is "$(cat "$d/log/accept.txt" 2>/dev/null)" yes "$who: in band: the Elicitation hook accepts: the retry runs the write"
	jq -se 'any(.[]; .kind == "approval.granted" and .attrs.approver == "elicitation:agent-c" and
		(.attrs.note | contains("claude-code")))' "$T/audit.json" >/dev/null 2>&1
	ok $? "$who: in band: approval.granted by elicitation:agent-c (Claude Code's answer)"
	rm -f "$hooks/settings.json"
	no_paddock_left "$who: in band"
}

for who in root user; do
	d="$T/gw-$who"
	mkdir -p "$T/home-$who" "$T/proj-$who" "$d/log"
	cat >"$d/gateway.yaml" <<EOF
servers:
  fx:
    command: [/usr/bin/python3, $T/bin/gw-upstream.py, --log, $d/log/fx.log]
    permissions:
      filesystem: {read: [$T/bin], write: [$d/log]}
policy:
  default: allow
EOF
	[ $who = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$T/home-$who" "$T/proj-$who" "$d"
	chmod -R a+rX "$d"
	chmod 0777 "$T/proj-$who"
	token=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	plan=$(printf '[{"tool": "%s", "input": {"text": "claude-%s"}}, {"tool": "%s", "input": {"a": 1, "b": "two"}}]' \
		"$ECHO" "$token" "$ADD")
	claude_api_start "$who" "$plan"

	# The user's own words: claude mcp add tools -- paddock gateway --config FILE.
	claude_mcp_envs "$who"
	claude_as "$who" mcp add tools "${ENVS[@]}" -- paddock gateway --config "$d/gateway.yaml" \
		>"$T/add.out" 2>&1
	ok $? "$who: claude mcp add tools -- paddock gateway --config FILE ($(head -c 120 "$T/add.out"))"
	claude_as "$who" mcp list >"$T/list.out" 2>&1
	grep -E '^tools: .*Connected' "$T/list.out" >/dev/null
	ok $? "$who: claude mcp list reports the gateway connected"
	grep -q '^tools' "$T/list.out" || sed 's/^/#   /' "$T/list.out"

	claude_as "$who" -p "Echo with the tools." --allowedTools "$ECHO" "$ADD" \
		--output-format json >"$T/p.out" 2>"$T/p.err"
	rc=$?
	is "$rc" 0 "$who: claude -p exits 0" || tail -5 "$T/p.err" | sed 's/^/#   /'
	calls=$(jq -s '[.[] | select(.answer == "tool_use")] | length' "$T/api-$who.log" 2>/dev/null)
	is "$calls" 2 "$who: the model was offered the gateway's tools and called $ECHO, then $ADD"
	res=$(jq -rs '[.[] | .tool_results[]?] | .[0].text // ""' "$T/api-$who.log" 2>/dev/null)
	printf '%s' "$res" | grep -q "claude-$token"
	ok $? "$who: the echo's text came back through Claude Code"
	res=$(jq -rs '[.[] | .tool_results[]?] | last | .text // ""' "$T/api-$who.log" 2>/dev/null)
	printf '%s' "$res" | grep -q 'invalid_arguments.*/b'
	rc=$?
	ok $rc "$who: the model was handed the refusal of add (invalid_arguments naming /b)"
	[ $rc = 0 ] || printf '%s\n' "$res" | head -3 | sed 's/^/#   /'
	n=$(jq -c 'select(.method == "tools/call" and .params.name == "echo" and .params.arguments.text == "claude-'"$token"'")' \
		"$d/log/fx.log" 2>/dev/null | wc -l)
	is "$n" 1 "$who: the upstream received the echo in its sandbox (its log)"
	n=$(jq -c 'select(.method == "tools/call" and .params.name == "add")' "$d/log/fx.log" 2>/dev/null | wc -l)
	is "$n" 0 "$who: the refused add never reached the upstream"
	jq -e --arg t "invalid_arguments" '.result | contains($t)' "$T/p.out" >/dev/null 2>&1
	ok $? "$who: claude -p's answer quotes the last tool result"
	no_paddock_left "$who: claude -p"
	mcp_as "$who" "$T/bin/paddock" audit tail -n 100 --kind tool.call --json >"$T/audit.json" 2>&1
	jq -se '[.[] | .attrs] | (any(.tool == "echo" and .decision == "allowed") and
		any(.tool == "add" and .decision == "invalid_arguments"))' "$T/audit.json" >/dev/null 2>&1
	ok $? "$who: both calls are tool.call audit records (allowed, invalid_arguments)"
	claude_api_stop "$who"
	in_band "$who" "$d"
done
done_testing
