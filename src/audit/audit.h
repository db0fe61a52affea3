/*
 * audit.h - the audit store: every event of every sandbox in one SQLite
 * file (STATE/audit.db), chained by SHA-256 and signed at checkpoints.
 *
 * Record i is stored as its canonical line: the event object (events.h)
 * with "seq" the store's global sequence number (1, 2, ...), "sandbox_seq"
 * the stream's own number and "prev_hash" the hex hash of record i-1 (64
 * zeros for record 1), serialised by jansson compact, keys sorted, ASCII
 * only, without a newline. hash(i) = SHA-256(line(i)). Every N records
 * (and when a stream closes) a checkpoint {seq, hash, key_id} is signed
 * with the store's Ed25519 key (STATE/audit-key, the raw 32-byte private
 * key; the public half in STATE/audit-key.pub.pem; key_id = hex SHA-256 of
 * the raw public key).
 * docs/audit.md gives the exact format for third-party verifiers.
 *
 * Writers in several processes keep one chain: each batch is one
 * BEGIN IMMEDIATE transaction that reads the head and appends.
 *
 * Layer contract: stands on telemetry/ (the events it stores) and base/
 * (db.h: the SQLite plumbing). Append-only: nothing here rewrites or
 * deletes a record; a batch that cannot be stored is an error to its
 * writer, never a dropped event (a run's sink then stops its sandbox; the
 * daemon's ingest keeps the batch in the spool and tries again).
 */
#ifndef PDK_AUDIT_H
#define PDK_AUDIT_H

#include "common.h"
#include "base.h"
#include "telemetry.h"

#include <stdatomic.h>

#define PDK_AUDIT_DB        "audit.db"
#define PDK_AUDIT_KEY       "audit-key"
#define PDK_AUDIT_PUBKEY    "audit-key.pub.pem"
#define PDK_AUDIT_SPOOL_DIR "audit-spool"
/*
 * A run folds the spools itself once this many wait (audit commands fold at
 * every call): one run in that many pays a fold, below what a p95 sees.
 */
#define PDK_AUDIT_SPOOL_FOLD_AT 128
/*
 * A fold keeps up to this many folded spools, emptied, as spares
 * (audit-spool/.spare-N) that later runs rename to their own name: a run
 * then allocates no inode for its spool.
 */
#define PDK_AUDIT_SPOOL_SPARES     128
#define PDK_AUDIT_CHECKPOINT_EVERY 1000
#define PDK_AUDIT_QUEUE_MAX        1024
#define PDK_AUDIT_FLUSH_MS         200
#define PDK_AUDIT_HASH_HEX         65 /* 64 hex digits and the NUL */
/*
 * The largest canonical record. An event's attributes come from the
 * sandbox (argv, paths), so the buffer that serialises them has a cap, set
 * far above any event paddock makes (a traced exec's argv is at most
 * 64 KiB, a spooled line 1 MiB).
 */
#define PDK_AUDIT_RECORD_MAX ((size_t)16 << 20)

struct pdk_audit;

/*
 * Open (creating it, 0600, and `state_dir`, 0700, if needed) the store in
 * `state_dir`. *out is the caller's, freed with pdk_audit_free(). The
 * signing key is loaded (or created) at the first checkpoint, not here
 * (the sink's writer loads it early).
 */
PDK_MUST_CHECK int pdk_audit_open(const char *state_dir, struct pdk_audit **out,
				  struct pdk_error **err);
void pdk_audit_free(struct pdk_audit *a);

/*
 * Open the existing store in `state_dir` for reading only (-ENOENT when
 * there is none): a second connection beside the store's writer, for a
 * verification (pdk_audit_verify_chain()) or a query on another thread
 * than the writer's. Nothing is created or written through it; appends
 * fail.
 */
PDK_MUST_CHECK int pdk_audit_open_readonly(const char *state_dir, struct pdk_audit **out,
					   struct pdk_error **err);

/*
 * Once `*stop` (borrowed: it must outlive `a`) becomes true, set by any
 * thread, every statement of `a` (a verification, a query) ends soon with
 * an error ("interrupted"), and so does every later one. Call it on the
 * thread that uses `a`.
 */
