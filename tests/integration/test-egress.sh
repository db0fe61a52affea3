#!/bin/bash
# network.mode allowlist: the egress proxy, as root and as nobody. An origin server runs on
# 127.0.0.1 outside the sandbox; curl and a probe run inside. Allowed requests get the
# body, denied ones a 403; every bypass attempt fails with its own errno; malformed,
# oversized, pipelined and slow requests; budgets; net.connect events. Only loopback is used.
set -u
. "$(dirname "$0")/lib-run.sh"
: "${TESTS_DIR:?TESTS_DIR must name the tests directory}"

for tool in curl python3; do
	if ! command -v "$tool" >/dev/null; then
		echo "Bail out! $tool is not installed (make setup installs it)"
		exit 1
	fi
done
# The probe lives in the workspace ($T/home), which the sandbox sees at its own path.
cp "$TESTS_DIR/integration/egress-probe.py" "$T/home/egress-probe"
chmod 0644 "$T/home/egress-probe"
PROBE=$T/home/egress-probe

python3 "$TESTS_DIR/integration/egress-origin.py" "$T/origin.port" "$T/origin.log" &
ORIGIN_PID=$!
# An origin whose kept connections end as they are reused (egress-flaky-origin.py).
python3 "$TESTS_DIR/integration/egress-flaky-origin.py" "$T/flaky.port" "$T/flaky.log" &
FLAKY_PID=$!
trap 'kill $ORIGIN_PID $FLAKY_PID 2>/dev/null; undelegate_cgroup; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -s "$T/origin.port" ] && [ -s "$T/flaky.port" ] && break; sleep 0.05; done
P=$(cat "$T/origin.port")
PF=$(cat "$T/flaky.port")
[ -n "$P" ] && [ -n "$PF" ] || { echo "Bail out! the origin server did not start"; exit 1; }
ORIGIN=http://127.0.0.1:$P

# The proxy's resolver: a hosts file mapping origin.test to loopback, and a resolver that
# answers nothing (a closed port on 127.0.0.1), so no query leaves the machine.
printf '127.0.0.1 origin.test flaky.test other.test\n127.0.0.2 multi.test\n127.0.0.1 multi.test\n' >"$T/hosts"
printf 'nameserver 127.0.0.1:9\noptions timeout:1 attempts:1\n' >"$T/resolv.conf"
chmod 0644 "$T/hosts" "$T/resolv.conf"
PRUN_ENV=(PADDOCK_HOSTS="$T/hosts" PADDOCK_RESOLV_CONF="$T/resolv.conf")

# prun with paddock's own notices (rootless downgrades) left out of the output; keeps its status.
# The summary of denied destinations at the end (docs/egress.md) is test-net.sh's to check.
qrun() {
	prun "$@" 2>&1 | grep -v '^paddock: warning: ' | sed 's/paddock: network denied: .*$//'
	return "${PIPESTATUS[0]}"
}
hex() { printf "$1" | od -An -tx1 | tr -d ' \n'; }

