#!/bin/bash
# The MCP conformance suite's server scenarios (@modelcontextprotocol/conformance 0.1.16, and
# 0.2.0-alpha.12, which covers 2026-07-28, as conformance-next) against
# `paddock mcp --listen 127.0.0.1:PORT --conformance-fixtures` (the fixture tools, resources
# and prompts the scenarios call: src/mcp/fixtures.c), run by Node 22 as root and as nobody.
#
# Each version has a checked-in baseline of the scenarios expected to fail, each with its
# reason (tests/clients/conformance-baseline-VERSION.yml, passed as --expected-failures).
# Every scenario is a subtest here: one that passes is ok; one that fails is ok only when the
# baseline lists it; one the baseline lists that passes is a failure (a stale baseline: remove
# the entry), as is the runner's own non-zero status (it fails on both too).
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-mcp.sh"
mcp_cgroups

# conformance WHO LABEL PACKAGE BASELINE [ARGS...]: one run of PACKAGE's server scenarios
# (with ARGS), as WHO.
conformance() {
	local who=$1 label=$2 pkg=$3 baseline=$4 rc line name listed
	local bin="$CLIENTS/node_modules/$pkg/dist/index.js"
	shift 4
	[ -f "$bin" ] || { ok 1 "$label: $bin is there (make test-setup)"; return; }
	mcp_listen "$who" --conformance-fixtures || { ok 1 "$label: paddock mcp --listen starts"; return; }
	mkdir -p "$T/conf-$who-$label"
	chmod 0777 "$T/conf-$who-$label"
	(cd "$T/conf-$who-$label" && mcp_as "$who" "$NODE" "$bin" server --url "$MCP_URL" \
		--expected-failures "$baseline" -o "$T/conf-$who-$label/results" "$@") >"$T/conf.out" 2>&1
	rc=$?
	mcp_stop
	# The summary: "✓ NAME: N passed, 0 failed" or "✗ NAME: ...".
	while IFS= read -r line; do
		case $line in
		"✓ "*) name=${line#✓ } ;;
		"✗ "*) name=${line#✗ } ;;
		*) continue ;;
		esac
		name=${name%%:*}
		# The scenario's entries (SCENARIO, or SCENARIO:CHECK for one check) and their reasons.
		listed=$(grep -E "^ *- $name( |:|$)" "$baseline" | sed -n 's/.*# *//p' | sort -u |
			tr '\n' ';')
		listed=${listed%;}
		case "$line:$listed" in
		"✓ "*:) ok 0 "$label: $who: $name passes" ;;
		"✓ "*) ok 1 "$label: $who: $name passes but the baseline still lists it: remove it" ;;
		"✗ "*:) ok 1 "$label: $who: $name passes"
			echo "#   ${line}" ;;
		*) ok 0 "$label: $who: $name fails as the baseline says: $listed" ;;
		esac
	done <"$T/conf.out"
	grep -q '^=== SUMMARY ===' "$T/conf.out"
	ok $? "$label: $who: the runner printed its summary"
	ok $rc "$label: $who: the runner exits 0 against its baseline (status $rc)"
	[ "$rc" = 0 ] || grep -v '^Running\|^Results saved\|^=== Running\|^$' "$T/conf.out" | tail -30 | sed 's/^/#   /'
	[ -z "$MCP_RC" ] || is "$MCP_RC" 0 "$label: $who: the server ends with 0 on SIGTERM"
}

for who in root user; do
	conformance "$who" conformance-0.1 @modelcontextprotocol/conformance \
		"$CLIENTS/conformance-baseline-0.1.yml"
	conformance "$who" conformance-0.2 conformance-next "$CLIENTS/conformance-baseline-0.2.yml"
	conformance "$who" conformance-0.2-2026-07-28 conformance-next \
		"$CLIENTS/conformance-baseline-0.2.yml" --requirements 2026-07-28
done
done_testing
