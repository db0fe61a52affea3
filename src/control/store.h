/*
 * store.h - the daemon's state: STATE/daemon.db (SQLite, WAL), one
 * connection owned by the daemon's loop. Tables: sandboxes (one row per
 * sandbox the daemon created, until it is destroyed and reaped), tokens
 * (admin bearer tokens: only their SHA-256 is stored), e2b_keys (the E2B
 * front door's API keys, likewise) and pools (the warm pool size of each
 * profile).
 *
 * Every statement is prepared once with binds; no SQL is built from data.
 */
#ifndef PDK_STORE_H
#define PDK_STORE_H

#include "common.h"
#include "base.h"

#include <sys/types.h>

#define PDK_STORE_DB "daemon.db"

struct pdk_store;

/* One sandbox row. Strings are owned by the struct (pdk_store_sandbox_release()). */
struct pdk_store_sandbox {
	char *id;
	char *state; /* starting|running|paused|ended|lost */
	char *profile;
	char *labels;            /* JSON object */
	char *spec;              /* JSON object (the supervisor's spec) */
	char *idempotency_key;   /* may be NULL */
	pid_t supervisor_pid;    /* 0: none yet */
	uint64_t created_ns;     /* CLOCK_REALTIME */
	uint64_t expires_ns;     /* 0: no TTL */
	uint64_t idle_timeout_s; /* 0: none */
	uint64_t spool_offset;   /* bytes of events.jsonl already ingested */
	uint64_t output_bytes;   /* exec output charged to the budget */
	uint64_t commands;       /* exec requests charged to the budget */
	int pool;                /* 1: an unclaimed warm-pool member */
	int claimed;             /* 1: claimed from a warm pool */
};

void pdk_store_sandbox_release(struct pdk_store_sandbox *sb);

/*
 * Open (creating it 0600, and `state_dir` 0700, when missing) the store.
 * *out is the caller's (pdk_store_free()).
 */
PDK_MUST_CHECK int pdk_store_open(const char *state_dir, struct pdk_store **out,
				  struct pdk_error **err);
void pdk_store_free(struct pdk_store *s);

/*
 * Insert a sandbox. -EEXIST (error naming the key) when another row has the
 * same idempotency key; nothing is written then.
 */
PDK_MUST_CHECK int pdk_store_sandbox_insert(struct pdk_store *s, const struct pdk_store_sandbox *sb,
					    struct pdk_error **err);
/* Fill *out (caller releases). -ENOENT when absent. */
PDK_MUST_CHECK int pdk_store_sandbox_get(struct pdk_store *s, const char *id,
					 struct pdk_store_sandbox *out, struct pdk_error **err);
/* The sandbox created with idempotency key `key`. -ENOENT when none. */
PDK_MUST_CHECK int pdk_store_sandbox_by_key(struct pdk_store *s, const char *key,
					    struct pdk_store_sandbox *out, struct pdk_error **err);
/* Called for each row (borrowed for the call), oldest first; non-zero stops and is returned. */
typedef int (*pdk_store_sandbox_cb)(void *data, const struct pdk_store_sandbox *sb);
PDK_MUST_CHECK int pdk_store_sandbox_each(struct pdk_store *s, pdk_store_sandbox_cb cb, void *data,
					  struct pdk_error **err);
/*
 * Update the mutable columns of row sb->id (all but id, profile, spec, created_ns).
 * -EEXIST when the new idempotency key is another row's.
 */
PDK_MUST_CHECK int pdk_store_sandbox_update(struct pdk_store *s, const struct pdk_store_sandbox *sb,
					    struct pdk_error **err);
/* Delete row `id` (absent is not an error). */
PDK_MUST_CHECK int pdk_store_sandbox_delete(struct pdk_store *s, const char *id,
					    struct pdk_error **err);

/* Admin tokens: `sha256_hex` of the token, a name (unique), created time. */
PDK_MUST_CHECK int pdk_store_token_add(struct pdk_store *s, const char *name,
				       const char *sha256_hex, struct pdk_error **err);
/* 0 when `sha256_hex` is a stored token's (its name in *name, caller frees, may be NULL), else
 * -ENOENT. */
