/*
 * cmd-audit.c - `paddock audit ls|show|tail|verify|head|export`: read and
 * check the audit store (audit.h) of the state directory. What is shown
 * comes from the records' lines (audit.h's queries), never from the
 * table's columns.
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "cli.h"
#include "telemetry.h"
#include "workspace.h"

#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define TAIL_POLL_MS 200

/* The options, and which subcommand takes which. */
enum {
	O_JSON = 1 << 0,
	O_FOLLOW = 1 << 1,
	O_LAST = 1 << 2,
	O_KIND = 1 << 3,
	O_SANDBOX = 1 << 4,
	O_FORMAT = 1 << 5,
	O_SINCE = 1 << 6,
	O_EXPECT = 1 << 7,
};

struct audit_opts {
	unsigned given; /* O_* bits */
	bool json;
	bool follow;
	uint64_t last;
	const char *kind;
	const char *sandbox;
	const char *format;
	uint64_t since;
	const char *expect_head;
	char **args;
	const char *state;            /* the state directory the store was opened in */
	struct pdk_audit_fold folded; /* what the fold before the command did */
};

struct subcommand {
	const char *name;
	int (*fn)(struct pdk_audit *a, struct audit_opts *o);
	unsigned takes; /* O_* bits */
	unsigned nargs; /* positional arguments */
	bool fold;      /* fold the run spools into the store first */
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, 'j'},          {"follow", no_argument, NULL, 'f'},
	{"lines", required_argument, NULL, 'n'},   {"kind", required_argument, NULL, 'k'},
	{"sandbox", required_argument, NULL, 's'}, {"format", required_argument, NULL, 'F'},
	{"since", required_argument, NULL, 'S'},   {"expect-head", required_argument, NULL, 'E'},
	{"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
	fputs("usage: paddock audit ls [--json]\n"
	      "       paddock audit show ID [--json]\n"
	      "       paddock audit tail [-f] [-n N] [--kind K] [--sandbox ID] [--json]\n"
	      "       paddock audit verify [--expect-head SEQ:HASH] [--json]\n"
	      "       paddock audit head [--json]\n"
	      "       paddock audit export [--format jsonl|otlp] [--sandbox ID] [--since SEQ]\n"
	      "       paddock audit fold\n"
	      "\n"
	      "The audit store holds every event of every sandbox (paddock run, paddock ws),\n"
	      "hash-chained and signed at checkpoints, in audit.db in the state directory\n"
	      "($PADDOCK_STATE_DIR, else $XDG_STATE_HOME/paddock, ~/.local/state/paddock, or\n"
	      "/var/lib/paddock for root). ID is a sandbox id or a unique prefix.\n"
	      "A run writes its events to its spool (audit-spool/ID.jsonl) as they happen;\n"
	      "every command here but verify first folds the spools of runs that are over\n"
	      "into the store (chained and signed there). verify changes nothing and says\n"
	      "which records are not folded yet.\n"
	      "\n"
	      "  ls      the sandboxes: first and last event time, event count, labels\n"
	      "  show    one sandbox's events as a timeline\n"
	      "  tail    the last N events (-n, default 10); -f follows new ones\n"
	      "  verify  recompute the hash chain and check every checkpoint signature;\n"
	      "          prints the head (seq and hash) to anchor elsewhere, or the first\n"
	      "          broken sequence number and why: altered, missing, reordered,\n"
	      "          truncated, bad signature, column (a query column of the table\n"
	      "          differs from its record); --expect-head SEQ:HASH: and the chain\n"
	      "          still holds that head (altered if it differs, truncated if cut)\n"
	      "  head    verify, then print the head as SEQ:HASH, to record somewhere\n"
	      "          the machine cannot change and check later with --expect-head\n"
	      "  export  the stored canonical lines, one per line (--since SEQ: after SEQ);\n"
	      "          --format otlp: OTLP/HTTP JSON request bodies instead, one per line\n"
	      "          (resourceLogs, then resourceSpans), ready to POST to a collector\n"
	      "  fold    only fold the run spools into the store, and say how many\n"
	      "\n"
	      "exit status: 0 done (verify: intact), 1 failed (verify: broken), 122 usage error.\n",
	      out);
}

