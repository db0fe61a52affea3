/*
 * caps.h - drop every capability (effective, permitted, inheritable,
 * ambient and the bounding set), lock securebits, set no_new_privs.
 */
#ifndef PDK_CAPS_H
#define PDK_CAPS_H

#include "common.h"
#include "child.h"

/*
 * In the child. Drops the bounding set first (needs CAP_SETPCAP, which the
 * child has in its user namespace), then ambient, then sets SECBIT_NOROOT
 * and friends, locked (also needs CAP_SETPCAP), then capset() to zero. 0, or -errno with
 * *ce naming the step that failed: "cannot drop capabilities (securebits)" (child.h).
 */
PDK_MUST_CHECK int pdk_caps_drop_all_child(struct pdk_child_error *ce);

/* prctl(PR_SET_NO_NEW_PRIVS). 0, or -errno and *ce. */
PDK_MUST_CHECK int pdk_caps_no_new_privs_child(struct pdk_child_error *ce);

#endif
