/*
 * supervisor.h - one sandbox's supervisor in service mode (`paddock
 * supervise`): builds the sandbox from the daemon's spec through the
 * session sequence (session.h, as `paddock run` does), then serves the
 * control protocol (docs/internals/daemon.md) on RUNDIR/sb/<id>/ctl.sock
 * until the sandbox is destroyed or a budget ends it. Single-threaded
 * (the egress proxy, in allowlist mode, has its own thread). The protocol
 * itself is svc-proto.h, included here: this is the layer's public header.
 */
#ifndef PDK_SUPERVISOR_H
#define PDK_SUPERVISOR_H

#include "common.h"
#include "base.h"
#include "svc-proto.h"

/*
 * Read the spec JSON from `spec_fd` (closed; its limits are numbers:
 * bytes, milliseconds, counts, CPUs), build sandbox `id`, report
 * readiness as one JSON line on `ready_fd` (closed; -1: none), serve until
 * the end. Returns 0 after a clean end (destroy, SIGTERM, a budget), or
 * negative + *err when setup failed (then also reported on ready_fd, with
 * the step that failed) or the loop broke. `settings` (borrowed: what the
 * front end read from its environment) gives the state and runtime
 * directories a spec does not name, the profiles, the init and the rest;
 * `log` (borrowed) gets what the supervisor has to say that is no answer.
 */
PDK_MUST_CHECK int pdk_supervisor_run(const char *id, int spec_fd, int ready_fd,
				      const struct pdk_settings *settings,
				      const struct pdk_log *log, struct pdk_error **err);

#endif
