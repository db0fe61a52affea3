#!/bin/bash
# The daemon's authority from inside a sandbox (docs/daemon.md, "Authentication and tokens";
# docs/policy.md, "What a sandbox never sees"). As root and as nobody, from `paddock run` and
# from `paddock serve` sandboxes, with ro, rw and overlay workspaces, a process inside tries
# to reach the daemon and its supervisors and must fail, by its own exit status and output:
#   - the runtime and state directories are hidden in a view that holds them (ENOENT);
#   - so are they where a bind mount shows them under another name (a bind of the runtime
#     directory, a bind of a directory above the state directory): its keys stay unread;
#   - where the view shows a socket anyway (the daemon's --socket in the workspace, a hard
#     link to a supervisor's socket), the daemon answers 401 and the supervisor closes the
#     connection: a peer in another user or pid namespace is no admin;
#   - a workspace or bind inside those directories is refused, naming the path, under
#     another name too;
#   - a bind source replaced by a symlink to them while the sandbox is made is refused;
#   - so is a bind on, or holding, an interface of the host's kernel (procfs, sysfs, cgroupfs);
#   - a mount made on the host after a sandbox started (where mounts propagate) is not inside.
set -u
# Its own /tmp and /run (lib-run.sh): the fallback runtime directories are this suite's.
OWN_NAMESPACES=1
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"
: "${ESCAPE_PROBE:?ESCAPE_PROBE must name the escape-probe binary}"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; umount_aliases; rm -rf "$T"' EXIT

# This suite's layout, per identity, under A=$T/auth-WHO: the daemon's runtime directory lies
# in VIEW, the directory the sandboxes get as their workspace, its socket (--socket) in VIEW
# itself, its state directory in A, and A/alias is the runtime directory bound under another
# name (beside VIEW: an overlay's lower directory may hold no mount). MIRROR=$T/mirror-WHO is
# A bound under another name: the state directory is MIRROR/state there.
auth_dir() { echo "$T/auth-$1"; }
view_of() { echo "$T/auth-$1/view"; }
mirror_of() { echo "$T/mirror-$1"; }
sock_of() { echo "$T/auth-$1/view/d.sock"; }

umount_aliases() {
	local who
	for who in root user; do
		mountpoint -q "$(auth_dir "$who")/alias" 2>/dev/null && umount "$(auth_dir "$who")/alias"
		mountpoint -q "$(mirror_of "$who")" 2>/dev/null && umount -l "$(mirror_of "$who")"
	done
	return 0
}
# attempt DESC PATTERN CMD...: CMD prints the probe's line; it must exit 1 with "blocked (PATTERN)".
attempt() {
	local desc=$1 pat=$2 out rc
	shift 2
	out=$("$@" 2>"$T/attempt.err"); rc=$?
	if [ "$rc" = 1 ] && printf '%s' "$out" | grep -qE "^[a-z-]+: blocked \(($pat)\)$"; then
		ok 0 "$desc: $out"
	else
		ok 1 "$desc must be refused with $pat"
		printf '#   exit %s, output: %s\n' "$rc" "$out"
		sed 's/^/#   stderr: /' "$T/attempt.err" | tail -5
	fi
}

# in_run WHO MODE CMD...: CMD in a `paddock run` sandbox of WHO whose workspace is VIEW, with
# the daemon's own state and runtime directories (the same user's environment).
in_run() {
	local who=$1 mode=$2
	shift 2
	(cd "$(view_of "$who")" &&
		as "$who" "$T/bin/paddock" run --workspace-mode "$mode" "${RUN_OPTS[@]}" -- "$@")
}
RUN_OPTS=()

# in_serve WHO ID CMD...: CMD through the daemon's exec in sandbox ID; prints its stdout and
# exits with its exit code.
in_serve() {
	local who=$1 id=$2 argv
	shift 2
	argv=$(printf '%s\n' "$@" | jq -R . | jq -s -c .)
	api "$who" POST "/v1/sandboxes/$id/exec" "{\"argv\":$argv}"
	[ "$CODE" = 200 ] || { echo "# exec: $CODE $BODY"; return 125; }
	jq_get "$BODY" stdout.text | tr -d '\n'
	return "$(jq_get "$BODY" exit_code)"
}

