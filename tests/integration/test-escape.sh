#!/bin/bash
# The escape battery: every attempt runs inside a sandbox, as root and as nobody, and must be
# tried and refused. Each assertion reads the attempt's own exit status and output
# ("NAME: blocked (ERRNO)", exit 1); where refusal can only be seen from outside (a listener,
# a host process), the host side is checked too. docs/internals/escape-battery.md explains
# every attempt and the mechanism that stops it.
set -u
. "$(dirname "$0")/lib-run.sh"
: "${ESCAPE_PROBE:?ESCAPE_PROBE must name the escape-probe binary}"
cp "$ESCAPE_PROBE" "$T/bin/escape-probe" && chmod 0755 "$T/bin/escape-probe"
PROBE="$T/bin/escape-probe"

# The attempts (name : errno pattern), shared with the images suite's battery on an image root.
. "$(dirname "$0")/lib-escape.sh"
ATTEMPTS=$ESCAPE_ATTEMPTS

# listen KIND WHERE LOG: start a host listener in the background (pid in LPID), wait until ready.
listen() {
	python3 "$TESTS_DIR/integration/listener.py" "$1" "$2" "$3" &
	LPID=$!
	for _ in $(seq 100); do [ -e "$3.ready" ] && return 0; sleep 0.05; done
	echo "# listener $1 $2 did not start"
}

# probe WHO NAME [ARG] [paddock options...]: run one attempt, print its line, return its status.
probe() {
	local who=$1 name=$2 parg=${3:-}
	shift 3 2>/dev/null || shift $#
	prun "$who" -w "$(mkws)" --ro "$PROBE" "$@" -- "$PROBE" "$name" $parg 2>/dev/null
}

check_blocked() { # WHO NAME PATTERN [ARG]
	local who=$1 name=$2 pat=$3 out rc
	out=$(probe "$who" "$name" "${4:-}"); rc=$?
	if [ "$rc" = 1 ] && printf '%s' "$out" | grep -qE "^$name: blocked \(($pat)\)$"; then
		ok 0 "$who: $name: $out"
	else
		ok 1 "$who: $name must be refused with $pat"
		printf '#   exit %s, output: %s\n' "$rc" "$out"
	fi
}

host_checks() {
	local who=$1 out rc port upid
	# A host process the sandbox must not see or signal.
	sleep 300 & upid=$!
	check_blocked "$who" ptrace-host "ESRCH|EPERM" "$upid"
	check_blocked "$who" kill-host "ESRCH" "$upid"
	check_blocked "$who" host-proc-pid "ENOENT" "$upid"
	probe "$who" kill-all >/dev/null
	kill -0 "$upid" 2>/dev/null; ok $? "$who: kill(-1, SIGKILL) inside leaves host processes alive"
	kill "$upid"; wait "$upid" 2>/dev/null

	# TCP to a host loopback listener: refused, and the listener sees nothing.
	port=$(free_port)
	local lpid
	listen tcp "$port" "$T/tcp-$who.log"; lpid=$LPID
	check_blocked "$who" tcp-connect "ECONNREFUSED" "$port"
	# The sandbox serves on the same port of its own loopback (IPv4 and IPv6) and reaches
	# its own server, in modes none and allowlist; the host's listener still sees nothing.
	out=$(probe "$who" loopback-own "$port"); rc=$?
	is "$rc $out" "2 loopback-own: ok" "$who: the sandbox serves and connects on its own 127.0.0.1:$port and [::1]:$port"
	out=$(probe "$who" loopback-own "$port" --allow example.com); rc=$?
	is "$rc $out" "2 loopback-own: ok" "$who: the same in network.mode allowlist"
	probe_blocked "$who" tcp-connect "ECONNREFUSED" "$port" --allow example.com
	kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
	[ ! -s "$T/tcp-$who.log" ]; ok $? "$who: the host TCP listener saw no connection"

	# No route out: the host's own address (a listener on every address) and outside
	# addresses, in modes none and allowlist; the listener sees nothing.
	host_routes "$who"

	listen udp "$port" "$T/udp-$who.log"; lpid=$LPID
	probe "$who" udp-send "$port" >/dev/null
	sleep 0.2
	kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
	[ ! -s "$T/udp-$who.log" ]; ok $? "$who: the host UDP listener received nothing"

	listen abstract "paddock-$who-$$" "$T/unix-$who.log"; lpid=$LPID
	check_blocked "$who" abstract-unix "ECONNREFUSED|EPERM" "paddock-$who-$$"
	kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
	[ ! -s "$T/unix-$who.log" ]; ok $? "$who: the host abstract unix socket saw no connection"

	# TIOCSTI with a real terminal as stdin (script(1) gives the sandbox a pty).
	out=$(cd "$T/home" && script -qec "$(printf '%q ' "${PRUN[@]}") run --ro $PROBE -- $PROBE tiocsti" /dev/null </dev/null 2>&1 | tr -d '\r')
	printf '%s' "$out" | grep -q "tiocsti: blocked (EPERM)"; ok $? "$who: TIOCSTI into the caller's terminal is refused ($out)"

	# A double-forked, setsid daemon does not outlive run.
	# The sleep's duration is this run's own (300.PID.RANDOM): another "sleep 300" on the
	# machine is not this daemon.
	local mark="300.$$$RANDOM"
	probe "$who" daemon "$mark" >/dev/null
	sleep 0.2
	pgrep -f "^sleep $mark\$" >/dev/null; is $? 1 "$who: a double-forked daemon does not outlive run"
}