/* ---- output helpers ---- */

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* "key=value ..." of an event's attrs: strings bare, other values as JSON. */
static void print_attrs(const json_t *attrs)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)attrs, key, v)
	{
		_cleanup_free_ char *s = NULL;

		if (json_is_string(v)) {
			printf(" %s=%s", key, json_string_value(v));
			continue;
		}
		s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		printf(" %s=%s", key, s ? s : "?");
	}
}

/* One event on one line: time, seq, (sandbox), kind, attributes. */
static void print_event(const struct pdk_audit_row *r, bool with_sandbox)
{
	printf("%s  %6" PRIu64 "  ", r->ts, r->seq);
	if (with_sandbox)
		printf("%.13s  ", r->sandbox);
	printf("%-16s", r->kind);
	print_attrs(json_object_get(r->record, "attrs"));
	fputc('\n', stdout);
}

static int print_line(void *data, const struct pdk_audit_row *r)
{
	(void)data;
	fwrite(r->line, 1, r->line_len, stdout);
	fputc('\n', stdout);
	return 0;
}

/* ---- ls ---- */

static int ls_row(void *data, const struct pdk_audit_sandbox *s)
{
	json_t *arr = data;

	if (arr != NULL) {
		json_t *o = json_object();

		pdk_json_set(o, "sandbox", json_string(s->sandbox));
		pdk_json_set(o, "first", json_string(s->first_ts));
		pdk_json_set(o, "last", json_string(s->last_ts));
		pdk_json_set(o, "events", json_integer((json_int_t)s->events));
		pdk_json_set(o, "session", str_or_null(s->session));
		pdk_json_set(o, "workflow", str_or_null(s->workflow));
		json_array_append_new(arr, o);
		return 0;
	}
	printf("%-36s  %-27s  %-27s  %6" PRIu64 "  %s  %s\n", s->sandbox, s->first_ts, s->last_ts,
	       s->events, s->session ? s->session : "-", s->workflow ? s->workflow : "-");
	return 0;
}

static int cmd_ls(struct pdk_audit *a, struct audit_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *arr = o->json ? json_array() : NULL;

	if (!o->json)
		printf("%-36s  %-27s  %-27s  %6s  %s  %s\n", "SANDBOX", "FIRST", "LAST", "EVENTS",
		       "SESSION", "WORKFLOW");
	if (pdk_audit_sandboxes(a, ls_row, arr, &err) < 0) {
		pdk_cli_error("audit ls: %s", err->msg);
		return 1;
	}
	if (arr != NULL)
		pdk_cli_print_json(arr);
	return 0;
}

/* ---- show ---- */

static int show_row(void *data, const struct pdk_audit_row *r)
{
	json_t *arr = data;

	if (arr != NULL) {
		json_array_append(arr, r->record);
		return 0;
	}
	print_event(r, false);
	return 0;
}

static int resolve(struct pdk_audit *a, const char *verb, const char *prefix, char **id)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	if (pdk_audit_resolve_sandbox(a, prefix, id, &err) < 0) {
		pdk_cli_error("audit %s: %s", verb, err->msg);
		return -1;
	}
	return 0;
}

static int cmd_show(struct pdk_audit *a, struct audit_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_json_ json_t *arr = o->json ? json_array() : NULL;
	struct pdk_audit_filter f = {0};

	if (resolve(a, "show", o->args[0], &id) < 0)
		return 1;
	f.sandbox = id;
	if (!o->json)
		printf("sandbox %s\n", id);
	if (pdk_audit_query(a, &f, show_row, arr, &err) < 0) {
		pdk_cli_error("audit show: %s", err->msg);
		return 1;
	}
	if (arr != NULL)
		pdk_cli_print_json(arr);
	return 0;
}

/* ---- tail ---- */

struct tail_state {
	bool json;
	uint64_t last_seq;
};

static int tail_row(void *data, const struct pdk_audit_row *r)
{
	struct tail_state *t = data;

	if (t->json)
		(void)print_line(NULL, r);
	else
		print_event(r, true);
	t->last_seq = r->seq;
	return 0;
}

