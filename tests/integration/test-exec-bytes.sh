#!/bin/bash
# A daemon exec's output is bytes: NUL, bytes that are not UTF-8, compressed and random
# data reach `paddock exec` (sync and --stream) and `paddock attach` exactly (cmp). And
# a daemon exec ended by the sandbox's memory limit says so as `paddock run` does
# ("memory limit reached", 123, a limit.exceeded event). As root and as an unprivileged
# user with a delegated cgroup (TAP).
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

if ! have_supervisor; then
	echo "# skipped: this build has no 'paddock supervise' (the supervisor), so no sandbox can start"
	[ "${PDK_MUST_WORK:-0}" = 1 ] && ok 1 "the supervisor is built (PDK_MUST_WORK=1)"
	done_testing
	exit $?
fi

# same WHAT FILE WANT: cmp of what the CLI wrote with the bytes wanted.
same() {
	cmp "$2" "$3" >"$T/cmp" 2>&1
	ok $? "$1"
	[ -s "$T/cmp" ] && sed 's/^/#   /' "$T/cmp" | head -5
	return 0
}

# What the user did: printf 'a\0b', find -print0, gzip -c, random bytes.
bytes_tests() {
	local who=$1 id=$2 mode=$3 flag=() d
	[ "$mode" = stream ] && flag=(--stream)
	printf 'a\0b' >"$T/want"
	pc "$who" exec "${flag[@]}" "$id" -- printf 'a\0b' >"$T/got" 2>"$T/err"
	is "$?" 0 "$who: exec $mode of printf 'a\\0b' exits 0"
	same "$who: exec $mode: printf 'a\\0b' arrives byte for byte" "$T/got" "$T/want"
	d=$(mktemp -d "$T/find-XXXXXX")
	touch "$d/one" "$d/two words" "$d/$(printf 'caf\351')"
	(cd "$d" && find . -print0 | LC_ALL=C sort -z) >"$T/want"
	pc "$who" exec "${flag[@]}" "$id" -c "mkdir -p /tmp/f && cd /tmp/f && touch one 'two words' \"\$(printf 'caf\\351')\" && find . -print0 | LC_ALL=C sort -z" >"$T/got" 2>"$T/err"
	is "$?" 0 "$who: exec $mode of find -print0 exits 0"
	same "$who: exec $mode: find -print0 (a name that is not UTF-8 too) arrives byte for byte" "$T/got" "$T/want"
	pc "$who" exec "${flag[@]}" "$id" -c 'seq 1 3000 | gzip -c' >"$T/got.gz" 2>"$T/err"
	is "$?:$(gunzip -c <"$T/got.gz" | md5sum)" "0:$(seq 1 3000 | md5sum)" \
		"$who: exec $mode: gzip -c | gunzip gives back what was compressed"
	head -c 6000 /dev/urandom >"$T/rand-$mode"
	chmod 0644 "$T/rand-$mode"
	pc "$who" exec "${flag[@]}" -i "$id" -- cat <"$T/rand-$mode" >"$T/got" 2>"$T/err"
	is "$?" 0 "$who: exec $mode of 6000 random bytes exits 0"
	same "$who: exec $mode: 6000 random bytes arrive byte for byte" "$T/got" "$T/rand-$mode"
	pc "$who" exec "${flag[@]}" "$id" -c "printf 'x\\0y\\377' >&2" >/dev/null 2>"$T/got"
	printf 'x\0y\377' >"$T/want"
	same "$who: exec $mode: bytes on stderr arrive byte for byte" "$T/got" "$T/want"
}

# Between two markers written by octal escapes (so the echo of the typed line has neither).
between_marks() {
	python3 -c 'import sys
d = open(sys.argv[1], "rb").read()
b, e = d.find(b"@@BEG@@"), d.rfind(b"@@END@@")
sys.stdout.buffer.write(d[b + 7:e] if b >= 0 and e > b else b"(no markers)")' "$1"
}

