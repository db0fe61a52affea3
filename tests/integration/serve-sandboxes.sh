# Sourced by test-serve.sh once the supervisor is built: sandboxes end to end through the
# daemon, as root and as nobody. Uses lib-serve.sh.

# The processes of this test's supervisors (their argv names the sandbox id).
supervisors_of() { pgrep -f "paddock supervise --id $1" | tr '\n' ' '; }
# Every supervisor started by WHO's daemon of this test (found by its run dir in its environment).
supervisors_in() {
	local p
	for p in $(pgrep -f "paddock supervise --id"); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PADDOCK_RUNTIME_DIR=$T/serve-$1/run" &&
			echo "$p"
	done
}

# until_empty CMD...: up to 10 s for CMD's output to be empty (a process to end), not a fixed
# sleep that a loaded machine outlasts.
until_empty() {
	local i
	for i in $(seq 1 100); do
		[ -z "$("$@")" ] && return 0
		sleep 0.1
	done
	return 1
}

# wait_for FILE ERE: up to 10 s for a line of FILE to match.
wait_for() {
	local i
	for i in $(seq 1 100); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# pty sessions and the stdin/resize routes, through curl (paddock attach is in test-cli-daemon.sh).
pty_tests() {
	local who=$1 port=$2 id=$3 sock f pid rotok
	sock=$(sock_of "$who")
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["sh","-i"],"pty":true}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 pty" "$who: a pty exec that does not stream -> 400 naming pty"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["sh"],"pty":true,"stream":true,"stdin":"x"}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 stdin" "$who: a pty exec with a stdin body -> 400 naming stdin"

	as "$who" curl -s -N --max-time 30 --unix-socket "$sock" -X POST \
		-d '{"argv":["/bin/sh","-i"],"pty":true,"stream":true,"cols":80,"rows":24}' \
		"http://paddock/v1/sandboxes/$id/exec" >"$T/pty-$who" &
	pid=$!
	wait_for "$T/pty-$who" '^event: start'
	f=$(sed -n 's/^data: {"exec_id":\([0-9]*\).*/\1/p' "$T/pty-$who" | head -1)
	api "$who" POST "/v1/sandboxes/$id/exec/$f/stdin" 'tty; stty size; echo "x$((6 * 7))x"
'
	is "$CODE $BODY" '200 {"ok":true}' "$who: POST .../exec/E/stdin to a pty session"
	wait_for "$T/pty-$who" 'x42x'
	is "$(grep -c 'x42x' "$T/pty-$who"):$(grep -Ec '/dev/pts/[0-9]+' "$T/pty-$who"):$(grep -c '24 80' "$T/pty-$who")" \
		"1:1:1" "$who: the pty session runs what was typed, on /dev/pts/N, 80x24"
	api "$who" POST "/v1/sandboxes/$id/exec/$f/resize" '{"cols":101,"rows":33}'
	is "$CODE $BODY" '200 {"ok":true}' "$who: POST .../exec/E/resize"
	api "$who" POST "/v1/sandboxes/$id/exec/$f/stdin" 'stty size
'
	wait_for "$T/pty-$who" '33 101'
	is "$(grep -c '33 101' "$T/pty-$who")" "1" "$who: after resize the terminal is 101x33 (stty size)"
	api "$who" POST "/v1/sandboxes/$id/exec/$f/resize" '{"cols":0,"rows":33}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 cols" "$who: resize to 0 columns -> 400 naming cols"
	api "$who" POST "/v1/sandboxes/$id/exec/999999/stdin" 'echo no'
	is "$CODE $(jq_get "$BODY" error.code) $(jq_get "$BODY" error.field)" "404 not_found exec_id" \
		"$who: stdin to an unknown exec id -> 404 JSON naming exec_id"
	api "$who" POST "/v1/sandboxes/$id/exec/nope/resize" '{"cols":10,"rows":10}'
	is "$CODE $(jq_get "$BODY" error.field)" "404 exec_id" "$who: resize of a malformed exec id -> 404"
	# A token without the exec operation cannot type into the session.
	api "$who" POST "/v1/sandboxes/$id/tokens" '{"ops":["read","files"],"ttl":"5m"}'
	rotok=$(jq_get "$BODY" token)
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id/exec/$f/stdin" "$rotok" 'echo "y$((7 * 8))y"
'
	is "$CODE $(jq_get "$BODY" error.code)" "403 forbidden" "$who: stdin with a token without exec -> 403"
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id/exec/$f/resize" "$rotok" '{"cols":10,"rows":10}'
	is "$CODE" "403" "$who: resize with a token without exec -> 403"
	# ^D at the start of a line ends the shell.
	api "$who" POST "/v1/sandboxes/$id/exec/$f/stdin?eof=1" ''
	is "$CODE" "200" "$who: POST .../stdin?eof=1 sends ^D"
	wait "$pid"
	is "$(grep -c '^event: exit' "$T/pty-$who"):$(grep -c 'y56y' "$T/pty-$who")" "1:0" \
		"$who: the session ends with an exit event; the refused input never reached it"

	# The client goes away: the session gets SIGHUP.
	(as_exec "$who" curl -s -N --max-time 30 --unix-socket "$sock" -X POST \
		-d '{"argv":["sleep","60"],"pty":true,"stream":true}' \
		"http://paddock/v1/sandboxes/$id/exec" >"$T/hup-$who") &
	pid=$!
	wait_for "$T/hup-$who" '^event: start'
	kill "$pid"
	wait "$pid"
	as "$who" curl -s -N --max-time 3 --unix-socket "$sock" \
		"http://paddock/v1/events?since=0&kind=exec.exit" >"$T/ptyev-$who"
	wait_for "$T/ptyev-$who" '"signal":1'
	is "$(grep -c '"pty":true' "$T/ptyev-$who"):$(grep -c '"signal":1[,}]' "$T/ptyev-$who")" "2:1" \
		"$who: pty session ends are audited (exec.exit), the abandoned one by SIGHUP"
	as "$who" curl -s -N --max-time 2 --unix-socket "$sock" \
		"http://paddock/v1/events?since=0&kind=exec.request" >"$T/ptyev-$who"
	is "$(grep -c '"pty":true' "$T/ptyev-$who")" "2" "$who: pty session starts are audited (exec.request with pty)"

	# A streaming exec without a pty keeps its stdin open with "stdin_open".
	as "$who" curl -s -N --max-time 30 --unix-socket "$sock" -X POST \
		-d '{"argv":["sh","-c","cat; echo done"],"stream":true,"stdin_open":true}' \
		"http://paddock/v1/sandboxes/$id/exec" >"$T/open-$who" &
	pid=$!
	wait_for "$T/open-$who" '^event: start'
	f=$(sed -n 's/^data: {"exec_id":\([0-9]*\).*/\1/p' "$T/open-$who" | head -1)
	api "$who" POST "/v1/sandboxes/$id/exec/$f/stdin" 'part1-'
	api "$who" POST "/v1/sandboxes/$id/exec/$f/stdin?eof=1" 'part2'
	wait "$pid"
	is "$(grep '^data:' "$T/open-$who" | grep -v exec_id | sed 's/.*"data":"\([^"]*\)".*/\1/' | tr -d '\n')" \
		'part1-part2done\n' "$who: stdin route to a pipe; eof=1 closes it"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["cat"],"stdin_open":true}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 stdin_open" "$who: stdin_open without streaming -> 400"
}

sandbox_tests() {
	local who=$1 port=$2 sock id id2 tok rotok f n pids
	serve_start "$who" --listen "127.0.0.1:$port"
	ok $? "$who: the daemon starts (sandbox tests)"
	sock=$(sock_of "$who")

	api "$who" POST /v1/sandboxes '{"labels":{"session":"sA","agent":"bot"},"ttl":"1h"}'
	id=$(jq_get "$BODY" id)
	tok=$(jq_get "$BODY" token)
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" pool) ${tok:0:7}" "201 running false pdk_sb_" \
		"$who: POST /v1/sandboxes creates a running sandbox with its token"
	[ -n "$id" ] || { echo "# create failed: $BODY"; sed 's/^/# /' "$T/serve-$who.log"; return 1; }
	is "$(stat -c %a "$T/serve-$who/run/sb")" "700" "$who: the sandboxes' run directories are in a 0700 directory"

	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["sh","-c","echo hello; echo oops >&2; exit 3"]}'
	is "$CODE $(jq_get "$BODY" exit_code) $(jq_get "$BODY" end) $(jq_get "$BODY" stdout.text | tr -d '\n') $(jq_get "$BODY" stderr.text | tr -d '\n')" \
		"200 3 exited hello oops" "$who: sync exec: exit code, stdout and stderr"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"cat; echo \"$GREETING\"","stdin":"from-stdin ","env":{"GREETING":"hi"}}'
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "from-stdin hi" "$who: exec with stdin, env and cmd"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["sh","-c","seq 1 20000"],"output_cap":200}'
	f=$(jq_get "$BODY" stdout.file)
	n=$(jq_get "$BODY" stdout.bytes)
	is "$(jq_get "$BODY" stdout.truncated) $n $(jq_get "$BODY" stdout.dropped) $(jq_get "$BODY" stdout.text | grep -c "bytes dropped; full output in $f")" \
		"true 108894 108699 1" "$who: output over the cap keeps head and tail with a marker line"
	is "$(jq_get "$BODY" stdout.dropped_lines) $(jq_get "$BODY" stdout.line_cut) $(jq_get "$BODY" stdout.text | grep -B1 -A1 '^\[\.\.\. ' | tr '\n' ' ')" \
		"19948 false 36 [... 19948 lines, 108699 bytes dropped; full output in $f ...] 19985 " \
		"$who: the cut falls on line ends (head through 36, tail from 19985) and counts the dropped lines"
	api "$who" GET "/v1/sandboxes/$id/files?path=$f"
	is "$CODE $(printf '%s\n' "$BODY" | wc -l) $(printf '%s\n' "$BODY" | tail -1)" "200 20000 20000" \
		"$who: the full output is in $f inside the sandbox"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["sh","-c","sleep 5"],"timeout":"300ms"}'
	is "$CODE $(jq_get "$BODY" end)" "200 timeout" "$who: exec timeout"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["/no/such/program"]}'
	is "${CODE:0:1}" "4" "$who: exec of a missing program -> 4xx ($(jq_get "$BODY" error.message))"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":[1]}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 argv[0]" "$who: exec argv of the wrong type -> 400 naming argv[0]"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["id"],"timeout":{}}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 timeout" "$who: exec timeout of the wrong type -> 400 naming timeout"
	as "$who" curl -s -N --unix-socket "$sock" -X POST -d '{"cmd":"echo one; echo two >&2","stream":true}' \
		"http://paddock/v1/sandboxes/$id/exec" >"$T/stream-$who"
	is "$(grep '^event:' "$T/stream-$who" | sort | uniq | tr '\n' ' ')" \
		"event: exit event: start event: stderr event: stdout " "$who: streaming exec as SSE"

	as "$who" curl -s -N --max-time 10 --unix-socket "$sock" -X POST -d '{"argv":["sleep","30"],"stream":true}' \
		"http://paddock/v1/sandboxes/$id/exec" >"$T/sig-$who" &
	for n in $(seq 1 50); do grep -q '^event: start' "$T/sig-$who" && break; sleep 0.1; done
	f=$(sed -n 's/^data: {"exec_id":\([0-9]*\).*/\1/p' "$T/sig-$who" | head -1)
	api "$who" POST "/v1/sandboxes/$id/exec/$f/signal" '{"signal":"TERM"}'
	wait $!
	is "$CODE $(grep -c '"end":"signaled"' "$T/sig-$who") $(grep -c '"signal":15' "$T/sig-$who")" "200 1 1" \
		"$who: POST .../exec/E/signal ends a streaming command"

	pty_tests "$who" "$port" "$id"

	# Files and archives.
	api "$who" PUT "/v1/sandboxes/$id/files?path=/tmp/up/a.txt" "file body"
	is "$CODE" "201" "$who: PUT a file (parents made)"
	api "$who" GET "/v1/sandboxes/$id/files?path=/tmp/up/a.txt"
	is "$CODE $BODY" "200 file body" "$who: GET the file back"
	api "$who" GET "/v1/sandboxes/$id/stat?path=/tmp/up/a.txt"
	is "$(jq_get "$BODY" type) $(jq_get "$BODY" size)" "file 9" "$who: stat"
	api "$who" GET "/v1/sandboxes/$id/ls?path=/tmp/up"
	is "$(jq_get "$BODY" entries.0.name)" "a.txt" "$who: ls"
	as "$who" curl -s --unix-socket "$sock" "http://paddock/v1/sandboxes/$id/archive?path=/tmp/up" \
		| tar -tf - 2>/dev/null | sort | tr '\n' ' ' >"$T/tar-$who"
	is "$(cat "$T/tar-$who")" "./ ./a.txt " "$who: GET archive: tar made inside the sandbox"
	mkdir -p "$T/tarsrc" && echo inner >"$T/tarsrc/b.txt" && tar -cf "$T/in.tar" -C "$T/tarsrc" . && chmod 644 "$T/in.tar"
	as "$who" curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" -X PUT --data-binary @"$T/in.tar" \
		"http://paddock/v1/sandboxes/$id/archive?path=/tmp/up" >"$T/code"
	api "$who" GET "/v1/sandboxes/$id/files?path=/tmp/up/b.txt"
	is "$(cat "$T/code") $BODY" "200 inner" "$who: PUT archive: extracted inside the sandbox"
	api "$who" DELETE "/v1/sandboxes/$id/files?path=/tmp/up&recursive=1"
	api "$who" GET "/v1/sandboxes/$id/stat?path=/tmp/up"
	is "$CODE" "404" "$who: DELETE files recursive"

	# Workspace layers through the daemon: snapshot, diff, rollback (the private workspace).
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"pwd"}'
	f=$(jq_get "$BODY" stdout.text | tr -d '\n')
	api "$who" PUT "/v1/sandboxes/$id/files?path=$f/layer.txt" "one"
	api "$who" POST "/v1/sandboxes/$id/exec" \
		'{"cmd":"echo kept >/tmp/carry.txt && mkdir -p /tmp/d/e && ln -s /etc/hostname /tmp/d/link && mkfifo /tmp/fifo"}'
	api "$who" PUT "/v1/sandboxes/$id/files?path=$f/count.sh" \
		'for p in /proc/[0-9]*/cmdline; do tr "\000" " " <"$p"; echo; done | grep -c "^sleep 4327"'
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"sleep 4327 >/dev/null 2>&1 &"}'
	# A snapshot is taken with the sandbox frozen, not restarted: what runs goes on.
	api "$who" POST "/v1/sandboxes/$id/snapshot" '{"name":"s1"}'
	is "$CODE $(jq_get "$BODY" snapshot) $(jq_get "$BODY" frozen_ms | grep -cx '[0-9][0-9]*')" "200 s1 1" \
		"$who: snapshot while a background process runs (frozen_ms reported)"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["sh","count.sh"]}'
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "1" "$who: the snapshot left the background process running"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"cat /tmp/carry.txt; test -p /tmp/fifo && echo fifo"}'
	is "$(jq_get "$BODY" stdout.text | tr -s '\n' ' ')" "kept fifo " "$who: the snapshot left /tmp as it was (the FIFO too)"
	api "$who" PUT "/v1/sandboxes/$id/files?path=$f/layer.txt" "two"
	api "$who" GET "/v1/sandboxes/$id/diff"
	is "$CODE $(printf '%s' "$BODY" | jq -r '[.changes[].path] | sort | join(" ")')" "200 count.sh layer.txt" "$who: diff"
	# A rollback restarts the init: a process left running is not ended silently.
	api "$who" POST "/v1/sandboxes/$id/rollback" '{"snapshot":"s1"}'
	is "$CODE $(jq_get "$BODY" error.code) $(jq_get "$BODY" error.field)" "409 conflict restart" \
		"$who: rollback with a background process left running -> 409 naming restart"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["sh","count.sh"]}'
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "1" "$who: the refused rollback left the background process running"
	api "$who" POST "/v1/sandboxes/$id/rollback" '{"snapshot":"s1","restart":"yes"}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 restart" "$who: a restart that is not a boolean -> 400 naming restart"
	api "$who" POST "/v1/sandboxes/$id/rollback" '{"snapshot":"s1","restart":true}'
	is "$CODE $(jq_get "$BODY" snapshot)" "200 s1" "$who: rollback with restart:true"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["sh","count.sh"]}'
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "0" "$who: ... ended the background process"
	api "$who" GET "/v1/sandboxes/$id/files?path=$f/layer.txt"
	is "$BODY" "one" "$who: ... and put the workspace back to the snapshot"
	# /tmp (a tmpfs in the sandbox) is carried over the init's restart.
	api "$who" POST "/v1/sandboxes/$id/exec" \
		'{"cmd":"echo more >>/tmp/carry.txt && cat /tmp/carry.txt && readlink /tmp/d/link && test -d /tmp/d/e && echo dir; test -e /tmp/fifo || echo nofifo"}'
	is "$(jq_get "$BODY" stdout.text | tr -s '\n' ' ')" "kept more /etc/hostname dir nofifo " \
		"$who: /tmp outlives the rollback's restart (files writable, symlinks not followed, FIFOs left out)"
	api "$who" POST "/v1/sandboxes/$id/rollback" '{"snapshot":"../x"}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 snapshot" "$who: a bad snapshot name -> 400 naming snapshot"
	# A live snapshot over a restarted one: a whiteout (layer.txt, deleted over snapshot s1)
	# is copied; a file made and deleted after it (made.txt: no whiteout) comes back.
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"echo a >made.txt && rm layer.txt && mkdir -p dd && echo x >dd/x"}'
	api "$who" POST "/v1/sandboxes/$id/snapshot" '{"name":"s2"}'
	is "$CODE $(jq_get "$BODY" snapshot)" "200 s2" "$who: a second snapshot, live"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"rm made.txt dd/x && echo b >b.txt && ls"}'
	api "$who" GET "/v1/sandboxes/$id/diff"
	is "$(printf '%s' "$BODY" | jq -r '[.changes[].path] | sort | join(" ")')" "b.txt count.sh dd" \
		"$who: diff against the start after the live snapshot"
	api "$who" POST "/v1/sandboxes/$id/rollback" '{"snapshot":"s2"}'
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"cat made.txt dd/x; ls"}'
	is "$(jq_get "$BODY" stdout.text | tr -s '\n' ' ')" "a x count.sh dd made.txt " \
		"$who: rollback to the live snapshot: made.txt back, b.txt gone, layer.txt still deleted"
	api "$who" POST "/v1/sandboxes/$id/rollback" '{"snapshot":"s1"}'
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"cat layer.txt; echo; ls"}'
	is "$(jq_get "$BODY" stdout.text | tr -s '\n' ' ')" "one count.sh layer.txt " \
		"$who: rollback to the first snapshot under it"
	# Snapshots while a loop starts processes without pause (each exec waits on the tracer):
	# every one is taken, and the loop goes on.
	api "$who" POST "/v1/sandboxes/$id/exec" \
		'{"cmd":"(i=0; while :; do /bin/true; i=$((i+1)); echo $i >/tmp/n.t; mv /tmp/n.t /tmp/n; done) >/dev/null 2>&1 &"}'
	local taken=0 n1 n2
	for n in 1 2 3 4 5; do
		api "$who" POST "/v1/sandboxes/$id/snapshot" "{\"name\":\"loop$n\"}"
		if [ "$CODE" = 200 ]; then taken=$((taken + 1)); else echo "# snapshot loop$n: $CODE $BODY"; fi
	done
	api "$who" GET "/v1/sandboxes/$id/files?path=/tmp/n"
	n1=$BODY
	sleep 0.3
	api "$who" GET "/v1/sandboxes/$id/files?path=/tmp/n"
	n2=$BODY
	is "$taken $([ "${n2:-0}" -gt "${n1:-0}" ] && echo goes-on)" "5 goes-on" \
		"$who: 5 snapshots while a loop starts processes; the loop goes on ($n1 then $n2)"
	api "$who" POST "/v1/sandboxes/$id/rollback" '{"snapshot":"s1","restart":true}'
	# "restart": true: the layer is moved aside (no copy) around a restart of the init.
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"echo c >c.txt; sleep 4327 >/dev/null 2>&1 &"}'
	api "$who" POST "/v1/sandboxes/$id/snapshot" '{"name":"s3","restart":true}'
	is "$CODE $(jq_get "$BODY" snapshot) $(jq_get "$BODY" frozen_ms)" "200 s3 " \
		"$who: snapshot with restart:true (not frozen: the init restarted)"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"sh count.sh; cat c.txt"}'
	is "$(jq_get "$BODY" stdout.text | tr -s '\n' ' ')" "0 c " "$who: ... ended the background process, kept the workspace"

	# Sandbox tokens: limited to their sandbox and their operations.
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sB"}}'
	id2=$(jq_get "$BODY" id)
	tcp GET "http://127.0.0.1:$port/v1/sandboxes/$id" "$tok"
	is "$CODE $(jq_get "$BODY" id)" "200 $id" "$who: the create token reads its sandbox over TCP"
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id2/exec" "$tok" '{"argv":["id"]}'
	is "$CODE $(jq_get "$BODY" error.code)" "403 forbidden" "$who: a sandbox token is refused for another sandbox"
	api "$who" POST "/v1/sandboxes/$id/tokens" '{"ops":["read"],"ttl":"5m"}'
	rotok=$(jq_get "$BODY" token)
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id/exec" "$rotok" '{"argv":["id"]}'
	is "$CODE" "403" "$who: a read-only token cannot exec"
	tcp GET "http://127.0.0.1:$port/v1/sandboxes/$id/ls?path=/" "$rotok"
	is "$CODE" "200" "$who: a read-only token can ls"
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id/tokens" "$tok" '{"ops":["exec"]}'
	is "$CODE" "403" "$who: a sandbox token cannot mint tokens"
	tcp POST "http://127.0.0.1:$port/v1/kill" "$tok" '{"session":"sB"}'
	is "$CODE" "403" "$who: a sandbox token cannot use the kill switch"
	tcp POST "http://127.0.0.1:$port/v1/sandboxes/$id/exec" "$tok" '{"argv":["echo","via-token"]}'
	is "$CODE $(jq_get "$BODY" stdout.text | tr -d '\n')" "200 via-token" "$who: the create token can exec over TCP"

	# Pause and resume.
	api "$who" POST "/v1/sandboxes/$id/pause"
	is "$CODE $(jq_get "$BODY" state)" "200 paused" "$who: pause" || echo "# $BODY"
	api "$who" POST "/v1/sandboxes/$id/resume"
	is "$CODE $(jq_get "$BODY" state)" "200 running" "$who: resume"

	# Budgets: the commands limit, then a 429 and a limit.exceeded event.
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sB"},"overrides":{"limits":{"commands":2}}}'
	local id3
	id3=$(jq_get "$BODY" id)
	api "$who" POST "/v1/sandboxes/$id3/exec" '{"argv":["true"]}'
	api "$who" POST "/v1/sandboxes/$id3/exec" '{"argv":["true"]}'
	api "$who" POST "/v1/sandboxes/$id3/exec" '{"argv":["true"]}'
	is "$CODE $(jq_get "$BODY" error.code)" "429 limit" "$who: a third command over a budget of 2 -> 429 limit"
	api "$who" GET "/v1/sandboxes/$id3"
	is "$(jq_get "$BODY" usage.commands) $(jq_get "$BODY" remaining.commands)" "2 0" \
		"$who: usage and remaining show the spent budget"

	# Idempotency: two concurrent creates with one key make one sandbox.
	for n in 1 2; do
		as "$who" curl -s --unix-socket "$sock" -X POST -H 'Idempotency-Key: key-1' \
			-d '{"labels":{"session":"sK"}}' http://paddock/v1/sandboxes >"$T/idem-$who-$n" &
	done
	wait $(jobs -p | grep -v "$(serve_pid "$who")") 2>/dev/null
	sleep 0.2
	api "$who" GET "/v1/sandboxes?session=sK"
	is "$(jq_get "$(cat "$T/idem-$who-1")" id) $(printf '%s' "$BODY" | jq '.sandboxes | length')" \
		"$(jq_get "$(cat "$T/idem-$who-2")" id) 1" "$who: two concurrent creates with one idempotency key -> one sandbox"

	# The daemon dies (SIGKILL) while a command runs; a new one re-adopts every sandbox.
	as "$who" curl -s --max-time 5 --unix-socket "$sock" -X POST -d '{"argv":["sleep","2"]}' \
		"http://paddock/v1/sandboxes/$id/exec" >/dev/null 2>&1 &
	sleep 0.3
	serve_stop "$who" KILL
	pids=$(supervisors_of "$id")
	ok $([ -n "$pids" ] && echo 0 || echo 1) "$who: the supervisor outlives the daemon's SIGKILL"
	serve_start "$who" --listen "127.0.0.1:$port"
	api "$who" GET "/v1/sandboxes/$id"
	is "$CODE $(jq_get "$BODY" state)" "200 running" "$who: the restarted daemon re-adopted the sandbox"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["echo","again"]}'
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "again" "$who: exec after re-adoption"
	api "$who" POST "/v1/sandboxes/$id/exec" \
		'{"argv":["sh","-c","for i in $(seq 12); do /bin/true par-$i & done; wait; echo burst-done"]}'
	is "$(jq_get "$BODY" stdout.text | tr -d '\n')" "burst-done" "$who: an exec starting 12 execs at once, under the exec trace"

	# A sandbox whose supervisor died while no daemon ran: marked lost and cleaned.
	serve_stop "$who" KILL
	kill -9 $(supervisors_of "$id2") 2>/dev/null
	sleep 0.3
	serve_start "$who" --listen "127.0.0.1:$port"
	api "$who" GET "/v1/sandboxes/$id2"
	is "$CODE $(jq_get "$BODY" state) $([ -e "$T/serve-$who/run/sb/$id2" ] && echo kept || echo removed)" \
		"200 lost removed" "$who: a sandbox whose supervisor died is marked lost, its run dir removed"
	api "$who" DELETE "/v1/sandboxes/$id2"
	is "$CODE $(jq_get "$BODY" state)" "200 ended" "$who: a lost sandbox can be deleted"

	# The kill switch by session label.
	api "$who" POST /v1/kill '{"session":"sA","reason":"test kill switch"}'
	is "$CODE $(jq_get "$BODY" killed)" "200 [\"$id\"]" "$who: POST /v1/kill by session kills the session's sandbox"
	until_empty supervisors_of "$id"
	is "$(supervisors_of "$id")" "" "$who: the killed sandbox's supervisor is gone"
	api "$who" GET "/v1/sandboxes/$id"
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" end_reason)" "200 ended killed" \
		"$who: the killed sandbox stays visible as ended (reason killed)"

	# Delete the rest; nothing of them is left.
	api "$who" GET /v1/sandboxes
	for n in $(printf '%s' "$BODY" | jq -r '.sandboxes[].id'); do
		api "$who" DELETE "/v1/sandboxes/$n"
	done
	until_empty supervisors_in "$who"
	api "$who" GET /v1/sandboxes
	is "$BODY" '{"sandboxes":[]}' "$who: every sandbox deleted"
	is "$(supervisors_in "$who" | wc -l)" "0" "$who: no supervisor process left"
	is "$(ls "$T/serve-$who/run/sb" | wc -l)" "0" "$who: no run directory left"
	is "$(grep -c "$T/serve-$who" /proc/self/mountinfo)" "0" "$who: no mount left"
	as "$who" curl -s -N --max-time 2 --unix-socket "$sock" \
		"http://paddock/v1/events?since=0&kind=kill" >"$T/kills-$who"
	is "$(grep -c 'test kill switch' "$T/kills-$who")" "2" \
		"$who: the kill is audited (one for the sandbox, one for the call)"
	as "$who" curl -s -N --max-time 2 --unix-socket "$sock" \
		"http://paddock/v1/events?since=0&sandbox=$id3&kind=limit.exceeded" >"$T/limit-$who"
	is "$(grep -c '^event: limit.exceeded' "$T/limit-$who")" "1" "$who: the spent budget is audited as limit.exceeded"
	as "$who" curl -s -N --max-time 2 --unix-socket "$sock" \
		"http://paddock/v1/events?since=0&sandbox=$id" >"$T/sbev-$who"
	n=$(grep -c '^event: exec.request' "$T/sbev-$who")
	ok $([ "$n" -gt 5 ] && [ "$(grep -c '^event: process.exec' "$T/sbev-$who")" -ge "$n" ] && echo 0 || echo 1) \
		"$who: the supervisor's spool is ingested (a process.exec for each of the $n exec requests)"
	is "$(grep -o '"argv":\["/bin/true","par-[0-9]*"\]' "$T/sbev-$who" | sort | uniq -c | awk '{print $1}' | sort | uniq -c | tr -s ' ')" \
		" 12 1" "$who: each of the 12 execs started at once is recorded once (process.exec)"
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: clean stop"
	as "$who" "$T/bin/paddock" audit verify >"$T/verify2-$who" 2>&1
	ok $? "$who: paddock audit verify passes after the sandboxes' events"

	# Warm pools, TTL, live events, --kill-on-exit.
	serve_start "$who" --pool default=1 --kill-on-exit
	for n in $(seq 1 100); do
		api "$who" GET /v1/pools
		[ "$(jq_get "$BODY" pools.0.ready)" = 1 ] && break
		sleep 0.1
	done
	is "$(jq_get "$BODY" pools.0.profile) $(jq_get "$BODY" pools.0.size) $(jq_get "$BODY" pools.0.ready)" \
		"default 1 1" "$who: --pool default=1 fills the pool"
	as "$who" curl -s -N --max-time 4 --unix-socket "$sock" "http://paddock/v1/events?kind=sandbox.claim" \
		>"$T/live-$who" 2>/dev/null &
	sleep 0.5
	# ttl 2 s: the checks between the claim and the exec spawn a dozen processes, which took
	# more than 1 s on a loaded machine (the sandbox had expired before its exec).
	api "$who" POST /v1/sandboxes '{"labels":{"session":"sP"},"ttl":2}'
	id=$(jq_get "$BODY" id)
	is "$CODE $(jq_get "$BODY" pool) $(jq_get "$BODY" state) $(jq_get "$BODY" labels.session)" "201 true running sP" \
		"$who: a plain create claims the ready pool member"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["echo","pooled"]}'
	is "$CODE $(jq_get "$BODY" stdout.text | tr -d '\n')" "200 pooled" "$who: the claimed sandbox runs commands"
	sleep 3.5
	api "$who" GET "/v1/sandboxes/$id"
	is "$CODE $(jq_get "$BODY" state) $(jq_get "$BODY" end_reason)" "200 ended ttl" \
		"$who: a sandbox with ttl 2 s is destroyed once it expires (kept as ended, reason ttl)"
	wait $! 2>/dev/null
	is "$(grep -c '^event: sandbox.claim' "$T/live-$who")" "1" "$who: GET /v1/events streams new events live"
	for n in $(seq 1 100); do
		api "$who" GET /v1/pools
		[ "$(jq_get "$BODY" pools.0.ready)" = 1 ] && break
		sleep 0.1
	done
	is "$(jq_get "$BODY" pools.0.ready)" "1" "$who: the pool refills in the background"
	# A pool that grows starts filling with the PUT itself, not at the next 1 s tick: right
	# after its answer the 2 new members are already counted (ready or starting).
	api "$who" PUT /v1/pools/default '{"size":3}'
	api "$who" GET /v1/pools
	is "$(jq_get "$BODY" pools.0.size) $(($(jq_get "$BODY" pools.0.ready) + $(jq_get "$BODY" pools.0.starting)))" \
		"3 3" "$who: PUT /v1/pools starts the refill at once"
	for n in $(seq 1 200); do
		api "$who" GET /v1/pools
		[ "$(jq_get "$BODY" pools.0.ready)" = 3 ] && break
		sleep 0.1
	done
	is "$(jq_get "$BODY" pools.0.ready)" "3" "$who: a pool grown to 3 fills"
	# A burst of claims: the replacements (the whole deficit, at most 4 starting a pool) are
	# held back until the claimed sandboxes' first execs answered, at most 200 ms, so they
	# do not compete with those execs; not one per timer tick.
	for n in 1 2 3; do
		api "$who" POST /v1/sandboxes '{"labels":{"session":"burst"}}'
		eval "burst$n=\$(jq_get \"\$BODY\" id)"
	done
	sleep 0.5
	api "$who" GET /v1/sandboxes
	is "$(printf '%s' "$BODY" | jq '[.sandboxes[] | select(.labels.session == "burst")] | length'):$(printf '%s' "$BODY" | jq '[.sandboxes[] | select(.labels.session == null)] | length')" \
		"3:3" "$who: 0.5 s after 3 claims without an exec (before the next tick), their 3 replacements are starting"
	# A claim whose first exec answers releases the hold: the replacement starts right after
	# that answer.
	for n in 1 2 3; do
		api "$who" DELETE "/v1/sandboxes/$(eval echo "\$burst$n")"
	done
	for n in $(seq 1 200); do
		api "$who" GET /v1/pools
		[ "$(jq_get "$BODY" pools.0.ready)" = 3 ] && break
		sleep 0.1
	done
	api "$who" POST /v1/sandboxes '{"labels":{"session":"first"}}'
	id=$(jq_get "$BODY" id)
	api "$who" POST "/v1/sandboxes/$id/exec" '{"argv":["true"]}'
	code=$CODE
	api "$who" GET /v1/pools
	is "$code $(($(jq_get "$BODY" pools.0.ready) + $(jq_get "$BODY" pools.0.starting)))" "200 3" \
		"$who: the claimed sandbox's first exec answered, its replacement is already starting"
	# Agents claiming at once (issue 18): as many clients as the pool holds claim together,
	# each with its first exec. While a claimed sandbox waits for its first exec, the
	# spools' ingest is held back (at most 50 ms each): every exec answers, and every one
	# is in the audit store (request, start, exit) once the burst is over.
	for n in $(seq 1 200); do
		api "$who" GET /v1/pools
		[ "$(jq_get "$BODY" pools.0.ready)" = 3 ] && break
		sleep 0.1
	done
	pids=""
	for n in 1 2 3; do
		(
			api "$who" POST /v1/sandboxes '{"labels":{"session":"wave"}}'
			wid=$(jq_get "$BODY" id)
			api "$who" POST "/v1/sandboxes/$wid/exec" '{"argv":["echo","wave'$n'"]}'
			printf '%s %s %s\n' "$wid" "$CODE" "$(jq_get "$BODY" stdout.text | tr -d '\n')" \
				>"$T/wave-$who-$n"
		) &
		pids="$pids $!"
	done
	# shellcheck disable=SC2086
	wait $pids
	is "$(cat "$T/wave-$who-"[123] | cut -d' ' -f2- | sort | tr '\n' ' ')" \
		"200 wave1 200 wave2 200 wave3 " "$who: 3 claims at once, each with its first exec, all answer"
	for n in 1 2 3; do
		wid=$(cut -d' ' -f1 "$T/wave-$who-$n")
		# The warm-up's and this exec's exits: the spool is ingested by then.
		for i in $(seq 1 100); do
			as "$who" curl -s --max-time 10 --unix-socket "$sock" \
				"http://paddock/v1/events?since=0&sandbox=$wid&kind=process.&follow=0" \
				>"$T/wavev-$who-$n"
			[ "$(grep -c '^event: process.exit' "$T/wavev-$who-$n")" = 2 ] && break
			sleep 0.1
		done
		as "$who" curl -s --max-time 10 --unix-socket "$sock" \
			"http://paddock/v1/events?since=0&sandbox=$wid&kind=exec.request&follow=0" \
			>>"$T/wavev-$who-$n"
		is "$(grep -c "\"argv\":\\[\"echo\",\"wave$n\"\\]" "$T/wavev-$who-$n")" "2" \
			"$who: burst claim $n: its exec's request and start name its command"
		is "$(grep '^event: ' "$T/wavev-$who-$n" | sort | uniq -c | awk '{print $1 $3}' | tr '\n' ' ')" \
			"1exec.request 2process.exec 2process.exit " \
			"$who: burst claim $n: its exec's request, start and exit are audited (and the warm-up's)"
	done
	serve_stop "$who"
	sleep 0.3
	is "$SERVE_RC $(supervisors_in "$who" | wc -l) $(ls "$T/serve-$who/run/sb" | wc -l)" "0 0 0" \
		"$who: --kill-on-exit destroys the pool's sandboxes at SIGTERM"
}