start_daemon() {
	local who=$1 a view
	a=$(auth_dir "$who")
	view=$(view_of "$who")
	mkdir -p "$view" "$a/alias" "$a/state"
	cp "$ESCAPE_PROBE" "$view/escape-probe"
	chmod 0755 "$view/escape-probe"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$a"
	SERVE_ENV=(PADDOCK_STATE_DIR="$a/state" PADDOCK_RUNTIME_DIR="$view/run")
	serve_start "$who" --socket "$(sock_of "$who")" || return 1
	# The runtime directory under another name, and A (with the state directory) too.
	mount --bind "$view/run" "$a/alias"
	mkdir -p "$(mirror_of "$who")"
	mount --bind "$a" "$(mirror_of "$who")"
}

# Through `paddock run`: the hidden directories, the refused daemon, the refused supervisor.
run_checks() {
	local who=$1 id=$2 view mode pat out rc
	view=$(view_of "$who")
	for mode in ro rw overlay; do
		attempt "$who: run $mode: the daemon's runtime directory is hidden in the workspace" \
			ENOENT in_run "$who" "$mode" "$view/escape-probe" supervisor-ctl \
			"$view/run/sb/$id/ctl.sock"
		# An overlay does not carry a host socket: its connect() is refused by the kernel.
		pat="EPERM|EACCES"
		[ "$mode" = overlay ] && pat="ECONNREFUSED"
		attempt "$who: run $mode: the daemon's socket in the workspace refuses a sandboxed peer" \
			"$pat" in_run "$who" "$mode" "$view/escape-probe" daemon-create "$view/d.sock"
	done
	# A bind mount of the runtime directory under another name is the runtime directory:
	# a bind of it is refused, naming both.
	RUN_OPTS=(--ro "$(auth_dir "$who")/alias")
	for mode in ro rw overlay; do
		out=$(in_run "$who" "$mode" "$view/escape-probe" supervisor-ctl \
			"$(auth_dir "$who")/alias/sb/$id/ctl.sock" 2>&1)
		rc=$?
		printf '%s' "$out" | grep -q "\-\-ro '$(auth_dir "$who")/alias' lies inside '$(auth_dir "$who")/alias': the runtime directory '$view/run' mounted there"
		is "$rc:$?" "122:0" "$who: run $mode --ro ALIAS (the runtime directory bound elsewhere) is refused, naming both ($out)"
	done
	RUN_OPTS=()
	# A hard link to a socket is out of reach of any directory: the supervisor refuses the
	# peer itself (an overlay carries no host socket: that is the kernel's ECONNREFUSED above).
	ln -f "$view/run/sb/$id/ctl.sock" "$view/link.sock"
	for mode in ro rw; do
		attempt "$who: run $mode: a supervisor refuses a sandboxed peer on a hard link to its ctl.sock" \
			"ECONNRESET|EACCES" in_run "$who" "$mode" "$view/escape-probe" supervisor-ctl \
			"$view/link.sock"
	done
	rm -f "$view/link.sock"
}

