#!/bin/bash
# paddock serve: the file API acts with the sandbox's confinement, never with the supervisor's
# credentials (docs/internals/daemon.md, "The file API's helper"), as root and as an
# unprivileged user (TAP). Each attack goes through the API (GET/PUT/DELETE .../files, stat,
# ls) and the same operation is tried by a process inside the sandbox: both must get the same
# answer. The targets: another user's 0600 file and 0700 directory in an rw workspace, a
# root-owned file there, a file the sandbox made unreadable in its own /tmp, /proc/1/autogroup.
# Files made through the API belong to the sandbox's user and never carry set-id bits.
# Archives: PUT makes the missing directory, clears set-id bits, refuses device nodes and
# bytes that are no tar; GET streams (the daemon's VmHWM stays bounded over 16 parallel
# 12 MiB downloads; one past --max-body is cut, not answered short) and a sandbox has at most
# 4 transfers at once (then 429 + Retry-After).
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

if ! have_supervisor; then
	echo "Bail out! this build has no 'paddock supervise'"
	exit 1
fi
for tool in curl jq; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is not installed (make setup installs it)"; exit 1; }
done
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

# put WHO PATH BODY [QUERY]: PUT .../files?path=PATH with BODY; sets $CODE and $BODY.
put() {
	api "$1" PUT "/v1/sandboxes/$ID/files?path=$2${4:-}" "$3"
}

# inside WHO CMD: CMD run by sh in the sandbox; prints its exit code.
inside() {
	api "$1" POST "/v1/sandboxes/$ID/exec" "$(jq -nc --arg c "$2" '{cmd: $c}')"
	jq_get "$BODY" exit_code
}

# same WHO DESC API_CODE SANDBOX_EXIT: the API refused (4xx) exactly when the sandbox's own
# attempt failed (exit code not 0).
same() {
	local api_ok=no box_ok=no
	case $3 in 2??) api_ok=yes ;; esac
	[ "$4" = 0 ] && box_ok=yes
	is "$api_ok $3" "$box_ok $3" "$1: $2: the API (HTTP $3) and the sandbox (exit $4) agree"
}

# A workspace holding what the sandbox's user may not touch (owned by OTHER).
make_ws() {
	local who=$1 other=$2 ws
	ws=$(mktemp -d "$T/ws-$who-XXXXXX")
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$ws"
	printf 'top-secret' >"$ws/secret"
	chown "$other:$other" "$ws/secret"
	chmod 0600 "$ws/secret"
	mkdir "$ws/private"
	printf 'inner' >"$ws/private/f"
	chown -R "$other:$other" "$ws/private"
	chmod 0700 "$ws/private"
	printf 'orig' >"$ws/rootfile"
	chown 0:0 "$ws/rootfile"
	chmod 0644 "$ws/rootfile"
	echo "$ws"
}

