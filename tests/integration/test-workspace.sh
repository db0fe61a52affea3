#!/usr/bin/env bash
# Workspaces: overlay change sets, diff, commit (hostile content included),
# discard, snapshots and rollback, disk limit, tmpfs mode. Each case runs as
# root and as nobody (rootless).
set -u
. "$TESTS_DIR/integration/lib-run.sh"

# A listing of a tree that changes when any name, type, mode, size or byte does.
LISTING='find . -path ./.paddock-listing -prune -o -printf "%p %y %m %s %l\n" | LC_ALL=C sort; find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum'

# A workspace owned by the identity that runs the sandbox (an overlay copies owners up).
mkws_for() {
	local d
	d=$(mktemp -d "$T/ws-XXXXXX")
	[ "$1" = user ] && chown "$UNPRIV_UID:$UNPRIV_UID" "$d"
	echo "$d"
}
# Run as the identity, in a directory, a shell snippet (for fixtures and listings).
as() {
	local who=$1 dir=$2
	shift 2
	if [ "$who" = root ]; then (cd "$dir" && sh -c "$@"); else
		(cd "$dir" && setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups sh -c "$@"); fi
}
# The id of the only change set of this identity.
last_set() {
	ls "$T/state-$1/ws" 2>/dev/null | grep -E '^[0-9a-f-]{36}$' | tail -n 1
}
nsets() {
	ls "$T/state-$1/ws" 2>/dev/null | grep -cE '^[0-9a-f-]{36}$'
}

fixture() { # a small project: files, a tree, an executable, a symlink
	as "$1" "$2" 'echo base > a.txt; mkdir -p src/lib tree/x/y; echo "int x;" > src/lib/x.c;
		printf "1\n2\n3\n" > src/main.c; echo z > tree/x/y/z; echo t > tree/t;
		printf "#!/bin/sh\n" > run.sh; chmod 644 run.sh; ln -s a.txt link; echo m > moved'
}

