#!/bin/bash
# paddock supervise: one sandbox in service mode driven over its control
# socket (docs/internals/daemon.md), as root and as nobody.
. "$(dirname "$0")/lib-run.sh"

cp "$TESTS_DIR/integration/svclient.py" "$TESTS_DIR/integration/supervise-check.py" "$T/bin/"
chmod 0644 "$T/bin/"*.py

# One identity: run the checks, number their lines as TAP.
checks() {
	local who=$1 work="$T/sv-$1" line
	shift
	mkdir -p "$work"
	[ "$who" = root ] || chown "$UNPRIV_UID:$UNPRIV_UID" "$work"
	"$@" env PADDOCK_INIT="$T/bin/paddock-init" "${PRUN_ENV[@]}" \
		python3 "$T/bin/supervise-check.py" "$T/bin/paddock" "$work" >"$work.out" 2>&1
	local rc=$?
	while IFS= read -r line; do
		case "$line" in
		"ok - "*) ok 0 "$who: ${line#ok - }" ;;
		"not ok - "*) ok 1 "$who: ${line#not ok - }" ;;
		*) echo "# $line" ;;
		esac
	done <"$work.out"
	# The checks script itself must reach its end (a crash is a failure, not fewer checks).
	is "$rc" 0 "$who: the checks ran to the end"
	if [ -s "$work/supervise.log" ] && [ "$TAP_FAILED" != 0 ]; then
		sed 's/^/# log: /' "$work/supervise.log" | tail -20
	fi
}

# The verb is hidden from the list, documented by its own --help, strict about its options.
"$T/bin/paddock" --help | grep -q supervise; is $? 1 "supervise is not in paddock --help's verb list"
"$T/bin/paddock" supervise --help | grep -q -- "--spec-fd"; ok $? "paddock supervise --help documents it"
"$T/bin/paddock" supervise --id x 2>/dev/null; is $? 122 "supervise without --spec-fd: exit 122"
out=$("$T/bin/paddock" supervise --id not-a-uuid --spec-fd 3 --ready-fd 4 3</dev/null 4>&1 2>/dev/null)
rc=$?
case "$rc:$out" in 125:*'"step":"spec"'*) rc=0 ;; esac
ok $rc "an id that is not a UUID: exit 125, readiness names the spec step"

checks root
# Rootless: a cgroup delegated to nobody (its freezer too), as an administrator would.
delegate_cgroup
PRUN_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
checks user setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all
PRUN_ENV=()
undelegate_cgroup
done_testing
