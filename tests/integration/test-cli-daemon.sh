#!/bin/bash
# The CLI verbs that talk to the daemon (ps, create, exec, attach, cp, pause, resume,
# snapshot, rollback, diff, kill, events), end to end against a real `paddock serve`
# started by this test, as root and as an unprivileged user (TAP). Each identity has
# private PADDOCK_RUNTIME_DIR/PADDOCK_STATE_DIR; the CLI finds the socket from them.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

# The daemon answered "not served yet" / "unknown op": say so, and skip that check.
# state_procs DIR: the pids of processes whose environment names DIR as PADDOCK_STATE_DIR.
state_procs() {
	for p in /proc/[0-9]*; do
		tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "PADDOCK_STATE_DIR=$1" && echo "${p#/proc/}"
	done
}

unsupported() {
	grep -q 'not served yet\|unknown op' "$1"
}

if ! have_supervisor; then
	echo "# skipped: this build has no 'paddock supervise' (the supervisor), so no sandbox can start"
	[ "${PDK_MUST_WORK:-0}" = 1 ] && ok 1 "the supervisor is built (PDK_MUST_WORK=1)"
	done_testing
	exit $?
fi

basic_tests() {
	local who=$1 id id2 out rc
	pc "$who" ps >"$T/out" 2>&1
	is "$?:$(head -c 2 "$T/out")" "0:ID" "$who: ps with no sandbox prints the header"
	is "$(pc "$who" ps --json | tr -d ' \n')" '{"sandboxes":[]}' "$who: ps --json"

	id=$(pc "$who" create --session s-$who --agent a1 --label team=x)
	rc=$?
	is "$rc:$(printf '%s' "$id" | grep -cE '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$')" \
		"0:1" "$who: create prints a UUIDv7 id"
	SB=$id
	out=$(pc "$who" ps --json)
	is "$(jq_get "$out" sandboxes.0.id) $(jq_get "$out" sandboxes.0.labels.session) $(jq_get "$out" sandboxes.0.labels.team) $(jq_get "$out" sandboxes.0.state)" \
		"$id s-$who x running" "$who: ps --json shows its labels and state"
	is "$(pc "$who" ps -q --session s-$who)" "$id" "$who: ps --session filters"
	is "$(pc "$who" ps -q --session nobody-else)" "" "$who: ps --session of no sandbox lists none"

	id2=$(pc "$who" create --idempotency-key k-$who --session idem)
	is "$(pc "$who" create --idempotency-key k-$who --session idem)" "$id2" \
		"$who: a create retried with the same idempotency key returns the same sandbox"
	is "$(pc "$who" ps -q --session idem | wc -l)" "1" "$who: ... and makes no second one"
	pc "$who" create --json --session idem >"$T/out"
	is "$(grep -c '"token": "pdk_sb_' "$T/out")" "1" "$who: create --json shows the sandbox token"
	pc "$who" create --ttl forever >"$T/out" 2>&1
	is "$?:$(grep -c 'bad_request: .*(field ttl)' "$T/out")" "125:1" \
		"$who: a refused create exits 125 and names the daemon's code and field"
}

