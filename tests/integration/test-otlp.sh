#!/bin/bash
# paddock run --otlp: the OTLP/HTTP JSON export against a loopback receiver
# (otlp-receiver.py): payloads of a real run, retry on 503, and a dead or a
# hanging collector that costs at most the close deadline and a warning.
# Every case runs as root and as an unprivileged user (nobody, via setpriv).
set -u
. "$(dirname "$0")/lib-run.sh"
: "${PADDOCK_OTLP:=$(dirname "$PADDOCK")/paddock-otlp}"
HERE=$(cd "$(dirname "$0")" && pwd)
# Found next to paddock, as an installed one is.
cp "$PADDOCK_OTLP" "$T/bin/paddock-otlp"
chmod 0755 "$T/bin/paddock-otlp"
RPID=""
trap 'stop_receiver; undelegate_cgroup; rm -rf "$T"' EXIT

# start_receiver MODE: sets RDIR and RPORT.
start_receiver() {
	local i
	RDIR=$(mktemp -d "$T/recv-XXXXXX")
	python3 "$HERE/otlp-receiver.py" "$1" "$RDIR" &
	RPID=$!
	for i in $(seq 100); do [ -f "$RDIR/port" ] && break; sleep 0.05; done
	RPORT=$(cat "$RDIR/port" 2>/dev/null)
	touch "$RDIR/requests.jsonl"
}
stop_receiver() {
	[ -n "$RPID" ] && kill "$RPID" 2>/dev/null && wait "$RPID" 2>/dev/null
	RPID=""
}
# A loopback port with no listener: bound by this (short-lived) python, then closed.
dead_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# facts REQUESTS [EVENTS]: what the receiver got, read once; fact NAME: one line of it.
facts() { FACTS=$(python3 "$HERE/otlp-check.py" "$@"); }
fact() { printf '%s\n' "$FACTS" | grep "^$1=" ; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

check_payload() {
	local who=$1 out rc f ev="$T/home/ev-otlp-$1.jsonl"
	start_receiver ok
	rm -f "$ev"
	out=$(OTEL_EXPORTER_OTLP_HEADERS='x-api-key=s3cr%65t' OTEL_SERVICE_NAME=paddock-test \
		prun "$who" --events "$ev" --otlp "http://127.0.0.1:$RPORT/" -- sh -c 'echo hi; exit 3' \
		2>"$T/err"); rc=$?
	stop_receiver
	is "$rc" 3 "$who: the command's exit status is unaffected by the export"
	is "$out" hi "$who: the command's output is unaffected"
	grep -q "not exported\|OTLP" "$T/err"; is $? 1 "$who: no warning when the collector takes everything"
	facts "$RDIR/requests.jsonl" "$ev"
	for f in \
		"paths=/v1/logs,/v1/traces" \
		"content_type=application/json" \
		"api_key=s3cret" \
		"kinds=sandbox.create,process.exec,process.exit,sandbox.destroy" \
		"severities=INFO,INFO,INFO,INFO" \
		"int64_as_strings=True" \
		"service=paddock-test" \
		"service_version_set=True" \
		"resource_sandbox_is_run=True" \
		"exec_args=sh -c echo hi; exit 3" \
		"exec_pid_type=intValue" \
		"span_names=exec sh,sandbox" \
		"root_has_parent=False" \
		"trace_id_is_sandbox=True" \
		"root_span_id_hex=True" \
		"process_parent_is_root=True" \
		"process_same_trace=True" \
		"process_exit_code=3" \
		"process_status=2" \
		"process_logs_in_process_span=True" \
		"process_within_sandbox=True"; do
		is "$(fact "${f%%=*}")" "$f" "$who: received $f"
	done
}

check_retry() {
	local who=$1 rc
	start_receiver flaky
	prun "$who" --otlp "http://127.0.0.1:$RPORT" -- true 2>"$T/err"; rc=$?
	stop_receiver
	is "$rc" 0 "$who: exit status 0 with a flaky collector"
	facts "$RDIR/requests.jsonl"
	is "$(fact statuses)" "statuses=503,200,200" \
		"$who: the 503 is retried, then logs and traces get 200"
	is "$(fact paths)" "paths=/v1/logs,/v1/logs,/v1/traces" \
		"$who: the retried request is the logs request"
	case "$(fact logs_retry_after_s)" in
	logs_retry_after_s=1.*|logs_retry_after_s=2.*) ok 0 "$who: Retry-After: 1 is honoured" ;;
	*) ok 1 "$who: Retry-After: 1 is honoured ($(fact logs_retry_after_s))" ;;
	esac
	grep -q "not exported" "$T/err"; is $? 1 "$who: no warning once the retry succeeded"
}