check_allow_deny() {
	local who=$1 out rc ev
	ev=$T/home/ev-$who.jsonl
	rm -f "$ev"
	out=$(qrun "$who" --events "$ev" --allow "127.0.0.1:$P" -- curl -sS -m 10 "$ORIGIN/hello")
	rc=$?
	is "$rc:$out" "0:hello-egress" "$who: an allowed IP:port gets the body through the proxy"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- curl -sS -m 10 -p "$ORIGIN/hello")
	rc=$?
	is "$rc:$out" "0:hello-egress" "$who: a CONNECT tunnel to the allowed IP:port works"
	out=$(qrun "$who" --events "$ev" --allow "127.0.0.1:$P" -- \
		curl -sS -m 10 -w ' %{http_code}' http://denied.test/)
	rc=$?
	is "$rc:$out" "$(printf "0:paddock egress: no network.allow rule allows denied.test port 80 (network.mode allowlist); to allow it, run with --allow denied.test or add 'denied.test' to the profile's network.allow\n 403")" \
		"$who: a host not listed gets 403 naming the reason"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- curl -sS -m 10 -p https://denied.test/)
	rc=$?
	case "$out" in *403*) true ;; *) false ;; esac
	ok $? "$who: a CONNECT to a host not listed is refused with 403 (curl: $rc, $out)"
	out=$(qrun "$who" --allow "127.0.0.1:$((P + 1))" -- \
		curl -sS -m 10 -o /dev/null -w '%{http_code}' "$ORIGIN/hello")
	is "$out" 403 "$who: the right IP on another port is refused"
	python3 - "$ev" <<-'EOF'
	import json, sys
	evs = [json.loads(l) for l in open(sys.argv[1])]
	net = [e["attrs"] for e in evs if e["kind"] == "net.connect"]
	ok = [a for a in net if a["decision"] == "allow" and a["status"] == 200 and a["bytes_received"] > 0
	      and a["address"] == "127.0.0.1" and a["rule"].startswith("127.0.0.1:")]
	deny = [a for a in net if a["decision"] == "deny" and a["host"] == "denied.test" and a["status"] == 403
	        and "no network.allow rule" in a["reason"] and a["rule"] is None]
	sys.exit(0 if len(ok) == 1 and len(deny) == 1 and len(net) == 2 else 1)
	EOF
	ok $? "$who: net.connect events record the allowed request (rule, address, bytes) and the denial"
}

check_names() {
	local who=$1 out rc
	out=$(qrun "$who" --allow "origin.test:$P" -- curl -sS -m 10 -w ' %{http_code}' \
		"http://origin.test:$P/hello")
	case "$out" in *"resolves to 127.0.0.1, a loopback address"*403) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a listed name that resolves to loopback is denied (SSRF): $out"
	out=$(qrun "$who" --allow "ORIGIN.Test.:$P" --allow "127.0.0.1:$P" -- \
		curl -sS -m 10 "http://Origin.TEST:$P/hello")
	is "$out" hello-egress "$who: the same name is allowed once its address is listed (case, dot)"
	out=$(qrun "$who" --allow "*.test:$P" --allow "127.0.0.1:$P" -- \
		curl -sS -m 10 -p "http://origin.test:$P/hello")
	is "$out" hello-egress "$who: a wildcard rule allows a CONNECT to a name below it"
	out=$(qrun "$who" --allow "multi.test:$P" --allow "127.0.0.2:$P" --allow "127.0.0.1:$P" -- \
		curl -sS -m 10 "http://multi.test:$P/hello")
	is "$out" hello-egress "$who: when the first checked address refuses, the next one is tried"
	out=$(qrun "$who" --allow "nowhere.test:$P" -- curl -sS -m 10 -w ' %{http_code}' \
		"http://nowhere.test:$P/")
	case "$out" in *"cannot resolve 'nowhere.test'"*502) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a name that does not resolve gets 502: $out"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" raw \
		"$(hex "GET http://127.1:$P/hello HTTP/1.1\r\n\r\n")")
	is "$out" "HTTP/1.1 400 Bad Request" "$who: a short IPv4 spelling (127.1) is refused as malformed"
}

check_bypass() {
	local who=$1 out rc
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- curl -sS -m 5 --noproxy '*' "$ORIGIN/hello")
	rc=$?
	is "$rc" 7 "$who: curl --noproxy '*' cannot connect (curl exit 7: $out)"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" connect tcp 127.0.0.1 "$P")
	rc=$?
	is "$rc:$out" "1:ECONNREFUSED" "$who: a raw TCP connect to the origin's port reaches nothing (the sandbox's loopback is its own)"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" connect udp 8.8.8.8 53)
	rc=$?
	is "$rc:$out" "1:ENETUNREACH" "$who: UDP to 8.8.8.8:53 has no route"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" connect tcp6 ::1 "$P")
	rc=$?
	is "$rc:$out" "1:ECONNREFUSED" "$who: IPv6 TCP to [::1] reaches nothing of the host's"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" connect udp6 2001:db8::1 53)
	rc=$?
	case "$rc:$out" in 1:ENETUNREACH | 1:EADDRNOTAVAIL | 1:EAFNOSUPPORT) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: IPv6 UDP out has no route ($out)"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" connect tcp 127.0.0.1 22)
	rc=$?
	is "$rc:$out" "1:ECONNREFUSED" "$who: the host's loopback services (127.0.0.1:22) are out of reach"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- sh -c 'python3 "$1" connect tcp 127.0.0.1 3129; \
		python3 -c "import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 8000)); print(\"bound\")" 2>&1 | tail -1' \
		sh "$PROBE")
	is "$out" "ECONNREFUSED