exec_tests() {
	local who=$1 id=$SB rc out
	pc "$who" exec "$id" -- sh -c 'echo out; echo err >&2; exit 3' >"$T/o" 2>"$T/e"
	rc=$?
	is "$rc|$(cat "$T/o")|$(cat "$T/e")" "3|out|err" "$who: exec: stdout, stderr and the command's exit status"
	pc "$who" exec "$id" -c 'kill -9 $$'
	is "$?" "137" "$who: exec of a command killed by SIGKILL exits 128+9"
	pc "$who" exec "$id" --timeout 300ms -- sleep 10
	is "$?" "124" "$who: exec --timeout ends the command, exit 124"
	is "$(printf 'line1\nline2\n' | pc "$who" exec -i "$id" -- tac)" "$(printf 'line2\nline1')" \
		"$who: exec --stdin sends this stdin to the command"
	is "$(pc "$who" exec "$id" -e GREETING=hi -C /tmp -- sh -c 'echo $GREETING; pwd' </dev/null)" \
		"$(printf 'hi\n/tmp')" "$who: exec -e and --cwd"
	is "$(pc "$who" exec "$id" --stream -- sh -c 'echo a; sleep 0.2; echo b >&2; exit 4' 2>&1)" \
		"$(printf 'a\nb')" "$who: exec --stream prints stdout and stderr as they come"
	pc "$who" exec "$id" --stream -- sh -c 'exit 4'
	is "$?" "4" "$who: exec --stream exits with the command's status"
	out=$(pc "$who" exec "$id" --output-cap 64 -- sh -c 'seq 1 5000')
	is "$(printf '%s\n' "$out" | head -1)|$(printf '%s\n' "$out" | tail -1)|$(printf '%s' "$out" | grep -c 'bytes dropped; full output in')" \
		"1|5000|1" "$who: exec --output-cap keeps head and tail and says where the rest is"
	is "$(printf '%s\n' "$out" | sed -n '13,15p' | sed 's/; full output in .*//' | tr '\n' '|')" \
		"13|[... 4981 lines, 23833 bytes dropped|4995|" \
		"$who: exec --output-cap cuts on line ends and says how many lines were dropped"
	out=$(pc "$who" exec "$id" --output-cap 64 -- sh -c 'head -c 300 /dev/zero | tr "\\0" x')
	is "$(printf '%s\n' "$out" | sed 's/; full output in .*//; s/x\{32\}/X/' | tr '\n' '|')" \
		"X|[... 1 line, 236 bytes dropped (a line longer than the cap was cut)|X|" \
		"$who: exec --output-cap cuts a line longer than the cap and says so"
	out=$(pc "$who" exec --json "$id" -- sh -c 'exit 7')
	is "$?:$(jq_get "$out" exit_code):$(jq_get "$out" end)" "7:7:exited" "$who: exec --json prints the result"
	pc "$who" exec 01a20000-0000-7000-8000-000000000000 -- true >"$T/o" 2>&1
	is "$?:$(grep -c 'not_found' "$T/o")" "125:1" "$who: exec in an unknown sandbox exits 125 with the daemon's error"
	pc "$who" exec "$id" -- /nonexistent/cmd >"$T/o" 2>&1
	rc=$?
	ok "$([ "$rc" = 127 ] || [ "$rc" = 125 ] && grep -qi 'no such file\|ENOENT\|not found' "$T/o"; echo $?)" \
		"$who: exec of a missing command fails and says why (exit $rc)"
	pc "$who" exec >/dev/null 2>&1
	is "$?" "122" "$who: exec without an id is a usage error (122)"
	pc "$who" exec "$id" -c 'true' -- true >/dev/null 2>&1
	is "$?" "122" "$who: exec with both -c and a command is a usage error (122)"
}

cp_tests() {
	local who=$1 id=$SB src dst
	src=$(mkws)
	mkdir -p "$src/tree/sub"
	printf 'one\n' >"$src/tree/a.txt"
	printf 'two\n' >"$src/tree/sub/b.txt"
	head -c 200000 /dev/urandom >"$src/tree/sub/blob"
	printf 'file\n' >"$src/f.sh"
	chmod -R a+rwX "$src"
	chmod 0750 "$src/f.sh"
	[ "$who" = user ] && chown $UNPRIV_UID "$src/f.sh"
	pc "$who" cp "$src/f.sh" "$id:/tmp/f.sh"
	is "$?:$(pc "$who" exec "$id" -- sh -c 'cat /tmp/f.sh; stat -c %a /tmp/f.sh')" "0:$(printf 'file\n750')" \
		"$who: cp FILE ID:/path copies the bytes and the mode"
	pc "$who" cp "$src/tree" "$id:/tmp"
	is "$?:$(pc "$who" exec "$id" -- sh -c 'cd /tmp/tree && find . -type f | sort && cat sub/b.txt')" \
		"0:$(printf './a.txt\n./sub/b.txt\n./sub/blob\ntwo')" "$who: cp DIR ID:/existing-dir copies it inside"
	dst=$(mkws)
	pc "$who" cp "$id:/tmp/tree" "$dst/back"
	is "$?:$(diff -r "$src/tree" "$dst/back" >/dev/null && echo same)" "0:same" \
		"$who: cp ID:/dir DIR brings the directory back, byte for byte"
	pc "$who" cp "$id:/tmp/f.sh" "$dst"
	is "$?:$(cat "$dst/f.sh")" "0:file" "$who: cp ID:/file DIR lands in DIR/NAME"
	pc "$who" cp "$id:/tmp/nothing-here" "$dst" >"$T/o" 2>&1
	is "$?:$(grep -c not_found "$T/o")" "125:1" "$who: cp of a missing remote path exits 125"
	pc "$who" cp "$src/f.sh" "$dst/x" >/dev/null 2>&1
	is "$?" "122" "$who: cp with no ID: side is a usage error (122)"
	# A symlink made in the sandbox that points out of it comes back as a symlink, and the
	# tar on this side never writes through it.
	printf 'host\n' >"$dst/victim"
	chmod 0666 "$dst/victim"
	pc "$who" exec "$id" -- sh -c "mkdir -p /tmp/evil && ln -s $dst/victim /tmp/evil/link && echo owned > /tmp/evil/plain" >/dev/null
	pc "$who" cp "$id:/tmp/evil" "$dst/evil"
	is "$?:$(cat "$dst/victim"):$(readlink "$dst/evil/link"):$(cat "$dst/evil/plain")" \
		"0:host:$dst/victim:owned" "$who: a symlink in a downloaded tree is not followed on this side"
}

