#!/bin/sh
# Run every suite and print one closing line: "N passed, N failed".
#   tests/run-all.sh BUILD_DIR ASAN_BUILD_DIR
#   TEST_JOBS=N   suites meson runs at once (default 4; the integration suites mostly wait)
# BUILD_DIR is built already (make build). ASAN_BUILD_DIR, the clang ASan+UBSan build that
# also has the libFuzzer targets, is set up and built here (tests/asan-build.sh).
# Counts: each TAP subtest of a suite, each non-TAP meson test, each check of
# tests/checks.sh, each fuzz target's run.
#
# The phases overlap so that both cores stay busy while suites wait on their sandboxes:
#   1. the sanitizer build starts in the background, while
#   2. BUILD_DIR's suites run: unit, fuzz corpora, API, integration;
#   3. the fuzz runs (20 s per target, two at a time) start in the background, at the
#      lowest priority, once that build is done, while
#   4. the ASan+UBSan suites run, and then
#   5. the static checks (tests/checks.sh);
#   6. the fuzz runs' lines, each phase's time, and the summary.
# meson prints a line per suite as it ends, each phase its start.
set -u
build=${1:-build}
asan=${2:-build-asan}
jobs=${TEST_JOBS:-4}
top=$(cd "$(dirname "$0")/.." && pwd)
logs="$top/$build/meson-logs"
alogs="$top/$asan/meson-logs"
mkdir -p "$logs"
rm -f "$logs"/paddock-* "$alogs"/paddock-*.json
status=0
start=$(date +%s)
times=""
phase() { echo "== [$(elapsed)] $*"; }
elapsed() { s=$(($(date +%s) - start)); printf '%d:%02d' $((s / 60)) $((s % 60)); }
mark() { times="$times$1 $(($(date +%s) - $2)) s; "; }
# background LOG NICE CMD...: CMD in the background (its pid in $!), stdout and stderr to
# LOG, its exit status to LOG.rc, in a session of its own at nice value NICE. meson starts
# each suite in a session of its own, and with autogroup scheduling the CPU is shared out
# between sessions first: a nice value counts only within a session, so CMD's session (its
# autogroup) gets NICE too. At 0, CMD gets a suite's share; at 19, only what the suites and
# the rest of the machine leave.
background() {
	log=$1
	nice=$2
	shift 2
	setsid sh -c 'echo "$2" >/proc/self/autogroup 2>/dev/null; log=$1; nice=$2; shift 2
		nice -n "$nice" "$@" >"$log" 2>&1; echo $? >"$log.rc"' sh "$log" "$nice" "$@" &
}
# On the way out (an interrupt included), the background work goes too: its session's group.
pids=""
trap 'for p in $pids; do kill -- -"$p" 2>/dev/null; done' EXIT
trap 'exit 130' INT TERM

t=$(date +%s)
phase "sanitizer build ($asan) in the background"
background "$logs/paddock-asan-build.log" 0 sh "$top/tests/asan-build.sh" "$asan"
asan_pid=$!
pids="$pids $asan_pid"

t=$(date +%s)
phase "unit, fuzz-corpus, API and integration tests ($build)"
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes "$jobs" \
	--logbase paddock-main || status=1
mark "suites" "$t"

t=$(date +%s)
wait "$asan_pid"
if [ "$(cat "$logs/paddock-asan-build.log.rc" 2>/dev/null)" != 0 ]; then
	phase "the sanitizer build failed:"
	tail -40 "$logs/paddock-asan-build.log"
	status=1
fi
mark "wait-asan-build" "$t"

phase "fuzz runs, 20 s per target, in the background ($asan)"
background "$logs/paddock-fuzz.tap" 19 env FUZZ_JOBS=2 bash "$top/tests/fuzz/run-fuzz.sh" 20 "$asan"
fuzz_pid=$!
pids="$pids $fuzz_pid"
fuzz_t=$(date +%s)

t=$(date +%s)
asan_suites="run profile egress egress-tls egress-tunnel exectrace audit supervise serve serve-gaps serve-body cli-daemon mcp mcp-conformance approvals"
phase "unit tests and the $(echo "$asan_suites" | tr ' ' /) suites under ASan+UBSan ($asan)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	meson test -C "$asan" --no-rebuild --print-errorlogs --num-processes "$jobs" \
	--logbase paddock-asan --suite unit --suite fuzz || status=1
# shellcheck disable=SC2086
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	meson test -C "$asan" --no-rebuild --print-errorlogs --num-processes "$jobs" \
	--logbase paddock-asan-int $asan_suites || status=1
mark "asan-suites" "$t"

t=$(date +%s)
phase "static checks"
checks="$logs/paddock-checks.tap"
CHECKS_FUZZ=0 sh "$top/tests/checks.sh" "$build" "$asan" >"$checks" 2>&1 || status=1
cat "$checks"
mark "checks" "$t"

t=$(date +%s)
wait "$fuzz_pid"
[ "$(cat "$logs/paddock-fuzz.tap.rc" 2>/dev/null)" = 0 ] || status=1
mark "wait-fuzz" "$t"
mark "fuzz" "$fuzz_t"
phase "fuzz runs"
cat "$logs/paddock-fuzz.tap"

phase "done: $times"
python3 "$top/tests/summary.py" "$logs"/paddock-main.json "$alogs"/paddock-asan.json \
	"$alogs"/paddock-asan-int.json "$checks" "$logs/paddock-fuzz.tap" || status=1
exit $status
