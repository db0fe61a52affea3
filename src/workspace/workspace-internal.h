/*
 * workspace-internal.h - what the workspace layer's files share and no
 * other layer sees.
 */
#ifndef PDK_WORKSPACE_INTERNAL_H
#define PDK_WORKSPACE_INTERNAL_H

#include "common.h"
#include "workspace.h"

/* The symlink chains a link may follow before the kernel gives up (MAXSYMLINKS). */
#define PDK__WS_LINK_HOPS 40
/* A change set's record of the host's base (ws-base.c), made with the set. */
#define PDK__WS_BASE_FILE "base"
/* STATE/ws/.spare: an empty set's directory kept for the next one (pdk_ws_recycle()). */
#define PDK__WS_SPARE ".spare"

/*
 * The workspace directory as it will be after a commit of `diff`: an entry
 * the diff names is what the diff says (absent when deleted), any other is
 * what the directory holds now. Read without following anything: every
 * lookup opens its parent beneath `root_fd` with RESOLVE_NO_SYMLINKS.
 * `root_fd`, `root_path` and `diff` are borrowed and must outlive the view.
 */
struct pdk__ws_view;

struct pdk__ws_view *pdk__ws_view_new(int root_fd, const char *root_path,
				      const struct pdk_ws_diff *diff);
void pdk__ws_view_free(struct pdk__ws_view *v);

/*
 * Where does a symlink at `path` (relative to the root) with `target` lead
 * in that view? Every component is walked as the kernel would: ".." climbs
 * from where the walk really is, every symlink on the way (of the diff or
 * already in the directory, chains included) is followed. NULL when the
 * walk stays beneath the root; else a reason for the refusal that names
 * where the link leads (and through which link), caller frees. A walk
 * that meets a missing name or a file in the middle is judged by its text
 * from there on: a ".." after such a name counts as outside, since what
 * the name will be is unknown. More than PDK__WS_LINK_HOPS links: refused.
 */
char *pdk__ws_link_outside(struct pdk__ws_view *v, const char *path, const char *target);

/*
 * The change set's base instant (ws-base.c): reset makes the base now (a
 * new change set, a commit, a rollback to 0); get reads it, or for a
 * change set older than the base file, a second before `created_ns`.
 */
PDK_MUST_CHECK int pdk__ws_base_reset(const char *set_dir, struct pdk_error **err);
PDK_MUST_CHECK int pdk__ws_base_get(const char *set_dir, uint64_t created_ns, struct timespec *base,
				    struct pdk_error **err);

/*
 * The record of the host's entries at the end of each run (ws-base.c):
 * record adds, for every path of `diff` it does not hold yet, whether the
 * host had it; read gives the record (caller owns; NULL when none).
 */
PDK_MUST_CHECK int pdk__ws_record(const char *set_dir, const struct pdk_ws_diff *diff,
				  struct pdk_error **err);
PDK_MUST_CHECK int pdk__ws_record_read(const char *set_dir, json_t **out, struct pdk_error **err);

#endif
