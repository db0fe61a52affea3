/*
 * mcp-run.c - `paddock mcp`: the MCP server on stdio, with a control object
 * of its own (docs/mcp.md, "What runs").
 *
 * The control object keeps its lock, store and key in a private directory
 * under the runtime directory, and shares the user's state directory (the
 * audit store, change sets) with every other paddock: so it runs beside a
 * `paddock serve` on the same state directory, and beside other `paddock
 * mcp` processes (one per client). When the client closes stdin, every
 * sandbox it made is destroyed and the process waits for their supervisors
 * to end: nothing is left running. The loop itself is front.c's.
 */
#include "common.h"
#include "base.h"
#include "daemon.h"
#include "daemon-internal.h"
#include "mcp.h"

#include <unistd.h>

static int start(struct pdk_front *f, struct pdk_mcp **mcp, const struct pdk_daemon_mcp_opts *o,
		 struct pdk_error **err)
{
	_cleanup_free_ char *identity = NULL;
	struct pdk_front_opts fo = {.kind = "mcp",
				    .actor = "paddock-mcp",
				    .state_dir = o->state_dir,
				    .run_dir = o->run_dir,
				    .envp = o->envp,
				    .log = o->log};

	if (pdk__front_open(f, &fo, err) < 0)
		return -EIO;
	*mcp = pdk_mcp_new(&(struct pdk_mcp_opts){.ctl = f->ctl,
						  .base = f->base,
						  .log = o->log,
						  .max_message = o->max_message,
						  .profile = o->profile,
						  .ttl_s = o->ttl_s,
						  .workspace = o->workspace,
						  .approval_timeout_s = o->approval_timeout_s,
						  .no_elicit_approvals = o->no_elicit_approvals,
						  .conformance_fixtures = o->conformance_fixtures});
	pdk__front_start(f);
	/*
	 * SECURITY: --listen: the Streamable HTTP endpoint instead of stdio,
	 * loopback only, Host and Origin checked against DNS rebinding; beyond
	 * loopback, paddock serve's /mcp takes bearer tokens.
	 */
	if (o->listen != NULL)
		return pdk__front_listen(
			f,
			&(struct pdk_front_listen){
				.listen = o->listen,
				.mcp = *mcp,
				.max_message = o->max_message,
				.loopback_only = "paddock mcp serves loopback only (its clients "
						 "bring no credentials); beyond it, use paddock "
						 "serve --listen, whose /mcp takes bearer tokens",
				.what = "MCP"},
			err);
	identity = pdk_xasprintf("stdio:%d", (int)getpid());
	pdk__front_stdio(f, *mcp, identity);
	return 0;
}

int pdk_daemon_mcp(const struct pdk_daemon_mcp_opts *o, struct pdk_error **err)
{
	struct pdk_front f = {0};
	struct pdk_mcp *mcp = NULL;
	int rc = start(&f, &mcp, o, err);

	if (rc == 0)
		rc = pdk__front_run(&f, err);
	/* The client is gone: its commands are killed and its sandboxes destroyed, waited for. */
	pdk__front_stop(&f);
	pdk_mcp_free(mcp);
	return rc;
}
