#!/bin/bash
# paddock serve: requests libevent would refuse with its own HTML page get the daemon's JSON
# error from the request guard (src/daemon/guard.c), as root and as an unprivileged user (TAP):
# bodies over --max-body (Content-Length and chunked) -> 413 too_large naming the body and the
# limit, without the body being buffered (the daemon's RSS is checked around a 64 MiB upload);
# a body exactly at the limit reaches the sandbox; malformed request lines, unknown methods and
# oversized headers -> JSON 4xx; after each refusal the daemon still serves new connections.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"
: "${TESTS_DIR:?TESTS_DIR must name the tests directory}"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
for tool in curl python3 jq; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed (make setup installs it)"; exit 1; }
done
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

LIMIT=1048576 # --max-body 1M
CLIENT=$TESTS_DIR/integration/body-client.py
cp "$CLIENT" "$T/body-client.py" && chmod 0755 "$T/body-client.py"

# client WHO ARGS...: body-client.py over WHO's socket, as WHO.
client() {
	local who=$1
	shift
	as "$who" python3 "$T/body-client.py" "$(sock_of "$who")" "$@" 2>&1
}

# The first answer's status, error code, field and whether the message names the limit.
first_error() {
	local out=$1 body
	body=$(printf '%s\n' "$out" | sed -n 's/^BODY //p' | head -1)
	printf '%s %s %s %s' "$(printf '%s\n' "$out" | sed -n 's/^STATUS //p' | head -1)" \
		"$(jq_get "$body" error.code)" "$(jq_get "$body" error.field)" \
		"$(jq_get "$body" error.message | grep -c "$LIMIT bytes")"
}

