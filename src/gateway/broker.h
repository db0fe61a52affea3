/*
 * broker.h - what gateway.c (the object, its upstreams' lives) and
 * broker.c (their tools, pins and approvals, and every call's way through
 * policy, budgets, validation, redaction and audit) share.
 */
#ifndef PDK_GW_BROKER_H
#define PDK_GW_BROKER_H

#include "common.h"
#include "gateway-internal.h"

struct pdk_redact;
struct pdk_ctl_approval_wait;

enum pdk__gw_tool_state {
	PDK__GW_TOOL_SERVED,  /* pinned, schemas compiled: listed and callable */
	PDK__GW_TOOL_PENDING, /* new or changed: waiting for a human (approval) */
	PDK__GW_TOOL_REFUSED, /* the approval was denied or timed out, or a schema was refused */
};

/* One tool of an upstream, as last listed. Counted: a call in flight keeps it. */
struct pdk__gw_tool {
	unsigned refs;
	struct pdk_gw *g;
	struct pdk__gw_srv *srv; /* NULL once the server dropped it */
	char *name;              /* the upstream's own name */
	char *full;              /* SERVER__TOOL */
	json_t *def;             /* the definition as listed downstream (name: full) */
	json_t *canon;           /* its canonical form */
	char hash[65];
	enum pdk__gw_tool_state state;
	char approval[37];                  /* the pin's approval request, or "" */
	struct pdk_ctl_approval_wait *wait; /* while pending */
	char *why;                          /* refused: why */
	struct pdk_jschema *in, *out;       /* compiled at pin time (out may be NULL) */
};

/* One configured upstream, stdio or remote. */
struct pdk__gw_srv {
	struct pdk_gw *g;
	const struct pdk_gw_server *s; /* the config's (borrowed) */
	char *profile;                 /* stdio: the profile file written for it */
	char **headers;       /* remote: its headers, secrets resolved (wiped at the end) */
	struct pdk_gw_up *up; /* running or failed, or NULL */
	bool failed;          /* up failed: freed and started again at retry_ns */
	bool settled;         /* it listed its tools or failed, at least once */
	char *last_error;     /* why it failed last (NULL: never) */
	uint64_t retry_ns;
	unsigned backoff_s;
	struct pdk__gw_tool **tools; /* as last listed */
	size_t n_tools;
};

struct pdk_gw {
	struct pdk_ctl *ctl;
	struct event_base *base;
	const struct pdk_gw_config *cfg;
	struct pdk_log log;
	struct pdk_mcp *mcp;
	struct pdk_mcp_provider provider;
	struct pdk_gw_pins *pins;
	struct pdk_gw_budget *budget;
	struct pdk_redact *redact;
	struct pdk__gw_srv *srvs;
	size_t n_srvs;
	struct pdk__gw_call *calls; /* in flight (cancelled ones too, until answered) */
	bool stopping;
	bool starting; /* pdk_gw_new() is starting the upstreams */
	void (*started)(void *arg, struct pdk_gw *g);
	void *started_arg; /* `started` is NULL once it was called */
};

/* ---- broker.c ---- */
/* An upstream listed `tools`: pin, scan, ask, compile; list_changed downstream when it changed. */
void pdk__gw_tools_listed(struct pdk__gw_srv *sv, const json_t *tools);
/* Drop a reference to `t`; the last frees it. */
void pdk__gw_tool_unref(struct pdk__gw_tool *t);
/*
 * The tools of a ready upstream that are served, but for those every call of
 * `principal` to is denied (new reference, for tools/list).
 */
json_t *pdk__gw_list(struct pdk_gw *g, const char *principal);
/* The provider's tools/call, cancel and conn_end (mcp.h). */
bool pdk__gw_call(void *ctx, struct pdk_mcp_call *call, const char *name, const json_t *args);
void pdk__gw_cancel(void *ctx, struct pdk_mcp_call *call);
/* Every call still in flight is answered (the gateway stops). */
void pdk__gw_calls_end(struct pdk_gw *g);
/* `sv` listed its tools or failed: `started` is called when every upstream has. */
void pdk__gw_settled(struct pdk__gw_srv *sv);
/* The server `id`, or NULL. */
struct pdk__gw_srv *pdk__gw_srv_find(struct pdk_gw *g, const char *id, size_t len);

#endif