# Through the daemon: the same attempts from its sandboxes' own exec.
serve_checks() {
	local who=$1 id=$2 a view mode sid pat out
	a=$(auth_dir "$who")
	view=$(view_of "$who")
	for mode in ro rw overlay; do
		api "$who" POST /v1/sandboxes "{\"workspace\":{\"path\":\"$view\",\"mode\":\"$mode\"}}"
		sid=$(jq_get "$BODY" id)
		is "$CODE $([ -n "$sid" ] && echo id)" "201 id" "$who: serve: a $mode sandbox on VIEW is created" ||
			{ echo "# $BODY"; continue; }
		attempt "$who: serve $mode: the daemon's runtime directory is hidden in the workspace" \
			ENOENT in_serve "$who" "$sid" "$view/escape-probe" supervisor-ctl \
			"$view/run/sb/$sid/ctl.sock"
		pat="EPERM|EACCES"
		[ "$mode" = overlay ] && pat="ECONNREFUSED"
		attempt "$who: serve $mode: the daemon's socket in the workspace refuses a sandboxed peer" \
			"$pat" in_serve "$who" "$sid" "$view/escape-probe" daemon-create "$view/d.sock"
		api "$who" DELETE "/v1/sandboxes/$sid"
	done
	# A workspace that holds the runtime directory under another name (A/alias) and the
	# state directory: both hidden; hard links to the supervisors' sockets (which no
	# directory check can see) are refused by the supervisors themselves.
	for mode in ro rw; do
		api "$who" POST /v1/sandboxes "{\"workspace\":{\"path\":\"$a\",\"mode\":\"$mode\"}}"
		sid=$(jq_get "$BODY" id)
		is "$CODE $([ -n "$sid" ] && echo id)" "201 id" "$who: serve: a $mode sandbox on A is created" ||
			{ echo "# $BODY"; continue; }
		attempt "$who: serve $mode: the runtime directory bound at A/alias is hidden" \
			ENOENT in_serve "$who" "$sid" "$view/escape-probe" \
			supervisor-ctl "$a/alias/sb/$id/ctl.sock"
		ln -f "$view/run/sb/$id/ctl.sock" "$a/other.sock"
		ln -f "$view/run/sb/$sid/ctl.sock" "$a/own.sock"
		attempt "$who: serve $mode: a supervisor refuses a sandboxed peer on a hard link to ctl.sock" \
			"ECONNRESET|EACCES" in_serve "$who" "$sid" "$view/escape-probe" \
			supervisor-ctl "$a/other.sock"
		attempt "$who: serve $mode: its own supervisor refuses it too" \
			"ECONNRESET|EACCES" in_serve "$who" "$sid" "$view/escape-probe" \
			supervisor-ctl "$a/own.sock"
		rm -f "$a/other.sock" "$a/own.sock"
		out=$(in_serve "$who" "$sid" sh -c 'ls -A "$0"; cat "$0/daemon.key" >/dev/null 2>&1; echo "key=$?"' "$a/state")
		is "$?:$out" "0:key=1" "$who: serve $mode: the state directory is empty inside (no daemon.key)"
		api "$who" DELETE "/v1/sandboxes/$sid"
	done
	# The same with A bound under another name (MIRROR): the state directory is hidden there.
	api "$who" POST /v1/sandboxes "{\"workspace\":{\"path\":\"$(mirror_of "$who")\",\"mode\":\"rw\"}}"
	sid=$(jq_get "$BODY" id)
	if is "$CODE $([ -n "$sid" ] && echo id)" "201 id" "$who: serve: a sandbox on MIRROR is created"; then
		out=$(in_serve "$who" "$sid" sh -c 'ls -A "$0"; cat "$0/daemon.key" >/dev/null 2>&1; echo "key=$?"' \
			"$(mirror_of "$who")/state")
		is "$?:$out" "0:key=1" "$who: serve: MIRROR/state, the state directory bound elsewhere, is empty inside"
		api "$who" DELETE "/v1/sandboxes/$sid"
	else
		echo "# $BODY"
	fi
	# The daemon saw those attempts, and said why it refused them.
	as "$who" curl -s -N --max-time 2 --unix-socket "$(sock_of "$who")" \
		"http://paddock/v1/events?since=0&kind=auth.failure" >"$T/auth-events-$who"
	grep -q '"reason":"a bearer token is needed: the socket.s peer is in another user or pid namespace' \
		"$T/auth-events-$who"
	ok $? "$who: the daemon recorded auth.failure: a peer in another user or pid namespace"
	# The daemon and the supervisor still serve their own user outside.
	api "$who" GET "/v1/sandboxes/$id"
	is "$CODE $(jq_get "$BODY" state)" "200 running" \
		"$who: the daemon's user outside is still an admin, the supervisor still answers"
}

