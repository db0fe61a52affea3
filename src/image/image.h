/*
 * image.h - the image store: root filesystems other than the host's, as
 * content-addressed layers unpacked once and shared read-only.
 *
 * The store is a directory in paddock's state directory:
 *
 *   STATE/images/lock             flock: every change of the store's records
 *   STATE/images/layers/HEX/      one layer, HEX its digest without "sha256:"
 *       root/                     the tree, in overlayfs' own format
 *       layer.json                digest, bytes, entries, created
 *   STATE/images/images/HEX.json  one image, HEX its digest: name, config,
 *                                 layers (bottom first), source, created
 *   STATE/images/tmp/             layers being unpacked (removed by prune)
 *
 * A layer's digest is the sha256 of its uncompressed tar stream (the OCI
 * "diff_id"), so the same layer reached through an OCI layout, a docker
 * save archive or a build step is stored once, whatever compression
 * carried it. A layer made from a directory (a rootfs directory, a build
 * step's upper layer) gets the sha256 of a canonical listing of its tree
 * (dirlayer.c: entries sorted by name, each with its type, mode, owner,
 * size, link target and content).
 *
 * An image's digest is the sha256 of its canonical record (config and layer
 * digests, record.c): two imports of the same content are one image.
 * A name ("python-3.12-datasci", "busybox:1.36") points to one image, and
 * an image may have several; an import under a name that is taken moves
 * the name, and an image left without one stays, nameless, until `prune`.
 *
 * Layers are stored as overlayfs lower layers: OCI whiteouts (".wh.NAME")
 * become 0:0 character devices, opaque markers (".wh..wh..opq") the
 * user.overlay.opaque xattr (sandboxes mount overlays in a user namespace,
 * with userxattr). Nothing writes into a stored layer after its rename
 * into layers/: sandboxes stack the layers under a writable layer of their
 * own.
 *
 * SECURITY: archives are untrusted bytes (unpack.c, fuzzed by
 * tests/fuzz/fuzz-image-unpack.c). Refused, with the entry named: an
 * absolute name, a ".." component, an entry reached through a symlink of
 * the archive, a symlink whose relative target climbs above the layer's
 * root, a hard link to anything but an earlier entry of the same layer,
 * device nodes, FIFOs and sockets, member types the reader does not know,
 * and a layer that expands past the store's quota (a decompression bomb is
 * stopped at the entry that crosses it). Set-user-ID and set-group-ID bits
 * of files are never stored: cleared and each entry named through the
 * store's log, or refused with PDK_IMAGE_STRICT (a directory keeps its
 * set-group-ID bit: group inheritance, no privilege). Nothing of an archive follows a symlink
 * on the host: every file is made with *at() calls below the layer's
 * directory fd, with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS).
 *
 * Reference counts: a layer is referenced by every image record that lists
 * it (pdk_image_layer_refs()); `rm` of an image removes the layers no other
 * image references. A running sandbox holds its image (pdk_image_hold(): a
 * shared flock on the image's record, gone when its holder ends), and an
 * image held is not removed (EBUSY).
 *
 * Layer contract: stands on base/ alone. Reads no environment; prints
 * nothing (set-id notices go to the store's log).
 */
#ifndef PDK_IMAGE_H
#define PDK_IMAGE_H

#include "common.h"
#include "base.h"

#include <stdint.h>
#include <sys/types.h>

/* The store's disk quota when the front end names none: 32 GiB. */
#define PDK_IMAGE_QUOTA_DEFAULT (32ull << 30)

/* Layers per image at most (overlayfs stacks up to 500 lower layers). */
#define PDK_IMAGE_MAX_LAYERS 128

struct pdk_image_store;
struct pdk_image;

struct pdk_image_store_opts {
	const char *state_dir;     /* paddock's state directory (base/paths.h) */
	uint64_t quota;            /* bytes the layers may take; 0: PDK_IMAGE_QUOTA_DEFAULT */
	const struct pdk_log *log; /* notices (set-id bits cleared); borrowed; may be NULL */
};

/*
 * Open (and make, mode 0700, when missing) the store under
 * opts->state_dir. The store object is not thread-safe; two processes may
 * use one store at once (its records change under the store's flock).
 * Caller frees *out with pdk_image_store_free(). 0 or negative + *err.
 */
PDK_MUST_CHECK int pdk_image_store_open(const struct pdk_image_store_opts *opts,
					struct pdk_image_store **out, struct pdk_error **err);
void pdk_image_store_free(struct pdk_image_store *st);

/* STATE/images (borrowed). */
const char *pdk_image_store_dir(const struct pdk_image_store *st);
/* Bytes the stored layers take (file data in 4 KiB blocks, plus 512 per entry). */
uint64_t pdk_image_store_used(struct pdk_image_store *st);
uint64_t pdk_image_store_quota(const struct pdk_image_store *st);

