/*
 * envd-fs.c - envd's filesystem.Filesystem service over Connect
 * (docs/e2b.md, "filesystem.Filesystem"): each method maps onto the
 * control layer's file operations, which the sandbox's supervisor performs
 * inside the sandbox's root.
 */
#include "common.h"
#include "e2b-internal.h"

#include <string.h>

static void not_yet(struct pdk__e2b_call *call)
{
	_cleanup_error_ struct pdk_error *err = NULL;

	(void)pdk_error_setx(&err, ENOSYS, "%s is not served yet", call->method->name);
	pdk__e2b_fail(call, err);
}

static const struct pdk__e2b_method methods[] = {
	{"Stat", false, not_yet}, {"ListDir", false, not_yet}, {"MakeDir", false, not_yet},
	{"Move", false, not_yet}, {"Remove", false, not_yet},  {"WatchDir", true, not_yet},
};

const struct pdk__e2b_service pdk__e2b_svc_filesystem = {
	.name = "filesystem.Filesystem",
	.methods = methods,
	.n = PDK_ARRAY_SIZE(methods),
};
