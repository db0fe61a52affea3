/*
 * cmd-ws.c - `paddock ws ls|diff|commit|discard|snapshot|rollback`: the
 * change sets that overlay workspaces leave behind (workspace.h).
 */
#include "common.h"
#include "audit.h"
#include "base.h"
#include "cli.h"
#include "telemetry.h"
#include "workspace.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

struct ws_opts {
	bool json;
	bool patch;
	bool keep;
	bool dry_run;
	bool all;
	bool allow_outside;
	bool force;
	const char *events;
	const char *from;
	const char *to;
};

enum {
	OPT_JSON = 256,
	OPT_PATCH,
	OPT_KEEP,
	OPT_DRY_RUN,
	OPT_ALL,
	OPT_ALLOW_OUTSIDE,
	OPT_EVENTS,
	OPT_FROM,
	OPT_TO,
	OPT_FORCE,
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, OPT_JSON},
	{"patch", no_argument, NULL, OPT_PATCH},
	{"keep", no_argument, NULL, OPT_KEEP},
	{"dry-run", no_argument, NULL, OPT_DRY_RUN},
	{"all", no_argument, NULL, OPT_ALL},
	{"allow-outside-symlinks", no_argument, NULL, OPT_ALLOW_OUTSIDE},
	{"events", required_argument, NULL, OPT_EVENTS},
	{"from", required_argument, NULL, OPT_FROM},
	{"to", required_argument, NULL, OPT_TO},
	{"force", no_argument, NULL, OPT_FORCE},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
	fputs("usage: paddock ws ls [--json]\n"
	      "       paddock ws diff ID [--patch] [--json] [--from N] [--to N]\n"
	      "       paddock ws commit ID [--dry-run] [--keep] [--allow-outside-symlinks]\n"
	      "                            [--force] [--events FILE] [--json]\n"
	      "       paddock ws discard ID... | --all [--events FILE]\n"
	      "       paddock ws snapshot ID\n"
	      "       paddock ws rollback ID [N]\n"
	      "\n"
	      "A sandbox whose workspace is an overlay (the default profile) leaves the\n"
	      "host directory untouched; its changes are kept as a change set in the\n"
	      "state directory ($PADDOCK_STATE_DIR, else ~/.local/state/paddock, or\n"
	      "/var/lib/paddock for root). ID is a change set id or a unique prefix of\n"
	      "at least 4 characters.\n"
	      "\n"
	      "  ls        the change sets, oldest first\n"
	      "  diff      what changed: added, modified, deleted, mode, replaced (another\n"
	      "            type of file), renamed; --patch adds a unified diff of text\n"
	      "            files; --from/--to compare two snapshots (0 = the directory)\n"
	      "  commit    apply the changes to the directory, all or nothing, and remove\n"
	      "            the change set (--keep keeps it). Device nodes, FIFOs, sockets\n"
	      "            and symlinks leading out of the directory are refused and\n"
	      "            listed; setuid/setgid bits are stripped. A path changed on the\n"
	      "            host since the run began (edited, deleted, or one that\n"
	      "            appeared) is a conflict: nothing is applied and each is\n"
	      "            listed; --force overwrites them\n"
	      "  discard   remove change sets without applying them\n"
	      "  snapshot  freeze the changes so far as a snapshot (prints its number)\n"
	      "  rollback  drop every change made after snapshot N (default 0: all)\n"
	      "\n"
	      "commit and discard record one fs.change event per change in the audit store\n"
	      "(see 'paddock audit'); --events FILE also appends them to FILE.\n"
	      "\n"
	      "exit status: 0 done, 1 the operation failed or was refused, 122 usage error.\n",
	      out);
}

/* Whether `ws CMD` got a change set id and at most `more` arguments after it (else says so). */
static bool set_args(const char *cmd, char **args, size_t more, const char *expected)
{
	size_t n = pdk_strv_len(args);

	if (n == 0 || n > 1 + more) {
		pdk_cli_error("ws %s: expected %s", cmd, expected);
		return false;
	}
	return true;
}

/* Open a change set; `lock` for the operations that change it. NULL after printing why. */
static struct pdk_ws *open_set(const char *id, bool lock)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *state = pdk_cli_state_dir();
	struct pdk_ws *ws = NULL;

	if (pdk_ws_open(state, id, &ws, &err) < 0) {
		pdk_cli_error("ws: %s", err->msg);
		return NULL;
	}
	if (lock && pdk_ws_lock(ws, &err) < 0) {
		pdk_cli_error("ws: %s", err->msg);
		pdk_ws_free(ws);
		return NULL;
	}
	return ws;
}