/* ---- images ---- */

/*
 * What an image says about the processes started in it, applied to a
 * sandbox's defaults (session/): environment ("K=V", the sandbox's own
 * variables win), working directory, user ("NAME", "UID", "UID:GID";
 * NULL: the caller's), entrypoint and command (a sandbox started without a
 * command runs entrypoint + cmd; with one, entrypoint + that command).
 * Every field may be NULL.
 */
struct pdk_image_config {
	char **env;
	char *workdir;
	char *user;
	char **entrypoint;
	char **cmd;
};

void pdk_image_config_release(struct pdk_image_config *c);

const char *pdk_image_name(const struct pdk_image *img); /* its first name; NULL: nameless */
/* All its names (borrowed, NULL-terminated; empty when nameless). */
char *const *pdk_image_names(const struct pdk_image *img);
const char *pdk_image_digest(const struct pdk_image *img); /* "sha256:HEX" */
/* Where it came from: "oci-layout", "oci-archive", "docker-archive", "rootfs-tar", ... */
const char *pdk_image_source(const struct pdk_image *img);
const struct pdk_image_config *pdk_image_config(const struct pdk_image *img);
uint64_t pdk_image_created_ns(const struct pdk_image *img); /* CLOCK_REALTIME, of the import */
uint64_t pdk_image_size(const struct pdk_image *img);       /* bytes of its layers */
/* Its layers' digests ("sha256:HEX"), bottom first (borrowed, NULL-terminated). */
char *const *pdk_image_layers(const struct pdk_image *img);
void pdk_image_free(struct pdk_image *img);

/*
 * The image `ref` names: a name, its digest ("sha256:HEX"), or a unique
 * prefix of at least 12 hex digits of it (with or without "sha256:").
 * -ENOENT naming `ref` when there is none, -EINVAL when a prefix is
 * ambiguous. Caller frees *out.
 */
PDK_MUST_CHECK int pdk_image_lookup(struct pdk_image_store *st, const char *ref,
				    struct pdk_image **out, struct pdk_error **err);

/* Every image, sorted by name (nameless ones last, by digest). Caller frees each and the array. */
PDK_MUST_CHECK int pdk_image_list(struct pdk_image_store *st, struct pdk_image ***out, size_t *n,
				  struct pdk_error **err);

/*
 * The host paths of the image's layers' trees, topmost first, as overlayfs'
 * lower layers for a sandbox's root (NULL-terminated; caller frees with
 * pdk_strv_free). -ENOENT when a layer is missing from the store.
 */
PDK_MUST_CHECK int pdk_image_layer_paths(struct pdk_image_store *st, const struct pdk_image *img,
					 char ***out, struct pdk_error **err);

/*
 * Hold the image for a sandbox: a shared flock on its record, on a new
 * descriptor (*fd, O_CLOEXEC, caller owns; closing it releases the hold).
 * An image held cannot be removed. 0 or negative + *err (-ENOENT when it
 * was removed meanwhile).
 */
PDK_MUST_CHECK int pdk_image_hold(struct pdk_image_store *st, const struct pdk_image *img, int *fd,
				  struct pdk_error **err);

/* ---- import ---- */

enum pdk_image_kind {
	PDK_IMAGE_AUTO = 0,       /* by what the path holds (pdk_image_detect()) */
	PDK_IMAGE_OCI_LAYOUT,     /* a directory with oci-layout and index.json */
	PDK_IMAGE_OCI_ARCHIVE,    /* such a directory as a tar (skopeo's oci-archive) */
	PDK_IMAGE_DOCKER_ARCHIVE, /* `docker save`: manifest.json, config, layer tars */
	PDK_IMAGE_ROOTFS_TAR,     /* a root filesystem as one tar (plain, gzip or zstd) */
	PDK_IMAGE_ROOTFS_DIR,     /* a root filesystem as a directory */
};

/* "oci-layout", "oci-archive", "docker-archive", "rootfs-tar", "rootfs-dir"; NULL: unknown. */
const char *pdk_image_kind_name(enum pdk_image_kind kind);
/* The kind of that name; -EINVAL when none. */
PDK_MUST_CHECK int pdk_image_kind_parse(const char *name, enum pdk_image_kind *out);

enum pdk_image_import_flags {
	PDK_IMAGE_STRICT = 1 << 0, /* refuse set-id bits instead of clearing them */
};

struct pdk_image_import_opts {
	const char *path;         /* the source: a directory or an archive (plain, gzip, zstd) */
	enum pdk_image_kind kind; /* PDK_IMAGE_AUTO: detected */
	const char *name; /* NULL: the source's own (an OCI ref name, a docker tag), else none */
	/*
	 * For a source with several images (an OCI index, a docker save of
	 * several tags): which one, by its ref name or tag. NULL: the only one.
	 */
	const char *select;
	unsigned flags;                        /* enum pdk_image_import_flags */
	const struct pdk_image_config *config; /* overrides of the source's config; may be NULL */
};

