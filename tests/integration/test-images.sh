#!/bin/bash
# Sandboxes on images (issue 23, docs/images.md): images the suite makes itself, offline (a
# busybox-static root filesystem as a directory and as gzip and zstd tars, an OCI layout
# written by umoci with a second layer that deletes and adds, its oci-archive, a `docker
# save` archive assembled by image-fixtures.py), each imported and run as root and as
# nobody; the image's config applied; hostile archives of every kind refused with the entry
# named; a layer shared by two images stored once; rm refused while a sandbox holds the
# image, and reference-counted; two sandboxes on two images at once; the escape battery on
# an image root.
set -u
. "$(dirname "$0")/lib-run.sh"
. "$(dirname "$0")/lib-escape.sh"
. "$(dirname "$0")/lib-serve.sh"
trap 'kill -9 ${SERVE_PID_root:-} ${SERVE_PID_user:-} 2>/dev/null; reap_supervisors; undelegate_cgroup; rm -rf "$T"' EXIT
: "${ESCAPE_PROBE:?ESCAPE_PROBE must name the escape-probe binary}"
cp "$ESCAPE_PROBE" "$T/bin/escape-probe" && chmod 0755 "$T/bin/escape-probe"
PROBE="$T/bin/escape-probe"
# The probe is static (tests/meson.build); a sanitizer build links it dynamically, and the
# busybox image has no libc: it then gets the host's library directories, read-only (and
# LeakSanitizer, which cannot run under the sandbox's seccomp filter, is off).
PROBE_LIBS=()
if ldd "$PROBE" >/dev/null 2>&1; then
	for d in /lib /lib64 /usr/lib /usr/lib64; do
		[ -e "$d" ] && PROBE_LIBS+=(--ro "$d")
	done
	PROBE_LIBS+=(-e ASAN_OPTIONS=detect_leaks=0)
fi
FX="$TESTS_DIR/integration/image-fixtures.py"
BUSYBOX=/bin/busybox
if [ ! -x "$BUSYBOX" ] || ! command -v umoci >/dev/null; then
	echo "Bail out! busybox-static and umoci are needed (make test-setup installs them)"
	exit 1
fi

# pimg WHO ARGS...: `paddock image ARGS` as root or nobody, with prun's state directory.
pimg() {
	local PRUN
	prun_cmd "$1"
	shift
	(cd "$T/home" && exec "${PRUN[@]}" image "$@")
}
# state WHO: that identity's state directory.
state() { [ "$1" = root ] && echo "$T/state-root" || echo "$T/state-user"; }
nlayers() { find "$(state "$1")/images/layers" -mindepth 1 -maxdepth 1 -type d | wc -l; }

# ---- the images ----
F="$T/fx"
mkdir -p "$F/rootfs/bin" "$F/rootfs/etc" "$F/rootfs/tmp"
cp "$BUSYBOX" "$F/rootfs/bin/busybox"
for c in sh ls cat echo id pwd sleep touch test mkdir grep wc stat readlink rm true seq; do
	ln -s busybox "$F/rootfs/bin/$c"
done
echo "busybox" >"$F/rootfs/etc/image-name"
printf 'root:x:0:0::/root:/bin/sh\nagent:x:1234:2345::/home/agent:/bin/sh\n' >"$F/rootfs/etc/passwd"
printf 'root:x:0:\nteam:x:777:\n' >"$F/rootfs/etc/group"
tar -C "$F/rootfs" -czf "$F/rootfs.tar.gz" .
tar -C "$F/rootfs" -cf - . | zstd -q -o "$F/rootfs.tar.zst"
# An OCI layout by umoci: v1 is the root filesystem; v2 adds a layer that deletes /bin/ls
# (an OCI whiteout), adds /data/greeting, and sets env, working directory and entrypoint.
(cd "$F" && umoci init --layout oci && umoci new --image oci:v1 &&
	umoci insert --image oci:v1 rootfs / && umoci unpack --image oci:v1 bundle >/dev/null &&
	rm bundle/rootfs/bin/ls && mkdir bundle/rootfs/data &&
	echo hello >bundle/rootfs/data/greeting && umoci repack --image oci:v2 bundle &&
	umoci config --image oci:v2 --config.env GREETING=hi --config.workingdir /data \
		--config.entrypoint /bin/sh --config.cmd=-c --config.cmd='echo from-cmd' &&
	rm -rf bundle && tar -C oci -cf oci.tar .) >"$T/umoci.log" 2>&1