files_tests() {
	local who=$1 other=$2 W code box
	W=$(make_ws "$who" "$other")
	serve_start "$who" --max-body 16M
	ok $? "$who: the daemon starts (--max-body 16M)"
	api "$who" POST /v1/sandboxes "{\"workspace\":{\"path\":\"$W\",\"mode\":\"rw\"}}"
	ID=$(jq_get "$BODY" id)
	is "$CODE" "201" "$who: a sandbox with an rw workspace holding other users' files"

	# Another user's 0600 file: read, overwrite.
	api "$who" GET "/v1/sandboxes/$ID/files?path=$W/secret"
	code=$CODE
	is "$code $(grep -c top-secret <<<"$BODY")" "403 0" "$who: GET another user's 0600 file -> 403, not its bytes"
	same "$who" "read another user's 0600 file" "$code" "$(inside "$who" "cat $W/secret")"
	put "$who" "$W/secret" pwned
	code=$CODE
	is "$code $(cat "$W/secret")" "403 top-secret" "$who: PUT over another user's 0600 file -> 403, the file unchanged"
	same "$who" "overwrite another user's 0600 file" "$code" "$(inside "$who" "echo pwned > $W/secret")"

	# Another user's 0700 directory: stat, list, delete, create inside.
	api "$who" GET "/v1/sandboxes/$ID/stat?path=$W/private/f"
	code=$CODE
	is "$code" "403" "$who: stat of a file in another user's 0700 directory -> 403"
	same "$who" "stat in another user's 0700 directory" "$code" "$(inside "$who" "stat $W/private/f")"
	api "$who" GET "/v1/sandboxes/$ID/ls?path=$W/private"
	code=$CODE
	is "$code" "403" "$who: ls of another user's 0700 directory -> 403"
	same "$who" "list another user's 0700 directory" "$code" "$(inside "$who" "ls $W/private")"
	api "$who" DELETE "/v1/sandboxes/$ID/files?path=$W/private/f"
	code=$CODE
	is "$code $(cat "$W/private/f")" "403 inner" "$who: DELETE in another user's 0700 directory -> 403, the file kept"
	same "$who" "delete in another user's 0700 directory" "$code" "$(inside "$who" "rm -f $W/private/f")"
	put "$who" "$W/private/new" x
	code=$CODE
	is "$code $(test -e "$W/private/new" && echo made || echo absent)" "403 absent" \
		"$who: PUT into another user's 0700 directory -> 403, nothing made"
	same "$who" "create in another user's 0700 directory" "$code" "$(inside "$who" "echo x > $W/private/new2")"

	# A root-owned 0644 file: the sandbox's root may write it, nobody may not.
	put "$who" "$W/rootfile" api
	code=$CODE
	box=$(inside "$who" "echo box >> $W/rootfile")
	same "$who" "write a root-owned 0644 file" "$code" "$box"
	if [ "$who" = root ]; then
		is "$code $box" "201 0" "$who: ... which the sandbox's root may"
	else
		is "$code $([ "$box" != 0 ] && echo failed) $(cat "$W/rootfile")" "403 failed orig" \
			"$who: ... which nobody may not (the file unchanged)"
	fi

	# A file the sandbox made unreadable in its own /tmp (no capability may override it).
	is "$(inside "$who" "echo locked > /tmp/locked && chmod 000 /tmp/locked && echo ok")" "0" \
		"$who: the sandbox makes a mode 000 file in its /tmp"
	api "$who" GET "/v1/sandboxes/$ID/files?path=/tmp/locked"
	code=$CODE
	is "$code" "403" "$who: GET of that mode 000 file -> 403"
	same "$who" "read a mode 000 file" "$code" "$(inside "$who" "cat /tmp/locked")"

	# /proc/1/autogroup: the sandbox's init's scheduling group.
	put "$who" /proc/1/autogroup 19
	code=$CODE
	is "$(case $code in 4??) echo refused ;; *) echo "$code" ;; esac)" "refused" \
		"$who: PUT /proc/1/autogroup -> refused ($code)"
	same "$who" "write /proc/1/autogroup" "$code" "$(inside "$who" "echo 19 > /proc/1/autogroup")"

	# What the API makes belongs to the sandbox's user, without set-id bits.
	put "$who" "$W/made/by/api" data
	is "$CODE $(stat -c '%u %a' "$W/made/by/api")" "201 $([ "$who" = root ] && echo 0 || echo $UNPRIV_UID) 644" \
		"$who: PUT of a new file (parents made) -> 201, owned by the sandbox's user"
	put "$who" "$W/suid" data '&mode=6755'
	is "$CODE $(stat -c '%a' "$W/suid")" "201 755" "$who: PUT with mode=6755 -> 201, made 0755: no set-id bit"

	archive_tests "$who" "$W"
	transfer_tests "$who"

	api "$who" DELETE "/v1/sandboxes/$ID"
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: clean stop"
}