static const char *type_word(mode_t m)
{
	return S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : S_ISREG(m) ? "file" : "special";
}

/* Is this DELETED entry the source of a rename reported on an ADDED one? */
static bool renamed_away(const struct pdk_ws_diff *d, const struct pdk_ws_change *c)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].renamed_from != NULL && strcmp(d->v[i].renamed_from, c->path) == 0)
			return true;
	return false;
}

static void print_change(const struct pdk_ws_diff *d, const struct pdk_ws_change *c)
{
	char a[32], b[32];

	if (c->kind == PDK_WS_DELETED && renamed_away(d, c))
		return;
	if (c->renamed_from != NULL) {
		fputs("renamed   ", stdout);
		pdk_ws_print_path(stdout, c->renamed_from);
		fputs(" -> ", stdout);
		pdk_ws_print_path(stdout, c->path);
		fputc('\n', stdout);
		return;
	}
	printf("%-9s ", pdk_ws_kind_name(c->kind));
	pdk_ws_print_path(stdout, c->path);
	if (S_ISDIR(c->mode) && c->kind == PDK_WS_ADDED)
		fputc('/', stdout);
	switch (c->kind) {
	case PDK_WS_ADDED:
		pdk_cli_human_size(c->size, a, sizeof(a));
		if (S_ISLNK(c->mode)) {
			fputs(" -> ", stdout);
			pdk_ws_print_path(stdout, c->link ? c->link : "?");
		} else if (!S_ISDIR(c->mode)) {
			printf("  %s", S_ISREG(c->mode) ? a : type_word(c->mode));
		}
		break;
	case PDK_WS_MODIFIED:
		pdk_cli_human_size(c->old_size, a, sizeof(a));
		pdk_cli_human_size(c->size, b, sizeof(b));
		if (S_ISLNK(c->mode)) {
			fputs("  -> ", stdout);
			pdk_ws_print_path(stdout, c->link ? c->link : "?");
		} else {
			printf("  %s -> %s", a, b);
		}
		if ((c->mode & 07777) != (c->old_mode & 07777) && !S_ISLNK(c->mode))
			printf(", mode %04o -> %04o", c->old_mode & 07777, c->mode & 07777);
		break;
	case PDK_WS_MODE:
		printf("  %04o -> %04o", c->old_mode & 07777, c->mode & 07777);
		break;
	case PDK_WS_REPLACED:
		printf("  %s -> %s", type_word(c->old_mode), type_word(c->mode));
		break;
	case PDK_WS_DELETED:
	default:
		break;
	}
	fputc('\n', stdout);
}

static json_t *diff_json(struct pdk_ws *ws, const struct pdk_ws_diff *d)
{
	json_t *o = json_object();
	json_t *v = json_array();
	size_t count[PDK_WS_REPLACED + 1] = {0};
	json_t *sum = json_object();

	for (size_t i = 0; i < d->n; i++) {
		json_array_append_new(v, pdk_ws_change_json(&d->v[i]));
		count[d->v[i].kind]++;
	}
	for (int k = 0; k <= PDK_WS_REPLACED; k++)
		pdk_json_set(sum, pdk_ws_kind_name((enum pdk_ws_kind)k),
			     json_integer((json_int_t)count[k]));
	pdk_json_set(sum, "bytes_added", json_integer((json_int_t)d->bytes_added));
	pdk_json_set(o, "change_set", json_string(pdk_ws_id(ws)));
	pdk_ws_json_set_path(o, "workspace", pdk_ws_workspace(ws));
	pdk_json_set(o, "changes", v);
	pdk_json_set(o, "summary", sum);
	return o;
}

static void print_json(json_t *o)
{
	char *s = pdk_json_dump_line(o);

	if (s != NULL)
		fputs(s, stdout);
	free(s);
}