bound" "$who: no other port of the host's; a bind inside binds the sandbox's own loopback"
}

check_http() {
	local who=$1 out rc
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" raw \
		"$(hex 'BREW http://127.0.0.1/ HTTP/1.1\r\n\r\n')")
	is "$out" "HTTP/1.1 405 Method Not Allowed" "$who: an unknown method gets 405"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" raw \
		"$(hex 'GET /hello HTTP/1.1\r\nHost: x\r\n\r\n')")
	is "$out" "HTTP/1.1 400 Bad Request" "$who: an origin-form request gets 400"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" raw \
		"$(hex 'GET http://127.0.0.1/\r\n\001\002 garbage\r\n\r\n')")
	is "$out" "HTTP/1.1 400 Bad Request" "$who: a malformed head gets 400"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" big-head)
	is "$out" "HTTP/1.1 431 Request Header Fields Too Large" "$who: an oversized head gets 431"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" pipeline "$ORIGIN/hello")
	is "$out" "responses=1 closed" \
		"$who: a pipelined second request is not answered; the connection closes after the first"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- curl -sS -v -m 10 "$ORIGIN/hello" "$ORIGIN/hello")
	case "$out" in *"Re-using existing connection"*hello-egress*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: plain HTTP keeps the client connection alive between requests"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- sh -c \
		'curl -sS -m 20 --limit-rate 4M "$1/huge" | wc -c' sh "$ORIGIN")
	is "$out" 8388608 "$who: a large response to a slow reader arrives whole (back-pressure)"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- curl -sS -m 10 --data-binary @/etc/os-release \
		"$ORIGIN/echo" | cmp - /etc/os-release && echo same)
	is "$out" same "$who: a POST body goes up and the answer comes back whole"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- curl -sS -m 10 -H 'Connection: X-Drop' \
		-H 'X-Drop: secret' -H 'Proxy-Authorization: Basic eDp5' "$ORIGIN/headers")
	case "$out" in *[Xx]-[Dd]rop* | *[Pp]roxy-* | *"Connection: keep"*) rc=1 ;; *Host:\ 127.0.0.1:$P*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: hop-by-hop and Proxy-* fields are not forwarded"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" flood 300 \
		curl -sS -m 10 "$ORIGIN/hello")
	is "$out" "$(printf 'connected=300\nhello-egress\ncmd-exit=0')" \
		"$who: 300 idle connections at once (more than the proxy holds) do not break it"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- python3 "$PROBE" hold-then \
		curl -sS -m 5 "$ORIGIN/hello")
	is "$out" "$(printf 'hello-egress\ncmd-exit=0')" \
		"$who: a client that sends nothing does not stall another request"
}

