/*
 * The first instructions of the static-pie paddock binary, before glibc's
 * own start.
 *
 * A static-pie relocates itself: __libc_start_main() writes every pointer of
 * .data.rel.ro, .got and .data (about 20,000 RELR entries over 480 KiB), and
 * each page it writes first is a separate copy-on-write fault. On a
 * paravirtualized machine each fault is a trap to the hypervisor, so the
 * hundred-odd faults cost more than the copies they make
 * (docs/internals/performance.md, "The binary's own start").
 *
 * pdk_entry (the ELF entry point, -Wl,-e,pdk_entry in meson.build) asks the
 * kernel to make those pages private and writable in one call,
 * madvise(MADV_POPULATE_WRITE, Linux 5.14), then jumps to glibc's _start with
 * the registers the kernel gave. The pages are the ones the relocation is
 * about to write anyway; nothing changes in what is mapped or protected
 * (RELRO is still made read-only by glibc after the relocation). A kernel
 * without the advice answers EINVAL and the faults happen as before.
 *
 * Nothing here may use a relocated pointer, thread-local storage (errno, the
 * stack protector's canary) or libc: none is set up yet. Hence the raw system
 * call and the hidden symbols, reached relative to the instruction pointer.
 */
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <sys/syscall.h>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)

#define PDK_MADV_POPULATE_WRITE 23

extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

void pdk__populate_data(void);

__attribute__((used, visibility("hidden"), no_stack_protector)) void pdk__populate_data(void)
{
	const ElfW(Ehdr) *eh = &__ehdr_start;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
	uintptr_t bias = (uintptr_t)eh;

	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_W) || ph[i].p_filesz == 0)
			continue;
		/* The file-backed part only: .bss is anonymous zeroes, touched when used. */
		uintptr_t start = (bias + ph[i].p_vaddr) & ~(uintptr_t)4095;
		uintptr_t end = (bias + ph[i].p_vaddr + ph[i].p_filesz + 4095) & ~(uintptr_t)4095;
		long rc;
		__asm__ volatile("syscall"
				 : "=a"(rc)
				 : "0"((long)SYS_madvise), "D"(start), "S"(end - start),
				   "d"((long)PDK_MADV_POPULATE_WRITE)
				 : "rcx", "r11", "memory");
		(void)rc;
	}
}

/* %rdx (the dynamic loader's finaliser, 0 here) and %rsp (argc, argv, envp,
 * auxv) are _start's arguments; %r12 is kept across the call. */
__asm__(".text\n"
	".globl pdk_entry\n"
	".hidden pdk_entry\n"
	".type pdk_entry, @function\n"
	"pdk_entry:\n"
	"	.cfi_startproc\n"
	"	.cfi_undefined rip\n"
	"	mov %rdx, %r12\n"
	"	call pdk__populate_data\n"
	"	mov %r12, %rdx\n"
	"	jmp _start\n"
	"	.cfi_endproc\n"
	".size pdk_entry, . - pdk_entry\n");

#endif