# tarball OUT KIND: a tar with a set-uid and a set-gid member (KIND setid), or a device node.
tarball() {
	python3 - "$1" "$2" <<'PY'
import io, sys, tarfile
out, kind = sys.argv[1], sys.argv[2]
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    def add(name, mode, data=b"#!/bin/sh\necho hi\n", type_=tarfile.REGTYPE):
        i = tarfile.TarInfo(name)
        i.mode, i.type, i.uid, i.gid = mode, type_, 0, 0
        i.size = len(data) if type_ == tarfile.REGTYPE else 0
        t.addfile(i, io.BytesIO(data) if type_ == tarfile.REGTYPE else None)
    if kind == "setid":
        add("sgid-dir", 0o2755, type_=tarfile.DIRTYPE)
        add("sgid-dir/suid", 0o4755)
        add("sgid", 0o2711)
    else:
        i = tarfile.TarInfo("null")
        i.type, i.mode, i.devmajor, i.devminor = tarfile.CHRTYPE, 0o666, 1, 3
        t.addfile(i)
PY
	chmod 0644 "$1"
}

# put_tar WHO DIR FILE: PUT .../archive?path=DIR with FILE; sets $CODE and $BODY.
put_tar() {
	local out
	out=$(mktemp "$T/api-XXXXXX")
	chmod 0666 "$out"
	CODE=$(as "$1" curl -s -o "$out" -w '%{http_code}' --unix-socket "$(sock_of "$1")" -X PUT \
		--data-binary @"$3" "http://paddock/v1/sandboxes/$ID/archive?path=$2")
	BODY=$(cat "$out")
	rm -f "$out"
}

# Archive uploads: the directory is made when missing; no set-id bit, no device node.
archive_tests() {
	local who=$1 W=$2
	tarball "$T/setid.tar" setid
	tarball "$T/dev.tar" dev
	put_tar "$who" "$W/up/new/dir" "$T/setid.tar"
	is "$CODE" "200" "$who: PUT archive into a directory that does not exist -> 200 (it is made)"
	is "$(stat -c '%a %u' "$W/up/new/dir/sgid-dir" "$W/up/new/dir/sgid-dir/suid" "$W/up/new/dir/sgid" 2>&1 | tr '\n' ' ')" \
		"755 $(id -u "$([ "$who" = root ] && echo root || echo nobody)") 755 $(id -u "$([ "$who" = root ] && echo root || echo nobody)") 711 $(id -u "$([ "$who" = root ] && echo root || echo nobody)") " \
		"$who: a tar with set-uid and set-gid members unpacks with both bits cleared, as the sandbox's user"
	put_tar "$who" "$W/up/dev" "$T/dev.tar"
	is "$CODE $(jq_get "$BODY" error.field) $(jq_get "$BODY" error.message | grep -c 'device node')" \
		"403 body 1" "$who: PUT archive holding a device node -> 403 naming the device node"
	is "$(test -e "$W/up/dev" && echo made || echo absent)" "absent" "$who: ... and nothing is unpacked"
	printf 'not a tar at all, and longer than a tar header block is: %0600d' 0 >"$T/junk.tar"
	chmod 0644 "$T/junk.tar"
	put_tar "$who" "$W/up/junk" "$T/junk.tar"
	is "$CODE $(jq_get "$BODY" error.field)" "400 body" "$who: PUT archive of bytes that are no tar -> 400 naming the body"
}

# writable FILE: an empty FILE the unprivileged daemon's clients may write too.
writable() {
	: >"$1"
	chmod 0666 "$1"
}

vmhwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$(serve_pid "$1")/status"; }