check_overlay_diff_commit() {
	local who=$1 ws id before after inside out
	ws=$(mkws_for "$who")
	fixture "$who" "$ws"
	before=$(as "$who" "$ws" "$LISTING")
	inside=$(prun "$who" -w "$ws" -- sh -c 'echo more >> a.txt; echo new > new.txt;
		rm -r tree; chmod 755 run.sh; mv moved moved2; rm src/main.c; mkdir src/main.c;
		echo in > src/main.c/f; rm link; echo notalink > link; mkdir -p deep/a/b;
		echo d > deep/a/b/c; '"$LISTING" 2>"$T/err")
	is $? 0 "$who: overlay run exits 0"
	after=$(as "$who" "$ws" "$LISTING")
	is "$after" "$before" "$who: overlay: the host directory is untouched"
	grep -q "change set" "$T/err"; ok $? "$who: run names the change set it kept"
	id=$(last_set "$who")
	[ -n "$id" ]; ok $? "$who: a change set exists"
	out=$(pws "$who" diff "$id")
	is "$(echo "$out" | grep -c .)" 16 "$who: diff lists 16 lines (a rename is one)"
	echo "$out" | grep -qx 'modified  a.txt  5 B -> 10 B'; ok $? "$who: diff: modified file with sizes"
	echo "$out" | grep -qx 'added     new.txt  4 B'; ok $? "$who: diff: added file"
	echo "$out" | grep -qx 'mode      run.sh  0644 -> 0755'; ok $? "$who: diff: mode change"
	echo "$out" | grep -qx 'renamed   moved -> moved2'; ok $? "$who: diff: rename"
	echo "$out" | grep -qx 'replaced  src/main.c  file -> dir'; ok $? "$who: diff: file replaced by a directory"
	echo "$out" | grep -qx 'replaced  link  symlink -> file'; ok $? "$who: diff: symlink replaced by a file"
	for p in tree tree/t tree/x tree/x/y tree/x/y/z; do
		echo "$out" | grep -qx "deleted   $p" || { ok 1 "$who: diff: whole tree deleted ($p missing)"; continue 2; }
	done
	ok 0 "$who: diff: a deleted tree lists every entry"
	pws "$who" diff --json "$id" | python3 -c '
import json, sys
d = json.load(sys.stdin)
k = {c["path"]: c["kind"] for c in d["changes"]}
assert k["a.txt"] == "modified" and k["tree/x/y/z"] == "deleted" and k["deep/a/b/c"] == "added", k
assert d["summary"]["added"] >= 5 and d["summary"]["deleted"] == 6, d["summary"]
r = [c for c in d["changes"] if c.get("renamed_from")]
assert len(r) == 1 and r[0]["path"] == "moved2", r'
	ok $? "$who: diff --json has the kinds, the summary and the rename"
	out=$(pws "$who" diff --patch "$id")
	echo "$out" | grep -q '^+more$'; ok $? "$who: diff --patch shows the added line"
	echo "$out" | grep -q '^--- a/src/main.c$'; ok $? "$who: diff --patch shows the replaced file's removal"
	pws "$who" commit --events "$T/home/ev-$who" "$id" >"$T/out" 2>"$T/err"
	is $? 0 "$who: commit exits 0" || sed 's/^/#   /' "$T/err"
	after=$(as "$who" "$ws" "$LISTING")
	is "$after" "$inside" "$who: after commit the directory is exactly what the sandbox saw"
	is "$(nsets "$who")" 0 "$who: commit removes the change set"
	is "$(grep -c '"kind":"fs.change"' "$T/home/ev-$who")" "$(sed -n 's/^committed \([0-9]*\).*/\1/p' "$T/out")" \
		"$who: one fs.change event per committed change"
	grep -q '"action":"committed"' "$T/home/ev-$who"; ok $? "$who: events say committed"
}

check_discard() {
	local who=$1 ws id before
	ws=$(mkws_for "$who")
	fixture "$who" "$ws"
	before=$(as "$who" "$ws" "$LISTING")
	prun "$who" -w "$ws" --discard -- sh -c 'echo x > x; rm a.txt' 2>"$T/err"
	is $? 0 "$who: --discard run exits 0"
	is "$(nsets "$who")" 0 "$who: --discard keeps no change set"
	grep -q "2 change(s) discarded" "$T/err"; ok $? "$who: --discard says what it dropped"
	prun "$who" -w "$ws" -- sh -c 'echo x > x; rm a.txt' 2>/dev/null
	id=$(last_set "$who")
	pws "$who" discard --events "$T/home/dev-$who" "$id" >/dev/null
	is $? 0 "$who: ws discard exits 0"
	is "$(nsets "$who")" 0 "$who: ws discard removes the set"
	is "$(as "$who" "$ws" "$LISTING")" "$before" "$who: discard leaves the directory as it was"
	is "$(grep -c '"action":"discarded"' "$T/home/dev-$who")" 2 "$who: one fs.change event per discarded change"
	prun "$who" -w "$ws" -- true 2>"$T/err"
	is "$(nsets "$who")" 0 "$who: a run that changes nothing leaves no change set"
	# A workspace whose name is not UTF-8 (JSON cannot hold it as a string).
	ws="$T/bad$(printf '\377')-$who"
	mkdir "$ws" && [ "$who" = user ] && chown "$UNPRIV_UID:$UNPRIV_UID" "$ws"
	prun "$who" -w "$ws" --events "$T/home/bev-$who" -- sh -c 'echo x > x' 2>/dev/null
	is $? 0 "$who: a workspace with a non-UTF-8 name runs"
	id=$(last_set "$who")
	grep -q '"workspace_hex":"' "$T/home/bev-$who"; ok $? "$who: its name is in the events as hex"
	pws "$who" commit "$id" >/dev/null 2>&1 && [ "$(cat "$ws/x")" = x ]
	ok $? "$who: and its change set commits"
	pws "$who" diff 0000dead >/dev/null 2>"$T/err"; is $? 1 "$who: unknown change set: exit 1"
	grep -q "no change set '0000dead'" "$T/err"; ok $? "$who: the unknown id is named"
	pws "$who" diff >/dev/null 2>&1; is $? 122 "$who: ws diff without an id: exit 122 (usage)"
}

check_snapshots() {
	local who=$1 ws id h0 h1 h2
	ws=$(mkws_for "$who")
	fixture "$who" "$ws"
	h0=$(as "$who" "$ws" "$LISTING")
	prun "$who" -w "$ws" -- sh -c 'echo one > one; echo mod >> a.txt; rm -r tree; chmod 700 run.sh' 2>/dev/null
	id=$(last_set "$who")
	h1=$(prun "$who" --change-set "$id" -- sh -c "$LISTING" 2>/dev/null)
	is "$(pws "$who" snapshot "$id")" 1 "$who: snapshot 1"
	prun "$who" --change-set "$id" -- sh -c 'echo two > two; rm one; mkdir tree; echo n > tree/n;
		chmod 644 run.sh; echo again >> a.txt; rm -r src' 2>/dev/null
	h2=$(prun "$who" --change-set "$id" -- sh -c "$LISTING" 2>/dev/null)
	[ "$h2" != "$h1" ]; ok $? "$who: the second run changed the view"
	pws "$who" diff --from 1 "$id" | grep -qx 'deleted   one'; ok $? "$who: diff between snapshot 1 and now"
	pws "$who" diff --from 0 --to 1 "$id" | grep -qx 'added     one  4 B'; ok $? "$who: diff of snapshot 1 against the directory"
	pws "$who" snapshot "$id" >/dev/null
	pws "$who" rollback "$id" 1; is $? 0 "$who: rollback to 1 exits 0"
	is "$(prun "$who" --change-set "$id" -- sh -c "$LISTING" 2>/dev/null)" "$h1" "$who: rollback to 1 restores names, modes, sizes and content exactly"
	pws "$who" rollback "$id" 0
	is "$(prun "$who" --change-set "$id" -- sh -c "$LISTING" 2>/dev/null)" "$h0" "$who: rollback to 0 restores the directory's own view"
	is "$(as "$who" "$ws" "$LISTING")" "$h0" "$who: the host directory never changed"
	pws "$who" rollback "$id" 7 2>"$T/err"; is $? 1 "$who: rollback to a missing snapshot fails"
	# One sandbox at a time per change set.
	prun "$who" --change-set "$id" -- sleep 2 2>/dev/null &
	sleep 0.5
	prun "$who" --change-set "$id" -- true 2>"$T/err"; is $? 125 "$who: a change set in use is refused"
	grep -q "is in use" "$T/err"; ok $? "$who: and the error says so"
	wait
	pws "$who" discard "$id" >/dev/null
}

check_hostile() {
	local who=$1 ws id outside before
	outside=$(mktemp -d "$T/outside-XXXXXX")
	echo secret > "$outside/secret"
	[ "$who" = user ] && chown -R "$UNPRIV_UID:$UNPRIV_UID" "$outside"
	ws=$(mkws_for "$who")
	fixture "$who" "$ws"
	# A host file of the workspace that is a hard link to a file outside it.
	as "$who" "$ws" "ln $outside/secret hl"
	before=$(as "$who" "$ws" "$LISTING")
	prun "$who" -w "$ws" -- sh -c "ln -s $outside/secret abs; ln -s ../../../../etc/passwd rel;
		rm -r tree; ln -s $outside tree" 2>/dev/null
	id=$(last_set "$who")
	pws "$who" commit "$id" >/dev/null 2>"$T/err"
	is $? 1 "$who: commit with symlinks leading outside is refused"
	for p in abs rel tree; do grep -q "refused: $p:" "$T/err" || { ok 1 "$who: refusal names $p"; continue 2; }; done
	ok 0 "$who: the refusal names each outside symlink"
	is "$(as "$who" "$ws" "$LISTING")" "$before" "$who: nothing was applied"
	pws "$who" commit --allow-outside-symlinks "$id" >/dev/null 2>"$T/err"
	is $? 0 "$who: --allow-outside-symlinks commits them"
	is "$(readlink "$ws/abs")" "$outside/secret" "$who: the symlink is created as a symlink"
	is "$(cat "$outside/secret")" secret "$who: its target is untouched"
	[ -L "$ws/tree" ] && [ -e "$outside/secret" ] && [ "$(ls "$outside")" = secret ]
	ok $? "$who: a directory replaced by a symlink: nothing written through it"

	# Writing through a hard link, a FIFO, a setuid file, odd names, a sparse file. No process
	# in the sandbox can set the setuid bit (docs/seccomp.md), so it is set on the change set
	# from the host: commit must strip it whatever put it there.
	prun "$who" -w "$ws" -- sh -c 'echo changed > hl; mkfifo fifo; echo s > suid; chmod 755 suid;
		printf x > "$(printf "new\nline")"; printf y > "$(printf "bad\377utf8")";
		truncate -s 2G sparse' 2>/dev/null
	id=$(last_set "$who")
	chmod 4755 "$T/state-$who/ws/$id/upper/suid"
	pws "$who" commit "$id" >/dev/null 2>"$T/err"
	is $? 1 "$who: a change set with a FIFO is refused"
	grep -q "refused: fifo:" "$T/err"; ok $? "$who: the FIFO is named"
	[ ! -e "$ws/suid" ] && [ ! -e "$ws/sparse" ]; ok $? "$who: nothing of it was applied"
	prun "$who" --change-set "$id" -- rm fifo 2>/dev/null
	pws "$who" commit "$id" >"$T/out" 2>"$T/err"
	is $? 0 "$who: without the FIFO the commit goes through"
	is "$(cat "$outside/secret")" secret "$who: a hard link to an outside file: the outside file is untouched"
	is "$(cat "$ws/hl")" changed "$who: the workspace name has the new content"
	is "$(stat -c %a "$ws/suid")" 755 "$who: setuid bit stripped"
	grep -q "stripped from 1" "$T/out"; ok $? "$who: the stripping is reported"
	is "$(cat "$ws/$(printf 'new\nline')")" x "$who: a name with a newline is committed byte-exact"
	is "$(cat "$ws/$(printf 'bad\377utf8')")" y "$who: a name with invalid UTF-8 is committed byte-exact"
	is "$(stat -c %s "$ws/sparse")" 2147483648 "$who: the 2 GiB sparse file has its size"
	[ "$(stat -c %b "$ws/sparse")" -lt 64 ]; ok $? "$who: and stays sparse"
}

check_big_tree() {
	local who=$1 ws id n t0 t1 t2
	ws=$(mkws_for "$who")
	prun "$who" -w "$ws" -- sh -c 'for a in 0 1 2 3 4 5 6 7 8 9; do for b in 0 1 2 3 4 5 6 7 8 9; do
		mkdir -p d$a/e$b/f/g/h; (cd d$a/e$b/f/g/h && seq -f "%g" 1 1000 | xargs touch); done; done' 2>/dev/null
	id=$(last_set "$who")
	t0=$(date +%s%N)
	n=$(pws "$who" diff --json "$id" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["changes"]))')
	t1=$(date +%s%N)
	is "$n" 100410 "$who: diff of a 100,000-file tree lists every entry (and its 410 directories)"
	pws "$who" commit "$id" >/dev/null 2>"$T/err"
	is $? 0 "$who: commit of 100,000 files exits 0"
	t2=$(date +%s%N)
	is "$(find "$ws" -type f | wc -l)" 100000 "$who: all 100,000 files are in the directory"
	echo "# $who: 100k files: diff --json $(( (t1 - t0) / 1000000 )) ms, commit $(( (t2 - t1) / 1000000 )) ms"
}

