#!/bin/sh
# Static checks and short fuzz runs, as TAP.
#   tests/checks.sh [BUILD_DIR] [ASAN_BUILD_DIR]
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fail=1; echo "not ok $n - $1"; }
# grep_check DESCRIPTION MATCHES: ok when MATCHES is empty, else show them.
grep_check() {
	if [ -z "$2" ]; then ok "$1"; else echo "$2" | sed 's/^/# /'; notok "$1"; fi
}

# A call is the name directly followed by '(' (clang-format's style), so prose is not matched.
grep_check "no banned functions in src/ (CONVENTIONS.md)" "$(grep -nE \
	'\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|gets|system|popen)\(' \
	$(git ls-files 'src/*.c' 'src/*.h'))"
grep_check "process creation only in base/proc.c and init/init.c" "$(grep -nE '\b(fork|vfork|clone|clone3)\(' \
	$(git ls-files 'src/*.c') | grep -v '^src/base/proc.c:\|^src/init/init.c:')"
# The library: every folder of src/ but the front ends' (cli/, daemon/), the
# binaries' own mains (init/, exporter/paddock-otlp.c) and build-time tools/.
lib_files() {
	git ls-files "$@" | grep -v '^src/cli/\|^src/daemon/\|^src/init/\|^src/tools/\|^src/exporter/paddock-otlp.c'
}
grep_check "no exit() or abort() in the library (but pdk_oom)" "$(grep -nE '(^|[^_a-z])(exit|abort)\(' \
	$(lib_files 'src/*.c') | grep -v '^src/base/util.c:.*abort();')"
# A library folder never prints: messages go to the log its caller gave (base/log.h).
grep_check "no library folder prints (stdout, stderr, printf, puts, perror)" "$(grep -nE \
	'\((stdout|stderr)\b|,\s*(stdout|stderr)\s*\)|\b(printf|vprintf|puts|putchar|perror)\(' \
	$(lib_files 'src/*.c' 'src/*.h'))"

# Environment variables are read by front ends only (base/settings.h): the library gets values.
grep_check "no library folder reads the environment (getenv, environ)" "$(grep -nE \
	'\b(getenv|secure_getenv|setenv|unsetenv|putenv|clearenv)\(|\benviron\b' \
	$(lib_files 'src/*.c' 'src/*.h') | grep -vE '^[^:]+:[0-9]+:\s*(\*|/\*)')"

# The control layer speaks no HTTP (front doors do): no libevent-http header, no evhttp call.
grep_check "src/control/ includes no event2/http or event2/bufferevent header, calls no evhttp_" \
	"$(grep -nE '#include <event2/(http|bufferevent)[^>]*>|\bevhttp_[a-z_]+\(' \
	$(git ls-files 'src/control/*.c' 'src/control/*.h'))"

# The layers: includes, symbols and public headers (tests/layers.py, src/meson.build).
build=${1:-build}
layers_log=$(mktemp)
if python3 tests/layers.py "$build" >"$layers_log" 2>&1; then
	ok "layers: no include or symbol against the direction, public headers only"
else
	grep -v '^ok ' "$layers_log" | sed 's/^/# /' | head -40
	notok "layers: no include or symbol against the direction, public headers only"
fi
rm -f "$layers_log"

if command -v clang-format >/dev/null; then
	if clang-format --dry-run -Werror $(git ls-files '*.[ch]') 2>/dev/null; then ok "clang-format clean"
	else notok "clang-format clean (run 'make format')"; fi
fi

# Short libFuzzer runs of every fuzz target, built by Meson in the clang sanitizer build
# (ASAN_BUILD_DIR, default build-asan; tests/fuzz/run-fuzz.sh sets it up). make test runs
# them beside the other suites instead, a TAP line per target (tests/run-all.sh), and sets
# CHECKS_FUZZ=0 to leave them out here.
if [ "${CHECKS_FUZZ:-1}" = 1 ]; then
	fuzz_log=$(mktemp)
	if bash tests/fuzz/run-fuzz.sh 20 "${2:-build-asan}" >"$fuzz_log" 2>&1; then
		ok "fuzz targets: 20 s each, no crash"
	else
		grep -v '^ok ' "$fuzz_log" | sed 's/^/# /' | tail -30
		notok "fuzz targets: 20 s each, no crash"
	fi
	rm -f "$fuzz_log"
fi
echo "1..$n"
exit $fail