static int parse_snap(const char *s, struct pdk_ws *ws, unsigned *out)
{
	uint64_t v;

	if (s == NULL)
		return 0;
	if (strcmp(s, "current") == 0) {
		*out = PDK_WS_CURRENT;
		return 0;
	}
	if (pdk_parse_u64(s, pdk_ws_snapshots(ws), &v) < 0) {
		pdk_cli_error("ws: no snapshot '%s' in change set %s (0 to %u, or 'current')", s,
			      pdk_ws_id(ws), pdk_ws_snapshots(ws));
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

static int cmd_diff(const struct ws_opts *o, char **args)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ws_diff d = {0};
	unsigned from = 0, to = PDK_WS_CURRENT;
	struct pdk_ws *ws = NULL;
	int rc = 1;

	if (!set_args("diff", args, 0, "one change set id"))
		return PDK_EXIT_POLICY;
	if ((ws = open_set(args[0], false)) == NULL)
		return 1;
	if (parse_snap(o->from, ws, &from) < 0 || parse_snap(o->to, ws, &to) < 0)
		goto out;
	if (pdk_ws_diff(ws, from, to, &d, &err) < 0) {
		pdk_cli_error("ws diff: %s", err->msg);
		goto out;
	}
	if (o->json) {
		_cleanup_json_ json_t *j = diff_json(ws, &d);

		print_json(j);
	} else {
		for (size_t i = 0; i < d.n; i++)
			print_change(&d, &d.v[i]);
		for (size_t i = 0; o->patch && i < d.n; i++)
			(void)pdk_ws_write_patch(stdout, &d.v[i], 0);
	}
	rc = 0;
out:
	pdk_ws_diff_release(&d);
	pdk_ws_free(ws);
	return rc;
}

/*
 * The event stream of a commit or discard: the audit store always, the
 * --events file when given. A set without a sandbox id is named by its own id.
 */
static struct pdk_events *open_events(const struct ws_opts *o, const struct pdk_ws *ws)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_free_ char *state = pdk_cli_state_dir();
	const char *id = pdk_ws_sandbox(ws) ? pdk_ws_sandbox(ws) : pdk_ws_id(ws);
	struct pdk_audit_sink_config cfg = {.state_dir = state, .on_full = PDK_AUDIT_BLOCK};
	struct pdk_events *ev = pdk_events_new(id, "paddock-ws");

	pdk_audit_add_sink(ev, &cfg);
	if (o->events != NULL && pdk_events_add_file(ev, o->events, &err) < 0) {
		pdk_cli_error("ws: %s", err->msg);
		pdk_events_free(ev);
		return NULL;
	}
	return ev;
}

/* One line on stderr per refused or conflicting entry: its path and why. */
static void print_problems(const char *what, const struct pdk_ws_refusal *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fprintf(stderr, "paddock: ws commit: %s: ", what);
		pdk_ws_print_path(stderr, v[i].path);
		fprintf(stderr, ": %s\n", v[i].reason);
	}
}

/* --json: {"conflicts": [{"path", "reason"}]} on stdout, for a caller to act on. */
static void print_conflicts_json(const struct pdk_ws_commit_report *rep)
{
	_cleanup_json_ json_t *j = json_object();
	json_t *a = json_array();

	for (size_t i = 0; i < rep->n_conflicts; i++) {
		json_t *c = json_object();

		pdk_ws_json_set_path(c, "path", rep->conflicts[i].path);
		pdk_json_set(c, "reason", json_string(rep->conflicts[i].reason));
		json_array_append_new(a, c);
	}
	pdk_json_set(j, "conflicts", a);
	print_json(j);
}

static int cmd_commit(const struct ws_opts *o, char **args)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ws_commit_report rep = {0};
	struct pdk_events *ev = NULL;
	struct pdk_ws_diff d = {0};
	unsigned flags = (o->dry_run ? PDK_WS_COMMIT_DRY_RUN : 0) |
			 (o->allow_outside ? PDK_WS_COMMIT_ALLOW_OUTSIDE_LINKS : 0) |
			 (o->force ? PDK_WS_COMMIT_FORCE : 0);
	struct pdk_ws *ws = NULL;
	int rc = 1;

	if (!set_args("commit", args, 0, "one change set id"))
		return PDK_EXIT_POLICY;
	if ((ws = open_set(args[0], true)) == NULL)
		return 1;
	if ((ev = open_events(o, ws)) == NULL)
		goto out;
	if (pdk_ws_diff(ws, 0, PDK_WS_CURRENT, &d, &err) < 0) {
		pdk_cli_error("ws commit: %s", err->msg);
		goto out;
	}
	if (pdk_ws_commit(ws, &d, flags, &rep, &err) < 0) {
		print_problems("refused", rep.refused, rep.n_refused);
		print_problems("conflict", rep.conflicts, rep.n_conflicts);
		if (o->json && rep.n_conflicts > 0)
			print_conflicts_json(&rep);
		pdk_cli_error("ws commit: %s; '%s' is unchanged", err->msg, pdk_ws_workspace(ws));
		goto out;
	}
	if (o->dry_run) {
		printf("%zu change(s) would be applied to ", d.n);
		pdk_ws_print_path(stdout, pdk_ws_workspace(ws));
		fputc('\n', stdout);
		rc = 0;
		goto out;
	}
	if (pdk_ws_emit_changes(ev, &d, "committed", pdk_ws_id(ws), &err) < 0)
		pdk_cli_warn("ws commit: %s", err->msg);
	pdk_error_free(&err);
	if (!o->keep && pdk_ws_remove(ws, &err) < 0)
		pdk_cli_warn("ws commit: %s", err->msg);
	if (o->json) {
		_cleanup_json_ json_t *j = diff_json(ws, &d);

		pdk_json_set(j, "stripped", json_integer((json_int_t)rep.stripped));
		print_json(j);
	} else {
		printf("committed %zu change(s) to ", rep.applied);
		pdk_ws_print_path(stdout, pdk_ws_workspace(ws));
		if (rep.stripped)
			printf(" (setuid/setgid bits stripped from %zu)", rep.stripped);
		fputc('\n', stdout);
	}
	rc = 0;
