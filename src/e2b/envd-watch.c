/*
 * envd-watch.c - filesystem.Filesystem/WatchDir (docs/e2b.md): being built.
 */
#include "common.h"
#include "e2b-internal.h"

void pdk__e2b_fs_watch(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	(void)pdk_error_setx(&err, ENOSYS, "WatchDir is not served yet");
	pdk__e2b_fail(call, err);
}
