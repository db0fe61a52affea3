/*
 * sandbox-internal.h - state shared by sandbox.c (parent side) and
 * sandbox-child.c (the child between its spawn and execveat of the init).
 */
#ifndef PDK_SANDBOX_INTERNAL_H
#define PDK_SANDBOX_INTERNAL_H

#include "common.h"
#include "cgroup.h"
#include "child.h"
#include "egress.h"
#include "exectrace.h"
#include "landlock.h"
#include "mount.h"
#include "sandbox.h"
#include "seccomp.h"

#include <poll.h>

/* One-byte messages on the sync socket, each carrying an fd (SCM_RIGHTS). */
#define PDK__CHILD_UPPER_FD    'U' /* the disk-limited workspace's upper layer */
#define PDK__CHILD_NOTIFY_FD   'N' /* the exec-tracing seccomp listener */
#define PDK__CHILD_EGRESS_FD   'E' /* the egress proxy's listening socket (allowlist mode) */
#define PDK__CHILD_LANDLOCK_FD 'L' /* service mode: the sandbox's Landlock ruleset */
#define PDK__CHILD_DNS_FD      'D' /* the name server's UDP socket (own network namespace) */

struct pdk_sandbox {
	char id[37];
	const struct pdk_sandbox_config *cfg; /* borrowed for the sandbox's life */
	struct pdk_cgroup *cgroup;
	struct pdk_landlock *landlock;
	struct pdk_mount_plan *plan;
	struct pdk_seccomp *seccomp;
	struct pdk_seccomp *seccomp_files; /* service mode: the file helper's (openat2 allowed) */
	char **init_argv;                  /* paddock-init CTL -- CMD... */
	char *cwd;                         /* inside */
	uint64_t ns_flags;
	uid_t uid; /* the caller's: what the sandbox's user is on the host */
	gid_t gid;
	uid_t in_uid; /* what it is inside (cfg->user_set: the image's user; else uid) */
	gid_t in_gid;
	int init_fd;     /* O_PATH of paddock-init */
	int sync[2];     /* [0] parent, [1] child: SOCK_SEQPACKET, CLOEXEC */
	int cg_procs[8]; /* cgroup.procs of each hierarchy, for the child to join */
	size_t n_cg_procs;
	int cg_dir_fd;       /* cgroup2: the directory the child is made in, or -1 */
	bool cg_at_clone;    /* the child was made in its cgroup: it joins nothing */
	int cg_record_fd;    /* paddock run: RUNTIME/cgroups, its slot locked, or -1 */
	long cg_record_slot; /* that slot (sandbox-cgroup.c) */
	int ctl[2];          /* [0] parent, [1] child -> init's control channel */
	int pidfd;
	int upper_fd;              /* tmpfs upper layer of a disk-limited workspace, or -1 */
	int egress_fd;             /* allowlist mode: the listening socket from the child, or -1 */
	int landlock_fd;           /* service mode: the Landlock ruleset from the child, or -1 */
	struct pdk_egress *egress; /* allowlist mode: the running proxy */
	struct pdk_net_rule *egress_rules; /* parsed network.allow */
	size_t n_egress_rules;
	struct pdk_egress_ca *egress_ca; /* HTTPS credential injection: the sandbox's CA, or NULL */
	int dns_fd;                      /* own network namespace: 127.0.0.1:53 (dns.h), or -1 */
	struct pdk_net_denials *denials; /* what the proxy and the name server refused */
	char *run_dir;                   /* per-run scratch directory (the trust bundle), or NULL */
	int run_dir_fd;                  /* run_dir, flock()ed while this process lives; or -1 */
	char **ro_files;                 /* pairs host file, path inside, bound read-only */
	char **ws_lowers;
	pid_t pid; /* host pid of the init */
	bool reaped;
	uint64_t t_create_ns;
	uint64_t t_exec_ns;
	unsigned downgraded;
	bool exec_trace;              /* the child loads the notify filter */
	struct pdk_exectrace *tracer; /* answers it; from the child's 'N' message on */
	/* Filled while waiting. */
	int cmd_pid;
	bool cmd_started;
	bool got_exit;
	int exec_errno;
	int cmd_status;
	uint64_t cmd_exec_ts_ns;
	uint64_t rusage_cpu_us;
	uint64_t rusage_maxrss_kb;
	bool timed_out;
	/* Service mode. */
	uint64_t last_exec_id;
};

/* Slots of the supervisor's poll set before the exec tracer's. */
enum { PFD_INIT, PFD_CTL, PFD_SIG, PFD_TRACE, PFD_EGRESS, PFD_DNS, PFD_FIXED };

/*
 * How late a traced exit may be collected when the kernel keeps exit
 * statuses for pidfds: waking up for every exit cost a shell loop of
 * short processes 14 % more time; collecting them after each exec
 * notification, or after this long, costs next to nothing.
 */
#define PDK__EXIT_SWEEP_MS 50

/*
 * The egress proxy's pollfd (PFD_EGRESS, pdk_egress_fd()) is readable: an
 * event of the proxy could not be recorded. Stop the sandbox, as for any
 * event that cannot be recorded (fail closed).
 */
void pdk__sandbox_on_egress(struct pdk_sandbox *sb);

/*
 * The name server's socket (PFD_DNS) is readable: answer each waiting
 * question with NXDOMAIN and record the names asked for (dns.h).
 */
void pdk__sandbox_on_dns(struct pdk_sandbox *sb);

/* Collect the init's exit status once its pidfd is readable (or to wait for it). */
void pdk__sandbox_reap_init(struct pdk_sandbox *sb);

/*
 * sandbox-cgroup.c: a `paddock run`'s cgroup recorded in a slot of
 * RUNTIME/cgroups (locked while the run lives; made on the cgroup thread,
 * right after the cgroup), and the cgroups of runs gone without removing
 * theirs destroyed (once the child is cloned). Nothing for a daemon's
 * sandbox (cfg->service: the daemon adopts those) or without a runtime
 * directory; never fails.
 */
void pdk__sandbox_record_cgroup(struct pdk_sandbox *sb);
void pdk__sandbox_reap_cgroups(const struct pdk_sandbox *sb);
/* The slot freed (when `removed`: its cgroup is gone) and unlocked. */
void pdk__sandbox_forget_cgroup(struct pdk_sandbox *sb, bool removed);

/*
 * Answer exec notifications and report traced exits (pfd laid out as
 * above: PFD_TRACE, then n exit pidfds from PFD_FIXED on unless `lazy`).
 * With `lazy` the exits are the caller's to sweep, after what must not
 * wait for them (pdk_exectrace_sweep_exits()).
 */
void pdk__sandbox_on_trace(struct pdk_sandbox *sb, struct pollfd *pfd, size_t n, bool lazy);

/*
 * Runs in the child (pdk_proc_clone): shares the parent's memory, so it reads
 * `sb` but never writes it, and never allocates. Never returns. With exec
 * tracing a second parent thread runs meanwhile (sandbox.c start()); it
 * writes only `upper_fd` and `tracer`, which the child does not read.
 */
int pdk__sandbox_child(void *sb);

#endif
