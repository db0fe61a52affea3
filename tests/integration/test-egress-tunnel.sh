#!/bin/bash
# The egress proxy's data path, as root and as nobody: CONNECT tunnels (read/write through a buffer
# per direction) move large and small streams byte-exact both ways, pass a half-close on, end on a
# reset, are cut exactly at limits.egress_bytes, and a tunnel whose reader stalls does not
# stall another; plain HTTP reuses one upstream connection for a client's two requests.
# Origins on 127.0.0.1 outside the sandbox (egress-tunnel-origin.py); the client
# (egress-tunnel-client.py) runs inside.
set -u
. "$(dirname "$0")/lib-run.sh"
: "${TESTS_DIR:?TESTS_DIR must name the tests directory}"

for tool in curl python3; do
	if ! command -v "$tool" >/dev/null; then
		echo "Bail out! $tool is not installed (make setup installs it)"
		exit 1
	fi
done
cp "$TESTS_DIR/integration/egress-tunnel-client.py" "$T/home/tunnel-client"
chmod 0644 "$T/home/tunnel-client"
CLIENT=$T/home/tunnel-client
mkdir "$T/origin"
python3 "$TESTS_DIR/integration/egress-tunnel-origin.py" "$T/origin" &
ORIGIN_PID=$!
trap 'kill $ORIGIN_PID 2>/dev/null; undelegate_cgroup; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -s "$T/origin/ports" ] && break; sleep 0.05; done
read -r TP HP <"$T/origin/ports" # the file has no final newline: read's status is 1
[ -n "${HP:-}" ] || { echo "Bail out! the origin servers did not start"; exit 1; }
ALLOW=(--allow "127.0.0.1:$TP" --allow "127.0.0.1:$HP")
SIZE=$((128 << 20))

qrun() {
	prun "$@" 2>&1 | grep -v '^paddock: warning: '
	return "${PIPESTATUS[0]}"
}
# sha256 of the origin's stream SEED of N bytes, computed here.
stream_sum() {
	python3 - "$1" "$2" <<-'EOF'
	import hashlib, random, sys
	n, rng, h = int(sys.argv[1]), random.Random(int(sys.argv[2])), hashlib.sha256()
	while n > 0:
	    k = min(n, 1 << 16)
	    h.update(rng.randbytes(k))
	    n -= k
	print(h.hexdigest())
	EOF
}
# The net.connect events of METHOD in FILE, one line each: "sent received status reason".
events() {
	python3 - "$1" "$2" <<-'EOF'
	import json, sys
	for l in open(sys.argv[1]):
	    e = json.loads(l)
	    a = e["attrs"]
	    if e["kind"] == "net.connect" and a.get("method") == sys.argv[2]:
	        print(a["bytes_sent"], a["bytes_received"], a.get("status"), a.get("reason"),
	              a.get("upstream_reused"))
	    elif e["kind"] == "limit.exceeded":
	        print("limit", a["limit"], a["value"])
	EOF
}

WANT=$(stream_sum "$SIZE" 11)

check_stream() {
	local who=$1 out rc line ev=$T/home/ev-stream-$1.jsonl
	rm -f "$ev"
	out=$(qrun "$who" --events "$ev" "${ALLOW[@]}" -- python3 "$CLIENT" download "$TP" "$SIZE" 11)
	rc=$?
	is "$rc:$out" "0:$SIZE $WANT" "$who: 128 MiB down a CONNECT tunnel arrive whole (sha256 both ends)"
	line="SEND $SIZE 11"
	out=$(events "$ev" CONNECT)
	is "$out" "$(printf '%s %s 200 None None' $((${#line} + 1)) "$SIZE")" \
		"$who: net.connect counts the bytes each way exactly (the command line up, the stream down)"
	out=$(qrun "$who" "${ALLOW[@]}" -- python3 "$CLIENT" upload "$TP" "$SIZE" 11)
	rc=$?
	is "$rc:$out" "0:$SIZE $WANT" \
		"$who: 128 MiB up a tunnel arrive whole, and the origin's answer after the client's shutdown(SHUT_WR) comes back (half-close)"
	out=$(qrun "$who" "${ALLOW[@]}" -- python3 "$CLIENT" sizes "$TP" 0 1 1000 16383 16384 16385 \
		32768 1048575 1048576 1048577 3000000)
	rc=$?
	is "$rc:$out" "0:0:ok 1:ok 1000:ok 16383:ok 16384:ok 16385:ok 32768:ok 1048575:ok 1048576:ok 1048577:ok 3000000:ok" \
		"$who: streams of every size around the buffer's first size (16 KiB) and its cap (1 MiB) arrive whole and end (the origin's end right behind its last bytes)"
	out=$(qrun "$who" "${ALLOW[@]}" -- timeout 60 python3 "$CLIENT" echo "$TP" 300)
	rc=$?
	is "$rc:$out" "0:echo 300 ok" \
		"$who: 300 small messages each way, each waited for (a handshake's pattern), then the half-close"
	out=$(qrun "$who" "${ALLOW[@]}" -- python3 "$CLIENT" eager "$TP" 1000000 11)
	rc=$?
	is "$rc:$out" "0:1000000 $(stream_sum 1000000 11)" \
		"$who: bytes sent in the same write as the CONNECT go up first, before the relayed ones"
	rm -f "$ev"
	out=$(qrun "$who" --events "$ev" "${ALLOW[@]}" -- python3 "$CLIENT" reset "$TP")
	rc=$?
	is "$rc:$out" "0:eof after 0 bytes" "$who: the origin's reset ends the tunnel: the client sees its end"
	out=$(events "$ev" CONNECT)
	is "$out" "6 0 200 a side of the tunnel failed None" "$who: net.connect records the failed side"
}