out:
	pdk_ws_commit_report_release(&rep);
	pdk_ws_diff_release(&d);
	pdk_cli_events_finish(ev);
	pdk_ws_free(ws);
	return rc;
}

static int discard_one(const struct ws_opts *o, const char *id)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_events *ev = NULL;
	struct pdk_ws *ws = NULL;
	struct pdk_ws_diff d = {0};
	int rc = 1;

	if ((ws = open_set(id, true)) == NULL)
		return 1;
	if ((ev = open_events(o, ws)) == NULL)
		goto out;
	/* The events say what was thrown away; a set too damaged to diff still goes. */
	if (ev != NULL && pdk_ws_diff(ws, 0, PDK_WS_CURRENT, &d, &err) == 0 &&
	    pdk_ws_emit_changes(ev, &d, "discarded", pdk_ws_id(ws), &err) < 0)
		pdk_cli_warn("ws discard: %s", err->msg);
	pdk_error_free(&err);
	if (pdk_ws_remove(ws, &err) < 0) {
		pdk_cli_error("ws discard: %s", err->msg);
		goto out;
	}
	printf("discarded %s\n", pdk_ws_id(ws));
	rc = 0;
out:
	pdk_ws_diff_release(&d);
	pdk_cli_events_finish(ev);
	pdk_ws_free(ws);
	return rc;
}

static int cmd_discard(const struct ws_opts *o, char **args)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_strv_ char **ids = NULL;
	_cleanup_free_ char *state = NULL;
	int rc = 0;

	if (o->all == (args[0] != NULL)) {
		pdk_cli_error("ws discard: expected change set ids or --all");
		return PDK_EXIT_POLICY;
	}
	if (o->all) {
		state = pdk_cli_state_dir();
		if (pdk_ws_list(state, &ids, &err) < 0) {
			pdk_cli_error("ws discard: %s", err->msg);
			return 1;
		}
		args = ids;
	}
	for (size_t i = 0; args[i] != NULL; i++)
		if (discard_one(o, args[i]) != 0)
			rc = 1;
	return rc;
}

static int cmd_ls(const struct ws_opts *o)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	_cleanup_strv_ char **ids = NULL;
	_cleanup_free_ char *state = pdk_cli_state_dir();
	_cleanup_json_ json_t *arr = json_array();

	if (pdk_ws_list(state, &ids, &err) < 0) {
		pdk_cli_error("ws ls: %s", err->msg);
		return 1;
	}
	if (!o->json && ids[0] != NULL)
		printf("%-13s  %-19s  %5s  %7s  %s\n", "ID", "CREATED", "SNAPS", "CHANGES",
		       "WORKSPACE");
	for (size_t i = 0; ids[i] != NULL; i++) {
		struct pdk_ws *ws = NULL;
		struct pdk_ws_diff d = {0};
		time_t t;
		struct tm tm;
		char when[32];
		bool ok;

		pdk_error_free(&err);
		if (pdk_ws_open(state, ids[i], &ws, &err) < 0) {
			if (err->status != ENOENT) /* ENOENT: removed meanwhile */
				pdk_cli_warn("ws ls: %s", err->msg);
			continue;
		}
		ok = pdk_ws_diff(ws, 0, PDK_WS_CURRENT, &d, &err) == 0;
		t = (time_t)(pdk_ws_created_ns(ws) / 1000000000u);
		(void)strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
		if (o->json) {
			json_t *j = json_object();

			pdk_json_set(j, "id", json_string(pdk_ws_id(ws)));
			pdk_ws_json_set_path(j, "workspace", pdk_ws_workspace(ws));
			pdk_json_set(j, "sandbox",
				     pdk_ws_sandbox(ws) ? json_string(pdk_ws_sandbox(ws))
							: json_null());
			pdk_json_set(j, "created_ns",
				     json_integer((json_int_t)pdk_ws_created_ns(ws)));
			pdk_json_set(j, "snapshots", json_integer(pdk_ws_snapshots(ws)));
			pdk_json_set(j, "changes",
				     ok ? json_integer((json_int_t)d.n) : json_null());
			json_array_append_new(arr, j);
		} else {
			char n[24];

			(void)snprintf(n, sizeof(n), "%zu", d.n);
			printf("%.13s  %-19s  %5u  %7s  ", pdk_ws_id(ws), when,
			       pdk_ws_snapshots(ws), ok ? n : "?");
			pdk_ws_print_path(stdout, pdk_ws_workspace(ws));
			fputc('\n', stdout);
		}
		pdk_ws_diff_release(&d);
		pdk_ws_free(ws);
	}
	if (o->json)
		print_json(arr);
	return 0;
}