check_budgets() {
	local who=$1 out rc ev
	ev=$T/home/ev-budget-$who.jsonl
	rm -f "$ev"
	cat >"$T/budget.yaml" <<-EOF
	extends: default
	network: {mode: allowlist, allow: ['127.0.0.1:$P']}
	limits: {egress_requests: 2}
	EOF
	out=$(qrun "$who" --events "$ev" --profile "$T/budget.yaml" -- sh -c \
		"for i in 1 2 3; do curl -sS -m 10 -o /dev/null -w '%{http_code} ' $ORIGIN/hello; done")
	is "$out" "200 200 429 " "$who: limits.egress_requests: the third request gets 429"
	grep -q '"kind":"limit.exceeded".*"limit":"egress_requests"' "$ev" ||
		grep -q '"limit":"egress_requests".*"kind":"limit.exceeded"' "$ev"
	ok $? "$who: limit.exceeded egress_requests is recorded"
	cat >"$T/budget.yaml" <<-EOF
	extends: default
	network: {mode: allowlist, allow: ['127.0.0.1:$P']}
	limits: {egress_bytes: 8K}
	EOF
	out=$(qrun "$who" --events "$ev" --profile "$T/budget.yaml" -- sh -c \
		"curl -sS -m 10 $ORIGIN/big 2>/dev/null | wc -c; curl -sS -m 10 -o /dev/null -w '%{http_code}' $ORIGIN/hello" 2>/dev/null)
	set -- $out
	[ "${1:-0}" -lt 65536 ] && [ "${2:-}" = 429 ]
	ok $? "$who: limits.egress_bytes cuts a large response ($1 of 65536 bytes) and then answers 429"
	grep -q '"limit":"egress_bytes"' "$ev"
	ok $? "$who: limit.exceeded egress_bytes is recorded"
	cat >"$T/budget.yaml" <<-EOF
	extends: default
	network: {mode: allowlist, allow: ['127.0.0.1:$P']}
	limits: {egress_connections: 1}
	EOF
	out=$(qrun "$who" --profile "$T/budget.yaml" -- python3 "$PROBE" tunnel-hold "127.0.0.1:$P" \
		curl -sS -m 5 -o /dev/null -w '%{http_code}\n' "$ORIGIN/hello")
	is "$out" "$(printf 'HTTP/1.1 200 Connection established\n429\ncmd-exit=0')" \
		"$who: limits.egress_connections: a second connection while a tunnel is open gets 429"
}

check_modes() {
	local who=$1 out rc
	out=$(qrun "$who" -- sh -c 'echo ${HTTP_PROXY:-unset}; python3 "$1" connect tcp 127.0.0.1 3128' \
		sh "$PROBE")
	case "$out" in "unset"*"ECONNREFUSED" | "unset"*"EACCES") rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: network mode none has no proxy and no variables ($out)"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- sh -c 'echo $HTTP_PROXY $https_proxy $ALL_PROXY "[$NO_PROXY]"')
	is "$out" "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 []" \
		"$who: allowlist mode names the proxy in the environment"
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- sh -c 'ls -l /proc/$$/fd | grep -c socket; python3 "$1" connect tcp 127.0.0.1 3128' sh "$PROBE")
	is "$out" "$(printf '0\nconnected')" "$who: the command holds no socket (not the proxy's listener), and reaches the proxy"
	out=$(qrun "$who" --allow 'a.*.b' -- true)
	rc=$?
	case "$rc:$out" in "122:"*"invalid --allow 'a.*.b'"*wildcard*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: an invalid --allow gives 122 and says why"
	printf 'extends: default\nnetwork: {mode: host}\n' >"$T/host.yaml"
	out=$(qrun "$who" --profile "$T/host.yaml" --allow example.com -- true)
	is "$?" 122 "$who: --allow with network mode host is refused"
}