alive() {
	api "$1" GET /v1/health
	is "$CODE $(jq_get "$BODY" status)" "200 ok" "$1: ... and the daemon serves a new connection ($2)"
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$(serve_pid "$1")/status"; }

body_tests() {
	local who=$1 out before after id
	serve_start "$who" --max-body 1M
	ok $? "$who: the daemon starts with --max-body 1M"

	# Content-Length over the limit: refused at the headers, the body is not read.
	out=$(as "$who" curl -s -o - -w '\n%{http_code}' --unix-socket "$(sock_of "$who")" -X PUT \
		-H 'Content-Length: 2000000' -H 'Expect:' --data-binary @"$T/big2m" \
		"http://paddock/v1/sandboxes/none/files?path=/tmp/x")
	is "$(tail -1 <<<"$out") $(jq_get "$(head -1 <<<"$out")" error.code) $(jq_get "$(head -1 <<<"$out")" error.field)" \
		"413 too_large body" "$who: curl PUT with a 2 MB body (Content-Length) -> JSON 413 too_large naming the body"
	is "$(jq_get "$(head -1 <<<"$out")" error.message | grep -c "$LIMIT bytes (--max-body)")" "1" \
		"$who: ... whose message names the limit in bytes"
	alive "$who" "after a Content-Length refusal"

	# Chunked: refused at the chunk that crosses the limit.
	out=$(client "$who" big 2000000 chunked)
	is "$(first_error "$out")" "413 too_large body 1" \
		"$who: a chunked body growing past 1 MiB -> JSON 413 too_large naming the body and the limit"
	is "$(grep -c '^CLOSED' <<<"$out")" "1" "$who: ... and the connection is closed after the answer"
	alive "$who" "after a chunked refusal"

	# Memory stays bounded: a 64 MiB body (both framings) against the 1 MiB limit.
	before=$(rss_kb "$who")
	out=$(client "$who" big $((64 << 20)) length)
	is "$(first_error "$out")" "413 too_large body 1" "$who: a 64 MiB body sent without waiting (Content-Length) -> JSON 413"
	out=$(client "$who" big $((64 << 20)) chunked)
	is "$(first_error "$out")" "413 too_large body 1" "$who: a 64 MiB chunked body -> JSON 413"
	after=$(rss_kb "$who")
	ok $([ $((after - before)) -lt 8192 ] && echo 0 || echo 1) \
		"$who: the daemon's RSS grew by less than 8 MiB over two 64 MiB uploads ($before kB -> $after kB)"

	# Keep-alive: a refusal on the second request of a connection.
	out=$(client "$who" keepalive 5000000)
	is "$(sed -n 's/^STATUS //p' <<<"$out" | tr '\n' ' ')$(grep -c '^CLOSED' <<<"$out")" "200 413 1" \
		"$who: on one keep-alive connection: health 200, then a 5 MB Content-Length -> 413, closed"

	# Malformed and refused requests libevent used to answer in HTML.
	out=$(client "$who" raw 'GARBAGE\r\n\r\n')
	is "$(first_error "$out")" "400 bad_request method 0" "$who: a malformed request line -> JSON 400 naming the method"
	out=$(client "$who" raw 'GET /v1/health HTTP/1.1 extra\r\n\r\n')
	is "$(sed -n 's/^STATUS //p' <<<"$out") $(jq_get "$(sed -n 's/^BODY //p' <<<"$out")" error.code)" \
		"400 bad_request" "$who: a request line with four words -> JSON 400"
	out=$(client "$who" raw 'PATCH /v1/health HTTP/1.1\r\nHost: p\r\n\r\n')
	is "$(first_error "$out")" "405 bad_request method 0" "$who: PATCH -> JSON 405 naming the method"
	out=$(client "$who" raw "GET /v1/health HTTP/1.1\\r\\nX-Big: $(head -c 70000 /dev/zero | tr '\0' a)\\r\\n\\r\\n")
	is "$(first_error "$out")" "431 too_large headers 0" "$who: 70 kB of headers -> JSON 431 naming the headers"
	out=$(client "$who" raw 'PUT /v1/health HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n')
	is "$(first_error "$out")" "400 bad_request Transfer-Encoding 0" \
		"$who: a transfer coding other than chunked -> JSON 400 naming Transfer-Encoding"
	out=$(client "$who" raw 'GET /v1/health HTTP/1.1\r\nHost: p\r\n\r\nGET /v1/health HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n')
	is "$(sed -n 's/^STATUS //p' <<<"$out" | tr '\n' ' ')$(grep -c '^CLOSED' <<<"$out")" "200 200 1" \
		"$who: two pipelined requests, the second with Connection: close: both answered, then closed"
	alive "$who" "after the malformed requests"

	# A body exactly at the limit is accepted: both framings reach the sandbox whole.
	api "$who" POST /v1/sandboxes '{}'
	id=$(jq_get "$BODY" id)
	is "$CODE" "201" "$who: a sandbox for the uploads"
	out=$(as "$who" curl -s -o /dev/null -w '%{http_code}' --unix-socket "$(sock_of "$who")" -X PUT \
		--data-binary @"$T/exact" "http://paddock/v1/sandboxes/$id/files?path=/tmp/exact")
	is "$out" "201" "$who: a body of exactly $LIMIT bytes (Content-Length) is accepted"
	out=$(as "$who" curl -s -o /dev/null -w '%{http_code}' --unix-socket "$(sock_of "$who")" -X PUT \
		-H 'Transfer-Encoding: chunked' --data-binary @"$T/exact" \
		"http://paddock/v1/sandboxes/$id/files?path=/tmp/exact-chunked")
	is "$out" "201" "$who: ... and chunked"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"wc -c < /tmp/exact; wc -c < /tmp/exact-chunked; cmp /tmp/exact /tmp/exact-chunked && echo same"}'
	is "$(jq_get "$BODY" stdout.text | tr -s '\n' ' ' | sed 's/ *$//')" "$LIMIT $LIMIT same" \
		"$who: the sandbox holds both files whole and equal"
	api "$who" DELETE "/v1/sandboxes/$id"

	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: clean stop"
}

head -c 2000000 /dev/urandom >"$T/big2m"
head -c "$LIMIT" /dev/urandom >"$T/exact"
chmod 0644 "$T/big2m" "$T/exact"
body_tests root
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
body_tests user
SERVE_ENV=()
done_testing
