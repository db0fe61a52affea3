#!/bin/bash
# Rootless use: paddock works for an unprivileged user with no setuid bit, fails closed with
# a fix when a required limit cannot be applied, and reports best-effort downgrades.
set -u
. "$(dirname "$0")/lib-run.sh"

mode=$(stat -c %A "$T/bin/paddock")
case "$mode" in *s*|*S*) r=1 ;; *) r=0 ;; esac
ok $r "the paddock binary has no setuid or setgid bit ($mode)"
out=$(prun user -- id -u 2>/dev/null); is "$out" 65534 "nobody runs a sandbox; inside it is still uid 65534"
out=$(prun user -- sh -c 'grep -E "^CapEff" /proc/self/status | tr -s "\t " " "' 2>/dev/null)
is "$out" "CapEff: 0000000000000000" "nobody's sandbox has no capabilities"

# No cgroup delegation: an explicit limit is required and creation fails closed, with a fix.
prun user --memory 64M -- true 2>"$T/err"; rc=$?
is "$rc" 125 "an explicit --memory without a delegated cgroup fails with 125"
grep -q "PADDOCK_CGROUP_PARENT" "$T/err"; ok $? "the error says how to delegate ($(head -c 160 "$T/err"))"
grep -q "best_effort" "$T/err"; ok $? "the error mentions marking the limit best-effort"
prun user --profile strict -- true 2>/dev/null; is $? 125 "the strict profile (limits required) fails closed without delegation"

# The default profile marks its limits best-effort: it runs, and says what it dropped.
ev="$T/home/down.jsonl"
prun user --events "$ev" -- true 2>"$T/err"; rc=$?
is "$rc" 0 "the default profile runs rootless without delegation"
grep -q "memory and pids limits not applied (best effort)" "$T/err"; ok $? "the memory and pids downgrades are printed"
is "$(wc -l <"$T/err")" 1 "the downgrades are one line ($(head -c 200 "$T/err"))"
for fix in PADDOCK_CGROUP_PARENT "systemd-run --user -p Delegate=yes" docs/rootless.md "--quiet hides this"; do
	grep -q -- "$fix" "$T/err"; ok $? "the notice names the fix: $fix"
done
down=$(python3 -c 'import json,sys; print(",".join(json.loads(open(sys.argv[1]).readline())["attrs"]["downgraded"]))' "$ev")
is "$down" "memory,pids" "sandbox.create records the downgrades"

# --quiet (the README's rootless example): nothing but the command's own output, as nobody
# and as root; the run's notes go too (the change set stays, for 'paddock ws ls'); errors stay.
for who in user root; do
	for q in --quiet -q; do
		out=$(prun $who $q -- echo hi 2>"$T/err"); rc=$?
		is "$rc:$out:$(cat "$T/err")" "0:hi:" "$who: a default run with $q prints nothing on stderr"
	done
done
ws=$(mkws)
out=$(cd "$ws" && PRUN_ENV=() && prun_cmd user && "${PRUN[@]}" run --quiet -- sh -c 'echo x > f' 2>&1)
is "$out" "" "a quiet run that changes the workspace prints nothing"
pws user ls 2>/dev/null | grep -q .; ok $? "its change set is kept (paddock ws ls lists it)"
prun user --quiet --memory 64M -- true 2>"$T/err"; rc=$?
is "$rc" 125 "--quiet does not change the exit status of a refused --memory"
grep -q "PADDOCK_CGROUP_PARENT" "$T/err"; ok $? "--quiet keeps the error and its fix ($(head -c 120 "$T/err"))"

# With a delegated cgroup the same limits apply rootless.
delegate_cgroup
PRUN_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
prun user --memory 32M -- python3 -c 'bytearray(1 << 30)' 2>/dev/null; is $? 123 "with delegation, --memory holds rootless (123)"
prun user --events "$ev.2" -- true 2>"$T/err"
grep -q "not applied" "$T/err"; is $? 1 "with delegation, nothing is downgraded"
PRUN_ENV=()
undelegate_cgroup

# No user namespaces (here: user.max_user_namespaces=0 in a throwaway user namespace, so
# the host is untouched): creation fails closed and names the sysctls to check.
out=$(cd "$T/home" && unshare --user --map-root-user sh -c \
	'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" run --workspace-mode none -- true' \
	"$T/bin/paddock" 2>&1); rc=$?
is "$rc" 125 "without user namespaces, creation fails with 125"
printf '%s' "$out" | grep -q "max_user_namespaces"; ok $? "the error names the sysctls to check"
done_testing
