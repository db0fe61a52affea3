#include "common.h"
#include "cli.h"
#include "engine.h"

#include <stdio.h>

int pdk_cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("paddock %s\n", PDK_VERSION);
	printf("seccomp filter compiled with libseccomp %s; kernel landlock ABI %d\n",
	       PDK_LIBSECCOMP_VERSION, pdk_landlock_abi());
	return 0;
}
