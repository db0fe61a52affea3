#!/bin/bash
# paddock serve: the file API acts with the sandbox's confinement, never with the supervisor's
# credentials (docs/internals/daemon.md, "The file API's helper"), as root and as an
# unprivileged user (TAP). Each attack goes through the API (GET/PUT/DELETE .../files, stat,
# ls) and the same operation is tried by a process inside the sandbox: both must get the same
# answer. The targets: another user's 0600 file and 0700 directory in an rw workspace, a
# root-owned file there, a file the sandbox made unreadable in its own /tmp, /proc/1/autogroup.
# Files made through the API belong to the sandbox's user and never carry set-id bits.
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
	serve_start "$who"
	ok $? "$who: the daemon starts"
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

	api "$who" DELETE "/v1/sandboxes/$ID"
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: clean stop"
}

files_tests root 4242
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
files_tests user 0
SERVE_ENV=()
done_testing
