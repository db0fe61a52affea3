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
	while IFS= read -r line; do
		case "$line" in
		"ok - "*) ok 0 "$who: ${line#ok - }" ;;
		"not ok - "*) ok 1 "$who: ${line#not ok - }" ;;
		*) echo "$line" ;;
		esac
	done < <("$@" env PADDOCK_INIT="$T/bin/paddock-init" "${PRUN_ENV[@]}" \
		python3 "$T/bin/supervise-check.py" "$T/bin/paddock" "$work" 2>&1)
	if [ -s "$work/supervise.log" ] && [ "$TAP_FAILED" != 0 ]; then
		sed 's/^/# log: /' "$work/supervise.log" | tail -20
	fi
}

checks root
# Rootless: a cgroup delegated to nobody (its freezer too), as an administrator would.
delegate_cgroup
PRUN_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
checks user setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all
PRUN_ENV=()
undelegate_cgroup
done_testing