static int head_row(void *data, const struct pdk_audit_row *r)
{
	((struct tail_state *)data)->last_seq = r->seq;
	return 0;
}

/* The run spools folded into the store (every command but verify does it first). */
static int fold_quiet(struct pdk_audit *a, struct pdk_error **err)
{
	struct pdk_audit_fold res;

	return pdk_audit_fold(a, &res, err);
}

/*
 * Whether the store `tail -f` follows is still the file it opened: one that
 * was removed or replaced (a new store, a restore) has no more events for
 * this chain, so following it would wait forever.
 */
static bool store_gone(const char *path, const struct stat *first)
{
	struct stat st;

	return stat(path, &st) < 0 || st.st_dev != first->st_dev || st.st_ino != first->st_ino;
}

static int cmd_tail(struct pdk_audit *a, struct audit_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *id = NULL;
	struct tail_state t = {.json = o->json};
	struct pdk_audit_filter f = {.kind = o->kind, .last = o->given & O_LAST ? o->last : 10};
	const struct timespec pause = {.tv_nsec = TAIL_POLL_MS * 1000000L};
	_cleanup_free_ char *path = pdk_xasprintf("%s/%s", o->state, PDK_AUDIT_DB);
	struct stat first;
	int rc = 0;

	if (o->sandbox != NULL && resolve(a, "tail", o->sandbox, &id) < 0)
		return 1;
	f.sandbox = id;
	/* -n 0 prints nothing: only the head is looked up, to follow from it. */
	if (f.last > 0)
		rc = pdk_audit_query(a, &f, tail_row, &t, &err);
	else if (o->follow)
		rc = pdk_audit_query(a, &(struct pdk_audit_filter){.last = 1}, head_row, &t, &err);
	if (o->follow && stat(path, &first) < 0) {
		pdk_cli_error("audit tail: %s: %s", path, strerror(errno));
		return 1;
	}
	while (rc == 0 && o->follow) {
		(void)fflush(stdout);
		(void)nanosleep(&pause, NULL);
		if (store_gone(path, &first)) {
			pdk_cli_error("audit tail: the store '%s' was removed or replaced; "
				      "nothing more will be appended to the chain being followed",
				      path);
			return 1;
		}
		f.last = 0;
		f.after_seq = t.last_seq;
		rc = fold_quiet(a, &err);
		if (rc == 0)
			rc = pdk_audit_query(a, &f, tail_row, &t, &err);
	}
	if (rc < 0) {
		pdk_cli_error("audit tail: %s", err->msg);
		return 1;
	}
	return 0;
}

/* ---- verify ---- */

/* What `verify` says of the spools not folded yet (verify itself folds nothing). */
struct pending {
	uint64_t records;
	uint64_t spools;
	uint64_t running;
	json_t *list; /* --json: one object per spool */
};

static int pending_one(void *data, const struct pdk_audit_spool *s)
{
	struct pending *p = data;

	p->records += s->records;
	p->spools++;
	p->running += s->running;
	if (p->list != NULL)
		json_array_append_new(p->list,
				      json_pack("{s:s, s:I, s:b}", "spool", s->name, "records",
						(json_int_t)s->records, "running", s->running));
	return 0;
}

static void print_pending(const struct pending *p)
{
	if (p->spools == 0)
		return;
	printf("not folded yet: %" PRIu64 " record(s) in %" PRIu64 " run spool(s)", p->records,
	       p->spools);
	if (p->running > 0)
		printf(", %" PRIu64 " of them still running", p->running);
	printf(" (any other 'paddock audit' command folds them)\n");
}

static void verify_json(const struct pdk_audit_verify *v, struct pending *p)
{
	_cleanup_json_ json_t *o = json_object();

	pdk_json_set(o, "ok", json_boolean(v->reason == PDK_AUDIT_INTACT));
	pdk_json_set(o, "reason", json_string(pdk_audit_break_name(v->reason)));
	pdk_json_set(o, "broken_seq",
		     v->reason ? json_integer((json_int_t)v->broken_seq) : json_null());
	pdk_json_set(o, "detail", v->reason ? json_string(v->detail) : json_null());
	pdk_json_set(o, "records", json_integer((json_int_t)v->records));
	pdk_json_set(o, "checkpoints", json_integer((json_int_t)v->checkpoints));
	pdk_json_set(o, "signed_seq", json_integer((json_int_t)v->signed_seq));
	pdk_json_set(o, "head_seq", json_integer((json_int_t)v->head_seq));
	pdk_json_set(o, "head_hash", json_string(v->head_hash));
	pdk_json_set(o, "key_id", json_string(v->key_id));
	pdk_json_set(o, "unfolded_records", json_integer((json_int_t)p->records));
	pdk_json_set(o, "unfolded", p->list);
	p->list = NULL;
	pdk_cli_print_json(o);
}