/* What an import did, for a front end's report. */
struct pdk_image_import_stats {
	unsigned layers;        /* layers of the image */
	unsigned layers_new;    /* of which unpacked now (the others were in the store) */
	uint64_t bytes_in;      /* bytes read from the source (compressed) */
	uint64_t bytes_stored;  /* bytes the new layers take */
	uint64_t entries;       /* entries unpacked */
	unsigned setid_cleared; /* entries whose set-id bits were cleared */
};

/*
 * Import an image: detect the source's kind, read its config, unpack every
 * layer not in the store yet (each into STATE/images/tmp first, renamed
 * into layers/ when whole, its digest checked against the one the source
 * declares), and record the image. On failure nothing new is left in the
 * store (the layers a failed import completed stay, unreferenced, until
 * prune). Errors name the source, the layer and the entry that failed.
 * *out (may be NULL) receives the image; *stats (may be NULL) is filled.
 */
PDK_MUST_CHECK int pdk_image_import(struct pdk_image_store *st,
				    const struct pdk_image_import_opts *opts,
				    struct pdk_image **out, struct pdk_image_import_stats *stats,
				    struct pdk_error **err);

/* The kind of source `path` holds (PDK_IMAGE_AUTO is never the answer). 0 or negative + *err. */
PDK_MUST_CHECK int pdk_image_detect(const char *path, enum pdk_image_kind *out,
				    struct pdk_error **err);

/* ---- layers, for image builders ---- */

enum pdk_image_layer_flags {
	PDK_IMAGE_LAYER_STRICT = 1 << 0, /* refuse set-id bits (PDK_IMAGE_STRICT) */
	/*
	 * The directory is an overlayfs upper layer (a build step's changes):
	 * 0:0 character devices are whiteouts and the user.overlay.opaque (or
	 * trusted.overlay.opaque) xattr marks an opaque directory; both are kept.
	 * Without it a directory is a plain tree, and a device node is refused.
	 */
	PDK_IMAGE_LAYER_UPPER = 1 << 1,
};

/*
 * Store a layer read from `fd`, a tar stream (plain, gzip or zstd: told by
 * its first bytes), as one layer. `label` names the stream in errors. *digest
 * receives "sha256:HEX" (caller frees); *bytes (may be NULL) what it takes.
 * A layer already in the store is not written twice.
 */
PDK_MUST_CHECK int pdk_image_layer_add_tar(struct pdk_image_store *st, int fd, const char *label,
					   unsigned flags, char **digest, uint64_t *bytes,
					   struct pdk_error **err);

/*
 * Store the tree under `dir` (a host directory; nothing in it is followed)
 * as one layer, by the same rules as an archive's entries. *digest as above.
 */
PDK_MUST_CHECK int pdk_image_layer_add_dir(struct pdk_image_store *st, const char *dir,
					   unsigned flags, char **digest, uint64_t *bytes,
					   struct pdk_error **err);

/* Whether layer `digest` ("sha256:HEX") is in the store. */
bool pdk_image_layer_exists(struct pdk_image_store *st, const char *digest);

/* How many image records list layer `digest` (its reference count). */
PDK_MUST_CHECK int pdk_image_layer_refs(struct pdk_image_store *st, const char *digest,
					unsigned *out, struct pdk_error **err);

/*
 * Record an image made of stored layers (`layers` bottom first, each in
 * the store) with `config` (may be NULL), under `name` (may be NULL), its
 * source given as `source` ("build", ...). *out (may be NULL) receives it.
 */
PDK_MUST_CHECK int pdk_image_commit(struct pdk_image_store *st, const char *name,
				    char *const *layers, const struct pdk_image_config *config,
				    const char *source, struct pdk_image **out,
				    struct pdk_error **err);

/* ---- removal ---- */

struct pdk_image_rm_stats {
	unsigned images;      /* image records removed */
	unsigned layers;      /* layers removed (no image referenced them any more) */
	uint64_t bytes_freed; /* what those layers took */
};

/*
 * Remove the image `ref` names (pdk_image_lookup()) and every layer of it
 * that no other image references; when `ref` is one name of several, only
 * that name goes. -EBUSY naming the image when a sandbox holds it. *stats
 * (may be NULL) is filled.
 */
PDK_MUST_CHECK int pdk_image_remove(struct pdk_image_store *st, const char *ref,
				    struct pdk_image_rm_stats *stats, struct pdk_error **err);

/*
 * Remove nameless images no sandbox holds, layers no image references, and
 * what interrupted imports left in tmp/. *stats (may be NULL) is filled.
 */
PDK_MUST_CHECK int pdk_image_prune(struct pdk_image_store *st, struct pdk_image_rm_stats *stats,
				   struct pdk_error **err);

#endif