ok $? "umoci writes an OCI layout with two tags ($(tail -c 200 "$T/umoci.log"))"
python3 "$FX" docker-save "$F/rootfs" "$F/docker.tar" bbdocker:1 from-docker
ok $? "a docker save archive is assembled"
for k in absolute dotdot symlink-out through-symlink hardlink-out hardlink-dotdot chardev \
	blockdev whiteout-dev fifo setuid unknown-type bomb big-header; do
	python3 "$FX" hostile "$k" "$F/hostile-$k.tar" >"$F/hostile-$k.entry"
done
chmod -R a+rX "$F"

# ---- import and run, as root and as nobody ----
import_checks() {
	local who=$1 out rc n0
	for src in "rootfs:bb-dir" "rootfs.tar.gz:bb-tgz" "rootfs.tar.zst:bb-zst" \
		"docker.tar:" "oci.tar:arch:v1 --select v1"; do
		set -- ${src#*:}
		local path=${src%%:*} name=${1:-}
		shift 2>/dev/null
		out=$(pimg "$who" import -q "$F/$path" ${name:+--name "$name"} "$@" 2>&1); rc=$?
		is "$rc:$(printf '%s' "$out" | grep -c '^sha256:')" "0:1" \
			"$who: image import $path prints the image's digest ($out)"
	done
	n0=$(nlayers "$who")
	out=$(pimg "$who" import "$F/oci" --select v1 --name oci:v1 2>&1); rc=$?
	printf '%s' "$out" | grep -q "1 layer, 0 new"; ok $? "$who: the OCI layout's v1 adds no layer (its oci-archive brought it): $out"
	out=$(pimg "$who" import "$F/oci" --select v2 --name oci:v2 2>&1); rc=$?
	printf '%s' "$out" | grep -q "2 layers, 1 new"; ok $? "$who: v2 stores only its own new layer: $out"
	is "$(nlayers "$who")" "$((n0 + 1))" "$who: the layer v1 and v2 share is stored once"
	out=$(pimg "$who" inspect oci:v2 | python3 -c 'import json,sys; print(" ".join(str(l["images"]) for l in json.load(sys.stdin)["layers"]))')
	is "$out" "2 1" "$who: inspect counts the images of each layer (the base: v1 and v2; the oci-archive's v1 is v1)"
	out=$(pimg "$who" ls 2>&1 | awk 'NR > 1 {print $1}' | LC_ALL=C sort | tr '\n' ' ')
	is "$out" "arch:v1 bb-dir bb-tgz bb-zst bbdocker:1 oci:v1 oci:v2 " "$who: image ls lists every name"
}

run_checks() {
	local who=$1 out rc ws
	ws=$(mkws)
	for img in bb-dir bb-tgz bb-zst bbdocker:1 oci:v1 arch:v1; do
		out=$(prun "$who" -w "$ws" --image "$img" -- sh -c 'cat /etc/image-name; test -e /usr/bin/env && echo host-usr; id -u' 2>"$T/err"); rc=$?
		is "$rc:$out" "$(printf '0:busybox\n%s' "$([ "$who" = root ] && echo 0 || echo $UNPRIV_UID)")" \
			"$who: run --image $img runs on the image, not the host's /usr ($(head -c 200 "$T/err"))"
	done
	out=$(prun "$who" -w "$ws" --image bbdocker:1 -- sh -c 'echo $FROM_DOCKER' 2>/dev/null)
	is "$out" "from-docker" "$who: the docker image's Env is the sandbox's"
	# v2: entrypoint /bin/sh, cmd -c 'echo from-cmd', working directory /data, env, whiteout.
	out=$(prun "$who" -w "$ws" --image oci:v2 2>"$T/err"); rc=$?
	is "$rc:$out" "0:from-cmd" "$who: run --image without a command runs the entrypoint and cmd ($(head -c 200 "$T/err"))"
	out=$(prun "$who" -w "$ws" --image oci:v2 -- -c 'pwd; cat greeting; echo $GREETING; test -e /bin/ls; echo ls=$?' 2>/dev/null)
	is "$out" "$(printf '/data\nhello\nhi\nls=1')" "$who: a command is the entrypoint's arguments; workdir, env and the layer's whiteout apply"
	out=$(prun "$who" -w "$ws" --image oci:v2 -C / -e GREETING=mine -- -c 'pwd; echo $GREETING' 2>/dev/null)
	is "$out" "$(printf '/\nmine')" "$who: --cwd and --env win over the image's"
	# The root is the sandbox's to write; the writes go to its own layer, not the image.
	out=$(prun "$who" -w "$ws" --image bb-dir -- sh -c 'echo w >/etc/image-name && cat /etc/image-name && mkdir /new && echo ok' 2>/dev/null)
	is "$out" "$(printf 'w\nok')" "$who: the image's root is writable inside the sandbox"
	out=$(prun "$who" -w "$ws" --image bb-dir -- cat /etc/image-name 2>/dev/null)
	is "$out" "busybox" "$who: the next sandbox on the image sees it unchanged"
	out=$(find "$(state "$who")/images/layers" -name image-name -exec cat {} + | sort -u)
	is "$out" "busybox" "$who: nothing a sandbox wrote is in the store's layers"
	out=$(find "$(state "$who")/images/layers" -name new | wc -l)
	is "$out" 0 "$who: nor a directory it made"
	out=$(prun "$who" -w "$ws" --image oci:v1 -- sh -c 'grep -c -e images -e sha256 -e state- /proc/self/mountinfo' 2>/dev/null)
	is "$out" 0 "$who: mountinfo names neither the store, a digest nor the state directory"
	# The workspace is there as on the host root.
	echo in-ws >"$ws/f"
	out=$(cd "$ws" && prun_cmd "$who" && "${PRUN[@]}" run --image bb-dir -- cat f 2>/dev/null)
	is "$out" "in-ws" "$who: the workspace is seen at its path on the image"
	prun "$who" --image no-such-image -- true 2>"$T/err"; rc=$?
	is "$rc" 122 "$who: an unknown image is a usage error (122)"
	grep -q "no image 'no-such-image'" "$T/err"; ok $? "$who: and says so ($(head -c 200 "$T/err"))"
	# The image's user: a name of its /etc/passwd (and group), mapped to the caller.
	pimg "$who" import -q "$F/rootfs" --name as-agent --user agent:team >/dev/null 2>&1
	out=$(prun "$who" -w "$ws" --image as-agent -- sh -c 'id -u; id -g; echo x >/tmp/f && stat -c %u /tmp/f' 2>/dev/null)
	is "$out" "$(printf '1234\n777\n1234')" "$who: the image's user (agent:team) is the sandbox's user inside"
	pimg "$who" import -q "$F/rootfs" --name as-ghost --user ghost >/dev/null 2>&1
	prun "$who" -w "$ws" --image as-ghost -- true 2>"$T/err"; rc=$?
	grep -q "the image's user 'ghost' is not a number and not in its /etc/passwd" "$T/err"
	is "$rc:$?" "122:0" "$who: a user the image does not have stops the run, named ($(head -c 160 "$T/err"))"
	pimg "$who" rm as-agent as-ghost >/dev/null 2>&1
	# A profile's image: names the root too; --image host overrides it.
	printf 'extends: default\nimage: oci:v1\n' >"$T/home/img-$who.yaml"
	chmod 0644 "$T/home/img-$who.yaml"
	out=$(prun "$who" -w "$ws" -p "$T/home/img-$who.yaml" -- cat /etc/image-name 2>/dev/null)
	is "$out" "busybox" "$who: a profile's image: is the root"
	out=$(prun "$who" -w "$ws" -p "$T/home/img-$who.yaml" --image host -- sh -c 'test -e /usr/bin/env && echo host' 2>/dev/null)
	is "$out" "host" "$who: --image host puts the host's root back"
}

# Two sandboxes on two images at once: each waits until the other has started.
two_at_once() {
	local who=$1 d p1 p2 a b
	d=$(mkws)
	prun "$who" -w "$d" -C "$d" --workspace-mode rw --image oci:v2 -- -c \
		'touch A; for i in $(seq 600); do test -e B && break; sleep 0.05; done; test -e B && cat /data/greeting' \
		>"$T/two-a" 2>/dev/null & p1=$!
	prun "$who" -w "$d" -C "$d" --workspace-mode rw --image bbdocker:1 -- sh -c \
		'touch B; for i in $(seq 600); do test -e A && break; sleep 0.05; done; test -e A && echo $FROM_DOCKER' \
		>"$T/two-b" 2>/dev/null & p2=$!
	wait $p1; a=$?
	wait $p2; b=$?
	is "$a:$b:$(cat "$T/two-a"):$(cat "$T/two-b")" "0:0:hello:from-docker" \
		"$who: two sandboxes on two images run at once, each on its own"
}

hostile_checks() {
	local who=$1 k entry out rc n0 before
	n0=$(nlayers "$who")
	for k in absolute dotdot symlink-out through-symlink hardlink-out hardlink-dotdot chardev \
		blockdev whiteout-dev fifo unknown-type bomb big-header; do
		entry=$(cat "$F/hostile-$k.entry")
		PRUN_ENV=(PADDOCK_IMAGE_QUOTA=256M)
		out=$(pimg "$who" import "$F/hostile-$k.tar" --name "hostile-$k" 2>&1); rc=$?
		PRUN_ENV=()
		if [ "$rc" = 1 ] && printf '%s' "$out" | grep -qF "entry '$entry"; then
			ok 0 "$who: $k: refused: $out"
		else
			ok 1 "$who: $k must be refused naming '$entry'"
			printf '#   exit %s, output: %s\n' "$rc" "$out"
		fi
	done
	is "$(nlayers "$who"):$(find "$(state "$who")/images/tmp" -mindepth 1 | wc -l)" "$n0:0" \
		"$who: the refused imports left no layer and nothing in tmp/"
	for f in /tmp/paddock-hostile-absolute /paddock-hostile-dotdot /tmp/paddock-hostile-through; do
		[ ! -e "$f" ]; ok $? "$who: nothing was written at $f"
	done
	# A directory that holds the store, or a mount below the root filesystem, is refused.
	out=$(pimg "$who" import "$(dirname "$(state "$who")")" --name whole 2>&1); rc=$?
	printf '%s' "$out" | grep -q "holds the image store"; is "$rc:$?" "1:0" "$who: a directory holding the store is refused ($out)"
	if [ "$who" = root ]; then
		mkdir -p "$T/mnt-root/bin" "$T/mnt-root/proc" && cp "$BUSYBOX" "$T/mnt-root/bin/" &&
			mount -t proc proc "$T/mnt-root/proc"
		out=$(pimg root import "$T/mnt-root" --name mnt 2>&1); rc=$?
		umount "$T/mnt-root/proc"
		printf '%s' "$out" | grep -qF "entry 'proc' refused: another filesystem is mounted there"
		is "$rc:$?" "1:0" "root: a filesystem mounted in a rootfs directory is refused, named ($out)"
	fi
	# Set-id bits: cleared and named (--strict: refused).
	out=$(pimg "$who" import "$F/hostile-setuid.tar" --name setid --strict 2>&1); rc=$?
	printf '%s' "$out" | grep -qF "entry 'bin/su' refused: set-user-ID"; is "$rc:$?" "1:0" "$who: --strict refuses a set-id entry by name ($out)"
	out=$(pimg "$who" import "$F/hostile-setuid.tar" --name setid 2>&1); rc=$?
	printf '%s' "$out" | grep -qF "cleared the set-user-ID/set-group-ID bits of 'bin/su'"; is "$rc:$?" "0:0" "$who: by default the bits are cleared, the entry named ($(echo $out | head -c 150))"
	out=$(find "$(state "$who")/images/layers" -perm /6000 | wc -l)
	is "$out" 0 "$who: no set-id file in the store"
}

rm_checks() {
	local who=$1 out rc n0 pid fifo
	# A sandbox holds its image: rm is refused while it runs.
	fifo="$T/hold-$who"
	mkfifo -m 0666 "$fifo"
	prun "$who" -w "$(mkws)" --ro "$fifo" --image bb-dir -- sh -c "cat $fifo" >/dev/null 2>&1 & pid=$!
	# The command itself ("cat FIFO" at the start of its command line), not paddock run's
	# own process, whose argv holds the same words before the sandbox holds its image.
	for _ in $(seq 200); do
		pgrep -f "^cat $fifo\$" >/dev/null && break
		sleep 0.05
	done
	out=$(pimg "$who" rm bb-dir 2>&1); rc=$?
	printf '%s' "$out" | grep -q "in use by a running sandbox"; is "$rc:$?" "1:0" "$who: rm of an image a sandbox runs on is refused ($out)"
	# Bounded: a sandbox that never started has no reader on the fifo to release.
	timeout 30 sh -c 'echo done >"$1"' sh "$fifo"
	wait $pid
	n0=$(nlayers "$who")
	out=$(pimg "$who" rm bb-dir 2>&1); rc=$?
	is "$rc:$(nlayers "$who")" "0:$((n0 - 1))" "$who: once the sandbox ended, rm removes the image and its layer ($out)"
	n0=$(nlayers "$who")
	# bb-tgz and bb-zst are one image (one content): rm of one name keeps the other.
	out=$(pimg "$who" rm bb-tgz 2>&1); rc=$?
	is "$rc:$(nlayers "$who")" "0:$n0" "$who: rm of one name of an image keeps it under the other ($out)"
	out=$(pimg "$who" rm bb-zst 2>&1); rc=$?
	is "$rc:$(nlayers "$who")" "0:$((n0 - 1))" "$who: rm of its last name removes the image and its layer ($out)"
	out=$(pimg "$who" rm oci:v2 2>&1); rc=$?
	is "$rc:$(nlayers "$who")" "0:$((n0 - 2))" "$who: rm oci:v2 removes its own layer, not the one oci:v1 shares ($out)"
	out=$(prun "$who" -w "$(mkws)" --image oci:v1 -- cat /etc/image-name 2>/dev/null)
	is "$out" busybox "$who: oci:v1 still runs"
	pimg "$who" import -q "$F/rootfs.tar.gz" >/dev/null 2>&1
	out=$(pimg "$who" ls | grep -c '<none>')
	is "$out" 1 "$who: an import without a name of its own keeps the image nameless"
	out=$(pimg "$who" prune 2>&1); rc=$?
	is "$rc:$(pimg "$who" ls | grep -c '<none>')" "0:0" "$who: prune removes the nameless image ($out)"
}

# The escape battery on an image root: every attempt refused as on the host's root, but for
# the writes to /usr, /etc and / (the root is the sandbox's own to write): they land in the
# sandbox's writable layer, and neither the store nor the host sees them.
escape_checks() {
	local who=$1 name pat out rc
	while IFS=: read -r name pat; do
		[ -n "$name" ] || continue
		case $name in write-usr | write-etc | mkdir-root) continue ;; esac
		out=$(prun "$who" -w "$(mkws)" --image bb-dir --ro "$PROBE" "${PROBE_LIBS[@]}" -- "$PROBE" "$name" 2>/dev/null); rc=$?
		if [ "$rc" = 1 ] && printf '%s' "$out" | grep -qE "^$name: blocked \(($pat)\)$"; then
			ok 0 "$who: image root: $name: $out"
		else
			ok 1 "$who: image root: $name must be refused with $pat"
			printf '#   exit %s, output: %s\n' "$rc" "$out"
		fi
	done <<<"$ESCAPE_ATTEMPTS"
	for name in write-etc mkdir-root; do
		out=$(prun "$who" -w "$(mkws)" --image bb-dir --ro "$PROBE" "${PROBE_LIBS[@]}" -- "$PROBE" "$name" 2>/dev/null)
		is "$out" "$name: ESCAPED" "$who: image root: $name writes the sandbox's own layer"
	done
	out=$(ls -d /etc/paddock-escape /paddock-escape /usr/bin/paddock-escape 2>/dev/null;
		find "$(state "$who")" -name paddock-escape 2>/dev/null)
	is "$out" "" "$who: image root: the writes reached neither the store nor the host"
	# An image whose /tmp is a symlink out: the start fails, nothing is mounted through it.
	mkdir -p "$T/linkroot/bin" && cp "$BUSYBOX" "$T/linkroot/bin/busybox" &&
		ln -sfn busybox "$T/linkroot/bin/sh" && ln -sfn /oldroot/etc "$T/linkroot/tmp"
	pimg "$who" import -q "$T/linkroot" --name linkroot >/dev/null 2>&1
	out=$(prun "$who" -w "$(mkws)" --image linkroot -- sh -c 'echo started' 2>&1); rc=$?
	printf '%s' "$out" | grep -q "symlink on the way to a mount point '/tmp'"
	is "$rc:$?" "125:0" "$who: an image whose /tmp is a symlink does not start ($(echo $out | head -c 200))"
}

