# Small TAP helpers for the integration scripts, sourced.
#   prun root|user ARGS...   paddock run ARGS as root, or as nobody (setpriv)
#   ok STATUS DESC           "ok N - DESC" when STATUS is 0
#   is GOT WANT DESC         equality, with a diagnostic on mismatch
# $PADDOCK and $PADDOCK_INIT come from meson (tests/meson.build).
: "${PADDOCK:?PADDOCK must name the paddock binary}"
: "${PADDOCK_INIT:=$(dirname "$PADDOCK")/paddock-init}"
T=$(mktemp -d /tmp/paddock-it-XXXXXX)
chmod 0755 "$T"
mkdir -p "$T/bin" "$T/home" "$T/state-root" "$T/state-user"
chmod 0777 "$T/home"
# Change sets of overlay workspaces: one state directory per identity.
chown 65534:65534 "$T/state-user"
# The build tree may not be readable by nobody: run copies from a world-readable place.
cp "$PADDOCK" "$T/bin/paddock"
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
		PRUN=(env PADDOCK_INIT="$init" PADDOCK_STATE_DIR="$T/state-root" "${PRUN_ENV[@]}"
			"$T/bin/paddock")
	else
		PRUN=(setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all
			env PADDOCK_INIT="$init" PADDOCK_STATE_DIR="$T/state-user" "${PRUN_ENV[@]}"
			"$T/bin/paddock")
	fi
}
PRUN_ENV=()

# Delegate a cgroup (v1: one per controller) to the unprivileged user, as an administrator
# would; prints the parent path for PADDOCK_CGROUP_PARENT. Removed by undelegate_cgroup.
DELEGATED=""
delegate_cgroup() {
	local c
	DELEGATED="/paddock-test-$$"
	for c in memory pids cpu cpuacct freezer; do
		[ -d "/sys/fs/cgroup/$c" ] || continue
		mkdir -p "/sys/fs/cgroup/$c$DELEGATED"
		chown -R "$UNPRIV_UID:$UNPRIV_UID" "/sys/fs/cgroup/$c$DELEGATED"
	done
}
undelegate_cgroup() {
	local c
	[ -n "$DELEGATED" ] || return 0
	for c in memory pids cpu cpuacct freezer; do
		[ -d "/sys/fs/cgroup/$c$DELEGATED" ] && rmdir "/sys/fs/cgroup/$c$DELEGATED" 2>/dev/null
	done
	DELEGATED=""
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
