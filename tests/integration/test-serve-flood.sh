#!/bin/bash
# paddock serve under a connection flood (finding 5a), as root and as an unprivileged user
# (TAP). The daemon runs with a descriptor limit of 256 (so a few hundred connections are a
# flood) and --max-conns-per-peer 8 --header-timeout 2s:
# - too many connections from one address: the ones over the cap get a JSON 503 naming
#   --max-conns-per-peer and are closed; the others get 408 when their head never ends;
# - 400 slow-header connections from 8 addresses, reopened as soon as they are closed: while
#   they run, the unix socket and an authorised TCP client are served, the daemon holds fewer
#   descriptors than its limit, every attacker is cut off (408), and its log stays small;
# - descriptors exhausted under the daemon (its limit lowered while it runs): accepts pause
#   instead of spinning, the log stays small, and the daemon serves again afterwards;
# - a --max-conns the descriptor limit cannot hold is refused at start;
# - an Upgrade: h2c request is refused (400, field Upgrade) on the unix socket and on TCP.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"
: "${TESTS_DIR:?TESTS_DIR must name the tests directory}"

for tool in curl python3 jq prlimit; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed (make setup installs it)"; exit 1; }
done
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} ${FLOOD_PID:-} 2>/dev/null; reap_supervisors; undelegate_cgroup; rm -rf "$T"' EXIT

cp "$TESTS_DIR/integration/flood-client.py" "$T/flood-client.py"
chmod 0755 "$T/flood-client.py"
HARD=$(ulimit -H -n)
NOFILE=256

# raw WHO unix|tcp BYTES: the bytes over the unix socket (as WHO) or to the TCP port; the
# answer's status line and body.
raw() {
	local who=$1 where=$2
	as "$who" python3 -c '
import socket, sys
where, dest, data = sys.argv[1], sys.argv[2], sys.argv[3]
if where == "unix":
    s = socket.socket(socket.AF_UNIX); s.connect(dest)
else:
    s = socket.create_connection(("127.0.0.1", int(dest)))
s.settimeout(20)
s.sendall(data.encode().decode("unicode_escape").encode("latin1"))
out = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    out += c
head, _, body = out.partition(b"\r\n\r\n")
print(head.split(b" ")[1].decode() if b" " in head else "none")
print(body.decode())' "$where" "$3" "$4"
}

# wait_log WHO REGEX: wait (at most 30 s) until the daemon's log has a line matching REGEX.
wait_log() {
	local i
	for i in $(seq 1 300); do
		grep -qE "$2" "$T/serve-$1.log" && return 0
		sleep 0.1
	done
	return 1
}

fd_count() { ls "/proc/$(serve_pid "$1")/fd" | wc -l; }

h2c_tests() {
	local who=$1 port=$2 out
	out=$(raw "$who" unix "$(sock_of "$who")" 'GET /v1/health HTTP/1.1\r\nHost: p\r\nUpgrade: h2c\r\n\r\n')
	is "$(head -1 <<<"$out") $(jq_get "$(tail -1 <<<"$out")" error.field)" "400 Upgrade" \
		"$who: unix: a request with Upgrade: h2c (no Connection: upgrade) -> 400 naming Upgrade"
	out=$(raw "$who" tcp "$port" 'GET /v1/health HTTP/1.1\r\nHost: p\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n')
	is "$(head -1 <<<"$out") $(jq_get "$(tail -1 <<<"$out")" error.field)" "400 Upgrade" \
		"$who: tcp: Upgrade: h2c with HTTP2-Settings -> 400 naming Upgrade"
	out=$(curl -s --http2 -o "$T/h2c.out" -w '%{http_code} %{http_version}' "http://127.0.0.1:$port/v1/health")
	is "$(jq_get "$(cat "$T/h2c.out")" error.field) $out" "Upgrade 400 1.1" \
		"$who: tcp: curl --http2 (h2c upgrade) -> 400 naming Upgrade, answered in HTTP/1.1"
}

per_peer_tests() {
	local who=$1 port=$2 out
	out=$(python3 "$T/flood-client.py" burst 127.0.0.1 "$port" 20 127.0.0.42)
	is "$(sed -n 's/^ANSWERS //p' <<<"$out") $(sed -n 's/^OPEN //p' <<<"$out")" "408:8 503:12 0" \
		"$who: 20 connections from one address: 12 refused with 503, the 8 others closed with 408 when their heads never ended"
	wait_log "$who" "[1-9][0-9]* connections refused .too many from one address, at most 8.*the last from 127.0.0.42"
	ok $? "$who: ... and the daemon's log counts the refusals and names the address"
}

