/*
 * gateway.h - what `paddock gateway` is told (docs/gateway.md): the
 * config file parsed and checked, each upstream server's permission
 * manifest and the paddock profile it maps to, the per-call policy and
 * budgets, the pins of tool definitions and the scan of their text.
 *
 * Pure functions of their arguments, except the pin store (a SQLite file
 * in the state directory). No printing, no environment: the caller passes
 * what it read.
 */
#ifndef PDK_GATEWAY_H
#define PDK_GATEWAY_H

#include "common.h"
#include "base.h"
#include "mcp.h"

/* A server id: [a-z0-9-]{1,32}; a downstream tool is named SERVER__TOOL. */
#define PDK_GW_ID_MAX 32
#define PDK_GW_SEP    "__"
/* The largest config file. */
#define PDK_GW_CONFIG_MAX (1u << 20)

enum pdk_gw_action {
	PDK_GW_DENY = 0, /* the zero value: fail closed */
	PDK_GW_ALLOW,
	PDK_GW_APPROVE, /* require_approval */
};

/* "allow", "deny", "require_approval". */
const char *pdk_gw_action_name(enum pdk_gw_action a);

/*
 * An upstream's permission manifest, in the AgentBound vocabulary
 * (docs/gateway.md, "Permissions"). Everything absent is denied: no
 * network, no home, no variables, one process.
 */
struct pdk_gw_manifest {
	char **fs_read;  /* filesystem.read: absolute host paths, bound read-only (NULL: none) */
	char **fs_write; /* filesystem.write: absolute host paths, bound read-write (NULL: none) */
	char **net_client; /* network.client: hosts it may reach (egress allow entries; NULL: none)
			    */
	char **env;        /* environment: NAME=VALUE given to it (values from the config) */
	bool process;      /* system.process: it may start subprocesses */
};

/* A credential the egress proxy injects (a profile's network.credentials entry). */
struct pdk_gw_cred {
	char *host;
	char *header; /* "Name: ... ${secret:NAME} ..." */
};

struct pdk_gw_server {
	char *id;       /* [a-z0-9-]{1,32} */
	int line;       /* where it is declared in the file */
	char **command; /* stdio: the argv run in its sandbox; NULL for a remote one */
	char *url;      /* remote Streamable HTTP endpoint; NULL for a stdio one */
	/*
	 * remote: "Name: value" sent with every request; a value may hold one
	 * ${secret:NAME} (PADDOCK_SECRET_NAME's value; NULL: none)
	 */
	char **headers;
	char *ca_file;      /* remote https: the PEM trust store (NULL: the system's) */
	bool insecure_http; /* remote: plain http to a host that is not loopback is allowed */
	char *cwd;          /* stdio: its working directory in the sandbox (NULL: /) */
	char *image;        /* stdio: the root's image (NULL: the host's root, read-only) */
	struct pdk_gw_manifest perm;
	struct pdk_gw_cred *creds;
	size_t n_creds;
	json_t *limits; /* the sandbox's limits as a profile's `limits:` (owned; NULL: defaults) */
	uint64_t timeout_ms;       /* one call's limit (default 60000) */
	uint64_t start_timeout_ms; /* start and initialize (default 30000) */
};

/*
 * A policy rule: every condition given must hold (a missing one matches
 * anything); the first rule that matches decides.
 */
struct pdk_gw_rule {
	char *name; /* named in every decision it makes */
	int line;
	char *principal, *server, *tool; /* fnmatch(3) patterns, or NULL */
	/*
	 * Conditions on arguments: an object {ARG: {"equals"|"prefix"|"glob"|
	 * "contains"|"regex": STRING}} where ARG is a top-level argument name or a
	 * JSON pointer ("/a/b"); all must hold. A condition on an absent argument
	 * does not hold. NULL: none.
	 */
	json_t *args;
	enum pdk_gw_action action;
	char *reason; /* shown to the client and the approver (NULL: none) */
	/* The `regex` conditions of args, compiled once at load (policy.c; owned). */
	struct pdk_gw_rule_regex *regex;
	size_t n_regex;
};

/* A principal of the HTTP endpoint: its bearer token is known by its SHA-256 only. */
struct pdk_gw_principal {
	char *name;
	unsigned char token_sha256[32];
};

/* Budgets on tool calls (0: none). */
struct pdk_gw_budgets {
	uint64_t calls_per_principal; /* over the gateway's life */
	uint64_t calls_per_session;   /* per downstream connection */
	uint64_t calls_per_server;    /* per upstream (its sandbox) */
	uint64_t rate_per_minute;     /* per principal, a sliding minute */
};