lifecycle_tests() {
	local who=$1 id=$SB out
	pc "$who" pause "$id" >"$T/o" 2>&1
	is "$(cat "$T/o")" "paused" "$who: pause prints the new state"
	is "$(jq_get "$(pc "$who" ps --json --session s-$who)" sandboxes.0.state)" "paused" \
		"$who: ps shows the sandbox paused"
	is "$(pc "$who" resume "$id")" "running" "$who: resume"
	is "$(pc "$who" exec "$id" -- echo alive)" "alive" "$who: exec works after resume"
	pc "$who" exec "$id" -- sh -c 'echo 1 > kept.txt' >/dev/null
	is "$(pc "$who" diff "$id")" "A kept.txt" "$who: diff lists what the sandbox added"
	pc "$who" snapshot "$id" snap1 >"$T/o" 2>&1
	if unsupported "$T/o"; then
		echo "# snapshot/rollback skipped: the daemon answered: $(head -1 "$T/o")"
	else
		is "$(cat "$T/o")" "snap1" "$who: snapshot prints its name"
		pc "$who" exec "$id" -- sh -c 'echo 2 > later.txt; rm kept.txt' >/dev/null
		is "$(pc "$who" diff "$id" | sort | tr '\n' ' ')" "A later.txt " "$who: diff after more changes"
		pc "$who" rollback "$id" snap1 >/dev/null
		is "$?:$(pc "$who" exec "$id" -- sh -c 'ls *.txt')" "0:kept.txt" \
			"$who: rollback puts the workspace back to the snapshot"
		pc "$who" rollback "$id" no-such-snap >/dev/null 2>&1
		is "$?" "125" "$who: rollback to an unknown snapshot exits 125"
		pc "$who" exec "$id" -- sh -c 'sleep 4329 >/dev/null 2>&1 &' >/dev/null
		sleeping='for p in /proc/[0-9]*/cmdline; do tr "\000" " " <"$p"; echo; done | grep -c "^sleep 4329"'
		is "$(pc "$who" snapshot "$id" snap2 2>&1):$(pc "$who" exec "$id" -- sh -c "$sleeping")" "snap2:1" \
			"$who: snapshot with a background process running: taken, the process still runs"
		pc "$who" rollback "$id" snap2 >"$T/o" 2>&1
		is "$?:$(grep -q 'field.*restart\|restart.*true' "$T/o" && echo named)" "125:named" \
			"$who: rollback with a background process running exits 125 naming restart"
		is "$(pc "$who" rollback --restart "$id" snap2):$(pc "$who" exec "$id" -- sh -c "$sleeping")" \
			"snap2:0" "$who: rollback --restart ends it"
	fi
	pc "$who" pause >/dev/null 2>&1
	is "$?" "122" "$who: pause without an id is a usage error (122)"
}

attach_tests() {
	local who=$1 id=$SB res
	# Piped input: the pty echoes the typed line; only the shell's own output has the product.
	printf 'test -t 0 && echo "tty $((6 * 7))"; exit 5\n' | pc "$who" attach "$id" >"$T/o" 2>&1
	is "$?:$(grep -c 'tty 42' "$T/o")" "5:1" "$who: attach with piped input runs a shell on a pty; its exit status is the session's"
	# As a person at a terminal: attach runs on a pty of its own (attach-drive.py).
	res=$(cd "$T/home" && python3 "$TESTS_DIR/integration/attach-drive.py" \
		bash -c "$(declare -f as); SERVE_ENV=(); T='$T'; UNPRIV_UID=$UNPRIV_UID; as $who '$T/bin/paddock' attach $id" \
		2>"$T/attach-$who.log")
	echo "# attach: $res"
	res=$(printf '%s' "$res" | sed 's,tty=/dev/pts/[0-9]*,tty=pts,')
	is "$res" \
		"product=1 tty=pts size=1 resized=1 status=3" \
		"$who: attach on a terminal: typed commands run (42), tty is /dev/pts/N, 80x24 then 100x30 after a resize, 'exit 3' ends attach with 3"
	[ "$res" = "product=1 tty=pts size=1 resized=1 status=3" ] || sed 's/^/#   /' "$T/attach-$who.log" | head -40
}

