/*
 * caps.h - drop every capability (effective, permitted, inheritable,
 * ambient and the bounding set), lock securebits, set no_new_privs.
 */
#ifndef PDK_CAPS_H
#define PDK_CAPS_H

#include "common.h"

/*
 * In the child. Drops the bounding set first (needs CAP_SETPCAP, which the
 * child has in its user namespace), then ambient, then sets SECBIT_NOROOT
 * and friends, locked (also needs CAP_SETPCAP), then capset() to zero. 0 or -errno; on failure
 * *what names the step that failed (static string).
 */
PDK_MUST_CHECK int pdk_caps_drop_all_child(const char **what);

/* prctl(PR_SET_NO_NEW_PRIVS). 0 or -errno. */
PDK_MUST_CHECK int pdk_caps_no_new_privs_child(void);

#endif