check_credentials() {
	local who=$1 out rc ev value=s3cr3t-$RANDOM$RANDOM
	ev=$T/home/ev-cred-$who.jsonl
	rm -f "$ev"
	cat >"$T/cred.yaml" <<-EOF
	extends: default
	network:
	  mode: allowlist
	  allow: ['127.0.0.1:$P', 'other.test:$P']
	  credentials:
	    - {host: '127.0.0.1:$P', header: 'Authorization: Bearer \${secret:tok}'}
	EOF
	local saved=("${PRUN_ENV[@]}")
	PRUN_ENV+=(PADDOCK_SECRET_TOK="$value")
	out=$(qrun "$who" --profile "$T/cred.yaml" -e PADDOCK_SECRET_TOK -- sh -c \
		'echo "$PADDOCK_SECRET_TOK"; env | grep -c "$1"' sh "$value")
	case "$out" in "paddock-secret-tok-"*"
0") rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: inside, PADDOCK_SECRET_TOK is a placeholder and no variable holds the value (even with -e)"
	out=$(qrun "$who" --events "$ev" --profile "$T/cred.yaml" -- sh -c \
		'curl -sS -m 10 -H "Authorization: token mine" -H "X-Tok: <$PADDOCK_SECRET_TOK>" "$1/headers"' \
		sh "$ORIGIN")
	case "$out" in *"Authorization: token mine"*) rc=1 ;;
	*"Authorization: Bearer $value"*"X-Tok: <$value>"* | *"X-Tok: <$value>"*"Authorization: Bearer $value"*) rc=0 ;;
	*) rc=1 ;; esac
	ok $rc "$who: the proxy injects the header and swaps the placeholder for the named host"
	out=$(qrun "$who" --events "$ev" --profile "$T/cred.yaml" -- sh -c \
		'curl -sS -m 10 -w " %{http_code}" -H "X-Tok: $PADDOCK_SECRET_TOK" "http://other.test:$1/headers"' \
		sh "$P")
	case "$out" in *"placeholder of secret 'tok' may not be sent to other.test"*403) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a placeholder sent to another host is refused with 403 ($out)"
	python3 - "$ev" "$value" <<-'PY'
	import json, sys
	text = open(sys.argv[1]).read()
	evs = [json.loads(l) for l in text.splitlines()]
	cred = [e["attrs"] for e in evs if e["kind"] == "net.credential"]
	inj = [a for a in cred if a["decision"] == "inject" and a["secret"] == "tok" and a["header"] == "Authorization"]
	deny = [a for a in cred if a["decision"] == "deny" and a["host"] == "other.test"]
	sys.exit(0 if len(inj) == 1 and len(deny) == 1 and sys.argv[2] not in text else 1)
	PY
	ok $? "$who: net.credential records the injection and the refusal, never the value"
	# The secret's value planted in argv: the traced exec records argv, and the audit store
	# and the events file get it redacted (the value is registered with the event stream).
	rm -f "$ev"
	qrun "$who" --events "$ev" --profile "$T/cred.yaml" -- sh -c 'exit 0' sh "$value" >/dev/null
	! grep -q "$value" "$ev" && grep -q 'REDACTED:tok' "$ev"
	ok $? "$who: the secret's value in a command's argv is redacted in the events"
	PRUN_ENV=("${saved[@]}")
	out=$(qrun "$who" --profile "$T/cred.yaml" -- true)
	rc=$?
	case "$rc:$out" in "125:"*"secret 'tok': set PADDOCK_SECRET_TOK"*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a credential whose secret is not set stops the sandbox (125)"
}

