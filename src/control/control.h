/*
 * control.h - the control layer: the daemon's decisions without any
 * transport. Today the store (store.h) and the sandbox tokens (token.h);
 * the sandboxes, pools, exec, files and spool ingest move here from
 * daemon/. No HTTP and no libevent-http type appears in this layer.
 * Other layers include this header.
 */
#ifndef PDK_CONTROL_H
#define PDK_CONTROL_H

#include "common.h"
#include "store.h"
#include "token.h"

#endif