# The state directory: its keys and stores are out of sight in a view that holds it, under
# its own name or another (MIRROR, a bind of A: a check of names alone would show
# MIRROR/state, the daemon's key and audit store, to the sandbox).
state_checks() {
	local who=$1 a out rc mode dir
	a=$(auth_dir "$who")
	for dir in "$a" "$(mirror_of "$who")"; do
		for mode in ro rw; do
			out=$(cd "$dir" && as "$who" "$T/bin/paddock" run --workspace-mode "$mode" -- \
				sh -c 'ls -A state; cat state/daemon.key >/dev/null 2>&1; echo "key=$?"' 2>"$T/state.err")
			rc=$?
			is "$rc:$out" "0:key=1" "$who: run $mode in ${dir##*/}: the state directory is empty inside (no daemon.key, no audit.db)" ||
				sed 's/^/#   /' "$T/state.err" | tail -3
		done
	done
	# An overlay of MIRROR would keep its changes in its own lower layer, as one of A would.
	out=$(cd "$(mirror_of "$who")" && as "$who" "$T/bin/paddock" run --workspace-mode overlay -- true 2>&1)
	rc=$?
	printf '%s' "$out" | grep -q "workspace '$(mirror_of "$who")' holds the state directory '$a/state/ws' (mounted at '$(mirror_of "$who")/state/ws')"
	is "$rc:$?" "125:0" "$who: run overlay in MIRROR is refused: the state directory is under it by another name ($out)"
	# Through a bind of the profile's or the command line's: the same.
	out=$(cd "$(view_of "$who")" && as "$who" "$T/bin/paddock" run --workspace-mode ro --ro "$(mirror_of "$who")" -- \
		sh -c 'ls -A "$0"; cat "$0/daemon.key" >/dev/null 2>&1; echo "key=$?"' "$(mirror_of "$who")/state" 2>/dev/null)
	is "$?:$out" "0:key=1" "$who: run --ro MIRROR: MIRROR/state is empty inside"
}

