#!/bin/bash
# paddock image build: recipes read with file:line:col diagnostics; a build from a
# busybox-static image with run: steps, each in a sandbox on the image so far; the cache (a
# second build runs no step again: the same layers, the same image, no output of the
# steps); a failing step named with its status and the end of its output; egress refused to
# a step that did not declare it (the attempt's own failure shown). As root and as nobody.
# Offline: the images are made here from /bin/busybox (busybox-static).
set -u
. "$(dirname "$0")/lib-run.sh"

# busybox-static (the Makefile's TEST_DEB_PACKAGES): a binary that needs no library. Its wget
# is used without -T and with -q: this build's wget crashes on a timeout or a progress bar.
BUSYBOX=/bin/busybox
if [ ! -x "$BUSYBOX" ] || ldd "$BUSYBOX" >/dev/null 2>&1; then
	echo "Bail out! $BUSYBOX is not busybox-static's (make test-setup installs it)"
	exit 1
fi

# pimg WHO ARGS...: paddock ARGS as root or nobody, with that identity's state directory.
pimg() {
	local PRUN
	prun_cmd "$1"
	shift
	(cd "$T/home" && exec "${PRUN[@]}" "$@")
}

# A busybox root filesystem: /bin/busybox and a link for each applet, /etc, /tmp.
mkroot() {
	local d=$1 a
	mkdir -p "$d/bin" "$d/etc" "$d/tmp" "$d/root"
	cp "$BUSYBOX" "$d/bin/busybox"
	for a in $("$BUSYBOX" --list); do
		[ "$a" = busybox ] || ln -s busybox "$d/bin/$a"
	done
	echo "root:x:0:0:root:/root:/bin/sh" > "$d/etc/passwd"
	chmod -R a+rX "$d"
}

R="$T/recipes"
mkdir -p "$R"
mkroot "$T/bbroot"
chmod 0755 "$R"

# ---- recipe errors: every problem, each with file:line:col and field; nothing runs ----
cat > "$R/bad.yaml" <<'YAML'
name: 'not a name'
from: busybox
packages: [Vim]
network: ['http://example.com/']
run:
  - echo ok
  - ''
config: {workdir: relative}
YAML
for who in root user; do
	pimg "$who" image build "$R/bad.yaml" >"$T/out" 2>"$T/err"
	is $? 122 "$who: a bad recipe: exit 122, nothing built"
	n=$(grep -c "^$R/bad.yaml:[0-9]*:[0-9]*: " "$T/err")
	is "$n" 5 "$who: every problem of the recipe is reported with file:line:col"
	grep -q "bad.yaml:1:7: name: expected an image name" "$T/err"; ok $? "$who: name: line 1 col 7"
	grep -q "bad.yaml:3:12: packages\[0\]: expected a Debian package name" "$T/err"
	ok $? "$who: packages[0]: line 3 col 12"
	grep -q "bad.yaml:4:11: network\[0\]: 'http://example.com/' is not a host" "$T/err"
	ok $? "$who: network[0]: line 4 col 11"
	grep -q "bad.yaml:7:5: run\[1\]: expected a shell command" "$T/err"; ok $? "$who: run[1]: line 7"
	grep -q "bad.yaml:8:19: config.workdir: expected an absolute path" "$T/err"
	ok $? "$who: config.workdir: line 8"
	grep -q "recipe '$R/bad.yaml' is invalid (5 problems)" "$T/err"; ok $? "$who: the summary counts them"
done
pimg root image build "$R/missing.yaml" 2>"$T/err"
is $? 122 "a missing recipe: exit 122"
grep -q "cannot open recipe '$R/missing.yaml': No such file or directory" "$T/err"
ok $? "a missing recipe is named: $(head -c 200 "$T/err")"
pimg root image build 2>/dev/null
is $? 122 "no recipe: usage error 122"

# ---- the recipes ----
cat > "$R/tools.yaml" <<'YAML'
name: tools:1
from: busybox
run:
  - mkdir -p /opt/tools && echo "hello from step 2" > /opt/tools/hello && echo RAN-STEP-2 && echo "uid=$(id -u)"
  - |
    set -e
    cat /proc/sys/kernel/random/uuid > /opt/tools/stamp
    rm /bin/vi
    echo RAN-STEP-3
config:
  env: {TOOLS: /opt/tools}
  workdir: /opt/tools
YAML
cat > "$R/use.yaml" <<'YAML'
name: tools-use
from: tools:1
run:
  - cat /opt/tools/hello; test ! -e /bin/vi && echo vi-is-gone; echo "TOOLS=$TOOLS"
YAML
cat > "$R/same.yaml" <<'YAML'
name: same
from: busybox
run:
  - "true"
  - echo changes nothing
  - echo changes nothing either
  - echo STEP-5-RAN
YAML
cat > "$R/fail.yaml" <<'YAML'
name: fails
from: busybox
run:
  - echo first step
  - echo about to fail; echo on stderr >&2; exit 3
  - echo never
YAML
cat > "$R/offline.yaml" <<'YAML'
name: offline
from: busybox
run:
  - wget -q -O /tmp/x http://192.0.2.1/
YAML
cat > "$R/narrow.yaml" <<'YAML'
name: narrow
from: busybox
network: [deb.debian.org]
run:
  - echo "proxy is $http_proxy"; wget -q -O /tmp/x http://example.com/
YAML