kill_events_tests() {
	local who=$1 a b c evpid
	a=$(pc "$who" create --session doomed-$who)
	b=$(pc "$who" create --session doomed-$who --agent x)
	c=$(pc "$who" create --session spared-$who)
	pc "$who" events --follow --kind kill --json >"$T/ev-$who" 2>&1 &
	evpid=$!
	sleep 0.5
	is "$(pc "$who" kill --session doomed-$who --reason cli-test | sort | tr '\n' ' ')" \
		"$(printf '%s\n%s\n' "$a" "$b" | sort | tr '\n' ' ')" "$who: kill --session destroys that session's sandboxes"
	is "$(pc "$who" ps -q --session doomed-$who; pc "$who" ps -q --session spared-$who)" "$c" \
		"$who: ... and spares the others"
	is "$(pc "$who" kill "$c")" "$c" "$who: kill ID"
	pc "$who" kill >/dev/null 2>&1
	is "$?" "122" "$who: kill without ids or selectors is a usage error (122)"
	sleep 0.5
	kill "$evpid" 2>/dev/null
	wait "$evpid" 2>/dev/null
	is "$(grep -c '"reason": *"cli-test"' "$T/ev-$who")" "3" \
		"$who: events --follow saw one kill per sandbox and one for the call"
	pc "$who" events --sandbox "$SB" >"$T/o"
	is "$?:$([ "$(grep -c " exec.request $SB " "$T/o")" -ge 10 ] && echo many)" "0:many" \
		"$who: events --sandbox replays that sandbox's stored events (its exec requests)"
}

# kill --wait returns once the sandbox has ended: its processes and cgroup gone, its state
# ended. Its 50000 spill files make the end take a while (its supervisor removes them before
# it is told to destroy): without the wait, the cgroup is still there when kill returns. (The
# supervisor process itself may outlive the answer by a moment: it exits after its last
# word, longer under ASan.)
wait_tests() {
	local who=$1 id out cg
	id=$(pc "$who" create --session wait-$who)
	pc "$who" exec "$id" --output-cap 64 -- seq 1 1000 >/dev/null
	out=$(pc "$who" exec "$id" -- sh -c 'cd /tmp/.paddock/exec && seq 50000 | xargs touch && ls | wc -l')
	cg=$(awk 'NR == 1 {print $3}' "$T/serve-$who/run/sb/$id/cgroup" 2>/dev/null)
	is "$out:$([ -d "$cg" ] && echo cgroup)" "50001:cgroup" \
		"$who: a sandbox with 50001 spill files to remove at its end (cgroup $cg)"
	out=$(pc "$who" kill --wait "$id")
	is "$?:$out:$([ -d "$cg" ] && echo "cgroup left")" "0:$id:" \
		"$who: kill --wait prints the id and returns once the sandbox's cgroup is gone"
	api "$who" GET "/v1/sandboxes/$id"
	is "$CODE $(jq_get "$BODY" state)" "200 ended" "$who: ... and its state is ended"
	pc "$who" pause --wait "$id" >/dev/null 2>&1
	is "$?" "122" "$who: --wait is kill's alone (pause --wait is a usage error)"
}

tcp_tests() {
	local who=$1 port=$2 token out sbtok own
	token=$(as "$who" "$T/bin/paddock" serve token create --name cli-$who 2>/dev/null)
	is "$(PADDOCK_URL=http://127.0.0.1:$port PADDOCK_TOKEN=$token pc "$who" ps -q --session s-$who)" "$SB" \
		"$who: ps over TCP with PADDOCK_URL and an admin PADDOCK_TOKEN"
	PADDOCK_URL=http://127.0.0.1:$port PADDOCK_TOKEN=pdk_adm_wrong pc "$who" ps >"$T/o" 2>&1
	is "$?:$(grep -c unauthorized "$T/o")" "125:1" "$who: a wrong token is refused (125, unauthorized)"
	out=$(pc "$who" create --json --session tok-$who)
	sbtok=$(jq_get "$out" token)
	own=$(jq_get "$out" id)
	is "$(PADDOCK_URL=http://127.0.0.1:$port PADDOCK_TOKEN=$sbtok pc "$who" exec "$own" -- echo mine)" "mine" \
		"$who: a sandbox token runs commands in its own sandbox over TCP"
	PADDOCK_URL=http://127.0.0.1:$port PADDOCK_TOKEN=$sbtok pc "$who" exec "$SB" -- echo theirs >"$T/o" 2>&1
	is "$?:$(grep -c 'theirs' "$T/o"):$(grep -c 'forbidden\|unauthorized' "$T/o")" "125:0:1" \
		"$who: the same token is refused for another sandbox (the command never ran)"
	pc "$who" ps --socket "$T/none.sock" >"$T/o" 2>&1
	is "$?:$(grep -c "is the daemon running" "$T/o")" "125:1" "$who: no daemon: 125 and a hint"
}