void pdk_audit_set_stop(struct pdk_audit *a, const atomic_bool *stop);

/* Sign a checkpoint every `n` records (0: only when asked). Default 1000. */
void pdk_audit_set_checkpoint_every(struct pdk_audit *a, uint64_t n);

/*
 * Append `n` events (borrowed; each as events.h stamps them) in one
 * transaction, after the chain's current head, wherever the other writers
 * left it. A checkpoint is signed in the same transaction when the batch
 * crosses a multiple of the checkpoint interval, or when `checkpoint` is
 * true. All or nothing: on failure nothing of the batch is stored; an
 * event whose record would pass PDK_AUDIT_RECORD_MAX fails it with -E2BIG.
 */
PDK_MUST_CHECK int pdk_audit_append(struct pdk_audit *a, json_t *const *events, size_t n,
				    bool checkpoint, struct pdk_error **err);

/*
 * pdk_audit_append() of a batch read from a spool (a sandbox's
 * events.jsonl), and in the same transaction the spool's offset
 * (`source`: the sandbox id) set to `offset`: a crash keeps both or
 * neither, so a batch is never appended twice nor skipped. `n` may be 0
 * (lines that were not events: only the offset moves).
 */
PDK_MUST_CHECK int pdk_audit_append_spool(struct pdk_audit *a, json_t *const *events, size_t n,
					  const char *source, uint64_t offset,
					  struct pdk_error **err);
/* The offset saved for `source` (0 when none). */
PDK_MUST_CHECK int pdk_audit_spool_offset(struct pdk_audit *a, const char *source, uint64_t *offset,
					  struct pdk_error **err);
/* Forget `source`'s offset (its spool is gone). */
PDK_MUST_CHECK int pdk_audit_spool_forget(struct pdk_audit *a, const char *source,
					  struct pdk_error **err);

/* Sign a checkpoint at the current head, unless the head has one already or is empty. */
PDK_MUST_CHECK int pdk_audit_checkpoint(struct pdk_audit *a, struct pdk_error **err);

/* Why verification failed. */
enum pdk_audit_break {
	PDK_AUDIT_INTACT = 0,
	PDK_AUDIT_ALTERED,       /* a record's bytes no longer hash to what was chained/signed */
	PDK_AUDIT_MISSING,       /* a sequence number is absent */
	PDK_AUDIT_REORDERED,     /* a record links to, or sits at, another record's place */
	PDK_AUDIT_TRUNCATED,     /* the chain ends before a signed checkpoint or the anchor */
	PDK_AUDIT_BAD_SIGNATURE, /* a checkpoint's signature or key does not match */
	PDK_AUDIT_COLUMN,        /* a query column of the table disagrees with its record */
};

/* "ok", "altered", "missing", "reordered", "truncated", "bad signature", "column". */
const char *pdk_audit_break_name(enum pdk_audit_break b);

/*
 * A head recorded outside the machine (`paddock audit head` prints it as
 * SEQ:HASH): record `seq` must still be there and hash to `hash`. The
 * chain may have grown since; every record up to `seq` is then the one
 * that was anchored. seq 0 with a zero hash is the empty store's head.
 */
struct pdk_audit_anchor {
	uint64_t seq;
	unsigned char hash[32];
};

/*
 * Parse "SEQ:HASH" (a decimal sequence number, a colon, 64 hex digits of
 * either case) into *out. -EINVAL with an error that quotes the text.
 */
PDK_MUST_CHECK int pdk_audit_parse_anchor(const char *text, struct pdk_audit_anchor *out,
					  struct pdk_error **err);

struct pdk_audit_verify {
	enum pdk_audit_break reason;
	uint64_t broken_seq; /* the first broken sequence number */
	char detail[256];    /* one sentence: what did not match */
	uint64_t records;
	uint64_t checkpoints;
	uint64_t head_seq; /* the last record (0: empty) */
	char head_hash[PDK_AUDIT_HASH_HEX];
	uint64_t signed_seq;             /* the last checkpoint's seq (0: none) */
	char signed_ts[40];              /* the "ts" of record signed_seq ("" if none) */
	char key_id[PDK_AUDIT_HASH_HEX]; /* the public key file's id ("" if none) */
};