for who in root user; do
	pimg "$who" image import "$T/bbroot" --kind rootfs-dir --name busybox >"$T/out" 2>"$T/err"
	ok $? "$who: the busybox root filesystem is imported: $(head -c 200 "$T/err")"

	# ---- a build from busybox with run: steps ----
	pimg "$who" image build "$R/tools.yaml" >"$T/out" 2>"$T/err"
	is $? 0 "$who: image build tools.yaml: exit 0"
	first=$(cat "$T/out")
	grep -q '^tools:1 sha256:[0-9a-f]\{64\}$' "$T/out"; ok $? "$who: it prints the name and digest: $first"
	grep -q "^paddock: step 1/3: FROM busybox" "$T/err"; ok $? "$who: step 1 is the base image"
	grep -q "^paddock: step 2/3: RUN mkdir -p /opt/tools" "$T/err"; ok $? "$who: step 2 is named"
	grep -q "^    RAN-STEP-2$" "$T/err"; ok $? "$who: step 2's output is shown, indented"
	grep -q "^    uid=0$" "$T/err"; ok $? "$who: a step runs as root inside its sandbox"
	grep -q "^    RAN-STEP-3$" "$T/err"; ok $? "$who: step 3 ran"
	grep -q "^paddock: step 3/3: done (layer sha256:" "$T/err"; ok $? "$who: step 3 made a layer"
	# What the steps made is the next build's root filesystem.
	pimg "$who" image build "$R/use.yaml" >"$T/out2" 2>"$T/err2"
	is $? 0 "$who: a build from the built image: exit 0"
	grep -q "^    hello from step 2$" "$T/err2"; ok $? "$who: a file a step wrote is in the image"
	grep -q "^    vi-is-gone$" "$T/err2"; ok $? "$who: a file a step removed is gone (a whiteout)"
	grep -q "^    TOOLS=/opt/tools$" "$T/err2"; ok $? "$who: the recipe's config.env reaches later steps"

	# ---- the cache: the same recipe again runs no step ----
	pimg "$who" image build "$R/tools.yaml" >"$T/out" 2>"$T/err"
	is $? 0 "$who: the second build: exit 0"
	is "$(cat "$T/out")" "$first" "$who: the same image (step 3's timestamp was not written again)"
	grep -q "^paddock: step 2/3: cached (layer sha256:" "$T/err"; ok $? "$who: step 2 is cached"
	grep -q "^paddock: step 3/3: cached (layer sha256:" "$T/err"; ok $? "$who: step 3 is cached"
	grep -q "RAN-STEP" "$T/err"; ok $(( $? == 0 )) "$who: no step's command ran again"
	pimg "$who" image build --no-cache "$R/tools.yaml" >"$T/out" 2>"$T/err"
	is $? 0 "$who: --no-cache: exit 0"
	grep -q "^    RAN-STEP-3$" "$T/err"; ok $? "$who: --no-cache runs the steps again"
	[ "$(cat "$T/out")" != "$first" ]; ok $? "$who: --no-cache: a new timestamp, a new image"

	# ---- steps that make the same layer: overlayfs takes a directory once ----
	pimg "$who" image build "$R/same.yaml" >"$T/out" 2>"$T/err"
	is $? 0 "$who: steps that change nothing build: exit 0 $(grep 'image .same' "$T/err" | head -c 200)"
	grep -q "^    STEP-5-RAN$" "$T/err"; ok $? "$who: the step above two identical layers ran"
	n=$(pimg "$who" image inspect same | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["layers"]))')
	is "$n" 3 "$who: the image holds each layer once (busybox, the first step's, one empty)"

	# ---- a failing step: named, its status, the end of its output ----
	pimg "$who" image build "$R/fail.yaml" >"$T/out" 2>"$T/err"
	is $? 1 "$who: a failing step: exit 1"
	grep -q "image 'fails': step 3/4 ($R/fail.yaml:5) RUN echo about to fail; echo on stderr >&2; exit 3 exited with status 3" "$T/err"
	ok $? "$who: the error names the step, its line and its status: $(grep 'image .fails' "$T/err" | head -c 300)"
	grep -A3 "^paddock: the end of step 3's output:" "$T/err" | grep -q "^    on stderr$"
	ok $? "$who: the end of the step's output (stderr too) follows the error"
	grep -q "step 4/4" "$T/err"; ok $(( $? == 0 )) "$who: no step runs after the failed one"
	[ ! -s "$T/out" ]; ok $? "$who: no image is named"

	# ---- egress: a step reaches only what the recipe declares ----
	pimg "$who" image build "$R/offline.yaml" >"$T/out" 2>"$T/err"
	is $? 1 "$who: a step without network: that tries to reach a host fails: exit 1"
	grep -q "exited with status 1" "$T/err"; ok $? "$who: wget's own status is named"
	grep -A3 "^paddock: the end of step 2's output:" "$T/err" | grep -q "wget: can't connect to remote host (192.0.2.1): Network is unreachable"
	ok $? "$who: the attempt's own failure is shown: $(grep -A2 'end of step' "$T/err" | tail -2 | tr '\n' ' ')"
	pimg "$who" image build "$R/narrow.yaml" >"$T/out" 2>"$T/err"
	is $? 1 "$who: a step that reaches a host the recipe does not list fails: exit 1"
	grep -q "^    proxy is http://127.0.0.1:" "$T/err"; ok $? "$who: the step's proxy is the egress proxy"
	grep -A3 "^paddock: the end of step 2's output:" "$T/err" | grep -q "wget: server returned error: HTTP/1.1 403 Forbidden by paddock"
	ok $? "$who: the proxy's refusal is the step's own error: $(grep -A2 'end of step' "$T/err" | tail -2 | tr '\n' ' ')"
	grep -q "^paddock: network denied to step 2: example.com:80 (no network.allow entry); to allow it, add 'example.com' to the recipe's network$" "$T/err"
	ok $? "$who: the refused destination is named: $(grep 'network denied' "$T/err" | head -c 200)"
done

done_testing
