/*
 * mem.h - give back the memory a long-lived process's start-up left mapped.
 *
 * A supervisor that waits for hours on its loop keeps, besides its heap,
 * every page of paddock's own binary that its start-up touched (the
 * profile parsed, the mount plan, the seccomp programs built, the sinks
 * opened) and the pages the kernel's fault-around mapped with them: about
 * 2.4 MB of text and read-only data, counted in its PSS although the loop
 * uses a few dozen of them. This module drops those mappings once the
 * set-up is over; the pages stay in the page cache, and the loop faults
 * back the few it runs (a minor fault each, no disk read).
 */
#ifndef PDK_MEM_H
#define PDK_MEM_H

#include "common.h"

struct pdk_error;

/*
 * Drop this process's mappings of the pages of the main program's pristine
 * read-only PT_LOAD segments (text, read-only data, the ELF headers and
 * relocation tables), then give the heap's free pages back (malloc_trim).
 * On success, *released (if not NULL) is the number of bytes of address
 * space advised away (mapped or not), and 0 is returned.
 *
 * Never loses data: only segments without PF_W are touched, and from them
 * every page of a writable segment and of PT_GNU_RELRO (written by the
 * start-up's relocation and made read-only afterwards: dropped, they would
 * read back unrelocated) is kept, as is a partial page at either end of a
 * segment. A binary with text relocations (DT_TEXTREL, DF_TEXTREL) has
 * written its text, so nothing of it is dropped (0, *released 0). Shared
 * libraries (a dynamically linked build) are left alone: their pages are
 * shared with other processes, and their PSS is divided already. (What a
 * debugger wrote into the text through ptrace, a software breakpoint, is
 * dropped with it: the text reads back as the file has it.)
 *
 * A dropped page a caller uses again costs one minor fault, so call it once
 * the set-up is done and the process goes idle, not on a hot path; it is
 * safe to call again (a later call drops what was faulted back since). A
 * failure of madvise() stops the walk: -errno and *err naming the range;
 * what was dropped before stays dropped, which loses nothing. Thread-safe
 * with respect to other threads running (they fault their pages back).
 */
PDK_MUST_CHECK int pdk_mem_release_startup(size_t *released, struct pdk_error **err);

#endif
