/*
 * session.h - the session layer: what turns a profile and a caller's
 * overrides into a running sandbox (runspec.h today; the one session
 * sequence that `paddock run`, `paddock supervise` and the MCP server share
 * is its next piece). Stands on engine/, audit/ and what is below them.
 * Other layers include this header.
 */
#ifndef PDK_SESSION_H
#define PDK_SESSION_H

#include "common.h"
#include "runspec.h"

#endif