struct pdk_gw_config {
	char *path;
	struct pdk_gw_server *servers;
	size_t n_servers;
	struct pdk_gw_rule *rules;
	size_t n_rules;
	enum pdk_gw_action dflt; /* policy.default (absent: deny) */
	struct pdk_gw_principal *principals;
	size_t n_principals;
	struct pdk_gw_budgets budgets;
	uint64_t approval_timeout_s; /* approvals.timeout (default 300) */
	bool approve_first_contact;  /* pinning.first_contact: approve (default: trust) */
	bool approvals_in_band;      /* approvals.in_band (default true): clients asked too */
};

/*
 * Load and check the config at `path`. *out is the caller's
 * (pdk_gw_config_free()). -EINVAL with a message "PATH:LINE: FIELD: what
 * is wrong" (err->field the dotted field, "servers.fs.permissions.
 * filesystem.read[1]"), -ENOENT or -EIO for a file that cannot be read.
 * Refused, among others: unknown keys, a server with both or neither of
 * command and url, relative paths, a secret-looking environment name (use
 * credentials), an unknown action, a duplicate server id or rule name.
 */
PDK_MUST_CHECK int pdk_gw_config_load(const char *path, struct pdk_gw_config **out,
				      struct pdk_error **err);
/*
 * The same for `len` bytes of YAML at `data` (a file already read), named
 * `path` in messages and in c->path.
 */
PDK_MUST_CHECK int pdk_gw_config_parse(const char *path, const char *data, size_t len,
				       struct pdk_gw_config **out, struct pdk_error **err);
void pdk_gw_config_free(struct pdk_gw_config *c);

/* The server `id`, or NULL. */
const struct pdk_gw_server *pdk_gw_config_server(const struct pdk_gw_config *c, const char *id);

/*
 * The paddock profile (YAML text, caller frees) stdio server `s` runs
 * under: the strict built-in extended with the manifest's paths, no
 * workspace, no home, network none (or allowlist of net_client with the
 * credentials), the variables, pids 1 + a few unless system.process, the
 * server's limits.
 */
char *pdk_gw_profile_yaml(const struct pdk_gw_server *s);

/* ---- policy ---- */

struct pdk_gw_call_info {
	const char *principal, *server, *tool; /* tool: the upstream's own name */
	const json_t *args;                    /* an object */
};

/*
 * Compile every rule's `regex` conditions (the config reader calls it
 * once, after the rules are read). -EINVAL + *err naming the rule when one
 * does not compile (the reader checked each already).
 */
PDK_MUST_CHECK int pdk_gw_rules_compile(struct pdk_gw_config *c, struct pdk_error **err);
/* Free a rule's compiled conditions. */
void pdk_gw_rule_release(struct pdk_gw_rule *r);

/* The first rule that matches `ci`, or NULL: the default decides. */
const struct pdk_gw_rule *pdk_gw_policy_match(const struct pdk_gw_config *c,
					      const struct pdk_gw_call_info *ci);
/*
 * Whether every call of `principal` to `server`'s `tool` is denied, whatever
 * its arguments: the first rule that matches the three without argument
 * conditions denies (or, with none, the default does), and no rule before it
 * that holds for some arguments allows or asks. Such a tool is not listed
 * to that principal.
 */
bool pdk_gw_policy_denies_all(const struct pdk_gw_config *c, const char *principal,
			      const char *server, const char *tool);

/* Call counters against the budgets (one per gateway). */
struct pdk_gw_budget;
struct pdk_gw_budget *pdk_gw_budget_new(const struct pdk_gw_budgets *b);
void pdk_gw_budget_free(struct pdk_gw_budget *b);
/*
 * Charge one call at `now_ns` (CLOCK_MONOTONIC): 0, or -EDQUOT with
 * err->field the budget spent ("calls_per_principal", "calls_per_session",
 * "calls_per_server", "rate_per_minute") and nothing charged.
 */
PDK_MUST_CHECK int pdk_gw_budget_charge(struct pdk_gw_budget *b, const char *principal,
					const char *session, const char *server, uint64_t now_ns,
					struct pdk_error **err);
/* A downstream connection ended: its session's counter goes. */
void pdk_gw_budget_session_end(struct pdk_gw_budget *b, const char *session);

/* ---- pins ---- */

/*
 * The canonical form of an MCP tool definition (new reference): name,
 * title, description, inputSchema, outputSchema, annotations, with
 * volatile members (_meta, icons) left out.
 */
json_t *pdk_gw_tool_canonical(const json_t *tool);
/* The SHA-256 (hex) of the canonical form's sorted, compact JSON. */
void pdk_gw_tool_hash(const json_t *tool, char hex[65]);
/*
 * What changed from `before` to `after` (canonical forms; new reference):
 * {MEMBER: {"before": V or null, "after": V or null}} for each member that
 * differs.
 */
json_t *pdk_gw_tool_diff(const json_t *before, const json_t *after);

