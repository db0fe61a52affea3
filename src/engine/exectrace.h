/*
 * exectrace.h - exec tracing with seccomp user notification, observe mode.
 *
 * Every process of a sandbox runs under a small second seccomp filter that
 * turns execve and execveat into a notification for the supervisor
 * (seccomp.h, pdk_seccomp_apply_notify_child()). The supervisor answers each
 * one with SECCOMP_USER_NOTIF_FLAG_CONTINUE: the exec goes ahead exactly as
 * the process asked; nothing is decided here. Before answering it reads the
 * path and argv from the process's memory (bounded), and after answering it
 * reads the pids and cwd from /proc and emits a `process.exec` event. Each
 * traced process is then watched through a pidfd (bounded number) and gets
 * a `process.exit` event with its wait status, and CPU time when the zombie
 * could still be read. docs/internals/exectrace.md says what is exact and
 * what is best effort.
 *
 * Single-threaded: every call comes from the supervisor loop.
 */
#ifndef PDK_EXECTRACE_H
#define PDK_EXECTRACE_H

#include "common.h"
#include "base.h"

#include <poll.h>
#include <sys/types.h>

/* Processes watched for their exit at once; more execs are recorded, their exits not. */
#define PDK_EXECTRACE_MAX_TRACKED 256
/* What is copied from a process's memory per exec. */
#define PDK_EXECTRACE_MAX_ARGS       256
#define PDK_EXECTRACE_MAX_ARGV_BYTES (64 * 1024)
#define PDK_EXECTRACE_MAX_PATH       4096

/*
 * Receives each event; takes ownership of `attrs`. `ts_ns` is
 * CLOCK_REALTIME nanoseconds.
 */
typedef void (*pdk_exectrace_emit_cb)(void *data, const char *kind, uint64_t ts_ns, json_t *attrs);

struct pdk_exectrace;

/*
 * A tracer answering on `listener_fd` (takes ownership of it); `emit` and
 * `data` receive the events (borrowed). Notifications are answered but
 * not recorded until pdk_exectrace_start_recording(): the first one is
 * the sandbox's own execveat of its init. May be called on another thread
 * than the later calls (not concurrently). Asks the kernel for synchronous
 * wake-ups on the listener (Linux 6.6; older kernels go on without). Returns
 * NULL + *err when the kernel's notification structures cannot be sized.
 */
struct pdk_exectrace *pdk_exectrace_new(int listener_fd, pdk_exectrace_emit_cb emit, void *data,
					struct pdk_error **err);

/*
 * From now on, every exec is recorded and its process watched. `init_pid`
 * is the host pid of the sandbox's pid 1 (its processes' parent pid 1).
 */
void pdk_exectrace_start_recording(struct pdk_exectrace *t, pid_t init_pid);

/* The listener fd to poll for POLLIN (borrowed). */
int pdk_exectrace_fd(const struct pdk_exectrace *t);

/*
 * Answer one pending notification (call when the listener is readable).
 * A process that died meanwhile is not an error. Returns 0, or negative +
 * *err when the listener itself failed (then tracing cannot go on).
 */
PDK_MUST_CHECK int pdk_exectrace_handle(struct pdk_exectrace *t, struct pdk_error **err);

/* Fill `pfd` (room for `max`) with the pidfds of watched processes; returns how many. */
size_t pdk_exectrace_pollfds(const struct pdk_exectrace *t, struct pollfd *pfd, size_t max);

/* After poll(): emit `process.exit` for every watched process whose pidfd is readable. */
void pdk_exectrace_on_exits(struct pdk_exectrace *t, const struct pollfd *pfd, size_t n);

/*
 * Never watch the exit of the process whose pid inside the sandbox is
 * `pid`: the supervisor reports that one itself (the command's). Its execs
 * are still recorded.
 */
void pdk_exectrace_skip_exit(struct pdk_exectrace *t, pid_t pid);

/*
 * Whether exits may be collected late (pdk_exectrace_sweep_exits() now and
 * then) without losing their status: the kernel keeps a reaped process's
 * exit status for its pidfd (Linux 6.15). Otherwise the pidfds must be
 * polled, so that exits are read from the zombies before they are reaped.
 */
bool pdk_exectrace_lazy_exits(const struct pdk_exectrace *t);

/* Processes watched for their exit now. */
size_t pdk_exectrace_watching(const struct pdk_exectrace *t);

/* Emit `process.exit` for every watched process that has ended (no wait). */
void pdk_exectrace_sweep_exits(struct pdk_exectrace *t);

/*
 * The sandbox has ended: emit `process.exit` for every process still
 * watched (all of them are dead now) and stop watching.
 */
void pdk_exectrace_finish(struct pdk_exectrace *t);

/* Execs recorded so far (tests, stats). */
uint64_t pdk_exectrace_count(const struct pdk_exectrace *t);

/* NULL-safe. Closes the listener: later execs in the sandbox fail with ENOSYS. */
void pdk_exectrace_free(struct pdk_exectrace *t);

/* ---- internals, exported for the unit tests and fuzz targets ---- */

/* The argv and path of one exec as read from the process's memory. */
struct pdk__exec_args {
	char *path; /* NUL-terminated; NULL when it could not be read */
	bool path_truncated;
	char **argv;         /* NULL-terminated; NULL when it could not be read */
	size_t argc;         /* entries in argv */
	bool argv_truncated; /* more arguments or bytes than the caps */
	int read_errno;      /* first failure to read (EFAULT: a bad pointer), or 0 */
};
void pdk__exec_args_release(struct pdk__exec_args *a);

/*
 * Read the path at `path_addr` and the argv array at `argv_addr` from the
 * memory of `pid` with process_vm_readv(), within the caps above.
 */
void pdk__exectrace_read_args(pid_t pid, uint64_t path_addr, uint64_t argv_addr,
			      struct pdk__exec_args *out);

/* What /proc/PID/status tells about a process (-1 where a line is missing). */
struct pdk__proc_status {
	pid_t tgid;
	pid_t ppid;
	pid_t nspid; /* the innermost pid namespace's number (last NSpid field) */
};
PDK_MUST_CHECK int pdk__exectrace_parse_status(const char *text, struct pdk__proc_status *st);

/* What /proc/PID/stat tells about an exited process. */
struct pdk__proc_stat {
	char state;
	uint64_t utime_ticks;
	uint64_t stime_ticks;
	int exit_code; /* wait status; field 52 */
};
PDK_MUST_CHECK int pdk__exectrace_parse_stat(const char *text, struct pdk__proc_stat *st);

/*
 * `n` bytes as a JSON string. Bytes that are not valid UTF-8 become
 * U+FFFD and *lossy is set (the caller then records the hex form too).
 */
json_t *pdk__exectrace_json_bytes(const char *s, size_t n, bool *lossy);

/* Set obj[key] to the bytes of `s`, and obj[key_hex] to their hex when they are not UTF-8. */
void pdk__exectrace_set_bytes(json_t *obj, const char *key, const char *s);

/* The exec event's argv attributes: argv, and argv_hex when an element is not UTF-8. */
void pdk__exectrace_set_argv(json_t *obj, char *const *argv);

#endif