check_disk_and_modes() {
	local who=$1 ws id out
	ws=$(mkws_for "$who")
	out=$(prun "$who" -w "$ws" --disk 2M -- sh -c 'dd if=/dev/zero of=big bs=1M count=8 2>/dev/null; echo dd=$?; stat -c %s big' 2>/dev/null)
	is "$out" "$(printf 'dd=1\n2097152')" "$who: --disk 2M: writing 8 MiB stops at 2 MiB with an error"
	id=$(last_set "$who")
	[ "$(du -sk "$T/state-$who/ws/$id" | cut -f1)" -le 2200 ]; ok $? "$who: the change set holds no more than the limit"
	is "$(pws "$who" diff "$id")" 'added     big  2.0 MiB' "$who: the disk-limited change set was kept"
	pws "$who" discard "$id" >/dev/null
	out=$(prun "$who" -w "$ws" --workspace-mode tmpfs -- sh -c 'ls -A | wc -l; echo x > f && echo wrote' 2>/dev/null)
	is "$out" "$(printf '0\nwrote')" "$who: tmpfs mode: an empty, writable workspace"
	[ ! -e "$ws/f" ] && [ "$(nsets "$who")" = 0 ]; ok $? "$who: tmpfs mode keeps nothing"
	# The state directory may not live inside the workspace.
	PRUN_ENV=(PADDOCK_STATE_DIR="$ws/state")
	prun "$who" -w "$ws" -- true 2>"$T/err"
	is $? 125 "$who: a state directory inside the workspace is refused"
	grep -q "PADDOCK_STATE_DIR" "$T/err"; ok $? "$who: the error names the fix"
	PRUN_ENV=()
	rm -rf "$ws/state"
}

