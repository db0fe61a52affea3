#!/bin/sh
# `make run` with no ARGS: a short tour of the sandbox at work.
p=${1:-./build/paddock}
say() { printf '\n\033[1m$ %s\033[0m\n' "$1"; }

say "paddock run -- sh -c 'id; hostname; ls /; ls /home /root'"
"$p" run -- sh -c 'id; hostname; ls /; ls /home /root 2>&1'

say "paddock run -- grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status"
"$p" run -- grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status

say "paddock run -- bash -c 'cat /proc/net/dev; exec 3<>/dev/tcp/1.1.1.1/80'   # no network"
"$p" run -- bash -c 'tail -n +3 /proc/net/dev | cut -d: -f1; exec 3<>/dev/tcp/1.1.1.1/80' 2>&1

say "paddock run --timeout 1s -- sh -c 'while :; do :; done'"
"$p" run --timeout 1s -- sh -c 'while :; do :; done'
echo "exit status $?"

say "paddock run --memory 64M -- python3 -c 'bytearray(1 << 30)'"
"$p" run --memory 64M -- python3 -c 'bytearray(1 << 30)'
echo "exit status $?"

say "paddock run --stats -- sh -c 'echo hello from the sandbox'"
"$p" run --stats -- sh -c 'echo hello from the sandbox'

pa=$(cd "$(dirname "$p")" && pwd)/$(basename "$p")
demo=$(mktemp -d /tmp/paddock-demo-XXXXXX)
export PADDOCK_STATE_DIR="$demo/state"
mkdir -p "$demo/project/build" && printf 'line one\n' > "$demo/project/notes.txt" && touch "$demo/project/build/a.o"
say "cd project && paddock run -- sh -c 'echo line two >> notes.txt; rm -r build'   # an overlay"
(cd "$demo/project" && "$pa" run -- sh -c 'echo line two >> notes.txt; rm -r build')
say "ls project   # the directory itself is untouched"
ls "$demo/project"
id=$(ls "$PADDOCK_STATE_DIR/ws")
say "paddock ws diff --patch ${id%%-*}"
"$p" ws diff --patch "${id%%-*}"
say "paddock ws commit ${id%%-*}"
"$p" ws commit "${id%%-*}" && ls "$demo/project"
rm -rf "$demo"
