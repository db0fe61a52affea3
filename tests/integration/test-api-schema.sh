#!/bin/bash
# docs/api.yaml against the daemon's real answers: every route of the document is called
# on a live `paddock serve` (api-conform.py), and each answer (status, content type, JSON
# body; each event of an SSE stream) is checked against the schema the document gives
# for it, the way a client generated from the document would decode it. As root and as
# an unprivileged user (TAP).
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

if ! have_supervisor; then
	echo "# skipped: this build has no 'paddock supervise' (the supervisor), so no sandbox can start"
	[ "${PDK_MUST_WORK:-0}" = 1 ] && ok 1 "the supervisor is built (PDK_MUST_WORK=1)"
	done_testing
	exit $?
fi
# The driver runs as the daemon's user too: the system's python3 and its Debian packages.
PY=/usr/bin/python3
if ! $PY -c 'import jsonschema, yaml' 2>/dev/null; then
	echo "# python3-jsonschema is missing: 'make setup' installs it"
	ok 1 "python3 has jsonschema and yaml"
	done_testing
	exit $?
fi

for who in root user; do
	if [ "$who" = user ]; then
		delegate_cgroup
		SERVE_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
	fi
	serve_start "$who"
	ok $? "$who: the daemon starts"
	ws=$(mkws)
	git -C "$ws" init -q 2>/dev/null
	echo base >"$ws/base.txt"
	chmod -R a+rwX "$ws"
	cp "$TESTS_DIR/integration/api-conform.py" "$TESTS_DIR/../docs/api.yaml" "$T/"
	chmod 0644 "$T/api-conform.py" "$T/api.yaml"
	(cd "$T/home" && as "$who" $PY "$T/api-conform.py" "$(sock_of "$who")" "$T/api.yaml" "$ws" \
		"$T/serve-$who/state") \
		>"$T/conform-$who" 2>"$T/conform-$who.err"
	rc=$?
	while IFS= read -r line; do
		case "$line" in
		PASS\ *) ok 0 "$who: ${line#PASS }" ;;
		FAIL\ *) ok 1 "$who: ${line#FAIL }" ;;
		*) echo "# $who: api-conform.py said: $line" ;;
		esac
	done <"$T/conform-$who"
	is "$rc" 0 "$who: api-conform.py ran to its end"
	# Its stderr is shown even when it ran to its end: an exception in a stream's `during`
	# thread ends that thread only, and the line it would have said is missing.
	if [ -s "$T/conform-$who.err" ]; then
		sed "s/^/# $who: stderr: /" "$T/conform-$who.err" | tail -20
	fi
	ids=$(cd "$T/home" && as "$who" "$T/bin/paddock" ps -q)
	[ -z "$ids" ] || (cd "$T/home" && as "$who" "$T/bin/paddock" kill $ids >/dev/null)
	serve_stop "$who"
	is "$SERVE_RC" "0" "$who: the daemon stops cleanly"
done
done_testing
