#!/bin/bash
# paddock profile show/check/list, and profiles driving paddock run.
set -u
. "$(dirname "$0")/lib-run.sh"
P="$T/bin/paddock"

out=$("$P" profile list); is "$out" "$(printf 'default\nstrict')" "profile list names the built-ins"
"$P" profile show default > "$T/home/default.yaml"; is $? 0 "profile show default"
grep -q '^name: default' "$T/home/default.yaml"; ok $? "show prints the profile's name"
"$P" profile check "$T/home/default.yaml" >/dev/null; is $? 0 "the shown profile checks clean"
"$P" profile show "$T/home/default.yaml" > "$T/home/again.yaml"
# The source line differs (builtin vs file); the rest must round-trip.
diff <(grep -v '^# source' "$T/home/default.yaml") <(grep -v '^# source' "$T/home/again.yaml") >/dev/null
ok $? "show -> check -> show round-trips"
"$P" profile show strict | grep -q 'mode: ro'; ok $? "strict has a read-only workspace"
"$P" profile show nosuchprofile 2>"$T/err"; is $? 122 "an unknown profile gives 122"
grep -q "default" "$T/err"; ok $? "the error lists the built-ins"

cat > "$T/home/bad.yaml" <<'YAML'
name: bad
limits:
  memory: lots
  pidz: 3
filesystem:
  read_only: [relative/path]
network:
  mode: sideways
YAML
"$P" profile check "$T/home/bad.yaml" 2>"$T/err"; is $? 122 "a bad profile gives 122"
n=$(grep -c "^$T/home/bad.yaml:[0-9]*:[0-9]*: " "$T/err"); is "$n" 4 "every error is reported, with file:line:col"
grep -q "bad.yaml:3:[0-9]*: limits.memory: " "$T/err"; ok $? "bad size: line 3, field limits.memory"
grep -q "bad.yaml:4:[0-9]*: limits.pidz: " "$T/err"; ok $? "unknown key: line 4, field limits.pidz"
grep -q "bad.yaml:6:[0-9]*: filesystem.read_only\[0\]: " "$T/err"; ok $? "relative path: line 6, list index"
grep -q "bad.yaml:8:[0-9]*: network.mode: " "$T/err"; ok $? "bad enum: line 8, field network.mode"
printf 'name: x\nlimits: [\n' > "$T/home/syntax.yaml"
"$P" profile check "$T/home/syntax.yaml" 2>"$T/err"; is $? 122 "a YAML syntax error gives 122"
grep -q "syntax.yaml:[0-9]*:[0-9]*:" "$T/err"; ok $? "the syntax error has a position"
head -c 3000000 /dev/zero | tr '\0' 'a' > "$T/home/huge.yaml"
"$P" profile check "$T/home/huge.yaml" 2>/dev/null; is $? 122 "an oversized profile is refused, no crash"
printf '\xff\xfe\x00garbage\x00' > "$T/home/bin.yaml"
"$P" profile check "$T/home/bin.yaml" 2>/dev/null; is $? 122 "binary garbage is refused, no crash"
long="$T/home/a-directory-name-long-enough-that-a-quoted-path-must-be-cut-short/$(printf 'd%.0s' $(seq 60))"
mkdir -p "$long"
printf 'extends: cycle-b.yaml\nname: cycle-a\n' > "$long/cycle-a.yaml"
printf 'extends: cycle-a.yaml\nname: cycle-b\n' > "$long/cycle-b.yaml"
"$P" profile check "$long/cycle-a.yaml" 2>"$T/err"; is $? 122 "an extends cycle gives 122"
grep -q "extends cycle: .*cycle-a.yaml -> .*cycle-b.yaml -> .*cycle-a.yaml" "$T/err"
ok $? "a cycle of long paths still names each file (their ends are kept): $(grep -o 'extends cycle:.*' "$T/err" | head -c 200)"

for who in root user; do
	ws=$(mkws)
	prun "$who" -w "$ws" --profile strict -- sh -c 'echo x > f' 2>/dev/null
	ok $(( $? == 0 )) "$who: strict: the workspace is read-only"
	cat > "$ws/p.yaml" <<YAML
extends: default
name: custom
filesystem:
  tmpfs: [/tmp, /scratch]
limits:
  nofile: 64
  tmp_size: 1M
env:
  GREETING: hello
YAML
	out=$(prun "$who" -w "$ws" --profile "$ws/p.yaml" -- sh -c 'echo $GREETING; ulimit -n' 2>/dev/null)
	is "$out" "$(printf 'hello\n64')" "$who: a profile file sets env and rlimits"
	out=$(prun "$who" -w "$ws" --profile "$ws/p.yaml" -- sh -c 'head -c 2000000 /dev/zero > /tmp/big; echo rc=$?' 2>&1)
	case "$out" in *"No space left"*rc=1*|*rc=1*) r=0 ;; *) r=1 ;; esac
	ok $r "$who: limits.tmp_size bounds /tmp ($out)"
	prun "$who" -w "$ws" --profile "$ws/p.yaml" -- test -d /scratch 2>/dev/null; is $? 0 "$who: extra tmpfs from the profile"
	prun "$who" -w "$ws" --profile "$T/home/bad.yaml" -- true 2>/dev/null; is $? 122 "$who: run refuses a bad profile"
	prun "$who" -w "$ws" --memory 64M --pids 32 --cpus 0.5 --timeout 10s -- true 2>"$T/err"
	rc=$?
	if [ "$who" = root ]; then is $rc 0 "$who: explicit cgroup limits apply as root"
	else
		is $rc 125 "$who: explicit limits without cgroup delegation fail closed"
		grep -qi "deleg\|PADDOCK_CGROUP_PARENT" "$T/err"; ok $? "$who: the error says how to fix it"
	fi
done
done_testing
