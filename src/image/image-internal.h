/*
 * image-internal.h - what the image store's files share (not a contract of
 * the layer: image.h is).
 */
#ifndef PDK_IMAGE_INTERNAL_H
#define PDK_IMAGE_INTERNAL_H

#include "common.h"
#include "base.h"
#include "image.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

struct pdk_image_store {
	char *dir; /* STATE/images */
	int dirfd; /* O_PATH of dir */
	uint64_t quota;
	const struct pdk_log *log; /* borrowed */
};

struct pdk_image {
	char **names; /* never NULL; empty: nameless */
	char *digest;
	char *source;
	uint64_t created_ns;
	uint64_t size;
	char **layers; /* bottom first */
	struct pdk_image_config config;
};

/* ---- input.c: a byte stream, decompressed, digested ---- */

enum pdk__img_codec {
	PDK__IMG_RAW = 0,
	PDK__IMG_GZIP,
	PDK__IMG_ZSTD,
};

#define PDK__IMG_INBUF (128u << 10)

/*
 * Bytes [off, off + len) of `fd` (len UINT64_MAX: to its end) read with
 * pread(), decompressed by what their first bytes say (gzip, zstd, else
 * as they are). The sha256 of the bytes read (`sha_in`) and of the bytes
 * handed out (`sha_out`) are kept.
 */
struct pdk__img_in {
	int fd; /* borrowed */
	uint64_t pos, end;
	enum pdk__img_codec codec;
	z_stream z;
	bool z_live;
	ZSTD_DStream *zs;
	unsigned char *buf; /* compressed bytes read, not consumed yet: [rpos, rlen) */
	size_t rpos, rlen;
	bool eof_in;     /* no more raw bytes */
	bool frame_done; /* the codec ended a frame or member at the last read */
	uint64_t bytes_in, bytes_out;
	EVP_MD_CTX *sha_in, *sha_out;
	const char *label; /* borrowed: names the stream in errors */
};

PDK_MUST_CHECK int pdk__img_in_open(struct pdk__img_in *in, int fd, uint64_t off, uint64_t len,
				    const char *label, struct pdk_error **err);
/* Up to n bytes into buf: the count (0 at the end), or negative + *err. */
PDK_MUST_CHECK ssize_t pdk__img_in_read(struct pdk__img_in *in, void *buf, size_t n,
					struct pdk_error **err);
/* Exactly n bytes (-EIO naming the stream when it ends first). */
PDK_MUST_CHECK int pdk__img_in_full(struct pdk__img_in *in, void *buf, size_t n,
				    struct pdk_error **err);
/* "sha256:HEX" of the bytes read so far (in) or handed out (out); new string. */
char *pdk__img_in_digest(struct pdk__img_in *in, bool out);
void pdk__img_in_close(struct pdk__img_in *in);

/* "sha256:HEX" of what ctx digested (ctx stays usable). New string. */
char *pdk__img_sha256_final(EVP_MD_CTX *ctx);
/* "sha256:HEX" of `len` bytes. New string. */
char *pdk__img_sha256(const void *data, size_t len);
/* Whether `d` is "sha256:" and 64 lower-case hex digits. */
bool pdk__img_digest_valid(const char *d);

/* ---- unpack.c: a tar stream into a layer directory ---- */

struct pdk__img_unpack {
	int root;        /* the layer's root directory (O_PATH|O_DIRECTORY), borrowed */
	unsigned flags;  /* enum pdk_image_layer_flags */
	uint64_t budget; /* bytes the layer may take (the quota left) */
	uint64_t bytes;  /* bytes it takes so far */
	uint64_t entries;
	unsigned setid_cleared;
	bool chown; /* keep owners (we are root) */
	const struct pdk_log *log;
	const char *label; /* the layer, in errors */
	/* Directories whose mode and time are set last (a 0555 one is filled first). */
	struct pdk__img_dirmode *dirs;
	size_t ndirs, capdirs;
};

/* Read the tar stream `in` into u->root by the rules of image.h. 0 or negative + *err. */
PDK_MUST_CHECK int pdk__img_unpack(struct pdk__img_unpack *u, struct pdk__img_in *in,
				   struct pdk_error **err);
/* Set the modes and times of the directories made (last step of a layer). 0 or -errno. */
PDK_MUST_CHECK int pdk__img_unpack_finish(struct pdk__img_unpack *u, struct pdk_error **err);
void pdk__img_unpack_release(struct pdk__img_unpack *u);

/*
 * A path of an archive made relative and checked: no leading '/', no ".."
 * component, "." and empty components dropped. New string in *out ("" for
 * the root), or -EPERM + *err naming `what` and the entry.
 */
PDK_MUST_CHECK int pdk__img_clean_path(const char *name, const char *label, char **out,
				       struct pdk_error **err);
/*
 * Whether the symlink at `path` (clean) with target `target` stays inside
 * the layer's root when its relative target is followed from its directory.
 * Absolute targets stay (they are resolved in the sandbox's root).
 */
bool pdk__img_link_stays(const char *path, const char *target);

/* Bytes an entry of `size` bytes of data takes (4 KiB blocks, 512 for the entry). */
uint64_t pdk__img_cost(uint64_t size);

/*
 * A directory's mode as stored: set-group-ID kept (it only makes new files
 * inherit the directory's group: /var/mail, /var/local in Debian), set-user-ID
 * dropped (it means nothing on a Linux directory).
 */
static inline mode_t pdk__img_dir_mode(mode_t mode)
{
	return mode & ~(mode_t)S_ISUID;
}