# A kept upstream connection that the server closes as it is reused: an idempotent request
# is sent once more on a fresh connection, a POST gets 502.
check_retry() {
	local who=$1 out ev=$T/home/ev-retry-$who.jsonl
	rm -f "$ev"
	: >"$T/flaky.log"
	out=$(qrun "$who" --events "$ev" --allow "flaky.test:$PF" --allow "127.0.0.1:$PF" -- python3 -c '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=10)
for m, p in (("GET", "a"), ("GET", "b"), ("PUT", "c"), ("GET", "bye"), ("GET", "e"), ("POST", "d")):
    c.request(m, "http://flaky.test:%s/%s" % (sys.argv[1], p), body=b"xyz" if m in ("PUT", "POST") else None)
    r = c.getresponse()
    print(r.status, r.read().decode().strip())' "$PF")
	is "$out" "200 GET /a 0
200 GET /b 0
200 PUT /c 3
200 GET /bye 0
200 GET /e 0
502 paddock egress: the upstream server closed the connection before a whole response" \
		"$who: GET and PUT on a kept connection the server closed are answered (retried); a POST gets 502"
	# Connections numbered from 1 for this run (the origin counts across runs).
	is "$(awk '{ if (!($2 in m)) m[$2] = ++k; $2 = m[$2]; print }' "$T/flaky.log")" "conn 1 req 1 GET /a answered
conn 1 req 2 GET /b closed
conn 2 req 1 GET /b answered
conn 2 req 2 PUT /c closed
conn 3 req 1 PUT /c answered
conn 3 req 2 GET /bye closed
conn 4 req 1 GET /bye answered
conn 5 req 1 GET /e answered
conn 5 req 2 POST /d closed" "$who: ... the origin saw each retry on a fresh connection, and the POST only once"
	python3 - "$ev" <<-'PY'
	import json, sys
	net = [json.loads(l)["attrs"] for l in open(sys.argv[1])]
	net = [a for a in net if a.get("method") in ("GET", "PUT", "POST")]
	st = [a["status"] for a in net]
	retried = [bool(a.get("retried")) for a in net]
	sys.exit(0 if st == [200] * 5 + [502] and retried[1:4] == [True] * 3 and not retried[0]
	         and not retried[5] else 1)
	PY
	ok $? "$who: net.connect marks the retried requests (retried: true) and the POST's 502"
}

# Placeholders in the request target and body, sent to a host no credential rule of their
# secret names: refused (403) and recorded; bodies are scanned whole up to 1 MiB, and
# beyond that as they stream. A placeholder in a body to its own host passes unchanged.
check_body_placeholders() {
	local who=$1 out ev=$T/home/ev-body-$who.jsonl value=s3cr3t-$RANDOM$RANDOM
	rm -f "$ev"
	cat >"$T/bcred.yaml" <<-EOF
	extends: default
	network:
	  mode: allowlist
	  allow: ['127.0.0.1:$P', 'other.test:$P']
	  credentials:
	    - {host: '127.0.0.1:$P', header: 'Authorization: Bearer \${secret:tok}'}
	EOF
	local saved=("${PRUN_ENV[@]}")
	PRUN_ENV+=(PADDOCK_SECRET_TOK="$value")
	: >"$T/origin.log"
	out=$(qrun "$who" --events "$ev" --profile "$T/bcred.yaml" -- sh -c \
		'curl -sS -m 10 -w " %{http_code}" "http://other.test:$1/hello?t=$PADDOCK_SECRET_TOK"' sh "$P")
	case "$out" in *"placeholder of secret 'tok' may not be sent to other.test"*403) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a placeholder in the query of a URL to another host: 403 ($out)"
	cat >"$T/home/body-client.py" <<-'PY'
	import http.client, os, sys
	ph = os.environ["PADDOCK_SECRET_TOK"].encode()
	host, case = sys.argv[1], sys.argv[2]
	c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
	url = "http://%s/echo" % host
	if case == "small":
	    c.request("POST", url, body=b"token=" + ph)
	elif case == "split":
	    c.request("POST", url, body=iter([b"a" * 100 + ph[:9], ph[9:] + b"b" * 100]),
	              headers={"Transfer-Encoding": "chunked"}, encode_chunked=True)
	else:  # big, bigclean: 2 MiB; the placeholder straddles the first MiB
	    body = bytearray(b"z" * (2 << 20))
	    if case == "big":
	        at = (1 << 20) - 9
	        body[at:at + len(ph)] = ph
	    c.request("POST", url, body=bytes(body))
	try:
	    r = c.getresponse()
	    data = r.read()
	    print(r.status, len(data), data.decode(errors="replace").strip()[:200])
	except (ConnectionError, http.client.HTTPException) as e:
	    print("error", type(e).__name__)
	PY
	chmod 0644 "$T/home/body-client.py"
	out=$(qrun "$who" --events "$ev" --profile "$T/bcred.yaml" -- python3 body-client.py "other.test:$P" small)
	case "$out" in "403 "*"placeholder of secret 'tok' may not be sent to other.test port $P (in the request body"*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a placeholder in a small body to another host: 403 ($out)"
	out=$(qrun "$who" --events "$ev" --profile "$T/bcred.yaml" -- python3 body-client.py "other.test:$P" split)
	case "$out" in "403 "*"(in the request body"*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a placeholder split across two chunks of a chunked body: 403 ($out)"
	[ ! -s "$T/origin.log" ]
	ok $? "$who: ... nothing of those requests reached the origin"
	out=$(qrun "$who" --events "$ev" --profile "$T/bcred.yaml" -- python3 body-client.py "other.test:$P" big)
	case "$out" in "403 "*"(in the request body"* | "error "*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a 2 MiB body with the placeholder across its first MiB: refused ($out)"
	# The first MiB was held and went up; the streamed rest was cut at the placeholder's end.
	awk -v max=$((1 << 20)) '$2 > max { bad = 1 } END { exit bad }' "$T/origin.log"
	ok $? "$who: ... the origin got at most the held first MiB, never the placeholder whole ($(tr '\n' ' ' <"$T/origin.log"))"
	out=$(qrun "$who" --profile "$T/bcred.yaml" -- python3 body-client.py "other.test:$P" bigclean)
	is "${out%% *}:$(tail -1 "$T/origin.log")" "200:echo $((2 << 20))" "$who: the same 2 MiB body without the placeholder goes through"
	out=$(qrun "$who" --profile "$T/bcred.yaml" -- python3 body-client.py "127.0.0.1:$P" small)
	case "$out" in "200 "*"token=paddock-secret-tok-"*) rc=0 ;; *) rc=1 ;; esac
	case "$out" in *"$value"*) rc=1 ;; esac
	ok $rc "$who: a placeholder in a body to its own host passes unchanged (bodies are never swapped)"
	python3 - "$ev" "$value" <<-'PY'
	import json, sys
	text = open(sys.argv[1]).read()
	evs = [json.loads(l) for l in text.splitlines()]
	deny = [e["attrs"] for e in evs if e["kind"] == "net.credential" and e["attrs"]["decision"] == "deny"
	        and e["attrs"]["host"] == "other.test"]
	body = [a for a in deny if "in the request body" in a["reason"]]
	net = [e["attrs"] for e in evs if e["kind"] == "net.connect" and e["attrs"]["status"] == 403
	       and e["attrs"]["decision"] == "deny"]
	sys.exit(0 if len(deny) == 4 and len(body) == 3 and len(net) == 4 and sys.argv[2] not in text else 1)
	PY
	ok $? "$who: net.credential and net.connect record the four refusals (three in bodies)"
	PRUN_ENV=("${saved[@]}")
}

