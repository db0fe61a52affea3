/*
 * seccomp.c - load the sandbox's syscall filter.
 *
 * The rules live in seccomp-rules.c and are compiled to BPF by libseccomp at
 * build time (seccomp-gen -> seccomp-bpf.h): compiling them at every start
 * cost 0.75 ms, and it kept libseccomp's code out of the start-up path.
 * prepare() picks the program for the flags; the child then only issues one
 * seccomp(2) call: no allocation after clone. A unit test proves the
 * built-in programs equal what the rules compile to now.
 */
#include "common.h"
#include "base.h"
#include "seccomp-internal.h"
#include "seccomp.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp-bpf.h" /* generated: pdk__seccomp_builtin[] */

struct pdk_seccomp *pdk_seccomp_prepare(unsigned flags, struct pdk_error **err)
{
	const unsigned known =
		PDK_SECCOMP_ALLOW_PTRACE | PDK_SECCOMP_ALLOW_NET_HOST | PDK_SECCOMP_FILE_HELPER;
	const unsigned built = PDK_SECCOMP_ALLOW_PTRACE | PDK_SECCOMP_FILE_HELPER;
	struct pdk_seccomp *s;

	if (flags & ~known) {
		(void)pdk_error_setx(err, EINVAL, "unknown seccomp flags 0x%x", flags & ~known);
		return NULL;
	}
	for (size_t i = 0; i < PDK_ARRAY_SIZE(pdk__seccomp_builtin); i++) {
		const struct pdk__seccomp_builtin *b = &pdk__seccomp_builtin[i];

		if (b->flags != (flags & built))
			continue;
		s = pdk_xcalloc(1, sizeof(*s));
		s->prog.len = (unsigned short)b->len;
		s->prog.filter = pdk_xmalloc(b->len * sizeof(struct sock_filter));
		memcpy(s->prog.filter, b->insns, b->len * sizeof(struct sock_filter));
		return s;
	}
	(void)pdk_error_setx(err, ENOENT, "no built-in seccomp program for flags 0x%x", flags);
	return NULL;
}

int pdk_seccomp_apply_child(const struct pdk_seccomp *s, struct pdk_child_error *ce)
{
	struct sock_fprog prog;

	if (s == NULL || s->prog.filter == NULL) /* SECURITY: fail closed, never run unfiltered */
		return pdk_child_error_set(ce, EINVAL, "cannot load seccomp filter");
	prog = s->prog;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return pdk_child_error_set(ce, errno, "cannot load seccomp filter");
	return 0;
}

bool pdk_seccomp_notify_supported(void)
{
	uint32_t action = SECCOMP_RET_USER_NOTIF;

	return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

int pdk_seccomp_apply_notify_child(struct pdk_child_error *ce)
{
	struct sock_fprog prog = {
		.len = (unsigned short)PDK_ARRAY_SIZE(pdk__seccomp_notify_bpf),
		.filter = (struct sock_filter *)pdk__seccomp_notify_bpf,
	};
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			  &prog);

	if (fd < 0)
		return pdk_child_error_set(ce, errno,
					   "cannot load the exec-tracing seccomp filter");
	return (int)fd;
}

const struct sock_fprog *pdk__seccomp_notify_program(void)
{
	static const struct sock_fprog prog = {
		.len = (unsigned short)PDK_ARRAY_SIZE(pdk__seccomp_notify_bpf),
		.filter = (struct sock_filter *)pdk__seccomp_notify_bpf,
	};

	return &prog;
}

size_t pdk_seccomp_insn_count(const struct pdk_seccomp *s)
{
	return s != NULL ? s->prog.len : 0;
}

const struct sock_fprog *pdk__seccomp_program(const struct pdk_seccomp *s)
{
	return &s->prog;
}

void pdk_seccomp_free(struct pdk_seccomp *s)
{
	if (s == NULL)
		return;
	free(s->prog.filter);
	free(s);
}