# Archive downloads stream (the daemon's memory stays bounded) and a sandbox has at most 4.
transfer_tests() {
	local who=$1 i before after codes n200 n429 pids=""
	is "$(inside "$who" "mkdir -p /tmp/big && head -c 12582912 /dev/urandom > /tmp/big/blob")" "0" \
		"$who: a 12 MiB file in the sandbox"
	# Four downloads that read slowly hold the sandbox's four transfers.
	for i in 1 2 3 4; do
		writable "$T/slow$i.h"
		(as_exec "$who" curl -s --limit-rate 16k -D "$T/slow$i.h" -o /dev/null --unix-socket \
			"$(sock_of "$who")" "http://paddock/v1/sandboxes/$ID/archive?path=/tmp/big") &
		eval "SLOW$i=\$!"
	done
	for i in 1 2 3 4; do
		for _ in $(seq 1 3000); do
			grep -q '^HTTP/1.1 200' "$T/slow$i.h" && break
			sleep 0.1
		done
	done
	is "$(cat "$T"/slow?.h | grep -c '^HTTP/1.1 200')" "4" \
		"$who: four slow downloads of the 12 MiB directory are answered 200 (streaming)"
	writable "$T/fifth.h"
	writable "$T/fifth.body"
	as "$who" curl -s -D "$T/fifth.h" -o "$T/fifth.body" --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/sandboxes/$ID/archive?path=/tmp/big"
	is "$(head -1 "$T/fifth.h" | cut -d' ' -f2) $(grep -ci '^Retry-After: 1' "$T/fifth.h") $(jq -r .error.code "$T/fifth.body")" \
		"429 1 limit" "$who: a fifth concurrent download -> 429 limit with Retry-After"
	put_tar "$who" /tmp/up5 "$T/setid.tar"
	is "$CODE" "429" "$who: ... and so is an upload meanwhile"
	for i in 1 2 3 4; do kill "$(eval echo "\$SLOW$i")" 2>/dev/null; wait "$(eval echo "\$SLOW$i")" 2>/dev/null; done
	# 16 at once, read at full speed: the daemon's high-water mark stays below what even the
	# four transfers allowed at once would take if each were buffered twice (96 MiB).
	before=$(vmhwm_kb "$who")
	for i in $(seq 1 16); do
		writable "$T/dl$i.tar"
		(as_exec "$who" curl -s -o "$T/dl$i.tar" -w '%{http_code}\n' --unix-socket "$(sock_of "$who")" \
			"http://paddock/v1/sandboxes/$ID/archive?path=/tmp/big" >"$T/dl$i.code") &
		pids="$pids $!"
	done
	for i in $pids; do wait "$i"; done
	after=$(vmhwm_kb "$who")
	codes=$(cat "$T"/dl*.code | sort | uniq -c | tr -s ' \n' ' ')
	n200=$(cat "$T"/dl*.code | grep -c '^200$')
	n429=$(cat "$T"/dl*.code | grep -c '^429$')
	is "$((n200 + n429)) $([ "$n200" -ge 1 ] && echo some-200)" "16 some-200" \
		"$who: 16 parallel downloads -> each 200 or 429 ($codes)"
	for i in $(seq 1 16); do
		[ "$(cat "$T/dl$i.code")" = 200 ] || continue
		is "$(tar -tvf "$T/dl$i.tar" ./blob | awk '{print $3}')" "12582912" "$who: a 200 download is the whole archive"
		break
	done
	ok $([ $((after - before)) -lt 65536 ] && echo 0 || echo 1) \
		"$who: the daemon's VmHWM grew by less than 64 MiB over 16 parallel 12 MiB downloads ($before kB -> $after kB)"
	rm -f "$T"/dl*.tar
	# Past --max-body (16M here) once bytes went out: the answer is cut, never a short "whole" one.
	local rc code
	inside "$who" "mkdir /tmp/b20 && head -c 20971520 /dev/urandom > /tmp/b20/blob" >/dev/null
	writable "$T/cut.tar"
	code=$(as "$who" curl -s -o "$T/cut.tar" -w '%{http_code}' --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/sandboxes/$ID/archive?path=/tmp/b20")
	rc=$?
	is "$code $([ "$rc" != 0 ] && echo incomplete) $([ "$(stat -c %s "$T/cut.tar")" -le 16777216 ] && echo short)" \
		"200 incomplete short" \
		"$who: a 20 MiB archive past --max-body 16M -> 200, then cut: curl reports the transfer incomplete (exit $rc)"
	api "$who" GET "/v1/sandboxes/$ID/archive?path=/tmp/none"
	is "$CODE $(jq_get "$BODY" error.code)" "400 bad_request" \
		"$who: an archive of a missing directory -> 400 (an error before any byte is an answer)"
}

# In a sanitizer build, ASan keeps freed memory in quarantine (256 MiB by default), which the
# high-water mark would count as if it were held: a small quarantine leaves what is held.
QUARANTINE="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
SERVE_ENV=("$QUARANTINE")
files_tests root 4242
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED" "$QUARANTINE")
files_tests user 0
SERVE_ENV=()
done_testing
