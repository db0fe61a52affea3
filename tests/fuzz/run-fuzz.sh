#!/bin/sh
# Build every fuzz target with clang + libFuzzer + ASan/UBSan and run each for SECONDS.
#   tests/fuzz/run-fuzz.sh [SECONDS]
set -eu
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
out="$top/build-fuzz"
mkdir -p "$out"
command -v clang >/dev/null || { echo "clang is not installed (make setup installs it)"; exit 1; }
srcs=$(cd "$top" && ls src/*.c | grep -v 'src/init.c')
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -DPDK_FUZZING -iquote $top/src"
libs="$(pkg-config --cflags --libs libseccomp jansson yaml-0.1) -lm"
for t in "$top"/tests/fuzz/fuzz-*.c; do
	name=$(basename "$t" .c)
	corpus="$top/tests/fuzz/corpus-${name#fuzz-}"
	# shellcheck disable=SC2086
	(cd "$top" && clang $flags -o "$out/$name" "$t" $srcs $libs)
	work="$out/$name-corpus"
	mkdir -p "$work"
	echo "== $name: $secs s"
	"$out/$name" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 "$work" "$corpus" 2>&1 | tail -12
done
