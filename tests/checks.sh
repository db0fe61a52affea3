#!/bin/sh
# Static checks and short fuzz runs, as TAP.
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fail=1; echo "not ok $n - $1"; }

# Banned functions (CONVENTIONS.md "Build and warnings"): curl's list plus ours.
banned=$(grep -nE '\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|gets|system|popen)\s*\(' \
	$(git ls-files 'src/*.c' 'src/*.h') 2>/dev/null | grep -v 'snprintf\|vsnprintf\|asprintf')
if [ -z "$banned" ]; then ok "no banned functions in src/"; else echo "$banned" | sed 's/^/# /'; notok "no banned functions in src/"; fi

# Raw process creation only in ns.c (clone3) and init.c (fork).
raw=$(grep -nE '\b(fork|vfork|clone)\s*\(' $(git ls-files 'src/*.c') | grep -v '^src/ns.c\|^src/init.c')
if [ -z "$raw" ]; then ok "process creation only in ns.c and init.c"; else echo "$raw" | sed 's/^/# /'; notok "process creation only in ns.c and init.c"; fi

# No exit() in the library.
ex=$(grep -nE '(^|[^_])\bexit\s*\(' $(git ls-files 'src/*.c' | grep -v '^src/cli/\|^src/init.c'))
if [ -z "$ex" ]; then ok "no exit() in libpaddock"; else echo "$ex" | sed 's/^/# /'; notok "no exit() in libpaddock"; fi

if command -v clang-format >/dev/null; then
	if clang-format --dry-run -Werror $(git ls-files '*.[ch]') 2>/dev/null; then ok "clang-format clean"
	else notok "clang-format clean (run 'make format')"; fi
fi

# Short libFuzzer runs (clang) of every fuzz target.
if sh tests/fuzz/run-fuzz.sh 20 >"${TMPDIR:-/tmp}/paddock-fuzz.log" 2>&1; then
	ok "fuzz targets: 20 s each, no crash"
else
	sed 's/^/# /' "${TMPDIR:-/tmp}/paddock-fuzz.log" | tail -30
	notok "fuzz targets: 20 s each, no crash"
fi
echo "1..$n"
exit $fail