/* The store's notice about cleared set-id bits, or the refusal (STRICT). */
PDK_MUST_CHECK int pdk__img_setid(struct pdk__img_unpack *u, const char *path, mode_t *mode,
				  struct pdk_error **err);

/* A directory fd of the parent of `path` below `root` (made when missing), its last name. */
PDK_MUST_CHECK int pdk__img_parent(struct pdk__img_unpack *u, const char *path, const char **name,
				   struct pdk_error **err);
/* Remove what is at name under dirfd (anything but a directory we keep). 0 or -errno. */
PDK_MUST_CHECK int pdk__img_clear(int dirfd, const char *name, bool keep_dir);
/* Record a directory's mode and time for pdk__img_unpack_finish(). */
void pdk__img_dir_later(struct pdk__img_unpack *u, const char *path, mode_t mode, uint64_t mtime);

/* ---- store.c ---- */

/* Hold off prune while an import runs (flock "imports", shared): *fd, closed to release. */
PDK_MUST_CHECK int pdk__img_import_hold(struct pdk_image_store *st, int *fd,
					struct pdk_error **err);
/* Take the store's lock (flock, exclusive): *fd, closed to release it. */
PDK_MUST_CHECK int pdk__img_lock(struct pdk_image_store *st, int *fd, struct pdk_error **err);
/*
 * A new directory tmp/XXXXXX with root/ in it: its path in *dir (caller
 * frees), an O_PATH fd of root/ in *root. 0 or negative + *err.
 */
PDK_MUST_CHECK int pdk__img_tmp_layer(struct pdk_image_store *st, char **dir, int *root,
				      struct pdk_error **err);
/*
 * Move the unpacked layer `dir` (pdk__img_tmp_layer()) into layers/ as
 * `digest`, with its layer.json; when the layer is there already, `dir` is
 * removed. 0 (moved), 1 (it was there), or negative + *err.
 */
PDK_MUST_CHECK int pdk__img_layer_commit(struct pdk_image_store *st, const char *dir,
					 const char *digest, uint64_t bytes, uint64_t entries,
					 struct pdk_error **err);
/* The hex part of a "sha256:HEX" digest (borrowed from it). */
const char *pdk__img_hex(const char *digest);
/* The layer's recorded bytes, 0 when unknown. */
uint64_t pdk__img_layer_bytes(struct pdk_image_store *st, const char *digest);

/* ---- record.c: image records ---- */

/* The image's first name, else its digest (for messages). */
const char *pdk__img_display(const struct pdk_image *img);
/* Whether `name` is one of the image's names. */
bool pdk__img_has_name(const struct pdk_image *img, const char *name);
/* Drop `name` from the image's names (nothing when it has no such name). */
void pdk__img_drop_name(struct pdk_image *img, const char *name);

/* The image's digest from its config and layers (sets img->digest). */
void pdk__img_compute_digest(struct pdk_image *img);
/* Write img's record (under the store lock, which the caller holds). */
PDK_MUST_CHECK int pdk__img_record_write(struct pdk_image_store *st, const struct pdk_image *img,
					 struct pdk_error **err);
/* Read the record images/HEX.json. */
PDK_MUST_CHECK int pdk__img_record_read(struct pdk_image_store *st, const char *hex,
					struct pdk_image **out, struct pdk_error **err);
/* Every record (unsorted); caller frees. */
PDK_MUST_CHECK int pdk__img_records(struct pdk_image_store *st, struct pdk_image ***out, size_t *n,
				    struct pdk_error **err);
void pdk__img_records_free(struct pdk_image **v, size_t n);
/* The config from an OCI/docker image config's "config" object (NULL: empty). */
void pdk__img_config_from_json(const json_t *cfg, struct pdk_image_config *out);
/* c with every field `over` sets replaced by its value. */
void pdk__img_config_merge(struct pdk_image_config *c, const struct pdk_image_config *over);
void pdk__img_config_copy(struct pdk_image_config *dst, const struct pdk_image_config *src);

/* ---- layer.c ---- */

/*
 * Unpack bytes [off, off + len) of fd (a tar stream, maybe compressed) as a
 * layer; `expect_blob` / `expect_diff` (may be NULL) are the digests the
 * image declares for the bytes read and the tar stream. *digest: the
 * layer's ("sha256:HEX", caller frees). *stats (may be NULL) accumulates.
 */
PDK_MUST_CHECK int pdk__img_layer_from(struct pdk_image_store *st, int fd, uint64_t off,
				       uint64_t len, const char *label, unsigned flags,
				       const char *expect_blob, const char *expect_diff,
				       char **digest, struct pdk_image_import_stats *stats,
				       struct pdk_error **err);
/* The tree under `src` as a layer (dirlayer.c's rules). */
PDK_MUST_CHECK int pdk__img_layer_dir(struct pdk_image_store *st, const char *src, unsigned flags,
				      char **digest, struct pdk_image_import_stats *stats,
				      struct pdk_error **err);
/* pdk_image_commit(). */
PDK_MUST_CHECK int pdk__img_commit(struct pdk_image_store *st, const char *name,
				   char *const *layers, const struct pdk_image_config *config,
				   const char *source, struct pdk_image **out,
				   struct pdk_error **err);

/* ---- dirlayer.c ---- */

PDK_MUST_CHECK int pdk__img_copy_dir(struct pdk__img_unpack *u, int src, EVP_MD_CTX *sha,
				     struct pdk_error **err);

#endif