# A bind whose source changes while the sandbox is made: SHARED/data is a directory when the
# plan looks at it, and a symlink to the state directory (what another sandbox that can write
# SHARED could make of it) when the child binds it. strace holds the child's first mount 1 s
# (the window is milliseconds without it); the swap is made in that second. The sandbox must
# not start, and must say why; on a build that binds by the path alone, its command reads
# the daemon's key.
race_checks() {
	local who=$1 a sh out rc mode swap
	a=$(auth_dir "$who")
	sh="$a/shared"
	for mode in ro overlay; do
		rm -rf "$sh"
		mkdir -p "$sh/data"
		[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$sh"
		(sleep 0.4; mv "$sh/data" "$sh/data.old" && ln -s ../state "$sh/data") &
		swap=$!
		if [ "$mode" = ro ]; then
			out=$(cd "$(view_of "$who")" && as "$who" strace -f -o /dev/null -e trace=mount \
				-e inject=mount:delay_enter=1000000:when=1 "$T/bin/paddock" run \
				--workspace-mode none --ro "$sh/data" -- \
				sh -c 'ls -A "$0"; cat "$0/daemon.key" >/dev/null 2>&1 && echo key=read' \
				"$sh/data" 2>"$T/race.err")
		else
			out=$(cd "$sh/data" && as "$who" strace -f -o /dev/null -e trace=mount \
				-e inject=mount:delay_enter=1000000:when=1 "$T/bin/paddock" run \
				--workspace-mode overlay -- \
				sh -c 'ls -A; cat daemon.key >/dev/null 2>&1 && echo key=read' 2>"$T/race.err")
		fi
		rc=$?
		wait "$swap"
		[ -L "$sh/data" ]
		ok $? "$who: race $mode: SHARED/data was a symlink to the state directory when the child bound it"
		grep -q "'$sh/data' is not what it was when the sandbox was planned" "$T/race.err"
		is "$rc:$?:$out" "125:0:" "$who: race $mode: the sandbox does not start, and says why (no key read, nothing listed)" ||
			sed 's/^/#   /' "$T/race.err" | tail -3
	done
	rm -rf "$sh"
}

# The host kernel's own interfaces never enter a view: a bind on sysfs (the host's network
# devices, its kernel's knobs), a bind that holds a cgroupfs hierarchy (recursive: /sys/fs/cgroup
# brings them all, and a delegated cgroup of the user's own would let the sandbox raise its
# own limits), a workspace with a procfs of the host mounted inside (another pid namespace's
# processes). Each is refused before anything runs, naming what it holds or what it is on;
# on a build that binds them, the command inside reads them.
kernel_checks() {
	local who=$1 view out rc jail
	view=$(view_of "$who")
	# The mount point itself (the session sees it in the mount table) ...
	out=$(cd "$view" && as "$who" "$T/bin/paddock" run --workspace-mode ro --ro /sys -- \
		cat /sys/kernel/hostname 2>"$T/kernel.err")
	rc=$?
	grep -q "\-\-ro '/sys' is a mount of an interface of the host's kernel" "$T/kernel.err"
	is "$rc:$?:$out" "122:0:" "$who: run --ro /sys is refused, nothing read inside" ||
		sed 's/^/#   /' "$T/kernel.err" | tail -2
	# ... a directory on it (the engine asks its file system) ...
	out=$(cd "$view" && as "$who" "$T/bin/paddock" run --workspace-mode ro --ro /sys/class -- \
		ls /sys/class/net 2>"$T/kernel.err")
	rc=$?
	grep -q "cannot bind '/sys/class' into the sandbox: it is on sysfs" "$T/kernel.err"
	is "$rc:$?:$out" "125:0:" "$who: run --ro /sys/class is refused, naming sysfs (the host's network devices not listed)" ||
		sed 's/^/#   /' "$T/kernel.err" | tail -2
	# ... and a directory that holds one (/sys/fs/cgroup: a tmpfs with the v1 hierarchies, or
	# cgroup2 itself).
	out=$(cd "$view" && as "$who" "$T/bin/paddock" run --workspace-mode ro --ro /sys/fs/cgroup -- \
		ls /sys/fs/cgroup 2>"$T/kernel.err")
	rc=$?
	grep -qE "\-\-ro '/sys/fs/cgroup' (holds '/sys/fs/cgroup/[^']*',|is) a mount of an interface of the host's kernel" "$T/kernel.err"
	is "$rc:$?:$out" "122:0:" "$who: run --ro /sys/fs/cgroup is refused, naming a hierarchy" ||
		sed 's/^/#   /' "$T/kernel.err" | tail -2
	# A directory with this suite's procfs mounted in it (a chroot's /proc), as the workspace.
	jail="$(auth_dir "$who")/jail"
	mkdir -p "$jail/proc"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$jail"
	mount -t proc proc "$jail/proc"
	out=$(cd "$jail" && as "$who" "$T/bin/paddock" run --workspace-mode rw -- \
		sh -c 'ls proc | grep -c "^[0-9]"' 2>"$T/kernel.err")
	rc=$?
	grep -q "workspace '$jail' holds '$jail/proc', a mount of an interface of the host's kernel" "$T/kernel.err"
	is "$rc:$?:$out" "122:0:" "$who: a workspace holding a procfs of the host is refused, naming it" ||
		sed 's/^/#   /' "$T/kernel.err" | tail -2
	umount "$jail/proc"
	rmdir "$jail/proc" "$jail"
}

# A mount made on the host after the sandbox started, under a directory it sees, never
# appears inside. SHARE is a shared mount here (as / is on a systemd host, and mounts there
# propagate to their slaves): once the sandbox runs, the state directory is bound at
# SHARE/x, then SHARE/ready is made. The command inside waits for it and lists SHARE/x.
later_checks() {
	local who=$1 share out rc sid i
	share="$(auth_dir "$who")/share"
	mkdir -p "$share/x"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$share"
	mount --bind "$share" "$share" && mount --make-shared "$share"
	# paddock run, the share bound read-only; the command says it runs (VIEW/later.started,
	# in its rw workspace), and the host mounts only then.
	rm -f "$(view_of "$who")/later.started"
	(cd "$(view_of "$who")" && as "$who" "$T/bin/paddock" run --workspace-mode rw --ro "$share" -- \
		sh -c 'touch later.started; i=0
			while [ ! -e "$0/ready" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
			[ -e "$0/ready" ] && echo seen-ready; ls -A "$0/x"; grep -c " $0/x " /proc/self/mountinfo' \
		"$share" >"$T/later.out" 2>"$T/later.err") &
	local run=$!
	for i in $(seq 400); do [ -e "$(view_of "$who")/later.started" ] && break; sleep 0.05; done
	mount --bind "$(auth_dir "$who")/state" "$share/x" && touch "$share/ready"
	ls "$share/x" | grep -q '^daemon.key$'
	ok $? "$who: later: the state directory (daemon.key) is mounted at SHARE/x on the host, once the command runs"
	wait "$run"
	rc=$?
	is "$rc:$(tr '\n' ' ' <"$T/later.out")" "1:seen-ready 0 " \
		"$who: later: run: a mount made after the start is not inside (SHARE/x empty, not in its mount table)" ||
		sed 's/^/#   /' "$T/later.err" | tail -3
	umount "$share/x"
	rm -f "$share/ready" "$(view_of "$who")/later.started"
	# A daemon's sandbox, whose life is long: the share is its workspace.
	api "$who" POST /v1/sandboxes "{\"workspace\":{\"path\":\"$share\",\"mode\":\"ro\"}}"
	sid=$(jq_get "$BODY" id)
	is "$CODE $([ -n "$sid" ] && echo id)" "201 id" "$who: later: a sandbox on SHARE is created" ||
		echo "# $BODY"
	mount --bind "$(auth_dir "$who")/state" "$share/x"
	out=$(in_serve "$who" "$sid" sh -c "ls -A '$share/x'; grep -c ' $share/x ' /proc/self/mountinfo")
	is "$?:$out" "1:0" "$who: later: serve: a mount made after the start is not inside" ||
		echo "# $BODY"
	api "$who" DELETE "/v1/sandboxes/$sid"
	umount "$share/x"
	umount "$share"
	rm -rf "$share"
}

# A workspace or bind inside those directories is refused, naming it and the directory.
refusal_checks() {
	local who=$1 id=$2 a view out rc
	a=$(auth_dir "$who")
	view=$(view_of "$who")
	out=$(cd "$view" && as "$who" "$T/bin/paddock" run --workspace-mode ro --ro "$view/run/sb" -- true 2>&1)
	rc=$?
	printf '%s' "$out" | grep -q "\-\-ro '$view/run/sb' lies inside the runtime directory '$view/run'"
	is "$rc:$?" "122:0" "$who: run --ro RUNDIR/sb is refused, naming both ($out)"
	out=$(cd "$view" && as "$who" "$T/bin/paddock" run -w "$a/state" --workspace-mode rw -- true 2>&1)
	rc=$?
	printf '%s' "$out" | grep -q "workspace '$a/state' lies inside the state directory '$a/state'"
	is "$rc:$?" "122:0" "$who: run -w STATE is refused, naming it ($out)"
	out=$(cd "$view" && as "$who" "$T/bin/paddock" run -w "$(mirror_of "$who")/state/ws" --workspace-mode rw -- true 2>&1)
	rc=$?
	printf '%s' "$out" | grep -q "workspace '$(mirror_of "$who")/state/ws' lies inside '$(mirror_of "$who")/state': the state directory '$a/state' mounted there"
	is "$rc:$?" "122:0" "$who: run -w MIRROR/state/ws is refused, naming the directory it is ($out)"
	out=$(cd "$view" && as "$who" "$T/bin/paddock" run --workspace-mode none --rw "$(mirror_of "$who")/state" -- true 2>&1)
	rc=$?
	printf '%s' "$out" | grep -q "\-\-rw '$(mirror_of "$who")/state' lies inside"
	is "$rc:$?" "122:0" "$who: run --rw MIRROR/state is refused ($out)"
	printf 'extends: default\nfilesystem:\n  read_write: [%s]\n' "$view/run/sb/$id" >"$a/p.yaml"
	chmod 0644 "$a/p.yaml"
	out=$(cd "$view" && as "$who" "$T/bin/paddock" run --profile "$a/p.yaml" --workspace-mode none -- true 2>&1)
	rc=$?
	printf '%s' "$out" | grep -q "filesystem.read_write entry '$view/run/sb/$id' lies inside"
	is "$rc:$?" "122:0" "$who: a profile's read_write entry inside RUNDIR is refused ($out)"
	api "$who" POST /v1/sandboxes "{\"workspace\":{\"path\":\"$view/run\",\"mode\":\"ro\"}}"
	printf '%s' "$BODY" | grep -q "workspace '$view/run' lies inside the daemon's runtime directory '$view/run'"
	ok $? "$who: serve: a create whose workspace is RUNDIR is refused, naming both ($CODE $(jq_get "$BODY" error.message))"
}

# The report's own case: no runtime directory set, so the fallback one (/run/paddock for
# root, /tmp/paddock-UID for others) holds the daemon's socket, and the sandbox's workspace
# is its parent (`cd /tmp && paddock run --workspace-mode ro`).
# The state directory lies outside the workspace (an overlay keeps its changes there).
fb() {
	local who=$1
	shift
	if [ "$who" = root ]; then
		env -u PADDOCK_RUNTIME_DIR -u XDG_RUNTIME_DIR PADDOCK_INIT="$T/bin/paddock-init" \
			PADDOCK_STATE_DIR="$(auth_dir "$who")/fbstate" "$@"
	else
		# nobody's own home (/nonexistent): a HOME under /tmp would make /tmp a workspace
		# that holds the home, which run refuses (--allow-home) before this check is reached.
		setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all \
			env -u PADDOCK_RUNTIME_DIR -u XDG_RUNTIME_DIR HOME=/nonexistent \
			PADDOCK_INIT="$T/bin/paddock-init" PADDOCK_STATE_DIR=/run/fbstate-user "$@"
	fi
}
in_dir() {
	local d=$1
	shift
	(cd "$d" && "$@")
}
fallback_checks() {
	local who=$1 parent=/tmp rundir="/tmp/paddock-$UNPRIV_UID" spid mode i probe
	probe="$(view_of "$who")/escape-probe"
	[ "$who" = root ] && { parent=/run; rundir=/run/paddock; }
	[ "$who" = user ] && mkdir -p /run/fbstate-user && chown $UNPRIV_UID:$UNPRIV_UID /run/fbstate-user
	(fb "$who" "$T/bin/paddock" serve -q >"$T/fb-$who.log" 2>&1) &
	spid=$!
	for i in $(seq 200); do [ -S "$rundir/paddock.sock" ] && break; sleep 0.05; done
	[ -S "$rundir/paddock.sock" ]; ok $? "$who: a daemon with the fallback runtime directory $rundir"
	for mode in ro rw overlay; do
		# An overlay workspace cannot be made over a directory that holds a mount point
		# (overlayfs refuses a lower layer with locked submounts: docs/workspace.md); when
		# this suite's own /tmp holds one (the build kept at its path when the clone is
		# under /tmp), the overlay case says so instead of failing for that reason.
		if [ "$mode" = overlay ] && findmnt -rn -o TARGET | grep -q "^$parent/"; then
			echo "ok $((TAP_N += 1)) - $who: cd $parent && paddock run --workspace-mode overlay # SKIP $parent holds a mount point here ($(findmnt -rn -o TARGET | grep "^$parent/" | head -1)), over which no overlay workspace can be made"
			continue
		fi
		attempt "$who: cd $parent && paddock run --workspace-mode $mode: the daemon's socket is hidden" \
			ENOENT in_dir "$parent" fb "$who" \
			"$T/bin/paddock" run --workspace-mode "$mode" --ro "$probe" -- "$probe" \
			daemon-create "$rundir/paddock.sock"
	done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}

for who in root user; do
	start_daemon "$who"
	ok $? "$who: the daemon starts with its socket in VIEW" || continue
	api "$who" GET /v1/sandboxes
	is "$CODE" 200 "$who: the daemon's user outside the sandboxes is an admin on the socket"
	api "$who" POST /v1/sandboxes '{"labels":{"session":"authority"}}'
	id=$(jq_get "$BODY" id)
	is "$CODE $([ -n "$id" ] && echo id)" "201 id" "$who: a sandbox to aim at is created"
	run_checks "$who" "$id"
	serve_checks "$who" "$id"
	state_checks "$who"
	race_checks "$who"
	kernel_checks "$who"
	later_checks "$who"
	refusal_checks "$who" "$id"
	# Control, last (a connection to ctl.sock replaces the daemon's): outside any sandbox,
	# the same probe on the same socket is answered.
	out=$(as "$who" "$(view_of "$who")/escape-probe" supervisor-ctl \
		"$(auth_dir "$who")/alias/sb/$id/ctl.sock" 2>&1)
	is "$?:$out" "0:supervisor-ctl: ESCAPED" "$who: control: outside, the supervisor answers the probe"
	# That connection replaced the daemon's: the daemon lost the sandbox, and ended it (its
	# supervisor killed, then its cgroup's processes and the cgroup, from the file the
	# supervisor wrote). Once deleted, no directory of its cgroup is left in any hierarchy.
	api "$who" DELETE "/v1/sandboxes/$id"
	for i in $(seq 50); do
		[ -z "$(find /sys/fs/cgroup -maxdepth 7 -type d -name "paddock-${id: -12}" 2>/dev/null)" ] && break
		sleep 0.1
	done
	is "$(find /sys/fs/cgroup -maxdepth 7 -type d -name "paddock-${id: -12}" 2>/dev/null | wc -l)" 0 \
		"$who: the lost sandbox's cgroup is removed, in every hierarchy"
	serve_stop "$who"
	umount "$(auth_dir "$who")/alias"
	umount -l "$(mirror_of "$who")"
	fallback_checks "$who"
done
done_testing