# $1 who, $2 dead|hang. The deadline is 1 s; a request's own timeout is 5 s, so a
# run that waited for the collector would last 5 s or more.
check_unreachable() {
	local who=$1 what=$2 url rc t0 t1
	if [ "$what" = hang ]; then start_receiver hang; url="http://127.0.0.1:$RPORT"
	else url="http://127.0.0.1:$(dead_port)"; fi
	t0=$(now_ms)
	OTEL_EXPORTER_OTLP_HEADERS='authorization=Bearer%20TOPSECRET' PADDOCK_OTLP_DEADLINE=1s \
		prun "$who" --otlp "$url" -- sh -c 'sleep 0.2; exit 4' 2>"$T/err"; rc=$?
	t1=$(now_ms)
	is "$rc" 4 "$who: $what collector: the command's exit status is unaffected"
	[ $((t1 - t0)) -lt 3500 ]; ok $? "$who: $what collector: the run ends by the 1 s close deadline (took $((t1 - t0)) ms; one request's timeout is 5 s)"
	grep -Eq "([0-9]+) of \\1 event\\(s\\) not exported to '$url' within the 1000 ms deadline" "$T/err"
	ok $? "$who: $what collector: a warning counts the events not exported: $(head -c 300 "$T/err")"
	grep -q TOPSECRET "$T/err"; is $? 1 "$who: $what collector: the header value is not in the warning"
	if [ "$what" = hang ]; then
		stop_receiver
		facts "$RDIR/requests.jsonl"
		is "$(fact paths)" "paths=/v1/logs" \
			"$who: the hanging collector got the request and never answered"
	fi
}

check_config() {
	local who=$1 rc
	prun "$who" --otlp ftp://127.0.0.1/ -- true 2>"$T/err"; rc=$?
	is "$rc" 122 "$who: --otlp with another scheme is a bad option (122)"
	grep -q "only http:// and https://" "$T/err"; ok $? "$who: the error says which schemes"
	prun "$who" --otlp http://user:pw@127.0.0.1/ -- true 2>"$T/err"; rc=$?
	is "$rc" 122 "$who: --otlp with user:password@ is refused"
	grep -q "pw@" "$T/err"; is $? 1 "$who: the refused credentials are not echoed"
	OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4318 prun "$who" -- sh -c 'exit 6' 2>"$T/err"; rc=$?
	is "$rc" 6 "$who: a bad OTEL_EXPORTER_OTLP_ENDPOINT does not stop the run"
	grep -q "OTLP export disabled: OTEL_EXPORTER_OTLP_ENDPOINT" "$T/err"; ok $? "$who: ... but says export is off"
	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9 OTEL_EXPORTER_OTLP_HEADERS='k=SECRETVALUE%0d%0aX: y' \
		prun "$who" -- true 2>"$T/err"; rc=$?
	is "$rc" 0 "$who: a header value with CR LF disables the export, not the run"
	grep -q "OTLP export disabled" "$T/err" && ! grep -q SECRETVALUE "$T/err"
	ok $? "$who: the warning names the header, not its value"
	PADDOCK_OTLP=/nonexistent/paddock-otlp prun "$who" --otlp http://127.0.0.1:9 -- sh -c 'exit 5' \
		2>"$T/err"; rc=$?
	is "$rc" 5 "$who: a missing exporter helper does not stop the run"
	grep -q "OTLP export disabled: cannot run the OTLP exporter '/nonexistent/paddock-otlp'" "$T/err"
	ok $? "$who: ... and the warning names it"
}

for who in root user; do
	check_payload "$who"
	check_retry "$who"
	check_unreachable "$who" dead
	check_unreachable "$who" hang
	check_config "$who"
done
done_testing
