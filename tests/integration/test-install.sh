#!/bin/bash
# Installing paddock: `make install` with PREFIX=/usr/local into a DESTDIR, as root and as
# nobody; the installed paddock then runs a sandbox and a daemon with the clone and its build
# hidden, finding paddock-init and paddock-otlp under PREFIX/libexec/paddock by itself (next
# to it in the tree, or at the compiled-in PREFIX when copied away); `man -l` renders every
# page; `make uninstall` leaves nothing of it.
set -u
. "$(dirname "$0")/lib-run.sh"
: "${TESTS_DIR:?TESTS_DIR must name the source tests directory}"
: "${BUILD_DIR:?BUILD_DIR must name the build directory}"
SRC=$(realpath "$TESTS_DIR/..")
BUILD=$(realpath "$BUILD_DIR")

# as WHO CMD...: CMD as root or as nobody, with a clean environment: no PADDOCK_INIT or
# PADDOCK_OTLP from meson, only the state and runtime directories of that identity.
# AS_EXEC=exec: replace the calling subshell, so that $! is CMD's pid.
as() {
	local who=$1
	shift
	if [ "$who" = root ]; then
		${AS_EXEC:-} env -i PATH=/usr/bin:/bin HOME="$T/home" PADDOCK_STATE_DIR="$T/state-root" \
			PADDOCK_RUNTIME_DIR="$T/run-root" "$@"
	else
		${AS_EXEC:-} setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all \
			env -i PATH=/usr/bin:/bin HOME="$T/home" PADDOCK_STATE_DIR="$T/state-user" \
			PADDOCK_RUNTIME_DIR="$T/run-user" "$@"
	fi
}

# The DESTDIR of each identity; nobody's is its own to write.
mkdir "$T/dest-root" "$T/dest-user"
chown $UNPRIV_UID:$UNPRIV_UID "$T/dest-user"
for who in root user; do
	as "$who" make -s -C "$SRC" install BUILD="$BUILD" PREFIX=/usr/local \
		DESTDIR="$T/dest-$who" >"$T/install-$who.log" 2>&1
	ok $? "$who: make install PREFIX=/usr/local DESTDIR=... succeeds$(tail -3 "$T/install-$who.log")"
	p="$T/dest-$who/usr/local"
	for f in bin/paddock libexec/paddock/paddock-full libexec/paddock/paddock-init \
		libexec/paddock/paddock-otlp; do
		[ -x "$p/$f" ]; ok $? "$who: PREFIX/$f is installed and executable"
	done
done

# What the user does next: remove the clone. Here the suite's own mount namespace hides the
# source tree and the build directory (and the machine's /usr/local, so that nothing there
# stands in for what was installed).
mount -t tmpfs -o mode=0755 paddock-test-hidden "$BUILD" &&
	mount -t tmpfs -o mode=0755 paddock-test-hidden "$SRC" &&
	mount -t tmpfs -o mode=0755 paddock-test-hidden /usr/local
ok $? "the clone, its build and /usr/local are hidden"
[ ! -e "$BUILD/paddock-init" ] && [ ! -e "$SRC/Makefile" ]; ok $? "nothing of the clone is left to find"

ws=$(mkws)
for who in root user; do
	bin="$T/dest-$who/usr/local/bin/paddock"
	out=$(cd "$ws" && as "$who" "$bin" run -- echo ran 2>"$T/err"); rc=$?
	is "$rc:$out" "0:ran" "$who: the installed paddock runs 'run -- CMD' with its own init ($(head -c 200 "$T/err"))"
	port=$(free_port)
	(cd "$ws" && as "$who" "$bin" run --otlp "http://127.0.0.1:$port" -- true) 2>"$T/err"
	rc=$?
	grep -q "cannot run the OTLP exporter" "$T/err"; is "$rc:$?" 0:1 \
		"$who: the installed paddock starts its own paddock-otlp ($(head -c 200 "$T/err"))"
done

# A verb the installed paddock hands to paddock-full (docs/internals/binaries.md), and a run
# it hands over (its policy needs the egress proxy): both find it under PREFIX/libexec.
printf 'extends: default\nnetwork:\n  mode: allowlist\n  allow: [example.com]\n' >"$T/allow.yaml"
chmod 0644 "$T/allow.yaml"
for who in root user; do
	bin="$T/dest-$who/usr/local/bin/paddock"
	out=$(as "$who" "$bin" profile show default 2>"$T/err" | head -1)
	is "$out" "name: default" "$who: the installed paddock runs 'profile show' by its paddock-full ($(head -c 200 "$T/err"))"
	out=$(cd "$ws" && as "$who" "$bin" run --profile "$T/allow.yaml" -- sh -c 'echo $HTTP_PROXY' 2>"$T/err")
	is "$out" "http://127.0.0.1:3128" \
		"$who: the installed paddock hands an allowlist run to its paddock-full ($(head -c 200 "$T/err"))"