# The audit record of a run on an image names the image and its digest.
audit_checks() {
	local who=$1 ev digest
	ev="$T/home/audit-$who.jsonl"
	prun "$who" -w "$(mkws)" --image oci:v1 --events "$ev" -- true 2>/dev/null
	digest=$(pimg "$who" inspect oci:v1 | jq -r .digest)
	is "$(head -1 "$ev" | jq -r '.kind + " " + .attrs.image + " " + .attrs.image_digest')" \
		"sandbox.create oci:v1 $digest" "$who: sandbox.create records the image's name and digest"
	is "$(pimg "$who" inspect oci:v1 >/dev/null; prun_cmd "$who"; cd "$T/home" &&
		"${PRUN[@]}" audit tail -n 50 --kind sandbox.create --json 2>/dev/null |
		jq -r --arg d "$digest" 'select(.attrs.image_digest == $d) | .attrs.image' | tail -1)" \
		"oci:v1" "$who: and so does the audit store"
}

# Through the daemon: create --image, exec, ps, the Sandbox's image, an unknown image (404
# naming the field), rm refused while a sandbox holds the image, a warm pool of a profile
# that names an image.
serve_checks() {
	local who=$1 id out digest rc
	mkdir -p "$T/serve-$who/cfg/paddock/profiles"
	printf 'extends: default\nimage: oci:v2\n' >"$T/serve-$who/cfg/paddock/profiles/onv2.yaml"
	chmod -R a+rX "$T/serve-$who/cfg"
	[ "$who" = user ] && chown -R $UNPRIV_UID:$UNPRIV_UID "$T/serve-$who"
	SERVE_ENV=(XDG_CONFIG_HOME="$T/serve-$who/cfg")
	pc "$who" image import -q "$F/oci" --select v2 --name oci:v2 >/dev/null 2>&1
	digest=$(pc "$who" image inspect oci:v2 | jq -r .digest)
	serve_start "$who" --pool onv2=1 || { ok 1 "$who: the daemon starts"; SERVE_ENV=(); return; }
	id=$(pc "$who" create --image oci:v2 2>"$T/err"); rc=$?
	is "$rc" 0 "$who: create --image oci:v2 ($(head -c 200 "$T/err"))"
	out=$(pc "$who" exec "$id" -- sh -c 'cat /data/greeting; echo $GREETING; test -e /usr/bin/env || echo no-host-usr' 2>/dev/null)
	is "$out" "$(printf 'hello\nhi\nno-host-usr')" "$who: exec runs on the image, with its env"
	api "$who" GET "/v1/sandboxes/$id"
	is "$(jq_get "$BODY" image.name) $(jq_get "$BODY" image.digest)" "oci:v2 $digest" \
		"$who: the Sandbox names its image and digest"
	pc "$who" ps | grep "^$id" | grep -qF "oci:v2@${digest:0:19}"; ok $? "$who: paddock ps shows the image and its digest"
	api "$who" POST /v1/sandboxes '{"image": "no-such-image"}'
	is "$CODE $(jq_get "$BODY" error.field)" "404 image" "$who: an unknown image is a 404 naming the field ($BODY)"
	api "$who" POST /v1/sandboxes '{"image": ""}'
	is "$CODE $(jq_get "$BODY" error.field)" "400 image" "$who: an empty image is a 400 naming the field"
	out=$(pc "$who" image rm oci:v2 2>&1); rc=$?
	printf '%s' "$out" | grep -q "in use by a running sandbox"; is "$rc:$?" "1:0" "$who: rm while a daemon sandbox holds the image is refused"
	# The pool of a profile that names the image: a create of that profile claims from it.
	# The pool fills in the background; on a loaded machine (CI runs the fuzzers beside
	# this suite) that takes seconds, so wait on a deadline rather than a count. Its member
	# is claimable once its warm-up command has run: /v1/pools counts it ready then, where
	# `ps` marks any unclaimed member "ready" (one still warming made a create miss it).
	local deadline=$((SECONDS + 60))
	until api "$who" GET /v1/pools && [ "$(jq_get "$BODY" pools.0.ready)" = 1 ]; do
		[ $SECONDS -ge $deadline ] && break
		sleep 0.1
	done
	out=$(pc "$who" create -p onv2 2>/dev/null)
	pc "$who" ps | grep "^$out" | grep -q "oci:v2@${digest:0:19} *claimed *$"; ok $? "$who: a create of the image's profile is claimed from its warm pool, on the image ($(pc "$who" ps --all | grep "oci:v2" | tr -s ' ' | tr '\n' ';' | head -c 300))"
	serve_stop "$who"
	reap_supervisors
	SERVE_ENV=()
}

for who in root user; do
	import_checks "$who"
	audit_checks "$who"
	serve_checks "$who"
	run_checks "$who"
	two_at_once "$who"
	hostile_checks "$who"
	escape_checks "$who"
	rm_checks "$who"
done
done_testing