attach_tests() {
	local who=$1 id=$2
	head -c 4000 /dev/urandom >"$T/rand-attach"
	chmod 0644 "$T/rand-attach"
	pc "$who" exec -i "$id" -c 'cat > /tmp/rand' <"$T/rand-attach"
	# The terminal passes bytes through once output processing and echo are off.
	printf '%s\n' "stty -opost -echo; printf '\\100\\100BEG\\100\\100'; printf 'a\\0b'; cat /tmp/rand; printf '\\100\\100END\\100\\100'; exit 0" |
		pc "$who" attach "$id" >"$T/attach-out" 2>"$T/attach-err"
	is "$?" 0 "$who: attach with piped input ends with the shell's status"
	between_marks "$T/attach-out" >"$T/got"
	{ printf 'a\0b'; cat "$T/rand-attach"; } >"$T/want"
	same "$who: attach: printf 'a\\0b' and 4000 random bytes reach the terminal byte for byte" "$T/got" "$T/want"
}

# What the user did: create -m 128M, then an exec allocating 1 GiB.
oom_tests() {
	local who=$1 id rc flag
	prun "$who" -w "$(mkws)" --memory 128M -- python3 -c 'b = bytearray(1 << 30); b[::4096] = b"x" * len(b[::4096])' >/dev/null 2>"$T/run-err"
	rc=$?
	is "$rc:$(grep -c 'memory limit reached' "$T/run-err")" "123:1" "$who: paddock run -m 128M of a 1 GiB allocation: 123, memory limit reached"
	id=$(pc "$who" create -m 128M --session oom-$who)
	for flag in sync stream; do
		pc "$who" exec $([ $flag = stream ] && echo --stream) "$id" -- python3 -c 'b = bytearray(1 << 30); b[::4096] = b"x" * len(b[::4096])' >/dev/null 2>"$T/exec-err"
		rc=$?
		is "$rc:$(grep -c 'memory limit reached: the command was killed by the OOM killer' "$T/exec-err")" "123:1" \
			"$who: exec ($flag) of a 1 GiB allocation under create -m 128M: 123 and the words of paddock run"
	done
	pc "$who" exec --json "$id" -c 'python3 -c "bytearray(1 << 30)"' >"$T/exec-json" 2>/dev/null
	is "$(jq -r .end "$T/exec-json")" "oom" "$who: exec --json: the end is oom (through a shell too)"
	pc "$who" events --sandbox "$id" --json >"$T/ev" 2>&1
	is "$(jq -r 'select(.kind == "limit.exceeded") | .attrs.limit // .limit' "$T/ev" 2>/dev/null | grep -c '^memory$')" "3" \
		"$who: each OOM exec recorded a limit.exceeded event of the memory limit"
	is "$(pc "$who" exec "$id" -- echo alive)" "alive" "$who: the sandbox runs commands after the OOM"
	pc "$who" exec "$id" -c 'exit 3'
	is "$?" "3" "$who: a failing command that is no OOM keeps its own status"
	pc "$who" kill "$id" >/dev/null
}

for who in root user; do
	if [ "$who" = user ]; then
		# Rootless: a cgroup delegated to nobody, as an administrator would; without one
		# a rootless sandbox has no memory limit (README: cgroup delegation).
		delegate_cgroup
		SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
		PRUN_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
	fi
	serve_start "$who"
	ok $? "$who: the daemon starts"
	id=$(pc "$who" create --session bytes-$who)
	is "$?" 0 "$who: create"
	bytes_tests "$who" "$id" sync
	bytes_tests "$who" "$id" stream
	attach_tests "$who" "$id"
	oom_tests "$who"
	ids=$(pc "$who" ps -q)
	[ -z "$ids" ] || pc "$who" kill $ids >/dev/null
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: the daemon stops cleanly"
	sleep 0.5
done
done_testing
