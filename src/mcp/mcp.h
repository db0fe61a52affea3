/*
 * mcp.h - the MCP server (docs/mcp.md, docs/internals/mcp.md): a front door
 * of the control layer that speaks the Model Context Protocol.
 *
 * It translates: JSON-RPC messages in (jsonrpc.h), control calls
 * (control.h) with typed requests, results and errors out. It decides
 * nothing about sandboxes.
 *
 * Stands on control/ and http/. Every call runs on the loop's thread.
 */
#ifndef PDK_MCP_H
#define PDK_MCP_H

#include "common.h"
#include "base.h"
#include "control.h"
#include "jsonrpc.h"

#endif
