/*
 * bench/audit - throughput of the audit store on this machine.
 *
 *   build/bench-audit [EVENTS]   (default 200000)
 *
 * In a fresh temporary state directory: appends EVENTS events shaped like
 * process.exec records (about 330 bytes canonical) in batches of 1024, each
 * batch one transaction with the hash chain and a checkpoint every 1000
 * records, on one thread pinned to one core; then verifies the whole chain
 * and every signature; then pushes EVENTS events through an events hub with
 * the audit sink (redaction, queue, writer thread) and times emit-to-close.
 * Prints events per second for each.
 */
#include "common.h"
#include "audit.h"
#include "events.h"
#include "util.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 1024

static json_t *event(uint64_t n)
{
	json_t *e = json_object();
	json_t *a = json_object();
	char ts[40];
	char *argv[] = {"python3", "-c", "import sys; print(sys.version)", "--flag", NULL};

	pdk_events_format_ts(pdk_now_real_ns(), ts, sizeof(ts));
	pdk_json_set(a, "argv", pdk_json_strv(argv));
	pdk_json_set(a, "cwd", json_string("/home/user/project"));
	pdk_json_set(a, "pid", json_integer((json_int_t)(n % 4000000)));
	pdk_json_set(e, "ts", json_string(ts));
	pdk_json_set(e, "seq", json_integer((json_int_t)n));
	pdk_json_set(e, "sandbox", json_string("01a205b3-cbb4-7a35-9850-b97f24894160"));
	pdk_json_set(e, "session", json_null());
	pdk_json_set(e, "workflow", json_null());
	pdk_json_set(e, "actor", json_string("paddock-run"));
	pdk_json_set(e, "kind", json_string("process.exec"));
	pdk_json_set(e, "attrs", a);
	return e;
}

static int fail(const char *what, struct pdk_error *err)
{
	fprintf(stderr, "bench-audit: %s: %s\n", what, err ? err->msg : "failed");
	return 1;
}

/* CPU time of this thread: what the work costs on one core, whatever else the machine runs. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double rate(uint64_t n, uint64_t ns)
{
	return (double)n / ((double)ns / 1e9);
}

static int bench_append(struct pdk_audit *a, uint64_t total)
{
	struct pdk_error *err = NULL;
	json_t **v = pdk_xcalloc(BATCH, sizeof(*v));
	uint64_t t0, c0;
	uint64_t ns = 0, cns = 0;

	for (uint64_t done = 0; done < total;) {
		size_t n = total - done < BATCH ? (size_t)(total - done) : BATCH;

		for (size_t i = 0; i < n; i++)
			v[i] = event(done + i); /* built outside the timed part */
		t0 = pdk_now_mono_ns();
		c0 = cpu_ns();
		if (pdk_audit_append(a, v, n, false, &err) < 0)
			return fail("append", err);
		cns += cpu_ns() - c0;
		ns += pdk_now_mono_ns() - t0;
		for (size_t i = 0; i < n; i++)
			json_decref(v[i]);
		done += n;
	}
	free(v);
	printf("append: %" PRIu64 " events: %.0f events/s of CPU time on one core (%.3f s), "
	       "%.0f events/s wall clock (%.3f s); batches of %d, hash chain, checkpoint every %d\n",
	       total, rate(total, cns), (double)cns / 1e9, rate(total, ns), (double)ns / 1e9, BATCH,
	       PDK_AUDIT_CHECKPOINT_EVERY);
	return 0;
}

static int bench_verify(struct pdk_audit *a)
{
	struct pdk_error *err = NULL;
	struct pdk_audit_verify v;
	uint64_t t0 = pdk_now_mono_ns();
	uint64_t c0 = cpu_ns();
	uint64_t ns, cns;

	if (pdk_audit_verify_chain(a, NULL, &v, &err) < 0)
		return fail("verify", err);
	cns = cpu_ns() - c0;
	ns = pdk_now_mono_ns() - t0;
	if (v.reason != PDK_AUDIT_INTACT) {
		fprintf(stderr, "bench-audit: chain broken: %s\n", v.detail);
		return 1;
	}
	printf("verify: %" PRIu64 " records, %" PRIu64 " signatures: %.0f records/s of CPU time on "
	       "one core (%.3f s), %.0f records/s wall clock (%.3f s)\n",
	       v.records, v.checkpoints, rate(v.records, cns), (double)cns / 1e9,
	       rate(v.records, ns), (double)ns / 1e9);
	return 0;
}

static int bench_sink(const char *state, uint64_t total)
{
	struct pdk_error *err = NULL;
	struct pdk_events *ev = pdk_events_new("01a205b3-cbb4-7a35-9850-b97f24894161", "bench");
	struct pdk_audit_sink_config cfg = {.state_dir = state};
	uint64_t t0, emit_ns, ns;

	pdk_audit_add_sink(ev, &cfg);
	t0 = pdk_now_mono_ns();
	for (uint64_t i = 0; i < total; i++) {
		json_t *e = event(i);
		json_t *attrs = json_incref(json_object_get(e, "attrs"));

		json_decref(e);
		if (pdk_events_emit(ev, "process.exec", 0, attrs, &err) < 0)
			return fail("emit", err);
	}
	emit_ns = pdk_now_mono_ns() - t0;
	if (pdk_events_close(ev, &err) < 0)
		return fail("close", err);
	ns = pdk_now_mono_ns() - t0;
	pdk_events_free(ev);
	printf("sink: %" PRIu64 " events emitted through the hub (redaction, queue, writer thread) "
	       "and stored in %.3f s: %.0f events/s (emit side alone: %.0f events/s)\n",
	       total, (double)ns / 1e9, rate(total, ns), rate(total, emit_ns));
	return 0;
}

int main(int argc, char **argv)
{
	struct pdk_error *err = NULL;
	char tmpl[] = "/tmp/paddock-bench-audit-XXXXXX";
	uint64_t total = 200000;
	struct pdk_audit *a = NULL;
	cpu_set_t one;
	int rc;

	if (argc > 1 && pdk_parse_u64(argv[1], 100000000, &total) < 0) {
		fprintf(stderr, "usage: bench-audit [EVENTS]\n");
		return 2;
	}
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	(void)sched_setaffinity(0, sizeof(one), &one); /* one core; not fatal where refused */
	if (mkdtemp(tmpl) == NULL || pdk_audit_open(tmpl, &a, &err) < 0)
		return fail("open", err);
	rc = bench_append(a, total);
	if (rc == 0)
		rc = bench_verify(a);
	pdk_audit_free(a);
	if (rc == 0) {
		char *sub = pdk_xasprintf("%s/sink", tmpl);

		(void)sched_setaffinity(0, sizeof(one), &one);
		rc = bench_sink(sub, total);
		free(sub);
	}
	(void)!pdk_rm_rf_at(AT_FDCWD, tmpl);
	return rc;
}