/*
 * Recompute the whole chain and check every checkpoint's signature with
 * the public key file beside the store, in one read transaction (writers
 * may go on); check that every query column of the table (ts, sandbox,
 * session, workflow, actor, kind) holds what its record's line holds
 * (PDK_AUDIT_COLUMN names the first that does not); and, when `anchor` is
 * not NULL, that the chain still holds the anchored head (a hash that
 * differs is PDK_AUDIT_ALTERED, a chain that ends before it
 * PDK_AUDIT_TRUNCATED). Returns 0 when the check could be made, whatever
 * it found (res->reason), and < 0 only when it could not (I/O, a store
 * that is not paddock's).
 */
PDK_MUST_CHECK int pdk_audit_verify_chain(struct pdk_audit *a,
					  const struct pdk_audit_anchor *anchor,
					  struct pdk_audit_verify *res, struct pdk_error **err);

/*
 * One stored record, borrowed for the duration of a callback. Every field
 * is read from the record's canonical line (the hashed bytes that verify
 * checks), parsed: the table's query columns are never shown, nor trusted
 * by a filter (SECURITY: a column edited in the database cannot rename,
 * re-date, hide or move a record).
 */
struct pdk_audit_row {
	uint64_t seq;
	const char *ts;
	const char *sandbox;
	const char *session;  /* may be NULL */
	const char *workflow; /* may be NULL */
	const char *actor;
	const char *kind;
	json_t *record;   /* the parsed line (incref it to keep it) */
	const char *line; /* the canonical line, not NUL-terminated */
	size_t line_len;
};

struct pdk_audit_filter {
	const char *sandbox;  /* exact id, or NULL */
	const char *kind;     /* kind (pdk_audit_kind_match()), or NULL */
	uint64_t after_seq;   /* only records with seq > after_seq */
	uint64_t last;        /* only the last N matching (0: all) */
	uint64_t first;       /* without last: only the first N matching, read forward (0: all) */
	const char *decision; /* attrs.decision (net.connect: "allow", "deny"), or NULL */
	const char *session;  /* the session label, or NULL */
};

/*
 * Whether a record of kind `kind` matches the filter `want`: the same kind,
 * or, when `want` ends in '.' ("sandbox."), every kind it is a prefix of.
 * The one rule of every --kind filter (audit, events, the API's ?kind=).
 */
bool pdk_audit_kind_match(const char *want, const char *kind);

/* Return non-zero from the callback to stop early (that value is returned). */
typedef int (*pdk_audit_row_cb)(void *data, const struct pdk_audit_row *row);

/*
 * Matching records in sequence order. The filter is applied to each
 * record's line, not to the table's columns. With `last`, the query reads
 * from the end of the store: with a sandbox, or an exact kind, through an
 * index of the lines' values (the rows of that sandbox or kind only);
 * otherwise row by row back from the head until `last` match. A line that is not a record
 * (not a JSON object with string ts, sandbox, actor and kind, or whose own
 * seq is not its row's) ends the query with -EBADMSG naming its seq: the
 * store was tampered with, and `paddock audit verify` says how.
 */
PDK_MUST_CHECK int pdk_audit_query(struct pdk_audit *a, const struct pdk_audit_filter *f,
				   pdk_audit_row_cb cb, void *data, struct pdk_error **err);

/* One sandbox as `audit ls` shows it (read from the lines). Borrowed for the callback. */
struct pdk_audit_sandbox {
	const char *sandbox;
	const char *first_ts;
	const char *last_ts;
	const char *session;  /* the first non-null one, or NULL */
	const char *workflow; /* likewise */
	uint64_t events;
};

typedef int (*pdk_audit_sandbox_cb)(void *data, const struct pdk_audit_sandbox *s);

/* Every sandbox of the store, by first record. */
PDK_MUST_CHECK int pdk_audit_sandboxes(struct pdk_audit *a, pdk_audit_sandbox_cb cb, void *data,
				       struct pdk_error **err);

