/*
 * landlock.c - a Landlock domain that mirrors the sandbox's filesystem view.
 *
 * Landlock is a second wall behind the mount namespace: if a mount is ever
 * wrong, or a file descriptor from outside leaks in, the process still can
 * only reach the paths the policy names. It also denies TCP bind/connect
 * (ABI 4) and scopes abstract unix sockets and signals to the sandbox
 * (ABI 6). docs/internals/landlock.md explains the choices.
 *
 * The syscalls are called directly: glibc has no wrappers and Debian 12's
 * <linux/landlock.h> (Linux 6.1) stops at ABI 2, so the newer constants and
 * the ABI 6 layout of the ruleset attribute are defined here.
 */
#include "common.h"
#include "base.h"
#include "landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP    (1ULL << 0) /* ABI 4 */
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_RULE_NET_PORT
#define LANDLOCK_RULE_NET_PORT 2 /* ABI 4 */
struct landlock_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
};
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL               (1ULL << 1)
#endif

/*
 * struct landlock_ruleset_attr as of ABI 6. The kernel copies the size we
 * pass and requires the fields it does not know to be zero, so this one
 * layout works from ABI 1 on.
 */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

/* ABI 1: everything up to MAKE_SYM. */
#define FS_V1 ((LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1)
#define FS_RO \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_DEV                                                          \
	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	 LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define FS_EXEC (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE)
/* The only rights a rule on a non-directory may carry (else EINVAL). */
#define FS_FILE                                                       \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

struct ll_rule {
	char *path;      /* owned; NULL for an fd rule */
	int fd;          /* borrowed; -1 for a path rule */
	uint64_t access; /* already limited to the ABI's rights */
};

struct pdk_landlock {
	int abi;          /* 0 = disabled (best effort) */
	bool allow_tcp;   /* network.mode host: TCP is not Landlock's to deny */
	int connect_port; /* network.mode allowlist: the one port TCP may connect to; -1 none */
	struct ll_rule *rules;
	size_t n, cap;
};

/* The kernel's ABI version, or -errno (ENOSYS: not built, EOPNOTSUPP: not enabled at boot). */
static int probe_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? -errno : (int)v;
}

int pdk_landlock_abi(void)
{
	int v = probe_abi();

	return v > 0 ? v : 0;
}

/* Every filesystem right the ABI knows. */
static uint64_t fs_rights(int abi)
{
	uint64_t r = FS_V1;

	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return r;
}

static struct ll_ruleset_attr ruleset_attr(int abi, bool allow_tcp)
{
	struct ll_ruleset_attr a = {.handled_access_fs = fs_rights(abi)};

	/* SECURITY: handled with no rule = no TCP bind or connect at all. */
	if (abi >= 4 && !allow_tcp)
		a.handled_access_net =
			LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
	/* SECURITY: no abstract unix socket and no signal reaches out of the sandbox. */
	if (abi >= 6)
		a.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	return a;
}

static uint64_t access_rights(int abi, enum pdk_landlock_access a)
{
	switch (a) {
	case PDK_LANDLOCK_RO:
		return FS_RO;
	case PDK_LANDLOCK_RW:
		return fs_rights(abi);
	case PDK_LANDLOCK_DEV:
		return FS_DEV & fs_rights(abi);
	default:
		return 0; /* an unknown kind grants nothing */
	}
}

static int prepare_error(int status, struct pdk_error **err)
{
	const char *why =
		status == ENOSYS
			? "the kernel was built without CONFIG_SECURITY_LANDLOCK"
			: "it is not enabled: add 'landlock' to the kernel's boot 'lsm=' list";

	return pdk_error_setx(
		err, status,
		"Landlock is unavailable (%s); to run without it, mark it best-effort "
		"in the profile with 'best_effort: [landlock]'",
		why);
}

struct pdk_landlock *pdk_landlock_prepare(bool required, struct pdk_error **err)
{
	int v = probe_abi();
	struct pdk_landlock *ll;

	/* SECURITY: fail closed unless the policy said Landlock is optional. */
	if (v <= 0 && required) {
		(void)prepare_error(v < 0 ? -v : EOPNOTSUPP, err);
		return NULL;
	}
	ll = pdk_xcalloc(1, sizeof(*ll));
	ll->abi = v > 0 ? v : 0;
	ll->connect_port = -1;
	return ll;
}

static void add_rule(struct pdk_landlock *ll, char *path, int fd, uint64_t access)
{
	if (ll->n == ll->cap) {
		ll->cap = ll->cap ? ll->cap * 2 : 16;
		ll->rules = pdk_xrealloc(ll->rules, ll->cap * sizeof(*ll->rules));
	}
	ll->rules[ll->n++] = (struct ll_rule){.path = path, .fd = fd, .access = access};
}

