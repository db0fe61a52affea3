/*
 * fixtures.h - the MCP conformance suite's server fixtures, behind
 * `paddock mcp --conformance-fixtures` (fixtures.c; docs/mcp.md,
 * "Conformance fixtures"). Test data only: a fixture never runs anything.
 * The server asks them first, and only when the option is on.
 */
#ifndef PDK_MCP_FIXTURES_H
#define PDK_MCP_FIXTURES_H

#include "common.h"
#include "mcp-internal.h"

/* The fixture tools, as tools/list lists them (a new reference to an array). */
json_t *pdk__mcp_fixture_tools(void);

/* Add what the fixtures serve to the server's capabilities `caps` (an object). */
void pdk__mcp_fixture_caps(json_t *caps);

/*
 * Answer the request `m` when a fixture serves it: a fixture tool's
 * tools/call, resources/list, resources/templates/list, resources/read,
 * resources/subscribe and unsubscribe, prompts/list, prompts/get,
 * completion/complete, logging/setLevel. Returns true when it answered
 * (a result or a JSON-RPC error, after any notification the fixture
 * sends), false when the request is the server's own to answer.
 */
bool pdk__mcp_fixture_request(struct pdk_mcp_conn *c, const struct pdk_rpc_msg *m);

#endif
