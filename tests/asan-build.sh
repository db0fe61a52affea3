#!/bin/sh
# Set up (when needed) and build the sanitizer build: clang, ASan+UBSan, and the libFuzzer
# targets (-Dfuzz=true). One build serves the ASan+UBSan suites of make test
# (tests/run-all.sh) and the fuzz runs (tests/fuzz/run-fuzz.sh).
#   tests/asan-build.sh [BUILD_DIR]    (default build-asan)
# A BUILD_DIR configured otherwise (a gcc ASan build, say) is set up again in place.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build-asan}
case $dir in /*) ;; *) dir="$top/$dir" ;; esac
opts="-Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true"
command -v clang >/dev/null || { echo "asan-build: clang is not installed (make setup installs it)" >&2; exit 1; }

# Whether DIR is already a build with the fuzz targets (which meson.build allows with clang only).
is_fuzz_build() {
	[ -f "$dir/build.ninja" ] || return 1
	meson introspect "$dir" --buildoptions 2>/dev/null |
		python3 -c 'import json, sys
sys.exit(0 if any(o["name"] == "fuzz" and o["value"] is True for o in json.load(sys.stdin)) else 1)'
}

if [ ! -f "$dir/build.ninja" ]; then
	# shellcheck disable=SC2086
	(cd "$top" && CC=clang meson setup "$dir" $opts >/dev/null)
elif ! is_fuzz_build; then
	echo "asan-build: $dir is not the clang fuzz build; setting it up again"
	# shellcheck disable=SC2086
	(cd "$top" && CC=clang meson setup --wipe "$dir" $opts >/dev/null)
fi
ninja -C "$dir" >/dev/null || ninja -C "$dir"
