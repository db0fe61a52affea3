#!/bin/bash
# The E2B front door (docs/e2b.md): E2B's own JavaScript SDK (`e2b`, pinned in tests/clients)
# drives `paddock serve --listen` with E2B_API_URL = E2B_SANDBOX_URL = the listener, as root
# and as an unprivileged user (TAP). tests/e2b/*.mjs do what a user does with the SDK and
# print their checks; this script runs them against each daemon, issues the API keys
# (paddock serve e2b-key), and checks what the SDK cannot see: the keys are stored hashed,
# the audit chain records the E2B requests, refusals and malformed Connect frames.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

NODE=$TESTS_DIR/clients/node_modules/.bin/node
if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
for tool in curl jq python3; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed"; exit 1; }
done
if [ ! -x "$NODE" ] || [ ! -d "$TESTS_DIR/clients/node_modules/e2b" ]; then
	echo "Bail out! the pinned test clients are missing: run 'make test-setup'"
	exit 1
fi
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

# sdk WHO SCRIPT [ENV=V...]: run tests/e2b/SCRIPT (Node, or python3 for .py) against WHO's daemon; each check it prints
# becomes one subtest. The program's own failure (an exception) fails a subtest too.
sdk() {
	local who=$1 script=$2 out rc line
	shift 2
	out="$T/$script.$who.out"
	env E2B_API_URL="http://$ADDR" E2B_SANDBOX_URL="http://$ADDR" E2B_API_KEY="$KEY" \
		OTHER_KEY="$KEY2" "$@" $(case $script in *.py) echo python3 ;; *) echo "$NODE" ;; esac) \
		"$TESTS_DIR/e2b/$script" >"$out" 2>"$out.err"
	rc=$?
	while IFS= read -r line; do
		is "$(jq -r .g <<<"$line")" "$(jq -r .w <<<"$line")" "$who: $script: $(jq -r .d <<<"$line")"
	done <"$out"
	ok $rc "$who: $script ran to its end"
	[ $rc = 0 ] || sed 's/^/#   /' "$out.err" | tail -20
}

# envd WHO METHOD PATH SANDBOX TOKEN [CURL ARGS...]: a request for a sandbox's envd; $CODE, $BODY.
envd() {
	local who=$1 method=$2 path=$3 sb=$4 tok=$5 out
	shift 5
	out=$(mktemp "$T/envd-XXXXXX")
	CODE=$(curl -s -o "$out" -w '%{http_code}' -X "$method" -H "E2b-Sandbox-Id: $sb" \
		-H 'E2b-Sandbox-Port: 49983' ${tok:+-H "X-Access-Token: $tok"} "$@" \
		"http://$ADDR$path")
	BODY=$(cat "$out")
	rm -f "$out"
}

# create WHO: a sandbox through the control plane with curl; sets SB and SB_TOKEN.
create() {
	CODE=$(curl -s -o "$T/create.json" -w '%{http_code}' -X POST -H "X-API-KEY: $KEY" \
		-H 'Content-Type: application/json' -d '{"templateID":"base","timeout":120}' \
		"http://$ADDR/v2/sandboxes")
	SB=$(jq -r .sandboxID "$T/create.json")
	SB_TOKEN=$(jq -r .envdAccessToken "$T/create.json")
}

