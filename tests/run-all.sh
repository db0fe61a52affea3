#!/bin/sh
# Run every suite and print one closing line: "N passed, N failed".
#   tests/run-all.sh BUILD_DIR ASAN_BUILD_DIR
# Counts: each TAP subtest of a suite, each non-TAP meson test, each check below.
set -u
build=${1:-build}
asan=${2:-build-asan}
top=$(cd "$(dirname "$0")/.." && pwd)
logs="$top/$build/meson-logs"
rm -f "$logs"/paddock-*.json "$top/$asan/meson-logs"/paddock-*.json
status=0

echo "== unit, fuzz-corpus and integration tests ($build)"
meson test -C "$build" --no-rebuild --print-errorlogs --logbase paddock-main || status=1

echo "== unit tests and the run/profile/egress/egress-tls/egress-tunnel/exectrace/audit/supervise/serve/serve-gaps/serve-body/cli-daemon integration tests under ASan+UBSan ($asan)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	meson test -C "$asan" --no-rebuild --print-errorlogs --logbase paddock-asan \
	--suite unit --suite fuzz || status=1
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	meson test -C "$asan" --no-rebuild --print-errorlogs --logbase paddock-asan-int \
	run profile egress egress-tls egress-tunnel exectrace audit supervise serve serve-gaps serve-body cli-daemon || status=1

echo "== static checks and short fuzz runs"
checks="$logs/paddock-checks.tap"
sh "$top/tests/checks.sh" "$build" > "$checks" 2>&1 || status=1
cat "$checks"

python3 "$top/tests/summary.py" "$logs"/paddock-main.json "$top/$asan"/meson-logs/paddock-asan.json \
	"$top/$asan"/meson-logs/paddock-asan-int.json "$checks" || status=1
exit $status
