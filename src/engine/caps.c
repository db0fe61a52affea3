/*
 * caps.c - leave the child with no capability it could ever get back.
 *
 * The order matters: dropping the bounding set and locking securebits both
 * need CAP_SETPCAP, so they come before capset() clears the effective and
 * permitted sets. After this, exec of a setuid-root or file-capability
 * binary grants nothing (empty bounding set, SECBIT_NOROOT), and the
 * securebits are locked so nothing can undo that.
 */
#include "common.h"
#include "caps.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Capabilities fit in 64 bits: CAP_LAST_CAP is 40 on Linux 6.x. */
#define CAP_PROBE_MAX 64

/*
 * SECURITY: root inside the sandbox is an ordinary user. Every bit is
 * locked, so no later code in the sandbox can flip it; KEEP_CAPS is locked
 * off.
 */
static const unsigned long secure_bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
					 SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
					 SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
					 SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

/*
 * Drop every capability of the bounding set. The kernel's last capability
 * is found by probing (PR_CAPBSET_DROP fails with EINVAL past it) rather
 * than reading /proc, which may not be mounted yet. Dropping one that is
 * not in the set succeeds too, so no PR_CAPBSET_READ first: one prctl() per
 * capability, not two (a system call is dear on a virtual machine).
 */
static int drop_bounding_set(void)
{
	for (unsigned long cap = 0; cap < CAP_PROBE_MAX; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		return errno == EINVAL && cap > 0 ? 0 : -errno; /* EINVAL: past the last one */
	}
	return 0;
}

static int clear_ambient(void)
{
	return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ? -errno : 0;
}

static int lock_securebits(void)
{
	return prctl(PR_SET_SECUREBITS, secure_bits, 0, 0, 0) < 0 ? -errno : 0;
}

/* Effective, permitted and inheritable sets to zero. */
static int clear_sets(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};

	return syscall(SYS_capset, &hdr, data) < 0 ? -errno : 0;
}

int pdk_caps_drop_all_child(struct pdk_child_error *ce)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} steps[] = {
		{"bounding set", drop_bounding_set},
		{"ambient set", clear_ambient},
		{"securebits", lock_securebits},
		{"capset", clear_sets},
	};

	for (size_t i = 0; i < PDK_ARRAY_SIZE(steps); i++) {
		int rc = steps[i].fn();

		if (rc < 0)
			return pdk_child_error_set(ce, -rc, "cannot drop capabilities (%s)",
						   steps[i].name);
	}
	return 0;
}

int pdk_caps_no_new_privs_child(struct pdk_child_error *ce)
{
	/* SECURITY: exec can never grant privileges again (setuid, file caps, LSM transitions). */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return pdk_child_error_set(ce, errno, "cannot set no_new_privs");
	return 0;
}