# What the sandbox must not reach through its overlay: the change set's own layers, and
# overlayfs' private marks, which would forge whiteouts or opaque directories in the layer
# that diff and commit read. (overlayfs refuses them or, since Linux 6.7, stores them
# escaped as user.overlay.overlay.*, which mean nothing to a later mount or to diff.)
check_boundaries() {
	local who=$1 ws out id
	ws=$(mkws_for "$who")
	as "$who" "$ws" 'mkdir d; echo x > d/f; echo y > g'
	out=$(prun "$who" -w "$ws" -- python3 -c '
import os, sys
print("visible" if os.path.exists(sys.argv[1]) else "hidden")
for path, name in (("d", "user.overlay.opaque"), ("d", "trusted.overlay.opaque"),
                   ("g", "user.overlay.whiteout"), ("d", "user.overlay.redirect")):
    try:
        os.setxattr(path, name, b"y")
    except OSError:
        pass
try:
    os.mknod("wh", 0o20000 | 0o600, 0)
    print("made a whiteout")
except OSError as e:
    print(e.strerror)
open("n", "w").write("n\n")
' "$T/state-$who" 2>/dev/null)
	is "$out" "$(printf 'hidden\nOperation not permitted')" "$who: the layers are not visible inside; mknod of a whiteout fails"
	id=$(last_set "$who")
	out=$(prun "$who" --change-set "$id" -- sh -c 'ls d; cat g' 2>/dev/null)
	is "$out" "$(printf 'f\ny')" "$who: overlay marks set from inside forge nothing: d is not opaque, g is not a whiteout"
	is "$(pws "$who" diff "$id")" "added     n  2 B" "$who: and diff sees only the real change"
	pws "$who" discard "$id" >/dev/null
}

# Finding: a symlink judged by its text. "via -> hostlink/passwd" is inside by its text, but
# the directory holds "hostlink -> /etc": the commit must refuse it (and chains through it,
# and links made by the same change set), name where each leads, and change nothing.
check_links_after_commit() {
	local who=$1 ws id before
	ws=$(mkws_for "$who")
	fixture "$who" "$ws"
	as "$who" "$ws" 'ln -s /etc hostlink; ln -s hostlink hostchain'
	before=$(as "$who" "$ws" "$LISTING")
	prun "$who" -w "$ws" -- sh -c 'ln -s hostlink/passwd via; ln -s hostchain/shadow chain;
		ln -s hostlink mid; ln -s mid/group viamid; ln -s src/lib/../../hostlink/hosts dotdot;
		ln -s src/../a.txt fine' 2>/dev/null
	id=$(last_set "$who")
	pws "$who" commit "$id" >/dev/null 2>"$T/err"
	is $? 1 "$who: commit of a link through a host symlink to /etc is refused (exit 1)"
	grep -q "refused: via: .*leads to '/etc/passwd' through 'hostlink' -> '/etc'" "$T/err"
	ok $? "$who: the refusal names the link and where it leads" || sed 's/^/#   /' "$T/err"
	for p in chain mid viamid dotdot; do
		grep -q "refused: $p: a symlink leading outside" "$T/err" || { ok 1 "$who: refusal names $p"; continue 2; }
	done
	ok 0 "$who: chains, links of the same change set and '..' through them are refused too"
	grep -q "refused: fine:" "$T/err"; is $? 1 "$who: a link that stays inside is not refused"
	is "$(as "$who" "$ws" "$LISTING")" "$before" "$who: the host directory is unchanged"
	# The same link after the change set makes hostlink a directory: inside, committed.
	prun "$who" --change-set "$id" -- sh -c 'rm via chain mid viamid dotdot hostlink;
		mkdir hostlink; echo p > hostlink/passwd; ln -s hostlink/passwd via' 2>/dev/null
	pws "$who" commit "$id" >/dev/null 2>"$T/err"
	is $? 0 "$who: judged in the directory as it will be: a link into what becomes a directory commits"
	is "$(cat "$ws/via")" p "$who: ... and leads there"
}

# Finding: set-id files committed to the host. A set-id file, a set-gid directory and a
# device node planted in the change set's upper layer directly (as root, on the host side).
check_setid_planted() {
	local who=$1 ws id up own
	ws=$(mkws_for "$who")
	prun "$who" -w "$ws" -- sh -c 'echo x > x' 2>/dev/null
	id=$(last_set "$who")
	up="$T/state-$who/ws/$id/upper"
	own=$([ "$who" = root ] && echo 0:0 || echo $UNPRIV_UID:$UNPRIV_UID)
	# (chown first: a change of owner clears the set-id bits.)
	cp /bin/sh "$up/suidsh" && cp /bin/sh "$up/sgidsh" && mkdir "$up/sgiddir" &&
		chown "$own" "$up/suidsh" "$up/sgidsh" "$up/sgiddir" && chmod 4755 "$up/suidsh" &&
		chmod 2755 "$up/sgidsh" && chmod 2775 "$up/sgiddir" && mknod "$up/null" c 1 3
	ok $? "$who: set-id files, a set-gid directory and a device node planted in the upper layer"
	pws "$who" commit "$id" >"$T/out" 2>"$T/err"
	is $? 1 "$who: a planted device node: the commit is refused"
	grep -q "refused: null: a device node" "$T/err"; ok $? "$who: ... naming it"
	[ ! -e "$ws/suidsh" ] && [ ! -e "$ws/x" ]; ok $? "$who: ... and nothing was applied"
	rm "$up/null"
	pws "$who" commit "$id" >"$T/out" 2>"$T/err"
	is $? 0 "$who: without it the commit goes through"
	is "$(stat -c %a "$ws/suidsh" "$ws/sgidsh" "$ws/sgiddir" | tr '\n' ' ')" "755 755 775 " \
		"$who: no set-id bit reached the host"
	grep -q "stripped from 3" "$T/out"; ok $? "$who: the stripping is reported"
	is "$(find "$ws" -perm /6000 | wc -l)" 0 "$who: no entry of the workspace is set-id"
}

# Finding: host paths in /proc/self/mountinfo. The overlay's layers are bound at neutral names
# before it is made: its options name neither the state directory nor the change set. The
# workspace itself is seen at its own path by decision (docs/workspace.md).
check_mountinfo() {
	local who=$1 ws out id disk
	ws=$(mkws_for "$who")
	for disk in "" "--disk 4M"; do
		out=$(prun "$who" -w "$ws" $disk -- sh -c 'echo x >> x; cat /proc/self/mountinfo' 2>/dev/null)
		id=$(last_set "$who")
		[ -n "$id" ] && echo "$out" | grep -q ' - overlay '; ok $? "$who${disk:+ $disk}: a change set and its overlay"
		echo "$out" | grep -qF -e "$T/state-$who" -e "$id" -e "${id:0:13}"
		is $? 1 "$who${disk:+ $disk}: mountinfo names neither the state directory nor the change set"
		echo "$out" | grep ' - overlay ' | grep -qF -e "/oldroot" -e "lowerdir+=$ws" -e "lowerdir=$ws"
		is $? 1 "$who${disk:+ $disk}: the overlay's layers have neutral names"
		is "$(echo "$out" | grep -cF "$ws")" 1 "$who${disk:+ $disk}: the workspace's path appears once: its mount point"
		pws "$who" discard "$id" >/dev/null
	done
}

# The user's case: the host file is edited (and others deleted, created) after the run, before
# the commit. The commit must not overwrite a human's edit silently: refused with each path,
# the host unchanged; --force commits; a change set nobody touched meanwhile still commits.
check_conflicts() {
	local who=$1 ws id before out
	ws=$(mkws_for "$who")
	as "$who" "$ws" 'echo base > a.txt; echo base > gone.txt; echo keep > b.txt; echo c > c.txt; mkdir d; echo e > d/e'
	prun "$who" -w "$ws" -- sh -c 'echo agent >> a.txt; echo agent >> gone.txt; echo n > new;
		rm b.txt; chmod 600 c.txt; rm -r d' 2>/dev/null
	id=$(last_set "$who")
	[ -n "$id" ]; ok $? "$who: conflicts: the run kept a change set"
	as "$who" "$ws" 'echo human >> a.txt; rm gone.txt; echo human > new; echo f > d/f'
	before=$(as "$who" "$ws" "$LISTING")
	pws "$who" commit "$id" >"$T/out" 2>"$T/err"
	is $? 1 "$who: commit over a host edit made after the run is refused (exit 1)"
	grep -q "^paddock: ws commit: conflict: a.txt: modified on the host since the run began" "$T/err"
	ok $? "$who: the edited file is listed as modified on the host" || sed 's/^/#   /' "$T/err"
	grep -q "conflict: gone.txt: deleted on the host" "$T/err"; ok $? "$who: a file the host deleted is listed"
	grep -q "conflict: new: appeared on the host" "$T/err"; ok $? "$who: a file that appeared on the host is listed"
	grep -q "conflict: d: entries added or removed on the host" "$T/err"
	ok $? "$who: a directory the change set deletes, with a new host file in it, is listed"
	grep -qE "conflict: (b|c)\.txt" "$T/err"; is $? 1 "$who: paths the host did not touch are no conflict"
	grep -q -- "--force" "$T/err"; ok $? "$who: the refusal says how to overwrite (--force)"
	is "$(as "$who" "$ws" "$LISTING")" "$before" "$who: the refused commit left the host directory unchanged"
	[ -d "$T/state-$who/ws/$id" ]; ok $? "$who: and kept the change set"
	pws "$who" commit --json "$id" 2>/dev/null | python3 -c '
import json, sys
c = {x["path"]: x["reason"] for x in json.load(sys.stdin)["conflicts"]}
assert sorted(c) == ["a.txt", "d", "gone.txt", "new"], c'
	ok $? "$who: commit --json lists the conflicts"
	pws "$who" commit --dry-run "$id" >/dev/null 2>&1; is $? 1 "$who: a dry run reports the conflicts too"
	pws "$who" commit --force "$id" >"$T/out" 2>"$T/err"
	is $? 0 "$who: commit --force overwrites them" || sed 's/^/#   /' "$T/err"
	is "$(as "$who" "$ws" 'cat a.txt gone.txt new; [ -e d ] || [ -e b.txt ]; echo $?')" "$(printf 'base\nagent\nbase\nagent\nn\n1')" \
		"$who: after --force the host has what the sandbox wrote"
	# Untouched meanwhile: the same kind of change set commits as before.
	prun "$who" -w "$ws" -- sh -c 'echo again >> a.txt; rm new' 2>/dev/null
	id=$(last_set "$who")
	pws "$who" commit "$id" >/dev/null 2>"$T/err"
	is $? 0 "$who: a change set whose paths the host kept as they were commits" || sed 's/^/#   /' "$T/err"
	# ws commit --keep makes the directory the new base: a second commit is no conflict.
	prun "$who" -w "$ws" -- sh -c 'echo more >> a.txt' 2>/dev/null
	id=$(last_set "$who")
	pws "$who" commit --keep "$id" >/dev/null 2>&1 && pws "$who" commit "$id" >/dev/null 2>"$T/err"
	is $? 0 "$who: a kept change set commits again over its own first commit" || sed 's/^/#   /' "$T/err"
}

# The user's case: `paddock run` from $HOME (a fake one holding dotfiles) is refused with a
# message that says how to choose a directory; --allow-home is the explicit override.
check_home() {
	local who=$1 home PRUN
	home=$(mkws_for "$who")
	as "$who" "$home" 'echo "//registry/:_authToken=secret" > .npmrc; mkdir proj; echo x > proj/f'
	PRUN_ENV=(HOME="$home")
	prun_cmd "$who"
	(cd "$home" && "${PRUN[@]}" run -- cat .npmrc) >"$T/out" 2>"$T/err"
	is $? 122 "$who: run from \$HOME is refused (exit 122)"
	is "$(cat "$T/out")" "" "$who: the command did not run (the dotfile was not read)"
	grep -q "holds your home directory" "$T/err"; ok $? "$who: the refusal says the workspace is the home" || sed 's/^/#   /' "$T/err"
	grep -q -- "--workspace DIR" "$T/err" && grep -q -- "--allow-home" "$T/err"
	ok $? "$who: it says how to choose a directory, and the override"
	(cd "$T/home" && "${PRUN[@]}" run -w "$home" -- true) 2>/dev/null
	is $? 122 "$who: --workspace \$HOME is refused too"
	(cd "$home/proj" && "${PRUN[@]}" run --discard -- cat f) >"$T/out" 2>/dev/null
	is "$?:$(cat "$T/out")" "0:x" "$who: from a project inside the home it runs"
	# The home under another name (a bind mount of it): refused by identity, not by name.
	mkdir "$T/home-alias-$who" && mount --bind "$home" "$T/home-alias-$who"
	(cd "$T/home-alias-$who" && "${PRUN[@]}" run -- cat .npmrc) >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "122:" "$who: run from a bind mount of \$HOME is refused (exit 122), nothing read" ||
		sed 's/^/#   /' "$T/err"
	grep -q "would be '$T/home-alias-$who', which holds your home directory" "$T/err"
	ok $? "$who: the refusal names the directory as given" || sed 's/^/#   /' "$T/err"
	(cd "$T/home-alias-$who/proj" && "${PRUN[@]}" run --discard -- cat f) >"$T/out" 2>/dev/null
	is "$?:$(cat "$T/out")" "0:x" "$who: from a project inside that alias it runs"
	umount "$T/home-alias-$who"
	(cd "$home" && "${PRUN[@]}" run --allow-home --discard -- cat .npmrc) >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "0://registry/:_authToken=secret" "$who: --allow-home runs there anyway" || sed 's/^/#   /' "$T/err"
	PRUN_ENV=()
}

# A run that changed nothing leaves its set's directory as STATE/ws/.spare (docs/workspace.md),
# which the next set takes: never listed, never carrying anything into the set that takes it,
# its layer given the new workspace's mode.
check_spare() {
	local who=$1 ws ws2 n0 id st
	st="$T/state-$who/ws"
	# The first workspace's path is the longer: its meta.json, left in the spare, is longer
	# than the one the next set writes over it.
	ws=$(mkws_for "$who")/a-workspace-with-a-much-longer-path-than-the-next
	mkdir "$ws" && chown --reference="$(dirname "$ws")" "$ws"
	ws2=$(mkws_for "$who")
	chmod 0750 "$ws2"
	n0=$(nsets "$who")
	prun "$who" -w "$ws" -- true
	is "$?:$(nsets "$who"):$(ls -A "$st" | grep -c '^\.spare$')" "0:$n0:1" \
		"$who: spare: a run that changed nothing keeps no set, and leaves its directory as .spare"
	pws "$who" ls | grep -q spare
	is $? 1 "$who: spare: ws ls does not list it"
	prun "$who" -w "$ws2" -- sh -c 'echo x > f'
	is "$?:$(nsets "$who"):$(ls -A "$st" | grep -c '^\.spare$')" "0:$((n0 + 1)):0" \
		"$who: spare: the next run's set took it"
	id=$(ls -t "$st" | grep -E '^[0-9a-f-]{36}$' | head -n 1)
	is "$(pws "$who" diff "$id")" "added     f  2 B" "$who: spare: the set that took it holds only its own run's change"
	is "$(stat -c %a "$st/$id/upper")" 750 "$who: spare: its layer has the new workspace's mode"
	is "$(python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["id"], m["workspace"])' \
		"$st/$id/meta.json" 2>&1)" "$id $ws2" \
		"$who: spare: its meta.json is its own (id, workspace), written whole over the last run's longer one"
	is "$(ls -A "$st" | grep -c '^\.spare-')" 0 "$who: spare: no claimed spare is left under its private name"
	prun "$who" -w "$ws2" -- true
	is "$?:$(nsets "$who")" "0:$((n0 + 1))" "$who: spare: a later run over the same workspace still works"
	pws "$who" discard "$id" >/dev/null
}

# STATE/ws carries ext4's top-directory flag (chattr +T), so each set it holds is made in a
# block group away from the state directory's: the overlay's inode churn stays out of the
# groups others allocate in (docs/internals/performance.md, eleventh round). A state
# directory without it gets it at the next run, and its spare, made beside it, is made anew.
check_spread() {
	local who=$1 ws st ino fs
	st="$T/state-$who/ws"
	fs=$(stat -f -c %T "$T")
	if [ "$fs" != ext2/ext3 ]; then
		echo "ok $((TAP_N += 1)) - $who: spread # SKIP $T is on $fs, not ext4: the flag is ext4's"
		return
	fi
	ws=$(mkws_for "$who")
	prun "$who" -w "$ws" -- true
	is "$?:$(lsattr -d "$st" | cut -d' ' -f1 | tr -cd T)" "0:T" "$who: spread: STATE/ws carries the top-directory flag"
	chattr -T "$st"
	ino=$(stat -c %i "$st/.spare")
	prun "$who" -w "$ws" -- true
	is "$?:$(lsattr -d "$st" | cut -d' ' -f1 | tr -cd T)" "0:T" "$who: spread: a state directory without it gets it at the next run"
	[ -d "$st/.spare" ] && [ "$(stat -c %i "$st/.spare")" != "$ino" ]
	ok $? "$who: spread: ... and its old spare is replaced by a set made anew (inode $ino -> $(stat -c %i "$st/.spare" 2>&1))"
	is "$(ls -A "$st" | grep -c '^\.spare-')" 0 "$who: spread: the old spare is removed, nothing left under a claimed name"
	prun "$who" -w "$ws" -- true
	is "$?:$(ls -A "$st" | grep -c '^\.spare$')" "0:1" "$who: spread: the next run takes the new spare and leaves it"
}

# The overlay is mounted volatile (policy filesystem.workspace.sync: end, docs/workspace.md,
# "When changes reach the disk"): nothing the sandbox does syncs the state directory's disk,
# not its end either; a kept set is synced (one syncfs() of the supervisor) and its mark
# removed before the run answers; a set left by a killed run is marked and goes on when
# named again; one left by a machine that went down (the mark older than this boot) is
# refused by a run and by a commit, which --force overrides. sync: always is the old way.
check_volatile() {
	local who=$1 ws id st out pid mark boot
	st="$T/state-$who/ws"
	ws=$(mkws_for "$who")
	# Only paddock's own process is traced (no -f): the sandbox is not, the sync is the supervisor's.
	prun_cmd "$who"
	out=$(cd "$T/home" && strace -qq -e trace=syncfs -o "$T/sync-$who" "${PRUN[@]}" run -w "$ws" -- \
		sh -c 'grep " - overlay " /proc/self/mountinfo' 2>"$T/err")
	is "$?:$(grep -c '^syncfs' "$T/sync-$who")" "0:0" "$who: volatile: a run that changed nothing syncs nothing" ||
		sed 's/^/#   /' "$T/err"
	echo "$out" | grep -qE '(,|fsync=)volatile(,|$)'
	ok $? "$who: volatile: the workspace overlay is mounted volatile (mountinfo: $(echo "$out" | grep -oE '[a-z]*=?volatile' | head -n 1))"
	is "$(ls -A "$st/.spare/work" 2>&1)" ".gone" \
		"$who: volatile: the spare it left has its work directory, mark and all, set aside (one rename)"
	out=$(cd "$T/home" && strace -qq -e trace=syncfs -o "$T/sync-$who" "${PRUN[@]}" run -w "$ws" -- \
		sh -c 'echo kept > f' 2>"$T/err")
	is "$?:$(grep -c '^syncfs(.*= 0$' "$T/sync-$who")" "0:1" \
		"$who: volatile: a run whose set is kept syncs it once, before it answers"
	id=$(last_set "$who")
	is "$(find "$st/$id/work" -mindepth 1 | sed "s|^$st/$id/||")" "work/work" \
		"$who: volatile: the kept set carries no mark, and what the spare set aside is gone"
	prun "$who" --change-set "$id" -- sh -c 'cat f; echo again >> f' >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "0:kept" "$who: volatile: a run goes on with the kept set" || sed 's/^/#   /' "$T/err"
	pws "$who" discard "$id" >/dev/null

	# Killed: the supervisor is SIGKILLed while its sandbox runs; the set keeps its mark.
	# The wait is for f with its content (-s): the shell creates f before it writes it, and a
	# kill in between would leave it empty.
	(cd "$T/home" && exec "${PRUN[@]}" run -w "$ws" -- sh -c 'echo killed > f; sleep 100') >/dev/null 2>&1 &
	pid=$! # paddock itself: setpriv and env exec it
	mark=
	for _ in $(seq 300); do
		id=$(last_set "$who")
		[ -n "$id" ] && [ -s "$st/$id/upper/f" ] && mark="$st/$id/work/work/incompat/volatile" && break
		sleep 0.05
	done
	kill -9 "$pid"
	wait "$pid" 2>/dev/null
	[ -n "$mark" ] && [ -d "$mark" ]
	ok $? "$who: volatile: a set whose supervisor was killed keeps overlayfs's mark"
	grep -q "\"boot_id\":\"$(cat /proc/sys/kernel/random/boot_id)\"" "$st/$id/meta.json"
	ok $? "$who: volatile: the set's meta.json names the boot it was mounted in"
	# Gone down: the set mounted in a boot before this one, as a reboot leaves it. The mark's
	# time is left as it is: a clock behind after the reboot makes it look like this boot's.
	sed 's/"boot_id":"[^"]*"/"boot_id":"00000000-0000-4000-8000-000000000000"/' "$st/$id/meta.json" >"$T/meta"
	cat "$T/meta" >"$st/$id/meta.json" # in place: its owner stays
	prun "$who" --change-set "$id" -- cat f >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "125:" "$who: volatile: a run does not go on with a set left by a machine that went down"
	grep -q "when the machine went down" "$T/err"; ok $? "$who: volatile: ... and says why" || sed 's/^/#   /' "$T/err"
	pws "$who" commit "$id" >"$T/out" 2>"$T/err"
	out=$?
	[ "$out" -ne 0 ] && grep -q "ws commit --force $id" "$T/err" && [ ! -e "$ws/f" ]
	ok $? "$who: volatile: commit refuses it (exit $out) and names --force; the workspace is untouched" ||
		sed 's/^/#   /' "$T/err"
	pws "$who" commit --force "$id" >/dev/null 2>"$T/err"
	is "$?:$(cat "$ws/f" 2>/dev/null)" "0:killed" "$who: volatile: commit --force applies it" ||
		sed 's/^/#   /' "$T/err"
	pws "$who" discard "$id" >/dev/null 2>&1
	as "$who" "$ws" 'rm -f f'

	# Killed in this boot: the next run named with the set removes the mark and goes on.
	(cd "$T/home" && exec "${PRUN[@]}" run -w "$ws" -- sh -c 'echo killed > f; sleep 100') >/dev/null 2>&1 &
	pid=$! # paddock itself: setpriv and env exec it
	for _ in $(seq 300); do
		id=$(last_set "$who")
		[ -n "$id" ] && [ -s "$st/$id/upper/f" ] && break
		sleep 0.05
	done
	kill -9 "$pid"
	wait "$pid" 2>/dev/null
	# The clock set forward since: the mark's time is before this boot began; its boot id is this one.
	boot=$(awk '/^btime/ {print $2}' /proc/stat)
	touch -d "@$((boot - 60))" "$st/$id/work/work/incompat/volatile"
	prun "$who" --change-set "$id" -- cat f >"$T/out" 2>"$T/err"
	is "$?:$(cat "$T/out")" "0:killed" \
		"$who: volatile: a run goes on with a set whose supervisor was killed, whatever the clock says" ||
		sed 's/^/#   /' "$T/err"
	is "$(find "$st/$id/work" -mindepth 2 2>/dev/null | wc -l)" 0 "$who: volatile: ... and leaves it settled, unmarked"
	pws "$who" discard "$id" >/dev/null

	# sync: always: the old way, fsync inside reaches the disk, the unmount syncs.
	printf 'extends: default\nfilesystem:\n  workspace: { sync: always }\n' >"$T/home/always.yaml"
	chmod 644 "$T/home/always.yaml"
	out=$(prun "$who" -p "$T/home/always.yaml" -w "$ws" --discard -- \
		sh -c 'grep " - overlay " /proc/self/mountinfo' 2>"$T/err")
	[ $? -eq 0 ] && echo "$out" | grep -q ' - overlay ' && ! echo "$out" | grep -qE '(,|fsync=)volatile(,|$)'
	ok $? "$who: volatile: sync: always mounts the overlay without it" || sed 's/^/#   /' "$T/err"
	printf 'extends: default\nfilesystem:\n  workspace: { sync: never }\n' >"$T/home/never.yaml"
	chmod 644 "$T/home/never.yaml"
	prun "$who" -p "$T/home/never.yaml" -w "$ws" -- true 2>"$T/err"
	is "$?" 122 "$who: volatile: sync: never is a profile error"
	grep -q 'filesystem.workspace.sync' "$T/err"; ok $? "$who: volatile: ... naming the field" || sed 's/^/#   /' "$T/err"
}

for who in root user; do
	check_spare "$who"
	check_spread "$who"
	check_volatile "$who"
	check_links_after_commit "$who"
	check_setid_planted "$who"
	check_mountinfo "$who"
	check_conflicts "$who"
	check_home "$who"
done

for who in root user; do
	check_boundaries "$who"
	check_overlay_diff_commit "$who"
	check_discard "$who"
	check_snapshots "$who"
	check_hostile "$who"
	check_disk_and_modes "$who"
	check_big_tree "$who"
done
done_testing
