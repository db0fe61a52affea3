# Small TAP helpers for the integration scripts, sourced.
#   prun root|user ARGS...   paddock run ARGS as root, or as nobody (setpriv)
#   ok STATUS DESC           "ok N - DESC" when STATUS is 0
#   is GOT WANT DESC         equality, with a diagnostic on mismatch
#   free_port                a loopback TCP port no one listens on
# $PADDOCK and $PADDOCK_INIT come from meson (tests/meson.build).
#
# Suites run side by side (tests/meson.build), and other users may run paddock on the same
# machine: each suite keeps to its own state and runtime directories (under $T), its own
# ports, its own cgroups (named after $TEST_ID), and counts or kills only what it started.
: "${PADDOCK:?PADDOCK must name the paddock binary}"
: "${PADDOCK_INIT:=$(dirname "$PADDOCK")/paddock-init}"

# Every suite runs in a pid namespace and a mount namespace of its own: /proc shows it only
# its own processes, so it can neither count nor kill another's, mountinfo only its own
# mounts, and the PIDs it is given are its own. Side by side, suites share pid_max (32768
# here) and would go through the PIDs several times faster, and bash 5.2 can lose track of
# a child given the PID of an earlier child of the same shell. When the namespace's pid 1
# (a reaper that runs this script and ends with it) ends, the kernel ends every process
# left in it.
# A suite that counts the temp dirs left on the machine sets OWN_NAMESPACES=1 before
# sourcing this file: its /tmp, /run and /dev/shm are then directories of its own too
# (holding only what the suite needs of the real ones: its sources and builds, when they
# live there). What it counts is then what it started, whatever else runs on the machine;
# a process, mount or file it leaks is still there to be counted.
# pid 1 of a suite's namespace: runs the suite, reaps every orphan, ends with the suite's status.
PDK_REAPER='import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
while True:
    p, st = os.wait()
    if p == pid:
        sys.exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))'
if [ -z "${PDK_IN_NS:-}" ] && unshare --pid --fork --mount true 2>/dev/null; then
	ns_dir=""
	keep=""
	if [ "${OWN_NAMESPACES:-0}" = 1 ]; then
		ns_dir=$(mktemp -d /tmp/paddock-ns-XXXXXX)
		mkdir -m 1777 "$ns_dir/tmp"
		mkdir -m 0755 "$ns_dir/run"
		for p in "$0" "$PADDOCK" "$PADDOCK_INIT" "${ESCAPE_PROBE:-}" "${PADDOCK_OTLP:-}" \
			"${TESTS_DIR:-}" "${BUILD_DIR:-}"; do
			[ -n "$p" ] || continue
			case $(realpath -m "$p") in
			/tmp/?* | /run/?*) keep="$keep $(realpath -m "$p" | cut -d/ -f1-3)" ;;
			esac
		done
	fi
	# The namespace's pid 1 is a small reaper, not the suite's bash: orphans are handed to
	# pid 1, and a bash that reaps children it never started loses track of its own
	# ("wait_for: No record of process", an empty `$(seq 50)`).
	PDK_IN_NS=1 PDK_NS_DIR=$ns_dir PDK_NS_KEEP=$keep PDK_TEST_ID=$$ unshare --pid --fork \
		--kill-child --mount --propagation private --mount-proc python3 -c "$PDK_REAPER" \
		bash "$0" "$@"
	rc=$?
	[ -z "$ns_dir" ] || rm -rf --one-file-system "$ns_dir"
	exit $rc
fi
if [ -n "${PDK_NS_DIR:-}" ]; then
	for k in $PDK_NS_KEEP; do
		[ -e "$PDK_NS_DIR$k" ] && continue
		if [ -d "$k" ]; then mkdir "$PDK_NS_DIR$k"; else touch "$PDK_NS_DIR$k"; fi
		mount --bind "$k" "$PDK_NS_DIR$k" || { echo "Bail out! cannot keep $k"; exit 1; }
	done
	# /run first: the suite's own directories are under the real /tmp.
	mount --rbind "$PDK_NS_DIR/run" /run && mount --rbind "$PDK_NS_DIR/tmp" /tmp &&
		mount -t tmpfs -o mode=1777 paddock-test /dev/shm ||
		{ echo "Bail out! cannot make the suite's own /tmp, /run and /dev/shm"; exit 1; }
