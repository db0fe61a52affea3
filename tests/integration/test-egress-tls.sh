#!/bin/bash
# HTTPS credential injection (network.credentials over CONNECT), as root and as nobody.
# A test CA (openssl CLI) signs the certificates of HTTPS origin servers on 127.0.0.1 outside
# the sandbox; the proxy trusts it through PADDOCK_EGRESS_CA_FILE. Each origin appends the
# heads it receives to a log outside the sandbox, and never echoes them, so the test can see
# what reached the server while the sandbox only ever sees the placeholder.
set -u
. "$(dirname "$0")/lib-run.sh"
: "${TESTS_DIR:?TESTS_DIR must name the tests directory}"

for tool in curl python3 openssl; do
	if ! command -v "$tool" >/dev/null; then
		echo "Bail out! $tool is not installed (make setup installs it)"
		exit 1
	fi
done

# ---- the test PKI: a test CA, and leaves for the origins ----
PKI=$T/pki
mkdir -p "$PKI"
mkcert() { # NAME SUBJECT-CN SAN ISSUER(ca|rogue)
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PKI/$1.key" \
		-out "$PKI/$1.csr" -subj "/CN=$2" 2>/dev/null &&
		printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\nauthorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n' "$3" >"$PKI/$1.ext" &&
		openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/$4.pem" -CAkey "$PKI/$4.key" \
			-CAcreateserial -out "$PKI/$1.pem" -days 2 -extfile "$PKI/$1.ext" 2>/dev/null
}
mkca() { # NAME CN
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$PKI/$1.key" \
		-out "$PKI/$1.pem" -days 2 -subj "/CN=$2" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
		2>/dev/null
}
mkca ca "paddock test origin CA" && mkca rogue "a CA nobody trusts" &&
	mkcert good api.test "DNS:api.test,DNS:plain.test" ca &&
	mkcert wrongname elsewhere.test "DNS:elsewhere.test" ca &&
	mkcert untrusted rogue.test "DNS:rogue.test" rogue ||
	{ echo "Bail out! openssl cannot make the test certificates"; exit 1; }
chmod 0755 "$PKI" && chmod 0644 "$PKI"/*
# The sandbox may read the test CA from the workspace (for the no-interception check).
cp "$PKI/ca.pem" "$T/home/test-ca.pem"
chmod 0644 "$T/home/test-ca.pem"

ORIGINS=()
start_origin() { # NAME -> prints the port
	python3 "$TESTS_DIR/integration/egress-tls-origin.py" "$T/$1.port" "$PKI/$1.pem" \
		"$PKI/$1.key" "$T/$1.log" &
	ORIGINS+=($!)
	for _ in $(seq 100); do [ -s "$T/$1.port" ] && break; sleep 0.05; done
	touch "$T/$1.log"
}
start_origin good
start_origin wrongname
start_origin untrusted
trap 'kill "${ORIGINS[@]}" 2>/dev/null; undelegate_cgroup; rm -rf "$T"' EXIT
PA=$(cat "$T/good.port")
PB=$(cat "$T/wrongname.port")
PC=$(cat "$T/untrusted.port")
[ -n "$PA" ] && [ -n "$PB" ] && [ -n "$PC" ] || { echo "Bail out! an origin did not start"; exit 1; }

printf '127.0.0.1 api.test plain.test badname.test rogue.test unlisted.test\n' >"$T/hosts"
printf 'nameserver 127.0.0.1:9\noptions timeout:1 attempts:1\n' >"$T/resolv.conf"
chmod 0644 "$T/hosts" "$T/resolv.conf"
VALUE=s3cr3t-$RANDOM$RANDOM$RANDOM
OTHER=0th3r-$RANDOM$RANDOM
PRUN_ENV=(PADDOCK_HOSTS="$T/hosts" PADDOCK_RESOLV_CONF="$T/resolv.conf"
	PADDOCK_EGRESS_CA_FILE="$PKI/ca.pem" PADDOCK_SECRET_TOK="$VALUE" PADDOCK_SECRET_OTHER="$OTHER")

# Loopback origins: the names resolve to 127.0.0.1, which is listed so that the SSRF check
# lets them through (docs/egress.md).
cat >"$T/tls.yaml" <<EOF
extends: default
network:
  mode: allowlist
  allow: ['api.test:$PA', 'plain.test:$PA', 'badname.test:$PB', 'rogue.test:$PC',
          '127.0.0.1:$PA', '127.0.0.1:$PB', '127.0.0.1:$PC']
  credentials:
    - {host: 'api.test:$PA', header: 'Authorization: Bearer \${secret:tok}'}
    - {host: 'badname.test:$PB', header: 'Authorization: Bearer \${secret:tok}'}
    - {host: 'rogue.test:$PC', header: 'Authorization: Bearer \${secret:tok}'}
    - {host: 'elsewhere.test', header: 'X-Api-Key: \${secret:other}'}
EOF
cat >"$T/nocred.yaml" <<EOF
extends: default
network:
  mode: allowlist
  allow: ['api.test:$PA', '127.0.0.1:$PA']
EOF
chmod 0644 "$T/tls.yaml" "$T/nocred.yaml"

# prun with paddock's own notices (rootless downgrades) left out; keeps its status.
qrun() {
	prun "$@" 2>&1 | grep -v '^paddock: warning: '
	return "${PIPESTATUS[0]}"
}
has() { case "$1" in *"$2"*) return 0 ;; *) return 1 ;; esac; }

scratch_dirs() { ls -d "$T"/run-*/run-* 2>/dev/null | sort; }

