#!/bin/sh
# `make run` with no ARGS: a short tour of the sandbox at work.
p=${1:-./build/paddock}
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
say paddock run -- sh -c 'id; hostname; ls /; ls /home /root'
"$p" run -- sh -c 'id; hostname; ls /; ls /home /root 2>&1'
say paddock run -- sh -c 'cat /proc/self/status | grep -E "^(Cap|NoNewPrivs|Seccomp)"'
"$p" run -- sh -c 'grep -E "^(Cap|NoNewPrivs|Seccomp)" /proc/self/status'
say paddock run -- sh -c 'ip link 2>/dev/null || cat /proc/net/dev; exec 3<>/dev/tcp/1.1.1.1/80'
"$p" run -- bash -c 'cat /proc/net/dev | tail -n +3 | cut -d: -f1; exec 3<>/dev/tcp/1.1.1.1/80' 2>&1
say paddock run --timeout 1s -- sh -c 'while :; do :; done'
"$p" run --timeout 1s -- sh -c 'while :; do :; done'; echo "exit status $?"
say paddock run --stats -- sh -c 'echo hello from the sandbox'
"$p" run --stats -- sh -c 'echo hello from the sandbox'
