/*
 * init-proto.h - messages between the sandbox init (pid 1) and its supervisor.
 *
 * The channel is a SOCK_SEQPACKET socketpair: one message per packet, fixed
 * size, host byte order (both ends run on the same kernel). The init is
 * started as
 *     paddock-init CTL_FD -- CMD [ARGS...]
 * with the command's environment as its own, cwd already set by the
 * supervisor's child, and stdio being the command's.
 */
#ifndef PDK_INIT_PROTO_H
#define PDK_INIT_PROTO_H

#include <stdint.h>

/*
 * The command's pid inside the sandbox: the init (pid 1) forks nothing
 * before it, and a new pid namespace hands out pids from 1 upwards.
 */
#define PDK_INIT_COMMAND_PID 2

enum pdk_init_msg_type {
	PDK_INIT_MSG_EXEC = 1, /* the command was exec'd (err == 0) or could not be (err != 0) */
	PDK_INIT_MSG_EXIT = 2, /* the command ended: status as from waitpid() */
};

enum pdk_init_stage {
	PDK_INIT_STAGE_NONE = 0,
	PDK_INIT_STAGE_FORK = 1,
	PDK_INIT_STAGE_SETSID = 2,
	PDK_INIT_STAGE_EXEC = 3,
};

struct pdk_init_msg {
	uint32_t type;  /* enum pdk_init_msg_type */
	uint32_t stage; /* enum pdk_init_stage, for a failed EXEC */
	int32_t pid;    /* the command's pid inside the sandbox */
	int32_t err;    /* errno of a failed step */
	int32_t status; /* waitpid() status, for EXIT */
	int32_t pad;
	uint64_t ts_ns;    /* CLOCK_REALTIME of the event */
	uint64_t utime_us; /* CPU time of the command and everything the init reaped */
	uint64_t stime_us;
	uint64_t maxrss_kb; /* largest resident set among them */
};

#endif