keys() {
	local who=$1 out
	KEY=$(as "$who" "$T/bin/paddock" serve e2b-key create --name k1 2>/dev/null)
	KEY2=$(as "$who" "$T/bin/paddock" serve e2b-key create --name k2 2>/dev/null)
	is "$(grep -cE '^e2b_[0-9a-f]{40}$' <<<"$KEY
$KEY2")" 2 "$who: paddock serve e2b-key create prints keys shaped e2b_ and 40 hex digits"
	out=$(as "$who" "$T/bin/paddock" serve e2b-key ls | awk '{print $1}' | tr '\n' ' ')
	is "$out" "k1 k2 " "$who: e2b-key ls lists them by name"
	out=$(python3 -c 'import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT name, sha256 FROM e2b_keys").fetchall()
print(len(rows), sum(1 for r in rows for k in sys.argv[2:] if k[4:] in r[1]))' \
		"$T/serve-$who/state/daemon.db" "$KEY" "$KEY2")
	is "$out" "2 0" "$who: the store holds the two keys' hashes, never a key"
	as "$who" "$T/bin/paddock" serve e2b-key create --name k3 >/dev/null 2>&1
	as "$who" "$T/bin/paddock" serve e2b-key rm k3
	is "$? $(as "$who" "$T/bin/paddock" serve e2b-key ls | grep -c k3)" "0 0" "$who: e2b-key rm removes a key"
	as "$who" "$T/bin/paddock" serve e2b-key rm k3 2>"$T/rm.err"
	is "$? $(grep -c "no E2B API key named 'k3'" "$T/rm.err")" "1 1" "$who: removing it again names it"
}

# Connect framing refused at the door: each answer is a Connect error naming what was wrong.
connect_frames() {
	local who=$1
	create "$who"
	is "$CODE" 201 "$who: curl POST /v2/sandboxes creates a sandbox"
	envd "$who" POST /filesystem.Filesystem/Stat "$SB" "" -H 'Content-Type: application/json' -d '{}'
	is "$CODE $(jq_get "$BODY" code)" "401 unauthenticated" "$who: envd without X-Access-Token: 401 unauthenticated"
	envd "$who" POST /filesystem.Filesystem/Stat "$SB" "$SB_TOKEN" -H 'Content-Type: application/proto' -d 'x'
	is "$CODE" 415 "$who: the binary codec: 415"
	envd "$who" POST /filesystem.Filesystem/Stat "$SB" "$SB_TOKEN" -H 'Content-Type: application/json' -d '[1]'
	is "$CODE $(jq_get "$BODY" code)" "400 invalid_argument" "$who: a unary message that is no object: invalid_argument"
	envd "$who" POST /filesystem.Filesystem/Stat "$SB" "$SB_TOKEN" -H 'Content-Type: application/json' \
		-H 'Connect-Timeout-Ms: -5' -d '{}'
	is "$CODE $(jq_get "$BODY" code)" "400 invalid_argument" "$who: a malformed Connect-Timeout-Ms: invalid_argument"
	envd "$who" POST /filesystem.Filesystem/Nope "$SB" "$SB_TOKEN" -H 'Content-Type: application/json' -d '{}'
	is "$CODE $(jq_get "$BODY" code)" "501 unimplemented" "$who: an unknown method: unimplemented"
	envd "$who" GET /filesystem.Filesystem/Stat "$SB" "$SB_TOKEN"
	is "$CODE" 405 "$who: a Connect GET: 405"
	# A chunked request body is one message.
	envd "$who" POST /filesystem.Filesystem/Stat "$SB" "$SB_TOKEN" -H 'Content-Type: application/json' \
		-H 'Transfer-Encoding: chunked' -d '{"path":"/tmp"}'
	is "$CODE $(jq_get "$BODY" entry.type)" "200 FILE_TYPE_DIRECTORY" "$who: a chunked unary body: Stat answers"
	# Oversized: a Connect message past 4 MiB; an upload past --max-body (8M here) is refused
	# by the daemon's request guard before any front door reads it (413, paddock's error body).
	head -c $((5 << 20)) /dev/zero | tr '\0' ' ' >"$T/big"
	envd "$who" POST /filesystem.Filesystem/Stat "$SB" "$SB_TOKEN" -H 'Content-Type: application/json' \
		--data-binary @"$T/big"
	is "$CODE $(jq_get "$BODY" code)" "429 resource_exhausted" "$who: a 5 MiB Connect message: resource_exhausted"
	cat "$T/big" "$T/big" >"$T/big2"
	envd "$who" POST "/files?path=/tmp/big" "$SB" "$SB_TOKEN" -H 'Content-Type: application/octet-stream' \
		--data-binary @"$T/big2"
	is "$CODE $(jq_get "$BODY" error.code)" "413 too_large" "$who: a 10 MiB upload past --max-body 8M: 413"
	envd "$who" POST "/files?path=/tmp/big" "$SB" "$SB_TOKEN" -H 'Content-Type: application/octet-stream' \
		--data-binary @"$T/big"
	is "$CODE $(jq -r ".[0].path" <<<"$BODY")" "200 /tmp/big" "$who: a 5 MiB upload within --max-body: written"
	envd "$who" GET "/files?path=/etc/hostname&username=mallory" "$SB" "$SB_TOKEN"
	is "$CODE" 400 "$who: ?username= of a user the sandbox has not: 400"
	envd "$who" POST /filesystem.Filesystem/Stat "$SB" "$SB_TOKEN" -H 'Content-Type: application/json' \
		-H "Authorization: Basic $(printf 'mallory:' | base64)" -d '{"path":"/tmp"}'
	is "$CODE $(jq_get "$BODY" code)" "400 invalid_argument" "$who: Authorization naming another user: invalid_argument"
	# A server stream's body: a short frame, a compressed one, two messages, a length past the cap.
	local f
	for f in 'short:\x00\x00\x00' 'compressed:\x01\x00\x00\x00\x02{}' \
		'two:\x00\x00\x00\x00\x02{}\x00\x00\x00\x00\x02{}' 'huge:\x00\x7f\xff\xff\xff{}'; do
		printf "${f#*:}" >"$T/frame"
		curl -s -X POST -H "E2b-Sandbox-Id: $SB" -H "X-Access-Token: $SB_TOKEN" \
			-H 'Content-Type: application/connect+json' --data-binary @"$T/frame" \
			"http://$ADDR/filesystem.Filesystem/WatchDir" >"$T/frame.out"
		# The answer: 200, one end-stream frame (flag 2) whose error names the body.
		is "$(python3 -c 'import sys,json,struct
d=open(sys.argv[1],"rb").read()
n=struct.unpack(">I",d[1:5])[0]
e=json.loads(d[5:5+n])["error"]
print(d[0], len(d)==5+n, e["code"])' "$T/frame.out")" \
			"2 True $([ "${f%%:*}" = huge ] && echo resource_exhausted || echo invalid_argument)" \
			"$who: a ${f%%:*} stream frame: one end-stream frame with the error"
	done
	# Another key's sandbox token is refused by envd of this sandbox.
	local sb1=$SB tok1=$SB_TOKEN
	create "$who"
	envd "$who" POST /filesystem.Filesystem/Stat "$sb1" "$SB_TOKEN" -H 'Content-Type: application/json' -d '{}'
	is "$CODE $(jq_get "$BODY" code)" "401 unauthenticated" "$who: another sandbox's envd token: refused"
	envd "$who" GET /health "$sb1" ""
	is "$CODE" 204 "$who: envd /health needs no token: 204"
	curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "http://$ADDR/sandboxes/$sb1"
	curl -s -o /dev/null -X DELETE -H "X-API-KEY: $KEY" "http://$ADDR/sandboxes/$SB"
	: "$tok1"
}

audit() {
	local who=$1
	pc "$who" events --kind e2b.request --json >"$T/ev-$who" 2>&1
	is "$(jq -r 'select(.attrs.key == "k1") | .attrs.route' "$T/ev-$who" | sort -u | tr '\n' ';')" \
		"DELETE /sandboxes/{id};POST /sandboxes;POST /sandboxes/{id}/pause;POST /sandboxes/{id}/timeout;POST /v2/sandboxes/{id}/connect;" \
		"$who: the audit chain records every E2B request that changes something, with the key"
	# An E2B request's record is held for the native record it leads to, and stored before it.
	pc "$who" events --json >"$T/ev-$who" 2>&1
	is "$(jq -s '[to_entries[] | {i: .key, k: .value.kind, s: .value.sandbox, r: .value.attrs.route}] as $e
		| [$e[] | select(.k == "e2b.request" and .r == "DELETE /sandboxes/{id}") | . as $q
		| ($e | map(select(.k == "sandbox.destroy" and .s == $q.s)) | last | .i) | select(. != null)
		| . > $q.i] | length > 0 and all' "$T/ev-$who")" true \
		"$who: a kill's e2b.request is stored before its sandbox.destroy"
	pc "$who" events --kind auth.failure --json >"$T/ev-$who" 2>&1
	# 4 of the keys and tokens above, 2 of gethost.mjs (no traffic token; another sandbox's).
	is "$(jq -r 'select(.attrs.front == "e2b") | .attrs.reason' "$T/ev-$who" | grep -c .)" 6 \
		"$who: the refused keys and envd tokens are recorded as auth.failure"
	pc "$who" audit verify >/dev/null 2>&1
	ok $? "$who: paddock audit verify: the chain holds"
}

# The daemon's end of a TCP connection has TCP_NODELAY: commands.run's stream (head, start
# event, end event: three writes) is not held for the client's delayed ACK (up to 40 ms per
# event). The delay itself cannot be asserted without timing; the option can be read.
nodelay() {
	local who=$1
	is "$(python3 "$TESTS_DIR/integration/tcp-nodelay.py" "$ADDR" "$(serve_pid "$who")" 2>&1)" True \
		"$who: the daemon's end of an accepted TCP connection has TCP_NODELAY"
}

# template_image WHO: a busybox root imported as the image "e2bimg"; the SDK asks for it by
# templateID.
template_image() {
	local who=$1 d="$T/bbimg-$who"
	mkdir -p "$d/bin" "$d/etc" "$d/tmp"
	cp /bin/busybox "$d/bin/busybox"
	ln -s busybox "$d/bin/sh"
	echo e2b-image >"$d/etc/image-name"
	chmod -R a+rX "$d"
	pc "$who" image import -q "$d" --name e2bimg >"$T/import-$who" 2>&1
	ok $? "$who: a busybox root is imported as image e2bimg ($(tail -c 200 "$T/import-$who"))"
	sdk "$who" template.mjs
}

e2b_tests() {
	local who=$1
	ADDR=127.0.0.1:$(free_port)
	DOMAIN=sandbox.test:${ADDR##*:}
	serve_start "$who" --listen "$ADDR" --max-body 8M --e2b-domain "$DOMAIN"
	ok $? "$who: the daemon starts on $ADDR"
	keys "$who"
	nodelay "$who"
	sdk "$who" plane.mjs
	template_image "$who"
	mkdir -p "$T/upload/a/b" "$T/upload/c"
	printf 'one\n' >"$T/upload/top.txt"
	printf 'two\n' >"$T/upload/a/two.txt"
	head -c 300000 /dev/urandom >"$T/upload/a/b/blob.bin"
	: >"$T/upload/c/empty"
	echo host-secret >"$T/secret"
	sdk "$who" files.mjs UPLOAD_DIR="$T/upload" HOST_SECRET="$T/secret"
	sdk "$who" python_wire.py
	sdk "$who" gethost.mjs E2B_DOMAIN_WANTED="$DOMAIN"
	connect_frames "$who"
	audit "$who"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: the daemon stops cleanly at SIGTERM (exit 0; no leak under ASan)"
}

e2b_tests root
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
e2b_tests user
SERVE_ENV=()
done_testing
