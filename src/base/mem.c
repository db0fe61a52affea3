/*
 * mem.c - the start-up's pages given back (mem.h).
 */
#include "common.h"
#include "error.h"
#include "mem.h"

#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <sys/mman.h>

/*
 * Enough for any binary paddock links: its main program has four PT_LOAD
 * segments, one PT_GNU_RELRO, one PT_TLS. A binary with more is left alone.
 */
#define MAX_RANGES 16

/* [start, end) in this process's address space, page-aligned. */
struct range {
	uintptr_t start, end;
};

/* What the walk of the main program's program headers found. */
struct walk {
	uintptr_t page;
	struct range keep[MAX_RANGES]; /* never dropped: written since they were mapped */
	size_t n_keep;
	struct range drop[MAX_RANGES]; /* read-only PT_LOADs, rounded inwards */
	size_t n_drop;
	bool textrel;
	bool too_many;
};

static uintptr_t round_down(uintptr_t v, uintptr_t page)
{
	return v & ~(page - 1);
}

static uintptr_t round_up(uintptr_t v, uintptr_t page)
{
	return round_down(v + page - 1, page);
}

static void add(struct walk *w, struct range *v, size_t *n, uintptr_t start, uintptr_t end)
{
	if (start >= end)
		return;
	if (*n == MAX_RANGES) {
		w->too_many = true;
		return;
	}
	v[(*n)++] = (struct range){start, end};
}

/* Whether the dynamic section at `dyn` says the text was relocated at load. */
static bool has_textrel(const ElfW(Dyn) * dyn)
{
	for (; dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_TEXTREL)
			return true;
		if (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL))
			return true;
	}
	return false;
}

/*
 * One program header of the main program. SECURITY: a page that may have
 * been written since it was mapped (a writable segment, the RELRO the
 * relocation wrote) goes to `keep`, rounded outwards, so that no page
 * holding a written byte is ever dropped; a read-only segment goes to
 * `drop` rounded inwards, so that a page it shares with a neighbour stays.
 */
static void classify(struct walk *w, uintptr_t base, const ElfW(Phdr) * ph)
{
	uintptr_t start = base + ph->p_vaddr, end = start + ph->p_memsz;

	if (ph->p_type == PT_DYNAMIC)
		w->textrel = w->textrel || has_textrel((const ElfW(Dyn) *)start);
	else if (ph->p_type == PT_GNU_RELRO || (ph->p_type == PT_LOAD && (ph->p_flags & PF_W)))
		add(w, w->keep, &w->n_keep, round_down(start, w->page), round_up(end, w->page));
	else if (ph->p_type == PT_LOAD)
		add(w, w->drop, &w->n_drop, round_up(start, w->page), round_down(end, w->page));
}

/* dl_iterate_phdr()'s callback: the first object is the main program, the only one wanted. */
static int on_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct walk *w = data;

	(void)size;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
		classify(w, info->dlpi_addr, &info->dlpi_phdr[i]);
	return 1;
}

/*
 * Drop [start, end) less the keep ranges from index `from` on: a keep
 * range inside it splits it, the part before is dropped by the recursion
 * (which the ranges before `from` do not touch: they were cut off already).
 */
static int drop_range(const struct walk *w, uintptr_t start, uintptr_t end, size_t from,
		      size_t *released, struct pdk_error **err)
{
	for (size_t i = from; i < w->n_keep && start < end; i++) {
		const struct range *k = &w->keep[i];
		int rc;

		if (k->end <= start || k->start >= end)
			continue;
		rc = k->start > start ? drop_range(w, start, k->start, i + 1, released, err) : 0;
		if (rc < 0)
			return rc;
		start = k->end;
	}
	if (start >= end)
		return 0;
	if (madvise((void *)start, end - start, MADV_DONTNEED) < 0)
		return pdk_error_set(err, errno, "madvise(MADV_DONTNEED) of %#lx-%#lx",
				     (unsigned long)start, (unsigned long)end);
	*released += end - start;
	return 0;
}

int pdk_mem_release_startup(size_t *released, struct pdk_error **err)
{
	struct walk w = {.page = (uintptr_t)getauxval(AT_PAGESZ)};
	size_t n = 0;

	if (released != NULL)
		*released = 0;
	if (w.page == 0)
		w.page = (uintptr_t)sysconf(_SC_PAGESIZE);
	(void)dl_iterate_phdr(on_object, &w);
	if (w.too_many)
		return pdk_error_setx(err, E2BIG, "more than %d segments in the main program",
				      MAX_RANGES);
	for (size_t i = 0; i < w.n_drop && !w.textrel; i++) {
		int rc = drop_range(&w, w.drop[i].start, w.drop[i].end, 0, &n, err);

		if (rc < 0)
			return rc;
	}
#ifdef __GLIBC__
	(void)malloc_trim(0);
#endif
	if (released != NULL)
		*released = n;
	return 0;
}