# host_routes WHO: a listener on 0.0.0.0 and on [::] of the host; the sandbox tries the host's
# own non-loopback addresses and outside ones, in modes none and allowlist.
host_routes() {
	local who=$1 port lpid addr mode
	local -a opts
	port=$(free_port)
	listen tcp-any "$port" "$T/tcp-any-$who.log"; lpid=$LPID
	for mode in none allowlist; do
		opts=()
		[ "$mode" = allowlist ] && opts=(--allow example.com)
		for addr in $(hostname -I 2>/dev/null); do
			probe_blocked "$who" tcp-out ENETUNREACH "$addr $port" "${opts[@]}"
		done
		probe_blocked "$who" tcp-out ENETUNREACH "198.51.100.1 443" "${opts[@]}"
		probe_blocked "$who" udp-out ENETUNREACH "198.51.100.1 53" "${opts[@]}"
		probe_blocked "$who" tcp6-out ENETUNREACH "2001:db8::1 443" "${opts[@]}"
	done
	kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
	[ ! -s "$T/tcp-any-$who.log" ]; ok $? "$who: the host listener on every address saw no connection"
}

setuid_checks() {
	local who=$1 ws out
	ws=$(mkws)
	cp "$PROBE" "$ws/suid-probe"
	chown 0:0 "$ws/suid-probe"
	chmod 4755 "$ws/suid-probe"
	setcap cap_sys_admin,cap_setuid+ep "$ws/suid-probe"
	chmod 4755 "$ws/suid-probe"
	out=$(prun "$who" -w "$ws" -- "$ws/suid-probe" euid 2>/dev/null)
	if [ "$who" = root ]; then is "$out" "euid=0" "$who: uid 0 inside stays uid 0 (mapped), nothing more"
	else is "$out" "euid=65534" "$who: a setuid-root binary does not raise the euid"; fi
	out=$(prun "$who" -w "$ws" -- "$ws/suid-probe" capeff 2>/dev/null | tr -s '\t ' ' ')
	is "$out" "CapEff: 0000000000000000" "$who: a setuid/file-capability binary gains no capability"
}

# Controls: outside the sandbox the same probes succeed, so "blocked" above is the sandbox's
# doing and not a broken probe. Only attempts that are harmless on the host are used.
controls() {
	local name out rc port lpid
	for name in read-shadow list-root list-home unshare-user unshare-net; do
		out=$("$PROBE" "$name" 2>&1); rc=$?
		is "$rc:$out" "0:$name: ESCAPED" "control: on the host, $name succeeds as root"
	done
	port=$(free_port)
	listen tcp "$port" "$T/tcp-control.log"; lpid=$LPID
	out=$("$PROBE" tcp-connect "$port" 2>&1); rc=$?
	sleep 0.2
	kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
	is "$rc:$out" "0:tcp-connect: ESCAPED" "control: on the host, tcp-connect reaches the listener"
	[ -s "$T/tcp-control.log" ]; ok $? "control: the listener logged that connection"
}

