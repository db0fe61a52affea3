/*
 * base.h - the bottom layer, what every other layer of paddock stands on.
 *
 * Contract: no knowledge of sandboxes, policies or protocols; no
 * environment variable read (paths.h takes what a front end read); nothing
 * printed (log.h hands messages to the sink a front end chose); every
 * fallible call returns a negative status and a struct pdk_error, and only
 * allocation failure ends the process (pdk_oom()).
 *
 *   error.h     the error object every fallible function fills
 *   util.h      allocation, strings and string vectors, files, time, parsing
 *   buf.h       a growable byte buffer with a hard cap, for untrusted bytes
 *   json.h      the one way JSON is built and read (jansson, with limits)
 *   db.h        an SQLite store: open, pragmas, schema, kept statements
 *   fdpass.h    one message with file descriptors (SCM_RIGHTS)
 *   log.h       where a library object's messages go
 *   mem.h       the start-up's pages of the binary given back when a process idles
 *   paths.h     the state, runtime and profile directories, decided once
 *   peer.h      whether a unix socket's peer lives in our namespaces
 *   proc.h      the one clone() of the library
 *   settings.h  what a front end read from its environment, typed
 *   sse.h       Server-Sent Events parsed from a peer's bytes
 *   tar.h       tar headers read one way, and the rules every unpacked member keeps
 *
 * Other layers include this header, never the ones above one by one.
 */
#ifndef PDK_BASE_H
#define PDK_BASE_H

#include "common.h"
#include "buf.h"
#include "db.h"
#include "error.h"
#include "fdpass.h"
#include "json.h"
#include "log.h"
#include "mem.h"
#include "paths.h"
#include "peer.h"
#include "proc.h"
#include "settings.h"
#include "sse.h"
#include "tar.h"
#include "util.h"

#endif
