/*
 * init.h - the init layer's public header: messages between the sandbox
 * init (pid 1) and its supervisor.
 *
 * The channel is a SOCK_SEQPACKET socketpair: one message per packet, fixed
 * size, host byte order (both ends run on the same kernel). The init is
 * started as
 *     paddock-init CTL_FD -- CMD [ARGS...]
 * with the command's environment as its own, cwd already set by the
 * supervisor's child, and stdio being the command's (run mode), or as
 *     paddock-init CTL_FD --service
 * (service mode): no command of its own; it starts one process per
 * PDK_INIT_REQ_SPAWN request read from CTL_FD, reports each one's EXEC and
 * EXIT tagged with the request's id, and ends when CTL_FD reaches end of
 * file (the supervisor is gone: leaving pid 1 kills the whole sandbox).
 *
 * Layer contract: the init is a binary of its own, linked statically
 * (against musl where there is musl-gcc) from init.c and base/fdpass.c
 * only; it includes common.h, fdpass.h and this header, nothing else. The
 * engine includes this header to speak to it.
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

/* Requests, supervisor -> init (service mode only). */
enum pdk_init_req_type {
	PDK_INIT_REQ_SPAWN = 3,  /* start a process: header + strings; fds in SCM_RIGHTS */
	PDK_INIT_REQ_SIGNAL = 4, /* send `sig` to the process group of spawned process `id` */
};

enum pdk_init_spawn_flags {
	/* One fd (a pty's slave): the process's controlling terminal and stdio. */
	PDK_INIT_SPAWN_PTY = 1 << 0,
};

/*
 * A request. For SPAWN the packet goes on with `len` bytes of strings,
 * each NUL-terminated: the working directory, `argc` arguments, then
 * `envc` environment entries (the process's whole environment). The fds
 * come with the packet: stdin, stdout, stderr (3), or the pty slave (1).
 */
struct pdk_init_req {
	uint32_t type;  /* enum pdk_init_req_type */
	uint32_t flags; /* enum pdk_init_spawn_flags */
	uint64_t id;    /* the supervisor's exec id; EXEC and EXIT carry it back */
	int32_t sig;    /* SIGNAL */
	uint32_t argc;
	uint32_t envc;
	uint32_t len; /* bytes of strings after the header */
};

/* The largest SPAWN packet (header + strings); it fits a default socket buffer. */
#define PDK_INIT_MAX_REQ (128 * 1024)

enum pdk_init_stage {
	PDK_INIT_STAGE_NONE = 0,
	PDK_INIT_STAGE_FORK = 1,
	PDK_INIT_STAGE_SETSID = 2,
	PDK_INIT_STAGE_EXEC = 3,
	PDK_INIT_STAGE_CWD = 4, /* the working directory of a SPAWN: the caller's to fix */
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
	uint64_t id;        /* service mode: the SPAWN request's id; run mode: 0 */
};

#endif
