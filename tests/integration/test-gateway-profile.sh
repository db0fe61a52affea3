#!/bin/bash
# The sandbox a gateway server runs in, from its permission manifest (docs/gateway.md,
# PERMISSIONS): the profile gw-profile prints for a config's server, run by paddock as root
# and as nobody. It must not see a home directory, it reads only what the manifest lets it
# read and writes only where the manifest lets it write; a manifest path that does not exist
# is refused when the config is read, naming the path.
set -u
. "$(dirname "$0")/lib-run.sh"
# strict's limits are not best-effort: nobody runs in a cgroup delegated to it.
delegate_cgroup
cp "$GW_PROFILE" "$T/bin/gw-profile"
chmod 0755 "$T/bin/gw-profile"

R="$T/granted-read"
W="$T/granted-write"
O="$T/elsewhere"
H="$T/a-home"
mkdir -p "$R" "$W" "$O" "$H/.ssh"
echo hello > "$R/readme"
echo 'PRIVATE KEY' > "$H/.ssh/x"
chmod 0755 "$R" "$H" "$H/.ssh"
chmod 0644 "$R/readme" "$H/.ssh/x"
chmod 0777 "$W" "$O"

cat > "$T/gw.yaml" <<YAML
servers:
  fs:
    command: [/bin/sh, -c, "exec cat"]
    permissions:
      filesystem: {read: [$R], write: [$W]}
YAML
"$T/bin/gw-profile" "$T/gw.yaml" fs > "$T/home/fs.yaml" 2>"$T/err"
is $? 0 "the profile of server fs is printed ($(head -c 200 "$T/err"))"
chmod 0644 "$T/home/fs.yaml"
"$T/bin/paddock" profile check "$T/home/fs.yaml" >/dev/null 2>&1
is $? 0 "paddock profile check accepts it"
grep -q "PRIVATE KEY" "$H/.ssh/x"; ok $? "the host can read $H/.ssh/x (what the sandbox must not)"

# A command that ran in the sandbox and failed there (not paddock refusing to start it).
failed_inside() {
	[ "$1" -ge 1 ] && [ "$1" -lt 120 ]
}

for who in root user; do
	PRUN_ENV=()
	[ "$who" = user ] && PRUN_ENV=(PADDOCK_CGROUP_PARENT="$DELEGATED")
	out=$(prun "$who" --profile "$T/home/fs.yaml" -- cat "$H/.ssh/x" 2>&1)
	rc=$?
	failed_inside $rc; ok $? "$who: cat ~/.ssh/x fails in the server's sandbox (exit $rc: $out)"
	case "$out" in *"PRIVATE KEY"*) r=1 ;; *) r=0 ;; esac
	ok $r "$who: and prints nothing of it"
	out=$(prun "$who" --profile "$T/home/fs.yaml" -- ls "$R" 2>&1)
	is "$out" "readme" "$who: ls of the manifest's read path works"
	out=$(prun "$who" --profile "$T/home/fs.yaml" -- cat "$R/readme" 2>&1)
	is "$out" "hello" "$who: a file below it is readable"
	prun "$who" --profile "$T/home/fs.yaml" -- sh -c "echo $who > '$W/f'" 2>"$T/err"
	is $? 0 "$who: echo > WRITE_PATH/f works ($(head -c 200 "$T/err"))"
	is "$(cat "$W/f" 2>/dev/null)" "$who" "$who: and the host sees what it wrote"
	rm -f "$W/f"
	prun "$who" --profile "$T/home/fs.yaml" -- sh -c "echo x > '$O/f'" 2>/dev/null
	failed_inside $?; ok $? "$who: writing to a directory the manifest does not name fails"
	[ ! -e "$O/f" ]; ok $? "$who: and nothing reached the host"
	prun "$who" --profile "$T/home/fs.yaml" -- sh -c "echo x > '$R/f'" 2>/dev/null
	failed_inside $?; ok $? "$who: writing to the read path fails"
	prun "$who" --profile "$T/home/fs.yaml" -- sh -c 'echo x > /usr/f' 2>/dev/null
	failed_inside $?; ok $? "$who: writing to the system directories fails"
done

cat > "$T/bad.yaml" <<YAML
servers:
  fs:
    command: [/bin/sh, -c, "exec cat"]
    permissions:
      filesystem:
        read: [$R, $T/no-such-dir]
YAML
"$T/bin/gw-profile" "$T/bad.yaml" fs >/dev/null 2>"$T/err"
is $? 1 "a manifest naming a path that does not exist is refused"
grep -q "^$T/bad.yaml:6: servers.fs.permissions.filesystem.read\[1\]: '$T/no-such-dir' cannot be granted" "$T/err"
ok $? "the error names the file, the line, the field and the path ($(head -c 300 "$T/err"))"

cat > "$T/env.yaml" <<YAML
servers:
  gh:
    command: [/bin/sh]
    permissions:
      environment: {GITHUB_TOKEN: abc}
YAML
"$T/bin/gw-profile" "$T/env.yaml" gh >/dev/null 2>"$T/err"
is $? 1 "a secret-looking variable in a manifest is refused"
grep -q "env.yaml:5: servers.gh.permissions.environment.GITHUB_TOKEN: .*use credentials" "$T/err"
ok $? "the error says to use credentials ($(head -c 300 "$T/err"))"
done_testing
