# Helpers for the daemon tests, sourced after lib-run.sh.
#   serve_start root|user [ARGS...]   start `paddock serve` as root or nobody (own state and run dirs)
#   serve_stop root|user [SIG]        stop it (SIGTERM by default) and wait; $SERVE_RC is its status
#   api root|user METHOD PATH [BODY]  HTTP over the unix socket, as that identity: sets $CODE and $BODY
#   tcp METHOD URL TOKEN [BODY]       HTTP over TCP with a bearer token: sets $CODE and $BODY
#   jq_get JSON EXPR                  one value out of JSON (a.b.0.c; jq)

# as WHO CMD...: run CMD as root, or as nobody with the daemon's environment.
as() {
	local who=$1
	shift
	if [ "$who" = root ]; then
		env PADDOCK_INIT="$T/bin/paddock-init" PADDOCK_STATE_DIR="$T/serve-root/state" \
			PADDOCK_RUNTIME_DIR="$T/serve-root/run" "${SERVE_ENV[@]}" "$@"
	else
		setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all \
			env HOME="$T/home" PADDOCK_INIT="$T/bin/paddock-init" \
			PADDOCK_STATE_DIR="$T/serve-user/state" PADDOCK_RUNTIME_DIR="$T/serve-user/run" \
			"${SERVE_ENV[@]}" "$@"
	fi
}
SERVE_ENV=()

# as_exec WHO CMD...: the same, replacing the calling (sub)shell, so that $! is CMD's pid.
as_exec() {
	local who=$1
	shift
	if [ "$who" = root ]; then
		exec env PADDOCK_INIT="$T/bin/paddock-init" PADDOCK_STATE_DIR="$T/serve-root/state" \
			PADDOCK_RUNTIME_DIR="$T/serve-root/run" "${SERVE_ENV[@]}" "$@"
	fi
	exec setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all \
		env HOME="$T/home" PADDOCK_INIT="$T/bin/paddock-init" \
		PADDOCK_STATE_DIR="$T/serve-user/state" PADDOCK_RUNTIME_DIR="$T/serve-user/run" \
		"${SERVE_ENV[@]}" "$@"
}

sock_of() { echo "$T/serve-$1/run/paddock.sock"; }

serve_start() {
	local who=$1 i
	shift
	mkdir -p "$T/serve-$who"
	[ "$who" = user ] && chown $UNPRIV_UID:$UNPRIV_UID "$T/serve-$who"
	(as_exec "$who" "$T/bin/paddock" serve "$@" >"$T/serve-$who.log" 2>&1) &
	eval "SERVE_PID_$who=$!"
	# Ready when it answers (a socket left by a killed daemon may still be at the path).
	for i in $(seq 1 200); do
		[ "$(as "$who" curl -s -o /dev/null -w '%{http_code}' --unix-socket "$(sock_of "$who")" \
			http://paddock/v1/health 2>/dev/null)" = 200 ] && return 0
		sleep 0.05
	done
	echo "# the daemon did not start:"; sed 's/^/#   /' "$T/serve-$who.log"
	return 1
}

serve_pid() { eval "echo \$SERVE_PID_$1"; }

serve_stop() {
	local pid
	pid=$(serve_pid "$1")
	kill -"${2:-TERM}" "$pid" 2>/dev/null
	wait "$pid"
	SERVE_RC=$?
}

api() {
	local who=$1 method=$2 path=$3 out
	out=$(mktemp "$T/api-XXXXXX")
	chmod 0666 "$out"
	if [ $# -ge 4 ]; then
		CODE=$(printf '%s' "$4" | as "$who" curl -s -o "$out" -w '%{http_code}' \
			--unix-socket "$(sock_of "$who")" -X "$method" --data-binary @- \
			-H 'Content-Type: application/json' "http://paddock$path")
	else
		CODE=$(as "$who" curl -s -o "$out" -w '%{http_code}' --unix-socket "$(sock_of "$who")" \
			-X "$method" "http://paddock$path")
	fi
	BODY=$(cat "$out")
	rm -f "$out"
}

tcp() {
	local method=$1 url=$2 token=$3 out
	out=$(mktemp "$T/api-XXXXXX")
	if [ $# -ge 4 ]; then
		CODE=$(printf '%s' "$4" | curl -s -o "$out" -w '%{http_code}' -X "$method" \
			-H "Authorization: Bearer $token" --data-binary @- "$url")
	elif [ -n "$token" ]; then
		CODE=$(curl -s -o "$out" -w '%{http_code}' -X "$method" \
			-H "Authorization: Bearer $token" "$url")
	else
		CODE=$(curl -s -o "$out" -w '%{http_code}' -X "$method" "$url")
	fi
	BODY=$(cat "$out")
	rm -f "$out"
}

jq_get() {
	local f="" k
	local IFS=.
	for k in $2; do
		case $k in
		'') ;;
		*[!0-9]*) f="$f.\"$k\"" ;;
		*) f="$f[$k]" ;;
		esac
	done
	printf '%s' "$1" | jq -r -c "${f:-.} | if . == null then \"\" else . end" 2>/dev/null
}

# Does this build have the supervisor (`paddock supervise`)? Sandbox tests need it.
have_supervisor() {
	"$T/bin/paddock" supervise --help >/dev/null 2>&1
}

# Supervisors outlive their daemon by design: at exit, a test kills the ones that run under its
# own $T (a check that failed mid-way can leave live sandboxes), so the next suite starts clean.
reap_supervisors() {
	local p path i
	for p in $(pgrep -f 'paddock supervise --id '); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q "^PADDOCK_RUNTIME_DIR=$T/" &&
			kill -9 "$p" 2>/dev/null
	done
	# Their sandboxes' cgroups, which a supervisor killed with SIGKILL cannot remove, and a
	# daemon removes only when started again on the same runtime directory: each one's
	# RUNDIR/sb/ID/cgroup says where they are ("VERSION CTRLS PATH" per directory,
	# docs/internals/cgroup.md), as a slot of RUNDIR/cgroups does for a `paddock run` killed
	# with no later run on that directory to remove it. What is left in them is killed,
	# then they are removed.
	while read -r path; do
		case "$path" in /sys/fs/cgroup/*/paddock-*) ;; *) continue ;; esac
		for i in $(seq 50); do
			{ rmdir "$path" 2>/dev/null || [ ! -d "$path" ]; } && break
			kill -9 $(cat "$path/cgroup.procs" 2>/dev/null) 2>/dev/null
			sleep 0.02
		done
	done < <(
		find "$T" -maxdepth 6 -path '*/sb/*/cgroup' -type f -exec cat {} + 2>/dev/null |
			awk '{print $3}'
		find "$T" -maxdepth 5 -name cgroups -type f -exec cat {} + 2>/dev/null | python3 -c '
import sys
d = sys.stdin.buffer.read()
for k in range(0, len(d), 4096):
    slot = d[k:k + 4096].split(b"\0", 1)[0].decode(errors="replace")
    if slot[:1].isdigit():
        print("\n".join(line.split(" ", 2)[-1] for line in slot.splitlines()))')
	return 0
}

# pc WHO ARGS...: the paddock CLI as WHO, with that identity's daemon environment.
pc() {
	local who=$1
	shift
	(cd "$T/home" && as "$who" "$T/bin/paddock" "$@")
}