static int cmd_verify(struct pdk_audit *a, struct audit_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_audit_anchor anchor;
	struct pdk_audit_verify v;
	struct pending p = {.list = o->json ? json_array() : NULL};

	if (o->expect_head != NULL && pdk_audit_parse_anchor(o->expect_head, &anchor, &err) < 0) {
		pdk_cli_error("audit verify: --expect-head: %s", err->msg);
		return PDK_EXIT_POLICY;
	}
	if (pdk_audit_verify_chain(a, o->expect_head ? &anchor : NULL, &v, &err) < 0 ||
	    pdk_audit_pending(o->state, pending_one, &p, &err) < 0) {
		json_decref(p.list);
		pdk_cli_error("audit verify: %s", err->msg);
		return 1;
	}
	if (o->json) {
		verify_json(&v, &p);
	} else if (v.reason == PDK_AUDIT_INTACT) {
		printf("ok: %" PRIu64 " records, %" PRIu64 " checkpoints (last signed at %" PRIu64
		       ")\n",
		       v.records, v.checkpoints, v.signed_seq);
		printf("head: %" PRIu64 " %s\n", v.head_seq, v.head_hash[0] ? v.head_hash : "-");
		printf("key: %s\n", v.key_id[0] ? v.key_id : "-");
		print_pending(&p);
	} else {
		printf("broken at %" PRIu64 ": %s: %s\n", v.broken_seq,
		       pdk_audit_break_name(v.reason), v.detail);
		printf("head: %" PRIu64 " %s\n", v.head_seq, v.head_hash[0] ? v.head_hash : "-");
		print_pending(&p);
	}
	return v.reason == PDK_AUDIT_INTACT ? 0 : 1;
}

/* ---- head ---- */

/*
 * The head to anchor, printed only once the chain up to it verifies: a
 * head recorded from a store already tampered with would vouch for the
 * tampering.
 */
static int cmd_head(struct pdk_audit *a, struct audit_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_json_ json_t *j = NULL;
	struct pdk_audit_verify v;

	if (pdk_audit_verify_chain(a, NULL, &v, &err) < 0) {
		pdk_cli_error("audit head: %s", err->msg);
		return 1;
	}
	if (v.reason != PDK_AUDIT_INTACT) {
		pdk_cli_error("audit head: the store is broken at %" PRIu64
			      ": %s: %s (nothing to anchor; see 'paddock audit verify')",
			      v.broken_seq, pdk_audit_break_name(v.reason), v.detail);
		return 1;
	}
	if (v.head_seq == 0)
		(void)snprintf(v.head_hash, sizeof(v.head_hash), "%064d", 0);
	if (!o->json) {
		printf("%" PRIu64 ":%s\n", v.head_seq, v.head_hash);
		return 0;
	}
	j = json_pack("{s:I, s:s, s:s}", "head_seq", (json_int_t)v.head_seq, "head_hash",
		      v.head_hash, "key_id", v.key_id);
	pdk_cli_print_json(j);
	return 0;
}

/* ---- export ---- */

struct export_format {
	const char *name;
	int (*run)(struct pdk_audit *a, const struct pdk_audit_filter *f, struct pdk_error **err);
};

static int export_jsonl(struct pdk_audit *a, const struct pdk_audit_filter *f,
			struct pdk_error **err)
{
	return pdk_audit_query(a, f, print_line, NULL, err);
}

/*
 * OTLP: the stored events as OTLP/HTTP JSON request bodies, one per line,
 * batches of OTLP_BATCH events: an ExportLogsServiceRequest
 * ({"resourceLogs":...}) then, when the batch closes spans, an
 * ExportTraceServiceRequest ({"resourceSpans":...}). Spans that straddle
 * batches are carried over; each line can be POSTed as it is to a
 * collector's /v1/logs or /v1/traces.
 */