check_budget() {
	local who=$1 out rc ev=$T/home/ev-budget-$1.jsonl line="SEND 4194304 3"
	rm -f "$ev"
	cat >"$T/budget.yaml" <<-EOF
	extends: default
	network: {mode: allowlist, allow: ['127.0.0.1:$TP']}
	limits: {egress_bytes: 1M}
	EOF
	cat >"$T/budget-small.yaml" <<-EOF
	extends: default
	network: {mode: allowlist, allow: ['127.0.0.1:$TP']}
	limits: {egress_bytes: 20000}
	EOF
	# 20000 bytes: the cut falls after the first buffer (16 KiB) grew.
	out=$(qrun "$who" --profile "$T/budget-small.yaml" -- python3 "$CLIENT" download "$TP" 4194304 3)
	rc=$?
	is "$rc:${out%% *}" "0:$((20000 - ${#line} - 1))" \
		"$who: limits.egress_bytes of 20000 cuts a tunnel at exactly the limit (past the first buffer)"
	# 1 MiB in all: the 15-byte command line up, so 1048576 - 15 bytes down, and not one more.
	out=$(qrun "$who" --events "$ev" --profile "$T/budget.yaml" -- python3 "$CLIENT" download "$TP" 4194304 3)
	rc=$?
	is "$rc:${out%% *}" "0:$((1048576 - ${#line} - 1))" \
		"$who: limits.egress_bytes cuts a tunnel at exactly the limit"
	out=$(events "$ev" CONNECT)
	is "$out" "$(printf 'limit egress_bytes 1048576\n15 %s 200 the egress byte budget was spent: the tunnel was closed None' $((1048576 - 15)))" \
		"$who: limit.exceeded, and net.connect with bytes each way adding up to the limit"
}

check_slow() {
	local who=$1 out rc
	out=$(qrun "$who" "${ALLOW[@]}" -- timeout 60 python3 "$CLIENT" slow "$TP" $((32 << 20)))
	rc=$?
	case "$rc:$out" in "0:other=whole in "*"stalled=whole") rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a tunnel whose reader stalls does not stall another (32 MiB meanwhile), and still arrives whole: $out"
}

check_keepalive() {
	local who=$1 out rc before after ev=$T/home/ev-ka-$1.jsonl
	rm -f "$ev"
	before=$(cat "$T/origin/http-accepts")
	out=$(qrun "$who" --events "$ev" "${ALLOW[@]}" -- curl -sS -m 10 \
		"http://127.0.0.1:$HP/hello" "http://127.0.0.1:$HP/hello")
	rc=$?
	after=$(cat "$T/origin/http-accepts")
	is "$rc:$out:$((after - before))" "$(printf '0:hello-tunnel\nhello-tunnel:1')" \
		"$who: two plain HTTP requests of one client connection reach the origin over one connection"
	out=$(events "$ev" GET | cut -d' ' -f3-)
	is "$out" "$(printf '200 None False\n200 None True')" \
		"$who: one net.connect per request; the second says upstream_reused"
	before=$(cat "$T/origin/http-accepts")
	out=$(qrun "$who" "${ALLOW[@]}" -- curl -sS -m 10 -H 'Connection: close' \
		"http://127.0.0.1:$HP/hello" "http://127.0.0.1:$HP/hello")
	after=$(cat "$T/origin/http-accepts")
	is "$out:$((after - before))" "$(printf 'hello-tunnel\nhello-tunnel:2')" \
		"$who: a client that asks to close gets a new upstream connection per request"
}

for who in root user; do
	check_stream "$who"
	check_budget "$who"
	check_slow "$who"
	check_keepalive "$who"
done
done_testing
