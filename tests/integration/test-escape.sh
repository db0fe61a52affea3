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

# name : errno pattern the refusal must carry (the mechanism that stops it)
ATTEMPTS='
read-shadow:ENOENT
list-root:ENOENT
list-home:ENOENT
proc1-root:EACCES|ENOENT
proc1-environ:EACCES
proc1-mem:EACCES
dotdot-root:ENOENT
dev-mem:ENOENT
dev-disk:ENOENT
sysfs:ENOENT
write-usr:EROFS|EACCES
write-etc:EROFS|EACCES
mkdir-root:EROFS|EACCES
write-sysctl:EROFS|EACCES
sysrq:EROFS|EACCES|ENOENT
mount-tmpfs:EPERM
remount-rw:EPERM
umount-proc:EPERM
fsopen:EPERM
open-tree:EPERM
pivot-root:EPERM
chroot:EPERM
mount-cgroup:EPERM
unshare-user:EPERM
unshare-mount:EPERM
unshare-net:EPERM
clone-newuser:EPERM
clone3-newuser:ENOSYS
setns:EPERM|EACCES
ptrace-init:EPERM
vm-readv:EPERM
keyctl:EPERM
add-key:EPERM
bpf:EPERM
perf-event:EPERM
userfaultfd:EPERM
io-uring:EPERM
kexec:EPERM
init-module:EPERM
open-by-handle:EPERM
personality:EPERM
seccomp-listener:EPERM
reboot:EPERM
sethostname:EPERM
setgroups:EPERM
raise-rlimit:EPERM
mknod:EPERM
tioclinux:EPERM
packet-socket:EPERM
raw-socket:EPERM
tcp-bind:EACCES
ipv6-connect:EACCES|ENETUNREACH|EADDRNOTAVAIL
exec-shm:EACCES
'

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
	check_blocked "$who" tcp-connect "EACCES|ECONNREFUSED|ENETUNREACH" "$port"
	kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
	[ ! -s "$T/tcp-$who.log" ]; ok $? "$who: the host TCP listener saw no connection"

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
		ok 0 "$who: $name $*: $out"
	else
		ok 1 "$who: $name $* must be refused with $pat"
		printf '#   exit %s, output: %s\n' "$rc" "$out"
	fi
}
authority_checks() {
	local who=$1 spid alias="$T/alias-$who" dstate="$T/dstate-$who" i
	mkdir -p "$alias" "$dstate"
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$dstate"
	PRUN_ENV=(PADDOCK_STATE_DIR="$dstate")
	(prun_cmd "$who"; exec "${PRUN[@]}" serve -q) >"$T/serve-$who.log" 2>&1 &
	spid=$!
	PRUN_ENV=()
	for i in $(seq 200); do [ -S "$T/run-$who/paddock.sock" ] && break; sleep 0.05; done
	mount --bind "$T/run-$who" "$alias"
	probe_blocked "$who" daemon-create ENOENT "$T/run-$who/paddock.sock" --ro "$T"
	probe_blocked "$who" daemon-create "EPERM|EACCES" "$alias/paddock.sock" --ro "$alias"
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
done_testing