#define OTLP_BATCH 512

struct otlp_export {
	json_t *batch;   /* events not yet encoded */
	json_t *pending; /* span starts carried between batches */
};

/* Print and release one request body (NULL: nothing to print). */
static void print_body(json_t *doc)
{
	_cleanup_free_ char *line = doc ? pdk_json_dump_line(doc) : NULL;

	if (line != NULL)
		fputs(line, stdout);
	json_decref(doc);
}

static void otlp_flush(struct otlp_export *x)
{
	if (json_array_size(x->batch) == 0)
		return;
	print_body(pdk_otlp_encode_logs(x->batch, NULL));
	print_body(pdk_otlp_encode_traces(x->batch, NULL, x->pending));
	json_array_clear(x->batch);
}

static int otlp_row(void *data, const struct pdk_audit_row *r)
{
	struct otlp_export *x = data;

	/* The batch takes a reference: the record has no other holder once the row is done. */
	json_array_append(x->batch, r->record);
	if (json_array_size(x->batch) >= OTLP_BATCH)
		otlp_flush(x);
	return 0;
}

static int export_otlp(struct pdk_audit *a, const struct pdk_audit_filter *f,
		       struct pdk_error **err)
{
	struct otlp_export x = {.batch = json_array(), .pending = json_array()};
	int rc = pdk_audit_query(a, f, otlp_row, &x, err);

	if (rc >= 0)
		otlp_flush(&x);
	json_decref(x.batch);
	json_decref(x.pending);
	return rc;
}

static const struct export_format formats[] = {
	{"jsonl", export_jsonl},
	{"otlp", export_otlp},
};

static int cmd_export(struct pdk_audit *a, struct audit_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *id = NULL;
	struct pdk_audit_filter f = {.after_seq = o->since};
	const char *name = o->format ? o->format : "jsonl";

	for (size_t i = 0; i < PDK_ARRAY_SIZE(formats); i++) {
		if (strcmp(name, formats[i].name) != 0)
			continue;
		if (o->sandbox != NULL && resolve(a, "export", o->sandbox, &id) < 0)
			return 1;
		f.sandbox = id;
		if (formats[i].run(a, &f, &err) < 0 || fflush(stdout) != 0) {
			pdk_cli_error("audit export: %s",
				      err ? err->msg : "cannot write the output");
			return 1;
		}
		return 0;
	}
	pdk_cli_error("audit export: unknown --format '%s' (known: jsonl, otlp)", name);
	return PDK_EXIT_POLICY;
}

/* ---- fold ---- */

/* The folding is done by run_subcommand(), as for every command but verify. */
static int cmd_fold(struct pdk_audit *a, struct audit_opts *o)
{
	(void)a;
	printf("folded %" PRIu64 " record(s) from %" PRIu64 " run spool(s)", o->folded.records,
	       o->folded.spools);
	if (o->folded.running > 0)
		printf("; %" PRIu64 " spool(s) of running runs left", o->folded.running);
	if (o->folded.torn_bytes > 0)
		printf("; %" PRIu64 " byte(s) of unfinished lines of killed runs dropped",
		       o->folded.torn_bytes);
	printf("\n");
	return 0;
}

static const struct subcommand subcommands[] = {
	{"ls", cmd_ls, O_JSON, 0, true},
	{"show", cmd_show, O_JSON, 1, true},
	{"tail", cmd_tail, O_FOLLOW | O_LAST | O_KIND | O_SANDBOX | O_JSON, 0, true},
	{"verify", cmd_verify, O_EXPECT | O_JSON, 0, false},
	{"head", cmd_head, O_JSON, 0, true},
	{"export", cmd_export, O_FORMAT | O_SANDBOX | O_SINCE, 0, true},
	{"fold", cmd_fold, 0, 0, true},
};

/* ---- options ---- */

static int parse_number(const char *opt, const char *s, uint64_t *out)
{
	if (pdk_parse_u64(s, UINT64_MAX / 2, out) < 0) {
		pdk_cli_error("audit: invalid %s '%s': expected a whole number", opt, s);
		return -1;
	}
	return 0;
}