void pdk_landlock_add_path(struct pdk_landlock *ll, const char *path, enum pdk_landlock_access a)
{
	add_rule(ll, pdk_xstrdup(path), -1, access_rights(ll->abi, a));
}

void pdk_landlock_add_exec_fd(struct pdk_landlock *ll, int fd)
{
	add_rule(ll, NULL, fd, FS_EXEC);
}

/* Record "CALL 'PATH': strerror" (or "CALL fd N: ...") in *ce and return -e. */
static int rule_error(struct pdk_child_error *ce, int e, const char *call, const struct ll_rule *r)
{
	if (r->path != NULL)
		return pdk_child_error_set(ce, e, "%s '%s'", call, r->path);
	return pdk_child_error_set(ce, e, "%s fd %d", call, r->fd);
}

/* Add one rule to the ruleset. A path missing from the view is skipped. */
static int apply_rule(int ruleset, const struct ll_rule *r, struct pdk_child_error *ce)
{
	_cleanup_close_ int own = -1;
	struct landlock_path_beneath_attr pb = {.allowed_access = r->access, .parent_fd = r->fd};
	struct stat st;

	if (r->path != NULL) {
		own = open(r->path, O_PATH | O_CLOEXEC);
		if (own < 0 && errno == ENOENT)
			return 0;
		if (own < 0)
			return rule_error(ce, errno, "open", r);
		pb.parent_fd = own;
	}
	if (fstat(pb.parent_fd, &st) < 0)
		return rule_error(ce, errno, "fstat", r);
	if (!S_ISDIR(st.st_mode))
		pb.allowed_access &= FS_FILE;
	if (pb.allowed_access == 0)
		return 0;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return rule_error(ce, errno, "landlock_add_rule", r);
	return 0;
}

/* The one TCP port connect() may reach (allowlist mode); nothing without ABI 4 or a port. */
static int apply_port_rule(const struct pdk_landlock *ll, int ruleset)
{
	struct landlock_net_port_attr np = {.allowed_access = LANDLOCK_ACCESS_NET_CONNECT_TCP};

	if (ll->abi < 4 || ll->allow_tcp || ll->connect_port < 0)
		return 0;
	np.port = (uint64_t)ll->connect_port;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_NET_PORT, &np, 0) < 0)
		return -1;
	return 0;
}

/*
 * In the child, after pivot_root: only stack memory and the prepared
 * array are used, so this is safe after a fork of a threaded process.
 */
int pdk_landlock_apply_keep_child(const struct pdk_landlock *ll, int *keep,
				  struct pdk_child_error *ce)
{
	_cleanup_close_ int ruleset = -1;
	struct ll_ruleset_attr attr;
	int rc;

	*keep = -1;
	if (ll == NULL)
		return pdk_child_error_set(ce, EINVAL, "no Landlock ruleset");
	if (ll->abi == 0)
		return 0; /* best effort, and the parent has already reported the downgrade */
	attr = ruleset_attr(ll->abi, ll->allow_tcp);
	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0)
		return pdk_child_error_set(ce, errno, "landlock_create_ruleset");
	for (size_t i = 0; i < ll->n; i++) {
		rc = apply_rule(ruleset, &ll->rules[i], ce);
		if (rc < 0)
			return rc;
	}
	if (apply_port_rule(ll, ruleset) < 0)
		return pdk_child_error_set(ce, errno, "landlock_add_rule (TCP port)");
	rc = pdk_landlock_restrict_fd_child(ruleset, ce);
	if (rc < 0)
		return rc;
	*keep = steal_fd(&ruleset);
	return 0;
}

int pdk_landlock_apply_child(const struct pdk_landlock *ll, struct pdk_child_error *ce)
{
	int keep = -1;
	int rc = pdk_landlock_apply_keep_child(ll, &keep, ce);

	if (keep >= 0)
		(void)close(keep);
	return rc;
}

int pdk_landlock_restrict_fd_child(int ruleset, struct pdk_child_error *ce)
{
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		return pdk_child_error_set(ce, errno, "landlock_restrict_self");
	return 0;
}

int pdk_landlock_get_abi(const struct pdk_landlock *ll)
{
	return ll != NULL ? ll->abi : 0;
}

void pdk_landlock_allow_tcp(struct pdk_landlock *ll)
{
	ll->allow_tcp = true;
}

void pdk_landlock_allow_tcp_connect_port(struct pdk_landlock *ll, uint16_t port)
{
	ll->connect_port = port;
}

void pdk_landlock_free(struct pdk_landlock *ll)
{
	if (ll == NULL)
		return;
	for (size_t i = 0; i < ll->n; i++)
		free(ll->rules[i].path);
	free(ll->rules);
	free(ll);
}
