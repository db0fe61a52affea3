#include "common.h"
#include "cli.h"
#include "engine.h"

#include <stdio.h>
#include <string.h>

static const char help[] =
	"usage: paddock version\n"
	"\n"
	"Print paddock's version, the libseccomp version its syscall filter was\n"
	"compiled with, and the Landlock ABI this kernel offers (0: none).\n"
	"\n"
	"options:\n"
	"  -h, --help   show this help\n";

int pdk_cmd_version(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(help, stdout);
		return 0;
	}
	printf("paddock %s\n", PDK_VERSION);
	printf("seccomp filter compiled with libseccomp %s; kernel landlock ABI %d\n",
	       PDK_LIBSECCOMP_VERSION, pdk_landlock_abi());
	return 0;
}