flood_tests() {
	local who=$1 port=$2 token=$3 i served=0 unix_ok=0 fds max_fds=0 out
	rm -f "$T/ready" "$T/stop"
	prlimit --nofile=4096:"$HARD" python3 "$T/flood-client.py" flood 127.0.0.1 "$port" 400 16 \
		"$T/ready" "$T/stop" >"$T/flood.out" &
	FLOOD_PID=$!
	while [ ! -e "$T/ready" ] && kill -0 "$FLOOD_PID" 2>/dev/null; do sleep 0.1; done
	for i in 1 2 3 4 5; do
		api "$who" GET /v1/health
		[ "$CODE" = 200 ] && unix_ok=$((unix_ok + 1))
		out=$(curl -s -m 30 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
			"http://127.0.0.1:$port/v1/sandboxes")
		[ "$out" = 200 ] && served=$((served + 1))
		fds=$(fd_count "$who")
		[ "$fds" -gt "$max_fds" ] && max_fds=$fds
	done
	# The attack goes on until the daemon has closed slow heads (408) and made room.
	wait_log "$who" "[1-9][0-9]* closed to make room"
	ok $? "$who: ... the daemon's log counts the connections it closed to make room"
	touch "$T/stop"
	wait "$FLOOD_PID"
	FLOOD_PID=
	is "$unix_ok" 5 "$who: during a flood of 400 slow-header TCP connections from 16 addresses, the unix socket answers 5 of 5 requests"
	is "$served" 5 "$who: ... and an authorised TCP client is served 5 times of 5"
	ok $([ "$max_fds" -lt "$NOFILE" ] && echo 0 || echo 1) \
		"$who: ... the daemon holds at most $max_fds descriptors of its $NOFILE"
	sed 's/^/# flood: /' "$T/flood.out"
	ok $([ "$(sed -n 's/^CLOSED //p' "$T/flood.out")" -ge 400 ] && echo 0 || echo 1) \
		"$who: ... the attacker's connections were closed again and again (at least 400 of them)"
	ok $(grep -q '^ANSWERS .*408:' "$T/flood.out" && echo 0 || echo 1) \
		"$who: ... with a 408 answer"
}

emfile_tests() {
	local who=$1 port=$2 out
	# The daemon planned for 256 descriptors; from now on it has 48: accepts fail with EMFILE.
	# (Set by the daemon's own user: another user may not change a process's limits.)
	as "$who" prlimit --pid "$(serve_pid "$who")" --nofile=48:$NOFILE
	rm -f "$T/ready" "$T/stop"
	prlimit --nofile=4096:"$HARD" python3 "$T/flood-client.py" flood 127.0.0.1 "$port" 200 16 \
		"$T/ready" "$T/stop" >"$T/flood.out" &
	FLOOD_PID=$!
	while [ ! -e "$T/ready" ] && kill -0 "$FLOOD_PID" 2>/dev/null; do sleep 0.1; done
	sleep 3 # the attack goes on for a while: a spinning accept would log without pause
	touch "$T/stop"
	wait "$FLOOD_PID"
	FLOOD_PID=
	as "$who" prlimit --pid "$(serve_pid "$who")" --nofile=$NOFILE:$NOFILE
	wait_log "$who" 'accept paused [0-9]+ times for 100 ms \(no descriptor left: Too many open files\)'
	ok $? "$who: descriptors exhausted under the daemon: its accept pauses, and the log counts the pauses" ||
		tail -5 "$T/serve-$who.log" | sed "s/^/#   /"
	api "$who" GET /v1/health
	is "$CODE" 200 "$who: ... and afterwards the unix socket is served"
	out=$(curl -s -m 30 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		"http://127.0.0.1:$port/v1/sandboxes")
	is "$out" 200 "$who: ... and TCP too"
}

log_tests() {
	local who=$1 size
	size=$(wc -c <"$T/serve-$who.log")
	ok $([ "$size" -lt 65536 ] && echo 0 || echo 1) \
		"$who: after the floods the daemon's log is $size bytes (under 64 KiB)"
	is "$(grep -c 'Error from accept' "$T/serve-$who.log")" 0 "$who: ... without libevent's accept error loop"
}

serve_flood() {
	local who=$1 port out
	port=$(free_port)
	ulimit -S -n "$NOFILE"
	serve_start "$who" --listen "127.0.0.1:$port" --max-conns-per-peer 8 --header-timeout 2s
	ok $? "$who: the daemon starts with a descriptor limit of $NOFILE"
	ulimit -S -n "$HARD"
	grep -q 'at most 96 TCP connections at once (half of RLIMIT_NOFILE 256' "$T/serve-$who.log"
	ok $? "$who: ... and says it takes at most 96 TCP connections at once"
	TOKEN=$(as "$who" "$T/bin/paddock" serve token create --name "flood-$who" 2>/dev/null)
	h2c_tests "$who" "$port"
	per_peer_tests "$who" "$port"
	flood_tests "$who" "$port" "$TOKEN"
	emfile_tests "$who" "$port"
	log_tests "$who"
	serve_stop "$who"
	is "$SERVE_RC" 0 "$who: clean stop"

	ulimit -S -n "$NOFILE"
	out=$(as "$who" "$T/bin/paddock" serve --listen "127.0.0.1:$port" --max-conns 500 2>&1)
	is "$? $(grep -c -- '--max-conns 500 needs more descriptors than half of the descriptor limit (RLIMIT_NOFILE 256)' <<<"$out")" "1 1" \
		"$who: --max-conns 500 with a descriptor limit of 256 -> refused at start, naming both"
	ulimit -S -n "$HARD"
}

serve_flood root
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
serve_flood user
SERVE_ENV=()
done_testing