/*
 * Concealment and injection shapes in a definition's text (new reference):
 * an array of {"field", "shape", "excerpt"} (empty when none). Shapes:
 * "invisible" (zero-width, bidi controls, tag characters), "conceal" ("do
 * not tell/mention ... the user"), "credentials" (instructions to read
 * ~/.ssh, .env, id_rsa, tokens, keys), "override" ("ignore previous
 * instructions", "<IMPORTANT>", "system prompt"), "exfiltrate" (send or
 * pass ... to a URL or another tool).
 */
json_t *pdk_gw_scan_tool(const json_t *tool);

/* The pin store: STATE/gateway/pins.db, shared by every gateway of the state directory. */
struct pdk_gw_pins;

PDK_MUST_CHECK int pdk_gw_pins_open(const char *state_dir, struct pdk_gw_pins **out,
				    struct pdk_error **err);
void pdk_gw_pins_free(struct pdk_gw_pins *p);

/*
 * The pinned definition of `server`'s `tool`: 0 with *hash (hex) and *def
 * (canonical form, new reference), -ENOENT when none.
 */
PDK_MUST_CHECK int pdk_gw_pin_get(struct pdk_gw_pins *p, const char *server, const char *tool,
				  char hash[65], json_t **def, struct pdk_error **err);
/* Pin `def` (a canonical form) for `server`'s `tool`, approved by `approver` ("first-contact"...).
 */
PDK_MUST_CHECK int pdk_gw_pin_set(struct pdk_gw_pins *p, const char *server, const char *tool,
				  const json_t *def, const char *approver, struct pdk_error **err);
/*
 * Every pin (new reference): an array of {server, tool, hash, approver,
 * pinned_at}, of `server` only unless NULL.
 */
PDK_MUST_CHECK int pdk_gw_pin_list(struct pdk_gw_pins *p, const char *server, json_t **out,
				   struct pdk_error **err);

/* ---- the gateway (gateway.c, broker.c) ---- */

struct event_base;
struct pdk_gw;

struct pdk_gw_opts {
	struct pdk_ctl *ctl;             /* borrowed; outlives the gateway */
	struct event_base *base;         /* the loop (borrowed) */
	const struct pdk_gw_config *cfg; /* borrowed; outlives the gateway */
	const char *state_dir;           /* the pin store's (STATE/gateway/pins.db) */
	const char *run_dir;       /* the gateway's own directory: profiles are written there */
	const struct pdk_log *log; /* borrowed; NULL: dropped */
	/*
	 * Secret values never to reach an upstream or the client: NAME, VALUE,
	 * NAME, VALUE... NULL-terminated (the CLI read them from
	 * PADDOCK_SECRET_NAME); borrowed for the call. NULL: none.
	 */
	char *const *secrets;
	size_t max_message; /* the largest downstream message (0: PDK_RPC_MESSAGE_MAX) */
	/*
	 * Called once, when every upstream has listed its tools or failed its
	 * first start (each is bounded by its start_timeout; at once without
	 * upstreams): a front end that serves one client (stdio) starts reading
	 * it then, so that the client's first tools/list sees every upstream
	 * that could start. May be called from pdk_gw_new(). NULL: none.
	 */
	void (*started)(void *arg, struct pdk_gw *g);
	void *started_arg;
};

/*
 * A gateway (docs/gateway.md, "Running"): the pin store opened, every
 * stdio upstream started in a sandbox of its own (its profile written to
 * run_dir), every remote one connected to with its headers' secrets
 * resolved from o->secrets, and the downstream MCP server (pdk_gw_mcp()) whose tools are
 * the upstreams' served ones, named SERVER__TOOL. An upstream that fails
 * is logged naming it and why, and started again after 1 s, 2 s, ... up to
 * 30 s; it is not an error here. -EINVAL (field) for a remote upstream
 * that cannot be started (servers.ID.headers[N]: a secret that is not
 * set; servers.ID.ca_file: a trust store that cannot be read), the pin
 * store's errors. *out is the
 * caller's (pdk_gw_free()).
 */
PDK_MUST_CHECK int pdk_gw_new(const struct pdk_gw_opts *o, struct pdk_gw **out,
			      struct pdk_error **err);

/* The downstream MCP server (borrowed): transports serve it (mcp.h). */
struct pdk_mcp *pdk_gw_mcp(struct pdk_gw *g);

/* Once a second or so: failed upstreams whose backoff passed start again. */
void pdk_gw_tick(struct pdk_gw *g);

/*
 * Stop: every call in flight is answered, every upstream's command killed
 * and its sandbox destroyed (the control object's shutdown waits for
 * them), pending approvals withdrawn. Free every downstream transport
 * first. NULL-safe.
 */
void pdk_gw_free(struct pdk_gw *g);

#endif
