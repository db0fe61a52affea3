/*
 * request.h - strict validation of the daemon's JSON request bodies.
 *
 * Every body is untrusted bytes from the network. A parser here accepts a
 * body only when it is one JSON object whose every member is known and of
 * the right type and range; otherwise it fails with a message and the path
 * of the offending field ("argv[0]", "overrides.limits.memory", "ttl"), which
 * the API returns as the error's "field". Unknown fields are errors.
 * Duplicate keys are errors. Nothing here allocates more than the body's size
 * allows, and nothing crashes on any input (tests/fuzz/fuzz-request.c).
 */
#ifndef PDK_REQUEST_H
#define PDK_REQUEST_H

#include "common.h"
#include "base.h"
#include "control.h"

#define PDK_REQ_FIELD_MAX 128
#define PDK_REQ_MSG_MAX   256

/* Why a body was refused. */
struct pdk_req_error {
	char field[PDK_REQ_FIELD_MAX]; /* "" when the body as a whole is wrong */
	char msg[PDK_REQ_MSG_MAX];
};

/* POST /v1/sandboxes */
struct pdk_req_create {
	char *profile;     /* never NULL ("default") */
	char *image;       /* the root's image ("host": the host's); NULL: the profile's */
	json_t *overrides; /* validated object or NULL */
	json_t *workspace; /* validated {"path":..,"mode":..} or NULL */
	json_t *env;       /* object of strings or NULL */
	json_t *labels;    /* object of strings, never NULL */
	uint64_t ttl_s;    /* 0: none */
	uint64_t idle_timeout_s;
	char *idempotency_key; /* may be NULL */
	unsigned token_ops;    /* "token":{"ops":[..]}: the create token's operations; 0: all */
	uint64_t token_ttl_s;  /* "token":{"ttl_s":N}; 0: PDK_REQ_TOKEN_TTL_MAX */
};

/* POST /v1/sandboxes/{id}/exec */
struct pdk_req_exec {
	char **argv;      /* never NULL, argv[0] set */
	char **env;       /* "K=V" strings; may be NULL */
	char *cwd;        /* may be NULL */
	char *stdin_data; /* may be NULL */
	size_t stdin_len;
	uint64_t timeout_ms; /* 0: none */
	uint64_t output_cap;
	bool stream;
	bool pty;
	bool stdin_open; /* stdin stays open for the stdin route (streaming, no pty) */
	uint64_t cols, rows;
};

/* POST /v1/sandboxes/{id}/tokens */
struct pdk_req_token {
	unsigned ops;
	uint64_t ttl_s;
};

/* POST /v1/kill */
struct pdk_req_kill {
	char *session, *workflow, *agent, *reason;
	json_t *labels; /* object of strings or NULL */
	char **ids;     /* may be NULL */
	bool all;       /* every live sandbox: then no other selector is given */
};

#define PDK_REQ_OUTPUT_CAP_DEFAULT 16384
#define PDK_REQ_OUTPUT_CAP_MAX     (16u << 20)
#define PDK_REQ_TOKEN_TTL_DEFAULT  (15 * 60)
#define PDK_REQ_TOKEN_TTL_MAX      PDK_TOKEN_TTL_MAX /* control's rule (token.h) */
#define PDK_REQ_POOL_MAX           PDK_CTL_POOL_MAX  /* control's rule (control.h) */

/*
 * Each parser: 0 and *out filled (release with the matching _release), or -1 and
 * *e filled. A NULL or empty body is taken as "{}" where every field is optional.
 */
int pdk_req_parse_create(const char *body, size_t len, struct pdk_req_create *out,
			 struct pdk_req_error *e);
void pdk_req_create_release(struct pdk_req_create *r);
int pdk_req_parse_exec(const char *body, size_t len, struct pdk_req_exec *out,
		       struct pdk_req_error *e);
void pdk_req_exec_release(struct pdk_req_exec *r);
int pdk_req_parse_token(const char *body, size_t len, struct pdk_req_token *out,
			struct pdk_req_error *e);
int pdk_req_parse_kill(const char *body, size_t len, struct pdk_req_kill *out,
		       struct pdk_req_error *e);
void pdk_req_kill_release(struct pdk_req_kill *r);
/* {"size":N} (PUT /v1/pools/{profile}) */
int pdk_req_parse_pool(const char *body, size_t len, uint64_t *size, struct pdk_req_error *e);
/* {"<key>":"name"}: snapshot {"name"}, rollback {"snapshot"}; a name is [A-Za-z0-9_.-]{1,64}. */
int pdk_req_parse_name(const char *body, size_t len, const char *key, bool required, char **out,
		       struct pdk_req_error *e);
/* The body of commit: {"restart":bool, "force":bool, "dry_run":bool}, all optional. */
struct pdk_req_commit {
	bool restart;
	bool force;
	bool dry_run;
};
int pdk_req_parse_commit(const char *body, size_t len, struct pdk_req_commit *out,
			 struct pdk_req_error *e);
/*
 * The body of snapshot, rollback and commit: {"<key>":"name", "restart":bool}
 * (key NULL: commit, "restart" only). Either out pointer may be NULL.
 */
int pdk_req_parse_ws(const char *body, size_t len, const char *key, bool required, char **name,
		     bool *restart, struct pdk_req_error *e);
/* {"note":"..."}, optional (POST /v1/approvals/{id}/approve and /deny); *note NULL: none. */
int pdk_req_parse_approval(const char *body, size_t len, char **note, struct pdk_req_error *e);
/* {"host":"ENTRY"}, required (POST /v1/sandboxes/{id}/egress/allow); *host the caller's. */
int pdk_req_parse_egress_allow(const char *body, size_t len, char **host, struct pdk_req_error *e);
/* {"signal":"TERM"|"SIGTERM"|15} */
int pdk_req_parse_signal(const char *body, size_t len, int *sig, struct pdk_req_error *e);
/* {"cols":N,"rows":N}, both 1..1000 (POST .../exec/{exec_id}/resize) */
int pdk_req_parse_resize(const char *body, size_t len, uint64_t *cols, uint64_t *rows,
			 struct pdk_req_error *e);

#endif
