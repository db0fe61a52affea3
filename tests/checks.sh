#!/bin/sh
# Static checks and short fuzz runs, as TAP.
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
grep_check "process creation only in ns.c and init.c" "$(grep -nE '\b(fork|vfork|clone|clone3)\(' \
	$(git ls-files 'src/*.c') | grep -v '^src/ns.c:\|^src/init.c:')"
grep_check "no exit() or abort() in libpaddock (but pdk_oom)" "$(grep -nE '(^|[^_a-z])(exit|abort)\(' \
	$(git ls-files 'src/*.c' | grep -v '^src/cli/\|^src/init.c\|^src/seccomp-gen.c') |
	grep -v '^src/util.c:.*abort();')"

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