sandbox_tests root "$(free_port)"
# The unprivileged daemon gets a delegated cgroup, as an administrator would give it (pause
# needs the freezer).
delegate_cgroup
SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
sandbox_tests user "$(free_port)"
SERVE_ENV=()

# Without a delegated cgroup an unprivileged sandbox has no freezer: a snapshot cannot be
# taken live and restarts the init instead, with the restart's refusal.
no_freezer_tests() {
	local who=user id
	serve_start "$who"
	api "$who" POST /v1/sandboxes '{"labels":{"session":"nofreeze"}}'
	id=$(jq_get "$BODY" id)
	api "$who" POST "/v1/sandboxes/$id/pause"
	is "$CODE $(jq_get "$BODY" error.code) $(jq_get "$BODY" error.message | grep -c PADDOCK_CGROUP_PARENT)" \
		"409 conflict 1" "$who, no delegated cgroup: pause is refused, naming the fix" || echo "# $BODY"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"echo w >w.txt; sleep 4328 >/dev/null 2>&1 &"}'
	api "$who" POST "/v1/sandboxes/$id/snapshot" '{"name":"n1"}'
	is "$CODE $(jq_get "$BODY" error.field)" "409 restart" \
		"$who, no freezer: a snapshot with a background process is refused naming restart"
	api "$who" POST "/v1/sandboxes/$id/snapshot" '{"name":"n1","restart":true}'
	is "$CODE $(jq_get "$BODY" snapshot) $(jq_get "$BODY" frozen_ms)" "200 n1 " \
		"$who, no freezer: with restart:true the snapshot is taken around a restart"
	api "$who" POST "/v1/sandboxes/$id/exec" '{"cmd":"cat w.txt"}'
	is "$(jq_get "$BODY" stdout.text)" "w" "$who, no freezer: the workspace is kept"
	api "$who" DELETE "/v1/sandboxes/$id"
	serve_stop "$who"
}
no_freezer_tests