# The daemon's authority (docs/daemon.md; the whole run/serve x ro/rw/overlay matrix is
# test-authority.sh): a `paddock serve` of the same user, with the same runtime directory.
# probe_blocked WHO NAME PATTERN ARG [paddock options...]: check_blocked with options.
probe_blocked() {
	local who=$1 name=$2 pat=$3 parg=$4 out rc
	shift 4
	out=$(probe "$who" "$name" "$parg" "$@"); rc=$?
	if [ "$rc" = 1 ] && printf '%s' "$out" | grep -qE "^$name: blocked \(($pat)\)$"; then
		ok 0 "$who: $name ${parg#$T/} $*: $out"
	else
		ok 1 "$who: $name ${parg#$T/} $* must be refused with $pat"
		printf '#   exit %s, output: %s\n' "$rc" "$out"
	fi
}
authority_checks() {
	local who=$1 spid alias="$T/alias-$who" dstate="$T/dstate-$who" link="$T/link-$who" i
	mkdir -p "$alias" "$dstate" "$link"
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$dstate"
	PRUN_ENV=(PADDOCK_STATE_DIR="$dstate")
	(prun_cmd "$who"; exec "${PRUN[@]}" serve -q) >"$T/serve-$who.log" 2>&1 &
	spid=$!
	PRUN_ENV=()
	for i in $(seq 200); do [ -S "$T/run-$who/paddock.sock" ] && break; sleep 0.05; done
	mount --bind "$T/run-$who" "$alias"
	probe_blocked "$who" daemon-create ENOENT "$T/run-$who/paddock.sock" --ro "$T"
	# The runtime directory under another name (a bind mount) is hidden as it is.
	probe_blocked "$who" daemon-create ENOENT "$alias/paddock.sock" --ro "$T"
	# A hard link to the socket, which no directory check can see: the daemon answers 401.
	ln -f "$T/run-$who/paddock.sock" "$link/d.sock"
	probe_blocked "$who" daemon-create "EPERM|EACCES" "$link/d.sock" --ro "$link"
	kill "$spid"; wait "$spid" 2>/dev/null
	umount "$alias"
}

controls
for who in root user; do
	prun_cmd "$who"
	while IFS=: read -r name pat; do
		[ -n "$name" ] && check_blocked "$who" "$name" "$pat"
	done <<< "$ATTEMPTS"
	host_checks "$who"
	setuid_checks "$who"
	authority_checks "$who"
done

# ---- issue 16: set-id files, the caller's terminal, a sibling's memory (docs/seccomp.md) ----
. "$(dirname "$0")/lib-serve.sh"
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; undelegate_cgroup; rm -rf "$T"' EXIT

# name:errno of each attempt to make a set-id file in the host directory given as ARG.
SETID_ATTEMPTS='chmod-suid:EPERM chmod-sgid:EPERM fchmodat2-suid:EPERM open-suid:EPERM
tmpfile-suid:EPERM mknod-suid:EPERM openat2-suid:ENOSYS setcap-file:EPERM'
# The same attack as a user would type it, with each command's status.
SETID_SHELL='cd "$1" && cp /bin/sh sh-copy
chmod 4755 sh-copy; echo "chmod 4755: $?"
chmod g+s sh-copy; echo "chmod g+s: $?"
install -m 4755 /bin/sh sh-install; echo "install -m 4755: $?"
python3 -c "import os; os.open(\"py-suid\", os.O_CREAT | os.O_WRONLY, 0o4755)" 2>/dev/null; echo "open(O_CREAT, 04755): $?"'
SETID_SHELL_WANT='chmod 4755: 1
chmod g+s: 1
install -m 4755: 1
open(O_CREAT, 04755): 1'

# is_blocked DESC NAME PATTERN RC OUT: the attempt's own status and line say it was refused.
is_blocked() {
	if [ "$4" = 1 ] && printf '%s' "$5" | grep -qE "^$2: blocked \(($3)\)$"; then
		ok 0 "$1: $5"
	else
		ok 1 "$1: $2 must be refused with $3"
		printf '#   exit %s, output: %s\n' "$4" "$5"
	fi
}

# no_setid_on_host DESC DIR: seen from the host, nothing in DIR has a set-id bit.
no_setid_on_host() {
	local found
	found=$(find "$2" -perm /6000 -printf '%m %u %p\n')
	is "$found" "" "$1: from the host, no set-id file in $2"
}

# setid_run WHO WAY: every attempt through `paddock run`, the directory being an rw workspace
# (WAY=workspace), an --rw bind (WAY=rw-bind) or an overlay workspace, whose upper directory
# is on the host too (WAY=overlay).
setid_run() {
	local who=$1 way=$2 d a out rc
	local -a opts
	d=$(mkws)
	case $way in
	workspace) opts=(-w "$d" --workspace-mode rw) ;;
	rw-bind) opts=(-w "$(mkws)" --rw "$d") ;;
	overlay) opts=(-w "$d" --workspace-mode overlay) ;;
	esac
	for a in $SETID_ATTEMPTS; do
		out=$(prun "$who" "${opts[@]}" --ro "$PROBE" -- "$PROBE" "${a%%:*}" "$d" 2>/dev/null); rc=$?
		is_blocked "$who: run, $way" "${a%%:*}" "${a#*:}" "$rc" "$out"
	done
	out=$(prun "$who" "${opts[@]}" -- sh -c "$SETID_SHELL" sh "$d" 2>"$T/setid-err")
	is "$out" "$SETID_SHELL_WANT" "$who: run, $way: cp + chmod 4755, chmod g+s, install -m 4755, open(O_CREAT, 04755) all fail"
	is "$(grep -c 'Operation not permitted' "$T/setid-err")" 3 "$who: run, $way: chmod, chmod and install say EPERM"
	if [ "$way" = overlay ]; then
		no_setid_on_host "$who: run, $way (the change sets)" "$T/state-$who"
	else
		is "$(stat -c %a "$d/sh-copy")" 755 "$who: run, $way: the copy itself was made, without the bits"
	fi
	no_setid_on_host "$who: run, $way" "$d"
}