done

# A daemon of the installed paddock: its supervisors are the installed binary too.
for who in root user; do
	bin="$T/dest-$who/usr/local/bin/paddock"
	sock="$T/run-$who/paddock.sock"
	(AS_EXEC=exec as "$who" "$bin" serve --quiet >"$T/serve-$who.log" 2>&1) &
	spid=$!
	for i in $(seq 1 200); do
		[ -S "$sock" ] && as "$who" "$bin" ps --socket "$sock" >/dev/null 2>&1 && break
		sleep 0.05
	done
	id=$(as "$who" "$bin" create --socket "$sock" 2>"$T/err")
	out=$(as "$who" "$bin" exec --socket "$sock" "$id" -- sh -c 'echo served' 2>>"$T/err")
	is "$out" served "$who: the installed daemon creates a sandbox and runs an exec in it ($(head -c 200 "$T/err"))"
	as "$who" "$bin" kill --socket "$sock" "$id" >/dev/null 2>&1
	kill -TERM $spid 2>/dev/null
	wait $spid
done

# Copied away from its tree, paddock looks in the compiled-in PREFIX/libexec/paddock: first
# with nothing there (the error names the path and the variable), then with the installed
# tree at /usr/local.
mkdir "$T/elsewhere" && cp "$T/dest-root/usr/local/bin/paddock" "$T/elsewhere/paddock" &&
	chmod 0755 "$T/elsewhere" "$T/elsewhere/paddock"
(cd "$ws" && as root "$T/elsewhere/paddock" run -- true) 2>"$T/err"; rc=$?
is "$rc" 125 "a paddock with no helpers anywhere fails to set up (125)"
grep -q "/usr/local/libexec/paddock/paddock-init.*PADDOCK_INIT" "$T/err"
ok $? "the error names the compiled-in path and PADDOCK_INIT ($(head -c 200 "$T/err"))"
mount --bind "$T/dest-root/usr/local" /usr/local
for who in root user; do
	out=$(cd "$ws" && as "$who" "$T/elsewhere/paddock" run -- echo ran 2>"$T/err"); rc=$?
	is "$rc:$out" "0:ran" "$who: a copy of paddock finds the helpers at the compiled-in /usr/local/libexec/paddock ($(head -c 200 "$T/err"))"
	out=$(as "$who" "$T/elsewhere/paddock" profile show default 2>"$T/err" | head -1)
	is "$out" "name: default" "$who: ... and paddock-full there ($(head -c 200 "$T/err"))"
done
umount /usr/local

# Every page renders without a warning from man, and every verb of --help has one.
for who in root user; do
	man1="$T/dest-$who/usr/local/share/man/man1"
	verbs=$(as "$who" "$T/dest-$who/usr/local/bin/paddock" --help |
		sed -n '/^commands:/,/^$/p' | awk 'NF && $1 != "commands:" && $1 != "help" {print $1}')
	missing=""
	for v in $verbs; do [ -f "$man1/paddock-$v.1" ] || missing="$missing $v"; done
	is "$missing" "" "$who: every verb of 'paddock --help' has a page"
	bad=""
	for f in "$man1"/*.1; do
		out=$(as "$who" env MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -l -P cat "$f" 2>"$T/err")
		if [ -s "$T/err" ] || ! printf '%s' "$out" | grep -q '^SYNOPSIS'; then
			bad="$bad $(basename "$f"): $(head -c 120 "$T/err")"
		fi
	done
	is "$bad" "" "$who: man -l renders each of the $(ls "$man1" | wc -l) pages without a warning"
done
out=$(env MANWIDTH=80 LC_ALL=C.UTF-8 man -l -P cat "$T/dest-root/usr/local/share/man/man1/paddock-run.1")
printf '%s' "$out" | grep -q -- "--quiet"; ok $? "paddock-run(1) lists the options of 'paddock run --help' (--quiet)"

# Back to the clone: make uninstall removes everything install put there.
umount "$SRC" "$BUILD"
for who in root user; do
	as "$who" make -s -C "$SRC" uninstall PREFIX=/usr/local DESTDIR="$T/dest-$who" \
		>"$T/uninstall-$who.log" 2>&1
	ok $? "$who: make uninstall succeeds$(tail -3 "$T/uninstall-$who.log")"
	left=$(find "$T/dest-$who" ! -type d; find "$T/dest-$who" -type d -name '*paddock*')
	is "$left" "" "$who: nothing of paddock is left under DESTDIR"
done
done_testing