# The proxy-wide bound on held request bodies, lowered to 256 KiB for the test
# (PADDOCK_TEST_EGRESS_HOLD_TOTAL exists for tests only): a request whose body would take the
# total over it gets 503 and is recorded; the others go through; each request's charge is
# returned when its body went up. The refused ones never reach the origin.
check_hold() {
	local who=$1 out ev=$T/home/ev-hold-$who.jsonl
	rm -f "$ev"
	cp "$TESTS_DIR/integration/egress-hold-client.py" "$T/home/hold-client.py"
	chmod 0644 "$T/home/hold-client.py"
	: >"$T/origin.log"
	local saved=("${PRUN_ENV[@]}")
	PRUN_ENV+=(PADDOCK_TEST_EGRESS_HOLD_TOTAL=256K)
	out=$(qrun "$who" --events "$ev" --allow "127.0.0.1:$P" -- python3 hold-client.py "$P")
	is "$out" "B 503 paddock egress: the request bodies the proxy holds would pass their bound (200000 bytes held, 100000 more wanted, at most 262144): try again later
C 503 paddock egress: the request bodies the proxy holds would pass their bound (262144 bytes held, at most 262144): try again later
C2 200 10000
A 200 200000
D 200/200000 200/200000 200/200000 200/200000 200/200000" \
		"$who: bodies past the proxy's hold bound get 503 (at the head, or as a chunked one grows); the rest pass"
	is "$(tr '\n' ' ' <"$T/origin.log")" "echo 10000 echo 200000 $(printf 'echo 200000 %.0s' 1 2 3 4 5)" \
		"$who: ... the refused requests never reached the origin"
	python3 - "$ev" <<-'PY'
	import json, sys
	net = [json.loads(l)["attrs"] for l in open(sys.argv[1]) if '"net.connect"' in l]
	refused = [a for a in net if a["status"] == 503 and a["decision"] == "deny"
	           and "would pass their bound" in a["reason"] and a["bytes_sent"] == 0]
	passed = [a for a in net if a["status"] == 200 and a["decision"] == "allow"]
	sys.exit(0 if len(refused) == 2 and len(passed) == 7 and len(net) == 9 else 1)
	PY
	ok $? "$who: net.connect records the two refusals (503, deny, the reason) and the seven answers"
	PRUN_ENV=("${saved[@]}" PADDOCK_TEST_EGRESS_HOLD_TOTAL=64M)
	out=$(qrun "$who" --allow "127.0.0.1:$P" -- true)
	rc=$?
	case "$rc:$out" in "125:"*"PADDOCK_TEST_EGRESS_HOLD_TOTAL '64M': a size from 1 byte to 33554432 (tests only)"*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: the test-only variable cannot raise the bound: the sandbox does not start (125: $out)"
	PRUN_ENV=("${saved[@]}")
}