/*
 * The full sandbox id that `prefix` names, among the sandboxes of the
 * records' lines (caller frees *out). -ENOENT
 * when none does, -EEXIST when several do (the error names them).
 */
PDK_MUST_CHECK int pdk_audit_resolve_sandbox(struct pdk_audit *a, const char *prefix, char **out,
					     struct pdk_error **err);

/* ---- the events sink ---- */

/* What emit() does when the queue is full. */
enum pdk_audit_on_full {
	PDK_AUDIT_BLOCK, /* wait for the writer */
	PDK_AUDIT_STOP,  /* fail: the caller stops the sandbox (nothing is dropped) */
};

struct pdk_audit_sink_config {
	const char *state_dir;     /* copied */
	size_t queue_max;          /* 0: PDK_AUDIT_QUEUE_MAX */
	unsigned flush_ms;         /* 0: PDK_AUDIT_FLUSH_MS */
	uint64_t checkpoint_every; /* 0: PDK_AUDIT_CHECKPOINT_EVERY */
	enum pdk_audit_on_full on_full;
};

/*
 * Add the audit store as a sink of `ev`. Events are queued (bounded) and
 * written by a writer thread, started here, which opens the store at once;
 * it writes when the queue is full, every flush_ms, and at close, where it
 * also signs a checkpoint. Once the writer has failed, every emit() and
 * the close fail with its error (fail closed).
 */
void pdk_audit_add_sink(struct pdk_events *ev, const struct pdk_audit_sink_config *cfg);

/* ---- the run spool (audit-spool.c) ---- */

/*
 * Add a run's spool as a sink of `ev`: STATE/audit-spool/ID.jsonl (the
 * directory made 0700 when missing; the file a spare renamed, else made
 * 0600), locked (flock) until the stream
 * closes. Each event is appended as one line by one write() before emit()
 * returns; a failed write fails the emit (the run stops its sandbox). No
 * SQLite, no OpenSSL: the records are chained and signed when folded
 * (pdk_audit_fold()). -errno with *err when the spool cannot be made.
 */
PDK_MUST_CHECK int pdk_audit_add_spool(struct pdk_events *ev, const char *state_dir, const char *id,
				       struct pdk_error **err);

struct pdk_audit_fold {
	uint64_t records;    /* appended to the chain */
	uint64_t spools;     /* folded and removed (or kept empty as spares) */
	uint64_t running;    /* skipped: their run still holds them */
	uint64_t torn_bytes; /* a killed run's unfinished last line, dropped */
};

/*
 * Fold every spool of the store's state directory whose run is over (its
 * lock is free: the run ended or was killed) into the store: its complete
 * lines appended in order, in transactions that also save how far the
 * spool is folded (so a crash never appends a record twice nor skips one),
 * the file removed or, emptied, kept as a spare (PDK_AUDIT_SPOOL_SPARES;
 * never one that was empty already); then the head is signed once (unless it is signed
 * already), covering every record folded. Spools of live runs are left (counted
 * in res->running). A complete line that is not an event stops the fold
 * with -EIO naming the spool, which is kept.
 */
PDK_MUST_CHECK int pdk_audit_fold(struct pdk_audit *a, struct pdk_audit_fold *res,
				  struct pdk_error **err);

/*
 * pdk_audit_fold() of at most `max_spools` spools (those first by name), so
 * that a caller with others to answer (the daemon's tick) keeps each pass
 * short; the rest wait for the next pass. The head is signed the same way.
 */
PDK_MUST_CHECK int pdk_audit_fold_some(struct pdk_audit *a, uint64_t max_spools,
				       struct pdk_audit_fold *res, struct pdk_error **err);

/* One spool not folded yet, borrowed for the callback. */
struct pdk_audit_spool {
	const char *name; /* ID.jsonl */
	uint64_t records; /* its complete lines */
	bool running;     /* its run still holds it */
};

typedef int (*pdk_audit_spool_cb)(void *data, const struct pdk_audit_spool *s);

