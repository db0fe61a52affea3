#!/bin/bash
# Workspaces of daemon sandboxes (paddock serve), as root and as nobody: the commit through the
# API judges symlinks where they lead and strips set-id bits of files planted in the upper
# layer; a sandbox's mountinfo and working directory name no path of the daemon's state.
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-serve.sh"

trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; sleep 0.2; undelegate_cgroup; rm -rf "$T"' EXIT

# A workspace owned by the daemon's identity.
mkws_for() {
	local d
	d=$(mktemp -d "$T/ws-XXXXXX")
	[ "$1" = user ] && chown "$UNPRIV_UID:$UNPRIV_UID" "$d"
	echo "$d"
}

sh_in() { # sh_in WHO ID SCRIPT: exec in the sandbox; $BODY has the answer
	api "$1" POST "/v1/sandboxes/$2/exec" "$(jq -cn --arg c "$3" '{argv:["sh","-c",$c]}')"
}

commit_tests() {
	local who=$1 ws id before up own
	ws=$(mkws_for "$who")
	echo base >"$ws/a.txt"
	ln -s /etc "$ws/hostlink"
	[ "$who" = user ] && chown -h "$UNPRIV_UID:$UNPRIV_UID" "$ws/a.txt" "$ws/hostlink"
	before=$(cd "$ws" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort)
	api "$who" POST /v1/sandboxes "$(jq -cn --arg p "$ws" '{workspace:{path:$p,mode:"overlay"}}')"
	id=$(jq_get "$BODY" id)
	is "$CODE" 201 "$who: a sandbox on an overlay workspace" || { sed 's/^/# /' <<<"$BODY"; return 1; }
	sh_in "$who" "$id" 'ln -s hostlink/passwd via && ln -s hostlink mid && ln -s mid/group viamid'
	is "$(jq_get "$BODY" exit_code)" 0 "$who: the sandbox makes links through the host's hostlink -> /etc"
	api "$who" POST "/v1/sandboxes/$id/commit" '{}'
	[ "${CODE:0:1}" = 4 ]; ok $? "$who: POST commit is refused ($CODE)"
	printf '%s' "$BODY" | grep -q "via.*leads to '/etc/passwd' through 'hostlink' -> '/etc'"
	ok $? "$who: the error names the link and where it leads" || sed 's/^/#   /' <<<"$BODY"
	is "$(cd "$ws" && find . -printf '%p %y %m %s %l\n' | LC_ALL=C sort)" "$before" "$who: the host directory is unchanged"
	# A set-id file and a set-gid directory planted in the upper layer, on the host side.
	sh_in "$who" "$id" 'rm via mid viamid; echo x > x'
	up=$(ls -d "$T/serve-$who"/state/ws/*/upper | head -n 1)
	own=$([ "$who" = root ] && echo 0:0 || echo $UNPRIV_UID:$UNPRIV_UID)
	cp /bin/sh "$up/suidsh" && mkdir "$up/sgiddir" && chown "$own" "$up/suidsh" "$up/sgiddir" &&
		chmod 4755 "$up/suidsh" && chmod 2775 "$up/sgiddir"
	ok $? "$who: a set-id file and a set-gid directory planted in the daemon's change set"
	api "$who" POST "/v1/sandboxes/$id/commit" '{}'
	is "$CODE" 200 "$who: POST commit" || sed 's/^/#   /' <<<"$BODY"
	is "$(stat -c %a "$ws/suidsh" "$ws/sgiddir" | tr '\n' ' ')" "755 775 " "$who: no set-id bit reached the host"
	is "$(cat "$ws/x")" x "$who: the rest was committed"
	api "$who" DELETE "/v1/sandboxes/$id"
}

mountinfo_tests() {
	local who=$1 ws id out
	api "$who" POST /v1/sandboxes '{}'
	id=$(jq_get "$BODY" id)
	is "$CODE" 201 "$who: a sandbox with a private workspace" || return 1
	sh_in "$who" "$id" 'pwd; cat /proc/self/mountinfo'
	out=$(jq_get "$BODY" stdout.text)
	is "$(echo "$out" | head -n 1)" /workspace "$who: its workspace is seen at /workspace"
	echo "$out" | grep -q ' /workspace .* - overlay .*lowerdir+\{0,1\}=/layers/0'
	ok $? "$who: an overlay with neutral layer names" || sed 's/^/#   /' <<<"$out"
	echo "$out" | grep -qF -e "$T/serve-$who" -e "$id" -e "/oldroot"
	is $? 1 "$who: mountinfo names neither the daemon's state directory nor the sandbox's id"
	api "$who" DELETE "/v1/sandboxes/$id"
	ws=$(mkws_for "$who")
	api "$who" POST /v1/sandboxes "$(jq -cn --arg p "$ws" '{workspace:{path:$p,mode:"overlay"}}')"
	id=$(jq_get "$BODY" id)
	sh_in "$who" "$id" 'echo x > x; cat /proc/self/mountinfo'
	out=$(jq_get "$BODY" stdout.text)
	echo "$out" | grep -qF -e "$T/serve-$who" -e "/oldroot"
	is $? 1 "$who: with a workspace of the client's: no path of the daemon's state either"
	is "$(echo "$out" | grep -cF "$ws")" 1 "$who: the client's workspace appears once, as its mount point"
	api "$who" DELETE "/v1/sandboxes/$id"
}

# The user's case through the daemon: the host file is edited after the sandbox wrote it;
# POST commit answers 409 with each path, the host is unchanged; force commits; `paddock commit`
# says the same, and a sandbox whose paths the host did not touch commits.
conflict_tests() {
	local who=$1 ws id own
	ws=$(mkws_for "$who")
	echo base >"$ws/a.txt"
	echo keep >"$ws/b.txt"
	[ "$who" = user ] && chown "$UNPRIV_UID:$UNPRIV_UID" "$ws/a.txt" "$ws/b.txt"
	api "$who" POST /v1/sandboxes "$(jq -cn --arg p "$ws" '{workspace:{path:$p,mode:"overlay"}}')"
	id=$(jq_get "$BODY" id)
	sh_in "$who" "$id" 'echo agent >> a.txt; echo agent >> b.txt'
	echo human >>"$ws/a.txt"
	api "$who" POST "/v1/sandboxes/$id/commit" '{}'
	is "$CODE" 409 "$who: POST commit over a host edit is 409" || sed 's/^/#   /' <<<"$BODY"
	is "$(jq -c '[.error.code, [.error.conflicts[].path]]' <<<"$BODY")" '["conflict",["a.txt"]]' \
		"$who: the 409 lists the edited path, and only it"
	is "$(cat "$ws/a.txt" "$ws/b.txt" | tr '\n' ' ')" "base human keep " "$who: the host is unchanged"
	as "$who" "$T/bin/paddock" commit --socket "$(sock_of "$who")" "$id" >"$T/out" 2>"$T/err"
	is $? 1 "$who: paddock commit is refused (exit 1)"
	grep -q "^paddock: commit: conflict: a.txt: modified on the host" "$T/err"
	ok $? "$who: paddock commit names the path and what changed" || sed 's/^/#   /' "$T/err"
	as "$who" "$T/bin/paddock" commit --socket "$(sock_of "$who")" --dry-run --force "$id" >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "0:2 change(s) would be committed" "$who: commit --dry-run --force says what it would do"
	is "$(cat "$ws/a.txt" "$ws/b.txt" | tr '\n' ' ')" "base human keep " "$who: the dry run changed nothing"
	as "$who" "$T/bin/paddock" commit --socket "$(sock_of "$who")" --force "$id" >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "0:committed 2 change(s)" "$who: paddock commit --force commits" || sed 's/^/#   /' "$T/err"
	is "$(cat "$ws/a.txt" "$ws/b.txt" | tr '\n' ' ')" "base agent keep agent " "$who: the host has what the sandbox wrote"
	sh_in "$who" "$id" 'echo again >> b.txt'
	as "$who" "$T/bin/paddock" commit --socket "$(sock_of "$who")" "$id" >"$T/out" 2>"$T/err"
	is $? 0 "$who: after a commit, a change the host did not touch commits" || sed 's/^/#   /' "$T/err"
	api "$who" DELETE "/v1/sandboxes/$id"
}

# The review loop a user runs with the CLI on a daemon sandbox: create on a directory of theirs,
# an exec that changes files, diff --patch (applies to a copy of the directory), snapshot,
# snapshot ls, a second snapshot of the same name (409, field name), commit --dry-run, commit.
# The sandbox object names its workspace and network mode; file routes take workspace-relative
# paths.
review_tests() {
	local who=$1 ws id copy
	p() { # p VERB ARGS...: the CLI on this daemon
		local verb=$1
		shift
		as "$who" "$T/bin/paddock" "$verb" --socket "$(sock_of "$who")" "$@"
	}
	ws=$(mkws_for "$who")
	printf 'one\ntwo\nthree\n' >"$ws/notes.txt"
	printf 'gone\n' >"$ws/old.txt"
	[ "$who" = user ] && chown "$UNPRIV_UID:$UNPRIV_UID" "$ws/notes.txt" "$ws/old.txt"
	copy=$(mktemp -d "$T/copy-XXXXXX") && cp -a "$ws/." "$copy/"
	id=$(p create -w "$ws" 2>"$T/err")
	is $? 0 "$who: paddock create -w DIR" || { sed 's/^/#   /' "$T/err"; return 1; }
	api "$who" GET "/v1/sandboxes/$id"
	is "$(jq -c '[.workspace.path, .workspace.host_path, .workspace.mode, .network.mode]' <<<"$BODY")" \
		"$(jq -cn --arg w "$ws" '[$w, $w, "overlay", "none"]')" \
		"$who: the sandbox object names its workspace (inside, on the host) and network mode" ||
		sed 's/^/#   /' <<<"$BODY"
	p exec "$id" -- sh -c 'sed -i s/two/TWO/ notes.txt && echo new >added.txt && rm old.txt' >/dev/null 2>"$T/err"
	is $? 0 "$who: an exec changes files" || sed 's/^/#   /' "$T/err"
	p diff "$id" --patch >"$T/out" 2>"$T/err"
	is $? 0 "$who: paddock diff --patch" || sed 's/^/#   /' "$T/err"
	is "$(grep -c '^[AMD] ' "$T/out")" 3 "$who: diff lists the three changes"
	grep -q '^+TWO$' "$T/out" && grep -q '^-two$' "$T/out" && grep -q '^+++ b/added.txt$' "$T/out"
	ok $? "$who: the patch shows the changed lines and the new file" || sed 's/^/#   /' "$T/out"
	grep -v '^[AMD] ' "$T/out" | (cd "$copy" && patch -s -p1 >/dev/null 2>&1)
	ok $? "$who: the patch applies with patch -p1 to a copy of the directory"
	is "$(cat "$copy/notes.txt" "$copy/added.txt" | tr '\n' ' '):$([ -e "$copy/old.txt" ]; echo $?)" \
		"one TWO three new :1" "$who: the patched copy has what the sandbox has"
	api "$who" GET "/v1/sandboxes/$id/diff?patch=1"
	is "$(jq -r '.patch_truncated, (.patch | test("\\+TWO"))' <<<"$BODY" | tr '\n' ' ')" "false true " \
		"$who: GET diff?patch=1 carries the patch"
	api "$who" GET "/v1/sandboxes/$id/diff?patch=yes"
	is "$CODE:$(jq_get "$BODY" error.field)" 400:patch "$who: a bad patch= is 400, field patch"
	p snapshot "$id" reviewed >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" 0:reviewed "$who: paddock snapshot ID reviewed" || sed 's/^/#   /' "$T/err"
	p snapshot ls "$id" >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "0:1 reviewed" "$who: paddock snapshot ls lists it" || sed 's/^/#   /' "$T/err"
	api "$who" GET "/v1/sandboxes/$id/snapshots"
	is "$CODE:$(jq -c .snapshots <<<"$BODY")" '200:[{"name":"reviewed","number":1}]' "$who: GET snapshots"
	api "$who" POST "/v1/sandboxes/$id/snapshot" '{"name":"reviewed"}'
	is "$CODE:$(jq -c '[.error.code, .error.field]' <<<"$BODY")" '409:["conflict","name"]' \
		"$who: a second snapshot named reviewed is 409, field name"
	p snapshot "$id" reviewed >"$T/out" 2>"$T/err"
	is $? 125 "$who: paddock snapshot with a name kept fails"
	grep -q "already has this name" "$T/err"
	ok $? "$who: and says the name is taken" || sed 's/^/#   /' "$T/err"
	p snapshot ls "$id" >"$T/out" 2>"$T/err"
	is "$(cat "$T/out")" "1 reviewed" "$who: still one snapshot"
	api "$who" GET "/v1/sandboxes/$id/stat?path=notes.txt"
	is "$CODE:$(jq_get "$BODY" type)" 200:file "$who: stat takes a path relative to the workspace"
	api "$who" GET "/v1/sandboxes/$id/files?path=added.txt"
	is "$CODE:$BODY" "200:new" "$who: GET files takes a path relative to the workspace"
	api "$who" GET "/v1/sandboxes/$id/stat?path=$ws/notes.txt"
	is "$CODE" 200 "$who: an absolute path stays as it is"
	p commit --dry-run "$id" >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "0:3 change(s) would be committed" "$who: paddock commit --dry-run" ||
		sed 's/^/#   /' "$T/err"
	is "$(cat "$ws/notes.txt" | tr '\n' ' ')" "one two three " "$who: the dry run changed nothing"
	p commit "$id" >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "0:committed 3 change(s)" "$who: paddock commit" || sed 's/^/#   /' "$T/err"
	diff -r "$copy" "$ws" >/dev/null
	ok $? "$who: the directory is what the reviewed patch made"
	p kill "$id" >/dev/null 2>&1
	api "$who" POST /v1/sandboxes '{}'
	id=$(jq_get "$BODY" id)
	is "$(jq -c '[.workspace.path, .workspace.host_path]' <<<"$BODY")" '["/workspace",null]' \
		"$who: a private workspace: seen at /workspace, no host path"
	api "$who" DELETE "/v1/sandboxes/$id"
}

if ! have_supervisor; then
	echo "1..0 # SKIP paddock supervise is not built"
	exit 0
fi
for who in root user; do
	serve_start "$who"
	ok $? "$who: the daemon starts"
	commit_tests "$who"
	mountinfo_tests "$who"
	conflict_tests "$who"
	review_tests "$who"
	serve_stop "$who"
done
done_testing
