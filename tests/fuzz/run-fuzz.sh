#!/bin/bash
# Run every libFuzzer target for SECONDS each, JOBS at a time, and report as TAP: one line
# per target as it ends.
#   tests/fuzz/run-fuzz.sh [SECONDS] [BUILD_DIR]    (defaults: 60, build-asan)
#   FUZZ_JOBS=N   targets run at once (default 1)
# The targets are built by Meson in BUILD_DIR, the clang ASan+UBSan build with -Dfuzz=true
# (tests/asan-build.sh sets it up and builds it first), from the same layer libraries as
# the rest of that build. Each tests/fuzz/fuzz-NAME.c runs on its corpus (corpus-NAME, only
# read) plus a work corpus of its own, BUILD_DIR/fuzz-work/NAME; the run's log is NAME.log
# beside it, and an input that crashed it NAME.crash-SHA1. Exit status 0 when every target
# ran its time without a crash.
set -u
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=${2:-build-asan}
case $dir in /*) ;; *) dir="$top/$dir" ;; esac
jobs=${FUZZ_JOBS:-1}

if ! sh "$top/tests/asan-build.sh" "$dir" >&2; then
	echo "not ok - the fuzz targets build (tests/asan-build.sh $dir)"
	echo "1..1"
	exit 1
fi
mkdir -p "$dir/fuzz-work"

# run_one NAME: run one target; its TAP line (and on failure the end of its log) to stdout.
run_one() {
	local name=$1 exe="$dir/tests/$1" work="$dir/fuzz-work/${1#fuzz-}" stats
	mkdir -p "$work"
	if [ ! -x "$exe" ]; then
		echo "not ok - $name: not built (a target missing from tests/meson.build's fuzz_targets?)"
		return 1
	fi
	# UBSan's findings end the run like ASan's (the build lets them recover).
	if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$exe" -max_total_time="$secs" \
		-max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work." "$work" "$top/tests/fuzz/corpus-${name#fuzz-}" \
		>"$work.log" 2>&1; then
		stats=$(sed -n 's/^stat::number_of_executed_units: */runs /p
			s/^stat::peak_rss_mb: */peak RSS MiB /p' "$work.log" | paste -sd, - | sed 's/,/, /')
		echo "ok - $name: $secs s, no crash ($stats)"
		return 0
	fi
	echo "not ok - $name: crashed or failed (its log and input: $work.*)"
	tail -30 "$work.log" | sed 's/^/#   /'
	return 1
}

# A target's lines are printed whole as it ends (the job writes them to a file first).
declare -A name_of=()
n=0
status=0
finish_one() {
	local pid
	wait -n -p pid
	cat "$dir/fuzz-work/${name_of[$pid]}.tap"
	grep -q '^ok ' "$dir/fuzz-work/${name_of[$pid]}.tap" || status=1
	unset "name_of[$pid]"
}
for src in "$top"/tests/fuzz/fuzz-*.c; do
	name=$(basename "$src" .c)
	n=$((n + 1))
	[ "${#name_of[@]}" -lt "$jobs" ] || finish_one
	run_one "$name" >"$dir/fuzz-work/$name.tap" &
	name_of[$!]=$name
done
while [ "${#name_of[@]}" -gt 0 ]; do finish_one; done
echo "1..$n"
exit $status