/*
 * Every spool of `state_dir` not folded yet, by name, without opening the
 * store nor changing anything (what `audit verify` reports). A non-zero
 * return of the callback stops the walk and is returned.
 */
PDK_MUST_CHECK int pdk_audit_pending(const char *state_dir, pdk_audit_spool_cb cb, void *data,
				     struct pdk_error **err);

/* How many spools wait in `state_dir` (0 when none or unreadable). */
int pdk_audit_spool_count(const char *state_dir);

/*
 * How many spools wait in `state_dir`, about, without reading the spool
 * directory: one byte of audit-spool/.waiting per spool made, set to the
 * spools left by every fold. -1 when unknown (no such file). It can say a
 * few too few (a spool made while a fold ran) or too many (spools folded
 * by a writer's own fold, a file edited): a caller that acts on it counts
 * first (pdk_audit_spool_count()) and sets it right
 * (pdk_audit_spool_waiting_set()).
 */
int pdk_audit_spool_waiting(const char *state_dir);
void pdk_audit_spool_waiting_set(const char *state_dir, int n);

/* ---- a long-lived writer's spool, folded by the writer itself (audit-spool.c) ---- */

/*
 * A spool for a process that writes records for a long time and answers
 * between them (the gateway's control object): each record is one line
 * appended by one write() to STATE/audit-spool/ID-GEN.jsonl, cheaper on a
 * request's path than a store transaction, and the writer folds its own
 * spool now and then (pdk_audit_journal_fold()) while it holds the spool's
 * lock. Each fold removes the folded file and starts generation GEN + 1
 * (made at the next record), so a file never holds a folded record for
 * long and never reuses a name. A writer killed between two folds leaves a
 * spool like a killed run's: its lock is free, and the next fold of anyone
 * (pdk_audit_fold(): an audit command, the daemon's tick, a later run or
 * gateway) folds it, from the offset a fold cut short saved. One thread.
 */
struct pdk_audit_journal;

/*
 * A journal for `state_dir` whose files are named after `id` (both copied;
 * `id` a file name's part: [A-Za-z0-9-]). Nothing is opened here: the
 * first record makes the file. Caller frees with pdk_audit_journal_free().
 */
struct pdk_audit_journal *pdk_audit_journal_new(const char *state_dir, const char *id);

/*
 * Append `event` as one line, by one write(), made and locked first when
 * the generation has no file yet. The journal keeps a reference to `event`
 * until its fold (folding it from memory, not parsing the line again): the
 * caller must not change it. 0 when the line is in the file; -errno with
 * *err otherwise, and then nothing of it is (a short write is cut off
 * again).
 */
PDK_MUST_CHECK int pdk_audit_journal_append(struct pdk_audit_journal *j, const json_t *event,
					    struct pdk_error **err);

/*
 * pdk_audit_journal_append() with the line already made: `n` bytes at
 * `line`, the compact JSON text of `event` (its members in any order) and
 * a newline. The caller guarantees the text is the event: a fold takes the
 * event from memory, the fold of a dead journal parses the line, and both
 * must store the same record.
 */
PDK_MUST_CHECK int pdk_audit_journal_append_line(struct pdk_audit_journal *j, const json_t *event,
						 const char *line, size_t n,
						 struct pdk_error **err);

/* The records appended since the last fold that took them (0: nothing to fold). */
uint64_t pdk_audit_journal_pending(const struct pdk_audit_journal *j);

/*
 * Fold the current generation into `a`: its records appended after the
 * head (signed as any append is, at the store's checkpoint interval), the
 * file removed and its offset forgotten; the next record starts a new
 * generation. *records (may be NULL) counts those appended. On failure the
 * file and what is left of it stay, and the next call goes on from the
 * offset saved; a file already removed is never written to again.
 */
PDK_MUST_CHECK int pdk_audit_journal_fold(struct pdk_audit_journal *j, struct pdk_audit *a,
					  uint64_t *records, struct pdk_error **err);

/*
 * Close the journal (its lock released) and free it. Records not folded
 * stay in their file for the next fold of anyone. NULL-safe.
 */
void pdk_audit_journal_free(struct pdk_audit_journal *j);

#endif