/* What each option sets: its bit in `given`, and the member its value goes to. */
static const struct audit_flag {
	int c; /* getopt's value */
	unsigned bit;
	enum { FLAG, TEXT, NUMBER } kind;
	size_t off;       /* of a bool, a const char * or a uint64_t in struct audit_opts */
	const char *name; /* for a number's error */
} audit_flags[] = {
	{'j', O_JSON, FLAG, offsetof(struct audit_opts, json), "--json"},
	{'f', O_FOLLOW, FLAG, offsetof(struct audit_opts, follow), "-f"},
	{'n', O_LAST, NUMBER, offsetof(struct audit_opts, last), "-n"},
	{'k', O_KIND, TEXT, offsetof(struct audit_opts, kind), "--kind"},
	{'s', O_SANDBOX, TEXT, offsetof(struct audit_opts, sandbox), "--sandbox"},
	{'F', O_FORMAT, TEXT, offsetof(struct audit_opts, format), "--format"},
	{'S', O_SINCE, NUMBER, offsetof(struct audit_opts, since), "--since"},
	{'E', O_EXPECT, TEXT, offsetof(struct audit_opts, expect_head), "--expect-head"},
};

/* Option `c` into *o: 0, or -1 after a usage error was printed. */
static int audit_flag(int c, const char *arg, struct audit_opts *o)
{
	for (size_t i = 0; i < PDK_ARRAY_SIZE(audit_flags); i++) {
		const struct audit_flag *f = &audit_flags[i];
		char *member = (char *)o + f->off;

		if (f->c != c)
			continue;
		o->given |= f->bit;
		if (f->kind == FLAG)
			*(bool *)member = true;
		else if (f->kind == TEXT)
			*(const char **)member = arg;
		else
			return parse_number(f->name, arg, (uint64_t *)member);
		return 0;
	}
	fputs("Try 'paddock audit --help'.\n", stderr);
	return -1;
}

/* Returns 0, 1 for --help, or PDK_EXIT_POLICY on a usage error. */
static int parse_opts(int argc, char **argv, struct audit_opts *o)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "fn:h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (audit_flag(c, optarg, o) < 0)
			return PDK_EXIT_POLICY;
	}
	o->args = argv + optind;
	return 0;
}

static int run_subcommand(const struct subcommand *sc, struct audit_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *state = pdk_cli_state_dir();
	struct pdk_audit *a = NULL;
	int rc;

	if ((o->given & ~sc->takes) != 0) {
		pdk_cli_error("audit %s: an option given is not one of its own (see 'paddock audit "
			      "--help')",
			      sc->name);
		return PDK_EXIT_POLICY;
	}
	if (pdk_strv_len(o->args) != sc->nargs) {
		pdk_cli_error("audit %s: expected %u argument(s)", sc->name, sc->nargs);
		return PDK_EXIT_POLICY;
	}
	o->state = state;
	if (pdk_audit_open(state, &a, &err) < 0) {
		pdk_cli_error("audit %s: %s", sc->name, err->msg);
		return 1;
	}
	if (sc->fold && pdk_audit_fold(a, &o->folded, &err) < 0) {
		pdk_cli_error("audit %s: %s", sc->name, err->msg);
		pdk_audit_free(a);
		return 1;
	}
	rc = sc->fn(a, o);
	pdk_audit_free(a);
	return rc;
}

int pdk_cmd_audit(int argc, char **argv)
{
	struct audit_opts o = {0};
	int rc;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? PDK_EXIT_POLICY : 0;
	}
	rc = parse_opts(argc - 1, argv + 1, &o);
	if (rc != 0)
		return rc == 1 ? 0 : PDK_EXIT_POLICY;
	for (size_t i = 0; i < PDK_ARRAY_SIZE(subcommands); i++)
		if (strcmp(argv[1], subcommands[i].name) == 0)
			return run_subcommand(&subcommands[i], &o);
	pdk_cli_error("audit: unknown command '%s' (see 'paddock audit --help')", argv[1]);
	return PDK_EXIT_POLICY;
}