# A scratch directory made by mkdtemp after `before` whose bundle is written: its path.
new_scratch() { # BEFORE [EXCEPT]
	local d
	for _ in $(seq 100); do
		d=$(comm -13 <(echo "$1") <(scratch_dirs) | grep -vxF "${2:-/}" | head -1)
		[ -n "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ] && { echo "$d"; return 0; }
		sleep 0.05
	done
	return 1
}

# A run killed with SIGKILL cannot remove its scratch directory. Each run holds a lock on
# its own (flock, gone with the process), and the next run that makes one removes those
# older than a minute that no one holds: the killed run's, not a live one's. The minute
# (a run locks its directory a few system calls after making it) is given with touch.
check_killed_scratch() {
	local who=$1 before killed live bg_k bg_l pid
	before=$(scratch_dirs)
	qrun "$who" --profile "$T/tls.yaml" -- sleep 41 >/dev/null &
	bg_k=$!
	killed=$(new_scratch "$before")
	pid=$(pgrep -f 'paddock run .*tls.yaml -- sleep 41' | head -1)
	[ -n "$killed" ] && [ -n "$pid" ] && kill -KILL "$pid"
	ok $? "$who: a run with the sandbox CA was killed with SIGKILL (pid ${pid:-none}, ${killed:-no directory})"
	wait "$bg_k"
	[ -d "$killed" ]
	ok $? "$who: its scratch directory is left"
	qrun "$who" --profile "$T/tls.yaml" -- sleep 4 >/dev/null &
	bg_l=$!
	live=$(new_scratch "$before" "$killed")
	touch -d '-2 minutes' "$killed" "$live"
	out=$(qrun "$who" --profile "$T/tls.yaml" -- true 2>&1)
	is "$?:$out" "0:" "$who: the next run with the sandbox CA ends well"
	[ ! -e "$killed" ]
	ok $? "$who: it removed the killed run's scratch directory, held by no one"
	[ -n "$live" ] && [ -f "$live/ca-bundle.crt" ]
	ok $? "$who: not the live run's, older than a minute too but locked (${live:-none})"
	wait "$bg_l"
	is "$(scratch_dirs)" "$before" "$who: the live run removed its own at its end"
}

check_injection() {
	local who=$1 out rc ev=$T/home/ev-$who.jsonl log
	rm -f "$ev"
	: >"$T/good.log"
	out=$(qrun "$who" --events "$ev" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -v -m 10 -H "X-Tok: <$PADDOCK_SECRET_TOK>" -H "Authorization: mine" "https://api.test:$1/headers" 2>&1' \
		sh "$PA")
	rc=$?
	log=$(cat "$T/good.log")
	echo "$out" >"$T/out-$who.txt"
	has "$out" "seen" && has "$out" "> X-Tok: <paddock-secret-tok-" && ! has "$out" "$VALUE"
	ok $? "$who: curl over HTTPS gets its answer; the sandbox sent only the placeholder (rc $rc)"
	has "$log" "Authorization: Bearer $VALUE" && has "$log" "X-Tok: <$VALUE>" &&
		! has "$log" "Authorization: mine" && ! has "$log" "paddock-secret" &&
		has "$log" "Host: api.test:$PA"
	ok $? "$who: the origin received the secret in the configured header and in place of the placeholder"
	has "$out" "issuer: O=paddock; CN=paddock sandbox CA" && has "$out" "ALPN: server accepted http/1.1"
	ok $? "$who: the sandbox saw a leaf of its own CA (trusted through the system bundle), HTTP/1.1"
	: >"$T/good.log"
	out=$(qrun "$who" --events "$ev" --profile "$T/tls.yaml" -- python3 -c '
import os, sys, urllib.request as u
r = u.Request("https://api.test:%s/headers" % sys.argv[1], headers={"X-Tok": os.environ["PADDOCK_SECRET_TOK"]})
print(u.urlopen(r, timeout=10).read().decode(), end="")' "$PA")
	rc=$?
	log=$(cat "$T/good.log")
	is "$rc:$out" "0:seen" "$who: Python urllib over HTTPS through the proxy (SSL_CERT_FILE)"
	has "$log" "User-Agent: Python-urllib" && has "$log" "Authorization: Bearer $VALUE" &&
		has "$log" "X-Tok: $VALUE"
	ok $? "$who: ... and the origin got the secret from urllib's request"
	out=$(qrun "$who" --profile "$T/tls.yaml" -- sh -c \
		'head -c 300000 /dev/zero | tr "\0" b | curl -sS -m 20 --data-binary @- "https://api.test:$1/echo" | wc -c' sh "$PA")
	is "$out" 300000 "$who: a 300 kB request body goes up through the intercepted tunnel and comes back whole"
	out=$(qrun "$who" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -m 10 -o /dev/null -w "%{http_code}" -H "X-Big: $(head -c 17000 /dev/zero | tr "\0" a)" "https://api.test:$1/hello"' sh "$PA")
	is "$out" 431 "$who: inside an intercepted tunnel, a head over 16 KiB gets 431 from the proxy"
	python3 - "$ev" "$PA" <<-'PY'
	import json, sys
	evs = [json.loads(l) for l in open(sys.argv[1])]
	net = [e["attrs"] for e in evs if e["kind"] == "net.connect"]
	cred = [e["attrs"] for e in evs if e["kind"] == "net.credential"]
	port = int(sys.argv[2])
	tun = [a for a in net if a["method"] == "CONNECT" and a.get("intercepted") and a["host"] == "api.test"
	       and a["port"] == port and a["decision"] == "allow" and a["status"] == 200]
	req = [a for a in net if a["method"] == "GET" and a.get("intercepted") and a["host"] == "api.test"
	       and a["status"] == 200 and a["bytes_sent"] > 0 and a["bytes_received"] > 0]
	inj = [a for a in cred if a["decision"] == "inject" and a["secret"] == "tok" and a["host"] == "api.test"
	       and a["header"] == "Authorization"]
	sys.exit(0 if len(tun) == 2 and len(req) == 2 and len(inj) == 2 else 1)
	PY
	ok $? "$who: net.connect records the intercepted CONNECT and each request in it; net.credential the injection"
}

check_trust_path() {
	local who=$1 out rc n_host before after during owner bg
	n_host=$(grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt)
	before=$(scratch_dirs)
	out=$(qrun "$who" --profile "$T/tls.yaml" -- sh -c '
		grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt
		grep -c "PRIVATE KEY" /etc/ssl/certs/ca-certificates.crt
		echo x 2>&1 >>/etc/ssl/certs/ca-certificates.crt || echo refused
		echo "$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE"' 2>&1 |
		grep -v 'Read-only file system')
	B=/etc/ssl/certs/ca-certificates.crt
	is "$out" "$((n_host + 1))
0
refused
$B $B $B $B" "$who: the bundle inside is the host's plus the sandbox CA, no key, read-only; four variables name it"
	after=$(scratch_dirs)
	is "$after" "$before" "$who: the per-run scratch directory is gone after the run"
	# While a sandbox runs, its scratch directory holds the bundle and nothing else.
	qrun "$who" --profile "$T/tls.yaml" -- sleep 3 >/dev/null &
	bg=$!
	for _ in $(seq 60); do
		during=$(comm -13 <(echo "$before") <(scratch_dirs))
		# Made by mkdtemp, then the bundle is written: wait for both.
		[ -n "$during" ] && [ -n "$(ls -A "$during" 2>/dev/null)" ] && break
		sleep 0.05
	done
	out=$(ls -A "$during" 2>&1; stat -c '%a %U' "$during" 2>&1)
	wait "$bg"
	owner=root
	[ "$who" = user ] && owner=nobody
	is "$out" "ca-bundle.crt
700 $owner" "$who: during the run the scratch directory (mode 0700, the caller's) holds only the bundle"
	out=$(qrun "$who" --profile "$T/nocred.yaml" -- sh -c \
		'grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt; echo "${SSL_CERT_FILE-unset}"')
	is "$out" "$n_host
unset" "$who: without a credential rule there is no CA: the bundle is the host's, no variable is set"
	local saved=("${PRUN_ENV[@]}")
	PRUN_ENV+=(PADDOCK_EGRESS_CA_FILE=/nonexistent/ca.pem)
	out=$(qrun "$who" --profile "$T/tls.yaml" -- true)
	rc=$?
	PRUN_ENV=("${saved[@]}")
	case "$rc:$out" in "125:"*"PADDOCK_EGRESS_CA_FILE '/nonexistent/ca.pem'"*) rc=0 ;; *) rc=1 ;; esac
	ok $rc "$who: a trust store that cannot be read stops the sandbox (125: fail closed)"
}

check_no_interception() {
	local who=$1 out rc
	out=$(qrun "$who" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -v -m 10 --cacert test-ca.pem "https://plain.test:$1/hello" 2>&1' sh "$PA")
	rc=$?
	has "$out" "hello-tls" && has "$out" "issuer: CN=paddock test origin CA" && ! has "$out" "paddock sandbox CA"
	ok $? "$who: a host without a credential rule is tunnelled: the client sees the origin's own certificate (rc $rc)"
	out=$(qrun "$who" --events "$T/home/ev-pin-$who.jsonl" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -m 10 --cacert test-ca.pem "https://api.test:$1/hello" 2>&1; echo "rc=$?"' sh "$PA")
	has "$out" "rc=60" && ! has "$out" "hello-tls"
	ok $? "$who: a client that trusts only the real issuer (pinning) fails on an intercepted host"
	grep '"kind":"net.connect"' "$T/home/ev-pin-$who.jsonl" | grep -q "the client's TLS handshake failed"
	ok $? "$who: ... and net.connect records that the client's handshake failed"
	rm -f "$T/home/ev-pin-$who.jsonl"
}

check_upstream_refused() {
	local who=$1 out ev=$T/home/ev-bad-$who.jsonl
	rm -f "$ev"
	: >"$T/wrongname.log"
	: >"$T/untrusted.log"
	out=$(qrun "$who" --events "$ev" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -m 10 -H "X-Tok: $PADDOCK_SECRET_TOK" "https://badname.test:$1/headers" 2>&1; echo "rc=$?"' sh "$PB")
	has "$out" "CONNECT tunnel failed, response 502" && has "$out" "rc=56"
	ok $? "$who: an upstream whose certificate names another host: the client gets 502"
	out=$(qrun "$who" --events "$ev" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -m 10 -H "X-Tok: $PADDOCK_SECRET_TOK" "https://rogue.test:$1/headers" 2>&1; echo "rc=$?"' sh "$PC")
	has "$out" "CONNECT tunnel failed, response 502" && has "$out" "rc=56"
	ok $? "$who: an upstream whose certificate no trusted CA signed: the client gets 502"
	[ ! -s "$T/wrongname.log" ] && [ ! -s "$T/untrusted.log" ]
	ok $? "$who: neither server received a request (nor the secret)"
	python3 - "$ev" <<-'PY'
	import json, sys
	evs = [json.loads(l) for l in open(sys.argv[1])]
	net = [e["attrs"] for e in evs if e["kind"] == "net.connect" and e["attrs"]["decision"] == "deny"]
	name = [a for a in net if a["host"] == "badname.test" and a["status"] == 502
	        and a["reason"].endswith("certificate verify failed: hostname mismatch")]
	issuer = [a for a in net if a["host"] == "rogue.test" and a["status"] == 502
	          and a["reason"].endswith("certificate verify failed: unable to get local issuer certificate")]
	sys.exit(0 if len(name) == 1 and len(issuer) == 1 else 1)
	PY
	ok $? "$who: net.connect deny events name the verification error"
}

check_placeholder_elsewhere() {
	local who=$1 out ev=$T/home/ev-ph-$who.jsonl
	rm -f "$ev"
	: >"$T/good.log"
	# The placeholder of 'other' (whose rule names elsewhere.test) inside the tunnel to api.test.
	out=$(qrun "$who" --events "$ev" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -m 10 -w " %{http_code}" -H "X-Key: $PADDOCK_SECRET_OTHER" "https://api.test:$1/headers"' sh "$PA")
	has "$out" "placeholder of secret 'other' may not be sent to api.test" && has "$out" " 403"
	ok $? "$who: a placeholder inside an intercepted tunnel to a host its rule does not name: 403 ($out)"
	[ ! -s "$T/good.log" ]
	ok $? "$who: ... and nothing reached the server"
	out=$(qrun "$who" --events "$ev" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -m 10 -H "X-Tok: $PADDOCK_SECRET_TOK" "https://unlisted.test:$1/headers" 2>&1; echo "rc=$?"' sh "$PA")
	has "$out" "CONNECT tunnel failed, response 403" && has "$out" "rc=56"
	ok $? "$who: a placeholder for an unlisted host over HTTPS: the CONNECT is refused (403)"
	python3 - "$ev" <<-'PY'
	import json, sys
	evs = [json.loads(l) for l in open(sys.argv[1])]
	cred = [e["attrs"] for e in evs if e["kind"] == "net.credential"]
	net = [e["attrs"] for e in evs if e["kind"] == "net.connect"]
	deny = [a for a in cred if a["decision"] == "deny" and a["secret"] == "other" and a["host"] == "api.test"]
	inner = [a for a in net if a["decision"] == "deny" and a.get("intercepted") and a["status"] == 403]
	unl = [a for a in net if a["decision"] == "deny" and a["host"] == "unlisted.test" and a["status"] == 403]
	sys.exit(0 if len(deny) == 1 and len(inner) == 1 and len(unl) == 1 else 1)
	PY
	ok $? "$who: net.credential and net.connect record both refusals"
}

# Keep-alive inside an intercepted tunnel: several requests on one TLS connection, each one
# injected; bodies and answers of every framing; pipelining still refused.
check_keepalive() {
	local who=$1 out log ev=$T/home/ev-ka-$who.jsonl
	rm -f "$ev"
	: >"$T/good.log"
	out=$(qrun "$who" --events "$ev" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -m 10 -w "%{num_connects}\n" -H "X-Tok: $PADDOCK_SECRET_TOK" "https://api.test:$1/headers" "https://api.test:$1/headers"' sh "$PA")
	is "$out" "seen
1
seen
0" "$who: curl with two URLs: both answered over one connection (num_connects 1, then 0)"
	log=$(cat "$T/good.log")
	[ "$(grep -c "^Authorization: Bearer $VALUE" <<<"$log")" = 2 ] &&
		[ "$(grep -c "^X-Tok: $VALUE" <<<"$log")" = 2 ] && ! has "$log" "paddock-secret" &&
		[ "$(grep '^peer ' <<<"$log" | sort -u | wc -l)" = 1 ]
	ok $? "$who: ... both requests were injected, and came to the origin over one upstream connection"
	python3 - "$ev" <<-'PY'
	import json, sys
	evs = [json.loads(l) for l in open(sys.argv[1])]
	req = [e["attrs"] for e in evs if e["kind"] == "net.connect" and e["attrs"]["method"] == "GET"]
	inj = [e for e in evs if e["kind"] == "net.credential" and e["attrs"]["decision"] == "inject"]
	sys.exit(0 if [a["upstream_reused"] for a in req] == [False, True] and len(inj) == 2 else 1)
	PY
	ok $? "$who: net.connect records two requests in the tunnel, the second over the kept upstream"
	cp "$TESTS_DIR/integration/egress-keepalive-client.py" "$T/home/ka-client.py"
	chmod 0644 "$T/home/ka-client.py"
	: >"$T/good.log"
	out=$(qrun "$who" --profile "$T/tls.yaml" -- python3 ka-client.py api.test "$PA")
	is "$out" "200 seen
200 chunk-one chunk-two
200 part-one part-two
200 with-length
200 seen
200 bye
200 seen
one-connection
200 closed-body
pipelined answers: 1" "$who: Python http.client: seven requests on one intercepted connection (the server closing its side after one) (chunked and sized bodies and answers), a close-delimited answer, pipelining refused"
	log=$(cat "$T/good.log")
	[ "$(grep -c "^Authorization: Bearer $VALUE" <<<"$log")" = 3 ] &&
		[ "$(grep -c "^X-Tok: $VALUE" <<<"$log")" = 3 ] &&
		[ "$(grep '^peer ' <<<"$log" | uniq | wc -l)" = 2 ]
	ok $? "$who: ... its three /headers requests were injected; after /bye a new upstream connection took over"
}

# A system whose bundle path is a symlink (Fedora's layout: /etc/ssl/certs/ca-certificates.crt
# -> /etc/pki/tls/certs/ca-bundle.crt): paddock runs in a mount namespace of its own where a
# copy of /etc/ssl with that link is bound over /etc/ssl. The sandbox's bundle must land on
# the link's target inside the sandbox (which does not exist there: it is created), and
# HTTPS injection must work through it.
check_symlinked_bundle() {
	local who=$1 out PRUN
	if ! command -v unshare >/dev/null; then
		ok 1 "$who: unshare (util-linux) is needed for the symlinked-bundle test"
		return
	fi
	rm -rf "$T/fakessl"
	cp -a /etc/ssl "$T/fakessl"
	rm -f "$T/fakessl/certs/ca-certificates.crt"
	ln -s /etc/pki/tls/certs/ca-bundle.crt "$T/fakessl/certs/ca-certificates.crt"
	prun_cmd "$who"
	out=$(cd "$T/home" && unshare -m --propagation private sh -c \
		'mount --bind "$0" /etc/ssl && exec "$@"' "$T/fakessl" "${PRUN[@]}" run \
		--profile "$T/tls.yaml" -- sh -c '
		readlink /etc/ssl/certs/ca-certificates.crt
		grep -c "BEGIN CERTIFICATE" /etc/pki/tls/certs/ca-bundle.crt
		echo x 2>/dev/null >>/etc/pki/tls/certs/ca-bundle.crt || echo refused
		curl -sS -m 10 -H "X-Tok: $PADDOCK_SECRET_TOK" "https://api.test:$1/headers"' sh "$PA" 2>&1 |
		grep -v '^paddock: warning: ')
	is "$out" "/etc/pki/tls/certs/ca-bundle.crt
1
refused
seen" "$who: a symlinked bundle path: the sandbox's bundle (its CA alone: the host link dangles) is bound read-only on the link's target inside, and HTTPS injection works"
	[ ! -e /etc/pki/tls/certs/ca-bundle.crt ] || [ -s /etc/pki/tls/certs/ca-bundle.crt ]
	ok $? "$who: ... and nothing was made on the host"
}

check_secret_absent() {
	local who=$1 err
	err=$(cat "$T"/out-"$who".txt "$T"/home/ev-*"$who".jsonl 2>/dev/null)
	! has "$err" "$VALUE" && ! has "$err" "$OTHER"
	ok $? "$who: neither secret value is in any events file or the sandbox's output"
	err=$(qrun "$who" --profile "$T/tls.yaml" -- sh -c \
		'curl -sS -m 10 "https://badname.test:$1/" "https://rogue.test:$2/"; exit 3' sh "$PB" "$PC")
	! has "$err" "$VALUE" && has "$err" "502"
	ok $? "$who: stderr of failed runs holds no secret value"
	grep -rqa 'net.credential' "$T/state-$who" && ! grep -rqa "$VALUE" "$T/state-$who" &&
		! grep -rqa "$OTHER" "$T/state-$who"
	ok $? "$who: the audit store recorded the credential events and holds no secret value"
}

for who in root user; do
	check_injection "$who"
	check_trust_path "$who"
	check_killed_scratch "$who"
	check_no_interception "$who"
	check_upstream_refused "$who"
	check_placeholder_elsewhere "$who"
	check_keepalive "$who"
	check_symlinked_bundle "$who"
	check_secret_absent "$who"
done
done_testing