# The proxy's events fail closed, as every other event does: the events file is a FIFO whose
# reader leaves after the sandbox's first two events (sandbox.create, process.exec), so the
# proxy's next event (the credential's injection) cannot be written. The request is refused
# (nothing reaches the origin; the client gets the 503 if it reads it before the end), and
# the sandbox is stopped as for any event that cannot be recorded: 125, its command's later
# output never comes. `paddock run` is started with SIGPIPE ignored (trap), so its own later
# writes to the FIFO fail with EPIPE too, instead of ending it.
check_events_fail_closed() {
	local who=$1 out rc fifo=$T/home/ev-fail-$who.fifo got=$T/ev-fail-$who.got
	rm -f "$fifo"
	mkfifo -m 0666 "$fifo"
	cat >"$T/fcred.yaml" <<-EOF
	extends: default
	network:
	  mode: allowlist
	  allow: ['127.0.0.1:$P']
	  credentials:
	    - {host: '127.0.0.1:$P', header: 'Authorization: Bearer \${secret:tok}'}
	EOF
	: >"$T/origin.log"
	head -n 2 "$fifo" >"$got" &
	local reader=$! saved=("${PRUN_ENV[@]}")
	PRUN_ENV+=(PADDOCK_SECRET_TOK="fail-closed-$RANDOM")
	out=$(trap '' PIPE; prun "$who" --no-audit --no-exec-trace --events "$fifo" \
		--profile "$T/fcred.yaml" -- sh -c \
		'sleep 2; curl -sS -m 10 -d ping "$1/echo"; sleep 5; echo after' sh "$ORIGIN" \
		2>"$T/err-fail-$who")
	rc=$?
	PRUN_ENV=("${saved[@]}")
	wait "$reader"
	case "$rc:$out" in
	"125:" | "125:paddock egress: events cannot be recorded: the request is refused and the sandbox is being stopped") rc=0 ;;
	*) rc=1 ;; esac
	ok $rc "$who: a proxy event that cannot be recorded stops the sandbox (125; the command's own output: '$out')"
	grep -q "^paddock: warning: events file: cannot write event 'net.credential'" "$T/err-fail-$who" &&
		grep -q "^paddock: warning: events cannot be recorded: stopping the sandbox" "$T/err-fail-$who"
	ok $? "$who: ... with the same messages as any event failure ($(grep -m1 net.credential "$T/err-fail-$who"))"
	out=$(python3 -c 'import json, sys; print(*(json.loads(l)["kind"] for l in open(sys.argv[1])))' "$got")
	is "$out|$(cat "$T/origin.log")" "sandbox.create process.exec|" \
		"$who: ... the request never reached the origin (the stream ended before the injection)"
}

for who in root user; do
	check_retry "$who"
	check_hold "$who"
	check_body_placeholders "$who"
	check_allow_deny "$who"
	check_names "$who"
	check_bypass "$who"
	check_http "$who"
	check_budgets "$who"
	check_modes "$who"
	check_credentials "$who"
	check_events_fail_closed "$who"
done
done_testing
