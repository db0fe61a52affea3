#!/bin/bash
# The network as an agent's workloads meet it (issue 17: 1, 5), as root and as nobody, through
# `paddock run` and a daemon sandbox: servers on the sandbox's own loopback (IPv4 and IPv6) in
# network.mode none and allowlist; a name that cannot be resolved fails at once and for good; a
# refused destination is named with the option that would allow it, in the proxy's answer and
# in the summary at the end of a run. The escape battery (test-escape.sh) proves no route out.
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; undelegate_cgroup; rm -rf "$T"' EXIT
cp "$TESTS_DIR/integration/net-workloads.sh" "$T/bin/net-workloads.sh"
W="$T/bin/net-workloads.sh"

WANT_sockets='127.0.0.1 ok
::1 ok'
WANT_http='hello
hello'
WANT_db='OK 42'

# nrun WHO MODE WORKLOAD: the workload through paddock run; stdout, stderr in $T/err.
nrun() {
	local -a opts=()
	[ "$2" = allowlist ] && opts=(--allow example.com)
	prun "$1" -w "$(mkws)" --ro "$W" "${opts[@]}" -- sh "$W" "$3" 2>"$T/err"
}

run_loopback() {
	local who=$1 mode w out
	for mode in none allowlist; do
		for w in sockets http db; do
			out=$(nrun "$who" "$mode" "$w")
			is "$? $out" "0 $(eval "echo \"\$WANT_$w\"")" "$who: run, $mode: $w on the sandbox's loopback"
		done
	done
}

run_denied() {
	local who=$1 out
	out=$(nrun "$who" none resolve)
	is "$out" "gaierror -2 Name or service not known
getent: 2" "$who: run, none: a name lookup fails at once and for good (EAI_NONAME, not EAI_AGAIN)"
	grep -qx "paddock: network denied: pypi.org (name lookup, network.mode none); to allow it: run again with --allow pypi.org" "$T/err"
	ok $? "$who: run, none: the summary names pypi.org and --allow pypi.org" || sed 's/^/#   /' "$T/err"
	grep -qx "paddock: network denied: registry.npmjs.org (name lookup, network.mode none); to allow it: run again with --allow registry.npmjs.org" "$T/err"
	ok $? "$who: run, none: and registry.npmjs.org"
	out=$(nrun "$who" allowlist fetch)
	printf '%s' "$out" | grep -qF "Tunnel connection failed: 403 Forbidden by paddock: no network.allow rule allows files.pythonhosted.org port 443 (network.mode allowlist); to allow it, run with --allow files.pythonhosted.org"
	ok $? "$who: run, allowlist: urllib (pip) shows the host, the rule and --allow" || sed 's/^/#   /' <<<"$out"
	printf '%s' "$out" | grep -qxF "paddock egress: no network.allow rule allows denied.test port 80 (network.mode allowlist); to allow it, run with --allow denied.test or add 'denied.test' to the profile's network.allow"
	ok $? "$who: run, allowlist: curl shows the proxy's 403 body"
	is "$(grep '^paddock: network denied' "$T/err")" "paddock: network denied: files.pythonhosted.org:443 (no network.allow entry); to allow it: run again with --allow files.pythonhosted.org
paddock: network denied: denied.test:80 (no network.allow entry); to allow it: run again with --allow denied.test" \
		"$who: run, allowlist: the summary lists both destinations with --allow"
	out=$(nrun "$who" none sockets)
	grep -q "network denied" "$T/err"
	is $? 1 "$who: run: no summary when nothing was denied"
}

serve_loopback() {
	local who=$1 mode id w body
	for mode in none allowlist; do
		body='{}'
		[ "$mode" = allowlist ] && body='{"overrides":{"network":{"mode":"allowlist","allow":["example.com"]}}}'
		api "$who" POST /v1/sandboxes "$body"
		id=$(jq_get "$BODY" id)
		is "$CODE" 201 "$who: serve: a sandbox in network.mode $mode" || continue
		for w in sockets http db resolve; do
			api "$who" POST "/v1/sandboxes/$id/exec" \
				"$(jq -cn --arg s "$(cat "$W")" --arg w "$w" '{argv: ["sh", "-c", $s, "sh", $w]}')"
			if [ "$w" = resolve ]; then
				is "$(jq_get "$BODY" stdout.text)" "gaierror -2 Name or service not known
getent: 2" "$who: serve, $mode: a name lookup fails at once and for good"
			else
				is "$(jq_get "$BODY" exit_code) $(jq_get "$BODY" stdout.text)" \
					"0 $(eval "echo \"\$WANT_$w\"")" "$who: serve, $mode: $w on the sandbox's loopback"
			fi
		done
		api "$who" DELETE "/v1/sandboxes/$id"
	done
}

# What the user did through the daemon: `paddock exec ID -- getent hosts pypi.org` in a sandbox
# in network.mode none, sync and --stream. The lookup fails, and at the exec's end stderr says
# what was denied and the option that allows it; --quiet hides that; an exec that was denied
# nothing prints nothing (the list is the exec's own); the API answer carries it as "denied".
serve_denied() {
	local who=$1 id s want
	want="paddock: network denied: pypi.org (name lookup, network.mode none); to allow it: create a sandbox with --allow pypi.org"
	api "$who" POST /v1/sandboxes '{}'
	id=$(jq_get "$BODY" id)
	is "$CODE" 201 "$who: serve: a sandbox in network.mode none for exec's summary" || return 1
	for s in --output-cap=16384 --stream; do
		as "$who" "$T/bin/paddock" exec "$s" "$id" -- getent hosts pypi.org >"$T/out" 2>"$T/err"
		is "$?|$(grep '^paddock: network denied' "$T/err")" "2|$want" \
			"$who: exec $s: getent fails and the summary names pypi.org and --allow pypi.org" ||
			sed 's/^/#   /' "$T/err"
	done
	as "$who" "$T/bin/paddock" exec --quiet "$id" -- getent hosts pypi.org >"$T/out" 2>"$T/err"
	is "$?|$(grep -c 'network denied' "$T/err")" "2|0" "$who: exec --quiet: no summary"
	as "$who" "$T/bin/paddock" exec "$id" -- true >"$T/out" 2>"$T/err"
	is "$?|$(grep -c 'network denied' "$T/err")" "0|0" \
		"$who: exec of a command denied nothing: no summary (an earlier exec's denial is not repeated)"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["getent","hosts","pypi.org"]}'
	is "$(jq_get "$BODY" exit_code) $(jq_get "$BODY" denied.0.dest) $(jq_get "$BODY" denied.0.allow) $(jq_get "$BODY" denied_more)" \
		"2 pypi.org pypi.org 0" "$who: serve: the exec result lists the denied destination and its --allow"
	api "$who" DELETE "/v1/sandboxes/$id"
}

for who in root user; do
	prun_cmd "$who"
	run_loopback "$who"
	run_denied "$who"
	if have_supervisor; then
		serve_start "$who"
		ok $? "$who: the daemon starts"
		serve_loopback "$who"
		serve_denied "$who"
		serve_stop "$who"
	fi
done
done_testing