fi
unset PDK_IN_NS PDK_NS_DIR PDK_NS_KEEP
# Names this suite's machine-wide objects (cgroups): its pid on the host.
TEST_ID=${PDK_TEST_ID:-$$}
unset PDK_TEST_ID
T=$(mktemp -d /tmp/paddock-it-XXXXXX)
chmod 0755 "$T"
mkdir -p "$T/bin" "$T/home" "$T/state-root" "$T/state-user"
mkdir -m 0700 "$T/run-root" "$T/run-user"
chmod 0777 "$T/home"
# Change sets of overlay workspaces and scratch files: one state and one runtime directory
# per identity.
chown 65534:65534 "$T/state-user" "$T/run-user"
# The build tree may not be readable by nobody: run copies from a world-readable place.
cp "$PADDOCK" "$T/bin/paddock"
# The front hands every verb but run, version and help to paddock-full beside it
# (docs/internals/binaries.md).
cp "${PADDOCK_FULL:-$(dirname "$PADDOCK")/paddock-full}" "$T/bin/paddock-full"
unset PADDOCK_FULL
cp "$PADDOCK_INIT" "$T/bin/paddock-init"
chmod 0755 "$T/bin"/*
UNPRIV_UID=65534
TAP_N=0
TAP_FAILED=0
trap 'undelegate_cgroup; rm -rf "$T"' EXIT

ok() {
	local desc
	desc=$(printf '%s' "$2" | tr '\n' ' ' | cut -c1-200) # one TAP line, whatever it quotes
	TAP_N=$((TAP_N + 1))
	if [ "$1" = 0 ]; then echo "ok $TAP_N - $desc"; else echo "not ok $TAP_N - $desc"; TAP_FAILED=$((TAP_FAILED + 1)); fi
}

# tap_run CMD...: run a driver that prints TAP lines without numbers ("ok - WHAT", "not ok -
# WHAT"), numbered here; its other lines pass through. A driver that exits non-zero (a crash
# cuts its checks short, and what it did not print would go unseen) is one failure more,
# naming it and its status.
tap_run() {
	local line rc=""
	while IFS= read -r line; do
		case $line in
		"ok - "*) ok 0 "${line#ok - }" ;;
		"not ok - "*) ok 1 "${line#not ok - }" ;;
		"#tap_run-exit "*) rc=${line#"#tap_run-exit "} ;;
		*) echo "$line" ;;
		esac
	done < <("$@"; echo "#tap_run-exit $?")
	[ "$rc" = 0 ] || ok 1 "the driver ($*) exited ${rc:-without a status}: it stopped before its end"
}
is() {
	if [ "$1" = "$2" ]; then ok 0 "$3"; else ok 1 "$3"
		{ printf 'got:\n%s\nwant:\n%s\n' "$1" "$2"; } | head -40 | sed 's/^/#   /'; return 1; fi
}
# The plan comes last (TAP allows it), so it always matches what ran.
done_testing() {
	echo "1..$TAP_N"
	[ "$TAP_FAILED" = 0 ]
}

# A fresh workspace that both root and nobody can write.
mkws() {
	local d
	d=$(mktemp -d "$T/ws-XXXXXX")
	chmod 0777 "$d"
	echo "$d"
}

# Sets PRUN to the argv prefix that starts paddock as root or as nobody.
# PRUN_ENV (an array of K=V) adds to paddock's environment.
prun_cmd() {
	local init="${PADDOCK_INIT_OVERRIDE:-$T/bin/paddock-init}"
	if [ "$1" = root ]; then
		PRUN=(env PADDOCK_INIT="$init" PADDOCK_STATE_DIR="$T/state-root"
			PADDOCK_RUNTIME_DIR="$T/run-root" "${PRUN_ENV[@]}" "$T/bin/paddock")
	else
		PRUN=(setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all
			env PADDOCK_INIT="$init" PADDOCK_STATE_DIR="$T/state-user"
			PADDOCK_RUNTIME_DIR="$T/run-user" "${PRUN_ENV[@]}" "$T/bin/paddock")
	fi
}
PRUN_ENV=()

# The cgroup controllers paddock uses (src/engine/cgroup-v1.c).
CG_CONTROLLERS="memory pids cpu cpuacct freezer"

# make_cgroup PATH [UID]: PATH (from the root) in every v1 controller, owned by UID when
# given. Without UID, on a cgroup v2 machine, PATH in the unified hierarchy (root's: handing
# a v2 cgroup to another user takes more than its owner). rm_cgroup PATH removes it.
make_cgroup() {
	local c
	if [ -z "${2:-}" ] && [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		mkdir -p "/sys/fs/cgroup$1"
		return 0
	fi
	for c in $CG_CONTROLLERS; do
		[ -d "/sys/fs/cgroup/$c" ] || continue
		mkdir -p "/sys/fs/cgroup/$c$1"
		[ -z "${2:-}" ] || chown -R "$2:$2" "/sys/fs/cgroup/$c$1"
	done
}
rm_cgroup() {
	local c d
	# The empty cgroups below it first (rmdir refuses a cgroup with children): those of
	# runs this suite killed before they could record theirs (docs/internals/cgroup.md).
	for d in "/sys/fs/cgroup$1" $(for c in $CG_CONTROLLERS; do echo "/sys/fs/cgroup/$c$1"; done); do
		[ -d "$d" ] && find "$d" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
	done
	[ -f /sys/fs/cgroup/cgroup.controllers ] && rmdir "/sys/fs/cgroup$1" 2>/dev/null
	for c in $CG_CONTROLLERS; do
		[ -d "/sys/fs/cgroup/$c$1" ] && rmdir "/sys/fs/cgroup/$c$1" 2>/dev/null
	done
	return 0
}

# Delegate a cgroup (v1: one per controller) to the unprivileged user, as an administrator
# would; sets DELEGATED to its path for PADDOCK_CGROUP_PARENT. Removed by undelegate_cgroup.
DELEGATED=""
delegate_cgroup() {
	DELEGATED="/paddock-test-$TEST_ID"
	make_cgroup "$DELEGATED" "$UNPRIV_UID"
}
undelegate_cgroup() {
	[ -n "$DELEGATED" ] || return 0
	rm_cgroup "$DELEGATED"
	DELEGATED=""
}

# A loopback TCP port that no one listens on: the kernel's pick for a socket bound to port
# 0, released again. Suites that run side by side never pick the same port this way.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

prun() {
	local PRUN
	prun_cmd "$1"
	shift
	(cd "$T/home" && exec "${PRUN[@]}" run "$@")
}
# paddock ws ARGS as root or nobody, with the same state directory as prun.
pws() {
	local PRUN
	prun_cmd "$1"
	shift
	(cd "$T/home" && exec "${PRUN[@]}" ws "$@")
}

# wait_gone PID: up to 60 s for PID to end (a bound, not a timing check); 0 when it ended.
wait_gone() {
	local i
	for ((i = 0; i < 600; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# cgroups_removed CGS...: each cgroup (a path below every hierarchy, as /proc/PID/cgroup
# names it) removed in every hierarchy that has it; prints how many held a process or
# could not be removed.
cgroups_removed() {
	local c g left=0
	for c in $CG_CONTROLLERS ""; do # "": the unified hierarchy
		for g in "$@"; do
			[ -d "/sys/fs/cgroup/$c$g" ] && [ "$c$g" != "$g" -o -f /sys/fs/cgroup/cgroup.controllers ] || continue
			[ -s "/sys/fs/cgroup/$c$g/cgroup.procs" ] && left=$((left + 1))
			rmdir "/sys/fs/cgroup/$c$g" || left=$((left + 1))
		done
	done
	echo "$left"
}
