/*
 * ns.h - namespaces: id maps, loopback (a child is started in new ones
 * with pdk_proc_clone(), base/proc.h).
 */
#ifndef PDK_NS_H
#define PDK_NS_H

#include "common.h"
#include "base.h"
#include "child.h"

#include <sched.h>
#include <sys/types.h>

/* The namespaces of every sandbox (the cgroup one is entered later, see sandbox.c). */
#define PDK_NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS)

/*
 * In the child, right after clone: map `inner_uid`/`inner_gid` in the new
 * user namespace to the caller's `outer_uid`/`outer_gid`, and deny
 * setgroups(). 0, or -errno with *ce naming the file that failed
 * (child.h).
 */
PDK_MUST_CHECK int pdk_ns_write_idmaps_child(uid_t outer_uid, gid_t outer_gid, uid_t inner_uid,
					     gid_t inner_gid, struct pdk_child_error *ce);

/* In the child: bring `lo` up in the (new) network namespace. 0, or -errno and *ce. */
PDK_MUST_CHECK int pdk_ns_loopback_up_child(struct pdk_child_error *ce);

#endif