# setid_serve WHO: the same through a daemon sandbox with an rw workspace.
setid_serve() {
	local who=$1 d id a out
	d=$(mkws)
	cp "$PROBE" "$d/escape-probe" && chmod 0755 "$d/escape-probe"
	serve_start "$who"
	ok $? "$who: serve: the daemon starts (set-id checks)"
	api "$who" POST /v1/sandboxes "{\"workspace\":{\"path\":\"$d\",\"mode\":\"rw\"}}"
	id=$(jq_get "$BODY" id)
	is "$CODE" 201 "$who: serve: a sandbox with the rw workspace $d"
	for a in $SETID_ATTEMPTS; do
		api "$who" POST "/v1/sandboxes/$id/exec" \
			"{\"argv\":[\"$d/escape-probe\",\"${a%%:*}\",\"$d\"]}"
		is_blocked "$who: serve, workspace" "${a%%:*}" "${a#*:}" "$(jq_get "$BODY" exit_code)" \
			"$(jq_get "$BODY" stdout.text | tr -d '\n')"
	done
	api "$who" POST "/v1/sandboxes/$id/exec" \
		"$(jq -cn --arg s "$SETID_SHELL" --arg d "$d" '{argv: ["sh", "-c", $s, "sh", $d]}')"
	is "$(jq_get "$BODY" stdout.text)" "$SETID_SHELL_WANT" "$who: serve, workspace: cp + chmod 4755, chmod g+s, install -m 4755, open(O_CREAT, 04755) all fail"
	no_setid_on_host "$who: serve, workspace" "$d"
	api "$who" DELETE "/v1/sandboxes/$id"
	serve_stop "$who"
}

# tty_checks WHO: run is handed a terminal (a pty, as a user's); the attempt to change its line
# discipline or make it exclusive is refused, and after run the terminal still works.
tty_checks() {
	local who=$1 name out rc
	for name in tiocsetd tiocexcl; do
		out=$(cd "$T/home" && python3 "$TESTS_DIR/integration/tty-check.py" "${PRUN[@]}" run \
			--ro "$PROBE" -- "$PROBE" "$name" 2>&1); rc=$?
		printf '%s' "$out" | grep -qx "$name: blocked (EPERM)"
		ok $? "$who: $name on the caller's terminal is refused ($(printf '%s' "$out" | grep "^$name:"))"
		is "$rc $(printf '%s' "$out" | grep '^terminal:')" \
			"0 terminal: ldisc=0 excl=0 input=ok output=ok" "$who: after $name, the caller's terminal still works"
	done
}

# mem_checks WHO: the rule of docs/seccomp.md: a sibling of the same workload is readable through
# /proc/PID/mem, a process that made itself non-dumpable (as paddock-init does) is not.
mem_checks() {
	local who=$1 out rc
	out=$(probe "$who" sibling-mem); rc=$?
	is "$rc $out" "2 sibling-mem: readable" "$who: a sibling's /proc/PID/mem is readable (same workload; docs/seccomp.md)"
	check_blocked "$who" sibling-mem-nodump EACCES
	check_blocked "$who" proc1-mem EACCES
}

# Control: on the host the terminal attack works and tty-check.py sees the terminal wrecked.
out=$(python3 "$TESTS_DIR/integration/tty-check.py" "$PROBE" tiocsetd 2>&1)
is "$? $(printf '%s' "$out" | grep '^terminal:')" "1 terminal: ldisc=27 excl=0 input=lost output=lost" \
	"control: on the host, TIOCSETD N_NULL wrecks the terminal and the check sees it"
for who in root user; do
	prun_cmd "$who"
	setid_run "$who" workspace
	setid_run "$who" rw-bind
	setid_run "$who" overlay
	tty_checks "$who"
	mem_checks "$who"
	have_supervisor && setid_serve "$who"
done
done_testing