# Spill files (the whole output of an exec past --output-cap) go with the sandbox. /tmp is the
# sandbox's own tmpfs; here /tmp/.paddock leads into a read-write workspace, so that a spill
# file left behind would be seen on the host: none remains after `paddock kill`.
spill_tests() {
	local who=$1 id ws f out
	ws=$(mkws)
	chmod a+rwx "$ws"
	id=$(pc "$who" create --workspace "$ws" --workspace-mode rw)
	[ -n "$id" ] || { ok 1 "$who: create with a rw workspace for the spill test"; return; }
	pc "$who" exec "$id" -- sh -c "mkdir -p $ws/spill && ln -s $ws/spill /tmp/.paddock"
	out=$(pc "$who" exec "$id" --output-cap 64 -- seq 1 1000)
	f=$(printf '%s\n' "$out" | sed -n 's/.*; full output in \(.*\) \.\.\.\]$/\1/p')
	is "$(wc -l <"$ws/spill/exec/$(basename "$f")" 2>&1)" "1000" \
		"$who: the spill file $f holds the whole output (on the host through the link)"
	is "$(pc "$who" kill "$id")" "$id" "$who: kill the sandbox that spilled"
	# The spill files go with the sandbox, which ends after kill answers: wait up to 10 s.
	for _ in $(seq 100); do
		[ "$(find "$ws/spill" -mindepth 1 2>&1 | wc -l)" = 0 ] && break
		sleep 0.1
	done
	is "$(find "$ws/spill" -mindepth 1 2>&1 | wc -l)" "0" "$who: no spill file remains after kill"
}

for who in root user; do
	if [ "$who" = user ]; then
		# Rootless: a cgroup delegated to nobody (its freezer too), as an administrator would.
		delegate_cgroup
		SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
	fi
	port=$(free_port)
	serve_start "$who" --listen "127.0.0.1:$port"
	ok $? "$who: the daemon starts"
	basic_tests "$who"
	exec_tests "$who"
	spill_tests "$who"
	cp_tests "$who"
	lifecycle_tests "$who"
	attach_tests "$who"
	kill_events_tests "$who"
	wait_tests "$who"
	tcp_tests "$who" "$port"
	# Supervisors outlive the daemon: destroy every sandbox before stopping it.
	ids=$(pc "$who" ps -q)
	[ -z "$ids" ] || pc "$who" kill $ids >/dev/null
	is "$(pc "$who" ps -q --state running)" "" "$who: kill leaves no running sandbox"
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: the daemon stops cleanly"
	# Supervisors end after their sandbox's last answer: wait up to 10 s for the last one.
	for _ in $(seq 100); do
		left=$(state_procs "$T/serve-$who/state")
		[ -z "$left" ] && break
		sleep 0.1
	done
	is "$left" "" "$who: no process of this daemon's state directory is left" ||
		for p in $left; do
			echo "#   left: $(ps -o pid=,ppid=,stat=,etime=,args= -p "$p" 2>&1)"
			echo "#   wchan $(cat /proc/$p/wchan 2>&1); children: $(ps -o pid=,stat=,args= --ppid "$p" 2>&1 | tr '\n' ';')"
			sid=$(tr '\0' ' ' <"/proc/$p/cmdline" | sed -n 's/.*--id \([^ ]*\).*/\1/p')
			[ -n "$sid" ] && grep -h "$sid" "$T/serve-$who.log" "$T/ev-$who" 2>&1 | head -20 | sed 's/^/#   log: /'
			[ -n "$sid" ] && pc "$who" audit show "$sid" 2>&1 | head -30 | sed "s/^/#   event: /"
		done
done
done_testing