PDK_MUST_CHECK int pdk_store_token_check(struct pdk_store *s, const char *sha256_hex, char **name,
					 struct pdk_error **err);
typedef int (*pdk_store_token_cb)(void *data, const char *name, uint64_t created_ns);
PDK_MUST_CHECK int pdk_store_token_each(struct pdk_store *s, pdk_store_token_cb cb, void *data,
					struct pdk_error **err);
/* Remove the token named `name`. -ENOENT when none has that name. */
PDK_MUST_CHECK int pdk_store_token_revoke(struct pdk_store *s, const char *name,
					  struct pdk_error **err);

/*
 * E2B API keys (the E2B front door's X-API-KEY), kept like admin tokens:
 * `sha256_hex` of the key, a unique name, the creation time. The same
 * contracts as the token functions above; "no E2B API key named 'N'".
 */
PDK_MUST_CHECK int pdk_store_e2b_key_add(struct pdk_store *s, const char *name,
					 const char *sha256_hex, struct pdk_error **err);
PDK_MUST_CHECK int pdk_store_e2b_key_check(struct pdk_store *s, const char *sha256_hex, char **name,
					   struct pdk_error **err);
PDK_MUST_CHECK int pdk_store_e2b_key_each(struct pdk_store *s, pdk_store_token_cb cb, void *data,
					  struct pdk_error **err);
PDK_MUST_CHECK int pdk_store_e2b_key_revoke(struct pdk_store *s, const char *name,
					    struct pdk_error **err);

/* Warm pools: the target size of `profile` (0 removes the pool). */
PDK_MUST_CHECK int pdk_store_pool_set(struct pdk_store *s, const char *profile, uint64_t size,
				      struct pdk_error **err);
typedef int (*pdk_store_pool_cb)(void *data, const char *profile, uint64_t size);
PDK_MUST_CHECK int pdk_store_pool_each(struct pdk_store *s, pdk_store_pool_cb cb, void *data,
				       struct pdk_error **err);

/*
 * Ended sandboxes, kept for the daemon's retention period: the final API
 * object (`sandbox`, JSON with state "ended"), why and when it ended, and
 * its idempotency key (so that a retried create is not served a new
 * sandbox). Strings owned (pdk_store_ended_release()).
 */
struct pdk_store_ended {
	char *id;
	char *idempotency_key; /* may be NULL */
	uint64_t ended_ns;     /* CLOCK_REALTIME */
	char *reason;
	char *sandbox; /* JSON object */
};

void pdk_store_ended_release(struct pdk_store_ended *e);

/*
 * One transaction: delete sandboxes row e->id and record it as ended (a
 * crash keeps either the live row or the ended one, never both or neither).
 */
PDK_MUST_CHECK int pdk_store_sandbox_end(struct pdk_store *s, const struct pdk_store_ended *e,
					 struct pdk_error **err);
/* Fill *out (caller releases). -ENOENT when absent. */
PDK_MUST_CHECK int pdk_store_ended_get(struct pdk_store *s, const char *id,
				       struct pdk_store_ended *out, struct pdk_error **err);
/* The last ended sandbox created with idempotency key `key`. -ENOENT when none. */
PDK_MUST_CHECK int pdk_store_ended_by_key(struct pdk_store *s, const char *key,
					  struct pdk_store_ended *out, struct pdk_error **err);
/* Each ended sandbox (borrowed for the call), oldest end first; non-zero stops and is returned. */
typedef int (*pdk_store_ended_cb)(void *data, const struct pdk_store_ended *e);
PDK_MUST_CHECK int pdk_store_ended_each(struct pdk_store *s, pdk_store_ended_cb cb, void *data,
					struct pdk_error **err);
/* Forget the sandboxes that ended before `before_ns`. The number forgotten, or negative. */
PDK_MUST_CHECK int pdk_store_ended_purge(struct pdk_store *s, uint64_t before_ns,
					 struct pdk_error **err);

#ifdef PDK_UNIT_TESTING
/* Unit tests only: how many statements the store's connection holds prepared now. */
int pdk__store_statements(struct pdk_store *s);
#endif

#endif