static int cmd_snapshot(char **args)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	struct pdk_ws *ws = NULL;
	int n;

	if (!set_args("snapshot", args, 0, "one change set id"))
		return PDK_EXIT_POLICY;
	if ((ws = open_set(args[0], true)) == NULL)
		return 1;
	n = pdk_ws_snapshot(ws, &err);
	if (n < 0)
		pdk_cli_error("ws snapshot: %s", err->msg);
	else
		printf("%d\n", n);
	pdk_ws_free(ws);
	return n < 0 ? 1 : 0;
}

static int cmd_rollback(char **args)
{
	_cleanup_error_ struct pdk_error *err = NULL;
	unsigned snap = 0;
	struct pdk_ws *ws = NULL;
	int rc;

	if (!set_args("rollback", args, 1, "a change set id and a snapshot number"))
		return PDK_EXIT_POLICY;
	if ((ws = open_set(args[0], true)) == NULL)
		return 1;
	rc = args[1] != NULL ? parse_snap(args[1], ws, &snap) : 0;
	if (rc == 0 && snap == PDK_WS_CURRENT)
		snap = pdk_ws_snapshots(ws);
	if (rc == 0 && (rc = pdk_ws_rollback(ws, snap, &err)) < 0)
		pdk_cli_error("ws rollback: %s", err->msg);
	pdk_ws_free(ws);
	return rc < 0 ? 1 : 0;
}

/* Deep trees hold one directory fd per level while they are walked. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int pdk_cmd_ws(int argc, char **argv)
{
	struct ws_opts o = {0};
	const char *verb;
	char **args;
	int c;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? PDK_EXIT_POLICY : 0;
	}
	verb = argv[1];
	optind = 1;
	while ((c = getopt_long(argc - 1, argv + 1, "h", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON:
			o.json = true;
			break;
		case OPT_PATCH:
			o.patch = true;
			break;
		case OPT_KEEP:
			o.keep = true;
			break;
		case OPT_DRY_RUN:
			o.dry_run = true;
			break;
		case OPT_ALL:
			o.all = true;
			break;
		case OPT_FORCE:
			o.force = true;
			break;
		case OPT_ALLOW_OUTSIDE:
			o.allow_outside = true;
			break;
		case OPT_EVENTS:
			o.events = optarg;
			break;
		case OPT_FROM:
			o.from = optarg;
			break;
		case OPT_TO:
			o.to = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fputs("Try 'paddock ws --help'.\n", stderr);
			return PDK_EXIT_POLICY;
		}
	}
	args = argv + 1 + optind;
	raise_nofile();
	if (strcmp(verb, "ls") == 0)
		return args[0] ? (pdk_cli_error("ws ls: takes no arguments"), PDK_EXIT_POLICY)
			       : cmd_ls(&o);
	if (strcmp(verb, "diff") == 0)
		return cmd_diff(&o, args);
	if (strcmp(verb, "commit") == 0)
		return cmd_commit(&o, args);
	if (strcmp(verb, "discard") == 0)
		return cmd_discard(&o, args);
	if (strcmp(verb, "snapshot") == 0)
		return cmd_snapshot(args);
	if (strcmp(verb, "rollback") == 0)
		return cmd_rollback(args);
	pdk_cli_error("ws: unknown command '%s' (see 'paddock ws --help')", verb);
	return PDK_EXIT_POLICY;
}
