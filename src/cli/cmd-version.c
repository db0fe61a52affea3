#include "common.h"
#include "cli.h"
#include "landlock.h"

#include <seccomp.h>
#include <stdio.h>

int pdk_cmd_version(int argc, char **argv)
{
	const struct scmp_version *v = seccomp_version();

	(void)argc;
	(void)argv;
	printf("paddock %s\n", PDK_VERSION);
	printf("libseccomp %u.%u.%u, landlock ABI %d\n", v->major, v->minor, v->micro,
	       pdk_landlock_abi());
	return 0;
}
